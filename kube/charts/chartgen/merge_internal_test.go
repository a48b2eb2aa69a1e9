package chartgen

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMergeOnlyAdds checks that merge templates what a choice adds and
// refuses anything else, rather than produce a chart that differs from
// kustomize.
func TestMergeOnlyAdds(t *testing.T) {
	tests := []struct {
		name       string
		base, with any
		want       any
		err        string
	}{
		{
			name: "appended items and a new key",
			base: map[string]any{"args": []any{"-a"}, "image": valueMark + "image"},
			with: map[string]any{"args": []any{"-a", "-b"}, "image": "x:1", "env": "e"},
			want: map[string]any{"args": []any{"-a", ifItem + "3", "-b", endItem + "3"}, "image": valueMark + "image", ifKey + "3-env": "e"},
		},
		{name: "removed key", base: map[string]any{"a": 1, "b": 2}, with: map[string]any{"a": 1}, err: "removes key"},
		{name: "removed item", base: []any{"a", "b"}, with: []any{"a"}, err: "removes list items"},
		{name: "changed scalar", base: map[string]any{"replicas": 2}, with: map[string]any{"replicas": 3}, err: "changes 2 to 3"},
		{name: "map to list", base: map[string]any{"a": map[string]any{}}, with: map[string]any{"a": []any{}}, err: "a map becomes"},
	}
	for _, tt := range tests {
		got, err := merge(deepCopy(tt.base), tt.base, tt.with, 3, "o")
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: merge = %v, %v; want an error containing %q", tt.name, got, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: merge: %v", tt.name, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: merge (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestActions checks the template text that the markers become.
func TestActions(t *testing.T) {
	c := &chart{conds: []string{".Values.a"}, values: map[string]value{
		"image": {expr: `"{{ .Values.image }}"`},
		"res":   {expr: "toYaml .Values.res", block: true},
	}}
	in := []string{
		"metadata:",
		"  QKIF-0-annotations:",
		"    k: v",
		"  name: n",
		"args:",
		"- -a",
		"- QKIF-0",
		"- -b",
		"- QKEND-0",
		"image: QKVAL-image",
		"resources: QKVAL-res",
	}
	want := []string{
		"metadata:",
		"  {{- if .Values.a }}",
		"  annotations:",
		"    k: v",
		"  {{- end }}",
		"  name: n",
		"args:",
		"- -a",
		"{{- if .Values.a }}",
		"- -b",
		"{{- end }}",
		`image: "{{ .Values.image }}"`,
		"resources:",
		"  {{- toYaml .Values.res | nindent 2 }}",
	}
	got, err := c.actions(in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}
