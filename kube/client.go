package kube

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
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/evaluator"
)

// kube-controller-manager's client rate limits (--kube-api-qps,
// --kube-api-burst), which [NewForConfig] applies when the rest.Config
// leaves them zero. client-go's own default is 5 requests a second (burst
// 10), at which the initial lists of a large cluster are rate-bound.
const (
	DefaultQPS   = 20
	DefaultBurst = 30
	// DefaultDiscoveryBurst is the burst of the discovery client, as
	// kube-controller-manager's: one discovery round asks once per group
	// version, which a small burst would spread over seconds.
	DefaultDiscoveryBurst = 200
)

// Clients are the client-go clients a [Client] reads and writes through.
// Any of them may be nil: the resources it would serve then fail to list,
// watch or update with an error naming the missing client, and a nil
// Discovery makes [Client.NamespacedResources] fail.
type Clients struct {
	// Typed serves the resources whose evaluators read whole objects
	// (pods, services, persistentvolumeclaims, resource claims and device
	// classes), ResourceQuotas, and, with Options.WholeObjects, the core
	// resources that are only counted.
	Typed kubernetes.Interface
	// Metadata serves the resources that are only counted: their caches
	// hold object metadata, not whole objects.
	Metadata metadata.Interface
	// Dynamic serves resources client-go has no typed client for when
	// their whole objects are wanted: an Options.Resources entry with an
	// Evaluator, or any resource with Options.WholeObjects.
	Dynamic dynamic.Interface
	// Discovery tells which resources the server serves.
	Discovery discovery.DiscoveryInterface
}

// Client is a [quotakit.Client] and [quotakit.Discoverer] over client-go.
// For each resource it picks the client that gives the controller what its
// evaluator reads, and no more:
//
//   - the typed clientset for the rows of [evaluator.Resources] whose
//     evaluators read whole objects, and for ResourceQuotas, whose whole
//     objects the controller keeps;
//   - the metadata client (*metav1.PartialObjectMetadata) for resources
//     that are only counted: the counted rows of the table (secrets,
//     configmaps, …), Options.Resources without an Evaluator, and any
//     discovered resource, as kube-controller-manager does for resources
//     client-go has no typed informer for. Secrets and configmaps are
//     counted from metadata too, which kube-controller-manager does not do
//     (it shares the typed informers of other controllers);
//   - the dynamic client for whole objects of a resource client-go has no
//     typed client for (an Options.Resources entry with an Evaluator, or
//     everything with Options.WholeObjects); the controller converts them
//     to the typed form itself.
//
// It holds no state beyond its clients and is safe for concurrent use.
type Client struct {
	clients Clients
	// whole holds the resources whose evaluators read whole objects, and
	// resourcequotas; other resources are only counted.
	whole map[schema.GroupVersionResource]bool
	// wholeObjects is Options.WholeObjects: counted resources are served
	// whole too.
	wholeObjects bool
}

var (
	_ quotakit.Client     = (*Client)(nil)
	_ quotakit.Discoverer = (*Client)(nil)
)

// NewForConfig returns a Client over the clients [NewClients] builds from
// cfg. Where it serves a controller, pass the controller's Options (at
// most one) and give [quotakit.NewController] the same, since they decide
// which resources are counted from metadata. Where no controller runs (a
// webhook that only reads and charges ResourceQuotas, see
// [Client.QuotaInformer]), leave them out.
func NewForConfig(cfg *rest.Config, opts ...quotakit.Options) (*Client, error) {
	if len(opts) > 1 {
		return nil, fmt.Errorf("kube: NewForConfig: %d Options, want at most one", len(opts))
	}
	clients, err := NewClients(cfg)
	if err != nil {
		return nil, err
	}
	return New(clients, opts...), nil
}

// NewClients returns the four clients of a [Client], built from cfg, which
// is copied. Its QPS and Burst default to kube-controller-manager's
// ([DefaultQPS], [DefaultBurst]) when zero, and the typed clientset speaks
// protobuf unless cfg.ContentType says otherwise, as kube-controller-manager
// does. The discovery client is not cached (each round asks the server,
// as kube-controller-manager's does) and gets a burst of at least
// [DefaultDiscoveryBurst].
func NewClients(cfg *rest.Config) (Clients, error) {
	var clients Clients
	if cfg == nil {
		return clients, errors.New("kube: nil rest.Config")
	}
	cfg = WithDefaults(cfg)
	typedCfg := rest.CopyConfig(cfg)
	if typedCfg.ContentType == "" {
		typedCfg.ContentType = runtime.ContentTypeProtobuf
		typedCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	var err error
	if clients.Typed, err = kubernetes.NewForConfig(typedCfg); err != nil {
		return clients, fmt.Errorf("kube: typed client: %w", err)
	}
	if clients.Metadata, err = metadata.NewForConfig(cfg); err != nil {
		return clients, fmt.Errorf("kube: metadata client: %w", err)
	}
	if clients.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return clients, fmt.Errorf("kube: dynamic client: %w", err)
	}
	discoveryCfg := rest.CopyConfig(cfg)
	discoveryCfg.Burst = max(discoveryCfg.Burst, DefaultDiscoveryBurst)
	if clients.Discovery, err = discovery.NewDiscoveryClientForConfig(discoveryCfg); err != nil {
		return clients, fmt.Errorf("kube: discovery client: %w", err)
	}
	return clients, nil
}

// WithDefaults returns a copy of cfg whose zero QPS and Burst are
// kube-controller-manager's, [DefaultQPS] and [DefaultBurst]. A negative
// QPS is kept: client-go then builds no rate limiter at all (unless
// cfg.RateLimiter is set), and requests go out as fast as they are made.
func WithDefaults(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultBurst
	}
	return cfg
}

// New returns a Client over clients, for a controller built with opts, as
// [NewForConfig] takes them: none where no controller runs. More than one
// Options is a programmer's error, and panics.
func New(clients Clients, opts ...quotakit.Options) *Client {
	if len(opts) > 1 {
		panic(fmt.Sprintf("kube: New: %d Options, want at most one", len(opts)))
	}
	var o quotakit.Options
	if len(opts) == 1 {
		o = opts[0]
	}
	return newClient(clients, o)
}

func newClient(clients Clients, opts quotakit.Options) *Client {
	c := &Client{clients: clients, whole: map[schema.GroupVersionResource]bool{}, wholeObjects: opts.WholeObjects}
	for _, row := range evaluator.Resources(opts.Evaluator) {
		if !row.MetadataOnly || row.Resource == resourceQuotas {
			c.whole[row.Resource] = true
		}
	}
	for _, r := range opts.Resources {
		if r.Evaluator != nil {
			c.whole[r.Resource] = true
		}
	}
	// ClusterQuotas are read whole, by the controller (with
	// Options.ClusterQuotas) and by a webhook's accessor alike.
	c.whole[clusterQuotas] = true
	return c
}

// resourceQuotas is the resource whose status the controller writes.
var resourceQuotas = corev1.SchemeGroupVersion.WithResource("resourcequotas")

// errNoClient is wrapped by the errors of resources whose client is nil.
var errNoClient = errors.New("kube: no client for resource")

// ListerWatcher returns a ListerWatcher of gvr in namespace ("" for every
// namespace) through the client the [Client] documentation picks for it.
// It never returns nil; a resource whose client is missing fails every
// call with an error.
func (c *Client) ListerWatcher(gvr schema.GroupVersionResource, namespace string) cache.ListerWatcher {
	if c.whole[gvr] || c.wholeObjects {
		if newLW := typedListerWatchers[gvr]; newLW != nil && c.clients.Typed != nil {
			return newLW(c.clients.Typed, namespace)
		}
		if c.clients.Dynamic == nil {
			return missing(gvr, "dynamic")
		}
		return adapt(gvr, c.clients.Dynamic.Resource(gvr).Namespace(namespace))
	}
	if c.clients.Metadata == nil {
		return missing(gvr, "metadata")
	}
	return adapt(gvr, c.clients.Metadata.Resource(gvr).Namespace(namespace))
}

// listWatchClient is the List and Watch half of a client-go resource
// client, typed, dynamic or metadata, whose List returns L.
type listWatchClient[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// adapt makes rc a cache.ListerWatcher. On error List returns a nil
// interface, not a typed nil list.
func adapt[L runtime.Object](gvr schema.GroupVersionResource, rc listWatchClient[L]) cache.ListerWatcher {
	return &cache.ListWatch{
		ListFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := rc.List(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("kube: list %s: %w", gvr.GroupResource(), err)
			}
			return list, nil
		},
		WatchFunc: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := rc.Watch(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("kube: watch %s: %w", gvr.GroupResource(), err)
			}
			return w, nil
		},
	}
}

// missing returns a ListerWatcher whose calls fail because the client
// named which is nil.
func missing(gvr schema.GroupVersionResource, which string) cache.ListerWatcher {
	err := fmt.Errorf("%w %s: the %s client is nil", errNoClient, gvr.GroupResource(), which)
	return &cache.ListWatch{
		ListFunc:  func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, err },
		WatchFunc: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, err },
	}
}

// UpdateStatus writes obj's status through the status subresource of gvr,
// with obj's resourceVersion as the precondition the API server checks.
// ResourceQuotas must be *corev1.ResourceQuota and go through the typed
// clientset; any other resource goes through the dynamic client, a typed
// obj converted to unstructured first. A nil or mistyped obj is an error.
func (c *Client) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error) {
	if gvr == resourceQuotas {
		rq, ok := obj.(*corev1.ResourceQuota)
		if !ok || rq == nil {
			return nil, fmt.Errorf("kube: update status of resourcequotas: got %T, want *v1.ResourceQuota", obj)
		}
		if c.clients.Typed == nil {
			return nil, fmt.Errorf("%w resourcequotas: the typed client is nil", errNoClient)
		}
		out, err := c.clients.Typed.CoreV1().ResourceQuotas(rq.Namespace).UpdateStatus(ctx, rq, metav1.UpdateOptions{})
		if err != nil {
			return nil, fmt.Errorf("kube: update status of resourcequota %s/%s: %w", rq.Namespace, rq.Name, err)
		}
		return out, nil
	}
	if c.clients.Dynamic == nil {
		return nil, fmt.Errorf("%w %s: the dynamic client is nil", errNoClient, gvr.GroupResource())
	}
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("kube: update status of %s: %w", gvr.GroupResource(), err)
	}
	out, err := c.clients.Dynamic.Resource(gvr).Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kube: update status of %s %s/%s: %w", gvr.GroupResource(), u.GetNamespace(), u.GetName(), err)
	}
	return out, nil
}

// toUnstructured returns obj as an *unstructured.Unstructured, converting a
// typed object. Nil objects are refused before the converter reflects over
// them.
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	switch o := obj.(type) {
	case nil:
		return nil, errors.New("nil object")
	case *unstructured.Unstructured:
		if o == nil {
			return nil, errors.New("nil object")
		}
		return o, nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	return &unstructured.Unstructured{Object: content}, nil
}
