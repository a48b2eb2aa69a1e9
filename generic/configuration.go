package generic

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotakit/quotakit/quota"
)

// configuration is the [quota.Configuration] returned by [NewConfiguration].
type configuration struct {
	evaluators []quota.Evaluator
	ignored    map[schema.GroupResource]struct{}
}

// NewConfiguration returns a [quota.Configuration] of evaluators and the
// resources quota ignores. It keeps copies of both, and each accessor
// returns a fresh copy, so a configuration never changes after it is built
// and is safe for concurrent use.
func NewConfiguration(evaluators []quota.Evaluator, ignored map[schema.GroupResource]struct{}) quota.Configuration {
	return &configuration{
		evaluators: slices.Clone(evaluators),
		ignored:    maps.Clone(ignored),
	}
}

// IgnoredResources returns a copy of the ignored resources.
func (c *configuration) IgnoredResources() map[schema.GroupResource]struct{} {
	return maps.Clone(c.ignored)
}

// Evaluators returns a copy of the evaluators.
func (c *configuration) Evaluators() []quota.Evaluator {
	return slices.Clone(c.evaluators)
}
