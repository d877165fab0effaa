package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/pkg/xattr"
	"github.com/stripefs/stripefs/proto"
	"golang.org/x/sys/unix"
)

// ECConfig is bench ec's: sequential write and read (IOR, one task, 1 MiB
// transfers) of a file of an erasure-coded K+M layout against one plainly
// striped over K+M OSTs, in alternating rounds on a stripefs mount.
type ECConfig struct {
	Mount      string
	K, M       int
	StripeSize int64
	Size       int64 // bytes written and read per pass
	Rounds     int
	Fsync      bool // fsync before each close after writing (ior -e)

	ior func(context.Context, IORConfig) (*IORResult, error) // IOR; tests replace it
	// setLayout sets a directory's default layout (the lustre.lov
	// xattr); tests replace it.
	setLayout func(dir, layout string) error
}

// ECRound is one round of the EC comparison: MiB/s of each layout.
type ECRound struct {
	PlainWrite float64 `json:"plain_write_mib_s"`
	ECWrite    float64 `json:"ec_write_mib_s"`
	PlainRead  float64 `json:"plain_read_mib_s"`
	ECRead     float64 `json:"ec_read_mib_s"`
}

// ECResult is what EC measured.
type ECResult struct {
	EC         string    `json:"ec"`
	Width      int       `json:"-"` // K+M
	StripeSize int64     `json:"stripe_size"`
	Size       int64     `json:"size"`
	Fsync      bool      `json:"fsync"`
	Rounds     []ECRound `json:"rounds"`
	// Over all rounds: total bytes over total seconds of each side.
	PlainWrite float64 `json:"plain_write_mib_s"`
	ECWrite    float64 `json:"ec_write_mib_s"`
	WriteRatio float64 `json:"write_ratio"`
	PlainRead  float64 `json:"plain_read_mib_s"`
	ECRead     float64 `json:"ec_read_mib_s"`
	ReadRatio  float64 `json:"read_ratio"`
}

// EC runs the comparison in a temporary directory of cfg.Mount, which it
// removes; each pass starts after a sync, with the disk quiet.
func EC(ctx context.Context, cfg ECConfig) (*ECResult, error) {
	if cfg.K < 1 || cfg.M < 1 || cfg.Rounds < 1 || cfg.Size < 1 || cfg.StripeSize < 1 {
		return nil, fmt.Errorf("ec: need K and M, rounds, a size and a stripe size of at least 1")
	}
	ior, setLayout := cfg.ior, cfg.setLayout
	if ior == nil {
		ior = IOR
	}
	if setLayout == nil {
		setLayout = func(dir, layout string) error { return xattr.Set(dir, proto.LayoutXattr, []byte(layout)) }
	}
	work, err := os.MkdirTemp(cfg.Mount, "ecbench.")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	width := cfg.K + cfg.M
	for name, lay := range map[string]string{
		"plain": fmt.Sprintf("stripe_count=%d stripe_size=%d ec=none", width, cfg.StripeSize),
		"ec":    fmt.Sprintf("stripe_size=%d ec=%d+%d", cfg.StripeSize, cfg.K, cfg.M),
	} {
		d := filepath.Join(work, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
		if err := setLayout(d, lay); err != nil {
			return nil, fmt.Errorf("%s: layout %q: %w (is %s a stripefs mount with %d OSTs?)", d, lay, err, cfg.Mount, width)
		}
	}
	res := &ECResult{EC: fmt.Sprintf("%d+%d", cfg.K, cfg.M), Width: width, StripeSize: cfg.StripeSize, Size: cfg.Size, Fsync: cfg.Fsync}
	var totals [4]struct{ bytes, secs float64 } // plain write, ec write, plain read, ec read
	for r := 0; r < cfg.Rounds; r++ {
		var rd ECRound
		for i, name := range []string{"plain", "ec"} {
			unix.Sync()
			out, err := ior(ctx, IORConfig{Path: filepath.Join(work, name, "f"), Write: true, Read: true,
				Xfer: 1 << 20, Block: cfg.Size, Segments: 1, Tasks: 1, Fsync: cfg.Fsync})
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", r+1, name, err)
			}
			for _, p := range out.Phases {
				k := i
				if p.Access == "read" {
					k += 2
				} else if p.Access != "write" {
					continue
				}
				totals[k].bytes += float64(p.Bytes)
				totals[k].secs += p.TotalSec
				switch k {
				case 0:
					rd.PlainWrite = p.MiBps
				case 1:
					rd.ECWrite = p.MiBps
				case 2:
					rd.PlainRead = p.MiBps
				case 3:
					rd.ECRead = p.MiBps
				}
			}
		}
		res.Rounds = append(res.Rounds, rd)
	}
	rate := func(k int) float64 {
		if totals[k].secs == 0 {
			return 0
		}
		return totals[k].bytes / (1 << 20) / totals[k].secs
	}
	res.PlainWrite, res.ECWrite, res.PlainRead, res.ECRead = rate(0), rate(1), rate(2), rate(3)
	res.WriteRatio, res.ReadRatio = res.ECWrite/res.PlainWrite, res.ECRead/res.PlainRead
	return res, nil
}

// WriteJSON writes r as one JSON object.
func (r *ECResult) WriteJSON(w io.Writer) error { return json.NewEncoder(w).Encode(r) }

// WriteTable writes r for a reader.
func (r *ECResult) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fsync := "with fsync"
	if !r.Fsync {
		fsync = "no fsync"
	}
	fmt.Fprintf(tw, "EC %s vs plain %d-stripe, %s units, %s per pass, %s\n", r.EC, r.Width, FormatSize(r.StripeSize), FormatSize(r.Size), fsync)
	fmt.Fprintf(tw, "round\tplain write\tEC write\tratio\tplain read\tEC read\tratio\n")
	line := func(label string, pw, ew, pr, er float64) {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f\t%.2f\n", label, pw, ew, ew/pw, pr, er, er/pr)
	}
	for i, rd := range r.Rounds {
		line(fmt.Sprint(i+1), rd.PlainWrite, rd.ECWrite, rd.PlainRead, rd.ECRead)
	}
	line("all", r.PlainWrite, r.ECWrite, r.PlainRead, r.ECRead)
	fmt.Fprintf(tw, "(MiB/s; \"all\": total bytes over total time of each side)\n")
	return tw.Flush()
}
