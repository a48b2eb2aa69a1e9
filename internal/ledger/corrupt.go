package ledger

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Corrupt sets the total of name that the quota namespace/quotaName keeps
// in l for the evaluator of gr to q, if l has it: a wrong number, for the
// tests that check that a full resync finds drift and corrects it. It is
// a function of the package, not a method, so that the Ledger the
// controller uses offers nothing of the kind.
func Corrupt(l *Ledger, namespace, quotaName string, gr schema.GroupResource, name corev1.ResourceName, q resource.Quantity) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.spaces[namespace]; s != nil {
		if a := s.accounts[quotaName]; a != nil && a.totals[gr] != nil {
			a.totals[gr][name] = q
		}
	}
}
