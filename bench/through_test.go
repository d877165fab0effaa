package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// On a local directory the rewrite test runs every mode and round, checks
// what it wrote, and leaves nothing behind.
func TestThroughRewrite(t *testing.T) {
	dir := t.TempDir()
	res, err := ThroughRewrite(context.Background(), ThroughConfig{Dir: dir, Size: 2 << 20, Streams: 2, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified || len(res.Passes) != 8 || len(res.Comparisons) != 2 {
		t.Fatalf("implausible result %+v", res)
	}
	for i, p := range res.Passes {
		want := []string{"write", "rewrite"}[i%2]
		if p.Name != want || p.Bytes != 4<<20 || p.MiBps <= 0 || p.Counters != nil {
			t.Errorf("pass %d: %+v", i, p)
		}
	}
	for _, c := range res.Comparisons {
		if len(c.Ratios) != 2 || c.Median <= 0 || c.Min > c.Median || c.Best <= 0 {
			t.Errorf("comparison %+v", c)
		}
	}
	checkGone(t, dir)
	var buf bytes.Buffer
	if err := res.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rewrite/write buffered: median", "rewrite/write direct: median", "verification: ok", "n/a"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

// Local filesystems refuse nfsd's vector with O_DIRECT (ext4, xfs), and
// the test says so; where one takes it (tmpfs), the run completes.
func TestThroughNFSOnLocalDisk(t *testing.T) {
	dir := t.TempDir()
	res, err := ThroughNFS(context.Background(), ThroughConfig{Dir: dir, Size: 1 << 20, Streams: 1, Rounds: 2})
	if err != nil {
		if !strings.Contains(err.Error(), "refuses O_DIRECT vectors") {
			t.Fatalf("unexpected error: %v", err)
		}
		t.Logf("as expected on this filesystem: %v", err)
		return
	}
	if !res.Verified || len(res.Passes) != 4 || res.Comparisons[0].Name != "nfs/aligned" {
		t.Fatalf("implausible result %+v", res)
	}
}

// Verification catches a byte that is not what the last pass wrote.
func TestThroughVerifyCatchesCorruption(t *testing.T) {
	dir := t.TempDir()
	tr := newThroughRun(ThroughConfig{Dir: dir, Size: 2 << 20, Streams: 1, Rounds: 1})
	ctx := context.Background()
	if _, err := tr.pass(ctx, "write", "buffered", 0, false, true, aligned1MiB); err != nil {
		t.Fatal(err)
	}
	if err := tr.verify(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(tr.files[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, 1<<20+12345); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{b[0] ^ 0xff}, 1<<20+12345); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := tr.verify(ctx); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "offset 1060921") {
		t.Fatalf("verify after a corrupted byte: %v", err)
	}
	tr.cleanup()
}

func TestThroughConfigRefused(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []ThroughConfig{
		{Dir: "", Size: 1 << 20, Streams: 1, Rounds: 1},
		{Dir: dir, Size: 1000, Streams: 1, Rounds: 1},
		{Dir: dir, Size: 1 << 20, Streams: 0, Rounds: 1},
		{Dir: dir, Size: 1 << 20, Streams: 1, Rounds: 0},
		{Dir: dir, Size: 1 << 20, Streams: 1, Rounds: 1, Modes: []string{"mmap"}},
		{Dir: dir + "/missing", Size: 1 << 20, Streams: 1, Rounds: 1},
	} {
		if _, err := ThroughRewrite(context.Background(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// On a local file (two descriptors: two OFD lock owners) the flock
// benchmark runs both parts and measures what it says.
func TestFlockBenchLocal(t *testing.T) {
	p := t.TempDir() + "/lk"
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := FlockBench(context.Background(), FlockConfig{A: p, B: p, Ops: 200, Handoffs: 20})
	if err != nil {
		t.Fatal(err)
	}
	if res.PairsPerSec <= 0 || res.HandoffsPerSec <= 0 || res.WakeMedianUs <= 0 {
		t.Errorf("implausible %+v", res)
	}
	if _, err := FlockBench(context.Background(), FlockConfig{A: p, Ops: 0}); err == nil {
		t.Error("0 ops accepted")
	}
}
