// Command quotademo runs quotakit's ResourceQuota controller against the
// in-memory API of cache/cachetest, over many namespaces each holding four
// quotas (compute, object counts with services.loadbalancers and
// count/configmaps, a BestEffort-scoped quota and a PriorityClass
// scopeSelector quota), and churns the namespaces: pods, services and
// configmaps are created and deleted, pods finish, pods are deleted
// gracefully. It shows a kubectl get quota-style table and a progress line
// while it runs (refreshed in place on a terminal, plain lines otherwise),
// and at the end checks every quota's status against a recount from
// scratch of the API's objects, and prints the event rate and the
// controller's convergence latency. It exits non-zero if any quota is wrong.
//
// Creations are charged as a real cluster charges them: by admission,
// before the object is stored (here with quota.CheckRequest and a
// conflict-checked status write, the way kube-apiserver's quota admission
// does it). The controller recalculates on every change that moves usage
// and on admission's charges, keeps what admission charged ahead of the
// objects for a charge window (-charge-window, Options.ChargeWindow), so
// that no recalculation racing an admission write loses its charge, and
// recalculates everything at each full resync.
//
//	go run ./examples/quotademo -namespaces 50 -pods 20 -events 5000
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
)

var (
	podsGVR       = corev1.SchemeGroupVersion.WithResource("pods")
	servicesGVR   = corev1.SchemeGroupVersion.WithResource("services")
	configmapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
	quotasGVR     = corev1.SchemeGroupVersion.WithResource("resourcequotas")
)

// config is the size and pace of a run.
type config struct {
	// Namespaces is the number of namespaces, each with four quotas.
	Namespaces int
	// Pods is the number of pods each namespace starts with.
	Pods int
	// Events is the number of churn events; churn stops after Events or
	// Duration, whichever comes first.
	Events int
	// Duration is the longest time churn runs.
	Duration time.Duration
	// Rate is the number of churn events per second; 0 churns as fast as
	// the API answers.
	Rate int
	// Resync is the controller's full resync period.
	Resync time.Duration
	// ChargeWindow is how long the controller keeps what admission
	// charged that no object accounts for yet (Options.ChargeWindow).
	ChargeWindow time.Duration
	// Seed seeds the churn.
	Seed uint64
	// Live redraws the table and progress line in place (a terminal);
	// otherwise progress is printed as plain lines.
	Live bool
	// Rows is the number of quotas the table shows.
	Rows int
}

func main() {
	cfg := config{}
	flag.IntVar(&cfg.Namespaces, "namespaces", 50, "number of namespaces, each with four quotas")
	flag.IntVar(&cfg.Pods, "pods", 20, "pods per namespace at the start")
	flag.IntVar(&cfg.Events, "events", 5000, "churn events to make (creates, deletes, status and graceful-deletion updates)")
	flag.DurationVar(&cfg.Duration, "duration", 15*time.Second, "longest time to churn")
	flag.IntVar(&cfg.Rate, "rate", 500, "churn events per second; 0 for as fast as the API answers")
	flag.DurationVar(&cfg.Resync, "resync", 3*time.Second, "the controller's full resync period (Options.ResyncPeriod)")
	flag.DurationVar(&cfg.ChargeWindow, "charge-window", 2*time.Second, "how long the controller keeps a charge no object accounts for yet (Options.ChargeWindow)")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "seed of the random churn")
	flag.IntVar(&cfg.Rows, "rows", 12, "quotas shown in the table")
	flag.Parse()
	if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		cfg.Live = true
	}
	rep, err := run(context.Background(), os.Stdout, cfg)
	if err != nil {
		log.Print(err)
		os.Exit(1)
	}
	if rep.wrong > 0 {
		os.Exit(1)
	}
}

// report is what a run found.
type report struct {
	quotas, wrong int
}

// run builds the cluster, runs the controller, churns, checks and prints.
func run(ctx context.Context, out io.Writer, cfg config) (report, error) {
	if cfg.Namespaces < 1 || cfg.Pods < 0 || cfg.Events < 0 || cfg.Resync <= 0 || cfg.ChargeWindow <= 0 {
		return report{}, fmt.Errorf("quotademo: need -namespaces ≥ 1, -pods ≥ 0, -events ≥ 0, -resync > 0 and -charge-window > 0")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := newWorld(ctx, cfg)
	if err != nil {
		return report{}, err
	}
	defer w.close()
	header := fmt.Sprintf("quotademo: %d namespaces, %d quotas, %d pods, %d services, %d configmaps; controller resync every %v\n",
		cfg.Namespaces, len(w.quotaKeys), w.count(podsGVR), w.count(servicesGVR), w.count(configmapsGVR), cfg.Resync)
	fmt.Fprint(out, header)

	stop, err := w.startController(ctx)
	if err != nil {
		return report{}, err
	}
	defer stop()
	start := time.Now()
	if err := w.waitConverged(ctx, 30*time.Second); err != nil {
		return report{}, fmt.Errorf("quotademo: initial sync: %w", err)
	}
	synced := fmt.Sprintf("initial sync: every quota matches its recount after %v\n", time.Since(start).Round(time.Millisecond))
	fmt.Fprint(out, synced)

	view := newView(out, w, cfg, header+synced)
	view.start()
	churned, churnErr := w.churn(ctx)
	view.stop()
	if churnErr != nil {
		return report{}, churnErr
	}

	// Deletions the kubelet has not confirmed yet are confirmed now, so
	// that the final state holds no pod whose charge ends later.
	if err := w.confirmAllDeletions(ctx); err != nil {
		return report{}, err
	}
	end := time.Now()
	// The final check waits for a full resync after the churn, and for
	// two charge windows: a charge admission made for an object that did
	// not follow is held that long.
	settle := max(cfg.Resync, 2*cfg.ChargeWindow) + time.Second
	deadline := end.Add(2*settle + 10*time.Second)
	var wrong []string
	for {
		select {
		case <-ctx.Done():
			return report{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Since(end) < settle {
			continue
		}
		if wrong, err = w.recountFromScratch(ctx); err != nil {
			return report{}, err
		}
		if len(wrong) == 0 || time.Now().After(deadline) {
			break
		}
	}
	view.final()
	w.printSummary(out, churned, end.Sub(start))
	fmt.Fprintf(out, "final check, %v after the churn ended (at least one full resync): ", time.Since(end).Round(time.Millisecond))
	if len(wrong) > 0 {
		fmt.Fprintf(out, "%d of %d quotas WRONG:\n", len(wrong), len(w.quotaKeys))
		for _, s := range wrong {
			fmt.Fprintln(out, "  "+s)
		}
	} else {
		fmt.Fprintf(out, "all %d quotas match a from-scratch recount of the API's objects\n", len(w.quotaKeys))
	}
	return report{quotas: len(w.quotaKeys), wrong: len(wrong)}, nil
}
