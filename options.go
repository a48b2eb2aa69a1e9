package quotakit

import (
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
	"github.com/quotakit/quotakit/workqueue"
)

// DefaultChargeWindow is the default of [Options.ChargeWindow].
//
// Admission charges a request before the object is stored, and the object
// reaches the controller's informers after that: kube-apiserver stores it
// once the validating webhooks (each bounded by its timeoutSeconds, at most
// 30 seconds, and run in parallel) and its own ResourceQuota plugin
// (bounded by 10 seconds) have answered, and the watch delivers it within
// milliseconds. A charge that no object follows 30 seconds later is one
// that no object will follow on any configuration kube-apiserver accepts,
// short of an etcd write that takes longer than that; on a healthy server
// the whole path takes milliseconds, so the window is all margin. That a
// test on loopback, with no other webhook, sees every object within
// milliseconds is no reason to shorten it.
const DefaultChargeWindow = 30 * time.Second

// Options configures a [Controller]. The zero value means
// kube-controller-manager's defaults.
type Options struct {
	// Namespace limits the controller to the quotas and objects of one
	// namespace, for a tenant's own controller. Defaults to "": every
	// namespace.
	Namespace string
	// Workers is the number of goroutines that sync quotas from each of
	// the controller's two queues. Defaults to 5, as
	// --concurrent-resource-quota-syncs; a negative number is an error.
	Workers int
	// ResyncPeriod is how often every quota is recalculated from scratch,
	// whatever the events said. Defaults to 5 minutes, as
	// --resource-quota-sync-period; a negative period turns it off.
	ResyncPeriod time.Duration
	// StartGrace bounds how long the workers wait at start, once the
	// ResourceQuota informer has synced, for the informers of the
	// resources counted from the start. Waiting for them all, as
	// Kubernetes does, lets one informer that never syncs hold up every
	// quota (kubernetes#133737); not waiting writes every quota twice at
	// each start, first without the resources still listing, then with
	// them. Within the grace a quota is written once; after it, workers
	// start with what has synced. Defaults to 5 seconds; negative does not
	// wait.
	StartGrace time.Duration
	// DiscoveryPeriod is how often a Client that implements [Discoverer]
	// is asked again which resources the server serves. A quota naming a
	// resource the last discovery did not find asks at once. Defaults to
	// 30 seconds, as kube-controller-manager; a negative period asks only
	// when a quota names an unknown resource.
	DiscoveryPeriod time.Duration
	// Logger receives the controller's logs. Defaults to the logr.Logger
	// of the context given to Run, and to none when that has none.
	Logger logr.Logger
	// Evaluator configures the core evaluators and the default update
	// filter ([evaluator.Resources]).
	Evaluator evaluator.Options
	// Resources are resources counted besides the core ones: custom
	// resources charged as count/<resource>.<group>, or resources with an
	// evaluator of their own. With a [Discoverer] client, resources that
	// are only counted need not be listed here: they are counted once a
	// quota names them.
	Resources []Resource
	// IgnoredResources are never counted and never watched. Defaults to
	// [evaluator.DefaultIgnoredResources]. Resourcequotas are watched
	// anyway, for the controller's own use.
	IgnoredResources map[schema.GroupResource]struct{}
	// UpdateFilter tells whether an update of an object may change the
	// usage it charges; when it does, the quotas of its namespace are
	// recalculated. Deletions always are. For the resources whose usage the
	// controller keeps in its ledger (the table's and counted ones), so are
	// creations and updates that change what the object charges a quota,
	// whatever the filter says. Defaults to [evaluator.DefaultUpdateFilter]
	// of Evaluator; other resources outside the table are never
	// recalculated on update.
	UpdateFilter func(gvr schema.GroupVersionResource, oldObj, newObj runtime.Object) bool
	// WholeObjects keeps whole objects in the controller's caches. By
	// default pods are cached with only what the evaluators read
	// ([evaluator.TrimPod]) and resources that are only counted with only
	// their metadata (*metav1.PartialObjectMetadata), which is all an
	// object-count evaluator reads: secrets and configmaps are often most
	// of a cluster's bytes.
	WholeObjects bool
	// NewRateLimiter returns the rate limiter of one of the two quota
	// queues, which decides how soon a quota whose sync failed is tried
	// again. It is handed a quota's key: namespace/name for a
	// ResourceQuota, the name for a ClusterQuota. Defaults to
	// [workqueue.DefaultControllerRateLimiter].
	NewRateLimiter func() workqueue.RateLimiter[string]
	// ChargeWindow is how long a charge that admission made to a quota's
	// status.used, and that no object in the caches accounts for yet, is
	// kept by recalculations: the object may be on its way. A charge is
	// released once it is that old and no object has accounted for it
	// (the creation failed after admission): one window after the
	// controller first saw it, or, while charges that followed it are
	// accounted for by arriving objects, one window after the last of
	// them (see Charges in flight on [Controller]). Defaults to
	// [DefaultChargeWindow]; negative turns the rule off, and a
	// recalculation writes what the caches hold, as
	// kube-controller-manager does.
	ChargeWindow time.Duration
	// ClusterQuotas has the controller also keep the status of every
	// ClusterQuota (package clusterquota, quota.quotakit.io/v1alpha1):
	// its total over the namespaces it selects, each namespace's usage,
	// and admission's charges in flight, as for ResourceQuotas. The
	// Client must serve clusterquotas (the CRD installed) and namespaces,
	// and Namespace must be empty: a cluster quota counts objects in every
	// namespace. Defaults to false.
	ClusterQuotas bool
	// EnforcedNamespaces selects, by label, the namespaces whose requests
	// admission checks: the webhook configuration's namespaceSelector, or
	// the Enforced option of the admission Evaluator. The controller
	// counts every namespace a ClusterQuota selects either way; with this
	// option it also says when some of them are not enforced (the
	// quota's NamespacesEnforced condition False, a log line at error
	// level, [Controller.UnenforcedClusterQuotas]), since their usage
	// then counts against the total but no request of theirs is ever
	// checked. Defaults to nil: not known, and the condition is Unknown.
	EnforcedNamespaces labels.Selector
	// Events, when set, records a Warning Event (reason
	// ResourcesNotCounted) on each quota whose spec.hard names resources
	// the controller does not count, or may not list, once for each new
	// set of such names, besides the log line at error level; and on each
	// ClusterQuota whose condition turns, a Warning when it turns False
	// (reason InvalidSpec or NamespacesNotEnforced) and a Normal Event
	// when it turns True again. Defaults to nil: the log lines only.
	Events EventRecorder
	// MetricsProvider receives the metrics of the controller's queues,
	// named as in kube-controller-manager: resourcequota_primary,
	// resourcequota_priority and resource_quota_controller_resource_changes.
	// Defaults to nil: no metrics.
	MetricsProvider workqueue.MetricsProvider
}

// Resource is a resource a [Controller] counts besides the core ones.
type Resource struct {
	// Resource is the resource to list and watch, in every namespace (or
	// in Options.Namespace).
	Resource schema.GroupVersionResource
	// Object is an object of the type Evaluator reads, for example
	// &v1.Widget{}; the Client's unstructured objects are converted to it.
	// Nil accepts objects of any type, which suits an evaluator of
	// *unstructured.Unstructured objects. Without an Evaluator it is not
	// used: counted objects are cached as metadata.
	Object runtime.Object
	// Evaluator returns the resource's evaluator, which lists the resource
	// with list. Defaults to the object-count evaluator, which charges
	// count/<resource>.<group>.
	Evaluator func(list generic.ListFuncByNamespace) quota.Evaluator
}
