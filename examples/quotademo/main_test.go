package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRun churns a small cluster and checks that the run reports every
// quota correct, shows the table, and measured the controller following
// deletions and updates.
func TestRun(t *testing.T) {
	var out strings.Builder
	cfg := config{Namespaces: 3, Pods: 6, Events: 400, Duration: 10 * time.Second, Rate: 400, Resync: 500 * time.Millisecond, ChargeWindow: time.Second, Seed: 7, Rows: 4}
	rep, err := run(t.Context(), &out, cfg)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if rep.quotas != 12 || rep.wrong != 0 {
		t.Errorf("run reported %d wrong of %d quotas, want 0 of 12\n%s", rep.wrong, rep.quotas, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"quotademo: 3 namespaces, 12 quotas, 18 pods, 9 services, 15 configmaps",
		"initial sync: every quota matches its recount",
		"NAMESPACE  NAME",
		"team-000   besteffort",
		"all 12 quotas match a from-scratch recount of the API's objects",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	m := regexp.MustCompile(`convergence latency over (\d+) events`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("output has no latency line:\n%s", got)
	}
	if n, _ := strconv.Atoi(m[1]); n < 20 {
		t.Errorf("latency measured over %d events, want the churn's deletions and updates (at least 20):\n%s", n, got)
	}
}
