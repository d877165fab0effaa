package mds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/mds/dtx"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Remote mkdir without a round trip to the new directory's MDT on the
// reply path. The field report's mkdir was slow because of a disk sync;
// with that gone, what still set a remote mkdir behind a local one was
// the participant's RPC: the coordinator needed the FID the participant
// allocated. Here each MDT reserves the others blocks of its FIDs ahead
// of time (fidreserve.go; Lustre's sequence controller grants FID
// sequences for the same reason), so the coordinator names the directory
// itself, commits its own part and the whole record in one batch,
// replies, and pushes the participant its part in the background. The record makes the push
// reliable: the sweeper redoes a part that did not arrive, and recovery
// from peers' logs does after a crash.
//
// A client can reach the new directory's MDT before the push does. That
// MDT knows which coordinator it reserved the FID for, asks it for the
// record (txn_pull), applies its part and answers: the client never sees
// the gap.

const (
	// maxPushBatch bounds the records one push carries: a participant
	// applies them under one lock, after one RPC.
	maxPushBatch = 256
	// pushQueue bounds the records waiting to be pushed to one
	// participant: a coordinator that runs that far ahead of it waits.
	pushQueue = 4096
	// pushLinger is how long a pusher waits for more records after the
	// first: in a storm each push then carries tens of records rather than
	// the one or two that arrived while the last was applied, and the
	// participant's lock, commit and round trip are paid per tens. It is
	// short against how soon a client looks for the new directory on its
	// MDT, and a pull (txnPull) covers the client that is faster still;
	// flushPushes cuts it short for an operation that needs the part.
	pushLinger = 2 * time.Millisecond
)

// grants is an MDT's side of the asynchronous remote mkdir.
type grants struct {
	// out lists the plain FIDs reserved for other MDTs (fidreserve.go),
	// as their records in the database say: a record the coordinator
	// commits after this MDT's restart has read the peers' logs is still
	// pulled when a client asks for its FID first.
	mu  sync.Mutex
	out []fidRange

	pushMu  sync.Mutex
	pushers map[uint32]*pushQ // by participant; each drained by its pusher
	// unpushed holds the records queued for a push by the FID they
	// create, until the push is over: a pull finds its record without
	// going through every record held.
	unpushed map[proto.FID]loggedRec

	async, pulls, given atomic.Int64
}

type fidRange struct {
	coord      uint32
	seq        uint64
	first, end uint32 // [first, end)
}

func (g *grants) init() {
	g.pushers = map[uint32]*pushQ{}
	g.unpushed = map[proto.FID]loggedRec{}
}

// grantee returns the MDT that f was granted to, if it was.
func (g *grants) grantee(f proto.FID) (uint32, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.out {
		if r.seq == f.Seq && f.Oid >= r.first && f.Oid < r.end {
			return r.coord, true
		}
	}
	return 0, false
}

func (m *MDT) registerGrants() {
	m.grants.init()
	if err := m.loadFIDGrants(); err != nil {
		slog.Error(fmt.Sprintf("%v (requests for FIDs granted before the restart cannot pull their records)", err),
			"target", proto.TargetName(proto.KindMDT, uint32(m.cfg.Index)))
	}
	m.registerFIDReserve()
	rpc.HandleFunc(m.Srv, proto.MTxnPull, m.txnPull)
}

// pooledRemoteFID is the FID for a new directory on target that needs no
// RPC: the one a replayed mkdir was given, or one from the pool. m.mu is
// held.
func (m *MDT) pooledRemoteFID(ctx context.Context, target uint32) (proto.FID, bool) {
	if fid, ok := m.replayedFID(ctx, target); ok {
		return fid, true
	}
	return m.pooledFID(target, proto.FIDPlain)
}

// remoteMkdirUnpooled is remoteMkdirAsync when the pool has no FID: a
// block of FIDs is reserved on target first. The name is reserved; m.mu is
// not held.
func (m *MDT) remoteMkdirUnpooled(ctx context.Context, r *proto.MkdirReq, dir *inode, target uint32) (any, error) {
	fid, err := m.takeFID(ctx, target, proto.FIDPlain)
	if err != nil {
		return nil, fmt.Errorf("mdt%d: mkdir %q on mdt%d: %w", m.cfg.Index, r.Name, target, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.remoteMkdirAsync(ctx, r, dir, target, fid, nil) // the parent is read again
}

// remoteMkdirAsync creates a directory with fid on MDT target under a
// parent here and replies before target has it (see the top of this
// file). known are inodes read under this hold of m.mu, which applyPart
// need not read again. m.mu is held.
func (m *MDT) remoteMkdirAsync(ctx context.Context, r *proto.MkdirReq, dir *inode, target uint32, fid proto.FID, known []*inode) (any, error) {
	t := now()
	child := newRemoteDir(r, dir, m.cred(ctx), t)
	child.Attr.FID = fid
	// The operation's sequence is taken in the same critical section as
	// its commit: records then reach the log in sequence order, which the
	// in-order cancel watermarks rely on.
	rec := &dtx.Record{ID: m.nextOpID(), Op: "mkdir", Started: t, Updates: append(make([]dtx.Update, 0, 4), // and noteCaller's
		dtx.Update{Kind: dtx.CreateInode, MDT: target, FID: fid, Inode: child.marshal()},
		dtx.Update{Kind: dtx.InsertDirent, MDT: uint32(m.cfg.Index), Parent: r.Parent, Name: r.Name, FID: fid, Mode: sIFDIR},
		dtx.Update{Kind: dtx.ParentLink, MDT: uint32(m.cfg.Index), Parent: r.Parent, Delta: 1, Time: t},
	)}
	// What our part needs must be durable before a peer holds the
	// record (deps.go): for a parent made a moment ago, the push waits
	// for the next group commit rather than the reply for a sync.
	noteCaller(ctx, rec)
	gen, wait := m.durableAfter(rec)
	p, err := m.commitOwnPart(ctx, rec, known...)
	if err != nil {
		return nil, err
	}
	m.ctr.dtxStarted.Add(1)
	m.grants.async.Add(1)
	m.grants.pushMu.Lock()
	m.grants.unpushed[fid] = loggedRec{rec, p.logged}
	m.grants.pushMu.Unlock()
	m.push(target, pushed{p.logged, fid, gen, wait})
	return &proto.AttrReply{Attr: child.Attr, Parent: dirIn(p.inodes, r.Parent)}, nil
}

// loggedRec is a record and its bytes as its part logged them.
type loggedRec struct {
	rec *dtx.Record
	raw []byte
}

// pushed is a record waiting for its push; with wait, not before the
// WAL sync of generation gen (durableAfter).
type pushed struct {
	raw  []byte    // the record as logged
	fid  proto.FID // the directory it creates
	gen  uint64
	wait bool
}

// pushQ is one participant's queue of parts to push.
type pushQ struct {
	q               chan pushed
	flush           chan struct{} // ends the pusher's linger (flushPushes)
	queued, settled atomic.Uint64 // parts queued; parts whose push is over (sent, or failed and left to the sweeper)
}

func (m *MDT) pushQueue(target uint32) *pushQ {
	g := &m.grants
	g.pushMu.Lock()
	defer g.pushMu.Unlock()
	pq := g.pushers[target]
	if pq == nil {
		pq = &pushQ{q: make(chan pushed, pushQueue), flush: make(chan struct{}, 1)}
		g.pushers[target] = pq
		go m.pusher(target, pq)
	}
	return pq
}

// push queues a participant's part for the background. A failure is only
// logged: the record is in this MDT's log, and the sweeper redoes the part.
func (m *MDT) push(target uint32, p pushed) {
	pq := m.pushQueue(target)
	pq.queued.Add(1)
	select {
	case pq.q <- p:
	case <-m.stop:
	}
}

// flushPushes waits until every part queued for target so far has been
// pushed: a synchronous operation this MDT coordinates with target (an
// rmdir of a directory made a moment ago) must find there what this MDT
// already told its clients exists.
func (m *MDT) flushPushes(ctx context.Context, target uint32) error {
	m.grants.pushMu.Lock()
	pq := m.grants.pushers[target]
	m.grants.pushMu.Unlock()
	if pq == nil {
		return nil
	}
	want := pq.queued.Load()
	for pq.settled.Load() < want {
		select {
		case pq.flush <- struct{}{}:
		default:
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.stop:
			return fmt.Errorf("mdt%d: stopping: %w", m.cfg.Index, syscall.ESHUTDOWN)
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// flushAllPushes is flushPushes for every participant: what this MDT
// has told its clients exists is then in place on every MDT (fsck
// compares them; a sync promises it).
func (m *MDT) flushAllPushes(ctx context.Context) error {
	m.grants.pushMu.Lock()
	targets := make([]uint32, 0, len(m.grants.pushers))
	for t := range m.grants.pushers {
		targets = append(targets, t)
	}
	m.grants.pushMu.Unlock()
	for _, t := range targets {
		if err := m.flushPushes(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// pusher sends the queued parts of one participant, as many as are
// waiting in one RPC: a storm of remote mkdirs costs the participant one
// lock and one round trip per batch, not per directory.
func (m *MDT) pusher(target uint32, pq *pushQ) {
	ctx, cancel := m.untilStop(context.Background())
	defer cancel()
	linger := time.NewTimer(pushLinger)
	linger.Stop()
	for {
		var batch [][]byte
		var fids []proto.FID
		var gen uint64
		wait := false
		add := func(p pushed) {
			batch = append(batch, p.raw)
			fids = append(fids, p.fid)
			if p.wait {
				gen, wait = max(gen, p.gen), true
			}
		}
		select {
		case p := <-pq.q:
			add(p)
		case <-m.stop:
			return
		}
		// The linger does not wait on the queue: a coordinator's send to
		// a pusher parked on it would wake it, a futex call on the
		// reply path of every remote mkdir.
		linger.Reset(pushLinger)
		select {
		case <-linger.C:
		case <-pq.flush:
			linger.Stop()
		case <-m.stop:
			return
		}
	drain:
		for len(batch) < maxPushBatch {
			select {
			case p := <-pq.q:
				add(p)
			default:
				break drain
			}
		}
		if gate := m.hooks.pushGate(); gate != nil {
			select {
			case <-gate:
			case <-m.stop:
				return
			}
		}
		if wait && !m.waitDurable(gen) {
			return
		}
		if err := m.pushBatch(ctx, target, batch); err != nil && ctx.Err() == nil {
			m.logf(slog.LevelWarn, "push of %d parts to mdt%d: %v (the sweeper redoes them)", len(batch), target, err)
		}
		m.grants.pushMu.Lock()
		for _, f := range fids {
			delete(m.grants.unpushed, f)
		}
		m.grants.pushMu.Unlock()
		pq.settled.Add(uint64(len(batch)))
	}
}

// waitDurable waits for the WAL sync that covers generation gen (the
// committer's next group commit); false if the MDT stops first.
func (m *MDT) waitDurable(gen uint64) bool {
	for m.durableGen.Load() <= gen {
		select {
		case <-m.stop:
			return false
		case <-time.After(m.cfg.CommitInterval / 4):
		}
	}
	return true
}

// pushBatch sends one batch, again while the participant restarts.
func (m *MDT) pushBatch(ctx context.Context, target uint32, batch [][]byte) error {
	c, err := m.peer(ctx, target)
	if err != nil {
		return err
	}
	_, err = invokePeer[proto.Empty](ctx, c, proto.MTxnApplyBatch, &proto.TxnApplyBatchReq{Records: batch})
	return err
}

// txnPull answers a participant that was asked about a FID before this
// MDT's push of the record creating it arrived: a client that makes a
// directory and at once a file in it, where the directory's MDT is
// another (a round-robin default layout), comes here every time.
func (m *MDT) txnPull(ctx context.Context, r *proto.TxnPullReq) (any, error) {
	m.grants.pushMu.Lock()
	l, ok := m.grants.unpushed[r.FID]
	m.grants.pushMu.Unlock()
	if !ok {
		l.rec = m.recordCreating(r.FID) // its push failed, or is over
	}
	if l.rec == nil {
		// Restarted and still redoing peers' logs or taking replays: the
		// record may be one a client is about to replay here (this MDT
		// lost it with its unsynced changes). "No record" can only be
		// said after.
		select {
		case <-m.recovered:
		default:
			select {
			case <-m.recovered:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return m.txnPull(ctx, r)
		}
		if m.win.open.Load() {
			if err := m.admit(ctx); err != nil {
				return nil, err
			}
			return m.txnPull(ctx, r)
		}
	}
	if l.rec == nil {
		return &proto.TxnPullReply{}, nil
	}
	if l.raw == nil {
		l.raw = l.rec.Marshal()
	}
	// Only what the record depends on must be durable before another MDT
	// holds it (deps.go): its push would have waited for the group commit
	// that covers it; a pull cannot wait, so it syncs, for a parent made
	// since the last one.
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.needsSync(l.rec) {
		if err := m.syncLocked(); err != nil {
			return nil, err
		}
	}
	return &proto.TxnPullReply{RecordBytes: l.raw}, nil
}

// recordCreating finds, among the records this MDT coordinates, the one
// that creates f.
func (m *MDT) recordCreating(f proto.FID) *dtx.Record {
	for _, rec := range m.recordsOf(func(coord uint32) bool { return coord == uint32(m.cfg.Index) }) {
		for _, u := range rec.Updates {
			if u.Kind == dtx.CreateInode && u.FID == f {
				return rec
			}
		}
	}
	return nil
}

// missingInode is getInode's ENOENT, so that a request that failed for a
// FID granted to a coordinator can fetch the record and try again.
type missingInode struct {
	mdt int
	fid proto.FID
}

func (e *missingInode) Error() string {
	return fmt.Sprintf("mdt%d: inode %s: %v", e.mdt, e.fid, syscall.ENOENT)
}

func (e *missingInode) Unwrap() error { return syscall.ENOENT }

// replayedFID is, for a remote mkdir replayed after this MDT lost it in a
// crash, the FID its first reply gave: the client already uses it (its
// kernel's inode, its next mkdir inside), and target reserved it for this
// MDT alone, so it is still this directory's to take. A new FID would
// leave the client's with no inode (ENOENT) and no record to pull.
func (m *MDT) replayedFID(ctx context.Context, target uint32) (proto.FID, bool) {
	first, ok := firstAttr(ctx)
	f := first.FID
	if !ok || f.IsZero() || f.MDT() != int(target) || kindOf(f) != proto.FIDPlain {
		return proto.FID{}, false
	}
	return f, true
}

// pullOnMiss wraps the client methods: a request that found no inode for
// a FID this MDT granted to a coordinator pulls the record that creates
// it, applies this MDT's part, and runs once more.
func (m *MDT) pullOnMiss() {
	m.wrapMethods(peerMethods, func(next rpc.Handler) rpc.Handler {
		return func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
			rep, err := next(ctx, r)
			var mi *missingInode
			if err == nil || !errors.As(err, &mi) {
				return rep, err
			}
			coord, ok := m.grants.grantee(mi.fid)
			if !ok {
				return rep, err
			}
			if applied, perr := m.pull(ctx, coord, mi.fid); perr != nil || !applied {
				if perr != nil {
					m.logf(slog.LevelWarn, "pull of %s from mdt%d: %v", mi.fid, coord, perr)
				}
				return rep, err
			}
			return next(ctx, r)
		}
	})
}

// pull fetches and applies the record creating f from coordinator coord;
// it reports whether there was one.
func (m *MDT) pull(ctx context.Context, coord uint32, f proto.FID) (bool, error) {
	c, err := m.peer(ctx, coord)
	if err != nil {
		return false, err
	}
	rep, err := invokePeer[proto.TxnPullReply](ctx, c, proto.MTxnPull, &proto.TxnPullReq{FID: f})
	if err != nil || len(rep.RecordBytes) == 0 {
		return false, err
	}
	if _, err := m.txnApply(ctx, &proto.TxnApplyReq{RecordBytes: rep.RecordBytes}); err != nil {
		return false, err
	}
	m.grants.pulls.Add(1)
	return true, nil
}
