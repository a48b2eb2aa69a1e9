package quotakit_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit"
)

// TestControllerCoalescesReleases deletes 100 pods of a quota, one every
// 10ms, as a deleter racing creators does: the controller writes their
// releases in about one write per 100ms rather than one per deletion,
// each write one more that admission, writing over the version it read,
// would conflict with. A deletion after a quiet second is written at
// once.
func TestControllerCoalescesReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		for i := range 101 {
			create(t, client, podsGVR, testPod(fmt.Sprintf("p%d", i), "1", corev1.PodRunning))
		}
		create(t, client, quotasGVR, testQuota("q", rl("pods", "200")))
		c, stop := start(t, client, quotakit.Options{})
		defer stop()
		settle()
		checkUsed(t, client, "q", rl("pods", "101"))

		before := client.writes()
		for i := range 100 {
			if err := client.Delete(t.Context(), podsGVR, "ns", fmt.Sprintf("p%d", i), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		settle()
		checkUsed(t, client, "q", rl("pods", "1"))
		writes := client.writes() - before
		t.Logf("100 deletions 10ms apart: %d status writes, %d put off", writes, c.PutOffWrites())
		if writes > 15 {
			t.Errorf("100 deletions 10ms apart made %d status writes, want about one per 100ms (at most 15)", writes)
		}

		// Quiet: the next release goes out at once.
		if err := client.Delete(t.Context(), podsGVR, "ns", "p100", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		checkUsed(t, client, "q", rl("pods", "0"))
	})
}

// TestControllerConflictsAreNotErrors makes the controller's status
// writes conflict, as they do while admission charges the quota: each is
// retried and counted, and logged below error level; an operator who
// pages on errors is not paged for them.
func TestControllerConflictsAreNotErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newTestClient()
		defer client.Close()
		create(t, client, podsGVR, testPod("a", "1", corev1.PodRunning))
		create(t, client, quotasGVR, testQuota("q", rl("pods", "5")))
		conflict := apierrors.NewConflict(quotasGVR.GroupResource(), "q", fmt.Errorf("the object has been modified"))
		client.statusErrs = []error{conflict, conflict}
		sink, verbose := &logSink{}, &logSink{}
		c, err := quotakit.NewController(client, quotakit.Options{Logger: logr.New(teeSink{
			LogSink: sink.logger().GetSink(),
			v1:      verbose.logger().GetSink(),
		})})
		if err != nil {
			t.Fatal(err)
		}
		stop := run(t, c)
		defer stop()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		checkUsed(t, client, "q", rl("pods", "1"))
		if n := sink.count("the object has been modified"); n != 0 {
			t.Errorf("%d conflicts logged at error level, want none", n)
		}
		if n := verbose.countInfo("status write conflicted"); n != 2 {
			t.Errorf("%d conflicts logged at V(1), want 2", n)
		}
		if n := c.StatusConflicts(); n != 2 {
			t.Errorf("StatusConflicts() = %d, want 2", n)
		}
	})
}

// teeSink sends V(0) logs and errors to its LogSink and V(1) infos to v1.
type teeSink struct {
	logr.LogSink
	v1 logr.LogSink
}

func (s teeSink) Enabled(level int) bool { return level <= 1 }

func (s teeSink) Info(level int, msg string, kv ...any) {
	if level == 0 {
		s.LogSink.Info(level, msg, kv...)
		return
	}
	s.v1.Info(0, msg, kv...)
}

func (s teeSink) WithValues(kv ...any) logr.LogSink {
	return teeSink{s.LogSink.WithValues(kv...), s.v1.WithValues(kv...)}
}

func (s teeSink) WithName(name string) logr.LogSink {
	return teeSink{s.LogSink.WithName(name), s.v1.WithName(name)}
}
