package mds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/mds/lockd"
	"github.com/stripefs/stripefs/mds/recovery"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/wire"
)

// The client table and the client recovery window (issue #4; Lustre's
// last_rcvd and target recovery). A client that keeps its changes for
// replay (rpc.FlagKept) is written into the table before its first change
// is made, with a synchronous commit, and each later change updates its
// record in the change's own batch: so after a crash the table names
// every client that might hold changes the MDT answered but lost. A
// restarted MDT waits, for at most the window, until each of them has
// replayed and said so; meanwhile other requests wait, and replays of all
// clients are applied in the order of their old transnos (package
// recovery decides; this file does the I/O). Clients that unmount cleanly
// leave the table, so a restart waits only for clients that may come back.

const pClient = 'C' // C client-uuid → clientRecord

// DefaultClientWindow is how long a restarted MDT waits for the clients
// it knew (Lustre waits several minutes; our clients redial at once).
const DefaultClientWindow = 30 * time.Second

// MaxClientWindow bounds the window: a longer one only delays everyone
// for a client that is not coming back.
const MaxClientWindow = 10 * time.Minute

type clientRecord struct {
	Name        string // from the client's hello, for logs
	LastTransno uint64 // of the last change made for it (0: none yet)
	LastXID     uint64
}

func clientKey(uuid string) []byte { return append([]byte{pClient}, uuid...) }

// clientWindow is the MDT's recovery window around the pure machine.
type clientWindow struct {
	open    atomic.Bool // cheap check for the request path once recovery is over
	mu      sync.Mutex
	sm      *recovery.Machine
	changed chan struct{} // closed and replaced at every step of sm
	timer   *time.Timer
	stopped bool              // the MDT is stopping: no more ticks
	quit    chan struct{}     // closed then: waiting requests give up
	names   map[string]string // uuid → name of the clients known at start

	delayed, waiting, refused atomic.Int64
}

// loadClients reads the client table.
func (m *MDT) loadClients() error {
	m.clients = map[string]bool{}
	m.win.names = map[string]string{}
	m.win.quit = make(chan struct{})
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pClient}, UpperBound: []byte{pClient + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		uuid := string(it.Key()[1:])
		var r clientRecord
		if err := wire.Unmarshal(it.Value(), &r); err != nil {
			m.logf(slog.LevelInfo, "client table: record of %s unreadable (%v); waiting for it anyway", uuid, err)
		}
		m.clients[uuid] = true
		m.win.names[uuid] = r.Name
	}
	return it.Error()
}

// openClientWindow starts the window once the peers' update logs are
// redone (clients replay on top of them), with the table as loaded.
func (m *MDT) openClientWindow() {
	known := make([]string, 0, len(m.win.names))
	for uuid := range m.win.names {
		known = append(known, uuid)
	}
	now := time.Now()
	m.win.mu.Lock()
	m.win.sm = recovery.New(recovery.Config{Known: known, Committed: m.startTransno, Start: now, Window: m.cfg.ClientWindow})
	m.win.changed = make(chan struct{})
	rec := m.win.sm.Recovering()
	m.win.open.Store(rec)
	if rec {
		m.win.timer = time.AfterFunc(m.win.sm.Deadline(now).Sub(now), m.windowTick)
	}
	m.win.mu.Unlock()
	if rec {
		m.logf(slog.LevelInfo, "recovery: waiting up to %v for %d known clients to reconnect and replay (last committed transno %d)", m.cfg.ClientWindow, len(known), m.startTransno)
	}
}

// winStep runs f on the machine, wakes every waiter, and logs the end of
// the window when f ended it.
func (m *MDT) winStep(f func(sm *recovery.Machine, now time.Time)) {
	m.win.mu.Lock()
	if m.win.sm == nil { // not open yet: nothing can have happened
		m.win.mu.Unlock()
		return
	}
	now := time.Now()
	was := m.win.sm.Recovering()
	f(m.win.sm, now)
	close(m.win.changed)
	m.win.changed = make(chan struct{})
	ended := was && !m.win.sm.Recovering()
	st := m.win.sm.Status(now)
	if ended {
		m.win.open.Store(false)
		if m.win.timer != nil {
			m.win.timer.Stop()
		}
	}
	m.win.mu.Unlock()
	if ended {
		m.logf(slog.LevelWarn, "recovery over after %v: %d of %d clients recovered, %d evicted; %d replays applied, %d refused; %d requests waited for it", st.Duration.Round(time.Millisecond), st.Recovered, st.Known, st.Evicted, st.Replays, st.Refused, m.win.delayed.Load())
	}
}

// windowTick runs at the machine's deadlines: it evicts clients that did
// not come back and forgets them in the table.
func (m *MDT) windowTick() {
	m.winStep(func(sm *recovery.Machine, now time.Time) {
		if m.win.stopped { // the database may be closed
			return
		}
		evicted := sm.Tick(now)
		if sm.Recovering() {
			m.win.timer = time.AfterFunc(max(sm.Deadline(now).Sub(now), time.Millisecond), m.windowTick)
		}
		if len(evicted) == 0 {
			return
		}
		b := m.db.NewBatch()
		m.clientsMu.Lock()
		for _, uuid := range evicted {
			delete(m.clients, uuid)
			b.Delete(clientKey(uuid), nil)
			m.logf(slog.LevelWarn, "recovery: evicted client %q (%s): it did not finish replaying within the %v window; its uncommitted changes are lost and its replays will be refused", m.win.names[uuid], uuid, m.cfg.ClientWindow)
		}
		m.clientsMu.Unlock()
		if err := m.commit(b, false); err != nil {
			m.logf(slog.LevelWarn, "recovery: forget evicted clients: %v", err)
		}
	})
}

// stopWindow stops the window's timer for good (the MDT is stopping).
func (m *MDT) stopWindow() {
	m.win.mu.Lock()
	defer m.win.mu.Unlock()
	if !m.win.stopped {
		close(m.win.quit)
	}
	m.win.stopped = true
	if m.win.timer != nil {
		m.win.timer.Stop()
	}
}

// registerClient writes a client that keeps changes for replay into the
// table, synchronously, before its first change is made: a change that
// reaches the disk always finds its client there after a crash. Once per
// client and MDT start.
func (m *MDT) registerClient(uuid, name string) error {
	if uuid == "" {
		return nil
	}
	m.clientsMu.RLock()
	known := m.clients[uuid]
	m.clientsMu.RUnlock()
	if known {
		return nil
	}
	m.clientsMu.Lock()
	defer m.clientsMu.Unlock()
	if m.clients[uuid] {
		return nil
	}
	b := m.db.NewBatch()
	b.Set(clientKey(uuid), encode(&clientRecord{Name: name}), nil)
	if err := m.write(b, pebble.Sync); err != nil {
		return fmt.Errorf("mdt%d: add client %q to the client table: %v: %w", m.cfg.Index, name, err, storeErrno(err))
	}
	m.clients[uuid] = true
	return nil
}

// noteClient updates the client's record in the batch of a change made
// for it (newBatch).
func noteClient(b *pebble.Batch, c rpc.Caller, transno uint64) {
	if c.Kept && c.Client != "" {
		b.Set(clientKey(c.Client), encode(&clientRecord{Name: c.Name, LastTransno: transno, LastXID: c.XID}), nil)
	}
}

// Methods the window does not hold: other servers' calls (the update-log
// protocol, quota, the MGS, stats), which replays may themselves need.
var windowOpen = func() map[uint16]bool {
	open := map[uint16]bool{proto.MQuotaLimits: true, proto.MQuotaAcquire: true, proto.MOwner: true,
		rpc.MethodReplayDone: true, rpc.MethodDisconnect: true, proto.MLockReplay: true, proto.MFlockReplay: true}
	for m := range peerMethods {
		open[m] = true
	}
	return open
}()

// gateClients puts every client method behind the window, and registers
// the replay-done and disconnect methods. Called before gateRecovery, so
// that the peers' update logs are redone before the window opens.
func (m *MDT) gateClients() {
	m.Srv.Handle(rpc.MethodReplayDone, func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
		m.winStep(func(sm *recovery.Machine, now time.Time) { sm.ReplayDone(r.Client, now) })
		return rpc.Reply{}, nil
	})
	m.Srv.Handle(rpc.MethodDisconnect, m.disconnect)
	m.wrapMethods(windowOpen, func(next rpc.Handler) rpc.Handler {
		return func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
			if m.locks.IsEvicted(r.Client) {
				return rpc.Reply{}, fmt.Errorf("mdt%d: request from client %q, which was evicted: %w", m.cfg.Index, r.Name, lockd.ErrEvicted)
			}
			if r.Flags&rpc.FlagReplay != 0 {
				return m.replay(ctx, r, next)
			}
			if m.win.open.Load() {
				if err := m.admit(ctx); err != nil {
					return rpc.Reply{}, err
				}
			}
			if r.Flags&rpc.FlagKept != 0 {
				if err := m.registerClient(r.Client, r.Name); err != nil {
					return rpc.Reply{}, err
				}
			}
			return next(ctx, r)
		}
	})
}

// admit holds a request that is not a replay while the window is open.
func (m *MDT) admit(ctx context.Context) error {
	waited := false
	defer func() {
		if waited {
			m.win.waiting.Add(-1)
		}
	}()
	for {
		m.win.mu.Lock()
		v, ch := m.win.sm.Admit(), m.win.changed
		m.win.mu.Unlock()
		if v == recovery.Run {
			return nil
		}
		if !waited {
			waited = true
			m.win.delayed.Add(1)
			m.win.waiting.Add(1)
		}
		select {
		case <-ch:
		case <-m.win.quit:
			return fmt.Errorf("mdt%d: stopping during client recovery: %w", m.cfg.Index, syscall.ESHUTDOWN)
		case <-ctx.Done():
			return fmt.Errorf("mdt%d: waiting for client recovery: %w", m.cfg.Index, ctx.Err())
		}
	}
}

// replay applies a client's replay when the window says it is its turn.
func (m *MDT) replay(ctx context.Context, r *rpc.Request, next rpc.Handler) (rpc.Reply, error) {
	m.win.mu.Lock()
	v, ch := m.win.sm.Replay(r.Client, r.Transno), m.win.changed
	m.win.mu.Unlock()
	for v == recovery.Wait {
		select {
		case <-ch:
		case <-m.win.quit:
			return rpc.Reply{}, fmt.Errorf("mdt%d: stopping during client recovery: %w", m.cfg.Index, syscall.ESHUTDOWN)
		case <-ctx.Done():
			m.winStep(func(sm *recovery.Machine, _ time.Time) { sm.Cancel(r.Client, r.Transno) })
			return rpc.Reply{}, fmt.Errorf("mdt%d: replay waiting for its turn: %w", m.cfg.Index, ctx.Err())
		}
		m.win.mu.Lock()
		v, ch = m.win.sm.Poll(r.Client, r.Transno), m.win.changed
		m.win.mu.Unlock()
	}
	if v == recovery.Refuse {
		if m.done(ctx) {
			// Committed before the restart: the resend path answers it
			// from the current state, whoever asks.
			return next(ctx, r)
		}
		m.win.refused.Add(1)
		m.win.mu.Lock()
		why := "no recovery window is open for it (the MDT did not know this client, or the window closed)"
		if m.win.sm.Evicted(r.Client) {
			why = fmt.Sprintf("the client was evicted: it did not finish replaying within the %v recovery window", m.cfg.ClientWindow)
		}
		m.win.mu.Unlock()
		return rpc.Reply{}, fmt.Errorf("mdt%d: replay of method %s (xid %d, transno %d) from %q refused, the change is lost: %s",
			m.cfg.Index, proto.MethodName(r.Method), r.XID, r.Transno, r.Name, why)
	}
	defer m.winStep(func(sm *recovery.Machine, now time.Time) { sm.Replayed(r.Transno, now) })
	if err := m.registerClient(r.Client, r.Name); err != nil {
		return rpc.Reply{}, err
	}
	return next(ctx, r)
}

// disconnect is a client's clean goodbye: it can replay nothing after
// this, so its changes are committed now, and it leaves the table so that
// a restart does not wait for it.
func (m *MDT) disconnect(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
	m.locks.Forget(r.Client)
	m.clientsMu.Lock()
	_, known := m.clients[r.Client]
	delete(m.clients, r.Client)
	m.clientsMu.Unlock()
	if known {
		b := m.db.NewBatch()
		b.Delete(clientKey(r.Client), nil)
		if err := m.commit(b, false); err != nil {
			return rpc.Reply{}, err
		}
	}
	if err := m.Sync(); err != nil {
		return rpc.Reply{}, err
	}
	m.winStep(func(sm *recovery.Machine, now time.Time) { sm.Disconnect(r.Client, now) })
	return rpc.Reply{}, nil
}

// windowCounters are the window's stats (stripefs stats).
func (m *MDT) windowCounters() []rpc.Counter {
	m.clientsMu.RLock()
	n := len(m.clients)
	m.clientsMu.RUnlock()
	var st recovery.Status
	m.win.mu.Lock()
	if m.win.sm != nil {
		st = m.win.sm.Status(time.Now())
	} else {
		st.Recovering = true // still redoing the peers' update logs
		st.Known = len(m.win.names)
	}
	m.win.mu.Unlock()
	b2i := func(b bool) int64 {
		if b {
			return 1
		}
		return 0
	}
	return []rpc.Counter{
		{Name: "clients", Value: int64(n)},
		{Name: "recovery_status", Value: b2i(st.Recovering)},
		{Name: "recovery_clients_known", Value: int64(st.Known)},
		{Name: "recovery_clients_recovered", Value: int64(st.Recovered)},
		{Name: "recovery_clients_evicted", Value: int64(st.Evicted)},
		{Name: "recovery_replays", Value: st.Replays},
		{Name: "recovery_replays_refused", Value: m.win.refused.Load()},
		{Name: "recovery_requests_delayed", Value: m.win.delayed.Load()},
		{Name: "recovery_requests_waiting", Value: m.win.waiting.Load()},
		{Name: "recovery_window_ms", Value: st.Duration.Milliseconds()},
	}
}

// knownClients lists the client table (tests).
func (m *MDT) knownClients() []string {
	m.clientsMu.RLock()
	defer m.clientsMu.RUnlock()
	out := make([]string, 0, len(m.clients))
	for c := range m.clients {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

var errWindowTooLong = errors.New("recovery window too long")
