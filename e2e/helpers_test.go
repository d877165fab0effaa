package e2e

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stripefs/stripefs/internal/testcluster"
)

// mount starts 2 MDTs and 4 OSTs as processes and mounts them.
func mount(t *testing.T, opts ...string) (*testcluster.Cluster, string) {
	t.Helper()
	c := testcluster.Start(t, 2, 4)
	return c, c.MountFS(opts...)
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if got := errnoOf(err); got != want {
		t.Errorf("%s: got %v (%v), want %v", what, got, err, want)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	must(t, os.WriteFile(path, data, 0o644))
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return b
}

// The helper process runs one file operation as another user, so tests of
// permission checks see what the kernel and the mount really enforce.
// STRIPEFS_AS="uid:gid[:group,group...]" and STRIPEFS_OP="op path [path2]".
func TestMain(m *testing.M) {
	if op := os.Getenv("STRIPEFS_OP"); op != "" {
		os.Exit(runOp(op))
	}
	os.Exit(m.Run())
}

func runOp(op string) int {
	f := strings.Fields(op)
	if strings.HasPrefix(f[0], "flock-") {
		return runFlockOp(f)
	}
	var err error
	if strings.HasPrefix(f[0], "stream-") {
		return runStreamOp(f)
	}
	if f[0] == "size-watch" || f[0] == "record-write" {
		return runSizeOp(f)
	}
	switch f[0] {
	case "writefile": // PATH BYTES: writeSteps; prints errno, failing step, bytes taken
		n, _ := strconv.Atoi(f[2])
		took, step, err := writeSteps(f[1], n)
		fmt.Println(int(errnoOf(err)), cmp.Or(step, "-"), took)
		return 0
	case "create":
		var fd int
		fd, err = syscall.Open(f[1], syscall.O_CREAT|syscall.O_WRONLY|syscall.O_EXCL, 0o644)
		if err == nil {
			syscall.Close(fd)
		}
	case "read":
		_, err = os.ReadFile(f[1])
	case "write":
		var fd int
		fd, err = syscall.Open(f[1], syscall.O_WRONLY, 0)
		if err == nil {
			syscall.Close(fd)
		}
	case "unlink":
		err = syscall.Unlink(f[1])
	case "mkdir":
		err = syscall.Mkdir(f[1], 0o755)
	case "chmod":
		err = syscall.Chmod(f[1], 0o777)
	case "readdir":
		_, err = os.ReadDir(f[1])
	case "rename":
		err = syscall.Rename(f[1], f[2])
	case "chown":
		err = syscall.Chown(f[1], 0, 0)
	case "truncate":
		err = syscall.Truncate(f[1], 0)
	case "setxattr":
		err = syscall.Setxattr(f[1], f[2], []byte("v"), 0)
	case "stat":
		var st syscall.Stat_t
		err = syscall.Stat(f[1], &st)
	case "access-w":
		err = syscall.Access(f[1], 2)
	case "utimes":
		err = syscall.Utimes(f[1], []syscall.Timeval{{Sec: 1}, {Sec: 1}})
	default:
		fmt.Println("bad op")
		return 2
	}
	fmt.Println(int(errnoOf(err)))
	return 0
}

// asUser runs op as uid:gid with supplementary groups and returns the
// errno it got (0 for success).
func asUser(t *testing.T, uid, gid uint32, groups []uint32, op string) syscall.Errno {
	t.Helper()
	cmd := helperCmd(t, op)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %q as %d:%d: %v %s", op, uid, gid, err, out)
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(out)))
	if err != nil {
		t.Fatalf("helper %q: output %q", op, out)
	}
	return syscall.Errno(n)
}

// helperCmd is the helper running op (runOp), not yet started, as the
// test's user unless the caller sets a credential.
func helperCmd(t *testing.T, op string) *exec.Cmd {
	cmd := exec.Command(helperBinary(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), "STRIPEFS_OP="+op)
	return cmd
}

// talker is a helper process the test talks to: lines to its stdin, its
// stdout's lines as they come.
type talker struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines <-chan string
}

// talk starts op in a helper process (helperCmd), killed when the test
// ends.
func talk(t *testing.T, op string) *talker {
	t.Helper()
	cmd := helperCmd(t, op)
	in, err := cmd.StdinPipe()
	must(t, err)
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &talker{cmd, in, linesOf(out)}
}

var (
	helperOnce sync.Once
	helperPath string
)

// helperBinary is a copy of the test binary that other users may execute
// (the go tool builds into a directory only root can enter).
func helperBinary(t *testing.T) string {
	helperOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stripefs-helper")
		if err != nil {
			return
		}
		os.Chmod(dir, 0o755)
		src, err := os.ReadFile(os.Args[0])
		if err != nil {
			return
		}
		p := filepath.Join(dir, "e2e.test")
		if os.WriteFile(p, src, 0o755) == nil {
			helperPath = p
		}
	})
	if helperPath == "" {
		t.Fatal("cannot copy the test binary for the helper process")
	}
	return helperPath
}

// startCluster starts 2 MDTs and 4 OSTs without mounting.
func startCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	return testcluster.Start(t, 2, 4)
}
