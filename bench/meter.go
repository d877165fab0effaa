package bench

import "sync/atomic"

// Meter counts a run's work as it goes (bytes moved, items made), for a
// progress bar. A benchmark adds to it from its tasks; a display reads it
// from its own goroutine. Nil is a meter that counts nothing.
type Meter struct {
	done, total atomic.Int64
}

// Add counts n more done.
func (m *Meter) Add(n int64) {
	if m != nil {
		m.done.Add(n)
	}
}

// setTotal says how much there is to do.
func (m *Meter) setTotal(n int64) {
	if m != nil {
		m.total.Store(n)
	}
}

// Read is how much is done, of how much.
func (m *Meter) Read() (done, total int64) { return m.done.Load(), m.total.Load() }
