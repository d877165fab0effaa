package ost

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Inline objects. With Config.InlineMax set (an MDT's store of
// Data-on-MDT file data), an object whose bytes all lie below InlineMax
// is a value of the index beside its record instead of a file of its
// own. A small file's create+write, stat and unlink then cost a few
// Pebble operations where a file costs a create, an owner xattr, FIEMAP,
// fstat and an unlink: in a profile of mdtest's 3901-byte creates the
// create of the object file alone took 40% of the store's CPU, and fstat
// of the object file 11% of a stat phase.
//
// The record says which an object is (objRecord.Inline). Its bytes and
// its record change in one batch, under the object's allocation lock,
// which reads take too, so a read never sees one without the other. An
// inline object is dense up to its last written byte: its allocation is
// that length rounded up to the block size, as a file's would be, and a
// size past it (a truncate up) is a hole that reads as zeros. Durability
// is the index's: group commit, and OSync syncs the WAL.
//
// An object moves to a file ("spills") when a write reaches past
// InlineMax, and for what only a file does (fallocate, EC unit tags, the
// source of a copy). The file is written and synced first, then one
// batch makes the record a file's and drops the bytes, and the WAL is
// synced before anything else touches the object: a crash leaves either
// the inline object or the file, and the next start's reconcile deletes
// a file whose record still says inline.

// kInline keys an inline object's bytes: d fid-key stripe → bytes.
const kInline = 'd'

// The Pebble of an index with inline objects holds file data: a memtable
// and a cache larger than Pebble's defaults (4 and 8 MiB) keep a burst of
// small files' creates, stats and reads from flushing and rereading
// tables.
const (
	inlineMemTableSize = 32 << 20
	inlineCacheSize    = 64 << 20
)

func inlineKey(id proto.ObjID) []byte {
	k := objKey(id)
	k[0] = kInline
	return k
}

// putObject adds to b id's record and, when the object is inline, its
// bytes.
func putObject(b *pebble.Batch, id proto.ObjID, rec objRecord, inline []byte) {
	b.Set(objKey(id), rec.marshal(), nil)
	if rec.Inline {
		b.Set(inlineKey(id), inline, nil)
	}
}

// inlineBytes is a copy of an inline object's bytes (none if the index
// has none for it).
func (x *index) inlineBytes(id proto.ObjID) ([]byte, error) {
	v, closer, err := x.db.Get(inlineKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: index: inline object %s: %v: %w", x.name, id, err, syscall.EIO)
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

// inlineObjects lists the inline objects after after, in key order.
func (x *index) inlineObjects(after proto.ObjID) ([]proto.ObjID, error) {
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kInline}, UpperBound: []byte{kInline + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var ids []proto.ObjID
	for ok := it.First(); ok; ok = it.Next() {
		k := append([]byte(nil), it.Key()...)
		k[0] = kObject
		if id, ok := parseObjKey(k); ok && less(after, id) {
			ids = append(ids, id)
		}
	}
	return ids, it.Error()
}

// inlineState is what an OST keeping inline objects knows of id: its
// record, and whether it is inline or would be made so (no record and no
// file: a new object). A file without a record is possible (a truncate
// up of a missing object makes one, recorded only once it has blocks),
// hence the stat; it finds nothing for a new object, cheaply.
func (o *OST) inlineState(id proto.ObjID) (rec objRecord, had, inline bool, err error) {
	if rec, had, err = o.idx.object(id); err != nil || had {
		return rec, had, had && rec.Inline, err
	}
	if err := o.fs.Stat(o.objPath(id), new(unix.Stat_t)); errors.Is(err, syscall.ENOENT) {
		return rec, false, true, nil
	} else if err != nil {
		return rec, false, false, err
	}
	return rec, false, false, nil
}

// inlineAlloc is what n inline bytes are charged: whole blocks, as a
// file of n bytes.
func (o *OST) inlineAlloc(n int) uint64 {
	bs := o.ext.blockSize
	return (uint64(n) + bs - 1) / bs * bs
}

// writeInline is a write to an object that is or becomes inline; done is
// false when the write is a file's (the object is one, or was spilled
// for it). The object's shared lock is held.
func (o *OST) writeInline(ctx context.Context, req *proto.OWriteReq, data []byte) (rep *proto.OWriteReply, done bool, err error) {
	am := o.allocLock(req.Obj)
	am.Lock()
	defer am.Unlock()
	rec, had, inline, err := o.inlineState(req.Obj)
	if err != nil || !inline {
		return nil, false, err
	}
	end := req.Off + uint64(len(data))
	if end > uint64(o.cfg.InlineMax) || len(req.Tag) > 0 {
		if had {
			err = o.spill(req.Obj, rec)
		} else {
			err = o.claimFile(req.Obj)
		}
		return nil, false, err
	}
	var cur []byte
	if had {
		if cur, err = o.idx.inlineBytes(req.Obj); err != nil {
			return nil, false, err
		}
	}
	if end > uint64(len(cur)) {
		cur = append(cur, make([]byte, end-uint64(len(cur)))...)
	}
	copy(cur[req.Off:], data)
	after := o.inlineAlloc(len(cur))
	res, err := o.space.admit(ctx, req.Grant.Client, req.Grant.Owner, sub(after, rec.Bytes), req.Grant.Through)
	if err != nil {
		return nil, false, err
	}
	rec.Inline = true
	grant, err := o.space.settle(res, req.Obj, rec, had, after, max(rec.Size, end), req.Grant.Want, cur)
	if err != nil {
		return nil, false, err
	}
	o.ctr.inlineWrites.Add(1)
	return &proto.OWriteReply{Size: end, Grant: grant}, true, nil
}

// readInline reads an inline object's range into buf; ok is false when
// the object is not inline. n is what the object holds of the range, size
// its size.
func (o *OST) readInline(id proto.ObjID, off uint64, buf []byte) (n int, size uint64, ok bool, err error) {
	am := o.allocLock(id)
	am.Lock()
	defer am.Unlock()
	rec, had, err := o.idx.object(id)
	if err != nil || !had || !rec.Inline {
		return 0, 0, false, err
	}
	data, err := o.idx.inlineBytes(id)
	if err != nil {
		return 0, 0, false, err
	}
	if off < rec.Size {
		n = int(min(uint64(len(buf)), rec.Size-off))
	}
	clear(buf[:n])
	if off < uint64(len(data)) {
		copy(buf[:n], data[off:])
	}
	return n, rec.Size, true, nil
}

// punchInline truncates an object that is or becomes inline to size (a
// missing one is made, as a hole); done is false when the punch is a
// file's. The object's exclusive lock is held.
func (o *OST) punchInline(id proto.ObjID, size uint64) (done bool, err error) {
	am := o.allocLock(id)
	am.Lock()
	defer am.Unlock()
	rec, had, inline, err := o.inlineState(id)
	switch {
	case err != nil || !inline || (!had && size == 0):
		return false, err
	case size > uint64(o.cfg.InlineMax):
		if had {
			err = o.spill(id, rec)
		}
		return false, err
	}
	var cur []byte
	if had {
		if cur, err = o.idx.inlineBytes(id); err != nil {
			return false, err
		}
	}
	cur = cur[:min(uint64(len(cur)), size)]
	if !had { // an inline object has none (writeInline)
		if err := o.dropTags(id, size); err != nil {
			return false, err
		}
	}
	rec.Inline = true
	return true, o.space.shrink(id, rec, had, o.inlineAlloc(len(cur)), size, false, cur)
}

// unInline spills id if it is inline, for what only a file does; with
// create, a missing object is made a file. The object's lock is held
// (shared or exclusive).
func (o *OST) unInline(id proto.ObjID, create bool) error {
	if o.cfg.InlineMax == 0 {
		return nil
	}
	am := o.allocLock(id)
	am.Lock()
	defer am.Unlock()
	rec, had, inline, err := o.inlineState(id)
	switch {
	case err != nil || !inline:
		return err
	case had:
		return o.spill(id, rec)
	case create:
		return o.claimFile(id)
	}
	return nil
}

// claimFile makes the file of an object that has neither record nor file
// yet, for a write that is to go to a file. It must be made before the
// allocation lock is let go: a write under the shared object lock racing
// with this one would otherwise find no file either and record the object
// inline, its bytes in the index and ours in a file nothing reads. The
// allocation lock is held.
func (o *OST) claimFile(id proto.ObjID) error {
	of, err := o.get(id, true)
	if err != nil {
		return err
	}
	o.put(of)
	return nil
}

// spill moves an inline object into a file of its own. The object's lock
// and its allocation lock are held.
func (o *OST) spill(id proto.ObjID, rec objRecord) error {
	data, err := o.idx.inlineBytes(id)
	if err != nil {
		return err
	}
	of, err := o.get(id, true)
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	defer o.put(of)
	after, size, err := o.spillFile(of, rec, data)
	if err == nil {
		err = o.space.spilled(id, rec, after, size)
	}
	if err == nil {
		err = o.idx.logSync()
	}
	if err != nil {
		// The record may still say inline: no file may stay beside it.
		o.forget(id)
		_ = o.fs.Remove(o.objPath(id))
		return fmt.Errorf("spill: %w", err)
	}
	o.ctr.spills.Add(1)
	return nil
}

// spillFile writes an inline object's bytes and size into its file, with
// its owner, durably, and says what the file then holds.
func (o *OST) spillFile(of *objFile, rec objRecord, data []byte) (after, size uint64, err error) {
	if err := of.f.Truncate(0); err != nil { // a file a failed spill left
		return 0, 0, err
	}
	if _, err := of.f.WriteAt(data, 0); err != nil {
		o.diskFailed("spill", of.id, err)
		return 0, 0, err
	}
	if rec.Size > uint64(len(data)) {
		if err := of.f.Truncate(int64(rec.Size)); err != nil {
			return 0, 0, err
		}
	}
	o.noteOwner(of, rec.Owner)
	if err := of.f.Datasync(); err != nil {
		o.diskFailed("spill", of.id, err)
		return 0, 0, err
	}
	return o.allocated(of)
}

// ReadInline fills buf with an inline object's first len(buf) bytes (an
// MDT's open reply carries a small Data-on-MDT file's data), zeros past
// what the object holds; ok is false when the object is missing or a
// file's. One Get: the index has an object's bytes exactly when its
// record says inline (putObject, spilled), and a single key reads whole.
func (o *OST) ReadInline(id proto.ObjID, buf []byte) (ok bool, err error) {
	mu := o.lock(id)
	mu.RLock()
	defer mu.RUnlock()
	v, closer, err := o.idx.db.Get(inlineKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: index: inline object %s: %v: %w", o.idx.name, id, err, syscall.EIO)
	}
	defer closer.Close()
	clear(buf[copy(buf, v):])
	return true, nil
}

// inlineReply answers an ost_read of an inline object; ok is false when
// the object is not inline.
func (o *OST) inlineReply(req *proto.OReadReq, tag []byte) (rep rpc.Reply, ok bool, err error) {
	bp := bufPool.Get().(*[]byte)
	buf := (*bp)[:min(int(req.Len), o.cfg.InlineMax)]
	n, size, ok, err := o.readInline(req.Obj, req.Off, buf)
	if err != nil || !ok {
		bufPool.Put(bp)
		return rpc.Reply{}, ok, err
	}
	return rpc.Reply{Msg: &proto.OReadReply{N: uint32(n), Size: size, Tag: tag}, Bulk: [][]byte{buf[:n]},
		Done: func() { bufPool.Put(bp) }}, true, nil
}

// inlineRecord is id's record when id is an inline object.
func (o *OST) inlineRecord(id proto.ObjID) (objRecord, bool, error) {
	if o.cfg.InlineMax == 0 {
		return objRecord{}, false, nil
	}
	rec, had, err := o.idx.object(id)
	return rec, had && rec.Inline, err
}
