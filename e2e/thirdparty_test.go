package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needTool skips a test when a third-party program is missing, except in
// CI, whose script installs it: there a missing tool is a failure.
func needTool(t *testing.T, tool, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not installed (%s): .ci/run should install it", tool, pkg)
		}
		t.Skipf("%s not installed: apt-get install %s", tool, pkg)
	}
	return p
}

// TestDbench runs Samba's dbench load (creates, renames, unlinks, finds,
// reads and writes of 4 clients at once, each result checked against
// the one the trace expects) on the mount, in a directory of its own and
// in one striped over both MDTs.
func TestDbench(t *testing.T) {
	bin := needTool(t, "dbench", "dbench")
	c, mnt := mount(t)
	plain := filepath.Join(mnt, "plain")
	must(t, os.Mkdir(plain, 0o755))
	striped := filepath.Join(mnt, "striped")
	sfRun(t, c, "mkdir", "-c", "2", striped)
	for _, dir := range []string{plain, striped} {
		out, err := exec.Command(bin, "-D", dir, "-t", "6", "4").CombinedOutput()
		s := string(out)
		if err != nil || !strings.Contains(s, "Throughput") || strings.Contains(strings.ToLower(s), "error") {
			t.Fatalf("dbench in %s: %v\n%s", dir, err, tail(s, 40))
		}
		t.Logf("dbench in %s: %s", filepath.Base(dir), lastLine(s, "Throughput"))
	}
}

// TestFioVerify writes with fio, random 4 KiB and sequential 1 MiB
// blocks from 2 jobs, each block with a checksum, and reads every block
// back to verify it: over a 4-OST striped layout, erasure coded, and a
// composite (PFL) one whose components the writes instantiate.
func TestFioVerify(t *testing.T) {
	bin := needTool(t, "fio", "fio")
	c, mnt := mount(t)
	for _, l := range []struct{ name, setstripe string }{
		{"striped", "-c 4 -S 1M"},
		{"ec", "--ec 2+1 -S 1M"},
		{"pfl", "-E 1M -c 1 -S 64k -E 8M -c 2 -S 1M -E -1 -c -1"},
	} {
		dir := filepath.Join(mnt, l.name)
		must(t, os.Mkdir(dir, 0o755))
		sfRun(t, c, append(append([]string{"setstripe"}, strings.Fields(l.setstripe)...), dir)...)
		for _, job := range [][]string{
			{"--rw=randwrite", "--bs=4k", "--fsync=64"},
			{"--rw=write", "--bs=1m"},
		} {
			args := append([]string{"--name=verify", "--directory=" + dir, "--size=16m", "--numjobs=2",
				"--ioengine=psync", "--verify=crc32c", "--verify_fatal=1", "--do_verify=1", "--verify_state_save=0"}, job...)
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err != nil || strings.Contains(string(out), "verify:") && strings.Contains(string(out), "bad") {
				t.Fatalf("fio %v in %s: %v\n%s", job, l.name, err, tail(string(out), 40))
			}
			t.Logf("fio %s %s: %s", l.name, job[0], lastLine(string(out), "WRITE:"))
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// lastLine returns the last line of s containing sub.
func lastLine(s, sub string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], sub) {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}
