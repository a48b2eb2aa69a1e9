package evaluator

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// Resource is one row of the table of resources quota knows: what to list
// and watch, what objects of it look like, how its usage is evaluated and
// when an update may change that usage. [Resources] returns the table; the
// evaluators of [NewEvaluators], [DefaultUpdateFilter], quotakit's
// controller and its adapters all read it, so that a resource is added in
// one place.
type Resource struct {
	// Resource is the resource's GroupVersionResource, in the version its
	// evaluator reads.
	Resource schema.GroupVersionResource
	// Object is a typed, empty object of the resource, such as
	// &corev1.Pod{}: the type its evaluator reads.
	Object runtime.Object
	// Namespaced reports whether objects of the resource live in
	// namespaces. A cluster-scoped resource is listed only because an
	// evaluator reads it (device classes, for resource claims).
	Namespaced bool
	// MetadataOnly reports whether the evaluator reads nothing but
	// metadata (object-count evaluators: an object's existence, its
	// namespace). A cache of such a resource may hold
	// *metav1.PartialObjectMetadata instead of whole objects.
	MetadataOnly bool
	// NewEvaluator returns the resource's evaluator, configured with the
	// Options given to [Resources], listing this and any other resource it
	// reads through listers (nil listers, or a nil
	// function for a resource, build an evaluator for admission only).
	// It is nil for a resource that is listed only because another
	// resource's evaluator reads it.
	NewEvaluator func(listers generic.ListerForResourceFunc) (quota.Evaluator, error)
	// UsageMayChange reports whether an update from oldObj to newObj may
	// change the usage the object charges; deletions always may and are
	// not asked. Nil means never: usage depends only on the object
	// existing. Objects of the wrong type, and nil objects, give false.
	UsageMayChange func(oldObj, newObj runtime.Object) bool
	// Trim returns a copy of obj holding only what the evaluators and the
	// update filter read of it (and its identity), for a lean cache; it
	// never modifies obj, and trimming a trimmed object gives an equal
	// one. Nil means the evaluator reads the whole object.
	Trim func(obj runtime.Object) runtime.Object
	// UsageChangesAt returns the moment after which obj's usage changes
	// although no event says so, and false when there is none: a pod
	// deleted with a grace period stops charging compute resources once
	// the period ends, but nothing is written then if no kubelet finishes
	// the deletion. A controller recalculates the object's quotas just
	// after that moment. Nil means never.
	UsageChangesAt func(obj runtime.Object) (time.Time, bool)
}

// Resources returns the table of the core resources, as Kubernetes 1.37
// evaluates them with opts: pods, services and persistentvolumeclaims with
// their own evaluators, then configmaps, replicationcontrollers,
// resourcequotas and secrets counted under count/<resource> and their
// legacy names, then, unless opts disables Dynamic Resource Allocation,
// resource.k8s.io/v1 resourceclaims with their own evaluator and the
// cluster-scoped deviceclasses that evaluator reads (see
// [NewResourceClaimEvaluator]). The rows' functions use opts. Each call
// returns a new slice.
func Resources(opts Options) []Resource {
	v1 := corev1.SchemeGroupVersion
	// One trimmer per table, so that the pods of a controller's cache
	// share their resource lists.
	pods := &PodTrimmer{}
	table := []Resource{
		{
			Resource:   v1.WithResource("pods"),
			Object:     &corev1.Pod{},
			Namespaced: true,
			NewEvaluator: func(listers generic.ListerForResourceFunc) (quota.Evaluator, error) {
				list, err := lister(listers, v1.WithResource("pods"))
				return NewPodEvaluator(list, opts.Pod), err
			},
			UsageMayChange: func(oldObj, newObj runtime.Object) bool {
				oldPod, ok1 := oldObj.(*corev1.Pod)
				newPod, ok2 := newObj.(*corev1.Pod)
				if !ok1 || !ok2 || oldPod == nil || newPod == nil {
					return false
				}
				return podUsageMayChange(oldPod, newPod, opts.Pod)
			},
			Trim: func(obj runtime.Object) runtime.Object {
				if pod, ok := obj.(*corev1.Pod); ok && pod != nil {
					return pods.Trim(pod)
				}
				return obj
			},
			UsageChangesAt: func(obj runtime.Object) (time.Time, bool) {
				pod, ok := obj.(*corev1.Pod)
				if !ok || pod == nil {
					return time.Time{}, false
				}
				return graceEnd(pod)
			},
		},
		{
			Resource:   v1.WithResource("services"),
			Object:     &corev1.Service{},
			Namespaced: true,
			NewEvaluator: func(listers generic.ListerForResourceFunc) (quota.Evaluator, error) {
				list, err := lister(listers, v1.WithResource("services"))
				return NewServiceEvaluator(list), err
			},
			UsageMayChange: func(oldObj, newObj runtime.Object) bool {
				oldSvc, err1 := asService(oldObj)
				newSvc, err2 := asService(newObj)
				return err1 == nil && err2 == nil && serviceUsageMayChange(oldSvc, newSvc)
			},
		},
		{
			Resource:   v1.WithResource("persistentvolumeclaims"),
			Object:     &corev1.PersistentVolumeClaim{},
			Namespaced: true,
			NewEvaluator: func(listers generic.ListerForResourceFunc) (quota.Evaluator, error) {
				list, err := lister(listers, v1.WithResource("persistentvolumeclaims"))
				return NewPersistentVolumeClaimEvaluator(list), err
			},
			UsageMayChange: func(oldObj, newObj runtime.Object) bool {
				oldPVC, err1 := asPVC(oldObj)
				newPVC, err2 := asPVC(newObj)
				return err1 == nil && err2 == nil && pvcUsageMayChange(oldPVC, newPVC)
			},
		},
		counted(v1.WithResource("configmaps"), &corev1.ConfigMap{}, corev1.ResourceConfigMaps),
		counted(v1.WithResource("replicationcontrollers"), &corev1.ReplicationController{}, corev1.ResourceReplicationControllers),
		counted(v1.WithResource("resourcequotas"), &corev1.ResourceQuota{}, corev1.ResourceQuotas),
		counted(v1.WithResource("secrets"), &corev1.Secret{}, corev1.ResourceSecrets),
	}
	return append(table, draResources(opts)...)
}

// counted returns the row of a core resource whose only quota is its
// object count, charged under count/<resource> and under alias, the name
// quota used for it before count/ names existed.
func counted(gvr schema.GroupVersionResource, obj runtime.Object, alias corev1.ResourceName) Resource {
	return Resource{
		Resource:     gvr,
		Object:       obj,
		Namespaced:   true,
		MetadataOnly: true,
		NewEvaluator: func(listers generic.ListerForResourceFunc) (quota.Evaluator, error) {
			list, err := lister(listers, gvr)
			return generic.NewObjectCountEvaluator(gvr.GroupResource(), list, alias), err
		},
	}
}

// lister returns the function listers gives for gvr; nil listers give nil.
func lister(listers generic.ListerForResourceFunc, gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
	if listers == nil {
		return nil, nil
	}
	return listers(gvr)
}
