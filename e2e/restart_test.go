package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/internal/testcluster"
)

// writeTree writes files and directories, fsyncing each file, and returns
// what each path must hold.
func writeTree(t *testing.T, root string) map[string][]byte {
	t.Helper()
	want := map[string][]byte{}
	must(t, os.MkdirAll(filepath.Join(root, "a/b/c"), 0o755))
	// Stripe over every OST, so each restart test touches all of them.
	must(t, unix.Setxattr(filepath.Join(root, "a/b"), "lustre.lov", []byte("stripe_count=-1"), 0))
	for i, size := range []int{0, 1, 4095, 1 << 20, 3<<20 + 17} {
		p := filepath.Join(root, "a/b", fmt.Sprintf("f%d", i))
		data := make([]byte, size)
		pattern(data, 0, byte(i))
		f, err := os.Create(p)
		must(t, err)
		_, err = f.Write(data)
		must(t, err)
		must(t, f.Sync())
		must(t, f.Close())
		want[p] = data
	}
	must(t, os.Symlink("b/f1", filepath.Join(root, "a/link")))
	d, err := os.Open(filepath.Join(root, "a"))
	must(t, err)
	must(t, d.Sync()) // commits the namespace on the MDT
	d.Close()
	return want
}

func checkTree(t *testing.T, root string, want map[string][]byte) {
	t.Helper()
	for p, data := range want {
		got, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("after restart: %v", err)
			continue
		}
		if !bytes.Equal(got, data) {
			t.Errorf("after restart: %s holds %d bytes, not the %d written", p, len(got), len(data))
		}
	}
	if target, err := os.Readlink(filepath.Join(root, "a/link")); err != nil || target != "b/f1" {
		t.Errorf("symlink after restart: %q %v", target, err)
	}
	if _, err := os.Stat(filepath.Join(root, "a/b/c")); err != nil {
		t.Errorf("directory after restart: %v", err)
	}
}

// TestKill9Restart kills every server process and the mount with SIGKILL,
// starts them again and checks every fsync'd byte and the namespace.
func TestKill9Restart(t *testing.T) {
	c, mnt := mount(t)
	want := writeTree(t, mnt)
	c.Kill9(c.Mount)
	for _, p := range append(append([]*testcluster.Proc(nil), c.MDTs...), c.OSTs...) {
		c.Kill9(p)
	}
	_ = exec.Command("fusermount3", "-u", "-z", mnt).Run()
	for _, p := range append(append([]*testcluster.Proc(nil), c.MDTs...), c.OSTs...) {
		c.Restart(p)
	}
	c.Restart(c.Mount)
	checkTree(t, mnt, want)
	// New work after the restart: FIDs must not be reused.
	writeFile(t, filepath.Join(mnt, "after"), []byte("new"))
	checkTree(t, mnt, want)
}

// TestServerRestartUnderMount restarts one OST and one MDT while the mount
// stays up: the client reconnects and carries on.
func TestServerRestartUnderMount(t *testing.T) {
	c, mnt := mount(t)
	want := writeTree(t, mnt)
	c.Kill9(c.OSTs[0])
	c.Kill9(c.MDTs[0])
	done := make(chan error, 1)
	go func() { // blocks until the servers are back
		_, err := os.ReadFile(filepath.Join(mnt, "a/b/f4"))
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	c.Restart(c.MDTs[0])
	c.Restart(c.OSTs[0])
	if err := <-done; err != nil {
		t.Fatalf("read across a server restart: %v", err)
	}
	checkTree(t, mnt, want)
}

// TestUpStopStart runs `stripefs up`, stops it with SIGTERM, starts it on
// the same data directory and finds everything again.
func TestUpStopStart(t *testing.T) {
	dir := t.TempDir()
	data, mnt := filepath.Join(dir, "data"), filepath.Join(dir, "mnt")
	cmd := startUp(t, data, mnt)
	var st syscall.Statfs_t
	must(t, syscall.Statfs(mnt, &st))
	if st.Type != 0x65735546 { // FUSE_SUPER_MAGIC
		t.Fatalf("stripefs up reported ready but %s is not a FUSE mount", mnt)
	}
	want := writeTree(t, mnt)
	spread := writeSpread(t, mnt)
	// The mount's metadata calls ran in its own goroutines, and so did
	// the MDTs' calls to each other (rpc.Client.Direct): the namespace
	// they made must check clean.
	if n := clientCounter(t, mnt, "direct_mdt_calls"); n == 0 {
		t.Error("no metadata call went to an MDT of the up process by direct call")
	}
	sfRun(t, &testcluster.Cluster{Bin: testcluster.Binary(t)}, "fsck", mnt)
	// Four OSTs on this host's one disk: df counts that disk once in the
	// summary, not four times.
	var df dfReport
	must(t, json.Unmarshal([]byte(sfRun(t, &testcluster.Cluster{Bin: testcluster.Binary(t)}, "df", "--json", mnt)), &df))
	var osts int
	for _, tg := range df.Targets {
		if tg.Kind == "ost" {
			osts++
			if tg.Bytes != df.Summary.Bytes {
				t.Errorf("df: OST%d has %d bytes, the summary %d (the disk is theirs to share)", tg.Index, tg.Bytes, df.Summary.Bytes)
			}
		}
	}
	if osts != 4 {
		t.Errorf("df lists %d OSTs", osts)
	}
	stopUp(t, cmd)
	must(t, syscall.Statfs(mnt, &st))
	if st.Type == 0x65735546 { // FUSE_SUPER_MAGIC
		t.Fatal("still mounted after stripefs up stopped")
	}
	cmd = startUp(t, data, mnt)
	defer stopUp(t, cmd)
	checkTree(t, mnt, want)
	checkFiles(t, spread)
	sfRun(t, &testcluster.Cluster{Bin: testcluster.Binary(t)}, "fsck", mnt)
}

// writeSpread makes a namespace over every MDT: directories placed
// round-robin, a file in each, one renamed across MDTs and one directory
// removed from another MDT. It returns the files and their contents.
func writeSpread(t *testing.T, mnt string) map[string][]byte {
	t.Helper()
	root := filepath.Join(mnt, "spread")
	must(t, os.Mkdir(root, 0o755))
	sfRun(t, &testcluster.Cluster{Bin: testcluster.Binary(t)}, "setdirstripe", "-D", "-i", "-1", root)
	want := map[string][]byte{}
	for i := range 6 {
		d := filepath.Join(root, fmt.Sprint(i))
		must(t, os.Mkdir(d, 0o755))
		p := filepath.Join(d, "f")
		must(t, os.WriteFile(p, []byte(p), 0o644))
		want[p] = []byte(p)
	}
	from, to := filepath.Join(root, "0", "f"), filepath.Join(root, "1", "g")
	must(t, os.Rename(from, to))
	want[to] = want[from]
	delete(want, from)
	must(t, os.Remove(filepath.Join(root, "2", "f")))
	must(t, os.Remove(filepath.Join(root, "2")))
	delete(want, filepath.Join(root, "2", "f"))
	d, err := os.Open(root)
	must(t, err)
	must(t, d.Sync())
	d.Close()
	return want
}

func checkFiles(t *testing.T, want map[string][]byte) {
	t.Helper()
	for p, data := range want {
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: %q %v, want %q", p, got, err, data)
		}
	}
}

// startUp runs `stripefs up` on data and mnt (with extra flags) and
// returns once it reports ready.
func startUp(t *testing.T, data, mnt string, args ...string) *exec.Cmd {
	t.Helper()
	return startUpEnv(t, nil, data, mnt, args...)
}

// startUpEnv is startUp with env for the process (nil: the test's).
func startUpEnv(t *testing.T, env []string, data, mnt string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testcluster.Binary(t), append([]string{"up", "--data", data, "--mount", mnt}, args...)...)
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "stripefs up:") {
			go func() {
				for sc.Scan() {
				}
			}()
			return cmd
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	t.Fatal("stripefs up never reported ready")
	return nil
}

// stopUp stops a `stripefs up` as Ctrl-C would, and checks it exits
// cleanly.
func stopUp(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("stripefs up exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("stripefs up did not stop on SIGTERM")
	}
}
