package chartgen

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// The markers merge leaves in an object for emit to turn into template
// actions. They are plain YAML scalars (no colon, no quote), so that they
// come out of the YAML encoder unchanged and on a line of their own.
const (
	// ifItem, with a condition's number, opens the items a choice appends
	// to a list; endItem closes them.
	ifItem  = "QKIF-"
	endItem = "QKEND-"
	// ifKey, with a condition's number and a dash, prefixes a map key a
	// choice adds.
	ifKey = "QKIF-"
	// valueMark, with a value's name, stands for a field a user sets.
	valueMark = "QKVAL-"
)

// merge records in tree, the object being templated, what the choice
// numbered cond changes from base (a rendering without the choice) to
// with (the same rendering with it), and returns the new tree. tree starts
// as a copy of some rendering's object and may already hold markers of
// other choices after the items of base, which merge skips. Only
// additions are allowed: a new map key, items appended to a list; a
// removal or a changed scalar is an error naming path. A scalar that base
// holds as a value marker is templated and may differ.
func merge(tree, base, with any, cond int, path string) (any, error) {
	switch b := base.(type) {
	case map[string]any:
		w, ok := with.(map[string]any)
		t, ok2 := tree.(map[string]any)
		if !ok || !ok2 {
			return nil, fmt.Errorf("chartgen: %s: a map becomes %T", path, with)
		}
		for k := range b {
			if _, ok := w[k]; !ok {
				return nil, fmt.Errorf("chartgen: %s: the choice removes key %q, which a chart cannot template", path, k)
			}
		}
		for _, k := range sortedKeys(w) {
			bv, ok := b[k]
			if !ok {
				t[fmt.Sprintf("%s%d-%s", ifKey, cond, k)] = w[k]
				continue
			}
			tv, ok := t[k]
			if !ok {
				return nil, fmt.Errorf("chartgen: %s.%s: in the rendering but not in the chart", path, k)
			}
			nv, err := merge(tv, bv, w[k], cond, path+"."+k)
			if err != nil {
				return nil, err
			}
			t[k] = nv
		}
		return t, nil
	case []any:
		w, ok := with.([]any)
		t, ok2 := tree.([]any)
		if !ok || !ok2 || len(w) < len(b) {
			return nil, fmt.Errorf("chartgen: %s: the choice removes list items, which a chart cannot template", path)
		}
		for i := range b {
			if reflect.DeepEqual(b[i], w[i]) {
				continue
			}
			// The tree's first items are the rendering's it was copied
			// from; a choice merged earlier only appended after them.
			if i >= len(t) || isMarker(t[i]) {
				return nil, fmt.Errorf("chartgen: %s[%d]: changed by two choices in a way the generator cannot place", path, i)
			}
			nv, err := merge(t[i], b[i], w[i], cond, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			t[i] = nv
		}
		if len(w) > len(b) {
			t = append(t, fmt.Sprintf("%s%d", ifItem, cond))
			t = append(t, w[len(b):]...)
			t = append(t, fmt.Sprintf("%s%d", endItem, cond))
		}
		return t, nil
	default:
		if s, ok := base.(string); ok && strings.HasPrefix(s, valueMark) {
			return tree, nil
		}
		if !reflect.DeepEqual(base, with) {
			return nil, fmt.Errorf("chartgen: %s: the choice changes %v to %v, which a chart cannot template", path, base, with)
		}
		return tree, nil
	}
}

// isMarker reports whether v is a list marker of merge.
func isMarker(v any) bool {
	s, ok := v.(string)
	return ok && (strings.HasPrefix(s, ifItem) || strings.HasPrefix(s, endItem))
}

// sortedKeys returns m's keys in order, so that generation is
// deterministic.
func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// deepCopy copies a decoded YAML value, so that the tree and the
// renderings it came from never share a map or a list.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = deepCopy(x)
		}
		return out
	default:
		return v
	}
}
