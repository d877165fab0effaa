package bench

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

func TestEC(t *testing.T) {
	layouts := map[string]string{}
	var order []string
	round := 0
	// Each pass moves Size bytes; the EC file takes longer to write in
	// the second round, so its rate over all rounds is bytes over the
	// summed seconds, not the mean of the rounds' rates.
	secs := map[string][]float64{"plain write": {1, 1}, "ec write": {1, 3}, "plain read": {0.5, 0.5}, "ec read": {0.5, 0.5}}
	cfg := ECConfig{Mount: t.TempDir(), K: 4, M: 2, StripeSize: 1 << 20, Size: 64 << 20, Rounds: 2, Fsync: true,
		setLayout: func(dir, l string) error { layouts[filepath.Base(dir)] = l; return nil },
		ior: func(_ context.Context, c IORConfig) (*IORResult, error) {
			name := filepath.Base(filepath.Dir(c.Path))
			order = append(order, name)
			if !c.Fsync || !c.Write || !c.Read || c.Block != 64<<20 {
				t.Errorf("ior config %+v", c)
			}
			r := &IORResult{}
			for _, a := range []string{"write", "read"} {
				s := secs[name+" "+a][round]
				r.Phases = append(r.Phases, IORPhase{Access: a, Bytes: c.Block, TotalSec: s, MiBps: 64 / s})
			}
			if name == "ec" {
				round++
			}
			return r, nil
		},
	}
	r, err := EC(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if layouts["plain"] != "stripe_count=6 stripe_size=1048576 ec=none" || layouts["ec"] != "stripe_size=1048576 ec=4+2" {
		t.Fatalf("layouts %q", layouts)
	}
	if strings.Join(order, " ") != "plain ec plain ec" {
		t.Fatalf("passes %q", order)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if len(r.Rounds) != 2 || !near(r.Rounds[1].ECWrite, 64.0/3) || !near(r.PlainWrite, 64) || !near(r.ECWrite, 32) ||
		!near(r.WriteRatio, 0.5) || !near(r.ReadRatio, 1) {
		t.Fatalf("result %+v", r)
	}
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil || !strings.Contains(b.String(), "EC 4+2 vs plain 6-stripe") {
		t.Fatalf("table %v:\n%s", err, b.String())
	}
	if _, err := EC(context.Background(), ECConfig{Mount: t.TempDir(), K: 4, M: 0, Rounds: 1}); err == nil {
		t.Fatal("M=0 accepted")
	}
}
