package lockd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// fakeNet delivers callbacks to in-test clients; a client not in it has
// no connection.
type fakeNet struct {
	mu      sync.Mutex
	clients map[string]func(method uint16, req any) (proto.LVB, error)
	calls   []string
}

func (n *fakeNet) CallbackAnd(ctx context.Context, client string, method uint16, req, resp any, onReply func(error)) error {
	n.mu.Lock()
	h := n.clients[client]
	n.calls = append(n.calls, fmt.Sprintf("%s:%d", client, method))
	n.mu.Unlock()
	if h == nil {
		return rpc.ErrNoConnection
	}
	type result struct {
		lvb proto.LVB
		err error
	}
	ch := make(chan result, 1)
	go func() {
		lvb, err := h(method, req)
		ch <- result{lvb, err}
	}()
	select {
	case r := <-ch:
		switch x := resp.(type) {
		case *proto.BlockingReply:
			x.LVB = r.lvb
		case *proto.GlimpseReply:
			x.LVB = r.lvb
		}
		if onReply != nil {
			onReply(r.err)
		}
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (n *fakeNet) set(client string, h func(method uint16, req any) (proto.LVB, error)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if h == nil {
		delete(n.clients, client)
	} else {
		n.clients[client] = h
	}
}

type fakeStore struct {
	mu      sync.Mutex
	attr    map[proto.FID]proto.Attr
	evicted []string
	reg     map[string]bool
}

func (s *fakeStore) Attr(fid proto.FID) (proto.Attr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attr[fid], nil
}

func (s *fakeStore) Merge(fid proto.FID, lvb proto.LVB) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.attr[fid]
	a.Size, a.Mtime = max(a.Size, lvb.Size), max(a.Mtime, lvb.Mtime)
	s.attr[fid] = a
	return nil
}

func (s *fakeStore) Register(client, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reg[client] = true
	return nil
}

func (s *fakeStore) Evicted(client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evicted = append(s.evicted, client)
}

var fa = proto.FID{Seq: 7, Oid: 1}

func setup(timeout time.Duration) (*Service, *fakeNet, *fakeStore) {
	n := &fakeNet{clients: map[string]func(uint16, any) (proto.LVB, error){}}
	st := &fakeStore{attr: map[proto.FID]proto.Attr{fa: {FID: fa, Size: 100}}, reg: map[string]bool{}}
	return New(Config{Name: "mdtX", Timeout: timeout}, n, st), n, st
}

func pw(s, e uint64) *proto.LockEnqueueReq {
	return &proto.LockEnqueueReq{Lock: proto.LockDesc{Res: fa, Kind: proto.LockExtent, Mode: proto.LockPW, Start: s, End: e}}
}

func pr(s, e uint64) *proto.LockEnqueueReq {
	return &proto.LockEnqueueReq{Lock: proto.LockDesc{Res: fa, Kind: proto.LockExtent, Mode: proto.LockPR, Start: s, End: e}}
}

// A conflicting enqueue calls the holder back, waits for its answer, and
// is granted with the size the holder's LVB reported.
func TestEnqueueCallsBackAndMerges(t *testing.T) {
	s, n, st := setup(5 * time.Second)
	ctx := context.Background()
	a, err := s.Enqueue(ctx, "A", "a", pw(0, 4096))
	if err != nil || a.Lock.Start != 0 || a.Lock.End != proto.LockEOF || a.Attr.Size != 100 {
		t.Fatalf("first writer: %+v %v", a, err)
	}
	if !st.reg["A"] {
		t.Error("a data-lock holder was not registered for recovery")
	}
	n.set("A", func(m uint16, req any) (proto.LVB, error) {
		if r := req.(*proto.BlockingReq); m != proto.CBBlocking || r.ID != a.Lock.ID {
			t.Errorf("callback %d %+v", m, r)
		}
		return proto.LVB{Valid: true, Size: 5000, Mtime: 42}, nil
	})
	b, err := s.Enqueue(ctx, "B", "b", pr(0, 10))
	if err != nil || b.Attr.Size != 5000 || b.Attr.Mtime != 42 {
		t.Fatalf("reader after the writer: %+v %v", b, err)
	}
	if c := s.Counters(); counter(c, "ldlm_callbacks_sent") != 1 || counter(c, "ldlm_locks_now") != 1 || counter(c, "ldlm_waits") != 1 {
		t.Errorf("counters %v", c)
	}
}

func counter(cs []rpc.Counter, name string) int64 {
	for _, c := range cs {
		if c.Name == name {
			return c.Value
		}
	}
	panic(name)
}

// A holder that never answers (killed: no connection) is evicted once the
// timeout passes; the waiter goes ahead, the evicted client's requests are
// refused, and its data is not merged.
func TestSilentHolderIsEvicted(t *testing.T) {
	s, _, st := setup(300 * time.Millisecond)
	ctx := context.Background()
	if _, err := s.Enqueue(ctx, "A", "a", pw(0, 4096)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b, err := s.Enqueue(ctx, "B", "b", pw(0, 10))
	took := time.Since(start)
	if err != nil || took < 250*time.Millisecond || took > 3*time.Second {
		t.Fatalf("waiter behind a dead holder: %v after %v", err, took)
	}
	if b.Attr.Size != 100 {
		t.Errorf("size %d: the evicted writer's unreported data counted", b.Attr.Size)
	}
	if !s.IsEvicted("A") || len(st.evicted) != 1 || st.evicted[0] != "A" {
		t.Errorf("A not evicted: %v", st.evicted)
	}
	if _, err := s.Enqueue(ctx, "A", "a", pr(0, 10)); !errors.Is(err, ErrEvicted) {
		t.Errorf("evicted client's enqueue: %v", err)
	}
	if g, _ := s.TryBits("A", fa, proto.LockLookup); g.ID != 0 {
		t.Error("an evicted client got a metadata lock")
	}
}

// A holder whose answer is slow but within the timeout is not evicted; a
// client that reconnects within it gets the callback then.
func TestHolderReconnects(t *testing.T) {
	s, n, _ := setup(2 * time.Second)
	ctx := context.Background()
	if _, err := s.Enqueue(ctx, "A", "a", pw(0, 4096)); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond) // between connections meanwhile
		n.set("A", func(uint16, any) (proto.LVB, error) { return proto.LVB{}, nil })
	}()
	if _, err := s.Enqueue(ctx, "B", "b", pw(0, 10)); err != nil {
		t.Fatal(err)
	}
	if s.IsEvicted("A") {
		t.Error("a client that came back in time was evicted")
	}
}

// A waiter whose asker gives up is withdrawn, and does not block those
// behind it.
func TestWithdrawnWaiter(t *testing.T) {
	s, n, _ := setup(5 * time.Second)
	release := make(chan struct{})
	n.set("A", func(uint16, any) (proto.LVB, error) { <-release; return proto.LVB{}, nil })
	if _, err := s.Enqueue(context.Background(), "A", "a", pw(0, 4096)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := s.Enqueue(ctx, "B", "b", pw(0, 10))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("given-up enqueue: %v", err)
	}
	close(release)
	c, err := s.Enqueue(context.Background(), "C", "c", pr(0, 10))
	if err != nil || c.Lock.ID == 0 {
		t.Fatalf("enqueue after a withdrawn one: %v", err)
	}
	if got := counter(s.Counters(), "ldlm_locks_now"); got != 1 {
		t.Errorf("%d locks held, want only C's", got)
	}
}

// A resent enqueue (same cookie) gets the lock already granted, not a
// second one.
func TestResentEnqueue(t *testing.T) {
	s, _, _ := setup(time.Second)
	r := pw(0, 10)
	r.Cookie = 99
	a, err := s.Enqueue(context.Background(), "A", "a", r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Enqueue(context.Background(), "A", "a", r)
	if err != nil || b.Lock.ID != a.Lock.ID {
		t.Fatalf("resend got %+v, first %+v (%v)", b, a, err)
	}
	if got := counter(s.Counters(), "ldlm_locks_now"); got != 1 {
		t.Errorf("%d locks after a resend", got)
	}
}

// A change calls back the other clients' metadata locks, not the asker's,
// and blocks new grants until released.
// recordCallbacks makes each of clients answer every callback at once,
// and returns the names of those called back so far, in order.
func recordCallbacks(n *fakeNet, clients ...string) func() []string {
	var called []string
	var mu sync.Mutex
	for _, c := range clients {
		n.set(c, func(uint16, any) (proto.LVB, error) {
			mu.Lock()
			called = append(called, c)
			mu.Unlock()
			return proto.LVB{}, nil
		})
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(called)
	}
}

func TestChangeLocks(t *testing.T) {
	s, n, _ := setup(time.Second)
	called := recordCallbacks(n, "A", "B")
	ga, _ := s.TryBits("A", fa, proto.LockLookup|proto.LockUpdate)
	gb, _ := s.TryBits("B", fa, proto.LockUpdate)
	if ga.ID == 0 || gb.ID == 0 {
		t.Fatal("metadata locks not granted")
	}
	rel, err := s.Change(context.Background(), "A", proto.LockUpdate, fa, fa)
	if err != nil {
		t.Fatal(err)
	}
	if got := called(); len(got) != 1 || got[0] != "B" {
		t.Errorf("called back %v, want only B", got)
	}
	if g, _ := s.TryBits("C", fa, proto.LockUpdate); g.ID != 0 {
		t.Error("a metadata lock was granted during a change")
	}
	rel()
	g, fresh := s.TryBits("C", fa, proto.LockUpdate)
	if g.ID == 0 || !fresh {
		t.Error("no new metadata lock after the change")
	}
	if g2, fresh := s.TryBits("C", fa, proto.LockUpdate); g2.ID != g.ID || fresh {
		t.Errorf("asking again: %+v (fresh %v), want the lock held %+v", g2, fresh, g)
	}
}

// A stat glimpses other writers for their sizes; a dead one is evicted.
func TestGlimpse(t *testing.T) {
	s, n, _ := setup(300 * time.Millisecond)
	ctx := context.Background()
	n.set("A", func(m uint16, req any) (proto.LVB, error) {
		if m == proto.CBBlocking {
			return proto.LVB{}, nil
		}
		return proto.LVB{Valid: true, Size: 7777, Mtime: 9}, nil
	})
	if _, err := s.Enqueue(ctx, "A", "a", pw(0, 1<<20)); err != nil {
		t.Fatal(err)
	}
	a := proto.Attr{Size: 100}
	s.Glimpse(fa, "C", &a, s.Merged())
	if a.Size != 7777 || a.Mtime != 9 {
		t.Errorf("glimpsed %+v", a)
	}
	a = proto.Attr{Size: 100}
	s.Glimpse(fa, "A", &a, s.Merged()) // the writer asking itself: nothing to ask
	if a.Size != 100 {
		t.Errorf("a writer glimpsed itself: %+v", a)
	}
	n.set("A", nil)
	s.Glimpse(fa, "C", &a, s.Merged())
	if !s.IsEvicted("A") {
		t.Error("a writer that cannot be glimpsed was not evicted")
	}
}

// Glimpse says when the attributes it was given must be read again: it
// asked a writer, or a writer's size was merged as its lock went after
// they were read (no writer is left to ask, and the size landed after
// the read). Nothing to ask and nothing merged: they stand.
func TestGlimpseSaysReadAgain(t *testing.T) {
	s, n, st := setup(5 * time.Second)
	ctx := context.Background()
	n.set("A", func(uint16, any) (proto.LVB, error) { return proto.LVB{Valid: true, Size: 5000}, nil })
	a := proto.Attr{Size: 100}
	if s.Glimpse(fa, "C", &a, s.Merged()) {
		t.Error("no writer and nothing merged, yet read again")
	}
	g, err := s.Enqueue(ctx, "A", "a", pw(0, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Glimpse(fa, "C", &a, s.Merged()) || a.Size != 5000 {
		t.Errorf("a writer asked: read again false or size %d", a.Size)
	}
	mark := s.Merged()
	a = st.attr[fa] // read at mark
	if err := s.Cancel("A", &proto.LockCancelReq{IDs: []uint64{g.Lock.ID}, LVBs: []proto.LVB{{Valid: true, Size: 6000}}}); err != nil {
		t.Fatal(err)
	}
	if !s.Glimpse(fa, "C", &a, mark) {
		t.Errorf("a writer's size merged after the read (now %d), yet not read again", st.attr[fa].Size)
	}
	if s.Glimpse(fa, "C", &a, s.Merged()) {
		t.Error("nothing merged since the mark, yet read again")
	}
}

// A writer's lock downgraded to PR is a reader's: another client's stat
// glimpses no one, its read lock comes without a callback; only the
// holder can downgrade it (again, as a resend would), and a later writer
// still calls it back.
func TestDowngrade(t *testing.T) {
	s, n, _ := setup(300 * time.Millisecond)
	ctx := context.Background()
	asked := map[uint16]int{}
	var mu sync.Mutex
	n.set("A", func(m uint16, req any) (proto.LVB, error) {
		mu.Lock()
		asked[m]++
		mu.Unlock()
		return proto.LVB{Valid: true, Size: 7777}, nil
	})
	n.set("B", func(uint16, any) (proto.LVB, error) { return proto.LVB{}, nil })
	g, err := s.Enqueue(ctx, "A", "a", pw(0, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if s.Downgrade("B", fa, g.Lock.ID) || s.Downgrade("A", proto.FID{Seq: 7, Oid: 2}, g.Lock.ID) {
		t.Fatal("a lock was downgraded by another client, or on another file")
	}
	if !s.Downgrade("A", fa, g.Lock.ID) {
		t.Fatal("the holder could not downgrade its write lock")
	}
	if !s.Downgrade("A", fa, g.Lock.ID) {
		t.Fatal("a resent downgrade was refused")
	}
	a := proto.Attr{Size: 100}
	s.Glimpse(fa, "B", &a, s.Merged())
	if _, err := s.Enqueue(ctx, "B", "b", pr(0, 1<<20)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	none := len(asked) == 0
	mu.Unlock()
	if !none || a.Size != 100 {
		t.Fatalf("after the downgrade the holder was asked %v, the glimpse gave %+v", asked, a)
	}
	if _, err := s.Enqueue(ctx, "B", "b", pw(0, 1<<20)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if asked[proto.CBBlocking] != 1 {
		t.Fatalf("a writer after the downgrade called the reader back %d times, want once", asked[proto.CBBlocking])
	}
}

// Replays are taken while the window is open, refused after.
func TestReplayWindow(t *testing.T) {
	s, _, _ := setup(time.Second)
	open := true
	s.Recovering = func() bool { return open }
	r := &proto.LockReplayReq{Locks: []proto.LockDesc{
		{ID: 5, Res: fa, Kind: proto.LockExtent, Mode: proto.LockPW, Start: 0, End: proto.LockEOF},
		{ID: 6, Res: fa, Kind: proto.LockBits, Mode: proto.LockPR, Bits: proto.LockLookup},
	}}
	out, err := s.Replay("A", r)
	if err != nil || !out.OK[0] || !out.OK[1] {
		t.Fatalf("replay in the window: %+v %v", out, err)
	}
	out, _ = s.Replay("B", &proto.LockReplayReq{Locks: []proto.LockDesc{{ID: 7, Res: fa, Kind: proto.LockExtent, Mode: proto.LockPR, Start: 0, End: 10}}})
	if out.OK[0] {
		t.Error("a conflicting replay was taken")
	}
	open = false
	out, _ = s.Replay("C", &proto.LockReplayReq{Locks: []proto.LockDesc{{ID: 8, Res: proto.FID{Seq: 9}, Kind: proto.LockBits, Mode: proto.LockPR, Bits: 1}}})
	if out.OK[0] {
		t.Error("a replay after the window was taken")
	}
}

func TestBadRequests(t *testing.T) {
	s, _, _ := setup(time.Second)
	ctx := context.Background()
	for _, r := range []*proto.LockEnqueueReq{
		{Lock: proto.LockDesc{Res: fa, Kind: proto.LockBits, Mode: proto.LockPR, Bits: 1}}, // metadata locks come with replies
		{Lock: proto.LockDesc{Res: fa, Kind: proto.LockExtent, Mode: 3, Start: 0, End: 1}},
		{Lock: proto.LockDesc{Res: fa, Kind: proto.LockExtent, Mode: proto.LockPW, Start: 10, End: 10}},
		{Lock: proto.LockDesc{Res: fa, Kind: proto.LockExtent, Mode: proto.LockPW, Start: 0, End: 10}, Align: 1 << 50},
	} {
		if _, err := s.Enqueue(ctx, "A", "a", r); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%+v: %v", r, err)
		}
	}
	if _, err := s.Enqueue(ctx, "", "", pw(0, 1)); !errors.Is(err, syscall.EPROTO) {
		t.Errorf("enqueue without identity: %v", err)
	}
	if err := s.Cancel("A", &proto.LockCancelReq{IDs: []uint64{1, 2}, LVBs: []proto.LVB{{}}}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("cancel with mismatched LVBs: %v", err)
	}
	// Another client's lock is not cancelled by a stranger.
	a, _ := s.Enqueue(ctx, "A", "a", pw(0, 1))
	if err := s.Cancel("B", &proto.LockCancelReq{IDs: []uint64{a.Lock.ID}}); err != nil {
		t.Fatal(err)
	}
	if got := counter(s.Counters(), "ldlm_locks_now"); got != 1 {
		t.Error("a client cancelled another's lock")
	}
}

func fset(owner uint64, t uint8, s, e uint64, wait bool, c uint64) *proto.FlockReq {
	return &proto.FlockReq{Op: proto.FlockSet, Res: fa, Kind: proto.FlockPOSIX, Type: t, Owner: owner, Start: s, End: e, Wait: wait, Cookie: c}
}

// A blocked application lock waits without polling and is granted by the
// unlock that lets it go; an interrupted one is withdrawn by its cookie,
// even when the cancel overtakes it.
func TestFlockWaitAndCancel(t *testing.T) {
	s, _, _ := setup(time.Second)
	ctx := context.Background()
	if _, err := s.Flock(ctx, "A", "a", fset(1, proto.FlockWrite, 0, 100, false, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flock(ctx, "B", "b", fset(1, proto.FlockRead, 50, 60, false, 0)); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("conflicting F_SETLK: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := s.Flock(ctx, "B", "b", fset(1, proto.FlockRead, 50, 60, true, 7))
		got <- err
	}()
	waitFor(t, func() bool { return counter(s.Counters(), "flock_waiters_now") == 1 })
	rep, err := s.Flock(ctx, "C", "c", &proto.FlockReq{Op: proto.FlockTest, Res: fa, Kind: proto.FlockPOSIX, Type: proto.FlockRead, Owner: 1, Start: 55, End: 56})
	if err != nil || rep.Type != proto.FlockWrite || rep.Start != 0 || rep.End != 100 || rep.Mine {
		t.Errorf("F_GETLK: %+v %v", rep, err)
	}
	if _, err := s.Flock(ctx, "A", "a", &proto.FlockReq{Op: proto.FlockUnlock, Res: fa, Kind: proto.FlockPOSIX, Owner: 1, Start: 40, End: 70}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter after the unlock: %v", err)
	}
	// An interrupted wait.
	go func() {
		_, err := s.Flock(ctx, "C", "c", fset(2, proto.FlockWrite, 0, 10, true, 8))
		got <- err
	}()
	waitFor(t, func() bool { return counter(s.Counters(), "flock_waiters_now") == 1 })
	if _, err := s.Flock(ctx, "C", "c", &proto.FlockReq{Op: proto.FlockCancel, Kind: proto.FlockPOSIX, Cookie: 8}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, syscall.EINTR) {
		t.Fatalf("interrupted wait: %v", err)
	}
	// A cancel that overtakes its wait.
	s.Flock(ctx, "C", "c", &proto.FlockReq{Op: proto.FlockCancel, Kind: proto.FlockPOSIX, Cookie: 9})
	if _, err := s.Flock(ctx, "C", "c", fset(2, proto.FlockWrite, 0, 10, true, 9)); !errors.Is(err, syscall.EINTR) {
		t.Fatalf("wait after its cancel: %v", err)
	}
	if n := counter(s.Counters(), "flock_waiters_now"); n != 0 {
		t.Errorf("%d waiters left", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
	}
}

// A wait that would close a cycle gets EDEADLK; a holder whose client
// lost its connection while others wait is evicted after the timeout and
// its waiters go ahead.
func TestFlockDeadlockAndAwayHolder(t *testing.T) {
	s, _, st := setup(300 * time.Millisecond)
	ctx := context.Background()
	s.Flock(ctx, "A", "a", fset(1, proto.FlockWrite, 0, 1, false, 0))
	s.Flock(ctx, "B", "b", fset(1, proto.FlockWrite, 1, 2, false, 0))
	got := make(chan error, 1)
	go func() {
		_, err := s.Flock(ctx, "A", "a", fset(1, proto.FlockWrite, 1, 2, true, 1))
		got <- err
	}()
	waitFor(t, func() bool { return counter(s.Counters(), "flock_waiters_now") == 1 })
	if _, err := s.Flock(ctx, "B", "b", fset(1, proto.FlockWrite, 0, 1, true, 2)); !errors.Is(err, syscall.EDEADLK) {
		t.Fatalf("closing the cycle: %v", err)
	}
	start := time.Now()
	s.ConnChange("B", false) // B's mount died
	if err := <-got; err != nil {
		t.Fatalf("waiter behind an away holder: %v", err)
	}
	if took := time.Since(start); took < 250*time.Millisecond || took > 3*time.Second {
		t.Errorf("granted after %v with a 300ms timeout", took)
	}
	st.mu.Lock()
	n := len(st.evicted)
	st.mu.Unlock()
	if !s.IsEvicted("B") || n != 1 {
		t.Error("the away holder was not evicted")
	}
	// A holder that comes back in time is not.
	s.Flock(ctx, "C", "c", fset(1, proto.FlockWrite, 5, 6, false, 0))
	s.ConnChange("C", false)
	go func() {
		_, err := s.Flock(ctx, "D", "d", fset(1, proto.FlockWrite, 5, 6, true, 3))
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	s.ConnChange("C", true)
	time.Sleep(400 * time.Millisecond)
	if s.IsEvicted("C") {
		t.Error("a holder that reconnected was evicted")
	}
	s.Flock(ctx, "C", "c", &proto.FlockReq{Op: proto.FlockRelease, Res: fa, Kind: proto.FlockPOSIX, Owner: 1})
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func TestFlockBadRequests(t *testing.T) {
	s, _, _ := setup(time.Second)
	ctx := context.Background()
	for _, r := range []*proto.FlockReq{
		{Op: 99, Res: fa, Kind: proto.FlockPOSIX},
		{Op: proto.FlockSet, Res: fa, Kind: 7, Type: proto.FlockRead, Start: 0, End: 1},
		{Op: proto.FlockSet, Res: fa, Kind: proto.FlockPOSIX, Type: 9, Start: 0, End: 1},
		{Op: proto.FlockSet, Res: fa, Kind: proto.FlockPOSIX, Type: proto.FlockRead, Start: 10, End: 5},
		{Op: proto.FlockSet, Res: fa, Kind: proto.FlockBSD, Type: proto.FlockRead, Start: 0, End: 5},
		{Op: proto.FlockUnlock, Res: fa, Kind: proto.FlockPOSIX, Start: 5, End: 5},
		{Op: proto.FlockTest, Res: fa, Kind: proto.FlockPOSIX, Type: 0, Start: 0, End: 1},
	} {
		if _, err := s.Flock(ctx, "A", "a", r); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%+v: %v", r, err)
		}
	}
}

// DropBits drops one client's metadata locks on a file, DropAll all of
// its locks there, data locks too; neither calls anyone back nor touches
// another client's locks. A writer after them calls back only what is
// left.
func TestDropLocks(t *testing.T) {
	s, n, _ := setup(5 * time.Second)
	ctx := context.Background()
	if _, err := s.Enqueue(ctx, "A", "a", pr(0, 10)); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.TryBits("A", fa, proto.LockUpdate); g.ID == 0 {
		t.Fatal("no Update lock for A")
	}
	if _, err := s.Enqueue(ctx, "B", "b", pr(0, 10)); err != nil {
		t.Fatal(err)
	}
	now := func() int64 { return counter(s.Counters(), "ldlm_locks_now") }
	if now() != 3 {
		t.Fatalf("%d locks, want 3", now())
	}
	s.DropBits("A", fa)
	if now() != 2 {
		t.Fatalf("after DropBits: %d locks, want A's and B's data locks", now())
	}
	s.DropAll("A", fa)
	if now() != 1 {
		t.Fatalf("after DropAll: %d locks, want B's", now())
	}
	called := recordCallbacks(n, "A", "B")
	if _, err := s.Enqueue(ctx, "C", "c", pw(0, 10)); err != nil {
		t.Fatal(err)
	}
	if got := called(); len(got) != 1 || got[0] != "B" {
		t.Fatalf("a writer called back %v, want B only", got)
	}
}
