package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/go-logr/logr"

	"github.com/quotakit/quotakit/clusterquota"
)

// ClusterQuotaPrefix begins the name of the ResourceQuota a
// [ClusterAccessor] makes of a ClusterQuota: "clusterquota/<name>". No
// ResourceQuota can have that name (a name holds no slash), so the two
// kinds never mix, and denial messages name the cluster quota as such:
// "exceeded quota: clusterquota/team-a, requested: …".
const ClusterQuotaPrefix = "clusterquota/"

// NamespaceGetter returns the cached namespace called name, or an error
// (apierrors.IsNotFound when the cache has none). It must be safe for
// concurrent use.
type NamespaceGetter func(name string) (*corev1.Namespace, error)

// ClusterQuotaClient is what [NewClusterAccessor] needs of an API client.
// It must be safe for concurrent use.
type ClusterQuotaClient interface {
	// ListClusterQuotas lists the ClusterQuotas from the API server. The
	// accessor lists only until its caches have synced.
	ListClusterQuotas(ctx context.Context) ([]clusterquota.ClusterQuota, error)
	// GetClusterQuota reads the ClusterQuota called name from the API
	// server (apierrors.IsNotFound when there is none). The accessor
	// reads a cluster quota live after a status write of it conflicted,
	// that one quota only.
	GetClusterQuota(ctx context.Context, name string) (*clusterquota.ClusterQuota, error)
	// UpdateClusterQuotaStatus writes cq's status through the status
	// subresource, with cq's resourceVersion as a precondition (a
	// Conflict error when it changed), and returns the object as stored.
	UpdateClusterQuotaStatus(ctx context.Context, cq *clusterquota.ClusterQuota) (*clusterquota.ClusterQuota, error)
}

// ClusterAccessor is the [QuotaAccessor] of [NewClusterAccessor]. It is
// safe for concurrent use.
type ClusterAccessor struct {
	namespaced QuotaAccessor
	index      *clusterquota.Index
	namespaces NamespaceGetter
	hasSynced  func() bool
	client     ClusterQuotaClient

	// live shares concurrent live lists of the cluster quotas, each made
	// an Index of its own; gets concurrent live reads of one.
	live flights[*clusterquota.Index]
	gets flights[*clusterquota.ClusterQuota]
	// readHook, set by tests only, runs between the two reads of
	// [ClusterAccessor.newestOf].
	readHook func()
	// reported is the index's InvalidVersions when the invalid quotas
	// were last logged.
	reported atomic.Uint64

	mu sync.Mutex
	// newest holds, by name, the newest version of each ClusterQuota this
	// process wrote or read live, newer than the index may be.
	// guarded by mu
	newest map[string]*clusterquota.ClusterQuota
	// stale holds, by name, the ClusterQuotas whose status write
	// conflicted, each with the number of that conflict: the next read
	// of each reads it live, and clears the mark unless another conflict
	// marked it again meanwhile.
	// guarded by mu
	stale     map[string]uint64
	conflicts uint64
	// logged holds, by name, the invalid version of each quota logged.
	// guarded by mu
	logged map[string]*clusterquota.ClusterQuota
}

var _ QuotaAccessor = (*ClusterAccessor)(nil)

// NewClusterAccessor returns a [QuotaAccessor] that adds to the quotas
// namespaced returns (nil: none) every ClusterQuota that selects the
// request's namespace, as a ResourceQuota named [ClusterQuotaPrefix] plus
// its name: its spec.quota as spec, its status.total as status, and its
// resourceVersion. An [Evaluator] over it checks a request against the
// namespace's quotas and the cluster quotas together, in one batch, with
// kube-apiserver's checks and messages, as OpenShift's
// ClusterResourceQuota admission does.
//
// index holds the cluster quotas: a [clusterquota.Index] fed from the
// event handlers of an informer of ClusterQuotas and, for one map read
// per lookup, of one of namespaces (kube.ClusterQuotaIndex wires both).
// The cluster quotas of a namespace are found by one lookup in it, for
// the batch key ([ClusterAccessor.SharedKey]) as for the quotas
// ([ClusterAccessor.GetQuotas]), never by going through every cluster
// quota: a request costs the same with 100 cluster quotas or 5,000, and
// a request to a namespace no cluster quota selects costs what it costs
// with none. The lookup is made with the namespace object the getter
// returns, and is never answered from a mapping older than it. Memory:
// the index's (about 750 bytes a cluster quota and 400 a namespace, see
// [clusterquota.Index]), and a copy of each cluster quota this process
// wrote or read live, until the index holds that version or a newer one.
//
// A charge to a cluster quota is a write of its status.total, with the
// resourceVersion the check was made against as a precondition; so any
// number of Evaluators (webhook replicas) over one API admit exactly what
// fits, as for ResourceQuotas, whether the requests come from one
// selected namespace or many. A conflict has the next read of the
// cluster quota that conflicted get it live (that one quota, never a
// list of them all), and the ClusterQuotas this process wrote or read
// live stand in for older versions in the index. The per-namespace
// entries of status.namespaces are the quota controller's: admission
// writes only the total.
//
// # Edges
//
//   - Exact from the first request: hasSynced reports whether the
//     informers behind index and namespaces have both synced (required,
//     as for [NewAccessor]), and the index's own HasSynced whether its
//     event handlers have caught up with them. Until both report true,
//     the cluster quotas are listed live from client for every batch
//     (concurrent batches share a list), never read from an index that
//     may not hold them yet; hasSynced is asked before the index is read.
//   - A namespace the getter does not know (created moments ago, not yet
//     cached) is not checked as unselected: its requests are refused with
//     a 429 and a Retry-After of one second, which kube-apiserver passes
//     on and client-go retries by itself.
//   - One bad object harms only itself: a cluster quota whose spec fails
//     [clusterquota.ValidateSpec] (one stored before the CRD rejected
//     such specs, or written straight to etcd), or whose selector cannot
//     be evaluated, is skipped. It limits nothing while it is invalid,
//     which is the lesser harm than failing every request of every
//     namespace; each version found invalid is logged at error level
//     once, [ClusterAccessor.Invalid] lists the quotas skipped (a
//     metric), and the controller sets the quota's Valid condition to
//     False.
func NewClusterAccessor(namespaced QuotaAccessor, index *clusterquota.Index, namespaces NamespaceGetter, hasSynced func() bool, client ClusterQuotaClient) *ClusterAccessor {
	return &ClusterAccessor{
		namespaced: namespaced,
		index:      index,
		namespaces: namespaces,
		hasSynced:  hasSynced,
		client:     client,
		newest:     map[string]*clusterquota.ClusterQuota{},
		stale:      map[string]uint64{},
		logged:     map[string]*clusterquota.ClusterQuota{},
	}
}

var errClusterNotConfigured = errors.New("admission: ClusterAccessor needs a ClusterQuota index, a namespace getter, HasSynced and a client")

// configured reports whether every required part was given.
func (a *ClusterAccessor) configured() bool {
	return a.index != nil && a.namespaces != nil && a.hasSynced != nil && a.client != nil
}

// Invalid returns the names of the cluster quotas that reads skip because
// their spec is invalid, sorted: each limits nothing until it is fixed.
func (a *ClusterAccessor) Invalid() []string {
	if a.index == nil {
		return nil
	}
	var out []string
	for _, q := range a.index.Invalid() {
		out = append(out, q.Quota.Name)
	}
	return out
}

// GetQuotas returns the namespaced quotas of namespace and a ResourceQuota
// for each ClusterQuota that selects it.
func (a *ClusterAccessor) GetQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	if !a.configured() {
		return nil, errClusterNotConfigured
	}
	var out []corev1.ResourceQuota
	if a.namespaced != nil {
		var err error
		if out, err = a.namespaced.GetQuotas(ctx, namespace); err != nil {
			return nil, err
		}
	}
	ns, err := a.namespaces(namespace)
	if err != nil {
		return nil, apierrors.NewTooManyRequests(fmt.Sprintf("admission: the cluster quotas of namespace %q cannot be told yet: %v", namespace, err), 1)
	}
	// Sync first, as NewAccessor's GetQuotas does.
	index := a.index
	if !a.hasSynced() || !index.HasSynced() {
		if index, err = a.listLive(ctx); err != nil {
			return nil, err
		}
	}
	a.reportInvalid(ctx, index)
	for _, name := range index.Lookup(ns).Names {
		cq, err := a.newestOf(ctx, index, name, ns)
		if err != nil {
			return nil, err
		}
		if cq != nil {
			out = append(out, asResourceQuota(cq, namespace))
		}
	}
	return out, nil
}

// SharedKey implements [SharedQuotas]: the names of the ClusterQuotas
// that select namespace, sorted and joined with commas (the same lookup
// GetQuotas makes), so that an Evaluator checks the requests of the
// namespaces of a cluster quota in one batch, against one running total,
// instead of racing its own writes; "" when none does, or the getter
// cannot tell (the batch then reports the error).
func (a *ClusterAccessor) SharedKey(namespace string) string {
	if a.index == nil || a.namespaces == nil {
		return ""
	}
	ns, err := a.namespaces(namespace)
	if err != nil {
		return ""
	}
	return a.index.Lookup(ns).Key
}

var _ SharedQuotas = (*ClusterAccessor)(nil)

// listLive lists the cluster quotas from the API server into an Index of
// their own, sharing the call with concurrent readers. The versions this
// process knows to be newer stand in for those listed.
func (a *ClusterAccessor) listLive(ctx context.Context) (*clusterquota.Index, error) {
	index, err := a.live.do(ctx, "clusterquotas", func() (*clusterquota.Index, error) {
		items, err := a.client.ListClusterQuotas(ctx)
		if err != nil {
			return nil, err
		}
		index := &clusterquota.Index{}
		for i := range items {
			index.SetClusterQuota(a.remember(&items[i]))
		}
		return index, nil
	})
	if err != nil {
		return nil, fmt.Errorf("admission: listing the cluster quotas: %w", err)
	}
	return index, nil
}

// reportInvalid logs, at error level, each version of a cluster quota
// that index holds invalid and has not been logged yet. It costs an
// atomic load unless index found a new invalid version.
func (a *ClusterAccessor) reportInvalid(ctx context.Context, index *clusterquota.Index) {
	seen := index.InvalidVersions()
	if index == a.index && a.reported.Load() == seen {
		return
	}
	var fresh []clusterquota.InvalidQuota
	a.mu.Lock()
	for _, q := range index.Invalid() {
		if clusterquota.SameSpec(a.logged[q.Quota.Name], q.Quota) {
			continue
		}
		a.logged[q.Quota.Name] = q.Quota
		fresh = append(fresh, q)
	}
	a.mu.Unlock()
	if index == a.index {
		a.reported.Store(seen)
	}
	log := logr.FromContextOrDiscard(ctx)
	for _, q := range fresh {
		log.Error(q.Err, "admission: skipping an invalid ClusterQuota: it limits nothing until it is fixed",
			"clusterQuota", q.Quota.Name, "generation", q.Quota.Generation)
	}
}

// newestOf returns the newest version known of the ClusterQuota name,
// which index finds selects ns: index's, or this process's own newer
// one, or, for a quota whose status write conflicted, read live. It
// returns nil when the quota is gone, or when the newer version has
// another spec that is invalid or does not select ns.
func (a *ClusterAccessor) newestOf(ctx context.Context, index *clusterquota.Index, name string, ns *corev1.Namespace) (*clusterquota.ClusterQuota, error) {
	// Own copy first, then the index: a copy another batch drops once
	// the index has caught up with it is then either read here, or
	// replaced by an index at least as new. Read the other way round, a
	// batch could read the index, lose the newer copy to another batch
	// that saw the index catch up meanwhile, and check against the old
	// version, which the accessor itself refuses to write.
	a.mu.Lock()
	mine := a.newest[name]
	_, stale := a.stale[name]
	a.mu.Unlock()
	if a.readHook != nil {
		a.readHook()
	}
	indexed := index.Get(name)
	if indexed == nil {
		return nil, nil // deleted since the lookup
	}
	cq := indexed
	if mine != nil {
		if newer(mine.ResourceVersion, indexed.ResourceVersion) {
			cq = mine
		} else if index == a.index {
			a.mu.Lock()
			// The index caught up, unless a newer copy took its place.
			if a.newest[name] == mine {
				delete(a.newest, name)
			}
			a.mu.Unlock()
		}
	}
	if stale {
		live, err := a.readLive(ctx, cq)
		if err != nil || live == nil {
			return nil, err
		}
		cq = live
	}
	if !clusterquota.SameSpec(cq, indexed) {
		// A newer spec than the index judged: judge it here, once per
		// read that finds it, until the index catches up.
		if clusterquota.ValidateSpec(cq) != nil {
			return nil, nil
		}
		if ok, err := cq.Selects(ns); err != nil || !ok {
			return nil, nil
		}
	}
	return cq, nil
}

// readLive returns the newest version of cached, a ClusterQuota whose
// status write conflicted: got live from the API server, the call shared
// with concurrent readers, unless a read since the conflict has already
// got it. It returns nil when the quota no longer exists.
func (a *ClusterAccessor) readLive(ctx context.Context, cached *clusterquota.ClusterQuota) (*clusterquota.ClusterQuota, error) {
	name := cached.Name
	cq, err := a.gets.do(ctx, name, func() (*clusterquota.ClusterQuota, error) {
		// The mark is read here, in the one call, so that each get
		// clears at least one conflict: a reader that comes after it has
		// cleared finds the version it got.
		a.mu.Lock()
		mark, marked := a.stale[name]
		mine := a.newest[name]
		a.mu.Unlock()
		if !marked {
			return mine, nil
		}
		cq, err := a.client.GetClusterQuota(ctx, name)
		switch {
		case apierrors.IsNotFound(err):
			a.mu.Lock()
			delete(a.newest, name)
			a.mu.Unlock()
			a.clearStale(name, mark)
			return nil, err
		case err != nil:
			return nil, err
		case cq == nil:
			return nil, errors.New("ClusterQuotaClient returned no ClusterQuota and no error")
		}
		// A conflict after the get began marked it again: the next read
		// gets it again.
		cq = a.remember(cq)
		a.clearStale(name, mark)
		return cq, nil
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("admission: reading cluster quota %s: %w", name, err)
	case cq == nil || newer(cached.ResourceVersion, cq.ResourceVersion):
		return cached, nil
	}
	return cq, nil
}

// remember keeps cq as the newest known version of its ClusterQuota,
// unless a newer one is known, and returns the newest.
func (a *ClusterAccessor) remember(cq *clusterquota.ClusterQuota) *clusterquota.ClusterQuota {
	// Copied outside the lock, which every batch of every cluster quota
	// takes.
	a.mu.Lock()
	mine := a.newest[cq.Name]
	a.mu.Unlock()
	if mine != nil && !newer(cq.ResourceVersion, mine.ResourceVersion) {
		return mine
	}
	cq = cq.DeepCopy()
	a.mu.Lock()
	defer a.mu.Unlock()
	if mine := a.newest[cq.Name]; mine != nil && !newer(cq.ResourceVersion, mine.ResourceVersion) {
		return mine
	}
	a.newest[cq.Name] = cq
	return cq
}

// asResourceQuota returns the ResourceQuota of cq in namespace.
func asResourceQuota(cq *clusterquota.ClusterQuota, namespace string) corev1.ResourceQuota {
	q := corev1.ResourceQuota{Spec: *cq.Spec.Quota.DeepCopy(), Status: *cq.Status.Total.DeepCopy()}
	q.Name = ClusterQuotaPrefix + cq.Name
	q.Namespace = namespace
	q.ResourceVersion = cq.ResourceVersion
	q.UID = cq.UID
	return q
}

// UpdateQuotaStatus writes q's status: to the namespaced quota, or, for a
// ResourceQuota made of a ClusterQuota, to that ClusterQuota's
// status.total, with q's resourceVersion as the precondition.
func (a *ClusterAccessor) UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	if !a.configured() {
		return nil, errClusterNotConfigured
	}
	if q == nil {
		return nil, errors.New("admission: ClusterAccessor.UpdateQuotaStatus: nil quota")
	}
	name, ok := strings.CutPrefix(q.Name, ClusterQuotaPrefix)
	if !ok {
		if a.namespaced == nil {
			return nil, fmt.Errorf("admission: no namespaced quota accessor for %s/%s", q.Namespace, q.Name)
		}
		return a.namespaced.UpdateQuotaStatus(ctx, q)
	}
	cq := a.current(name)
	if cq == nil || cq.ResourceVersion != q.ResourceVersion {
		// The version checked against is no longer the newest known:
		// the write would conflict; say so without making it.
		a.markStale(name)
		return nil, apierrors.NewConflict(clusterquota.Resource("clusterquotas"), name,
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	cq = cq.DeepCopy()
	cq.Status.Total = *q.Status.DeepCopy()
	out, err := a.client.UpdateClusterQuotaStatus(ctx, cq)
	if err != nil {
		if apierrors.IsConflict(err) {
			a.markStale(name)
		}
		return nil, err
	}
	if out == nil {
		return nil, errors.New("admission: ClusterQuotaClient returned no ClusterQuota and no error")
	}
	stored := asResourceQuota(a.remember(out), q.Namespace)
	return &stored, nil
}

// current returns the newest known version of the ClusterQuota name, or
// nil: this process's own, or the index's.
func (a *ClusterAccessor) current(name string) *clusterquota.ClusterQuota {
	a.mu.Lock()
	mine := a.newest[name]
	a.mu.Unlock()
	if indexed := a.index.Get(name); indexed != nil && (mine == nil || newer(indexed.ResourceVersion, mine.ResourceVersion)) {
		return indexed
	}
	return mine
}

// markStale has the next read of the ClusterQuota name read it live.
func (a *ClusterAccessor) markStale(name string) {
	a.mu.Lock()
	a.conflicts++
	a.stale[name] = a.conflicts
	a.mu.Unlock()
}

// clearStale clears the conflict mark of name if it is still mark.
func (a *ClusterAccessor) clearStale(name string, mark uint64) {
	a.mu.Lock()
	if a.stale[name] == mark {
		delete(a.stale, name)
	}
	a.mu.Unlock()
}
