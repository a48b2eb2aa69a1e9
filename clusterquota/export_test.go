package clusterquota

// KnownScopes gives the black-box tests the scopes Validate accepts, to
// compare with the CRD's enum.
var KnownScopes = knownScopes
