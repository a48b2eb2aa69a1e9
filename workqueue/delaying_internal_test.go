package workqueue

// A white-box test: reaching the 2^32nd AddAfter call through the API
// would take minutes, so the test starts the ticket counter just below it.

import (
	"math"
	"testing"
	"testing/synctest"
	"time"
)

// TestDelayingQueueOrderAcrossTicket32 checks that items with the same
// ready time keep their AddAfter order past 2^32 calls, where a 32-bit
// counter would wrap and put the later call first.
func TestDelayingQueueOrderAcrossTicket32(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewDelaying[string](Options{})
		q.tickets = math.MaxUint32 - 1
		for _, item := range []string{"a", "b", "c", "d"} {
			q.AddAfter(item, time.Second) // same ready time: virtual time stands still
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		var got []string
		for q.Len() > 0 {
			item, _ := q.Get()
			got = append(got, item)
			q.Done(item)
		}
		q.ShutDown()
		if want := "abcd"; len(got) != 4 || got[0]+got[1]+got[2]+got[3] != want {
			t.Errorf("Get order = %v, want %s", got, want)
		}
	})
}
