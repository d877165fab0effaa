package fs

import (
	"context"
	"fmt"
	"strings"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/perm"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/wire"
)

// Striped directories, as Lustre's LMV layer does them: the client sends
// each name operation straight to the stripe the name hashes to, reads a
// directory stripe after stripe, and sums the stripes for the master's
// attributes. A striped directory's FID says it is one, so plain
// directories cost nothing; the layout is read once from the master and
// kept (it never changes while the directory exists), in a bounded cache.

const lmvCacheMax = 4096

// lmv returns dir's layout, nil for a plain directory.
func (c *Client) lmv(ctx context.Context, dir proto.FID) (*proto.LMV, error) {
	if !dir.IsStripedDir() {
		return nil, nil
	}
	c.lmvMu.Lock()
	l := c.lmvs[dir]
	c.lmvMu.Unlock()
	if l != nil {
		return l, nil
	}
	var r proto.XattrReply
	if err := c.mdtCall(ctx, dir, proto.MGetxattr, &proto.XattrReq{FID: dir, Name: proto.LMVXattr}, &r); err != nil {
		return nil, fmt.Errorf("fs: layout of striped directory %s: %w", dir, err)
	}
	l = new(proto.LMV)
	if err := wire.Unmarshal(r.Value, l); err != nil || len(l.Stripes) == 0 || len(l.Stripes) > proto.MaxMDTs || l.Master != dir {
		return nil, fmt.Errorf("fs: striped directory %s has a bad layout (%v): %w", dir, err, syscall.EIO)
	}
	c.lmvMu.Lock()
	if c.lmvs == nil || len(c.lmvs) >= lmvCacheMax {
		c.lmvs = map[proto.FID]*proto.LMV{} // start over: layouts are cheap to read again
	}
	c.lmvs[dir] = l
	c.lmvMu.Unlock()
	return l, nil
}

// route returns the directory object that holds (or is to hold) name in
// dir: for a striped directory the stripe the name hashes to, else dir.
// "." and ".." are the master's.
func (c *Client) route(ctx context.Context, dir proto.FID, name string) (proto.FID, error) {
	if !dir.IsStripedDir() || name == "." || name == ".." {
		return dir, nil
	}
	l, err := c.lmv(ctx, dir)
	if err != nil {
		return proto.FID{}, err
	}
	return l.Stripes[layout.DirStripe(name, len(l.Stripes))], nil
}

// stripeAttrs returns the attributes of every stripe of l, read in
// parallel.
func (c *Client) stripeAttrs(ctx context.Context, l *proto.LMV) ([]proto.Attr, error) {
	out := make([]proto.Attr, len(l.Stripes))
	g, gctx := errgroup.WithContext(ctx)
	for i, s := range l.Stripes {
		g.Go(func() error {
			var r proto.AttrReply
			if err := c.mdtCall(gctx, s, proto.MGetattr, &proto.GetattrReq{FID: s}, &r); err != nil {
				return fmt.Errorf("fs: stripe %d of %s: %w", i, l.Master, err)
			}
			out[i] = r.Attr
			return nil
		})
	}
	return out, g.Wait()
}

// getattrStriped reads a striped directory's master and stripes at once
// (one round trip, not two: the kernel asks for a directory's attributes
// after every change in it) and merges them.
func (c *Client) getattrStriped(ctx context.Context, fid proto.FID) (*proto.Attr, error) {
	l, err := c.lmv(ctx, fid)
	if err != nil {
		return nil, err
	}
	var master proto.AttrReply
	var stripes []proto.Attr
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.mdtCall(gctx, fid, proto.MGetattr, &proto.GetattrReq{FID: fid}, &master) })
	g.Go(func() (err error) { stripes, err = c.stripeAttrs(gctx, l); return err })
	if err := g.Wait(); err != nil {
		return nil, err
	}
	merge(&master.Attr, stripes)
	return &master.Attr, nil
}

// mergeStripes completes a striped directory's master attributes from its
// stripes, as Lustre's client does: the link count is 2 plus every
// stripe's subdirectories, the size the sum of the stripes', and mtime
// and ctime the latest of all.
func (c *Client) mergeStripes(ctx context.Context, a *proto.Attr) error {
	if !a.FID.IsStripedDir() {
		return nil
	}
	l, err := c.lmv(ctx, a.FID)
	if err != nil {
		return err
	}
	sa, err := c.stripeAttrs(ctx, l)
	if err != nil {
		return err
	}
	merge(a, sa)
	return nil
}

func merge(a *proto.Attr, stripes []proto.Attr) {
	a.Nlink, a.Size = 2, 0
	for _, s := range stripes {
		a.Nlink += max(s.Nlink, 2) - 2
		a.Size += s.Size
		a.Mtime = max(a.Mtime, s.Mtime)
		a.Ctime = max(a.Ctime, s.Ctime)
	}
}

// readdirStriped reads a striped directory stripe after stripe; cookies
// carry the stripe (layout.DirCookie). "." and ".." come from stripe 0,
// which answers them for the master.
func (c *Client) readdirStriped(ctx context.Context, l *proto.LMV, cookie uint64, maxEnts int, plus bool) ([]proto.DirEnt, bool, error) {
	s, after := layout.SplitDirCookie(cookie)
	var out []proto.DirEnt
	for s < len(l.Stripes) && len(out) < maxEnts {
		ents, eof, err := c.readdirOne(ctx, l.Stripes[s], after, maxEnts-len(out), plus)
		if err != nil {
			return nil, false, fmt.Errorf("fs: readdir stripe %d of %s: %w", s, l.Master, err)
		}
		for _, e := range ents {
			if s > 0 && (e.Name == "." || e.Name == "..") {
				continue
			}
			e.Cookie = layout.DirCookie(s, e.Cookie)
			out = append(out, e)
		}
		if !eof {
			return out, false, nil
		}
		s, after = s+1, 2 // the next stripe, past its own "." and ".."
	}
	return out, s >= len(l.Stripes), nil
}

// stripedXattr reports whether setting or removing name on a striped
// directory's master must reach its stripes too: the defaults new
// entries take, which the stripes' MDTs apply.
func stripedXattr(name string) bool {
	switch name {
	case proto.LayoutXattr, proto.DirDefaultXattr, perm.ACLAccessXattr, perm.ACLDefaultXattr:
		return true
	}
	return false
}

// eachStripe runs f on every stripe of the striped directory fid.
func (c *Client) eachStripe(ctx context.Context, fid proto.FID, f func(ctx context.Context, s proto.FID) error) error {
	l, err := c.lmv(ctx, fid)
	if err != nil || l == nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range l.Stripes {
		g.Go(func() error { return f(gctx, s) })
	}
	return g.Wait()
}

// mkdirXattrName is the name a stripefs.mkdir value (lfs mkdir -i/-c)
// creates, so that it can be routed like any mkdir.
func mkdirXattrName(value []byte) string {
	for _, f := range strings.Fields(string(value)) {
		if k, v, ok := strings.Cut(f, "="); ok && k == "name" {
			return v
		}
	}
	return ""
}

// mkdirXattr is mds.MkdirXattr (the client does not import the server).
const mkdirXattr = "stripefs.mkdir"
