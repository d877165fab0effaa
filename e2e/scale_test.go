package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLargeDirectory lists a directory of 12,000 entries
// (STRIPEFS_DIR_ENTRIES=100000 for a longer run: 70 s of creates on two
// cores) through the mount and checks every name comes back exactly
// once, over 12 reads of 1000 names and 12 MDT readdir pages.
func TestLargeDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	n := 12_000
	if s := os.Getenv("STRIPEFS_DIR_ENTRIES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 2 {
			t.Fatalf("STRIPEFS_DIR_ENTRIES=%q: want a count", s)
		}
		n = v
	}
	_, mnt := mount(t)
	dir := filepath.Join(mnt, "big")
	must(t, os.Mkdir(dir, 0o755))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				if err := syscall.Mknod(filepath.Join(dir, fmt.Sprintf("entry-%06d", i)), syscall.S_IFREG|0o644, 0); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	f, err := os.Open(dir)
	must(t, err)
	defer f.Close()
	seen := make(map[string]bool, n)
	for {
		names, err := f.Readdirnames(1000) // many getdents calls: cookies resume each
		for _, name := range names {
			if seen[name] {
				t.Fatalf("%s listed twice", name)
			}
			seen[name] = true
		}
		if err == io.EOF || len(names) == 0 {
			break
		}
		must(t, err)
	}
	if len(seen) != n {
		t.Fatalf("listed %d entries, want %d", len(seen), n)
	}
	for i := 0; i < n; i++ {
		if !seen[fmt.Sprintf("entry-%06d", i)] {
			t.Fatalf("entry-%06d missing", i)
		}
	}
	var st syscall.Stat_t
	must(t, syscall.Stat(filepath.Join(dir, fmt.Sprintf("entry-%06d", n/2+1)), &st))
}

// TestReaddirCookiesStable removes and adds entries while a listing is
// in progress: every entry present throughout must be listed once.
func TestReaddirCookiesStable(t *testing.T) {
	_, mnt := mount(t)
	dir := filepath.Join(mnt, "churn")
	must(t, os.Mkdir(dir, 0o755))
	for i := 0; i < 3000; i++ {
		must(t, syscall.Mknod(filepath.Join(dir, fmt.Sprintf("keep-%d", i)), syscall.S_IFREG|0o644, 0))
		must(t, syscall.Mknod(filepath.Join(dir, fmt.Sprintf("gone-%d", i)), syscall.S_IFREG|0o644, 0))
	}
	f, err := os.Open(dir)
	must(t, err)
	defer f.Close()
	seen := map[string]int{}
	for round := 0; ; round++ {
		names, err := f.Readdirnames(100)
		for _, name := range names {
			seen[name]++
		}
		if err == io.EOF || len(names) == 0 {
			break
		}
		// Churn between getdents calls.
		for i := round * 30; i < round*30+30 && i < 3000; i++ {
			_ = os.Remove(filepath.Join(dir, fmt.Sprintf("gone-%d", i)))
			must(t, syscall.Mknod(filepath.Join(dir, fmt.Sprintf("new-%d", i)), syscall.S_IFREG|0o644, 0))
		}
	}
	for i := 0; i < 3000; i++ {
		if c := seen[fmt.Sprintf("keep-%d", i)]; c != 1 {
			t.Fatalf("keep-%d listed %d times", i, c)
		}
	}
	for name, c := range seen {
		if c != 1 {
			t.Fatalf("%s listed %d times", name, c)
		}
	}
}

// pattern fills b with data that depends on the file offset and a seed,
// cheap to make and verify.
func pattern(b []byte, off int64, seed byte) {
	for i := range b {
		o := off + int64(i)
		b[i] = byte(o>>20) ^ byte(o>>8) ^ byte(o) ^ seed
	}
}

// TestLargeStripedFile writes 1 GiB over 4 stripes and reads it back with
// a checksum, and checks each OST holds a quarter of it.
func TestLargeStripedFile(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	c, mnt := mount(t)
	dir := filepath.Join(mnt, "wide")
	must(t, os.Mkdir(dir, 0o755))
	must(t, unix.Setxattr(dir, "lustre.lov", []byte("stripe_count=4 stripe_size=1048576"), 0))
	path := filepath.Join(dir, "gig")
	const size = 1 << 30
	f, err := os.Create(path)
	must(t, err)
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		pattern(buf, off, 7)
		h.Write(buf)
		_, err := f.Write(buf)
		must(t, err)
	}
	must(t, f.Close())
	want := h.Sum(nil)

	lov := make([]byte, 256)
	n, err := unix.Getxattr(path, "lustre.lov", lov)
	must(t, err)
	if !strings.Contains(string(lov[:n]), "stripe_count=4") {
		t.Fatalf("layout %q", lov[:n])
	}
	for i := 0; i < 4; i++ {
		var total int64
		filepath.Walk(filepath.Join(c.Dir, fmt.Sprintf("ost%d", i), "O"), func(_ string, fi os.FileInfo, _ error) error {
			if fi != nil && fi.Mode().IsRegular() {
				total += fi.Size()
			}
			return nil
		})
		if total != size/4 {
			t.Errorf("ost%d holds %d bytes, want %d", i, total, size/4)
		}
	}
	r, err := os.Open(path)
	must(t, err)
	defer r.Close()
	h.Reset()
	if _, err := io.CopyBuffer(h, r, buf); err != nil {
		t.Fatal(err)
	}
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		t.Fatalf("sha256 after read back %x, want %x", got, want)
	}
}
