// Package generic provides the building blocks of quota evaluators: the
// object-count evaluator that charges count/<resource>[.<group>] for any
// resource, the functions evaluators are assembled from ([Matches],
// [CalculateUsageStats], [ScopeRequirements], [ScopeLabelSelector]), and the
// registry and configuration that hold evaluators.
//
// The semantics are those of k8s.io/apiserver/pkg/quota/v1/generic in
// Kubernetes 1.37, with these guarantees:
//
//   - Nothing here imports a cache. Evaluators list objects through
//     [ListFuncByNamespace], a function a controller builds from its
//     informers in one line, and get one per resource from a
//     [ListerForResourceFunc].
//   - Bad input is an error, never a panic: a nil quota or object, an
//     unknown scope selector operator, a missing list function
//     ([ErrNoListFunc]).
//   - Scope-matching errors are returned. Upstream's CalculateUsageStats
//     swallows them and reports a partial sum as success
//     (kubernetes#117676); [CalculateUsageStats] does not.
//   - [NewRegistry] is safe for concurrent use and lists evaluators in a
//     deterministic order (group, then resource) instead of map order.
//
// # Counting objects
//
// [NewObjectCountEvaluator] returns the evaluator Kubernetes uses for every
// resource without a dedicated one. Its name for a resource is
// [ObjectCountQuotaResourceNameFor]: count/configmaps, count/deployments.apps.
// It handles only creates: updates never change a count and deletions are
// released by the controller.
//
// # Writing an evaluator
//
// An evaluator for a custom resource typically implements
// [quota.Evaluator.Matches] as [Matches] with its own
// [MatchingResourceNamesFunc] and [MatchesScopeFunc], and
// [quota.Evaluator.UsageStats] as [CalculateUsageStats] with its own
// [UsageFunc]. A resource without scopes uses [MatchesNoScopeFunc]. A scope
// whose value is a name (like PriorityClass) is matched with
// [ScopeLabelSelector], which gives the In, NotIn, Exists and DoesNotExist
// operators their Kubernetes meaning.
package generic
