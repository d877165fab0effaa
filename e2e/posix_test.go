package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestNamespaceAndFileOps drives every operation through a real mount of
// real server processes and checks what a POSIX program would see.
func TestNamespaceAndFileOps(t *testing.T) {
	_, mnt := mount(t)
	p := func(s string) string { return filepath.Join(mnt, s) }

	t.Run("create write read stat", func(t *testing.T) {
		writeFile(t, p("a"), []byte("hello world"))
		if got := readFile(t, p("a")); string(got) != "hello world" {
			t.Fatalf("read %q", got)
		}
		st, err := os.Stat(p("a"))
		must(t, err)
		if st.Size() != 11 || st.Mode().Perm() != 0o644 || !st.Mode().IsRegular() {
			t.Fatalf("stat: size %d mode %v", st.Size(), st.Mode())
		}
	})
	t.Run("setattr", func(t *testing.T) {
		must(t, os.Chmod(p("a"), 0o600))
		must(t, os.Chown(p("a"), 123, 456))
		mt := time.Date(2020, 1, 2, 3, 4, 5, 600, time.UTC)
		must(t, os.Chtimes(p("a"), mt, mt))
		var st syscall.Stat_t
		must(t, syscall.Stat(p("a"), &st))
		if st.Mode&0o7777 != 0o600 || st.Uid != 123 || st.Gid != 456 || st.Mtim.Nano() != mt.UnixNano() || st.Atim.Nano() != mt.UnixNano() {
			t.Fatalf("after setattr: mode %o uid %d gid %d mtime %d atime %d", st.Mode, st.Uid, st.Gid, st.Mtim.Nano(), st.Atim.Nano())
		}
		must(t, os.Truncate(p("a"), 5))
		must(t, os.Truncate(p("a"), 8))
		if got := readFile(t, p("a")); !bytes.Equal(got, []byte("hello\x00\x00\x00")) {
			t.Fatalf("after truncate down and up: %q", got)
		}
	})
	t.Run("mknod", func(t *testing.T) {
		must(t, syscall.Mkfifo(p("fifo"), 0o644))
		must(t, syscall.Mknod(p("chr"), syscall.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
		var st syscall.Stat_t
		must(t, syscall.Lstat(p("fifo"), &st))
		if st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
			t.Fatalf("fifo mode %o", st.Mode)
		}
		must(t, syscall.Lstat(p("chr"), &st))
		if st.Mode&syscall.S_IFMT != syscall.S_IFCHR || st.Rdev != unix.Mkdev(1, 3) {
			t.Fatalf("chr mode %o rdev %x", st.Mode, st.Rdev)
		}
	})
	t.Run("mkdir rmdir nlink", func(t *testing.T) {
		must(t, os.Mkdir(p("d"), 0o755))
		must(t, os.Mkdir(p("d/sub"), 0o755))
		var st syscall.Stat_t
		must(t, syscall.Stat(p("d"), &st))
		if st.Nlink != 3 {
			t.Fatalf("dir with one subdir: nlink %d, want 3", st.Nlink)
		}
		must(t, os.Remove(p("d/sub")))
		must(t, syscall.Stat(p("d"), &st))
		if st.Nlink != 2 {
			t.Fatalf("empty dir: nlink %d, want 2", st.Nlink)
		}
	})
	t.Run("rename", func(t *testing.T) {
		writeFile(t, p("r1"), []byte("one"))
		writeFile(t, p("r2"), []byte("two"))
		must(t, os.Rename(p("r1"), p("r2"))) // replaces a file
		if got := readFile(t, p("r2")); string(got) != "one" {
			t.Fatalf("replaced file reads %q", got)
		}
		_, err := os.Stat(p("r1"))
		wantErrno(t, "old name after rename", err, syscall.ENOENT)

		must(t, os.MkdirAll(p("rd1/x"), 0o755))
		must(t, os.Mkdir(p("rd2"), 0o755))
		must(t, syscall.Rename(p("rd1"), p("rd2"))) // replaces an empty directory (os.Rename refuses)
		if _, err := os.Stat(p("rd2/x")); err != nil {
			t.Fatal(err)
		}
		must(t, os.Mkdir(p("rd3"), 0o755))
		wantErrno(t, "rename onto non-empty dir", syscall.Rename(p("rd3"), p("rd2")), syscall.ENOTEMPTY)
		wantErrno(t, "rename dir into itself", syscall.Rename(p("rd2"), p("rd2/x/y")), syscall.EINVAL)
		wantErrno(t, "rename dir onto file", syscall.Rename(p("rd3"), p("r2")), syscall.ENOTDIR)
		wantErrno(t, "rename file onto dir", syscall.Rename(p("r2"), p("rd3")), syscall.EISDIR)

		must(t, os.Rename(p("r2"), p("rd2/x/moved"))) // across directories
		if got := readFile(t, p("rd2/x/moved")); string(got) != "one" {
			t.Fatalf("moved file reads %q", got)
		}
		writeFile(t, p("e1"), []byte("e1"))
		writeFile(t, p("e2"), []byte("e2"))
		wantErrno(t, "RENAME_NOREPLACE", unix.Renameat2(unix.AT_FDCWD, p("e1"), unix.AT_FDCWD, p("e2"), unix.RENAME_NOREPLACE), syscall.EEXIST)
		must(t, unix.Renameat2(unix.AT_FDCWD, p("e1"), unix.AT_FDCWD, p("e2"), unix.RENAME_EXCHANGE))
		if a, b := readFile(t, p("e1")), readFile(t, p("e2")); string(a) != "e2" || string(b) != "e1" {
			t.Fatalf("after exchange: %q %q", a, b)
		}
	})
	t.Run("link symlink", func(t *testing.T) {
		writeFile(t, p("l1"), []byte("linked"))
		must(t, os.Link(p("l1"), p("l2")))
		var st syscall.Stat_t
		must(t, syscall.Stat(p("l1"), &st))
		if st.Nlink != 2 {
			t.Fatalf("nlink %d after link", st.Nlink)
		}
		must(t, os.Remove(p("l1")))
		if got := readFile(t, p("l2")); string(got) != "linked" {
			t.Fatalf("link reads %q after first name removed", got)
		}
		must(t, os.Symlink("l2", p("sym")))
		if target, err := os.Readlink(p("sym")); err != nil || target != "l2" {
			t.Fatalf("readlink %q %v", target, err)
		}
		if got := readFile(t, p("sym")); string(got) != "linked" {
			t.Fatalf("through symlink: %q", got)
		}
		wantErrno(t, "hard link to a directory", os.Link(p("d"), p("dlink")), syscall.EPERM)
	})
	t.Run("readdir", func(t *testing.T) {
		must(t, os.Mkdir(p("list"), 0o755))
		var want []string
		for _, n := range []string{"b", "a", "c", strings.Repeat("z", 255)} {
			writeFile(t, p("list/"+n), nil)
			want = append(want, n)
		}
		ents, err := os.ReadDir(p("list"))
		must(t, err)
		var got []string
		for _, e := range ents {
			got = append(got, e.Name())
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("readdir %v, want %v", got, want)
		}
	})
	t.Run("xattr", func(t *testing.T) {
		writeFile(t, p("x"), nil)
		must(t, unix.Setxattr(p("x"), "user.k", []byte("v1"), 0))
		wantErrno(t, "XATTR_CREATE on existing", unix.Setxattr(p("x"), "user.k", []byte("v"), unix.XATTR_CREATE), syscall.EEXIST)
		wantErrno(t, "XATTR_REPLACE on missing", unix.Setxattr(p("x"), "user.none", []byte("v"), unix.XATTR_REPLACE), syscall.ENODATA)
		buf := make([]byte, 64)
		n, err := unix.Getxattr(p("x"), "user.k", buf)
		if err != nil || string(buf[:n]) != "v1" {
			t.Fatalf("getxattr %q %v", buf[:n], err)
		}
		n, err = unix.Listxattr(p("x"), buf)
		must(t, err)
		if !strings.Contains(string(buf[:n]), "user.k\x00") {
			t.Fatalf("listxattr %q", buf[:n])
		}
		must(t, unix.Removexattr(p("x"), "user.k"))
		_, err = unix.Getxattr(p("x"), "user.k", buf)
		wantErrno(t, "getxattr after remove", err, syscall.ENODATA)
	})
	t.Run("statfs", func(t *testing.T) {
		var st syscall.Statfs_t
		must(t, syscall.Statfs(mnt, &st))
		if st.Blocks == 0 || st.Files == 0 || st.Ffree == 0 || st.Bavail == 0 {
			t.Fatalf("statfs %+v", st)
		}
	})
	t.Run("open unlinked", func(t *testing.T) {
		f, err := os.OpenFile(p("ou"), os.O_CREATE|os.O_RDWR, 0o644)
		must(t, err)
		_, err = f.Write([]byte("still here"))
		must(t, err)
		must(t, os.Remove(p("ou")))
		_, err = os.Stat(p("ou"))
		wantErrno(t, "stat after unlink", err, syscall.ENOENT)
		_, err = f.WriteAt([]byte(" and more"), 10)
		must(t, err)
		buf := make([]byte, 19)
		_, err = f.ReadAt(buf, 0)
		must(t, err)
		if string(buf) != "still here and more" {
			t.Fatalf("open-unlinked file reads %q", buf)
		}
		must(t, f.Close())
	})
	t.Run("append", func(t *testing.T) {
		for _, s := range []string{"one,", "two,", "three"} {
			f, err := os.OpenFile(p("app"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			must(t, err)
			_, err = f.Write([]byte(s))
			must(t, err)
			must(t, f.Close())
		}
		if got := readFile(t, p("app")); string(got) != "one,two,three" {
			t.Fatalf("appended file %q", got)
		}
	})
	t.Run("O_DIRECT", func(t *testing.T) {
		fd, err := syscall.Open(p("direct"), syscall.O_CREAT|syscall.O_RDWR|syscall.O_DIRECT, 0o644)
		must(t, err)
		defer syscall.Close(fd)
		buf := alignedBuf(1 << 20)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		_, err = syscall.Pwrite(fd, buf, 4096)
		must(t, err)
		got := alignedBuf(1 << 20)
		_, err = syscall.Pread(fd, got, 4096)
		must(t, err)
		if !bytes.Equal(got, buf) {
			t.Fatal("O_DIRECT read differs from O_DIRECT write")
		}
		if b := readFile(t, p("direct")); len(b) != 4096+1<<20 || !bytes.Equal(b[4096:], buf) {
			t.Fatal("buffered read of an O_DIRECT-written file differs")
		}
	})
	t.Run("mmap shared writable", func(t *testing.T) {
		f, err := os.OpenFile(p("mm"), os.O_CREATE|os.O_RDWR, 0o644)
		must(t, err)
		must(t, f.Truncate(3*4096))
		m, err := syscall.Mmap(int(f.Fd()), 0, 3*4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		must(t, err)
		copy(m[4090:], "mapped write")
		must(t, unix.Msync(m, unix.MS_SYNC))
		must(t, syscall.Munmap(m))
		must(t, f.Close())
		b := readFile(t, p("mm"))
		if len(b) != 3*4096 || string(b[4090:4102]) != "mapped write" {
			t.Fatalf("after mmap write: len %d, %q", len(b), b[4090:4102])
		}
	})
	t.Run("fsync", func(t *testing.T) {
		f, err := os.Create(p("fs"))
		must(t, err)
		_, err = f.Write(make([]byte, 3<<20))
		must(t, err)
		must(t, f.Sync())
		must(t, f.Close())
		d, err := os.Open(mnt)
		must(t, err)
		must(t, d.Sync())
		d.Close()
	})
}

func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := int(uintptr(unsafe.Pointer(&b[0])) & 4095)
	if off != 0 {
		off = 4096 - off
	}
	return b[off : off+n]
}

// TestErrnos checks the error each failing call returns.
// A cut by O_TRUNC or truncate(2) of a file just written updates its
// mtime and ctime, as pjdfstest open/00.t and truncate/00.t check: stat
// at once shows both at the cut, not the write's mtime with the cut's
// ctime.
func TestTruncateTimes(t *testing.T) {
	_, mnt := mount(t)
	for _, how := range []string{"O_TRUNC", "truncate", "ftruncate"} {
		t.Run(how, func(t *testing.T) {
			p := filepath.Join(mnt, how)
			writeFile(t, p, bytes.Repeat([]byte("x"), 5000))
			var before syscall.Stat_t
			must(t, syscall.Stat(p, &before))
			time.Sleep(20 * time.Millisecond)
			switch how {
			case "O_TRUNC":
				fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_TRUNC, 0)
				must(t, err)
				syscall.Close(fd)
			case "truncate":
				must(t, syscall.Truncate(p, 10))
			case "ftruncate":
				f, err := os.OpenFile(p, os.O_WRONLY, 0)
				must(t, err)
				must(t, f.Truncate(100))
				f.Close()
			}
			var st syscall.Stat_t
			must(t, syscall.Stat(p, &st))
			if st.Mtim != st.Ctim || st.Mtim == before.Mtim {
				t.Errorf("after %s: mtime %v, ctime %v (before: mtime %v)", how, st.Mtim, st.Ctim, before.Mtim)
			}
		})
	}
}

// st_blocks is the space a file's objects take on the OSTs, so du tells
// a sparse file from a dense one: a 1 GiB hole takes nothing, 4 MiB
// written over four stripes take 4 MiB (within one filesystem block per
// object), at once and after the kernel's caches are dropped.
func TestBlocksAreTheObjectsSpace(t *testing.T) {
	c, mnt := mount(t)
	sparse, dense := filepath.Join(mnt, "sparse"), filepath.Join(mnt, "dense")
	f, err := os.Create(sparse)
	must(t, err)
	must(t, f.Truncate(1<<30))
	f.Close()
	sfRun(t, c, "setstripe", "-c", "4", "-S", "1M", dense)
	writeFile(t, dense, bytes.Repeat([]byte("d"), 4<<20))
	check := func(when string) {
		t.Helper()
		var st syscall.Stat_t
		must(t, syscall.Stat(sparse, &st))
		if st.Size != 1<<30 || st.Blocks > 8 {
			t.Errorf("%s: sparse file: size %d, %d blocks", when, st.Size, st.Blocks)
		}
		must(t, syscall.Stat(dense, &st))
		const want, slack = 4 << 20 / 512, 4 * 4096 / 512
		if st.Blocks < want || st.Blocks > want+slack {
			t.Errorf("%s: dense file: %d blocks, want %d to %d", when, st.Blocks, want, want+slack)
		}
		out, err := exec.Command("du", "-k", sparse, dense).CombinedOutput()
		must(t, err)
		var ks, kd int
		fmt.Sscanf(string(out), "%d", &ks)
		fmt.Sscanf(strings.SplitN(string(out), "\n", 2)[1], "%d", &kd)
		if ks > 4 || kd < 4096 || kd > 4096+16 {
			t.Errorf("%s: du -k says %d and %d KiB:\n%s", when, ks, kd, out)
		}
	}
	check("after writing")
	must(t, os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0))
	check("after dropping the kernel's caches")
}

// fallocate(2) modes do to a striped file what they do to a file on the
// host's own filesystem: the same size and bytes after each step, through
// stripe boundaries, and allocation shows in st_blocks; what makes no
// sense on striped objects is EOPNOTSUPP.
func TestFallocateLikeLocal(t *testing.T) {
	c, mnt := mount(t)
	p := filepath.Join(mnt, "f")
	sfRun(t, c, "setstripe", "-c", "4", "-S", "1M", p)
	ours, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	defer ours.Close()
	local, err := os.CreateTemp("", "fallocate")
	must(t, err)
	defer os.Remove(local.Name())
	defer local.Close()
	data := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16)
	for _, f := range []*os.File{ours, local} {
		_, err := f.WriteAt(data, 0)
		must(t, err)
	}
	const M = 1 << 20
	steps := []struct {
		name      string
		mode      uint32
		off, size int64
		grows     bool // allocates where nothing was: st_blocks must grow
	}{
		{"allocate past the end", 0, 3*M + 100, 2 * M, true},
		{"allocate inside, keep size", unix.FALLOC_FL_KEEP_SIZE, M / 2, 3 * M, false},
		{"allocate past the end, keep size", unix.FALLOC_FL_KEEP_SIZE, 6 * M, M, true},
		{"punch across a stripe boundary", unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, M - 5000, 70000, false},
		{"punch whole units", unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, M, 2 * M, false},
		{"zero a range", unix.FALLOC_FL_ZERO_RANGE, 100, 4096 * 3, false},
		{"zero past the end", unix.FALLOC_FL_ZERO_RANGE, 5*M + 7, M, true},
		{"zero past the end, keep size", unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE, 9 * M, M, true},
	}
	for _, s := range steps {
		var before syscall.Stat_t
		must(t, syscall.Fstat(int(ours.Fd()), &before))
		for _, f := range []*os.File{ours, local} {
			if err := unix.Fallocate(int(f.Fd()), s.mode, s.off, s.size); err != nil {
				t.Fatalf("%s on %s: %v", s.name, f.Name(), err)
			}
		}
		var a, b syscall.Stat_t
		must(t, syscall.Fstat(int(ours.Fd()), &a))
		must(t, syscall.Fstat(int(local.Fd()), &b))
		if a.Size != b.Size {
			t.Fatalf("%s: size %d, the local file's %d", s.name, a.Size, b.Size)
		}
		got, want := make([]byte, a.Size), make([]byte, b.Size)
		_, err1 := ours.ReadAt(got, 0)
		_, err2 := local.ReadAt(want, 0)
		if (err1 != nil && err1 != io.EOF) || (err2 != nil && err2 != io.EOF) || !bytes.Equal(got, want) {
			t.Fatalf("%s: contents differ from the local file's (%v, %v)", s.name, err1, err2)
		}
		if s.grows && a.Blocks <= before.Blocks {
			t.Errorf("%s: st_blocks %d → %d: nothing allocated", s.name, before.Blocks, a.Blocks)
		}
		if s.mode&unix.FALLOC_FL_PUNCH_HOLE != 0 && a.Blocks >= before.Blocks {
			t.Errorf("%s: st_blocks %d → %d: nothing freed", s.name, before.Blocks, a.Blocks)
		}
	}
	// Another mount reads what this one made.
	_, other := c.MountAt("other")
	if got := readFile(t, filepath.Join(other, "f")); !bytes.Equal(got, readFile(t, local.Name())) {
		t.Error("a second mount reads other bytes")
	}
	for name, mode := range map[string]uint32{"collapse": unix.FALLOC_FL_COLLAPSE_RANGE, "insert": unix.FALLOC_FL_INSERT_RANGE,
		"punch without keep-size": unix.FALLOC_FL_PUNCH_HOLE} {
		wantErrno(t, name, unix.Fallocate(int(ours.Fd()), mode, 0, M), syscall.EOPNOTSUPP)
	}
	// Erasure-coded: allocation is fine (parity of zeros is zeros),
	// punching and zeroing would need the rows' parity rewritten.
	dir := filepath.Join(mnt, "ec")
	must(t, os.Mkdir(dir, 0o755))
	sfRun(t, c, "setstripe", "--ec", "2+1", "-S", "1M", dir)
	ec, err := os.Create(filepath.Join(dir, "e"))
	must(t, err)
	defer ec.Close()
	_, err = ec.Write(data[:M])
	must(t, err)
	must(t, unix.Fallocate(int(ec.Fd()), 0, 0, 4*M))
	if st, _ := ec.Stat(); st.Size() != 4*M {
		t.Errorf("EC file after fallocate to 4 MiB: size %d", st.Size())
	}
	if got := readFile(t, ec.Name()); !bytes.Equal(got[:M], data[:M]) || !bytes.Equal(got[M:], make([]byte, 3*M)) {
		t.Error("EC file after fallocate: wrong bytes")
	}
	wantErrno(t, "punch on an EC file", unix.Fallocate(int(ec.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, M), syscall.EOPNOTSUPP)
}

func TestErrnos(t *testing.T) {
	_, mnt := mount(t)
	p := func(s string) string { return filepath.Join(mnt, s) }
	must(t, os.Mkdir(p("dir"), 0o755))
	writeFile(t, p("dir/f"), []byte("x"))
	writeFile(t, p("file"), []byte("x"))
	long := strings.Repeat("n", 256)
	tests := []struct {
		name string
		op   func() error
		want syscall.Errno
	}{
		{"stat missing", func() error { _, err := os.Stat(p("nope")); return err }, syscall.ENOENT},
		{"open missing", func() error { _, err := os.Open(p("nope/x")); return err }, syscall.ENOENT},
		{"mkdir existing", func() error { return os.Mkdir(p("dir"), 0o755) }, syscall.EEXIST},
		{"create O_EXCL existing", func() error {
			_, err := os.OpenFile(p("file"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			return err
		}, syscall.EEXIST},
		{"link onto existing", func() error { return os.Link(p("file"), p("dir/f")) }, syscall.EEXIST},
		{"symlink onto existing", func() error { return os.Symlink("x", p("file")) }, syscall.EEXIST},
		{"rmdir non-empty", func() error { return syscall.Rmdir(p("dir")) }, syscall.ENOTEMPTY},
		{"rmdir a file", func() error { return syscall.Rmdir(p("file")) }, syscall.ENOTDIR},
		{"path through a file", func() error { _, err := os.Stat(p("file/x")); return err }, syscall.ENOTDIR},
		{"unlink a directory", func() error { return syscall.Unlink(p("dir")) }, syscall.EISDIR},
		{"open dir for writing", func() error { _, err := os.OpenFile(p("dir"), os.O_WRONLY, 0); return err }, syscall.EISDIR},
		{"create long name", func() error { return os.WriteFile(p(long), nil, 0o644) }, syscall.ENAMETOOLONG},
		{"mkdir long name", func() error { return os.Mkdir(p(long), 0o755) }, syscall.ENAMETOOLONG},
		{"readlink of a file", func() error { _, err := os.Readlink(p("file")); return err }, syscall.EINVAL},
		{"getxattr missing", func() error { _, err := unix.Getxattr(p("file"), "user.none", make([]byte, 8)); return err }, syscall.ENODATA},
		{"bad layout", func() error { return unix.Setxattr(p("dir"), "lustre.lov", []byte("stripe_size=1000"), 0) }, syscall.EINVAL},
		{"layout count over OSTs", func() error { return unix.Setxattr(p("dir"), "lustre.lov", []byte("stripe_count=5"), 0) }, syscall.EINVAL},
		{"setstripe on file with data", func() error { return unix.Setxattr(p("file"), "lustre.lov", []byte("stripe_count=2"), 0) }, syscall.EINVAL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantErrno(t, tc.name, tc.op(), tc.want) })
	}
}

// TestPermissions runs file operations as unprivileged users in child
// processes and checks mode bits, ownership, supplementary groups and the
// sticky bit are enforced: by the kernel and the MDTs together (the
// default), and by the MDTs alone (no_default_permissions: every answer
// below then comes from an MDT).
func TestPermissions(t *testing.T) {
	for _, opts := range [][]string{nil, {"no_default_permissions"}} {
		t.Run(strings.Join(append([]string{"mount"}, opts...), "-"), func(t *testing.T) { testPermissions(t, opts...) })
	}
}

func testPermissions(t *testing.T, opts ...string) {
	_, mnt := mount(t, opts...)
	p := func(s string) string { return filepath.Join(mnt, s) }
	must(t, os.Chmod(mnt, 0o755))
	must(t, os.Mkdir(p("private"), 0o700))
	writeFile(t, p("private/inside"), []byte("x"))
	must(t, os.Chmod(p("private/inside"), 0o644))
	writeFile(t, p("secret"), []byte("x"))
	must(t, os.Chmod(p("secret"), 0o600))
	must(t, os.Mkdir(p("group"), 0o770))
	must(t, os.Chown(p("group"), 0, 4242))
	must(t, os.Chmod(p("group"), 0o770))
	must(t, os.Mkdir(p("tmp"), 0o1777))
	must(t, syscall.Chmod(p("tmp"), 0o1777)) // os.Chmod would drop the raw sticky bit
	must(t, os.Mkdir(p("open"), 0o777))
	must(t, os.Chmod(p("open"), 0o777))
	writeFile(t, p("shared"), []byte("x"))
	must(t, os.Chmod(p("shared"), 0o666))

	const alice, bob = 60001, 60002
	cases := []struct {
		name   string
		uid    uint32
		groups []uint32
		op     string
		want   syscall.Errno
	}{
		{"create in root's 0755 dir", alice, nil, "create " + p("x"), syscall.EACCES},
		{"read 0600 root file", alice, nil, "read " + p("secret"), syscall.EACCES},
		{"open 0600 root file for write", alice, nil, "write " + p("secret"), syscall.EACCES},
		{"list 0700 dir", alice, nil, "readdir " + p("private"), syscall.EACCES},
		{"walk through a 0700 dir", alice, nil, "stat " + p("private/inside"), syscall.EACCES},
		{"chmod another's file", alice, nil, "chmod " + p("secret"), syscall.EPERM},
		{"chown as a user", alice, nil, "chown " + p("open"), syscall.EPERM},
		{"truncate a file without write", alice, nil, "truncate " + p("secret"), syscall.EACCES},
		{"truncate a 0666 file", alice, nil, "truncate " + p("shared"), 0},
		{"utimes to a time on another's 0666 file", alice, nil, "utimes " + p("shared"), syscall.EPERM},
		{"trusted xattr as a user", alice, nil, "setxattr " + p("shared") + " trusted.x", syscall.EPERM},
		{"user xattr on a 0666 file", alice, nil, "setxattr " + p("shared") + " user.x", 0},
		{"access(W) to a 0600 root file", alice, nil, "access-w " + p("secret"), syscall.EACCES},
		{"group dir without the group", alice, nil, "create " + p("group/a"), syscall.EACCES},
		{"group dir through a supplementary group", alice, []uint32{4242}, "create " + p("group/a"), 0},
		{"create in sticky dir", alice, nil, "create " + p("tmp/alice"), 0},
		{"create in world-writable dir", alice, nil, "create " + p("open/alice"), 0},
		{"unlink another's file in a sticky dir", bob, nil, "unlink " + p("tmp/alice"), syscall.EPERM},
		{"rename another's file out of a sticky dir", bob, nil, "rename " + p("tmp/alice") + " " + p("open/stolen"), syscall.EPERM},
		{"unlink another's file in a plain 0777 dir", bob, nil, "unlink " + p("open/alice"), 0},
		{"unlink own file in a sticky dir", alice, nil, "unlink " + p("tmp/alice"), 0},
	}
	for _, tc := range cases {
		if got := asUser(t, tc.uid, tc.uid, tc.groups, tc.op); got != tc.want {
			t.Errorf("%s (%s as %d): got %v, want %v", tc.name, tc.op, tc.uid, got, tc.want)
		}
	}
	var st syscall.Stat_t
	must(t, syscall.Stat(p("group/a"), &st))
	if st.Uid != alice {
		t.Errorf("file created by uid %d is owned by %d", alice, st.Uid)
	}
}

// TestReadOnlyMount checks -o ro refuses changes with EROFS.
func TestReadOnlyMount(t *testing.T) {
	c, mnt := mount(t)
	writeFile(t, filepath.Join(mnt, "f"), []byte("data"))
	c.Unmount()
	mnt = c.MountFS("ro")
	if got := readFile(t, filepath.Join(mnt, "f")); string(got) != "data" {
		t.Fatalf("ro mount reads %q", got)
	}
	wantErrno(t, "write on ro mount", os.WriteFile(filepath.Join(mnt, "g"), nil, 0o644), syscall.EROFS)
	wantErrno(t, "mkdir on ro mount", os.Mkdir(filepath.Join(mnt, "d"), 0o755), syscall.EROFS)
}
