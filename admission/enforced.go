package admission

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
)

// SelectedNamespaces returns an [Options.Enforced] that enforces the
// namespaces whose labels selector matches, read through namespaces
// (typically an informer's cache). Give it the selector of the webhook
// configuration's namespaceSelector: kube-apiserver then sends only
// those namespaces' requests, and the Evaluator no longer has to trust
// that it does. A namespace the getter does not know yet (created moments
// ago) is refused with a 429 and a Retry-After of one second, which
// kube-apiserver passes on and client-go retries, rather than guessed.
func SelectedNamespaces(selector labels.Selector, namespaces NamespaceGetter) func(ctx context.Context, namespace string) (bool, error) {
	return func(_ context.Context, namespace string) (bool, error) {
		if selector == nil || namespaces == nil {
			return false, errors.New("admission: SelectedNamespaces needs a selector and a namespace getter")
		}
		ns, err := namespaces(namespace)
		if err != nil {
			return false, apierrors.NewTooManyRequests(fmt.Sprintf("admission: whether namespace %q is enforced cannot be told yet: %v", namespace, err), 1)
		}
		if ns == nil {
			return false, fmt.Errorf("admission: the namespace getter returned no namespace %q and no error", namespace)
		}
		return selector.Matches(labels.Set(ns.Labels)), nil
	}
}
