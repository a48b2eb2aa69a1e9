package admission

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// quotaSet holds the quotas a batch checks: those of every namespace its
// requests come from, each quota once. A namespace's own quotas are kept
// per namespace; a quota shared between namespaces (a ClusterQuota, named
// with [ClusterQuotaPrefix]) is kept once for all of them, so that the
// requests of every namespace it selects are checked against one running
// total and charged in one write.
type quotaSet struct {
	// list holds the quotas; keys[i] names list[i]: namespace/name, or
	// the name of a shared quota.
	list []corev1.ResourceQuota
	keys []string
	// members holds, by namespace, the indices in list of its quotas, in
	// the order the accessor gave them.
	members map[string][]int
}

func newQuotaSet() *quotaSet { return &quotaSet{members: map[string][]int{}} }

// quotaKeyIn returns the key of q as a quota of namespace ns.
func quotaKeyIn(ns string, q *corev1.ResourceQuota) string {
	if strings.HasPrefix(q.Name, ClusterQuotaPrefix) {
		return q.Name
	}
	return ns + "/" + q.Name
}

// addNamespace reads the quotas of ns into s, unless s has them; a quota
// s already holds (a shared one) keeps the version s holds.
func (e *Evaluator) addNamespace(ctx context.Context, s *quotaSet, ns string) error {
	if _, ok := s.members[ns]; ok {
		return nil
	}
	quotas, err := e.getQuotas(ctx, ns)
	if err != nil {
		return err
	}
	idx := make([]int, 0, len(quotas))
	for i := range quotas {
		k := quotaKeyIn(ns, &quotas[i])
		j := slices.Index(s.keys, k)
		if j < 0 {
			s.list, s.keys = append(s.list, quotas[i]), append(s.keys, k)
			j = len(s.list) - 1
		}
		idx = append(idx, j)
	}
	s.members[ns] = idx
	return nil
}

// namespaces returns the namespaces s holds the quotas of, sorted.
func (s *quotaSet) namespaces() []string {
	out := make([]string, 0, len(s.members))
	for ns := range s.members {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

// view returns the quotas of namespace ns, taken from running (a list
// parallel to s.list): the quotas one request is checked against.
func (s *quotaSet) view(running []corev1.ResourceQuota, ns string) []corev1.ResourceQuota {
	idx := s.members[ns]
	out := make([]corev1.ResourceQuota, len(idx))
	for k, i := range idx {
		out[k] = running[i]
	}
	return out
}

// only returns the quotas of s whose keys are in keys, with every
// namespace's membership in them.
func (s *quotaSet) only(keys []string) *quotaSet {
	out := newQuotaSet()
	at := map[int]int{}
	for i, k := range s.keys {
		if slices.Contains(keys, k) {
			at[i] = len(out.list)
			out.list, out.keys = append(out.list, s.list[i]), append(out.keys, k)
		}
	}
	for ns, idx := range s.members {
		var kept []int
		for _, i := range idx {
			if j, ok := at[i]; ok {
				kept = append(kept, j)
			}
		}
		out.members[ns] = kept
	}
	return out
}
