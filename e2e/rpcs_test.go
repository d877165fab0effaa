package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// rpcCeilings are the mount's RPCs per operation as `bench rpcs` counts
// them now: a change that adds a round trip to one fails here. Where a
// count moves between runs (a first write's grant request), the ceiling
// is the highest seen.
var rpcCeilings = map[string]float64{
	"create":                3, // lookup (the kernel's, of a new name), create+open, close
	"stat_cached":           0,
	"getxattr_absent":       0,   // answered under the Update lock (2 RPCs a file of ls -l before)
	"create_write_4k_close": 5.5, // the create grants the write lock and says who owns the blocks (no enqueue, no owner RPC)
	"open_read_close_4k":    5,   // open, getattr and the objects' blocks (st_blocks), read, close
	"open_read_close_8m":    12,
	"rename":                4,
	"unlink":                2, // the objects are destroyed by the client
	"mkdir":                 2,
	"rmdir":                 1,
	"readdir_1000":          2.5, // one readdir of 1024 entries, not one a kernel page (22 before); the kernel revalidates now and then
	"mkdir_remote":          2,
	"stat_uncached":         1,
}

// TestRPCCounts runs `stripefs bench rpcs` on one mount, with a second
// mount for the stat of another client's file, and holds each operation
// to its ceiling.
func TestRPCCounts(t *testing.T) {
	c := startCluster(t)
	_, a := c.MountAt("a")
	_, b := c.MountAt("b")
	must(t, os.Mkdir(filepath.Join(a, "w"), 0o755))
	out := []byte(sfRun(t, c, "bench", "rpcs", filepath.Join(a, "w"), "--other", filepath.Join(b, "w"), "--reps", "10", "--json"))
	var r struct {
		Ops []struct {
			Op       string             `json:"op"`
			PerOp    float64            `json:"rpcs_per_op"`
			ByMethod map[string]float64 `json:"by_method"`
		} `json:"ops"`
	}
	must(t, json.Unmarshal(out, &r))
	seen := map[string]bool{}
	for _, op := range r.Ops {
		seen[op.Op] = true
		ceiling, ok := rpcCeilings[op.Op]
		if !ok {
			t.Errorf("%s: no ceiling for it here", op.Op)
			continue
		}
		if op.PerOp > ceiling+1e-9 {
			t.Errorf("%s: %.2f RPCs per operation, at most %.2f before (%v)", op.Op, op.PerOp, ceiling, op.ByMethod)
		}
		t.Logf("%-22s %.2f %v", op.Op, op.PerOp, op.ByMethod)
	}
	for op := range rpcCeilings {
		if !seen[op] {
			t.Errorf("%s was not counted", op)
		}
	}
}
