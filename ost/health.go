package ost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
)

// An OST whose disk fails is read-only until its runner reopens it:
// a failed commit of its index (Pebble's fatal error, caught by the
// index's storeguard) or a write of object data the disk refused (EIO, or
// ENOSPC beyond what the OST accounted for) fences the index, so that
// every later change is refused with EROFS (ENOSPC for a full disk) while
// reads go on; the runner reopens it once the disk has room again (a
// full disk) or after a pause (a failing one), reconciling the index with
// the object files as after a crash. The process never exits for it.

// StoreFailed is closed when the OST turns read-only.
func (o *OST) StoreFailed() <-chan struct{} { return o.idx.guard.Failed() }

// StoreNoSpace says whether it did for want of space.
func (o *OST) StoreNoSpace() bool { return o.idx.guard.NoSpace() }

// readOnly is the error for a change while the OST is read-only, nil
// while it is not.
func (o *OST) readOnly() error { return o.idx.guard.Err() }

// diskFailed turns the OST read-only after the disk refused a write of
// object data with EIO or ENOSPC (ENOSPC that the OST did not foresee:
// its accounting and reserve let the write through).
func (o *OST) diskFailed(op string, id fmt.Stringer, err error) {
	if errors.Is(err, syscall.EIO) || errors.Is(err, syscall.ENOSPC) {
		o.idx.guard.Fail(fmt.Errorf("%s: %s %s: %w", o.name, op, id, err))
	}
}

// Name is the OST's name in logs: ost0, ost1…
func (o *OST) Name() string { return o.name }

// StoreMetrics are the index's Pebble metrics; nil once it failed.
func (o *OST) StoreMetrics() *pebble.Metrics {
	if o.readOnly() != nil {
		return nil
	}
	return o.idx.db.Metrics()
}

// logf logs a line of this OST at level: the message as "ost1: …", with
// the target attribute (target=OST0001).
func (o *OST) logf(level slog.Level, format string, args ...any) {
	slog.Log(context.Background(), level, fmt.Sprintf("%s: "+format, append([]any{o.name}, args...)...),
		"target", o.target)
}
