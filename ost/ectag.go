package ost

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/proto"
)

// Unit tags. A write may carry a tag, an opaque label the OST stores in
// its index under (object, tag offset) after the data is written, and a
// read may ask for it back. Erasure-coded files label each unit of a row
// with its version and checksum (fs/EC.md); the OST does not interpret
// tags. A punch drops the tags at or past the new size, a destroy all of
// the object's tags. Tags are committed like the rest of the index, in
// groups, and made durable by the next sync of the object (fsync).

const kTag = 'e' // e fid-key stripe offset → tag (outside the scan range g..o)

func tagPrefix(id proto.ObjID) []byte {
	k := id.FID.Key()
	b := make([]byte, 0, 1+16+4+8)
	b = append(b, kTag)
	b = append(b, k[:]...)
	return binary.BigEndian.AppendUint32(b, id.Stripe)
}

func tagKey(id proto.ObjID, off uint64) []byte {
	return binary.BigEndian.AppendUint64(tagPrefix(id), off)
}

// tagsEnd is the first key after every tag of id.
func tagsEnd(id proto.ObjID) []byte {
	p := tagPrefix(id)
	for i := len(p) - 1; i >= 0; i-- {
		if p[i]++; p[i] != 0 {
			return p[:i+1]
		}
	}
	return nil // unreachable: the prefix byte is not 0xff
}

// checkTag validates the tag fields of a write request.
func checkTag(req *proto.OWriteReq) error {
	if len(req.Tag) > proto.MaxTag || req.TagOff > 1<<50 {
		return fmt.Errorf("tag of %d bytes at %d: %w", len(req.Tag), req.TagOff, syscall.EINVAL)
	}
	return nil
}

// putTag stores a write's tag, if it has one. The object's shared lock
// is held, so a punch or destroy cannot slip between data and tag.
func (o *OST) putTag(req *proto.OWriteReq) error {
	if len(req.Tag) == 0 {
		return nil
	}
	b := o.idx.db.NewBatch()
	defer b.Close()
	if err := b.Set(tagKey(req.Obj, req.TagOff), req.Tag, nil); err != nil {
		return err
	}
	if err := o.idx.commit(b); err != nil {
		return err
	}
	o.idx.tagsDirty.Store(true)
	return nil
}

// getTag returns the tag stored under (id, off); nil if none.
func (o *OST) getTag(id proto.ObjID, off uint64) ([]byte, error) {
	v, closer, err := o.idx.db.Get(tagKey(id, off))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("index: tag: %v: %w", err, syscall.EIO)
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

// dropTags deletes id's tags at offsets from on. Objects without tags
// (plain striping) cost one index probe.
func (o *OST) dropTags(id proto.ObjID, from uint64) error {
	lo, hi := tagKey(id, from), tagsEnd(id)
	it, err := o.idx.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("index: tags: %v: %w", err, syscall.EIO)
	}
	any := it.First()
	if err := it.Close(); err != nil {
		return fmt.Errorf("index: tags: %v: %w", err, syscall.EIO)
	}
	if !any {
		return nil
	}
	b := o.idx.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return err
	}
	return o.idx.commit(b)
}

// syncTags makes the tags written so far durable (part of an fsync).
func (o *OST) syncTags() error {
	if !o.idx.tagsDirty.Swap(false) {
		return nil
	}
	if err := o.idx.logSync(); err != nil {
		o.idx.tagsDirty.Store(true)
		return fmt.Errorf("index: sync tags: %v: %w", err, storeErrno(err))
	}
	return nil
}
