package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/quota"
)

// view shows the run: on a terminal, a kubectl get quota-style table of
// the first quotas and a progress line, redrawn in place; otherwise a
// progress line every second, and the table once at the end.
type view struct {
	out io.Writer
	w   *world
	cfg config
	// header is what was printed before the view started; a frame drawn
	// in place clears the screen (long lines wrap, so moving the cursor
	// up by the lines printed would not reach the frame's top) and
	// repeats it.
	header string
	stopc  chan struct{}
	done   chan struct{}
}

func newView(out io.Writer, w *world, cfg config, header string) *view {
	return &view{out: out, w: w, cfg: cfg, header: header, stopc: make(chan struct{}), done: make(chan struct{})}
}

// start draws until stop.
func (v *view) start() {
	every := time.Second
	if v.cfg.Live {
		every = 250 * time.Millisecond
	}
	go func() {
		defer close(v.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-v.stopc:
				return
			case <-t.C:
			}
			if v.cfg.Live {
				v.redraw(v.table() + v.progress() + "\n")
			} else {
				fmt.Fprintln(v.out, v.progress())
			}
		}
	}()
}

// stop stops drawing and waits for the drawing goroutine.
func (v *view) stop() {
	close(v.stopc)
	<-v.done
}

// final draws the table as it ends.
func (v *view) final() {
	if v.cfg.Live {
		v.redraw(v.table())
		return
	}
	fmt.Fprint(v.out, v.table())
}

// redraw replaces the screen with the header and frame.
func (v *view) redraw(frame string) {
	fmt.Fprint(v.out, "\x1b[H\x1b[2J"+v.header+frame)
}

// progress is one line on the churn so far.
func (v *view) progress() string {
	s := v.w.snapshot()
	elapsed := time.Since(s.churnStart)
	n, p50, p99, _, pending, writes := v.w.track.summary()
	return fmt.Sprintf("churn %4.1fs  events %d/%d (%.0f/s)  creates %d (%d denied)  deletes %d  succeeded %d  graceful %d | status writes %d  latency p50 %v p99 %v over %d  waiting %d",
		elapsed.Seconds(), s.events, v.cfg.Events, float64(s.events)/elapsed.Seconds(), s.creates, s.denied, s.deletes, s.succeeded, s.graceful,
		writes, p50.Round(time.Millisecond), p99.Round(time.Millisecond), n, pending)
}

// table lists the first cfg.Rows quotas as kubectl get quota -A does:
// limits.* under LIMIT, the rest under REQUEST, each as used/hard.
func (v *view) table() string {
	list, err := v.w.api.List(context.Background(), quotasGVR, "", metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("listing quotas: %v\n", err)
	}
	items := list.(*corev1.ResourceQuotaList).Items
	slices.SortFunc(items, func(a, b corev1.ResourceQuota) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tAGE\tREQUEST\tLIMIT")
	for _, q := range items[:min(len(items), v.cfg.Rows)] {
		var req, lim []string
		for _, name := range quota.ResourceNames(q.Status.Hard) {
			used, hard := q.Status.Used[name], q.Status.Hard[name]
			s := fmt.Sprintf("%s: %s/%s", name, used.String(), hard.String())
			if strings.HasPrefix(string(name), "limits.") {
				lim = append(lim, s)
			} else {
				req = append(req, s)
			}
		}
		age := time.Since(q.CreationTimestamp.Time).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\n", q.Namespace, q.Name, age, strings.Join(req, ", "), strings.Join(lim, ", "))
	}
	tw.Flush()
	if len(items) > v.cfg.Rows {
		fmt.Fprintf(&b, "… and %d more quotas\n", len(items)-v.cfg.Rows)
	}
	return b.String()
}
