package fs_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"syscall"
	"testing"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// TestCoalescerAgainstFlatBuffer drives the write-back cache with random
// vectored writes (random iovec splits, partial first and last pieces),
// reads, truncates and fsyncs, and checks every read against a flat
// buffer holding what the file must contain.
func TestCoalescerAgainstFlatBuffer(t *testing.T) {
	c := start(t, 1, 3)
	ctx := context.Background()
	for seed := int64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewSource(seed))
		layout := []string{"stripe_count=1", "stripe_count=3 stripe_size=65536", "stripe_count=2 stripe_size=131072"}[seed%3]
		a, f, err := c.Create(ctx, proto.RootFID, "prop"+string(rune('a'+seed)), syscall.S_IFREG|0o644, 0, true, true, syscall.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Setxattr(ctx, a.FID, proto.LayoutXattr, []byte(layout), 0); err != nil {
			t.Fatal(err)
		}
		var model []byte
		for op := 0; op < 300; op++ {
			switch r := rng.Intn(10); {
			case r < 6: // vectored write
				model = randomWriteV(t, ctx, rng, f, model, 200_000, fmt.Sprintf("seed %d op %d", seed, op))
			case r < 8: // read
				off, n := rng.Intn(len(model)+1), rng.Intn(300_000)
				got := make([]byte, n)
				k, err := f.ReadAt(ctx, got, int64(off))
				if err != nil {
					t.Fatalf("seed %d op %d: read: %v", seed, op, err)
				}
				want := model[min(off, len(model)):min(off+n, len(model))]
				if !bytes.Equal(got[:k], want) {
					t.Fatalf("seed %d op %d: read [%d,+%d) differs from the model", seed, op, off, n)
				}
			case r < 9: // truncate
				model = randomTruncate(t, ctx, rng, c, a.FID, model, fmt.Sprintf("seed %d op %d", seed, op))
			default:
				if err := f.Fsync(ctx); err != nil {
					t.Fatalf("seed %d op %d: fsync: %v", seed, op, err)
				}
			}
		}
		if err := f.Release(ctx); err != nil {
			t.Fatal(err)
		}
		g, err := c.Open(ctx, a.FID, syscall.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(model)+10)
		k, err := g.ReadAt(ctx, got, 0)
		if err != nil || !bytes.Equal(got[:k], model) {
			t.Fatalf("seed %d: after close and reopen the file differs from the model (%d bytes, %v)", seed, k, err)
		}
		g.Release(ctx)
	}
}

// randomWriteV writes 1 to maxTotal random bytes at a random offset below
// 1 MiB as a vector of random pieces (never aligned on purpose), and
// returns the flat model of the file with the write applied.
func randomWriteV(t *testing.T, ctx context.Context, rng *rand.Rand, f *fs.File, model []byte, maxTotal int, what string) []byte {
	t.Helper()
	off := rng.Intn(1 << 20)
	total := 1 + rng.Intn(maxTotal)
	data := make([]byte, total)
	rng.Read(data)
	var iovs [][]byte
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 1+rng.Intn(9000))
		iovs = append(iovs, rest[:n])
		rest = rest[n:]
	}
	if _, err := f.WriteV(ctx, int64(off), iovs); err != nil {
		t.Fatalf("%s: write: %v", what, err)
	}
	if need := off + total; need > len(model) {
		model = append(model, make([]byte, need-len(model))...)
	}
	copy(model[off:], data)
	return model
}

// randomTruncate sets the file's size to a random one up to 100,000 bytes
// past the model's end, through the MDT as truncate(2) does, and returns
// the model cut or zero-extended to match.
func randomTruncate(t *testing.T, ctx context.Context, rng *rand.Rand, c *fs.Client, fid proto.FID, model []byte, what string) []byte {
	t.Helper()
	size := rng.Intn(len(model) + 100_000)
	if _, err := c.Setattr(ctx, &fs.SetAttr{FID: fid, Valid: proto.SetSize, Size: uint64(size)}); err != nil {
		t.Fatalf("%s: truncate: %v", what, err)
	}
	if size < len(model) {
		return model[:size]
	}
	return append(model, make([]byte, size-len(model))...)
}

// TestScatteredWritesOneRPC: small writes scattered over one chunk go to
// its OST as one request of several extents when the chunk is flushed,
// and read back exact.
func TestScatteredWritesOneRPC(t *testing.T) {
	c, _ := startWith(t, 1, 1, fs.Options{})
	ctx := context.Background()
	_, f := createWithLayout(t, c, "scatter", "stripe_count=1 stripe_size=1048576")
	want := make([]byte, 1<<20)
	end := 0
	writes0, asks0 := methodCalls(c.Stats.Snapshot(), proto.OWrite), fs.CounterOf(c, "grant_asks")
	for i := range 40 {
		off := (i * 7919 * 4096) % (1 << 20)
		p := bytes.Repeat([]byte{byte(i + 1)}, 4096)
		if _, err := f.WriteAt(ctx, p, int64(off)); err != nil {
			t.Fatal(err)
		}
		copy(want[off:], p)
		end = max(end, off+len(p))
	}
	want = want[:end]
	if err := f.Fsync(ctx); err != nil {
		t.Fatal(err)
	}
	// A first write to an OST asks for a grant with an empty write.
	writes := methodCalls(c.Stats.Snapshot(), proto.OWrite) - writes0
	if asks := fs.CounterOf(c, "grant_asks") - asks0; writes-asks != 1 {
		t.Errorf("40 scattered 4 KiB writes to one chunk took %d ost_writes (%d of them grant asks), want 1 with data", writes, asks)
	}
	got := make([]byte, 1<<20)
	if n, err := f.ReadAt(ctx, got, 0); n != len(want) || !bytes.Equal(got[:n], want) {
		t.Fatalf("read back %d bytes (%v), want %d; equal %v", n, err, len(want), bytes.Equal(got[:n], want))
	}
}

func methodCalls(s []rpc.MethodCount, method uint16) int64 {
	for _, m := range s {
		if m.Method == method {
			return m.Calls
		}
	}
	return 0
}
