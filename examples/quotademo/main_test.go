package main

import (
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(t.Context(), &out); err != nil {
		t.Fatal(err)
	}
	want := `initial state:  pods 3/10, requests.cpu 1750m/4
web-2 finished: pods 2/10, requests.cpu 750m/4
web-0 deleted:  pods 1/10, requests.cpu 500m/4
limit added:    limits.memory 0/8Gi, pods 1/10, requests.cpu 500m/4
`
	if got := out.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}
