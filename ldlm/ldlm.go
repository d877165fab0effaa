// Package ldlm decides locks, as Lustre's distributed lock manager does:
// which requests conflict, which are granted and how wide, whose locks
// must be called back, and what an eviction frees. It is a pure state
// machine in the manner of etcd's raft: no I/O, no clock, no goroutines.
// The lock server (mds/lockd) sends the callbacks it asks for, wakes the
// waiters it grants and evicts the clients that do not answer.
//
// Two kinds of lock guard what clients cache:
//
//   - Bits locks (Lustre's inodebits) on an inode's metadata: Lookup
//     guards the names that lead to the inode (a client's cached
//     directory entries), Update its attributes (and, for a regular
//     file, the size and mtime with them), Layout its layout. Clients
//     hold them in PR; the server takes them in EX for a change, which
//     calls every other client's conflicting PR back first.
//   - Extent locks on a file's data, byte ranges [Start, End): PR to read
//     and cache what was read, PW to write and cache dirty data. A PW
//     lock also conflicts with other clients' Update locks: while one
//     client may be writing, no other may cache the size.
//
// Locks of one client never conflict with each other: a client is one
// cache, and keeps it coherent itself. A server lock taken for a change a
// client asked for (Request.Server) does not conflict with that client's
// locks either: the client learns the change from its reply.
package ldlm

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/stripefs/stripefs/proto"
)

// Mode is a lock's mode.
type Mode uint8

const (
	PR Mode = 1 // protected read: shared with other PR locks
	PW Mode = 2 // protected write: one client at a time
	EX Mode = 3 // exclusive: a change the server makes
)

func (m Mode) String() string {
	switch m {
	case PR:
		return "PR"
	case PW:
		return "PW"
	case EX:
		return "EX"
	}
	return fmt.Sprintf("mode(%d)", m)
}

// Bits name the parts of an inode a Bits lock guards.
type Bits uint8

const (
	Lookup  Bits = 1 << iota // names leading to the inode
	Update                   // attributes
	Layout                   // layout
	AllBits = Lookup | Update | Layout
)

// Kind says what a lock guards.
type Kind uint8

const (
	KindBits   Kind = 1 // metadata, by Bits
	KindExtent Kind = 2 // data, by byte range
)

// EOF is the end of an extent that reaches to the end of the file,
// however far the file grows.
const EOF = math.MaxUint64

// ContendedGrowth bounds how far an extent that had to wait for a
// conflicting lock is widened: under contention a lock grows to the
// surrounding ContendedGrowth-aligned window (or Request.Align multiple),
// not to the whole gap, so clients writing their own parts of one file
// settle on their parts instead of taking the file from each other at
// every write.
const ContendedGrowth = 32 << 20

// ID names a lock (or a waiting request) in its namespace.
type ID uint64

// Lock is a granted lock or a waiting request.
type Lock struct {
	ID     ID
	Res    proto.FID
	Client string // its holder: a client UUID
	Kind   Kind
	Mode   Mode
	Bits   Bits   // KindBits
	Start  uint64 // KindExtent: [Start, End), End may be EOF
	End    uint64
	// Server marks a lock the server takes for a change Client asked
	// for: it conflicts with other clients' locks only.
	Server bool
	// Granted is false while the lock waits.
	Granted bool
	// CallbackSent is set once its holder has been asked to cancel it.
	CallbackSent bool
	// Want is the range the request asked for (extent locks), inside
	// [Start, End) once granted.
	WantStart, WantEnd uint64
	// Contended says the request waited or called locks back: its grant
	// is widened only within ContendedGrowth.
	Contended bool
	align     uint64
	seq       uint64 // arrival order in its resource
}

func (l *Lock) String() string {
	s := fmt.Sprintf("lock %d %s on %s by %s", l.ID, l.Mode, l.Res, l.Client)
	if l.Kind == KindBits {
		s += fmt.Sprintf(" bits %#x", l.Bits)
	} else {
		s += fmt.Sprintf(" [%d, %s)", l.Start, endString(l.End))
	}
	if l.Server {
		s += " (server)"
	}
	return s
}

func endString(e uint64) string {
	if e == EOF {
		return "EOF"
	}
	return fmt.Sprint(e)
}

// Request asks for a lock.
type Request struct {
	Res    proto.FID
	Client string
	Kind   Kind
	Mode   Mode
	Bits   Bits   // KindBits
	Start  uint64 // KindExtent: the range needed, [Start, End)
	End    uint64
	// Align (extents) keeps a widened grant's ends on multiples of it:
	// an erasure-coded file's rows, which a writer must hold whole.
	Align uint64
	// Server: a change the server makes on Client's behalf (see Lock).
	Server bool
	// Try grants at once or not at all: the request never waits and calls
	// nobody back. A client's metadata reply takes a lock this way.
	Try bool
}

// Errors of Enqueue and Replay.
var (
	ErrInvalid  = errors.New("ldlm: invalid lock request")
	ErrConflict = errors.New("ldlm: conflicts with a granted lock")
)

// Effects are what a step asks of the lock server: locks whose holders
// must be called back (each once), and waiting requests it granted.
type Effects struct {
	Callbacks []*Lock
	Granted   []*Lock
}

func (e *Effects) merge(o Effects) {
	e.Callbacks = append(e.Callbacks, o.Callbacks...)
	e.Granted = append(e.Granted, o.Granted...)
}

// resource is one inode's locks.
type resource struct {
	granted []*Lock
	waiting []*Lock // in arrival order
}

// Namespace is every lock of one lock server.
type Namespace struct {
	res      map[proto.FID]*resource
	byID     map[ID]*Lock
	byClient map[string]map[ID]*Lock
	next     ID
	seq      uint64
}

// New returns an empty namespace whose ids start after first: a
// restarted server starts past its last start's ids (a clock reading),
// so a replayed lock's id is never one it has given out again.
func New(first ID) *Namespace {
	return &Namespace{res: map[proto.FID]*resource{}, byID: map[ID]*Lock{}, byClient: map[string]map[ID]*Lock{}, next: first}
}

func (r *Request) check() error {
	switch {
	case r.Client == "":
		return fmt.Errorf("%w: no client", ErrInvalid)
	case r.Kind == KindBits && (r.Bits == 0 || r.Bits&^AllBits != 0):
		return fmt.Errorf("%w: bits %#x", ErrInvalid, r.Bits)
	case r.Kind == KindBits && r.Mode != PR && r.Mode != EX:
		return fmt.Errorf("%w: bits lock in mode %s", ErrInvalid, r.Mode)
	case r.Kind == KindExtent && (r.Mode != PR && r.Mode != PW):
		return fmt.Errorf("%w: extent lock in mode %s", ErrInvalid, r.Mode)
	case r.Kind == KindExtent && r.Start >= r.End:
		return fmt.Errorf("%w: empty extent [%d, %d)", ErrInvalid, r.Start, r.End)
	case r.Kind != KindBits && r.Kind != KindExtent:
		return fmt.Errorf("%w: kind %d", ErrInvalid, r.Kind)
	case r.Server && r.Try:
		return fmt.Errorf("%w: a server lock must be had", ErrInvalid)
	}
	return nil
}

// Conflicts reports whether a and b may not both be granted.
func Conflicts(a, b *Lock) bool {
	if a.Client == b.Client {
		return false
	}
	switch {
	case a.Kind == KindBits && b.Kind == KindBits:
		return a.Bits&b.Bits != 0 && !(a.Mode == PR && b.Mode == PR)
	case a.Kind == KindExtent && b.Kind == KindExtent:
		return a.Start < b.End && b.Start < a.End && !(a.Mode == PR && b.Mode == PR)
	case a.Kind == KindBits:
		return cross(a, b)
	default:
		return cross(b, a)
	}
}

// cross: a client's cached attributes (Update) against another's right
// to change the size and mtime (PW).
func cross(bits, ext *Lock) bool {
	return bits.Bits&Update != 0 && bits.Mode == PR && ext.Mode == PW
}

// Enqueue asks for a lock. It returns the lock, granted or waiting; a Try
// request that cannot be granted at once returns nil and changes nothing.
// A waiting lock is granted later by the Cancel or Evict whose Effects
// name it.
func (ns *Namespace) Enqueue(r Request) (*Lock, Effects, error) {
	if err := r.check(); err != nil {
		return nil, Effects{}, err
	}
	l := &Lock{Res: r.Res, Client: r.Client, Kind: r.Kind, Mode: r.Mode, Bits: r.Bits, Server: r.Server, align: max(r.Align, 1)}
	if r.Kind == KindExtent {
		l.Start, l.End = r.Start, r.End
		l.WantStart, l.WantEnd = r.Start, r.End
	}
	rs := ns.res[r.Res]
	if rs == nil {
		rs = &resource{}
	}
	if r.Try && r.Kind == KindBits {
		// The client holds these bits already (its cache expired, not its
		// lock): the lock it has is the answer.
		for _, g := range rs.granted {
			if g.Client == r.Client && g.Kind == KindBits && g.Mode == PR && !g.Server && !g.CallbackSent && g.Bits&r.Bits == r.Bits {
				return g, Effects{}, nil
			}
		}
	}
	blocked := ns.blockers(rs, l, len(rs.waiting))
	if len(blocked) == 0 {
		ns.admit(rs, l)
		ns.grant(rs, l)
		return l, Effects{}, nil
	}
	if r.Try {
		return nil, Effects{}, nil
	}
	ns.admit(rs, l)
	l.Contended = true
	rs.waiting = append(rs.waiting, l)
	return l, Effects{Callbacks: ns.callbacksFor(rs, l)}, nil
}

// admit gives l its identity (a new one unless l.ID is set and free)
// and files it under its resource and client.
func (ns *Namespace) admit(rs *resource, l *Lock) {
	ns.seq++
	l.seq = ns.seq
	if _, taken := ns.byID[l.ID]; l.ID != 0 && !taken {
		ns.next = max(ns.next, l.ID)
	} else {
		ns.next++
		l.ID = ns.next
	}
	ns.res[l.Res] = rs
	ns.byID[l.ID] = l
	m := ns.byClient[l.Client]
	if m == nil {
		m = map[ID]*Lock{}
		ns.byClient[l.Client] = m
	}
	m[l.ID] = l
}

// blockers are the locks that keep l from being granted: conflicting
// granted locks, and conflicting requests among the first upTo waiting
// (first come, first served).
func (ns *Namespace) blockers(rs *resource, l *Lock, upTo int) []*Lock {
	var out []*Lock
	for _, g := range rs.granted {
		if Conflicts(g, l) {
			out = append(out, g)
		}
	}
	for _, w := range rs.waiting[:upTo] {
		if w != l && Conflicts(w, l) {
			out = append(out, w)
		}
	}
	return out
}

// callbacksFor asks for the granted locks that block l and have not been
// called back yet.
func (ns *Namespace) callbacksFor(rs *resource, l *Lock) []*Lock {
	var out []*Lock
	for _, g := range rs.granted {
		if Conflicts(g, l) && !g.CallbackSent && !g.Server {
			g.CallbackSent = true
			out = append(out, g)
		}
	}
	return out
}

// grant moves l among the granted, widened as far as no other lock
// forbids.
func (ns *Namespace) grant(rs *resource, l *Lock) {
	l.Granted = true
	if l.Kind == KindExtent {
		l.Start, l.End = ns.widen(rs, l)
	}
	rs.granted = append(rs.granted, l)
}

// widen is the widest extent around l's request that overlaps no
// conflicting lock, granted or waiting, of another client (Lustre's
// extent policy); a contended request grows only within its
// ContendedGrowth window.
func (ns *Namespace) widen(rs *resource, l *Lock) (uint64, uint64) {
	lo, hi := uint64(0), uint64(EOF)
	probe := *l
	probe.Start, probe.End = 0, EOF
	for _, set := range [][]*Lock{rs.granted, rs.waiting} {
		for _, o := range set {
			if o == l || o.Kind != KindExtent || !Conflicts(&probe, o) {
				continue
			}
			if o.End <= l.WantStart {
				lo = max(lo, o.End)
			} else if o.Start >= l.WantEnd {
				hi = min(hi, o.Start)
			}
			// An overlapping waiter (it came later) bounds nothing: it
			// waits for l either way.
		}
	}
	if l.Contended {
		w := roundUp(ContendedGrowth, l.align)
		lo = max(lo, l.WantStart/w*w)
		if e := roundUpSat(l.WantEnd, w); e < hi {
			hi = e
		}
	}
	lo = roundUpSat(lo, l.align)
	if hi != EOF {
		hi = hi / l.align * l.align
	}
	// Rounding never loses what was asked for: the request's own ends are
	// multiples of align when align matters.
	lo, hi = min(lo, l.WantStart), max(hi, l.WantEnd)
	return lo, hi
}

func roundUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

// roundUpSat rounds n up to a multiple of a, or to EOF if that overflows.
func roundUpSat(n, a uint64) uint64 {
	if n == EOF || n > EOF-a {
		return EOF
	}
	return roundUp(n, a)
}

// Cancel drops a granted lock or withdraws a waiting request, and grants
// what that unblocks. Unknown ids (already cancelled, or evicted) are
// ignored.
func (ns *Namespace) Cancel(id ID) Effects {
	l := ns.byID[id]
	if l == nil {
		return Effects{}
	}
	rs := ns.res[l.Res]
	ns.remove(rs, l)
	return ns.reprocess(rs, l.Res)
}

// Downgrade turns granted PW extent lock id into PR: a writer that is
// done writing and keeps reading (Data-on-MDT, whose data and size are on
// the server once its close carried the write). Other clients' reads are
// granted beside it instead of calling it back, and their stats need not
// ask it for the size. A lock already called back is left alone (its
// holder is giving it up): false. A read lock is one already: true (a
// resent request's downgrade).
func (ns *Namespace) Downgrade(id ID) (Effects, bool) {
	l := ns.byID[id]
	if l == nil || !l.Granted || l.Kind != KindExtent {
		return Effects{}, false
	}
	if l.Mode == PR {
		return Effects{}, true
	}
	if l.Mode != PW || l.CallbackSent {
		return Effects{}, false
	}
	l.Mode = PR
	return ns.reprocess(ns.res[l.Res], l.Res), true
}

func (ns *Namespace) remove(rs *resource, l *Lock) {
	delete(ns.byID, l.ID)
	if m := ns.byClient[l.Client]; m != nil {
		delete(m, l.ID)
		if len(m) == 0 {
			delete(ns.byClient, l.Client)
		}
	}
	if l.Granted {
		rs.granted = slices.DeleteFunc(rs.granted, func(x *Lock) bool { return x == l })
	} else {
		rs.waiting = slices.DeleteFunc(rs.waiting, func(x *Lock) bool { return x == l })
	}
}

// reprocess grants the waiting requests of rs that nothing blocks any
// more, in order, and asks for the callbacks the rest still need.
func (ns *Namespace) reprocess(rs *resource, res proto.FID) Effects {
	var e Effects
	for i := 0; i < len(rs.waiting); {
		w := rs.waiting[i]
		if len(ns.blockers(rs, w, i)) == 0 {
			rs.waiting = slices.Delete(rs.waiting, i, i+1)
			ns.grant(rs, w)
			e.Granted = append(e.Granted, w)
			continue
		}
		e.Callbacks = append(e.Callbacks, ns.callbacksFor(rs, w)...)
		i++
	}
	if len(rs.granted) == 0 && len(rs.waiting) == 0 {
		delete(ns.res, res)
	}
	return e
}

// Evict drops every lock and request of client.
func (ns *Namespace) Evict(client string) Effects {
	var e Effects
	touched := map[proto.FID]*resource{}
	for _, l := range ns.byClient[client] {
		rs := ns.res[l.Res]
		ns.remove(rs, l)
		touched[l.Res] = rs
	}
	for res, rs := range touched {
		e.merge(ns.reprocess(rs, res))
	}
	return e
}

// Replay puts back a lock a client held before the server restarted
// (Lustre's lock replay), under its old id. It is refused if that id is
// taken or it conflicts with a lock granted meanwhile.
func (ns *Namespace) Replay(l Lock) (*Lock, error) {
	r := Request{Res: l.Res, Client: l.Client, Kind: l.Kind, Mode: l.Mode, Bits: l.Bits, Start: l.Start, End: l.End}
	if err := r.check(); err != nil || l.Server || l.ID == 0 {
		return nil, fmt.Errorf("%w: replay of %v", ErrInvalid, &l)
	}
	if ns.byID[l.ID] != nil {
		return nil, fmt.Errorf("%w: replay of %v: its id is taken", ErrConflict, &l)
	}
	rs := ns.res[l.Res]
	if rs == nil {
		rs = &resource{}
	}
	nl := &Lock{ID: l.ID, Res: l.Res, Client: l.Client, Kind: l.Kind, Mode: l.Mode, Bits: l.Bits, Start: l.Start, End: l.End,
		WantStart: l.Start, WantEnd: l.End, align: 1}
	for _, g := range rs.granted {
		if Conflicts(g, nl) {
			return nil, fmt.Errorf("%w: replay of %v against %v", ErrConflict, nl, g)
		}
	}
	ns.admit(rs, nl)
	nl.Granted = true
	rs.granted = append(rs.granted, nl)
	return nl, nil
}

// LastID is the id the namespace gave out last: a lock with a greater id
// is newer than this moment.
func (ns *Namespace) LastID() ID { return ns.next }

// Get returns the lock or request with id, or nil.
func (ns *Namespace) Get(id ID) *Lock { return ns.byID[id] }

// Granted returns the granted locks on res that match keep.
func (ns *Namespace) Granted(res proto.FID, keep func(*Lock) bool) []*Lock {
	rs := ns.res[res]
	if rs == nil {
		return nil
	}
	var out []*Lock
	for _, l := range rs.granted {
		if keep(l) {
			out = append(out, l)
		}
	}
	return out
}

// ClientLocks returns the ids of every lock and request of client.
func (ns *Namespace) ClientLocks(client string) []ID {
	var out []ID
	for id := range ns.byClient[client] {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Stats are a namespace's sizes.
type Stats struct {
	Granted, Waiting, Resources, Clients int
}

// Stats counts what the namespace holds.
func (ns *Namespace) Stats() Stats {
	s := Stats{Resources: len(ns.res), Clients: len(ns.byClient)}
	for _, rs := range ns.res {
		s.Granted += len(rs.granted)
		s.Waiting += len(rs.waiting)
	}
	return s
}
