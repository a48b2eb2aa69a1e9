package chartgen_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

var endpointSlices = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}

// cluster answers Helm's lookups from a fake dynamic client, as a cluster
// does during `helm install`; it knows only EndpointSlices.
type cluster struct{ client dynamic.Interface }

func (c cluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	return c.client.Resource(endpointSlices), true, nil
}

// slice returns an EndpointSlice of service in ns with one endpoint,
// ready or not.
func slice(ns, name, service string, ready bool) runtime.Object {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata":    map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"kubernetes.io/service-name": service}},
		"addressType": "IPv4",
		"endpoints":   []any{map[string]any{"addresses": []any{"10.0.0.1"}, "conditions": map[string]any{"ready": ready}}},
	}}
}

// TestWebhookConfigurationWaitsForReadyEndpoint pins the second half of
// the install-order guarantee: installing or upgrading the chart
// quotakit-webhook-configuration against a cluster fails, before anything
// is applied, unless the Service quotakit-webhook in the release's
// namespace has a ready endpoint, whether or not --wait was given.
func TestWebhookConfigurationWaitsForReadyEndpoint(t *testing.T) {
	tests := []struct {
		name   string
		objs   []runtime.Object
		values map[string]any
		ok     bool
	}{
		{name: "no endpoints"},
		{name: "not ready", objs: []runtime.Object{slice(namespace, "quotakit-webhook-a", "quotakit-webhook", false)}},
		{name: "another service ready", objs: []runtime.Object{slice(namespace, "other-a", "other", true)}},
		{name: "ready in another namespace", objs: []runtime.Object{slice("elsewhere", "quotakit-webhook-a", "quotakit-webhook", true)}},
		{name: "ready", objs: []runtime.Object{
			slice(namespace, "quotakit-webhook-a", "quotakit-webhook", false),
			slice(namespace, "quotakit-webhook-b", "quotakit-webhook", true),
		}, ok: true},
		{name: "check turned off", values: map[string]any{"requireReadyWebhook": false}, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{endpointSlices: "EndpointSliceList"}, tt.objs...)
			values := map[string]any{"certificate": "cert-manager"}
			for k, v := range tt.values {
				values[k] = v
			}
			objs, err := helmTemplate(configurationChart, values, namespace, cluster{client})
			if !tt.ok {
				if err == nil || !strings.Contains(err.Error(), "no ready endpoint") {
					t.Fatalf("helm install = %d objects, %v; want an error: no ready endpoint", len(objs), err)
				}
				return
			}
			if err != nil || len(objs) != 1 || objs[0]["kind"] != "ValidatingWebhookConfiguration" {
				t.Fatalf("helm install = %v, %v; want the ValidatingWebhookConfiguration", objs, err)
			}
		})
	}
}
