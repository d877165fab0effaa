package ldlm

import (
	"errors"
	"fmt"
	"slices"

	"github.com/stripefs/stripefs/proto"
)

// Application locks: POSIX record locks (fcntl F_SETLK and OFD locks,
// which the kernel hands over alike, told apart by their owners) and BSD
// flock locks, as one host's kernel keeps them but for every client of
// the filesystem at once. Flocks decides: what conflicts, how a request
// splits, merges and converts its owner's locks, whom a waiter waits for
// and whether that wait closes a cycle (EDEADLK), and which waiters a
// change lets go. Waiting and waking are the lock server's.
//
// POSIX locks and flock locks live apart and never conflict with each
// other, as on Linux. Ranges are [Start, End), End may be EOF.

// FlockKind says which family a lock belongs to.
type FlockKind uint8

const (
	FlockPOSIX FlockKind = 1 // fcntl and OFD record locks
	FlockBSD   FlockKind = 2 // flock(2): whole-file
)

// FlockType is a lock's type.
type FlockType uint8

const (
	FlockRead  FlockType = 1
	FlockWrite FlockType = 2
)

// FlockOwner is who holds a lock: a client and the owner id its kernel
// gave (a process's file table for fcntl locks, an open file for OFD and
// flock locks).
type FlockOwner struct {
	Client string
	ID     uint64
}

// Flock is a held lock, or what a request asks for.
type Flock struct {
	Res   proto.FID
	Kind  FlockKind
	Owner FlockOwner
	Type  FlockType
	Start uint64
	End   uint64
	Pid   uint32 // the locking process as its client sees it, for F_GETLK
}

// Errors of Flocks.
var (
	ErrDeadlock   = errors.New("ldlm: the wait would close a cycle of waiting lock owners")
	ErrWouldBlock = errors.New("ldlm: a conflicting lock is held")
)

func (l *Flock) overlaps(s, e uint64) bool { return l.Start < e && s < l.End }

func (l *Flock) conflicts(o *Flock) bool {
	return l.Owner != o.Owner && l.Kind == o.Kind && l.Res == o.Res && l.overlaps(o.Start, o.End) &&
		(l.Type == FlockWrite || o.Type == FlockWrite)
}

type flockKey struct {
	res  proto.FID
	kind FlockKind
}

// FlockWaiter is a request waiting for conflicting locks to go.
type FlockWaiter struct {
	ID  uint64
	Req Flock
}

// Flocks is every application lock of one lock server.
type Flocks struct {
	held    map[flockKey][]*Flock
	waiting map[flockKey][]*FlockWaiter
	byID    map[uint64]*FlockWaiter
	next    uint64
}

// NewFlocks returns an empty table.
func NewFlocks() *Flocks {
	return &Flocks{held: map[flockKey][]*Flock{}, waiting: map[flockKey][]*FlockWaiter{}, byID: map[uint64]*FlockWaiter{}}
}

// CheckFlock validates a request.
func CheckFlock(r *Flock) error {
	switch {
	case r.Owner.Client == "":
		return fmt.Errorf("%w: flock without an owner", ErrInvalid)
	case r.Kind != FlockPOSIX && r.Kind != FlockBSD:
		return fmt.Errorf("%w: flock kind %d", ErrInvalid, r.Kind)
	case r.Type != FlockRead && r.Type != FlockWrite:
		return fmt.Errorf("%w: flock type %d", ErrInvalid, r.Type)
	case r.Start >= r.End:
		return fmt.Errorf("%w: empty or reversed range [%d, %d)", ErrInvalid, r.Start, r.End)
	case r.Kind == FlockBSD && (r.Start != 0 || r.End != EOF):
		return fmt.Errorf("%w: a flock lock covers the whole file", ErrInvalid)
	}
	return nil
}

// Test returns the lock that keeps r from being granted (F_GETLK), the
// one starting lowest as Linux's sorted lock lists give it, or nil.
func (f *Flocks) Test(r Flock) *Flock {
	var first *Flock
	for _, h := range f.held[flockKey{r.Res, r.Kind}] {
		if h.conflicts(&r) && (first == nil || h.Start < first.Start) {
			first = h
		}
	}
	if first == nil {
		return nil
	}
	c := *first
	return &c
}

// Set grants r now if nothing conflicts, replacing, splitting and merging
// what its owner held in the range. Otherwise, without wait it fails with
// ErrWouldBlock; with wait it queues r (queued is its waiter) unless the
// wait would close a cycle of waiting POSIX owners (ErrDeadlock). A flock
// conversion gives up the owner's old lock first, as Linux does. woken
// are other waiters the change let go (a downgrade, a conversion), their
// requests granted.
func (f *Flocks) Set(r Flock, wait bool) (queued *FlockWaiter, woken []*FlockWaiter, err error) {
	if err := CheckFlock(&r); err != nil {
		return nil, nil, err
	}
	k := flockKey{r.Res, r.Kind}
	if r.Kind == FlockBSD && f.unlock(r.Res, r.Kind, r.Owner, 0, EOF) {
		defer func() { woken = append(woken, f.wake(k)...) }()
	}
	if f.Test(r) == nil {
		f.apply(r)
		return nil, f.wake(k), nil
	}
	if !wait {
		return nil, nil, ErrWouldBlock
	}
	if r.Kind == FlockPOSIX && f.closesCycle(r) {
		return nil, nil, ErrDeadlock
	}
	f.next++
	w := &FlockWaiter{ID: f.next, Req: r}
	f.waiting[k] = append(f.waiting[k], w)
	f.byID[w.ID] = w
	return w, nil, nil
}

// closesCycle reports whether r's owner waiting for the holders that
// block it would close a cycle: one of them waits, directly or through
// others, for r's owner.
func (f *Flocks) closesCycle(r Flock) bool {
	seen := map[FlockOwner]bool{}
	var reaches func(o FlockOwner, depth int) bool
	reaches = func(o FlockOwner, depth int) bool {
		if o == r.Owner {
			return true
		}
		if seen[o] || depth > 1024 {
			return false
		}
		seen[o] = true
		for _, w := range f.byID {
			if w.Req.Owner != o || w.Req.Kind != FlockPOSIX {
				continue
			}
			for _, b := range f.blockers(w.Req) {
				if reaches(b, depth+1) {
					return true
				}
			}
		}
		return false
	}
	for _, b := range f.blockers(r) {
		if reaches(b, 0) {
			return true
		}
	}
	return false
}

// blockers are the owners holding locks that conflict with r.
func (f *Flocks) blockers(r Flock) []FlockOwner {
	var out []FlockOwner
	for _, h := range f.held[flockKey{r.Res, r.Kind}] {
		if h.conflicts(&r) && !slices.Contains(out, h.Owner) {
			out = append(out, h.Owner)
		}
	}
	return out
}

// apply puts r in place of whatever its owner held in its range, merged
// with the owner's adjacent or overlapping locks of the same type.
func (f *Flocks) apply(r Flock) {
	k := flockKey{r.Res, r.Kind}
	f.unlock(r.Res, r.Kind, r.Owner, r.Start, r.End)
	n := r
	for merged := true; merged; {
		merged = false
		var keep []*Flock
		for _, h := range f.held[k] {
			if h.Owner == r.Owner && h.Type == r.Type && h.Start <= n.End && n.Start <= h.End {
				n.Start, n.End = min(n.Start, h.Start), max(n.End, h.End)
				merged = true
				continue
			}
			keep = append(keep, h)
		}
		f.held[k] = keep
	}
	f.held[k] = append(f.held[k], &n)
}

// unlock removes owner's locks in [s, e), splitting those that reach
// past it.
func (f *Flocks) unlock(res proto.FID, kind FlockKind, owner FlockOwner, s, e uint64) bool {
	k := flockKey{res, kind}
	var out []*Flock
	changed := false
	for _, h := range f.held[k] {
		if h.Owner != owner || !h.overlaps(s, e) {
			out = append(out, h)
			continue
		}
		changed = true
		if h.Start < s {
			left := *h
			left.End = s
			out = append(out, &left)
		}
		if h.End > e {
			right := *h
			right.Start = e
			out = append(out, &right)
		}
	}
	if len(out) == 0 {
		delete(f.held, k)
	} else {
		f.held[k] = out
	}
	return changed
}

// Unlock removes owner's locks of kind in [s, e) of res and returns the
// waiters that can now be granted (granted already: their requests are
// applied).
func (f *Flocks) Unlock(res proto.FID, kind FlockKind, owner FlockOwner, s, e uint64) []*FlockWaiter {
	if !f.unlock(res, kind, owner, s, e) {
		return nil
	}
	return f.wake(flockKey{res, kind})
}

// wake grants the waiters of k that nothing blocks any more, in order.
func (f *Flocks) wake(k flockKey) []*FlockWaiter {
	var granted []*FlockWaiter
	for progress := true; progress; {
		progress = false
		for i, w := range f.waiting[k] {
			if f.Test(w.Req) == nil {
				f.waiting[k] = slices.Delete(f.waiting[k], i, i+1)
				delete(f.byID, w.ID)
				f.apply(w.Req)
				granted = append(granted, w)
				progress = true
				break
			}
		}
	}
	if len(f.waiting[k]) == 0 {
		delete(f.waiting, k)
	}
	return granted
}

// Withdraw drops a waiter (its process was interrupted, or its client
// went). A waiter holds nothing, so no one else is let go.
func (f *Flocks) Withdraw(id uint64) {
	w := f.byID[id]
	if w == nil {
		return
	}
	delete(f.byID, id)
	k := flockKey{w.Req.Res, w.Req.Kind}
	f.waiting[k] = slices.DeleteFunc(f.waiting[k], func(x *FlockWaiter) bool { return x == w })
	if len(f.waiting[k]) == 0 {
		delete(f.waiting, k)
	}
}

// Waiting reports whether waiter id is still queued.
func (f *Flocks) Waiting(id uint64) bool { return f.byID[id] != nil }

// DropClient removes every lock and waiter of client (evicted, or gone)
// and returns the waiters of others that are granted because of it.
func (f *Flocks) DropClient(client string) []*FlockWaiter {
	for id, w := range f.byID {
		if w.Req.Owner.Client == client {
			f.Withdraw(id)
		}
	}
	var touched []flockKey
	for k, hs := range f.held {
		out := slices.DeleteFunc(slices.Clone(hs), func(h *Flock) bool { return h.Owner.Client == client })
		if len(out) != len(hs) {
			touched = append(touched, k)
			if len(out) == 0 {
				delete(f.held, k)
			} else {
				f.held[k] = out
			}
		}
	}
	var granted []*FlockWaiter
	for _, k := range touched {
		granted = append(granted, f.wake(k)...)
	}
	return granted
}

// Replay puts back a lock its client held before the server restarted;
// it is refused if it conflicts with one held now.
func (f *Flocks) Replay(l Flock) error {
	if err := CheckFlock(&l); err != nil {
		return err
	}
	if c := f.Test(l); c != nil {
		return fmt.Errorf("%w: replayed flock on %s against one of %s", ErrConflict, l.Res, c.Owner.Client)
	}
	f.apply(l)
	return nil
}

// Held returns the locks held on res of kind, in no order (for tests and
// a client's record of its own).
func (f *Flocks) Held(res proto.FID, kind FlockKind) []Flock {
	var out []Flock
	for _, h := range f.held[flockKey{res, kind}] {
		out = append(out, *h)
	}
	return out
}

// HasOwner reports whether owner holds a lock of kind on res.
func (f *Flocks) HasOwner(res proto.FID, kind FlockKind, owner FlockOwner) bool {
	for _, h := range f.held[flockKey{res, kind}] {
		if h.Owner == owner {
			return true
		}
	}
	return false
}

// All returns every held lock, in no order.
func (f *Flocks) All() []Flock {
	var out []Flock
	for _, hs := range f.held {
		for _, h := range hs {
			out = append(out, *h)
		}
	}
	return out
}

// WaitersOf returns the ids of client's waiters.
func (f *Flocks) WaitersOf(client string) []uint64 {
	var out []uint64
	for id, w := range f.byID {
		if w.Req.Owner.Client == client {
			out = append(out, id)
		}
	}
	return out
}

// HoldsAnyBlocking reports whether a lock of client keeps a waiter of
// another client waiting.
func (f *Flocks) HoldsAnyBlocking(client string) bool {
	for _, w := range f.byID {
		if w.Req.Owner.Client == client {
			continue
		}
		for _, b := range f.blockers(w.Req) {
			if b.Client == client {
				return true
			}
		}
	}
	return false
}

// FlockStats are the table's sizes.
type FlockStats struct{ Held, Waiting int }

// Stats counts locks held and waiters.
func (f *Flocks) Stats() FlockStats {
	s := FlockStats{Waiting: len(f.byID)}
	for _, hs := range f.held {
		s.Held += len(hs)
	}
	return s
}
