package cachetest_test

import (
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/cache/cachetest"
)

func TestListSelectors(t *testing.T) {
	s := cachetest.New(cachetest.Options{})
	for _, p := range []*corev1.Pod{
		newPod("a", "web-1", map[string]string{"app": "web", "tier": "front"}),
		newPod("a", "db-1", map[string]string{"app": "db"}),
		newPod("b", "web-1", map[string]string{"app": "web"}),
		newPod("b", "job", nil),
	} {
		create(t, s, podsGVR, p)
	}
	tests := []struct {
		name      string
		namespace string
		opts      metav1.ListOptions
		want      []string
	}{
		{name: "everything", want: []string{"a/db-1", "a/web-1", "b/job", "b/web-1"}},
		{name: "namespace", namespace: "b", want: []string{"b/job", "b/web-1"}},
		{name: "label equality", opts: metav1.ListOptions{LabelSelector: "app=web"}, want: []string{"a/web-1", "b/web-1"}},
		{name: "label set", opts: metav1.ListOptions{LabelSelector: "app in (db,web),tier!=front"}, want: []string{"a/db-1", "b/web-1"}},
		{name: "label absent", opts: metav1.ListOptions{LabelSelector: "!app"}, want: []string{"b/job"}},
		{name: "metadata.name", opts: metav1.ListOptions{FieldSelector: "metadata.name=web-1"}, want: []string{"a/web-1", "b/web-1"}},
		{name: "metadata.namespace", opts: metav1.ListOptions{FieldSelector: "metadata.namespace!=a"}, want: []string{"b/job", "b/web-1"}},
		{name: "label, field and namespace", namespace: "a", opts: metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "metadata.name=web-1"}, want: []string{"a/web-1"}},
		{name: "nothing", namespace: "c", want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list, err := s.List(t.Context(), podsGVR, tt.namespace, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := list.(*corev1.PodList); !ok {
				t.Fatalf("List returned %T, want *corev1.PodList", list)
			}
			got, rv := listKeys(t, list)
			if d := diffStrings(tt.want, got); d != "" {
				t.Errorf("List(%q, %+v):%s", tt.namespace, tt.opts, d)
			}
			if rv != "5" {
				t.Errorf("List ResourceVersion = %q, want 5", rv)
			}
		})
	}
}

func TestListResourceVersionSemantics(t *testing.T) {
	tests := []struct {
		name    string
		compact bool
		opts    metav1.ListOptions
		want    []string
		wantRV  string
		wantErr func(error) bool
	}{
		{name: "latest", want: []string{"default/a", "default/c"}, wantRV: "6"},
		{name: "any ignores limit", opts: metav1.ListOptions{ResourceVersion: "0", Limit: 1}, want: []string{"default/a", "default/c"}, wantRV: "6"},
		{name: "exact", opts: metav1.ListOptions{ResourceVersion: "3", ResourceVersionMatch: metav1.ResourceVersionMatchExact}, want: []string{"default/a", "default/b"}, wantRV: "3"},
		{name: "legacy exact with limit", opts: metav1.ListOptions{ResourceVersion: "4", Limit: 10}, want: []string{"default/a", "default/b", "default/c"}, wantRV: "4"},
		{name: "exact before any write", opts: metav1.ListOptions{ResourceVersion: "1", ResourceVersionMatch: metav1.ResourceVersionMatchExact}, want: []string{}, wantRV: "1"},
		{name: "not older than", opts: metav1.ListOptions{ResourceVersion: "3", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, want: []string{"default/a", "default/c"}, wantRV: "6"},
		{name: "not older than by default", opts: metav1.ListOptions{ResourceVersion: "6"}, want: []string{"default/a", "default/c"}, wantRV: "6"},
		{name: "exact in the future", opts: metav1.ListOptions{ResourceVersion: "9", ResourceVersionMatch: metav1.ResourceVersionMatchExact}, wantErr: isTooLarge},
		{name: "exact after compaction", compact: true, opts: metav1.ListOptions{ResourceVersion: "3", ResourceVersionMatch: metav1.ResourceVersionMatchExact}, wantErr: apierrors.IsResourceExpired},
		{name: "exact current after compaction", compact: true, opts: metav1.ListOptions{ResourceVersion: "6", ResourceVersionMatch: metav1.ResourceVersionMatchExact}, want: []string{"default/a", "default/c"}, wantRV: "6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := history(t, cachetest.Options{})
			if tt.compact {
				s.Compact()
			}
			list, err := s.List(t.Context(), podsGVR, "", tt.opts)
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("List(%+v) error = %v", tt.opts, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, rv := listKeys(t, list)
			if d := diffStrings(tt.want, got); d != "" || rv != tt.wantRV {
				t.Errorf("List(%+v) at rv %s, want %s:%s", tt.opts, rv, tt.wantRV, d)
			}
		})
	}
}

func isTooLarge(err error) bool {
	return apierrors.IsTimeout(err) && apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}

func TestListNotOlderThanWaitsForTheResourceVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := cachetest.New(cachetest.Options{FreshnessTimeout: 5 * time.Second})
		go func() {
			time.Sleep(time.Second)
			create(t, s, podsGVR, newPod("default", "a", nil)) // rv 2
		}()
		start := time.Now()
		list, err := s.List(t.Context(), podsGVR, "", metav1.ListOptions{ResourceVersion: "2"})
		if err != nil {
			t.Fatal(err)
		}
		if got, rv := listKeys(t, list); len(got) != 1 || rv != "2" || time.Since(start) != time.Second {
			t.Errorf("List = %v at %s after %v, want [default/a] at 2 after 1s", got, rv, time.Since(start))
		}
		start = time.Now()
		_, err = s.List(t.Context(), podsGVR, "", metav1.ListOptions{ResourceVersion: "3", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if !isTooLarge(err) || time.Since(start) != 5*time.Second {
			t.Errorf("List(rv 3) = %v after %v, want Too large resource version after 5s", err, time.Since(start))
		}
	})
}

// TestPagingReturnsEveryObjectOnce pages through a list while objects are
// created, updated and deleted between pages: the pages together hold the
// state of the first page exactly once.
func TestPagingReturnsEveryObjectOnce(t *testing.T) {
	for _, selector := range []string{"", "keep=yes"} {
		t.Run("selector="+selector, func(t *testing.T) {
			s := cachetest.New(cachetest.Options{})
			ctx := t.Context()
			for i := range 25 {
				name := "p" + strconv.Itoa(100+i)
				create(t, s, podsGVR, newPod("ns"+strconv.Itoa(i%3), name, map[string]string{"keep": "yes"}))
			}
			first, err := s.List(ctx, podsGVR, "", metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want, snapRV := listKeys(t, first)

			var got []string
			opts := metav1.ListOptions{Limit: 4, LabelSelector: selector}
			for page := 0; ; page++ {
				list, err := s.List(ctx, podsGVR, "", opts)
				if err != nil {
					t.Fatalf("page %d: %v", page, err)
				}
				keys, rv := listKeys(t, list)
				if rv != snapRV {
					t.Errorf("page %d at rv %s, want %s", page, rv, snapRV)
				}
				got = append(got, keys...)
				lm, _ := meta.ListAccessor(list)
				if c := lm.GetRemainingItemCount(); selector == "" && lm.GetContinue() != "" && (c == nil || int(*c) != len(want)-len(got)) {
					t.Errorf("page %d remainingItemCount = %v, want %d", page, c, len(want)-len(got))
				}
				if lm.GetContinue() == "" {
					break
				}
				// Churn between pages: new objects before and after the
				// cursor, updates and deletes of listed and unlisted ones.
				create(t, s, podsGVR, newPod("ns0", "a-new"+strconv.Itoa(page), map[string]string{"keep": "yes"}))
				create(t, s, podsGVR, newPod("ns9", "z-new"+strconv.Itoa(page), map[string]string{"keep": "yes"}))
				victim := want[(page*7)%len(want)]
				ns, name := splitKey(victim)
				if err := s.Delete(ctx, podsGVR, ns, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
				opts = metav1.ListOptions{Limit: 4, LabelSelector: selector, Continue: lm.GetContinue()}
			}
			if d := diffStrings(want, got); d != "" {
				t.Errorf("pages:%s", d)
			}
		})
	}
}

func splitKey(k string) (string, string) {
	for i := range k {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	return "", k
}

func TestContinueTokenPastTheHistoryGets410(t *testing.T) {
	s := cachetest.New(cachetest.Options{HistorySize: 2})
	ctx := t.Context()
	for i := range 5 {
		create(t, s, podsGVR, newPod("default", "p"+strconv.Itoa(i), nil))
	}
	list, err := s.List(ctx, podsGVR, "", metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	lm, _ := meta.ListAccessor(list)
	token := lm.GetContinue()
	for i := range 3 { // push the snapshot out of the two-event history
		create(t, s, podsGVR, newPod("default", "q"+strconv.Itoa(i), nil))
	}
	_, err = s.List(ctx, podsGVR, "", metav1.ListOptions{Limit: 2, Continue: token})
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("List(expired continue) error = %v, want 410 Expired", err)
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().ListMeta.Continue == "" {
		t.Fatalf("410 carries no continue token for the latest state: %v", err)
	}
	// The token in the status continues from the same key at the latest
	// state, which includes the new objects.
	rest, err := s.List(ctx, podsGVR, "", metav1.ListOptions{Continue: st.Status().ListMeta.Continue})
	if err != nil {
		t.Fatal(err)
	}
	got, rv := listKeys(t, rest)
	want := []string{"default/p2", "default/p3", "default/p4", "default/q0", "default/q1", "default/q2"}
	if d := diffStrings(want, got); d != "" || rv != s.ResourceVersion() {
		t.Errorf("inconsistent continuation at rv %s (want %s):%s", rv, s.ResourceVersion(), d)
	}
}

func TestListRejects(t *testing.T) {
	yes := true
	s := cachetest.New(cachetest.Options{})
	create(t, s, podsGVR, newPod("default", "a", nil))
	create(t, s, podsGVR, newPod("default", "b", nil))
	page, err := s.List(t.Context(), podsGVR, "", metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	lm, _ := meta.ListAccessor(page)
	token := lm.GetContinue()
	tests := []struct {
		name      string
		gvr       schema.GroupVersionResource
		namespace string
		opts      metav1.ListOptions
		want      func(error) bool
	}{
		{name: "match without resourceVersion", opts: metav1.ListOptions{ResourceVersionMatch: metav1.ResourceVersionMatchExact}, want: apierrors.IsInvalid},
		{name: "match with continue", opts: metav1.ListOptions{ResourceVersion: "1", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Continue: token}, want: apierrors.IsInvalid},
		{name: "unknown match", opts: metav1.ListOptions{ResourceVersion: "1", ResourceVersionMatch: "Newest"}, want: apierrors.IsInvalid},
		{name: "exact 0", opts: metav1.ListOptions{ResourceVersion: "0", ResourceVersionMatch: metav1.ResourceVersionMatchExact}, want: apierrors.IsInvalid},
		{name: "sendInitialEvents", opts: metav1.ListOptions{SendInitialEvents: &yes}, want: apierrors.IsInvalid},
		{name: "continue with resourceVersion", opts: metav1.ListOptions{ResourceVersion: "2", Continue: token}, want: apierrors.IsBadRequest},
		{name: "garbage continue", opts: metav1.ListOptions{Continue: "!!"}, want: apierrors.IsBadRequest},
		{name: "bad resourceVersion", opts: metav1.ListOptions{ResourceVersion: "-3"}, want: apierrors.IsBadRequest},
		{name: "bad field selector", opts: metav1.ListOptions{FieldSelector: "spec.bogus=x"}, want: apierrors.IsBadRequest},
		{name: "namespace of a cluster-scoped resource", gvr: nodesGVR, namespace: "default", want: apierrors.IsBadRequest},
		{name: "unregistered", gvr: schema.GroupVersionResource{Group: "x", Version: "v1", Resource: "y"}, want: apierrors.IsNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gvr := tt.gvr
			if gvr.Resource == "" {
				gvr = podsGVR
			}
			_, err := s.List(t.Context(), gvr, tt.namespace, tt.opts)
			if !tt.want(err) {
				t.Errorf("List(%+v) error = %v", tt.opts, err)
			}
		})
	}
}

func TestResourceSpecificFieldSelectors(t *testing.T) {
	ctx := t.Context()
	s := cachetest.New(cachetest.Options{})
	for _, p := range []struct {
		name, node string
		phase      corev1.PodPhase
	}{{"a", "n1", corev1.PodRunning}, {"b", "n1", corev1.PodSucceeded}, {"c", "n2", corev1.PodRunning}, {"d", "", corev1.PodPending}} {
		pod := newPod("default", p.name, nil)
		pod.Spec.NodeName, pod.Status.Phase = p.node, p.phase
		create(t, s, podsGVR, pod)
	}
	secrets := corev1.SchemeGroupVersion.WithResource("secrets")
	create(t, s, secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tls"}, Type: corev1.SecretTypeTLS})
	create(t, s, secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "plain"}, Type: corev1.SecretTypeOpaque})
	tests := []struct {
		gvr      schema.GroupVersionResource
		selector string
		want     []string
	}{
		{podsGVR, "spec.nodeName=n1", []string{"default/a", "default/b"}},
		{podsGVR, "spec.nodeName=n1,status.phase!=Succeeded", []string{"default/a"}},
		{podsGVR, "spec.nodeName=", []string{"default/d"}},
		{secrets, "type=kubernetes.io/tls", []string{"default/tls"}},
	}
	for _, tt := range tests {
		list, err := s.List(ctx, tt.gvr, "", metav1.ListOptions{FieldSelector: tt.selector})
		if err != nil {
			t.Fatalf("List(%s): %v", tt.selector, err)
		}
		got, _ := listKeys(t, list)
		if d := diffStrings(tt.want, got); d != "" {
			t.Errorf("List(%s):%s", tt.selector, d)
		}
	}
	// type is a secret field, not a pod one.
	if _, err := s.List(ctx, podsGVR, "", metav1.ListOptions{FieldSelector: "type=x"}); !apierrors.IsBadRequest(err) {
		t.Errorf("List(pods, type=x) error = %v, want 400", err)
	}
}
