package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/fsck"
)

func rebuildCmd() *cobra.Command {
	var mgs string
	var ost int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rebuild --ost N [--json] (--mgs ADDR | MOUNTPOINT)",
		Short: "Recreate every unit an OST holds of the erasure-coded files, from the other OSTs",
		Long: `Recreate every object an OST holds of the erasure-coded files, from the
other OSTs: run it once a failed OST has been replaced (or its data directory
wiped) and started again. Each row of each erasure-coded file with an object on
the OST is read from the other OSTs, the OST's unit rebuilt and written back
with its tag, and the row's parity checked on the way. Rows that cannot be
rebuilt (more than M units lost) are reported. Plain striped files on the OST
cannot be rebuilt. Exit status 1 when a row could not be rebuilt.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := mgsOf(mgs, firstArg(args), "a mount point")
			if err != nil {
				return err
			}
			if ost < 0 || ost > 65535 {
				return fmt.Errorf("give the OST to rebuild with --ost N")
			}
			opts := fsck.ECOptions{ECCheck: fs.ECCheck{Repair: true, Lost: true, LostOST: uint32(ost)}, Workers: 4}
			return runECScrub(addr, opts, asJSON, fmt.Sprintf("rebuilt ost%d", ost))
		},
	}
	cmd.Flags().StringVar(&mgs, "mgs", "", "MGS address")
	cmd.Flags().IntVar(&ost, "ost", -1, "index of the OST to rebuild")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func scrubCmd() *cobra.Command {
	var mgs string
	var repair, asJSON bool
	cmd := &cobra.Command{
		Use:   "scrub [--repair] [--json] (--mgs ADDR | MOUNTPOINT)",
		Short: "Verify the parity of every row of every erasure-coded file",
		Long: `Read every unit of every row of every erasure-coded file with its tag, and
check that data units match their checksums and parity matches the data.
Units that cannot be read (an OST down) are reported as missing. With
--repair, missing and damaged units are rebuilt, data units re-tagged and
parity rewritten where it differs; the data as normal reads return it is
kept. Run it while the files are not being written. Exit status 1 when
damage was found and not repaired.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := mgsOf(mgs, firstArg(args), "a mount point")
			if err != nil {
				return err
			}
			opts := fsck.ECOptions{ECCheck: fs.ECCheck{Repair: repair}, Workers: 4}
			return runECScrub(addr, opts, asJSON, "scrubbed")
		},
	}
	cmd.Flags().StringVar(&mgs, "mgs", "", "MGS address")
	cmd.Flags().BoolVar(&repair, "repair", false, "repair what is found")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func runECScrub(mgs string, opts fsck.ECOptions, asJSON bool, what string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 24*time.Hour)
	defer cancel()
	start := time.Now()
	rep, err := fsck.ScrubEC(ctx, mgs, opts)
	if err != nil {
		return err
	}
	if asJSON {
		json.NewEncoder(os.Stdout).Encode(rep)
	} else {
		fmt.Printf("%s: %d erasure-coded files, %d rows in %v: %d rows with findings, %d repaired, %d unrecoverable\n",
			what, rep.Files, rep.Rows, time.Since(start).Round(time.Millisecond), rep.DamagedRows, rep.RepairedRows, rep.Unrecoverable)
		for _, f := range rep.Damaged {
			for _, r := range f.Findings {
				fmt.Printf("  %s row %d:", f.FID, r.Row)
				if len(r.Missing) > 0 {
					fmt.Printf(" missing units %v", r.Missing)
				}
				if len(r.BadData) > 0 {
					fmt.Printf(" data units not matching their checksum %v", r.BadData)
				}
				if len(r.BadParity) > 0 {
					fmt.Printf(" parity units not matching the data %v", r.BadParity)
				}
				switch {
				case r.Unrecoverable:
					fmt.Print(": cannot be rebuilt")
				case r.Error != "":
					fmt.Printf(": repair failed: %s", r.Error)
				case r.Repaired:
					fmt.Print(": repaired")
				}
				fmt.Println()
			}
		}
		for _, e := range rep.Errors {
			fmt.Println("  error:", e)
		}
	}
	unrepaired := rep.DamagedRows - rep.RepairedRows
	if rep.Unrecoverable > 0 || len(rep.Errors) > 0 || !opts.Repair && unrepaired > 0 {
		os.Exit(1)
	}
	return nil
}
