package fs

import (
	"context"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// st_blocks of a regular file is the space its objects really take on
// the OSTs (each object's allocated blocks, parity included), not its
// size: du and ls -s must tell a sparse file from a dense one. The MDT
// does not know it (unless it holds all the data: Data-on-MDT files
// come with their blocks), so the client asks the objects' OSTs (one
// getattr each, in parallel) and keeps the sum per file with the size, mtime and
// ctime it was measured at: while they stay the same, so do the blocks,
// and a stat costs nothing more. Data this client has not flushed yet
// shows once it is.

// blockCacheMax bounds the files whose blocks a client remembers.
const blockCacheMax = 1 << 16

type blockCache struct {
	mu sync.Mutex
	m  map[proto.FID]blockEntry
	// away are OSTs that did not answer a measure, and when: files on
	// them show the size's estimate for a while instead of each stat
	// waiting for them.
	away map[uint32]time.Time
}

// measureWait bounds a measure's wait for the OSTs, and awayFor how long
// an OST that did not answer is not asked again.
const (
	measureWait = time.Second
	awayFor     = 10 * time.Second
)

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
// within a second makes it fall back to the size (not remembered), and
// files on that OST do so for the next ten seconds without asking: a
// stat neither fails nor waits long for want of one OST.
func (c *Client) MeasureBlocks(ctx context.Context, a *proto.Attr) uint64 {
	if b, ok := c.Blocks(a); ok {
		return b
	}
	lay := a.Layout
	estimate := (a.Size + 511) / 512
	if c.blocks.anyAway(lay.OSTs) {
		return estimate
	}
	sums := make([]uint64, len(lay.OSTs))
	ctx, cancel := context.WithTimeout(ctx, measureWait)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	for s, ost := range lay.OSTs {
		g.Go(func() error {
			var r proto.OGetattrReply
			call := &rpc.Call{Method: proto.OGetattr, Req: &proto.OGetattrReq{Obj: proto.ObjID{FID: a.FID, Stripe: uint32(s)}}, Resp: &r, FailFast: true}
			if err := c.ostDo(gctx, ost, call); err != nil {
				c.blocks.noteAway(ost)
				return err
			}
			sums[s] = r.Blocks
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return estimate
	}
	var blocks uint64
	for _, b := range sums {
		blocks += b
	}
	c.noteBlocks(a, blocks)
	return blocks
}

// noteBlocks remembers that a, as it is, has blocks: measured, or as an
// MDT holding all its data said.
func (c *Client) noteBlocks(a *proto.Attr, blocks uint64) {
	c.blocks.mu.Lock()
	defer c.blocks.mu.Unlock()
	if c.blocks.m == nil || len(c.blocks.m) >= blockCacheMax {
		c.blocks.m = map[proto.FID]blockEntry{} // forget all: cheaper than an LRU, and rare
	}
	c.blocks.m[a.FID] = blockEntry{size: a.Size, mtime: a.Mtime, ctime: a.Ctime, blocks: blocks}
}

func (b *blockCache) anyAway(osts []uint32) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, o := range osts {
		if t, ok := b.away[o]; ok && time.Since(t) < awayFor {
			return true
		}
	}
	return false
}

func (b *blockCache) noteAway(ost uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.away == nil {
		b.away = map[uint32]time.Time{}
	}
	b.away[ost] = time.Now()
}
