package cache

import (
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
)

// This file holds how an informer stores listed objects without copying
// them out of their list, and without letting a few survivors keep a whole
// list alive.
//
// A decoded list (a *corev1.PodList, say) holds its objects in one array,
// Items []corev1.Pod. Storing &Items[i] costs nothing, but the array is one
// allocation: as long as one stored object points into it, the garbage
// collector keeps all of it, including the objects (and everything they
// reference) that watch events have since replaced or deleted. client-go
// avoids that by copying every listed object into its own allocation
// (meta.ExtractListWithAlloc): for 100k pods of 1.2 KB structs, 120 MB of
// allocation and copying before the informer can sync.
//
// An informer instead stores listed objects in place and counts, per list
// array ("arena"), how many of its objects the store holds and how many it
// has replaced or deleted. Once as many are gone as remain, it copies the
// survivors out, each into its own allocation, and copies any late arrival
// from that array (an object of the list still queued) on its way into the
// store, until its queue has been empty once. So a list array is
// released once half of its stored objects are gone, and the dead objects
// it keeps alive (with all they reference) are never more than the live
// ones it holds: about the slack Go's default GOGC=100 accepts for any
// heap. A relist that is never churned costs no copy at all; one that is
// fully churned costs a copy of half its objects, once. Handlers that keep
// objects keep their arrays alive too, as they would keep any object.
//
// The accounting sees the writes the informer makes. Objects written to an
// informer's store by anyone else (which the informer does not expect)
// are not counted, and can delay the copy of an array they replace
// objects of.

// listArena is the address range of one listed array of objects. The
// range is held as integers, which do not keep the array alive: while the
// store holds one of its objects, that object keeps it alive; once it holds
// none, the arena is forgotten.
type listArena struct {
	start, end uintptr
	// live counts the arena's objects in the store; dead those the store
	// replaced or deleted.
	live, dead int
	// copied is set once the survivors were copied out.
	copied bool
}

// arenaSet tracks the list arenas of one informer's store. It is safe for
// concurrent use: the reflector adds arenas, the informer's loop reports
// stores and removals.
type arenaSet struct {
	// anyCopied is set while an arena that was copied out is tracked: the
	// informer's loop then drops it once its queue is empty.
	anyCopied atomic.Bool

	mu sync.Mutex
	// guarded by mu; sorted by start, non-overlapping.
	arenas []*listArena
}

// add records the items arrays of the pages of one list, for those that
// keep their objects in one (a slice of structs), before their objects are
// queued.
//
// Arenas of earlier lists that the store holds nothing of are dropped
// first, so that lists whose objects a transform replaced, or that never
// reached the store, do not accumulate; so are arenas already copied out
// (their late arrivals have been popped by the time a new list is queued,
// or are replaced by it in the same pop), and ranges the new arrays
// overlap, which belonged to arrays since freed.
func (a *arenaSet) add(pages []runtime.Object) {
	var added []*listArena
	for _, page := range pages {
		if start, end, ok := itemsRange(page); ok {
			added = append(added, &listArena{start: start, end: end})
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.arenas = slices.DeleteFunc(a.arenas, func(ar *listArena) bool {
		if ar.copied || ar.live == 0 {
			return true
		}
		for _, n := range added {
			if ar.start < n.end && n.start < ar.end {
				return true
			}
		}
		return false
	})
	for _, n := range added {
		i, _ := slices.BinarySearchFunc(a.arenas, n.start, func(ar *listArena, s uintptr) int {
			return cmpUintptr(ar.start, s)
		})
		a.arenas = slices.Insert(a.arenas, i, n)
	}
}

// pagesInPlace returns the pages at least one of whose objects is still in
// their items array: lens[i] of items came from pages[i], in order, and a
// transform may have replaced them.
func pagesInPlace(pages []runtime.Object, lens []int, items []any) []runtime.Object {
	var out []runtime.Object
	off := 0
	for i, page := range pages {
		n := lens[i]
		if start, end, ok := itemsRange(page); ok {
			for _, obj := range items[off : off+n] {
				if v := reflect.ValueOf(obj); v.Kind() == reflect.Pointer && v.Pointer() >= start && v.Pointer() < end {
					out = append(out, page)
					break
				}
			}
		}
		off += n
	}
	return out
}

// forget drops the arenas of pages, whose objects were not queued after
// all.
func (a *arenaSet) forget(pages []runtime.Object) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, page := range pages {
		if start, _, ok := itemsRange(page); ok {
			a.arenas = slices.DeleteFunc(a.arenas, func(ar *listArena) bool { return ar.start == start })
		}
	}
}

// itemsRange returns the address range of list's Items array when its
// elements are objects held in place (structs whose pointers are
// runtime.Objects, the items meta.ExtractList hands out by address).
func itemsRange(list runtime.Object) (start, end uintptr, ok bool) {
	v := reflect.ValueOf(list)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return 0, 0, false
	}
	items := v.Elem().FieldByName("Items")
	if !items.IsValid() || items.Kind() != reflect.Slice || items.Len() == 0 {
		return 0, 0, false
	}
	if elem := items.Type().Elem(); elem.Kind() != reflect.Struct || !reflect.PointerTo(elem).Implements(objectType) {
		return 0, 0, false
	}
	start = items.Pointer()
	return start, start + uintptr(items.Len())*items.Type().Elem().Size(), true
}

var objectType = reflect.TypeFor[runtime.Object]()

func cmpUintptr(a, b uintptr) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// findLocked returns the arena obj points into, or nil.
func (a *arenaSet) findLocked(obj any) *listArena {
	if len(a.arenas) == 0 || obj == nil {
		return nil
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer {
		return nil
	}
	p := v.Pointer()
	i, found := slices.BinarySearchFunc(a.arenas, p, func(ar *listArena, p uintptr) int {
		return cmpUintptr(ar.start, p)
	})
	if !found {
		i--
	}
	if i < 0 || p >= a.arenas[i].end {
		return nil
	}
	return a.arenas[i]
}

// admit returns the object to store for obj: obj itself, or its copy when
// obj lies in an arena whose survivors were already copied out.
func (a *arenaSet) admit(obj any) any {
	a.mu.Lock()
	ar := a.findLocked(obj)
	a.mu.Unlock()
	if ar != nil && ar.copied {
		return shallowCopy(obj)
	}
	return obj
}

// stored accounts for the store now holding obj under a key that held old
// (if existed), and reports whether an arena's survivors are due to be
// copied out: call copyOut then.
func (a *arenaSet) stored(obj, old any, existed bool) (due bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.arenas) == 0 || (existed && sameObject(obj, old)) {
		return false
	}
	if ar := a.findLocked(obj); ar != nil && !ar.copied {
		ar.live++
	}
	if existed {
		return a.goneLocked(old)
	}
	return false
}

// removed accounts for the store no longer holding old, and reports whether
// an arena's survivors are due to be copied out.
func (a *arenaSet) removed(old any) (due bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.goneLocked(old)
}

func (a *arenaSet) goneLocked(old any) bool {
	ar := a.findLocked(old)
	if ar == nil || ar.copied {
		return false
	}
	ar.live--
	ar.dead++
	if ar.live == 0 {
		// Nothing of it is stored: it no longer pins anything, and its
		// range may be reused once it is freed.
		a.arenas = slices.DeleteFunc(a.arenas, func(x *listArena) bool { return x == ar })
		return false
	}
	return ar.dead >= ar.live
}

// copyOut replaces every stored object that lies in an arena due for it
// with a copy, and marks those arenas copied.
func (a *arenaSet) copyOut(ts *ThreadSafeStore) {
	a.mu.Lock()
	var due []*listArena
	for _, ar := range a.arenas {
		if !ar.copied && ar.live > 0 && ar.dead >= ar.live {
			due = append(due, ar)
		}
	}
	a.mu.Unlock()
	if len(due) == 0 {
		return
	}
	ts.rewriteValues(func(obj any) (any, bool) {
		v := reflect.ValueOf(obj)
		if v.Kind() != reflect.Pointer {
			return nil, false
		}
		p := v.Pointer()
		for _, ar := range due {
			if p >= ar.start && p < ar.end {
				return shallowCopy(obj), true
			}
		}
		return nil, false
	})
	a.mu.Lock()
	for _, ar := range due {
		ar.copied, ar.live = true, 0
	}
	a.anyCopied.Store(true)
	a.mu.Unlock()
}

// dropCopied forgets the arenas that were copied out. Call it once no
// object of theirs can still be queued: afterwards their arrays may be
// freed and their ranges reused by objects that must not be copied.
func (a *arenaSet) dropCopied() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.arenas = slices.DeleteFunc(a.arenas, func(ar *listArena) bool { return ar.copied })
	a.anyCopied.Store(false)
}

// shallowCopy returns a new object holding a copy of the struct obj points
// to, sharing everything it references, as meta.ExtractListWithAlloc does:
// stored objects are immutable, so sharing is safe.
func shallowCopy(obj any) any {
	v := reflect.ValueOf(obj)
	c := reflect.New(v.Type().Elem())
	c.Elem().Set(v.Elem())
	return c.Interface()
}
