package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestSeqIO(t *testing.T) {
	dir := t.TempDir()
	// An odd transfer size exercises unaligned chunk boundaries and a short last chunk.
	for _, xfer := range []int{1 << 20, 100_003} {
		// localDrop: a test must not empty the whole machine's page cache.
		res, err := seqIO(context.Background(), dir, 8<<20+5, xfer, seqHooks{localDrop: true})
		if err != nil {
			t.Fatalf("xfer %d: %v", xfer, err)
		}
		if res.WriteMiBps <= 0 || res.ReadMiBps <= 0 || res.WriteSeconds <= 0 || res.ReadSeconds <= 0 {
			t.Errorf("xfer %d: implausible result %+v", xfer, res)
		}
		if res.Bytes != 8<<20+5 || res.Xfer != xfer {
			t.Errorf("xfer %d: result describes the wrong run: %+v", xfer, res)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("SeqIO left %d files behind", len(left))
	}
}

func TestSeqIOCatchesCorruption(t *testing.T) {
	dir := t.TempDir()
	seed := uint64(0x5eed)
	const at = 3<<20 + 12345
	res, err := seqIO(context.Background(), dir, 8<<20, 1<<20, seqHooks{
		seed:      &seed,
		localDrop: true,
		afterWrite: func(path string) error {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			b := []byte{patternByte(at, seed) ^ 0x40}
			_, err = f.WriteAt(b, at)
			return err
		},
	})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupted byte not caught: res %+v, err %v", res, err)
	}
	if !strings.Contains(err.Error(), "offset 3158073") {
		t.Errorf("error does not name the corrupted offset: %v", err)
	}
}

func TestSeqIOCatchesShortFile(t *testing.T) {
	_, err := seqIO(context.Background(), t.TempDir(), 1<<20, 4096, seqHooks{
		localDrop:  true,
		afterWrite: func(path string) error { return os.Truncate(path, 1<<19) },
	})
	if err == nil || !strings.Contains(err.Error(), "read back 524288 bytes") {
		t.Fatalf("truncated file not caught: %v", err)
	}
}

func TestPattern(t *testing.T) {
	const seed = 0xdeadbeefcafef00d
	whole := make([]byte, 1000)
	fillPattern(whole, 0, seed)
	// Pieces filled at unaligned offsets must match the whole.
	for _, cut := range [][2]int{{0, 1}, {3, 17}, {8, 16}, {13, 1000}, {999, 1000}} {
		part := make([]byte, cut[1]-cut[0])
		fillPattern(part, int64(cut[0]), seed)
		if !bytes.Equal(part, whole[cut[0]:cut[1]]) {
			t.Errorf("fill [%d,%d) differs from the whole", cut[0], cut[1])
		}
		if err := verifyPattern(part, int64(cut[0]), seed); err != nil {
			t.Errorf("verify [%d,%d): %v", cut[0], cut[1], err)
		}
	}
	for _, pos := range []int{0, 7, 8, 501, 999} {
		bad := bytes.Clone(whole)
		bad[pos] ^= 1
		if err := verifyPattern(bad, 0, seed); !errors.Is(err, ErrCorrupt) {
			t.Errorf("flipped bit at %d: got %v", pos, err)
		}
		if err := verifyPattern(bad[3:], 3, seed); pos >= 3 && !errors.Is(err, ErrCorrupt) {
			t.Errorf("flipped bit at %d, unaligned verify: got %v", pos, err)
		}
	}
	// Data from the wrong offset (a misplaced write) does not verify.
	if err := verifyPattern(whole[8:16], 16, seed); err == nil || !strings.Contains(err.Error(), "the data of offset 8") {
		t.Errorf("misplaced block: %v", err)
	}
	if err := verifyPattern(make([]byte, 16), 0, seed); err == nil || !strings.Contains(err.Error(), "zero") {
		t.Errorf("hole: %v", err)
	}
}

func TestMeta(t *testing.T) {
	dir := t.TempDir()
	res, err := Meta(context.Background(), dir, 200)
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 200 || res.CreateOps <= 0 || res.StatOps <= 0 || res.RemoveOps <= 0 {
		t.Errorf("implausible result %+v", res)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("Meta left %d entries behind", len(left))
	}
}

func TestCancel(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SeqIO(ctx, dir, 1<<20, 4096); !errors.Is(err, context.Canceled) {
		t.Errorf("SeqIO: %v", err)
	}
	if _, err := Meta(ctx, dir, 10); !errors.Is(err, context.Canceled) {
		t.Errorf("Meta: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("cancelled runs left %d entries behind", len(left))
	}
}

func TestBadArgs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, c := range []struct {
		size int64
		xfer int
	}{{0, 1}, {-1, 1}, {1, 0}, {1, -5}, {1, MaxXfer + 1}} {
		if _, err := SeqIO(ctx, dir, c.size, c.xfer); err == nil {
			t.Errorf("SeqIO(size %d, xfer %d) accepted", c.size, c.xfer)
		}
	}
	for _, n := range []int{0, -1, MaxFiles + 1} {
		if _, err := Meta(ctx, dir, n); err == nil {
			t.Errorf("Meta(%d) accepted", n)
		}
	}
	if _, err := SeqIO(ctx, dir+"/missing", 1, 1); err == nil {
		t.Error("SeqIO in a missing directory succeeded")
	}
}

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "4096": 4096, "1B": 1, "1k": 1024, "1KiB": 1024, "1kB": 1000,
		"64MiB": 64 << 20, "64m": 64 << 20, "1GiB": 1 << 30, "1g": 1 << 30, "1GB": 1e9,
		"1.5GiB": 3 << 29, "2TiB": 2 << 40, " 8 MiB ": 8 << 20, "0.5k": 512,
	}
	for s, want := range good {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "MiB", "-1", "-1MiB", "1XB", "1.2.3", "0.3B", "1e9", "99999999999999999999",
		"9000000TiB", "8388608TiB", "1 Mi B", "abc"} {
		if got, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", s, got)
		}
	}
	for n, want := range map[int64]string{1 << 30: "1GiB", 64 << 20: "64MiB", 3 << 29: "1536MiB", 1536: "1.5KiB", 1000: "1000B", 0: "0B"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestReport(t *testing.T) {
	r := Report{
		Benchmark: "baseline", Size: 1 << 30, Xfer: 1 << 20, Files: 10,
		Targets: []Target{
			{Name: "stripefs", Dir: "/a", SeqIO: &SeqResult{WriteMiBps: 100, ReadMiBps: 50}, Meta: &MetaResult{CreateOps: 1000, StatOps: 10, RemoveOps: 30}},
			{Name: "loopback", Dir: "/b", SeqIO: &SeqResult{WriteMiBps: 400, ReadMiBps: 100}, Meta: &MetaResult{CreateOps: 2000, StatOps: 0, RemoveOps: 60}},
		},
	}
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	ratios, _ := got["ratios"].(map[string]any)
	if ratios["write_mib_s"] != 0.25 || ratios["create_ops_s"] != 0.5 {
		t.Errorf("ratios: %v", ratios)
	}
	if _, ok := ratios["stat_ops_s"]; ok {
		t.Errorf("ratio over a zero rate reported: %v", ratios)
	}
	buf.Reset()
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	table := buf.String()
	for _, want := range []string{"stripefs/loopback", "write MiB/s", "0.25", "remove ops/s", "size 1GiB"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	t.Logf("\n%s", table)
}
