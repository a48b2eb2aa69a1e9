package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	upquota "k8s.io/apiserver/pkg/quota/v1"
	upgeneric "k8s.io/apiserver/pkg/quota/v1/generic"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	upcore "k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
	upinstall "k8s.io/kubernetes/pkg/quota/v1/install"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/quotakit/quotakit/evaluator"
	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/quota"
)

// The DRA differential test runs random worlds of DeviceClasses, pods that
// request DRA-backed extended resources, and ResourceClaims (plain ones and
// ones the scheduler would make for those pods) through Kubernetes 1.37.1's
// claim and pod evaluators and ours, and demands identical answers: claim
// Usage, Matches, MatchingResources, Handles and UsageStats, pod Usage and
// MatchingResources, and CalculateUsage over both. Upstream's
// ExtendedResourceCache is fed the world's DeviceClasses (added once each,
// in random order) and its claim getter finds a pod's scheduler-made
// claims as its index does. DynamicResourceAllocation and
// DRAExtendedResource are GA and locked on in 1.37.1, so upstream runs with
// both on, as ours does with zero Options.
//
// Deliberate differences, each excluded where it applies and counted:
//
//   - A claim with devices of two DeviceClasses that declare the same
//     extended resource name: upstream charges requests.<name> the devices
//     of one of the classes, picked by map iteration order, so its answer
//     varies between evaluations of the same claim. Ours charges the sum.
//     That name is left out of the comparison for such claims, and
//     UsageStats and CalculateUsage of a namespace holding one are not
//     compared for it.
//   - Claim updates: upstream's update filter never fires for claims (it
//     has no case for them). Ours fires when the requests, the
//     extended-resource-claim annotation or the controlling pod change;
//     the test checks that it fires whenever upstream's own Usage of the
//     two versions differs.
//
// Upstream computes the owning pod's usage with the real clock; pods being
// deleted here were deleted long ago or far in the future, so both sides
// agree whatever the time.

// draClassPool are the DeviceClasses a world may hold, with the extended
// resource name each declares. gpu and gpu-v2 declare the same name, as
// during a migration from one class to another.
var draClassPool = []struct{ name, ext string }{
	{"gpu", "example.com/gpu"},
	{"gpu-v2", "example.com/gpu"},
	{"nic", ""},
	{"tpu", "example.com/tpu"},
	{"fpga", "vendor.io/fpga"},
}

// draClassNames are the classes claims reference: the pool, a class that
// never exists, and none.
var draClassNames = []string{"gpu", "gpu", "gpu-v2", "nic", "tpu", "fpga", "ghost", ""}

// draPodNames are the names pod containers request.
var draPodNames = []corev1.ResourceName{
	"example.com/gpu", "deviceclass.resource.kubernetes.io/gpu", "deviceclass.resource.kubernetes.io/nic",
	"example.com/tpu", "vendor.io/fpga", "deviceclass.resource.kubernetes.io/ghost", corev1.ResourceCPU,
}

// draQuotaNames are the names quotas and MatchingResources inputs are drawn
// from.
var draQuotaNames = []corev1.ResourceName{
	"count/resourceclaims.resource.k8s.io", "gpu.deviceclass.resource.k8s.io/devices", "nic.deviceclass.resource.k8s.io/devices",
	"ghost.deviceclass.resource.k8s.io/devices", "gpu-v2.deviceclass.resource.k8s.io/devices",
	"requests.deviceclass.resource.kubernetes.io/gpu", "requests.deviceclass.resource.kubernetes.io/gpu-v2",
	"requests.deviceclass.resource.kubernetes.io/nic", "requests.deviceclass.resource.kubernetes.io/tpu",
	"requests.deviceclass.resource.kubernetes.io/ghost", "requests.example.com/gpu", "requests.example.com/tpu",
	"requests.vendor.io/fpga", "requests.other.io/thing", "resourceclaims", "requests.cpu", "count/pods", "pods",
	"example.com/gpu", "limits.example.com/gpu", "bronze.deviceclass.resource.k8s.io/storage", "gpu.storage.k8s.io/requests.storage",
}

var draEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// draGen builds random DRA worlds from a fixed seed.
type draGen struct {
	r *rand.Rand
	n int
}

func (g *draGen) chance(p float64) bool { return g.r.Float64() < p }

func (g *draGen) name(prefix string) string {
	g.n++
	return fmt.Sprintf("%s-%d", prefix, g.n)
}

// timestamp returns one of a few times, so that ties are frequent.
func (g *draGen) timestamp() metav1.Time {
	return metav1.NewTime(draEpoch.Add(time.Duration(g.r.IntN(3)) * time.Minute))
}

func (g *draGen) classes() []*resourcev1.DeviceClass {
	var out []*resourcev1.DeviceClass
	for _, c := range draClassPool {
		if !g.chance(0.75) {
			continue
		}
		dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: c.name, CreationTimestamp: g.timestamp(), ResourceVersion: "1"}}
		if c.ext != "" && g.chance(0.85) {
			dc.Spec.ExtendedResourceName = ptr.To(c.ext)
		}
		out = append(out, dc)
	}
	return out
}

func (g *draGen) pod() *corev1.Pod {
	name := g.name("pod")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), ResourceVersion: "1"}}
	container := func(prefix string, i int) corev1.Container {
		c := corev1.Container{Name: fmt.Sprintf("%s%d", prefix, i)}
		for _, n := range draPodNames {
			if g.chance(0.3) {
				if c.Resources.Requests == nil {
					c.Resources.Requests = corev1.ResourceList{}
				}
				c.Resources.Requests[n] = *resource.NewQuantity(int64(g.r.IntN(4)), resource.DecimalSI)
			}
		}
		if g.chance(0.1) {
			c.Resources.Limits = corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}
		}
		return c
	}
	for i := range 1 + g.r.IntN(2) {
		pod.Spec.Containers = append(pod.Spec.Containers, container("c", i))
	}
	for i := range g.r.IntN(3) {
		c := container("i", i)
		if g.chance(0.3) {
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	switch g.r.IntN(10) {
	case 0:
		pod.Status.Phase = corev1.PodSucceeded
	case 1:
		pod.Status.Phase = corev1.PodFailed
	case 2:
		// Deleted long ago: past its grace period whatever the clock.
		pod.DeletionTimestamp = ptr.To(metav1.NewTime(draEpoch.AddDate(-5, 0, 0)))
		pod.DeletionGracePeriodSeconds = ptr.To(int64(30))
	case 3:
		pod.DeletionTimestamp = ptr.To(metav1.NewTime(draEpoch.AddDate(100, 0, 0)))
		pod.DeletionGracePeriodSeconds = ptr.To(int64(30))
	default:
		pod.Status.Phase = corev1.PodRunning
	}
	return pod
}

func (g *draGen) mode() resourcev1.DeviceAllocationMode {
	switch g.r.IntN(12) {
	case 0, 1, 2:
		return resourcev1.DeviceAllocationModeAll
	case 3:
		return "Future"
	case 4:
		return ""
	}
	return resourcev1.DeviceAllocationModeExactCount
}

func (g *draGen) class() string { return draClassNames[g.r.IntN(len(draClassNames))] }

func (g *draGen) count() int64 {
	if g.chance(0.05) {
		return int64(g.r.IntN(3)) - 1
	}
	return int64(1 + g.r.IntN(5))
}

// claim returns a random claim; with pods, often one the scheduler would
// make for one of them, sometimes with a broken owner.
func (g *draGen) claim(pods []*corev1.Pod) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: g.name("claim"), CreationTimestamp: g.timestamp(), ResourceVersion: "1"}}
	for i := range g.r.IntN(4) {
		req := resourcev1.DeviceRequest{Name: fmt.Sprintf("r%d", i)}
		switch g.r.IntN(10) {
		case 0:
			// A request type this version does not know.
		case 1, 2, 3:
			for j := range 1 + g.r.IntN(3) {
				req.FirstAvailable = append(req.FirstAvailable, resourcev1.DeviceSubRequest{
					Name: fmt.Sprintf("s%d", j), DeviceClassName: g.class(), AllocationMode: g.mode(), Count: g.count(),
				})
			}
		default:
			req.Exactly = &resourcev1.ExactDeviceRequest{DeviceClassName: g.class(), AllocationMode: g.mode(), Count: g.count()}
			if g.chance(0.2) {
				req.Exactly.AdminAccess = ptr.To(true)
			}
		}
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, req)
	}
	if len(pods) > 0 && g.chance(0.25) {
		pod := pods[g.r.IntN(len(pods))]
		c.Annotations = map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"}
		if g.chance(0.05) {
			c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] = "false"
		}
		ref := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}
		switch g.r.IntN(20) {
		case 0:
			ref.UID = "stale-uid"
		case 1:
			ref.Kind = "Job"
		case 2:
			ref.APIVersion = "batch/v1"
		case 3:
			ref.Controller = nil
		case 4:
			ref.Name = "missing-pod"
		}
		c.OwnerReferences = []metav1.OwnerReference{ref}
	}
	return c
}

// nameClaims lets some pods name one of their claims in
// status.extendedResourceClaimStatus, rightly or not.
func (g *draGen) nameClaims(pods []*corev1.Pod, claims []*resourcev1.ResourceClaim) {
	for _, pod := range pods {
		if !g.chance(0.3) {
			continue
		}
		name := "no-such-claim"
		for _, c := range claims {
			if ref := metav1.GetControllerOfNoCopy(c); ref != nil && ref.UID == pod.UID && g.chance(0.7) {
				name = c.Name
			}
		}
		pod.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: name}
	}
}

// mutateClaim returns a copy of c with a random edit: status, labels, the
// annotation, the owner or (though the API forbids it) the requests.
func (g *draGen) mutateClaim(c *resourcev1.ResourceClaim, pods []*corev1.Pod) *resourcev1.ResourceClaim {
	m := c.DeepCopy()
	m.ResourceVersion = "2"
	switch g.r.IntN(6) {
	case 0:
		m.Status.Allocation = &resourcev1.AllocationResult{}
	case 1:
		m.Labels = map[string]string{"edited": "yes"}
	case 2:
		if m.Annotations == nil {
			m.Annotations = map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"}
		} else {
			m.Annotations = nil
		}
	case 3:
		if len(pods) > 0 {
			pod := pods[g.r.IntN(len(pods))]
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
		}
	case 4:
		m.OwnerReferences = nil
	case 5:
		m.Spec.Devices.Requests = append(m.Spec.Devices.Requests, resourcev1.DeviceRequest{Name: "extra", Exactly: &resourcev1.ExactDeviceRequest{
			DeviceClassName: g.class(), AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
		}})
	}
	return m
}

func (g *draGen) names() []corev1.ResourceName {
	var out []corev1.ResourceName
	for range g.r.IntN(6) {
		out = append(out, draQuotaNames[g.r.IntN(len(draQuotaNames))])
	}
	return out
}

func (g *draGen) quota() *corev1.ResourceQuota {
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: g.name("q")}}
	q.Spec.Hard = corev1.ResourceList{}
	for _, n := range g.names() {
		q.Spec.Hard[n] = resource.MustParse("100")
	}
	q.Status.Hard = q.Spec.Hard.DeepCopy()
	if g.chance(0.1) {
		q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}
	}
	if g.chance(0.1) {
		q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{ScopeName: "PriorityClass", Operator: "Exists"}}}
	}
	return q
}

// draWorld is one namespace's objects, served to both implementations.
type draWorld struct {
	classes []*resourcev1.DeviceClass
	pods    []*corev1.Pod
	claims  []*resourcev1.ResourceClaim

	podIndexer, claimIndexer, classIndexer cache.Indexer
}

func newDRAWorld(t *testing.T, g *draGen) *draWorld {
	w := &draWorld{classes: g.classes()}
	for range 4 + g.r.IntN(12) {
		w.pods = append(w.pods, g.pod())
	}
	for range 60 + g.r.IntN(80) {
		w.claims = append(w.claims, g.claim(w.pods))
	}
	g.nameClaims(w.pods, w.claims)
	w.index(t)
	return w
}

// index builds w's indexers from its objects.
func (w *draWorld) index(tb testing.TB) {
	tb.Helper()
	build := func(objs []runtime.Object) cache.Indexer {
		indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, o := range objs {
			if err := indexer.Add(o.DeepCopyObject()); err != nil {
				tb.Fatal(err)
			}
		}
		return indexer
	}
	w.podIndexer = build(asObjects(w.pods))
	w.claimIndexer = build(asObjects(w.claims))
	w.classIndexer = build(asObjects(w.classes))
	if err := w.claimIndexer.AddIndexers(cache.Indexers{draPodOwnerIndex: draPodOwnerKeys}); err != nil {
		tb.Fatal(err)
	}
}

// draPodOwnerIndex indexes scheduler-made claims by <namespace>/<pod UID>
// of their controlling pod, for upstream's claim getter.
const draPodOwnerIndex = "podOwner"

func draPodOwnerKeys(obj any) ([]string, error) {
	c, ok := obj.(*resourcev1.ResourceClaim)
	if !ok || c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] != "true" {
		return nil, nil
	}
	ref := metav1.GetControllerOfNoCopy(c)
	if ref == nil || ref.Kind != "Pod" || ref.APIVersion != "v1" {
		return nil, nil
	}
	return []string{c.Namespace + "/" + string(ref.UID)}, nil
}

func asObjects[T runtime.Object](xs []T) []runtime.Object {
	out := make([]runtime.Object, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// upstream returns Kubernetes' claim and pod evaluators over w, with an
// ExtendedResourceCache fed w's classes in a random order.
func (w *draWorld) upstream(g *draGen) (claims, pods upquota.Evaluator) {
	erc := extendedresourcecache.NewExtendedResourceCache(logr.Discard())
	for _, i := range g.r.Perm(len(w.classes)) {
		erc.OnAdd(w.classes[i], true)
	}
	// The claim getter reads an index of the claims by owning pod, as
	// upstream's does: the scheduler-made claims whose controller is the
	// pod with podUID.
	getter := func(namespace string, podUID types.UID) ([]*resourcev1.ResourceClaim, error) {
		objs, err := w.claimIndexer.ByIndex(draPodOwnerIndex, namespace+"/"+string(podUID))
		if err != nil {
			return nil, err
		}
		out := make([]*resourcev1.ResourceClaim, len(objs))
		for i, obj := range objs {
			out[i] = obj.(*resourcev1.ResourceClaim)
		}
		return out, nil
	}
	listers := func(gvr schema.GroupVersionResource) (cache.GenericLister, error) {
		switch gvr.Resource {
		case "pods":
			return cache.NewGenericLister(w.podIndexer, gvr.GroupResource()), nil
		case "resourceclaims":
			return cache.NewGenericLister(w.claimIndexer, gvr.GroupResource()), nil
		}
		return nil, fmt.Errorf("no lister for %s", gvr)
	}
	claims = upcore.NewResourceClaimEvaluator(listers, erc, corev1listers.NewPodLister(w.podIndexer), getter)
	pods = upcore.NewPodEvaluator(listers, clock.RealClock{})
	return claims, pods
}

// ours returns our registry over w.
func (w *draWorld) ours(t testing.TB) quota.Registry {
	r, err := evaluator.NewRegistry(w.listers, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// listers serves w to our evaluators.
func (w *draWorld) listers(gvr schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
	byResource := map[string]cache.Indexer{"pods": w.podIndexer, "resourceclaims": w.claimIndexer, "deviceclasses": w.classIndexer}
	indexer := byResource[gvr.Resource]
	if indexer == nil {
		return nil, nil
	}
	if gvr.Resource == "deviceclasses" {
		return func(string) ([]runtime.Object, error) {
			items := indexer.List()
			out := make([]runtime.Object, len(items))
			for i, it := range items {
				out[i] = it.(runtime.Object)
			}
			return out, nil
		}, nil
	}
	return spListFunc(indexer), nil
}

// sharedExtendedNames returns the extended resource names that two or
// more of the classes claim has devices of declare: where upstream's
// answer depends on map iteration order.
func (w *draWorld) sharedExtendedNames(claim *resourcev1.ResourceClaim) []corev1.ResourceName {
	ext := map[string]string{}
	for _, c := range w.classes {
		if c.Spec.ExtendedResourceName != nil {
			ext[c.Name] = *c.Spec.ExtendedResourceName
		}
	}
	classes := map[string]bool{}
	for _, req := range claim.Spec.Devices.Requests {
		if req.Exactly != nil {
			classes[req.Exactly.DeviceClassName] = true
		}
		for _, sub := range req.FirstAvailable {
			// A subrequest of unknown mode, or of no devices, creates
			// no key, so its class has no name to charge.
			if sub.AllocationMode == resourcev1.DeviceAllocationModeAll || (sub.AllocationMode == resourcev1.DeviceAllocationModeExactCount && sub.Count > 0) {
				classes[sub.DeviceClassName] = true
			}
		}
	}
	seen := map[string]int{}
	for class := range classes {
		if e := ext[class]; e != "" && class != "" {
			seen[e]++
		}
	}
	var out []corev1.ResourceName
	for e, n := range seen {
		if n > 1 {
			out = append(out, corev1.ResourceName("requests."+e))
		}
	}
	return out
}

// without returns a copy of rl without names.
func without(rl corev1.ResourceList, names []corev1.ResourceName) corev1.ResourceList {
	out := rl.DeepCopy()
	for _, n := range names {
		delete(out, n)
	}
	return out
}

func TestResourceClaimEvaluatorDifferential(t *testing.T) {
	g := &draGen{r: rand.New(rand.NewPCG(12, 1337))}
	gvr := resourcev1.SchemeGroupVersion.WithResource("resourceclaims")
	podGVR := corev1.SchemeGroupVersion.WithResource("pods")
	upFilter := upinstall.DefaultUpdateFilter()
	var claims, special, netOfPod, shared, sharedNamespaces, filterOnlyOurs, usageChanges, statsCompared int
	for round := 0; claims < 3000 || round < 30; round++ {
		w := newDRAWorld(t, g)
		theirs, theirPods := w.upstream(g)
		registry := w.ours(t)
		ours := registry.Get(gvr.GroupResource())
		ourPods := registry.Get(podGVR.GroupResource())
		filter := evaluator.DefaultUpdateFilter(evaluator.Options{})
		// unverified charges every claim in full: no pod is ever found.
		unverified, err := evaluator.NewResourceClaimEvaluator(func(r schema.GroupVersionResource) (generic.ListFuncByNamespace, error) {
			if r.Resource == "pods" {
				return nil, nil
			}
			return w.listers(r)
		}, evaluator.ResourceClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ours == nil || ourPods == nil {
			t.Fatal("our registry lacks the claim or pod evaluator")
		}
		namespaceShared := false
		for i, c := range w.claims {
			claims++
			name := fmt.Sprintf("round %d claim %d (%s annotations %v owners %v requests %+v)", round, i, c.Name, c.Annotations, c.OwnerReferences, c.Spec.Devices.Requests)
			if c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] == "true" {
				special++
			}
			want, werr := theirs.Usage(c)
			got, gerr := ours.Usage(c)
			if werr != nil || gerr != nil {
				t.Fatalf("%s: Usage errors: ours %v, upstream %v", name, gerr, werr)
			}
			// Map-order nondeterminism upstream: compare all but the
			// shared names.
			skip := w.sharedExtendedNames(c)
			if len(skip) > 0 {
				shared++
				namespaceShared = true
			}
			if !quota.Equals(without(want, skip), without(got, skip)) {
				t.Errorf("%s: Usage = %v, upstream %v", name, got, want)
			}
			if full, err := unverified.Usage(c); err != nil {
				t.Fatal(err)
			} else if !quota.Equals(full, got) {
				netOfPod++
			}

			q := g.quota()
			wm, werr := theirs.Matches(q, c)
			gm, gerr := ours.Matches(q, c)
			if wm != gm || werr != nil || gerr != nil {
				t.Errorf("%s: Matches(scopes %v selector %+v hard %v) = %v, %v; upstream %v, %v", name, q.Spec.Scopes, q.Spec.ScopeSelector, quota.ResourceNames(q.Status.Hard), gm, gerr, wm, werr)
			}
			names := g.names()
			if diff := cmp.Diff(theirs.MatchingResources(names), ours.MatchingResources(names)); diff != "" {
				t.Errorf("claims: MatchingResources(%v) (-upstream +ours):\n%s", names, diff)
			}

			old := g.mutateClaim(c, w.pods)
			op := admission.Operation([]string{"CREATE", "UPDATE", "UPDATE", "DELETE", "CONNECT"}[g.r.IntN(5)])
			sub := []string{"", "", "status", "binding"}[g.r.IntN(4)]
			wa, ga := spAttributes(c, old, gvr, "ResourceClaim", sub, op)
			if w, o := theirs.Handles(wa), ours.Handles(ga); w != o {
				t.Errorf("%s: Handles(%s %q) = %v; upstream %v", name, op, sub, o, w)
			}

			// Update filter: upstream never fires for claims. Ours must
			// fire whenever upstream's own usage of the two versions
			// differs.
			if upFilter(gvr, old, c) {
				t.Errorf("%s: upstream's update filter fired for a claim; revisit the documented difference", name)
			}
			oldUsage, err1 := theirs.Usage(old)
			if err1 != nil {
				t.Fatal(err1)
			}
			skipBoth := slices.Concat(skip, w.sharedExtendedNames(old))
			changed := !quota.Equals(without(oldUsage, skipBoth), without(want, skipBoth))
			fired := filter(gvr, old, c)
			if changed {
				usageChanges++
				if !fired {
					t.Errorf("%s: our update filter misses an update from %+v that changes upstream's usage from %v to %v", name, old.ObjectMeta, oldUsage, want)
				}
			}
			if fired {
				filterOnlyOurs++
			}
		}
		if namespaceShared {
			sharedNamespaces++
		}

		for i, pod := range w.pods {
			name := fmt.Sprintf("round %d pod %d (%s)", round, i, describePod(pod))
			want, werr := theirPods.Usage(pod.DeepCopy())
			got, gerr := ourPods.Usage(pod)
			if werr != nil || gerr != nil {
				t.Fatalf("%s: Usage errors: ours %v, upstream %v", name, gerr, werr)
			}
			if !quota.Equals(want, got) {
				t.Errorf("%s: pod Usage = %v, upstream %v", name, got, want)
			}
			names := g.names()
			if diff := cmp.Diff(theirPods.MatchingResources(names), ourPods.MatchingResources(names)); diff != "" {
				t.Errorf("pods: MatchingResources(%v) (-upstream +ours):\n%s", names, diff)
			}
		}

		// UsageStats and CalculateUsage of the whole namespace, unless a
		// claim in it hits upstream's map-order nondeterminism.
		if namespaceShared {
			continue
		}
		upRegistry := upgeneric.NewRegistry([]upquota.Evaluator{theirs, theirPods})
		for range 10 {
			q := g.quota()
			opts := upquota.UsageStatsOptions{Namespace: "ns", Scopes: q.Spec.Scopes, ScopeSelector: q.Spec.ScopeSelector, Resources: quota.ResourceNames(q.Status.Hard)}
			want, werr := theirs.UsageStats(opts)
			got, gerr := ours.UsageStats(quota.UsageStatsOptions(opts))
			if werr != nil || gerr != nil {
				t.Fatalf("round %d: UsageStats errors: ours %v, upstream %v", round, gerr, werr)
			}
			if !quota.Equals(want.Used, got.Used) {
				t.Errorf("round %d: UsageStats(%v) = %v, upstream %v", round, opts.Resources, got.Used, want.Used)
			}
			wu, werr := upquota.CalculateUsage("ns", q.Spec.Scopes, q.Status.Hard, upRegistry, q.Spec.ScopeSelector)
			gu, gerr := quota.CalculateUsage("ns", q.Spec.Scopes, q.Status.Hard, registry, q.Spec.ScopeSelector)
			if werr != nil || gerr != nil {
				t.Fatalf("round %d: CalculateUsage errors: ours %v, upstream %v", round, gerr, werr)
			}
			// Our registry has more evaluators (services, claims' own
			// count…); compare the names the two evaluators pairs cover.
			covered := slices.Concat(theirs.MatchingResources(quota.ResourceNames(q.Status.Hard)), theirPods.MatchingResources(quota.ResourceNames(q.Status.Hard)))
			if !quota.Equals(quota.Mask(wu, covered), quota.Mask(gu, covered)) {
				t.Errorf("round %d: CalculateUsage(hard %v scopes %v selector %+v) = %v, upstream %v", round, quota.ResourceNames(q.Status.Hard), q.Spec.Scopes, q.Spec.ScopeSelector, gu, wu)
			}
			statsCompared++
		}
	}
	if shared == 0 || netOfPod == 0 || usageChanges == 0 || statsCompared == 0 {
		t.Errorf("the generator does not exercise the cases: %d claims with a shared extended name, %d charged net of their pod, %d updates changing usage, %d UsageStats compared", shared, netOfPod, usageChanges, statsCompared)
	}
	t.Logf("%d claims (%d annotated as scheduler-made, %d charged net of their pod); %d with classes sharing an extended name (name left out; %d namespaces not summed); "+
		"%d updates changed upstream's usage, our filter fired on %d, upstream's on none; %d UsageStats/CalculateUsage compared",
		claims, special, netOfPod, shared, sharedNamespaces, usageChanges, filterOnlyOurs, statsCompared)
}

// BenchmarkResourceClaimUsageStats sums a namespace of about 1,000 random
// claims (a quarter of them scheduler-made) over 16 pods with Kubernetes
// 1.37.1's evaluator and ours. Ours lists the DeviceClasses and the pods
// once per call instead of reading an event-driven cache.
func BenchmarkResourceClaimUsageStats(b *testing.B) {
	g := &draGen{r: rand.New(rand.NewPCG(99, 7))}
	w := &draWorld{classes: g.classes()}
	for range 16 {
		w.pods = append(w.pods, g.pod())
	}
	for range 1000 {
		w.claims = append(w.claims, g.claim(w.pods))
	}
	g.nameClaims(w.pods, w.claims)
	w.index(b)
	theirs, _ := w.upstream(g)
	ours := w.ours(b).Get(resourcev1.SchemeGroupVersion.WithResource("resourceclaims").GroupResource())
	opts := upquota.UsageStatsOptions{Namespace: "ns", Resources: []corev1.ResourceName{"requests.example.com/gpu", "gpu.deviceclass.resource.k8s.io/devices"}}
	b.Run("impl=upstream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := theirs.UsageStats(opts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=quotakit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ours.UsageStats(quota.UsageStatsOptions(opts)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
