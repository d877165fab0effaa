package e2e

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A small Data-on-MDT file's data comes with its open (read-on-open):
// the read after it costs no ost_read, and what comes after shows in
// reads through a handle opened before it: another mount's write (which
// calls the open's read lock back), this mount's own write through
// another handle and its truncate by name (which call nothing back).
// A file past the limit, and one with its data on an OST, are read as
// before.
func TestDoMReadOnOpen(t *testing.T) {
	c, mnts := coherent(t, 2)
	a, b := mnts[0], mnts[1]
	must(t, os.Mkdir(filepath.Join(a, "dom"), 0o755))
	sfRun(t, c, append(append([]string{"setstripe"}, domLayout...), filepath.Join(a, "dom"))...)
	rng := rand.New(rand.NewPCG(5, 6))
	data := func(n int) []byte { p := make([]byte, n); randBytes(rng, p); return p }
	pa, pb := filepath.Join(a, "dom", "f"), filepath.Join(b, "dom", "f")
	v1 := data(3901)
	writeFile(t, pa, v1)

	// check reads all of f from 0 and holds it to want; counts is what
	// the mount at mnt has sent of ost_reads, and kept of opens' data.
	check := func(what string, f *os.File, want []byte) {
		t.Helper()
		got := make([]byte, len(want)+100)
		n, err := f.ReadAt(got, 0)
		if n != len(want) || !bytes.Equal(got[:n], want) {
			t.Fatalf("%s: read %d bytes (%v), want %d of the model", what, n, err, len(want))
		}
	}
	counts := func(mnt string) (reads, kept int64) {
		return rpcCalls(t, mnt, "ost_read"), clientCounter(t, mnt, "open_data_kept")
	}

	// The close that carried the write turned the writer's lock into a
	// read lock: a stat and a read there ask the writer nothing, and the
	// open brings the data under a read lock of its own. (That close is
	// the release, which the kernel sends after close(2) returns.)
	for i := 0; clientCounter(t, a, "locks_downgraded") != 1; i++ {
		if i == 100 {
			t.Fatalf("the writer's close downgraded %d locks in 5 s, want 1", clientCounter(t, a, "locks_downgraded"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	asked := func() int64 {
		return clientCounter(t, a, "lock_callbacks_blocking") + clientCounter(t, a, "lock_callbacks_glimpse")
	}
	cb0 := asked()
	r0, k0 := counts(b)
	if fi, err := os.Stat(pb); err != nil || fi.Size() != int64(len(v1)) {
		t.Fatalf("stat there: %v, %v; want %d bytes", fi, err, len(v1))
	}
	if got := readFile(t, pb); !bytes.Equal(got, v1) {
		t.Fatalf("read there: %d bytes, not the model", len(got))
	}
	if r, k := counts(b); r != r0 || k != k0+1 || asked() != cb0 {
		t.Fatalf("stat, open+read of a 3901-byte DoM file another mount wrote and closed: %d ost_reads, %d opens' data kept, %d callbacks to the writer; want 0, 1 and 0", r-r0, k-k0, asked()-cb0)
	}
	// Again: the first read's release may still be on its way, and an
	// open beside the open state asks for no data (as below).
	r0, k0 = counts(b)
	for i := 0; ; i++ {
		if got := readFile(t, pb); !bytes.Equal(got, v1) {
			t.Fatalf("read there again: %d bytes, not the model", len(got))
		}
		if _, k := counts(b); k > k0 || i == 100 {
			break
		}
	}
	if r, k := counts(b); r != r0 || k == k0 {
		t.Fatalf("open+read of a 3901-byte DoM file: %d ost_reads, %d opens' data kept; want 0 and some", r-r0, k-k0)
	}

	// Here too, under the writer's own lock, a read lock now. (A mount
	// that holds a write lock on all of the file, its create's, gets the
	// data under it as well: TestRPCCounts' DoM open/read.)
	r0, k0 = counts(a)
	if got := readFile(t, pa); !bytes.Equal(got, v1) {
		t.Fatalf("read here: %d bytes, not the model", len(got))
	}
	if r, k := counts(a); r != r0 || k != k0+1 {
		t.Fatalf("open+read of a 3901-byte DoM file no one holds a write lock on: %d ost_reads, %d opens' data kept; want 0 and 1", r-r0, k-k0)
	}

	// Each of the handles below is one whose open brought the data and
	// gave it to the kernel's page cache (open_data_cached): their reads
	// cost no FUSE read, and what changes the file must drop those pages.
	cached := func() int64 { return clientCounter(t, b, "open_data_cached") }
	c0 := cached()
	fb, err := os.Open(pb)
	must(t, err)
	if c := cached(); c != c0+1 {
		t.Fatalf("open there: %d opens' data given to the page cache, want 1", c-c0)
	}
	check("open there", fb, v1)
	v2 := append(v1[:2000:2000], data(3000)...)
	wa, err := os.OpenFile(pa, os.O_WRONLY, 0)
	must(t, err)
	_, err = wa.WriteAt(v2[2000:], 2000)
	must(t, err)
	must(t, wa.Close())
	check("written here, read there through a handle opened before", fb, v2)

	// This mount's own changes, which call back nothing of its own, seen
	// through a handle whose open brought the data (no other is open).
	must(t, fb.Close())
	_, k0 = counts(b)
	c0 = cached()
	fb2, err := os.Open(pb)
	must(t, err)
	if _, k := counts(b); k != k0+1 || cached() != c0+1 {
		t.Fatalf("open there with no other handle: %d opens' data kept, %d given to the page cache; want 1 and 1", k-k0, cached()-c0)
	}
	wb, err := os.OpenFile(pb, os.O_WRONLY, 0)
	must(t, err)
	v3 := append([]byte("rewritten"), v2[9:]...)
	_, err = wb.WriteAt(v3[:9], 0)
	must(t, err)
	check("written there through another handle, unflushed", fb2, v3)
	must(t, wb.Close())
	check("written there through another handle", fb2, v3)
	must(t, os.Truncate(pb, 100))
	check("truncated there by name", fb2, v3[:100])
	if got := readFile(t, pa); !bytes.Equal(got, v3[:100]) {
		t.Fatalf("truncated there, read here: %d bytes, not the model", len(got))
	}

	// A fresh open there after all that gets the data as it is now, once
	// no handle keeps the file's state open there (which asks for none).
	// (fb2's release may still be on its way: opens until then ask none.)
	must(t, fb2.Close())
	r0, k0 = counts(b)
	for i := 0; ; i++ {
		fb3, err := os.Open(pb)
		must(t, err)
		check("opened again there", fb3, v3[:100])
		must(t, fb3.Close())
		if _, k := counts(b); k > k0 || i == 100 {
			break
		}
		r0, _ = counts(b)
	}
	if r, k := counts(b); r != r0 || k == k0 {
		t.Fatalf("open+read after the changes: %d ost_reads, %d opens' data kept; want 0 and some", r-r0, k-k0)
	}

	// A shared mapping's stores are the kernel's dirty pages until they
	// are written back: the mapping's handle keeps the file's state open
	// there, so a read-only open beside it asks for no data and gives the
	// page cache none to lay over those pages; it reads what was stored.
	wm, err := os.OpenFile(pb, os.O_RDWR, 0)
	must(t, err)
	m, err := syscall.Mmap(int(wm.Fd()), 0, 100, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	must(t, err)
	v4 := append([]byte("mapped"), v3[6:100]...)
	copy(m, "mapped")
	c0 = cached()
	if got := readFile(t, pb); !bytes.Equal(got, v4) || cached() != c0 {
		t.Fatalf("read there beside a dirty shared mapping: %q..., %d opens' data given to the page cache; want %q... and none",
			got[:min(len(got), 9)], cached()-c0, v4[:9])
	}
	must(t, syscall.Munmap(m))
	must(t, wm.Close())
	// The kernel sends the handle's release after close(2) returns: the
	// next opens may still find the state open and ask for no data.
	for i := 0; cached() == c0; i++ {
		if got := readFile(t, pb); !bytes.Equal(got, v4) {
			t.Fatalf("read there once the mapping is gone: %q..., want %q...", got[:min(len(got), 9)], v4[:9])
		}
		if i == 100 {
			t.Fatal("read there once the mapping is gone: no open's data given to the page cache in 100 opens")
		}
	}

	// Past the limit (64 KiB), and with no data on the MDT: as before.
	for _, p := range []string{filepath.Join("dom", "big"), "plain"} {
		v := data(70000)
		if p == "plain" {
			v = data(3901)
		}
		writeFile(t, filepath.Join(a, p), v)
		r0, k0 := counts(b)
		if got := readFile(t, filepath.Join(b, p)); !bytes.Equal(got, v) {
			t.Fatalf("%s: read there: %d bytes, not the model", p, len(got))
		}
		if r, k := counts(b); r == r0 || k != k0 {
			t.Fatalf("%s: %d ost_reads, %d opens' data kept; want some and none", p, r-r0, k-k0)
		}
	}
}
