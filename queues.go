package quotakit

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/quotakit/quotakit/internal/safe"
	"github.com/quotakit/quotakit/workqueue"
)

// quotaQueues are the controller's two queues of quotas, as in
// kube-controller-manager: a priority lane for quotas whose status lacks
// something admission needs and for released usage, and a primary lane for
// the rest. Keys leave them only through [quotaQueues.work], which never
// hands one key to two workers at once: a key taken from one lane while a
// worker of either lane syncs it is set aside, and synced again, from the
// priority lane, once that worker is done. Kubernetes syncs such a key
// twice at once, and the second status write conflicts.
type quotaQueues struct {
	primary  *workqueue.RateLimitingQueue[quotaRef]
	priority *workqueue.RateLimitingQueue[quotaRef]

	mu sync.Mutex
	// syncing holds the keys being synced, with true when another sync of
	// the key was asked for meanwhile.
	// guarded by mu
	syncing map[quotaRef]bool
}

func newQuotaQueues(opts Options) *quotaQueues {
	limiter := workqueue.DefaultControllerRateLimiter[quotaRef]
	if opts.NewRateLimiter != nil {
		limiter = func() workqueue.RateLimiter[quotaRef] { return keyLimiter{opts.NewRateLimiter()} }
	}
	return &quotaQueues{
		primary:  workqueue.NewRateLimiting(limiter(), workqueue.Options{Name: "resourcequota_primary", MetricsProvider: opts.MetricsProvider}),
		priority: workqueue.NewRateLimiting(limiter(), workqueue.Options{Name: "resourcequota_priority", MetricsProvider: opts.MetricsProvider}),
		syncing:  map[quotaRef]bool{},
	}
}

// keyLimiter is a rate limiter of Options.NewRateLimiter, which knows a
// quota by its key: namespace/name for a ResourceQuota, the name for a
// ClusterQuota (which has no slash, so the two never meet).
type keyLimiter struct{ l workqueue.RateLimiter[string] }

func (k keyLimiter) When(r quotaRef) time.Duration { return k.l.When(r.key) }
func (k keyLimiter) Forget(r quotaRef)             { k.l.Forget(r.key) }
func (k keyLimiter) NumRequeues(r quotaRef) int    { return k.l.NumRequeues(r.key) }

// add queues key on the priority lane when urgent, else on the primary
// lane.
func (q *quotaQueues) add(key quotaRef, urgent bool) {
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
func (q *quotaQueues) work(ctx context.Context, log logr.Logger, lane *workqueue.RateLimitingQueue[quotaRef], sync func(ctx context.Context, key quotaRef) error) {
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
				log.V(1).Info("status write conflicted; syncing again", "quota", key.key, "kind", key.kind.String(), "reason", err.Error())
			default:
				log.Error(err, "failed to sync quota", "quota", key.key, "kind", key.kind.String())
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
func (q *quotaQueues) begin(key quotaRef) bool {
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
func (q *quotaQueues) end(key quotaRef) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	again := q.syncing[key]
	delete(q.syncing, key)
	return again
}
