package clusterquota_test

import (
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/quotakit/quotakit/clusterquota"
)

// A tenant's quota selects its namespaces by label; a namespace of another
// tenant is not selected.
func ExampleClusterQuota_Selects() {
	cq := &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
			},
			Quota: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("50")}},
		},
	}
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "a-dev", Labels: map[string]string{"team": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b-dev", Labels: map[string]string{"team": "b"}}},
	} {
		ok, err := cq.Selects(ns)
		fmt.Println(ns.Name, ok, err)
	}
	// Output:
	// a-dev true <nil>
	// b-dev false <nil>
}

// A quota that selects nothing and asks for half a pod is refused with
// kube-apiserver's field errors.
func ExampleValidate() {
	cq := &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: clusterquota.ClusterQuotaSpec{
			Quota: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("500m")}},
		},
	}
	err := clusterquota.Validate(cq)
	var verr *clusterquota.ValidationError
	if errors.As(err, &verr) {
		for _, fe := range verr.Errors {
			fmt.Println(fe)
		}
	}
	// Output:
	// spec.selector: Required value: must restrict the selected namespaces: set labels, annotations or both
	// spec.quota.hard[pods]: Invalid value: "500m": must be an integer
}

// Quantities are bounded at MaxQuantity, 2^63-1. "100Ei", which
// resource.ParseQuantity caps at that bound, is valid; 1e19 is not, nor
// is 1e1000000, which Validate refuses without the million-digit
// arithmetic that every admission check would otherwise do with it.
func ExampleMaxQuantity() {
	for _, limit := range []string{"100Ei", "1e19", "1e1000000"} {
		cq := &clusterquota.ClusterQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
			Spec: clusterquota.ClusterQuotaSpec{
				Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
				Quota:    corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsStorage: resource.MustParse(limit)}},
			},
		}
		fmt.Printf("%s: %v\n", limit, clusterquota.Validate(cq))
	}
	// Output:
	// 100Ei: <nil>
	// 1e19: clusterquota: ClusterQuota.quota.quotakit.io "team-a" is invalid: spec.quota.hard[requests.storage]: Invalid value: "10e18": must be less than or equal to 9223372036854775807
	// 1e1000000: clusterquota: ClusterQuota.quota.quotakit.io "team-a" is invalid: spec.quota.hard[requests.storage]: Invalid value: must be less than or equal to 9223372036854775807
}

// The controller sets the per-namespace status from the usage of every
// selected namespace: idle namespaces and zero quantities are left out,
// entries are sorted, and the list is bounded.
func ExampleClusterQuotaStatus_SetNamespaceStatuses() {
	used := map[string]corev1.ResourceList{
		"a-prod": {corev1.ResourcePods: resource.MustParse("4"), corev1.ResourceRequestsCPU: resource.MustParse("0")},
		"a-dev":  {corev1.ResourcePods: resource.MustParse("2"), corev1.ResourceRequestsCPU: resource.MustParse("500m")},
		"a-idle": {corev1.ResourcePods: resource.MustParse("0")},
	}
	var status clusterquota.ClusterQuotaStatus
	if err := status.SetNamespaceStatuses(used); err != nil {
		fmt.Println(err)
		return
	}
	out, _ := json.Marshal(status.Namespaces)
	fmt.Println(string(out))
	fmt.Println("omitted:", status.NamespacesOmitted)
	// Output:
	// [{"namespace":"a-dev","status":{"used":{"pods":"2","requests.cpu":"500m"}}},{"namespace":"a-prod","status":{"used":{"pods":"4"}}}]
	// omitted: 0
}

// An OpenShift status lists every namespace; BoundStatus cuts it to the
// bounds and counts what it left out.
func ExampleBoundStatus() {
	var status clusterquota.ClusterQuotaStatus
	for i := range clusterquota.MaxNamespaceStatuses + 250 {
		status.Namespaces = append(status.Namespaces, clusterquota.ResourceQuotaStatusByNamespace{
			Namespace: fmt.Sprintf("project-%04d", i),
			Status:    corev1.ResourceQuotaStatus{Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}},
		})
	}
	if err := clusterquota.BoundStatus(&status); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(status.Namespaces), status.NamespacesOmitted, status.Namespaces[0].Namespace)
	// Output: 1000 250 project-0000
}

// A scheme with the ClusterQuota types decodes the objects the API server
// serves.
func ExampleAddToScheme() {
	scheme := runtime.NewScheme()
	if err := clusterquota.AddToScheme(scheme); err != nil {
		fmt.Println(err)
		return
	}
	data := []byte(`{"apiVersion":"quota.quotakit.io/v1alpha1","kind":"ClusterQuota","metadata":{"name":"team-a"},
		"spec":{"selector":{"annotations":{"tenant":"a"}},"quota":{"hard":{"pods":"50"}}}}`)
	obj, gvk, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	cq := obj.(*clusterquota.ClusterQuota)
	pods := cq.Spec.Quota.Hard[corev1.ResourcePods]
	fmt.Println(gvk.Kind, cq.Name, pods.String())
	// Output: ClusterQuota team-a 50
}

func ExampleResource() {
	fmt.Println(clusterquota.Resource(clusterquota.ResourcePlural))
	fmt.Println(clusterquota.SchemeGroupVersion.WithResource(clusterquota.ResourcePlural))
	// Output:
	// clusterquotas.quota.quotakit.io
	// quota.quotakit.io/v1alpha1, Resource=clusterquotas
}

func ExampleKind() {
	fmt.Println(clusterquota.Kind("ClusterQuota"))
	// Output: ClusterQuota.quota.quotakit.io
}

// DeepCopy gives a copy to modify, for an object that a cache shares.
func ExampleClusterQuota_DeepCopy() {
	shared := &clusterquota.ClusterQuota{Spec: clusterquota.ClusterQuotaSpec{
		Selector: clusterquota.ClusterQuotaSelector{AnnotationSelector: map[string]string{"tenant": "a"}},
	}}
	mine := shared.DeepCopy()
	mine.Spec.Selector.AnnotationSelector["tenant"] = "b"
	fmt.Println(shared.Spec.Selector.AnnotationSelector["tenant"], mine.Spec.Selector.AnnotationSelector["tenant"])
	// Output: a b
}

func ExampleValidateSpec() {
	cq := &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "b c"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}},
		},
	}
	fmt.Println(clusterquota.ValidateSpec(cq) != nil)
	cq.Spec.Selector.LabelSelector.MatchLabels["tenant"] = "team-a"
	fmt.Println(clusterquota.ValidateSpec(cq))
	// Output:
	// true
	// <nil>
}

func ExampleClusterQuotas() {
	fmt.Println(clusterquota.ClusterQuotas.GroupResource())
	// Output: clusterquotas.quota.quotakit.io
}
