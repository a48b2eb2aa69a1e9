package clusterquota_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotakit/quotakit/clusterquota"
)

// indexModel drives an Index with a sequence of events and checks every
// answer against the plain rule: the valid quotas (ValidateSpec) whose
// Selects reports true.
type indexModel struct {
	t      *testing.T
	next   func(n int) int // a choice in [0, n)
	index  clusterquota.Index
	quotas map[string]*clusterquota.ClusterQuota
	nss    map[string]*corev1.Namespace
	rv     int
	uids   int
}

func newIndexModel(t *testing.T, next func(n int) int) *indexModel {
	return &indexModel{t: t, next: next, quotas: map[string]*clusterquota.ClusterQuota{}, nss: map[string]*corev1.Namespace{}}
}

var (
	modelKeys   = []string{"tenant", "env", "tier"}
	modelValues = []string{"a", "b", "c"}
)

func (m *indexModel) pick(from []string) string { return from[m.next(len(from))] }

// selector returns a random selector, sometimes invalid.
func (m *indexModel) selector() clusterquota.ClusterQuotaSelector {
	var sel clusterquota.ClusterQuotaSelector
	ls := &metav1.LabelSelector{}
	for range m.next(3) {
		if ls.MatchLabels == nil {
			ls.MatchLabels = map[string]string{}
		}
		ls.MatchLabels[m.pick(modelKeys)] = m.pick(modelValues)
	}
	for range m.next(3) {
		req := metav1.LabelSelectorRequirement{Key: m.pick(modelKeys)}
		switch m.next(6) {
		case 0, 1:
			req.Operator = metav1.LabelSelectorOpIn
			for range 1 + m.next(3) {
				req.Values = append(req.Values, m.pick(modelValues))
			}
		case 2:
			req.Operator = metav1.LabelSelectorOpNotIn
			req.Values = []string{m.pick(modelValues)}
		case 3:
			req.Operator = metav1.LabelSelectorOpExists
		case 4:
			req.Operator = metav1.LabelSelectorOpDoesNotExist
		case 5:
			req.Operator = "Sometimes" // invalid
		}
		ls.MatchExpressions = append(ls.MatchExpressions, req)
	}
	if m.next(4) > 0 {
		sel.LabelSelector = ls
	}
	if m.next(3) == 0 {
		sel.AnnotationSelector = map[string]string{"owner": m.pick([]string{"x", "y"})}
	}
	if m.next(20) == 0 && sel.LabelSelector != nil && len(ls.MatchLabels) > 0 {
		ls.MatchLabels["tenant"] = "b c" // invalid value
	}
	return sel
}

func (m *indexModel) setQuota() {
	name := fmt.Sprintf("q%d", m.next(6))
	m.rv++
	old := m.quotas[name]
	var cq *clusterquota.ClusterQuota
	switch {
	case old != nil && m.next(2) == 0:
		// A status write: the same spec and generation.
		cq = old.DeepCopy()
		cq.Status.Total.Used = corev1.ResourceList{"pods": *resource.NewQuantity(int64(m.rv), resource.DecimalSI)}
	default:
		cq = &clusterquota.ClusterQuota{ObjectMeta: metav1.ObjectMeta{Name: name}}
		cq.Spec.Selector = m.selector()
		cq.Spec.Quota.Hard = corev1.ResourceList{"pods": resource.MustParse("10")}
		switch {
		case old == nil || m.next(8) == 0:
			// Created, or deleted and created again.
			m.uids++
			cq.UID = types.UID(strconv.Itoa(m.uids))
			cq.Generation = int64(m.next(2)) // 0: an API server that keeps none
		default:
			cq.UID = old.UID
			if old.Generation > 0 {
				cq.Generation = old.Generation + 1
			}
		}
	}
	cq.ResourceVersion = strconv.Itoa(m.rv)
	m.quotas[name] = cq
	m.index.SetClusterQuota(cq)
}

func (m *indexModel) namespace(name string) *corev1.Namespace {
	m.rv++
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: strconv.Itoa(m.rv), Labels: map[string]string{}}}
	for _, k := range modelKeys {
		if m.next(3) > 0 {
			ns.Labels[k] = m.pick(modelValues)
		}
	}
	if m.next(2) == 0 {
		ns.Annotations = map[string]string{"owner": m.pick([]string{"x", "y"})}
	}
	return ns
}

func (m *indexModel) step() {
	switch m.next(10) {
	case 0, 1, 2, 3:
		m.setQuota()
	case 4:
		name := fmt.Sprintf("q%d", m.next(6))
		delete(m.quotas, name)
		m.index.DeleteClusterQuota(name)
	case 5, 6, 7, 8:
		ns := m.namespace(fmt.Sprintf("ns%d", m.next(10)))
		m.nss[ns.Name] = ns
		m.index.SetNamespace(ns)
	case 9:
		name := fmt.Sprintf("ns%d", m.next(10))
		delete(m.nss, name)
		m.index.DeleteNamespace(name)
	}
}

// selecting is the plain rule.
func (m *indexModel) selecting(ns *corev1.Namespace) []string {
	var out []string
	for name, cq := range m.quotas {
		if clusterquota.ValidateSpec(cq) != nil {
			continue
		}
		if ok, err := cq.Selects(ns); err == nil && ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (m *indexModel) check(step int) {
	t := m.t
	t.Helper()
	lookup := func(ns *corev1.Namespace, what string) {
		t.Helper()
		want := m.selecting(ns)
		got := m.index.Lookup(ns)
		if diff := cmp.Diff(want, got.Names, cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); diff != "" {
			t.Fatalf("step %d: Lookup(%s %s %v %v) names (-want +got):\n%s", step, what, ns.Name, ns.Labels, ns.Annotations, diff)
		}
		if key := fmt.Sprint(want); len(want) > 0 && got.Key != joined(want) || len(want) == 0 && got.Key != "" {
			t.Fatalf("step %d: Lookup(%s) key = %q, want %q", step, ns.Name, got.Key, key)
		}
	}
	for _, ns := range m.nss {
		lookup(ns, "fed")
	}
	// A namespace the index was not told of, or a newer version of one
	// it was: the answer is for the object given.
	lookup(m.namespace(fmt.Sprintf("ns%d", m.next(12))), "unfed")

	for name, cq := range m.quotas {
		var want []string
		for nsName, ns := range m.nss {
			if slices.Contains(m.selecting(ns), name) {
				want = append(want, nsName)
			}
		}
		slices.Sort(want)
		got, ok := m.index.Namespaces(cq)
		if !ok || !slices.Equal(got, want) {
			t.Fatalf("step %d: Namespaces(%s) = %v, %v; want %v, true", step, name, got, ok, want)
		}
		if m.index.Get(name) != cq {
			t.Fatalf("step %d: Get(%s) is not the version fed last", step, name)
		}
	}
	var wantInvalid, gotInvalid []string
	for name, cq := range m.quotas {
		if clusterquota.ValidateSpec(cq) != nil {
			wantInvalid = append(wantInvalid, name)
		}
	}
	slices.Sort(wantInvalid)
	for _, q := range m.index.Invalid() {
		gotInvalid = append(gotInvalid, q.Quota.Name)
	}
	if !slices.Equal(wantInvalid, gotInvalid) {
		t.Fatalf("step %d: Invalid() = %v, want %v", step, gotInvalid, wantInvalid)
	}
}

func joined(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ","
		}
		out += n
	}
	return out
}

// TestIndexAgreesWithSelects: after every event of random sequences of
// quota and namespace changes, the Index gives what ValidateSpec and
// Selects give for every namespace, fed or not, and every quota.
func TestIndexAgreesWithSelects(t *testing.T) {
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 7))
		m := newIndexModel(t, rng.IntN)
		for step := range 60 {
			m.step()
			m.check(step)
		}
	}
}

// FuzzIndex is TestIndexAgreesWithSelects with the choices drawn from the
// fuzzer's bytes.
func FuzzIndex(f *testing.F) {
	f.Add([]byte{0, 5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 1})
	f.Add([]byte("the index agrees with Selects on every namespace"))
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func(n int) int {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return int(b) % n
		}
		m := newIndexModel(t, next)
		for step := 0; len(data) > 0 && step < 200; step++ {
			m.step()
			m.check(step)
		}
	})
}

func tenantQuota(name, tenant string) *clusterquota.ClusterQuota {
	return &clusterquota.ClusterQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Generation: 1, ResourceVersion: "1"},
		Spec: clusterquota.ClusterQuotaSpec{
			Selector: clusterquota.ClusterQuotaSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": tenant}}},
			Quota:    corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("10")}},
		},
	}
}

func tenantNamespace(name, tenant, rv string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Labels: map[string]string{"tenant": tenant}}}
}

// TestIndexLookupIsForTheNamespaceGiven: a namespace relabelled since the
// Index was told of it is answered for its new labels, not from the
// mapping the Index holds for the old version.
func TestIndexLookupIsForTheNamespaceGiven(t *testing.T) {
	var x clusterquota.Index
	x.SetClusterQuota(tenantQuota("team-a", "a"))
	x.SetClusterQuota(tenantQuota("team-b", "b"))
	x.SetNamespace(tenantNamespace("n", "a", "5"))
	tests := []struct {
		ns   *corev1.Namespace
		want clusterquota.Selection
	}{
		{tenantNamespace("n", "a", "5"), clusterquota.Selection{Names: []string{"team-a"}, Key: "team-a"}},
		{tenantNamespace("n", "b", "6"), clusterquota.Selection{Names: []string{"team-b"}, Key: "team-b"}},
		{tenantNamespace("n", "c", "6"), clusterquota.Selection{}},
		{tenantNamespace("unfed", "b", "1"), clusterquota.Selection{Names: []string{"team-b"}, Key: "team-b"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, x.Lookup(tt.ns)); diff != "" {
			t.Errorf("Lookup(%s at %s, tenant %s) (-want +got):\n%s", tt.ns.Name, tt.ns.ResourceVersion, tt.ns.Labels["tenant"], diff)
		}
	}
	both := tenantQuota("both", "a")
	both.Spec.Selector.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: metav1.LabelSelectorOpExists}}}
	x.SetClusterQuota(both)
	want := clusterquota.Selection{Names: []string{"both", "team-a"}, Key: "both,team-a"}
	if diff := cmp.Diff(want, x.Lookup(tenantNamespace("n", "a", "5"))); diff != "" {
		t.Errorf("Lookup(n) with a second quota (-want +got):\n%s", diff)
	}
	if got, ok := x.Namespaces(both); !ok || !slices.Equal(got, []string{"n"}) {
		t.Errorf("Namespaces(both) = %v, %v; want [n], true", got, ok)
	}
	older := both.DeepCopy()
	older.Generation = 0
	if _, ok := x.Namespaces(older); ok {
		t.Error("Namespaces of a version the Index does not hold: ok")
	}
	x.DeleteNamespace("n")
	if got, ok := x.Namespaces(both); !ok || len(got) != 0 {
		t.Errorf("Namespaces(both) after the namespace's deletion = %v, %v; want none", got, ok)
	}
}

// TestIndexJudgesEachSpecOnce: an invalid quota is found invalid once per
// version of its spec; status writes do not make it judged again.
func TestIndexJudgesEachSpecOnce(t *testing.T) {
	var x clusterquota.Index
	bad := tenantQuota("bad", "a")
	bad.Spec.Selector.LabelSelector.MatchLabels["tenant"] = "b c"
	x.SetClusterQuota(bad)
	for i := range 5 {
		w := bad.DeepCopy()
		w.ResourceVersion = strconv.Itoa(2 + i)
		w.Status.Total.Used = corev1.ResourceList{"pods": *resource.NewQuantity(int64(i), resource.DecimalSI)}
		x.SetClusterQuota(w)
	}
	if n := x.InvalidVersions(); n != 1 {
		t.Errorf("InvalidVersions() after 5 status writes = %d, want 1", n)
	}
	next := bad.DeepCopy()
	next.Generation = 2
	x.SetClusterQuota(next)
	if n := x.InvalidVersions(); n != 2 {
		t.Errorf("InvalidVersions() after a new generation = %d, want 2", n)
	}
	if got := x.Invalid(); len(got) != 1 || got[0].Quota != next || got[0].Err == nil {
		t.Errorf("Invalid() = %+v, want the new generation with its error", got)
	}
	fixed := tenantQuota("bad", "a")
	fixed.Generation = 3
	x.SetClusterQuota(fixed)
	if got := x.Invalid(); len(got) != 0 {
		t.Errorf("Invalid() after the fix = %+v, want none", got)
	}
	if diff := cmp.Diff([]string{"bad"}, x.Lookup(tenantNamespace("n", "a", "1")).Names); diff != "" {
		t.Errorf("Lookup after the fix (-want +got):\n%s", diff)
	}
}

// TestIndexHasSynced: an Index waits for every feed it was given.
func TestIndexHasSynced(t *testing.T) {
	var x clusterquota.Index
	if !x.HasSynced() {
		t.Error("HasSynced() of an Index without feeds = false")
	}
	var a, b bool
	x.AddSynced(func() bool { return a })
	x.AddSynced(func() bool { return b })
	x.AddSynced(nil)
	if a = true; x.HasSynced() {
		t.Error("HasSynced() with one feed of two synced = true")
	}
	if b = true; !x.HasSynced() {
		t.Error("HasSynced() with both feeds synced = false")
	}
}

func TestSameSpec(t *testing.T) {
	q := tenantQuota("q", "a")
	status := q.DeepCopy()
	status.ResourceVersion = "2"
	status.Status.Total.Used = corev1.ResourceList{"pods": resource.MustParse("1")}
	regen := q.DeepCopy()
	regen.Generation = 2
	recreated := q.DeepCopy()
	recreated.UID = "other"
	noGen, noGenStatus, noGenSpec := q.DeepCopy(), status.DeepCopy(), q.DeepCopy()
	noGen.Generation, noGenStatus.Generation, noGenSpec.Generation = 0, 0, 0
	noGenSpec.Spec.Selector.LabelSelector.MatchLabels["tenant"] = "b"
	tests := []struct {
		name string
		a, b *clusterquota.ClusterQuota
		want bool
	}{
		{"status write", q, status, true},
		{"new generation", q, regen, false},
		{"recreated", q, recreated, false},
		{"no generation, status write", noGen, noGenStatus, true},
		{"no generation, spec change", noGen, noGenSpec, false},
		{"nil and nil", nil, nil, true},
		{"nil and one", nil, q, false},
	}
	for _, tt := range tests {
		if got := clusterquota.SameSpec(tt.a, tt.b); got != tt.want {
			t.Errorf("SameSpec(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestIndexMemory measures what an Index holds besides the objects it is
// given, as its doc states: per ClusterQuota of a tenant of two
// namespaces, and per namespace (labels as kube-apiserver sets them, the
// tenant's, and a few annotations), at the scale of issue 32: 10,000
// namespaces and 5,000 quotas. Both orders of arrival are measured (the
// two informers sync at once).
func TestIndexMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("measures 10,000 namespaces")
	}
	const nss, quotas = 10000, 5000
	namespaces := make([]*corev1.Namespace, nss)
	for i := range namespaces {
		name := fmt.Sprintf("tenant-%d-%d", i/2, i%2)
		namespaces[i] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: name, ResourceVersion: strconv.Itoa(i + 1), UID: types.UID(fmt.Sprintf("uid-%d", i)),
			Labels:      map[string]string{"kubernetes.io/metadata.name": name, "tenant": fmt.Sprintf("t-%d", i/2)},
			Annotations: map[string]string{"openshift.io/requester": "someone", "scheduler.alpha.kubernetes.io/node-selector": ""},
		}}
	}
	cqs := make([]*clusterquota.ClusterQuota, quotas)
	for i := range cqs {
		cqs[i] = tenantQuota(fmt.Sprintf("quota-%d", i), fmt.Sprintf("t-%d", i))
	}
	measure := func(quotasFirst bool) (perQuota, perNamespace float64) {
		x := &clusterquota.Index{}
		base := liveHeap()
		if quotasFirst {
			for _, cq := range cqs {
				x.SetClusterQuota(cq)
			}
			mid := liveHeap()
			for _, ns := range namespaces {
				x.SetNamespace(ns)
			}
			end := liveHeap()
			perQuota, perNamespace = float64(mid-base)/quotas, float64(end-mid)/nss
		} else {
			for _, ns := range namespaces {
				x.SetNamespace(ns)
			}
			mid := liveHeap()
			for _, cq := range cqs {
				x.SetClusterQuota(cq)
			}
			end := liveHeap()
			perQuota, perNamespace = float64(end-mid)/quotas, float64(mid-base)/nss
		}
		if got := x.Lookup(namespaces[0]); got.Key != "quota-0" {
			t.Fatalf("Lookup(%s) = %+v, want quota-0", namespaces[0].Name, got)
		}
		runtime.KeepAlive(x)
		return perQuota, perNamespace
	}
	for _, quotasFirst := range []bool{true, false} {
		perQuota, perNamespace := measure(quotasFirst)
		t.Logf("quotas first %v: %.0f bytes a ClusterQuota (of 2 namespaces), %.0f bytes a namespace", quotasFirst, perQuota, perNamespace)
		// The doc states about 750 and 400 bytes (quotas first: with
		// namespaces first, what each namespace costs in the value
		// index is counted to the first quota filed under tenant). The
		// bound catches a change that makes the statement wrong.
		if total, stated := perQuota*quotas+perNamespace*nss, float64(750*quotas+400*nss); total > 1.25*stated {
			t.Errorf("quotas first %v: %.1f MB in all, more than the %.1f MB the Index doc states", quotasFirst, total/1e6, stated/1e6)
		}
	}
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
