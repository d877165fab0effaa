package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Application locks held across mounts: fcntl (POSIX), OFD and flock
// locks taken on one mount exclude the same lock on every other, waits
// are granted the moment the holder lets go (unlock, close, death), and
// cycles get EDEADLK.

// setLock takes (or with typ F_UNLCK drops) a lock of kind on fd: "posix"
// (fcntl, per process), "ofd" (per open file) or "flock".
func setLock(fd int, kind string, typ int16, start, n int64, wait bool) error {
	if kind == "flock" {
		how := unix.LOCK_EX
		switch typ {
		case unix.F_RDLCK:
			how = unix.LOCK_SH
		case unix.F_UNLCK:
			how = unix.LOCK_UN
		}
		if !wait {
			how |= unix.LOCK_NB
		}
		for {
			if err := unix.Flock(fd, how); err != unix.EINTR { // as below
				return err
			}
		}
	}
	cmd := unix.F_SETLK
	if wait {
		cmd = unix.F_SETLKW
	}
	if kind == "ofd" {
		cmd = unix.F_OFD_SETLK
		if wait {
			cmd = unix.F_OFD_SETLKW
		}
	}
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: n}
	for {
		err := unix.FcntlFlock(uintptr(fd), cmd, &lk)
		if err != unix.EINTR { // Go's runtime signals interrupt waits: retry, as a program would
			return err
		}
	}
}

// runFlockOp is the helper process's side: "flock-hold PATH KIND" takes
// an exclusive lock of the whole file, prints "locked", then does what
// its stdin says ("unlock", "close") until stdin ends or it is killed;
// "flock-counter PATH N" adds one to the 8-byte counter at the start of
// PATH N times, each under a POSIX write lock, and fails if a value read
// under the lock is ever older than one it wrote.
func runFlockOp(f []string) int {
	switch f[0] {
	case "flock-hold":
		fd, err := unix.Open(f[1], unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err == nil {
			err = setLock(fd, f[2], unix.F_WRLCK, 0, 0, true)
		}
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("locked")
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			switch sc.Text() {
			case "unlock":
				err = setLock(fd, f[2], unix.F_UNLCK, 0, 0, false)
			case "close":
				err = unix.Close(fd)
			}
			fmt.Println("done", err)
		}
		return 0
	case "flock-counter":
		var n int
		fmt.Sscan(f[2], &n)
		fd, err := unix.Open(f[1], unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		last := uint64(0)
		buf := make([]byte, 8)
		for range n {
			if err := setLock(fd, "posix", unix.F_WRLCK, 0, 8, true); err != nil {
				fmt.Println("lock", err)
				return 1
			}
			if _, err := unix.Pread(fd, buf, 0); err != nil {
				fmt.Println("read", err)
				return 1
			}
			v := binary.LittleEndian.Uint64(buf)
			if v < last {
				fmt.Printf("read %d under the lock after writing %d\n", v, last)
				return 1
			}
			last = v + 1
			binary.LittleEndian.PutUint64(buf, last)
			if _, err := unix.Pwrite(fd, buf, 0); err != nil {
				fmt.Println("write", err)
				return 1
			}
			if err := setLock(fd, "posix", unix.F_UNLCK, 0, 8, false); err != nil {
				fmt.Println("unlock", err)
				return 1
			}
		}
		fmt.Println("ok")
		return 0
	}
	fmt.Println("bad op")
	return 2
}

// holder is a helper process holding a lock.
type holder struct{ *talker }

func hold(t *testing.T, path, kind string) *holder {
	t.Helper()
	h := &holder{talk(t, "flock-hold "+path+" "+kind)}
	if l := <-h.lines; l != "locked" {
		t.Fatalf("holder of %s (%s): %q", path, kind, l)
	}
	return h
}

func (h *holder) do(t *testing.T, what string) {
	t.Helper()
	fmt.Fprintln(h.in, what)
	if l := <-h.lines; l != "done <nil>" {
		t.Fatalf("holder %s: %q", what, l)
	}
}

func flockCluster(t *testing.T, n int, opts ...string) (*testcluster.Cluster, []string) {
	t.Helper()
	c := testcluster.StartArgs(t, 2, 4, "--lock-timeout", lockTimeout.String())
	mnts := []string{c.MountFS(opts...)}
	for i := 1; i < n; i++ {
		_, m := c.MountAt(fmt.Sprintf("mnt%c", 'a'+i), opts...)
		mnts = append(mnts, m)
	}
	return c, mnts
}

// waitLock takes the lock on fd in the background; the channel gives the
// result.
func waitLock(fd int, kind string, start, n int64) chan error {
	ch := make(chan error, 1)
	go func() { ch <- setLock(fd, kind, unix.F_WRLCK, start, n, true) }()
	return ch
}

func mustWait(t *testing.T, ch chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still waiting after 10s", what)
	}
}

func mustBlock(t *testing.T, ch chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s: granted (%v) while the lock was held", what, err)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestFlockExclusionAcrossMounts(t *testing.T) {
	_, mnts := flockCluster(t, 2)
	for _, kind := range []string{"posix", "ofd", "flock"} {
		for _, release := range []string{"unlock", "close", "death"} {
			t.Run(kind+"/"+release, func(t *testing.T) {
				name := "lock-" + kind + "-" + release
				writeFile(t, filepath.Join(mnts[0], name), []byte("x"))
				h := hold(t, filepath.Join(mnts[0], name), kind)
				fd, err := unix.Open(filepath.Join(mnts[1], name), unix.O_RDWR|unix.O_CLOEXEC, 0)
				must(t, err)
				defer unix.Close(fd)
				err = setLock(fd, kind, unix.F_WRLCK, 0, 0, false)
				if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EWOULDBLOCK) {
					t.Fatalf("a conflicting lock on the other mount: %v", err)
				}
				ch := waitLock(fd, kind, 0, 0)
				mustBlock(t, ch, "the waiter")
				start := time.Now()
				switch release {
				case "death":
					_ = h.cmd.Process.Kill()
				default:
					h.do(t, release)
				}
				mustWait(t, ch, "the waiter after "+release)
				t.Logf("granted %v after the holder's %s", time.Since(start), release)
			})
		}
	}
}

// A counter incremented under POSIX locks by processes on three mounts
// ends exact, and no process reads under the lock a value older than one
// it wrote; also with the MDT killed and restarted half-way, its locks
// and waits replayed.
func TestFlockCounterAcrossMounts(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprint("restart=", restart), func(t *testing.T) { flockCounter(t, restart) })
	}
}

func flockCounter(t *testing.T, restart bool) {
	c, mnts := flockCluster(t, 3)
	writeFile(t, filepath.Join(mnts[0], "counter"), make([]byte, 8))
	const each = 300
	restarted := make(chan time.Time, 1)
	if restart {
		go func() {
			time.Sleep(300 * time.Millisecond)
			c.Kill9(c.MDTs[0])
			c.Restart(c.MDTs[0])
			restarted <- time.Now()
		}()
	}
	var wg sync.WaitGroup
	for _, m := range mnts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(helperBinary(t), "-test.run=^$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("STRIPEFS_OP=flock-counter %s %d", filepath.Join(m, "counter"), each))
			if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "ok" {
				t.Errorf("counter on %s: %v %s", m, err, out)
			}
		}()
	}
	wg.Wait()
	if restart {
		// The fault must have landed while the processes counted.
		select {
		case <-restarted:
		default:
			t.Fatal("the counters finished before the MDT was restarted: no fault was tested")
		}
	}
	for _, m := range mnts {
		if v := binary.LittleEndian.Uint64(readFile(t, filepath.Join(m, "counter"))); v != 3*each {
			t.Errorf("counter on %s: %d, want %d", m, v, 3*each)
		}
	}
	if t.Failed() {
		// What each mount put back after the restart, for the reader of
		// a failure (the cause of a lost increment is in the replay).
		for _, m := range mnts {
			t.Logf("%s: locks replayed %d, refused %d, evictions %d", m, clientCounter(t, m, "locks_replayed"),
				clientCounter(t, m, "locks_replay_refused"), clientCounter(t, m, "lock_evictions"))
		}
	}
}

// Split, merge, partial unlock and conversion of POSIX locks: what another
// owner's F_GETLK finds after each step is what it finds on ext4.
func TestFlockRangesLikeExt4(t *testing.T) {
	_, mnts := flockCluster(t, 2)
	type op struct {
		typ      int16
		start, n int64
	}
	R, W, U := int16(unix.F_RDLCK), int16(unix.F_WRLCK), int16(unix.F_UNLCK)
	seqs := [][]op{
		{{R, 0, 100}, {W, 40, 20}, {U, 45, 5}, {R, 10, 0}},
		{{W, 0, 0}, {U, 100, 100}, {R, 150, 10}, {U, 0, 50}},
		{{R, 10, 10}, {R, 20, 10}, {W, 15, 10}, {U, 0, 17}, {W, 300, 1}},
	}
	probes := []op{{R, 0, 1}, {W, 0, 1}, {W, 12, 3}, {R, 42, 1}, {W, 46, 1}, {W, 55, 100}, {R, 120, 30}, {W, 0, 0}, {R, 299, 5}}
	run := func(a, b string, seq []op) []string {
		writeFile(t, a, nil)
		fa, err := unix.Open(a, unix.O_RDWR|unix.O_CLOEXEC, 0)
		must(t, err)
		defer unix.Close(fa)
		fb, err := unix.Open(b, unix.O_RDWR|unix.O_CLOEXEC, 0)
		must(t, err)
		defer unix.Close(fb)
		var seen []string
		for _, o := range seq {
			must(t, setLock(fa, "posix", o.typ, o.start, o.n, false))
			for _, p := range probes {
				lk := unix.Flock_t{Type: p.typ, Start: p.start, Len: p.n}
				must(t, unix.FcntlFlock(uintptr(fb), unix.F_OFD_GETLK, &lk))
				seen = append(seen, fmt.Sprintf("%d@%d+%d", lk.Type, lk.Start, lk.Len))
			}
		}
		return seen
	}
	local := t.TempDir()
	for i, seq := range seqs {
		want := run(filepath.Join(local, "f"), filepath.Join(local, "f"), seq)
		got := run(filepath.Join(mnts[0], fmt.Sprint("r", i)), filepath.Join(mnts[1], fmt.Sprint("r", i)), seq)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("sequence %d: stripefs %v, ext4 %v", i, got, want)
		}
	}
}

// Waits that would close a cycle of owners on two and on three clients
// get EDEADLK; the waits before them are granted once it is broken.
func TestFlockDeadlockAcrossMounts(t *testing.T) {
	_, mnts := flockCluster(t, 3)
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprint(n, " clients"), func(t *testing.T) {
			name := fmt.Sprint("dl", n)
			writeFile(t, filepath.Join(mnts[0], name), []byte("x"))
			fds := make([]int, n)
			for i := range n {
				fd, err := unix.Open(filepath.Join(mnts[i], name), unix.O_RDWR|unix.O_CLOEXEC, 0)
				must(t, err)
				defer unix.Close(fd)
				fds[i] = fd
				must(t, setLock(fd, "ofd", unix.F_WRLCK, int64(i), 1, false))
			}
			var waits []chan error
			for i := range n - 1 { // i waits for i+1
				ch := waitLock(fds[i], "ofd", int64(i+1), 1)
				mustBlock(t, ch, fmt.Sprint("owner ", i))
				waits = append(waits, ch)
			}
			if err := setLock(fds[n-1], "ofd", unix.F_WRLCK, 0, 1, true); !errors.Is(err, unix.EDEADLK) {
				t.Fatalf("the wait closing the cycle: %v", err)
			}
			must(t, setLock(fds[n-1], "ofd", unix.F_UNLCK, int64(n-1), 1, false))
			for i := n - 2; i >= 0; i-- {
				mustWait(t, waits[i], fmt.Sprint("owner ", i))
				must(t, setLock(fds[i], "ofd", unix.F_UNLCK, 0, 0, false))
			}
		})
	}
}

// The mount of a holder killed with SIGKILL: the waiter on the other
// mount is granted once the MDT has evicted the dead client.
func TestFlockHolderMountKilled(t *testing.T) {
	c := testcluster.StartArgs(t, 2, 4, "--lock-timeout", lockTimeout.String())
	a := c.MountFS()
	pb, b := c.MountAt("mntb")
	writeFile(t, filepath.Join(a, "f"), []byte("x"))
	h := hold(t, filepath.Join(b, "f"), "posix")
	fd, err := unix.Open(filepath.Join(a, "f"), unix.O_RDWR|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(fd)
	ch := waitLock(fd, "posix", 0, 0)
	mustBlock(t, ch, "the waiter")
	start := time.Now()
	c.Kill9(pb)
	_ = h.cmd.Process.Kill()
	mustWait(t, ch, "the waiter after the holder's mount died")
	if took := time.Since(start); took > lockTimeout+5*time.Second {
		t.Errorf("granted %v after the kill, lock timeout %v", took, lockTimeout)
	}
}

// Held and waiting locks outlive a kill -9 and restart of their MDT: the
// holder still holds (another mount's F_GETLK sees it), the waiter still
// waits, and is granted when the holder lets go.
func TestFlockAcrossMDTRestart(t *testing.T) {
	c, mnts := flockCluster(t, 3)
	path := func(i int) string { return filepath.Join(mnts[i], "f") }
	writeFile(t, path(0), []byte("x"))
	h := hold(t, path(0), "posix")
	fd, err := unix.Open(path(1), unix.O_RDWR|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(fd)
	ch := waitLock(fd, "posix", 0, 0)
	mustBlock(t, ch, "the waiter")
	t0 := time.Now()
	c.Kill9(c.MDTs[0])
	c.Restart(c.MDTs[0])
	t.Logf("mdt0 back after %v", time.Since(t0))
	// Ask from a third mount whether it is still held.
	probe, err := unix.Open(path(2), unix.O_RDWR|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(probe)
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	must(t, unix.FcntlFlock(uintptr(probe), unix.F_GETLK, &lk))
	if lk.Type != unix.F_WRLCK {
		t.Fatalf("after the restart F_GETLK finds type %d, not the holder's write lock", lk.Type)
	}
	t.Logf("F_GETLK answered after %v", time.Since(t0))
	mustBlock(t, ch, "the waiter after the restart")
	h.do(t, "unlock")
	mustWait(t, ch, "the waiter after the holder's unlock")
	t.Logf("granted after %v", time.Since(t0))
}

// -o localflock leaves locks to each kernel (node-local: both mounts get
// one); -o noflock refuses them.
func TestFlockMountOptions(t *testing.T) {
	_, local := flockCluster(t, 2, "localflock")
	writeFile(t, filepath.Join(local[0], "f"), []byte("x"))
	var fds []int
	for _, m := range local {
		fd, err := unix.Open(filepath.Join(m, "f"), unix.O_RDWR|unix.O_CLOEXEC, 0)
		must(t, err)
		defer unix.Close(fd)
		fds = append(fds, fd)
		if err := setLock(fd, "flock", unix.F_WRLCK, 0, 0, false); err != nil {
			t.Errorf("localflock on %s: %v", m, err)
		}
	}
	_, none := flockCluster(t, 1, "noflock")
	writeFile(t, filepath.Join(none[0], "f"), []byte("x"))
	fd, err := unix.Open(filepath.Join(none[0], "f"), unix.O_RDWR|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(fd)
	if err := setLock(fd, "posix", unix.F_WRLCK, 0, 0, false); !errors.Is(err, unix.ENOSYS) {
		t.Errorf("fcntl lock with noflock: %v", err)
	}
	if err := setLock(fd, "flock", unix.F_WRLCK, 0, 0, false); !errors.Is(err, unix.ENOSYS) {
		t.Errorf("flock with noflock: %v", err)
	}
}

// Malformed lock requests straight to the MDT get EINVAL, never a panic.
func TestFlockBadRequests(t *testing.T) {
	c, mnts := flockCluster(t, 1)
	writeFile(t, filepath.Join(mnts[0], "f"), nil)
	var st syscall.Stat_t
	must(t, syscall.Stat(filepath.Join(mnts[0], "f"), &st))
	fid := proto.FIDFromIno(st.Ino)
	rc := rpc.NewClient(c.MGS, "bad")
	defer rc.Close()
	for _, r := range []proto.FlockReq{
		{Op: proto.FlockSet, Res: fid, Kind: proto.FlockPOSIX, Type: proto.FlockWrite, Start: 100, End: 10},
		{Op: proto.FlockSet, Res: fid, Kind: 42, Type: proto.FlockWrite, Start: 0, End: 1},
		{Op: proto.FlockSet, Res: fid, Kind: proto.FlockPOSIX, Type: 0, Start: 0, End: 1},
		{Op: 77, Res: fid, Kind: proto.FlockPOSIX},
		{Op: proto.FlockUnlock, Res: fid, Kind: proto.FlockPOSIX, Start: 9, End: 9},
		{Op: proto.FlockSet, Res: proto.FID{Seq: fid.Seq, Oid: fid.Oid + 999}, Kind: proto.FlockPOSIX, Type: proto.FlockRead, Start: 0, End: 1},
	} {
		err := rc.Do(context.Background(), &rpc.Call{Method: proto.MFlock, Req: &r, Resp: &proto.FlockReply{}})
		if !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			t.Errorf("%+v: %v", r, err)
		}
	}
	// Through the mount: the kernel refuses what makes no sense first.
	fd, err := unix.Open(filepath.Join(mnts[0], "f"), unix.O_RDWR|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(fd)
	if err := unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &unix.Flock_t{Type: 7}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("lock type 7: %v", err)
	}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &unix.Flock_t{Type: unix.F_WRLCK, Start: 10, Len: -20}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a range before the start of the file: %v", err)
	}
}
