package ownwrites

import (
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func rq(rv string) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q", ResourceVersion: rv}}
}

func TestFreshestFollowsTheChainOfWrites(t *testing.T) {
	l := New[string]()
	now := time.Unix(100, 0)
	l.Wrote("ns/q", "1", rq("2"), now)
	l.Wrote("ns/q", "2", rq("3"), now)
	for _, cached := range []string{"1", "2"} {
		if got := l.Freshest("ns/q", rq(cached)).GetResourceVersion(); got != "3" {
			t.Errorf("cache at %s: Freshest = %s, want the last write 3", cached, got)
		}
	}
	if !l.Own("ns/q", rq("2")) || !l.Own("ns/q", rq("3")) || l.Own("ns/q", rq("1")) {
		t.Error("Own: want versions 2 and 3 (written) and not 1 (written over)")
	}
	// The informer delivers the last write: the chain is forgotten.
	if got := l.Freshest("ns/q", rq("3")).GetResourceVersion(); got != "3" {
		t.Errorf("Freshest at the last write = %s", got)
	}
	if got := l.Freshest("ns/q", rq("2")).GetResourceVersion(); got != "2" {
		t.Errorf("after the last write was delivered Freshest = %s, want the cache", got)
	}
	if !l.LastWrite("ns/q").Equal(now) {
		t.Errorf("LastWrite = %v, want %v", l.LastWrite("ns/q"), now)
	}
}

func TestAnotherWriterBreaksTheChain(t *testing.T) {
	l := New[string]()
	l.Wrote("k", "1", rq("2"), time.Now())
	// Someone else wrote 5: newer than every write remembered.
	if got := l.Freshest("k", rq("5")).GetResourceVersion(); got != "5" {
		t.Errorf("Freshest = %s, want 5", got)
	}
	// A write over a version the chain does not end with starts anew.
	l.Wrote("k", "5", rq("6"), time.Now())
	l.Wrote("k", "9", rq("10"), time.Now())
	if got := l.Freshest("k", rq("5")).GetResourceVersion(); got != "5" {
		t.Errorf("Freshest over a broken chain = %s, want the cache", got)
	}
}

func TestWritesWithoutVersionsTrustTheCache(t *testing.T) {
	l := New[string]()
	l.Wrote("k", "1", rq("2"), time.Now())
	var none *corev1.ResourceQuota
	l.Wrote("k", "2", none, time.Now()) // a typed nil: no panic
	l.Wrote("k", "", rq("3"), time.Now())
	if got := l.Freshest("k", rq("1")).GetResourceVersion(); got != "1" {
		t.Errorf("Freshest = %s, want the cache", got)
	}
	if l.LastWrite("k").IsZero() {
		t.Error("LastWrite is zero after writes")
	}
}

func TestBoundedChain(t *testing.T) {
	l := New[string]()
	for i := range 3 * MaxWrites {
		l.Wrote("k", itoa(i), rq(itoa(i+1)), time.Now())
	}
	if l.Own("k", rq("1")) {
		t.Error("the oldest versions are still remembered past MaxWrites")
	}
	if got := l.Freshest("k", rq(itoa(3*MaxWrites-1))).GetResourceVersion(); got != itoa(3*MaxWrites) {
		t.Errorf("Freshest = %s", got)
	}
}

func TestConflictsAndForget(t *testing.T) {
	l := New[string]()
	l.Wrote("k", "1", rq("2"), time.Now())
	l.Conflict("k")
	if got := l.Freshest("k", rq("1")).GetResourceVersion(); got != "1" {
		t.Errorf("after a conflict Freshest = %s, want the cache", got)
	}
	if !l.TakeConflict("k") || l.TakeConflict("k") {
		t.Error("TakeConflict: want true once, then false")
	}
	l.Wrote("k", "1", rq("2"), time.Now())
	l.Conflict("k")
	l.Forget("k")
	if l.TakeConflict("k") || !l.LastWrite("k").IsZero() || l.Own("k", rq("2")) {
		t.Error("Forget left something behind")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
