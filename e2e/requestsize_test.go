package e2e

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// maxPagesLimit is the kernel's bound on a FUSE request, in pages (Linux
// 6.13+).
const maxPagesLimit = "/proc/sys/fs/fuse/max_pages_limit"

// setMaxPages sets the kernel's FUSE request bound for the rest of the
// test (mounts made meanwhile agree to it at INIT), and puts the old one
// back at its end.
func setMaxPages(t *testing.T, pages int) {
	t.Helper()
	old, err := os.ReadFile(maxPagesLimit)
	if os.IsNotExist(err) {
		t.Skipf("this kernel has no %s (Linux 6.13+): FUSE requests stop at 1 MiB", maxPagesLimit)
	}
	must(t, err)
	if err := os.WriteFile(maxPagesLimit, []byte(strconv.Itoa(pages)), 0); errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		t.Skipf("%s cannot be raised here (%v): FUSE requests stop at what it allows", maxPagesLimit, err)
	} else {
		must(t, err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(maxPagesLimit, bytes.TrimSpace(old), 0); err != nil {
			t.Errorf("put %s back: %v", maxPagesLimit, err)
		}
	})
}

// TestLargeRequests: where the kernel allows FUSE requests over 1 MiB, a
// mount takes 4 MiB reads and writes whole. A file of each layout
// (striped, Data-on-MDT with components after it, erasure coded) is
// written on one mount and read on another, each a process of its own,
// one of which asked for 1 MiB requests (max_request_kb=1024): the bytes
// match, each client's counters say how large the kernel's calls were,
// and each mount's read-ahead window is one request. A takeover carries
// the size the kernel agreed to; once the kernel allows less than that
// (the sysctl lowered), a takeover is refused with the reason and the
// mount serves on.
func TestLargeRequests(t *testing.T) {
	setMaxPages(t, 1024) // 4 MiB
	c := startCluster(t)
	_, big := c.MountAt("big")
	_, small := c.MountAt("small", "max_request_kb=1024")
	for mnt, want := range map[string]string{big: "4096", small: "1024"} {
		if got := bdiReadAhead(t, mnt); got != want {
			t.Errorf("%s: read-ahead window %s KiB, want one request's worth, %s", filepath.Base(mnt), got, want)
		}
	}

	layouts := map[string][]string{
		"striped": {"-c", "-1", "-S", "1M"},
		"dom":     domLayout,
		"ec":      {"--ec", "2+1", "-S", "1M"},
	}
	rng := rand.New(rand.NewPCG(20, 4))
	// Each file is 4 MiB and a piece more: one request and the rest.
	data := func() []byte {
		b := make([]byte, 4<<20+12345)
		randBytes(rng, b)
		return b
	}
	check := func(what, p string, want []byte) {
		t.Helper()
		f, err := os.Open(p)
		must(t, err)
		defer f.Close()
		got := make([]byte, len(want)+1)
		n, err := f.ReadAt(got, 0) // one read(2) for the whole file
		if n != len(want) || !bytes.Equal(got[:n], want) {
			t.Fatalf("%s: read %d bytes (%v), want %d; first difference at %d", what, n, err, len(want), firstDiff(got[:n], want))
		}
	}
	calls := func(mnt string) (int64, int64) {
		return clientCounter(t, mnt, "read_call_bytes_max"), clientCounter(t, mnt, "write_call_bytes_max")
	}
	for name, lay := range layouts {
		dir := filepath.Join(big, name)
		must(t, os.Mkdir(dir, 0o755))
		sfRun(t, c, append(append([]string{"setstripe"}, lay...), dir)...)
		fromBig, fromSmall := data(), data()
		writeFile(t, filepath.Join(big, name, "a"), fromBig)
		writeFile(t, filepath.Join(small, name, "b"), fromSmall)
		check(name+": small reads big's file", filepath.Join(small, name, "a"), fromBig)
		check(name+": big reads small's file", filepath.Join(big, name, "b"), fromSmall)
		check(name+": big reads its own file", filepath.Join(big, name, "a"), fromBig)
	}
	if r, w := calls(big); r != 4<<20 || w != 4<<20 {
		t.Errorf("the 4 MiB mount's largest read and write were %d and %d bytes, want 4 MiB each", r, w)
	}
	if r, w := calls(small); r != 1<<20 || w != 1<<20 {
		t.Errorf("the mount that asked for 1 MiB requests read and wrote up to %d and %d bytes", r, w)
	}

	// Pages a program maps come in through the read-ahead window.
	p := filepath.Join(big, "striped", "b")
	f, err := os.Open(p)
	must(t, err)
	st, err := f.Stat()
	must(t, err)
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	must(t, err)
	mapped := bytes.Clone(m)
	must(t, unix.Munmap(m))
	f.Close()
	if want := readFile(t, filepath.Join(small, "striped", "b")); !bytes.Equal(mapped, want) {
		t.Fatalf("mapped file differs from the written one at %d", firstDiff(mapped, want))
	}

	// The successor reads the requests the kernel agreed to with its
	// predecessor.
	c.TakeOver(big)
	again := data()
	writeFile(t, filepath.Join(big, "striped", "c"), again)
	check("after a takeover", filepath.Join(small, "striped", "c"), again)
	if _, w := calls(big); w != 4<<20 {
		t.Errorf("the successor's largest write was %d bytes, want 4 MiB", w)
	}

	// With the kernel now allowing 1 MiB, no new server could read the
	// session's 4 MiB requests.
	must(t, os.WriteFile(maxPagesLimit, []byte("256"), 0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.Bin, "mount", "--takeover", big).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "max_pages_limit was lowered") {
		t.Fatalf("takeover with the kernel's bound lowered: %v\n%s", err, out)
	}
	last := data()
	writeFile(t, filepath.Join(big, "striped", "d"), last)
	check("after a refused takeover", filepath.Join(small, "striped", "d"), last)
	check("the mount serves on", filepath.Join(big, "striped", "d"), last)
}
