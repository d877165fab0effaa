package e2e

import (
	"bytes"
	"context"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/stats"
)

func snapshot(t *testing.T, mnt string) *stats.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := stats.FromMount(ctx, mnt)
	must(t, err)
	return s
}

// nfsIovecs is the vector nfsd hands over for one MiB: the RPC header
// shares the first page, so a partial head, 255 pages and a partial tail.
func nfsIovecs(data []byte) [][]byte {
	head, tail := 3500, 596
	iovs := [][]byte{data[:head]}
	for off := head; off < len(data)-tail; off += 4096 {
		iovs = append(iovs, data[off:off+4096])
	}
	return append(iovs, data[len(data)-tail:])
}

// TestNFSPatternCoalesced writes N MiB as O_DIRECT pwritev calls of
// [3500-byte head, 255 pages, 596-byte tail]. The kernel hands each MiB to
// the daemon in two unaligned pieces; the client must still send whole
// 1 MiB stripe units: at most N write RPCs, each a whole unit, and no
// read at all.
func TestNFSPatternCoalesced(t *testing.T) {
	_, mnt := mount(t)
	dir := filepath.Join(mnt, "nfs")
	must(t, os.Mkdir(dir, 0o755))
	must(t, unix.Setxattr(dir, "lustre.lov", []byte("stripe_count=4 stripe_size=1048576"), 0))
	const mib = 1 << 20
	const n = 32
	path := filepath.Join(dir, "f")
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_WRONLY|unix.O_DIRECT, 0o644)
	must(t, err)
	want := make([]byte, n*mib)
	pattern(want, 0, 3)
	before := snapshot(t, mnt)
	for k := 0; k < n; k++ {
		buf := alignedBuf(mib)
		copy(buf, want[k*mib:(k+1)*mib])
		w, err := unix.Pwritev(fd, nfsIovecs(buf), int64(k*mib))
		if err != nil || w != mib {
			t.Fatalf("pwritev %d: %d %v", k, w, err)
		}
	}
	must(t, unix.Fsync(fd))
	must(t, unix.Close(fd))
	d := snapshot(t, mnt).Sub(before)
	writes, reads := d.Calls("ost", "ost_write"), d.Calls("ost", "ost_read")
	var bytesIn int64
	for _, tg := range d.Targets {
		for _, m := range tg.Methods {
			if m.Name == "ost_write" {
				bytesIn += m.BytesIn
			}
		}
	}
	// A client's first write to an OST asks it for a grant with an
	// empty write (fs/grant.go): once per OST, not part of the pattern.
	asks := d.ClientCounter("grant_asks")
	if asks > 4 {
		t.Errorf("%d grant asks to 4 OSTs", asks)
	}
	writes -= asks
	t.Logf("%d MiB in the NFS pattern: %d OST write RPCs carrying %d bytes (and %d grant asks), %d OST read RPCs", n, writes, bytesIn, asks, reads)
	if reads != 0 {
		t.Errorf("a pure write workload made %d OST read RPCs", reads)
	}
	if writes > n || bytesIn != n*mib || writes == 0 || bytesIn/writes != mib {
		t.Errorf("%d write RPCs for %d MiB (%d bytes): want at most %d, each a whole 1 MiB unit", writes, n, bytesIn, n)
	}
	if got := readFile(t, path); !bytes.Equal(got, want) {
		t.Fatal("file written in the NFS pattern reads back differently")
	}
}

// TestWriteMixes runs several write workloads and checks each reads back
// byte-exact, with no OST read during the writes.
func TestWriteMixes(t *testing.T) {
	_, mnt := mount(t)
	dir := filepath.Join(mnt, "mix")
	must(t, os.Mkdir(dir, 0o755))
	must(t, unix.Setxattr(dir, "lustre.lov", []byte("stripe_count=3 stripe_size=131072"), 0))
	const size = 6 << 20
	workloads := map[string]func(fd int, model []byte, rng *rand.Rand){
		"random unaligned": func(fd int, model []byte, rng *rand.Rand) {
			for i := 0; i < 400; i++ {
				off, n := rng.Intn(size-70000), 1+rng.Intn(70000)
				b := make([]byte, n)
				rng.Read(b)
				if _, err := unix.Pwrite(fd, b, int64(off)); err != nil {
					t.Fatal(err)
				}
				copy(model[off:], b)
			}
		},
		"overlapping": func(fd int, model []byte, rng *rand.Rand) {
			for i := 0; i < 300; i++ {
				off := (i * 4093) % (size - 300000)
				b := bytes.Repeat([]byte{byte(i)}, 300000-i*7)
				unix.Pwrite(fd, b, int64(off))
				copy(model[off:], b)
			}
		},
		"O_DIRECT and buffered": func(fd int, model []byte, rng *rand.Rand) {
			path := filepath.Join(dir, "odirect-shared")
			dfd, err := unix.Open(path, unix.O_WRONLY|unix.O_DIRECT, 0)
			must(t, err)
			defer unix.Close(dfd)
			for i := 0; i < 200; i++ {
				if i%2 == 0 {
					off := rng.Intn(size/4096-64) * 4096
					b := alignedBuf(4096 * (1 + rng.Intn(63)))
					rng.Read(b)
					if _, err := unix.Pwrite(dfd, b, int64(off)); err != nil {
						t.Fatal(err)
					}
					copy(model[off:], b)
				} else {
					off, n := rng.Intn(size-9000), 1+rng.Intn(9000)
					b := make([]byte, n)
					rng.Read(b)
					unix.Pwrite(fd, b, int64(off))
					copy(model[off:], b)
				}
			}
		},
	}
	for name, w := range workloads {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "f")
			if name == "O_DIRECT and buffered" {
				path = filepath.Join(dir, "odirect-shared")
			}
			fd, err := unix.Open(path, unix.O_CREAT|unix.O_RDWR|unix.O_TRUNC, 0o644)
			must(t, err)
			model := make([]byte, size)
			must(t, unix.Ftruncate(fd, size))
			before := snapshot(t, mnt)
			w(fd, model, rand.New(rand.NewSource(int64(len(name)))))
			must(t, unix.Fsync(fd))
			d := snapshot(t, mnt).Sub(before)
			if r := d.Calls("ost", "ost_read"); r != 0 {
				t.Errorf("%d OST read RPCs during a pure write workload", r)
			}
			unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
			must(t, unix.Close(fd))
			if got := readFile(t, path); !bytes.Equal(got, model) {
				t.Fatalf("read back differs from what was written")
			}
		})
	}
}

// TestWritesRacingTruncate runs writers against a truncating goroutine;
// afterwards the file must read back as the sequence the last writes left
// (checked against reads of the file through a second handle), with no
// byte from before a truncate reappearing beyond the size.
func TestWritesRacingTruncate(t *testing.T) {
	_, mnt := mount(t)
	path := filepath.Join(mnt, "race")
	f, err := os.Create(path)
	must(t, err)
	defer f.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		b := bytes.Repeat([]byte{0xaa}, 200000)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			f.WriteAt(b, int64(i%7)*150000)
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 100; i++ {
			f.Truncate(int64(i%5) * 100000)
		}
		close(stop)
	}()
	wg.Wait()
	must(t, f.Truncate(250000))
	must(t, f.Sync())
	got := readFile(t, path)
	if len(got) != 250000 {
		t.Fatalf("size %d after final truncate", len(got))
	}
	for i, c := range got {
		if c != 0 && c != 0xaa {
			t.Fatalf("byte %d is %#x: neither written nor zero", i, c)
		}
	}
	must(t, f.Truncate(100))
	must(t, f.Truncate(300000))
	got = readFile(t, path)
	if !bytes.Equal(got[100:], make([]byte, 300000-100)) {
		t.Fatal("data cut by truncate reappeared after extending the file again")
	}
}

// TestDirtyMemoryBound writes a file four times the mount's dirty bound in
// a pattern that never completes a stripe unit (three quarters of each
// MiB), so nothing leaves the cache on its own: only the bound pushes data
// out. The client must never hold more than the bound.
func TestDirtyMemoryBound(t *testing.T) {
	c := startCluster(t)
	mnt := c.MountWith([]string{"--max-dirty-mb", "16", "--max-dirty-file-mb", "16", "--dirty-expire", "1h"})
	path := filepath.Join(mnt, "big")
	f, err := os.Create(path)
	must(t, err)
	const mib, part = 1 << 20, 3 << 18
	buf := make([]byte, part)
	for off := 0; off < 64*mib; off += mib {
		pattern(buf, int64(off), 1)
		_, err := f.WriteAt(buf, int64(off))
		must(t, err)
	}
	s := snapshot(t, mnt)
	peak, bound := s.ClientCounter("dirty_bytes_peak"), s.ClientCounter("max_dirty_bytes")
	t.Logf("dirty peak %d bytes, bound %d, waits for memory %d", peak, bound, s.ClientCounter("dirty_memory_waits"))
	if bound != 16*mib || peak > bound || peak < bound/2 {
		t.Fatalf("dirty peak %d, bound %d: want the cache used but never above the bound", peak, bound)
	}
	must(t, f.Close())
	got := readFile(t, path)
	want := make([]byte, mib)
	for off := 0; off < 64*mib; off += mib {
		pattern(want[:part], int64(off), 1)
		end := min(off+mib, len(got))
		if !bytes.Equal(got[off:end], want[:end-off]) {
			t.Fatalf("data differs in the MiB at %d", off)
		}
	}
}

// TestFailedFlushReported kills the OST a file lives on: the write is
// accepted into the cache, fsync reports EIO, and once the OST is back the
// data acknowledged by the earlier fsync is intact and a new fsync
// succeeds with the rest.
func TestFailedFlushReported(t *testing.T) {
	c := startCluster(t)
	mnt := c.MountWith([]string{"--retry-for", "2s"})
	path := filepath.Join(mnt, "f")
	must(t, os.WriteFile(path, nil, 0o644))
	must(t, unix.Setxattr(path, "lustre.lov", []byte("stripe_count=1 stripe_offset=2"), 0))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	first := bytes.Repeat([]byte("A"), 3<<20)
	_, err = f.Write(first)
	must(t, err)
	must(t, f.Sync())
	c.Kill9(c.OSTs[2])
	second := bytes.Repeat([]byte("B"), 1<<20+5)
	if _, err := f.Write(second); err != nil {
		t.Fatalf("a write into the cache failed: %v", err)
	}
	wantErrno(t, "fsync with the OST down", f.Sync(), syscall.EIO)
	c.Restart(c.OSTs[2])
	must(t, f.Sync()) // the kept data goes out now
	got := readFile(t, path)
	if !bytes.Equal(got, append(first, second...)) {
		t.Fatalf("after the OST came back the file holds %d bytes, not the %d written", len(got), len(first)+len(second))
	}
}

// TestUpLocalReads reads files through the mount of `stripefs up`, whose
// OSTs lend their object files to the mount (spliced to the kernel, as a
// loopback mount's reads are): whole and partial stripe units, holes,
// tails past the objects' data, unflushed data, and files cut while
// open all read back byte-exact, and the lent reads are counted.
func TestUpLocalReads(t *testing.T) {
	dir := t.TempDir()
	data, mnt := filepath.Join(dir, "data"), filepath.Join(dir, "mnt")
	cmd := startUp(t, data, mnt, "--mdts", "1", "--osts", "2")
	defer stopUp(t, cmd)
	d := filepath.Join(mnt, "d")
	must(t, os.Mkdir(d, 0o755))
	sfRun(t, &testcluster.Cluster{Bin: testcluster.Binary(t)}, "setstripe", "-c", "2", "-S", "64k", d)

	type file struct {
		name string
		make func(path string) []byte // writes the file, returns its content
	}
	write := func(path string, size int, at ...int64) []byte {
		want := make([]byte, size)
		f, err := os.Create(path)
		must(t, err)
		defer f.Close()
		for _, off := range at {
			n := min(int64(size)-off, 100<<10)
			pattern(want[off:off+n], off, 7)
			_, err := f.WriteAt(want[off:off+n], off)
			must(t, err)
		}
		must(t, f.Truncate(int64(size)))
		must(t, f.Sync())
		return want
	}
	files := []file{
		{"empty", func(p string) []byte { return write(p, 0) }},
		{"one", func(p string) []byte { return write(p, 1, 0) }},
		{"unit", func(p string) []byte { return write(p, 64<<10, 0) }},
		{"unit+1", func(p string) []byte { return write(p, 64<<10+1, 0) }},
		{"hole", func(p string) []byte { return write(p, 1<<20, 0, 600<<10) }},         // data, hole, data
		{"tail", func(p string) []byte { return write(p, 3<<20, 0) }},                  // truncated up past the data
		{"big", func(p string) []byte { return write(p, 4<<20, 0, 100<<10, 200<<10) }}, // ...and more of it
	}
	readBack := func(path string, want []byte) {
		f, err := os.Open(path)
		must(t, err)
		must(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)) // read through the daemon, not the page cache
		got, err := io.ReadAll(f)
		f.Close()
		must(t, err)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: read %d bytes, want %d, equal %v", path, len(got), len(want), bytes.Equal(got, want))
		}
	}
	for _, fl := range files {
		path := filepath.Join(d, fl.name)
		readBack(path, fl.make(path))
	}
	// Units of 1 MiB: the kernel reads them whole (read_ahead_kb), and a
	// 1 MiB reply does not fit a pipe of the default pipe-max-size, so
	// these views are copied rather than spliced.
	wide := filepath.Join(mnt, "wide")
	must(t, os.Mkdir(wide, 0o755))
	sfRun(t, &testcluster.Cluster{Bin: testcluster.Binary(t)}, "setstripe", "-c", "2", "-S", "1M", wide)
	path := filepath.Join(wide, "f")
	want := write(path, 5<<20+123, 0, 1<<20, 3<<20+5)
	hints := clientCounter(t, mnt, "readahead_hints")
	readBack(path, want)
	// A sequential reader of lent views has the object files read ahead
	// in their page cache, as the kernel does for a loopback mount.
	if clientCounter(t, mnt, "readahead_hints") == hints {
		t.Error("reading 5 MiB in order asked no object file to read ahead")
	}
	f, err := os.Open(path)
	must(t, err)
	must(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	unit := make([]byte, 1<<20)
	_, err = f.ReadAt(unit, 1<<20) // one whole unit: one 1 MiB view
	f.Close()
	must(t, err)
	if !bytes.Equal(unit, want[1<<20:2<<20]) {
		t.Fatal("a whole 1 MiB unit read back wrong")
	}
	// Erasure-coded: data units are lent as plain stripe units are,
	// a short last unit and holes included.
	ec := filepath.Join(mnt, "ec")
	must(t, os.Mkdir(ec, 0o755))
	sfRun(t, &testcluster.Cluster{Bin: testcluster.Binary(t)}, "setstripe", "--ec", "1+1", "-S", "64k", ec)
	before := clientCounter(t, mnt, "local_reads")
	path = filepath.Join(ec, "f")
	readBack(path, write(path, 700<<10+77, 0, 300<<10, 650<<10))
	if clientCounter(t, mnt, "local_reads") == before {
		t.Error("no read of an erasure-coded file was lent")
	}
	if n := clientCounter(t, mnt, "local_reads"); n == 0 {
		t.Fatal("no read was lent by an OST of the up process")
	}
	// Writes are handed to the OSTs without a copy, and run as calls on
	// the mount's connections: the OSTs give the mount grants.
	if n := clientCounter(t, mnt, "direct_writes"); n == 0 {
		t.Error("no write went to an OST of the up process by direct call")
	}
	if n := clientCounter(t, mnt, "grant_bytes"); n == 0 {
		t.Error("the up mount holds no grant after writing")
	}
	// Unflushed data is read from the client's cache, not the objects.
	path = filepath.Join(d, "dirty")
	want = write(path, 200<<10, 0)
	f, err = os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	patch := bytes.Repeat([]byte("new"), 10000)
	_, err = f.WriteAt(patch, 70<<10)
	must(t, err)
	copy(want[70<<10:], patch)
	must(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	got := make([]byte, len(want))
	_, err = f.ReadAt(got, 0)
	must(t, err)
	if !bytes.Equal(got, want) {
		t.Fatal("unflushed data read back wrong")
	}
	// Cut while open: what is read stops at the new size.
	must(t, f.Truncate(100<<10))
	must(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	got, err = io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
	must(t, err)
	if !bytes.Equal(got, want[:100<<10]) {
		t.Fatalf("after truncate: read %d bytes, want %d", len(got), 100<<10)
	}
}
