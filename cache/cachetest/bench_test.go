package cachetest_test

import (
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotakit/quotakit/cache/cachetest"
)

func benchPod(i int) *corev1.Pod {
	p := newPod("ns"+strconv.Itoa(i%10), "pod-"+strconv.Itoa(i), map[string]string{"app": "bench"})
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}
	return p
}

func BenchmarkCreate(b *testing.B) {
	s := cachetest.New(cachetest.Options{})
	defer s.Close()
	ctx := b.Context()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Create(ctx, podsGVR, benchPod(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkUpdateWithWatcher(b *testing.B) {
	s := cachetest.New(cachetest.Options{})
	defer s.Close()
	ctx := b.Context()
	create(b, s, podsGVR, benchPod(0))
	w, err := s.Watch(ctx, podsGVR, "", metav1.ListOptions{ResourceVersion: s.ResourceVersion()})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for range w.ResultChan() {
		}
	}()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := benchPod(0)
		p.Labels["i"] = strconv.Itoa(i)
		if _, err := s.Update(ctx, podsGVR, p); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkListPages lists 10,000 pods in pages of 500, as a Reflector
// does after a 410.
func BenchmarkListPages(b *testing.B) {
	s := cachetest.New(cachetest.Options{ShareObjects: true})
	defer s.Close()
	ctx := b.Context()
	for i := range 10000 {
		if _, err := s.Create(ctx, podsGVR, benchPod(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		opts := metav1.ListOptions{Limit: 500}
		for {
			list, err := s.List(ctx, podsGVR, "", opts)
			if err != nil {
				b.Fatal(err)
			}
			c := list.(*corev1.PodList).Continue
			if c == "" {
				break
			}
			opts.Continue = c
		}
	}
}
