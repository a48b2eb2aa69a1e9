package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/kube"
)

// tenantView is what the controller shows of ClusterQuotas besides their
// status: the gauges of how full each is (kube.ClusterQuotaCollector), and,
// with -applied-cluster-quotas, the AppliedClusterQuota copies that let a
// tenant read the quotas of its namespace (kube.AppliedQuotaWriter). It
// runs on the leader only, with the controller: its informers of
// ClusterQuotas and namespaces start when the replica is elected, so the
// gauges are served by the leader (a replica that is not leading serves
// none), and one writer writes the copies.
type tenantView struct {
	quotas, namespaces *cache.SharedIndexInformer
	// writer is nil without -applied-cluster-quotas.
	writer *kube.AppliedQuotaWriter
}

// newTenantView builds the informers over client, registers the gauges in
// reg, and, with -applied-cluster-quotas, the writer of the copies over
// dyn, a dynamic client whose rate limiter is its own: a quota selecting
// many namespaces is as many writes, which must not hold up the
// controller's status writes.
func newTenantView(cfg config, client *kube.Client, dyn dynamic.Interface, reg prometheus.Registerer) (*tenantView, error) {
	v := &tenantView{quotas: client.ClusterQuotaInformer(), namespaces: client.NamespaceInformer()}
	collector, err := kube.NewClusterQuotaCollector(v.quotas.GetStore(), kube.ClusterQuotaCollectorOptions{MaxSeries: cfg.clusterQuotaMaxSeries})
	if err != nil {
		return nil, fmt.Errorf("cluster quota metrics: %w", err)
	}
	if err := reg.Register(collector); err != nil {
		return nil, fmt.Errorf("cluster quota metrics: %w", err)
	}
	if !cfg.appliedClusterQuotas {
		return v, nil
	}
	index, err := kube.ClusterQuotaIndex(v.quotas, v.namespaces)
	if err != nil {
		return nil, fmt.Errorf("applied cluster quotas: %w", err)
	}
	if v.writer, err = kube.NewAppliedQuotaWriter(dyn, v.quotas, v.namespaces, index, kube.AppliedQuotaWriterOptions{Interval: cfg.appliedInterval}); err != nil {
		return nil, fmt.Errorf("applied cluster quotas: %w", err)
	}
	return v, nil
}

// Start runs the informers and the writer until ctx is done, and returns
// once they have stopped: the manager calls it on the leader.
func (v *tenantView) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { v.quotas.Run(ctx) })
	wg.Go(func() { v.namespaces.Run(ctx) })
	if v.writer == nil {
		<-ctx.Done()
		return nil
	}
	return v.writer.Run(ctx)
}

// NeedLeaderElection reports true: one replica writes the copies and
// serves the gauges.
func (v *tenantView) NeedLeaderElection() bool { return true }
