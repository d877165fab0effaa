package e2e

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/pkg/xattr"
	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/stats"
)

// clientMethods is the mount's RPC counts by method name.
func clientMethods(t *testing.T, mnt string) map[string]stats.Method {
	t.Helper()
	b, err := xattr.Get(mnt, stats.ClientXattr)
	must(t, err)
	var cl stats.Client
	must(t, json.Unmarshal(b, &cl))
	out := map[string]stats.Method{}
	for _, m := range cl.Methods {
		out[m.Name] = m
	}
	return out
}

// copyAll is copy_file_range(2) of n bytes, called again for what a
// call leaves, as cp does.
func copyAll(t *testing.T, src, dst *os.File, inOff, outOff int64, n int) int {
	t.Helper()
	done := 0
	for done < n {
		in, out := inOff+int64(done), outOff+int64(done)
		got, err := unix.CopyFileRange(int(src.Fd()), &in, int(dst.Fd()), &out, n-done, 0)
		must(t, err)
		if got == 0 {
			break
		}
		done += got
	}
	return done
}

// TestCopyFileRange copies between files of different layouts (pieces
// that cross OSTs), of one layout (pieces within an OST), within one
// file, from a sparse source and past a source's end, byte-exact against
// a model (through the copying mount and another), with no file data
// through the client: its ost_read and
// ost_write counts do not move, and the OSTs' copied bytes are the
// copy's.
func TestCopyFileRange(t *testing.T) {
	c, mnt := mount(t)
	_, other := c.MountAt("other")
	rng := rand.New(rand.NewPCG(19, 21))
	const M = 1 << 20
	data := make([]byte, 5*M+12345)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	src := filepath.Join(mnt, "src")
	sfRun(t, c, "setstripe", "-c", "4", "-S", "1M", src)
	writeFile(t, src, data)
	wide := filepath.Join(mnt, "wide") // other stripe size and count: every piece crosses OSTs
	sfRun(t, c, "setstripe", "-c", "3", "-S", "64k", wide)
	same := filepath.Join(mnt, "same") // src's layout: many pieces stay on their OST
	sfRun(t, c, "setstripe", "-c", "4", "-S", "1M", "-i", "0", same)

	open := func(p string, flag int) *os.File {
		f, err := os.OpenFile(p, flag, 0o644)
		must(t, err)
		t.Cleanup(func() { f.Close() })
		return f
	}
	sf := open(src, os.O_RDONLY)
	ostCopied := func() int64 {
		var n int64
		for _, p := range c.OSTs {
			n += ostCounters(t, p)["copied_bytes"]
		}
		return n
	}
	copiedBefore := ostCopied()
	var dataCalls, copyCalls int64 // during the copies alone: the checks read

	type step struct {
		name          string
		dst           string
		inOff, outOff int64
		n             int
	}
	models := map[string][]byte{}
	for _, s := range []step{
		{"whole file across layouts", wide, 0, 0, len(data)},
		{"unaligned into the middle", wide, 777, 3*M + 4321, 2*M + 99},
		{"same layout", same, 0, 0, len(data)},
		{"same layout, shifted", same, M, 100, 3 * M},
	} {
		df := open(s.dst, os.O_RDWR)
		before := clientMethods(t, mnt)
		if got := copyAll(t, sf, df, s.inOff, s.outOff, s.n); got != s.n {
			t.Fatalf("%s: copied %d of %d", s.name, got, s.n)
		}
		after := clientMethods(t, mnt)
		for _, m := range []string{"ost_read", "ost_write"} {
			dataCalls += after[m].Calls - before[m].Calls
		}
		copyCalls += after["ost_copy"].Calls - before["ost_copy"].Calls
		m := models[s.dst]
		if need := int(s.outOff) + s.n; len(m) < need {
			m = append(m, make([]byte, need-len(m))...)
		}
		copy(m[s.outOff:], data[s.inOff:s.inOff+int64(s.n)])
		models[s.dst] = m
		if got := readFile(t, s.dst); !bytes.Equal(got, m) {
			t.Fatalf("%s: %s differs from the model (%d bytes, want %d)", s.name, s.dst, len(got), len(m))
		}
		// Another client reads what the OSTs wrote (the copier's write
		// lock is called back first).
		if got := readFile(t, filepath.Join(other, filepath.Base(s.dst))); !bytes.Equal(got, m) {
			t.Fatalf("%s: another mount reads %s differently from the model", s.name, s.dst)
		}
	}
	if dataCalls != 0 {
		t.Errorf("the client made %d ost_read and ost_write calls during the copies: file data went through it", dataCalls)
	}
	want := int64(2*len(data) + 2*M + 99 + 3*M)
	if d := ostCopied() - copiedBefore; d != want {
		t.Errorf("the OSTs copied %d bytes, want %d", d, want)
	}
	if copyCalls == 0 {
		t.Error("no ost_copy calls")
	}

	// Past the source's end: a short copy; at it, none.
	df := open(wide, os.O_RDWR)
	if got := copyAll(t, sf, df, int64(len(data))-10, 0, 100); got != 10 {
		t.Errorf("copy across the source's end: %d bytes, want 10", got)
	}
	in, out := int64(len(data)), int64(0)
	if n, err := unix.CopyFileRange(int(sf.Fd()), &in, int(df.Fd()), &out, 100, 0); err != nil || n != 0 {
		t.Errorf("copy at the source's end: %d %v, want 0", n, err)
	}

	// A sparse source: its hole overwrites what the destination held.
	sparse := filepath.Join(mnt, "sparse")
	sfRun(t, c, "setstripe", "-c", "2", "-S", "1M", sparse)
	must(t, os.WriteFile(sparse, []byte("head"), 0o644))
	must(t, os.Truncate(sparse, 4*M))
	spf := open(sparse, os.O_RDONLY)
	if got := copyAll(t, spf, df, 0, 0, 4*M); got != 4*M {
		t.Fatalf("sparse copy: %d bytes", got)
	}
	got := readFile(t, wide)
	if !bytes.Equal(got[:4], []byte("head")) || !bytes.Equal(got[4:4*M], make([]byte, 4*M-4)) {
		t.Error("the sparse source's hole did not come through as zeros")
	}

	// Within one file, to a range that does not overlap.
	sameF := open(same, os.O_RDWR)
	if got := copyAll(t, sameF, sameF, 0, int64(len(data)), M); got != M {
		t.Fatalf("copy within a file: %d bytes", got)
	}
	m := append(models[same], models[same][:M]...)
	if got := readFile(t, same); !bytes.Equal(got, m) {
		t.Error("copy within a file differs from the model")
	}

	// An erasure-coded destination is copied through the client.
	ec := filepath.Join(mnt, "ec")
	sfRun(t, c, "setstripe", "--ec", "2+1", "-S", "64k", ec)
	ecf := open(ec, os.O_RDWR)
	if got := copyAll(t, sf, ecf, 0, 0, len(data)); got != len(data) {
		t.Fatalf("copy to an EC file: %d bytes", got)
	}
	if got := readFile(t, ec); !bytes.Equal(got, data) {
		t.Error("the EC copy differs from its source")
	}
	if n := clientCounter(t, mnt, "copied_through_bytes"); n != int64(len(data)) {
		t.Errorf("copied_through_bytes %d, want %d", n, len(data))
	}
}
