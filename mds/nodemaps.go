package mds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/internal/nodemapsync"
	"github.com/stripefs/stripefs/nodemap"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/wire"
)

// Nodemaps on the MDT (package nodemap decides, nodemapsync keeps every
// target's copy): MDT0 keeps the table in its database and answers the
// admin tool; every MDT squashes the ids of a client's requests, refuses
// changes from read-only groups and keeps fileset clients inside their
// subtree.

var keyNodemaps = []byte("Mnodemaps")

// startNodemaps loads (MDT0) or follows the table.
func (m *MDT) startNodemaps() error {
	file := ""
	if m.cfg.Index != 0 && m.cfg.DataDir != "" && m.cfg.FS == nil { // on the disk beside the database
		file = filepath.Join(m.cfg.DataDir, "nodemaps")
	}
	var err error
	if m.nodemaps, err = nodemapsync.New(m.Srv.Name, file, m.Srv); err != nil {
		return err
	}
	rpc.HandleFunc(m.Srv, proto.MNodemapMine, func(ctx context.Context, _ *proto.Empty) (any, error) {
		p := m.nodemaps.Policy(rpc.PeerFrom(ctx))
		p.Ranges, p.KeyGroups = nil, nil // the client's own policy, not how others are told apart
		return &p, nil
	})
	if m.cfg.Index != 0 {
		if m.mgsClient != nil {
			m.nodemaps.Pull(m.mgsClient.Conn(), nodemapsync.DefaultInterval)
		}
		return nil
	}
	v, closer, err := m.db.Get(keyNodemaps)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return fmt.Errorf("mdt0: read nodemaps: %w", err)
	default:
		var t nodemap.Table
		err = wire.Unmarshal(v, &t)
		closer.Close()
		if err != nil {
			return fmt.Errorf("mdt0: corrupt nodemaps: %w", err)
		}
		m.nodemaps.Set(&t)
	}
	rpc.HandleFunc(m.Srv, proto.MNodemapList, func(ctx context.Context, _ *proto.Empty) (any, error) {
		return m.nodemaps.Table(), nil
	})
	rpc.HandleFunc(m.Srv, proto.MNodemapSet, m.nodemapSet)
	rpc.HandleFunc(m.Srv, proto.MNodemapDel, func(ctx context.Context, r *proto.NodemapDelReq) (any, error) {
		return m.changeNodemaps(ctx, func(t *nodemap.Table) error {
			if !nodemap.Del(t, r.Name) {
				return fmt.Errorf("mdt0: no nodemap %q: %w", r.Name, syscall.ENOENT)
			}
			return nil
		})
	})
	return nil
}

func (m *MDT) nodemapSet(ctx context.Context, r *proto.NodemapSetReq) (any, error) {
	nm := r.Map
	if nm.Fileset == "/" {
		nm.Fileset = ""
	}
	if err := nodemap.Check(&nm); err != nil {
		return nil, fmt.Errorf("mdt0: %v: %w", err, syscall.EINVAL)
	}
	nm.FilesetFID = proto.FID{}
	if nm.Fileset != "" {
		fid, err := m.resolvePath(ctx, nm.Fileset)
		if err != nil {
			return nil, fmt.Errorf("mdt0: nodemap %s: fileset %s: %w", nm.Name, nm.Fileset, err)
		}
		nm.FilesetFID = fid
	}
	return m.changeNodemaps(ctx, func(t *nodemap.Table) error {
		if _, ok := nodemap.Get(t, nm.Name); ok && r.New {
			return fmt.Errorf("mdt0: nodemap %q exists (nodemap set changes it): %w", nm.Name, syscall.EEXIST)
		}
		if err := nodemap.Put(t, nm); err != nil {
			return fmt.Errorf("mdt0: %v: %w", err, syscall.EINVAL)
		}
		return nil
	})
}

// changeNodemaps applies change to the table, stores it and pushes it to
// every target; a target that misses the push pulls it soon after.
func (m *MDT) changeNodemaps(ctx context.Context, change func(*nodemap.Table) error) (any, error) {
	m.nodemapMu.Lock()
	defer m.nodemapMu.Unlock()
	t := m.nodemaps.Table()
	t.Maps = append([]nodemap.Map(nil), t.Maps...)
	if err := change(t); err != nil {
		return nil, err
	}
	b := m.db.NewBatch()
	b.Set(keyNodemaps, wire.Marshal(nil, t), nil)
	if err := m.commit(b, true); err != nil {
		return nil, fmt.Errorf("mdt0: store nodemaps: %w", err)
	}
	m.nodemaps.Set(t)
	m.pushNodemaps(ctx, t)
	return t, nil
}

// pushNodemaps sends t to every other target at once.
func (m *MDT) pushNodemaps(ctx context.Context, t *nodemap.Table) {
	cfg, err := m.config(ctx)
	if err != nil {
		m.logf(slog.LevelWarn, "nodemaps: no cluster map to push to: %v", err)
		return
	}
	var wg sync.WaitGroup
	for _, tg := range append(append([]proto.Target(nil), cfg.MDTs...), cfg.OSTs...) {
		if tg.Kind == proto.KindMDT && tg.Index == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := rpc.NewClient(tg.Addr, m.Srv.Name)
			c.Role, c.RetryFor = rpc.RoleServer, 0
			defer c.Close()
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if _, err := rpc.Invoke[proto.Empty](pctx, c, proto.MNodemapPush, t); err != nil {
				m.logf(slog.LevelWarn, "nodemaps to %s%d: %v (it pulls them within %v)", tg.Kind, tg.Index, err, nodemapsync.DefaultInterval)
			}
		}()
	}
	wg.Wait()
}

// resolvePath walks an absolute path from the root to a directory's FID,
// asking other MDTs for the parts they hold.
func (m *MDT) resolvePath(ctx context.Context, path string) (proto.FID, error) {
	fid := proto.RootFID
	for _, name := range strings.Split(strings.Trim(path, "/"), "/") {
		if name == "" || name == "." {
			continue
		}
		var a proto.Attr
		if fid.MDT() == m.cfg.Index {
			d, err := m.getDirent(fid, name)
			if err != nil {
				return proto.FID{}, err
			}
			a = proto.Attr{FID: d.FID, Mode: d.Mode}
		} else {
			r, err := m.peerLookup(ctx, fid, name)
			if err != nil {
				return proto.FID{}, err
			}
			a = r.Attr
		}
		if a.Mode&sIFMT != sIFDIR {
			return proto.FID{}, syscall.ENOTDIR
		}
		fid = a.FID
	}
	return fid, nil
}

// policy is the nodemap of the request of ctx.
func (m *MDT) policy(ctx context.Context) nodemap.Map {
	return m.nodemaps.Policy(rpc.PeerFrom(ctx))
}

// writable refuses a change from a read-only group.
func (m *MDT) writable(ctx context.Context, op string, what any) error {
	if p := m.policy(ctx); p.ReadOnly {
		return fmt.Errorf("mdt%d: %s %v: nodemap %s is read-only: %w", m.cfg.Index, op, what, p.Name, syscall.EROFS)
	}
	return nil
}

// filesetTTL bounds how long a directory found inside a fileset is
// taken to stay there (a rename elsewhere may move it out).
const filesetTTL = 5 * time.Second

type filesetKey struct{ root, dir proto.FID }

// inFileset refuses directories outside the fileset of the request's
// group: a fileset client names entries only inside its subtree. (A
// file is not checked by its FID: files keep no parent, as Lustre's
// without the link xattr.) m.mu must not be held.
func (m *MDT) inFileset(ctx context.Context, dirs ...proto.FID) error {
	p := m.policy(ctx)
	root := p.FilesetFID
	if root.IsZero() {
		return nil
	}
	for _, d := range dirs {
		if d == root {
			continue
		}
		k := filesetKey{root, d}
		m.filesetMu.Lock()
		at, ok := m.filesetSeen[k]
		m.filesetMu.Unlock()
		if ok && time.Since(at) < filesetTTL {
			continue
		}
		in, err := m.isAncestorAnywhere(ctx, root, d)
		if err != nil {
			return err
		}
		if !in {
			return fmt.Errorf("mdt%d: %s is outside nodemap %s's fileset %s: %w", m.cfg.Index, d, p.Name, p.Fileset, syscall.EACCES)
		}
		m.filesetMu.Lock()
		if len(m.filesetSeen) > 1<<16 {
			clear(m.filesetSeen)
		}
		m.filesetSeen[k] = time.Now()
		m.filesetMu.Unlock()
	}
	return nil
}
