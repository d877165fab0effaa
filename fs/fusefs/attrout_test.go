package fusefs

import (
	"context"
	"syscall"
	"testing"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/proto"
)

// A reply whose attributes were read before the client held the file's
// Update lock never goes to the kernel with a timeout, though the lock is
// held by the time it is answered (another request's reply brought it):
// of two replies to requests it sent together the kernel keeps the first
// it reads, and would keep the older size for the lock's whole life,
// after showing the newer. What the client keeps under the lock goes out
// in its place, with the timeout; with nothing kept, the reply goes out
// with none.
func TestAttrOutGivesOnlyWhatIsKept(t *testing.T) {
	a, cl := testcluster.InProc(t, 1, 2, fs.Options{})
	ctx := context.Background()
	b := testcluster.InProcClient(t, cl, "b")
	attr, f, err := a.Create(ctx, a.Root(), "f", 0o644, 0, true, true, syscall.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = f.WriteAt(ctx, make([]byte, 100), 0)
	must(err)
	must(f.Flush(ctx))

	fb, err := b.Open(ctx, attr.FID, syscall.O_WRONLY)
	must(err)
	_, err = fb.WriteAt(ctx, make([]byte, 100), 100)
	must(err)
	old, err := a.Getattr(ctx, attr.FID) // b's write lock keeps Update from a
	must(err)
	fsys := New(a, DefaultMountOptions().Options)
	if _, timeout := fsys.attrOut(old); timeout != 0 {
		t.Errorf("an answer with no Update lock held went out for %v", timeout)
	}
	// a writes again: its write lock calls b's back, and a's next
	// getattr is granted the Update lock with the size b's answer gave.
	_, err = f.WriteAt(ctx, []byte{1}, 0)
	must(err)
	must(f.Flush(ctx))
	cur, err := a.Getattr(ctx, attr.FID)
	must(err)
	if cur.Size != 200 || a.Caches(attr.FID)&proto.LockUpdate == 0 {
		t.Fatalf("after b's lock went: size %d, locks %#x; want 200 under the Update lock", cur.Size, a.Caches(attr.FID))
	}
	must(fb.Release(ctx))
	must(f.Release(ctx))
	old.Size = 150 // the reply to a request that left before b's write landed

	got, timeout := fsys.attrOut(old)
	if timeout == 0 || got.Size != cur.Size {
		t.Errorf("an answer read before the Update lock came: size %d for %v, want %d with a timeout", got.Size, timeout, cur.Size)
	}
	if _, timeout := fsys.attrOut(cur); timeout == 0 {
		t.Error("the kept answer went out with no timeout")
	}
}
