package fusefs

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stripefs/stripefs/rpc"
)

// The credential of a FUSE request: the kernel gives the caller's uid,
// gid and pid, not its supplementary groups, which the MDT's permission
// checks need; they come from /proc/PID/status, kept per process for a
// moment so that a process's run of requests reads them once.

const (
	groupsTTL = time.Second
	groupsMax = 4096
)

type groupsEntry struct {
	groups []uint32
	uid    uint32
	at     time.Time
}

type groupsCache struct {
	mu sync.Mutex
	m  map[uint32]groupsEntry
}

// ctx is the context of the request h: its caller's credential, for
// every RPC the request makes. It ends when the caller is dying of a
// signal (SIGKILL, or any signal left to its default action): the
// kernel cannot end such a program while its request is unanswered, so
// waits on servers and memory must stop. A signal the program handles
// does not end it: a local filesystem finishes a mkdir or write whatever
// signals come, and programs (Go's runtime among them, with SIGURG) count
// on that; blocking lock waits (flock.go) are the exception POSIX makes.
func (f *FS) ctx(cancel <-chan struct{}, h *fuse.InHeader) (context.Context, context.CancelFunc) {
	c := &rpc.Cred{Uid: h.Uid, Gid: h.Gid, Groups: f.groups.of(h.Pid, h.Uid)}
	f.reqs.begin() // a takeover waits for it (takeover.go)
	if cancel == nil || h.Pid == 0 {
		return rpc.WithCred(context.Background(), c), f.reqDone
	}
	ic := &fatalCtx{Context: context.Background(), interrupt: cancel, pid: h.Pid, answered: make(chan struct{})}
	return rpc.WithCred(ic, c), func() { ic.stop(); f.reqDone() }
}

func (f *FS) reqDone() { f.reqs.busy.Add(-1) }

// fatalCtx ends when its request's caller is dying. Nothing runs for it
// until something waits on it (Done): most requests never wait.
type fatalCtx struct {
	context.Context
	interrupt <-chan struct{} // go-fuse's: closed on the kernel's FUSE_INTERRUPT
	pid       uint32
	answered  chan struct{} // closed when the request is done (stop)

	once  sync.Once
	done  chan struct{}
	fired atomic.Bool
}

func (c *fatalCtx) Done() <-chan struct{} {
	c.once.Do(func() {
		c.done = make(chan struct{})
		go c.watch()
	})
	return c.done
}

func (c *fatalCtx) Err() error {
	if c.fired.Load() {
		return context.Canceled
	}
	return nil
}

func (c *fatalCtx) stop() { close(c.answered) }

// watch waits for the kernel's interrupt, then for the caller to be
// dying: the kernel interrupts once, for the first signal, and a fatal
// one may follow a handled one.
func (c *fatalCtx) watch() {
	select {
	case <-c.answered:
		return
	case <-c.interrupt:
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !dying(c.pid) {
		select {
		case <-c.answered:
			return
		case <-tick.C:
		}
	}
	c.fired.Store(true)
	close(c.done)
}

// dying reports whether thread tid has a fatal signal pending (the kernel
// marks one with SIGKILL in the thread's pending set) or is gone.
func dying(tid uint32) bool {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(tid), 10) + "/status")
	if err != nil {
		return true
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		v, ok := bytes.CutPrefix(line, []byte("SigPnd:"))
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
		return err == nil && mask&(1<<(syscall.SIGKILL-1)) != 0
	}
	return false
}

// of returns pid's supplementary groups (none for the kernel's own
// requests, pid 0, or a process gone already).
func (g *groupsCache) of(pid, uid uint32) []uint32 {
	if pid == 0 {
		return nil
	}
	now := time.Now()
	g.mu.Lock()
	e, ok := g.m[pid]
	g.mu.Unlock()
	if ok && e.uid == uid && now.Sub(e.at) < groupsTTL {
		return e.groups
	}
	groups := readGroups(pid)
	g.mu.Lock()
	if g.m == nil || len(g.m) >= groupsMax {
		g.m = map[uint32]groupsEntry{}
	}
	g.m[pid] = groupsEntry{groups: groups, uid: uid, at: now}
	g.mu.Unlock()
	return groups
}

func readGroups(pid uint32) []uint32 {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("Groups:"))
		if !ok {
			continue
		}
		var out []uint32
		for _, f := range bytes.Fields(rest) {
			if n, err := strconv.ParseUint(string(f), 10, 32); err == nil {
				out = append(out, uint32(n))
			}
		}
		return out
	}
	return nil
}
