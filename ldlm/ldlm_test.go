package ldlm

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stripefs/stripefs/proto"
)

var (
	f1 = proto.FID{Seq: 1, Oid: 1}
	f2 = proto.FID{Seq: 1, Oid: 2}
)

const mib = 1 << 20

func ext(client string, m Mode, s, e uint64) Request {
	return Request{Res: f1, Client: client, Kind: KindExtent, Mode: m, Start: s, End: e}
}

func bits(client string, m Mode, b Bits) Request {
	return Request{Res: f1, Client: client, Kind: KindBits, Mode: m, Bits: b}
}

// step is one operation of a scenario and what it must produce:
// "granted" and "callbacks" list lock names ("a1" = the lock the step
// named a1 enqueued).
type step struct {
	name string // the lock this step enqueues is known by it afterwards
	req  *Request
	// cancel, evict, downgrade: instead of an enqueue
	cancel, evict, downgrade string
	// refused: the downgrade is not made
	refused bool

	wantGranted bool     // for an enqueue: granted at once
	wantNil     bool     // a Try that was refused
	granted     []string // Effects.Granted (and, for an enqueue granted at once, itself)
	callbacks   []string
	span        [2]uint64 // if set, the lock's extent once granted
}

func run(t *testing.T, steps []step) {
	t.Helper()
	ns := New(0)
	locks := map[string]*Lock{}
	nameOf := func(l *Lock) string {
		for n, x := range locks {
			if x.ID == l.ID {
				return n
			}
		}
		return fmt.Sprintf("?%d", l.ID)
	}
	names := func(ls []*Lock) []string {
		var out []string
		for _, l := range ls {
			out = append(out, nameOf(l))
		}
		slices.Sort(out)
		return out
	}
	for i, s := range steps {
		var e Effects
		switch {
		case s.req != nil:
			l, eff, err := ns.Enqueue(*s.req)
			if err != nil {
				t.Fatalf("step %d (%s): %v", i, s.name, err)
			}
			e = eff
			if s.wantNil {
				if l != nil {
					t.Fatalf("step %d (%s): a Try that conflicts was granted: %v", i, s.name, l)
				}
				continue
			}
			if l == nil {
				t.Fatalf("step %d (%s): no lock", i, s.name)
			}
			locks[s.name] = l
			if l.Granted != s.wantGranted {
				t.Fatalf("step %d (%s): granted %v, want %v", i, s.name, l.Granted, s.wantGranted)
			}
		case s.cancel != "":
			e = ns.Cancel(locks[s.cancel].ID)
		case s.evict != "":
			e = ns.Evict(s.evict)
		case s.downgrade != "":
			var ok bool
			e, ok = ns.Downgrade(locks[s.downgrade].ID)
			if ok == s.refused {
				t.Fatalf("step %d (downgrade %s): made %v, want %v", i, s.downgrade, ok, !s.refused)
			}
		}
		slices.Sort(s.granted)
		slices.Sort(s.callbacks)
		if got := names(e.Granted); !slices.Equal(got, s.granted) {
			t.Errorf("step %d (%s%s%s): granted %v, want %v", i, s.name, s.cancel, s.evict, got, s.granted)
		}
		if got := names(e.Callbacks); !slices.Equal(got, s.callbacks) {
			t.Errorf("step %d (%s%s%s): callbacks %v, want %v", i, s.name, s.cancel, s.evict, got, s.callbacks)
		}
		if s.span != [2]uint64{} { // a step with only a name and a span checks that lock
			l := locks[s.name]
			if l == nil || !l.Granted || l.Start != s.span[0] || l.End != s.span[1] {
				t.Errorf("step %d (%s): lock %v, want granted [%d, %s)", i, s.name, l, s.span[0], endString(s.span[1]))
			}
		}
	}
}

func req(r Request) *Request { return &r }

func TestScenarios(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"readers share", []step{
			{name: "a", req: req(ext("A", PR, 0, mib)), wantGranted: true, span: [2]uint64{0, EOF}},
			{name: "b", req: req(ext("B", PR, 0, mib)), wantGranted: true, span: [2]uint64{0, EOF}},
		}},
		{"a lone writer takes the whole file", []step{
			{name: "a", req: req(ext("A", PW, 4096, 8192)), wantGranted: true, span: [2]uint64{0, EOF}},
			{name: "a2", req: req(ext("A", PW, 1<<40, 1<<40+1)), wantGranted: true}, // its own locks never conflict
		}},
		{"a writer waits for a reader and calls it back once", []step{
			{name: "a", req: req(ext("A", PR, 0, mib)), wantGranted: true},
			{name: "b", req: req(ext("B", PW, 0, 4096)), callbacks: []string{"a"}},
			{name: "c", req: req(ext("C", PW, 8192, 16384))}, // a is already called back
			// b and c do not overlap: both go, b widened up to c's range,
			// c within its 32 MiB window.
			{cancel: "a", granted: []string{"b", "c"}},
			{name: "b", span: [2]uint64{0, 8192}},
			{name: "c", span: [2]uint64{8192, ContendedGrowth}},
		}},
		{"first come, first served, then callbacks for the next", []step{
			{name: "a", req: req(ext("A", PR, 0, mib)), wantGranted: true},
			{name: "b", req: req(ext("B", PW, 0, mib)), callbacks: []string{"a"}},
			{name: "c", req: req(ext("C", PR, 0, mib))}, // compatible with a, not with b waiting ahead
			{cancel: "a", granted: []string{"b"}, callbacks: []string{"b"}},
			{name: "b", span: [2]uint64{0, ContendedGrowth}},
			{name: "d", req: req(ext("D", PR, 2*ContendedGrowth, 2*ContendedGrowth+1)), wantGranted: true},
			{cancel: "b", granted: []string{"c"}},
		}},
		{"writers of their own parts of one file settle on them", []step{
			{name: "a", req: req(ext("A", PW, 0, mib)), wantGranted: true, span: [2]uint64{0, EOF}},
			{name: "b", req: req(ext("B", PW, 1<<30, 1<<30+mib)), callbacks: []string{"a"}},
			{cancel: "a", granted: []string{"b"}},
			{name: "b", span: [2]uint64{1 << 30, 1<<30 + ContendedGrowth}},
			{name: "a2", req: req(ext("A", PW, mib, 2*mib)), wantGranted: true, span: [2]uint64{0, 1 << 30}},
			{name: "b2", req: req(ext("B", PW, 1<<30+ContendedGrowth, 1<<30+ContendedGrowth+mib)), wantGranted: true, span: [2]uint64{1 << 30, EOF}},
		}},
		{"a withdrawn request unblocks those behind it", []step{
			{name: "a", req: req(ext("A", PW, 0, mib)), wantGranted: true},
			{name: "b", req: req(ext("B", PW, 0, mib)), callbacks: []string{"a"}},
			{name: "c", req: req(ext("C", PR, 5*ContendedGrowth, 5*ContendedGrowth+1))}, // blocked by a, which reaches EOF
			{cancel: "b"},
			{cancel: "a", granted: []string{"c"}},
		}},
		{"eviction frees what the evicted held", []step{
			{name: "a", req: req(ext("A", PW, 0, mib)), wantGranted: true},
			{name: "a2", req: req(bits("A", PR, Lookup|Update)), wantGranted: true},
			{name: "b", req: req(ext("B", PR, 0, mib)), callbacks: []string{"a"}},
			{name: "s", req: req(Request{Res: f1, Client: "B", Kind: KindBits, Mode: EX, Bits: Lookup, Server: true}), callbacks: []string{"a2"}},
			{evict: "A", granted: []string{"b", "s"}},
		}},
		{"a server change calls other clients' metadata locks back, not the asker's", []step{
			{name: "a", req: req(bits("A", PR, Lookup|Update)), wantGranted: true},
			{name: "b", req: req(bits("B", PR, Update)), wantGranted: true},
			{name: "sa", req: req(Request{Res: f1, Client: "A", Kind: KindBits, Mode: EX, Bits: Update, Server: true}), callbacks: []string{"b"}},
			{name: "t", req: req(Request{Res: f1, Client: "C", Kind: KindBits, Mode: PR, Bits: Update, Try: true}), wantNil: true},
			{cancel: "b", granted: []string{"sa"}},
			{name: "l", req: req(bits("C", PR, Lookup)), wantGranted: true}, // other bits
			{cancel: "sa"},
			{name: "t2", req: req(Request{Res: f1, Client: "C", Kind: KindBits, Mode: PR, Bits: Update, Try: true}), wantGranted: true},
		}},
		{"a writer calls back cached attributes; while it writes none are granted", []step{
			{name: "u", req: req(bits("C", PR, Lookup|Update)), wantGranted: true},
			{name: "w", req: req(ext("D", PW, 0, 4096)), callbacks: []string{"u"}},
			{cancel: "u", granted: []string{"w"}},
			{name: "t", req: req(Request{Res: f1, Client: "C", Kind: KindBits, Mode: PR, Bits: Update, Try: true}), wantNil: true},
			{name: "l", req: req(bits("C", PR, Lookup)), wantGranted: true}, // names are not the size
			{name: "r", req: req(ext("C", PR, 0, 4096)), callbacks: []string{"w"}},
		}},
		{"a client asking again for bits it holds gets the lock it has", []step{
			{name: "a", req: req(bits("A", PR, Lookup|Update)), wantGranted: true},
			{name: "a", req: req(Request{Res: f1, Client: "A", Kind: KindBits, Mode: PR, Bits: Lookup, Try: true}), wantGranted: true},
			{name: "b", req: req(Request{Res: f1, Client: "B", Kind: KindBits, Mode: PR, Bits: Lookup, Try: true}), wantGranted: true},
			{name: "s", req: req(Request{Res: f1, Client: "B", Kind: KindBits, Mode: EX, Bits: Lookup, Server: true}), callbacks: []string{"a"}},
			{cancel: "a", granted: []string{"s"}},
		}},
		{"server changes do not wait for data locks", []step{
			{name: "w", req: req(ext("D", PW, 0, 4096)), wantGranted: true},
			{name: "s", req: req(Request{Res: f1, Client: "C", Kind: KindBits, Mode: EX, Bits: Update | Lookup, Server: true}), wantGranted: true},
		}},
		{"a writer done writing downgrades to a reader: others read and cache beside it", []step{
			{name: "a", req: req(ext("A", PW, 0, 4096)), wantGranted: true, span: [2]uint64{0, EOF}},
			{downgrade: "a"},
			{name: "b", req: req(ext("B", PR, 0, mib)), wantGranted: true},
			{name: "t", req: req(Request{Res: f1, Client: "B", Kind: KindBits, Mode: PR, Bits: Update, Try: true}), wantGranted: true},
			{downgrade: "b"}, // a reader is one already (a resent downgrade)
			{name: "w", req: req(ext("C", PW, 0, 4096)), callbacks: []string{"a", "b", "t"}},
		}},
		{"a writer already called back is not downgraded", []step{
			{name: "a", req: req(ext("A", PW, 0, 4096)), wantGranted: true},
			{name: "b", req: req(ext("B", PR, 0, mib)), callbacks: []string{"a"}},
			{downgrade: "a", refused: true},
			{cancel: "a", granted: []string{"b"}},
		}},
		{"resources are apart", []step{
			{name: "a", req: req(ext("A", PW, 0, mib)), wantGranted: true},
			{name: "b", req: req(Request{Res: f2, Client: "B", Kind: KindExtent, Mode: PW, Start: 0, End: mib}), wantGranted: true},
		}},
		{"erasure-coded rows stay whole when a grant is widened", []step{
			{name: "a", req: req(ext("A", PW, 0, 3*mib)), wantGranted: true},
			{name: "b", req: req(Request{Res: f1, Client: "B", Kind: KindExtent, Mode: PW, Start: 99 * mib, End: 102 * mib, Align: 3 * mib}), callbacks: []string{"a"}},
			{cancel: "a", granted: []string{"b"}},
			{name: "b", span: [2]uint64{99 * mib, 132 * mib}}, // 33 MiB windows: 32 MiB rounded up to whole rows
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { run(t, tc.steps) })
	}
}

func TestConflictMatrix(t *testing.T) {
	mk := func(client string, kind Kind, m Mode, b Bits, s, e uint64, server bool) *Lock {
		return &Lock{Client: client, Kind: kind, Mode: m, Bits: b, Start: s, End: e, Server: server}
	}
	for _, tc := range []struct {
		a, b *Lock
		want bool
	}{
		{mk("A", KindExtent, PR, 0, 0, 10, false), mk("B", KindExtent, PR, 0, 0, 10, false), false},
		{mk("A", KindExtent, PR, 0, 0, 10, false), mk("B", KindExtent, PW, 0, 5, 15, false), true},
		{mk("A", KindExtent, PW, 0, 0, 10, false), mk("B", KindExtent, PW, 0, 10, 20, false), false}, // touching, not overlapping
		{mk("A", KindExtent, PW, 0, 0, 10, false), mk("A", KindExtent, PW, 0, 0, 10, false), false},  // one client
		{mk("A", KindBits, PR, Lookup, 0, 0, false), mk("B", KindBits, PR, Lookup, 0, 0, false), false},
		{mk("A", KindBits, PR, Lookup, 0, 0, false), mk("B", KindBits, EX, Update, 0, 0, true), false}, // other bits
		{mk("A", KindBits, PR, Lookup|Update, 0, 0, false), mk("B", KindBits, EX, Update, 0, 0, true), true},
		{mk("A", KindBits, PR, Update, 0, 0, false), mk("A", KindBits, EX, Update, 0, 0, true), false}, // its own change
		{mk("A", KindBits, PR, Update, 0, 0, false), mk("B", KindExtent, PW, 0, 0, 1, false), true},
		{mk("A", KindBits, PR, Lookup, 0, 0, false), mk("B", KindExtent, PW, 0, 0, 1, false), false},
		{mk("A", KindBits, PR, Update, 0, 0, false), mk("B", KindExtent, PR, 0, 0, 1, false), false},
		{mk("A", KindBits, EX, Update, 0, 0, true), mk("B", KindExtent, PW, 0, 0, 1, false), false},
	} {
		if got := Conflicts(tc.a, tc.b); got != tc.want {
			t.Errorf("Conflicts(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := Conflicts(tc.b, tc.a); got != tc.want {
			t.Errorf("Conflicts(%v, %v) = %v, want %v (not symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestInvalidRequests(t *testing.T) {
	ns := New(0)
	for _, r := range []Request{
		{Res: f1, Kind: KindExtent, Mode: PW, Start: 0, End: 1},                                 // no client
		{Res: f1, Client: "A", Kind: KindExtent, Mode: PW, Start: 5, End: 5},                    // empty
		{Res: f1, Client: "A", Kind: KindExtent, Mode: EX, Start: 0, End: 1},                    // mode
		{Res: f1, Client: "A", Kind: KindBits, Mode: PW, Bits: Lookup},                          // mode
		{Res: f1, Client: "A", Kind: KindBits, Mode: PR, Bits: 0},                               // no bits
		{Res: f1, Client: "A", Kind: KindBits, Mode: PR, Bits: 0x80},                            // unknown bits
		{Res: f1, Client: "A", Kind: 9, Mode: PR},                                               // kind
		{Res: f1, Client: "A", Kind: KindBits, Mode: EX, Bits: Lookup, Server: true, Try: true}, // a server lock is had, not tried
	} {
		if _, _, err := ns.Enqueue(r); !errors.Is(err, ErrInvalid) {
			t.Errorf("Enqueue(%+v) = %v, want ErrInvalid", r, err)
		}
	}
	if s := ns.Stats(); s != (Stats{}) {
		t.Errorf("refused requests left state: %+v", s)
	}
	if e := ns.Cancel(12345); len(e.Granted)+len(e.Callbacks) != 0 {
		t.Error("cancel of an unknown lock did something")
	}
}

// After a restart, clients put back what they held; what conflicts with a
// lock granted since is refused, and new locks never reuse replayed ids.
func TestReplay(t *testing.T) {
	ns := New(0)
	a, err := ns.Replay(Lock{ID: 7, Res: f1, Client: "A", Kind: KindExtent, Mode: PW, Start: 0, End: EOF})
	if err != nil || a.ID != 7 || !a.Granted {
		t.Fatalf("replay: %v %v", a, err)
	}
	if _, err := ns.Replay(Lock{ID: 8, Res: f1, Client: "B", Kind: KindExtent, Mode: PR, Start: 0, End: 10}); !errors.Is(err, ErrConflict) {
		t.Errorf("conflicting replay: %v", err)
	}
	if _, err := ns.Replay(Lock{ID: 7, Res: f1, Client: "B", Kind: KindBits, Mode: PR, Bits: Lookup}); !errors.Is(err, ErrConflict) {
		t.Errorf("replay under a taken id: %v", err)
	}
	if _, err := ns.Replay(Lock{ID: 6, Res: f1, Client: "B", Kind: KindBits, Mode: PR, Bits: Lookup}); err != nil {
		t.Errorf("replay: %v", err)
	}
	if _, err := ns.Replay(Lock{ID: 9, Res: f1, Client: "B", Kind: KindBits, Mode: EX, Bits: Lookup, Server: true}); !errors.Is(err, ErrInvalid) {
		t.Errorf("replay of a server lock: %v", err)
	}
	l, _, err := ns.Enqueue(Request{Res: f2, Client: "C", Kind: KindBits, Mode: PR, Bits: Update})
	if err != nil || l.ID <= 7 {
		t.Errorf("new lock after replays: %v %v", l, err)
	}
	if s := ns.Stats(); s.Granted != 3 || s.Clients != 3 || s.Resources != 2 {
		t.Errorf("stats %+v", s)
	}
}

// A long random run (enqueues, cancels, downgrades, evictions) keeps the
// invariant that matters: no two granted locks conflict, and every
// waiting request is blocked by something.
func TestRandomInvariant(t *testing.T) {
	ns := New(0)
	clients := []string{"A", "B", "C"}
	var live []ID
	seed := uint64(1)
	rnd := func(n int) int {
		seed = seed*6364136223846793005 + 1442695040888963407
		return int(seed>>33) % n
	}
	for i := 0; i < 20000; i++ {
		switch rnd(4) {
		case 0, 1:
			r := Request{Res: []proto.FID{f1, f2}[rnd(2)], Client: clients[rnd(3)]}
			if rnd(3) == 0 {
				r.Kind, r.Mode, r.Bits = KindBits, []Mode{PR, EX}[rnd(2)], Bits(1+rnd(7))
				r.Server = r.Mode == EX
				r.Try = r.Mode == PR && rnd(2) == 0
			} else {
				s := uint64(rnd(64)) * mib
				r.Kind, r.Mode, r.Start, r.End = KindExtent, []Mode{PR, PW}[rnd(2)], s, s+uint64(1+rnd(8))*mib
			}
			l, _, err := ns.Enqueue(r)
			if err != nil {
				t.Fatal(err)
			}
			if l != nil {
				live = append(live, l.ID)
			}
		case 2:
			if len(live) > 0 {
				k := rnd(len(live))
				ns.Cancel(live[k])
				live = slices.Delete(live, k, k+1)
			}
		case 3:
			switch {
			case rnd(20) == 0:
				ns.Evict(clients[rnd(3)])
			case len(live) > 0:
				ns.Downgrade(live[rnd(len(live))])
			}
		}
		for _, rs := range ns.res {
			for x, a := range rs.granted {
				for _, b := range rs.granted[x+1:] {
					if Conflicts(a, b) {
						t.Fatalf("step %d: granted %v and %v conflict", i, a, b)
					}
				}
			}
			for k, w := range rs.waiting {
				if len(ns.blockers(rs, w, k)) == 0 {
					t.Fatalf("step %d: %v waits for nothing", i, w)
				}
			}
		}
	}
}
