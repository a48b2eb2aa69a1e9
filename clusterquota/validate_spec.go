package clusterquota

import "errors"

// ValidateSpec checks cq's metadata and spec as [Validate] does, and not
// its status. It is the rule by which admission and the controller skip
// a stored quota: the status is theirs to write, and a quota must not be
// dropped for what they wrote in it.
func ValidateSpec(cq *ClusterQuota) error {
	if cq == nil {
		return errors.New("clusterquota: ValidateSpec: nil ClusterQuota")
	}
	probe := *cq
	probe.Status = ClusterQuotaStatus{}
	return Validate(&probe)
}
