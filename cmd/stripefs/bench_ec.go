package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/stripefs/stripefs/bench"
	"github.com/stripefs/stripefs/proto"
)

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
			res, err := bench.EC(cmd.Context(), bench.ECConfig{Mount: mnt, K: int(k), M: int(m), StripeSize: int64(stripe),
				Size: int64(size), Rounds: rounds, Fsync: !noFsync})
			if err != nil {
				return err
			}
			if asJSON {
				return res.WriteJSON(os.Stdout)
			}
			return res.WriteTable(os.Stdout)
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
