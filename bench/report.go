package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Target is what was measured on one directory (a mount, usually).
type Target struct {
	Name  string      `json:"name"`
	Dir   string      `json:"dir"`
	SeqIO *SeqResult  `json:"seqio,omitempty"`
	Meta  *MetaResult `json:"meta,omitempty"`
}

// Report gathers the results of one benchmark run. With two or more
// targets the first is compared with the second: the table gets a ratio
// column and the JSON a "ratios" object (first/second, per metric).
type Report struct {
	Benchmark string    `json:"benchmark"`
	Time      time.Time `json:"time"`
	Size      int64     `json:"size,omitempty"`
	Xfer      int       `json:"xfer,omitempty"`
	Files     int       `json:"files,omitempty"`
	Targets   []Target  `json:"targets"`
	Notes     []string  `json:"notes,omitempty"`
}

type metric struct {
	key, label, format string
	get                func(Target) (float64, bool)
}

var metrics = []metric{
	{"write_mib_s", "write MiB/s", "%.1f", func(t Target) (float64, bool) { return seqGet(t, func(s *SeqResult) float64 { return s.WriteMiBps }) }},
	{"read_mib_s", "read MiB/s", "%.1f", func(t Target) (float64, bool) { return seqGet(t, func(s *SeqResult) float64 { return s.ReadMiBps }) }},
	{"create_ops_s", "create ops/s", "%.0f", func(t Target) (float64, bool) { return metaGet(t, func(m *MetaResult) float64 { return m.CreateOps }) }},
	{"stat_ops_s", "stat ops/s", "%.0f", func(t Target) (float64, bool) { return metaGet(t, func(m *MetaResult) float64 { return m.StatOps }) }},
	{"remove_ops_s", "remove ops/s", "%.0f", func(t Target) (float64, bool) { return metaGet(t, func(m *MetaResult) float64 { return m.RemoveOps }) }},
}

func seqGet(t Target, f func(*SeqResult) float64) (float64, bool) {
	if t.SeqIO == nil {
		return 0, false
	}
	return f(t.SeqIO), true
}

func metaGet(t Target, f func(*MetaResult) float64) (float64, bool) {
	if t.Meta == nil {
		return 0, false
	}
	return f(t.Meta), true
}

// Ratios is first target / second target for each metric both have; nil
// with fewer than two targets.
func (r *Report) Ratios() map[string]float64 {
	if len(r.Targets) < 2 {
		return nil
	}
	out := map[string]float64{}
	for _, m := range metrics {
		a, okA := m.get(r.Targets[0])
		b, okB := m.get(r.Targets[1])
		if okA && okB && b > 0 {
			out[m.key] = a / b
		}
	}
	return out
}

// MarshalJSON adds the ratios to the report's fields.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	return json.Marshal(struct {
		plain
		Ratios map[string]float64 `json:"ratios,omitempty"`
	}{plain(r), r.Ratios()})
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	return writeJSON(w, r)
}

// WriteTable writes the report for people: a header line, then one row
// per metric with a column per target (and the ratio of the first two).
func (r *Report) WriteTable(w io.Writer) error {
	var head []string
	if r.Size > 0 {
		head = append(head, "size "+FormatSize(r.Size))
	}
	if r.Xfer > 0 {
		head = append(head, "xfer "+FormatSize(int64(r.Xfer)))
	}
	if r.Files > 0 {
		head = append(head, fmt.Sprintf("files %d", r.Files))
	}
	for _, t := range r.Targets {
		if t.SeqIO != nil {
			head = append(head, "page cache dropped before read: "+yesNo(t.SeqIO.DroppedCaches))
			break
		}
	}
	fmt.Fprintf(w, "%s: %s\n", r.Benchmark, strings.Join(head, ", "))
	for _, t := range r.Targets {
		fmt.Fprintf(w, "  %s: %s\n", t.Name, t.Dir)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	compare := len(r.Targets) >= 2
	labelWidth := 0
	for _, m := range metrics {
		labelWidth = max(labelWidth, len(m.label))
	}
	fmt.Fprintf(tw, "%-*s\t", labelWidth, "")
	for _, t := range r.Targets {
		fmt.Fprintf(tw, "%s\t", t.Name)
	}
	if compare {
		fmt.Fprintf(tw, "%s/%s\t", r.Targets[0].Name, r.Targets[1].Name)
	}
	fmt.Fprintln(tw)
	ratios := r.Ratios()
	for _, m := range metrics {
		row := []string{fmt.Sprintf("%-*s", labelWidth, m.label)}
		have := false
		for _, t := range r.Targets {
			if v, ok := m.get(t); ok {
				row = append(row, fmt.Sprintf(m.format, v))
				have = true
			} else {
				row = append(row, "-")
			}
		}
		if !have {
			continue
		}
		if compare {
			if v, ok := ratios[m.key]; ok {
				row = append(row, fmt.Sprintf("%.2f", v))
			} else {
				row = append(row, "-")
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no (only posix_fadvise DONTNEED on the file)"
}

// writeJSON writes v as one indented JSON object and a newline: every
// benchmark's --json form.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
