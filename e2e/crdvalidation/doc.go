// Package crdvalidation checks the ClusterQuota CRD of kube/deploy/crd
// with kube-apiserver's own code, in process and without a server: the
// CRD's validation as kube-apiserver runs it when the CRD is created
// (structural schema, CEL compilation and the CEL cost estimate against
// its budget), and the validation of a ClusterQuota as kube-apiserver
// runs it on a create and on a status update (the OpenAPI schema
// validator, the CEL validator with its runtime cost budget, metadata),
// on every case of the table clusterquota's tests run through Validate
// (internal/cqcases). Every object Validate accepts, the CRD must accept;
// every problem Validate reports, the CRD must report too, unless the
// tests list it as one a schema and CEL cannot state, with the reason.
//
// The package holds no code: its tests are all. They are in the e2e
// module because it already requires k8s.io/apiextensions-apiserver and
// k8s.io/apiserver (to build kube-apiserver), which the kube module's
// users should not inherit; they start no process and take seconds.
package crdvalidation
