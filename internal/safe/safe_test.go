package safe_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/quotakit/quotakit/internal/safe"
)

func TestCall(t *testing.T) {
	want := errors.New("plain")
	if err := safe.Call(func() error { return want }); err != want {
		t.Errorf("Call(returns an error) = %v, want %v", err, want)
	}
	err := safe.Call(func() error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "recovered from a panic: boom") {
		t.Errorf("Call(panics) = %v, want the recovered panic", err)
	}
}
