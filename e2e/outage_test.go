package e2e

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stripefs/stripefs/internal/testcluster"
)

// timed runs the helper op (runOp) to its end and returns its output and
// how long it took.
func timed(t *testing.T, op string) ([]byte, time.Duration) {
	t.Helper()
	start := time.Now()
	out, err := helperCmd(t, op).Output()
	if err != nil {
		t.Fatalf("helper %q: %v %s", op, err, out)
	}
	return out, time.Since(start)
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
		if out, took := timed(t, "read "+r); strings.TrimSpace(string(out)) != strconv.Itoa(int(syscall.EIO)) || took > bound {
			t.Errorf("%s: reader got errno %s after %s, want EIO within %s", what, bytes.TrimSpace(out), took.Round(time.Millisecond), bound)
		}
		out, took := timed(t, fmt.Sprintf("writefile %s %d", w, 32<<20))
		if e, step, _ := parseSteps(t, out); e != syscall.EIO || took > bound {
			t.Errorf("%s: writer got %v at %s after %s, want EIO within %s", what, e, step, took.Round(time.Millisecond), bound)
		}
	}
	c.Kill9(ost0)
	check("OST killed", retry+5*time.Second)

	c.Restart(ost0)
	if out, _ := timed(t, "read "+r); strings.TrimSpace(string(out)) != "0" {
		t.Fatalf("read after the OST came back: errno %s", out)
	}
	c.Signal(ost0, syscall.SIGSTOP)
	t.Cleanup(func() { _ = syscall.Kill(ost0.Pid(), syscall.SIGCONT) })
	check("OST stopped", deadAfter+retry+5*time.Second)

	// A program blocked on the stopped OST ends when killed, at once.
	cmd := helperCmd(t, "read "+r)
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
