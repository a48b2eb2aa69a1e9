package clusterquota

import (
	"slices"
	"strings"
)

// How an Index files quotas under the label values they require, and
// finds the quotas of a namespace and the namespaces of a quota through
// them. Every function here runs with the Index's lock held for writing,
// or, for selecting and selection, at least for reading.

// file files q under its values, or with the quotas that require none.
func (x *Index) file(q *indexedQuota) {
	if q.err != nil {
		return
	}
	if !q.filed {
		x.unanchored[q.cq.Name] = q
		return
	}
	vi := x.byKey[q.key]
	if vi == nil {
		vi = &valueIndex{values: map[string]map[string]struct{}{}}
		for name, e := range x.namespaces {
			if v, ok := valueOf(q.key, e.labels, e.annotations); ok {
				vi.add(v, name)
			}
		}
		x.byKey[q.key] = vi
	}
	vi.refs++
	for _, v := range q.values {
		a := anchor{q.key, v}
		m := x.anchored[a]
		if m == nil {
			m = map[string]*indexedQuota{}
			x.anchored[a] = m
		}
		m[q.cq.Name] = q
	}
}

// unfile undoes file(q), leaving what a newer version of the same quota
// filed.
func (x *Index) unfile(q *indexedQuota) {
	if q.err != nil {
		return
	}
	name := q.cq.Name
	if !q.filed {
		if x.unanchored[name] == q {
			delete(x.unanchored, name)
		}
		return
	}
	for _, v := range q.values {
		a := anchor{q.key, v}
		if m := x.anchored[a]; m[name] == q {
			delete(m, name)
			if len(m) == 0 {
				delete(x.anchored, a)
			}
		}
	}
	if vi := x.byKey[q.key]; vi != nil {
		if vi.refs--; vi.refs == 0 {
			delete(x.byKey, q.key)
		}
	}
}

// selectedBy returns the fed namespaces q selects.
func (x *Index) selectedBy(q *indexedQuota) map[string]struct{} {
	out := map[string]struct{}{}
	if q.err != nil {
		return out
	}
	check := func(name string) {
		if e := x.namespaces[name]; e != nil && q.match.matches(e.labels, e.annotations) {
			out[name] = struct{}{}
		}
	}
	if !q.filed {
		for name := range x.namespaces {
			check(name)
		}
		return out
	}
	vi := x.byKey[q.key]
	for _, v := range q.values {
		for name := range vi.values[v] {
			check(name)
		}
	}
	return out
}

// selecting returns the names of the valid quotas that select a
// namespace with these labels and annotations, sorted.
func (x *Index) selecting(nsLabels, nsAnnotations map[string]string) []string {
	var names []string
	for key := range x.byKey {
		v, ok := valueOf(key, nsLabels, nsAnnotations)
		if !ok {
			continue
		}
		for name, q := range x.anchored[anchor{key, v}] {
			if q.match.matches(nsLabels, nsAnnotations) {
				names = append(names, name)
			}
		}
	}
	for name, q := range x.unanchored {
		if q.match.matches(nsLabels, nsAnnotations) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// selection returns the Selection of names, sorted; a quota's own when
// it is the only one, so that most namespaces share their quota's.
func (x *Index) selection(names []string) Selection {
	switch len(names) {
	case 0:
		return Selection{}
	case 1:
		return x.quotas[names[0]].self
	}
	return Selection{Names: names, Key: strings.Join(names, ",")}
}

// join adds quota to the selection of the fed namespace ns.
func (x *Index) join(ns, quota string) {
	e := x.namespaces[ns]
	i, found := slices.BinarySearch(e.sel.Names, quota)
	if found {
		return
	}
	// A new slice: the old one may be held by a caller of Lookup.
	e.sel = x.selection(slices.Insert(slices.Clone(e.sel.Names), i, quota))
}

// leave removes quota from the selection of the fed namespace ns.
func (x *Index) leave(ns, quota string) {
	e := x.namespaces[ns]
	if e == nil {
		return
	}
	i, found := slices.BinarySearch(e.sel.Names, quota)
	if !found {
		return
	}
	e.sel = x.selection(slices.Delete(slices.Clone(e.sel.Names), i, i+1))
}

// valueOf returns the value of key in a namespace's labels or
// annotations.
func valueOf(key anchorKey, nsLabels, nsAnnotations map[string]string) (string, bool) {
	m := nsLabels
	if key.annotation {
		m = nsAnnotations
	}
	v, ok := m[key.name]
	return v, ok
}

func (vi *valueIndex) add(v, ns string) {
	m := vi.values[v]
	if m == nil {
		m = map[string]struct{}{}
		vi.values[v] = m
	}
	m[ns] = struct{}{}
}

func (vi *valueIndex) remove(v, ns string) {
	m := vi.values[v]
	delete(m, ns)
	if len(m) == 0 {
		delete(vi.values, v)
	}
}
