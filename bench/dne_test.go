package bench

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
)

// fakeMdtest answers DNE's mdtest runs from a table of seconds per
// directory, and records the remote_sync state each ran under.
type fakeMdtest struct {
	sync  string
	runs  []string // kind: what each run was, and under which remote_sync
	fail  string   // a run whose name starts so fails
	perOp map[string]float64
}

func (f *fakeMdtest) run(_ context.Context, c MdtestConfig) (*MdtestResult, error) {
	name := c.Dir[strings.LastIndex(c.Dir, "/")+1:]
	f.runs = append(f.runs, name+"@"+f.sync)
	if f.fail != "" && strings.HasPrefix(name, f.fail) {
		return nil, errors.New("mdtest failed")
	}
	if c.DirsOnly {
		kind := name[:strings.LastIndex(name, "-")]
		return &MdtestResult{Phases: []MdtestPhase{{Phase: "directory creation", Ops: c.Items, Seconds: float64(c.Items) * f.perOp[kind]}}}, nil
	}
	rate := 1000.0
	if c.TreeMDTIndex == -1 {
		rate = 1500
	}
	var ph []MdtestPhase
	for _, p := range filePhases {
		ph = append(ph, MdtestPhase{Phase: p, OpsPerS: rate})
	}
	return &MdtestResult{Phases: ph}, nil
}

func TestDNE(t *testing.T) {
	f := &fakeMdtest{sync: "0", perOp: map[string]float64{"local": 0.001, "remote": 0.00125, "remote-sync": 0.004}}
	cfg := DNEConfig{Mount: t.TempDir(), Dirs: 100, Rounds: 2, Files: 10, Procs: 2, mdtest: f.run,
		SetRemoteSync: func(_ context.Context, v string) error { f.sync = v; return nil }}
	r, err := DNE(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"local-0@0", "remote-0@0", "remote-sync-0@1", "local-1@0", "remote-1@0", "remote-sync-1@1", "one-mdt@0", "round-robin@0"}
	if strings.Join(f.runs, " ") != strings.Join(want, " ") {
		t.Fatalf("runs %q, want %q", f.runs, want)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9*b }
	if !near(r.LocalMkdir, 1000) || !near(r.RemoteMkdir, 800) || !near(r.RemoteSyncMkdir, 250) || !near(r.Ratio, 0.8) ||
		!near(r.RemoteSyncRatio, 0.25) || len(r.RoundRatios) != 2 || !near(r.RoundRatios[1], 0.8) {
		t.Fatalf("result %+v", r)
	}
	if r.OneMDT["file stat"] != 1000 || r.RoundRobin["file stat"] != 1500 {
		t.Fatalf("file phases %v %v", r.OneMDT, r.RoundRobin)
	}
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil || !strings.Contains(b.String(), "0.80 0.80") || !strings.Contains(b.String(), "1500         1.50") {
		t.Fatalf("table %v:\n%s", err, b.String())
	}

	// A failed remote_sync round still sets remote_sync back to 0.
	f = &fakeMdtest{sync: "0", fail: "remote-sync", perOp: f.perOp}
	cfg.mdtest = f.run
	if _, err := DNE(context.Background(), cfg); err == nil || f.sync != "0" {
		t.Fatalf("failed round: %v, remote_sync left at %s", err, f.sync)
	}
	cfg.Rounds = 0
	if _, err := DNE(context.Background(), cfg); err == nil {
		t.Fatal("0 rounds accepted")
	}
}
