package fs

import (
	"context"
	"sync"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/stripefs/stripefs/proto"
)

// st_blocks of a regular file is the space its objects really take on
// the OSTs (each object's allocated blocks, parity included), not its
// size: du and ls -s must tell a sparse file from a dense one. The MDT
// does not know it, so the client asks the objects' OSTs (one getattr
// each, in parallel) and keeps the sum per file with the size, mtime and
// ctime it was measured at: while they stay the same, so do the blocks,
// and a stat costs nothing more. Data this client has not flushed yet
// shows once it is.

// blockCacheMax bounds the files whose blocks a client remembers.
const blockCacheMax = 1 << 16

type blockCache struct {
	mu sync.Mutex
	m  map[proto.FID]blockEntry
}

type blockEntry struct {
	size         uint64
	mtime, ctime int64
	blocks       uint64
}

func (e blockEntry) matches(a *proto.Attr) bool {
	return e.size == a.Size && e.mtime == a.Mtime && e.ctime == a.Ctime
}

// Blocks is a's 512-byte blocks when this client knows them for a as it
// is now: an empty or non-regular file has none of its own.
func (c *Client) Blocks(a *proto.Attr) (uint64, bool) {
	if a.Mode&syscall.S_IFMT != syscall.S_IFREG || a.Size == 0 {
		return 0, true
	}
	c.blocks.mu.Lock()
	defer c.blocks.mu.Unlock()
	e, ok := c.blocks.m[a.FID]
	if !ok || !e.matches(a) {
		return 0, false
	}
	return e.blocks, true
}

// MeasureBlocks asks the OSTs of a's objects for their allocated blocks
// and remembers their sum for a as it is. An OST that does not answer
// makes it fall back to the size (not remembered): a stat does not fail
// for want of one OST.
func (c *Client) MeasureBlocks(ctx context.Context, a *proto.Attr) uint64 {
	if b, ok := c.Blocks(a); ok {
		return b
	}
	lay := a.Layout
	sums := make([]uint64, len(lay.OSTs))
	g, gctx := errgroup.WithContext(ctx)
	for s, ost := range lay.OSTs {
		g.Go(func() error {
			var r proto.OGetattrReply
			if err := c.ostCall(gctx, ost, proto.OGetattr, &proto.OGetattrReq{Obj: proto.ObjID{FID: a.FID, Stripe: uint32(s)}}, &r); err != nil {
				return err
			}
			sums[s] = r.Blocks
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return (a.Size + 511) / 512
	}
	var blocks uint64
	for _, b := range sums {
		blocks += b
	}
	c.blocks.mu.Lock()
	defer c.blocks.mu.Unlock()
	if c.blocks.m == nil || len(c.blocks.m) >= blockCacheMax {
		c.blocks.m = map[proto.FID]blockEntry{} // forget all: cheaper than an LRU, and rare
	}
	c.blocks.m[a.FID] = blockEntry{size: a.Size, mtime: a.Mtime, ctime: a.Ctime, blocks: blocks}
	return blocks
}
