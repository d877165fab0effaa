package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/pkg/xattr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stripefs/stripefs/proto"
)

// setstripe and getstripe: lfs's layout tools, through the lustre.lov
// extended attribute.

const setstripeLong = `Set the layout of a new (empty) file, creating it if it does not exist, or
the default layout of a directory for the files created in it afterwards.
-c -1 stripes over every OST; -S takes 64k, 1M, 4M…; -i -1 lets the MDT choose.
--ec K+M erasure-codes the file: rows of K data units of SIZE with M parity
units, on K+M distinct OSTs (the stripe count is K+M), readable with any M
OSTs lost; --ec none goes back to plain striping.

A composite (progressive) layout, as Lustre's PFL, is a list of components,
each -E END followed by its own options, which it otherwise takes from the
component before it: e.g. -E 1M -c 1 -E 64M -c 4 -E -1 -c -1. A component
gets its objects when the file first grows into it; -E -1 (or eof) reaches
to the end of any file, and a write past the last end fails with EFBIG.
One component may be erasure-coded (-E 4M -c 1 -E -1 --ec 4+2 -S 1M): it
must start and end on its rows (K × SIZE bytes, 4 MiB here); a component
after it takes --ec none.`

// stripeFlags are the options of one component, or of a plain layout.
type stripeFlags struct {
	set                    *pflag.FlagSet
	count                  int
	size, first, ec, place string
}

func newStripeFlags() *stripeFlags {
	f := &stripeFlags{set: pflag.NewFlagSet("setstripe", pflag.ContinueOnError)}
	f.set.IntVarP(&f.count, "stripe-count", "c", 1, "number of OSTs to stripe over (-1: all)")
	f.set.StringVarP(&f.size, "stripe-size", "S", "1M", "stripe unit size, a multiple of 64k")
	f.set.StringVarP(&f.first, "stripe-index", "i", "-1", "first OST (-1: the MDT chooses)")
	f.set.StringVar(&f.ec, "ec", "", "erasure coding: K+M data+parity units per row (e.g. 4+2), or none")
	f.set.StringVarP(&f.place, "layout", "L", "raid0", "where a component's data lives: raid0 (OSTs) or mdt (Data-on-MDT, the first component only)")
	return f
}

// keys are the layout keys the options given say.
func (f *stripeFlags) keys() ([]string, error) {
	var kv []string
	if f.set.Changed("stripe-count") {
		if f.count == 0 || f.count < -1 {
			return nil, fmt.Errorf("stripe count %d: use a positive count or -1 for all OSTs", f.count)
		}
		kv = append(kv, fmt.Sprintf("stripe_count=%d", f.count))
	}
	if f.set.Changed("stripe-size") {
		n, err := parseLfsSize(f.size)
		if err != nil {
			return nil, err
		}
		if n == 0 || n%proto.MinStripeSize != 0 || n > proto.MaxStripeSize {
			return nil, fmt.Errorf("stripe size %d is not a multiple of 64 KiB between 64 KiB and %d MiB", n, proto.MaxStripeSize>>20)
		}
		kv = append(kv, fmt.Sprintf("stripe_size=%d", n))
	}
	if f.set.Changed("ec") {
		k, m, err := proto.ParseEC(f.ec)
		if err != nil {
			return nil, err
		}
		if k == 0 {
			kv = append(kv, "ec=none")
		} else {
			kv = append(kv, fmt.Sprintf("ec=%d+%d", k, m))
		}
	}
	if f.set.Changed("stripe-index") {
		n, err := strconv.Atoi(f.first)
		if err != nil || n < -1 {
			return nil, fmt.Errorf("bad stripe index %q", f.first)
		}
		kv = append(kv, fmt.Sprintf("stripe_offset=%d", n))
	}
	switch f.place {
	case "raid0":
	case "mdt":
		if len(kv) > 0 {
			return nil, fmt.Errorf("-L mdt: a component on the MDT takes no -c, -S, -i or --ec (its stripe size is its end): %w", syscall.EINVAL)
		}
		kv = append(kv, "pattern=mdt")
	default:
		return nil, fmt.Errorf("-L %q: the layouts are raid0 (OSTs) and mdt (Data-on-MDT): %w", f.place, syscall.EINVAL)
	}
	return kv, nil
}

// isComponentEnd reports whether arg is -E or --component-end, and the
// value it carries itself (--component-end=8M).
func isComponentEnd(arg string) (inline string, hasInline, ok bool) {
	switch {
	case arg == "-E" || arg == "--component-end":
		return "", false, true
	case strings.HasPrefix(arg, "--component-end="):
		return strings.TrimPrefix(arg, "--component-end="), true, true
	case strings.HasPrefix(arg, "-E") && len(arg) > 2 && !strings.HasPrefix(arg, "--"):
		return arg[2:], true, true
	}
	return "", false, false
}

// parseSetstripe reads setstripe's arguments: options, each -E END
// starting a component whose options follow it, and one path. It returns
// the lustre.lov value to set.
func parseSetstripe(args []string) (path, value string, err error) {
	type comp struct {
		end  string
		args []string
	}
	var head []string
	var comps []comp
	for i := 0; i < len(args); i++ {
		v, inline, ok := isComponentEnd(args[i])
		if !ok {
			if len(comps) == 0 {
				head = append(head, args[i])
			} else {
				comps[len(comps)-1].args = append(comps[len(comps)-1].args, args[i])
			}
			continue
		}
		if !inline {
			if i+1 == len(args) {
				return "", "", fmt.Errorf("-E needs a component end (e.g. 64M, or -1 for EOF)")
			}
			i++
			v = args[i]
		}
		comps = append(comps, comp{end: v})
	}
	var paths []string
	parse := func(a []string) ([]string, error) {
		f := newStripeFlags()
		if err := f.set.Parse(a); err != nil {
			return nil, err
		}
		paths = append(paths, f.set.Args()...)
		return f.keys()
	}
	headKeys, err := parse(head)
	if err != nil {
		return "", "", err
	}
	var lines []string
	start := uint64(0)
	for i, c := range comps {
		if strings.Contains(c.end, "+") {
			return "", "", fmt.Errorf("-E %s: -E is a component's end (Lustre's syntax); erasure coding is --ec %s: %w", c.end, c.end, syscall.EINVAL)
		}
		end := proto.ExtentEOF
		if e := strings.ToLower(c.end); e != "-1" && e != "eof" {
			n, err := parseLfsSize(c.end)
			if err != nil {
				return "", "", fmt.Errorf("-E %s: %w", c.end, err)
			}
			end = uint64(n)
		}
		kv, err := parse(c.args)
		if err != nil {
			return "", "", err
		}
		if i == 0 {
			kv = append(headKeys, kv...) // options before the first -E are its
		}
		lines = append(lines, strings.TrimSpace(fmt.Sprintf("extent=%d-%s %s", start, extentName(end), strings.Join(kv, " "))))
		start = end
	}
	if len(paths) != 1 {
		return "", "", fmt.Errorf("give exactly one path (got %d)", len(paths))
	}
	if len(comps) == 0 {
		if len(headKeys) == 0 {
			return "", "", fmt.Errorf("nothing to set: give -c, -S, -i, --ec or components (-E)")
		}
		return paths[0], strings.Join(headKeys, " "), nil
	}
	return paths[0], strings.Join(lines, "\n"), nil
}

func setstripeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "setstripe [-c COUNT] [-S SIZE] [-i FIRST_OST] [--ec K+M] [-E END [OPTIONS]]... PATH",
		Short: "Set the layout of a new file, or a directory's default for new files",
		Long:  setstripeLong,
		// Each -E's options are its own: the order matters, which flag
		// parsing would lose.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if a == "-h" || a == "--help" {
					return cmd.Help()
				}
			}
			path, value, err := parseSetstripe(args)
			if err != nil {
				return err
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
			l, err := proto.ParseLayout(value, cfg.Default)
			if err == nil {
				err = l.Validate(len(cfg.OSTs))
			}
			if err == nil {
				err = xattr.Set(path, proto.LayoutXattr, []byte(value))
				if errors.Is(err, syscall.EINVAL) && l.DoMEnd() > 0 {
					// Only the MDT knows its limit; the errno is all
					// that comes back through the mount.
					err = fmt.Errorf("%w: the MDT refused a Data-on-MDT component of %d bytes: larger than it allows (mds --dom-max, default %d), or it keeps no file data",
						err, l.DoMEnd(), proto.DefaultDoMMax)
				}
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
	cmd.Flags().AddFlagSet(newStripeFlags().set) // for the help text
	cmd.Flags().StringP("component-end", "E", "", "end of a component (64M, or -1 for EOF); the options after it are its own")
	return cmd
}

// shownComp is one component of a lustre.lov value as getstripe shows it.
type shownComp struct {
	Start, End uint64
	Layout     proto.Layout
	OSTs       []string // empty until instantiated
	First      int      // the file's object number of its first object
	DoM        bool     // pattern=mdt: the data is on the file's MDT
}

// parseShownLayout reads a lustre.lov value: a plain layout is one
// component covering the file. fid is the file's (empty for a directory).
func parseShownLayout(v string) (comps []shownComp, composite bool, fid string, err error) {
	lines := strings.Split(strings.TrimRight(v, "\x00"), "\n")
	composite = strings.Contains(v, "extent=")
	obj := 0
	for _, line := range lines {
		c := shownComp{End: proto.ExtentEOF, First: obj}
		var rest []string
		for _, f := range strings.Fields(line) {
			k, val, _ := strings.Cut(f, "=")
			switch k {
			case "osts":
				c.OSTs = strings.Split(val, ",")
			case "fid":
				fid = val
			case "pattern":
				c.DoM = val == "mdt"
			case "extent":
				l, err := proto.ParseLayout(f, proto.Layout{})
				if err != nil || len(l.Comps) != 1 {
					return nil, false, "", fmt.Errorf("bad extent %q", val)
				}
				c.Start, c.End = l.Comps[0].Start, l.Comps[0].End
			default:
				rest = append(rest, f)
			}
		}
		if c.Layout, err = proto.ParseLayout(strings.Join(rest, " "), proto.Layout{}); err != nil {
			return nil, false, "", err
		}
		if c.DoM {
			// lfs shows a DoM component with count 0, its size its end.
			c.Layout = proto.Layout{StripeSize: uint32(c.End), FirstOST: 0}
		}
		obj += len(c.OSTs)
		comps = append(comps, c)
	}
	return comps, composite, fid, nil
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
				comps, composite, fid, err := parseShownLayout(string(v))
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				if asJSON {
					json.NewEncoder(os.Stdout).Encode(stripeJSON(path, comps, composite, fid))
					continue
				}
				fmt.Println(path)
				if !composite {
					printStripe(comps[0], fid, "")
					continue
				}
				fmt.Printf("  lcm_entry_count:   %d\n", len(comps))
				for i, c := range comps {
					flags := "0"
					if len(c.OSTs) > 0 {
						flags = "init"
					}
					fmt.Printf("    lcme_id:             %d\n    lcme_flags:          %s\n", i+1, flags)
					fmt.Printf("    lcme_extent.e_start: %d\n    lcme_extent.e_end:   %s\n", c.Start, extentName(c.End))
					printStripe(c, fid, "      ")
					fmt.Println()
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per path")
	return cmd
}

func extentName(e uint64) string {
	if e == proto.ExtentEOF {
		return "EOF"
	}
	return strconv.FormatUint(e, 10)
}

func pattern(c shownComp) string {
	switch {
	case c.DoM:
		return "mdt"
	case c.Layout.IsEC():
		return "ec"
	}
	return "raid0"
}

// printStripe prints one component (or a plain layout) as lfs does.
func printStripe(c shownComp, fid, indent string) {
	l := c.Layout
	fmt.Printf("%slmm_stripe_count:  %d\n%slmm_stripe_size:   %d\n%slmm_pattern:       %s\n",
		indent, int32(l.StripeCount), indent, l.StripeSize, indent, pattern(c))
	if l.IsEC() {
		fmt.Printf("%slmm_ec:            %d+%d (%d data and %d parity units per row; parity rotates over the objects)\n",
			indent, l.ECData, l.ECParity, l.ECData, l.ECParity)
	}
	fmt.Printf("%slmm_stripe_offset: %d\n", indent, l.FirstOST)
	if fid != "" && len(c.OSTs) > 0 {
		fmt.Printf("%slmm_fid:           %s\n%s\tobdidx\t\t objid\n", indent, fid, indent)
		for i, o := range c.OSTs {
			fmt.Printf("%s\t%6s\t\t %s/%d\n", indent, o, fid, c.First+i)
		}
	}
}

// stripeJSON is getstripe --json's object for one path: a plain layout's
// keys, or lcm_entry_count and a list of components with those keys.
func stripeJSON(path string, comps []shownComp, composite bool, fid string) map[string]any {
	one := func(c shownComp) map[string]any {
		l := c.Layout
		m := map[string]any{"lmm_stripe_count": int32(l.StripeCount), "lmm_stripe_size": l.StripeSize,
			"lmm_pattern": pattern(c), "lmm_stripe_offset": l.FirstOST, "osts": c.OSTs}
		if l.IsEC() {
			m["lmm_ec_data"], m["lmm_ec_parity"] = l.ECData, l.ECParity
		}
		return m
	}
	if !composite {
		out := one(comps[0])
		out["path"], out["fid"] = path, fid
		return out
	}
	var list []map[string]any
	for i, c := range comps {
		m := one(c)
		m["lcme_id"], m["lcme_extent.e_start"], m["lcme_extent.e_end"] = i+1, c.Start, extentName(c.End)
		m["lcme_flags"] = map[bool]string{true: "init", false: "0"}[len(c.OSTs) > 0]
		m["first_object"] = c.First
		list = append(list, m)
	}
	return map[string]any{"path": path, "fid": fid, "lcm_entry_count": len(comps), "components": list}
}
