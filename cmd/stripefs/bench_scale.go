package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/stripefs/stripefs/bench"
)

func scaleBenchCmd() *cobra.Command {
	c := bench.ScaleConfig{Files: 200_000, Step: 20_000, Procs: 4, Lookups: 2000}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "scale DIR [--files 200000] [--step 20000] [--procs 4] [--lookups 2000] [--keep] [--json]",
		Short: "Create rate and memory as one directory grows to many files",
		Long: `Creates --files empty files in a new directory under DIR (on a stripefs
mount), --procs at once, noting on stderr each --step files as they are
made. At the end it prints each step's create rate, the rate of --lookups
stats of files picked at random among those made after it (the kernel's
dentries dropped first, as root), and the memory of each process of the
filesystem then: the mount, and each server process with the targets it
serves (RSS, Go heap, and for MDTs the Pebble block cache against its
bound and the memtables). Then it lists the directory once and removes
the files (timed), unless --keep.
The default takes a few minutes; the issue's target is --files 2000000
--step 100000 (the last step's rate at least 0.8 of the first's).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.Dir = args[0]
			c.Progress = func(s bench.ScaleStep) {
				// To stderr, so that --json's stdout stays one object.
				fmt.Fprintf(cmd.ErrOrStderr(), "scale: %d files, last step %.0f creates/s, %.0f lookups/s\n", s.Files, s.Rate, s.Lookups)
			}
			ctx, stop := interruptible()
			defer stop()
			res, err := bench.Scale(ctx, c)
			return printResult(ctx, cmd.OutOrStdout(), asJSON, res, err, func(r *bench.ScaleResult) *time.Time { return &r.Time })
		},
	}
	cmd.Flags().IntVar(&c.Files, "files", c.Files, "files to create")
	cmd.Flags().IntVar(&c.Step, "step", c.Step, "files per reported step")
	cmd.Flags().IntVar(&c.Procs, "procs", c.Procs, "creators at once")
	cmd.Flags().BoolVar(&c.Keep, "keep", false, "leave the files")
	cmd.Flags().IntVar(&c.Lookups, "lookups", c.Lookups, "files stat'ed at random after each step, dentries dropped first (0: none)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	return cmd
}
