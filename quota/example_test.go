package quota_test

import (
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/quota"
)

func ExampleAdd() {
	used := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourcePods: resource.MustParse("3")}
	request := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	sum := quota.Add(used, request)
	for _, name := range quota.ResourceNames(sum) {
		q := sum[name]
		fmt.Printf("%s=%s\n", name, q.String())
	}
	// Output:
	// cpu=2
	// memory=1Gi
	// pods=3
}

func ExampleLessThanOrEqual() {
	hard := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("5")}
	newUsed := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("2500m"),
		corev1.ResourcePods:   resource.MustParse("5"),
		corev1.ResourceMemory: resource.MustParse("64Gi"), // not limited by hard: ignored
	}
	ok, exceeded := quota.LessThanOrEqual(newUsed, hard)
	fmt.Println(ok, exceeded)
	// Output: false [cpu]
}

func ExampleSubtractWithNonNegativeResult() {
	// An update that shrinks a request does not give quota back at admission:
	// the controller releases it later.
	newUsage := corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("1")}
	oldUsage := corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("2"), corev1.ResourceRequestsMemory: resource.MustParse("1Gi")}
	delta := quota.SubtractWithNonNegativeResult(newUsage, oldUsage)
	fmt.Println(quota.IsZero(delta), len(quota.RemoveZeros(delta)))
	// Output: true 0
}

func ExampleMask() {
	usage := corev1.ResourceList{
		corev1.ResourceRequestsCPU: resource.MustParse("1"),
		corev1.ResourceLimitsCPU:   resource.MustParse("2"),
		corev1.ResourcePods:        resource.MustParse("1"),
	}
	masked := quota.Mask(usage, []corev1.ResourceName{corev1.ResourcePods, corev1.ResourceRequestsMemory})
	fmt.Println(quota.ResourceNames(masked))
	// Output: [pods]
}

func ExampleIntersection() {
	hard := []corev1.ResourceName{"pods", "requests.cpu", "count/secrets", "pods"}
	charged := []corev1.ResourceName{"requests.cpu", "pods", "limits.cpu"}
	fmt.Println(quota.Intersection(hard, charged))
	fmt.Println(quota.Difference(hard, charged))
	// Output:
	// [pods requests.cpu]
	// [count/secrets]
}

// configMapCounter is a minimal Evaluator: every ConfigMap in a namespace
// counts once towards "count/configmaps". Real evaluators live in the
// evaluator and generic packages.
type configMapCounter struct {
	list func(namespace string) []*corev1.ConfigMap
}

const countConfigMaps corev1.ResourceName = "count/configmaps"

func (configMapCounter) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }
func (configMapCounter) GroupResource() schema.GroupResource {
	return schema.GroupResource{Resource: "configmaps"}
}
func (configMapCounter) Handles(a quota.Attributes) bool {
	return a.GetOperation() == admissionv1.Create
}
func (configMapCounter) Matches(q *corev1.ResourceQuota, _ runtime.Object) (bool, error) {
	_, ok := q.Status.Hard[countConfigMaps]
	return ok, nil
}
func (configMapCounter) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return nil, nil
}
func (configMapCounter) UncoveredQuotaScopes(_, _ []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return nil, nil
}
func (configMapCounter) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	return quota.Intersection(input, []corev1.ResourceName{countConfigMaps})
}
func (configMapCounter) Usage(runtime.Object) (corev1.ResourceList, error) {
	return corev1.ResourceList{countConfigMaps: resource.MustParse("1")}, nil
}
func (e configMapCounter) UsageStats(opts quota.UsageStatsOptions) (quota.UsageStats, error) {
	n := int64(len(e.list(opts.Namespace)))
	return quota.UsageStats{Used: corev1.ResourceList{countConfigMaps: *resource.NewQuantity(n, resource.DecimalSI)}}, nil
}

// oneEvaluator is a Registry that holds a single evaluator.
type oneEvaluator struct{ quota.Evaluator }

func (r oneEvaluator) Add(quota.Evaluator)    {}
func (r oneEvaluator) Remove(quota.Evaluator) {}
func (r oneEvaluator) Get(gr schema.GroupResource) quota.Evaluator {
	if gr == r.GroupResource() {
		return r.Evaluator
	}
	return nil
}
func (r oneEvaluator) List() []quota.Evaluator { return []quota.Evaluator{r.Evaluator} }

func ExampleCalculateUsage() {
	configMaps := map[string][]*corev1.ConfigMap{"team-a": {{}, {}, {}}}
	registry := oneEvaluator{configMapCounter{list: func(ns string) []*corev1.ConfigMap { return configMaps[ns] }}}

	hard := corev1.ResourceList{
		countConfigMaps:     resource.MustParse("10"),
		corev1.ResourcePods: resource.MustParse("20"), // no evaluator here charges pods
	}
	used, err := quota.CalculateUsage("team-a", nil, hard, registry, nil)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	for _, name := range quota.ResourceNames(used) {
		q := used[name]
		fmt.Printf("%s=%s\n", name, q.String())
	}
	// Output: count/configmaps=3
}

// ChargeRequest lets a caller keep running totals over many requests: each
// request is checked against the totals so far, and only the quotas it
// charges change.
func ExampleChargeRequest() {
	quotas := []corev1.ResourceQuota{{
		ObjectMeta: metav1.ObjectMeta{Name: "config", Namespace: "team-a"},
		Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{countConfigMaps: resource.MustParse("2")},
			Used: corev1.ResourceList{countConfigMaps: resource.MustParse("1")},
		},
	}}
	counter := configMapCounter{}
	for _, name := range []string{"a", "b"} {
		a := &quota.AttributesRecord{
			Operation: admissionv1.Create, Namespace: "team-a", Name: name,
			Resource: corev1.SchemeGroupVersion.WithResource("configmaps"),
			Object:   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}},
		}
		charges, err := quota.ChargeRequest(quotas, a, counter, nil)
		if err != nil {
			fmt.Println(name, "denied:", err)
			continue
		}
		for _, c := range charges {
			q := &quotas[c.Quota]
			q.Status.Used = quota.Add(q.Status.Used, c.Added)
			used := q.Status.Used[countConfigMaps]
			fmt.Println(name, "admitted; used", used.String())
		}
	}
	// Output:
	// a admitted; used 2
	// b denied: configmaps "b" is forbidden: exceeded quota: config, requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2
}
