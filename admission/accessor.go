package admission

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/lru"
)

// QuotaLister returns the cached ResourceQuotas of namespace, typically
// from an informer's lister:
//
//	func(ns string) ([]*corev1.ResourceQuota, error) { return lister.ResourceQuotas(ns).List(labels.Everything()) }
//
// The accessor never modifies what it returns. It must be safe for
// concurrent use.
type QuotaLister func(namespace string) ([]*corev1.ResourceQuota, error)

// QuotaClient is what [NewAccessor] needs of an API client: a live list of
// a namespace's quotas and the status write. A client-go clientset
// satisfies it with two one-line methods. It must be safe for concurrent
// use.
type QuotaClient interface {
	// ListQuotas lists the ResourceQuotas of namespace from the API server.
	ListQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error)
	// UpdateQuotaStatus writes q's status through the status subresource,
	// with q's resourceVersion as a precondition, and returns the quota as
	// stored.
	UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error)
}

// AccessorOptions configures [NewAccessor]. The zero value means
// kube-apiserver's defaults.
type AccessorOptions struct {
	// HasSynced reports whether the lister's cache has synced. Until it
	// has, a namespace for which the lister has no quota is read live.
	// Defaults to a cache that has always synced: no live reads.
	HasSynced func() bool
	// LiveTTL is how long a live read of a namespace is reused. Defaults to
	// 30 seconds.
	LiveTTL time.Duration
	// CacheSize bounds the namespaces whose live reads, and the quotas whose
	// own writes, are remembered (least recently used first out). Defaults
	// to 100.
	CacheSize int
}

// Accessor is the [QuotaAccessor] of [NewAccessor]. It is safe for
// concurrent use.
type Accessor struct {
	lister    QuotaLister
	client    QuotaClient
	hasSynced func() bool
	liveTTL   time.Duration

	// live holds a liveEntry per namespace.
	live *lru.Cache
	// own holds this process's last successful status write of each quota,
	// by namespace/name.
	own *lru.Cache

	mu sync.Mutex
	// inflight deduplicates concurrent live reads of one namespace.
	// guarded by mu
	inflight map[string]*liveCall
	// stale holds the namespaces where a status write conflicted since
	// their last live read: the next read of each is live.
	// guarded by mu
	stale map[string]struct{}
}

var _ QuotaAccessor = (*Accessor)(nil)

type liveEntry struct {
	expiry time.Time
	items  []corev1.ResourceQuota
}

type liveCall struct {
	done  chan struct{}
	items []corev1.ResourceQuota
	err   error
}

// NewAccessor returns a [QuotaAccessor] that reads quotas as kube-apiserver's
// ResourceQuota admission does:
//
//   - from lister, the cache;
//   - live from client when the lister has none for the namespace and has
//     not synced (a quota created before the cache filled is still
//     enforced); concurrent live reads of a namespace share one call, and
//     its answer, even an empty one, is reused for LiveTTL;
//   - with each quota replaced by this process's own last write of it when
//     that write has a newer resourceVersion, so that a cache lagging
//     behind the Evaluator's writes does not cause a conflict per batch;
//   - live, after a status write of the namespace conflicted: another
//     writer (another replica, kube-apiserver's own plugin, the
//     controller) changed the quota, and the cache, which has not shown
//     that change yet, would have the retry conflict on the same
//     resourceVersion again. kube-apiserver re-reads its cache, and its
//     retries are often spent that way; a live read that finds newer
//     versions also remembers them, as own writes are.
//
// Once the cache has synced there is no live read: a quota created moments
// ago and not yet in the cache is not seen, as upstream. Resource versions
// are compared as integers, as etcd's are; where one is not an integer the
// cached quota is used (upstream panics).
func NewAccessor(lister QuotaLister, client QuotaClient, opts AccessorOptions) *Accessor {
	if opts.LiveTTL <= 0 {
		opts.LiveTTL = 30 * time.Second
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = 100
	}
	if opts.HasSynced == nil {
		opts.HasSynced = func() bool { return true }
	}
	return &Accessor{
		lister:    lister,
		client:    client,
		hasSynced: opts.HasSynced,
		liveTTL:   opts.LiveTTL,
		live:      lru.New(opts.CacheSize),
		own:       lru.New(opts.CacheSize),
		inflight:  make(map[string]*liveCall),
		stale:     make(map[string]struct{}),
	}
}

// GetQuotas returns copies of the quotas of namespace.
func (a *Accessor) GetQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	if a.lister == nil || a.client == nil {
		return nil, errNotConfigured
	}
	cached, err := a.lister(namespace)
	if err != nil {
		return nil, err
	}
	var items []corev1.ResourceQuota
	a.mu.Lock()
	_, stale := a.stale[namespace]
	// A conflict during the read marks the namespace again.
	delete(a.stale, namespace)
	a.mu.Unlock()
	switch {
	case stale:
		if items, err = a.freshQuotas(ctx, namespace); err != nil {
			a.markStale(namespace)
			return nil, err
		}
	case len(cached) == 0 && !a.hasSynced():
		if items, err = a.liveQuotas(ctx, namespace); err != nil {
			return nil, err
		}
	default:
		items = make([]corev1.ResourceQuota, 0, len(cached))
		for _, q := range cached {
			if q != nil {
				items = append(items, *q)
			}
		}
	}
	out := make([]corev1.ResourceQuota, len(items))
	for i := range items {
		if stale {
			// Newer than anything remembered: freshQuotas kept them.
			items[i].DeepCopyInto(&out[i])
			continue
		}
		a.newest(&items[i]).DeepCopyInto(&out[i])
	}
	return out, nil
}

// UpdateQuotaStatus writes q's status through the client and remembers the
// stored quota for later reads. After a conflict, the next read of q's
// namespace is live.
func (a *Accessor) UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	if a.lister == nil || a.client == nil {
		return nil, errNotConfigured
	}
	out, err := a.client.UpdateQuotaStatus(ctx, q)
	if err != nil {
		if apierrors.IsConflict(err) {
			a.markStale(q.Namespace)
		}
		return nil, err
	}
	if out != nil && out.ResourceVersion != "" {
		a.own.Add(out.Namespace+"/"+out.Name, out.DeepCopy())
	}
	return out, nil
}

// markStale has the next read of namespace be live.
func (a *Accessor) markStale(namespace string) {
	a.mu.Lock()
	a.stale[namespace] = struct{}{}
	a.mu.Unlock()
}

// freshQuotas reads the quotas of namespace live, sharing the call with
// concurrent fresh readers but never reusing an earlier answer, and
// remembers every quota newer than what was known of it.
func (a *Accessor) freshQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	items, err := a.call(ctx, "fresh/"+namespace, func() ([]corev1.ResourceQuota, error) {
		return a.client.ListQuotas(ctx, namespace)
	})
	if err != nil {
		return nil, err
	}
	for i := range items {
		q := &items[i]
		if q.ResourceVersion == "" {
			continue
		}
		key := q.Namespace + "/" + q.Name
		if v, ok := a.own.Get(key); ok && !newer(q.ResourceVersion, v.(*corev1.ResourceQuota).ResourceVersion) {
			continue
		}
		a.own.Add(key, q.DeepCopy())
	}
	return items, nil
}

var errNotConfigured = errors.New("admission: Accessor needs a lister and a client")

// newest returns q, or this process's own write of q when it is newer. An
// own write that is not newer is forgotten: the cache has caught up.
func (a *Accessor) newest(q *corev1.ResourceQuota) *corev1.ResourceQuota {
	key := q.Namespace + "/" + q.Name
	v, ok := a.own.Get(key)
	if !ok {
		return q
	}
	mine := v.(*corev1.ResourceQuota)
	if newer(mine.ResourceVersion, q.ResourceVersion) {
		return mine
	}
	a.own.Remove(key)
	return q
}

// newer reports whether resource version a is greater than b, both read
// as unsigned integers (an empty version is 0). Versions that are not
// integers are never newer.
func newer(a, b string) bool {
	parse := func(s string) (uint64, bool) {
		if s == "" {
			return 0, true
		}
		n, err := strconv.ParseUint(s, 10, 64)
		return n, err == nil
	}
	av, ok1 := parse(a)
	bv, ok2 := parse(b)
	return ok1 && ok2 && av > bv
}

// liveQuotas returns the quotas of namespace from a live read at most
// LiveTTL old, sharing one call among concurrent readers.
func (a *Accessor) liveQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	if v, ok := a.live.Get(namespace); ok {
		if e := v.(liveEntry); time.Now().Before(e.expiry) {
			return e.items, nil
		}
	}
	items, err := a.call(ctx, "ttl/"+namespace, func() ([]corev1.ResourceQuota, error) {
		return a.client.ListQuotas(ctx, namespace)
	})
	if err == nil {
		a.live.Add(namespace, liveEntry{expiry: time.Now().Add(a.liveTTL), items: items})
	}
	return items, err
}

// call runs list once for all concurrent callers with key, and returns
// its answer to each.
func (a *Accessor) call(ctx context.Context, key string, list func() ([]corev1.ResourceQuota, error)) (items []corev1.ResourceQuota, err error) {
	a.mu.Lock()
	c, ok := a.inflight[key]
	if !ok {
		c = &liveCall{done: make(chan struct{})}
		a.inflight[key] = c
	}
	a.mu.Unlock()
	if ok {
		select {
		case <-c.done:
			return c.items, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer func() {
		// Also when ListQuotas panics: the readers waiting on this call
		// must not wait for ever.
		if r := recover(); r != nil {
			c.items, c.err = nil, fmt.Errorf("admission: listing the quotas (%s) panicked: %v", key, r)
			items, err = nil, c.err
		}
		a.mu.Lock()
		delete(a.inflight, key)
		a.mu.Unlock()
		close(c.done)
	}()
	c.items, c.err = list()
	return c.items, c.err
}
