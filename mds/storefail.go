package mds

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/internal/storeguard"
)

// What an MDT does when its database fails (a full or failing disk):
// the request whose commit failed gets ENOSPC or EIO, later changes are
// refused at once (ENOSPC, or EROFS for a failing disk) while lookups,
// getattrs and readdirs go on from what the database holds, and the
// process carries on. Its runner (storeguard.Runner) then reopens the MDT
// on the same address once the disk has room: to clients that is a
// restart, and they replay what was not yet committed, as after a crash.

// storeErrno is the errno of a failed commit (storeguard.Errno).
var storeErrno = storeguard.Errno

// StoreFailed is closed when the MDT's database fails.
func (m *MDT) StoreFailed() <-chan struct{} { return m.guard.Failed() }

// StoreNoSpace says whether the database failed for want of space.
func (m *MDT) StoreNoSpace() bool { return m.guard.NoSpace() }

// Name is the MDT's name in logs: mdt0, mdt1…
func (m *MDT) Name() string { return fmt.Sprintf("mdt%d", m.cfg.Index) }

// StoreMetrics are the database's Pebble metrics; nil once it failed (a
// failed database's locks may be held by a parked goroutine).
func (m *MDT) StoreMetrics() *pebble.Metrics {
	if m.guard.Err() != nil {
		return nil
	}
	return m.db.Metrics()
}
