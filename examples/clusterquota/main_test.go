package main

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), &out); err != nil {
		t.Fatal(err)
	}
	want := `team-a-dev/pod-0: admitted
team-a-test/pod-1: admitted
team-a-prod/pod-2: admitted
team-a-dev/pod-3: admitted
team-a-test/pod-4: admitted
team-a-prod/pod-5: pods "pod-5" is forbidden: exceeded quota: clusterquota/team-a, requested: pods=1, used: pods=5, limited: pods=5
team-a-dev/pod-6: pods "pod-6" is forbidden: exceeded quota: clusterquota/team-a, requested: pods=1, used: pods=5, limited: pods=5
team-a: pods 5/5 (team-a-dev=2, team-a-prod=1, team-a-test=2)
team-a-test moved to team-b
team-a: pods 3/5 (team-a-dev=2, team-a-prod=1)
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
