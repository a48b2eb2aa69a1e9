package cluster

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// HandleSignals stops every process this package started when the test
// binary is interrupted or terminated (go test passes on ^C), then exits
// with the signal's conventional status. Without it, an interrupted run
// would leave its servers to Pdeathsig alone.
func HandleSignals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-ch
		fmt.Fprintf(os.Stderr, "e2e: %v: stopping the servers\n", sig)
		StopAll()
		os.Exit(exitCode(sig))
	}()
}
