package mds

// The peer methods of the distributed namespace (txn_*), which other MDTs
// call, and set_param.

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"syscall"

	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

func (m *MDT) registerDNE() {
	rpc.HandleFunc(m.Srv, proto.MTxnApply, m.txnApply)
	rpc.HandleFunc(m.Srv, proto.MTxnApplyBatch, m.txnApplyBatch)
	rpc.HandleFunc(m.Srv, proto.MTxnStatus, m.txnStatus)
	rpc.HandleFunc(m.Srv, proto.MTxnRedo, m.txnRedo)
	rpc.HandleFunc(m.Srv, proto.MTxnCancel, m.txnCancel)
	rpc.HandleFunc(m.Srv, proto.MSetParam, m.setParam)
	rpc.HandleFunc(m.Srv, proto.MTxnList, m.txnList)
	m.Srv.Counters = func() []rpc.Counter {
		rs := int64(0)
		if m.remoteSync.Load() {
			rs = 1
		}
		return []rpc.Counter{
			{Name: "remote_sync", Value: rs},
			{Name: "remote_sync_commits", Value: m.ctr.remoteSyncCommits.Load()},
			{Name: "dtx_started", Value: m.ctr.dtxStarted.Load()},
			{Name: "dtx_redone", Value: m.ctr.dtxRedone.Load()},
			{Name: "dtx_cancelled", Value: m.ctr.dtxCancelled.Load()},
			{Name: "enospc_reserve", Value: m.space.refused.Load()},
			{Name: "disk_at_reserve_now", Value: b2i(m.space.atReserve())},
			{Name: "store_failed_now", Value: b2i(m.guard.Err() != nil)},
			{Name: "dtx_pending", Value: m.ctr.dtxPending.Load()},
			{Name: "dtx_dependency_syncs", Value: m.ctr.dtxDepSyncs.Load()},
			{Name: "inodes", Value: m.inodes.Load()},
			{Name: "resends_reconstructed", Value: m.ctr.resends.Load()},
			{Name: "mkdir_remote_async", Value: m.grants.async.Load()},
			{Name: "fid_grants_given", Value: m.grants.given.Load()},
			{Name: "txn_pulls", Value: m.grants.pulls.Load()},
		}
	}
}

// txnApply is a participant's half of a distributed operation. With a
// check (rmdir, rename, link, unlink) its part is applied strictly: see
// applyPart.
func (m *MDT) txnApply(ctx context.Context, r *proto.TxnApplyReq) (any, error) {
	rec, err := decodeRecord(r.RecordBytes)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	reply, err := m.applyRecordLocked(rec, r.RecordBytes, r.Check)
	if err != nil {
		return nil, err
	}
	// The coordinator takes the record back as this MDT completed it
	// (the FIDs it allocated, the types it knows).
	if reply.RecordBytes == nil {
		reply.RecordBytes = rec.Marshal()
	}
	return reply, nil
}

// txnApplyBatch is txnApply for the records a coordinator pushes in the
// background (mkdir_async.go), in their order. A record that fails is
// logged and left to the coordinator's sweeper, which redoes it. Each
// record's part is built in a batch of its own, so one that fails leaves
// nothing, and the push is committed once: a Pebble commit per record
// was a third of the participant's work in a remote mkdir storm.
func (m *MDT) txnApplyBatch(ctx context.Context, r *proto.TxnApplyBatchReq) (any, error) {
	if len(r.Records) > maxPushBatch {
		return nil, fmt.Errorf("mdt%d: txn_apply_batch of %d records: %w", m.cfg.Index, len(r.Records), syscall.EINVAL)
	}
	recs := make([]*dtx.Record, len(r.Records))
	for i, b := range r.Records {
		rec, err := decodeRecord(b)
		if err != nil {
			return nil, err
		}
		recs[i] = rec
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	all := m.db.NewBatchWithSize(len(r.Records) * 1024)
	seen := make(map[dtx.OpID]bool, len(recs)) // not in the index before the commit
	n := 0
	for i, rec := range recs {
		if seen[rec.ID] {
			continue
		}
		seen[rec.ID] = true
		b := m.db.NewBatch()
		if _, err := m.applyRecordTo(b, rec, r.Records[i], ""); err != nil {
			m.logf(slog.LevelWarn, "%s %s pushed by mdt%d: %v (its sweeper redoes it)", rec.Op, rec.ID, rec.ID.Coord, err)
			continue
		}
		if b.Empty() {
			b.Close() // applied before
			continue
		}
		if err := all.Apply(b, nil); err != nil {
			m.discard(b)
			m.discard(all)
			return nil, fmt.Errorf("mdt%d: txn_apply_batch: %v: %w", m.cfg.Index, err, syscall.EIO)
		}
		m.quotaMerge(b, all)
		b.Close()
		n++
	}
	if n == 0 {
		m.discard(all)
		return &proto.Empty{}, nil
	}
	if err := m.commitTxn(all); err != nil {
		return nil, err
	}
	m.ctr.dtxPending.Add(int64(n))
	return &proto.Empty{}, nil
}

func (m *MDT) txnStatus(ctx context.Context, r *proto.TxnStatusReq) (any, error) {
	if len(r.IDs) > 4096 {
		return nil, fmt.Errorf("mdt%d: txn status of %d ops: %w", m.cfg.Index, len(r.IDs), syscall.EINVAL)
	}
	out := &proto.TxnStatusReply{Applied: make([]bool, len(r.IDs)), Cancelled: make([]bool, len(r.IDs))}
	for i, w := range r.IDs {
		id := fromWire(w)
		has := m.hasRecord(id)
		out.Applied[i] = dtx.Applied(has, m.watermark(id.Coord, id.Epoch), id)
		out.Cancelled[i] = out.Applied[i] && !has
	}
	// The sync comes after the look: a part applied between a sync and
	// the look would be reported durable while it is not, its record
	// cancelled, and a crash here would lose it for good.
	if r.Sync {
		if err := m.Sync(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// txnRedo applies this MDT's part of a record it lost in a crash.
func (m *MDT) txnRedo(ctx context.Context, r *proto.TxnRedoReq) (any, error) {
	rec, err := decodeRecord(r.RecordBytes)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.applied(rec.ID) {
		return &proto.Empty{}, nil
	}
	if _, busy := m.running[rec.ID]; busy {
		// A participant holds its part before we commit ours: that is the
		// normal order, not a lost part. If we fail, a later ask redoes it.
		return nil, fmt.Errorf("mdt%d: redo %s: still running here: %w", m.cfg.Index, rec.ID, syscall.EAGAIN)
	}
	b := m.db.NewBatch()
	if _, err := m.applyPart(b, rec, r.RecordBytes, true, false); err != nil {
		m.discard(b)
		return nil, err
	}
	if err := m.commit(b, true); err != nil {
		return nil, err
	}
	m.ctr.dtxRedone.Add(1)
	m.ctr.dtxPending.Add(1)
	m.logf(slog.LevelInfo, "recovery: redid my part of %s %s", rec.Op, rec.ID)
	return &proto.Empty{}, nil
}

// txnCancel drops records every participant holds durably. Cancels come
// from the coordinator in sequence order, so the watermark stays exact.
func (m *MDT) txnCancel(ctx context.Context, r *proto.TxnCancelReq) (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.db.NewBatch()
	m.cancelInBatch(b, r.IDs)
	return &proto.Empty{}, m.commit(b, false)
}

func (m *MDT) setParam(ctx context.Context, r *proto.SetParamReq) (any, error) {
	switch r.Name {
	case "remote_sync", "mdt.remote_sync":
		v, err := strconv.ParseBool(r.Value)
		if err != nil {
			return nil, fmt.Errorf("mdt%d: remote_sync=%q: %w", m.cfg.Index, r.Value, syscall.EINVAL)
		}
		m.remoteSync.Store(v)
		m.logf(slog.LevelInfo, "remote_sync=%v", v)
		return &proto.Empty{}, nil
	}
	return nil, fmt.Errorf("mdt%d: unknown parameter %q: %w", m.cfg.Index, r.Name, syscall.EINVAL)
}

func (m *MDT) txnList(ctx context.Context, r *proto.TxnListReq) (any, error) {
	out := &proto.TxnListReply{}
	for _, rec := range m.records() {
		if slices.Contains(rec.Participants(), r.MDT) {
			out.Records = append(out.Records, rec.Marshal())
		}
	}
	return out, nil
}
