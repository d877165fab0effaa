// Package testcluster starts real stripefs server and mount processes for
// integration tests: the same binary users run, over TCP on loopback.
package testcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stripefs/stripefs/internal/child"
	"github.com/stripefs/stripefs/internal/mountinfo"
	"github.com/stripefs/stripefs/rpc"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error

	keyOnce sync.Once
	keyPath string
	keyErr  error
)

// Key makes the test process's filesystem key, once, and returns its
// file: every cluster the process starts uses it, STRIPEFS_KEY names it
// to every program the tests run (servers, mounts, tools), and the
// process's own rpc clients prove it too.
func Key(t testing.TB) string {
	keyOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stripefs-key")
		if err != nil {
			keyErr = err
			return
		}
		k, err := rpc.NewMasterKey("stripefs")
		if err != nil {
			keyErr = err
			return
		}
		keyPath = filepath.Join(dir, "stripefs.key")
		if keyErr = rpc.WriteKey(keyPath, k); keyErr != nil {
			return
		}
		k.Path = keyPath
		rpc.SetKey(k)
		keyErr = os.Setenv("STRIPEFS_KEY", keyPath)
	})
	if keyErr != nil {
		t.Fatal(keyErr)
	}
	return keyPath
}

// RaceEnv, set, builds the server and mount processes with the race
// detector; a race any of them reports fails the test (make test-e2e-race).
const RaceEnv = "STRIPEFS_E2E_RACE"

// Binary builds cmd/stripefs once per test process and returns its path
// (and makes the process's key, Key).
func Binary(t testing.TB) string {
	Key(t)
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stripefs-bin")
		if err != nil {
			buildErr = err
			return
		}
		_ = os.Chmod(dir, 0o755) // tests run the tools as other users too
		binPath = filepath.Join(dir, "stripefs")
		args := []string{"build", "-o", binPath}
		if os.Getenv(RaceEnv) != "" {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "github.com/stripefs/stripefs/cmd/stripefs")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Proc is one running stripefs process.
type Proc struct {
	Name string
	Args []string
	Addr string // from its ready line
	// Metrics is the URL of its Prometheus metrics, when it was started
	// with --metrics.
	Metrics string
	Log     string
	proc    *child.Proc
}

// Cluster is a set of server processes and, optionally, a mount.
type Cluster struct {
	t     testing.TB
	Bin   string
	Dir   string
	MGS   string
	MDTs  []*Proc
	OSTs  []*Proc
	Mount *Proc
	MNT   string // the mount point
	// Mounts are the extra mounts of MountAt, each its own client.
	Mounts []*Proc
	mnts   []string
}

// TestWindow is the client recovery window test MDTs get unless told
// otherwise: a restart after a mount died must not stall a test for the
// default 30s, and a live mount redials within a second.
const TestWindow = "3s"

var readyRE = regexp.MustCompile(`ready on (\S+)`)

// metricsRE is the line a process started with --metrics prints.
var metricsRE = regexp.MustCompile(`metrics on (http://\S+)`)

// Start runs nMDT MDT and nOST OST processes with data under a temporary
// directory; they are stopped when the test ends.
func Start(t testing.TB, nMDT, nOST int) *Cluster {
	t.Helper()
	return StartArgs(t, nMDT, nOST)
}

// StartArgs is Start with extra flags for every MDT (--commit-interval,
// --recovery-window…; later flags win over the defaults).
func StartArgs(t testing.TB, nMDT, nOST int, mdtArgs ...string) *Cluster {
	t.Helper()
	return StartFlags(t, nMDT, nOST, mdtArgs, nil)
}

// StartFlags is StartArgs with extra flags for every OST too.
func StartFlags(t testing.TB, nMDT, nOST int, mdtArgs, ostArgs []string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Bin: Binary(t), Dir: t.TempDir()}
	t.Cleanup(c.stopAll)
	for i := 0; i < nMDT; i++ {
		args := []string{"mds", "--index", fmt.Sprint(i), "--data", filepath.Join(c.Dir, fmt.Sprintf("mdt%d", i)), "--listen", "127.0.0.1:0",
			"--recovery-window", TestWindow}
		args = append(args, mdtArgs...)
		if i > 0 {
			args = append(args, "--mgs", c.MGS)
		}
		p := c.start(fmt.Sprintf("mdt%d", i), args, readyRE)
		if i == 0 {
			c.MGS = p.Addr
		}
		c.MDTs = append(c.MDTs, p)
	}
	for i := 0; i < nOST; i++ {
		args := []string{"ost", "--index", fmt.Sprint(i), "--data", filepath.Join(c.Dir, fmt.Sprintf("ost%d", i)), "--listen", "127.0.0.1:0", "--mgs", c.MGS}
		args = append(args, ostArgs...)
		c.OSTs = append(c.OSTs, c.start(fmt.Sprintf("ost%d", i), args, readyRE))
	}
	return c
}

var mountedRE = regexp.MustCompile(`stripefs: mounted (\S+)`)

// MountFS mounts the cluster at a new directory with extra -o options.
func (c *Cluster) MountFS(opts ...string) string {
	c.t.Helper()
	return c.MountWith(nil, opts...)
}

// MountWith mounts with extra command-line flags (--max-dirty-mb…) and -o
// options.
func (c *Cluster) MountWith(flags []string, opts ...string) string {
	c.t.Helper()
	if c.MNT == "" {
		c.MNT = filepath.Join(c.Dir, "mnt")
		if err := os.MkdirAll(c.MNT, 0o755); err != nil {
			c.t.Fatal(err)
		}
		// Let other users reach the mount: tests run steps as them.
		_ = os.Chmod(c.Dir, 0o755)
		_ = os.Chmod(filepath.Dir(c.Dir), 0o755)
	}
	o := strings.Join(append([]string{"allow_other"}, opts...), ",")
	args := append(append([]string{"mount", "--mgs", c.MGS, "-o", o}, flags...), c.MNT)
	c.Mount = c.start("mount", args, mountedRE)
	return c.MNT
}

// MountAt mounts the cluster at a new directory DIR/name with a client
// of its own (a second node's mount), and returns its process and path.
func (c *Cluster) MountAt(name string, opts ...string) (*Proc, string) {
	c.t.Helper()
	return c.MountAtArgs(name, nil, opts...)
}

// MountAtArgs is MountAt with extra command-line flags (--key…).
func (c *Cluster) MountAtArgs(name string, flags []string, opts ...string) (*Proc, string) {
	c.t.Helper()
	dir := filepath.Join(c.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	_ = os.Chmod(c.Dir, 0o755)
	o := strings.Join(append([]string{"allow_other"}, opts...), ",")
	args := append(append([]string{"mount", "--mgs", c.MGS, "-o", o}, flags...), dir)
	p := c.start(name, args, mountedRE)
	c.Mounts = append(c.Mounts, p)
	c.mnts = append(c.mnts, dir)
	return p, dir
}

// TakeOver starts `stripefs mount --takeover dir`, a new daemon for the
// live mount at dir, and returns it once it serves; it is stopped and
// unmounted with the cluster.
func (c *Cluster) TakeOver(dir string) *Proc {
	c.t.Helper()
	p := c.start(fmt.Sprintf("%s-next%d", filepath.Base(dir), len(c.Mounts)), []string{"mount", "--takeover", dir}, mountedRE)
	c.Mounts = append(c.Mounts, p)
	c.mnts = append(c.mnts, dir)
	return p
}

// Done is closed when p has exited.
func (p *Proc) Done() <-chan struct{} { return p.proc.Done() }

// Signal sends sig to p (SIGSTOP and SIGCONT freeze and thaw a client).
func (c *Cluster) Signal(p *Proc, sig syscall.Signal) {
	c.t.Helper()
	if err := p.proc.Signal(sig); err != nil {
		c.t.Fatalf("signal %v to %s: %v", sig, p.Name, err)
	}
}

// Unmount stops the mount process cleanly.
func (c *Cluster) Unmount() {
	if c.Mount == nil {
		return
	}
	c.Stop(c.Mount)
	c.Mount = nil
}

func (c *Cluster) start(name string, args []string, ready *regexp.Regexp) *Proc {
	c.t.Helper()
	p := &Proc{Name: name, Args: args, Log: filepath.Join(c.Dir, name+".log")}
	c.run(p, ready)
	return p
}

func (c *Cluster) run(p *Proc, ready *regexp.Regexp) {
	c.t.Helper()
	proc, err := child.Start(context.Background(), child.Config{
		Name: p.Name, Path: c.Bin, Args: p.Args, Log: p.Log, Timeout: 60 * time.Second,
		Ready: func(l string) (string, bool) {
			if m := ready.FindStringSubmatch(l); m != nil {
				return m[1], true
			}
			return "", false
		},
		Line: func(l string) {
			if m := metricsRE.FindStringSubmatch(l); m != nil {
				p.Metrics = m[1]
			}
		},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	p.proc, p.Addr = proc, proc.ReadyLine()
}

// Kill9 kills p with SIGKILL, as a crash would.
func (c *Cluster) Kill9(p *Proc) { p.proc.Kill() }

// Stop stops p with SIGTERM and waits for it (killed after 30 s).
func (c *Cluster) Stop(p *Proc) { _ = p.proc.Stop(30 * time.Second) }

// Restart starts p again with the same arguments, at the same address so
// that clients reconnect to it.
func (c *Cluster) Restart(p *Proc) {
	c.t.Helper()
	args := append([]string(nil), p.Args...)
	for i := range args {
		if args[i] == "--listen" && p.Addr != "" {
			args[i+1] = p.Addr
		}
	}
	p.Args = args
	re := readyRE
	if len(p.Args) > 0 && p.Args[0] == "mount" {
		re = mountedRE
	}
	c.run(p, re)
}

// Pid is p's process id.
func (p *Proc) Pid() int { return p.proc.Pid() }

// Running reports whether p has not exited.
func (p *Proc) Running() bool { return p.proc.Running() }

func (c *Cluster) stopAll() {
	for i, p := range c.Mounts {
		if p.Running() {
			_ = p.proc.Signal(syscall.SIGCONT) // a test may have left it stopped
			c.Stop(p)
		}
		mountinfo.LazyUnmount(c.mnts[i])
	}
	if c.Mount != nil && c.Mount.Running() {
		c.Stop(c.Mount)
	}
	if c.MNT != "" {
		mountinfo.LazyUnmount(c.MNT)
	}
	for _, p := range append(append([]*Proc(nil), c.OSTs...), c.MDTs...) {
		if p.Running() {
			c.Stop(p)
		}
	}
	all := append(append(append(append([]*Proc(nil), c.MDTs...), c.OSTs...), c.Mount), c.Mounts...)
	for _, p := range all {
		if p == nil {
			continue
		}
		if b, err := os.ReadFile(p.Log); err == nil && bytes.Contains(b, []byte("WARNING: DATA RACE")) {
			c.t.Errorf("%s reported a data race (see its log below)", p.Name)
		}
	}
	if c.t.Failed() {
		for _, p := range all {
			if p != nil {
				c.t.Logf("--- %s log:\n%s", p.Name, child.Tail(p.Log, 60))
			}
		}
	}
}
