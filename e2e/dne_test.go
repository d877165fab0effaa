package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func getxattr(t *testing.T, path, name string) string {
	t.Helper()
	buf := make([]byte, 512)
	n, err := unix.Getxattr(path, name, buf)
	must(t, err)
	return string(buf[:n])
}

// TestRemoteDirectories drives the distributed namespace through the
// mount and the lfs-style tools: a directory on another MDT than its
// parent, files and subdirectories in it, the round-robin default, rmdir
// across MDTs, and remote_sync counted when on.
func TestRemoteDirectories(t *testing.T) {
	c, mnt := mount(t)
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(c.Bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("stripefs %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	p := func(s string) string { return filepath.Join(mnt, s) }

	run("mkdir", "-i", "1", p("remote"))
	if v := getxattr(t, p("remote"), "lustre.lmv"); !strings.Contains(v, "mdt_index=1") {
		t.Fatalf("mkdir -i 1 made a directory with layout %q", v)
	}
	if out := run("getdirstripe", p("remote")); !strings.Contains(out, "mdt_index=1") {
		t.Fatalf("getdirstripe: %s", out)
	}
	// Everything works inside it, and its parent counts it.
	must(t, os.Mkdir(p("remote/sub"), 0o755))
	writeFile(t, p("remote/sub/f"), []byte("on mdt1"))
	if got := readFile(t, p("remote/sub/f")); string(got) != "on mdt1" {
		t.Fatalf("file in a remote directory reads %q", got)
	}
	var st syscall.Stat_t
	must(t, syscall.Stat(mnt, &st))
	if st.Nlink != 3 {
		t.Fatalf("root nlink %d with one remote subdirectory, want 3", st.Nlink)
	}
	if _, err := os.Stat(p("remote/sub/../../remote")); err != nil {
		t.Fatalf(".. across MDTs: %v", err)
	}
	ents, err := os.ReadDir(mnt)
	must(t, err)
	if len(ents) != 1 || ents[0].Name() != "remote" || !ents[0].IsDir() {
		t.Fatalf("root lists %v", ents)
	}
	wantErrno(t, "rmdir of a non-empty remote directory", syscall.Rmdir(p("remote")), syscall.ENOTEMPTY)
	must(t, os.RemoveAll(p("remote")))
	must(t, syscall.Stat(mnt, &st))
	if st.Nlink != 2 {
		t.Fatalf("root nlink %d after removing the remote directory", st.Nlink)
	}

	// A round-robin default spreads plain mkdir over both MDTs.
	must(t, os.Mkdir(p("rr"), 0o755))
	run("setdirstripe", "-D", "-i", "-1", p("rr"))
	seen := map[string]bool{}
	for _, n := range []string{"a", "b", "c", "d"} {
		must(t, os.Mkdir(p("rr/"+n), 0o755))
		v := getxattr(t, p("rr/"+n), "lustre.lmv")
		seen[strings.Fields(v)[0]] = true
	}
	if !seen["mdt_index=0"] || !seen["mdt_index=1"] {
		t.Fatalf("round-robin default placed directories on %v", seen)
	}

	// Renaming a file between directories on different MDTs is a real
	// rename (TestCrossMDTRenameLink has the rest).
	run("mkdir", "-i", "1", p("other"))
	writeFile(t, p("rr/file"), []byte("x"))
	must(t, syscall.Rename(p("rr/file"), p("other/file")))

	// remote_sync: off by default, counted when on.
	before := snapshot(t, mnt).Counter("mdt", "remote_sync_commits")
	run("mkdir", "-i", "1", p("nosync"))
	if n := snapshot(t, mnt).Counter("mdt", "remote_sync_commits"); n != before {
		t.Fatalf("remote_sync off, yet %d synchronous commits", n-before)
	}
	run("set_param", "--mount", mnt, "mdt.remote_sync=1")
	run("mkdir", "-i", "1", p("sync"))
	if n := snapshot(t, mnt).Counter("mdt", "remote_sync_commits"); n-before != 2 {
		t.Fatalf("remote_sync=1: %d synchronous commits for one remote mkdir, want 2 (one per MDT)", n-before)
	}
	out, err := exec.Command(c.Bin, "set_param", "--mount", mnt, "mdt.remote_sync=perhaps").CombinedOutput()
	if err == nil {
		t.Fatalf("a bad value was accepted: %s", out)
	}
}

// TestMDTKilledDuringMkdirStorm kills -9 each MDT process in turn while
// clients create directories (half of them remote, by a round-robin
// default) and restarts it: no mkdir may fail, every acknowledged
// directory must exist, and the link counts must add up.
func TestMDTKilledDuringMkdirStorm(t *testing.T) {
	c, mnt := mount(t)
	const workers, per = 4, 250
	var busy, made atomic.Int64
	dir, errs := storm(t, mnt, "storm", workers, per, func(dir string, w, i int) error {
		busy.Add(1)
		defer busy.Add(-1)
		err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("d%d-%d", w, i)), 0o755)
		if err == nil {
			made.Add(1)
		}
		return err
	})
	done := make(chan struct{})
	var notMid []string
	go func() {
		defer close(done)
		for _, m := range c.MDTs {
			time.Sleep(150 * time.Millisecond)
			// The kill must land in the storm: mkdirs in flight, and
			// more to come after the restart.
			if busy.Load() == 0 || made.Load() >= workers*per-workers {
				notMid = append(notMid, m.Name)
			}
			c.Kill9(m)
			time.Sleep(200 * time.Millisecond)
			c.Restart(m)
		}
	}()
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Fatalf("mkdir during MDT restarts: %v", err)
		}
	}
	<-done
	if len(notMid) > 0 {
		t.Fatalf("the kills of %v did not land in the storm (no mkdir in flight, or the storm nearly over)", notMid)
	}
	ents, err := os.ReadDir(dir)
	must(t, err)
	if len(ents) != workers*per {
		t.Fatalf("%d directories after the storm, want %d", len(ents), workers*per)
	}
	var st syscall.Stat_t
	must(t, syscall.Stat(dir, &st))
	if st.Nlink != 2+workers*per {
		t.Fatalf("nlink %d, want %d", st.Nlink, 2+workers*per)
	}
	s := snapshot(t, mnt)
	t.Logf("resends answered from done-records: %d, distributed ops redone: %d", s.Counter("mdt", "resends_reconstructed"), s.Counter("mdt", "dtx_redone"))
}

// TestFsckOrphanObject plants an object no file owns on a running OST,
// then in an MDT's file data (Data-on-MDT) (what a client that died
// between unlink and destroy leaves) and checks stripefs fsck reports it
// where it is, --repair destroys it, and a rerun is clean.
func TestFsckOrphanObject(t *testing.T) {
	c, mnt := mount(t)
	writeFile(t, filepath.Join(mnt, "keep"), []byte("data"))
	must(t, os.Mkdir(filepath.Join(mnt, "dom"), 0o755))
	sfRun(t, c, append(append([]string{"setstripe"}, domLayout...), filepath.Join(mnt, "dom"))...)
	writeFile(t, filepath.Join(mnt, "dom", "keep"), []byte("small"))
	for _, tc := range []struct{ planted, where string }{
		{filepath.Join(c.Dir, "ost1", "O", "ff", "20000_1ff_0_0"), "on ost1"},
		{filepath.Join(c.Dir, "mdt0", "dom", "O", "fe", "20000_1fe_0_0"), "in mdt0's file data"},
	} {
		must(t, os.MkdirAll(filepath.Dir(tc.planted), 0o755))
		must(t, os.WriteFile(tc.planted, []byte("orphan"), 0o600))
		out, err := exec.Command(c.Bin, "fsck", mnt).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "orphan object") || !strings.Contains(string(out), tc.where) {
			t.Fatalf("fsck did not report the object planted %s: %v\n%s", tc.where, err, out)
		}
		if out, err := exec.Command(c.Bin, "fsck", "--repair", mnt).CombinedOutput(); err != nil {
			t.Fatalf("fsck --repair: %v\n%s", err, out)
		}
		if _, err := os.Stat(tc.planted); !os.IsNotExist(err) {
			t.Fatalf("orphan object %s still there after repair: %v", tc.where, err)
		}
		if out, err := exec.Command(c.Bin, "fsck", mnt).CombinedOutput(); err != nil {
			t.Fatalf("fsck after repair: %v\n%s", err, out)
		}
	}
	if got := readFile(t, filepath.Join(mnt, "keep")); string(got) != "data" {
		t.Fatalf("a good file changed: %q", got)
	}
	if got := readFile(t, filepath.Join(mnt, "dom", "keep")); string(got) != "small" {
		t.Fatalf("a good Data-on-MDT file changed: %q", got)
	}
}

// TestCrossMDTRenameLink moves files and a directory tree between
// directories on MDT0 and MDT1 with mv (a real rename: the inode number
// stays, so mv did not fall back to copying), renames over an existing
// file across MDTs, makes a hard link across MDTs and unlinks both names,
// one of them while the file is open, and checks stripefs fsck after.
func TestCrossMDTRenameLink(t *testing.T) {
	c, mnt := mount(t)
	p := func(s string) string { return filepath.Join(mnt, s) }
	if out, err := exec.Command(c.Bin, "mkdir", "-i", "1", p("b")).CombinedOutput(); err != nil {
		t.Fatalf("mkdir -i 1: %v\n%s", err, out)
	}
	must(t, os.Mkdir(p("a"), 0o755)) // on mdt0, the root's
	if v := getxattr(t, p("a"), "lustre.lmv"); !strings.Contains(v, "mdt_index=0") {
		t.Fatalf("a is not on mdt0: %q", v)
	}
	stat := func(path string) syscall.Stat_t {
		t.Helper()
		var st syscall.Stat_t
		must(t, syscall.Stat(path, &st))
		return st
	}
	mv := func(from, to string) {
		t.Helper()
		if out, err := exec.Command("mv", "-T", from, to).CombinedOutput(); err != nil {
			t.Fatalf("mv %s %s: %v\n%s", from, to, err, out)
		}
	}

	// A file with data, several stripes of it.
	data := bytes.Repeat([]byte("stripefs"), 3<<17)
	writeFile(t, p("a/f"), data)
	ino := stat(p("a/f")).Ino
	mv(p("a/f"), p("b/f"))
	if st := stat(p("b/f")); st.Ino != ino || st.Nlink != 1 || st.Size != int64(len(data)) {
		t.Fatalf("b/f after mv: ino %d (was %d) nlink %d size %d", st.Ino, ino, st.Nlink, st.Size)
	}
	if !bytes.Equal(readFile(t, p("b/f")), data) {
		t.Fatal("b/f reads other data after the move")
	}
	if _, err := os.Lstat(p("a/f")); !os.IsNotExist(err) {
		t.Fatalf("a/f after mv: %v", err)
	}

	// A directory tree: ".." and the link counts follow it.
	must(t, os.MkdirAll(p("a/tree/sub"), 0o755))
	writeFile(t, p("a/tree/sub/g"), []byte("deep"))
	ino = stat(p("a/tree")).Ino
	mv(p("a/tree"), p("b/tree"))
	if st := stat(p("b/tree")); st.Ino != ino || st.Nlink != 3 {
		t.Fatalf("b/tree after mv: ino %d (was %d), nlink %d", st.Ino, ino, st.Nlink)
	}
	if string(readFile(t, p("b/tree/sub/g"))) != "deep" {
		t.Fatal("b/tree/sub/g lost its data")
	}
	if stat(p("b/tree/sub/../..")).Ino != stat(p("b")).Ino {
		t.Fatal("b/tree/sub/../.. is not b")
	}
	if a, b := stat(p("a")).Nlink, stat(p("b")).Nlink; a != 2 || b != 3 {
		t.Fatalf("nlink a=%d b=%d after moving the tree, want 2 and 3", a, b)
	}
	wantErrno(t, "moving b into its own subtree", syscall.Rename(p("b"), p("b/tree/sub/b")), syscall.EINVAL)

	// Over an existing file on the other MDT, and RENAME_NOREPLACE.
	writeFile(t, p("a/x"), []byte("new"))
	writeFile(t, p("b/x"), []byte("old"))
	wantErrno(t, "RENAME_NOREPLACE across MDTs",
		unix.Renameat2(unix.AT_FDCWD, p("a/x"), unix.AT_FDCWD, p("b/x"), unix.RENAME_NOREPLACE), syscall.EEXIST)
	must(t, os.Rename(p("a/x"), p("b/x")))
	if got := string(readFile(t, p("b/x"))); got != "new" {
		t.Fatalf("b/x reads %q after the rename over it", got)
	}

	// A hard link across MDTs: one inode, two names, nlink 2 on both.
	writeFile(t, p("b/h"), []byte("hard"))
	must(t, os.Link(p("b/h"), p("a/h")))
	sa, sb := stat(p("a/h")), stat(p("b/h"))
	if sa.Ino != sb.Ino || sa.Nlink != 2 || sb.Nlink != 2 {
		t.Fatalf("after ln: a/h ino %d nlink %d, b/h ino %d nlink %d", sa.Ino, sa.Nlink, sb.Ino, sb.Nlink)
	}
	ents, err := os.ReadDir(p("a"))
	must(t, err)
	for _, e := range ents {
		if info, err := e.Info(); err != nil || e.Name() == "h" && info.Size() != 4 {
			t.Fatalf("readdir of a: %s: %v %v", e.Name(), info, err)
		}
	}
	must(t, os.Remove(p("b/h")))
	if st := stat(p("a/h")); st.Nlink != 1 {
		t.Fatalf("a/h nlink %d after unlinking b/h", st.Nlink)
	}
	// The last name (a remote entry) goes while the file is open: it
	// stays readable until the close.
	f, err := os.Open(p("a/h"))
	must(t, err)
	must(t, os.Remove(p("a/h")))
	buf := make([]byte, 16)
	n, err := f.ReadAt(buf, 0)
	if string(buf[:n]) != "hard" {
		t.Fatalf("open file after its last name went reads %q: %v", buf[:n], err)
	}
	must(t, f.Close())
	if _, err := os.Lstat(p("a/h")); !os.IsNotExist(err) {
		t.Fatalf("a/h after unlink: %v", err)
	}
	must(t, os.RemoveAll(p("b/tree")))

	// Objects of removed files are destroyed in the background: give the
	// client a moment before fsck looks.
	var out []byte
	for i := 0; i < 50; i++ {
		if out, err = exec.Command(c.Bin, "fsck", mnt).CombinedOutput(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("stripefs fsck: %v\n%s", err, out)
	}
}

// TestFsckRepairDuringStorm runs stripefs fsck --repair again and again
// while clients make directories (half of them remote) with a file in
// each: fsck must remove nothing a client made, and find nothing once
// the storm is over.
func TestFsckRepairDuringStorm(t *testing.T) {
	c, mnt := mount(t)
	const workers, per = 3, 150
	dir, errs := storm(t, mnt, "busy", workers, per, func(dir string, w, i int) error {
		d := filepath.Join(dir, fmt.Sprintf("d%d-%d", w, i))
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(d, "f"), []byte(d), 0o644)
	})
	stormDone := make(chan struct{})
	fsckDone := make(chan error, 1)
	runs := 0
	go func() {
		for {
			select {
			case <-stormDone:
				fsckDone <- nil
				return
			default:
			}
			if out, err := exec.Command(c.Bin, "fsck", "--repair", mnt).CombinedOutput(); err != nil {
				fsckDone <- fmt.Errorf("fsck --repair during the storm: %v\n%s", err, out)
				return
			} else if !strings.Contains(string(out), "0 repairs") {
				fsckDone <- fmt.Errorf("fsck --repair repaired a filesystem that was only busy:\n%s", out)
				return
			}
			runs++
		}
	}()
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Fatalf("storm: %v", err)
		}
	}
	close(stormDone)
	if err := <-fsckDone; err != nil {
		t.Fatal(err)
	}
	for w := 0; w < workers; w++ {
		for i := 0; i < per; i++ {
			p := filepath.Join(dir, fmt.Sprintf("d%d-%d", w, i), "f")
			if b, err := os.ReadFile(p); err != nil || string(b) != filepath.Dir(p) {
				t.Fatalf("%s after the storm and fsck: %q %v", p, b, err)
			}
		}
	}
	if out, err := exec.Command(c.Bin, "fsck", mnt).CombinedOutput(); err != nil {
		t.Fatalf("fsck after the storm: %v\n%s", err, out)
	}
	t.Logf("fsck --repair ran %d times during the storm", runs)
}

// storm makes mnt/name, whose subdirectories go round-robin over the
// MDTs, and starts workers that each call op(dir, worker, i) for i below
// per. Each worker sends its first error, or nil, on errs.
func storm(t *testing.T, mnt, name string, workers, per int, op func(dir string, w, i int) error) (dir string, errs chan error) {
	t.Helper()
	dir = filepath.Join(mnt, name)
	must(t, os.Mkdir(dir, 0o755))
	must(t, unix.Setxattr(dir, "lustre.lmv.default", []byte("mdt_index=-1"), 0))
	errs = make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for i := 0; i < per; i++ {
				if err := op(dir, w, i); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	return dir, errs
}

// TestMDTRestartMkdirPStorm runs `mkdir -p X/a/b` storms (X in a
// directory on MDT1 with a round-robin default, so a, b and X are spread
// over both MDTs) while each MDT is killed with -9 and restarted, three
// rounds: a client only waits for a restarting MDT, so not one mkdir may
// fail, every tree must exist afterwards, and fsck must be clean. Each
// kill must land while mkdirs are being made, and mkdirs must complete
// after each restart.
func TestMDTRestartMkdirPStorm(t *testing.T) {
	c, mnt := mount(t)
	top := filepath.Join(mnt, "p")
	sfRun(t, c, "mkdir", "-i", "1", top)
	must(t, unix.Setxattr(top, "lustre.lmv.default", []byte("mdt_index=-1"), 0))
	const workers = 4
	var made, busy atomic.Int64
	stop := make(chan struct{})
	errs := make(chan error, workers)
	counts := make([]int, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					counts[w] = i
					errs <- nil
					return
				default:
				}
				busy.Add(1)
				err := os.MkdirAll(filepath.Join(top, fmt.Sprintf("x%d-%d", w, i), "a", "b"), 0o755)
				busy.Add(-1)
				if err != nil {
					errs <- fmt.Errorf("mkdir -p x%d-%d/a/b: %w", w, i, err)
					return
				}
				made.Add(1)
			}
		}()
	}
	waitMade := func(more int64, what string) {
		t.Helper()
		want := made.Load() + more
		for deadline := time.Now().Add(30 * time.Second); made.Load() < want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no mkdir -p completed %s", what)
			}
		}
	}
	for round := 0; round < 3; round++ {
		for _, m := range c.MDTs {
			waitMade(20, "before a kill")
			before := made.Load()
			if busy.Load() == 0 {
				t.Fatalf("no mkdir -p in flight when %s was to be killed", m.Name)
			}
			c.Kill9(m)
			c.Restart(m)
			waitMade(20, fmt.Sprintf("after %s restarted", m.Name))
			if made.Load() == before {
				t.Fatalf("no progress across the restart of %s", m.Name)
			}
		}
	}
	close(stop)
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Fatalf("during MDT restarts: %v", err)
		}
	}
	for w := 0; w < workers; w++ {
		for i := 0; i < counts[w]; i++ {
			if _, err := os.Stat(filepath.Join(top, fmt.Sprintf("x%d-%d", w, i), "a", "b")); err != nil {
				t.Fatalf("an acknowledged tree is incomplete: %v", err)
			}
		}
	}
	// Parts a crashed participant lost are redone by their coordinators'
	// sweepers (every 200 ms): until then fsck sees their entries
	// dangling. They must all be back soon.
	start := time.Now()
	for {
		out, err := exec.Command(c.Bin, "fsck", mnt).CombinedOutput()
		if err == nil {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("fsck 5s after the storm: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d trees made over 6 MDT restarts; fsck clean %s after", made.Load(), time.Since(start).Round(time.Millisecond))
}
