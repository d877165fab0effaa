package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

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
	out, err := exec.Command(helper, c.MGS, mnt, "-o", "rw,allow_other,_netdev,attr_timeout=0").CombinedOutput()
	if err != nil {
		t.Fatalf("mount helper: %v\n%s", err, out)
	}
	defer exec.Command("fusermount3", "-u", "-z", mnt).Run()
	var st syscall.Statfs_t
	must(t, syscall.Statfs(mnt, &st))
	if st.Type != 0x65735546 {
		t.Fatalf("%s is not a FUSE mount after the helper returned", mnt)
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
	if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	bad, err := exec.Command(helper, c.MGS, mnt, "-o", "no_such_option").CombinedOutput()
	if err == nil {
		t.Fatalf("an unknown option was accepted: %s", bad)
	}
}
