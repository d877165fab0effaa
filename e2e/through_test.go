package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stripefs/stripefs/bench"
	"github.com/stripefs/stripefs/internal/testcluster"
)

// The through-the-mount comparisons on a real mount: what each pass cost
// the OSTs, as the field reports ask. A rewrite through the mount skips
// accounting on every OST write and starts its disk write as a first write
// does; nfsd's vector costs no OST read and no read-modify-write; neither
// reads to write, on a plain and on an erasure-coded layout.
func TestThroughMount(t *testing.T) {
	c := testcluster.Start(t, 1, 3)
	mnt := c.MountFS()
	plain, ec := filepath.Join(mnt, "plain"), filepath.Join(mnt, "ec")
	must(t, os.Mkdir(plain, 0o755))
	must(t, os.Mkdir(ec, 0o755))
	sfRun(t, c, "setstripe", "-c", "3", "-S", "1M", plain)
	sfRun(t, c, "setstripe", "--ec", "2+1", "-S", "1M", ec)
	ctx := context.Background()
	for _, dir := range []string{plain, ec} {
		cfg := bench.ThroughConfig{Dir: dir, Size: 8 << 20, Streams: 2, Rounds: 1}
		res, err := bench.ThroughRewrite(ctx, cfg)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, p := range res.Passes {
			n := p.Counters
			if n == nil {
				t.Fatalf("%s: no counters on a stripefs mount: %v", dir, res.Notes)
			}
			if n["ost_read_rpcs"] != 0 || n["client_read_modify_writes"] != 0 {
				t.Errorf("%s %s %s: %d OST reads, %d read-modify-writes in a pure write", filepath.Base(dir), p.Mode, p.Name, n["ost_read_rpcs"], n["client_read_modify_writes"])
			}
			if n["ost_write_rpcs"] == 0 {
				t.Errorf("%s %s %s: no OST writes", filepath.Base(dir), p.Mode, p.Name)
			}
			switch p.Name {
			case "write":
				if n["rewrites_skipped_accounting"] != 0 || n["new_allocations"] != n["ost_write_rpcs"] {
					t.Errorf("%s %s write: %v", filepath.Base(dir), p.Mode, n)
				}
			case "rewrite":
				if n["new_allocations"] != 0 || n["rewrites_skipped_accounting"] != n["ost_write_rpcs"] {
					t.Errorf("%s %s rewrite allocated or accounted: %v", filepath.Base(dir), p.Mode, n)
				}
			}
			// Buffered or not, each 1 MiB unit reaches its OST whole and
			// its disk write starts at once, rewrite or not (parity of the
			// erasure-coded file goes direct, around the page cache).
			if dir == plain && n["early_writebacks"] != n["ost_write_rpcs"] {
				t.Errorf("plain %s %s: %d early writebacks for %d OST writes", p.Mode, p.Name, n["early_writebacks"], n["ost_write_rpcs"])
			}
		}
		t.Logf("%s: %+v", filepath.Base(dir), res.Comparisons)

		nres, err := bench.ThroughNFS(ctx, cfg)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, p := range nres.Passes {
			if n := p.Counters; n["ost_read_rpcs"] != 0 || n["client_read_modify_writes"] != 0 || n["ost_write_rpcs"] == 0 {
				t.Errorf("%s nfs test, %s pass: %v", filepath.Base(dir), p.Name, n)
			}
		}
		t.Logf("%s: %+v", filepath.Base(dir), nres.Comparisons)
	}

	// The command users run prints the same in JSON.
	out := sfRun(t, c, "bench", "nfswrite", "--through", plain, "--through-size", "2MiB", "--through-rounds", "2", "--json")
	var res bench.NFSWriteResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if res.Through == nil || !res.Through.Verified || len(res.Through.Comparisons) != 1 || len(res.Through.Comparisons[0].Ratios) != 2 {
		t.Fatalf("bench nfswrite --through --json: %s", out)
	}
	entries, err := os.ReadDir(plain)
	must(t, err)
	if len(entries) != 0 {
		t.Errorf("files left behind in %s: %v", plain, entries)
	}
}
