// Package ledger keeps the usage of the objects each quota charges, moved
// by informer events, so that a quota controller recalculates a quota in
// O(evaluators × resources) instead of summing its namespace: ResourceQuotas
// and, an account per namespace, ClusterQuotas alike. It has no API of its
// own outside the module.
package ledger

import (
	"hash/maphash"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/generic"
	"github.com/quotakit/quotakit/internal/reslist"
	"github.com/quotakit/quotakit/internal/safe"
	"github.com/quotakit/quotakit/quota"
)

// Ledger keeps, per quota, the usage of the cached objects it charges,
// updated from informer events, so that recalculating a quota costs
// O(evaluators × resources) rather than O(objects in its namespace).
// Kubernetes sums the whole namespace on every recalculation.
//
// Each object's usage is computed once per version the informer delivers
// (and again when it changes with time: the end of a pod's deletion grace
// period), and kept, so that what is released is exactly what was charged.
// A quota's totals are built from the kept usages the first time the quota
// is calculated, and again when its spec changes; then every event moves
// them by the difference. The ledger is derived state: a full resync
// recomputes every quota from the caches and compares (the quota
// controller's full resync, which reports drift).
//
// Only evaluators whose usage of an object depends on that object alone
// are kept here (the core table's and object-count evaluators; not the
// caller's own evaluators, nor the resource-claim evaluator, which reads
// pods and device classes too): the others are summed from their caches
// on every calculation, as before.
//
// A Ledger is safe for concurrent use.
type Ledger struct {
	mu sync.Mutex
	// guarded by mu
	spaces map[string]*space
	// usages holds every usage list entries charge, once: objects of one
	// template, and every counted object, charge the same, and a list per
	// object would cost more than a cached pod. Lists in it are never
	// modified.
	// guarded by mu
	usages map[uint64][]*sharedUsage // by reslist.Hash under seed
	seed   maphash.Seed
	// gens numbers the accounts built, for their arrival counts.
	// guarded by mu
	gens uint64
}

// space is the ledger of one namespace.
type space struct {
	books    map[schema.GroupResource]*book
	accounts map[string]*account // by quota name
}

// book holds the usage of every object of one evaluator in a namespace.
type book struct {
	evaluator quota.Evaluator
	entries   map[string]*entry // by object key
	// timed holds the keys of the entries whose usage changes by itself
	// at their until, so that a refresh does not visit every entry.
	timed map[string]struct{}
	// failed counts the entries whose usage could not be computed; while
	// any has failed, quotas of this evaluator are summed from the cache,
	// which reports the error.
	failed int
}

// entry is one object and what it charges.
type entry struct {
	obj   runtime.Object
	usage *sharedUsage // nil when err is set
	err   error
	// until is when usage changes by itself (zero: never).
	until time.Time
}

// account holds one quota's totals: per evaluator, the sum of the usages
// of the objects that match the quota's scopes, for the quota's hard
// names.
type account struct {
	// spec is the quota as its totals were built for: its hard names,
	// scopes and scope selector.
	spec   *corev1.ResourceQuota
	totals map[schema.GroupResource]corev1.ResourceList
	// failed marks the evaluators for which matching an object to the
	// quota's scopes failed: their totals cannot be trusted.
	failed map[schema.GroupResource]bool
	// checked is the resync generation this quota was last compared with a
	// full recalculation at.
	checked uint64
	// unscoped reports that the quota has no scopes and no scope selector:
	// then whether an object of a resource is charged to it depends on the
	// quota's names only, and matchesAll keeps the answer per resource.
	unscoped   bool
	matchesAll map[schema.GroupResource]bool
	// gen numbers this account among those the ledger built, and arrived
	// sums, for the quota's hard names, what the events observed since it
	// was built added to its totals: a creation what the object charges,
	// an update what it charges more (see [Arrivals]).
	gen     uint64
	arrived corev1.ResourceList
	// arrivedRV is the latest resourceVersion of the objects arrived
	// counted, as an integer; zero while none is, or once one was not an
	// integer.
	arrivedRV uint64
	rvUnknown bool
}

// Arrivals is a quota account's running sum, per resource name, of what
// the objects that reached the caches added to its usage (a creation adds
// what the object charges; an update what it charges more), under the
// generation of the account that counted it: a rebuilt account counts
// from zero again, so that two sums compare only under one Gen.
type Arrivals struct {
	// Gen numbers the account among those the Ledger built.
	Gen uint64
	// Sums holds the sums, for the quota's hard names.
	Sums corev1.ResourceList
	// RV is the latest resourceVersion, as an integer, of the objects
	// counted; zero when none was counted or some resourceVersion was
	// not an integer. Objects are stored after admission charged them, so
	// a quota whose resourceVersion is past RV (both numbered by one etcd
	// revision, as kube-apiserver's are) shows every charge of the
	// objects counted.
	RV uint64
}

// New returns an empty Ledger.
func New() *Ledger {
	return &Ledger{spaces: map[string]*space{}, usages: map[uint64][]*sharedUsage{}, seed: maphash.MakeSeed()}
}

func (l *Ledger) spaceLocked(namespace string) *space {
	s := l.spaces[namespace]
	if s == nil {
		s = &space{books: map[schema.GroupResource]*book{}, accounts: map[string]*account{}}
		l.spaces[namespace] = s
	}
	return s
}

// Resource is one resource whose objects' usage the ledger keeps,
// registered once with what is fixed for it ([Ledger.Register]); events
// of its objects are told through it.
type Resource struct {
	l *Ledger
	e quota.Evaluator
	// changesAt returns when an object's usage changes by itself (a
	// pod's deletion grace period ends), or nil.
	changesAt func(runtime.Object) (time.Time, bool)
}

// Register returns the handle through which the events of e's resource
// are told: e computes its objects' usage, and changesAt, when not nil,
// says when an object's usage changes with no event (see
// [Resource.Refresh]).
func (l *Ledger) Register(e quota.Evaluator, changesAt func(runtime.Object) (time.Time, bool)) *Resource {
	return &Resource{l: l, e: e, changesAt: changesAt}
}

// Observe records that the object with key, of r's resource in
// namespace, is now obj, or is gone when obj is nil, and moves the totals
// of the namespace's quotas by the difference. Events may arrive for keys
// the ledger does not know (a delete of an unknown object is ignored, an
// update of one is an add) and again for a version it has (a resync,
// which changes nothing): what is stored is always what the last event
// said.
//
// It reports whether the totals of a quota moved: the object's charge to
// some quota, what it charges if it matches, changed (or could not be
// computed). The controller recalculates those quotas, even for an update
// its update filter would let pass unseen.
func (r *Resource) Observe(namespace, key string, obj runtime.Object) (moved bool) {
	return r.l.observe(r, namespace, key, obj, false)
}

// observe is [Resource.Observe]; again charges the version stored anew:
// its usage changed with time.
func (l *Ledger) observe(r *Resource, namespace, key string, obj runtime.Object, again bool) (moved bool) {
	e, changesAt := r.e, r.changesAt
	gr := e.GroupResource()
	var next *entry
	if obj != nil {
		next = &entry{obj: obj}
		if changesAt != nil {
			if at, ok := changesAt(obj); ok && time.Now().Before(at) {
				next.until = at
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.spaceLocked(namespace)
	b := s.books[gr]
	if b == nil {
		if obj == nil {
			return false
		}
		b = &book{evaluator: e, entries: map[string]*entry{}, timed: map[string]struct{}{}}
		s.books[gr] = b
	}
	prev := b.entries[key]
	if next != nil && prev != nil && prev.obj == obj && !again {
		return false // the same version again: a resync
	}
	if next != nil {
		l.chargeLocked(b.evaluator, next)
	}
	for _, a := range s.accounts {
		if _, ok := a.totals[gr]; ok {
			moved = a.move(b.evaluator, gr, prev, next, true) || moved
		}
	}
	if prev != nil {
		l.releaseLocked(prev)
		if prev.err != nil {
			b.failed--
		}
	}
	delete(b.timed, key)
	if next == nil {
		delete(b.entries, key)
		if len(b.entries) == 0 {
			delete(s.books, gr)
		}
		return moved
	}
	if next.err != nil {
		b.failed++
	}
	if !next.until.IsZero() {
		b.timed[key] = struct{}{}
	}
	b.entries[key] = next
	return moved
}

// Refresh charges again the objects of r's resource in namespace whose
// usage changed with time by now.
func (r *Resource) Refresh(namespace string, now time.Time) {
	l, e := r.l, r.e
	type due struct {
		key string
		obj runtime.Object
	}
	var dues []due
	l.mu.Lock()
	if s := l.spaces[namespace]; s != nil {
		if b := s.books[e.GroupResource()]; b != nil {
			for key := range b.timed {
				if en := b.entries[key]; now.After(en.until) {
					dues = append(dues, due{key, en.obj})
				}
			}
		}
	}
	l.mu.Unlock()
	for _, d := range dues {
		l.observe(r, namespace, d.key, d.obj, true)
	}
}

// move takes prev's usage out of a's totals of gr and puts next's in, each
// when its object matches the quota's scopes, and counts what next adds
// as arrived when arrive is set (an event, not a build of the totals). It
// reports whether the totals changed: what prev charged the quota is not
// what next charges (see sameCharge), or either could not be computed.
func (a *account) move(e quota.Evaluator, gr schema.GroupResource, prev, next *entry, arrive bool) (moved bool) {
	total := a.totals[gr]
	var charged [2]*sharedUsage
	for i, en := range []*entry{prev, next} {
		if en == nil {
			continue
		}
		if en.err != nil {
			moved = true
			continue
		}
		ok, err := a.matches(e, gr, en.obj)
		if err != nil {
			a.failed[gr] = true
			moved = true
			continue
		}
		if ok {
			charged[i] = en.usage
		}
	}
	if sameCharge(charged[0], charged[1]) {
		// Taking one away and adding the other would change nothing.
		return moved
	}
	// A quota's totals are kept for its hard names only: the usage it
	// reports is masked to them, and another set of names rebuilds the
	// totals (see sameSpec).
	if charged[0] != nil {
		reslist.Accumulate(total, charged[0].list, true, a.spec.Spec.Hard)
	}
	if charged[1] != nil {
		reslist.Accumulate(total, charged[1].list, false, a.spec.Spec.Hard)
		if arrive {
			a.arrive(charged[0], charged[1], next.obj)
		}
	}
	return true
}

// arrive adds to a's arrival count, for each of its hard names, what next
// charges more than prev (nil: nothing), and notes the resourceVersion of
// obj, next's object, when that counted anything.
func (a *account) arrive(prev, next *sharedUsage, obj runtime.Object) {
	counted := false
	defer func() {
		if counted {
			a.noteRV(obj)
		}
	}()
	for name, q := range next.list {
		if _, ok := a.spec.Spec.Hard[name]; !ok {
			continue
		}
		d := q.DeepCopy()
		if prev != nil {
			if p, ok := prev.list[name]; ok {
				d.Sub(p)
			}
		}
		if d.Sign() <= 0 {
			continue
		}
		if sum, ok := a.arrived[name]; ok {
			d.Add(sum)
		}
		a.arrived[name] = d
		counted = true
	}
}

// noteRV keeps the resourceVersion of obj, an arrival, if it is the
// latest.
func (a *account) noteRV(obj runtime.Object) {
	if a.rvUnknown {
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		a.rvUnknown, a.arrivedRV = true, 0
		return
	}
	rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	if err != nil || rv == 0 {
		a.rvUnknown, a.arrivedRV = true, 0
		return
	}
	a.arrivedRV = max(a.arrivedRV, rv)
}

// sameCharge reports whether a and b charge the same: both nothing, or
// lists equal in names, amounts and formats. Equal lists are usually one
// shared list; amounts written differently (1 and 1000m) may not be.
func sameCharge(a, b *sharedUsage) bool {
	if a == b {
		return true
	}
	return a != nil && b != nil && reslist.Same(a.list, b.list)
}

// matches reports whether obj, of resource gr, is charged to the quota, by
// its scopes and scope selector, as the evaluator's UsageStats decides it.
// For a quota without scopes the evaluator is asked once per resource: the
// ledger's evaluators decide such a quota by its names alone, and an
// object of the wrong type has already failed in Usage.
func (a *account) matches(e quota.Evaluator, gr schema.GroupResource, obj runtime.Object) (bool, error) {
	if ok, known := a.matchesAll[gr]; known {
		return ok, nil
	}
	var ok bool
	err := safe.Call(func() error {
		var err error
		ok, err = e.Matches(a.spec, obj)
		return err
	})
	if err == nil && a.unscoped {
		a.matchesAll[gr] = ok
	}
	return ok, err
}

// Forget drops the account of the quota namespace/name, which was deleted.
func (l *Ledger) Forget(namespace, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.spaces[namespace]; s != nil {
		delete(s.accounts, name)
	}
}

// Drop forgets everything of r's resource, whose evaluator is gone.
func (r *Resource) Drop() {
	l, gr := r.l, r.e.GroupResource()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.spaces {
		if b := s.books[gr]; b != nil {
			for _, en := range b.entries {
				l.releaseLocked(en)
			}
		}
		delete(s.books, gr)
		for _, a := range s.accounts {
			delete(a.totals, gr)
			delete(a.failed, gr)
		}
	}
}

// accountLocked returns the account of rq for the evaluators in kept,
// building its totals from the books when the quota is new to the ledger,
// its spec changed, or it lacks totals for one of them.
func (l *Ledger) accountLocked(rq *corev1.ResourceQuota, kept []quota.Evaluator) *account {
	s := l.spaceLocked(rq.Namespace)
	a := s.accounts[rq.Name]
	if a == nil || !sameSpec(a.spec, rq) {
		spec := &corev1.ResourceQuota{ObjectMeta: rq.ObjectMeta, Spec: *rq.Spec.DeepCopy()}
		// The evaluators' Matches looks at the names of status.hard.
		spec.Status.Hard = spec.Spec.Hard
		l.gens++
		a = &account{
			gen:        l.gens,
			arrived:    corev1.ResourceList{},
			spec:       spec,
			totals:     map[schema.GroupResource]corev1.ResourceList{},
			failed:     map[schema.GroupResource]bool{},
			unscoped:   len(generic.ScopeRequirements(spec.Spec.Scopes, spec.Spec.ScopeSelector)) == 0,
			matchesAll: map[schema.GroupResource]bool{},
		}
		s.accounts[rq.Name] = a
	}
	for _, e := range kept {
		gr := e.GroupResource()
		if _, ok := a.totals[gr]; ok {
			continue
		}
		a.totals[gr] = corev1.ResourceList{}
		if b := s.books[gr]; b != nil {
			for _, en := range b.entries {
				a.move(e, gr, nil, en, false)
			}
		}
	}
	return a
}

// sameSpec reports whether a and b limit the same names with the same
// scopes and scope selector: the totals built for one serve the other.
func sameSpec(a, b *corev1.ResourceQuota) bool {
	if len(a.Spec.Hard) != len(b.Spec.Hard) {
		return false
	}
	for name := range a.Spec.Hard {
		if _, ok := b.Spec.Hard[name]; !ok {
			return false
		}
	}
	if len(a.Spec.Scopes) == 0 && len(b.Spec.Scopes) == 0 && a.Spec.ScopeSelector == nil && b.Spec.ScopeSelector == nil {
		return true // the usual quota, without the reflection below
	}
	return equality.Semantic.DeepEqual(a.Spec.Scopes, b.Spec.Scopes) &&
		equality.Semantic.DeepEqual(a.Spec.ScopeSelector, b.Spec.ScopeSelector)
}
