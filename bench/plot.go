package bench

import (
	"fmt"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Charts for --plot: what a run measured, drawn with gonum/plot as SVG
// (or PNG or PDF, by the file's extension), for reports and for the eye.

// PlotBars draws one bar per label.
func PlotBars(path, title, yLabel string, labels []string, values []float64) error {
	if len(labels) != len(values) || len(values) == 0 {
		return fmt.Errorf("plot %s: %d labels for %d values", path, len(labels), len(values))
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	bars, err := plotter.NewBarChart(plotter.Values(values), vg.Points(28))
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	bars.Color = plotutil.Color(0)
	bars.LineStyle.Width = 0
	p.Add(bars, plotter.NewGrid())
	p.NominalX(labels...)
	return save(p, path, max(4, 1.2*float64(len(labels))))
}

// PlotSeries draws each named series over rounds 1, 2, ….
func PlotSeries(path, title, yLabel string, names []string, series [][]float64) error {
	if len(names) != len(series) || len(series) == 0 {
		return fmt.Errorf("plot %s: %d names for %d series", path, len(names), len(series))
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "round"
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	var args []any
	for i, s := range series {
		pts := make(plotter.XYs, len(s))
		for j, v := range s {
			pts[j].X, pts[j].Y = float64(j+1), v
		}
		args = append(args, names[i], pts)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return save(p, path, 6)
}

func save(p *plot.Plot, path string, widthIn float64) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg", ".png", ".pdf":
	default:
		return fmt.Errorf("plot %s: want a .svg, .png or .pdf file", path)
	}
	if err := p.Save(vg.Length(widthIn)*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}
