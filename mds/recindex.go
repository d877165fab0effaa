package mds

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/mds/dtx"
)

// recIndex mirrors in memory which update-log records this MDT holds and
// its cancel watermarks. Whether an operation was applied here is asked
// for every record a coordinator pushes and every cancel, and in Pebble
// the usual answer, "no such record", is a lookup that misses in every
// level: two of them cost a pushed remote mkdir about 12 µs, a third of
// the participant's work. The index changes only as a committed batch
// changed those keys (m.commit reads the batch back), so it says what
// the database says.
//
// It also keeps up to maxDecoded of the records decoded: a record never
// changes once written, and the sweeper reads each of its own at least
// once before it can cancel it, which was most of the sweeper's work in
// a mkdir storm when each was decoded from disk.
type recIndex struct {
	mu      sync.Mutex
	held    map[dtx.OpID]struct{}
	marks   map[[2]uint32]uint64 // coord, epoch → highest cancelled sequence
	decoded map[dtx.OpID]*dtx.Record
}

// maxDecoded bounds the records kept decoded: a participant away for
// long leaves many behind, read from disk then.
const maxDecoded = 1 << 16

// load reads the index from the database, at open.
func (x *recIndex) load(db *pebble.DB) error {
	x.held, x.marks, x.decoded = map[dtx.OpID]struct{}{}, map[[2]uint32]uint64{}, map[dtx.OpID]*dtx.Record{}
	for _, prefix := range []byte{pTxn, pWatermark} {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			x.note(pebble.InternalKeyKindSet, it.Key(), it.Value())
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("update records: %w", err)
		}
	}
	return nil
}

// committed updates the index with what b, just committed, did.
func (x *recIndex) committed(b *pebble.Batch) {
	r := b.Reader()
	x.mu.Lock()
	defer x.mu.Unlock()
	for {
		kind, key, value, ok, err := r.Next()
		if !ok || err != nil {
			return
		}
		if len(key) > 0 && (key[0] == pTxn || key[0] == pWatermark) {
			x.note(kind, key, value)
		}
	}
}

// note applies one change of a record or watermark key; x.mu is held
// (or the index not yet shared).
func (x *recIndex) note(kind pebble.InternalKeyKind, key, value []byte) {
	switch {
	case key[0] == pTxn && len(key) == 17:
		id := dtx.OpID{Coord: binary.BigEndian.Uint32(key[1:]), Epoch: binary.BigEndian.Uint32(key[5:]), Seq: binary.BigEndian.Uint64(key[9:])}
		if kind == pebble.InternalKeyKindSet {
			x.held[id] = struct{}{}
		} else {
			delete(x.held, id)
			delete(x.decoded, id)
		}
	case key[0] == pWatermark && len(key) == 9:
		k := [2]uint32{binary.BigEndian.Uint32(key[1:]), binary.BigEndian.Uint32(key[5:])}
		if kind == pebble.InternalKeyKindSet && len(value) == 8 {
			x.marks[k] = binary.BigEndian.Uint64(value)
		} else {
			delete(x.marks, k)
		}
	}
}

func (x *recIndex) has(id dtx.OpID) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.held[id]
	return ok
}

// keep remembers rec, committed, decoded.
func (x *recIndex) keep(rec *dtx.Record) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.held[rec.ID]; ok && len(x.decoded) < maxDecoded {
		x.decoded[rec.ID] = rec
	}
}

// record returns the record id decoded, if kept.
func (x *recIndex) record(id dtx.OpID) *dtx.Record {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.decoded[id]
}

// ids lists the records held whose coordinator want accepts, in the
// order of their keys.
func (x *recIndex) ids(want func(coord uint32) bool) []dtx.OpID {
	x.mu.Lock()
	out := make([]dtx.OpID, 0, len(x.held))
	for id := range x.held {
		if want(id.Coord) {
			out = append(out, id)
		}
	}
	x.mu.Unlock()
	slices.SortFunc(out, func(a, b dtx.OpID) int { // txnKey's order
		return cmp.Or(cmp.Compare(a.Coord, b.Coord), cmp.Compare(a.Epoch, b.Epoch), cmp.Compare(a.Seq, b.Seq))
	})
	return out
}

func (x *recIndex) watermark(coord, epoch uint32) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.marks[[2]uint32{coord, epoch}]
}
