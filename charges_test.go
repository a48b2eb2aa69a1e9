package quotakit

import (
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
func step(t *testing.T, b *chargeBook, now time.Time, status, usage int64, arr ledger.Arrivals) (used, released int64, recheck time.Time) {
	t.Helper()
	s := b.settle(now, "ns/q", pods(status), pods(usage), arr)
	u := s.used["pods"]
	r := s.released["pods"]
	return u.Value(), r.Value(), b.commit(now, s, pods(u.Value()))
}

func TestChargeBook(t *testing.T) {
	const w = 10 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	none := ledger.Arrivals{}

	t.Run("first sight holds the excess one window", func(t *testing.T) {
		b := newChargeBook(w)
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
		b := newChargeBook(w)
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
		b := newChargeBook(w)
		step(t, b, t0, 5, 3, none) // two in flight
		if used, _, _ := step(t, b, t0.Add(time.Second), 5, 2, none); used != 4 {
			t.Fatalf("after a deletion with two in flight: used %d, want 4", used)
		}
	})

	t.Run("charges without pause hold at most the last window's", func(t *testing.T) {
		b := newChargeBook(w)
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
		b := newChargeBook(w)
		step(t, b, t0, 3, 3, ledger.Arrivals{Gen: 1, Sums: pods(3)})
		// Charge 1; it arrives and another object is deleted: usage is
		// unchanged, but the ledger counted the arrival.
		if used, _, _ := step(t, b, t0.Add(time.Second), 4, 3, ledger.Arrivals{Gen: 1, Sums: pods(4)}); used != 3 {
			t.Fatalf("after the arrival and the deletion: used %d, want 3", used)
		}
		// Without the ledger's count, the charge is held, never lost.
		b = newChargeBook(w)
		step(t, b, t0, 3, 3, none)
		if used, _, _ := step(t, b, t0.Add(time.Second), 4, 3, none); used != 4 {
			t.Fatalf("without arrival counts: used %d, want 4 (held)", used)
		}
		// A rebuilt account's count is not compared with the old one's.
		b = newChargeBook(w)
		step(t, b, t0, 3, 3, ledger.Arrivals{Gen: 1, Sums: pods(30)})
		if used, _, _ := step(t, b, t0.Add(time.Second), 4, 3, ledger.Arrivals{Gen: 2, Sums: pods(1)}); used != 4 {
			t.Fatalf("after a rebuilt account: used %d, want 4 (held)", used)
		}
	})

	t.Run("a charge taken back is not held", func(t *testing.T) {
		b := newChargeBook(w)
		step(t, b, t0, 3, 3, none)
		step(t, b, t0.Add(time.Second), 5, 3, none)
		// Admission releases one of the two charges it made.
		if used, _, _ := step(t, b, t0.Add(2*time.Second), 4, 3, none); used != 4 {
			t.Fatalf("after admission took one charge back: used %d, want 4", used)
		}
	})

	t.Run("a namespace charged without pause is rechecked once per window", func(t *testing.T) {
		b := newChargeBook(w)
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
		if len(rechecks) < 2 {
			t.Fatalf("rechecks %v, want one a window", rechecks)
		}
		for i := 1; i < len(rechecks); i++ {
			if d := rechecks[i].Sub(rechecks[i-1]); d < w {
				t.Errorf("rechecks %v apart, want at least %v", d, w)
			}
		}
	})

	t.Run("off", func(t *testing.T) {
		b := newChargeBook(-1)
		if used, _, at := step(t, b, t0, 5, 3, none); used != 3 || !at.IsZero() {
			t.Fatalf("off: used %d, recheck %v; want 3 and none", used, at)
		}
	})
}
