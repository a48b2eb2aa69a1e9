package generic

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/internal/isnil"
	"github.com/quotakit/quotakit/quota"
)

// Registry is a [quota.Registry]: evaluators by GroupResource, listed in a
// fixed order. Its zero value is not usable; build one with [NewRegistry].
//
// A Registry is safe for concurrent use. List returns the evaluators
// ordered by group, then resource (the core group first), so that usage is
// computed in the same order on every sync. Evaluators' GroupResource method
// is called once, when they are added, and never while the registry's lock is
// held.
type Registry struct {
	mu sync.RWMutex
	// guarded by mu
	byGR map[schema.GroupResource]quota.Evaluator
	// list holds the values of byGR sorted by group, then resource. It is
	// rebuilt on every change, which is rare, so that List, which the
	// controller calls on every sync, only copies it.
	// guarded by mu
	list []quota.Evaluator
	// guarded by mu
	grs []schema.GroupResource // grs[i] is list[i].GroupResource()
}

var _ quota.Registry = (*Registry)(nil)

// NewRegistry returns a [Registry] holding evaluators. When two evaluators
// have the same GroupResource the later one wins, as with Add; nil
// evaluators are ignored.
func NewRegistry(evaluators ...quota.Evaluator) *Registry {
	r := &Registry{byGR: make(map[schema.GroupResource]quota.Evaluator, len(evaluators))}
	for _, e := range evaluators {
		r.Add(e)
	}
	return r
}

// Add registers e, replacing the evaluator of the same GroupResource. A nil
// e, or one holding a nil pointer, is ignored.
func (r *Registry) Add(e quota.Evaluator) {
	if isnil.Value(e) {
		return
	}
	gr := e.GroupResource()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byGR[gr] = e
	r.rebuildLocked()
}

// Remove unregisters the evaluator of e's GroupResource, whichever it is. A
// nil e is ignored.
func (r *Registry) Remove(e quota.Evaluator) {
	if e == nil {
		return
	}
	gr := e.GroupResource()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byGR[gr]; !ok {
		return
	}
	delete(r.byGR, gr)
	r.rebuildLocked()
}

// Get returns the evaluator of gr, or nil.
func (r *Registry) Get(gr schema.GroupResource) quota.Evaluator {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byGR[gr]
}

// List returns the registered evaluators ordered by group, then resource.
// The slice is the caller's.
func (r *Registry) List() []quota.Evaluator {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.list)
}

// rebuildLocked recomputes the sorted list. r.mu must be held for writing.
func (r *Registry) rebuildLocked() {
	r.grs = slices.SortedFunc(maps.Keys(r.byGR), func(a, b schema.GroupResource) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Resource, b.Resource)
	})
	r.list = r.list[:0]
	for _, gr := range r.grs {
		r.list = append(r.list, r.byGR[gr])
	}
}
