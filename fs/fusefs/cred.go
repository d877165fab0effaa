package fusefs

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"sync"
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
// every RPC the request makes.
func (f *FS) ctx(_ <-chan struct{}, h *fuse.InHeader) (context.Context, context.CancelFunc) {
	c := &rpc.Cred{Uid: h.Uid, Gid: h.Gid, Groups: f.groups.of(h.Pid, h.Uid)}
	return rpc.WithCred(context.Background(), c), func() {}
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
