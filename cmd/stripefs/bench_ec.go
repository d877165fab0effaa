package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/pkg/xattr"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/bench"
	"github.com/stripefs/stripefs/proto"
)

// ecRound is one round of the EC comparison: MiB/s of each layout.
type ecRound struct {
	PlainWrite float64 `json:"plain_write_mib_s"`
	ECWrite    float64 `json:"ec_write_mib_s"`
	PlainRead  float64 `json:"plain_read_mib_s"`
	ECRead     float64 `json:"ec_read_mib_s"`
}

type ecBenchResult struct {
	EC         string    `json:"ec"`
	StripeSize int64     `json:"stripe_size"`
	Size       int64     `json:"size"`
	Fsync      bool      `json:"fsync"`
	Rounds     []ecRound `json:"rounds"`
	// Over all rounds: total bytes over total seconds of each side.
	PlainWrite float64 `json:"plain_write_mib_s"`
	ECWrite    float64 `json:"ec_write_mib_s"`
	WriteRatio float64 `json:"write_ratio"`
	PlainRead  float64 `json:"plain_read_mib_s"`
	ECRead     float64 `json:"ec_read_mib_s"`
	ReadRatio  float64 `json:"read_ratio"`
}

func benchECCmd() *cobra.Command {
	var ec string
	var stripe, size sizeValue = 1 << 20, 1 << 30
	var rounds int
	var noFsync, asJSON bool
	cmd := &cobra.Command{
		Use:   "ec --mount MNT [--ec 4+2] [-S 1M] [--size 1GiB] [--rounds 3] [--no-fsync] [--json]",
		Short: "Sequential write and read of an erasure-coded file against a plain one striped over as many OSTs, in one run",
		Long: `Writes and reads SIZE with 1 MiB calls (bench ior -w -r -e) into a file of
an erasure-coded K+M layout and into one plainly striped over K+M OSTs, in
alternating rounds (a sync before each pass, so each starts with the disk
quiet), and prints each round's MiB/s and the ratios EC/plain, per round
and over all. Issue #6's target: a write ratio of at least 0.70 for 4+2.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mnt, _ := cmd.Flags().GetString("mount")
			k, m, err := proto.ParseEC(ec)
			if err != nil {
				return err
			}
			if k == 0 {
				return fmt.Errorf("--ec %s: give K+M, e.g. 4+2", ec)
			}
			if rounds < 1 {
				return fmt.Errorf("--rounds %d: at least 1", rounds)
			}
			work, err := os.MkdirTemp(mnt, "ecbench.")
			if err != nil {
				return err
			}
			defer os.RemoveAll(work)
			dirs := map[string]string{
				"plain": fmt.Sprintf("stripe_count=%d stripe_size=%d ec=none", k+m, int64(stripe)),
				"ec":    fmt.Sprintf("stripe_size=%d ec=%d+%d", int64(stripe), k, m),
			}
			for name, lay := range dirs {
				d := filepath.Join(work, name)
				if err := os.Mkdir(d, 0o755); err != nil {
					return err
				}
				if err := xattr.Set(d, proto.LayoutXattr, []byte(lay)); err != nil {
					return fmt.Errorf("%s: layout %q: %w (is %s a stripefs mount with %d OSTs?)", d, lay, err, mnt, k+m)
				}
			}
			res := ecBenchResult{EC: fmt.Sprintf("%d+%d", k, m), StripeSize: int64(stripe), Size: int64(size), Fsync: !noFsync}
			type sum struct{ bytes, secs float64 }
			totals := map[string]*sum{}
			add := func(key string, p bench.IORPhase) float64 {
				s := totals[key]
				if s == nil {
					s = &sum{}
					totals[key] = s
				}
				s.bytes += float64(p.Bytes)
				s.secs += p.TotalSec
				return p.MiBps
			}
			ctx := cmd.Context()
			for r := 0; r < rounds; r++ {
				var rd ecRound
				for _, name := range []string{"plain", "ec"} {
					unix.Sync()
					out, err := bench.IOR(ctx, bench.IORConfig{Path: filepath.Join(work, name, "f"), Write: true, Read: true,
						Xfer: 1 << 20, Block: int64(size), Segments: 1, Tasks: 1, Fsync: !noFsync})
					if err != nil {
						return fmt.Errorf("round %d, %s: %w", r+1, name, err)
					}
					for _, p := range out.Phases {
						switch {
						case p.Access == "write" && name == "plain":
							rd.PlainWrite = add("plain write", p)
						case p.Access == "write":
							rd.ECWrite = add("ec write", p)
						case p.Access == "read" && name == "plain":
							rd.PlainRead = add("plain read", p)
						case p.Access == "read":
							rd.ECRead = add("ec read", p)
						}
					}
				}
				res.Rounds = append(res.Rounds, rd)
			}
			rate := func(key string) float64 {
				s := totals[key]
				if s == nil || s.secs == 0 {
					return 0
				}
				return s.bytes / (1 << 20) / s.secs
			}
			res.PlainWrite, res.ECWrite = rate("plain write"), rate("ec write")
			res.PlainRead, res.ECRead = rate("plain read"), rate("ec read")
			res.WriteRatio, res.ReadRatio = res.ECWrite/res.PlainWrite, res.ECRead/res.PlainRead
			if asJSON {
				return json.NewEncoder(os.Stdout).Encode(res)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fsync := "with fsync"
			if noFsync {
				fsync = "no fsync"
			}
			fmt.Fprintf(tw, "EC %s vs plain %d-stripe, %s units, %s per pass, %s\n", res.EC, k+m, bench.FormatSize(int64(stripe)), bench.FormatSize(int64(size)), fsync)
			fmt.Fprintf(tw, "round\tplain write\tEC write\tratio\tplain read\tEC read\tratio\n")
			line := func(label string, pw, ew, pr, er float64) {
				fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f\t%.2f\n", label, pw, ew, ew/pw, pr, er, er/pr)
			}
			for i, rd := range res.Rounds {
				line(fmt.Sprint(i+1), rd.PlainWrite, rd.ECWrite, rd.PlainRead, rd.ECRead)
			}
			line("all", res.PlainWrite, res.ECWrite, res.PlainRead, res.ECRead)
			fmt.Fprintf(tw, "(MiB/s; \"all\": total bytes over total time of each side)\n")
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.String("mount", "", "a stripefs mount with at least K+M OSTs")
	f.StringVarP(&ec, "ec", "E", "4+2", "erasure coding K+M")
	f.VarP(&stripe, "stripe-size", "S", "stripe unit size")
	f.Var(&size, "size", "bytes written and read per pass")
	f.IntVar(&rounds, "rounds", 3, "alternating rounds")
	f.BoolVar(&noFsync, "no-fsync", false, "do not fsync before closing after writing (ior without -e)")
	f.BoolVar(&asJSON, "json", false, "one JSON object")
	return cmd
}
