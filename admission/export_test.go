package admission

// SetReadHook has a's reads of a cluster quota call hook between reading
// the process's own copy and the index, for a test to replay an
// interleaving there. Set it before a is used.
func SetReadHook(a *ClusterAccessor, hook func()) { a.readHook = hook }
