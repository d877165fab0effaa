package mds

// The sweeper: records of cross-MDT operations still held are resolved
// in the background (a coordinator redoes or cancels; a participant asks).

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// sweeper makes distributed operations finish: it drives records this MDT
// coordinates to cancellation once every part is durable, redoes parts a
// crashed participant lost, and asks coordinators about records they may
// have lost. At start it is the recovery.
func (m *MDT) sweeper() {
	defer m.wg.Done()
	t := time.NewTicker(max(2*m.cfg.CommitInterval, 10*time.Millisecond))
	defer t.Stop()
	for {
		m.sweep()
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
	}
}

func (m *MDT) records() []*dtx.Record {
	return m.recordsOf(func(uint32) bool { return true })
}

// recordsOf returns the update records this MDT holds whose coordinator
// is one that want accepts; the others are not decoded.
// recordsOf returns the records held whose coordinator want accepts, in
// order. Which exist comes from the index (iterating over the keys
// walked every cancelled record's tombstone since the last compaction),
// decoded ones too.
func (m *MDT) recordsOf(want func(coord uint32) bool) []*dtx.Record {
	ids := m.recs.ids(want)
	out := make([]*dtx.Record, 0, len(ids))
	for _, id := range ids {
		if rec := m.recs.record(id); rec != nil {
			out = append(out, rec)
			continue
		}
		v, closer, err := m.db.Get(txnKey(id))
		if err != nil {
			continue // cancelled since the index was read
		}
		rec, err := decodeRecord(v)
		closer.Close()
		if err != nil {
			m.logf(slog.LevelWarn, "skipping corrupt update record %s: %v", id, err)
			continue
		}
		m.recs.keep(rec)
		out = append(out, rec)
	}
	return out
}

func (m *MDT) sweep() {
	if m.hooks.syncsHeld() {
		return
	}
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	ctx, stopped := m.untilStop(ctx)
	defer stopped()
	self := uint32(m.cfg.Index)
	// Records held as a participant only matter once TxnAskAfter old:
	// they are read a few times in that span, not at every sweep. The
	// first sweep reads them all: at start it is the recovery.
	if time.Since(m.lastAsk) >= m.cfg.TxnAskAfter/4 {
		m.lastAsk = time.Now()
		for _, r := range m.recordsOf(func(coord uint32) bool { return coord != self }) {
			m.askCoordinator(ctx, r)
		}
	}
	// Records this MDT coordinates, in order: status of every part.
	mine := m.recordsOf(func(coord uint32) bool { return coord == self })
	if len(mine) == 0 {
		return
	}
	slices.SortFunc(mine, func(a, b *dtx.Record) int {
		if a.ID.Less(b.ID) {
			return -1
		}
		return 1
	})
	if err := m.Sync(); err != nil {
		return
	}
	durable := map[uint32][]bool{self: nil}
	for _, p := range dtx.ParticipantsOf(mine) {
		if p == self {
			continue
		}
		ids := make([]proto.TxnID, len(mine))
		for i, r := range mine {
			ids[i] = toWire(r.ID)
		}
		c, err := m.peer(ctx, p)
		if err != nil {
			return
		}
		st, err := rpc.Invoke[proto.TxnStatusReply](ctx, c, proto.MTxnStatus, &proto.TxnStatusReq{IDs: ids, Sync: true})
		if err != nil || len(st.Applied) != len(ids) {
			return // a participant is away: try again later, in order
		}
		durable[p] = st.Applied
	}
	// Every lost part is redone at once (after a participant's crash
	// there are many: one redo per sweep left a namespace dangling for
	// seconds); a part lost a moment ago most likely has its push still
	// on the way.
	plan := dtx.PlanSweep(self, mine, durable, func(r *dtx.Record) bool {
		return time.Since(time.Unix(0, r.Started)) < 5*m.cfg.CommitInterval || m.pushesHeld()
	})
	for _, rd := range plan.Redo {
		for _, p := range rd.To {
			if c, err := m.peer(ctx, p); err == nil {
				_, _ = rpc.Invoke[proto.Empty](ctx, c, proto.MTxnRedo, &proto.TxnRedoReq{RecordBytes: rd.Rec.Marshal()})
			}
		}
	}
	if len(plan.Cancel) == 0 {
		return
	}
	for p, ids := range plan.CancelAt {
		c, err := m.peer(ctx, p)
		if err != nil {
			return
		}
		if _, err := rpc.Invoke[proto.Empty](ctx, c, proto.MTxnCancel, &proto.TxnCancelReq{IDs: wireIDs(ids)}); err != nil {
			return
		}
	}
	cancel := wireIDs(plan.Cancel)
	m.mu.Lock()
	b := m.db.NewBatch()
	m.cancelInBatch(b, cancel)
	err := m.commit(b, false)
	m.mu.Unlock()
	if err == nil {
		m.ctr.dtxCancelled.Add(int64(len(cancel)))
	}
}

// askCoordinator handles a record this MDT holds as a participant: if the
// coordinator lost its part in a crash, it is redone there (roll
// forward); the coordinator then drives the cancel.
func (m *MDT) askCoordinator(ctx context.Context, r *dtx.Record) {
	if time.Since(time.Unix(0, r.Started)) < m.cfg.TxnAskAfter {
		return // the coordinator is most likely still at it
	}
	c, err := m.peer(ctx, r.ID.Coord)
	if err != nil {
		return
	}
	st, err := rpc.Invoke[proto.TxnStatusReply](ctx, c, proto.MTxnStatus, &proto.TxnStatusReq{IDs: []proto.TxnID{toWire(r.ID)}})
	if err != nil || len(st.Applied) != 1 || len(st.Cancelled) != 1 {
		return
	}
	switch {
	case st.Cancelled[0]:
		// The coordinator finished it, and we lost its cancel in a crash.
		m.mu.Lock()
		b := m.db.NewBatch()
		m.cancelInBatch(b, []proto.TxnID{toWire(r.ID)})
		_ = m.commit(b, false)
		m.mu.Unlock()
	case !st.Applied[0]:
		_, _ = rpc.Invoke[proto.Empty](ctx, c, proto.MTxnRedo, &proto.TxnRedoReq{RecordBytes: r.Marshal()})
	}
}

// wireIDs is ids as the wire carries them.
func wireIDs(ids []dtx.OpID) []proto.TxnID {
	out := make([]proto.TxnID, len(ids))
	for i, id := range ids {
		out[i] = toWire(id)
	}
	return out
}
