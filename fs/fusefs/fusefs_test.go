package fusefs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/fs/fusefs"
	"github.com/stripefs/stripefs/internal/testcluster"
)

// mountInProc mounts a cluster of servers in this process through the
// FUSE frontend in this process too, so that the race detector sees the
// frontend, the client library and the servers at once.
func mountInProc(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	c, _ := testcluster.InProc(t, 2, 2, fs.Options{})
	dir := t.TempDir()
	srv, err := fusefs.Mount(c, dir, fusefs.DefaultMountOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return dir
}

// Goroutines of this process work through the mount at once: writes in
// odd pieces, fsync, reads back, renames across MDTs, directory listings,
// xattrs, flock on one shared file and unlinks, under -race (make
// test-unit) with the frontend, client and servers in one process.
func TestConcurrentThroughMount(t *testing.T) {
	mnt := mountInProc(t)
	// a on MDT0 (the root's), b on MDT1: renames between them cross MDTs.
	a, b := filepath.Join(mnt, "a"), filepath.Join(mnt, "b")
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(mnt, "lustre.lmv.default", []byte("mdt_index=1"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(b, 0o755); err != nil {
		t.Fatal(err)
	}
	v := make([]byte, 256)
	if n, err := unix.Getxattr(b, "lustre.lmv", v); err != nil || !bytes.Contains(v[:max(n, 0)], []byte("mdt_index=1")) {
		t.Fatalf("b is not on mdt1: %q %v", v[:max(n, 0)], err)
	}
	shared := filepath.Join(mnt, "lockfile")
	if err := os.WriteFile(shared, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const workers = 4
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- work(w, a, b, shared)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{a, b} {
		ents, err := os.ReadDir(d)
		if err != nil || len(ents) != 0 {
			t.Fatalf("%s after every worker removed its files: %d entries, %v", d, len(ents), err)
		}
	}
}

func work(w int, a, b, shared string) error {
	rng := rand.New(rand.NewPCG(uint64(w), 1))
	for i := 0; i < 8; i++ {
		name := fmt.Sprintf("w%d-%d", w, i)
		p := filepath.Join(a, name)
		want := make([]byte, 1<<20+rng.IntN(1<<20))
		for j := range want {
			want[j] = byte(rng.Uint32())
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o644)
		if err != nil {
			return err
		}
		for off := 0; off < len(want); {
			n := min(len(want)-off, 1+rng.IntN(200<<10))
			if _, err := f.WriteAt(want[off:off+n], int64(off)); err != nil {
				f.Close()
				return fmt.Errorf("write %s at %d: %w", name, off, err)
			}
			off += n
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		got := make([]byte, len(want))
		if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
			f.Close()
			return fmt.Errorf("%s reads back wrong (%v)", name, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := unix.Setxattr(p, "user.worker", []byte(name), 0); err != nil {
			return fmt.Errorf("setxattr %s: %w", name, err)
		}
		q := filepath.Join(b, name)
		if err := os.Rename(p, q); err != nil {
			return err
		}
		v := make([]byte, 64)
		if n, err := unix.Getxattr(q, "user.worker", v); err != nil || string(v[:n]) != name {
			return fmt.Errorf("xattr of %s after the rename: %q %v", name, v[:max(n, 0)], err)
		}
		if st, err := os.Stat(q); err != nil || st.Size() != int64(len(want)) {
			return fmt.Errorf("stat %s: %v", name, err)
		}
		if _, err := os.ReadDir(b); err != nil {
			return err
		}
		lf, err := os.OpenFile(shared, os.O_RDWR|syscall.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		err = unix.Flock(int(lf.Fd()), unix.LOCK_EX)
		if err == nil {
			err = unix.Flock(int(lf.Fd()), unix.LOCK_UN)
		}
		lf.Close()
		if err != nil {
			return fmt.Errorf("flock: %w", err)
		}
		if got, err := os.ReadFile(q); err != nil || !bytes.Equal(got, want) {
			return fmt.Errorf("%s after the rename reads back wrong (%v)", name, err)
		}
		if err := os.Remove(q); err != nil {
			return err
		}
	}
	return nil
}
