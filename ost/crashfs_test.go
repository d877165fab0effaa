package ost

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// crashFS is an ObjectFS over real files, so that FIEMAP, SEEK_DATA,
// O_DIRECT and fstat keep working on what the OST opens, which also
// remembers what a power cut could take back, and takes it back at
// Crash. It plays the disk of an OST on ext4 (or XFS) with its journal:
//
//   - A file's data, size and xattrs are durable once it is synced
//     (Datasync: fdatasync covers the size and the blocks as well as the
//     bytes).
//   - A file's creation is durable once the file is synced, and so are
//     the directories made for it and the removal of whatever had its
//     name before: the journal commits a new file's directory entry in
//     the transaction that creates it, which is committed no later than
//     the size change an fdatasync forces out. POSIX alone would want
//     the directory fsynced; the OST never does, and relies on this.
//   - A removal is never made durable by the OST (it fsyncs no
//     directory): after a crash a destroyed object may come back with
//     what it last had on the disk. The client destroys objects in the
//     background and leaves the ones a crash spares to fsck as orphans
//     (fs/namespace.go destroyObjects), so this is by design; the OST's
//     accounting must count such an object again, and does (reconcile).
//
// Crash(rng, keep) puts every file and directory back to that durable
// state, keeping a random part of what was not durable, as a real disk
// may: per name, the creations and removals since the last durable one
// are kept as a prefix, each step with probability keep; per file, its
// unsynced changes likewise as a prefix (metadata is journaled, in
// order), and past that prefix each page a write overwrote in blocks the
// file already had is kept with probability keep on its own (in-place
// data needs no journal). keep 0 is a disk that wrote nothing unsynced,
// keep 1 one that wrote everything.
//
// A file the FS has not seen is taken as durable as the disk has it (the
// state after a crash, or before the FS was made), but for blocks
// allocated past its end, which SEEK_DATA does not show. Crash is for a
// stopped OST: descriptors opened before it must be closed.
type crashFS struct {
	mu    sync.Mutex
	paths map[string]*crashPath
	// dirs made since the last crash and not made durable since.
	dirs map[string]bool
}

func newCrashFS() *crashFS {
	return &crashFS{paths: map[string]*crashPath{}, dirs: map[string]bool{}}
}

// crashPage is the granularity of the images: the block size of the
// filesystems the tests run on.
const crashPage = 4096

// crashImage is a file's bytes as a disk holds them: its size, the pages
// it has blocks for (an absent page is a hole) and its xattrs.
type crashImage struct {
	size   int64
	pages  map[int64][]byte
	xattrs map[string][]byte
}

func newCrashImage() *crashImage {
	return &crashImage{pages: map[int64][]byte{}, xattrs: map[string][]byte{}}
}

func (im *crashImage) clone() *crashImage {
	c := &crashImage{size: im.size, pages: make(map[int64][]byte, len(im.pages)), xattrs: make(map[string][]byte, len(im.xattrs))}
	for k, v := range im.pages {
		c.pages[k] = slices.Clone(v)
	}
	for k, v := range im.xattrs {
		c.xattrs[k] = slices.Clone(v)
	}
	return c
}

func (im *crashImage) write(b []byte, off int64) {
	for len(b) > 0 {
		pg, in := off/crashPage, off%crashPage
		p := im.pages[pg]
		if p == nil {
			p = make([]byte, crashPage)
			im.pages[pg] = p
		}
		n := copy(p[in:], b)
		b, off = b[n:], off+int64(n)
	}
	im.size = max(im.size, off)
}

// overwrite writes what b holds for page pg at off in place: only into a
// block the file has, and not past its size.
func (im *crashImage) overwrite(b []byte, off, pg int64) {
	p := im.pages[pg]
	if p == nil {
		return
	}
	lo, hi := max(off, pg*crashPage), min(off+int64(len(b)), (pg+1)*crashPage, im.size)
	if lo < hi {
		copy(p[lo-pg*crashPage:hi-pg*crashPage], b[lo-off:hi-off])
	}
}

// fallocate allocates [off, off+n) (a hole reads as zeros), zeroes it
// (FALLOC_FL_ZERO_RANGE: allocated, zeros) or punches it (whole pages
// freed, the parts of others zeroed); the size grows to its end unless
// FALLOC_FL_KEEP_SIZE, and never with a punch.
func (im *crashImage) fallocate(mode uint32, off, n int64) {
	end := off + n
	for pg := off / crashPage; pg*crashPage < end; pg++ {
		lo, hi := max(off, pg*crashPage)-pg*crashPage, min(end, (pg+1)*crashPage)-pg*crashPage
		p := im.pages[pg]
		switch {
		case mode&unix.FALLOC_FL_PUNCH_HOLE != 0:
			if lo == 0 && hi == crashPage {
				delete(im.pages, pg)
			} else if p != nil {
				clear(p[lo:hi])
			}
		case p == nil:
			im.pages[pg] = make([]byte, crashPage)
		case mode&unix.FALLOC_FL_ZERO_RANGE != 0:
			clear(p[lo:hi])
		}
	}
	if mode&(unix.FALLOC_FL_KEEP_SIZE|unix.FALLOC_FL_PUNCH_HOLE) == 0 {
		im.size = max(im.size, end)
	}
}

// truncate frees the blocks past size and zeroes the tail of the last
// page, as a filesystem does.
func (im *crashImage) truncate(size int64) {
	for pg, p := range im.pages {
		switch {
		case pg*crashPage >= size:
			delete(im.pages, pg)
		case (pg+1)*crashPage > size:
			clear(p[size-pg*crashPage:])
		}
	}
	im.size = size
}

// crashOp is one change to a file not yet made durable.
type crashOp struct {
	kind byte // 'w' write, 't' truncate, 'f' fallocate, 'x' xattr
	off  int64
	n    int64  // fallocate: the length
	mode uint32 // fallocate: the mode
	data []byte
	name string
}

func (im *crashImage) apply(op crashOp) {
	switch op.kind {
	case 'w':
		im.write(op.data, op.off)
	case 't':
		im.truncate(op.off)
	case 'f':
		im.fallocate(op.mode, op.off, op.n)
	case 'x':
		im.xattrs[op.name] = op.data
	}
}

// crashInode is one file (an incarnation of a name).
type crashInode struct {
	synced  *crashImage
	pending []crashOp
}

// afterCrash is what the disk could hold of the file after a crash.
func (in *crashInode) afterCrash(rng *rand.Rand, keep float64) *crashImage {
	im := in.synced.clone()
	prefix := true
	for _, op := range in.pending {
		if prefix && rng.Float64() < keep {
			im.apply(op)
			continue
		}
		prefix = false
		if op.kind != 'w' {
			continue
		}
		end := op.off + int64(len(op.data))
		for pg := op.off / crashPage; pg*crashPage < end; pg++ {
			if rng.Float64() < keep {
				im.overwrite(op.data, op.off, pg)
			}
		}
	}
	return im
}

// crashPath is what one name has been bound to.
type crashPath struct {
	durable *crashInode // what a crash that keeps nothing leaves (nil: no file)
	current *crashInode // what it is now (nil: no file)
	// pending are the creations (the new file) and removals (nil) since
	// durable, in order.
	pending []*crashInode
}

// path returns name's record, reading the file off the disk on first use.
// fs.mu is held.
func (fs *crashFS) path(name string) (*crashPath, error) {
	if p := fs.paths[name]; p != nil {
		return p, nil
	}
	p := &crashPath{}
	im, err := readCrashImage(name)
	if err != nil {
		return nil, err
	}
	if im != nil {
		in := &crashInode{synced: im}
		p.durable, p.current = in, in
	}
	fs.paths[name] = p
	return p, nil
}

func (fs *crashFS) OpenFile(name string, flag int, perm os.FileMode) (ObjectFile, error) {
	if flag&os.O_TRUNC != 0 {
		return nil, fmt.Errorf("crashfs: open %s: O_TRUNC is not modelled: %w", name, syscall.EINVAL)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	p, err := fs.path(name)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if p.current == nil { // O_CREATE made it
		in := &crashInode{synced: newCrashImage()}
		p.current = in
		p.pending = append(p.pending, in)
	}
	return &crashFile{fs: fs, f: f, name: name, p: p, in: p.current}, nil
}

func (fs *crashFS) MkdirAll(dir string, perm os.FileMode) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var made []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, d := range made {
		fs.dirs[d] = true
	}
	return nil
}

func (fs *crashFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	p, err := fs.path(name)
	if err != nil {
		return err
	}
	if err := os.Remove(name); err != nil {
		return err
	}
	p.current = nil
	p.pending = append(p.pending, nil)
	return nil
}

func (fs *crashFS) ReadDir(dir string) ([]os.DirEntry, error)  { return os.ReadDir(dir) }
func (fs *crashFS) Stat(name string, st *unix.Stat_t) error    { return unix.Stat(name, st) }
func (fs *crashFS) Statfs(dir string, st *unix.Statfs_t) error { return unix.Statfs(dir, st) }

// crashFile is an open file of a crashFS.
type crashFile struct {
	fs   *crashFS
	f    *os.File
	name string
	p    *crashPath
	in   *crashInode
}

func (cf *crashFile) ReadAt(b []byte, off int64) (int, error) { return cf.f.ReadAt(b, off) }
func (cf *crashFile) Fd() uintptr                             { return cf.f.Fd() }
func (cf *crashFile) Close() error                            { return cf.f.Close() }

// The changes are recorded under fs.mu with the change itself made, so
// that the record's order is the file's.

func (cf *crashFile) WriteAt(b []byte, off int64) (int, error) {
	cf.fs.mu.Lock()
	defer cf.fs.mu.Unlock()
	n, err := cf.f.WriteAt(b, off)
	if n > 0 {
		cf.in.pending = append(cf.in.pending, crashOp{kind: 'w', off: off, data: slices.Clone(b[:n])})
	}
	return n, err
}

func (cf *crashFile) Truncate(size int64) error {
	cf.fs.mu.Lock()
	defer cf.fs.mu.Unlock()
	if err := cf.f.Truncate(size); err != nil {
		return err
	}
	cf.in.pending = append(cf.in.pending, crashOp{kind: 't', off: size})
	return nil
}

func (cf *crashFile) Fallocate(mode uint32, off, size int64) error {
	cf.fs.mu.Lock()
	defer cf.fs.mu.Unlock()
	if err := unix.Fallocate(int(cf.f.Fd()), mode, off, size); err != nil {
		return err
	}
	cf.in.pending = append(cf.in.pending, crashOp{kind: 'f', off: off, n: size, mode: mode})
	return nil
}

func (cf *crashFile) SetXattr(name string, value []byte) error {
	cf.fs.mu.Lock()
	defer cf.fs.mu.Unlock()
	if err := unix.Fsetxattr(int(cf.f.Fd()), name, value, 0); err != nil {
		return err
	}
	cf.in.pending = append(cf.in.pending, crashOp{kind: 'x', name: name, data: slices.Clone(value)})
	return nil
}

func (cf *crashFile) Datasync() error {
	cf.fs.mu.Lock()
	defer cf.fs.mu.Unlock()
	if err := unix.Fdatasync(int(cf.f.Fd())); err != nil {
		return err
	}
	in := cf.in
	for _, op := range in.pending {
		in.synced.apply(op)
	}
	in.pending = nil
	if cf.p.current == in {
		// Its creation, and everything the name went through before it.
		cf.p.durable, cf.p.pending = in, nil
		for d := filepath.Dir(cf.name); d != filepath.Dir(d); d = filepath.Dir(d) {
			delete(cf.fs.dirs, d)
		}
	}
	return nil
}

// Crash cuts the power: every name, file and directory goes back to its
// durable state, with a random part of the rest kept (see crashFS). The
// disk is then as the crash left it, and all of it durable.
func (fs *crashFS) Crash(rng *rand.Rand, keep float64) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	names := make([]string, 0, len(fs.paths))
	for name := range fs.paths {
		names = append(names, name)
	}
	slices.Sort(names) // the same seed, the same crash
	for _, name := range names {
		p := fs.paths[name]
		in := p.durable
		for _, next := range p.pending {
			if rng.Float64() >= keep {
				break
			}
			in = next
		}
		if in == nil {
			if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("crashfs: %w", err)
			}
			continue
		}
		if in == p.current && len(in.pending) == 0 {
			continue // the disk has it already, synced
		}
		if err := writeCrashImage(name, in.afterCrash(rng, keep)); err != nil {
			return err
		}
	}
	dirs := make([]string, 0, len(fs.dirs))
	for d := range fs.dirs {
		dirs = append(dirs, d)
	}
	// Deepest first, so that a directory emptied by the crash can go too.
	slices.SortFunc(dirs, func(a, b string) int {
		if c := strings.Count(b, "/") - strings.Count(a, "/"); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, d := range dirs {
		if rng.Float64() >= keep {
			_ = os.Remove(d) // not if a file in it survived: its creation implies the directory's
		}
	}
	fs.paths, fs.dirs = map[string]*crashPath{}, map[string]bool{}
	return nil
}

// writeCrashImage makes name a new file holding im, synced: after a power
// cut nothing is left in the page cache, and the blocks a test stats
// must not change under it when write-back comes.
func writeCrashImage(name string, im *crashImage) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("crashfs: %w", err)
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("crashfs: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(im.size); err != nil {
		return fmt.Errorf("crashfs: %w", err)
	}
	for pg, p := range im.pages {
		if n := min(int64(len(p)), im.size-pg*crashPage); n > 0 {
			if _, err := f.WriteAt(p[:n], pg*crashPage); err != nil {
				return fmt.Errorf("crashfs: %w", err)
			}
		} else if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, pg*crashPage, crashPage); err != nil {
			return fmt.Errorf("crashfs: %s: a block past the end: %w", name, err)
		}
	}
	for k, v := range im.xattrs {
		if err := unix.Fsetxattr(int(f.Fd()), k, v, 0); err != nil {
			return fmt.Errorf("crashfs: %s: xattr %s: %w", name, k, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("crashfs: %w", err)
	}
	return f.Close()
}

// readCrashImage reads a file off the disk: nil if there is none.
func readCrashImage(name string) (*crashImage, error) {
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("crashfs: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("crashfs: %w", err)
	}
	im := newCrashImage()
	im.size = fi.Size()
	fd := int(f.Fd())
	for pos := int64(0); pos < im.size; {
		d, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("crashfs: %s: seek_data: %w", name, err)
		}
		h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("crashfs: %s: seek_hole: %w", name, err)
		}
		for pg := d / crashPage; pg*crashPage < h; pg++ {
			p := make([]byte, crashPage)
			if _, err := f.ReadAt(p, pg*crashPage); err != nil && err != io.EOF {
				return nil, fmt.Errorf("crashfs: %w", err)
			}
			im.pages[pg] = p
		}
		pos = max(h, pos+1)
	}
	sz, err := unix.Flistxattr(fd, nil)
	if err != nil || sz == 0 {
		return im, nil // none, or a filesystem without xattrs
	}
	list := make([]byte, sz)
	if sz, err = unix.Flistxattr(fd, list); err != nil {
		return nil, fmt.Errorf("crashfs: %s: listxattr: %w", name, err)
	}
	for _, k := range strings.Split(strings.TrimRight(string(list[:sz]), "\x00"), "\x00") {
		n, err := unix.Fgetxattr(fd, k, nil)
		if err != nil {
			return nil, fmt.Errorf("crashfs: %s: xattr %s: %w", name, k, err)
		}
		v := make([]byte, n)
		n, err = unix.Fgetxattr(fd, k, v)
		if err != nil {
			return nil, fmt.Errorf("crashfs: %s: xattr %s: %w", name, k, err)
		}
		im.xattrs[k] = v[:n]
	}
	return im, nil
}

// TestCrashFS pins down what a crash keeps: synced bytes, sizes, xattrs
// and creations; not unsynced writes, truncates, creations or removals
// (unless told to keep them); a new file at a removed one's name, once
// synced, has nothing of the old one.
func TestCrashFS(t *testing.T) {
	dir := t.TempDir()
	fs := newCrashFS()
	name := func(s string) string { return filepath.Join(dir, s) }
	open := func(n string) ObjectFile {
		t.Helper()
		f, err := fs.OpenFile(n, os.O_RDWR|os.O_CREATE, 0o600)
		must(t, err)
		return f
	}
	write := func(f ObjectFile, b []byte, off int64) {
		t.Helper()
		_, err := f.WriteAt(b, off)
		must(t, err)
	}
	crash := func(keep float64) {
		t.Helper()
		must(t, fs.Crash(rand.New(rand.NewPCG(1, 2)), keep))
	}
	content := func(n string) []byte {
		t.Helper()
		b, err := os.ReadFile(n)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		must(t, err)
		return b
	}
	a, b := pattern(10000, 1), pattern(6000, 2)
	synced := append(slices.Clone(a[:3000]), make([]byte, 5000)...) // a, punched to 3000, then to 8000

	// Synced: written, truncated (the tail zeroed), extended, xattr.
	f := open(name("f"))
	write(f, a, 0)
	must(t, f.Truncate(3000))
	must(t, f.Truncate(8000))
	must(t, f.SetXattr("user.x", []byte("1")))
	must(t, f.Datasync())
	// Not synced: an overwrite, an extension, a truncate, an xattr.
	write(f, b, 1000)
	write(f, b, 20000)
	must(t, f.Truncate(21000))
	must(t, f.SetXattr("user.x", []byte("2")))
	// A file created and written, not synced; one synced and then
	// removed; one removed and made again, the new one synced.
	must(t, fs.MkdirAll(name("new/sub"), 0o755))
	write(open(name("new/sub/g")), a, 0)
	h := open(name("h"))
	write(h, a, 0)
	must(t, h.SetXattr("user.x", []byte("h")))
	must(t, h.Datasync())
	must(t, fs.Remove(name("h")))
	r := open(name("r"))
	write(r, a, 0)
	must(t, r.Datasync())
	must(t, fs.Remove(name("r")))
	r = open(name("r"))
	write(r, b, 8192)
	must(t, r.Datasync())
	// Synced: written, and blocks allocated past the end. Not synced: a
	// hole punched, a range zeroed.
	fa := open(name("fa"))
	write(fa, a, 0)
	must(t, fa.Fallocate(unix.FALLOC_FL_KEEP_SIZE, 0, 64<<10))
	must(t, fa.Datasync())
	must(t, fa.Fallocate(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 4096, 4096))
	must(t, fa.Fallocate(unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, 0, 100))
	for _, x := range []ObjectFile{f, h, r, fa} {
		must(t, x.Close())
	}

	crash(0)
	if got := content(name("f")); !slices.Equal(got, synced) {
		t.Errorf("f after a crash keeping nothing: %d bytes, want its %d synced ones", len(got), len(synced))
	}
	xattr := func(n string) string {
		v := make([]byte, 8)
		k, err := unix.Getxattr(n, "user.x", v)
		if err != nil {
			return err.Error()
		}
		return string(v[:k])
	}
	if x := xattr(name("f")); x != "1" {
		t.Errorf("f's xattr after the crash: %q, want the synced one", x)
	}
	if _, err := os.Stat(name("new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an unsynced file's new directory survived a crash keeping nothing: %v", err)
	}
	if got := content(name("h")); !slices.Equal(got, a) {
		t.Errorf("a file removed but not durably: %d bytes after the crash, want its %d", len(got), len(a))
	}
	if x := xattr(name("h")); x != "h" {
		t.Errorf("h's xattr after the crash: %q", x)
	}
	if got, want := content(name("r")), append(make([]byte, 8192), b...); !slices.Equal(got, want) {
		t.Errorf("r made again and synced: %d bytes after the crash, want %d of which the first 8192 zeros", len(got), len(want))
	}
	if got := content(name("fa")); !slices.Equal(got, a) {
		t.Error("a punch and a zeroed range not synced survived a crash keeping nothing")
	}
	var st unix.Stat_t
	must(t, unix.Stat(name("fa"), &st))
	if st.Blocks*512 < 64<<10 {
		t.Errorf("blocks allocated past the end and synced: %d bytes allocated after the crash, want 64 KiB", st.Blocks*512)
	}

	// A crash right after the last one changes nothing; a crash keeping
	// everything keeps what was not synced too.
	crash(0)
	if got := content(name("f")); !slices.Equal(got, synced) {
		t.Error("a second crash changed f")
	}
	f = open(name("f"))
	write(f, b, 1000)
	must(t, f.Close())
	fa = open(name("fa"))
	must(t, fa.Fallocate(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 4096, 4096))
	must(t, fa.Close())
	crash(1)
	want := slices.Clone(synced)
	copy(want[1000:], b)
	if got := content(name("f")); !slices.Equal(got, want) {
		t.Error("a crash keeping everything lost an unsynced write")
	}
	want = slices.Clone(a)
	clear(want[4096:8192])
	if got := content(name("fa")); !slices.Equal(got, want) {
		t.Error("a crash keeping everything lost an unsynced punch")
	}
}
