package fs_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/proto"
)

// A directory's attributes kept from this client's change in it must not
// answer once another client's change called its Update lock back: a
// chmod by b right after a's create is seen by a's next getattr, however
// soon.
func TestDirAttrsForgetOnCallback(t *testing.T) {
	a, cl := testcluster.InProc(t, 1, 2, fs.Options{})
	a.KeepDirAttrs(time.Minute)
	ctx := context.Background()
	b := testcluster.InProcClient(t, cl, "b")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	d, err := a.Mkdir(ctx, a.Root(), "d", 0o755)
	must(err)
	_, f, err := a.Create(ctx, d.FID, "f", 0o644, 0, true, true, syscall.O_WRONLY)
	must(err)
	must(f.Release(ctx))
	if _, err := a.Getattr(ctx, d.FID); err != nil { // answered from the create's reply
		t.Fatal(err)
	}
	t.Logf("a's locks on d after its create: %#x", a.Caches(d.FID))
	_, err = b.Setattr(ctx, &fs.SetAttr{FID: d.FID, Valid: proto.SetMode, Mode: 0o700})
	must(err)
	got, err := a.Getattr(ctx, d.FID)
	must(err)
	if got.Mode&0o777 != 0o700 {
		t.Fatalf("a's getattr after b's chmod: mode %o, want 700", got.Mode&0o777)
	}
}
