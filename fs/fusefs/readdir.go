package fusefs

import (
	"sync"
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stripefs/stripefs/proto"
)

// Directory streams. The kernel reads a directory a page at a time (25
// to 100 entries); asked one by one, the MDT would answer a 1000-entry
// directory in some twenty round trips. An open directory handle reads
// readdirBatch entries at a time instead and hands them to the kernel
// page by page, as Lustre's client keeps directory pages. What a handle
// holds is the directory as it was when read, which POSIX allows a
// stream to show; a change this mount makes to any directory drops it,
// so a program that removes entries as it reads (rm -r) reads on from
// the MDT.

// readdirBatch is how many entries a handle asks the MDT for at once.
const readdirBatch = 1024

// dirHandle is an open directory and what it has read ahead.
type dirHandle struct {
	fid proto.FID

	mu   sync.Mutex
	buf  []proto.DirEnt // read from cookie from, in order
	from uint64
	eof  bool // buf ends the directory
	plus bool // buf has attributes (readdirplus)
	gen  uint64
}

// namespace counts this mount's changes to directories.
type namespace struct{ gen atomic.Uint64 }

// nsChanged notes a change to some directory by this mount: read-ahead
// directory entries are not used past it.
func (f *FS) nsChanged() { f.ns.gen.Add(1) }

// ahead is what dh holds from cookie off on, or nil if it must read.
func (dh *dirHandle) ahead(off uint64, plus bool, gen uint64) []proto.DirEnt {
	if dh.buf == nil || dh.plus != plus || dh.gen != gen {
		return nil
	}
	i := 0
	if off != dh.from {
		i = -1
		for k := range dh.buf {
			if dh.buf[k].Cookie == off {
				i = k + 1
				break
			}
		}
		if i < 0 {
			return nil
		}
	}
	if i == len(dh.buf) && !dh.eof {
		return nil
	}
	return dh.buf[i:]
}

func (f *FS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return f.readDir(cancel, in, out, false)
}

func (f *FS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return f.readDir(cancel, in, out, true)
}

func (f *FS) readDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	dh, ok := f.handle(in.Fh).(*dirHandle)
	if !ok {
		return fuse.EBADF
	}
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	dh.mu.Lock()
	defer dh.mu.Unlock()
	gen := f.ns.gen.Load()
	ents := dh.ahead(in.Offset, plus, gen)
	if ents == nil {
		batch, eof, err := f.c.Readdir(c, dh.fid, in.Offset, readdirBatch, plus)
		if err != nil {
			return status(err)
		}
		dh.buf, dh.from, dh.eof, dh.plus, dh.gen = batch, in.Offset, eof, plus, gen
		ents = batch
	}
	for _, e := range ents {
		de := fuse.DirEntry{Name: e.Name, Mode: e.Mode, Ino: f.nodeID(e.FID), Off: e.Cookie}
		if !plus {
			if !out.AddDirEntry(de) {
				break
			}
			continue
		}
		eo := out.AddDirLookupEntry(de)
		if eo == nil {
			break
		}
		if e.Name != "." && e.Name != ".." && !e.Attr.FID.IsZero() {
			f.fillEntry(in.NodeId, e.Name, &e.Attr, eo)
		}
	}
	return fuse.OK
}
