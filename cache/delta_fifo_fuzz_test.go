package cache_test

import (
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/quotakit/quotakit/cache"
)

// FuzzDeltaFIFO drives a DeltaFIFO with random Add, Update, Delete, Replace,
// Resync and Pop sequences. A consumer applies every popped delta to its own
// store, which is also the queue's KnownObjects, as an informer does. Once
// the queue is drained the consumer's store must equal a simple model: the
// last Replace plus the events after it.
func FuzzDeltaFIFO(f *testing.F) {
	f.Add([]byte{0, 0, 1, 5, 3, 0b101, 5, 5, 2, 4})
	f.Add([]byte{1, 0, 9, 0, 17, 5, 3, 0, 2, 1, 5, 4, 5})
	f.Add([]byte{2, 3, 0xff, 5, 2, 3, 0, 5, 4, 5, 3, 0x0f, 4})
	f.Add([]byte{3, 0, 0, 5, 2, 0, 3, 0x01, 5, 5, 5})
	f.Fuzz(fuzzDeltaFIFO)
}

// fuzzDeltaFIFO is the body of FuzzDeltaFIFO for one input.
func fuzzDeltaFIFO(t *testing.T, data []byte) {
	if len(data) == 0 {
		return
	}
	// Long inputs add nothing a shorter one cannot reach (8 keys) and make
	// each execution, and minimization, slow.
	if len(data) > 512 {
		data = data[:512]
	}
	known := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	opts := cache.DeltaFIFOOptions{KnownObjects: known, EmitDeltaTypeReplaced: data[0]&1 == 1}
	transforms := 0
	if data[0]&2 == 2 {
		opts.Transformer = func(obj any) (any, error) { transforms++; return obj, nil }
	}
	fifo := cache.NewDeltaFIFO(opts)

	model := map[string]string{} // key → resourceVersion
	rv := 0
	next := func() string { rv++; return fmt.Sprint(rv) }
	objects := 0
	wrote := false // Resync alone does not populate the queue
	process := func(d cache.Deltas, _ bool) error {
		if len(d) == 0 {
			t.Fatal("popped empty Deltas")
		}
		key, _ := fifo.KeyOf(d[0].Object)
		for i, delta := range d {
			if k, _ := fifo.KeyOf(delta.Object); k != key {
				t.Fatalf("Deltas mix keys %q and %q", key, k)
			}
			if i > 0 && delta.Type == cache.Deleted && d[i-1].Type == cache.Deleted {
				t.Fatalf("consecutive deletions not merged: %v", describe(d))
			}
		}
		return applyTo(known)(d, false)
	}
	pop := func() {
		if fifo.Len() == 0 {
			return
		}
		if err := fifo.Pop(t.Context(), process); err != nil {
			t.Fatalf("Pop: %v", err)
		}
	}

	ops := data[1:]
	for i := 0; i < len(ops); i++ {
		name := fmt.Sprint("p", ops[i]>>3%8)
		key := "ns/" + name
		wrote = wrote || ops[i]%8 < 4
		switch ops[i] % 8 {
		case 0, 1:
			v := next()
			objects++
			var err error
			if ops[i]%8 == 0 {
				err = fifo.Add(pod("ns", name, v))
			} else {
				err = fifo.Update(pod("ns", name, v))
			}
			if err != nil {
				t.Fatal(err)
			}
			model[key] = v
		case 2:
			objects++
			if err := fifo.Delete(pod("ns", name, next())); err != nil {
				t.Fatal(err)
			}
			delete(model, key)
		case 3:
			var mask byte
			if i+1 < len(ops) {
				i++
				mask = ops[i]
			}
			var list []any
			clear(model)
			for b := range 8 {
				if mask&(1<<b) != 0 {
					v := next()
					list = append(list, pod("ns", fmt.Sprint("p", b), v))
					model[fmt.Sprint("ns/p", b)] = v
				}
			}
			objects += len(list)
			if err := fifo.Replace(list, fmt.Sprint(rv)); err != nil {
				t.Fatal(err)
			}
		case 4:
			if err := fifo.Resync(); err != nil {
				t.Fatal(err)
			}
		default:
			pop()
		}
	}
	for fifo.Len() > 0 {
		pop()
	}

	got := map[string]string{}
	for _, obj := range known.List() {
		p := obj.(*corev1.Pod)
		got[p.Namespace+"/"+p.Name] = p.ResourceVersion
	}
	if !maps.Equal(got, model) {
		t.Errorf("consumer store = %v, want %v (ops %v)", got, model, data)
	}
	if wrote && !fifo.HasSynced() {
		t.Error("HasSynced() = false after draining the queue")
	}
	if opts.Transformer != nil && transforms != objects {
		t.Errorf("transformer ran %d times for %d objects", transforms, objects)
	}
}
