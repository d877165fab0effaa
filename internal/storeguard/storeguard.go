// Package storeguard keeps a target's process alive when its Pebble
// store fails.
//
// Pebble treats a failed commit (a WAL write or sync that returned an
// error: a full disk, a failing one) and a failed MANIFEST write as
// fatal: it calls its Logger's Fatalf, and its commit pipeline is left
// unusable. With the standard logger that ends the process, and under
// `stripefs up` every server and the mount with it. A Guard instead:
//
//   - turns the fatal error into an errno for the request whose commit
//     hit it (Fatalf panics, and Do, which wraps every commit, recovers),
//   - fences the store: its filesystem refuses every further write, so
//     the abandoned database's background work can neither change the
//     directory nor be mistaken for progress, and it lets go of the
//     directory's lock, so that a new database can be opened on the same
//     directory in this process,
//   - marks the target failed (Failed, Err), so that changes are refused
//     at once with ENOSPC or EROFS while reads go on from what the store
//     holds, until the target's runner reopens it (Runner).
//
// Fatalf called by one of Pebble's own goroutines (a MANIFEST write of a
// flush or compaction) cannot return an error to anyone: that goroutine
// is parked for good instead of ending the process; its database is
// abandoned anyway.
package storeguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/stripefs/stripefs/proto"
)

// Guard watches one Pebble store. The zero value is not usable; use New.
type Guard struct {
	name string
	log  *slog.Logger // with the target's name, as Lustre writes it

	failed   atomic.Pointer[failure]
	failedCh chan struct{}

	lockMu sync.Mutex
	locks  []*onceCloser

	errMu   sync.Mutex
	errLast time.Time
}

type failure struct{ err error }

// New returns a guard for the store of the target called name (mdt0,
// ost3), which prefixes its errors and log lines.
func New(name string) *Guard {
	return &Guard{name: name, log: slog.With("target", lustreName(name)), failedCh: make(chan struct{})}
}

// lustreName is mdt1 as MDT0001, ost10 as OST000a (proto.TargetName);
// other names as they are.
func lustreName(name string) string {
	for _, kind := range []string{proto.KindMDT, proto.KindOST} {
		if rest, ok := strings.CutPrefix(name, kind); ok {
			if n, err := strconv.ParseUint(rest, 10, 32); err == nil {
				return proto.TargetName(kind, uint32(n))
			}
		}
	}
	return name
}

// ErrFenced is what a fenced store's filesystem answers to writes.
var ErrFenced = errors.New("store fenced after a fatal error")

// Configure makes opts open a store this guard watches, on fs: its
// filesystem fenced by the guard, its log and its background errors
// reported to it.
func (g *Guard) Configure(opts *pebble.Options, fs vfs.FS) {
	opts.FS = g.FS(fs)
	opts.Logger = g.Logger()
	opts.EventListener = &pebble.EventListener{BackgroundError: g.backgroundError}
}

// backgroundError fails the store when a flush or compaction meets a
// full or failing disk. Pebble retries those, but while it does, writes
// fill the memtables until commits stall for good, holding whatever
// locks their callers hold: refusing changes at the first such error
// keeps the target answering.
func (g *Guard) backgroundError(err error) {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EIO) {
		g.Fail(fmt.Errorf("background: %w", err))
		return
	}
	g.Logger().Errorf("background error: %s", err)
}

// FS wraps the filesystem the store is opened on, so that Fail can fence
// it and release its lock. Open the database on the returned FS.
func (g *Guard) FS(inner vfs.FS) vfs.FS {
	return &fencedFS{FS: errorfs.Wrap(inner, g), g: g}
}

// MaybeError is the fence (errorfs.Injector): once the store failed,
// every operation that would change the directory fails.
func (g *Guard) MaybeError(op errorfs.Op) error {
	if g.failed.Load() == nil || op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	return fmt.Errorf("%s: %v %s: %w", g.name, op.Kind, op.Path, ErrFenced)
}

// String names the injector.
func (g *Guard) String() string { return g.name + " store fence" }

// Err is nil while the store works, and after its failure an error for
// a change that cannot be made: ENOSPC if the disk was full, EROFS
// otherwise (a failing disk: the target is read-only until it is
// reopened).
func (g *Guard) Err() error {
	f := g.failed.Load()
	if f == nil {
		return nil
	}
	return f.err
}

// Failed is closed when the store fails.
func (g *Guard) Failed() <-chan struct{} { return g.failedCh }

// NoSpace says whether the store failed for want of space (so that its
// runner waits for space before it reopens it).
func (g *Guard) NoSpace() bool {
	err := g.Err()
	return err != nil && errors.Is(err, syscall.ENOSPC)
}

// Fail marks the store failed with cause, fences its filesystem and
// releases its lock. Only the first failure counts; it is logged once.
func (g *Guard) Fail(cause error) {
	errno := syscall.EROFS
	if errors.Is(cause, syscall.ENOSPC) {
		errno = syscall.ENOSPC
	}
	f := &failure{fmt.Errorf("%s: store failed (%v), read-only until it is reopened: %w", g.name, cause, errno)}
	if !g.failed.CompareAndSwap(nil, f) {
		return
	}
	g.log.Error(g.name+": store failed; changes are refused and reads go on until it is reopened", "err", cause, "errno", errno.Error())
	g.lockMu.Lock()
	for _, l := range g.locks {
		_ = l.Close()
	}
	g.lockMu.Unlock()
	close(g.failedCh)
}

// fatalPanic carries a Fatalf from inside Do to Do's recover.
type fatalPanic struct{ err error }

// Do runs f, a call that may commit to the store, and returns its error,
// or the store's failure: at once if the store already failed, or when f
// ends in Pebble's Fatalf.
//
//go:noinline
func (g *Guard) Do(f func() error) (err error) {
	if e := g.Err(); e != nil {
		return e
	}
	defer func() {
		if r := recover(); r != nil {
			fp, ok := r.(fatalPanic)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%s: commit: %v: %w", g.name, fp.err, g.errno())
		}
	}()
	return f()
}

// Errno is the errno of a failed commit: the guard's (ENOSPC, EROFS) when
// the store failed, EIO for any other error.
func Errno(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}

// errno is the request's errno for the failure that just happened: the
// disk's ENOSPC, or EIO for anything else (later changes get EROFS).
func (g *Guard) errno() syscall.Errno {
	if g.NoSpace() {
		return syscall.ENOSPC
	}
	return syscall.EIO
}

// Logger is the store's Pebble logger, into slog with the target's name:
// Infof at Debug, Errorf at Error at most once a second (a fenced store's
// background work fails over and over), Fatalf as the package comment
// says.
func (g *Guard) Logger() Logger { return Logger{g} }

// Logger is a pebble.Logger bound to a Guard.
type Logger struct{ g *Guard }

// Infof logs Pebble's informational lines at Debug.
func (l Logger) Infof(format string, args ...any) {
	if l.g.log.Enabled(context.Background(), slog.LevelDebug) {
		l.g.log.Debug("pebble: " + fmt.Sprintf(format, args...))
	}
}

// Errorf logs Pebble's error lines, at most one a second, and none once
// the store is fenced: its abandoned work only fails.
func (l Logger) Errorf(format string, args ...any) {
	g := l.g
	if g.failed.Load() != nil {
		return
	}
	g.errMu.Lock()
	now := time.Now()
	quiet := now.Sub(g.errLast) < time.Second
	if !quiet {
		g.errLast = now
	}
	g.errMu.Unlock()
	if !quiet {
		g.log.Error(g.name + ": pebble: " + fmt.Sprintf(format, args...))
	}
}

// Fatalf fails the store. Called under Do (a commit), it unwinds to Do,
// which returns the error; called from one of Pebble's own goroutines, it
// parks that goroutine: the database it belongs to is abandoned.
func (l Logger) Fatalf(format string, args ...any) {
	err := fatalError(format, args)
	l.g.Fail(err)
	if underDo() {
		panic(fatalPanic{err})
	}
	select {}
}

// fatalError is Fatalf's message as an error that keeps the cause among
// args (so errors.Is finds ENOSPC).
func fatalError(format string, args []any) error {
	msg := fmt.Sprintf(format, args...)
	for _, a := range args {
		if e, ok := a.(error); ok {
			return &causeError{msg: msg, cause: e}
		}
	}
	return errors.New(msg)
}

type causeError struct {
	msg   string
	cause error
}

func (e *causeError) Error() string { return e.msg }
func (e *causeError) Unwrap() error { return e.cause }

// underDo says whether the calling goroutine is inside Guard.Do. Only a
// fatal error pays for the look at the stack.
func underDo() bool {
	pcs := make([]uintptr, 256)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		fr, more := frames.Next()
		if strings.HasSuffix(fr.Function, "storeguard.(*Guard).Do") {
			return true
		}
		if !more {
			return false
		}
	}
}

// fencedFS releases its locks when the guard fails, so that the
// directory can be opened again in this process.
type fencedFS struct {
	*errorfs.FS
	g *Guard
}

func (fs *fencedFS) Lock(name string) (io.Closer, error) {
	c, err := fs.FS.Lock(name)
	if err != nil {
		return nil, err
	}
	oc := &onceCloser{c: c}
	fs.g.lockMu.Lock()
	fs.g.locks = append(fs.g.locks, oc)
	fs.g.lockMu.Unlock()
	return oc, nil
}

// onceCloser closes its lock once, whether the guard or the database
// gets there first (Pebble's own lock panics when closed twice).
type onceCloser struct {
	once sync.Once
	c    io.Closer
	err  error
}

func (o *onceCloser) Close() error {
	o.once.Do(func() { o.err = o.c.Close() })
	return o.err
}
