package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pkg/xattr"
	"github.com/spf13/cobra"

	"github.com/stripefs/stripefs/internal/targets"
	"github.com/stripefs/stripefs/mds"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// The distributed-namespace tools (lfs mkdir -i, setdirstripe,
// getdirstripe) and set_param, all through extended attributes on the
// mount except set_param, which talks to the MDTs.

func mkdirCmd() *cobra.Command {
	var index, count int
	var mode uint32
	cmd := &cobra.Command{
		Use:   "mkdir [-c COUNT] [-i MDT_INDEX] DIR",
		Short: "Create a directory on a chosen MDT (lfs mkdir -i), or striped over COUNT MDTs (-c); it is owned by root",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return mkdirStriped(args[0], index, count, mode)
		},
	}
	cmd.Flags().IntVarP(&index, "mdt-index", "i", -1, "MDT of the directory (of its first stripe with -c)")
	cmd.Flags().IntVarP(&count, "mdt-count", "c", 1, "MDTs to stripe the directory over")
	cmd.Flags().Uint32VarP(&mode, "mode", "m", 0o755, "permission bits (octal)")
	return cmd
}

// mkdirStriped creates dir on MDT index, striped over count MDTs from
// there. index -1 with count > 1 follows the parent's default (else its
// MDT).
func mkdirStriped(dir string, index, count int, mode uint32) error {
	dir = filepath.Clean(dir)
	parent, name := filepath.Dir(dir), filepath.Base(dir)
	if err := checkDirStripe(parent, index, count, count > 1); err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	if strings.ContainsAny(name, " \x00") {
		return fmt.Errorf("%q: names with spaces cannot be passed to mkdir -i/-c", name)
	}
	v := fmt.Sprintf("name=%s mdt_index=%d mdt_count=%d mode=%o", name, index, count, mode)
	if err := xattr.Set(parent, mds.MkdirXattr, []byte(v)); err != nil {
		return fmt.Errorf("mkdir %s (-i %d -c %d): %w", dir, index, count, unwrapXattr(err))
	}
	return nil
}

// checkDirStripe refuses, with a message that says why, a stripe count or
// MDT index the filesystem cannot have (the MDT would refuse them too,
// but only an errno reaches us from there). anyIndex allows -1.
func checkDirStripe(path string, index, count int, anyIndex bool) error {
	n, err := mdtCount(path)
	if err != nil {
		return err
	}
	switch {
	case count < 1 || count > n:
		return fmt.Errorf("stripe count %d: it must be 1 to %d, the number of MDTs: %w", count, n, syscall.EINVAL)
	case index < -1 || index >= n || index == -1 && !anyIndex:
		return fmt.Errorf("MDT index %d: it must be 0 to %d: %w", index, n-1, syscall.EINVAL)
	}
	return nil
}

// mdtCount asks the MGS of the mount holding path how many MDTs there are.
func mdtCount(path string) (int, error) {
	cfg, err := clusterOf(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range cfg.MDTs {
		n = max(n, int(t.Index)+1)
	}
	return n, nil
}

func setdirstripeCmd() *cobra.Command {
	var index, count int
	var def bool
	cmd := &cobra.Command{
		Use:   "setdirstripe [-D] [-c COUNT] [-i MDT_INDEX] DIR",
		Short: "Create DIR striped over COUNT MDTs from MDT_INDEX (an existing empty DIR is made again so); with -D, set how new subdirectories of DIR are made (-i -1: round-robin)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if def {
				if err := checkDirStripe(dir, index, count, true); err != nil {
					return fmt.Errorf("setdirstripe -D %s: %w", dir, err)
				}
				v := fmt.Sprintf("mdt_index=%d mdt_count=%d", index, count)
				if err := xattr.Set(dir, mds.DirDefaultXattr, []byte(v)); err != nil {
					return fmt.Errorf("%s: %w", dir, unwrapXattr(err))
				}
				return nil
			}
			if count == 1 && index < 0 {
				return fmt.Errorf("setdirstripe %s: give -i MDT_INDEX or -c COUNT: %w", dir, syscall.EINVAL)
			}
			mode := uint32(0o755)
			if fi, err := os.Stat(dir); err == nil {
				// An existing directory is striped by making it again,
				// which only an empty one allows (Lustre would need a
				// migration for the rest).
				if !fi.IsDir() {
					return fmt.Errorf("setdirstripe %s: not a directory: %w", dir, syscall.ENOTDIR)
				}
				ents, err := os.ReadDir(dir)
				if err != nil {
					return err
				}
				if len(ents) > 0 {
					return fmt.Errorf("setdirstripe %s: the directory holds %d entries; only an empty one can be striped: %w", dir, len(ents), syscall.EINVAL)
				}
				if err := checkDirStripe(filepath.Dir(filepath.Clean(dir)), index, count, count > 1); err != nil {
					return fmt.Errorf("setdirstripe %s: %w", dir, err)
				}
				mode = uint32(fi.Mode().Perm())
				if err := os.Remove(dir); err != nil {
					return fmt.Errorf("setdirstripe %s: %w", dir, err)
				}
			}
			return mkdirStriped(dir, index, count, mode)
		},
	}
	cmd.Flags().IntVarP(&index, "mdt-index", "i", -1, "MDT index (of the first stripe), -1 for the default or round-robin")
	cmd.Flags().IntVarP(&count, "mdt-count", "c", 1, "stripe count")
	cmd.Flags().BoolVarP(&def, "default", "D", false, "set the default for new subdirectories")
	return cmd
}

func getdirstripeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "getdirstripe DIR...",
		Short: "Show where a directory lives, its stripes (like lfs getdirstripe) and its default for subdirectories",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, d := range args {
				v, err := xattr.Get(d, mds.DirXattr)
				if err != nil {
					return fmt.Errorf("%s: %w", d, unwrapXattr(err))
				}
				fmt.Printf("%s\n%s", d, formatLMV(string(v)))
				if dv, err := xattr.Get(d, mds.DirDefaultXattr); err == nil {
					fmt.Printf("  default: %s\n", dv)
				}
			}
			return nil
		},
	}
}

// formatLMV renders a lustre.lmv value: a striped directory as lfs
// getdirstripe does (count, offset, hash, then each stripe's MDT index and
// FID), a plain one as its keys one a line.
func formatLMV(v string) string {
	kv := map[string]string{}
	var keys []string
	for _, f := range strings.Fields(v) {
		k, val, _ := strings.Cut(f, "=")
		kv[k] = val
		keys = append(keys, k)
	}
	var sb strings.Builder
	if _, ok := kv["lmv_stripe_count"]; !ok {
		for _, k := range keys {
			fmt.Fprintf(&sb, "  %s=%s\n", k, kv[k])
		}
		return sb.String()
	}
	fmt.Fprintf(&sb, "lmv_stripe_count: %s lmv_stripe_offset: %s lmv_hash_type: %s\n",
		kv["lmv_stripe_count"], kv["lmv_stripe_offset"], kv["lmv_hash_type"])
	fmt.Fprintf(&sb, "master: mdt%s %s\n", kv["mdt_index"], kv["fid"])
	sb.WriteString("mdtidx\t\t FID[seq:oid:ver]\n")
	for i := 0; ; i++ {
		s, ok := kv[fmt.Sprintf("stripe%d", i)]
		if !ok {
			break
		}
		mdt, fid, _ := strings.Cut(s, ":")
		fmt.Fprintf(&sb, "%6s\t\t %s\n", mdt, fid)
	}
	return sb.String()
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
			mnt, _ := cmd.Flags().GetString("mount")
			mgs, err := mgsOf(mgs, mnt, "--mount")
			if err != nil {
				return err
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
	cfg, err := targets.Map(ctx, mgs, "set_param", 0)
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
