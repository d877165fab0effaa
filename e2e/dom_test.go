package e2e

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/internal/testcluster"
)

// Data-on-MDT: a directory whose default layout starts with a component
// on the MDT keeps its small files' bytes there.

// domLayout is the directory default the tests give: 64 KiB on the MDT,
// one OST object to 1 MiB, every OST after that.
var domLayout = []string{"-E", "64K", "-L", "mdt", "-E", "1M", "-c", "1", "-E", "-1", "-c", "-1"}

// objectFiles counts the object files under the O directories below
// root (an OST's data, or an MDT's dom store).
func objectFiles(t *testing.T, root string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.Contains(p, string(filepath.Separator)+"O"+string(filepath.Separator)) {
			n++
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return n
}

// ostObjects counts the object files on every OST of c.
func ostObjects(t *testing.T, c *testcluster.Cluster) int {
	n := 0
	for i := range c.OSTs {
		n += objectFiles(t, filepath.Join(c.Dir, "ost"+string(rune('0'+i))))
	}
	return n
}

// TestDoM follows files of a Data-on-MDT directory through two mounts,
// each a client process of its own: a 3901-byte file is written to its
// MDT alone (no OST object anywhere, the bytes in the MDT's store), the
// other mount stats it with st_blocks charged and reads it exact (kept
// inline in the store's index, no file), grows
// it past the MDT part into an OST component, truncates it back, changes
// it through mmap; it all survives an MDT restart (and a kill -9), fsck is
// clean, the blocks count in quota, and an unlink takes the MDT's object
// away.
func TestDoM(t *testing.T) {
	c, mnts := coherent(t, 2)
	a, b := mnts[0], mnts[1]
	must(t, os.Mkdir(filepath.Join(a, "dom"), 0o755))
	sfRun(t, c, append(append([]string{"setstripe"}, domLayout...), filepath.Join(a, "dom"))...)
	if comps := pflComps(t, c, filepath.Join(a, "dom")); len(comps) != 3 || comps[0].Pattern != "mdt" || comps[1].Pattern != "raid0" {
		t.Fatalf("directory default: %+v", comps)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	model := make([]byte, 3901)
	randBytes(rng, model)
	pa, pb := filepath.Join(a, "dom", "f"), filepath.Join(b, "dom", "f")
	domStore := filepath.Join(c.Dir, "mdt0", "dom") // the dom directory is MDT0's: the root's MDT creates there
	// The store keeps objects up to 64 KiB as values of its index
	// (ost/inline.go), larger ones as files.
	inline := func() int { return int(snapshot(t, a).Counter("mdt0", "dom_inline_objects_now")) }
	domObjects := func() int { return objectFiles(t, domStore) + inline() }
	files, inlined := objectFiles(t, domStore), inline()
	writeFile(t, pa, model)
	if n := ostObjects(t, c); n != 0 {
		t.Fatalf("a 3901-byte file of a DoM directory made %d OST objects", n)
	}
	if n, m := objectFiles(t, domStore), inline(); n != files || m != inlined+1 {
		t.Fatalf("the MDT's store holds %d object files and %d inline objects after the write, %d and %d before", n, m, files, inlined)
	}
	comps := pflComps(t, c, pb)
	if comps[0].Flags != "init" || comps[0].Pattern != "mdt" || comps[1].Flags == "init" {
		t.Fatalf("getstripe of a small DoM file: %+v", comps)
	}
	var st unix.Stat_t
	must(t, unix.Stat(pb, &st))
	if st.Size != int64(len(model)) || st.Blocks < 8 {
		t.Fatalf("stat from the other mount: size %d, %d blocks", st.Size, st.Blocks)
	}
	check := func(what, p string) {
		t.Helper()
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, model) {
			t.Fatalf("%s: %d bytes (%v), want %d; first difference at %d", what, len(got), err, len(model), firstDiff(got, model))
		}
	}
	check("b reads a's file", pb)

	pwrite := func(p string, off, n int) {
		t.Helper()
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		must(t, err)
		defer f.Close()
		buf := make([]byte, n)
		randBytes(rng, buf)
		_, err = f.WriteAt(buf, int64(off))
		must(t, err)
		if off+n > len(model) {
			model = append(model, make([]byte, off+n-len(model))...)
		}
		copy(model[off:], buf)
	}
	pwrite(pb, 60000, 20000) // across the MDT's end into the first OST component
	if n := ostObjects(t, c); n != 1 {
		t.Errorf("after growing past 64 KiB: %d OST objects, want 1", n)
	}
	check("a after b grew it past the MDT part", pa)
	pwrite(pa, 100, 5000) // inside the MDT part, a's cache of it must not be stale for b
	check("b after a rewrote the MDT part", pb)

	must(t, os.Truncate(pa, 30000)) // back into the MDT part
	model = model[:30000]
	check("b after a truncated into the MDT part", pb)
	must(t, unix.Stat(pb, &st))
	if st.Size != 30000 {
		t.Errorf("size after truncate: %d", st.Size)
	}

	// A store through a mapping on b, read by a.
	f, err := os.OpenFile(pb, os.O_RDWR, 0)
	must(t, err)
	m, err := unix.Mmap(int(f.Fd()), 0, 30000, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	must(t, err)
	copy(m[7000:], "written through a mapping")
	copy(model[7000:], "written through a mapping")
	must(t, unix.Msync(m, unix.MS_SYNC))
	must(t, unix.Munmap(m))
	must(t, f.Close())
	check("a after b's mmap store", pa)

	// Many small files: still no OST object for any.
	for i := range 20 {
		writeFile(t, filepath.Join(a, "dom", "small"+string(rune('a'+i))), model[:1000+i])
	}
	if n := ostObjects(t, c); n != 1 {
		t.Errorf("20 small files made OST objects: %d, want the 1 of f", n)
	}
	// Their blocks count in the owner's block quota, as the MDT's.
	q := readQuota(t, c, a, "-u", "0")
	if domUse := q.usage("mdt0-dom"); domUse < 20*1000 || q.BlockBytes < domUse {
		t.Errorf("quota of uid 0: mdt0-dom uses %d bytes, %d in all (%+v)", domUse, q.BlockBytes, q.Targets)
	}

	for _, p := range c.MDTs {
		c.Stop(p)
		c.Restart(p)
	}
	check("a after the MDTs restarted", pa)
	check("b after the MDTs restarted", pb)
	sfRun(t, c, "fsck", a)

	// An MDT killed with -9 opens its store unclean (the store's index is
	// reconciled with its files) and still has what fsync acknowledged:
	// the data and the size its inode took from the write. (A process
	// kill keeps the page cache; power loss is the crash tests' part.)
	synced := make([]byte, 50000)
	randBytes(rng, synced)
	g, err := os.Create(filepath.Join(a, "dom", "synced"))
	must(t, err)
	_, err = g.Write(synced)
	must(t, err)
	must(t, g.Sync())
	c.Kill9(c.MDTs[0])
	c.Restart(c.MDTs[0])
	must(t, g.Close())
	for _, m := range mnts {
		got, err := os.ReadFile(filepath.Join(m, "dom", "synced"))
		if err != nil || !bytes.Equal(got, synced) {
			t.Fatalf("%s after the MDT was killed: %d bytes (%v), want the %d fsync acknowledged", m, len(got), err, len(synced))
		}
	}

	stored := domObjects()
	must(t, os.Remove(pa))
	deadline := time.Now().Add(10 * time.Second) // the client destroys objects in the background
	for domObjects() != stored-1 {
		if time.Now().After(deadline) {
			t.Fatalf("unlink left the MDT's object: %d objects, %d before", domObjects(), stored)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(pb); !os.IsNotExist(err) {
		t.Errorf("b stats the removed file: %v", err)
	}
}

// TestDoMQuota holds the file data an MDT keeps to block quota: a
// project's Data-on-MDT files (1 MiB each, all on the MDT) stop with
// EDQUOT at its limit, and quota shows their blocks as mdt0-dom's.
func TestDoMQuota(t *testing.T) {
	c, mnt := mount(t)
	proj := filepath.Join(mnt, "proj")
	must(t, os.Mkdir(proj, 0o755))
	sfRun(t, c, "setstripe", "-E", "1M", "-L", "mdt", proj)
	sfRun(t, c, "project", "-p", "43", proj)
	sfRun(t, c, "setquota", "-p", "43", "-b", "0:2M", mnt)
	must(t, writeSyncClose(filepath.Join(proj, "f"), 1<<20))
	err := writeSyncClose(filepath.Join(proj, "g"), 1<<20)
	if err == nil {
		err = writeSyncClose(filepath.Join(proj, "h"), 1<<20)
	}
	wantErrno(t, "a project's third MiB on the MDT under a 2 MiB limit", err, syscall.EDQUOT)
	if n := ostObjects(t, c); n != 0 {
		t.Errorf("files of a DoM-only layout made %d OST objects", n)
	}
	q := readQuota(t, c, mnt, "-p", "43")
	if dom := q.usage("mdt0-dom"); dom < 1<<20 || dom > 2<<20+fsBlock || q.BlockBytes != dom {
		t.Errorf("project 43: mdt0-dom uses %d bytes, %d in all, under a 2 MiB limit (%+v)", dom, q.BlockBytes, q.Targets)
	}
	// A write past the MDT's part of a layout that has nothing after it.
	f, err := os.OpenFile(filepath.Join(proj, "f"), os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("x"), 1<<20)
	f.Close()
	wantErrno(t, "a write past a DoM-only layout's end", err, syscall.EFBIG)
}
