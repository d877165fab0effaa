package fs

import "sync/atomic"

// counters are the client's own statistics beside per-method RPC counts.
type counters struct {
	flushes, fullFlushes atomic.Int64 // chunks sent, and those sent whole
	memoryWaits          atomic.Int64 // writers that waited for dirty memory
	readModifyWrites     atomic.Int64 // reads done in order to write (EC partial rows)
	ecFullRows           atomic.Int64 // EC rows written whole: parity with no reads
	ecPartialRows        atomic.Int64 // EC rows written in part (those that read are RMWs)
	degradedReads        atomic.Int64 // EC rows rebuilt for a reader from parity
	ecUnrecoverable      atomic.Int64 // EC rows a reader could not rebuild (EIO)
	readaheadHits        atomic.Int64
	readaheadBytes       atomic.Int64
	readaheadHints       atomic.Int64 // object files asked to read ahead for reads lent from them (hintAhead)
	openDataKept         atomic.Int64 // small files' data that came with their open (opendata.go)
	openDataCached       atomic.Int64 // and that the frontend's kernel kept in its page cache (OpenDataHeld)
	closeWrites          atomic.Int64 // Data-on-MDT writes a close carried (closewrite.go)
	localReads           atomic.Int64 // reads lent from an OST's object file in this process (view.go)
	directWrites         atomic.Int64 // writes an OST in this process took from the chunk buffer (rpc.Client.Direct)
	directMDTCalls       atomic.Int64 // metadata calls an MDT in this process ran in the caller's goroutine
	dirAttrHits          atomic.Int64 // getattrs of a directory answered from this client's change in it (dirattrs.go)
	fileAttrHits         atomic.Int64 // getattrs of a regular file answered under its Update lock (fileattrs.go)
	peakDirty            atomic.Int64
	grantShort           atomic.Int64 // writes the grants could not cover
	grantAsks            atomic.Int64 // empty writes that asked an OST for a first grant
	writeThroughs        atomic.Int64 // chunks written through, not cached (writethrough.go)
	copiedBytes          atomic.Int64 // copy_file_range bytes the OSTs copied (copyrange.go)
	copiedThroughBytes   atomic.Int64 // and those copied through this client (EC layouts)
	destroysNow          atomic.Int64 // removed files whose objects are being destroyed
	xattrHits            atomic.Int64 // getxattrs answered from the cache (xattrcache.go)
	// largestRead and largestWrite are the largest read and write a
	// frontend asked of a file in one call: what the kernel's FUSE
	// requests carry, which a mount negotiates (fusefs, requestsize.go).
	largestRead, largestWrite atomic.Int64
}

// raise makes a at least v.
func raise(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// Counter is one named client statistic.
type Counter struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// Counters returns the client's statistics.
func (c *Client) Counters() []Counter {
	return append([]Counter{
		{"dirty_bytes", c.dirtyBytes.Load()},
		{"dirty_bytes_peak", c.counters.peakDirty.Load()},
		{"max_dirty_bytes", c.opts.MaxDirty},
		{"chunk_flushes", c.counters.flushes.Load()},
		{"chunk_flushes_whole", c.counters.fullFlushes.Load()},
		{"dirty_memory_waits", c.counters.memoryWaits.Load()},
		{"read_modify_writes", c.counters.readModifyWrites.Load()},
		{"ec_rows_full", c.counters.ecFullRows.Load()},
		{"ec_rows_partial", c.counters.ecPartialRows.Load()},
		{"degraded_reads", c.counters.degradedReads.Load()},
		{"ec_unrecoverable_reads", c.counters.ecUnrecoverable.Load()},
		{"readahead_hits", c.counters.readaheadHits.Load()},
		{"readahead_bytes", c.counters.readaheadBytes.Load()},
		{"readahead_hints", c.counters.readaheadHints.Load()},
		{"open_data_kept", c.counters.openDataKept.Load()},
		{"open_data_cached", c.counters.openDataCached.Load()},
		{"close_writes", c.counters.closeWrites.Load()},
		{"local_reads", c.counters.localReads.Load()},
		{"direct_writes", c.counters.directWrites.Load()},
		{"direct_mdt_calls", c.counters.directMDTCalls.Load()},
		{"dir_attr_hits", c.counters.dirAttrHits.Load()},
		{"file_attr_hits", c.counters.fileAttrHits.Load()},
		{"grant_bytes", c.grantBytes()},
		{"grant_short_writes", c.counters.grantShort.Load()},
		{"grant_asks", c.counters.grantAsks.Load()},
		{"write_through_chunks", c.counters.writeThroughs.Load()},
		{"copied_bytes", c.counters.copiedBytes.Load()},
		{"copied_through_bytes", c.counters.copiedThroughBytes.Load()},
		{"object_destroys_now", c.counters.destroysNow.Load()},
		{"xattr_cache_hits", c.counters.xattrHits.Load()},
		{"read_call_bytes_max", c.counters.largestRead.Load()},
		{"write_call_bytes_max", c.counters.largestWrite.Load()},
	}, append(c.lockCounters(), c.flockCounters()...)...)
}
