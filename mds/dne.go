package mds

import (
	"encoding/binary"
	"errors"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/proto"
)

// The distributed namespace: directories on another MDT than their
// parent's. The parent's MDT coordinates; package dtx decides (the
// protocol, and why it needs no disk sync on the reply path); these files
// are its I/O:
//
//	dne.go           the records' keys and the MDT's boot epoch
//	dne_coord.go     the coordinator: remote mkdir and rmdir as records
//	dne_apply.go     the apply engine: one MDT's part of a record, in one batch
//	dne_handlers.go  the txn_* methods other MDTs call
//	dne_peers.go     connections to the other MDTs
//	dne_sweep.go     the sweeper's RPCs around dtx.PlanSweep
//	dne_recovery.go  start-up recovery from the other MDTs' records

const (
	pTxn       = 'T' // T opid → dtx.Record (this MDT's copy of the whole operation)
	pWatermark = 'W' // W coord epoch → highest cancelled sequence
)

var keyEpoch = []byte("Mepoch")

func txnKey(id dtx.OpID) []byte {
	b := []byte{pTxn}
	b = binary.BigEndian.AppendUint32(b, id.Coord)
	b = binary.BigEndian.AppendUint32(b, id.Epoch)
	return binary.BigEndian.AppendUint64(b, id.Seq)
}

func watermarkKey(coord, epoch uint32) []byte {
	b := binary.BigEndian.AppendUint32([]byte{pWatermark}, coord)
	return binary.BigEndian.AppendUint32(b, epoch)
}

func toWire(id dtx.OpID) proto.TxnID {
	return proto.TxnID{Coord: id.Coord, Epoch: id.Epoch, Seq: id.Seq}
}

func fromWire(id proto.TxnID) dtx.OpID {
	return dtx.OpID{Coord: id.Coord, Epoch: id.Epoch, Seq: id.Seq}
}

// loadEpoch starts a new epoch: sequences of the previous run that never
// reached the disk are then never reused.
func (m *MDT) loadEpoch() error {
	var e uint32
	if v, closer, err := m.db.Get(keyEpoch); err == nil {
		if len(v) == 4 {
			e = binary.BigEndian.Uint32(v)
		}
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	m.epoch = e + 1
	b := m.db.NewBatch()
	b.Set(keyEpoch, binary.BigEndian.AppendUint32(nil, m.epoch), nil)
	return m.write(b, pebble.Sync)
}
