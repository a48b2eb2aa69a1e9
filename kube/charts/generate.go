// Package charts holds quotakit's Helm charts, quotakit and
// quotakit-webhook-configuration, generated from kube/deploy by
// [github.com/quotakit/quotakit/kube/charts/chartgen], and the tests that
// compare them with kustomize's renderings.
package charts

//go:generate go run ./cmd/chartgen
