// Package child runs a stripefs program as a child process: its stderr
// appended to a log file, its stdout read for the line that says it is
// ready, and a bounded stop (SIGTERM, then SIGKILL). The benchmarks'
// baseline (a `stripefs up` and a loopback mount) and the test cluster
// (servers and mounts) supervise their children through it.
package child

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Config says what to run and how to tell it is ready.
type Config struct {
	Name string // in messages
	Path string // the executable
	Args []string
	Env  []string // nil: this process's environment
	Log  string   // the file its stderr is appended to
	// Ready says whether a line of the child's stdout is the one that
	// announces it is ready, and what of it to keep (an address).
	Ready func(line string) (string, bool)
	// Line, if set, sees every line of stdout before the ready one.
	Line func(line string)
	// Timeout bounds the wait for the ready line; 0 means a minute.
	Timeout time.Duration
	// OwnGroup puts the child in a process group of its own, so that a
	// terminal's Ctrl-C reaches only this process (which then stops the
	// child cleanly), and has the kernel send it SIGTERM should this
	// process die first.
	OwnGroup bool
}

// Proc is a running (or exited) child.
type Proc struct {
	cfg   Config
	cmd   *exec.Cmd
	done  chan struct{}
	err   error  // its exit, once done is closed
	ready string // what Ready kept of the ready line
}

// Start runs the child and returns once it printed its ready line. It
// fails, with the end of the child's log, if the child exits first or
// the timeout passes, and stops the child if ctx ends first.
func Start(ctx context.Context, cfg Config) (*Proc, error) {
	logf, err := os.OpenFile(cfg.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", cfg.Name, err)
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p := &Proc{cfg: cfg, done: make(chan struct{})}
	p.cmd = exec.Command(cfg.Path, cfg.Args...)
	p.cmd.Env = cfg.Env
	p.cmd.Stdout, p.cmd.Stderr = pw, logf
	if cfg.OwnGroup {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	}
	err = p.cmd.Start()
	pw.Close() // the child's copy is the pipe's only writer now
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("start %s: %w", cfg.Name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	readyc := make(chan string, 1)
	go func() {
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		waiting := true
		for waiting && sc.Scan() {
			line := sc.Text()
			if v, ok := cfg.Ready(line); ok {
				readyc <- v
				waiting = false
			} else if cfg.Line != nil {
				cfg.Line(line)
			}
		}
		_, _ = io.Copy(io.Discard, pr) // keep the child's stdout flowing
	}()
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case p.ready = <-readyc:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited before it was ready (%v)%s", cfg.Name, p.err, p.LogTail(20))
	case <-timer.C:
		err = fmt.Errorf("%s not ready after %v%s", cfg.Name, timeout, p.LogTail(20))
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.Kill()
	return nil, err
}

// ReadyLine is what Config.Ready kept of the ready line.
func (p *Proc) ReadyLine() string { return p.ready }

// Done is closed once the child has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Running says whether the child has not exited.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the child (SIGSTOP and SIGCONT freeze and thaw it).
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// ErrKilled is Stop's error for a child that needed SIGKILL.
var ErrKilled = errors.New("did not stop on SIGTERM and was killed")

// Stop sends SIGTERM and waits for the child to exit; after grace it is
// killed (ErrKilled). A child that exits non-zero is an error too, with
// the end of its log.
func (p *Proc) Stop(grace time.Duration) error {
	if p.Running() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			p.Kill()
			return fmt.Errorf("%s %w within %v%s", p.cfg.Name, ErrKilled, grace, p.LogTail(10))
		}
	}
	if p.err != nil {
		return fmt.Errorf("%s: %v%s", p.cfg.Name, p.err, p.LogTail(10))
	}
	return nil
}

// Kill kills the child with SIGKILL, as a crash would, and waits for it.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// LogTail is the last n lines of the child's log, introduced for an
// error message; empty if the log is.
func (p *Proc) LogTail(n int) string {
	t := Tail(p.cfg.Log, n)
	if t == "" {
		return ""
	}
	return "; its log (" + p.cfg.Log + ") ends:\n  " + strings.ReplaceAll(t, "\n", "\n  ")
}

// Tail is the last n lines of the file at path.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
