package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func statT(t *testing.T, path string) syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	must(t, syscall.Stat(path, &st))
	return st
}

// TestDirAttrsAfterChange: the kernel asks again for a directory's
// attributes after every entry made or removed in it, and the client
// answers from the change's own reply rather than the MDT. What stat
// shows must be what the MDT has: link counts and times that moved with
// each change, a chmod made meanwhile, a rename's ctime, and another
// client's change once the attribute timeout has passed.
func TestDirAttrsAfterChange(t *testing.T) {
	c, mnt := mount(t)
	dir := filepath.Join(mnt, "d")
	must(t, os.Mkdir(dir, 0o755))
	before := snapshot(t, mnt)
	prev := statT(t, dir)
	const n = 20
	for i := 0; i < n; i++ {
		must(t, os.Mkdir(filepath.Join(dir, fmt.Sprint("sub", i)), 0o755))
		st := statT(t, dir)
		if st.Nlink != uint64(2+i+1) {
			t.Fatalf("after mkdir %d: nlink %d, want %d", i, st.Nlink, 2+i+1)
		}
		if st.Mtim.Nano() <= prev.Mtim.Nano() || st.Ctim.Nano() <= prev.Ctim.Nano() {
			t.Fatalf("after mkdir %d: mtime %v ctime %v did not move from %v %v", i, st.Mtim, st.Ctim, prev.Mtim, prev.Ctim)
		}
		prev = st
		writeFile(t, filepath.Join(dir, fmt.Sprint("f", i)), []byte("x"))
		must(t, os.Remove(filepath.Join(dir, fmt.Sprint("f", i))))
		st = statT(t, dir)
		if st.Nlink != uint64(2+i+1) || st.Mtim.Nano() <= prev.Mtim.Nano() {
			t.Fatalf("after create and unlink %d: nlink %d mtime %v (before %v)", i, st.Nlink, st.Mtim, prev.Mtim)
		}
		prev = st
	}
	// Subdirectories on the other MDT: the coordinator's reply (an
	// asynchronous mkdir, a distributed rmdir) gives the parent too.
	sfRun(t, c, "setdirstripe", "-D", "-i", "1", dir)
	base := statT(t, dir).Nlink
	for i := 0; i < n; i++ {
		sub := filepath.Join(dir, fmt.Sprint("remote", i))
		must(t, os.Mkdir(sub, 0o755))
		if st := statT(t, dir); st.Nlink != base+1 || st.Mtim.Nano() <= prev.Mtim.Nano() {
			t.Fatalf("after remote mkdir %d: nlink %d (want %d), mtime %v (before %v)", i, st.Nlink, base+1, st.Mtim, prev.Mtim)
		} else {
			prev = st
		}
		must(t, os.Remove(sub))
		if st := statT(t, dir); st.Nlink != base || st.Mtim.Nano() <= prev.Mtim.Nano() {
			t.Fatalf("after remote rmdir %d: nlink %d (want %d), mtime %v (before %v)", i, st.Nlink, base, st.Mtim, prev.Mtim)
		} else {
			prev = st
		}
	}
	d := snapshot(t, mnt).Sub(before)
	hits := d.ClientCounter("dir_attr_hits")
	if hits < 4*n {
		t.Fatalf("%d getattrs of %s answered from a change's reply, want at least %d (mdt getattrs: %d)", hits, dir, 4*n, d.Calls("mdt", "getattr"))
	}
	if a := d.Counter("mdt", "mkdir_remote_async"); a != n {
		t.Fatalf("%d asynchronous remote mkdirs, want %d", a, n)
	}
	t.Logf("%d changes: %d getattrs answered by the client, %d sent to MDTs", 5*n, hits, d.Calls("mdt", "getattr"))

	// A chmod between two changes: the second change's reply has it.
	must(t, os.Chmod(dir, 0o700))
	must(t, os.Mkdir(filepath.Join(dir, "after-chmod"), 0o755))
	if st := statT(t, dir); st.Mode&0o7777 != 0o700 {
		t.Fatalf("after chmod 700 and mkdir: mode %o", st.Mode&0o7777)
	}
	must(t, os.Chmod(dir, 0o755))

	// A rename moves a directory without naming it as a parent: its
	// ctime moves all the same.
	moved := filepath.Join(dir, "sub0")
	must(t, os.Mkdir(filepath.Join(moved, "x"), 0o755))
	old := statT(t, moved)
	must(t, os.Rename(moved, filepath.Join(mnt, "sub0")))
	if st := statT(t, filepath.Join(mnt, "sub0")); st.Ctim.Nano() <= old.Ctim.Nano() {
		t.Fatalf("renamed directory: ctime %v, before the rename %v", st.Ctim, old.Ctim)
	}

	// Another client's change shows once the attribute timeout (1s) has
	// passed, though this client's own change, made before it and not
	// asked about since, left a record of the directory.
	// fstat, not stat: a path walk would look the directory up again,
	// and the lookup's reply refreshes its attributes.
	_, mnt2 := c.MountAt("mnt2")
	f, err := os.Open(dir)
	must(t, err)
	defer f.Close()
	want := statT(t, dir).Nlink + 2
	must(t, os.Mkdir(filepath.Join(dir, "mine"), 0o755))
	must(t, os.Mkdir(filepath.Join(mnt2, "d", "theirs"), 0o755))
	time.Sleep(1200 * time.Millisecond)
	var st syscall.Stat_t
	must(t, syscall.Fstat(int(f.Fd()), &st))
	if st.Nlink != want {
		t.Fatalf("1.2s after another client's mkdir: nlink %d, want %d", st.Nlink, want)
	}

	// Another client's chmod right after this client's own change calls
	// back the Update lock this client kept through its change: the
	// next look, however soon, sees the chmod, not the kept reply.
	for i := 0; i < 5; i++ {
		mode := os.FileMode(0o700 | i<<3)
		must(t, os.Mkdir(filepath.Join(dir, fmt.Sprint("before-chmod", i)), 0o755))
		must(t, os.Chmod(filepath.Join(mnt2, "d"), mode))
		must(t, syscall.Fstat(int(f.Fd()), &st))
		if os.FileMode(st.Mode&0o777) != mode {
			t.Fatalf("round %d: at once after another client's chmod to %o: mode %o", i, mode, st.Mode&0o777)
		}
	}
	must(t, os.Chmod(dir, 0o755))
}

// TestDirAttrsSharedDir: tasks making directories in one directory at
// once (mdtest without -u), each stat of it after its own mkdir. Replies
// cross; whatever the client answers must hold every mkdir that had
// completed when the stat began.
func TestDirAttrsSharedDir(t *testing.T) {
	_, mnt := mount(t)
	dir := filepath.Join(mnt, "shared")
	must(t, os.Mkdir(dir, 0o755))
	before := snapshot(t, mnt)
	const tasks, each = 4, 50
	var completed atomic.Int64
	errs := make(chan error, tasks)
	for g := 0; g < tasks; g++ {
		go func() {
			for i := 0; i < each; i++ {
				if err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("t%d.%d", g, i)), 0o755); err != nil {
					errs <- err
					return
				}
				completed.Add(1)
				floor := completed.Load()
				var st syscall.Stat_t
				if err := syscall.Stat(dir, &st); err != nil {
					errs <- err
					return
				}
				if int64(st.Nlink) < 2+floor {
					errs <- fmt.Errorf("task %d: stat after %d completed mkdirs shows nlink %d", g, floor, st.Nlink)
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < tasks; g++ {
		must(t, <-errs)
	}
	if st := statT(t, dir); st.Nlink != 2+tasks*each {
		t.Fatalf("nlink %d after %d mkdirs", st.Nlink, tasks*each)
	}
	d := snapshot(t, mnt).Sub(before)
	hits := d.ClientCounter("dir_attr_hits")
	if hits == 0 {
		t.Fatalf("no getattr of the shared directory answered by the client (mdt getattrs: %d)", d.Calls("mdt", "getattr"))
	}
	sent := d.Calls("mdt", "getattr")
	t.Logf("%d mkdirs by %d tasks: %d getattrs answered by the client, %d sent to MDTs", tasks*each, tasks, hits, sent)
	// Tasks that find the attributes dropped by one change ask together:
	// each is answered from it (one of them only, before: 12 of 212 went
	// to the MDT). A getattr more than 100 ms after the change goes.
	if sent > 2+(hits+sent)/50 {
		t.Errorf("%d of %d getattrs of the shared directory went to the MDT", sent, hits+sent)
	}
}
