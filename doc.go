// Package quotakit is the ResourceQuota machinery of Kubernetes, and the
// informer and workqueue primitives it runs on, for people who build control
// planes without importing k8s.io/kubernetes, k8s.io/apiserver or
// k8s.io/client-go.
//
// # Map of the library
//
//   - [github.com/quotakit/quotakit/quota]: the quota model — [quota.Evaluator],
//     [quota.Registry], [quota.Attributes], ResourceList arithmetic and
//     [quota.CalculateUsage].
//
// The library's only dependencies are k8s.io/apimachinery and k8s.io/api.
package quotakit
