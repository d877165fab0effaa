package storeguard

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// full is a disk that can be made to refuse writes with ENOSPC.
type full struct{ on atomic.Bool }

func (f *full) String() string { return "full disk" }
func (f *full) MaybeError(op errorfs.Op) error {
	if f.on.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
		return fmt.Errorf("%v %s: %w", op.Kind, op.Path, syscall.ENOSPC)
	}
	return nil
}

func open(t *testing.T, fs vfs.FS) (*pebble.DB, *Guard) {
	t.Helper()
	g := New("test")
	db, err := pebble.Open("/db", &pebble.Options{FS: g.FS(fs), Logger: g.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	return db, g
}

func set(g *Guard, db *pebble.DB, k string, sync bool) error {
	opt := pebble.NoSync
	if sync {
		opt = pebble.Sync
	}
	return g.Do(func() error { return db.Set([]byte(k), []byte("v"), opt) })
}

// A commit that fails on a full disk is Pebble's fatal error: the
// request gets ENOSPC, the process goes on, reads still work, later
// changes are refused at once, and the directory opens again in this
// process once the disk has room, with what was synced.
func TestFatalCommitBecomesErrno(t *testing.T) {
	disk := &full{}
	fs := errorfs.Wrap(vfs.NewMem(), disk)
	db, g := open(t, fs)
	if err := set(g, db, "synced", true); err != nil {
		t.Fatal(err)
	}
	disk.on.Store(true)
	err := set(g, db, "lost", true)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("commit on a full disk: %v, want ENOSPC", err)
	}
	select {
	case <-g.Failed():
	default:
		t.Fatal("guard not failed after a fatal commit error")
	}
	if !g.NoSpace() {
		t.Error("NoSpace false after ENOSPC")
	}
	if v, closer, err := db.Get([]byte("synced")); err != nil || string(v) != "v" {
		t.Errorf("read after the failure: %q, %v", v, err)
	} else {
		closer.Close()
	}
	start := time.Now()
	if err := set(g, db, "later", false); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("change after the failure: %v, want ENOSPC", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("a refused change took %v", d)
	}
	disk.on.Store(false)
	// The abandoned database stays fenced even with room on the disk.
	if err := set(g, db, "fenced", true); err == nil {
		t.Error("the failed database took a change")
	}
	db2, g2 := open(t, fs)
	defer db2.Close()
	if v, closer, err := db2.Get([]byte("synced")); err != nil || string(v) != "v" {
		t.Errorf("synced key after reopening: %q, %v", v, err)
	} else {
		closer.Close()
	}
	if err := set(g2, db2, "after", true); err != nil {
		t.Errorf("commit after reopening: %v", err)
	}
}

// A failing disk (EIO) leaves the store read-only: EIO for the request
// that met it, EROFS for the changes after.
func TestFailingDiskReadOnly(t *testing.T) {
	var on atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if on.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return syscall.EIO
		}
		return nil
	}))
	db, g := open(t, fs)
	on.Store(true)
	if err := set(g, db, "k", true); !errors.Is(err, syscall.EIO) {
		t.Fatalf("commit on a failing disk: %v, want EIO", err)
	}
	if err := set(g, db, "k2", false); !errors.Is(err, syscall.EROFS) {
		t.Errorf("change after: %v, want EROFS", err)
	}
	if g.NoSpace() {
		t.Error("NoSpace after EIO")
	}
}

// A panic in Do that is not Pebble's fatal error is not swallowed.
func TestDoRepanics(t *testing.T) {
	g := New("test")
	defer func() {
		if r := recover(); r != "boom" {
			t.Errorf("recovered %v, want boom", r)
		}
	}()
	_ = g.Do(func() error { panic("boom") })
}

// fakeTarget is a target whose store fails on demand.
type fakeTarget struct {
	g      *Guard
	served chan net.Listener
	closed atomic.Bool
}

func (f *fakeTarget) Serve(l net.Listener) error   { f.served <- l; return nil }
func (f *fakeTarget) StoreFailed() <-chan struct{} { return f.g.Failed() }
func (f *fakeTarget) StoreNoSpace() bool           { return f.g.NoSpace() }
func (f *fakeTarget) Close() error                 { f.closed.Store(true); return nil }

// The runner waits for room before it reopens a target whose store
// failed for want of space, then serves the new one on a new listener.
func TestRunnerReopensWhenRoom(t *testing.T) {
	oldPoll := Poll
	Poll = 10 * time.Millisecond
	defer func() { Poll = oldPoll }()
	served := make(chan net.Listener, 4)
	first := &fakeTarget{g: New("t"), served: served}
	var room atomic.Bool
	var opened atomic.Int32
	r := Run("t", first,
		func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") },
		func(net.Listener) (*fakeTarget, error) {
			opened.Add(1)
			return &fakeTarget{g: New("t"), served: served}, nil
		},
		room.Load)
	first.g.Fail(fmt.Errorf("wal: %w", syscall.ENOSPC))
	time.Sleep(100 * time.Millisecond)
	if opened.Load() != 0 || first.closed.Load() {
		t.Fatal("reopened before the disk had room")
	}
	room.Store(true)
	select {
	case l := <-served:
		l.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("not reopened once the disk had room")
	}
	if !first.closed.Load() || r.Current() == first || r.Reopens() != 1 {
		t.Errorf("closed %v, current is first %v, reopens %d", first.closed.Load(), r.Current() == first, r.Reopens())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if !r.Current().closed.Load() {
		t.Error("Close did not close the current target")
	}
}

// A flush that meets a full disk fails the store before the memtables
// fill and commits stall for good: writes are refused at once. (A commit
// already caught in a stall stays there; with an MDT's 4 MiB memtables
// that takes thousands of changes within the milliseconds a flush needs
// to fail, and the runner does not wait for it.)
func TestFullDiskAtFlushRefusesBeforeStall(t *testing.T) {
	var on atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		// Tables only: the WAL still takes writes, as a preallocated one
		// does on a real disk.
		if on.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasSuffix(op.Path, ".sst") {
			return syscall.ENOSPC
		}
		return nil
	}))
	g := New("test")
	opts := &pebble.Options{}
	g.Configure(opts, fs)
	db, err := pebble.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	on.Store(true)
	val := make([]byte, 1<<10)
	for i := 0; i < 16<<10; i++ { // 16 MiB: four memtables' worth
		if err = g.Do(func() error { return db.Set([]byte(fmt.Sprint("k", i)), val, pebble.NoSync) }); err != nil {
			break
		}
		time.Sleep(time.Microsecond) // a metadata server's pace, not a tight loop's
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writes with flushes failing: %v, want ENOSPC", err)
	}
	start := time.Now()
	if err := set(g, db, "later", false); !errors.Is(err, syscall.ENOSPC) || time.Since(start) > 100*time.Millisecond {
		t.Errorf("a change after the failed flush: %v after %v, want ENOSPC at once", err, time.Since(start))
	}
}
