package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/fs/fusefs"
	"github.com/stripefs/stripefs/internal/testcluster"
)

// TestMountHelper mounts the way mount(8) does for `mount -t
// fuse.stripefs` or an fstab line: through a mount.fuse.stripefs helper,
// which must return once the filesystem is up and leave the daemon
// running; umount ends it.
func TestMountHelper(t *testing.T) {
	c := testcluster.Start(t, 1, 2)
	mnt := filepath.Join(c.Dir, "helper-mnt")
	must(t, os.Mkdir(mnt, 0o755))
	helper := filepath.Join(c.Dir, "mount.fuse.stripefs")
	must(t, os.Symlink(c.Bin, helper))
	out, err := exec.Command(helper, c.MGS, mnt, "-o", "rw,allow_other,_netdev,attr_timeout=0,read_ahead_kb=2048").CombinedOutput()
	if err != nil {
		t.Fatalf("mount helper: %v\n%s", err, out)
	}
	defer exec.Command("fusermount3", "-u", "-z", mnt).Run()
	var st syscall.Statfs_t
	must(t, syscall.Statfs(mnt, &st))
	if st.Type != 0x65735546 {
		t.Fatalf("%s is not a FUSE mount after the helper returned", mnt)
	}
	if got := bdiReadAhead(t, mnt); got != "2048" {
		t.Errorf("read_ahead_kb=2048 gave the mount a read-ahead window of %s KiB", got)
	}
	writeFile(t, filepath.Join(mnt, "f"), []byte("via helper"))
	if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	// fuse3's mount.fuse calls the type's program as `stripefs SOURCE DIR -o OPTS`.
	out, err = exec.Command(c.Bin, c.MGS, mnt, "-o", "allow_other").CombinedOutput()
	if err != nil {
		t.Fatalf("stripefs SOURCE DIR form: %v\n%s", err, out)
	}
	if got := readFile(t, filepath.Join(mnt, "f")); string(got) != "via helper" {
		t.Fatalf("remount reads %q", got)
	}
	if got, want := bdiReadAhead(t, mnt), fusefs.RequestBytes(fusefs.DefaultMaxRequestKB)>>10; got != strconv.Itoa(want) {
		t.Errorf("a mount's default read-ahead window is %s KiB, want one request's worth, %d", got, want)
	}
	if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	// An fstab line names its key as an option: the helper passes it on,
	// and without it (nor $STRIPEFS_KEY) the mount has none to prove.
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "STRIPEFS_KEY=") {
			env = append(env, e)
		}
	}
	withKey := exec.Command(helper, c.MGS, mnt, "-o", "allow_other,key="+testcluster.Key(t))
	withKey.Env = env
	if out, err := withKey.CombinedOutput(); err != nil {
		t.Fatalf("mount helper with -o key=: %v\n%s", err, out)
	}
	if got := readFile(t, filepath.Join(mnt, "f")); string(got) != "via helper" {
		t.Fatalf("mount with -o key= reads %q", got)
	}
	if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	wrongKey := filepath.Join(c.Dir, "other.key")
	if out, err := exec.Command(c.Bin, "keygen", wrongKey).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v %s", err, out)
	}
	bad := exec.Command(helper, c.MGS, mnt, "-o", "key="+wrongKey)
	bad.Env = env
	if out, err := bad.CombinedOutput(); err == nil {
		exec.Command("fusermount3", "-u", "-z", mnt).Run()
		t.Fatalf("mount helper with another filesystem's key mounted: %s", out)
	} else if !strings.Contains(string(out), "authentication failed") {
		t.Errorf("mount with another filesystem's key failed without naming authentication: %s", out)
	}
	for _, opt := range []string{"no_such_option", "read_ahead_kb=-1", "read_ahead_kb=lots", "key="} {
		bad, err := exec.Command(helper, c.MGS, mnt, "-o", opt).CombinedOutput()
		if err == nil {
			t.Fatalf("-o %s was accepted: %s", opt, bad)
		}
	}
}

// bdiReadAhead is the kernel's read-ahead window (KiB) of the mount at mnt.
func bdiReadAhead(t *testing.T, mnt string) string {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Stat(mnt, &st))
	b, err := os.ReadFile(fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev)))
	must(t, err)
	return strings.TrimSpace(string(b))
}
