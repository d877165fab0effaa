package ldlm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

var (
	oA  = FlockOwner{"A", 1}
	oB  = FlockOwner{"B", 1}
	oC  = FlockOwner{"C", 1}
	oA2 = FlockOwner{"A", 2} // another process on client A
)

func px(o FlockOwner, t FlockType, s, e uint64) Flock {
	return Flock{Res: f1, Kind: FlockPOSIX, Owner: o, Type: t, Start: s, End: e}
}

// held renders an owner's locks, sorted: "R[0,10) W[20,30)".
func held(f *Flocks, o FlockOwner) string {
	var out []string
	hs := f.Held(f1, FlockPOSIX)
	slices.SortFunc(hs, func(a, b Flock) int { return int(a.Start) - int(b.Start) })
	for _, h := range hs {
		if h.Owner == o {
			t := "R"
			if h.Type == FlockWrite {
				t = "W"
			}
			out = append(out, fmt.Sprintf("%s[%d,%s)", t, h.Start, endString(h.End)))
		}
	}
	return strings.Join(out, " ")
}

// One owner's sequence of locks and unlocks: what it holds after each,
// as POSIX (and ext4, which the e2e test compares with) has it.
func TestFlockOneOwner(t *testing.T) {
	type op struct {
		unlock bool
		t      FlockType
		s, e   uint64
		want   string
	}
	R, W := FlockRead, FlockWrite
	for _, tc := range []struct {
		name string
		ops  []op
	}{
		{"merge adjacent and overlapping", []op{
			{t: R, s: 0, e: 10, want: "R[0,10)"},
			{t: R, s: 10, e: 20, want: "R[0,20)"},
			{t: R, s: 30, e: 40, want: "R[0,20) R[30,40)"},
			{t: R, s: 15, e: 35, want: "R[0,40)"},
		}},
		{"split by a lock of the other type", []op{
			{t: R, s: 0, e: 100, want: "R[0,100)"},
			{t: W, s: 40, e: 60, want: "R[0,40) W[40,60) R[60,100)"},
			{t: R, s: 50, e: 55, want: "R[0,40) W[40,50) R[50,55) W[55,60) R[60,100)"},
		}},
		{"partial unlocks", []op{
			{t: W, s: 0, e: EOF, want: "W[0,EOF)"},
			{unlock: true, s: 100, e: 200, want: "W[0,100) W[200,EOF)"},
			{unlock: true, s: 0, e: 150, want: "W[200,EOF)"},
			{unlock: true, s: 0, e: EOF, want: ""},
		}},
		{"conversion", []op{
			{t: R, s: 0, e: 50, want: "R[0,50)"},
			{t: W, s: 0, e: 50, want: "W[0,50)"},
			{t: R, s: 10, e: 20, want: "W[0,10) R[10,20) W[20,50)"},
			{t: W, s: 5, e: 25, want: "W[0,50)"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFlocks()
			for i, o := range tc.ops {
				if o.unlock {
					f.Unlock(f1, FlockPOSIX, oA, o.s, o.e)
				} else if _, _, err := f.Set(px(oA, o.t, o.s, o.e), false); err != nil {
					t.Fatalf("op %d: %v", i, err)
				}
				if got := held(f, oA); got != o.want {
					t.Fatalf("op %d: holds %q, want %q", i, got, o.want)
				}
			}
		})
	}
}

func TestFlockConflicts(t *testing.T) {
	f := NewFlocks()
	mustSet := func(r Flock) {
		t.Helper()
		if _, _, err := f.Set(r, false); err != nil {
			t.Fatal(err)
		}
	}
	mustSet(px(oA, FlockRead, 0, 100))
	mustSet(px(oB, FlockRead, 50, 150)) // readers share
	if _, _, err := f.Set(px(oC, FlockWrite, 90, 95), false); !errors.Is(err, ErrWouldBlock) {
		t.Errorf("a write lock over two read locks: %v", err)
	}
	if c := f.Test(px(oC, FlockWrite, 120, 130)); c == nil || c.Owner != oB {
		t.Errorf("F_GETLK at 120: %+v, want B's lock", c)
	}
	if c := f.Test(px(oC, FlockWrite, 150, 160)); c != nil {
		t.Errorf("F_GETLK past every lock: %+v", c)
	}
	mustSet(px(oA2, FlockWrite, 200, 300)) // another owner of the same client: its own
	if _, _, err := f.Set(px(oA, FlockRead, 250, 260), false); !errors.Is(err, ErrWouldBlock) {
		t.Errorf("owners of one client conflict as processes do: %v", err)
	}
	// flock locks are apart from POSIX ones.
	if _, _, err := f.Set(Flock{Res: f1, Kind: FlockBSD, Owner: oC, Type: FlockWrite, Start: 0, End: EOF}, false); err != nil {
		t.Errorf("flock beside POSIX locks: %v", err)
	}
	if _, _, err := f.Set(Flock{Res: f1, Kind: FlockBSD, Owner: oB, Type: FlockRead, Start: 0, End: EOF}, false); !errors.Is(err, ErrWouldBlock) {
		t.Errorf("a shared flock against an exclusive one: %v", err)
	}
	if _, _, err := f.Set(Flock{Res: f1, Kind: FlockBSD, Owner: oB, Type: FlockRead, Start: 0, End: 10}, false); !errors.Is(err, ErrInvalid) {
		t.Errorf("a flock of part of a file: %v", err)
	}
}

// Waiters are let go when what blocks them goes, in order, and a wait
// that would close a cycle of owners is refused.
func TestFlockWaitersAndDeadlocks(t *testing.T) {
	f := NewFlocks()
	f.Set(px(oA, FlockWrite, 0, 10), false)
	f.Set(px(oB, FlockWrite, 10, 20), false)
	f.Set(px(oC, FlockWrite, 20, 30), false)
	wA, _, err := f.Set(px(oA, FlockWrite, 10, 20), true) // A waits for B
	if err != nil || wA == nil {
		t.Fatalf("A's wait: %v", err)
	}
	if _, _, err := f.Set(px(oB, FlockWrite, 0, 10), true); !errors.Is(err, ErrDeadlock) {
		t.Errorf("B waiting for A, which waits for B: %v", err)
	}
	wB, _, err := f.Set(px(oB, FlockWrite, 20, 30), true) // B waits for C: no cycle
	if err != nil || wB == nil {
		t.Fatalf("B's wait: %v", err)
	}
	if _, _, err := f.Set(px(oC, FlockRead, 5, 6), true); !errors.Is(err, ErrDeadlock) {
		t.Errorf("C waiting for A, which waits for B, which waits for C: %v", err)
	}
	// C gives up: B is granted [20,30); then B unlocks all: A is granted.
	woken := f.Unlock(f1, FlockPOSIX, oC, 0, EOF)
	if len(woken) != 1 || woken[0] != wB {
		t.Fatalf("C's unlock woke %v, want B", woken)
	}
	if got := held(f, oB); got != "W[10,30)" {
		t.Errorf("B holds %q", got)
	}
	woken = f.Unlock(f1, FlockPOSIX, oB, 0, EOF)
	if len(woken) != 1 || woken[0] != wA || held(f, oA) != "W[0,20)" {
		t.Errorf("B's unlock woke %v; A holds %q", woken, held(f, oA))
	}
	// A withdrawn waiter is never granted.
	w, _, _ := f.Set(px(oB, FlockRead, 0, 1), true)
	f.Withdraw(w.ID)
	if woken := f.Unlock(f1, FlockPOSIX, oA, 0, EOF); len(woken) != 0 || f.Waiting(w.ID) {
		t.Errorf("a withdrawn waiter: woken %v", woken)
	}
	if s := f.Stats(); s.Held != 0 || s.Waiting != 0 {
		t.Errorf("left %+v", s)
	}
}

// A client that goes loses its locks and waits; others' waiters go.
func TestFlockDropClient(t *testing.T) {
	f := NewFlocks()
	f.Set(px(oA, FlockWrite, 0, EOF), false)
	f.Set(px(oA2, FlockRead, 0, EOF), true)
	wB, _, _ := f.Set(px(oB, FlockRead, 0, 10), true)
	woken := f.DropClient("A")
	if len(woken) != 1 || woken[0] != wB || held(f, oB) != "R[0,10)" || f.Stats().Waiting != 0 {
		t.Errorf("after A went: woken %v, B holds %q, %+v", woken, held(f, oB), f.Stats())
	}
	if err := f.Replay(px(oC, FlockWrite, 5, 6)); !errors.Is(err, ErrConflict) {
		t.Errorf("a conflicting replay: %v", err)
	}
	if err := f.Replay(px(oC, FlockWrite, 50, 60)); err != nil || held(f, oC) != "W[50,60)" {
		t.Errorf("replay: %v, C holds %q", err, held(f, oC))
	}
}

// A flock conversion gives the old lock up first; a downgrade lets
// waiting readers in.
func TestFlockConversion(t *testing.T) {
	f := NewFlocks()
	bsd := func(o FlockOwner, t FlockType) Flock {
		return Flock{Res: f1, Kind: FlockBSD, Owner: o, Type: t, Start: 0, End: EOF}
	}
	f.Set(bsd(oA, FlockWrite), false)
	wB, _, _ := f.Set(bsd(oB, FlockRead), true)
	_, woken, err := f.Set(bsd(oA, FlockRead), false)
	if err != nil || len(woken) != 1 || woken[0] != wB {
		t.Fatalf("downgrade: %v, woke %v", err, woken)
	}
	if _, _, err := f.Set(bsd(oA, FlockWrite), false); !errors.Is(err, ErrWouldBlock) {
		t.Errorf("upgrade while B reads: %v", err)
	}
	if hs := f.Held(f1, FlockBSD); len(hs) != 1 || hs[0].Owner != oB {
		t.Errorf("the failed upgrade kept A's lock, as Linux does not: %+v", hs)
	}
}
