package fusefs

import (
	"os/exec"
	"syscall"
	"testing"
)

// dying reads the pending-signal mask of a thread: a live thread without
// SIGKILL pending is not dying, one that is gone is.
func TestDying(t *testing.T) {
	if dying(uint32(syscall.Gettid())) {
		t.Fatal("this thread is taken for dying")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if !dying(uint32(cmd.Process.Pid)) {
		t.Fatalf("pid %d, reaped, is not taken for gone", cmd.Process.Pid)
	}
}
