package kube_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/kube"
)

// quotaWith returns a ClusterQuota name whose spec limits hard and whose
// status says hard and used.
func quotaWith(name string, hard, used map[string]string) *clusterquota.ClusterQuota {
	rl := func(m map[string]string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for r, q := range m {
			out[corev1.ResourceName(r)] = resource.MustParse(q)
		}
		return out
	}
	cq := &clusterquota.ClusterQuota{ObjectMeta: metav1.ObjectMeta{Name: name}}
	cq.Spec.Quota.Hard = rl(hard)
	cq.Status.Total = corev1.ResourceQuotaStatus{Hard: rl(hard), Used: rl(used)}
	return cq
}

func TestClusterQuotaCollector(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, cq := range []*clusterquota.ClusterQuota{
		quotaWith("team-a", map[string]string{"pods": "10", "requests.cpu": "4"}, map[string]string{"pods": "3", "requests.cpu": "1500m"}),
		// Not taken up by the controller yet: no status, no series.
		{ObjectMeta: metav1.ObjectMeta{Name: "team-new"}, Spec: clusterquota.ClusterQuotaSpec{Quota: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("1")}}}},
	} {
		if err := store.Add(cq); err != nil {
			t.Fatal(err)
		}
	}
	// A resource left in the status but gone from the spec gives no
	// series.
	stale := quotaWith("team-b", map[string]string{"requests.memory": "1Gi"}, map[string]string{"requests.memory": "512Mi"})
	stale.Status.Total.Hard["pods"] = resource.MustParse("5")
	if err := store.Add(stale); err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewClusterQuotaCollector(store, kube.ClusterQuotaCollectorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP quotakit_clusterquota_hard The limit a ClusterQuota enforces on a resource across the namespaces it selects (status.total.hard).
# TYPE quotakit_clusterquota_hard gauge
quotakit_clusterquota_hard{clusterquota="team-a",resource="pods"} 10
quotakit_clusterquota_hard{clusterquota="team-a",resource="requests.cpu"} 4
quotakit_clusterquota_hard{clusterquota="team-b",resource="requests.memory"} 1.073741824e+09
# HELP quotakit_clusterquota_series_dropped Series of quotakit_clusterquota_hard and _used left out of the last scrape because they were over the bound on series.
# TYPE quotakit_clusterquota_series_dropped gauge
quotakit_clusterquota_series_dropped 0
# HELP quotakit_clusterquota_used The usage of a resource summed over the namespaces a ClusterQuota selects (status.total.used).
# TYPE quotakit_clusterquota_used gauge
quotakit_clusterquota_used{clusterquota="team-a",resource="pods"} 3
quotakit_clusterquota_used{clusterquota="team-a",resource="requests.cpu"} 1.5
quotakit_clusterquota_used{clusterquota="team-b",resource="requests.memory"} 5.36870912e+08
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// The collector lints clean: names, help, units.
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("CollectAndLint = %v, %v", problems, err)
	}
}

// TestClusterQuotaCollectorBound: past MaxSeries, whole quotas are left
// out in name order, and counted.
func TestClusterQuotaCollectorBound(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for i := range 10 {
		// Two resources: four series each.
		cq := quotaWith(fmt.Sprintf("tenant-%02d", i), map[string]string{"pods": "10", "services": "2"}, map[string]string{"pods": "1", "services": "0"})
		if err := store.Add(cq); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		max, wantSeries, wantDropped int
	}{
		{40, 40, 0},
		{39, 36, 4},
		{10, 8, 32},
		{3, 0, 40},
	} {
		c, err := kube.NewClusterQuotaCollector(store, kube.ClusterQuotaCollectorOptions{MaxSeries: tt.max})
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		got := testutil.CollectAndCount(c, "quotakit_clusterquota_hard", "quotakit_clusterquota_used")
		dropped, err := testutil.GatherAndCount(reg, "quotakit_clusterquota_series_dropped")
		if err != nil || dropped != 1 {
			t.Fatalf("series_dropped: %d series, %v", dropped, err)
		}
		families, _ := reg.Gather()
		var droppedValue float64
		for _, f := range families {
			if f.GetName() == "quotakit_clusterquota_series_dropped" {
				droppedValue = f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		if got != tt.wantSeries || int(droppedValue) != tt.wantDropped {
			t.Errorf("MaxSeries %d: %d series, %v dropped; want %d and %d", tt.max, got, droppedValue, tt.wantSeries, tt.wantDropped)
		}
	}
}

func TestNewClusterQuotaCollectorErrors(t *testing.T) {
	if _, err := kube.NewClusterQuotaCollector(nil, kube.ClusterQuotaCollectorOptions{}); err == nil {
		t.Error("a nil store: no error")
	}
	if _, err := kube.NewClusterQuotaCollector(cache.NewStore(cache.MetaNamespaceKeyFunc), kube.ClusterQuotaCollectorOptions{MaxSeries: -1}); err == nil {
		t.Error("a negative MaxSeries: no error")
	}
}

// Expose how full each ClusterQuota is: register a collector over the
// store of the ClusterQuota informer (here a plain store).
func ExampleNewClusterQuotaCollector() {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	_ = store.Add(quotaWith("team-a", map[string]string{"pods": "10"}, map[string]string{"pods": "7"}))
	c, err := kube.NewClusterQuotaCollector(store, kube.ClusterQuotaCollectorOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	families, _ := reg.Gather()
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			fmt.Println(f.GetName(), labels, m.GetGauge().GetValue())
		}
	}
	// Output:
	// quotakit_clusterquota_hard [clusterquota=team-a resource=pods] 10
	// quotakit_clusterquota_series_dropped [] 0
	// quotakit_clusterquota_used [clusterquota=team-a resource=pods] 7
}
