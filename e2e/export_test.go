package e2e

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/internal/testcluster"
)

// The kernel nfsd export path, without nfsd: name_to_handle_at gives the
// same (node id, generation) handle nfsd would hand a client, and
// open_by_handle_at decodes it the way nfsd does — LOOKUP "." of a node
// the kernel no longer has, and for a directory LOOKUP ".." up to the root
// (reconnect_path), then READDIR of each parent to find the name. Each
// step is tried with the kernel's caches warm, dropped, after a remount
// and after every server restarted.
func TestExportHandles(t *testing.T) {
	c, mnt := mount(t)
	deep := filepath.Join(mnt, "a", "b", "c")
	must(t, os.MkdirAll(deep, 0o755))
	files := map[string][]byte{
		filepath.Join(mnt, "top.txt"):          []byte("at the root\n"),
		filepath.Join(mnt, "a", "b", "f.bin"):  bytes.Repeat([]byte("stripefs"), 300000), // several stripe units
		filepath.Join(deep, "deep.txt"):        []byte("three levels down\n"),
		filepath.Join(mnt, "a", "empty.bin"):   {},
		filepath.Join(mnt, "a", "b", "c", "x"): []byte("x"),
	}
	for p, data := range files {
		writeFile(t, p, data)
	}
	// Deepest first: listing a directory gives the kernel its children's
	// dentries (READDIRPLUS), which would spare them the reconnection.
	dirs := []string{deep, filepath.Join(mnt, "a", "b"), filepath.Join(mnt, "a"), mnt}

	type handle struct {
		path string
		fh   unix.FileHandle
		ino  uint64
	}
	var hs []handle
	for _, p := range append(dirs, slices.Sorted(maps.Keys(files))...) {
		fh, _, err := unix.NameToHandleAt(unix.AT_FDCWD, p, 0)
		if err != nil {
			t.Fatalf("name_to_handle_at %s: %v (is export support negotiated?)", p, err)
		}
		var st syscall.Stat_t
		must(t, syscall.Stat(p, &st))
		hs = append(hs, handle{p, fh, st.Ino})
	}

	check := func(stage string) {
		t.Helper()
		mfd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatalf("%s: open mount point: %v", stage, err)
		}
		defer unix.Close(mfd)
		for _, h := range hs {
			fd, err := unix.OpenByHandleAt(mfd, h.fh, unix.O_RDONLY)
			if err != nil {
				t.Errorf("%s: open_by_handle_at %s: %v", stage, h.path, err)
				continue
			}
			f := os.NewFile(uintptr(fd), h.path)
			var st syscall.Stat_t
			if err := syscall.Fstat(fd, &st); err != nil || st.Ino != h.ino {
				t.Errorf("%s: %s: inode %d (%v), want %d", stage, h.path, st.Ino, err, h.ino)
			}
			if want, ok := files[h.path]; ok {
				got, err := readAllFile(f)
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s: %s read by handle: %d bytes (%v), want %d", stage, h.path, len(got), err, len(want))
				}
			} else {
				// A directory is reconnected to the root through "..", so
				// the kernel knows its path again. (Asked first: a lookup
				// by path would connect it too.)
				if p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err != nil || p != h.path {
					t.Errorf("%s: %s reconnected as %q (%v)", stage, h.path, p, err)
				}
				got, err := f.Readdirnames(-1)
				want, werr := os.ReadDir(h.path)
				if err != nil || werr != nil || len(got) != len(want) {
					t.Errorf("%s: %s listed by handle: %v (%v), want %d entries (%v)", stage, h.path, got, err, len(want), werr)
				}
			}
			f.Close()
		}
	}

	check("warm caches")
	dropCaches(t)
	check("caches dropped")
	c.Unmount()
	c.MountFS()
	dropCaches(t)
	check("remounted")
	c.Unmount()
	for _, p := range append(append([]*testcluster.Proc(nil), c.MDTs...), c.OSTs...) {
		c.Stop(p)
		c.Restart(p)
	}
	c.MountFS()
	check("servers restarted and remounted")

	// A handle of a removed file is stale, not some other file.
	victim := filepath.Join(mnt, "top.txt")
	var vh unix.FileHandle
	for _, h := range hs {
		if h.path == victim {
			vh = h.fh
		}
	}
	must(t, os.Remove(victim))
	dropCaches(t)
	mfd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	defer unix.Close(mfd)
	if fd, err := unix.OpenByHandleAt(mfd, vh, unix.O_RDONLY); err == nil {
		unix.Close(fd)
		t.Errorf("open_by_handle_at of a removed file succeeded")
	} else if err != unix.ESTALE && err != unix.ENOENT {
		t.Errorf("open_by_handle_at of a removed file: %v, want ESTALE", err)
	}
}

// TestExportsLine checks `stripefs nfsexport --print` on a real mount.
func TestExportsLine(t *testing.T) {
	c, mnt := mount(t)
	out, err := exec.Command(c.Bin, "nfsexport", "--print", mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("nfsexport --print: %v\n%s", err, out)
	}
	var line string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(l, "#") {
			line = l
		}
	}
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != mnt || !strings.HasPrefix(f[1], "*(") {
		t.Fatalf("exports line %q, want %q followed by *(options)\n%s", line, mnt, out)
	}
	for _, opt := range []string{"rw", "sync", "no_subtree_check", "fsid="} {
		if !strings.Contains(f[1], opt) {
			t.Errorf("exports line %q lacks %s", line, opt)
		}
	}
	if strings.Contains(string(out), "WARNING") {
		t.Errorf("warning for a mount with allow_other:\n%s", out)
	}
	// The fsid is the same on every remount: it is what keeps handles valid.
	c.Unmount()
	c.MountFS()
	again, err := exec.Command(c.Bin, "nfsexport", "--print", mnt).CombinedOutput()
	if err != nil || string(again) != string(out) {
		t.Errorf("after a remount: %v\n%s\nwant\n%s", err, again, out)
	}
	// Inside the mount is not a mount point.
	must(t, os.Mkdir(filepath.Join(mnt, "sub"), 0o755))
	if out, err := exec.Command(c.Bin, "nfsexport", "--print", filepath.Join(mnt, "sub")).CombinedOutput(); err == nil {
		t.Errorf("nfsexport --print of a subdirectory succeeded:\n%s", out)
	}
}

func dropCaches(t *testing.T) {
	t.Helper()
	syscall.Sync()
	must(t, os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0o200))
}

func readAllFile(f *os.File) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(f)
	return buf.Bytes(), err
}
