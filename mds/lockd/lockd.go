// Package lockd is an MDT's lock server: it serves the lock methods,
// calls holders back, waits for their answers, evicts clients that do
// not answer, and takes the server's own locks for changes. What
// conflicts and what is granted is decided by package ldlm; this package
// does the waiting and the talking. Locks live in memory only, as
// Lustre's do: after a restart clients replay them (Replay) during the
// MDT's recovery window.
package lockd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/ldlm"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// DefaultTimeout is how long a holder may take to answer a callback
// (flush what the lock covers and give it up) before it is evicted.
const DefaultTimeout = 30 * time.Second

// EvictedFor is how long an evicted client's requests are refused: long
// past any it sent before it learnt of the eviction. It comes back as a
// new client (a new UUID) at once.
const EvictedFor = 10 * time.Minute

// ErrEvicted is what an evicted client's requests get: ENOTCONN, which
// the client takes as "reconnect as a new client".
var ErrEvicted = syscall.ENOTCONN

// Caller calls clients back (rpc.Server.CallbackAnd): onReply runs as
// the reply is read, before the client's later requests.
type Caller interface {
	CallbackAnd(ctx context.Context, client string, method uint16, req, resp any, onReply func(error)) error
}

// Store is what the lock server needs of its MDT.
type Store interface {
	// Attr returns fid's attributes, for a grant's reply.
	Attr(fid proto.FID) (proto.Attr, error)
	// Merge applies a writer's LVB to fid: its size and mtime only grow.
	Merge(fid proto.FID, lvb proto.LVB) error
	// Register records a client that holds data locks, so that a restart
	// waits for it to replay them.
	Register(client, name string) error
	// Evicted is told of each client the server evicts.
	Evicted(client string)
}

// Config configures a lock server.
type Config struct {
	Name    string        // for logs: "mdt0"
	Timeout time.Duration // callback answer bound (DefaultTimeout)
}

// Service is one MDT's lock server.
type Service struct {
	cfg   Config
	cb    Caller
	store Store
	// Recovering reports whether the MDT's recovery window is open: lock
	// replays are taken only then.
	Recovering func() bool

	mu      sync.Mutex
	ns      *ldlm.Namespace
	waiters map[ldlm.ID]chan struct{} // closed when granted or withdrawn
	cookies map[cookie]ldlm.ID        // enqueues already granted, for resends
	byID    map[ldlm.ID]cookie
	evicted map[string]time.Time
	fl      flockState // application locks (flock.go)
	// merged counts the writers' sizes merged as their locks went
	// (cancel, under mu): a reader of a file's attributes that saw it
	// move past what it held when it read them reads them again
	// (Glimpse). Atomic: every getattr takes a mark.
	merged atomic.Uint64

	ctr Counters
}

type cookie struct {
	client string
	c      uint64
}

// Counters are the lock server's statistics.
type Counters struct {
	Granted, Cancelled, Callbacks, Glimpses, Evictions, Replayed, ReplayRefused, Waits atomic.Int64
	CallbackNanos, CallbackMaxNanos                                                    atomic.Int64
}

// New returns a lock server that calls clients back through cb.
func New(cfg Config, cb Caller, store Store) *Service {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	s := &Service{cfg: cfg, cb: cb, store: store, Recovering: func() bool { return false },
		ns: ldlm.New(ldlm.ID(time.Now().UnixNano())), waiters: map[ldlm.ID]chan struct{}{}, cookies: map[cookie]ldlm.ID{},
		byID: map[ldlm.ID]cookie{}, evicted: map[string]time.Time{}}
	s.fl.init()
	return s
}

func (s *Service) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: "+format, append([]any{s.cfg.Name}, args...)...)
}

// IsEvicted reports whether client's requests are to be refused.
func (s *Service) IsEvicted(client string) bool {
	if client == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.evicted[client]
	if ok && time.Since(t) > EvictedFor {
		delete(s.evicted, client)
		return false
	}
	return ok
}

func toRequest(client string, d proto.LockDesc, align uint64) (ldlm.Request, error) {
	r := ldlm.Request{Res: d.Res, Client: client, Kind: ldlm.Kind(d.Kind), Mode: ldlm.Mode(d.Mode), Bits: ldlm.Bits(d.Bits),
		Start: d.Start, End: d.End, Align: align}
	if r.Kind == ldlm.KindBits || (r.Mode != ldlm.PR && r.Mode != ldlm.PW) {
		// Clients take metadata locks only with their replies (Try).
		return r, fmt.Errorf("%w: clients enqueue data locks in PR or PW", ldlm.ErrInvalid)
	}
	return r, nil
}

func desc(l *ldlm.Lock) proto.LockDesc {
	return proto.LockDesc{ID: uint64(l.ID), Res: l.Res, Kind: uint8(l.Kind), Mode: uint8(l.Mode), Bits: uint8(l.Bits), Start: l.Start, End: l.End}
}

// Enqueue serves MLockEnqueue: it waits until the lock is granted (the
// holders of conflicting locks called back meanwhile), or ctx ends, which
// withdraws the request.
func (s *Service) Enqueue(ctx context.Context, client, name string, r *proto.LockEnqueueReq) (*proto.LockEnqueueReply, error) {
	if client == "" {
		return nil, s.errorf("lock enqueue without a client identity: %w", syscall.EPROTO)
	}
	req, err := toRequest(client, r.Lock, r.Align)
	if err != nil {
		return nil, s.errorf("lock enqueue: %v: %w", err, syscall.EINVAL)
	}
	if r.Align > 1<<40 {
		return nil, s.errorf("lock enqueue: alignment %d: %w", r.Align, syscall.EINVAL)
	}
	if s.IsEvicted(client) {
		return nil, s.errorf("lock enqueue from evicted client %s: %w", client, ErrEvicted)
	}
	// A data lock outlives a restart only if the client replays it, and
	// the restarted MDT waits only for the clients it knows.
	if err := s.store.Register(client, name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if id, ok := s.cookies[cookie{client, r.Cookie}]; ok && r.Cookie != 0 {
		if l := s.ns.Get(id); l != nil && l.Granted {
			s.mu.Unlock()
			return s.grantReply(l)
		}
	}
	l, eff, err := s.ns.Enqueue(req)
	if err != nil {
		s.mu.Unlock()
		return nil, s.errorf("lock enqueue: %v: %w", err, syscall.EINVAL)
	}
	if r.Cookie != 0 {
		s.cookies[cookie{client, r.Cookie}] = l.ID
		s.byID[l.ID] = cookie{client, r.Cookie}
	}
	var wait chan struct{}
	if !l.Granted {
		wait = make(chan struct{})
		s.waiters[l.ID] = wait
		s.ctr.Waits.Add(1)
	} else {
		s.ctr.Granted.Add(1)
	}
	s.mu.Unlock()
	s.effects(eff)
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			s.withdraw(l.ID)
			return nil, s.errorf("lock enqueue on %s: %w", r.Lock.Res, ctx.Err())
		}
		s.mu.Lock()
		held, granted := s.ns.Get(l.ID) != nil, l.Granted
		s.mu.Unlock()
		// Granted and gone again without an eviction: the client answered
		// the lock's callback before this reply reached it, and refuses
		// the grant it gave back (it asks again).
		if !granted || !held && s.IsEvicted(client) {
			return nil, s.errorf("lock enqueue on %s: evicted while waiting: %w", r.Lock.Res, ErrEvicted)
		}
	}
	return s.grantReply(l)
}

func (s *Service) grantReply(l *ldlm.Lock) (*proto.LockEnqueueReply, error) {
	a, err := s.store.Attr(l.Res)
	if err != nil {
		s.cancel(l.ID, proto.LVB{})
		return nil, err
	}
	s.mu.Lock()
	d := desc(l)
	s.mu.Unlock()
	return &proto.LockEnqueueReply{Lock: d, Attr: a}, nil
}

// withdraw drops a request whose asker gave up; granted meanwhile, it is
// cancelled (the asker never learns of it).
func (s *Service) withdraw(id ldlm.ID) { s.cancel(id, proto.LVB{}) }

// cancel drops lock id, merging its LVB first so that the waiters it
// unblocks see the size it reported.
func (s *Service) cancel(id ldlm.ID, lvb proto.LVB) {
	s.mu.Lock()
	l := s.ns.Get(id)
	s.mu.Unlock()
	if l == nil {
		return
	}
	merge := lvb.Valid && l.Kind == ldlm.KindExtent && l.Mode == ldlm.PW
	if merge {
		if err := s.store.Merge(l.Res, lvb); err != nil {
			slog.Error(fmt.Sprintf("%s: size %d reported by %s for %s on cancel: %v", s.cfg.Name, lvb.Size, l.Client, l.Res, err),
				"server", s.cfg.Name, "client", l.Client, "fid", l.Res.String())
		}
	}
	s.mu.Lock()
	if merge {
		s.merged.Add(1) // before the lock goes: a glimpse finds one or the other
	}
	if s.ns.Get(id) == nil {
		s.mu.Unlock()
		return
	}
	eff := s.ns.Cancel(id)
	s.forgetLocked(id)
	s.ctr.Cancelled.Add(1)
	s.mu.Unlock()
	s.effects(eff)
}

func (s *Service) forgetLocked(id ldlm.ID) {
	if w := s.waiters[id]; w != nil {
		close(w)
		delete(s.waiters, id)
	}
	if c, ok := s.byID[id]; ok {
		delete(s.cookies, c)
		delete(s.byID, id)
	}
}

// effects wakes the waiters a step granted and calls back the holders it
// asked for.
func (s *Service) effects(e ldlm.Effects) {
	if len(e.Granted) > 0 {
		s.mu.Lock()
		for _, l := range e.Granted {
			if w := s.waiters[l.ID]; w != nil {
				close(w)
				delete(s.waiters, l.ID)
			}
			s.ctr.Granted.Add(1)
		}
		s.mu.Unlock()
	}
	for _, l := range e.Callbacks {
		go s.callBack(l.ID, l.Client, l.Res)
	}
}

// callBack asks client to give lock id up, and evicts it if it neither
// answers nor reconnects to answer within the timeout.
func (s *Service) callBack(id ldlm.ID, client string, res proto.FID) {
	s.ctr.Callbacks.Add(1)
	start := time.Now()
	var resp proto.BlockingReply
	// The cancel and the size it reports take effect as the answer is
	// read: a stat the client sends after answering sees that size.
	err := s.call(client, proto.CBBlocking, &proto.BlockingReq{ID: uint64(id), Res: res}, &resp, func(err error) {
		if err == nil || errors.Is(err, syscall.ENOENT) {
			s.cancel(id, resp.LVB)
		}
	})
	took := time.Since(start)
	s.ctr.CallbackNanos.Add(int64(took))
	for {
		m := s.ctr.CallbackMaxNanos.Load()
		if int64(took) <= m || s.ctr.CallbackMaxNanos.CompareAndSwap(m, int64(took)) {
			break
		}
	}
	switch {
	case err == nil, errors.Is(err, syscall.ENOENT):
		// Cancelled as the answer was read. ENOENT: the client no longer
		// holds it (its own cancel crossed ours, or it dropped it when it
		// lost its caches).
	default:
		s.mu.Lock()
		gone := s.ns.Get(id) == nil
		s.mu.Unlock()
		if gone {
			return // cancelled some other way meanwhile
		}
		s.Evict(client, fmt.Sprintf("no answer to the callback for lock %d on %s in %v: %v", id, res, took.Round(time.Millisecond), err))
	}
}

// call makes a callback, waiting out a client between connections until
// the timeout.
func (s *Service) call(client string, method uint16, req, resp any, onReply func(error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	// Short waits: a conflicting enqueue waits on this callback.
	wait := rpc.NewBackoff(50*time.Millisecond, 200*time.Millisecond)
	for {
		err := s.cb.CallbackAnd(ctx, client, method, req, resp, onReply)
		if !errors.Is(err, rpc.ErrNoConnection) && !errors.Is(err, rpc.ErrDisconnected) {
			return err
		}
		if wait.Wait(ctx) != nil {
			return err
		}
	}
}

// Cancel serves MLockCancel: a client gives locks back (unused ones it
// drops early, Lustre's LRU cancels), with their LVBs.
func (s *Service) Cancel(client string, r *proto.LockCancelReq) error {
	if len(r.IDs) > 4096 || (len(r.LVBs) != 0 && len(r.LVBs) != len(r.IDs)) {
		return s.errorf("lock cancel of %d locks with %d LVBs: %w", len(r.IDs), len(r.LVBs), syscall.EINVAL)
	}
	for i, id := range r.IDs {
		s.mu.Lock()
		l := s.ns.Get(ldlm.ID(id))
		mine := l != nil && l.Client == client && !l.Server
		s.mu.Unlock()
		if !mine {
			continue // not (or no longer) this client's: nothing to do
		}
		var lvb proto.LVB
		if len(r.LVBs) > 0 {
			lvb = r.LVBs[i]
		}
		s.cancel(ldlm.ID(id), lvb)
	}
	return nil
}

// Downgrade turns client's PW data lock id on res into PR (ldlm's
// Downgrade): false if it is not such a lock of client's, or is being
// called back; true for one that is PR already (a resent close). The
// caller has the writes the lock covered applied and their size merged:
// once it is PR, other clients read without asking the holder.
func (s *Service) Downgrade(client string, res proto.FID, id uint64) bool {
	s.mu.Lock()
	l := s.ns.Get(ldlm.ID(id))
	if l == nil || l.Client != client || l.Server || l.Res != res {
		s.mu.Unlock()
		return false
	}
	eff, ok := s.ns.Downgrade(ldlm.ID(id))
	s.mu.Unlock()
	s.effects(eff)
	return ok
}

// TryBits grants client a metadata lock on res if nothing conflicts
// (an intent lock riding on a reply); zero if not. fresh says the lock is
// new, not one the client held already.
func (s *Service) TryBits(client string, res proto.FID, bits uint8) (g proto.LockGrant, fresh bool) {
	if client == "" || bits == 0 || s.IsEvicted(client) {
		return proto.LockGrant{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.ns.LastID()
	l, _, err := s.ns.Enqueue(ldlm.Request{Res: res, Client: client, Kind: ldlm.KindBits, Mode: ldlm.PR, Bits: ldlm.Bits(bits) & ldlm.AllBits, Try: true})
	if err != nil || l == nil {
		return proto.LockGrant{}, false
	}
	fresh = l.ID > last
	if fresh {
		s.ctr.Granted.Add(1)
	}
	return proto.LockGrant{ID: uint64(l.ID), Bits: uint8(l.Bits)}, fresh
}

// TryWrite grants client the write lock of all of res if nothing
// conflicts: a create that opens a new file for writing takes it with its
// reply (no other client can hold one yet), so the first write needs no
// enqueue. The zero desc if not.
func (s *Service) TryWrite(client, name string, res proto.FID) proto.LockDesc {
	return s.tryWhole(client, name, res, ldlm.PW)
}

// TryRead is TryWrite's read lock: an open that carries a small file's
// data (Data-on-MDT read-on-open) grants it with the data, which stays
// the client's to read until a writer calls the lock back.
func (s *Service) TryRead(client, name string, res proto.FID) proto.LockDesc {
	return s.tryWhole(client, name, res, ldlm.PR)
}

func (s *Service) tryWhole(client, name string, res proto.FID, mode ldlm.Mode) proto.LockDesc {
	if client == "" || s.IsEvicted(client) {
		return proto.LockDesc{}
	}
	if err := s.store.Register(client, name); err != nil {
		return proto.LockDesc{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, _, err := s.ns.Enqueue(ldlm.Request{Res: res, Client: client, Kind: ldlm.KindExtent, Mode: mode, End: proto.LockEOF, Try: true})
	if err != nil || l == nil || !l.Granted {
		return proto.LockDesc{}
	}
	s.ctr.Granted.Add(1)
	return desc(l)
}

// Withdraw takes back a lock just granted with a reply that turned out
// stale (the entry it guards changed before the grant).
func (s *Service) Withdraw(id uint64) { s.cancel(ldlm.ID(id), proto.LVB{}) }

// Change takes the server's locks for a change made on client's behalf:
// EX on bits of each FID, after every other client's conflicting
// metadata locks have been called back. FIDs are taken in order, so two
// changes never wait for each other. The returned release must be called
// once the change is made (applied; it need not be durable).
func (s *Service) Change(ctx context.Context, client string, bits uint8, fids ...proto.FID) (release func(), err error) {
	fids = slices.Clone(fids)
	slices.SortFunc(fids, func(a, b proto.FID) int {
		ka, kb := a.Key(), b.Key()
		return slices.Compare(ka[:], kb[:])
	})
	fids = slices.Compact(fids)
	var held []ldlm.ID
	release = func() {
		for _, id := range held {
			s.cancel(id, proto.LVB{})
		}
	}
	if client == "" {
		client = "(server)"
	}
	for _, fid := range fids {
		if fid.IsZero() {
			continue
		}
		s.mu.Lock()
		l, eff, err := s.ns.Enqueue(ldlm.Request{Res: fid, Client: client, Kind: ldlm.KindBits, Mode: ldlm.EX, Bits: ldlm.Bits(bits), Server: true})
		if err != nil {
			s.mu.Unlock()
			release()
			return nil, s.errorf("change lock on %s: %v: %w", fid, err, syscall.EINVAL)
		}
		held = append(held, l.ID)
		var wait chan struct{}
		if !l.Granted {
			wait = make(chan struct{})
			s.waiters[l.ID] = wait
		}
		s.mu.Unlock()
		s.effects(eff)
		if wait != nil {
			select {
			case <-wait:
			case <-ctx.Done():
				release()
				return nil, s.errorf("change lock on %s: %w", fid, ctx.Err())
			}
		}
	}
	return release, nil
}

// Merged is a mark for Glimpse, taken before a file's attributes are
// read.
func (s *Service) Merged() uint64 { return s.merged.Load() }

// Glimpse asks the clients other than except that hold write locks on
// fid for the size and mtime their caches hold, and merges them into a:
// what a stat must show of writes that have returned elsewhere. a was
// read at mark (Merged). It reports whether a must be read again: it
// asked someone (a size report may have landed between the read and the
// answer), or a writer's size was merged as its lock went since mark
// (the lock may be gone now, and its size landed after the read).
func (s *Service) Glimpse(fid proto.FID, except string, a *proto.Attr, mark uint64) bool {
	s.mu.Lock()
	moved := s.merged.Load() != mark
	ws := s.ns.Granted(fid, func(l *ldlm.Lock) bool {
		return l.Kind == ldlm.KindExtent && l.Mode == ldlm.PW && l.Client != except
	})
	type target struct {
		id     ldlm.ID
		client string
	}
	var ts []target
	seen := map[string]bool{}
	for _, l := range ws {
		if !seen[l.Client] {
			seen[l.Client] = true
			ts = append(ts, target{l.ID, l.Client})
		}
	}
	s.mu.Unlock()
	if len(ts) == 0 {
		return moved
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, t := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.ctr.Glimpses.Add(1)
			var resp proto.GlimpseReply
			err := s.call(t.client, proto.CBGlimpse, &proto.GlimpseReq{ID: uint64(t.id), Res: fid}, &resp, nil)
			if err != nil {
				if !errors.Is(err, syscall.ENOENT) {
					s.Evict(t.client, fmt.Sprintf("no answer to a glimpse of %s: %v", fid, err))
				}
				return
			}
			if resp.LVB.Valid {
				mu.Lock()
				a.Size = max(a.Size, resp.LVB.Size)
				a.Mtime = max(a.Mtime, resp.LVB.Mtime)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return true
}

// Replay serves MLockReplay: the locks a client held before the MDT
// restarted. They are taken only while the recovery window is open; a
// refused lock must be dropped, with what it cached.
func (s *Service) Replay(client string, r *proto.LockReplayReq) (*proto.LockReplayReply, error) {
	if len(r.Locks) > 1<<20 {
		return nil, s.errorf("lock replay of %d locks: %w", len(r.Locks), syscall.EINVAL)
	}
	out := &proto.LockReplayReply{OK: make([]bool, len(r.Locks))}
	if client == "" || s.IsEvicted(client) {
		return out, nil
	}
	open := s.Recovering()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, d := range r.Locks {
		if !open {
			s.ctr.ReplayRefused.Add(1)
			continue
		}
		_, err := s.ns.Replay(ldlm.Lock{ID: ldlm.ID(d.ID), Res: d.Res, Client: client, Kind: ldlm.Kind(d.Kind), Mode: ldlm.Mode(d.Mode),
			Bits: ldlm.Bits(d.Bits), Start: d.Start, End: d.End})
		if err != nil {
			s.ctr.ReplayRefused.Add(1)
			continue
		}
		out.OK[i] = true
		s.ctr.Replayed.Add(1)
	}
	return out, nil
}

// Evict drops every lock of client and refuses its requests until it
// comes back as a new client: what it cached is lost to it, and the
// requests that waited for it go ahead.
func (s *Service) Evict(client, why string) {
	s.mu.Lock()
	if _, done := s.evicted[client]; done {
		s.mu.Unlock()
		return
	}
	s.evicted[client] = time.Now()
	s.ctr.Evictions.Add(1)
	s.mu.Unlock()
	slog.Warn(fmt.Sprintf("%s: evicted client %s: %s", s.cfg.Name, client, why), "server", s.cfg.Name, "client", client)
	// The store forgets the client before anyone its locks held back
	// goes ahead: whoever is granted next sees it evicted everywhere.
	s.store.Evicted(client)
	s.mu.Lock()
	eff := s.dropLocked(client)
	s.mu.Unlock()
	s.effects(eff)
}

// DropBits drops client's metadata locks on res, without calling it back:
// the inode left the namespace by a change client made, and the client
// drops them on its side when the change's reply says so.
func (s *Service) DropBits(client string, res proto.FID) {
	s.drop(res, func(l *ldlm.Lock) bool { return l.Client == client && l.Kind == ldlm.KindBits && !l.Server })
}

// DropAll drops all of client's locks on res, data locks too, without
// calling it back: the file was destroyed by a change client made (no
// name, no open left), and the client drops them on its side when the
// change's reply says so. Without it every file a client creates and
// removes leaves it a data lock until its LRU gives it back.
func (s *Service) DropAll(client string, res proto.FID) {
	s.drop(res, func(l *ldlm.Lock) bool { return l.Client == client && !l.Server })
}

func (s *Service) drop(res proto.FID, which func(*ldlm.Lock) bool) {
	s.mu.Lock()
	ls := s.ns.Granted(res, which)
	var eff ldlm.Effects
	for _, l := range ls {
		e := s.ns.Cancel(l.ID)
		eff.Callbacks = append(eff.Callbacks, e.Callbacks...)
		eff.Granted = append(eff.Granted, e.Granted...)
		s.forgetLocked(l.ID)
		s.ctr.Cancelled.Add(1)
	}
	s.mu.Unlock()
	s.effects(eff)
}

// Forget drops every lock of a client that left for good (a clean
// unmount, or one gone so long it was taken for dead).
func (s *Service) Forget(client string) {
	s.mu.Lock()
	eff := s.dropLocked(client)
	s.mu.Unlock()
	s.effects(eff)
}

func (s *Service) dropLocked(client string) ldlm.Effects {
	s.dropFlocksLocked(client)
	if t := s.fl.away[client]; t != nil {
		t.Stop()
		delete(s.fl.away, client)
	}
	ids := s.ns.ClientLocks(client)
	eff := s.ns.Evict(client)
	for _, id := range ids {
		s.forgetLocked(id)
	}
	return eff
}

// Counters reports the lock server's statistics for stripefs stats.
func (s *Service) Counters() []rpc.Counter {
	s.mu.Lock()
	st := s.ns.Stats()
	fs := s.fl.tab.Stats()
	fc := []rpc.Counter{
		{Name: "flocks_held_now", Value: int64(fs.Held)},
		{Name: "flock_waiters_now", Value: int64(fs.Waiting)},
		{Name: "flock_waits", Value: s.fl.waited},
		{Name: "flock_grants_after_wait", Value: s.fl.grantsAfterWait},
		{Name: "flock_deadlocks", Value: s.fl.deadlocks},
	}
	s.mu.Unlock()
	c := &s.ctr
	return append(fc, []rpc.Counter{
		{Name: "ldlm_granted", Value: c.Granted.Load()},
		{Name: "ldlm_cancelled", Value: c.Cancelled.Load()},
		{Name: "ldlm_waits", Value: c.Waits.Load()},
		{Name: "ldlm_callbacks_sent", Value: c.Callbacks.Load()},
		{Name: "ldlm_callback_wait_us_total", Value: c.CallbackNanos.Load() / 1000},
		{Name: "ldlm_callback_wait_us_max", Value: c.CallbackMaxNanos.Load() / 1000},
		{Name: "ldlm_glimpses_sent", Value: c.Glimpses.Load()},
		{Name: "ldlm_evictions", Value: c.Evictions.Load()},
		{Name: "ldlm_replayed", Value: c.Replayed.Load()},
		{Name: "ldlm_replay_refused", Value: c.ReplayRefused.Load()},
		{Name: "ldlm_locks_now", Value: int64(st.Granted)},
		{Name: "ldlm_waiting_now", Value: int64(st.Waiting)},
		{Name: "ldlm_clients_now", Value: int64(st.Clients)},
	}...)
}
