package e2e

import (
	"encoding/json"
	"testing"
)

// TestBenchTakeover runs `stripefs bench takeover` on a mount: two
// takeovers under its read and write loops, reported in JSON (its
// figures are the benchmark's to print; a loop error would fail it).
func TestBenchTakeover(t *testing.T) {
	c := startCluster(t)
	old, mnt := c.MountAt("b")
	out := []byte(sfRun(t, c, "bench", "takeover", mnt, "--takeovers", "2", "--gap", "300ms", "--size", "2MiB", "--json"))
	var r struct {
		TakeoverMs []float64 `json:"takeover_ms"`
		Reads      int       `json:"reads"`
		Writes     int       `json:"writes"`
		ReadMaxMs  float64   `json:"read_max_ms"`
	}
	must(t, json.Unmarshal(out, &r))
	if len(r.TakeoverMs) != 2 || r.Reads == 0 || r.Writes == 0 || r.ReadMaxMs <= 0 {
		t.Errorf("bench takeover JSON: %s", out)
	}
	if old.Running() {
		t.Error("the mount's first daemon still runs after two takeovers")
	}
	t.Logf("%s", out)
}
