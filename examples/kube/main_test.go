package main

import (
	"flag"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCountFlag(t *testing.T) {
	tests := []struct {
		args    []string
		want    countFlag
		wantErr bool
	}{
		{args: nil, want: nil},
		{
			args: []string{"-count", "widgets.v1.example.com", "-count", "cronjobs.v1.batch"},
			want: countFlag{
				{Group: "example.com", Version: "v1", Resource: "widgets"},
				{Group: "batch", Version: "v1", Resource: "cronjobs"},
			},
		},
		{args: []string{"-count", "widgets"}, wantErr: true},
		{args: []string{"-count", "widgets.example"}, wantErr: true},
		{args: []string{"-count", ".v1.example.com"}, wantErr: true},
		{args: []string{"-count", "widgets..example.com"}, wantErr: true},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("kube", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var got countFlag
		fs.Var(&got, "count", "")
		err := fs.Parse(tt.args)
		if (err != nil) != tt.wantErr {
			t.Errorf("Parse(%q) error = %v, want error %v", tt.args, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); !tt.wantErr && diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tt.args, diff)
		}
	}
}

func TestCountFlagString(t *testing.T) {
	f := countFlag{{Group: "example.com", Version: "v1", Resource: "widgets"}, {Group: "batch", Version: "v1", Resource: "cronjobs"}}
	if got, want := f.String(), "widgets.v1.example.com,cronjobs.v1.batch"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
