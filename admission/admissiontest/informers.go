package admissiontest

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/cache"
)

// QuotaInformer returns an informer of the ResourceQuotas of every
// namespace of c's API, with the namespace index, and its lister for
// admission.NewAccessor. Run the informer; pass its HasSynced too. A
// Client without an API is a programmer's error, and panics.
func (c Client) QuotaInformer() (*cache.SharedIndexInformer, admission.QuotaLister) {
	if c.API == nil {
		panic("admissiontest: QuotaInformer: no API")
	}
	inf := cache.NewSharedIndexInformer(c.API.ListerWatcher(resourceQuotas, ""), &corev1.ResourceQuota{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
	lister := cache.NewLister[*corev1.ResourceQuota](inf.GetIndexer(), resourceQuotas.GroupResource())
	return inf, func(namespace string) ([]*corev1.ResourceQuota, error) {
		return lister.ByNamespace(namespace).List(labels.Everything())
	}
}
