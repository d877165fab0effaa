package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stripefs/stripefs/internal/targets"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// dfTarget is one target's line of stripefs df.
type dfTarget struct {
	UUID      string `json:"uuid"`
	Kind      string `json:"kind"`
	Index     uint32 `json:"index"`
	Bytes     uint64 `json:"bytes"`
	Used      uint64 `json:"used"`
	Available uint64 `json:"available"`
	Inodes    uint64 `json:"inodes"`
	IUsed     uint64 `json:"iused"`
	IFree     uint64 `json:"ifree"`
	// Flags are lfs df's: R (read-only: its disk failed), S (out of
	// space: down to its reserve).
	Flags string `json:"flags,omitempty"`
	fsid  uint64
	// Error says the target did not answer (an inactive device); its
	// figures are zero and left out of the summary.
	Error string `json:"error,omitempty"`
}

// label is the target's kind as Lustre writes it: MDT, OST.
func (d dfTarget) label() string { return strings.ToUpper(d.Kind) }

// dfReport is what stripefs df --json prints.
type dfReport struct {
	Mount   string     `json:"mount"`
	Targets []dfTarget `json:"targets"`
	// Summary is the filesystem's: space of the OSTs, inodes of the MDTs
	// (what statfs on the mount reports), over the targets that answered.
	Summary dfTarget `json:"summary"`
}

func dfCmd() *cobra.Command {
	var inodes, human, asJSON bool
	cmd := &cobra.Command{
		Use:   "df [-i] [-h] [--json] PATH",
		Short: "Space (or with -i, inodes) of every MDT and OST of the filesystem PATH is on (lfs df)",
		Long: `Print each MDT's and OST's size, use and free space, or with -i its
inodes, then the filesystem's summary: space of the OSTs, inodes of the
MDTs. A target that does not answer is listed as an inactive device and
the exit status is 1; the others are still printed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mnt := filepath.Clean(args[0])
			cfg, err := clusterOf(mnt)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rep := dfOf(ctx, mnt, targets.Of(cfg))
			if asJSON {
				if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
					return err
				}
			} else {
				printDf(rep, inodes, human)
			}
			for _, t := range rep.Targets {
				if t.Error != "" {
					os.Exit(1)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&inodes, "inodes", "i", false, "inodes instead of space")
	f.BoolVarP(&human, "human-readable", "h", false, "sizes in K, M, G and T")
	f.BoolVar(&asJSON, "json", false, "one JSON object")
	cmd.Flags().Bool("help", false, "help for df") // -h is taken by --human-readable, as in df
	return cmd
}

// dfOf asks every target for its statfs.
func dfOf(ctx context.Context, mnt string, ts []targets.Target) *dfReport {
	rep := &dfReport{Mount: mnt, Targets: make([]dfTarget, len(ts)), Summary: dfTarget{UUID: "filesystem_summary"}}
	errs := targets.AskEach(ctx, ts, "df", 3*time.Second, func(ctx context.Context, c *rpc.Client, i int) error {
		method := uint16(proto.OStatfs)
		if ts[i].Kind == proto.KindMDT {
			method = proto.MStatfs
		}
		r, err := rpc.Invoke[proto.StatfsReply](ctx, c, method, &proto.Empty{})
		if err != nil {
			return err
		}
		d := &rep.Targets[i]
		d.Bytes, d.Used, d.Available = r.Blocks, r.Blocks-min(r.Bfree, r.Blocks), r.Bavail
		d.Inodes, d.IUsed, d.IFree = r.Files, r.Files-min(r.Ffree, r.Files), r.Ffree
		d.Flags, d.fsid = dfFlags(r.Flags), r.Fsid
		return nil
	})
	s := &rep.Summary
	// OSTs on one host filesystem (stripefs up's) share its space: the
	// summary counts it once, as df would.
	shared := map[uint64]bool{}
	for i, t := range ts {
		d := &rep.Targets[i]
		d.Kind, d.Index = t.Kind, t.Index
		d.UUID = "stripefs-" + proto.TargetName(t.Kind, t.Index) + "_UUID"
		switch {
		case errs[i] != nil:
			d.Error = errs[i].Error()
		case t.Kind == proto.KindOST:
			if d.fsid != 0 && shared[d.fsid] {
				continue
			}
			shared[d.fsid] = true
			s.Bytes, s.Used, s.Available = s.Bytes+d.Bytes, s.Used+d.Used, s.Available+d.Available
		default:
			s.Inodes, s.IUsed, s.IFree = s.Inodes+d.Inodes, s.IUsed+d.IUsed, s.IFree+d.IFree
		}
	}
	return rep
}

// dfFlags are a target's flags as lfs df's letters.
func dfFlags(f uint32) string {
	var b strings.Builder
	if f&proto.StatfsReadOnly != 0 {
		b.WriteByte('R')
	}
	if f&proto.StatfsNoSpace != 0 {
		b.WriteByte('S')
	}
	return b.String()
}

// printDf prints the report as lfs df does.
func printDf(rep *dfReport, inodes, human bool) {
	num := func(n uint64) string {
		if human {
			return humanSize(n)
		}
		return strconv.FormatUint(n, 10)
	}
	size := func(n uint64) string {
		if human {
			return humanSize(n)
		}
		return strconv.FormatUint(n/1024, 10)
	}
	pct := func(used, free uint64) string {
		if used+free == 0 {
			return "-"
		}
		return fmt.Sprintf("%d%%", (used*100+used+free-1)/(used+free)) // rounded up, as df does
	}
	const row = "%-22s %12s %12s %12s %5s %s\n"
	switch {
	case inodes:
		fmt.Printf(row, "UUID", "Inodes", "IUsed", "IFree", "IUse%", "Mounted on")
	case human:
		fmt.Printf(row, "UUID", "bytes", "Used", "Available", "Use%", "Mounted on")
	default:
		fmt.Printf(row, "UUID", "1K-blocks", "Used", "Available", "Use%", "Mounted on")
	}
	line := func(d dfTarget, where string) {
		switch {
		case d.Error != "":
			fmt.Printf("%-22s : inactive device (%s)\n", d.UUID, d.Error)
		case inodes:
			fmt.Printf(row, d.UUID, num(d.Inodes), num(d.IUsed), num(d.IFree), pct(d.IUsed, d.IFree), where)
		default:
			fmt.Printf(row, d.UUID, size(d.Bytes), size(d.Used), size(d.Available), pct(d.Used, d.Available), where)
		}
	}
	for _, d := range rep.Targets {
		where := fmt.Sprintf("%s[%s:%d]", rep.Mount, d.label(), d.Index)
		if d.Flags != "" {
			where += " " + d.Flags
		}
		line(d, where)
	}
	fmt.Println()
	line(rep.Summary, rep.Mount)
}
