package find

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/stripefs/stripefs/fsck"
	"github.com/stripefs/stripefs/internal/targets"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// namespace is every MDT's inodes and entries, joined: the entries of a
// striped directory's stripes are its master's.
type namespace struct {
	inodes   map[proto.FID]*proto.ScanInode
	children map[proto.FID][]proto.ScanDirent
}

// Scan finds from every MDT's own inodes and entries, read from all the
// MDTs at once (4096 a round trip) and joined here: for a whole
// filesystem a few round trips per MDT, where a walk costs several a
// file. rootFID is root's FID. It takes the admin key (the MDTs' scan
// methods are fsck's). Sizes are the MDT's: a file a client is writing
// now shows what that client last reported.
func Scan(ctx context.Context, mgs string, rootFID proto.FID, root string, p *Pred, emit func(path string)) error {
	cfg, err := targets.Map(ctx, mgs, "find", 0)
	if err != nil {
		return fmt.Errorf("find: %w", err)
	}
	parts := make([]namespacePart, len(cfg.MDTs))
	g, gctx := errgroup.WithContext(ctx)
	for i, t := range cfg.MDTs {
		g.Go(func() error {
			c := rpc.NewClient(t.Addr, "find")
			defer c.Close()
			var err error
			parts[i].inodes, parts[i].dirents, err = fsck.ScanMDT(gctx, c)
			if err != nil {
				return fmt.Errorf("find: mdt%d: %w", t.Index, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	ns := join(parts)
	rootIno, ok := ns.inodes[rootFID]
	if !ok {
		return fmt.Errorf("find: %s (%s) is on no MDT: %w", root, rootFID, syscall.ENOENT)
	}
	return ns.visit(ctx, rootFID, root, rootIno.Attr.Mode, p, emit)
}

type namespacePart struct {
	inodes  []proto.ScanInode
	dirents []proto.ScanDirent
}

func join(parts []namespacePart) *namespace {
	ns := &namespace{inodes: map[proto.FID]*proto.ScanInode{}, children: map[proto.FID][]proto.ScanDirent{}}
	for _, part := range parts {
		for i := range part.inodes {
			in := &part.inodes[i]
			ns.inodes[in.Attr.FID] = in
		}
	}
	for _, part := range parts {
		for _, d := range part.dirents {
			parent := d.Parent
			if in, ok := ns.inodes[parent]; ok && !in.Master.IsZero() {
				parent = in.Master // a stripe's entries are its directory's
			}
			ns.children[parent] = append(ns.children[parent], d)
		}
	}
	return ns
}

// visit matches dir's entry and then, depth first, what lies under it.
func (ns *namespace) visit(ctx context.Context, fid proto.FID, path string, mode uint32, p *Pred, emit func(string)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e := &Entry{Path: path, Mode: mode, MDT: fid.MDT()}
	if in, ok := ns.inodes[fid]; ok {
		a := &in.Attr
		e.Mode, e.Size, e.Mtime, e.OSTs = a.Mode, a.Size, a.Mtime, a.Layout.OSTs
	}
	if p.Match(e) {
		emit(path)
	}
	if e.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil
	}
	for _, d := range ns.children[fid] {
		if err := ns.visit(ctx, d.FID, filepath.Join(path, d.Name), d.Mode, p, emit); err != nil {
			return err
		}
	}
	return nil
}
