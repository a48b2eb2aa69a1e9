package kube

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/cache"
	"github.com/quotakit/quotakit/clusterquota"
)

// DefaultClusterQuotaMaxSeries is [ClusterQuotaCollectorOptions.MaxSeries]
// when zero.
const DefaultClusterQuotaMaxSeries = 20000

// ClusterQuotaCollectorOptions configures a [ClusterQuotaCollector].
type ClusterQuotaCollectorOptions struct {
	// MaxSeries is the most series of quotakit_clusterquota_hard and
	// quotakit_clusterquota_used together that one scrape gives. Quotas
	// are taken in name order, each whole or not at all; the series of
	// the quotas past the bound are counted in
	// quotakit_clusterquota_series_dropped instead. Defaults to
	// [DefaultClusterQuotaMaxSeries]: 10,000 pairs of quota and resource,
	// 2,500 tenants of four resources. Raise it for more: 5,000 tenants
	// of six resources give 60,000 series.
	MaxSeries int
}

// ClusterQuotaCollector is a Prometheus collector of how full each
// ClusterQuota is, computed at each scrape from a cache of ClusterQuotas,
// as kube-state-metrics computes kube_resourcequota from its cache of
// ResourceQuotas:
//
//   - quotakit_clusterquota_hard{clusterquota, resource}: the limit
//     enforced, status.total.hard;
//   - quotakit_clusterquota_used{clusterquota, resource}: the usage
//     summed over every selected namespace, status.total.used;
//   - quotakit_clusterquota_series_dropped: the series of the two left
//     out of the scrape by [ClusterQuotaCollectorOptions.MaxSeries].
//
// A series is given for each resource of spec.quota.hard whose status
// holds a value: a quota the controller has not taken up yet gives none,
// and a resource dropped from spec.quota.hard stops at once. So the
// series number at most quotas × resources named in spec.quota.hard (at
// most [clusterquota.MaxResources] each), and MaxSeries bounds them.
// Quantities are given in the resource's unit: CPU in cores (1500m is
// 1.5), memory and storage in bytes.
//
// Two families rather than one with a type label (OpenShift's
// openshift_clusterresourcequota_usage{name, resource, type}, which is
// quotakit_clusterquota_hard or _used by the value of type): each family
// then means one thing, so that summing it over quotas is meaningful, and
// how full a tenant is reads quotakit_clusterquota_used /
// quotakit_clusterquota_hard with no label to ignore.
//
// Build one with [NewClusterQuotaCollector] and register it. It reads
// the cache under no lock of its own and is safe for concurrent use.
type ClusterQuotaCollector struct {
	store   cache.Store
	max     int
	hard    *prometheus.Desc
	used    *prometheus.Desc
	dropped *prometheus.Desc
}

var _ prometheus.Collector = (*ClusterQuotaCollector)(nil)

// NewClusterQuotaCollector returns a collector over store, the store of
// an informer of *clusterquota.ClusterQuota such as
// [Client.ClusterQuotaInformer]'s GetStore(). A nil store or a negative
// MaxSeries is an error.
func NewClusterQuotaCollector(store cache.Store, opts ClusterQuotaCollectorOptions) (*ClusterQuotaCollector, error) {
	if store == nil {
		return nil, errors.New("kube: NewClusterQuotaCollector: nil store")
	}
	if opts.MaxSeries < 0 {
		return nil, fmt.Errorf("kube: NewClusterQuotaCollector: negative MaxSeries %d", opts.MaxSeries)
	}
	if opts.MaxSeries == 0 {
		opts.MaxSeries = DefaultClusterQuotaMaxSeries
	}
	labels := []string{"clusterquota", "resource"}
	return &ClusterQuotaCollector{
		store: store,
		max:   opts.MaxSeries,
		hard: prometheus.NewDesc("quotakit_clusterquota_hard",
			"The limit a ClusterQuota enforces on a resource across the namespaces it selects (status.total.hard).", labels, nil),
		used: prometheus.NewDesc("quotakit_clusterquota_used",
			"The usage of a resource summed over the namespaces a ClusterQuota selects (status.total.used).", labels, nil),
		dropped: prometheus.NewDesc("quotakit_clusterquota_series_dropped",
			"Series of quotakit_clusterquota_hard and _used left out of the last scrape because they were over the bound on series.", nil, nil),
	}, nil
}

// Describe implements [prometheus.Collector].
func (c *ClusterQuotaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.hard
	ch <- c.used
	ch <- c.dropped
}

// Collect implements [prometheus.Collector]: it lists the store and
// sends the series of each quota, in name order, until MaxSeries.
func (c *ClusterQuotaCollector) Collect(ch chan<- prometheus.Metric) {
	var quotas []*clusterquota.ClusterQuota
	for _, obj := range c.store.List() {
		if cq, ok := obj.(*clusterquota.ClusterQuota); ok && cq != nil {
			quotas = append(quotas, cq)
		}
	}
	slices.SortFunc(quotas, func(a, b *clusterquota.ClusterQuota) int { return strings.Compare(a.Name, b.Name) })
	sent, dropped := 0, 0
	var series []prometheus.Metric
	for _, cq := range quotas {
		series = series[:0]
		names := make([]corev1.ResourceName, 0, len(cq.Spec.Quota.Hard))
		for r := range cq.Spec.Quota.Hard {
			names = append(names, r)
		}
		slices.Sort(names)
		for _, r := range names {
			if q, ok := cq.Status.Total.Hard[r]; ok {
				series = append(series, prometheus.MustNewConstMetric(c.hard, prometheus.GaugeValue, q.AsApproximateFloat64(), cq.Name, string(r)))
			}
			if q, ok := cq.Status.Total.Used[r]; ok {
				series = append(series, prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, q.AsApproximateFloat64(), cq.Name, string(r)))
			}
		}
		if sent+len(series) > c.max {
			dropped += len(series)
			continue
		}
		sent += len(series)
		for _, m := range series {
			ch <- m
		}
	}
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.GaugeValue, float64(dropped))
}
