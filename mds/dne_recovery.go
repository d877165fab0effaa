package mds

// Start-up recovery of the distributed namespace: the operations the
// other MDTs hold records of are redone here before clients are served.

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// recoverFromPeers runs once at start: it gathers the records other MDTs
// hold in which this MDT takes part and redoes the parts this MDT lost, in
// operation order, before clients are served (their replays come after
// the update logs, as in Lustre's recovery). Peers that stay away longer
// than the recovery window are left to the sweepers.
func (m *MDT) recoverFromPeers() {
	if m.epoch <= 1 {
		return // a new MDT has nothing to recover
	}
	deadline := time.Now().Add(m.cfg.RecoveryWindow)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	ctx, cancelStop := m.untilStop(ctx)
	defer cancelStop()
	self := uint32(m.cfg.Index)
	var recs []*dtx.Record
	n := m.numMDTs(ctx)
	for p := 0; p < n; p++ {
		if uint32(p) == self {
			continue
		}
		wait := rpc.NewBackoff(100*time.Millisecond, time.Second)
		for ctx.Err() == nil {
			c, err := m.peer(ctx, uint32(p))
			if err == nil {
				var r *proto.TxnListReply
				if r, err = rpc.Invoke[proto.TxnListReply](ctx, c, proto.MTxnList, &proto.TxnListReq{MDT: self}); err == nil {
					for _, b := range r.Records {
						if rec, err := decodeRecord(b); err == nil {
							recs = append(recs, rec)
						}
					}
					break
				}
			}
			_ = wait.Wait(ctx)
		}
	}
	slices.SortFunc(recs, func(a, b *dtx.Record) int {
		if a.ID.Less(b.ID) {
			return -1
		}
		return 1
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rec := range recs {
		if m.applied(rec.ID) {
			continue
		}
		b := m.db.NewBatch()
		if _, err := m.applyPart(b, rec, nil, true, false); err != nil {
			m.discard(b)
			m.logf(slog.LevelWarn, "recovery: %s %s: %v", rec.Op, rec.ID, err)
			continue
		}
		if err := m.commit(b, true); err != nil {
			m.logf(slog.LevelWarn, "recovery: %s %s: %v", rec.Op, rec.ID, err)
			continue
		}
		m.ctr.dtxRedone.Add(1)
		m.ctr.dtxPending.Add(1)
		m.logf(slog.LevelInfo, "recovery: redid my part of %s %s from a peer's log", rec.Op, rec.ID)
	}
}

// peerMethods are what servers call on an MDT (the update-log protocol,
// FID reservations, stripe freezes, the MGS) and the tools' stats and
// tunables: recovery gates and the pull of records that clients' requests
// may need never hold or wrap them, since peers recover too.
var peerMethods = map[uint16]bool{proto.MTxnApply: true, proto.MTxnApplyBatch: true, proto.MTxnStatus: true, proto.MTxnRedo: true,
	proto.MTxnCancel: true, proto.MTxnList: true, proto.MTxnPull: true, proto.MReserveFIDs: true,
	proto.MStripeFreeze: true, proto.MSetParam: true, proto.GConfig: true, proto.GRegister: true,
	rpc.MethodStats: true, proto.MLockRevoke: true}

// wrapMethods wraps the handler of every registered method not in skip.
func (m *MDT) wrapMethods(skip map[uint16]bool, wrap func(rpc.Handler) rpc.Handler) {
	for method := uint16(1); method < 256; method++ {
		if skip[method] {
			continue
		}
		m.Srv.Wrap(method, func(next rpc.Handler) rpc.Handler {
			if next == nil {
				return nil
			}
			return wrap(next)
		})
	}
}

// gateRecovery holds client requests until recovery is over (or its
// window has passed); requests between MDTs pass, since peers recover too.
func (m *MDT) gateRecovery() {
	m.wrapMethods(peerMethods, func(next rpc.Handler) rpc.Handler {
		return func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
			select {
			case <-m.recovered:
			case <-ctx.Done():
				return rpc.Reply{}, ctx.Err()
			}
			return next(ctx, r)
		}
	})
}
