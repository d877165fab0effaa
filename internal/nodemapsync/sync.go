// Package nodemapsync keeps a target's copy of the filesystem's nodemaps
// (package nodemap decides with it): MDT0, which keeps them, pushes each
// change to every target (MNodemapPush), and each target also pulls the
// table at start and then every little while, so that a push it missed
// (it was down, or unreachable) reaches it anyway.
package nodemapsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/stripefs/stripefs/nodemap"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/wire"
)

// DefaultInterval is how often a target pulls the table.
const DefaultInterval = 10 * time.Second

// Follower is a target's copy of the table, kept in a file of its own
// too, so that a target that restarts while MDT0 is away applies the
// maps it had rather than none.
type Follower struct {
	name string
	file string
	mu   sync.RWMutex
	t    nodemap.Table
	stop chan struct{}
	wg   sync.WaitGroup
}

// New returns a follower with the maps of file ("": keep none on disk),
// whose pushes srv answers (servers only may push).
func New(name, file string, srv *rpc.Server) (*Follower, error) {
	f := &Follower{name: name, file: file, stop: make(chan struct{})}
	if file != "" {
		b, err := os.ReadFile(file)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("%s: nodemaps: %w", name, err)
		default:
			if err := wire.Unmarshal(b, &f.t); err != nil {
				return nil, fmt.Errorf("%s: nodemaps in %s: %w", name, file, err)
			}
		}
	}
	rpc.HandleFunc(srv, proto.MNodemapPush, func(ctx context.Context, t *nodemap.Table) (any, error) {
		f.Set(t)
		return &proto.Empty{}, nil
	})
	srv.Require(rpc.RoleServer, proto.MNodemapPush)
	return f, nil
}

// Pull fetches the table from MDT0 over mgs now, then every interval
// until Stop.
func (f *Follower) Pull(mgs *rpc.Client, interval time.Duration) {
	fetch := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		t, err := rpc.Invoke[nodemap.Table](ctx, mgs, proto.MNodemapList, &proto.Empty{})
		if err != nil {
			gen := f.Table().Gen
			slog.Warn(fmt.Sprintf("%s: nodemaps from mdt0: %v (keeping generation %d)", f.name, err, gen), "server", f.name, "gen", gen)
			return
		}
		f.Set(t)
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		fetch()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-tick.C:
				fetch()
			}
		}
	}()
}

// Stop ends the pulls.
func (f *Follower) Stop() {
	close(f.stop)
	f.wg.Wait()
}

// Set takes t if it is newer than the copy held, and keeps it in the
// follower's file.
func (f *Follower) Set(t *nodemap.Table) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.Gen <= f.t.Gen && (t.Gen != 0 || f.t.Gen != 0) {
		return
	}
	f.t = *t
	if f.file == "" {
		return
	}
	tmp := f.file + ".tmp"
	err := os.WriteFile(tmp, wire.Marshal(nil, t), 0o600)
	if err == nil {
		err = os.Rename(tmp, f.file)
	}
	if err != nil {
		slog.Warn(fmt.Sprintf("%s: nodemaps generation %d not kept on disk: %v", f.name, t.Gen, err), "server", f.name, "gen", t.Gen)
	}
}

// Table returns the copy held.
func (f *Follower) Table() *nodemap.Table {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t := f.t
	return &t
}

// Policy is the map that applies to the peer of a request.
func (f *Follower) Policy(p rpc.Caller) nodemap.Map {
	if p.Role != rpc.RoleClient {
		return nodemap.Default // servers, admin tools, calls in this process
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if len(f.t.Maps) == 0 {
		return nodemap.Default
	}
	return nodemap.Match(&f.t, p.Peer, p.Group)
}
