// Package quota provides the model of Kubernetes ResourceQuota: the
// [Evaluator] and [Registry] interfaces, ResourceList arithmetic, and
// [CalculateUsage], with the semantics of k8s.io/apiserver/pkg/quota/v1 and
// without importing k8s.io/apiserver or k8s.io/client-go.
//
// # The model
//
// A ResourceQuota limits what a namespace may consume. Its spec.hard maps
// resource names ("pods", "requests.cpu", "count/secrets", …) to limits. The
// ResourceQuota controller copies spec.hard to status.hard and computes
// status.used; admission charges new objects against status.hard and
// status.used (never spec.hard), so a quota the controller has not yet
// processed is not enforced.
//
// A quota may be narrowed by scopes: spec.scopes (Terminating, BestEffort, …)
// and spec.scopeSelector (requirements with In, NotIn, Exists and
// DoesNotExist over scope names such as PriorityClass). An object is charged
// to a quota only when it matches every scope.
//
// # Evaluators and the registry
//
// An [Evaluator] knows one resource (a GroupResource): which quota resource
// names it charges ([Evaluator.MatchingResources]), what one object uses
// ([Evaluator.Usage]), the sum over a namespace ([Evaluator.UsageStats]),
// whether a quota's scopes select an object ([Evaluator.Matches]) and which
// admission requests can change usage ([Evaluator.Handles], which reads the
// small [Attributes] interface). A [Registry] holds one evaluator per
// GroupResource. The generic package builds evaluators and registries; the
// evaluator package has the pods, services, PVC and object-count evaluators
// of Kubernetes.
//
// [CalculateUsage] asks every evaluator whose names appear in a quota's hard
// limits for its usage and sums the answers. An evaluator's failure costs
// only its own resources: the others are still returned, with the error.
//
// # Arithmetic
//
// [Add], [Subtract], [SubtractWithNonNegativeResult], [Max], [Mask],
// [Equals], [LessThanOrEqual], [IsZero], [IsNegative], [RemoveZeros] and the
// name-set helpers give the same results as upstream, compare quantities as
// numbers ("1000m" equals "1"), never mutate their inputs and never return
// quantities that share memory with them. Names are returned sorted.
//
// # Admission
//
// [CheckRequest] is the check kube-apiserver's ResourceQuota admission plugin
// runs for one request: it returns the namespace's quotas with status.used
// advanced by what the request consumes, or the Forbidden error the
// apiserver would return, with the same messages. [LimitedResource] is the
// plugin's "consumption requires a covering quota" configuration.
//
// CheckRequest checks one request against one snapshot of the quotas.
// [ChargeRequest] applies the same rules and returns only what the request
// charges each quota, copying nothing, for a caller that keeps running
// totals over many requests. The admission package builds on it: it
// decodes a webhook's AdmissionRequest into [Attributes] and checks
// concurrent requests in batches per namespace, writing the charges back.
//
// # Concurrency
//
// The functions of this package are safe for concurrent use. [Evaluator] and
// [Registry] implementations must be too.
package quota
