package quotakit

import (
	"context"
	"errors"
	"sync"

	"github.com/go-logr/logr"

	"github.com/quotakit/quotakit/internal/safe"
	"github.com/quotakit/quotakit/workqueue"
)

// quotaQueues are the controller's two queues of quota keys, as in
// kube-controller-manager: a priority lane for quotas whose status lacks
// something admission needs and for released usage, and a primary lane for
// the rest. Keys leave them only through [quotaQueues.work], which never
// hands one key to two workers at once: a key taken from one lane while a
// worker of either lane syncs it is set aside, and synced again, from the
// priority lane, once that worker is done. Kubernetes syncs such a key
// twice at once, and the second status write conflicts.
type quotaQueues struct {
	primary  *workqueue.RateLimitingQueue[string]
	priority *workqueue.RateLimitingQueue[string]

	mu sync.Mutex
	// syncing holds the keys being synced, with true when another sync of
	// the key was asked for meanwhile.
	// guarded by mu
	syncing map[string]bool
}

func newQuotaQueues(opts Options) *quotaQueues {
	limiter := opts.NewRateLimiter
	if limiter == nil {
		limiter = workqueue.DefaultControllerRateLimiter[string]
	}
	return &quotaQueues{
		primary:  workqueue.NewRateLimiting(limiter(), workqueue.Options{Name: "resourcequota_primary", MetricsProvider: opts.MetricsProvider}),
		priority: workqueue.NewRateLimiting(limiter(), workqueue.Options{Name: "resourcequota_priority", MetricsProvider: opts.MetricsProvider}),
		syncing:  map[string]bool{},
	}
}

// add queues key on the priority lane when urgent, else on the primary
// lane.
func (q *quotaQueues) add(key string, urgent bool) {
	if urgent {
		q.priority.Add(key)
		return
	}
	q.primary.Add(key)
}

// shutDown stops both lanes; workers return once they finish their key.
func (q *quotaQueues) shutDown() {
	q.primary.ShutDown()
	q.priority.ShutDown()
}

// work syncs the keys of lane with sync until the lane shuts down. A key
// whose sync fails is queued again with the lane's rate limiter. A panic
// in sync fails that sync only: evaluators and the client are the caller's
// code, and the process that embeds the controller must not end with it.
func (q *quotaQueues) work(ctx context.Context, log logr.Logger, lane *workqueue.RateLimitingQueue[string], sync func(ctx context.Context, key string) error) {
	for {
		key, shutdown := lane.Get()
		if shutdown {
			return
		}
		if !q.begin(key) {
			lane.Forget(key)
			lane.Done(key)
			continue
		}
		err := safe.Call(func() error { return sync(ctx, key) })
		if err != nil {
			var conflict *conflictError
			switch {
			case ctx.Err() != nil:
			case errors.As(err, &conflict) && conflict == err:
				// Another writer (admission) wrote the status since the
				// version read: expected under load, synced again.
				log.V(1).Info("status write conflicted; syncing again", "quota", key, "reason", err.Error())
			default:
				log.Error(err, "failed to sync resource quota", "quota", key)
			}
			lane.AddRateLimited(key)
		} else {
			lane.Forget(key)
		}
		if q.end(key) {
			q.priority.Add(key)
		}
		lane.Done(key)
	}
}

// begin marks key as being synced and reports true, or, when another
// worker syncs it, asks for another sync after that one and reports false.
func (q *quotaQueues) begin(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, busy := q.syncing[key]; busy {
		q.syncing[key] = true
		return false
	}
	q.syncing[key] = false
	return true
}

// end unmarks key and reports whether another sync was asked for while it
// ran.
func (q *quotaQueues) end(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	again := q.syncing[key]
	delete(q.syncing, key)
	return again
}
