package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestNFSVector(t *testing.T) {
	if nfsHead+nfsPages*pageSize+nfsTail != nfsChunk {
		t.Fatal("the nfsd vector does not add up to 1 MiB")
	}
	for _, n := range []int{1, pageSize, nfsChunk} {
		if b := alignedBuf(n); len(b) != n || uintptr(unsafe.Pointer(&b[0]))%pageSize != 0 {
			t.Errorf("alignedBuf(%d) is not %d page-aligned bytes", n, n)
		}
	}
}

// On local disk O_DIRECT with a 3500-byte first iovec is refused (ext4,
// xfs) or O_DIRECT is not supported at all (older tmpfs): either way the
// run falls back, says so, and still verifies.
func TestNFSWrite(t *testing.T) {
	dir := t.TempDir()
	res, err := NFSWrite(context.Background(), NFSWriteConfig{Path: filepath.Join(dir, "nfs"), Size: 4 << 20, AlignedDirect: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified || res.Ratio <= 0 || len(res.Phases) != 3 {
		t.Fatalf("implausible result %+v", res)
	}
	for i, name := range []string{"nfs", "aligned", "aligned-direct"} {
		p := res.Phases[i]
		if p.Name != name || p.Calls != 4 || p.Bytes != 4<<20 || p.MiBps <= 0 || p.Seconds <= 0 || p.Stripefs != nil {
			t.Errorf("phase %d: %+v", i, p)
		}
		if p.ODirect == (p.Fallback != "") && name != "aligned" {
			t.Errorf("%s: O_DIRECT %v but fallback %q", name, p.ODirect, p.Fallback)
		}
	}
	if res.Phases[1].ODirect {
		t.Error("the aligned phase used O_DIRECT")
	}
	t.Logf("nfs phase: O_DIRECT %v %s", res.Phases[0].ODirect, res.Phases[0].Fallback)
	checkGone(t, dir)

	var buf bytes.Buffer
	if err := res.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nfs/aligned: ", "verification: ok", "n/a", "nfs.aligned", "3500-byte head"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	t.Logf("\n%s", buf.String())
	buf.Reset()
	if err := res.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil || got["verified"] != true || got["nfs_over_aligned"] == nil {
		t.Errorf("JSON %v: %s", err, buf.String())
	}
}

func TestNFSWriteFallbackAndKeep(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nfs")
	res, err := nfsWrite(context.Background(), NFSWriteConfig{Path: path, Size: 2 << 20, Keep: true, AlignedDirect: true}, nfsHooks{refuseDirect: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []NFSWritePhase{res.Phases[0], res.Phases[2]} {
		if p.ODirect || !strings.Contains(p.Fallback, "EINVAL") || p.Calls != 2 {
			t.Errorf("no fallback recorded: %+v", p)
		}
	}
	if !res.Verified {
		t.Error("not verified")
	}
	for _, f := range []string{path + ".nfs", path + ".aligned", path + ".direct"} {
		if st, err := os.Stat(f); err != nil || st.Size() != 2<<20 {
			t.Errorf("--keep: %s: %v", f, err)
		}
	}
}

// The pwritev really carries the three iovecs to the file: the data at
// the head/body and body/tail seams is right.
func TestNFSWriteCatchesCorruption(t *testing.T) {
	for _, at := range []int64{0, nfsHead - 1, nfsHead, nfsHead + nfsPages*pageSize, 1<<20 + nfsHead, 2<<20 - 1} {
		dir := t.TempDir()
		_, err := nfsWrite(context.Background(), NFSWriteConfig{Path: filepath.Join(dir, "x"), Size: 2 << 20}, nfsHooks{
			afterWrite: func(files []string) error { return flipByte(files[0], at) },
		})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "x.nfs offset "+strconv.FormatInt(at, 10)+" holds") {
			t.Errorf("flip at %d: %v", at, err)
		}
		checkGone(t, dir)
	}
	dir := t.TempDir()
	_, err := nfsWrite(context.Background(), NFSWriteConfig{Path: filepath.Join(dir, "x"), Size: 2 << 20}, nfsHooks{
		afterWrite: func(files []string) error { return os.Truncate(files[1], 1<<20) },
	})
	if err == nil || !strings.Contains(err.Error(), "x.aligned is 1048576 bytes, want 2097152") {
		t.Errorf("short file: %v", err)
	}
}

func TestNFSWriteBadArgs(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		cfg  NFSWriteConfig
		want string
	}{
		{NFSWriteConfig{Size: 1 << 20}, "-o PATH"},
		{NFSWriteConfig{Path: filepath.Join(dir, "x"), Size: 0}, "whole number of MiB"},
		{NFSWriteConfig{Path: filepath.Join(dir, "x"), Size: -1 << 20}, "whole number of MiB"},
		{NFSWriteConfig{Path: filepath.Join(dir, "x"), Size: 1<<20 + 1}, "whole number of MiB"},
		{NFSWriteConfig{Path: filepath.Join(dir, "missing", "x"), Size: 1 << 20}, "no such file"},
	} {
		if _, err := NFSWrite(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.cfg, err, c.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NFSWrite(ctx, NFSWriteConfig{Path: filepath.Join(dir, "x"), Size: 1 << 20}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	checkGone(t, dir)
}

func TestPwritevAllShortWrites(t *testing.T) {
	// The vector lands in order at the offset given.
	f, err := os.Create(filepath.Join(t.TempDir(), "v"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, b, c := []byte("head-"), bytes.Repeat([]byte{'x'}, 10000), []byte("-tail")
	if err := pwritevAll(int(f.Fd()), [][]byte{a, b, c}, 7); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 7+len(a)+len(b)+len(c))
	if _, err := unix.Pread(int(f.Fd()), got, 0); err != nil {
		t.Fatal(err)
	}
	if want := append(append(append(make([]byte, 7), a...), b...), c...); !bytes.Equal(got, want) {
		t.Error("pwritevAll wrote the wrong bytes")
	}
}
