package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/stripefs/stripefs/fsck"
)

func fsckCmd() *cobra.Command {
	var mgs string
	var repair, asJSON bool
	cmd := &cobra.Command{
		Use:   "fsck [--repair] [--json] (--mgs ADDR | MOUNTPOINT)",
		Short: "Check every MDT and OST: dangling entries, orphan inodes and objects, link counts",
		Long: `Check every MDT and OST: entries naming missing inodes, inodes no entry names,
wrong link counts, and OST objects no file owns. With --repair, dangling
entries are removed, orphan inodes linked into /lost+found, link counts
corrected and orphan objects destroyed. Exit status 1 when problems were
found and not repaired.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mgs, err := mgsOf(mgs, firstArg(args), "a mount point")
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			rep, err := fsck.Run(ctx, mgs, repair)
			if err != nil {
				return err
			}
			if asJSON {
				json.NewEncoder(os.Stdout).Encode(rep)
			} else {
				fmt.Printf("checked %d inodes, %d entries, %d objects\n", rep.Inodes, rep.Dirents, rep.Objects)
				for _, f := range rep.Findings {
					fmt.Println(" ", f)
				}
				if rep.Settled > 0 {
					fmt.Printf("%d passing findings left alone: a second scan no longer found them (operations in flight)\n", rep.Settled)
				}
				if repair {
					fmt.Printf("%d repairs", rep.Repaired)
					if rep.Skipped > 0 {
						fmt.Printf(", %d skipped: what they would fix changed after the scan", rep.Skipped)
					}
					fmt.Println()
				}
			}
			if len(rep.Findings) > 0 && !repair {
				os.Exit(1)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&mgs, "mgs", "", "MGS address")
	cmd.Flags().BoolVar(&repair, "repair", false, "repair what is found")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
