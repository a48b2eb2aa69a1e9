package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// quotaVerbs are the verbs a discovered resource must support to be
// counted, as kube-controller-manager's GetQuotableResources requires
// (its comment names three, its code checks four).
var quotaVerbs = []string{"create", "list", "watch", "delete"}

// NamespacedResources returns the namespaced resources the server serves,
// in their preferred versions, that support create, list, watch and
// delete, sorted. When some API groups fail discovery, it returns the
// resources of the others with the error, as kube-controller-manager's
// GetQuotableResources does; the controller keeps what the failed groups
// served before.
func (c *Client) NamespacedResources(ctx context.Context) ([]schema.GroupVersionResource, error) {
	if c.clients.Discovery == nil {
		return nil, errors.New("kube: discovery: the discovery client is nil")
	}
	lists, discoveryErr := discovery.ServerPreferredNamespacedResourcesWithContext(ctx, discovery.ToDiscoveryInterfaceWithContext(c.clients.Discovery))
	if discoveryErr != nil && len(lists) == 0 {
		return nil, fmt.Errorf("kube: discovery: %w", discoveryErr)
	}
	found, parseErr := discovery.GroupVersionResources(discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: quotaVerbs}, lists))
	out := make([]schema.GroupVersionResource, 0, len(found))
	for gvr := range found {
		out = append(out, gvr)
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionResource) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Resource, b.Resource))
	})
	var err error
	if discoveryErr != nil {
		err = fmt.Errorf("kube: discovery: %w", discoveryErr)
	}
	if parseErr != nil {
		err = errors.Join(err, fmt.Errorf("kube: discovery: parsing resources: %w", parseErr))
	}
	return out, err
}
