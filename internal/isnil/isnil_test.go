package isnil

import "testing"

type rec struct{ n int }

func (r *rec) N() int { return r.n }

type getter interface{ N() int }

func TestValue(t *testing.T) {
	var nilRec *rec
	var nilGetter getter
	var typedNil getter = nilRec
	var nilMap map[string]int
	var nilFunc func()
	tests := []struct {
		name string
		v    any
		want bool
	}{
		{"untyped nil", nil, true},
		{"nil interface", nilGetter, true},
		{"typed nil pointer in an interface", typedNil, true},
		{"nil map", nilMap, true},
		{"nil func", nilFunc, true},
		{"pointer", &rec{}, false},
		{"struct", rec{}, false},
		{"int", 0, false},
		{"empty string", "", false},
		{"empty map", map[string]int{}, false},
	}
	for _, tt := range tests {
		if got := Value(tt.v); got != tt.want {
			t.Errorf("%s: Value = %v, want %v", tt.name, got, tt.want)
		}
	}
}
