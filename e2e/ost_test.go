package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Grants, quotas and the OST's allocated-range accounting, through real
// server processes and a mount.

// writeSyncClose writes n bytes of a pattern to a new file path, fsyncs
// and closes it; it returns the first error.
func writeSyncClose(path string, n int) error {
	_, _, err := writeSteps(path, n)
	return err
}

// patterned is n bytes of pattern from offset 0.
func patterned(n int, seed byte) []byte {
	b := make([]byte, n)
	pattern(b, 0, seed)
	return b
}

// writeSteps is writeSyncClose that also says which step failed first
// (open, write, fsync, close; "" if none) and how many bytes write() took.
func writeSteps(path string, n int) (took int, step string, err error) {
	fd, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, "open", err
	}
	buf := make([]byte, 1<<20)
	for took < n {
		b := buf[:min(len(buf), n-took)]
		pattern(b, int64(took), 3)
		k, werr := fd.WriteAt(b, int64(took))
		took += k
		if werr != nil {
			err, step = werr, "write"
			break
		}
	}
	if err == nil {
		if err = fd.Sync(); err != nil {
			step = "fsync"
		}
	}
	if cerr := fd.Close(); err == nil && cerr != nil {
		err, step = cerr, "close"
	}
	return took, step, err
}

// asUserWrite runs writeSyncClose as uid:gid and returns its errno.
func asUserWrite(t *testing.T, uid, gid uint32, path string, n int) syscall.Errno {
	t.Helper()
	e, _, _ := asUserWriteSteps(t, uid, gid, path, n)
	return e
}

// asUserWriteSteps runs writeSteps as uid:gid.
func asUserWriteSteps(t *testing.T, uid, gid uint32, path string, n int) (syscall.Errno, string, int) {
	t.Helper()
	cmd := helperCmd(t, fmt.Sprintf("writefile %s %d", path, n))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper write as %d: %v %s", uid, err, out)
	}
	return parseSteps(t, out)
}

// parseSteps reads the "writefile" op's output: errno, the step that
// failed ("" if none), and the bytes write() took.
func parseSteps(t *testing.T, out []byte) (syscall.Errno, string, int) {
	t.Helper()
	var errno, took int
	var step string
	if _, err := fmt.Sscanf(string(out), "%d %s %d", &errno, &step, &took); err != nil {
		t.Fatalf("helper write: output %q: %v", out, err)
	}
	return syscall.Errno(errno), strings.Trim(step, "-"), took
}

// sfRun runs the stripefs binary and returns its standard output.
func sfRun(t *testing.T, c *testcluster.Cluster, args ...string) string {
	t.Helper()
	out, err := exec.Command(c.Bin, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("stripefs %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// usage is what target (ost1, mdt0-dom) reports the quota uses.
func (q quotaOf) usage(target string) uint64 {
	for _, tg := range q.Targets {
		if tg.Target == target {
			return tg.Usage
		}
	}
	return 0
}

// quotaOf is `stripefs quota --json`.
type quotaOf struct {
	BlockBytes uint64 `json:"block_bytes"`
	Inodes     uint64 `json:"inodes"`
	Targets    []struct {
		Target string `json:"target"`
		Usage  uint64 `json:"usage"`
	} `json:"targets"`
	Incomplete bool `json:"incomplete"`
}

func readQuota(t *testing.T, c *testcluster.Cluster, mnt, flag, id string) quotaOf {
	t.Helper()
	var q quotaOf
	out := sfRun(t, c, "quota", flag, id, "--json", mnt)
	if err := json.Unmarshal([]byte(out), &q); err != nil {
		t.Fatalf("quota --json: %v: %q", err, out)
	}
	if q.Incomplete {
		t.Fatalf("quota: a target did not answer: %s", out)
	}
	return q
}

// ostCall sends one request to an OST process.
func ostCall(t *testing.T, p *testcluster.Proc, method uint16, req, resp any) error {
	t.Helper()
	rc := rpc.NewClient(p.Addr, "e2e")
	rc.RetryFor = 20 * time.Second
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return rc.Do(ctx, &rpc.Call{Method: method, Req: req, Resp: resp})
}

func ostCounters(t *testing.T, p *testcluster.Proc) map[string]int64 {
	t.Helper()
	rc := rpc.NewClient(p.Addr, "e2e")
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := rpc.QueryStats(ctx, rc)
	must(t, err)
	m := map[string]int64{}
	for _, c := range r.Counters {
		m[c.Name] = c.Value
	}
	return m
}

// fsBlock is the block size of the filesystem under the OSTs.
const fsBlock = 4096

// extentSlack is how far usage may pass what the OSTs admitted, for
// files with at most one object on each OST. Usage is what the
// filesystem allocated (st_blocks), and an object's own extent-tree block
// is allocated at write-back, past the data admitted (ext4 charges these
// to quota even over the limit, so that write-back never fails): at most
// one per object for files of a few MiB.
func extentSlack(c *testcluster.Cluster, files int) uint64 {
	return uint64(files*len(c.OSTs)) * fsBlock
}

func ostSpace(t *testing.T, p *testcluster.Proc) proto.QuotaGetReply {
	t.Helper()
	var r proto.QuotaGetReply
	must(t, ostCall(t, p, proto.OQuotaGet, &proto.QuotaGetReq{}, &r))
	return r
}

// Limits set with setquota through the mount give EDQUOT through the
// mount: user blocks (written as that user), project blocks (written as
// root into a project directory) and user inodes.
func TestQuotaThroughMount(t *testing.T) {
	c, mnt := mount(t)
	dir := filepath.Join(mnt, "shared")
	must(t, os.Mkdir(dir, 0o777))
	must(t, os.Chmod(dir, 0o777))

	// User blocks: 8 MiB.
	sfRun(t, c, "setquota", "-u", "1000", "-b", "0:8M", mnt)
	if e := asUserWrite(t, 1000, 1000, filepath.Join(dir, "small"), 6<<20); e != 0 {
		t.Fatalf("6 MiB under an 8 MiB limit: %v", e)
	}
	// The OSTs told the client its owner is near the limit: its writes
	// are written through, and EDQUOT comes from write() itself, with
	// the size no further than what the OSTs took.
	big := filepath.Join(dir, "big")
	if e, step, took := asUserWriteSteps(t, 1000, 1000, big, 6<<20); e != syscall.EDQUOT || step != "write" {
		t.Fatalf("12 MiB under an 8 MiB limit: got %v at %q, want EDQUOT from write()", e, step)
	} else if st, err := os.Stat(big); err != nil || st.Size() != int64(took) {
		t.Fatalf("after EDQUOT at write() with %d bytes taken: stat %v %v", took, st.Size(), err)
	} else if got := readFile(t, big); !bytes.Equal(got, patterned(took, 3)) {
		t.Fatal("the bytes write() took before EDQUOT read back wrong")
	}
	q := readQuota(t, c, mnt, "-u", "1000")
	if q.BlockBytes > 8<<20+extentSlack(c, 2) || q.BlockBytes < 6<<20 {
		t.Errorf("uid 1000 uses %d bytes under an 8 MiB limit", q.BlockBytes)
	}
	// Another user is not limited.
	if e := asUserWrite(t, 1001, 1001, filepath.Join(dir, "other"), 10<<20); e != 0 {
		t.Errorf("uid 1001 without a limit: %v", e)
	}
	// Freeing space lets the user write again, once the objects are
	// destroyed (the client does that in the background) and the OSTs
	// have handed the freed quota back to the master.
	must(t, os.Remove(filepath.Join(dir, "big")))
	must(t, os.Remove(filepath.Join(dir, "small")))
	waitForQuota(t, func() bool { return readQuota(t, c, mnt, "-u", "1000").BlockBytes < 1<<20 })
	// The hand-back itself is asynchronous too: EDQUOT may last a moment.
	again := filepath.Join(dir, "again")
	for deadline := time.Now().Add(30 * time.Second); ; {
		e := asUserWrite(t, 1000, 1000, again, 7<<20)
		if e == 0 {
			break
		}
		if e != syscall.EDQUOT || time.Now().After(deadline) {
			t.Fatalf("after removing files: %v", e)
		}
		if err := os.Remove(again); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Project blocks: files created in a project directory inherit its id.
	proj := filepath.Join(mnt, "proj")
	must(t, os.Mkdir(proj, 0o755))
	sfRun(t, c, "project", "-p", "42", proj)
	sfRun(t, c, "setquota", "-p", "42", "-b", "0:4M", mnt)
	err := writeSyncClose(filepath.Join(proj, "f"), 3<<20)
	must(t, err)
	if v, _ := unix.Getxattr(filepath.Join(proj, "f"), proto.ProjidXattr, make([]byte, 16)); v == 0 {
		t.Error("a file made in a project directory has no project id")
	}
	err = writeSyncClose(filepath.Join(proj, "g"), 3<<20)
	wantErrno(t, "project over its block limit", err, syscall.EDQUOT)
	if q := readQuota(t, c, mnt, "-p", "42"); q.BlockBytes > 4<<20+extentSlack(c, 2) || q.Inodes != 2 {
		t.Errorf("project 42: %d bytes, %d inodes", q.BlockBytes, q.Inodes)
	}

	// User inodes: 5, counted over both MDTs.
	sfRun(t, c, "setquota", "-u", "1002", "-i", "0:5", mnt)
	for i := 0; i < 5; i++ {
		if e := asUser(t, 1002, 1002, nil, "create "+filepath.Join(dir, fmt.Sprintf("i%d", i))); e != 0 {
			t.Fatalf("create %d of 5: %v", i, e)
		}
	}
	if e := asUser(t, 1002, 1002, nil, "create "+filepath.Join(dir, "i5")); e != syscall.EDQUOT {
		t.Fatalf("6th create under a 5-inode limit: %v, want EDQUOT", e)
	}
	if e := asUser(t, 1002, 1002, nil, "mkdir "+filepath.Join(dir, "d5")); e != syscall.EDQUOT {
		t.Errorf("mkdir over the inode limit: %v, want EDQUOT", e)
	}
	must(t, os.Remove(filepath.Join(dir, "i0")))
	if e := asUser(t, 1002, 1002, nil, "create "+filepath.Join(dir, "i5")); e != 0 {
		t.Errorf("create after an unlink: %v", e)
	}
	if q := readQuota(t, c, mnt, "-u", "1002"); q.Inodes != 5 {
		t.Errorf("uid 1002 owns %d inodes, want 5", q.Inodes)
	}
	// Removing the limit lifts it.
	sfRun(t, c, "setquota", "-u", "1002", "-i", "0:0", mnt)
	if e := asUser(t, 1002, 1002, nil, "create "+filepath.Join(dir, "i6")); e != 0 {
		t.Errorf("create after the limit is removed: %v", e)
	}
}

// A full OST answers ENOSPC from write() itself, as Lustre's grants make
// it: the client caches only what its grant covers and writes the rest
// through. Every byte before the failing write is intact, the size never
// passes the data the OST took, and fsync has nothing left to fail. Once
// the OST grows, the rest can be written; rewriting a full object changes
// neither usage nor grants.
func TestOSTFullENOSPC(t *testing.T) {
	c := testcluster.Start(t, 1, 2)
	ost0 := c.OSTs[0]
	c.Stop(ost0)
	ost0.Args = append(ost0.Args, "--capacity", "16MiB")
	c.Restart(ost0)
	mnt := c.MountFS()
	path := filepath.Join(mnt, "full")
	sfRun(t, c, "setstripe", "-c", "1", "-i", "0", path)

	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	first := make([]byte, 8<<20)
	pattern(first, 0, 1)
	_, err = f.WriteAt(first, 0)
	must(t, err)
	must(t, f.Sync())

	// 16 MiB more into an OST of 16 MiB, in 1 MiB writes.
	more := make([]byte, 16<<20)
	pattern(more, 8<<20, 1)
	took := 0
	for ; took < len(more); took += 1 << 20 {
		n, err := f.WriteAt(more[took:took+1<<20], int64(8<<20+took))
		if err != nil {
			wantErrno(t, "write() past the OST's capacity", err, syscall.ENOSPC)
			took += n
			break
		}
	}
	if took == len(more) {
		t.Fatal("16 MiB more into a 16 MiB OST holding 8 MiB: every write() succeeded")
	}
	must(t, f.Sync()) // what write() took, the OST has room for
	st, err := f.Stat()
	must(t, err)
	if st.Size() != int64(8<<20+took) {
		t.Fatalf("size %d after write() took %d bytes past 8 MiB", st.Size(), took)
	}
	sp := ostSpace(t, ost0)
	// Usage may pass by the object's extent-tree block (see extentSlack),
	// and a grant given just before that block showed by less than
	// another.
	if sp.SpaceUsed > 16<<20+fsBlock || sp.SpaceUsed+sp.SpaceGranted > 16<<20+2*fsBlock {
		t.Errorf("OST used %d and granted %d of 16 MiB", sp.SpaceUsed, sp.SpaceGranted)
	}
	if took < 8<<20-2*fsBlock-(4<<20) {
		// The last write through that failed was at most one RPC.
		t.Errorf("write() took only %d of the 8 MiB the OST had left", took)
	}
	// Another client sees the same bytes and size.
	_, other := c.MountAt("other")
	got := readFile(t, filepath.Join(other, "full"))
	if len(got) != 8<<20+took || !bytes.Equal(got[:8<<20], first) || !bytes.Equal(got[8<<20:], more[:took]) {
		t.Fatalf("another client reads %d bytes, not the %d written before ENOSPC", len(got), 8<<20+took)
	}

	// More space (an administrator grows the OST): the rest goes in.
	var e proto.Empty
	must(t, ostCall(t, ost0, proto.OSetParam, &proto.OSetParamReq{Name: "capacity", Value: strconv.Itoa(64 << 20)}, &e))
	_, err = f.WriteAt(more[took:], int64(8<<20+took))
	must(t, err)
	must(t, f.Sync())
	all := make([]byte, 24<<20)
	_, err = f.ReadAt(all, 0)
	must(t, err)
	if !bytes.Equal(all[:8<<20], first) || !bytes.Equal(all[8<<20:], more) {
		t.Fatal("after space came back, the file does not hold every byte written")
	}

	// Full again, with exactly what is used: rewriting the object needs
	// no space, and changes neither usage nor grants.
	sp = ostSpace(t, ost0)
	must(t, ostCall(t, ost0, proto.OSetParam, &proto.OSetParamReq{Name: "capacity", Value: strconv.FormatUint(sp.SpaceUsed, 10)}, &e))
	before := ostCounters(t, ost0)
	rewrite := make([]byte, 20<<20)
	pattern(rewrite, 0, 2)
	_, err = f.WriteAt(rewrite, 2<<20)
	must(t, err)
	must(t, f.Sync())
	after := ostCounters(t, ost0)
	sp2 := ostSpace(t, ost0)
	if sp2.SpaceUsed != sp.SpaceUsed || sp2.SpaceGranted != sp.SpaceGranted {
		t.Errorf("rewrite of a full object: used %d→%d, granted %d→%d", sp.SpaceUsed, sp2.SpaceUsed, sp.SpaceGranted, sp2.SpaceGranted)
	}
	if n := after["rewrites_skipped_accounting"] - before["rewrites_skipped_accounting"]; n < 20 {
		t.Errorf("rewrites_skipped_accounting grew by %d for 20 MiB of rewrites", n)
	}
	if n := after["new_allocations"] - before["new_allocations"]; n != 0 {
		t.Errorf("the rewrite allocated %d times", n)
	}
	copy(all[2<<20:], rewrite)
	must(t, f.Close())
	c.Unmount()
	c.MountFS()
	if got := readFile(t, path); !bytes.Equal(got, all) {
		t.Fatal("after remount the file differs")
	}
}

// Usage stays right across kill -9 of the OST processes (the index is
// reconciled with the object files) and across rewrites, including with
// FIEMAP failing after the restart (STRIPEFS_FIEMAP_FAIL).
func TestOSTUsageSurvivesKill9(t *testing.T) {
	c, mnt := mount(t)
	proj := filepath.Join(mnt, "p")
	must(t, os.Mkdir(proj, 0o755))
	must(t, unix.Setxattr(proj, "lustre.lov", []byte("stripe_count=-1"), 0))
	sfRun(t, c, "project", "-p", "7", proj)
	sizes := []int{1, 4095, 1 << 20, 3<<20 + 17, 9 << 20}
	for i, n := range sizes {
		must(t, writeSyncClose(filepath.Join(proj, fmt.Sprintf("f%d", i)), n))
	}
	q := readQuota(t, c, mnt, "-p", "7")
	if q.BlockBytes < uint64(1+4095+1<<20+3<<20+17+9<<20) || q.Inodes != uint64(len(sizes)) {
		t.Fatalf("before: %d bytes, %d inodes", q.BlockBytes, q.Inodes)
	}
	// Straight after more writes (their index updates maybe not yet
	// synced), every OST dies.
	must(t, writeSyncClose(filepath.Join(proj, "late"), 5<<20))
	q = readQuota(t, c, mnt, "-p", "7")
	for _, p := range c.OSTs {
		c.Kill9(p)
	}
	t.Setenv("STRIPEFS_FIEMAP_FAIL", "1")
	for _, p := range c.OSTs {
		c.Restart(p)
	}
	q2 := readQuota(t, c, mnt, "-p", "7")
	if q2.BlockBytes != q.BlockBytes {
		t.Errorf("after kill -9: %d bytes, before %d", q2.BlockBytes, q.BlockBytes)
	}
	for i := range q.Targets {
		if q.Targets[i] != q2.Targets[i] {
			t.Errorf("%s: %d before kill -9, %d after", q.Targets[i].Target, q.Targets[i].Usage, q2.Targets[i].Usage)
		}
	}

	// Rewrites (FIEMAP now failing, the fallback answers) change nothing.
	f, err := os.OpenFile(filepath.Join(proj, "f4"), os.O_RDWR, 0)
	must(t, err)
	buf := make([]byte, 9<<20)
	pattern(buf, 0, 9)
	_, err = f.WriteAt(buf, 0)
	must(t, err)
	must(t, f.Sync())
	must(t, f.Close())
	var fallbacks, skipped int64
	for _, p := range c.OSTs {
		m := ostCounters(t, p)
		fallbacks += m["fiemap_fallbacks"]
		skipped += m["rewrites_skipped_accounting"]
	}
	if fallbacks == 0 || skipped == 0 {
		t.Errorf("with STRIPEFS_FIEMAP_FAIL=1: %d fallbacks, %d rewrites skipped accounting", fallbacks, skipped)
	}
	if q3 := readQuota(t, c, mnt, "-p", "7"); q3.BlockBytes != q.BlockBytes {
		t.Errorf("after rewriting f4: %d bytes, before %d", q3.BlockBytes, q.BlockBytes)
	}
	if got := readFile(t, filepath.Join(proj, "f4")); !bytes.Equal(got, buf) {
		t.Error("f4 does not hold its rewrite")
	}

	// The MDTs' inode counts survive kill -9 too, and unlink gives back
	// both inodes and blocks.
	for _, p := range c.MDTs {
		c.Kill9(p)
	}
	for _, p := range c.MDTs {
		c.Restart(p)
	}
	// An idempotent call first: the mount finds the restarted MDTs (a
	// non-idempotent one on a connection that died is not resent).
	_, _ = os.ReadDir(proj)
	must(t, os.Remove(filepath.Join(proj, "f4")))
	must(t, os.Remove(filepath.Join(proj, "late")))
	waitForQuota(t, func() bool {
		q4 := readQuota(t, c, mnt, "-p", "7")
		return q4.Inodes == uint64(len(sizes)-1) && q4.BlockBytes <= q.BlockBytes-14<<20
	})
}

// waitForQuota polls: object destruction after unlink is asynchronous.
func waitForQuota(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("quota usage did not settle")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDf: stripefs df lists every target with its own space (here OSTs
// capped at 64 MiB, one holding a file), sums the OSTs as statfs on the
// mount does, and lists a dead OST as inactive, exit status 1, while
// still printing the others; so does stripefs stats.
func TestDf(t *testing.T) {
	c, mnt := mount(t)
	var e proto.Empty
	for _, o := range c.OSTs {
		must(t, ostCall(t, o, proto.OSetParam, &proto.OSetParamReq{Name: "capacity", Value: strconv.Itoa(64 << 20)}, &e))
	}
	path := filepath.Join(mnt, "on-ost1")
	sfRun(t, c, "setstripe", "-c", "1", "-i", "1", path)
	must(t, os.WriteFile(path, bytes.Repeat([]byte{7}, 8<<20), 0o644))
	f, err := os.Open(path)
	must(t, err)
	must(t, f.Sync())
	f.Close()
	df := func() (dfReport, error) {
		var rep dfReport
		out, err := exec.Command(c.Bin, "df", "--json", mnt).Output()
		if jerr := json.Unmarshal(out, &rep); jerr != nil {
			t.Fatalf("df --json: %v: %q (%v)", jerr, out, err)
		}
		return rep, err
	}
	rep, err := df()
	must(t, err)
	if len(rep.Targets) != len(c.MDTs)+len(c.OSTs) {
		t.Fatalf("df lists %d targets, want %d", len(rep.Targets), len(c.MDTs)+len(c.OSTs))
	}
	var st syscall.Statfs_t
	must(t, syscall.Statfs(mnt, &st))
	if got, want := rep.Summary.Bytes, st.Blocks*uint64(st.Bsize); got != want || got != 4*64<<20 {
		t.Errorf("summary %d bytes, statfs on the mount %d, want 256 MiB", got, want)
	}
	for _, d := range rep.Targets {
		switch {
		case d.Kind == proto.KindMDT:
			if d.Inodes == 0 || d.Error != "" {
				t.Errorf("mdt%d: %+v", d.Index, d)
			}
		case d.Bytes != 64<<20:
			t.Errorf("ost%d: %d bytes, want its 64 MiB capacity", d.Index, d.Bytes)
		case d.Index == 1 && d.Used < 8<<20:
			t.Errorf("ost1 holds the 8 MiB file, yet uses %d bytes", d.Used)
		case d.Index != 1 && d.Used >= 1<<20:
			t.Errorf("ost%d holds nothing, yet uses %d bytes", d.Index, d.Used)
		}
	}
	c.Kill9(c.OSTs[3])
	rep, err = df()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("df with an OST down: %v, want exit status 1", err)
	}
	for _, d := range rep.Targets {
		if dead := d.Kind == proto.KindOST && d.Index == 3; dead != (d.Error != "") {
			t.Errorf("with ost3 down: %+v", d)
		}
	}
	if rep.Summary.Bytes != 3*64<<20 {
		t.Errorf("summary with ost3 down: %d bytes, want the other three's 192 MiB", rep.Summary.Bytes)
	}
	// stripefs stats too prints what answered, and fails.
	out, err := exec.Command(c.Bin, "stats", mnt).Output()
	if err == nil || !strings.Contains(string(out), "obdfilter.ost3: inactive device") ||
		!strings.Contains(string(out), "obdfilter.ost0.") || !strings.Contains(string(out), "llite.client.") {
		t.Errorf("stats with ost3 down: %v\n%s", err, out)
	}
}

// dfReport is stripefs df --json's output.
type dfReport struct {
	Targets []dfTarget `json:"targets"`
	Summary dfTarget   `json:"summary"`
}

type dfTarget struct {
	Kind   string `json:"kind"`
	Index  uint32 `json:"index"`
	Bytes  uint64 `json:"bytes"`
	Used   uint64 `json:"used"`
	Inodes uint64 `json:"inodes"`
	Error  string `json:"error"`
}
