package cluster

import (
	"os"
	"syscall"
	"time"
)

// Program is a program started by [Start], in a process group of its
// own, stopped with the servers by [StopAll] if not before.
type Program struct {
	p       *process
	logPath string
}

// Start starts bin with args, its output written to logPath.
func Start(name, bin, logPath string, args ...string) (*Program, error) {
	p, err := startLogged(name, bin, logPath, args)
	if err != nil {
		return nil, err
	}
	return &Program{p: p, logPath: logPath}, nil
}

// Pid returns the program's process id.
func (p *Program) Pid() int { return p.p.pid }

// Log returns what the program has written so far.
func (p *Program) Log() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// Exited reports whether the program has exited, and how.
func (p *Program) Exited() (bool, error) { return p.p.exited() }

// Stop asks the program to stop (SIGTERM to its group), kills the group
// after grace, and waits for it.
func (p *Program) Stop(grace time.Duration) { p.p.stop(grace) }

// Kill kills the program's group at once with SIGKILL, as a crash or a
// lost node would end it: it has no chance to clean up.
func (p *Program) Kill() {
	_ = syscall.Kill(-p.p.pid, syscall.SIGKILL)
	p.p.stop(0)
}
