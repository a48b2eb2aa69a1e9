package kubeadapter

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache"
)

// Client is a [quotakit.Client] over client-go. It holds no state of its
// own beyond the two clients, and is safe for concurrent use when they are
// (client-go's are).
type Client struct {
	clientset kubernetes.Interface
	dynamic   dynamic.Interface
}

var _ quotakit.Client = (*Client)(nil)

// New returns a Client that reaches the core/v1 resources through clientset
// and every other resource through dyn. Either may be nil: the resources it
// would have served then fail to list, watch or update with an error.
func New(clientset kubernetes.Interface, dyn dynamic.Interface) *Client {
	return &Client{clientset: clientset, dynamic: dyn}
}

// errNoClient is returned for a resource whose client was passed to New as
// nil.
var errNoClient = errors.New("kubeadapter: no client for resource")

// ListerWatcher returns a ListerWatcher of gvr in namespace ("" for every
// namespace). Core/v1 resources the controller evaluates come back typed
// (*corev1.PodList, watch events of *corev1.Pod); anything else comes back
// unstructured.
func (c *Client) ListerWatcher(gvr schema.GroupVersionResource, namespace string) cache.ListerWatcher {
	if gvr.Group == "" && gvr.Version == "v1" && c.clientset != nil {
		core := c.clientset.CoreV1()
		switch gvr.Resource {
		case "pods":
			return typed[*corev1.PodList](gvr, core.Pods(namespace))
		case "services":
			return typed[*corev1.ServiceList](gvr, core.Services(namespace))
		case "persistentvolumeclaims":
			return typed[*corev1.PersistentVolumeClaimList](gvr, core.PersistentVolumeClaims(namespace))
		case "configmaps":
			return typed[*corev1.ConfigMapList](gvr, core.ConfigMaps(namespace))
		case "secrets":
			return typed[*corev1.SecretList](gvr, core.Secrets(namespace))
		case "replicationcontrollers":
			return typed[*corev1.ReplicationControllerList](gvr, core.ReplicationControllers(namespace))
		case "resourcequotas":
			return typed[*corev1.ResourceQuotaList](gvr, core.ResourceQuotas(namespace))
		}
	}
	if c.dynamic == nil {
		return typed[*unstructured.UnstructuredList](gvr, nil)
	}
	return typed[*unstructured.UnstructuredList](gvr, c.dynamic.Resource(gvr).Namespace(namespace))
}

// listWatchClient is the List and Watch half of a client-go resource
// client, typed or dynamic, whose List returns L.
type listWatchClient[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// typed adapts rc to cache.ListerWatcher. A nil rc yields one whose calls
// fail with errNoClient. On error List returns a nil interface, not a typed
// nil list, so a caller's obj == nil check means what it says.
func typed[L runtime.Object](gvr schema.GroupVersionResource, rc listWatchClient[L]) cache.ListerWatcher {
	return &cache.ListWatch{
		ListFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if rc == nil {
				return nil, fmt.Errorf("%w %s", errNoClient, gvr)
			}
			list, err := rc.List(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("kubeadapter: list %s: %w", gvr, err)
			}
			return list, nil
		},
		WatchFunc: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if rc == nil {
				return nil, fmt.Errorf("%w %s", errNoClient, gvr)
			}
			w, err := rc.Watch(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("kubeadapter: watch %s: %w", gvr, err)
			}
			return w, nil
		},
	}
}

// UpdateStatus writes obj's status through the status subresource of gvr.
// obj's resourceVersion is sent as is, so the API server rejects a stale
// write with a conflict. ResourceQuotas must be *corev1.ResourceQuota and
// are written through the typed clientset; any other resource goes through
// the dynamic client, converting a typed obj to unstructured first. A nil
// or mistyped obj is an error.
func (c *Client) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error) {
	if gvr == corev1.SchemeGroupVersion.WithResource("resourcequotas") && c.clientset != nil {
		rq, ok := obj.(*corev1.ResourceQuota)
		if !ok || rq == nil {
			return nil, fmt.Errorf("kubeadapter: update status of %s: got %T, want *v1.ResourceQuota", gvr, obj)
		}
		out, err := c.clientset.CoreV1().ResourceQuotas(rq.Namespace).UpdateStatus(ctx, rq, metav1.UpdateOptions{})
		if err != nil {
			return nil, fmt.Errorf("kubeadapter: update status of %s %s/%s: %w", gvr, rq.Namespace, rq.Name, err)
		}
		return out, nil
	}
	if c.dynamic == nil {
		return nil, fmt.Errorf("%w %s", errNoClient, gvr)
	}
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("kubeadapter: update status of %s: %w", gvr, err)
	}
	out, err := c.dynamic.Resource(gvr).Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubeadapter: update status of %s %s/%s: %w", gvr, u.GetNamespace(), u.GetName(), err)
	}
	return out, nil
}

// toUnstructured returns obj as an *unstructured.Unstructured, converting a
// typed object. The converter reflects over obj, so nil and list objects
// are refused here rather than reaching it.
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		if o == nil {
			return nil, errors.New("nil object")
		}
		return o, nil
	case nil:
		return nil, errors.New("nil object")
	case runtime.Unstructured, metav1.ListInterface:
		return nil, fmt.Errorf("got %T, want a single object", obj)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: m}
	// Objects from a typed clientset carry an empty TypeMeta. The dynamic
	// client sends the map as is, so name the kind when client-go's scheme
	// knows the type; a type it does not know is sent as it came.
	if u.GetKind() == "" {
		if gvks, _, err := scheme.Scheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
			u.SetGroupVersionKind(gvks[0])
		}
	}
	return u, nil
}
