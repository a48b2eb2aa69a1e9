package clusterquota

// ClusterQuotas is the GroupVersionResource of [ClusterQuota], as
// informers, dynamic clients and RBAC rules name it. It is a value to
// read: the library keeps its own.
var ClusterQuotas = SchemeGroupVersion.WithResource("clusterquotas")
