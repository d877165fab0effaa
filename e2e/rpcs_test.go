package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// rpcCounts are the mount's RPCs per operation as `bench rpcs` counts
// them now. An operation may cost up to rpcSlack more (the kernel
// revalidates a parent whose 1 s cache ran out mid-loop, a first write
// to an OST asks for a grant: each a twentieth of an RPC at 20 repetitions),
// but a change that adds a round trip to each fails here.
var rpcCounts = map[string]float64{
	"create":                3, // lookup (the kernel's, of a new name), create+open, close
	"stat_cached":           0,
	"getxattr_absent":       0, // answered under the Update lock (2 RPCs a file of ls -l before)
	"create_write_4k_close": 5, // the create grants the write lock and says who owns the blocks (no enqueue, no owner RPC)
	"open_read_close_4k":    4, // open, the objects' blocks (st_blocks), read, close: the open's attributes answer the getattr (5 before)
	"open_read_close_8m":    11,
	"rename":                4,
	"unlink":                2, // the objects are destroyed by the client
	"mkdir":                 2,
	"rmdir":                 1,
	"readdir_1000":          2, // one readdir of 1024 entries, not one a kernel page (22 before)
	"mkdir_remote":          2,
	"stat_uncached":         1,
	"stat_uncached_4k":      3, // lookup, getattr, and the object's blocks from its OST
	// Data-on-MDT: the same RPCs, the data ones to the MDT; its
	// attributes come with the blocks (no ost_getattr).
	"create_write_4k_close_dom": 3, // the close carries the data and the size (no setattr, no ost_write: 4 before)
	"open_read_close_4k_dom":    2, // the data comes with the open (read-on-open)
	"stat_uncached_4k_dom":      1, // the writer's close made its lock a read lock: no getattr (and glimpse of it) after the lookup (2 before)
}

const rpcSlack = 0.6

// TestRPCCounts runs `stripefs bench rpcs` on one mount, with a second
// mount for the stat of another client's file, and holds each operation
// to its count.
func TestRPCCounts(t *testing.T) {
	c := startCluster(t)
	_, a := c.MountAt("a")
	_, b := c.MountAt("b")
	must(t, os.Mkdir(filepath.Join(a, "w"), 0o755))
	out := []byte(sfRun(t, c, "bench", "rpcs", filepath.Join(a, "w"), "--other", filepath.Join(b, "w"), "--reps", "20", "--json"))
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
		count, ok := rpcCounts[op.Op]
		if !ok {
			t.Errorf("%s: no count for it here", op.Op)
			continue
		}
		if op.PerOp > count+rpcSlack {
			t.Errorf("%s: %.2f RPCs per operation, %.0f before (%v)", op.Op, op.PerOp, count, op.ByMethod)
		}
		t.Logf("%-22s %.2f %v", op.Op, op.PerOp, op.ByMethod)
	}
	for op := range rpcCounts {
		if !seen[op] {
			t.Errorf("%s was not counted", op)
		}
	}
}
