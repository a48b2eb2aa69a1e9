package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/kube"
)

// addTenantView adds what the controller shows of ClusterQuotas besides
// their status, over the controller's own caches of them (no second
// copy): the gauges of how full each is (kube.ClusterQuotaCollector), in
// reg, and, with -applied-cluster-quotas, the writer of the
// AppliedClusterQuota copies that let a tenant read the quotas of its
// namespace (kube.AppliedQuotaWriter), as a runnable of m. The caches fill
// while the controller runs, on the leader only: a replica that is not
// leading serves no gauges, and one writer writes the copies. The writer
// writes through dyn, a dynamic client whose rate limiter is its own: a
// quota selecting many namespaces is as many writes, which must not hold
// up the controller's status writes.
func addTenantView(m trackingManager, cfg config, ctrl *quotakit.Controller, dyn dynamic.Interface, reg prometheus.Registerer) error {
	caches, ok := ctrl.ClusterQuotaCaches()
	if !ok {
		return errors.New("cluster quotas: the controller keeps none")
	}
	collector, err := kube.NewClusterQuotaCollector(caches.Quotas.GetStore(), kube.ClusterQuotaCollectorOptions{MaxSeries: cfg.clusterQuotaMaxSeries})
	if err != nil {
		return fmt.Errorf("cluster quota metrics: %w", err)
	}
	if err := reg.Register(collector); err != nil {
		return fmt.Errorf("cluster quota metrics: %w", err)
	}
	if !cfg.appliedClusterQuotas {
		return nil
	}
	w, err := kube.NewAppliedQuotaWriter(dyn, caches.Quotas, caches.Namespaces, caches.Index, kube.AppliedQuotaWriterOptions{Interval: cfg.appliedInterval})
	if err != nil {
		return fmt.Errorf("applied cluster quotas: %w", err)
	}
	return m.Add(leaderRunnable{w.Run})
}

// leaderRunnable runs its function on the leader only.
type leaderRunnable struct{ run func(context.Context) error }

func (r leaderRunnable) Start(ctx context.Context) error { return r.run(ctx) }
func (leaderRunnable) NeedLeaderElection() bool          { return true }
