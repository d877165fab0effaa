package mds

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/internal/storeguard"
	"github.com/stripefs/stripefs/proto"
)

// What an MDT does when its database fails (a full or failing disk):
// the request whose commit failed gets ENOSPC or EIO, later changes are
// refused at once (ENOSPC, or EROFS for a failing disk) while lookups,
// getattrs and readdirs go on from what the database holds, and the
// process carries on. Its runner (storeguard.Runner) then reopens the MDT
// on the same address once the disk has room: to clients that is a
// restart, and they replay what was not yet committed, as after a crash.

// write commits b. Every change of the database goes through here or
// logSync, so that Pebble's fatal commit error reaches the request as
// an errno.
func (m *MDT) write(b *pebble.Batch, opt *pebble.WriteOptions) error {
	return m.guard.Do(func() error { return b.Commit(opt) })
}

// logSync makes every committed batch durable.
func (m *MDT) logSync() error {
	return m.guard.Do(func() error { return m.db.LogData(nil, pebble.Sync) })
}

// storeErrno is the errno of a failed commit (storeguard.Errno).
var storeErrno = storeguard.Errno

// StoreFailed is closed when the MDT's database fails.
func (m *MDT) StoreFailed() <-chan struct{} { return m.guard.Failed() }

// StoreNoSpace says whether the database failed for want of space.
func (m *MDT) StoreNoSpace() bool { return m.guard.NoSpace() }

// abandonStore lets go of a failed database: its commit pipeline may be
// stuck, so it is closed in the background, and the process goes on
// whether or not that ever returns (its filesystem is fenced).
func (m *MDT) abandonStore() {
	db := m.db
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }() // a stuck pipeline may panic on close
		_ = db.Close()
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		m.logf(slog.LevelWarn, "the failed database did not close; left behind")
	}
}

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

// logf logs a line of this MDT at level: the message as "mdt1: …", with
// the target attribute (target=MDT0001).
func (m *MDT) logf(level slog.Level, format string, args ...any) {
	slog.Log(context.Background(), level, fmt.Sprintf("mdt%d: "+format, append([]any{m.cfg.Index}, args...)...),
		"target", proto.TargetName(proto.KindMDT, uint32(m.cfg.Index)))
}
