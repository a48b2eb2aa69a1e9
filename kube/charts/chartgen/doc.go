// Package chartgen generates quotakit's Helm charts from its kustomize
// tree, kube/deploy, which stays the one source of truth.
//
// # What it guarantees
//
// Every object the charts install is an object some kustomize rendering
// of kube/deploy produces, and every choice a chart value makes is a
// choice a kustomize component makes. [Generate] renders the tree with
// kustomize's library once without any choice and once with each choice
// (a component, a way the webhook trusts its callers, cert-manager), and
// turns what a choice adds into a template guarded by the value that
// selects it:
//
//   - an object the choice adds becomes a template file wrapped in
//     `{{ if <value> }}`;
//   - items the choice appends to a list of an object (a flag in a
//     container's args, an env var, a volume) are appended inside the
//     same guard, in the order kustomize applies the components;
//   - a map key the choice adds (an annotation) is added inside the guard.
//
// Anything else a choice does (remove an object, change a scalar, drop a
// list item) is an error: the generator refuses to guess, so a component
// that one day does more than add fails generation rather than produce a
// chart that differs from kustomize. A few fields are values a user sets
// (the image, resources, the control plane's addresses, the webhook's CA,
// the groups that may label namespaces): they are templated in every
// rendering, and their defaults in values.yaml are read from the
// rendering, so that the defaults too come from kustomize.
//
// The namespace quotakit-system becomes the release's namespace, and
// the Namespace object is left out: Helm needs the release's namespace
// to exist before it installs anything.
//
// Two charts come out: quotakit (the controller, and with webhook.enabled
// the webhook's Deployment, Service, RBAC and certificates) and
// quotakit-webhook-configuration (the ValidatingWebhookConfiguration
// alone, installed once a webhook replica is ready, as with kustomize).
//
// The chart's tests, in this module, render every variant with Helm's
// engine and with kustomize and compare them object by object, run Helm's
// linter, and regenerate the charts to check that the committed ones are
// current. Run `go generate ./...` in kube/charts after changing
// kube/deploy.
package chartgen
