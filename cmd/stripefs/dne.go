package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pkg/xattr"
	"github.com/spf13/cobra"

	"github.com/stripefs/stripefs/mds"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/stats"
)

// The distributed-namespace tools (lfs mkdir -i, setdirstripe,
// getdirstripe) and set_param, all through extended attributes on the
// mount except set_param, which talks to the MDTs.

func mkdirCmd() *cobra.Command {
	var index, count int
	var mode uint32
	cmd := &cobra.Command{
		Use:   "mkdir -i MDT_INDEX [-c 1] DIR",
		Short: "Create a directory on a chosen MDT (lfs mkdir -i); the directory is owned by root",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count != 1 {
				return fmt.Errorf("striped directories (-c %d) are not supported yet", count)
			}
			if index < 0 {
				return fmt.Errorf("-i needs an MDT index (0, 1, …)")
			}
			dir := filepath.Clean(args[0])
			parent, name := filepath.Dir(dir), filepath.Base(dir)
			v := fmt.Sprintf("name=%s mdt_index=%d mode=%o", name, index, mode)
			if strings.ContainsAny(name, " \x00") {
				return fmt.Errorf("%q: names with spaces cannot be passed to mkdir -i", name)
			}
			if err := xattr.Set(parent, mds.MkdirXattr, []byte(v)); err != nil {
				return fmt.Errorf("mkdir %s on mdt%d: %w", dir, index, unwrapXattr(err))
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&index, "mdt-index", "i", -1, "MDT to create the directory on")
	cmd.Flags().IntVarP(&count, "mdt-count", "c", 1, "MDTs to stripe the directory over (1)")
	cmd.Flags().Uint32VarP(&mode, "mode", "m", 0o755, "permission bits (octal)")
	return cmd
}

func setdirstripeCmd() *cobra.Command {
	var index, count int
	var def bool
	cmd := &cobra.Command{
		Use:   "setdirstripe [-D] -i MDT_INDEX [-c 1] DIR",
		Short: "With -D, set where new subdirectories of DIR go (-i -1: round-robin); without, create DIR on an MDT",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count != 1 {
				return fmt.Errorf("striped directories (-c %d) are not supported yet", count)
			}
			if !def {
				return mkdirCmd().RunE(cmd, args)
			}
			v := fmt.Sprintf("mdt_index=%d mdt_count=%d", index, count)
			if err := xattr.Set(args[0], mds.DirDefaultXattr, []byte(v)); err != nil {
				return fmt.Errorf("%s: %w", args[0], unwrapXattr(err))
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&index, "mdt-index", "i", -1, "MDT index, -1 for round-robin")
	cmd.Flags().IntVarP(&count, "mdt-count", "c", 1, "stripe count (1)")
	cmd.Flags().BoolVarP(&def, "default", "D", false, "set the default for new subdirectories")
	return cmd
}

func getdirstripeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "getdirstripe DIR...",
		Short: "Show which MDT a directory lives on and its default for subdirectories",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, d := range args {
				v, err := xattr.Get(d, mds.DirXattr)
				if err != nil {
					return fmt.Errorf("%s: %w", d, unwrapXattr(err))
				}
				fmt.Printf("%s\n  %s\n", d, strings.ReplaceAll(string(v), " ", "\n  "))
				if dv, err := xattr.Get(d, mds.DirDefaultXattr); err == nil {
					fmt.Printf("  default: %s\n", dv)
				}
			}
			return nil
		},
	}
}

func setParamCmd() *cobra.Command {
	var mgs string
	cmd := &cobra.Command{
		Use:   "set_param [--mgs ADDR | --mount MNT] mdt.remote_sync=0|1",
		Short: "Change an MDT tunable on every MDT (lctl set_param)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, value, ok := strings.Cut(args[0], "=")
			if !ok {
				return fmt.Errorf("want NAME=VALUE, got %q", args[0])
			}
			if mnt, _ := cmd.Flags().GetString("mount"); mnt != "" {
				v, err := xattr.Get(mnt, stats.MGSXattr)
				if err != nil {
					return fmt.Errorf("%s is not a stripefs mount: %w", mnt, err)
				}
				mgs = string(v)
			}
			if mgs == "" {
				return fmt.Errorf("give --mgs or --mount")
			}
			done, err := setMDTParam(context.Background(), mgs, name, value)
			for _, idx := range done {
				fmt.Printf("mdt%d: %s=%s\n", idx, name, value)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&mgs, "mgs", "", "MGS address")
	cmd.Flags().String("mount", "", "a stripefs mount point (to find the MGS)")
	return cmd
}

// setMDTParam sets a tunable on every MDT of the filesystem whose MGS is
// mgs, and returns the MDTs that took it.
func setMDTParam(ctx context.Context, mgs, name, value string) ([]uint32, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := rpc.NewClient(mgs, "set_param")
	defer c.Close()
	cfg, err := rpc.Invoke[proto.Config](ctx, c, proto.GConfig, &proto.Empty{})
	if err != nil {
		return nil, err
	}
	var done []uint32
	for _, t := range cfg.MDTs {
		tc := rpc.NewClient(t.Addr, "set_param")
		_, err := rpc.Invoke[proto.Empty](ctx, tc, proto.MSetParam, &proto.SetParamReq{Name: name, Value: value})
		tc.Close()
		if err != nil {
			return done, fmt.Errorf("mdt%d: %s=%s: %w", t.Index, name, value, err)
		}
		done = append(done, t.Index)
	}
	return done, nil
}

// unwrapXattr turns pkg/xattr's error into its errno text, which is all
// the mount can say.
func unwrapXattr(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}
