package e2e

import (
	"bytes"
	"context"
	"fmt"
	"github.com/pkg/xattr"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/bench"
	"github.com/stripefs/stripefs/internal/testcluster"
)

// Many clients, one truth: what one mount does is what the others see, at
// once, with the servers and every mount in processes of their own.

// lockTimeout is the MDTs' callback bound in these tests: a killed client
// is evicted after it.
const lockTimeout = 3 * time.Second

// coherent starts 2 MDTs and 4 OSTs and n mounts of them, each a client
// process of its own, and returns the mount points.
func coherent(t *testing.T, n int) (*testcluster.Cluster, []string) {
	t.Helper()
	c := testcluster.StartArgs(t, 2, 4, "--lock-timeout", lockTimeout.String())
	mnts := []string{c.MountFS()}
	for i := 1; i < n; i++ {
		_, m := c.MountAt(fmt.Sprintf("mnt%c", 'a'+i))
		mnts = append(mnts, m)
	}
	return c, mnts
}

// Appends from every mount, each keeping its descriptor: alternating, then
// all at once. Every line is there once, whole, and each mount's lines
// are in its order.
func TestAppendAcrossMounts(t *testing.T) {
	_, mnts := coherent(t, 3)
	for _, mode := range []string{"alternating", "concurrent"} {
		t.Run(mode, func(t *testing.T) {
			name := "log-" + mode
			const perMount = 400
			fds := make([]*os.File, len(mnts))
			for i, m := range mnts {
				f, err := os.OpenFile(filepath.Join(m, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
				must(t, err)
				defer f.Close()
				fds[i] = f
			}
			line := func(m, i int) []byte {
				return []byte(fmt.Sprintf("mount %d line %05d %s\n", m, i, strings.Repeat("x", 20+i%7)))
			}
			if mode == "alternating" {
				for i := range perMount {
					for m, f := range fds {
						if _, err := f.Write(line(m, i)); err != nil {
							t.Fatal(err)
						}
					}
				}
			} else {
				var wg sync.WaitGroup
				for m, f := range fds {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range perMount {
							if _, err := f.Write(line(m, i)); err != nil {
								t.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
			}
			for _, f := range fds {
				must(t, f.Close())
			}
			for _, m := range mnts { // every mount sees the same whole file
				checkAppends(t, filepath.Join(m, name), len(mnts), perMount, line)
			}
		})
	}
}

func checkAppends(t *testing.T, path string, mounts, perMount int, line func(m, i int) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	next := make([]int, mounts)
	n := 0
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			t.Fatalf("%s: a torn last line %q", path, b)
		}
		l := b[:nl+1]
		b = b[nl+1:]
		var m, i int
		if _, err := fmt.Sscanf(string(l), "mount %d line %d", &m, &i); err != nil || m < 0 || m >= mounts {
			t.Fatalf("%s: line %d is %q", path, n, l)
		}
		if i != next[m] || !bytes.Equal(l, line(m, i)) {
			t.Fatalf("%s: line %d is %q, want mount %d's line %d", path, n, l, m, next[m])
		}
		next[m]++
		n++
	}
	if n != mounts*perMount {
		t.Fatalf("%s: %d lines, want %d (%v of each mount's)", path, n, mounts*perMount, next)
	}
}

// A write below the end never shrinks the file: B, which opened it before
// A wrote further out, writes the start and fsyncs.
func TestSizeNeverShrinks(t *testing.T) {
	_, mnts := coherent(t, 2)
	a, b := filepath.Join(mnts[0], "f"), filepath.Join(mnts[1], "f")
	writeFile(t, a, nil)
	fb, err := os.OpenFile(b, os.O_WRONLY, 0)
	must(t, err)
	fa, err := os.OpenFile(a, os.O_WRONLY, 0)
	must(t, err)
	_, err = fa.WriteAt(bytes.Repeat([]byte{'A'}, 1000), 1000)
	must(t, err)
	must(t, fa.Sync())
	_, err = fb.WriteAt(bytes.Repeat([]byte{'B'}, 1000), 0)
	must(t, err)
	must(t, fb.Sync())
	for _, p := range []string{a, b} {
		if st, err := os.Stat(p); err != nil || st.Size() != 2000 {
			t.Errorf("stat %s: %v, size %d, want 2000", p, err, st.Size())
		}
	}
	must(t, fb.Close())
	must(t, fa.Close())
	want := append(bytes.Repeat([]byte{'B'}, 1000), bytes.Repeat([]byte{'A'}, 1000)...)
	for _, p := range []string{a, b} {
		if got := readFile(t, p); !bytes.Equal(got, want) {
			t.Errorf("%s after both closed: %d bytes, not B's then A's", p, len(got))
		}
	}
}

// What a write on A returned is what a read on B returns at once: without
// fsync or close on A, whether B opens afresh or reads through a
// descriptor (and its read-ahead) it had before; a stat on B shows A's
// size; a truncate on A is B's next read's end.
func TestReadAfterWriteAcrossMounts(t *testing.T) {
	_, mnts := coherent(t, 2)
	a, b := filepath.Join(mnts[0], "shared"), filepath.Join(mnts[1], "shared")
	const size = 8 << 20
	data := make([]byte, size)
	pattern(data, 0, 1)
	writeFile(t, a, data)
	fb, err := os.Open(b)
	must(t, err)
	defer fb.Close()
	whole := make([]byte, size)
	if _, err := fb.ReadAt(whole, 0); err != nil || !bytes.Equal(whole, data) { // B reads ahead and caches
		t.Fatalf("B's first read: %v", err)
	}
	fa, err := os.OpenFile(a, os.O_WRONLY, 0)
	must(t, err)
	defer fa.Close()
	for round, off := range []int64{0, 4095, 1 << 20, 5<<20 + 17, size - 100} {
		patch := []byte(fmt.Sprintf("round %d from A", round))
		if _, err := fa.WriteAt(patch, off); err != nil {
			t.Fatal(err)
		}
		copy(data[off:], patch)
		got := make([]byte, len(patch)+64)
		lo := max(0, off-32)
		n, _ := fb.ReadAt(got, lo)
		if !bytes.Equal(got[:n], data[lo:min(int64(size), lo+int64(len(got)))]) {
			t.Fatalf("round %d: B's descriptor read %q at %d, want %q", round, got[:n], lo, data[lo:lo+int64(n)])
		}
		if fresh := readFile(t, b); !bytes.Equal(fresh, data) {
			t.Fatalf("round %d: B's fresh open read other bytes", round)
		}
	}
	// Growing without close: B's stat and read see the new end.
	tail := []byte("grown by A, not closed")
	_, err = fa.WriteAt(tail, size+4096)
	must(t, err)
	st, err := os.Stat(b)
	must(t, err)
	if st.Size() != size+4096+int64(len(tail)) {
		t.Errorf("B's stat after A grew the file: %d, want %d", st.Size(), size+4096+len(tail))
	}
	got := make([]byte, 4096+len(tail))
	if n, _ := fb.ReadAt(got, size); n != len(got) || !bytes.Equal(got[4096:], tail) || !bytes.Equal(got[:4096], make([]byte, 4096)) {
		t.Errorf("B read %d bytes past the old end: %q", n, got[4096:n])
	}
	// A truncate on A is where B's next read ends.
	must(t, fa.Truncate(3<<20))
	n, err := fb.ReadAt(whole, 0)
	if n != 3<<20 || !bytes.Equal(whole[:n], data[:n]) {
		t.Errorf("B's read after A's truncate: %d bytes (%v), want %d", n, err, 3<<20)
	}
	if st, err := os.Stat(b); err != nil || st.Size() != 3<<20 {
		t.Errorf("B's stat after A's truncate: %v %d", err, st.Size())
	}
}

// Names made, renamed and removed on one mount are there, moved and gone
// on the next lookup on another, however recently it looked them up.
func TestNamesAcrossMounts(t *testing.T) {
	_, mnts := coherent(t, 2)
	a, b := mnts[0], mnts[1]
	for i := range 50 {
		n := fmt.Sprintf("n%d", i)
		writeFile(t, filepath.Join(a, n), []byte(n))
		if got := readFile(t, filepath.Join(b, n)); string(got) != n { // B caches the name
			t.Fatalf("B reads %q in %s", got, n)
		}
		must(t, os.Rename(filepath.Join(a, n), filepath.Join(a, n+"-moved")))
		if _, err := os.Stat(filepath.Join(b, n)); !os.IsNotExist(err) {
			t.Fatalf("B still sees %s after A renamed it: %v", n, err)
		}
		if got := readFile(t, filepath.Join(b, n+"-moved")); string(got) != n {
			t.Fatalf("B reads %q in %s-moved", got, n)
		}
		must(t, os.Remove(filepath.Join(a, n+"-moved")))
		if _, err := os.Stat(filepath.Join(b, n+"-moved")); !os.IsNotExist(err) {
			t.Fatalf("B still sees %s-moved after A removed it: %v", n, err)
		}
		must(t, os.Mkdir(filepath.Join(b, n), 0o700))
		if st, err := os.Stat(filepath.Join(a, n)); err != nil || !st.IsDir() {
			t.Fatalf("A does not see B's new directory %s: %v", n, err)
		}
		must(t, os.Chmod(filepath.Join(a, n), 0o751))
		if st, err := os.Stat(filepath.Join(b, n)); err != nil || st.Mode().Perm() != 0o751 {
			t.Fatalf("B sees mode %v of %s after A's chmod: %v", st.Mode(), n, err)
		}
		must(t, os.Remove(filepath.Join(b, n)))
	}
}

// Two writers in the same rows of an erasure-coded file: parity agrees
// with the data, and with an OST down a read returns exactly what was
// written.
func TestECTwoWriters(t *testing.T) {
	c, mnts := coherent(t, 2)
	dir := filepath.Join(mnts[0], "ec")
	must(t, os.Mkdir(dir, 0o755))
	sfRun(t, c, "setstripe", "--ec", "2+1", "-S", "64k", dir)
	const unit, rows = 64 << 10, 24
	want := make([]byte, rows*2*unit)
	fa, err := os.OpenFile(filepath.Join(dir, "f"), os.O_CREATE|os.O_WRONLY, 0o644)
	must(t, err)
	fb, err := os.OpenFile(filepath.Join(mnts[1], "ec", "f"), os.O_WRONLY, 0)
	must(t, err)
	for r := range rows {
		// A writes the first unit of each row, B the second, in turn, each
		// leaving the row partial in its cache until the other needs it.
		for w, f := range []*os.File{fa, fb} {
			off := int64(r*2*unit + w*unit)
			b := make([]byte, unit-100*w) // B's leaves a tail of the row unwritten
			pattern(b, off, byte(10+w))
			_, err := f.WriteAt(b, off)
			must(t, err)
			copy(want[off:], b)
		}
	}
	must(t, fa.Close())
	must(t, fb.Close())
	want = want[:rows*2*unit-100]
	if out := sfRun(t, c, "scrub", mnts[0]); !strings.Contains(out, " 0 rows with findings") {
		t.Fatalf("scrub after two writers:\n%s", out)
	}
	c.Kill9(c.OSTs[0])
	for _, m := range mnts {
		if got := readFile(t, filepath.Join(m, "ec", "f")); !bytes.Equal(got, want) {
			t.Fatalf("%s with ost0 down: %d bytes, not what was written (%d)", m, len(got), len(want))
		}
	}
}

// A client killed while it holds write locks is evicted once it cannot
// answer, and the others go on: a conflicting write proceeds within the
// lock timeout, and the killed client's unflushed data is nowhere.
func TestKilledHolderIsEvicted(t *testing.T) {
	c := testcluster.StartArgs(t, 2, 4, "--lock-timeout", lockTimeout.String())
	a := c.MountFS()
	pb, b := c.MountAt("mntb")
	writeFile(t, filepath.Join(a, "f"), bytes.Repeat([]byte{'a'}, 4096))
	// B writes without flushing: its data sits in its cache under its lock.
	out, err := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(b, "f"), "bs=4096", "count=1", "conv=notrunc", "status=none").CombinedOutput()
	if err != nil {
		t.Fatalf("dd on B: %v\n%s", err, out)
	}
	c.Kill9(pb)
	start := time.Now()
	f, err := os.OpenFile(filepath.Join(a, "f"), os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("A after B died"), 0)
	must(t, err)
	must(t, f.Close())
	took := time.Since(start)
	if took > lockTimeout+5*time.Second {
		t.Errorf("A's write behind a dead holder took %v (lock timeout %v)", took, lockTimeout)
	}
	got := readFile(t, filepath.Join(a, "f"))
	if !bytes.HasPrefix(got, []byte("A after B died")) || len(got) != 4096 {
		t.Errorf("file after the eviction: %q...", got[:min(len(got), 32)])
	}
	mdtLog, _ := os.ReadFile(c.MDTs[0].Log)
	if !bytes.Contains(mdtLog, []byte("evicted client")) {
		t.Errorf("the MDT did not log the eviction:\n%s", mdtLog)
	}
	t.Logf("write behind a killed holder: %v", took)
}

// Clients keep the locks they hold across a restart of the MDT (and an
// OST): they replay them in the MDT's recovery window, go on using them,
// and the replayed locks still keep them coherent. (The test holds no
// descriptor on the mounts while it starts servers: a fork closes its
// copies, and the kernel's flush of each would wait for the MDT.)
func TestLockReplayAfterRestart(t *testing.T) {
	c, mnts := coherent(t, 2)
	a, b := mnts[0], mnts[1]
	f1, f2 := make([]byte, 2<<20), make([]byte, 2<<20)
	pattern(f1, 0, 3)
	pattern(f2, 0, 4)
	writeFile(t, filepath.Join(a, "f1"), f1) // A holds a write lock on f1
	writeFile(t, filepath.Join(a, "f2"), f2)
	if got := readFile(t, filepath.Join(b, "f2")); !bytes.Equal(got, f2) { // B a read lock on f2
		t.Fatal("B's read of f2 before the restart")
	}
	enqA := clientCounter(t, a, "lock_enqueues")
	c.Kill9(c.MDTs[0])
	c.Kill9(c.OSTs[0])
	c.Restart(c.MDTs[0]) // the MGS first: a starting OST registers there
	c.Restart(c.OSTs[0])
	// A writes f1 under the lock it replayed; B's read calls it back.
	patch := []byte("A after the restart")
	fa, err := os.OpenFile(filepath.Join(a, "f1"), os.O_WRONLY, 0)
	must(t, err)
	_, err = fa.WriteAt(patch, 12345)
	must(t, err)
	copy(f1[12345:], patch)
	if n := clientCounter(t, a, "lock_enqueues") - enqA; n != 0 {
		t.Errorf("A took %d new data locks for f1: its lock was not replayed", n)
	}
	if got := readFile(t, filepath.Join(b, "f1")); !bytes.Equal(got, f1) {
		t.Error("B does not read A's write to f1 after the restart")
	}
	must(t, fa.Close())
	// A's write to f2 calls back the read lock B replayed.
	fa, err = os.OpenFile(filepath.Join(a, "f2"), os.O_WRONLY, 0)
	must(t, err)
	_, err = fa.WriteAt(patch, 777)
	must(t, err)
	copy(f2[777:], patch)
	if got := readFile(t, filepath.Join(b, "f2")); !bytes.Equal(got, f2) {
		t.Error("B does not read A's write to f2 after the restart")
	}
	must(t, fa.Close())
	for _, m := range mnts {
		if n := clientCounter(t, m, "locks_replayed"); n == 0 {
			t.Errorf("%s replayed no lock", m)
		}
		if n := clientCounter(t, m, "locks_replay_refused"); n != 0 {
			t.Errorf("%s: %d locks refused on replay", m, n)
		}
	}
}

// A single client pays for locks once per file, not per RPC: a long
// sequential write takes one data lock; the create that made the file
// grants it, and an existing file's first write enqueues it.
func TestOneLockPerFile(t *testing.T) {
	_, mnts := coherent(t, 2)
	buf := make([]byte, 1<<20)
	write := func(f *os.File) {
		for i := range 256 {
			pattern(buf, int64(i)<<20, 5)
			_, err := f.Write(buf)
			must(t, err)
		}
		must(t, f.Close())
	}
	p := filepath.Join(mnts[0], "big")
	before, grants := clientCounter(t, mnts[0], "lock_enqueues"), clientCounter(t, mnts[0], "locks_granted")
	f, err := os.Create(p)
	must(t, err)
	write(f)
	if n := clientCounter(t, mnts[0], "lock_enqueues") - before; n != 0 {
		t.Errorf("%d data lock enqueues for one 256 MiB sequential write of a file just created, want 0 (the create grants it)", n)
	}
	if n := clientCounter(t, mnts[0], "locks_granted") - grants; n != 2 {
		t.Errorf("%d locks granted to create and write a file, want 2 (metadata and data, both with the create)", n)
	}
	// Another client's write calls it back; this one then enqueues again,
	// once or twice (twice here: the first grant's range depends on what
	// the other client still holds then), never once a write.
	writeFile(t, filepath.Join(mnts[1], "big"), []byte("other"))
	before = clientCounter(t, mnts[0], "lock_enqueues")
	f, err = os.OpenFile(p, os.O_WRONLY, 0)
	must(t, err)
	write(f)
	if n := clientCounter(t, mnts[0], "lock_enqueues") - before; n < 1 || n > 2 {
		t.Errorf("%d data lock enqueues for one 256 MiB sequential rewrite after another client's write, want 1 or 2 (not one a write)", n)
	}
	var st syscall.Stat_t
	must(t, syscall.Stat(filepath.Join(mnts[0], "big"), &st))
	if st.Size != 256<<20 {
		t.Errorf("size %d", st.Size)
	}
}

// A seeded random run of writes, appends, truncates, reads, renames and
// unlinks on a few files, each from one of two mounts in turn, through
// fresh opens and through descriptors each mount keeps: every result is
// checked against one model of the files. STRIPEFS_MODEL_SEED replays a
// run; STRIPEFS_MODEL_OPS sets its length.
func TestMultiClientModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STRIPEFS_MODEL_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	ops := 2500
	if s := os.Getenv("STRIPEFS_MODEL_OPS"); s != "" {
		fmt.Sscan(s, &ops)
	}
	t.Logf("seed %d (STRIPEFS_MODEL_SEED=%d to replay)", seed, seed)
	_, mnts := coherent(t, 2)
	for _, m := range mnts[:1] {
		must(t, os.Mkdir(filepath.Join(m, "d"), 0o755))
	}
	rnd := rand.New(rand.NewPCG(seed, seed^0x5eed))
	names := map[string]int{}    // name → inode
	inodes := map[int][]byte{}   // inode → content
	fds := map[[2]int]*os.File{} // (mount, inode) → a descriptor the mount keeps
	defer func() {
		for _, f := range fds {
			f.Close()
		}
	}()
	nextInode := 1
	path := func(m int, name string) string { return filepath.Join(mnts[m], "d", name) }
	pick := func() (string, bool) {
		if len(names) == 0 {
			return "", false
		}
		ks := make([]string, 0, len(names))
		for k := range names {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks[rnd.IntN(len(ks))], true
	}
	var history []string // the last operations, for a failure's report
	note := func(format string, args ...any) {
		history = append(history, fmt.Sprintf(format, args...))
		if len(history) > 30 {
			history = history[1:]
		}
	}
	fail := func(i int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, op %d: "+format+"\nlast operations:\n  %s", append(append([]any{seed, i}, args...), strings.Join(history, "\n  "))...)
	}
	write := func(ino int, off int64, b []byte) {
		c := inodes[ino]
		if end := off + int64(len(b)); end > int64(len(c)) {
			c = append(c, make([]byte, end-int64(len(c)))...)
		}
		copy(c[off:], b)
		inodes[ino] = c
	}
	for i := range ops {
		m := rnd.IntN(2)
		name, ok := pick()
		op := rnd.IntN(11)
		if !ok {
			op = 0
		}
		switch op {
		case 0: // create a new name
			n := fmt.Sprintf("f%d", rnd.IntN(6))
			if _, exists := names[n]; exists {
				continue
			}
			f, err := os.OpenFile(path(m, n), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				fail(i, "mount %d: create %s: %v", m, n, err)
			}
			f.Close()
			names[n], inodes[nextInode] = nextInode, nil
			note("%d: mount %d: create %s (inode %d)", i, m, n, nextInode)
			nextInode++
		case 1, 2: // write through a fresh open
			off, b := int64(rnd.IntN(300<<10)), make([]byte, 1+rnd.IntN(70<<10))
			randBytes(rnd, b)
			f, err := os.OpenFile(path(m, name), os.O_WRONLY, 0)
			if err == nil {
				_, err = f.WriteAt(b, off)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fail(i, "mount %d: write %s at %d: %v", m, name, off, err)
			}
			write(names[name], off, b)
			note("%d: mount %d: write %s (inode %d) [%d, %d)", i, m, name, names[name], off, off+int64(len(b)))
		case 3: // write through a kept descriptor
			ino := names[name]
			f := fds[[2]int{m, ino}]
			if f == nil {
				var err error
				if f, err = os.OpenFile(path(m, name), os.O_RDWR, 0); err != nil {
					fail(i, "mount %d: open %s: %v", m, name, err)
				}
				fds[[2]int{m, ino}] = f
			}
			off, b := int64(rnd.IntN(300<<10)), make([]byte, 1+rnd.IntN(20<<10))
			randBytes(rnd, b)
			if _, err := f.WriteAt(b, off); err != nil {
				fail(i, "mount %d: write inode %d at %d: %v", m, ino, off, err)
			}
			write(ino, off, b)
			note("%d: mount %d: write kept inode %d [%d, %d)", i, m, ino, off, off+int64(len(b)))
		case 4: // append
			b := []byte(fmt.Sprintf("append %d from mount %d\n", i, m))
			f, err := os.OpenFile(path(m, name), os.O_WRONLY|os.O_APPEND, 0)
			if err == nil {
				_, err = f.Write(b)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fail(i, "mount %d: append to %s: %v", m, name, err)
			}
			ino := names[name]
			note("%d: mount %d: append %s (inode %d) at %d", i, m, name, ino, len(inodes[ino]))
			write(ino, int64(len(inodes[ino])), b)
		case 5: // truncate
			size := int64(rnd.IntN(400 << 10))
			if err := os.Truncate(path(m, name), size); err != nil {
				fail(i, "mount %d: truncate %s to %d: %v", m, name, size, err)
			}
			ino := names[name]
			note("%d: mount %d: truncate %s (inode %d) to %d", i, m, name, ino, size)
			c := inodes[ino]
			if size <= int64(len(c)) {
				inodes[ino] = c[:size]
			} else {
				inodes[ino] = append(c, make([]byte, size-int64(len(c)))...)
			}
		case 6, 7: // read through a fresh open, and stat
			got, err := os.ReadFile(path(m, name))
			if err != nil {
				fail(i, "mount %d: read %s: %v", m, name, err)
			}
			want := inodes[names[name]]
			note("%d: mount %d: read %s (inode %d): %d bytes", i, m, name, names[name], len(got))
			if !bytes.Equal(got, want) {
				fail(i, "mount %d: %s reads %d bytes (first difference at %d), want %d", m, name, len(got), firstDiff(got, want), len(want))
			}
			st, err := os.Stat(path(m, name))
			if err != nil || st.Size() != int64(len(want)) {
				fail(i, "mount %d: stat %s: %v, size %d, want %d", m, name, err, st.Size(), len(want))
			}
		case 8: // read through every kept descriptor of this mount
			for k, f := range fds {
				if k[0] != m {
					continue
				}
				want := inodes[k[1]]
				got := make([]byte, len(want)+100)
				n, err := f.ReadAt(got, 0)
				if err != nil && err.Error() != "EOF" {
					fail(i, "mount %d: read inode %d: %v", m, k[1], err)
				}
				if !bytes.Equal(got[:n], want) {
					fail(i, "mount %d: kept descriptor of inode %d reads %d bytes (first difference at %d), want %d", m, k[1], n, firstDiff(got[:n], want), len(want))
				}
			}
		case 9: // rename, perhaps over another name
			to := fmt.Sprintf("f%d", rnd.IntN(6))
			if err := os.Rename(path(m, name), path(m, to)); err != nil {
				fail(i, "mount %d: rename %s to %s: %v", m, name, to, err)
			}
			ino := names[name]
			note("%d: mount %d: rename %s (inode %d) to %s (inode %d)", i, m, name, ino, to, names[to])
			delete(names, name)
			names[to] = ino
		case 10: // unlink; kept descriptors keep the inode
			if err := os.Remove(path(m, name)); err != nil {
				fail(i, "mount %d: unlink %s: %v", m, name, err)
			}
			note("%d: mount %d: unlink %s (inode %d)", i, m, name, names[name])
			delete(names, name)
		}
	}
}

func randBytes(r *rand.Rand, b []byte) {
	for i := 0; i < len(b); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// The two-mount benchmarks run and check what they measure: a block
// handed between mounts is read back as written each time, through a lock
// callback; IOR's ranks on two mounts write their segments of one file
// and read back each other's.
func TestTwoMountBenchmarks(t *testing.T) {
	_, mnts := coherent(t, 2)
	pp, err := bench.PingPong(context.Background(), bench.PingPongConfig{A: filepath.Join(mnts[0], "pp"), B: filepath.Join(mnts[1], "pp"), Rounds: 200, Block: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if pp.Callbacks < 200 || pp.RoundTripsPerSec <= 0 || pp.HandoffMedianUs <= 0 {
		t.Errorf("pingpong: %+v", pp)
	}
	t.Logf("pingpong: %.0f round trips/s, hand-off median %.0f us, %d callbacks of %.0f us", pp.RoundTripsPerSec, pp.HandoffMedianUs, pp.Callbacks, pp.CallbackUs)
	fl, err := bench.FlockBench(context.Background(), bench.FlockConfig{A: filepath.Join(mnts[0], "lk"), B: filepath.Join(mnts[1], "lk"), Ops: 300, Handoffs: 50})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("flock: %.0f uncontended pairs/s, %.0f hand-offs/s, wake-up median %.0f us", fl.PairsPerSec, fl.HandoffsPerSec, fl.WakeMedianUs)
	res, err := bench.IOR(context.Background(), bench.IORConfig{Path: filepath.Join(mnts[0], "ior"), Via: []string{filepath.Join(mnts[1], "ior")},
		Write: true, Read: true, Xfer: 1 << 20, Block: 8 << 20, Segments: 2, Tasks: 4, Reorder: true, CheckWrite: true, CheckRead: true, Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Phases {
		if p.MiBps <= 0 || !p.Verified && p.Access != "write" {
			t.Errorf("ior phase %+v", p)
		}
	}
}

// A writer killed with partial rows of an erasure-coded file in its cache
// leaves no row half-applied: parity agrees with the data of every row
// after another client rewrites what it needs, and reads are exact with
// an OST down.
func TestKilledECWriterLeavesNoTornRow(t *testing.T) {
	c := testcluster.StartArgs(t, 2, 4, "--lock-timeout", lockTimeout.String())
	a := c.MountFS()
	pb, b := c.MountAt("mntb")
	dir := filepath.Join(a, "ec")
	must(t, os.Mkdir(dir, 0o755))
	sfRun(t, c, "setstripe", "--ec", "2+1", "-S", "64k", dir)
	const row = 128 << 10
	want := make([]byte, 16*row)
	pattern(want, 0, 7)
	writeFile(t, filepath.Join(dir, "f"), want)
	// B dirties half of every other row, without flushing, and dies.
	f, err := os.OpenFile(filepath.Join(b, "ec", "f"), os.O_WRONLY, 0)
	must(t, err)
	for r := 0; r < 16; r += 2 {
		_, err := f.WriteAt(bytes.Repeat([]byte{0xee}, row/2), int64(r*row+1000))
		must(t, err)
	}
	c.Kill9(pb)
	f.Close()
	// A's write to one of those rows waits out the eviction.
	fa, err := os.OpenFile(filepath.Join(dir, "f"), os.O_WRONLY, 0)
	must(t, err)
	patch := bytes.Repeat([]byte{0x5a}, 777)
	_, err = fa.WriteAt(patch, 4*row+3)
	must(t, err)
	must(t, fa.Close())
	copy(want[4*row+3:], patch)
	if got := readFile(t, filepath.Join(dir, "f")); !bytes.Equal(got, want) {
		t.Fatalf("after the writer was killed: %d bytes, not A's (first difference at %d)", len(got), firstDiff(got, want))
	}
	if out := sfRun(t, c, "scrub", a); !strings.Contains(out, " 0 rows with findings") {
		t.Fatalf("scrub after a killed writer:\n%s", out)
	}
	c.Kill9(c.OSTs[1])
	if got := readFile(t, filepath.Join(dir, "f")); !bytes.Equal(got, want) {
		t.Fatalf("with ost1 down: %d bytes, not what was written", len(got))
	}
}

// A file this client removes for good (no name, no open left: by unlink,
// by a rename over it, or by the last close of a removed file) leaves it,
// and its MDTs, none of the file's locks: its data locks go with the
// metadata ones, a DoM file's read-on-open lock and create intent
// included. Before, each such file left a data lock on both sides until
// the client's LRU gave it back. A file still open when removed keeps its
// locks, and its descriptor reads and writes it, until the close.
func TestRemovedFilesLeaveNoLocks(t *testing.T) {
	c, mnts := coherent(t, 1)
	a := mnts[0]
	must(t, os.Mkdir(filepath.Join(a, "dom"), 0o755))
	must(t, os.Mkdir(filepath.Join(a, "plain"), 0o755))
	sfRun(t, c, append(append([]string{"setstripe"}, domLayout...), filepath.Join(a, "dom"))...)
	serverLocks := func() int64 {
		var n int64
		for _, m := range c.MDTs {
			n += mdtCounters(t, m.Addr)["ldlm_locks_now"]
		}
		return n
	}
	// The directories' own locks are held from here on.
	for _, d := range []string{"dom", "plain"} {
		writeFile(t, filepath.Join(a, d, "warm"), []byte("x"))
		readFile(t, filepath.Join(a, d, "warm"))
		must(t, os.Remove(filepath.Join(a, d, "warm")))
	}
	held0, server0 := clientCounter(t, a, "locks_held"), serverLocks()
	const n = 200
	for _, d := range []string{"dom", "plain"} {
		for i := range n {
			p := filepath.Join(a, d, fmt.Sprintf("f%d", i))
			writeFile(t, p, make([]byte, 3901))
			if got := readFile(t, p); len(got) != 3901 {
				t.Fatalf("%s: read %d bytes", p, len(got))
			}
		}
		for i := range n {
			must(t, os.Remove(filepath.Join(a, d, fmt.Sprintf("f%d", i))))
		}
		// Renamed over (an editor's save, rsync): the file replaced
		// goes with its locks; the survivor is removed after.
		for i := range n / 4 {
			p, tmp := filepath.Join(a, d, fmt.Sprintf("r%d", i)), filepath.Join(a, d, fmt.Sprintf("r%d.tmp", i))
			for _, q := range []string{p, tmp} {
				writeFile(t, q, make([]byte, 3901))
				readFile(t, q)
			}
			must(t, os.Rename(tmp, p))
			must(t, os.Remove(p))
		}
		// Removed while open: the last close destroys the file.
		for i := range n / 4 {
			p := filepath.Join(a, d, fmt.Sprintf("o%d", i))
			writeFile(t, p, make([]byte, 3901))
			f, err := os.Open(p)
			must(t, err)
			must(t, os.Remove(p))
			_, err = f.Read(make([]byte, 10))
			must(t, err)
			must(t, f.Close())
		}
	}
	// Releases are asynchronous: a removal may have found its file still
	// open; the last close then destroys it and drops its locks, but may
	// still be on its way as they are counted. Allow for a few.
	const slack = 10
	if held := clientCounter(t, a, "locks_held"); held > held0+slack {
		t.Errorf("the client holds %d locks after creating, reading and removing %d files (%d before)", held, 2*(n+n/2+n/4), held0)
	}
	if now := serverLocks(); now > server0+slack {
		t.Errorf("the MDTs hold %d locks after %d files were created, read and removed (%d before)", now, 2*(n+n/2+n/4), server0)
	}

	// Removed while open: the descriptor goes on working under its locks.
	p := filepath.Join(a, "dom", "open")
	writeFile(t, p, []byte("before"))
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	must(t, os.Remove(p))
	_, err = f.WriteAt([]byte("after!"), 0)
	must(t, err)
	got := make([]byte, 6)
	_, err = f.ReadAt(got, 0)
	must(t, err)
	if string(got) != "after!" {
		t.Fatalf("an open removed file reads %q after its write", got)
	}
	must(t, f.Close())
}

// A client keeps at most --lru-size locks: the unused ones go back to the
// MDTs, and what they guarded is still right when asked again.
func TestLockLRU(t *testing.T) {
	c := testcluster.StartArgs(t, 2, 4, "--lock-timeout", lockTimeout.String())
	mnt := c.MountWith([]string{"--lru-size", "200"})
	for i := range 1000 {
		writeFile(t, filepath.Join(mnt, fmt.Sprintf("f%d", i)), []byte(fmt.Sprint(i)))
	}
	deadline := time.Now().Add(10 * time.Second)
	for clientCounter(t, mnt, "locks_held") > 200 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if held := clientCounter(t, mnt, "locks_held"); held > 200 {
		t.Errorf("%d locks held with --lru-size 200", held)
	}
	if n := clientCounter(t, mnt, "locks_lru_cancels"); n < 700 {
		t.Errorf("%d locks given back early for 1000 files' worth", n)
	}
	for i := range 1000 {
		if got := readFile(t, filepath.Join(mnt, fmt.Sprintf("f%d", i))); string(got) != fmt.Sprint(i) {
			t.Fatalf("f%d reads %q", i, got)
		}
	}
}

// A mapping of a file on one mount shows another mount's write: the
// kernel's mapped pages are dropped when the lock that guarded them goes.
func TestMmapSeesOtherMount(t *testing.T) {
	_, mnts := coherent(t, 2)
	data := bytes.Repeat([]byte("0123456789abcdef"), 8192) // 128 KiB
	writeFile(t, filepath.Join(mnts[0], "m"), data)
	f, err := os.Open(filepath.Join(mnts[1], "m"))
	must(t, err)
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, len(data), syscall.PROT_READ, syscall.MAP_SHARED)
	must(t, err)
	defer syscall.Munmap(m)
	if !bytes.Equal(m, data) {
		t.Fatal("the mapping does not hold the file")
	}
	fa, err := os.OpenFile(filepath.Join(mnts[0], "m"), os.O_WRONLY, 0)
	must(t, err)
	_, err = fa.WriteAt([]byte("WRITTEN ON A"), 70000)
	must(t, err)
	must(t, fa.Close())
	copy(data[70000:], "WRITTEN ON A")
	// A's write returned after B gave its read lock up, which dropped the
	// mapped pages: the next touch reads them again.
	if !bytes.Equal(m, data) {
		t.Errorf("B's mapping still shows %q at 70000 after A's write", m[70000:70012])
	}
}

// Extended attributes one mount reads (and keeps under its Update lock)
// change when another mount sets or removes them, and after its own
// changes, chmod's of an ACL included.
func TestXattrsAcrossMounts(t *testing.T) {
	_, mnts := coherent(t, 2)
	a, b := filepath.Join(mnts[0], "x"), filepath.Join(mnts[1], "x")
	writeFile(t, a, []byte("data"))
	get := func(p string) string {
		v, err := xattr.Get(p, "user.k")
		if err != nil {
			return "-"
		}
		return string(v)
	}
	if v := get(a); v != "-" {
		t.Fatalf("a new file has user.k=%q", v)
	}
	get(a) // kept now
	must(t, xattr.Set(b, "user.k", []byte("1")))
	if v := get(a); v != "1" {
		t.Errorf("after another mount set it: %q, want 1", v)
	}
	must(t, xattr.Set(a, "user.k", []byte("2")))
	if v := get(a); v != "2" {
		t.Errorf("after this mount set it: %q, want 2", v)
	}
	if v := get(b); v != "2" {
		t.Errorf("the other mount: %q, want 2", v)
	}
	must(t, xattr.Remove(b, "user.k"))
	if v := get(a); v != "-" {
		t.Errorf("after another mount removed it: %q, want none", v)
	}
	hits := clientCounter(t, mnts[0], "xattr_cache_hits")
	get(a)
	get(a)
	if clientCounter(t, mnts[0], "xattr_cache_hits") == hits {
		t.Error("asked twice with nothing changed, the mount asked the MDT both times")
	}
}

// A file's attributes while a mount holds its Update lock: the kernel
// drops them after every write, and the mount answers the next stat from
// what the MDT last said (no getattr RPC), and the kernel keeps names and
// attributes for as long as the lock (a minute here, not a second). Every
// change another mount makes, or this one makes by name, shows at once:
// the checks below do not wait.
func TestAttrsAcrossMounts(t *testing.T) {
	c, mnts := coherent(t, 2)
	a, b := mnts[0], mnts[1]
	must(t, os.Mkdir(filepath.Join(a, "dom"), 0o755))
	sfRun(t, c, append(append([]string{"setstripe"}, domLayout...), filepath.Join(a, "dom"))...)
	for _, dir := range []string{"dom", "."} {
		t.Run(dir, func(t *testing.T) {
			pa, pb := filepath.Join(a, dir, "f"), filepath.Join(b, dir, "f")
			stat := func(p string) syscall.Stat_t {
				t.Helper()
				var st syscall.Stat_t
				must(t, syscall.Stat(p, &st))
				return st
			}
			want := func(what string, p string, size int64, mode uint32, nlink uint64) {
				t.Helper()
				st := stat(p)
				if st.Size != size || st.Mode&0o7777 != mode || st.Nlink != nlink {
					t.Fatalf("%s: %s has size %d mode %o nlink %d, want %d %o %d", what, p, st.Size, st.Mode&0o7777, st.Nlink, size, mode, nlink)
				}
				if size > 0 && st.Blocks == 0 {
					t.Fatalf("%s: %s has %d bytes in no blocks", what, p, size)
				}
			}
			writeFile(t, pa, make([]byte, 3901))
			must(t, os.Chmod(pa, 0o644))
			want("written here", pa, 3901, 0o644, 1)
			hits, getattrs := clientCounter(t, a, "file_attr_hits"), rpcCalls(t, a, "getattr")
			f, err := os.OpenFile(pa, os.O_WRONLY|os.O_APPEND, 0)
			must(t, err)
			_, err = f.Write([]byte("more"))
			must(t, err)
			must(t, f.Close())
			want("appended here", pa, 3905, 0o644, 1) // the write dropped the kernel's attributes
			if clientCounter(t, a, "file_attr_hits") == hits {
				t.Error("a stat after this mount's own write was not answered from the kept attributes")
			}
			if n := rpcCalls(t, a, "getattr"); n != getattrs {
				t.Errorf("a stat after this mount's own write cost %d getattr RPCs", n-getattrs)
			}
			want("seen there", pb, 3905, 0o644, 1)
			must(t, os.Chmod(pb, 0o600))
			want("chmod there", pa, 3905, 0o600, 1)
			g, err := os.OpenFile(pb, os.O_WRONLY|os.O_APPEND, 0)
			must(t, err)
			_, err = g.Write(make([]byte, 95))
			must(t, err)
			must(t, g.Close())
			want("appended there", pa, 4000, 0o600, 1)
			must(t, os.Truncate(pb, 10))
			want("truncated there", pa, 10, 0o600, 1)
			must(t, os.Link(pa, pa+".link"))
			want("linked here", pa, 10, 0o600, 2)
			must(t, os.Remove(pa+".link"))
			want("unlinked here", pa, 10, 0o600, 1)
			must(t, os.Link(pb, pb+".link"))
			want("linked there", pa, 10, 0o600, 2)
			must(t, os.Rename(pb, pb+".moved"))
			if _, err := os.Stat(pa); !os.IsNotExist(err) {
				t.Fatalf("renamed there: the old name here: %v", err)
			}
			want("renamed there", pa+".moved", 10, 0o600, 2)
			must(t, os.Remove(pb+".link"))
			want("unlinked there", pa+".moved", 10, 0o600, 1)
			must(t, os.Remove(pa+".moved"))
			if _, err := os.Stat(pb + ".moved"); !os.IsNotExist(err) {
				t.Fatalf("removed here: there: %v", err)
			}
		})
	}
}

// TestSizeNeverGoesBack: a writer on each of two mounts writes fixed
// records at its own offsets, an open, a pwrite and a close each (as
// many jobs filling one shared file), while a process on each mount
// stats the file in a loop. A stat must never show a smaller size than
// an earlier stat on the same mount showed: the writes behind that size
// had returned. Every record is there at the end. On a striped file, and
// on a Data-on-MDT one that outgrows its MDT part (its closes carry the
// writes and turn write locks into read locks, so the mounts hold the
// Update lock between writes: the kernel caches attributes).
func TestSizeNeverGoesBack(t *testing.T) {
	sizeNeverGoesBack(t, 600)
}

// TestSizeNeverGoesBackSoak is TestSizeNeverGoesBack five times as long
// (STRIPEFS_SOAK=1, make soak): the races it found last were seen about
// once a run at this size.
func TestSizeNeverGoesBackSoak(t *testing.T) {
	if os.Getenv("STRIPEFS_SOAK") == "" {
		t.Skip("set STRIPEFS_SOAK=1 to run (make soak)")
	}
	sizeNeverGoesBack(t, 3000)
}

func sizeNeverGoesBack(t *testing.T, perWriter int) {
	c, mnts := coherent(t, 2)
	for _, layout := range []string{"plain", "dom"} {
		t.Run(layout, func(t *testing.T) {
			must(t, os.Mkdir(filepath.Join(mnts[0], layout), 0o755))
			if layout == "dom" {
				sfRun(t, c, append(append([]string{"setstripe"}, domLayout...), filepath.Join(mnts[0], layout))...)
			}
			sizeNeverGoesBackOn(t, mnts, filepath.Join(layout, "recs"), perWriter)
		})
	}
}

func sizeNeverGoesBackOn(t *testing.T, mnts []string, rel string, perWriter int) {
	writers := len(mnts)
	writeFile(t, filepath.Join(mnts[0], rel), nil)
	// Each in a process of its own, as the jobs and the watchers are.
	var ws []*talker
	for _, m := range mnts {
		ws = append(ws, talk(t, "size-watch "+filepath.Join(m, rel)))
	}
	var g errgroup.Group
	for w, m := range mnts {
		g.Go(func() error {
			out, err := helperCmd(t, fmt.Sprintf("record-write %s %d %d %d", filepath.Join(m, rel), w, writers, perWriter)).CombinedOutput()
			if err != nil {
				return fmt.Errorf("writer %d on %s: %v: %s", w, m, err, out)
			}
			return nil
		})
	}
	err := g.Wait()
	for i, w := range ws {
		w.in.Close()
		if l := <-w.lines; !strings.HasPrefix(l, "back 0 ") {
			t.Errorf("%s: a stat showed a smaller size than an earlier one: %s", mnts[i], l)
		}
	}
	must(t, err)
	for _, m := range mnts {
		got := readFile(t, filepath.Join(m, rel))
		if len(got) != perWriter*writers*sizeRecord {
			t.Fatalf("%s: %d bytes, want %d", m, len(got), perWriter*writers*sizeRecord)
		}
		for k := range perWriter {
			for w := range writers {
				off := (k*writers + w) * sizeRecord
				if want := record(w, k); !bytes.Equal(got[off:off+sizeRecord], want) {
					t.Fatalf("%s: record %d of writer %d is %q", m, k, w, got[off:off+sizeRecord])
				}
			}
		}
	}
}

// sizeRecord is the length of record's records.
const sizeRecord = 37

// record is writer w's k-th record: at offset (k*writers + w)*sizeRecord.
func record(w, k int) []byte {
	b := bytes.Repeat([]byte{'.'}, sizeRecord)
	copy(b, fmt.Sprintf("w%02d r%06d ", w, k))
	b[sizeRecord-1] = '\n'
	return b
}

// runSizeOp is the helper process's side of sizeNeverGoesBack:
// "size-watch PATH" stats PATH until stdin ends, then prints "back N"
// (the stats that showed less than an earlier one) and the first such;
// "record-write PATH W WRITERS N" writes writer W's N records, an open, a
// pwrite and a close each.
func runSizeOp(f []string) int {
	switch f[0] {
	case "size-watch":
		done := make(chan struct{})
		go func() {
			io.Copy(io.Discard, os.Stdin)
			close(done)
		}()
		var most int64
		back, first := 0, ""
		for {
			select {
			case <-done:
				fmt.Printf("back %d %s\n", back, first)
				return 0
			default:
			}
			st, err := os.Stat(f[1])
			if err != nil {
				fmt.Printf("stat: %v\n", err)
				return 1
			}
			if st.Size() < most {
				if back == 0 {
					first = fmt.Sprintf("(first: %d after %d)", st.Size(), most)
				}
				back++
			}
			most = max(most, st.Size())
		}
	case "record-write":
		w, _ := strconv.Atoi(f[2])
		writers, _ := strconv.Atoi(f[3])
		n, _ := strconv.Atoi(f[4])
		for k := range n {
			fd, err := unix.Open(f[1], unix.O_WRONLY|unix.O_CLOEXEC, 0)
			if err == nil {
				_, err = unix.Pwrite(fd, record(w, k), int64((k*writers+w)*sizeRecord))
				if cerr := unix.Close(fd); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fmt.Printf("record %d: %v\n", k, err)
				return 1
			}
		}
		return 0
	}
	return 2
}
