package charges

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quotakit/quotakit/internal/ledger"
)

func pods(n int64) corev1.ResourceList {
	return corev1.ResourceList{"pods": *resource.NewQuantity(n, resource.DecimalSI)}
}

// step settles and commits one sync of quota "ns/q" at now and returns
// the pods it writes and releases.
func step(t *testing.T, b *Book[string], now time.Time, status, usage int64, arr ledger.Arrivals) (used, released int64, recheck time.Time) {
	t.Helper()
	return stepRV(t, b, now, status, "", usage, arr)
}

// stepRV is step with the quota's resourceVersion.
func stepRV(t *testing.T, b *Book[string], now time.Time, status int64, rv string, usage int64, arr ledger.Arrivals) (used, released int64, recheck time.Time) {
	t.Helper()
	s := b.Settle(now, "ns/q", Sighting{Status: pods(status), RV: rv, Usage: pods(usage), Parts: map[string]Part{"": {Usage: pods(usage), Arrived: arr}}})
	u := s.Used["pods"]
	r := s.Released["pods"]
	return u.Value(), r.Value(), b.Commit(now, s, pods(u.Value()))
}

func TestChargeBook(t *testing.T) {
	const w = 10 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	none := ledger.Arrivals{}

	t.Run("first sight holds the excess one window", func(t *testing.T) {
		b := New[string](w)
		if used, _, at := step(t, b, t0, 5, 3, none); used != 5 || !at.Equal(t0.Add(w)) {
			t.Fatalf("first sync: used %d, recheck at %v; want 5 at %v", used, at, t0.Add(w))
		}
		if used, rel, _ := step(t, b, t0.Add(w-time.Millisecond), 5, 3, none); used != 5 || rel != 0 {
			t.Fatalf("within the window: used %d released %d; want 5 and 0", used, rel)
		}
		if used, rel, at := step(t, b, t0.Add(w), 5, 3, none); used != 3 || rel != 2 || !at.IsZero() {
			t.Fatalf("a window later: used %d released %d recheck %v; want 3, 2 and none", used, rel, at)
		}
	})

	t.Run("an arrival accounts for a charge", func(t *testing.T) {
		b := New[string](w)
		step(t, b, t0, 3, 3, none)
		// Admission charges 2; one object arrives.
		if used, _, at := step(t, b, t0.Add(time.Second), 5, 4, none); used != 5 || !at.Equal(t0.Add(time.Second+w)) {
			t.Fatalf("after a charge of 2 and one arrival: used %d, recheck %v; want 5 at %v", used, at, t0.Add(time.Second+w))
		}
		// The other never does: released a window after it was seen.
		if used, rel, _ := step(t, b, t0.Add(time.Second+w), 5, 4, none); used != 4 || rel != 1 {
			t.Fatalf("a window later: used %d released %d, want 4 and 1", used, rel)
		}
	})

	t.Run("a deletion is released at once", func(t *testing.T) {
		b := New[string](w)
		step(t, b, t0, 5, 3, none) // two in flight
		if used, _, _ := step(t, b, t0.Add(time.Second), 5, 2, none); used != 4 {
			t.Fatalf("after a deletion with two in flight: used %d, want 4", used)
		}
	})

	t.Run("charges without pause hold at most the last window's", func(t *testing.T) {
		b := New[string](w)
		step(t, b, t0, 0, 0, none)
		// A charge every second; each object arrives, but one charge in
		// four is never followed.
		// status is what is stored: the controller's last write, plus
		// each charge.
		used, usage := int64(0), int64(0)
		for i := 1; i <= 100; i++ {
			status := used + 1
			if i%4 != 0 {
				usage++
			}
			used, _, _ = step(t, b, t0.Add(time.Duration(i)*time.Second), status, usage, none)
			if used < usage {
				t.Fatalf("t=%ds: used %d below the %d objects", i, used, usage)
			}
		}
		// 25 leaked; the last 10 s saw 10 charges.
		if held := used - usage; held > 10 {
			t.Errorf("held %d charges in flight, want at most the window's 10", held)
		}
		// Once the charges stop, the rest goes within a window.
		if used, _, _ = step(t, b, t0.Add(100*time.Second+w), used, usage, none); used != usage {
			t.Errorf("a window after the last charge: used %d, want %d", used, usage)
		}
	})

	t.Run("a deletion does not hide an arrival", func(t *testing.T) {
		b := New[string](w)
		step(t, b, t0, 3, 3, ledger.Arrivals{Gen: 1, Sums: pods(3)})
		// Charge 1; it arrives and another object is deleted: usage is
		// unchanged, but the ledger counted the arrival.
		if used, _, _ := step(t, b, t0.Add(time.Second), 4, 3, ledger.Arrivals{Gen: 1, Sums: pods(4)}); used != 3 {
			t.Fatalf("after the arrival and the deletion: used %d, want 3", used)
		}
		// Without the ledger's count, the charge is held, never lost.
		b = New[string](w)
		step(t, b, t0, 3, 3, none)
		if used, _, _ := step(t, b, t0.Add(time.Second), 4, 3, none); used != 4 {
			t.Fatalf("without arrival counts: used %d, want 4 (held)", used)
		}
		// A rebuilt account's count is not compared with the old one's.
		b = New[string](w)
		step(t, b, t0, 3, 3, ledger.Arrivals{Gen: 1, Sums: pods(30)})
		if used, _, _ := step(t, b, t0.Add(time.Second), 4, 3, ledger.Arrivals{Gen: 2, Sums: pods(1)}); used != 4 {
			t.Fatalf("after a rebuilt account: used %d, want 4 (held)", used)
		}
	})

	t.Run("a charge taken back is not held", func(t *testing.T) {
		b := New[string](w)
		step(t, b, t0, 3, 3, none)
		step(t, b, t0.Add(time.Second), 5, 3, none)
		// Admission releases one of the two charges it made.
		if used, _, _ := step(t, b, t0.Add(2*time.Second), 4, 3, none); used != 4 {
			t.Fatalf("after admission took one charge back: used %d, want 4", used)
		}
	})

	t.Run("a namespace charged without pause is rechecked at the expiry of the oldest charge held", func(t *testing.T) {
		b := New[string](w)
		step(t, b, t0, 0, 0, none)
		status, usage := int64(0), int64(0)
		var rechecks []time.Time
		for i := 1; i <= 40; i++ {
			now := t0.Add(time.Duration(i) * time.Second)
			status++ // a charge every second; its object arrives 2 s later
			if i > 2 {
				usage++
			}
			used, rel, at := step(t, b, now, status, usage, none)
			if rel != 0 {
				t.Fatalf("t=%ds: released %d of charges whose objects arrived", i, rel)
			}
			if used != status {
				t.Fatalf("t=%ds: used %d, want %d", i, used, status)
			}
			if !at.IsZero() {
				rechecks = append(rechecks, at)
			}
		}
		// The charges held are the last two, seen 1 and 2 s ago: each
		// recheck is asked for at the expiry of the oldest, once the one
		// asked for before has run.
		if len(rechecks) < 3 || len(rechecks) > 5 {
			t.Fatalf("rechecks %v, want one every window less the 2 s the objects take", rechecks)
		}
		for i := 1; i < len(rechecks); i++ {
			if d := rechecks[i].Sub(rechecks[i-1]); d < w-2*time.Second {
				t.Errorf("rechecks %v apart, want at least %v", d, w-2*time.Second)
			}
		}
	})

	t.Run("each charge held is released a window after it was seen", func(t *testing.T) {
		// Two charges no object follows, a second apart, then charges
		// whose objects are still on their way: the first is released at
		// its expiry, and the recheck then asked for is the second's
		// expiry, not a window after the first's.
		b := New[string](w)
		step(t, b, t0, 0, 0, none)
		if _, _, at := step(t, b, t0.Add(time.Second), 1, 0, none); !at.Equal(t0.Add(time.Second + w)) {
			t.Fatalf("recheck after the first charge at %v, want %v", at, t0.Add(time.Second+w))
		}
		step(t, b, t0.Add(2*time.Second), 2, 0, none)
		for i := 3; i <= 9; i++ {
			step(t, b, t0.Add(time.Duration(i)*time.Second), int64(i), 0, none)
		}
		used, rel, at := step(t, b, t0.Add(time.Second+w), 9, 0, none)
		if used != 8 || rel != 1 || !at.Equal(t0.Add(2*time.Second+w)) {
			t.Fatalf("at the first charge's expiry: used %d released %d recheck %v; want 8, 1 and %v", used, rel, at, t0.Add(2*time.Second+w))
		}
		used, rel, _ = step(t, b, t0.Add(2*time.Second+w), 8, 0, none)
		if used != 7 || rel != 1 {
			t.Fatalf("at the second charge's expiry: used %d released %d; want 7 and 1", used, rel)
		}
	})

	t.Run("an object seen before its charge is not held", func(t *testing.T) {
		// The objects' cache runs ahead of the quota's: each object
		// arrives (resourceVersion 2i) before the status that charged it
		// (2i-1) is seen.
		b := New[string](w)
		stepRV(t, b, t0, 0, "1", 0, none)
		for i := int64(1); i <= 20; i++ {
			now := t0.Add(time.Duration(i) * time.Second)
			arr := ledger.Arrivals{Gen: 1, Sums: pods(i), RV: uint64(2 * i)}
			if used, _, _ := stepRV(t, b, now, i-1, fmt.Sprint(2*i-3), i, arr); used != i {
				t.Fatalf("t=%ds, object seen first: used %d, want %d", i, used, i)
			}
			if used, _, at := stepRV(t, b, now.Add(time.Second/2), i, fmt.Sprint(2*i-1), i, arr); used != i || !at.IsZero() {
				t.Fatalf("t=%ds, charge seen after: used %d, recheck %v; want %d and none", i, used, at, i)
			}
		}
	})

	t.Run("a credit cancels a gain first seen past its object", func(t *testing.T) {
		// An object (resourceVersion 12) arrives while another is
		// deleted, before the status that charged it is seen; the next
		// status seen (15) is past the object, and shows its charge: the
		// credit cancels it before it is dropped, and the deletion is
		// released.
		b := New[string](w)
		stepRV(t, b, t0, 5, "10", 5, ledger.Arrivals{Gen: 1, Sums: pods(5)})
		if used, _, _ := stepRV(t, b, t0.Add(time.Second), 5, "10", 5, ledger.Arrivals{Gen: 1, Sums: pods(6), RV: 12}); used != 5 {
			t.Fatalf("after the arrival and the deletion: used %d, want 5", used)
		}
		if used, _, at := stepRV(t, b, t0.Add(2*time.Second), 6, "15", 5, ledger.Arrivals{Gen: 1, Sums: pods(6), RV: 12}); used != 5 || !at.IsZero() {
			t.Fatalf("after the charge is seen: used %d, recheck %v; want 5 and none", used, at)
		}
	})

	t.Run("an arrival the status has passed holds no credit", func(t *testing.T) {
		// An object arrives whose charge is older than the status seen
		// and not held (released, or made before the quota): the next
		// charge is held all the same.
		for _, tt := range []struct{ name, rv1, rv2 string }{
			{"resourceVersions", "10", "12"},
			{"resourceVersions that are not integers", "x", "y"},
		} {
			b := New[string](w)
			stepRV(t, b, t0, 0, tt.rv1, 0, ledger.Arrivals{Gen: 1, Sums: pods(0)})
			// The object (resourceVersion 5) arrives: status.used is
			// written 1.
			if used, _, _ := stepRV(t, b, t0.Add(time.Second), 0, tt.rv1, 1, ledger.Arrivals{Gen: 1, Sums: pods(1), RV: 5}); used != 1 {
				t.Fatalf("%s: after the arrival: used %d, want 1", tt.name, used)
			}
			if used, _, _ := stepRV(t, b, t0.Add(2*time.Second), 2, tt.rv2, 1, ledger.Arrivals{Gen: 1, Sums: pods(1), RV: 5}); used != 2 {
				t.Fatalf("%s: after a charge in flight: used %d, want 2", tt.name, used)
			}
		}
	})

	t.Run("a namespace that joins brings no arrivals", func(t *testing.T) {
		// A ClusterQuota: a charge in flight in namespace a, then
		// namespace b, with two objects admission never charged to the
		// quota, joins its selection.
		b := New[string](w)
		a0 := ledger.Arrivals{Gen: 1, Sums: pods(0)}
		b.Commit(t0, b.Settle(t0, "cq", Sighting{Status: pods(0), Usage: pods(0), Parts: map[string]Part{"a": {pods(0), a0}}}), pods(0))
		s := b.Settle(t0.Add(time.Second), "cq", Sighting{Status: pods(1), Usage: pods(0), Parts: map[string]Part{"a": {pods(0), a0}}})
		b.Commit(t0.Add(time.Second), s, pods(1))
		s = b.Settle(t0.Add(2*time.Second), "cq", Sighting{Status: pods(1), Usage: pods(2), Parts: map[string]Part{
			"a": {pods(0), a0}, "b": {pods(2), ledger.Arrivals{Gen: 2, Sums: pods(0)}},
		}})
		if u := s.Used["pods"]; u.Value() != 3 {
			t.Fatalf("after namespace b joined: used %d, want 3 (b's two and a's charge in flight)", u.Value())
		}
	})

	t.Run("off", func(t *testing.T) {
		b := New[string](-1)
		if used, _, at := step(t, b, t0, 5, 3, none); used != 3 || !at.IsZero() {
			t.Fatalf("off: used %d, recheck %v; want 3 and none", used, at)
		}
	})
}
