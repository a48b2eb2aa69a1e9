package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestTrackerExpectSince: a change noticed after the controller already
// wrote the status it brings is resolved by that write, with the latency
// from the change; a write from before the change, or of another usage,
// does not resolve it.
func TestTrackerExpectSince(t *testing.T) {
	tr := podsTracker()
	end := time.Now()
	tr.observe("ns/q", end.Add(-time.Millisecond), used("2")) // before the change
	tr.observe("ns/q", end.Add(3*time.Millisecond), used("2"))
	tr.observe("ns/q", end.Add(5*time.Millisecond), used("1"))

	tr.expectSince("grace period over", "ns/q", end, used("2"))
	n, _, _, maxL, pending, _ := tr.summary()
	if n != 1 || pending != 0 || maxL != 3*time.Millisecond {
		t.Errorf("after a matching write since the change: %d resolved (max %v), %d pending; want 1 resolved at 3ms, 0 pending", n, maxL, pending)
	}

	tr.expectSince("grace period over", "ns/q", end.Add(10*time.Millisecond), used("1"))
	if n, _, _, _, pending, _ = tr.summary(); n != 1 || pending != 1 {
		t.Errorf("with no write since the change: %d resolved, %d pending; want 1 and 1", n, pending)
	}
	tr.observe("ns/q", end.Add(12*time.Millisecond), used("1"))
	if n, _, _, maxL, pending, _ = tr.summary(); n != 2 || pending != 0 || maxL != 3*time.Millisecond {
		t.Errorf("after the write: %d resolved (max %v), %d pending; want 2 resolved, max 3ms, 0 pending", n, maxL, pending)
	}

	// Two grace periods end 1 ms apart and the controller's one write
	// shows both; the first is noticed before that write, the second
	// after it: the write resolves both.
	tr.expectSince("grace period over", "ns/q", end.Add(20*time.Millisecond), used("3"))
	tr.observe("ns/q", end.Add(22*time.Millisecond), used("0"))
	tr.expectSince("grace period over", "ns/q", end.Add(21*time.Millisecond), used("0"))
	if n, _, _, maxL, pending, _ = tr.summary(); n != 4 || pending != 0 || maxL != 3*time.Millisecond {
		t.Errorf("after one write for two ends: %d resolved (max %v), %d pending; want 4 resolved, max 3ms, 0 pending", n, maxL, pending)
	}
}

// TestTrackerSilentExpectation: a creation's expectation (kind "") is not
// measured nor counted as pending, but a write that shows it resolves the
// changes expected before it.
func TestTrackerSilentExpectation(t *testing.T) {
	tr := podsTracker()
	end := time.Now()
	tr.expectSince("grace period over", "ns/q", end, used("3"))
	tr.expect("", "ns/q", end.Add(time.Millisecond), used("4"))
	if n, _, _, _, pending, _ := tr.summary(); n != 0 || pending != 1 {
		t.Errorf("before any write: %d resolved, %d pending; want 0 and 1 (the creation is not counted)", n, pending)
	}
	tr.observe("ns/q", end.Add(2*time.Millisecond), used("4"))
	n, _, _, maxL, pending, _ := tr.summary()
	if n != 1 || pending != 0 || maxL != 2*time.Millisecond {
		t.Errorf("after a write showing the creation: %d resolved (max %v), %d pending; want the grace period's alone, at 2ms, 0 pending", n, maxL, pending)
	}
	if got := tr.kinds(); len(got) != 1 || got[0] != "grace period over" {
		t.Errorf("kinds = %q, want only the grace period's", got)
	}
}

// podsTracker returns a tracker of one quota, ns/q, that limits pods.
func podsTracker() *tracker {
	tr := newTracker()
	tr.hard["ns/q"] = []corev1.ResourceName{corev1.ResourcePods}
	return tr
}

// used is a usage of n pods.
func used(n string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourcePods: resource.MustParse(n)}
}
