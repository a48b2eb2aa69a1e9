// Command clusterquota shows quota across namespaces on the in-memory API
// of cache/cachetest: a tenant of three namespaces under one ClusterQuota
// of 5 pods, enforced by the admission engine and kept by the controller.
//
//	go run ./examples/clusterquota
//
// It creates pods round the tenant's namespaces until the cluster quota
// refuses them, prints each answer, the quota's status (the total and each
// namespace's share), then moves one namespace out of the tenant and
// prints the status again: its pods no longer count.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/admission"
	"github.com/quotakit/quotakit/admission/admissiontest"
	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/cache/cachetest"
	"github.com/quotakit/quotakit/clusterquota"
	"github.com/quotakit/quotakit/quota"
)

var (
	clusterQuotas = clusterquota.SchemeGroupVersion.WithResource("clusterquotas")
	namespaces    = corev1.SchemeGroupVersion.WithResource("namespaces")
	pods          = corev1.SchemeGroupVersion.WithResource("pods")
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// api is the in-memory API; admissiontest.Client serves it as the
// admission engine's ClusterQuotaClient and namespace getter.
type api struct {
	*cachetest.Server
	admissiontest.Client
}

// index returns the clusterquota.Index that admission reads, kept from
// the events of an informer of ClusterQuotas and one of namespaces (what
// kube.ClusterQuotaIndex does over client-go), and the informers, to run.
func (a api) index() (*clusterquota.Index, []*cache.SharedIndexInformer, error) {
	quotas := cache.NewSharedIndexInformer(a.ListerWatcher(clusterQuotas, ""), &clusterquota.ClusterQuota{}, cache.SharedIndexInformerOptions{})
	nss := cache.NewSharedIndexInformer(a.ListerWatcher(namespaces, ""), &corev1.Namespace{}, cache.SharedIndexInformerOptions{})
	x := &clusterquota.Index{}
	reg, err := quotas.AddEventHandler(cache.ResourceEventHandlerFuncs[*clusterquota.ClusterQuota]{
		AddFunc:    func(cq *clusterquota.ClusterQuota, _ bool) { x.SetClusterQuota(cq) },
		UpdateFunc: func(_, cq *clusterquota.ClusterQuota) { x.SetClusterQuota(cq) },
		DeleteFunc: func(d cache.DeletedObject[*clusterquota.ClusterQuota]) { x.DeleteClusterQuota(d.Key) },
	})
	if err != nil {
		return nil, nil, err
	}
	x.AddSynced(reg.HasSynced)
	if reg, err = nss.AddEventHandler(cache.ResourceEventHandlerFuncs[metav1.Object]{
		AddFunc:    func(ns metav1.Object, _ bool) { x.SetNamespace(ns) },
		UpdateFunc: func(_, ns metav1.Object) { x.SetNamespace(ns) },
		DeleteFunc: func(d cache.DeletedObject[metav1.Object]) { x.DeleteNamespace(d.Key) },
	}); err != nil {
		return nil, nil, err
	}
	x.AddSynced(reg.HasSynced)
	return x, []*cache.SharedIndexInformer{quotas, nss}, nil
}

// hasSynced reports that the namespace getter has synced: it reads the
// API itself. A webhook passes its informers' HasSynced.
func (a api) hasSynced() bool { return true }

func run(ctx context.Context, out io.Writer) error {
	server := cachetest.New(cachetest.Options{})
	a := api{server, admissiontest.New(server)}
	defer a.Close()
	if err := admissiontest.RegisterClusterQuotas(server); err != nil {
		return err
	}
	tenant := []string{"team-a-dev", "team-a-test", "team-a-prod"}
	for _, ns := range tenant {
		if _, err := a.Create(ctx, namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"tenant": "team-a"}}}); err != nil {
			return err
		}
	}
	hard := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("5")}
	if _, err := a.Create(ctx, clusterQuotas, &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "team-a"}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: hard},
		},
	}); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A short charge window: a charge the controller cannot yet tell
	// from one whose pod is on its way is held that long.
	controller, err := quotakit.NewController(a, quotakit.Options{ClusterQuotas: true, StartGrace: -1, ChargeWindow: time.Second})
	if err != nil {
		return err
	}
	index, informers, err := a.index()
	if err != nil {
		return err
	}
	engine, err := admission.NewEvaluator(admission.NewClusterAccessor(nil, index, a.Namespace, a.hasSynced, a), admission.Options{})
	if err != nil {
		return err
	}
	done := make(chan struct{}, 2+len(informers))
	go func() { _ = controller.Run(ctx); done <- struct{}{} }()
	go func() { _ = engine.Run(ctx); done <- struct{}{} }()
	for _, inf := range informers {
		go func() { inf.Run(ctx); done <- struct{}{} }()
	}
	defer func() {
		cancel()
		for range 2 + len(informers) {
			<-done
		}
	}()

	// The controller writes status.total.hard first: until then the quota
	// is not enforced, as a ResourceQuota without status.hard.
	if err := wait(ctx, a, func(s clusterquota.ClusterQuotaStatus) bool { return len(s.Total.Hard) > 0 }); err != nil {
		return err
	}
	for i := range 7 {
		ns := tenant[i%len(tenant)]
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pod-%d", i)}}
		err := engine.Evaluate(ctx, &quota.AttributesRecord{Operation: admissionv1.Create, Object: pod, Resource: pods, Namespace: ns, Name: pod.Name})
		switch {
		case err == nil:
			if _, err := a.Create(ctx, pods, pod); err != nil {
				return err
			}
			fmt.Fprintf(out, "%s/%s: admitted\n", ns, pod.Name)
		case apierrors.IsForbidden(err):
			fmt.Fprintf(out, "%s/%s: %v\n", ns, pod.Name, err)
		default:
			return err
		}
	}
	if err := wait(ctx, a, func(s clusterquota.ClusterQuotaStatus) bool { return len(s.Namespaces) == 3 && settled(s) }); err != nil {
		return err
	}
	printStatus(ctx, out, a)

	// team-a-test leaves the tenant: its 2 pods no longer count.
	obj, err := a.Get(ctx, namespaces, "", "team-a-test")
	if err != nil {
		return err
	}
	ns := obj.(*corev1.Namespace)
	ns.Labels["tenant"] = "team-b"
	if _, err := a.Update(ctx, namespaces, ns); err != nil {
		return err
	}
	fmt.Fprintln(out, "team-a-test moved to team-b")
	if err := wait(ctx, a, func(s clusterquota.ClusterQuotaStatus) bool { return len(s.Namespaces) == 2 && settled(s) }); err != nil {
		return err
	}
	printStatus(ctx, out, a)
	return nil
}

// settled reports whether the total is the sum of the namespaces' usage:
// every pod admitted has reached the controller, and no charge is held.
func settled(s clusterquota.ClusterQuotaStatus) bool {
	var sum resource.Quantity
	for _, e := range s.Namespaces {
		sum.Add(e.Status.Used[corev1.ResourcePods])
	}
	used := s.Total.Used[corev1.ResourcePods]
	return used.Cmp(sum) == 0
}

// wait polls the ClusterQuota's status until ok holds.
func wait(ctx context.Context, a api, ok func(clusterquota.ClusterQuotaStatus) bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		obj, err := a.Get(ctx, clusterQuotas, "", "team-a")
		if err != nil {
			return err
		}
		if ok(obj.(*clusterquota.ClusterQuota).Status) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("clusterquota: the status did not settle: %+v", obj.(*clusterquota.ClusterQuota).Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// printStatus prints the ClusterQuota's status as kubectl describe would.
func printStatus(ctx context.Context, out io.Writer, a api) {
	obj, err := a.Get(ctx, clusterQuotas, "", "team-a")
	if err != nil {
		fmt.Fprintln(out, err)
		return
	}
	s := obj.(*clusterquota.ClusterQuota).Status
	used, hard := s.Total.Used[corev1.ResourcePods], s.Total.Hard[corev1.ResourcePods]
	var parts []string
	for _, e := range s.Namespaces {
		n := e.Status.Used[corev1.ResourcePods]
		parts = append(parts, e.Namespace+"="+n.String())
	}
	fmt.Fprintf(out, "team-a: pods %s/%s (%s)\n", used.String(), hard.String(), strings.Join(parts, ", "))
}
