package ledger

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotakit/quotakit/internal/reslist"
	"github.com/quotakit/quotakit/internal/safe"
	"github.com/quotakit/quotakit/quota"
)

// The ledger computes each object's usage once per version and keeps the
// list; objects of one template charge the same, so equal lists are kept
// once and shared by the entries that charge them.

// sharedUsage is a usage list and the number of entries that charge it.
type sharedUsage struct {
	list corev1.ResourceList
	hash uint64
	refs int
}

// chargeLocked computes what en's object charges, and shares the list
// with the entries that charge the same. l.mu must be held.
func (l *Ledger) chargeLocked(e quota.Evaluator, en *entry) {
	usage, err := guardedUsage(e, en.obj)
	if err != nil {
		en.err = err
		return
	}
	h := reslist.Hash(l.seed, usage)
	var shared *sharedUsage
	for _, u := range l.usages[h] {
		if reslist.Same(u.list, usage) {
			shared = u
			break
		}
	}
	if shared == nil {
		shared = &sharedUsage{list: usage, hash: h}
		l.usages[h] = append(l.usages[h], shared)
	}
	shared.refs++
	en.usage = shared
}

// releaseLocked drops en's share of its usage list. l.mu must be held.
func (l *Ledger) releaseLocked(en *entry) {
	if en.usage == nil {
		return
	}
	if en.usage.refs--; en.usage.refs > 0 {
		return
	}
	chain := slices.DeleteFunc(l.usages[en.usage.hash], func(u *sharedUsage) bool { return u == en.usage })
	if len(chain) == 0 {
		delete(l.usages, en.usage.hash)
	} else {
		l.usages[en.usage.hash] = chain
	}
}

// guardedUsage is e.Usage(obj), with a panic turned into an error.
func guardedUsage(e quota.Evaluator, obj runtime.Object) (usage corev1.ResourceList, err error) {
	err = safe.Call(func() error {
		usage, err = e.Usage(obj)
		return err
	})
	return usage, err
}
