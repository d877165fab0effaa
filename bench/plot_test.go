package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlots(t *testing.T) {
	dir := t.TempDir()
	bars := filepath.Join(dir, "bars.svg")
	if err := PlotBars(bars, "mdtest", "ops/s", []string{"create", "stat", "remove"}, []float64{4000, 300000, 6000}); err != nil {
		t.Fatal(err)
	}
	lines := filepath.Join(dir, "lines.svg")
	if err := PlotSeries(lines, "dne", "remote/local", []string{"mkdir"}, [][]float64{{0.9, 1.0, 0.95}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{bars, lines} {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "<svg") {
			t.Errorf("%s: not an SVG (%v)", p, err)
		}
	}
	if err := PlotBars(filepath.Join(dir, "x.txt"), "t", "y", []string{"a"}, []float64{1}); err == nil {
		t.Error("a .txt plot was accepted")
	}
	if err := PlotBars(filepath.Join(dir, "x.svg"), "t", "y", []string{"a"}, nil); err == nil {
		t.Error("labels without values were accepted")
	}
}
