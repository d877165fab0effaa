package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

	// Renaming a file between directories on different MDTs is refused
	// with EXDEV (mv then copies), not half done.
	run("mkdir", "-i", "1", p("other"))
	writeFile(t, p("rr/file"), []byte("x"))
	if v := getxattr(t, p("rr"), "lustre.lmv"); strings.Contains(v, "mdt_index=0") {
		wantErrno(t, "rename across MDTs", syscall.Rename(p("rr/file"), p("other/file")), syscall.EXDEV)
	}

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
	dir := filepath.Join(mnt, "storm")
	must(t, os.Mkdir(dir, 0o755))
	must(t, unix.Setxattr(dir, "lustre.lmv.default", []byte("mdt_index=-1"), 0))
	const workers, per = 4, 250
	errs := make(chan error, workers)
	done := make(chan struct{})
	for w := 0; w < workers; w++ {
		go func(w int) {
			for i := 0; i < per; i++ {
				if err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("d%d-%d", w, i)), 0o755); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(w)
	}
	go func() {
		defer close(done)
		for _, m := range c.MDTs {
			time.Sleep(150 * time.Millisecond)
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

// TestFsckOrphanObject plants an object no file owns on a running OST
// (what a client that died between unlink and destroy leaves) and checks
// stripefs fsck reports it, --repair destroys it, and a rerun is clean.
func TestFsckOrphanObject(t *testing.T) {
	c, mnt := mount(t)
	writeFile(t, filepath.Join(mnt, "keep"), []byte("data"))
	planted := filepath.Join(c.Dir, "ost1", "O", "ff", "20000_1ff_0_0")
	must(t, os.MkdirAll(filepath.Dir(planted), 0o755))
	must(t, os.WriteFile(planted, []byte("orphan"), 0o600))
	out, err := exec.Command(c.Bin, "fsck", mnt).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "orphan object") {
		t.Fatalf("fsck did not report the planted object: %v\n%s", err, out)
	}
	if out, err := exec.Command(c.Bin, "fsck", "--repair", mnt).CombinedOutput(); err != nil {
		t.Fatalf("fsck --repair: %v\n%s", err, out)
	}
	if _, err := os.Stat(planted); !os.IsNotExist(err) {
		t.Fatalf("orphan object still there after repair: %v", err)
	}
	if out, err := exec.Command(c.Bin, "fsck", mnt).CombinedOutput(); err != nil {
		t.Fatalf("fsck after repair: %v\n%s", err, out)
	}
	if got := readFile(t, filepath.Join(mnt, "keep")); string(got) != "data" {
		t.Fatalf("a good file changed: %q", got)
	}
}
