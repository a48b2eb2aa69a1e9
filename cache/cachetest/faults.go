package cachetest

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Request records one List or Watch call the server received, whatever its
// outcome (injected failures included).
type Request struct {
	// Verb is "list" or "watch".
	Verb string
	// GVR is the resource asked for.
	GVR schema.GroupVersionResource
	// Namespace is the namespace of the request, "" for all.
	Namespace string
	// Options are the options as received.
	Options metav1.ListOptions
}

// faults are the failures and delays waiting to be injected.
type faults struct {
	failLists   int
	listErr     error
	failWatches int
	watchErr    error
	listDelay   time.Duration
	watchDelay  time.Duration
}

// FailNextLists makes the next n List calls, on any resource, fail with err
// (after being recorded and delayed). A nil err means a 500 InternalError.
// n <= 0 cancels pending list failures.
func (s *Server) FailNextLists(n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.failLists, s.faults.listErr = max(n, 0), injected(err)
}

// FailNextWatches makes the next n Watch calls, on any resource, return err
// instead of a watch, as when the HTTP request fails. A nil err means a 500
// InternalError. n <= 0 cancels pending watch failures. To end open watches
// with an error event instead, use [Server.FailAllWatches].
func (s *Server) FailNextWatches(n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.failWatches, s.faults.watchErr = max(n, 0), injected(err)
}

func injected(err error) error {
	if err == nil {
		return apierrors.NewInternalError(errors.New("cachetest: injected failure"))
	}
	return err
}

// SetListDelay makes every later List call wait d before it is served (0
// to stop). The wait ends early, with an error, when the caller's context
// is done.
func (s *Server) SetListDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.listDelay = d
}

// SetWatchDelay makes every later Watch call wait d before the watch is
// opened (0 to stop). The wait ends early, with an error, when the caller's
// context is done.
func (s *Server) SetWatchDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.watchDelay = d
}

// Compact drops the event history of every resource, as an etcd compaction
// followed by a watch-cache restart would: a watch from any resourceVersion
// older than the current one then gets 410 Expired, and so do exact lists
// and continue tokens from before. Current objects are unaffected.
func (s *Server) Compact() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.resources {
		r.compact(s.rv)
	}
}

// CloseAllWatches closes the result channel of every open watch without an
// error, as when watches time out or an apiserver restarts: clients should
// re-watch from the last resourceVersion they saw.
func (s *Server) CloseAllWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		w.terminate(nil)
	}
}

// FailAllWatches ends every open watch with a watch.Error event carrying
// err's status (a 500 InternalError when err is not an API status error, or
// is nil), sent after the events already queued for it, then closes it.
func (s *Server) FailAllWatches(err error) {
	st := errorStatus(injected(err))
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		w.terminate(st)
	}
}

// Requests returns the List and Watch calls received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ResetRequests forgets the recorded requests.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// ActiveWatches returns the number of watches whose goroutine is still
// running.
func (s *Server) ActiveWatches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watchers)
}

// admit records a request, then applies the injected delay and failure for
// its verb.
func (s *Server) admit(ctx context.Context, req Request) error {
	s.mu.Lock()
	s.requests = append(s.requests, req)
	delay := s.faults.listDelay
	if req.Verb == "watch" {
		delay = s.faults.watchDelay
	}
	s.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctxError(ctx)
		}
	}
	if err := ctx.Err(); err != nil {
		return ctxError(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.Verb == "watch" {
		if s.faults.failWatches > 0 {
			s.faults.failWatches--
			return s.faults.watchErr
		}
		return nil
	}
	if s.faults.failLists > 0 {
		s.faults.failLists--
		return s.faults.listErr
	}
	return nil
}
