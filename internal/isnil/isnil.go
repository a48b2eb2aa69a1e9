// Package isnil tells a nil interface value from one that holds a nil
// pointer, map, slice, channel or function: both are nil to a caller who
// wrote `var rec *quota.AttributesRecord`, but only the first compares
// equal to nil, and calling a method on the second may panic.
package isnil

import "reflect"

// Value reports whether v is nil or holds a nil pointer, map, slice,
// channel, function or interface.
func Value(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
