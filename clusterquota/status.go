package clusterquota

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/quota"
)

// The bounds of status.namespaces. A ClusterQuota is one object in etcd,
// whose default request limit is 1.5 MiB, and OpenShift's
// ClusterResourceQuota, which lists every selected namespace, approaches
// it with a large selection. These bounds keep the list, whatever the
// selection, within half a megabyte, and leave the rest of the limit to
// the metadata (managedFields, annotations), the spec and the total.
const (
	// MaxNamespaceStatuses is the most entries status.namespaces holds.
	MaxNamespaceStatuses = 1000

	// MaxNamespaceStatusBytes is the most bytes status.namespaces takes in
	// JSON, brackets and commas included. It binds before
	// MaxNamespaceStatuses only when entries are large (a quota with many
	// resources, each used in every namespace).
	MaxNamespaceStatusBytes = 512 << 10
)

// SetNamespaceStatuses replaces s.Namespaces with the usage of the
// selected namespaces, given in used (namespace name → usage), under the
// bounded-status rule, and sets s.NamespacesOmitted:
//
//  1. only namespaces with a non-zero quantity are listed, and of each
//     only its non-zero quantities;
//  2. entries are sorted by namespace name;
//  3. the list stops at the first entry that would make it longer than
//     [MaxNamespaceStatuses] entries or [MaxNamespaceStatusBytes] bytes
//     of JSON;
//  4. s.NamespacesOmitted is the number of namespaces of rule 1 that rule
//     3 left out.
//
// The rule is deterministic: the same usage gives the same status, so
// that a controller writes only when something changed, and two replicas
// agree. Name order, rather than, say, the largest users first, keeps an
// entry in place while its usage changes. s.Total is not touched: it is
// the caller's sum over every selected namespace, omitted ones included.
//
// The entries share no memory with used. An empty namespace name is an
// error, and so is a nil s; on error s is unchanged.
func (s *ClusterQuotaStatus) SetNamespaceStatuses(used map[string]corev1.ResourceList) error {
	if s == nil {
		return errors.New("clusterquota: SetNamespaceStatuses: nil status")
	}
	names := make([]string, 0, len(used))
	for ns, rl := range used {
		if ns == "" {
			return errors.New("clusterquota: SetNamespaceStatuses: empty namespace name")
		}
		if !quota.IsZero(rl) {
			names = append(names, ns)
		}
	}
	slices.Sort(names)
	entries, err := boundEntries(len(names), func(i int) ResourceQuotaStatusByNamespace {
		return ResourceQuotaStatusByNamespace{
			Namespace: names[i],
			Status:    corev1.ResourceQuotaStatus{Used: copyNonZero(used[names[i]])},
		}
	})
	if err != nil {
		return fmt.Errorf("clusterquota: SetNamespaceStatuses: %w", err)
	}
	s.Namespaces = entries
	s.NamespacesOmitted = omitted(len(names), len(entries))
	return nil
}

// BoundStatus applies the bounded-status rule of
// [ClusterQuotaStatus.SetNamespaceStatuses] to s.Namespaces as they
// stand: it drops the entries and quantities whose usage is zero, sorts
// the rest by namespace name, cuts the list at the bounds and adds what
// it cut to s.NamespacesOmitted. Each entry's status.hard is kept.
//
// It is for a status built by other means, such as one read from an
// OpenShift ClusterResourceQuota, which lists every namespace. A
// controller that knows every namespace's usage calls
// SetNamespaceStatuses instead, which recounts NamespacesOmitted from
// scratch. A bounded status stays as it is: BoundStatus is idempotent.
//
// Two entries for the same namespace, or an entry without a name, are an
// error, as is a nil s; on error s is unchanged.
func BoundStatus(s *ClusterQuotaStatus) error {
	if s == nil {
		return errors.New("clusterquota: BoundStatus: nil status")
	}
	kept := make([]*ResourceQuotaStatusByNamespace, 0, len(s.Namespaces))
	for i := range s.Namespaces {
		e := &s.Namespaces[i]
		if e.Namespace == "" {
			return fmt.Errorf("clusterquota: BoundStatus: status.namespaces[%d]: empty namespace name", i)
		}
		if !quota.IsZero(e.Status.Used) {
			kept = append(kept, e)
		}
	}
	slices.SortFunc(kept, func(a, b *ResourceQuotaStatusByNamespace) int {
		return strings.Compare(a.Namespace, b.Namespace)
	})
	for i := 1; i < len(kept); i++ {
		if kept[i].Namespace == kept[i-1].Namespace {
			return fmt.Errorf("clusterquota: BoundStatus: namespace %q is listed twice", kept[i].Namespace)
		}
	}
	entries, err := boundEntries(len(kept), func(i int) ResourceQuotaStatusByNamespace {
		e := ResourceQuotaStatusByNamespace{Namespace: kept[i].Namespace}
		kept[i].Status.DeepCopyInto(&e.Status)
		e.Status.Used = copyNonZero(e.Status.Used)
		return e
	})
	if err != nil {
		return fmt.Errorf("clusterquota: BoundStatus: %w", err)
	}
	s.Namespaces = entries
	s.NamespacesOmitted = saturatingAdd(s.NamespacesOmitted, omitted(len(kept), len(entries)))
	return nil
}

// boundEntries returns the longest prefix of the n entries that entry
// builds that stays within the bounds. Entries past the bounds are never
// built, so a selection of any size costs at most MaxNamespaceStatuses
// copies and encodings. It returns nil when n is 0, so that an empty
// list is written as null and pruned, as OpenShift's empty list is.
func boundEntries(n int, entry func(i int) ResourceQuotaStatusByNamespace) ([]ResourceQuotaStatusByNamespace, error) {
	if n == 0 {
		return nil, nil
	}
	out := make([]ResourceQuotaStatusByNamespace, 0, min(n, MaxNamespaceStatuses))
	size := len("[]")
	for i := 0; i < n && len(out) < MaxNamespaceStatuses; i++ {
		e := entry(i)
		b, err := json.Marshal(&e)
		if err != nil {
			return nil, fmt.Errorf("namespace %q: %w", e.Namespace, err)
		}
		add := len(b)
		if len(out) > 0 {
			add++ // the comma before it
		}
		if size+add > MaxNamespaceStatusBytes {
			break
		}
		size += add
		out = append(out, e)
	}
	return out, nil
}

// copyNonZero returns a copy of rl without its zero quantities, or nil
// when nothing is left. Quantities are deep-copied, so the result shares
// no memory with rl.
func copyNonZero(rl corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for name, q := range rl {
		if q.IsZero() {
			continue
		}
		if out == nil {
			out = make(corev1.ResourceList, len(rl))
		}
		out[name] = q.DeepCopy()
	}
	return out
}

// omitted is how many of total entries are not among the listed, as an
// int32, saturating.
func omitted(total, listed int) int32 {
	return int32(min(total-listed, math.MaxInt32))
}

// saturatingAdd returns a+b, or math.MaxInt32 past it; both are
// non-negative in a valid status, and a negative a counts as 0.
func saturatingAdd(a, b int32) int32 {
	a = max(a, 0)
	if a > math.MaxInt32-b {
		return math.MaxInt32
	}
	return a + b
}
