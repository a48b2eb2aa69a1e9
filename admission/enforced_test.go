package admission_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/quotakit/quotakit/admission"
)

// TestEnforcedNamespaces: a request in a namespace Enforced reports false
// for is allowed without any read or write of its quotas (the store fails
// every read, so a read would deny it); an enforced one is checked; a
// namespace the cache does not know is a retryable refusal; an Enforced
// that panics refuses the request rather than the process.
func TestEnforcedNamespaces(t *testing.T) {
	nss := namespaces(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "open"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "enforced", Labels: map[string]string{"quotakit.io/enforce": "true"}}},
	)
	selector := labels.SelectorFromSet(labels.Set{"quotakit.io/enforce": "true"})
	tests := []struct {
		name     string
		enforced func(context.Context, string) (bool, error)
		ns       string
		check    func(error) bool
	}{
		{"not enforced: allowed, nothing read", admission.SelectedNamespaces(selector, nss), "open", func(err error) bool { return err == nil }},
		{"enforced: the quotas are read", admission.SelectedNamespaces(selector, nss), "enforced", func(err error) bool { return err != nil && errors.Is(err, errRead) }},
		{"unknown namespace: retry", admission.SelectedNamespaces(selector, nss), "new", apierrors.IsTooManyRequests},
		{"no getter: an error", admission.SelectedNamespaces(selector, nil), "open", func(err error) bool { return err != nil }},
		{"a panic is an error", func(context.Context, string) (bool, error) { panic("boom") }, "open", func(err error) bool { return err != nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(rq("open", "pods", rl("pods", "0"), rl("pods", "0")), rq("enforced", "pods", rl("pods", "0"), rl("pods", "0")))
			s.getErr = errRead
			e := newEvaluator(t, s, admission.Options{Enforced: tt.enforced})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx) }()
			defer func() { cancel(); <-done }()
			if err := e.Evaluate(t.Context(), podCreate(tt.ns, "p", "")); !tt.check(err) {
				t.Errorf("Evaluate in %s = %v", tt.ns, err)
			}
			if st := e.Stats(); st.Writes != 0 {
				t.Errorf("%d status writes, want none", st.Writes)
			}
		})
	}
}

var errRead = errors.New("the quotas were read")
