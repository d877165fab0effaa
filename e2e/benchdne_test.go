package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestBenchDNE runs the measurement, `stripefs bench dne`, small:
// it must take the remote path for the remote rounds and the synchronous
// one for the remote_sync rounds, report every figure, put remote_sync
// back off, and leave nothing behind in the mount.
func TestBenchDNE(t *testing.T) {
	c, mnt := mount(t)
	const dirs, rounds = 40, 2
	before := snapshot(t, mnt)
	out := sfRun(t, c, "bench", "dne", "--mount", mnt, "--dirs", "40", "--rounds", "2", "--files", "10", "--procs", "2", "--json")
	var res struct {
		Dirs, Rounds int
		Local        float64            `json:"local_mkdir_per_s"`
		Remote       float64            `json:"remote_mkdir_per_s"`
		Ratio        float64            `json:"remote_local_ratio"`
		ByRound      []float64          `json:"remote_local_ratio_by_round"`
		RemoteSync   float64            `json:"remote_sync_mkdir_per_s"`
		OneMDT       map[string]float64 `json:"files_one_mdt_per_s"`
		RoundRobin   map[string]float64 `json:"files_round_robin_per_s"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench dne --json: %v\n%s", err, out)
	}
	if res.Dirs != dirs || res.Rounds != rounds || len(res.ByRound) != rounds {
		t.Fatalf("bench dne: %+v", res)
	}
	if res.Local <= 0 || res.Remote <= 0 || res.RemoteSync <= 0 || res.Ratio <= 0 {
		t.Fatalf("bench dne rates: %+v", res)
	}
	for _, p := range []string{"file creation", "file stat", "file removal"} {
		if res.OneMDT[p] <= 0 || res.RoundRobin[p] <= 0 {
			t.Fatalf("bench dne %s: one MDT %v, round-robin %v", p, res.OneMDT[p], res.RoundRobin[p])
		}
	}
	d := snapshot(t, mnt).Sub(before)
	// The round-robin file run places its 2 task directories on the 2
	// MDTs: one more remote mkdir.
	if n := d.Counter("mdt", "mkdir_remote_async"); n != dirs*rounds+1 {
		t.Fatalf("%d asynchronous remote mkdirs, want %d (the remote rounds, one round-robin task directory)", n, dirs*rounds+1)
	}
	// A remote_sync round's mkdirs, and the removal phase after them,
	// commit synchronously on both MDTs.
	if n := d.Counter("mdt", "remote_sync_commits"); n != 4*dirs*rounds {
		t.Fatalf("%d synchronous commits, want %d (2 per remote_sync mkdir and 2 per rmdir)", n, 4*dirs*rounds)
	}
	left, err := filepath.Glob(filepath.Join(mnt, "dnebench.*"))
	must(t, err)
	if len(left) != 0 {
		t.Fatalf("bench dne left %v", left)
	}
	// remote_sync is off again: a remote mkdir commits asynchronously.
	before = snapshot(t, mnt)
	must(t, os.Mkdir(filepath.Join(mnt, "after"), 0o755))
	sfRun(t, c, "mkdir", "-i", "1", filepath.Join(mnt, "after", "r"))
	if n := snapshot(t, mnt).Sub(before).Counter("mdt", "remote_sync_commits"); n != 0 {
		t.Fatalf("after bench dne, a remote mkdir made %d synchronous commits", n)
	}
}
