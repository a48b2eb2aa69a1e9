// Package safe runs callers' code (evaluators, clients, index functions)
// so that a panic in it fails the one call it happened in, as an error,
// instead of ending the process that embeds quotakit.
package safe

import (
	"fmt"
	"runtime/debug"
)

// Call runs f and returns its error, or, if f panics, an error that says
// so, with the stack.
func Call(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("quotakit: recovered from a panic: %v\n%s", v, debug.Stack())
		}
	}()
	return f()
}
