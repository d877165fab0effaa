package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/xattr"
	"github.com/spf13/cobra"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/internal/targets"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/stats"
)

// The lfs-style tools work on a mounted path through extended attributes,
// so they need no connection of their own except to read the cluster map.

// parseLfsSize reads sizes the way lfs does: 1048576, 64k, 1M, 4G.
func parseLfsSize(s string) (int64, error) {
	n, err := parseLfsUnits(s, 1)
	if err != nil {
		return 0, fmt.Errorf("bad size %q (bytes, or with k, m, g, t)", s)
	}
	return int64(n), nil
}

// parseLfsUnits reads a number with an optional binary suffix (k, m, g,
// t); a bare number counts in unit. Both lfs setstripe (bytes) and lfs
// setquota (KiB) read sizes this way.
func parseLfsUnits(s string, unit uint64) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty size")
	}
	mult := unit
	if i := strings.IndexByte("kmgt", strings.ToLower(s[len(s)-1:])[0]); i >= 0 {
		mult = 1 << (10 * (i + 1))
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > 1<<63/mult {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

// mountMGS is the MGS address of the stripefs mount path is on: every
// path of a mount answers it (fs.MGSXattr).
func mountMGS(path string) (string, error) {
	v, err := xattr.Get(path, fs.MGSXattr)
	if err != nil {
		return "", fmt.Errorf("%s is not on a stripefs mount: %w", path, unwrapXattr(err))
	}
	return string(v), nil
}

// mgsOf is the MGS address a command was given: the one of the mount
// path is on, else mgs (--mgs); want names the other way in the error.
func mgsOf(mgs, path, want string) (string, error) {
	if path != "" {
		return mountMGS(path)
	}
	if mgs == "" {
		return "", fmt.Errorf("give --mgs or %s", want)
	}
	return mgs, nil
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// clusterOf returns the cluster map of the filesystem path is on.
func clusterOf(path string) (*proto.Config, error) {
	mgs, err := mountMGS(path)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return targets.Map(ctx, mgs, "lfs", 0)
}

func statsCmd() *cobra.Command {
	var mgs string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats [--json] [MOUNTPOINT | --mgs ADDR]",
		Short: "Print client and server counters (RPCs by kind, bytes, cache and OST counters)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var s *stats.Snapshot
			var err error
			switch {
			case len(args) == 1:
				s, err = stats.FromMount(ctx, args[0])
			case mgs != "":
				s, err = stats.FromServers(ctx, mgs)
			default:
				return fmt.Errorf("give a mount point or --mgs")
			}
			if s == nil {
				return err
			}
			// What answered is printed even when a target did not, as
			// lctl prints the devices it can reach.
			if asJSON {
				if jerr := json.NewEncoder(os.Stdout).Encode(s); jerr != nil {
					return jerr
				}
			} else {
				s.Write(os.Stdout)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&mgs, "mgs", "", "MGS address, for server counters without a mount")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
