package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// streamData is the n-th 64 KiB block of the data the stream ops write
// and check: the same for every process.
func streamData(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	b := make([]byte, 64<<10)
	for i := 0; i < len(b); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// runStreamOp is a program using the mount across a takeover:
// "stream-write PATH BLOCKS" writes 64 KiB blocks one by one, a little
// apart, then fsyncs; "stream-read PATH BLOCKS PASSES" reads the file
// whole, again and again, each pass through a new descriptor and one
// kept open. Each prints "ok SHA256" or "err WHAT" and how long its
// slowest call took.
func runStreamOp(f []string) int {
	n, _ := strconv.Atoi(f[2])
	var slowest time.Duration
	timed := func(fn func() error) error {
		start := time.Now()
		err := fn()
		slowest = max(slowest, time.Since(start))
		return err
	}
	fail := func(what string, err error) int {
		fmt.Printf("err %s: %v\n", what, err)
		return 0
	}
	switch f[0] {
	case "stream-write":
		out, err := os.OpenFile(f[1], os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fail("open", err)
		}
		h := sha256.New()
		for i := 0; i < n; i++ {
			b := streamData(i)
			if err := timed(func() error { _, err := out.Write(b); return err }); err != nil {
				return fail(fmt.Sprintf("write block %d", i), err)
			}
			h.Write(b)
			time.Sleep(3 * time.Millisecond)
		}
		if err := timed(out.Sync); err != nil {
			return fail("fsync", err)
		}
		if err := out.Close(); err != nil {
			return fail("close", err)
		}
		fmt.Printf("ok %s %v\n", hex.EncodeToString(h.Sum(nil)), slowest)
	case "stream-read":
		passes, _ := strconv.Atoi(f[3])
		kept, err := os.Open(f[1])
		if err != nil {
			return fail("open", err)
		}
		var sum string
		buf := make([]byte, 64<<10)
		for p := 0; p < passes; p++ {
			for _, fresh := range []bool{true, false} {
				in := kept
				if fresh {
					if err := timed(func() error { in, err = os.Open(f[1]); return err }); err != nil {
						return fail("open", err)
					}
				}
				h := sha256.New()
				for off := int64(0); ; off += int64(len(buf)) {
					var got int
					err := timed(func() error { var err error; got, err = in.ReadAt(buf, off); return err })
					h.Write(buf[:got])
					if err == io.EOF {
						break
					}
					if err != nil {
						return fail(fmt.Sprintf("read at %d", off), err)
					}
					time.Sleep(time.Millisecond)
				}
				if fresh {
					in.Close()
				}
				s := hex.EncodeToString(h.Sum(nil))
				if sum != "" && s != sum {
					return fail(fmt.Sprintf("pass %d", p), fmt.Errorf("checksum %s, first pass %s", s, sum))
				}
				sum = s
			}
		}
		fmt.Printf("ok %s %v\n", sum, slowest)
	}
	return 0
}

// linesOf delivers the lines of r.
func linesOf(r io.Reader) <-chan string {
	ch := make(chan string, 16)
	go func() {
		defer close(ch)
		for s := bufio.NewScanner(r); s.Scan(); {
			ch <- s.Text()
		}
	}()
	return ch
}

// TestTakeover hands a live mount to a new daemon (stripefs mount
// --takeover) while one program writes a file and another reads one,
// and a third holds a flock: no program sees an error, every checksum
// is exact, the old daemon is gone, and the new one serves the mount
// with the programs' descriptors and lock.
func TestTakeover(t *testing.T) {
	c := startCluster(t)
	old, mnt := c.MountAt("t")
	_, other := c.MountAt("o")
	const blocks = 400 // 25 MiB
	src := filepath.Join(mnt, "src")
	h := sha256.New()
	{
		out, err := os.Create(src)
		must(t, err)
		for i := 0; i < blocks; i++ {
			b := streamData(i)
			h.Write(b)
			_, err := out.Write(b)
			must(t, err)
		}
		must(t, out.Close())
	}
	want := hex.EncodeToString(h.Sum(nil))
	start := func(op string) (*exec.Cmd, *bufio.Scanner) {
		cmd := helperCmd(t, op)
		out, err := cmd.StdoutPipe()
		must(t, err)
		must(t, cmd.Start())
		return cmd, bufio.NewScanner(out)
	}
	// Many open files: a handover larger than a socket's buffer.
	many := filepath.Join(mnt, "many")
	must(t, os.Mkdir(many, 0o755))
	var open []*os.File
	for i := range 3000 {
		f, err := os.OpenFile(filepath.Join(many, strconv.Itoa(i)), os.O_RDWR|os.O_CREATE, 0o644)
		must(t, err)
		_, err = f.WriteString(strconv.Itoa(i))
		must(t, err)
		open = append(open, f)
	}
	defer func() {
		for _, f := range open {
			f.Close()
		}
	}()

	writer, wout := start("stream-write " + filepath.Join(mnt, "dst") + " " + strconv.Itoa(blocks))
	reader, rout := start("stream-read " + src + " " + strconv.Itoa(blocks) + " 3")
	// A lock held by a program across the takeover, and one it waits for.
	lockPath := filepath.Join(mnt, "lock")
	writeFile(t, lockPath, nil)
	lf, err := os.Open(lockPath)
	must(t, err)
	defer lf.Close()
	must(t, syscall.Flock(int(lf.Fd()), syscall.LOCK_EX))
	// A program waiting on the mount for a lock another mount holds.
	waitPath := filepath.Join(mnt, "wait")
	writeFile(t, waitPath, nil)
	held, err := os.Open(filepath.Join(other, "wait"))
	must(t, err)
	defer held.Close()
	must(t, syscall.Flock(int(held.Fd()), syscall.LOCK_EX))
	waitsBefore := clientCounter(t, mnt, "flock_waits") // the flock above counts
	waiter := talk(t, "flock-hold "+waitPath+" flock")
	waiterIn, waitLines := waiter.in, waiter.lines
	for deadline := time.Now().Add(10 * time.Second); clientCounter(t, mnt, "flock_waits") == waitsBefore; {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never waited")
		}
		time.Sleep(10 * time.Millisecond)
	}

	time.Sleep(700 * time.Millisecond) // both well under way
	took := time.Now()
	next := c.TakeOver(mnt)
	t.Logf("takeover done in %v", time.Since(took))
	// The old daemon goes at once: the lock wait went with the mount, and
	// the new daemon answers it when the other mount lets go.
	select {
	case <-old.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the old daemon is still running 30s after the takeover")
	}
	if b, err := os.ReadFile(old.Log); err != nil || !strings.Contains(string(b), "(1 lock waits with it)") {
		t.Errorf("the old daemon did not hand its lock wait over:\n%s", b)
	}
	select {
	case <-time.After(300 * time.Millisecond):
	case l := <-waitLines:
		t.Fatalf("the waiter answered %q while another mount holds the lock", l)
	}
	must(t, syscall.Flock(int(held.Fd()), syscall.LOCK_UN))
	select {
	case l := <-waitLines:
		if l != "locked" {
			t.Fatalf("the lock wait across the takeover: %q", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the lock wait across the takeover was never answered")
	}
	// What it won is the new daemon's to release.
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != syscall.EWOULDBLOCK {
		t.Errorf("another mount took the lock the waiter won: %v", err)
	}
	fmt.Fprintln(waiterIn, "unlock")
	select {
	case l := <-waitLines:
		if l != "done <nil>" {
			t.Errorf("unlock through the new daemon: %q", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("unlock through the new daemon never returned")
	}
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("the waiter's lock, released through the new daemon, is still held: %v", err)
	}
	if b, err := os.ReadFile(old.Log); err == nil && !strings.Contains(string(b), "the mount is served by the new process") {
		t.Errorf("the old daemon did not say it handed over:\n%s", b)
	}
	if !servesFuse(next.Pid()) {
		t.Error("the new daemon holds no /dev/fuse descriptor")
	}

	for name, r := range map[string]struct {
		cmd *exec.Cmd
		out *bufio.Scanner
	}{"writer": {writer, wout}, "reader": {reader, rout}} {
		r.out.Scan()
		line := r.out.Text()
		if err := r.cmd.Wait(); err != nil || !strings.HasPrefix(line, "ok "+want) {
			t.Errorf("%s across the takeover: %q %v, want ok %s", name, line, err, want)
		}
		t.Logf("%s: %s", name, line)
	}
	if got := sha256.Sum256(readFile(t, filepath.Join(mnt, "dst"))); hex.EncodeToString(got[:]) != want {
		t.Error("the file written across the takeover reads back wrong through the new daemon")
	}
	for i, f := range open {
		b := make([]byte, 8)
		n, err := f.ReadAt(b, 0)
		if (err != nil && err != io.EOF) || string(b[:n]) != strconv.Itoa(i) {
			t.Fatalf("open file %d after the takeover: %q %v", i, b[:n], err)
		}
	}
	// The flock is still the program's: another mount cannot take it,
	// and once released through the new daemon, can.
	of, err := os.Open(filepath.Join(other, "lock"))
	must(t, err)
	defer of.Close()
	if err := syscall.Flock(int(of.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != syscall.EWOULDBLOCK {
		t.Errorf("another mount took a lock held across the takeover: %v", err)
	}
	must(t, syscall.Flock(int(lf.Fd()), syscall.LOCK_UN))
	if err := syscall.Flock(int(of.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("the lock released through the new daemon is still held: %v", err)
	}
	// And the new daemon hands over again.
	third := c.TakeOver(mnt)
	<-next.Done()
	if got := sha256.Sum256(readFile(t, src)); hex.EncodeToString(got[:]) != want || !servesFuse(third.Pid()) {
		t.Error("second takeover: the mount does not serve")
	}
}

// servesFuse reports whether process pid holds a /dev/fuse descriptor.
func servesFuse(pid int) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == "/dev/fuse" {
			return true
		}
	}
	return false
}
