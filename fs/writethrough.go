package fs

import (
	"context"
	"fmt"
	"syscall"
)

// write stores total bytes of iovs at off in the file: into the
// write-back cache when the OSTs' grants cover the chunk buffers it needs
// (grant.go), and straight to the OSTs otherwise, so that a full OST or a
// spent quota fails this write() and not a later fsync. It updates the
// size and mtime for what was stored, and returns how much that was.
// st.mu is held.
func (c *Client) write(ctx context.Context, st *inodeState, off int64, iovs [][]byte, total int) (int, error) {
	wb := &st.wb
	var fresh []int64
	for idx := off / wb.size; idx <= (off+int64(total)-1)/wb.size; idx++ {
		if wb.dirty[idx] == nil {
			fresh = append(fresh, idx)
		}
	}
	n := total
	var err error
	near := c.nearQuota(ctx, st.fid)
	covered := !near && c.chargeIfCovered(st.layout, wb.size, fresh)
	if !covered && !near && c.askGrants(ctx, st.fid, st.layout, wb.size, fresh) == nil {
		covered = c.chargeIfCovered(st.layout, wb.size, fresh)
	}
	if covered {
		c.bufferWrite(st, off, iovs, total)
	} else {
		n, err = c.writeThrough(ctx, st, off, iovs, total)
	}
	if n > 0 {
		st.size = max(st.size, uint64(off)+uint64(n))
		st.mtime = nowNs()
		st.dirty = true
	}
	return n, err
}

// writeThrough writes total bytes of iovs at off to the OSTs and waits for
// them, chunk by chunk, after what the cache holds of those chunks: a
// write the grants do not cover. It returns the bytes stored before the
// first failure; a failure with nothing stored is the write's error, one
// after some bytes a short write (the next write meets it again). st.mu
// is held; it is let go while the OSTs work.
func (c *Client) writeThrough(ctx context.Context, st *inodeState, off int64, iovs [][]byte, total int) (int, error) {
	wb := &st.wb
	first, last := off/wb.size, (off+int64(total)-1)/wb.size
	if err := c.settleChunks(ctx, st, first, last); err != nil {
		return 0, err
	}
	defer wakeOn(ctx, &st.mu, wb.done)()
	done := 0
	for idx := first; idx <= last && done < total; idx++ {
		for wb.flushing[idx] != nil && ctx.Err() == nil { // a flush that started meanwhile goes first
			wb.done.Wait()
		}
		if ctx.Err() != nil {
			return c.partial(done, fmt.Errorf("write of %s: %w", st.fid, syscall.EINTR))
		}
		in := (off + int64(done)) - idx*wb.size
		n := int(min(int64(total-done), wb.size-in))
		ch := &chunk{idx: idx, buf: getBuf(wb.size)}
		copyFrom(ch.buf[in:in+int64(n)], iovs, done)
		ch.dirty.Add(in, in+int64(n))
		if st.ra.chunks[idx] != nil {
			c.releaseRA(st, idx) // now stale
		}
		if cached := wb.dirty[idx]; cached != nil {
			// Written meanwhile by another writer of this client: the
			// cache holds newer bytes than ours where both wrote.
			for _, r := range cached.dirty.Ranges() {
				copy(ch.buf[r.Start:r.End], cached.buf[r.Start:r.End])
			}
		}
		wb.flushing[idx] = ch
		lay := st.layout
		var knownEnd uint64
		ep, isEC := ecRow(lay, idx)
		if isEC {
			knownEnd = st.ecEnd
			st.ecEnd = max(st.ecEnd, uint64(idx*wb.size+in+int64(n)))
		}
		c.counters.writeThroughs.Add(1)
		st.mu.Unlock()
		var err error
		wctx := withThrough(ctx)
		if isEC {
			err = c.sendRow(wctx, st.fid, ep, ch, knownEnd)
		} else {
			err = c.sendChunk(wctx, st.fid, lay, wb.size, ch, nil)
		}
		st.mu.Lock()
		delete(wb.flushing, idx)
		putBuf(ch.buf)
		wb.done.Broadcast()
		if next := wb.dirty[idx]; next != nil && (next.dirty.Covers(0, wb.size) || st.flushAll > 0) {
			c.startFlush(st, next)
		}
		if err != nil {
			if isEC && knownEnd < st.ecEnd && done == 0 {
				st.ecEnd = knownEnd
			}
			return c.partial(done, err)
		}
		done += n
	}
	return done, nil
}

// partial is what a write that stored done bytes before err returns.
func (c *Client) partial(done int, err error) (int, error) {
	if done > 0 {
		return done, nil
	}
	return 0, err
}

// settleChunks sends what the cache holds of chunks [first, last] and
// waits until none of them is dirty or on its way, so that a write
// through lands after them. A failed flush is reported (and the data
// stays cached, as for any write-back error). st.mu is held.
func (c *Client) settleChunks(ctx context.Context, st *inodeState, first, last int64) error {
	wb := &st.wb
	st.flushAll++ // completions start the chunk's next flush at once
	defer func() { st.flushAll-- }()
	defer wakeOn(ctx, &st.mu, wb.done)()
	failed := wb.fails
	for {
		busy := false
		for idx := first; idx <= last; idx++ {
			if ch := wb.dirty[idx]; ch != nil {
				c.startFlush(st, ch)
				busy = true
			}
			if wb.flushing[idx] != nil {
				busy = true
			}
		}
		if !busy {
			return nil
		}
		wb.done.Wait()
		if wb.fails != failed {
			return wb.lastErr
		}
		if ctx.Err() != nil {
			return fmt.Errorf("write of %s: %w", st.fid, syscall.EINTR)
		}
	}
}
