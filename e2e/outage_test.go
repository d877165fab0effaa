package e2e

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stripefs/stripefs/internal/testcluster"
)

// The helper op of this file runs in a copy of the test binary:
// STRIPEFS_OUTAGE_OP="read PATH" reads the file to its end, "write PATH
// BYTES" is writeSteps; each prints the errno, the step that failed and
// the bytes done.
func init() {
	op := os.Getenv("STRIPEFS_OUTAGE_OP")
	if op == "" {
		return
	}
	f := strings.Fields(op)
	switch {
	case len(f) == 2 && f[0] == "read":
		b, err := os.ReadFile(f[1])
		fmt.Println(int(errnoOf(err)), "read", len(b))
	case len(f) == 3 && f[0] == "write":
		n, _ := strconv.Atoi(f[2])
		took, step, err := writeSteps(f[1], n)
		fmt.Println(int(errnoOf(err)), cmp.Or(step, "-"), took)
	default:
		fmt.Println("bad op")
		os.Exit(2)
	}
	os.Exit(0)
}

// outageCmd is the helper running op, not yet started.
func outageCmd(t *testing.T, op string) *exec.Cmd {
	cmd := exec.Command(helperBinary(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), "STRIPEFS_OUTAGE_OP="+op)
	return cmd
}

// outageOp runs op and returns its errno, failing step and how long it
// took.
func outageOp(t *testing.T, op string) (syscall.Errno, string, time.Duration) {
	t.Helper()
	start := time.Now()
	out, err := outageCmd(t, op).Output()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("helper %q: %v %s", op, err, out)
	}
	var errno, n int
	var step string
	if _, err := fmt.Sscanf(string(out), "%d %s %d", &errno, &step, &n); err != nil {
		t.Fatalf("helper %q: output %q: %v", op, out, err)
	}
	return syscall.Errno(errno), step, took
}

// A reader and a writer of files whose OST is down get EIO within
// --retry-for (and a few seconds) — the OST killed (connections refused)
// or stopped (connections that stay open and silent, as a hung server or
// a cut network leaves them) — and a program blocked on the stopped OST
// ends at once when killed.
func TestOSTOutage(t *testing.T) {
	c := testcluster.Start(t, 1, 2)
	const retry = 3 * time.Second
	// The mount gives up on a silent server after min(retry/2, 20s),
	// at least 1s (fs.Client's DeadAfter).
	const deadAfter = retry / 2
	mnt := c.MountWith([]string{"--retry-for", retry.String()})
	r, w := filepath.Join(mnt, "r"), filepath.Join(mnt, "w")
	for _, p := range []string{r, w} {
		sfRun(t, c, "setstripe", "-c", "1", "-i", "0", p)
	}
	must(t, writeSyncClose(r, 8<<20))
	ost0 := c.OSTs[0]

	check := func(what string, bound time.Duration) {
		t.Helper()
		if e, step, took := outageOp(t, "read "+r); e != syscall.EIO || took > bound {
			t.Errorf("%s: reader got %v at %s after %s, want EIO within %s", what, e, step, took.Round(time.Millisecond), bound)
		}
		if e, step, took := outageOp(t, fmt.Sprintf("write %s %d", w, 32<<20)); e != syscall.EIO || took > bound {
			t.Errorf("%s: writer got %v at %s after %s, want EIO within %s", what, e, step, took.Round(time.Millisecond), bound)
		}
	}
	c.Kill9(ost0)
	check("OST killed", retry+5*time.Second)

	c.Restart(ost0)
	if e, _, _ := outageOp(t, "read "+r); e != 0 {
		t.Fatalf("read after the OST came back: %v", e)
	}
	c.Signal(ost0, syscall.SIGSTOP)
	t.Cleanup(func() { _ = syscall.Kill(ost0.Pid(), syscall.SIGCONT) })
	check("OST stopped", deadAfter+retry+5*time.Second)

	// A program blocked on the stopped OST ends when killed, at once.
	cmd := outageCmd(t, "read "+r)
	must(t, cmd.Start())
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	select {
	case <-exited:
		t.Fatal("the reader of a file on a stopped OST ended within 500ms: it was never blocked")
	case <-time.After(500 * time.Millisecond):
	}
	must(t, cmd.Process.Kill())
	start := time.Now()
	select {
	case <-exited:
		if d := time.Since(start); d > time.Second {
			t.Errorf("kill -9 of a reader blocked on a stopped OST took %s", d)
		}
	case <-time.After(deadAfter + retry + 5*time.Second):
		t.Fatal("kill -9 did not end a reader blocked on a stopped OST")
	}
}
