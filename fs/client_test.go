package fs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// start runs MDTs and OSTs in this process over the in-process transport
// and connects a client: the whole stack without FUSE or sockets, so the
// race detector sees every goroutine.
func start(t *testing.T, mdts, osts int) *fs.Client {
	t.Helper()
	c, _ := testcluster.InProc(t, mdts, osts, fs.Options{})
	return c
}

var root = proto.RootFID

// TestConcurrentClientWork runs creates, striped writes, reads, renames,
// truncates and unlinks from many goroutines on one client.
func TestConcurrentClientWork(t *testing.T) {
	c := start(t, 2, 4)
	ctx := context.Background()
	dir, err := c.Mkdir(ctx, root, "work", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Setxattr(ctx, dir.FID, proto.LayoutXattr, []byte("stripe_count=4 stripe_size=65536"), 0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			if err := worker(ctx, c, dir.FID, g); err != nil {
				errs <- fmt.Errorf("worker %d: %w", g, err)
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ents, _, err := c.Readdir(ctx, dir.FID, 0, 1000, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2+8 { // ".", "..", one survivor per worker
		t.Fatalf("%d entries left", len(ents))
	}
}

func worker(ctx context.Context, c *fs.Client, dir proto.FID, g int) error {
	data := make([]byte, 300_000+g)
	for i := range data {
		data[i] = byte(i*g + 1)
	}
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("f%d-%d", g, i)
		a, f, err := c.Create(ctx, dir, name, syscall.S_IFREG|0o644, 0, true, true, syscall.O_RDWR)
		if err != nil {
			return err
		}
		if len(a.Layout.OSTs) != 4 {
			return fmt.Errorf("layout %+v", a.Layout)
		}
		if _, err := f.WriteV(ctx, 1000, [][]byte{data[:777], data[777:]}); err != nil {
			return err
		}
		got := make([]byte, len(data)+1000)
		n, err := f.ReadAt(ctx, got, 0)
		if err != nil || n != len(got) || !bytes.Equal(got[1000:], data) || !bytes.Equal(got[:1000], make([]byte, 1000)) {
			return fmt.Errorf("read back %d bytes, err %v, equal %v", n, err, bytes.Equal(got[1000:], data))
		}
		if err := f.Release(ctx); err != nil {
			return err
		}
		if _, err := c.Setattr(ctx, &fs.SetAttr{FID: a.FID, Valid: proto.SetSize, Size: 70_000}); err != nil {
			return err
		}
		at, err := c.Getattr(ctx, a.FID)
		if err != nil || at.Size != 70_000 {
			return fmt.Errorf("size after truncate: %v %v", at, err)
		}
		if i > 0 {
			if err := c.Rename(ctx, dir, name, dir, fmt.Sprintf("f%d-0", g), 0); err != nil { // replaces
				return err
			}
		}
	}
	if err := c.Unlink(ctx, dir, fmt.Sprintf("f%d-%d", g, 1)); !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("unlink of a renamed-away name: %v", err)
	}
	return nil
}

// TestSizeNotOvertakenByReport checks that attributes read while a close
// reports a grown size never show the size from before the growth: an MDT
// reply sent before the report lands is stale, and the kernel would take
// its smaller size for end of file (the read of 0 bytes TestECFsx found).
func TestSizeNotOvertakenByReport(t *testing.T) {
	c := start(t, 1, 2)
	ctx := context.Background()
	a, keep, err := c.Create(ctx, root, "grows", 0o644, 0, true, true, syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Release(ctx) // the file stays open: each close below is not the last
	var written atomic.Uint64
	stop := make(chan struct{})
	failed := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				close(failed)
				return
			default:
			}
			want := written.Load()
			got, err := c.Getattr(ctx, a.FID)
			if err == nil && got.Size < want {
				err = fmt.Errorf("getattr: size %d, but %d bytes were written before it was asked", got.Size, want)
			}
			if err != nil {
				failed <- err
				return
			}
		}
	}()
	for i := 1; i <= 300; i++ {
		f, err := c.Open(ctx, a.FID, syscall.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(ctx, []byte{byte(i)}, int64(i*100)); err != nil {
			t.Fatal(err)
		}
		written.Store(uint64(i*100 + 1))
		if err := f.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-failed; err != nil {
		t.Fatal(err)
	}
}

// TestReadAheadLoans has a sequential reader keep several ReadView loans
// of read-ahead chunks outstanding while a writer rewrites parts of the
// file with the same bytes (which drops the chunks it touches) and a
// second handle reads at random: each loan must still hold the file's
// bytes when it is given back. Read-ahead buffers are pooled, so a chunk
// recycled while lent would show here as other bytes.
func TestReadAheadLoans(t *testing.T) {
	c := start(t, 1, 2)
	ctx := context.Background()
	const unit, units = 64 << 10, 64
	a, f, err := c.Create(ctx, root, "lent", 0o644, 0, true, true, syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	if err := c.Setxattr(ctx, a.FID, proto.LayoutXattr, []byte("stripe_count=2 stripe_size=65536"), 0); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, unit*units)
	for i := range want {
		want[i] = byte(i*7 + i/4093)
	}
	if _, err := f.WriteAt(ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Fsync(ctx); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // rewrites drop the chunks they touch
		defer wg.Done()
		rng := rand.New(rand.NewPCG(99, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			off := rng.Int64N(int64(len(want)) - unit)
			if _, err := f.WriteAt(ctx, want[off:off+unit], off); err != nil {
				errs <- err
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	type loan struct {
		off  int64
		b    []byte
		done func()
	}
	check := func(l loan) error {
		defer l.done()
		if !bytes.Equal(l.b, want[l.off:l.off+int64(len(l.b))]) {
			return fmt.Errorf("loan of [%d, %d) changed while lent", l.off, l.off+int64(len(l.b)))
		}
		return nil
	}
	h, err := c.Open(ctx, a.FID, syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	var loans []loan
	lent := 0
	const step = 16 << 10
	for pass := 0; pass < 3; pass++ {
		for off := int64(0); off < int64(len(want)); off += step {
			buf := make([]byte, step)
			v, err := h.ReadView(ctx, buf, off)
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Data) > 0 && &v.Data[0] != &buf[0] {
				lent++
			}
			loans = append(loans, loan{off, v.Data, v.Release})
			if len(loans) > 24 { // about six chunks' worth outstanding
				if err := check(loans[0]); err != nil {
					t.Fatal(err)
				}
				loans = loans[1:]
			}
		}
	}
	for _, l := range loans {
		if err := check(l); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if lent == 0 {
		t.Fatal("no read was answered from a read-ahead chunk: the test proves nothing")
	}
	t.Logf("%d of %d reads lent from read-ahead chunks", lent, 3*len(want)/step)
}

// A grant heard of too long ago is not counted on: the OST may have taken
// it back from an idle client without a way to say so. The first write
// after that asks again (an empty write) and then caches as before; one
// within the freshness asks nothing.
func TestStaleGrantAskedAgain(t *testing.T) {
	fs.SetGrantFresh(t, 300*time.Millisecond)
	c := start(t, 1, 1)
	ctx := context.Background()
	write := func(name string) {
		t.Helper()
		_, f, err := c.Create(ctx, root, name, 0o644, 0, true, true, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(ctx, make([]byte, 256<<10), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	write("first")
	asks := fs.CounterOf(c, "grant_asks")
	if asks != 1 {
		t.Fatalf("%d grant asks for a first write to one OST, want 1", asks)
	}
	write("soon")
	if n := fs.CounterOf(c, "grant_asks"); n != asks {
		t.Fatalf("a write within the grant's freshness asked again (%d asks)", n)
	}
	time.Sleep(400 * time.Millisecond)
	write("later")
	if n := fs.CounterOf(c, "grant_asks"); n != asks+1 {
		t.Fatalf("%d grant asks after the grant went stale, want %d", n, asks+1)
	}
	if n := fs.CounterOf(c, "write_through_chunks"); n != 0 {
		t.Fatalf("%d chunks written through with a grant to be had", n)
	}
}

// TestReopenAppendReleaseLate: two clients, two writers on each, append
// lines to one file, each line an open, an append, a flush and a
// release, as a shared log's writers do through the kernel, which sends
// the release after close(2) returns: here each release runs while the
// writer's next open and append go on. A write lock called back while a
// release is reporting the size the last append made must tell the MDT
// that size, or the other client's next line lands on the last one; a
// callback that overtakes its lock's grant must not wait for the
// client's own requests (an enqueue queued behind that lock: both
// clients hung until evicted). Every line is there once, in each
// writer's order.
func TestReopenAppendReleaseLate(t *testing.T) {
	a, cl := testcluster.InProc(t, 1, 2, fs.Options{})
	// Each close takes a little longer on the MDT, as across a network:
	// the other client's lock callbacks then find releases on their way.
	cl.WrapMDT(0, proto.MClose, func(next rpc.Handler) rpc.Handler {
		return func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
			time.Sleep(time.Millisecond)
			return next(ctx, r)
		}
	})
	ctx := context.Background()
	b := testcluster.InProcClient(t, cl, "b")
	attr, f, err := a.Create(ctx, root, "log", 0o644, 0, true, true, syscall.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Release(ctx); err != nil {
		t.Fatal(err)
	}
	const lines = 2500
	const writers = 4 // two on each client
	line := func(w, i int) []byte { return fmt.Appendf(nil, "w%d %05d\n", w, i) }
	writer := func(w int, c *fs.Client) error {
		var releases sync.WaitGroup
		var failed atomic.Value
		defer releases.Wait()
		for i := range lines {
			f, err := c.Open(ctx, attr.FID, syscall.O_WRONLY|syscall.O_APPEND)
			if err != nil {
				return err
			}
			if _, _, err := f.Append(ctx, [][]byte{line(w, i)}); err != nil {
				return err
			}
			if err := f.Flush(ctx); err != nil {
				return err
			}
			releases.Add(1)
			go func() {
				defer releases.Done()
				if err := f.Release(ctx); err != nil {
					failed.Store(err)
				}
			}()
			if err, _ := failed.Load().(error); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make(chan error, writers)
	for w := range writers {
		c := []*fs.Client{a, b}[w%2]
		go func() { errs <- writer(w, c) }()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	r, err := b.Open(ctx, attr.FID, syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(ctx)
	got := make([]byte, writers*lines*len(line(0, 0))+1)
	n, err := r.ReadAt(ctx, got, 0)
	if err != nil {
		t.Fatal(err)
	}
	got = got[:n]
	next := make([]int, writers)
	for k, l := range bytes.SplitAfter(got, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var w, i int
		if _, err := fmt.Sscanf(string(l), "w%d %d", &w, &i); err != nil || w < 0 || w >= writers || !bytes.Equal(l, line(w, i)) {
			t.Fatalf("line %d is %q", k, l)
		}
		if i != next[w] {
			t.Fatalf("line %d is writer %d's line %d, want its line %d", k, w, i, next[w])
		}
		next[w]++
	}
	for w := range writers {
		if next[w] != lines {
			t.Fatalf("%d bytes hold %v lines of each writer, want %d", n, next, lines)
		}
	}
}
