package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stripefs/stripefs/bench"
)

// TestBenchScale runs `stripefs bench scale` small against separate server
// processes: a line each step with a rate and the memory of the mount and
// of every server process (each MDT's block cache bound as configured),
// a readdir that found every file, and nothing left behind.
func TestBenchScale(t *testing.T) {
	c, mnt := mount(t)
	out := sfRun(t, c, "bench", "scale", mnt, "--files", "300", "--step", "100", "--procs", "3", "--lookups", "50", "--json")
	var res bench.ScaleResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench scale --json: %v\n%s", err, out)
	}
	if len(res.Steps) != 3 || res.Steps[2].Files != 300 || res.LastToFirst <= 0 || res.ReaddirRate <= 0 || res.RemoveRate <= 0 {
		t.Fatalf("bench scale: %s", out)
	}
	for _, s := range res.Steps {
		procs := map[string]bench.ProcessMemory{}
		for _, m := range s.Memory {
			procs[m.Process] = m
			if m.RSSBytes <= 0 || m.HeapBytes <= 0 {
				t.Errorf("step %d: %s without memory figures: %+v", s.Files, m.Process, m)
			}
		}
		if s.Rate <= 0 || s.Lookups <= 0 || len(procs) != 1+len(c.MDTs)+len(c.OSTs) {
			t.Fatalf("step %d: rate %.0f, lookups %.0f, processes %v (want the mount and %d servers)", s.Files, s.Rate, s.Lookups, s.Memory, len(c.MDTs)+len(c.OSTs))
		}
		if m := procs["mdt0"]; m.BlockCacheMax != 256<<20 {
			t.Errorf("step %d: mdt0's block cache bound %d, want the default 256 MiB", s.Files, m.BlockCacheMax)
		}
		if _, ok := procs["client"]; !ok {
			t.Errorf("step %d: no line for the mount", s.Files)
		}
	}
	ents, err := os.ReadDir(mnt)
	must(t, err)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "stripefs-bench-scale") {
			t.Errorf("bench scale left %s behind", e.Name())
		}
	}
}
