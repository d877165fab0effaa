package mds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/internal/storeguard"
	"github.com/stripefs/stripefs/proto"
)

// store is an MDT's database: its key space (keys.go), the stored forms
// of its records (records.go) and their format (compat.go), and the
// commit path every change goes through, which turns a failing disk into
// errnos (storefail.go). It knows nothing of requests, locks or peers:
// what to write, and when, is the MDT's; how it is read and written is
// the store's. The MDT embeds it.
type store struct {
	db *pebble.DB
	// guard turns a failure of db into errnos and a read-only MDT until
	// its runner reopens it (storefail.go).
	guard *storeguard.Guard
	index int // the MDT's, for messages
}

// write commits b. Every change of the database goes through here or
// logSync, so that Pebble's fatal commit error reaches the request as
// an errno.
func (s *store) write(b *pebble.Batch, opt *pebble.WriteOptions) error {
	return s.guard.Do(func() error { return b.Commit(opt) })
}

// logSync makes every committed batch durable.
func (s *store) logSync() error {
	return s.guard.Do(func() error { return s.db.LogData(nil, pebble.Sync) })
}

// abandonStore lets go of a failed database: its commit pipeline may be
// stuck, so it is closed in the background, and the process goes on
// whether or not that ever returns (its filesystem is fenced).
func (s *store) abandonStore() {
	db := s.db
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }() // a stuck pipeline may panic on close
		_ = db.Close()
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		s.logf(slog.LevelWarn, "the failed database did not close; left behind")
	}
}

// logf logs a line of this MDT at level: the message as "mdt1: …", with
// the target attribute (target=MDT0001).
func (s *store) logf(level slog.Level, format string, args ...any) {
	slog.Log(context.Background(), level, fmt.Sprintf("mdt%d: "+format, append([]any{s.index}, args...)...),
		"target", proto.TargetName(proto.KindMDT, uint32(s.index)))
}

func (s *store) getInode(f proto.FID) (*inode, error) {
	if f.MDT() != s.index {
		return nil, fmt.Errorf("mdt%d: %s belongs to mdt%d: %w", s.index, f, f.MDT(), syscall.EXDEV)
	}
	v, closer, err := s.db.Get(inodeKey(f))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, &missingInode{s.index, f}
	}
	if err != nil {
		return nil, fmt.Errorf("mdt%d: inode %s: %v: %w", s.index, f, err, syscall.EIO)
	}
	defer closer.Close()
	n := new(inode)
	if err := unmarshalInode(v, n); err != nil {
		return nil, fmt.Errorf("mdt%d: inode %s corrupt: %v: %w", s.index, f, err, syscall.EIO)
	}
	return n, nil
}

func (s *store) getDirent(dir proto.FID, name string) (*dirent, error) {
	v, closer, err := s.db.Get(direntKey(dir, name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("mdt%d: %s/%q: %w", s.index, dir, name, syscall.ENOENT)
	}
	if err != nil {
		return nil, fmt.Errorf("mdt%d: %s/%q: %v: %w", s.index, dir, name, err, syscall.EIO)
	}
	defer closer.Close()
	d := new(dirent)
	if err := unmarshalDirent(v, d); err != nil {
		return nil, fmt.Errorf("mdt%d: dirent %s/%q corrupt: %v: %w", s.index, dir, name, err, syscall.EIO)
	}
	return d, nil
}

func (s *store) putInode(b *pebble.Batch, n *inode) {
	b.Set(inodeKey(n.Attr.FID), n.marshal(), nil)
}
