// Package recovery decides an MDT's client recovery window after a
// restart, the way Lustre's target recovery does: the MDT knows from its
// client table which clients might hold changes it answered but had not
// committed when it stopped; until each of them has reconnected and
// replayed (and said so), or the window ends, requests that are not
// replays wait, and replays of all clients run one at a time in the order
// of the transnos the previous start gave them, so client A's create is
// redone before client B's rename of that file. Clients that do not come
// back in time are evicted: their replays are refused. A client that is
// replaying when the window ends gets as long again to finish (it is
// there, and evicting it would lose its changes), no longer.
//
// The package is pure: no clock, no I/O, no locking. The MDT feeds it
// events with the time, asks it whether a request may run, and does the
// waiting, the writing and the logging (as etcd's raft leaves disk and
// network to its user).
package recovery

import (
	"slices"
	"time"
)

// Verdict is the answer to "may this request run now?".
type Verdict uint8

const (
	// Run: go ahead. For a replay, the caller must report Replayed when it
	// is done with it, whatever the outcome.
	Run Verdict = iota
	// Wait: ask again (Poll for a replay, Admit otherwise) after the
	// machine changes.
	Wait
	// Refuse: the client was evicted, or the replay came when no window
	// was open for it; the change is lost.
	Refuse
)

func (v Verdict) String() string {
	return [...]string{"run", "wait", "refuse"}[v]
}

// Config starts a window.
type Config struct {
	// Known are the clients of the client table: the window waits for
	// each of them.
	Known []string
	// Committed is the last transno on disk. A replay at or below it was
	// committed before the restart, so it is answered at once (the MDT
	// finds its done-record) and orders nothing.
	Committed uint64
	// Start is when the window opens, Window how long it waits for clients
	// that have not been heard from; clients that are replaying then have
	// until Start+2*Window.
	Start  time.Time
	Window time.Duration
}

type clientState uint8

const (
	awaited   clientState = iota // may still replay, not heard from yet
	active                       // replaying, not done yet
	recovered                    // said replay done, or disconnected
	evicted                      // did not finish in the window
)

type queued struct {
	client  string
	transno uint64
}

// Machine is one MDT start's recovery window. The zero value is not
// usable; use New.
type Machine struct {
	recovering bool
	start, end time.Time
	deadline   time.Time              // for clients not heard from
	hard       time.Time              // for everyone
	clients    map[string]clientState // every client the window knows of
	queue      []queued               // replays waiting for their turn, by transno
	running    bool                   // a replay is being applied
	// next: no replay still to come can have a transno below it, so a
	// replay at or below it needs no waiting for the others (transnos are
	// given one by one, so after T comes T+1 if anyone has it).
	next uint64

	known, nRecovered, nEvicted int
	replays, refused            int64
}

// New opens a window for cfg.Known; with no known client there is
// nothing to wait for and the machine starts out recovered.
func New(cfg Config) *Machine {
	m := &Machine{start: cfg.Start, deadline: cfg.Start.Add(cfg.Window), hard: cfg.Start.Add(2 * cfg.Window), clients: map[string]clientState{},
		next: cfg.Committed + 1}
	for _, c := range cfg.Known {
		if _, dup := m.clients[c]; !dup {
			m.clients[c] = awaited
			m.known++
		}
	}
	m.recovering = true
	m.maybeEnd(cfg.Start)
	return m
}

// Recovering reports whether the window is open.
func (m *Machine) Recovering() bool { return m.recovering }

// Deadline is when Tick next has something to do: the end of the window
// for clients not heard from, then the hard end for those replaying.
func (m *Machine) Deadline(now time.Time) time.Time {
	if now.Before(m.deadline) {
		return m.deadline
	}
	return m.hard
}

// Admit decides about a request that is not a replay: it waits while the
// window is open, whoever sends it. A client the window does not know
// (new since the restart) waits too, but nobody waits for it.
func (m *Machine) Admit() Verdict {
	if m.recovering {
		return Wait
	}
	return Run
}

// Replay queues client's replay of the change it had as transno and
// returns its verdict; on Wait the caller polls (Poll) after each change
// of the machine. A client the table did not know that replays (its
// entry was lost with the rest of its uncommitted changes) joins the
// window: it is waited for from now on.
func (m *Machine) Replay(client string, transno uint64) Verdict {
	if !m.recovering {
		m.refused++
		return Refuse
	}
	switch st, ok := m.clients[client]; {
	case !ok:
		m.clients[client] = active
		m.known++
	case st == awaited:
		m.clients[client] = active
	case st != active:
		// Evicted, or replaying after its own "replay done": never
		// applied out of order.
		m.refused++
		return Refuse
	}
	i, _ := slices.BinarySearchFunc(m.queue, transno, func(q queued, t uint64) int { return cmpU(q.transno, t) })
	m.queue = slices.Insert(m.queue, i, queued{client, transno})
	return m.Poll(client, transno)
}

// Poll is the verdict for a queued replay. A replay runs when no other is
// running, it is the oldest queued, and either nothing older can still
// come (its transno is next) or every client still awaited has a replay
// queued (each sends its own in order, so the oldest of all is known).
func (m *Machine) Poll(client string, transno uint64) Verdict {
	i := m.find(client, transno)
	if i < 0 {
		// Dropped from the queue: its client was evicted.
		return Refuse
	}
	if m.running || i != 0 {
		return Wait
	}
	if transno > m.next && !m.allQueued() {
		return Wait
	}
	m.queue = slices.Delete(m.queue, 0, 1)
	m.running = true
	return Run
}

// Replayed reports that a replay that got Run is over (applied or failed).
func (m *Machine) Replayed(transno uint64, now time.Time) {
	m.running = false
	m.replays++
	m.next = max(m.next, transno+1)
	m.maybeEnd(now)
}

// Cancel withdraws a queued replay whose sender gave up waiting.
func (m *Machine) Cancel(client string, transno uint64) {
	if i := m.find(client, transno); i >= 0 {
		m.queue = slices.Delete(m.queue, i, i+1)
	}
}

// ReplayDone records that client has replayed everything it kept. It
// reports whether that was news (an awaited client).
func (m *Machine) ReplayDone(client string, now time.Time) bool {
	if st, ok := m.clients[client]; !ok || (st != awaited && st != active) || !m.recovering {
		return false
	}
	m.clients[client] = recovered
	m.nRecovered++
	m.maybeEnd(now)
	return true
}

// Disconnect records a clean goodbye: the client is not waited for.
func (m *Machine) Disconnect(client string, now time.Time) {
	m.ReplayDone(client, now)
}

// Tick evicts, at the deadline, the clients not heard from, and at the
// hard deadline those still replaying; it returns them sorted. Their
// queued replays are refused.
func (m *Machine) Tick(now time.Time) []string {
	if !m.recovering || now.Before(m.deadline) {
		return nil
	}
	hard := !now.Before(m.hard)
	var out []string
	for c, st := range m.clients {
		if st == awaited || (hard && st == active) {
			m.clients[c] = evicted
			m.nEvicted++
			out = append(out, c)
		}
	}
	slices.Sort(out)
	m.queue = slices.DeleteFunc(m.queue, func(q queued) bool { return m.clients[q.client] == evicted })
	m.maybeEnd(now)
	return out
}

// Evicted reports whether the window evicted client.
func (m *Machine) Evicted(client string) bool { return m.clients[client] == evicted }

// Status is what the MDT shows in its counters.
type Status struct {
	Recovering                bool
	Known, Recovered, Evicted int
	Queued                    int
	Replays, Refused          int64
	// Duration is how long the window was (or so far is) open.
	Duration time.Duration
}

// Status returns the counters as of now.
func (m *Machine) Status(now time.Time) Status {
	end := m.end
	if m.recovering {
		end = now
	}
	return Status{Recovering: m.recovering, Known: m.known, Recovered: m.nRecovered, Evicted: m.nEvicted,
		Queued: len(m.queue), Replays: m.replays, Refused: m.refused, Duration: end.Sub(m.start)}
}

// maybeEnd closes the window once nobody is awaited and no replay is
// queued or running.
func (m *Machine) maybeEnd(now time.Time) {
	if !m.recovering || m.running || len(m.queue) > 0 {
		return
	}
	for _, st := range m.clients {
		if st == awaited || st == active {
			return
		}
	}
	m.recovering = false
	m.end = now
}

func (m *Machine) allQueued() bool {
	for c, st := range m.clients {
		if (st == awaited || st == active) && !slices.ContainsFunc(m.queue, func(q queued) bool { return q.client == c }) {
			return false
		}
	}
	return true
}

func (m *Machine) find(client string, transno uint64) int {
	return slices.IndexFunc(m.queue, func(q queued) bool { return q.client == client && q.transno == transno })
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
