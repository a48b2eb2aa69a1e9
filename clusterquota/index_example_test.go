package clusterquota_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/clusterquota"
)

// An Index fed as the event handlers of a ClusterQuota informer and a
// namespace informer feed it: each namespace's quotas are one lookup
// away, and each quota's namespaces too. A namespace's new labels count
// from the object looked up, before its event reaches the Index.
func ExampleIndex() {
	var x clusterquota.Index
	// A ClusterQuota informer's AddFunc and UpdateFunc call
	// SetClusterQuota, its DeleteFunc DeleteClusterQuota.
	teamA := &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a", Generation: 1},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("100")}},
		},
	}
	x.SetClusterQuota(teamA)
	// A namespace informer's handlers call SetNamespace and
	// DeleteNamespace.
	ns := func(name, tenant, rv string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Labels: map[string]string{"tenant": tenant}}}
	}
	x.SetNamespace(ns("a-dev", "a", "10"))
	x.SetNamespace(ns("a-prod", "a", "11"))
	x.SetNamespace(ns("b-dev", "b", "12"))

	fmt.Printf("a-dev: %q\n", x.Lookup(ns("a-dev", "a", "10")).Key)
	fmt.Printf("b-dev: %q\n", x.Lookup(ns("b-dev", "b", "12")).Key)
	fmt.Printf("b-dev relabelled, not yet fed: %q\n", x.Lookup(ns("b-dev", "a", "13")).Key)
	selected, _ := x.Namespaces(teamA)
	fmt.Println("team-a:", selected)
	// Output:
	// a-dev: "team-a"
	// b-dev: ""
	// b-dev relabelled, not yet fed: "team-a"
	// team-a: [a-dev a-prod]
}
