package cache_test

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotakit/quotakit/cache"
)

func TestMetaNamespaceKeyFunc(t *testing.T) {
	tests := []struct {
		name    string
		obj     any
		want    string
		wantErr bool
	}{
		{name: "namespaced", obj: pod("ns", "p", "1"), want: "ns/p"},
		{name: "cluster-scoped", obj: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, want: "n1"},
		{name: "explicit key", obj: cache.ExplicitKey("a/b"), want: "a/b"},
		{name: "nil", obj: nil, wantErr: true},
		{name: "typed nil pointer", obj: (*corev1.Pod)(nil), wantErr: true},
		{name: "no meta", obj: 42, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cache.MetaNamespaceKeyFunc(tt.obj)
			if tt.wantErr {
				if !errors.Is(err, cache.ErrNoMeta) {
					t.Fatalf("MetaNamespaceKeyFunc(%v) error = %v, want ErrNoMeta", tt.obj, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("MetaNamespaceKeyFunc(%v) = %q, %v, want %q", tt.obj, got, err, tt.want)
			}
		})
	}
}

func TestDeletionHandlingMetaNamespaceKeyFunc(t *testing.T) {
	tests := []struct {
		name string
		obj  any
		want string
	}{
		{name: "tombstone", obj: cache.DeletedFinalStateUnknown{Key: "ns/gone"}, want: "ns/gone"},
		{name: "tombstone pointer", obj: &cache.DeletedFinalStateUnknown{Key: "ns/gone"}, want: "ns/gone"},
		{name: "object", obj: pod("ns", "p", "1"), want: "ns/p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cache.DeletionHandlingMetaNamespaceKeyFunc(tt.obj)
			if err != nil || got != tt.want {
				t.Errorf("DeletionHandlingMetaNamespaceKeyFunc(%v) = %q, %v, want %q", tt.obj, got, err, tt.want)
			}
		})
	}
}

func TestSplitMetaNamespaceKey(t *testing.T) {
	tests := []struct {
		key           string
		wantNamespace string
		wantName      string
		wantErr       bool
	}{
		{key: "name", wantName: "name"},
		{key: "ns/name", wantNamespace: "ns", wantName: "name"},
		{key: "/name", wantName: "name"},
		{key: "a/b/c", wantErr: true},
		{key: ""},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			ns, name, err := cache.SplitMetaNamespaceKey(tt.key)
			if (err != nil) != tt.wantErr {
				t.Fatalf("SplitMetaNamespaceKey(%q) error = %v, wantErr %v", tt.key, err, tt.wantErr)
			}
			if ns != tt.wantNamespace || name != tt.wantName {
				t.Errorf("SplitMetaNamespaceKey(%q) = %q, %q, want %q, %q", tt.key, ns, name, tt.wantNamespace, tt.wantName)
			}
		})
	}
}

func TestObjectName(t *testing.T) {
	n := cache.NewObjectName("ns", "p")
	if got := n.String(); got != "ns/p" {
		t.Errorf("String() = %q, want ns/p", got)
	}
	if got := cache.NewObjectName("", "node").String(); got != "node" {
		t.Errorf("String() of cluster-scoped = %q, want node", got)
	}
	if ns, name := n.Parts(); ns != "ns" || name != "p" {
		t.Errorf("Parts() = %q, %q", ns, name)
	}
	if got, want := n.AsNamespacedName(), (types.NamespacedName{Namespace: "ns", Name: "p"}); got != want {
		t.Errorf("AsNamespacedName() = %v, want %v", got, want)
	}
	if got := cache.NamespacedNameAsObjectName(types.NamespacedName{Namespace: "ns", Name: "p"}); got != n {
		t.Errorf("NamespacedNameAsObjectName() = %v, want %v", got, n)
	}
	if got, err := cache.ParseObjectName("ns/p"); err != nil || got != n {
		t.Errorf("ParseObjectName(ns/p) = %v, %v, want %v", got, err, n)
	}
	if _, err := cache.ParseObjectName("a/b/c"); err == nil {
		t.Error("ParseObjectName(a/b/c) succeeded, want error")
	}
	if got, err := cache.ObjectToName(pod("ns", "p", "1")); err != nil || got != n {
		t.Errorf("ObjectToName(pod) = %v, %v, want %v", got, err, n)
	}
	if _, err := cache.ObjectToName("not an object"); !errors.Is(err, cache.ErrNoMeta) {
		t.Errorf("ObjectToName(string) error = %v, want ErrNoMeta", err)
	}
	if got, err := cache.DeletionHandlingObjectToName(cache.DeletedFinalStateUnknown{Key: "ns/p"}); err != nil || got != n {
		t.Errorf("DeletionHandlingObjectToName(tombstone) = %v, %v, want %v", got, err, n)
	}
}

func TestKeyErrorUnwraps(t *testing.T) {
	sentinel := errors.New("boom")
	err := fmt.Errorf("outer: %w", cache.KeyError{Obj: "x", Err: cache.KeyError{Obj: "y", Err: sentinel}})
	if !errors.Is(err, sentinel) {
		t.Errorf("errors.Is(%v, sentinel) = false, want true", err)
	}
	var ke cache.KeyError
	if !errors.As(err, &ke) || ke.Obj != "x" {
		t.Errorf("errors.As(%v) = %v, want the outer KeyError", err, ke)
	}
	if got, want := ke.Error(), "cache: couldn't create key for object of type string: cache: couldn't create key for object of type string: boom"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
