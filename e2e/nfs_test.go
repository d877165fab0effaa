package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"

	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/stats"
)

// The user-space NFSv3 gateway, driven by an NFS client nobody here
// wrote: libnfs's command-line tools (Debian's libnfs-utils). go-nfs serves
// MOUNT and NFS on one port and does not answer MOUNT's EXPORT call, so the
// URLs name both ports and turn nested-export discovery off.

var nfsReadyRE = regexp.MustCompile(`nfs gateway ready on (\S+)`)

// nfsGateway is a running `stripefs nfs` process.
type nfsGateway struct {
	port string
	log  string
	stop func() // SIGTERM, and wait; idempotent
}

// url is the libnfs URL of path (absolute, within the filesystem).
func (g *nfsGateway) url(path string) string {
	return fmt.Sprintf("nfs://127.0.0.1/%s?nfsport=%s&mountport=%s&version=3&auto-traverse-mounts=0", path, g.port, g.port)
}

// needNFSTools skips a test when libnfs-utils is missing (needTool).
func needNFSTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"nfs-cp", "nfs-ls", "nfs-cat"} {
		needTool(t, tool, "libnfs-utils")
	}
}

// startNFS runs the gateway as its own process against c's servers and
// stops it when the test ends.
func startNFS(t *testing.T, c *testcluster.Cluster, extra ...string) *nfsGateway {
	t.Helper()
	if !slices.ContainsFunc(extra, func(a string) bool { return strings.Contains(a, "squash") }) {
		// The tests write as root through the gateway, the way they did
		// before its callers' ids counted; TestNFSCredentials tests the
		// default, root squashed.
		extra = append(extra, "--no-root-squash")
	}
	return startNFSArgs(t, c, extra...)
}

// startNFSArgs is startNFS with exactly the flags given.
func startNFSArgs(t *testing.T, c *testcluster.Cluster, extra ...string) *nfsGateway {
	t.Helper()
	needNFSTools(t)
	g := &nfsGateway{log: filepath.Join(t.TempDir(), "nfs.log")}
	logf, err := os.Create(g.log)
	must(t, err)
	defer logf.Close()
	r, w, err := os.Pipe()
	must(t, err)
	cmd := exec.Command(c.Bin, append([]string{"nfs", "--mgs", c.MGS, "--listen", "127.0.0.1:0"}, extra...)...)
	cmd.Stdout, cmd.Stderr = w, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	ready := make(chan string, 1)
	go func() {
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if m := nfsReadyRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case ready <- m[1]:
				default:
				}
			}
		}
	}()
	var once sync.Once
	g.stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(func() {
		g.stop()
		if t.Failed() {
			b, _ := os.ReadFile(g.log)
			t.Logf("--- nfs gateway log:\n%s", b)
		}
	})
	select {
	case addr := <-ready:
		_, port, err := net.SplitHostPort(addr)
		must(t, err)
		g.port = port
	case <-done:
		b, _ := os.ReadFile(g.log)
		t.Fatalf("nfs gateway exited before it was ready:\n%s", b)
	case <-time.After(60 * time.Second):
		t.Fatal("nfs gateway not ready after 60s")
	}
	return g
}

// nfsTool runs one libnfs tool with a time limit.
func nfsTool(tool string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

func mustNFS(t *testing.T, tool string, args ...string) []byte {
	t.Helper()
	out, err := nfsTool(tool, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, out)
	}
	return out
}

// ostReads counts the read RPCs every OST has served.
func ostReads(t *testing.T, c *testcluster.Cluster) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := stats.FromServers(ctx, c.MGS)
	must(t, err)
	return s.Calls("ost", "ost_read")
}

// nfsLs parses nfs-ls output into name → size.
func nfsLs(t *testing.T, out []byte) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 {
			continue
		}
		size, err := strconv.ParseInt(f[4], 10, 64)
		if err != nil {
			t.Fatalf("nfs-ls line %q: %v", l, err)
		}
		m[f[len(f)-1]] = size
	}
	return m
}

func randomFile(t *testing.T, path string, n int, seed uint64) [32]byte {
	t.Helper()
	data := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}).Read(data)
	writeFile(t, path, data)
	return sha256.Sum256(data)
}

func fileSum(t *testing.T, path string) ([32]byte, int) {
	t.Helper()
	b := readFile(t, path)
	return sha256.Sum256(b), len(b)
}

// TestNFSGateway copies files of several sizes in and out through the
// gateway with nfs-cp, checks them through the FUSE mount of the same
// filesystem, and lists directories with nfs-ls.
func TestNFSGateway(t *testing.T) {
	c, mnt := mount(t)
	g := startNFS(t, c)
	must(t, os.Mkdir(filepath.Join(mnt, "in"), 0o755))
	local := t.TempDir()
	sizes := []struct {
		name string
		n    int
	}{{"empty", 0}, {"one", 1}, {"mib-plus-one", 1<<20 + 1}, {"hundred-mib", 100 << 20}}
	for i, s := range sizes {
		src := filepath.Join(local, s.name)
		want := randomFile(t, src, s.n, uint64(i))

		reads := ostReads(t, c)
		start := time.Now()
		mustNFS(t, "nfs-cp", src, g.url("/in/"+s.name))
		took := time.Since(start)
		if d := ostReads(t, c) - reads; d != 0 {
			t.Errorf("%s: %d OST read RPCs while nfs-cp wrote it: writes must not read", s.name, d)
		}
		if s.n >= 100<<20 {
			t.Logf("nfs-cp in, %d MiB: %v (%.0f MiB/s)", s.n>>20, took.Round(time.Millisecond), float64(s.n)/(1<<20)/took.Seconds())
		}
		// nfs-cp ends with a COMMIT: the FUSE mount (another client) sees
		// the whole file at once.
		if got, n := fileSum(t, filepath.Join(mnt, "in", s.name)); got != want || n != s.n {
			t.Errorf("%s through FUSE after nfs-cp in: %d bytes, checksum differs: %v", s.name, n, got != want)
		}
		back := src + ".back"
		mustNFS(t, "nfs-cp", g.url("/in/"+s.name), back)
		if got, n := fileSum(t, back); got != want || n != s.n {
			t.Errorf("%s after nfs-cp out: %d bytes, want %d, checksum differs: %v", s.name, n, s.n, got != want)
		}
	}

	// nfs-ls lists names and sizes.
	ls := nfsLs(t, mustNFS(t, "nfs-ls", g.url("/in")))
	for _, s := range sizes {
		if n, ok := ls[s.name]; !ok || n != int64(s.n) {
			t.Errorf("nfs-ls: %s has size %d (listed %v), want %d", s.name, n, ok, s.n)
		}
	}
	if root := nfsLs(t, mustNFS(t, "nfs-ls", g.url("/"))); len(root) != 1 {
		t.Errorf("nfs-ls of the root: %v, want just in/", root)
	}

	// What FUSE writes, NFS reads.
	writeFile(t, filepath.Join(mnt, "in", "from-fuse.txt"), []byte("written through FUSE\n"))
	if out := mustNFS(t, "nfs-cat", g.url("/in/from-fuse.txt")); string(out) != "written through FUSE\n" {
		t.Errorf("nfs-cat of a file written through FUSE: %q", out)
	}

	// nfs-cp creates GUARDED: onto an existing name it must fail and leave
	// the file as it was.
	if out, err := nfsTool("nfs-cp", filepath.Join(local, "one"), g.url("/in/mib-plus-one")); err == nil {
		t.Errorf("nfs-cp onto an existing file succeeded:\n%s", out)
	}
	if got, n := fileSum(t, filepath.Join(mnt, "in", "mib-plus-one")); n != 1<<20+1 || got != sha256.Sum256(readFile(t, filepath.Join(local, "mib-plus-one"))) {
		t.Errorf("a refused nfs-cp changed the file: %d bytes", n)
	}

	// A directory longer than one READDIR reply.
	many := filepath.Join(mnt, "many")
	must(t, os.Mkdir(many, 0o755))
	const nMany = 700
	for i := range nMany {
		writeFile(t, filepath.Join(many, fmt.Sprintf("entry-with-a-longish-name-%04d", i)), []byte{byte(i)})
	}
	if ls := nfsLs(t, mustNFS(t, "nfs-ls", g.url("/many"))); len(ls) != nMany {
		t.Errorf("nfs-ls of %d entries listed %d", nMany, len(ls))
	}

	// Errors reach the client as errors.
	if out, err := nfsTool("nfs-cat", g.url("/in/no-such-file")); err == nil {
		t.Errorf("nfs-cat of a missing file succeeded: %q", out)
	}
	if out, err := nfsTool("nfs-ls", g.url("/no-such-dir")); err == nil {
		t.Errorf("nfs-ls of a missing directory succeeded: %q", out)
	}
}

// nfsMount mounts the gateway's export with go-nfs-client, over one
// connection (it has no portmapper to ask).
func nfsMount(t *testing.T, g *nfsGateway) *nfsc.Target {
	t.Helper()
	// The client binds a random local port and does not retry one in use.
	var client *rpc.Client
	var err error
	for range 20 {
		if client, err = rpc.DialTCP("tcp", "127.0.0.1:"+g.port, false); !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	must(t, err)
	t.Cleanup(client.Close)
	target, err := (&nfsc.Mount{Client: client}).Mount("/", rpc.NewAuthUnix("test", 0, 0).Auth())
	must(t, err)
	return target
}

// TestNFSHandlesSurviveRestart: a file handle is the FID, so one obtained
// from a gateway still names the same file after that gateway was
// replaced by a new process, and its file id is the inode number the
// FUSE mount shows.
func TestNFSHandlesSurviveRestart(t *testing.T) {
	c, mnt := mount(t)
	must(t, os.MkdirAll(filepath.Join(mnt, "d", "e"), 0o755))
	writeFile(t, filepath.Join(mnt, "d", "e", "f"), []byte("twelve bytes"))
	var st syscall.Stat_t
	must(t, syscall.Stat(filepath.Join(mnt, "d", "e", "f"), &st))

	g := startNFS(t, c)
	_, fh, err := nfsMount(t, g).Lookup("/d/e/f")
	must(t, err)
	_, dh, err := nfsMount(t, g).Lookup("/d/e")
	must(t, err)
	g.stop()

	g2 := startNFS(t, c, "--listen", "127.0.0.1:"+g.port)
	target := nfsMount(t, g2)
	a, err := target.GetAttr(fh)
	if err != nil {
		t.Fatalf("GETATTR of a handle from the previous gateway: %v", err)
	}
	if a.Filesize != 12 || a.Fileid != st.Ino {
		t.Errorf("old handle: size %d, file id %d; want 12 and the FUSE inode %d", a.Filesize, a.Fileid, st.Ino)
	}
	if a, err := target.GetAttr(dh); err != nil || a.Type != nfsc.NF3Dir {
		t.Errorf("old directory handle: %+v, %v", a, err)
	}
	// A handle the gateway never made is stale, not a crash.
	if _, err := target.GetAttr([]byte("not a stripefs handle")); err == nil {
		t.Errorf("GETATTR of a forged handle succeeded")
	}
}

// TestNFSAllowList checks that a client outside --allow is refused.
func TestNFSAllowList(t *testing.T) {
	c := startCluster(t)
	// TEST-NET-1: documentation addresses, so loopback is not allowed.
	g := startNFS(t, c, "--allow", "192.0.2.0/24")
	if out, err := nfsTool("nfs-ls", g.url("/")); err == nil {
		t.Errorf("a client outside --allow listed the export:\n%s", out)
	}
	b, _ := os.ReadFile(g.log)
	if !bytes.Contains(b, []byte("refused 127.0.0.1:")) {
		t.Errorf("the gateway did not log the refusal:\n%s", b)
	}
}

// TestNFSWriteThroughput is the target, run on demand:
//
//	STRIPEFS_NFS_BENCH=1 [STRIPEFS_NFS_BENCH_MB=1024] [STRIPEFS_NFS_BENCH_ROUNDS=3] \
//		go test ./e2e -run TestNFSWriteThroughput -v
//
// It writes the same file through the gateway with nfs-cp and through the
// FUSE mount with cp, and with dd conv=fsync (cp plus the fsync that
// nfs-cp's closing COMMIT amounts to), in rounds whose order rotates;
// reports the median rate of each and their ratios, and fails if any copy
// made an OST read.
func TestNFSWriteThroughput(t *testing.T) {
	if os.Getenv("STRIPEFS_NFS_BENCH") == "" {
		t.Skip("set STRIPEFS_NFS_BENCH=1 to run (writes 1 GiB 3 times per round)")
	}
	envInt := func(name string, def int) int {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q", name, v)
		}
		return n
	}
	mb, rounds := envInt("STRIPEFS_NFS_BENCH_MB", 1024), envInt("STRIPEFS_NFS_BENCH_ROUNDS", 3)
	c, mnt := mount(t)
	g := startNFS(t, c)
	src := filepath.Join(t.TempDir(), "src")
	randomFile(t, src, mb<<20, 42)
	readFile(t, src) // in the page cache for every copy alike

	copies := []struct {
		name string
		run  func(dst string) ([]byte, error)
	}{
		{"fuse cp", func(dst string) ([]byte, error) { return exec.Command("cp", src, dst).CombinedOutput() }},
		{"nfs-cp", func(dst string) ([]byte, error) { return nfsTool("nfs-cp", src, g.url("/"+filepath.Base(dst))) }},
		{"fuse cp+fsync", func(dst string) ([]byte, error) {
			return exec.Command("dd", "if="+src, "of="+dst, "bs=1M", "conv=fsync").CombinedOutput()
		}},
	}
	rates := map[string][]float64{}
	reads := map[string]int64{}
	for r := range rounds {
		for i := range copies {
			cp := copies[(i+r)%len(copies)]
			dst := filepath.Join(mnt, fmt.Sprintf("bench-%d-%d", r, i))
			before := ostReads(t, c)
			start := time.Now()
			if out, err := cp.run(dst); err != nil {
				t.Fatalf("%s: %v\n%s", cp.name, err, out)
			}
			took := time.Since(start)
			reads[cp.name] += ostReads(t, c) - before
			rates[cp.name] = append(rates[cp.name], float64(mb)/took.Seconds())
			must(t, os.Remove(dst))
		}
	}
	median := map[string]float64{}
	for _, cp := range copies {
		rs := rates[cp.name]
		slices.Sort(rs)
		median[cp.name] = rs[len(rs)/2]
		t.Logf("%-14s %d MiB x %d: median %4.0f MiB/s (all: %.0f), %d OST read RPCs",
			cp.name, mb, rounds, median[cp.name], rs, reads[cp.name])
		if reads[cp.name] != 0 {
			t.Errorf("%s: %d OST read RPCs during pure writes", cp.name, reads[cp.name])
		}
	}
	t.Logf("nfs-cp / fuse cp = %.2f; nfs-cp / fuse cp+fsync = %.2f",
		median["nfs-cp"]/median["fuse cp"], median["nfs-cp"]/median["fuse cp+fsync"])
}
