package admission

import (
	"context"
	"errors"
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

	// reads shares concurrent live reads of one namespace.
	reads flights[[]corev1.ResourceQuota]

	mu sync.Mutex
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

// NewAccessor returns a [QuotaAccessor] that reads quotas as kube-apiserver's
// ResourceQuota admission does, but never from a cache that has not
// synced:
//
//   - from lister, the cache, once hasSynced reports that it has synced;
//   - live from client until then, for every namespace: a quota created
//     before the cache filled is enforced from the first request.
//     Concurrent live reads of a namespace share one call, and its
//     answer, even an empty one, is reused for LiveTTL. kube-apiserver
//     reads live only when its unsynced cache has no quota for the
//     namespace, and so uses a cache that holds some of a namespace's
//     quotas but not yet all of them; hasSynced is asked before the
//     lister, so a cache that syncs between the two calls is never taken
//     for a complete one;
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
//
// lister, hasSynced and client are required, as kube-apiserver requires
// them: without hasSynced the Accessor could not tell an empty namespace
// from a cache that has not listed it yet. With an informer they are
// its lister and its HasSynced; a cache that is complete from the start
// (a test's, a program's own map) passes a func that returns true. An
// Accessor missing any of them answers every call with an error.
func NewAccessor(lister QuotaLister, hasSynced func() bool, client QuotaClient, opts AccessorOptions) *Accessor {
	if opts.LiveTTL <= 0 {
		opts.LiveTTL = 30 * time.Second
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = 100
	}
	return &Accessor{
		lister:    lister,
		client:    client,
		hasSynced: hasSynced,
		liveTTL:   opts.LiveTTL,
		live:      lru.New(opts.CacheSize),
		own:       lru.New(opts.CacheSize),
		stale:     make(map[string]struct{}),
	}
}

// GetQuotas returns copies of the quotas of namespace.
func (a *Accessor) GetQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	if a.lister == nil || a.client == nil || a.hasSynced == nil {
		return nil, errNotConfigured
	}
	// Sync first: a cache whose first list lands between the two calls
	// would otherwise be read empty and taken as synced.
	synced := a.hasSynced()
	var cached []*corev1.ResourceQuota
	if synced {
		var err error
		if cached, err = a.lister(namespace); err != nil {
			return nil, err
		}
	}
	var err error
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
	case !synced:
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
	if a.lister == nil || a.client == nil || a.hasSynced == nil {
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
	items, err := a.reads.do(ctx, "fresh/"+namespace, func() ([]corev1.ResourceQuota, error) {
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

var errNotConfigured = errors.New("admission: Accessor needs a lister, HasSynced and a client")

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
	items, err := a.reads.do(ctx, "ttl/"+namespace, func() ([]corev1.ResourceQuota, error) {
		return a.client.ListQuotas(ctx, namespace)
	})
	if err == nil {
		a.live.Add(namespace, liveEntry{expiry: time.Now().Add(a.liveTTL), items: items})
	}
	return items, err
}
