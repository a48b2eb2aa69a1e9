package admission

import (
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotakit/quotakit/clusterquota"
)

// verdicts remembers whether each ClusterQuota's spec passed
// [clusterquota.Validate], so that a version is judged once rather than
// on every request. It is safe for concurrent use.
type verdicts struct {
	mu sync.Mutex
	// byName holds the verdict on the last version seen of each quota.
	// guarded by mu
	byName map[string]verdict
}

// verdict is the judgement of one version of a ClusterQuota: its
// generation when the API server keeps one (a spec change raises it,
// a status write does not), else its resourceVersion.
type verdict struct {
	uid        types.UID
	generation int64
	version    string
	err        error
}

// check returns nil when cq's spec is valid, or why not. A version newly
// found invalid is logged at error level, once: the quota is then skipped
// by every read until it is fixed, and says so in its Valid condition,
// which the controller writes.
func (v *verdicts) check(log logr.Logger, cq *clusterquota.ClusterQuota) error {
	key := verdict{uid: cq.UID, generation: cq.Generation}
	if cq.Generation == 0 {
		key.version = cq.ResourceVersion
	}
	v.mu.Lock()
	old, ok := v.byName[cq.Name]
	v.mu.Unlock()
	if ok && old.uid == key.uid && old.generation == key.generation && old.version == key.version {
		return old.err
	}
	key.err = clusterquota.ValidateSpec(cq)
	v.mu.Lock()
	if v.byName == nil {
		v.byName = map[string]verdict{}
	}
	v.byName[cq.Name] = key
	v.mu.Unlock()
	if key.err != nil {
		log.Error(key.err, "admission: skipping an invalid ClusterQuota: it limits nothing until it is fixed",
			"clusterQuota", cq.Name, "generation", cq.Generation)
	}
	return key.err
}

// invalid returns the names of the quotas whose last version seen is
// invalid, sorted.
func (v *verdicts) invalid() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for name, vd := range v.byName {
		if vd.err != nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// keepOnly forgets the verdicts on quotas that are not in present, once
// more are remembered than present holds: deleted quotas.
func (v *verdicts) keepOnly(present []*clusterquota.ClusterQuota) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.byName) <= len(present) {
		return
	}
	names := make(map[string]struct{}, len(present))
	for _, cq := range present {
		if cq != nil {
			names[cq.Name] = struct{}{}
		}
	}
	for name := range v.byName {
		if _, ok := names[name]; !ok {
			delete(v.byName, name)
		}
	}
}
