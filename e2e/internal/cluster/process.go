package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// A process is a server this package started, in a process group of its
// own so that stopping it reaches anything it forked. Processes are only
// ever stopped by their own process id and group id, never by name.
type process struct {
	name string
	cmd  *exec.Cmd
	pid  int
	// done is closed when Wait has returned; err is its result.
	done chan struct{}
	err  error
}

var (
	// mu guards running: every process started and not yet reaped, so
	// that StopAll can stop them from TestMain or a signal handler.
	mu      sync.Mutex
	running = map[int]*process{}
	// reaped are the process groups stopped so far, which Verify checks
	// are empty.
	reaped []int

	spawnOnce sync.Once
	spawnReq  chan spawnRequest
)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// spawner starts every child from one goroutine locked to its OS thread
// for the life of the process. Children get Pdeathsig SIGKILL, which
// Linux delivers when the thread that forked them exits: the thread must
// therefore outlive the children, and a goroutine that never unlocks or
// returns keeps it (golang/go#27505). Pdeathsig is the backstop for the
// cases where no Go code runs any more: a test binary killed by go test's
// -timeout, a panic outside a test, SIGKILL.
func spawner() {
	runtime.LockOSThread()
	for req := range spawnReq {
		req.done <- req.cmd.Start()
	}
}

// start starts cmd as a new process group and records it.
func start(name string, cmd *exec.Cmd) (*process, error) {
	spawnOnce.Do(func() {
		spawnReq = make(chan spawnRequest)
		go spawner()
	})
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	req := spawnRequest{cmd: cmd, done: make(chan error, 1)}
	// Holding mu while starting means StopAll cannot run between the
	// fork and the registration, and so cannot miss a process.
	mu.Lock()
	defer mu.Unlock()
	spawnReq <- req
	if err := <-req.done; err != nil {
		return nil, fmt.Errorf("cluster: start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	running[p.pid] = p
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited, with Wait's error.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop ends the process group: SIGTERM, then SIGKILL after grace, and
// waits for the process to be reaped. It is idempotent.
func (p *process) stop(grace time.Duration) {
	mu.Lock()
	_, ok := running[p.pid]
	delete(running, p.pid)
	if ok {
		reaped = append(reaped, p.pid)
	}
	mu.Unlock()
	// The group id is the pid, as Setpgid made it. Signalling the group
	// (a negative pid) reaches every member, including children a server
	// may have forked.
	_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	// Members of the group other than the leader may still be alive
	// after the leader exits; SIGKILL the group either way.
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	<-p.done
	// The other members, orphaned, are reaped by init, not by us: wait
	// until the group is empty, so that Verify sees what stop did.
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(-p.pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// StopAll stops every process this package started and has not stopped.
// TestMain calls it when the tests end, however they end, and the signal
// handler installed by [HandleSignals] calls it before exiting.
func StopAll() {
	mu.Lock()
	ps := make([]*process, 0, len(running))
	for _, p := range running {
		ps = append(ps, p)
	}
	mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { p.stop(5 * time.Second) })
	}
	wg.Wait()
}

// Verify returns an error naming any process group started by this
// package that still has a member, or any process still recorded as
// running. A process group that has no members left cannot be signalled:
// kill(-pgid, 0) fails with ESRCH.
func Verify() error {
	mu.Lock()
	defer mu.Unlock()
	var errs []error
	for pid, p := range running {
		errs = append(errs, fmt.Errorf("cluster: %s (pid %d) was never stopped", p.name, pid))
	}
	for _, pgid := range reaped {
		if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("cluster: process group %d still has a member (kill: %v)", pgid, err))
		}
	}
	return errors.Join(errs...)
}

// Started returns the number of processes started so far, stopped or not.
func Started() int {
	mu.Lock()
	defer mu.Unlock()
	return len(running) + len(reaped)
}

// exitCode is the exit status of a process killed by sig, as a shell
// reports it.
func exitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}
