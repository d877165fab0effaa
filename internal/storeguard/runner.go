package storeguard

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Target is a server whose store a Guard watches.
type Target interface {
	// Serve answers requests on l until Close.
	Serve(l net.Listener) error
	// StoreFailed is closed when the target's store fails.
	StoreFailed() <-chan struct{}
	// StoreNoSpace says whether it failed for want of space.
	StoreNoSpace() bool
	// Close stops serving; after a failure it leaves the failed store
	// behind without waiting for it.
	Close() error
}

// Runner keeps a target serving on one address across failures of its
// store. While the store is failed the target goes on serving what it
// can (reads); once the disk has room again (a failure for want of
// space) or after a pause (any other), the runner closes it and opens
// it anew on the same address, which its clients see as a restart: they
// reconnect and replay. The process never exits for it.
type Runner[T Target] struct {
	name   string
	listen func() (net.Listener, error)
	open   func(net.Listener) (T, error)
	room   func() bool

	mu      sync.Mutex
	cur     T
	serving bool

	reopens atomic.Int64
	stop    chan struct{}
	done    chan struct{}
}

// Poll is how often a runner looks at the disk of a target whose store
// failed for want of space; Pause how long it waits before reopening a
// store that failed for another reason (and between attempts that fail).
var (
	Poll  = time.Second
	Pause = 5 * time.Second
)

// Run watches t, which serves on an address listen can listen on again.
// open opens the target anew, to serve on l (the runner then calls
// Serve); room says whether its disk has room for its store to be
// reopened.
func Run[T Target](name string, t T, listen func() (net.Listener, error), open func(l net.Listener) (T, error), room func() bool) *Runner[T] {
	r := &Runner[T]{name: name, listen: listen, open: open, room: room, cur: t, serving: true,
		stop: make(chan struct{}), done: make(chan struct{})}
	go r.watch()
	return r
}

// Current is the target serving now (the last one opened).
func (r *Runner[T]) Current() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// Reopens counts the times the target was opened anew.
func (r *Runner[T]) Reopens() int64 { return r.reopens.Load() }

// Close stops watching and closes the target.
func (r *Runner[T]) Close() error {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.serving {
		return nil
	}
	r.serving = false
	select {
	case <-r.cur.StoreFailed():
		return closeWithin(r.cur, closeWait)
	default:
		return r.cur.Close() // a healthy store's final commit is waited for
	}
}

// closeWait bounds the wait for a failed target to close: a request
// caught in a stalled commit of its store never ends. Closing stops its
// listener and connections first, so the address is free for the new
// target and the clients resend there.
const closeWait = 5 * time.Second

func closeWithin(t Target, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- t.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return errors.New("close did not finish: a request is stuck in the failed store; left behind")
	}
}

func (r *Runner[T]) watch() {
	defer close(r.done)
	for {
		cur := r.Current()
		select {
		case <-r.stop:
			return
		case <-cur.StoreFailed():
		}
		if !r.waitForRoom(cur) {
			return
		}
		for !r.reopen() {
			select {
			case <-r.stop:
				return
			case <-time.After(Pause):
			}
		}
	}
}

// waitForRoom waits until the failed target's disk can take its store
// again; false if the runner was closed meanwhile.
func (r *Runner[T]) waitForRoom(cur T) bool {
	wait := Pause
	if cur.StoreNoSpace() {
		wait = Poll
	}
	for {
		select {
		case <-r.stop:
			return false
		case <-time.After(wait):
		}
		if !cur.StoreNoSpace() || r.room() {
			return true
		}
	}
}

// reopen closes the failed target and opens it anew on its address.
func (r *Runner[T]) reopen() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.serving {
		if err := closeWithin(r.cur, closeWait); err != nil {
			slog.Warn(r.name+": "+err.Error(), "target", lustreName(r.name))
		}
		r.serving = false
	}
	l, err := r.listen()
	if err != nil {
		slog.Error(r.name+": reopen: listen", "target", lustreName(r.name), "err", err)
		return false
	}
	t, err := r.open(l)
	if err != nil {
		l.Close()
		slog.Error(r.name+": reopen", "target", lustreName(r.name), "err", err)
		return false
	}
	r.cur, r.serving = t, true
	r.reopens.Add(1)
	go t.Serve(l)
	slog.Info(r.name+": store reopened; serving again", "target", lustreName(r.name))
	return true
}

// HasRoom says whether the filesystem of dir has room for a store to be
// reopened and to take changes again: need bytes free for unprivileged
// writers.
func HasRoom(dir string, need uint64) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	return st.Bavail*uint64(st.Bsize) >= need
}
