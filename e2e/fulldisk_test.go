package e2e

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/internal/testcluster"
)

// smallDisk makes an ext4 filesystem of size bytes in a file, loop-mounts
// it at dir, and undoes it all when the test ends.
func smallDisk(t *testing.T, dir string, size int64) {
	t.Helper()
	img := dir + ".img"
	f, err := os.Create(img)
	must(t, err)
	must(t, f.Truncate(size))
	f.Close()
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	run("mkfs.ext4", "-q", "-F", img)
	must(t, os.MkdirAll(dir, 0o755))
	run("mount", "-o", "loop", img, dir)
	t.Cleanup(func() {
		for i := 0; i < 50; i++ {
			if exec.Command("umount", dir).Run() == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		os.Remove(img)
	})
}

// moveData restarts p (stopped) with its data directory copied onto a
// small disk at dir.
func moveData(t *testing.T, c *testcluster.Cluster, p *testcluster.Proc, dir string, size int64) string {
	t.Helper()
	c.Stop(p)
	smallDisk(t, dir, size)
	t.Cleanup(func() { c.Stop(p) }) // before the disk is unmounted
	for i, a := range p.Args {
		if a == "--data" {
			data := filepath.Join(dir, "data")
			if out, err := exec.Command("cp", "-a", p.Args[i+1], data).CombinedOutput(); err != nil {
				t.Fatalf("copy %s: %v %s", p.Args[i+1], err, out)
			}
			p.Args[i+1] = data
			c.Restart(p)
			return data
		}
	}
	t.Fatalf("%s has no --data", p.Name)
	return ""
}

// ballast fills n bytes of dir's disk with a file the test removes to
// give space back.
func ballast(t *testing.T, dir string, n int) string {
	t.Helper()
	p := filepath.Join(dir, "ballast")
	b := make([]byte, n)
	rand.Read(b)
	must(t, os.WriteFile(p, b, 0o600))
	return p
}

// fillDisk fills dir's disk to the last block with a file the test
// removes to give space back. It runs as root: the blocks ext4 keeps for
// root are taken too.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "ballast")
	f, err := os.Create(p)
	must(t, err)
	defer f.Close()
	t.Cleanup(func() { os.Remove(p) })
	var off int64
	for _, chunk := range []int64{1 << 20, 4 << 10} {
		for unix.Fallocate(int(f.Fd()), 0, off, chunk) == nil {
			off += chunk
		}
	}
	return p
}

// An MDT and an OST on small disks, filled through the mount: ENOSPC
// comes within seconds (creates, xattrs; write() itself), never a hang;
// what was taken stays readable, deletes still work, space given back
// makes them take data again without a restart, SIGTERM stops them while
// full, and fsck is clean after a restart.
func TestFullDisks(t *testing.T) {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4 (.ci/run installs e2fsprogs)")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("no loop devices on this machine: the small disks cannot be made")
	}
	c := testcluster.Start(t, 2, 2)
	mdt1, ost0 := c.MDTs[1], c.OSTs[0]
	mdtDisk, ostDisk := filepath.Join(c.Dir, "mdt1-disk"), filepath.Join(c.Dir, "ost0-disk")
	moveData(t, c, mdt1, mdtDisk, 64<<20)
	moveData(t, c, ost0, ostDisk, 96<<20)
	mnt := c.MountFS()

	t.Run("mdt", func(t *testing.T) {
		bal := ballast(t, mdtDisk, 8<<20)
		dir := filepath.Join(mnt, "md")
		sfRun(t, c, "mkdir", "-i", "1", dir)
		val := make([]byte, 60<<10)
		start := time.Now()
		var n int
		var ferr error
		for n = 0; ferr == nil; n++ {
			if time.Since(start) > 2*time.Minute {
				t.Fatalf("%d files with 60 KiB xattrs on a 64 MiB MDT disk and no ENOSPC", n)
			}
			p := filepath.Join(dir, fmt.Sprintf("f%d", n))
			if ferr = os.WriteFile(p, nil, 0o644); ferr == nil {
				rand.Read(val) // not compressible
				ferr = unix.Setxattr(p, "user.fill", val, 0)
			}
		}
		took := time.Since(start)
		wantErrno(t, "filling the MDT", ferr, syscall.ENOSPC)
		t.Logf("ENOSPC after %d files in %s", n, took.Round(time.Millisecond))
		// Full: new names are refused at once, what is there is read.
		t0 := time.Now()
		wantErrno(t, "create on a full MDT", os.WriteFile(filepath.Join(dir, "more"), nil, 0o644), syscall.ENOSPC)
		if d := time.Since(t0); d > time.Second {
			t.Errorf("a create on a full MDT took %s to fail", d)
		}
		if s := snapshot(t, mnt); s.Counter("mdt1", "enospc_reserve") == 0 || s.Counter("mdt1", "disk_at_reserve_now") != 1 {
			t.Errorf("mdt1 full: enospc_reserve %d, disk_at_reserve_now %d", s.Counter("mdt1", "enospc_reserve"), s.Counter("mdt1", "disk_at_reserve_now"))
		}
		if _, err := unix.Getxattr(filepath.Join(dir, "f0"), "user.fill", make([]byte, 64<<10)); err != nil {
			t.Errorf("reading an xattr on a full MDT: %v", err)
		}
		for i := 0; i < 10; i++ {
			must(t, os.Remove(filepath.Join(dir, fmt.Sprintf("f%d", i))))
		}
		// Space back: taken again within the MDT's next look at its disk.
		must(t, os.Remove(bal))
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if err = os.WriteFile(filepath.Join(dir, "again"), nil, 0o644); err == nil || time.Now().After(deadline) {
				break
			}
		}
		must(t, err)
		if n := snapshot(t, mnt).Counter("mdt1", "disk_at_reserve_now"); n != 0 {
			t.Errorf("mdt1 with space back: disk_at_reserve_now %d", n)
		}
	})

	t.Run("ost", func(t *testing.T) {
		bal := ballast(t, ostDisk, 8<<20)
		p := filepath.Join(mnt, "big")
		sfRun(t, c, "setstripe", "-c", "1", "-i", "0", p)
		start := time.Now()
		took, step, err := writeSteps(p, 200<<20)
		if d := time.Since(start); d > time.Minute {
			t.Errorf("filling a 96 MiB OST took %s", d)
		}
		wantErrno(t, "filling the OST", err, syscall.ENOSPC)
		if step != "write" {
			t.Errorf("ENOSPC at %s, want write()", step)
		}
		if got := readFile(t, p); len(got) != took || !bytes.Equal(got, patterned(took, 3)) {
			t.Fatalf("after ENOSPC the file holds %d bytes, write() took %d", len(got), took)
		}
		t.Logf("write() took %d MiB, then ENOSPC", took>>20)
		must(t, os.Remove(bal))
		must(t, os.Remove(p))
		// Space back (the ballast, and the object destroyed in the
		// background): a new file takes data again.
		var e error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if e = writeSyncClose(filepath.Join(mnt, "again"), 16<<20); e == nil || time.Now().After(deadline) {
				break
			}
		}
		must(t, e)
	})

	// The disk filled under the OST by someone else, reserve and all,
	// after it granted a client space: the client's cached data meets
	// the full disk at flush. The OST turns read-only (df's S flag), its
	// process lives on, reads go on, and once space is back it is reopened
	// and the data the client kept lands.
	t.Run("ost past its reserve", func(t *testing.T) {
		must(t, os.Remove(filepath.Join(mnt, "again")))
		kept := filepath.Join(mnt, "kept")
		sfRun(t, c, "setstripe", "-c", "1", "-i", "0", kept)
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			// The objects removed before go in the background.
			if err = writeSyncClose(kept, 1<<20); err == nil || time.Now().After(deadline) {
				break
			}
		}
		must(t, err)
		p := filepath.Join(mnt, "granted")
		sfRun(t, c, "setstripe", "-c", "1", "-i", "0", p)
		f, err := os.Create(p)
		must(t, err)
		defer f.Close()
		data := patterned(5<<20, 7)
		_, err = f.Write(data[:1<<20]) // takes a grant on ost0
		must(t, err)
		must(t, f.Sync())
		bal := fillDisk(t, ostDisk)
		_, err = f.Write(data[1<<20:])
		if err == nil {
			err = f.Sync()
		}
		wantErrno(t, "writing under a grant on a full disk", err, syscall.ENOSPC)
		if n := snapshot(t, mnt).Counter("ost0", "store_failed_now"); n != 1 {
			t.Fatalf("ost0 store_failed_now %d: the flush did not meet the full disk", n)
		}
		out, _ := exec.Command(c.Bin, "df", mnt).CombinedOutput()
		if !bytes.Contains(out, []byte("[OST:0] S")) {
			t.Errorf("df does not flag ost0 out of space:\n%s", out)
		}
		if got := readFile(t, kept); !bytes.Equal(got, patterned(1<<20, 3)) {
			t.Error("a file on ost0 does not read back while ost0 is read-only")
		}
		if !ost0.Running() {
			t.Fatal("ost0's process ended on a full disk")
		}
		must(t, os.Remove(bal))
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if err = f.Sync(); err == nil || time.Now().After(deadline) {
				break
			}
		}
		must(t, err)
		if got := readFile(t, p); !bytes.Equal(got, data) {
			t.Errorf("after space came back the file holds %d bytes, not the 5 MiB written", len(got))
		}
		if n := snapshot(t, mnt).Counter("ost0", "store_failed_now"); n != 0 {
			t.Errorf("ost0 store_failed_now %d after it was reopened", n)
		}
	})

	// SIGTERM stops each promptly while it is full: its disk down to
	// within its reserve (what is left is the room Pebble flushes its
	// memtable into as it closes).
	var ballasts []string
	for _, d := range []string{mdtDisk, ostDisk} {
		var st unix.Statfs_t
		must(t, unix.Statfs(d, &st))
		p := filepath.Join(d, "ballast")
		f, err := os.Create(p)
		must(t, err)
		must(t, unix.Fallocate(int(f.Fd()), 0, 0, int64(st.Bavail*uint64(st.Bsize))-(12<<20)))
		f.Close()
		ballasts = append(ballasts, p)
	}
	// The MDT looks at its disk at most every 100 ms.
	var ferr error
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ferr = os.WriteFile(filepath.Join(mnt, "md", "full"), nil, 0o644); ferr != nil || time.Now().After(deadline) {
			break
		}
		os.Remove(filepath.Join(mnt, "md", "full"))
	}
	wantErrno(t, "create with the MDT's disk at its reserve", ferr, syscall.ENOSPC)
	for _, p := range []*testcluster.Proc{mdt1, ost0} {
		start := time.Now()
		c.Stop(p)
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("SIGTERM took %s to stop %s", d, p.Name)
		}
	}
	for _, b := range ballasts {
		must(t, os.Remove(b))
	}
	for _, p := range []*testcluster.Proc{mdt1, ost0} {
		c.Restart(p)
	}
	if out, err := exec.Command(c.Bin, "fsck", mnt).CombinedOutput(); err != nil {
		t.Fatalf("fsck after filling: %v\n%s", err, out)
	}
}
