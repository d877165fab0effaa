package ost

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/internal/storeguard"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/wire"
)

// The OST's index: a small Pebble database in DataDir/index holding one
// record per object (owner, bytes allocated, size), the grant held by each
// client, and a marker of clean shutdown. Totals per quota id and for the
// whole OST are not stored: they are summed from the object records at
// start, so there is no second copy to drift.
//
// Changes are committed without a WAL sync and made durable in groups by
// a ticker, as the MDT does. What a crash loses is repaired at the next
// start: when the clean marker is missing, every object file is stat'ed
// and its record corrected (reconcile). The object's owner is also kept
// in an extended attribute of the object file itself, written when the
// object first allocates, so a record lost with the WAL tail can be
// rebuilt from the file alone.

// Key prefixes of the index.
const (
	kObject = 'o' // o fid-key stripe → objRecord
	kGrant  = 'g' // g client → grantRecord
	kMeta   = 'm' // m name → state
)

var keyClean = []byte("mclean")

// ownerXattr holds an object's owner on the object file.
const ownerXattr = "user.stripefs.owner"

// objRecord is what the index knows of one object.
type objRecord struct {
	Owner proto.Owner
	Bytes uint64 // allocated, as st_blocks*512 after the last change
	Size  uint64
	// Inline: the object's bytes are a value of the index, not a file
	// (inline.go).
	Inline bool
}

type grantRecord struct{ Grant uint64 }

func objKey(id proto.ObjID) []byte {
	k := id.FID.Key()
	b := make([]byte, 0, 1+16+4)
	b = append(b, kObject)
	b = append(b, k[:]...)
	return binary.BigEndian.AppendUint32(b, id.Stripe)
}

func parseObjKey(k []byte) (proto.ObjID, bool) {
	if len(k) != 21 || k[0] != kObject {
		return proto.ObjID{}, false
	}
	fid, err := proto.FIDFromKey(k[1:17])
	if err != nil {
		return proto.ObjID{}, false
	}
	return proto.ObjID{FID: fid, Stripe: binary.BigEndian.Uint32(k[17:])}, true
}

func grantKey(client uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{kGrant}, client)
}

// index wraps the database.
type index struct {
	db *pebble.DB
	// guard turns a failure of db into errnos and a read-only OST until
	// its runner reopens it (storeguard).
	guard *storeguard.Guard
	name  string // "ost3", for errors
	// logf logs a line of the OST (its logf: "ost3: …", target=OST0003).
	logf  func(level slog.Level, format string, args ...any)
	dirty atomic.Bool
	// tagsDirty: unit tags were committed since the last sync (ectag.go).
	tagsDirty atomic.Bool
	stop      chan struct{}
	done      chan struct{}
}

// openIndex opens the index in dir, on fs (nil: the disk); logf logs
// its lines as the OST's. An index that keeps inline objects gets a
// larger memtable and cache: it holds file data.
func openIndex(dir, name string, fs vfs.FS, inline bool, logf func(slog.Level, string, ...any)) (*index, bool, error) {
	guard := storeguard.New(name)
	opts := &pebble.Options{}
	if inline {
		opts.CacheSize, opts.MemTableSize = inlineCacheSize, inlineMemTableSize
	}
	// Bloom filters: a write to a new object first looks for its record.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	guard.Configure(opts, cmp.Or(fs, vfs.Default))
	if fs == nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, false, fmt.Errorf("%s: index: %w", name, err)
		}
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, false, fmt.Errorf("%s: open index %s: %w", name, dir, err)
	}
	x := &index{db: db, guard: guard, name: name, logf: logf, stop: make(chan struct{}), done: make(chan struct{})}
	if err := x.upgrade(); err != nil {
		db.Close()
		return nil, false, err
	}
	_, closer, err := db.Get(keyClean)
	clean := err == nil
	if clean {
		closer.Close()
		// From now on a crash must be noticed: the marker goes before
		// anything changes.
		if err := x.guard.Do(func() error { return db.Delete(keyClean, pebble.Sync) }); err != nil {
			db.Close()
			return nil, false, fmt.Errorf("%s: index: %w", name, err)
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		db.Close()
		return nil, false, fmt.Errorf("%s: index: %w", name, err)
	}
	go x.committer(100 * time.Millisecond)
	return x, clean, nil
}

// committer syncs the WAL every interval when something was committed.
func (x *index) committer(every time.Duration) {
	defer close(x.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-x.stop:
			return
		case <-t.C:
			x.sync()
		}
	}
}

func (x *index) sync() {
	if x.dirty.Swap(false) {
		if err := x.logSync(); err != nil {
			x.logf(slog.LevelWarn, "index group commit: %v", err)
		}
	}
}

// commit applies b without waiting for a WAL sync.
func (x *index) commit(b *pebble.Batch) error {
	if err := x.guard.Do(func() error { return b.Commit(pebble.NoSync) }); err != nil {
		return fmt.Errorf("%s: index commit: %v: %w", x.name, err, storeErrno(err))
	}
	x.dirty.Store(true)
	return nil
}

// logSync makes every commit so far durable.
func (x *index) logSync() error {
	return x.guard.Do(func() error { return x.db.LogData(nil, pebble.Sync) })
}

// storeErrno is the errno of a failed commit (storeguard.Errno).
var storeErrno = storeguard.Errno

// abort closes the index without marking it clean, so the next start
// reconciles it (an Open that failed half way).
func (x *index) abort() {
	close(x.stop)
	<-x.done
	x.db.Close()
}

// close syncs, marks the index clean and closes it. A failed index is
// left behind unmarked (the next open reconciles it with the objects):
// its commit pipeline may be stuck.
func (x *index) close() error {
	close(x.stop)
	<-x.done
	if x.guard.Err() != nil {
		go func() {
			defer func() { _ = recover() }()
			_ = x.db.Close()
		}()
		return nil
	}
	if err := x.guard.Do(func() error { return x.db.Set(keyClean, nil, pebble.Sync) }); err != nil {
		x.logf(slog.LevelWarn, "index: mark clean: %v", err)
	}
	return x.db.Close()
}

func (x *index) object(id proto.ObjID) (objRecord, bool, error) {
	var r objRecord
	v, closer, err := x.db.Get(objKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("%s: index: object %s: %v: %w", x.name, id, err, syscall.EIO)
	}
	defer closer.Close()
	if err := r.unmarshal(v); err != nil {
		return r, false, fmt.Errorf("%s: index: object %s corrupt: %v: %w", x.name, id, err, syscall.EIO)
	}
	return r, true, nil
}

// scan calls fn for every object record and every grant record.
func (x *index) scan(obj func(proto.ObjID, objRecord), grant func(uint64, uint64)) error {
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kGrant}, UpperBound: []byte{kObject + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		switch k[0] {
		case kObject:
			id, ok := parseObjKey(k)
			var r objRecord
			if !ok || r.unmarshal(it.Value()) != nil {
				x.logf(slog.LevelWarn, "index: skipping a corrupt object record %x", k)
				continue
			}
			obj(id, r)
		case kGrant:
			var g grantRecord
			if len(k) != 9 || g.unmarshal(it.Value()) != nil {
				x.logf(slog.LevelWarn, "index: skipping a corrupt grant record %x", k)
				continue
			}
			grant(binary.BigEndian.Uint64(k[1:]), g.Grant)
		}
	}
	return it.Error()
}

// reconcile makes the object records agree with the object files after an
// unclean stop: sizes and blocks from fstat, records for files the index
// lost (owner from the file's xattr), no records for files that are gone.
// An inline object's record and bytes were committed together: it is
// kept, and a file beside it deleted.
// The grants are kept as recorded: at worst they are a group commit old.
func (o *OST) reconcile() error {
	start := time.Now()
	recs := map[proto.ObjID]objRecord{}
	if err := o.idx.scan(func(id proto.ObjID, r objRecord) { recs[id] = r }, func(uint64, uint64) {}); err != nil {
		return fmt.Errorf("%s: reconcile: %w", o.name, err)
	}
	b := o.idx.db.NewBatch()
	var fixed, added, dropped int
	subs, err := os.ReadDir(o.dir)
	if err != nil {
		return fmt.Errorf("%s: reconcile: %w", o.name, err)
	}
	seen := map[proto.ObjID]bool{}
	for _, s := range subs {
		ents, err := os.ReadDir(filepath.Join(o.dir, s.Name()))
		if err != nil {
			continue
		}
		for _, e := range ents {
			id, ok := parseObjName(e.Name())
			if !ok {
				continue
			}
			var st unix.Stat_t
			p := filepath.Join(o.dir, s.Name(), e.Name())
			if err := unix.Stat(p, &st); err != nil {
				continue
			}
			seen[id] = true
			r, had := recs[id]
			if had && r.Inline {
				// A spill that crashed before its record said so: the
				// inline bytes are the object (inline.go).
				if err := o.fs.Remove(p); err != nil {
					return fmt.Errorf("%s: reconcile: %w", o.name, err)
				}
				fixed++
				continue
			}
			owner := r.Owner
			// The file's owner xattr, when it has one, wins: it is written
			// before the blocks of the write it names, so it is never older
			// than what the file holds, while the record can be (its
			// settle batch lost with the WAL tail).
			if x, ok := ownerXattrOf(p); ok {
				owner = x
			}
			nb, ns := uint64(st.Blocks)*512, uint64(st.Size)
			if had && r.Bytes == nb && r.Size == ns && r.Owner == owner {
				continue
			}
			r.Owner, r.Bytes, r.Size = owner, nb, ns
			b.Set(objKey(id), r.marshal(), nil)
			if had {
				fixed++
			} else {
				added++
			}
		}
	}
	for id, r := range recs {
		if !seen[id] && !r.Inline {
			b.Delete(objKey(id), nil)
			dropped++
		}
	}
	if err := o.idx.guard.Do(func() error { return b.Commit(pebble.Sync) }); err != nil {
		return fmt.Errorf("%s: reconcile: commit: %w", o.name, err)
	}
	if len(seen)+dropped > 0 {
		o.logf(slog.LevelInfo, "index reconciled with the object files (unclean stop or new index) in %v: %d objects, %d corrected, %d added, %d dropped", time.Since(start).Round(time.Millisecond), len(seen), fixed, added, dropped)
	}
	return nil
}

// readOwnerXattr reads the owner an object file was created for; the zero
// owner (root) when the file has none.
func readOwnerXattr(path string) proto.Owner {
	ow, _ := ownerXattrOf(path)
	return ow
}

// ownerXattrOf reads an object file's owner xattr; ok is false when the
// file has none.
func ownerXattrOf(path string) (ow proto.Owner, ok bool) {
	buf := make([]byte, 64)
	n, err := unix.Getxattr(path, ownerXattr, buf)
	if err != nil || wire.Unmarshal(buf[:n], &ow) != nil {
		return proto.Owner{}, false
	}
	return ow, true
}
