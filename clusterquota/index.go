package clusterquota

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Index maps each namespace to the ClusterQuotas that select it, and
// each ClusterQuota to the namespaces it selects, kept up to date one
// event at a time: a program feeds it from the event handlers of an
// informer of ClusterQuotas ([Index.SetClusterQuota],
// [Index.DeleteClusterQuota]) and one of namespaces ([Index.SetNamespace],
// [Index.DeleteNamespace]), and admission and the controller read it.
//
// What a lookup costs does not grow with the number of cluster quotas:
//
//   - Each version of a quota's spec is judged once: [ValidateSpec] and
//     the compilation of its selector run when a spec is first seen, not
//     on each lookup; a status write (the common change) costs a map
//     update. A version is the pair of UID and generation, or the spec
//     itself when the generation is 0 (an API server that keeps none).
//   - A namespace fed by [Index.SetNamespace] is looked up by name, and
//     answered from what was computed when it was fed, if the lookup
//     names the same resourceVersion. Any other (a namespace the index has
//     not been told of yet, or a newer version of it) is computed at
//     once, from the quotas that require one of its label (or
//     annotation) values: each quota is filed under one label it requires
//     ("tenant=a", or each value of an In requirement), so a namespace is
//     checked against the quotas filed under its own values only, plus
//     the few whose selector requires no value at all.
//   - A new spec is matched against the namespaces that carry its value,
//     not against every namespace.
//
// So [Index.Lookup] never answers from a mapping older than the namespace
// object it is given, and needs no namespace events to be right: they
// only make it one map read.
//
// An invalid quota, by [ValidateSpec], selects nothing, and
// [Index.Invalid] lists it. A lookup with ClusterQuotas that select
// nothing costs what it costs with no ClusterQuota at all.
//
// # Memory
//
// Besides the objects it is given, which it keeps rather than copies
// (the informers' own, which must not be modified), an Index holds about
// 750 bytes per ClusterQuota and 400 bytes per namespace, when each
// quota selects a tenant of two namespaces by one label: 7.5 MB for
// 5,000 quotas over 10,000 namespaces (TestIndexMemory measures 740 and
// 380). Of a namespace's 400 bytes, 120 are its entry, and the rest its
// place among the namespaces that carry its tenant label and in its
// quota's set.
//
// The zero value is an empty Index, ready to use. It is safe for
// concurrent use: lookups share a read lock, and the Set and Delete
// methods call no user code.
type Index struct {
	mu sync.RWMutex
	// quotas holds every ClusterQuota by name; namespaces every
	// namespace fed by SetNamespace.
	// guarded by mu
	quotas     map[string]*indexedQuota
	namespaces map[string]*indexedNamespace
	// anchored files the valid quotas under a value they require;
	// unanchored holds those that require none.
	// guarded by mu
	anchored   map[anchor]map[string]*indexedQuota
	unanchored map[string]*indexedQuota
	// byKey holds, for each label or annotation some quota is filed
	// under, the namespaces that carry each of its values.
	// guarded by mu
	byKey map[anchorKey]*valueIndex
	// synced are the feeds HasSynced waits for.
	// guarded by mu
	synced []func() bool

	// hasSynced is set once every feed has synced: they stay synced.
	hasSynced atomic.Bool
	// invalidVersions counts the versions found invalid.
	invalidVersions atomic.Uint64
}

// anchor is one value of a label or annotation.
type anchor struct {
	key   anchorKey
	value string
}

// valueIndex holds the namespaces that carry each value of one key.
type valueIndex struct {
	// refs counts the quotas filed under the key.
	refs   int
	values map[string]map[string]struct{}
}

// indexedQuota is what an Index holds of one ClusterQuota.
type indexedQuota struct {
	cq *ClusterQuota
	// err says why the spec of cq is invalid; nil when it is valid.
	err   error
	match matcher
	// key and values are what the quota is filed under; filed is false
	// for a quota that requires no value (or is invalid).
	key    anchorKey
	values []string
	filed  bool
	// self is the Selection of a namespace selected by this quota alone.
	self Selection
	// namespaces holds the fed namespaces it selects.
	namespaces map[string]struct{}
}

// indexedNamespace is what an Index holds of one namespace.
type indexedNamespace struct {
	resourceVersion     string
	labels, annotations map[string]string
	sel                 Selection
}

// Selection is what an [Index] tells of one namespace.
type Selection struct {
	// Names are the names of the valid ClusterQuotas that select the
	// namespace, sorted. The slice is shared: it must not be modified.
	Names []string
	// Key is Names joined with commas: "" when no quota selects the
	// namespace. Namespaces with the same Key share exactly the same
	// quotas.
	Key string
}

// InvalidQuota is a ClusterQuota of an [Index] whose spec is invalid.
type InvalidQuota struct {
	// Quota is the version judged. It must not be modified.
	Quota *ClusterQuota
	// Err says why it is invalid: a [ValidationError], or the error of
	// its selector.
	Err error
}

// SameSpec reports whether a and b are one version of a ClusterQuota's
// spec: the same UID and generation, and, when the generation is 0 (an
// API server that keeps none), equal specs. A status write keeps the
// version; a spec change makes a new one, which an [Index] judges again.
func SameSpec(a, b *ClusterQuota) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.UID != b.UID || a.Generation != b.Generation {
		return false
	}
	return a.Generation != 0 || equality.Semantic.DeepEqual(a.Spec, b.Spec)
}

// init makes the maps of a zero Index.
func (x *Index) init() {
	if x.quotas != nil {
		return
	}
	x.quotas = map[string]*indexedQuota{}
	x.namespaces = map[string]*indexedNamespace{}
	x.anchored = map[anchor]map[string]*indexedQuota{}
	x.unanchored = map[string]*indexedQuota{}
	x.byKey = map[anchorKey]*valueIndex{}
}

// SetClusterQuota adds cq, or replaces the version the Index holds of it.
// A new spec is judged ([ValidateSpec]) and its selector compiled, and
// the namespaces it selects found; the same spec (see [SameSpec]) with
// another status costs a map update. The Index keeps cq: it must not be
// modified afterwards. A nil cq is ignored.
func (x *Index) SetClusterQuota(cq *ClusterQuota) {
	if cq == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.init()
	old := x.quotas[cq.Name]
	if old != nil && SameSpec(old.cq, cq) {
		old.cq = cq
		return
	}
	q := &indexedQuota{cq: cq, self: Selection{Names: []string{cq.Name}, Key: cq.Name}}
	q.err = ValidateSpec(cq)
	if q.err == nil {
		q.match, q.err = compile(cq)
	}
	if q.err != nil {
		x.invalidVersions.Add(1)
	} else {
		q.key, q.values, q.filed = anchorOf(&cq.Spec.Selector)
	}
	// File the new version before the old one is taken out, so that a
	// key both use keeps its namespaces.
	x.quotas[cq.Name] = q
	x.file(q)
	q.namespaces = x.selectedBy(q)
	if old != nil {
		x.unfile(old)
		for ns := range old.namespaces {
			if _, ok := q.namespaces[ns]; !ok {
				x.leave(ns, cq.Name)
			}
		}
	}
	for ns := range q.namespaces {
		if old != nil {
			if _, ok := old.namespaces[ns]; ok {
				continue
			}
		}
		x.join(ns, cq.Name)
	}
}

// DeleteClusterQuota removes the ClusterQuota name: it selects nothing
// any more.
func (x *Index) DeleteClusterQuota(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	q := x.quotas[name]
	if q == nil {
		return
	}
	x.unfile(q)
	for ns := range q.namespaces {
		x.leave(ns, name)
	}
	delete(x.quotas, name)
}

// SetNamespace adds ns, or replaces the version the Index holds of it,
// and finds the quotas that select it. The Index keeps ns's labels and
// annotations: ns must not be modified afterwards. A version the Index
// already holds (the same non-empty resourceVersion: a resync) costs a
// map read.
func (x *Index) SetNamespace(ns metav1.Object) {
	if ns == nil {
		return
	}
	name, rv := ns.GetName(), ns.GetResourceVersion()
	nsLabels, nsAnnotations := ns.GetLabels(), ns.GetAnnotations()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.init()
	old := x.namespaces[name]
	if old != nil && rv != "" && old.resourceVersion == rv {
		return
	}
	for key, vi := range x.byKey {
		if old != nil {
			if v, ok := valueOf(key, old.labels, old.annotations); ok {
				vi.remove(v, name)
			}
		}
		if v, ok := valueOf(key, nsLabels, nsAnnotations); ok {
			vi.add(v, name)
		}
	}
	e := &indexedNamespace{resourceVersion: rv, labels: nsLabels, annotations: nsAnnotations}
	e.sel = x.selection(x.selecting(nsLabels, nsAnnotations))
	x.namespaces[name] = e
	var before []string
	if old != nil {
		before = old.sel.Names
	}
	for _, q := range before {
		if _, ok := slices.BinarySearch(e.sel.Names, q); !ok {
			delete(x.quotas[q].namespaces, name)
		}
	}
	for _, q := range e.sel.Names {
		if _, ok := slices.BinarySearch(before, q); !ok {
			x.quotas[q].namespaces[name] = struct{}{}
		}
	}
}

// DeleteNamespace removes the namespace name.
func (x *Index) DeleteNamespace(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.namespaces[name]
	if e == nil {
		return
	}
	for key, vi := range x.byKey {
		if v, ok := valueOf(key, e.labels, e.annotations); ok {
			vi.remove(v, name)
		}
	}
	for _, q := range e.sel.Names {
		delete(x.quotas[q].namespaces, name)
	}
	delete(x.namespaces, name)
}

// Lookup returns the valid ClusterQuotas that select ns: as computed when
// ns was fed, if the Index holds ns at ns's resourceVersion, else
// computed now from ns's labels and annotations (and not kept: the
// namespace's own event will). Either way the answer is for ns as given,
// never for an older version of it.
func (x *Index) Lookup(ns metav1.Object) Selection {
	if ns == nil {
		return Selection{}
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if e := x.namespaces[ns.GetName()]; e != nil && e.resourceVersion != "" && e.resourceVersion == ns.GetResourceVersion() {
		return e.sel
	}
	if len(x.quotas) == 0 {
		return Selection{}
	}
	return x.selection(x.selecting(ns.GetLabels(), ns.GetAnnotations()))
}

// Get returns the version the Index holds of the ClusterQuota name,
// valid or not, or nil. It must not be modified.
func (x *Index) Get(name string) *ClusterQuota {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if q := x.quotas[name]; q != nil {
		return q.cq
	}
	return nil
}

// Namespaces returns the namespaces fed to the Index that cq selects,
// sorted, and true, when the Index holds cq's spec (see [SameSpec]);
// false when it holds another version of it, or none: the mapping is
// then not cq's. An invalid quota selects none.
func (x *Index) Namespaces(cq *ClusterQuota) ([]string, bool) {
	if cq == nil {
		return nil, false
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	q := x.quotas[cq.Name]
	if q == nil || !SameSpec(q.cq, cq) {
		return nil, false
	}
	out := make([]string, 0, len(q.namespaces))
	for ns := range q.namespaces {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out, true
}

// Invalid returns the ClusterQuotas whose spec is invalid, sorted by
// name: each selects nothing until it is fixed.
func (x *Index) Invalid() []InvalidQuota {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []InvalidQuota
	for _, q := range x.quotas {
		if q.err != nil {
			out = append(out, InvalidQuota{Quota: q.cq, Err: q.err})
		}
	}
	slices.SortFunc(out, func(a, b InvalidQuota) int { return strings.Compare(a.Quota.Name, b.Quota.Name) })
	return out
}

// InvalidVersions returns how many versions of ClusterQuotas the Index
// has found invalid since it was made. It only grows: a caller that
// reports each invalid version once lists [Index.Invalid] only when it
// changed.
func (x *Index) InvalidVersions() uint64 { return x.invalidVersions.Load() }

// AddSynced adds hasSynced to what [Index.HasSynced] waits for: typically
// the HasSynced of each event handler registration that feeds the Index,
// which turns true once the handler has been told of the informer's
// whole initial list.
func (x *Index) AddSynced(hasSynced func() bool) {
	if hasSynced == nil {
		return
	}
	x.mu.Lock()
	x.synced = append(x.synced, hasSynced)
	x.hasSynced.Store(false)
	x.mu.Unlock()
}

// HasSynced reports whether every func given to [Index.AddSynced]
// reports true: true for an Index without any. Once true it stays true,
// and costs an atomic load.
func (x *Index) HasSynced() bool {
	if x.hasSynced.Load() {
		return true
	}
	x.mu.RLock()
	synced := slices.Clone(x.synced)
	x.mu.RUnlock()
	for _, f := range synced {
		if !f() {
			return false
		}
	}
	x.hasSynced.Store(true)
	return true
}
