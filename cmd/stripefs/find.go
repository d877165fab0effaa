package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/pkg/xattr"
	"github.com/spf13/cobra"

	"github.com/stripefs/stripefs/find"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/stats"
)

func findCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "find PATH [-name PATTERN] [-size [+-]N[ckMG]] [-newer FILE] [-type f|d|l] [--mdt N] [--ost N] [--scan | --walk]",
		Short: "Find files, as lfs find: by name, size, age, type, and the MDT and OSTs they live on",
		Long: `Prints the paths under PATH (PATH included) that match every predicate, as
find(1) and lfs find do: -name PATTERN (a shell pattern on the last element),
-size [+-]N[ckMG] (N units of 512 bytes, or c bytes, k KiB, M MiB, G GiB; +
more, - less, the size rounded up to whole units), -newer FILE (modified after
FILE), -type f|d|l, --mdt N (-m: the inode lives on MDT N), --ost N (-O: an
object of the file is on OST N).
--scan reads every MDT's own inodes and entries at once, in a few round trips
per MDT (the admin key, as fsck); --walk walks the mount, a stat a file. By
default a search from the mount's root scans and any other walks.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
				return cmd.Help()
			}
			root, p, mode, err := parseFind(args)
			if err != nil {
				return err
			}
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			emit := func(path string) { fmt.Fprintln(out, path) }
			ctx, stop := interruptible()
			defer stop()
			var st syscall.Stat_t
			if err := syscall.Stat(root, &st); err != nil {
				return fmt.Errorf("find: %s: %w", root, err)
			}
			mgs, merr := xattr.Get(root, stats.MGSXattr)
			if mode == "" {
				mode = "walk"
				if merr == nil && st.Ino == 1 {
					mode = "scan"
				}
			}
			if mode == "walk" {
				return find.Walk(ctx, root, p, emit)
			}
			if merr != nil {
				return fmt.Errorf("find --scan: %s is not on a stripefs mount: %w", root, merr)
			}
			fid := proto.FIDFromIno(st.Ino)
			if st.Ino == 1 {
				fid = proto.RootFID
			}
			return find.Scan(ctx, string(mgs), fid, root, p, emit)
		},
	}
}

// parseFind reads find's arguments: PATH first, then predicates in
// find's single-dash form (and lfs find's --mdt, --ost).
func parseFind(args []string) (root string, p *find.Pred, mode string, err error) {
	p = &find.Pred{MDT: find.NoMDT, OST: find.NoOST}
	if len(args) == 0 || args[0] == "" || args[0][0] == '-' {
		return "", nil, "", fmt.Errorf("find: PATH comes first")
	}
	root = filepath.Clean(args[0])
	for i := 1; i < len(args); i++ {
		a := args[i]
		val := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("find: %s needs a value", a)
			}
			i++
			return args[i], nil
		}
		var v string
		switch a {
		case "--scan", "--walk":
			mode = a[2:]
			continue
		case "--pool", "-pool":
			return "", nil, "", fmt.Errorf("find: %s: stripefs has no OST pools (choose the first OST with setstripe -i)", a)
		}
		if v, err = val(); err != nil {
			return "", nil, "", err
		}
		switch a {
		case "-name", "--name":
			if _, err := filepath.Match(v, ""); err != nil {
				return "", nil, "", fmt.Errorf("find: -name %q: %w", v, err)
			}
			p.Name = v
		case "-type", "--type":
			if v != "f" && v != "d" && v != "l" {
				return "", nil, "", fmt.Errorf("find: -type %q: f, d or l", v)
			}
			p.Type = v[0]
		case "-size", "--size":
			if p.Size, err = find.ParseSize(v); err != nil {
				return "", nil, "", fmt.Errorf("find: %w", err)
			}
		case "-newer", "--newer":
			var st syscall.Stat_t
			if err := syscall.Stat(v, &st); err != nil {
				return "", nil, "", fmt.Errorf("find: -newer %s: %w", v, err)
			}
			p.Newer, p.HasNewer = st.Mtim.Nano(), true
		case "--mdt", "-mdt", "-m":
			if p.MDT, err = strconv.Atoi(v); err != nil || p.MDT < 0 {
				return "", nil, "", fmt.Errorf("find: --mdt %q: an MDT index", v)
			}
		case "--ost", "-ost", "-O":
			if p.OST, err = strconv.Atoi(v); err != nil || p.OST < 0 {
				return "", nil, "", fmt.Errorf("find: --ost %q: an OST index", v)
			}
		default:
			return "", nil, "", fmt.Errorf("find: unknown predicate %q", a)
		}
	}
	if _, err := os.Lstat(root); err != nil {
		return "", nil, "", fmt.Errorf("find: %w", err)
	}
	return root, p, mode, nil
}
