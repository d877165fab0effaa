package mds

import (
	"log/slog"
	"sync"
	"time"

	"github.com/stripefs/stripefs/rpc"
)

// Clients lost while the MDT runs (Lustre evicts them when their pings
// stop). A client in the client table whose every connection has been
// closed for EvictAfter, without a new one, is taken for gone: its
// changes are committed, as for a clean disconnect, and it leaves the
// table, so that the next restart does not hold everyone for the whole
// recovery window waiting for it. Nothing is lost by this: a client that
// does come back has nothing to replay (all it did is committed) and is
// written into the table again by its next change. A live client keeps a
// connection open (and TCP keepalive closes one whose host died).

// DefaultEvictAfter is how long a client of the table may stay without a
// connection before it is evicted.
const DefaultEvictAfter = time.Minute

type lostClients struct {
	mu      sync.Mutex
	conns   map[string]int         // client uuid → open connections
	timers  map[string]*time.Timer // clients without one, until evicted
	names   map[string]string      // their names, from their hellos
	stopped bool                   // the MDT is stopping: evict no more
	evicted int64
}

// connChange is the rpc server's ConnHook: a connection of client uuid
// opened (after its hello) or closed.
func (m *MDT) connChange(uuid, name string, up bool) {
	l := &m.lost
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	if l.conns == nil {
		l.conns, l.timers, l.names = map[string]int{}, map[string]*time.Timer{}, map[string]string{}
	}
	if up {
		if l.conns[uuid] == 0 {
			m.locks.ConnChange(uuid, true)
		}
		l.conns[uuid]++
		l.names[uuid] = name
		if t := l.timers[uuid]; t != nil {
			t.Stop()
			delete(l.timers, uuid)
		}
		return
	}
	if l.conns[uuid]--; l.conns[uuid] > 0 {
		return
	}
	delete(l.conns, uuid)
	m.locks.ConnChange(uuid, false) // its application locks may keep others waiting
	if m.cfg.EvictAfter < 0 {
		return
	}
	if l.timers[uuid] == nil {
		l.timers[uuid] = time.AfterFunc(m.cfg.EvictAfter, func() { m.evictLost(uuid) })
	}
}

// evictLost evicts uuid if it is in the table and still has no
// connection.
func (m *MDT) evictLost(uuid string) {
	l := &m.lost
	l.mu.Lock()
	defer l.mu.Unlock() // held throughout: stopLost waits for an eviction in progress
	if l.stopped || l.conns[uuid] > 0 || l.timers[uuid] == nil {
		return
	}
	if m.win.open.Load() {
		// The recovery window decides about the clients it waits for.
		l.timers[uuid].Reset(m.cfg.EvictAfter)
		return
	}
	delete(l.timers, uuid)
	m.locks.Forget(uuid) // a client gone this long holds nothing
	name := l.names[uuid]
	delete(l.names, uuid)
	m.clientsMu.Lock()
	known := m.clients[uuid]
	delete(m.clients, uuid)
	m.clientsMu.Unlock()
	if !known {
		return // not a client of the table (a peer MDT, a tool, a clean unmount)
	}
	// Forget it, and commit that with all the MDT answered it: one sync.
	b := m.db.NewBatch()
	b.Delete(clientKey(uuid), nil)
	err := m.commit(b, false)
	if err == nil {
		err = m.Sync()
	}
	if err != nil {
		m.logf(slog.LevelWarn, "evicting lost client %q (%s): %v", name, uuid, err)
		return
	}
	l.evicted++
	m.logf(slog.LevelWarn, "evicted client %q (%s): no connection for %v; its changes are committed and a restart will not wait for it", name, uuid, m.cfg.EvictAfter)
}

// stopLost ends evictions for good (the MDT is stopping), after any in
// progress.
func (m *MDT) stopLost() {
	l := &m.lost
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	for _, t := range l.timers {
		t.Stop()
	}
}

func (m *MDT) lostCounters() []rpc.Counter {
	l := &m.lost
	l.mu.Lock()
	defer l.mu.Unlock()
	return []rpc.Counter{{Name: "clients_evicted_lost", Value: l.evicted}}
}
