package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pkg/xattr"
	"github.com/spf13/cobra"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
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

// clusterOf returns the cluster map of the filesystem path is on.
func clusterOf(path string) (*proto.Config, error) {
	mgs, err := xattr.Get(path, stats.MGSXattr)
	if err != nil {
		return nil, fmt.Errorf("%s is not on a stripefs mount: %w", path, err)
	}
	c := rpc.NewClient(string(mgs), "lfs")
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return rpc.Invoke[proto.Config](ctx, c, proto.GConfig, &proto.Empty{})
}

func setstripeCmd() *cobra.Command {
	var count int
	var size, first, ec string
	cmd := &cobra.Command{
		Use:   "setstripe [-c COUNT] [-S SIZE] [-i FIRST_OST] [-E K+M] PATH",
		Short: "Set the layout of a new file, or a directory's default for new files",
		Long: `Set the layout of a new (empty) file, creating it if it does not exist, or
the default layout of a directory for the files created in it afterwards.
-c -1 stripes over every OST; -S takes 64k, 1M, 4M…; -i -1 lets the MDT choose.
-E K+M erasure-codes the file: rows of K data units of SIZE with M parity
units, on K+M distinct OSTs (the stripe count is K+M), readable with any M
OSTs lost; -E none goes back to plain striping.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			var kv []string
			if cmd.Flags().Changed("stripe-count") {
				if count == 0 || count < -1 {
					return fmt.Errorf("stripe count %d: use a positive count or -1 for all OSTs", count)
				}
				kv = append(kv, fmt.Sprintf("stripe_count=%d", count))
			}
			if cmd.Flags().Changed("stripe-size") {
				n, err := parseLfsSize(size)
				if err != nil {
					return err
				}
				if n == 0 || n%proto.MinStripeSize != 0 || n > proto.MaxStripeSize {
					return fmt.Errorf("stripe size %d is not a multiple of 64 KiB between 64 KiB and %d MiB", n, proto.MaxStripeSize>>20)
				}
				kv = append(kv, fmt.Sprintf("stripe_size=%d", n))
			}
			if cmd.Flags().Changed("ec") {
				k, m, err := proto.ParseEC(ec)
				if err != nil {
					return err
				}
				if k == 0 {
					kv = append(kv, "ec=none")
				} else {
					kv = append(kv, fmt.Sprintf("ec=%d+%d", k, m))
				}
			}
			if cmd.Flags().Changed("stripe-index") {
				n, err := strconv.Atoi(first)
				if err != nil || n < -1 {
					return fmt.Errorf("bad stripe index %q", first)
				}
				kv = append(kv, fmt.Sprintf("stripe_offset=%d", n))
			}
			if len(kv) == 0 {
				return fmt.Errorf("nothing to set: give -c, -S, -i or -E")
			}
			st, err := os.Stat(path)
			created := false
			if errors.Is(err, os.ErrNotExist) {
				f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
				if err != nil {
					return err
				}
				f.Close()
				created = true
			} else if err != nil {
				return err
			} else if st.Mode().IsRegular() && st.Size() > 0 {
				return fmt.Errorf("%s: cannot change the layout of a file that holds data (%w)", path, syscall.EINVAL)
			}
			cfg, err := clusterOf(path)
			if err != nil {
				return err
			}
			l, err := proto.ParseLayout(strings.Join(kv, " "), cfg.Default)
			if err == nil {
				err = l.Validate(len(cfg.OSTs))
			}
			if err == nil {
				err = xattr.Set(path, proto.LayoutXattr, []byte(strings.Join(kv, " ")))
			}
			if err != nil {
				if created {
					os.Remove(path)
				}
				return fmt.Errorf("%s: %w", path, err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVarP(&count, "stripe-count", "c", 1, "number of OSTs to stripe over (-1: all)")
	f.StringVarP(&size, "stripe-size", "S", "1M", "stripe unit size, a multiple of 64k")
	f.StringVarP(&first, "stripe-index", "i", "-1", "first OST (-1: the MDT chooses)")
	f.StringVarP(&ec, "ec", "E", "", "erasure coding: K+M data+parity units per row (e.g. 4+2), or none")
	return cmd
}

func getstripeCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "getstripe PATH...",
		Short: "Show the layout of files, or the default layout of directories",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, path := range args {
				v, err := xattr.Get(path, proto.LayoutXattr)
				if errors.Is(err, xattr.ENOATTR) || errors.Is(err, syscall.ENODATA) {
					fmt.Printf("%s has no stripe info (a directory without a default uses the filesystem's)\n", path)
					continue
				}
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				l, err := proto.ParseLayout(string(v), proto.Layout{})
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				osts, fid := layoutFields(string(v))
				pattern := "raid0"
				if l.IsEC() {
					pattern = "ec"
				}
				if asJSON {
					out := map[string]any{"path": path, "lmm_stripe_count": int32(l.StripeCount),
						"lmm_stripe_size": l.StripeSize, "lmm_pattern": pattern, "lmm_stripe_offset": l.FirstOST, "osts": osts, "fid": fid}
					if l.IsEC() {
						out["lmm_ec_data"], out["lmm_ec_parity"] = l.ECData, l.ECParity
					}
					json.NewEncoder(os.Stdout).Encode(out)
					continue
				}
				fmt.Println(path)
				fmt.Printf("lmm_stripe_count:  %d\nlmm_stripe_size:   %d\nlmm_pattern:       %s\n", int32(l.StripeCount), l.StripeSize, pattern)
				if l.IsEC() {
					fmt.Printf("lmm_ec:            %d+%d (%d data and %d parity units per row; parity rotates over the objects)\n",
						l.ECData, l.ECParity, l.ECData, l.ECParity)
				}
				fmt.Printf("lmm_stripe_offset: %d\n", l.FirstOST)
				if fid != "" {
					fmt.Printf("lmm_fid:           %s\n\tobdidx\t\t objid\n", fid)
					for i, o := range osts {
						fmt.Printf("\t%6s\t\t %s/%d\n", o, fid, i)
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per path")
	return cmd
}

// layoutFields extracts the read-only osts and fid keys of a layout xattr.
func layoutFields(v string) (osts []string, fid string) {
	for _, f := range strings.Fields(v) {
		if s, ok := strings.CutPrefix(f, "osts="); ok {
			osts = strings.Split(s, ",")
		}
		if s, ok := strings.CutPrefix(f, "fid="); ok {
			fid = s
		}
	}
	return osts, fid
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
