package cluster

// FreePorts returns n distinct ports on 127.0.0.1 that were free a moment
// ago, for a program that takes its addresses as flags. Another process
// may take one before the program listens on it; a program that cannot
// listen fails at start, which its caller sees.
func FreePorts(n int) ([]int, error) { return freePorts(n) }
