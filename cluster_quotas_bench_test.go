package quotakit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/clusterquota"
)

// BenchmarkClusterQuotaRelabel measures how long a ClusterQuota's status
// takes to follow 1,000 namespaces of 10 pods each relabelled into its
// selection at once: from the first relabelling write until status.total
// counts all 10,000 pods and status.namespaces lists the 1,000; alone,
// and beside 5,000 other ClusterQuotas, each of a tenant of its own that
// no namespace belongs to. Run it with -benchtime=1x.
func BenchmarkClusterQuotaRelabel(b *testing.B) {
	for _, others := range []int{0, 5000} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) { benchmarkClusterQuotaRelabel(b, others) })
	}
}

func benchmarkClusterQuotaRelabel(b *testing.B, others int) {
	const namespaces, podsEach = 1000, 10
	var converged time.Duration
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		api := clusterAPI(b)
		for i := range namespaces {
			ns := fmt.Sprintf("ns-%04d", i)
			labelledNamespace(b, api, ns, "b")
			for j := range podsEach {
				podIn(b, api, ns, fmt.Sprintf("p%d", j))
			}
		}
		for i := range others {
			if _, err := api.Create(ctx, clusterQuotasGVR, &clusterquota.ClusterQuota{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("other-%d", i)}, Spec: clusterquota.ClusterQuotaSpec{
				Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": fmt.Sprintf("o-%d", i)}}},
				Quota:    corev1.ResourceQuotaSpec{Hard: rl("pods", "100")},
			}}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := api.Create(ctx, clusterQuotasGVR, &clusterquota.ClusterQuota{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: rl("pods", "100000")},
		}}); err != nil {
			b.Fatal(err)
		}
		c, err := quotakit.NewController(api, quotakit.Options{ClusterQuotas: true, ResyncPeriod: -1})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		for !c.HasSynced() {
			time.Sleep(10 * time.Millisecond)
		}
		// Every quota's first status written: the relabelling is timed,
		// not the first syncs.
		for written := 0; written <= others; time.Sleep(10 * time.Millisecond) {
			obj, err := api.List(ctx, clusterQuotasGVR, "", metav1.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			written = 0
			for _, q := range obj.(*clusterquota.ClusterQuotaList).Items {
				if len(q.Status.Total.Hard) > 0 {
					written++
				}
			}
		}
		time.Sleep(time.Second)
		start := time.Now()
		for i := range namespaces {
			relabel(b, api, fmt.Sprintf("ns-%04d", i), "a")
		}
		for {
			s := clusterStatus(b, api, "team-a")
			used := s.Total.Used["pods"]
			if used.Value() == namespaces*podsEach && len(s.Namespaces) == namespaces {
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatalf("not converged after a minute: used %s, %d namespaces", used.String(), len(s.Namespaces))
			}
			time.Sleep(time.Millisecond)
		}
		converged = time.Since(start)
		cancel()
		<-done
		api.Close()
	}
	b.ReportMetric(float64(converged.Milliseconds()), "ms-to-converge")
}
