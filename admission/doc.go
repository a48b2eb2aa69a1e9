// Package admission provides ResourceQuota admission for validating
// webhooks, extension API servers and multi-tenant platforms: the checks and
// messages of kube-apiserver's ResourceQuota admission plugin, for many
// concurrent requests, without k8s.io/apiserver or k8s.io/client-go.
//
// # The Evaluator
//
// [Evaluator] is the engine. [Evaluator.Evaluate] checks one request
// ([quota.Attributes]) against the ResourceQuotas of its namespace and
// charges it; [Evaluator.Run] does the work. Requests of a namespace are
// batched and checked in arrival order against running totals, so that one
// status write per quota serves many requests, and a namespace is never
// checked twice at once; after a write, the next batch waits briefly for
// the callers just answered ([Options.BatchDelay]), so that callers in a
// loop share one write. Quotas are read and written through a
// [QuotaAccessor], with the read resourceVersion as a precondition; a
// conflict re-reads and re-checks, a bounded number of times.
//
// The guarantees kube-apiserver does not give, stated in full on
// [Evaluator]: a charge is never left in status.used for a request that was
// not admitted, whether it was denied after a partial write across several
// quotas (kubernetes#133274) or its caller stopped waiting; and Evaluate
// returns by its deadline, with kube-apiserver's timeout error.
//
// # Reading and writing quotas
//
// [NewAccessor] builds a [QuotaAccessor] over a lister (the quotas of an
// informer's cache) and a [QuotaClient] (a live list and the status write):
// the cache first, a live read while the cache has not synced, and this
// process's own recent writes in place of older cached versions, so that a
// cache that lags behind them does not cause needless conflicts.
//
// # Configuration
//
// [LoadConfiguration] reads the file kube-apiserver's plugin reads (a
// ResourceQuotaConfiguration, in any apiVersion kube-apiserver accepts,
// strictly), whose limited resources go to [Options.LimitedResources].
//
// # Webhooks
//
// [Handler] is an http.Handler for admission.k8s.io/v1 AdmissionReviews
// (and v1beta1, answered in v1beta1): it decodes the request's objects
// ([NewAttributes]) into typed k8s.io/api objects, calls the Evaluator, and
// answers with kube-apiserver's status code, reason and message.
//
// # Concurrency
//
// Everything exported is safe for concurrent use. Objects returned by a
// [QuotaAccessor] must not be modified.
package admission
