package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/pkg/xattr"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/internal/targets"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// The quota tools, as lfs setquota, lfs quota and lfs project.
//
// Limits are extended attributes of the filesystem root (stripefs.quota.u.1000
// and so on), written through the mount: MDT0 keeps them and, as quota
// master, hands out allowances to the targets that enforce them (MDTs for
// inodes, OSTs for blocks). That way a limit is stored once, survives any
// target's restart, and reaches a target that was down when it was set
// (targets reread the limits every few seconds). After writing a limit
// setquota asks every target to reread at once, so it applies to the next
// write; a target it cannot reach catches up by itself.

// quotaID is the -u/-g/-p choice of a quota command.
type quotaID struct {
	user, group, project string
}

func (q *quotaID) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&q.user, "user", "u", "", "user name or uid")
	f.StringVarP(&q.group, "group", "g", "", "group name or gid")
	f.StringVarP(&q.project, "projid", "p", "", "project id")
}

// key resolves the choice; with none and def set, the caller's uid.
func (q *quotaID) key(def bool) (proto.QuotaKey, error) {
	n := 0
	for _, s := range []string{q.user, q.group, q.project} {
		if s != "" {
			n++
		}
	}
	switch {
	case n > 1:
		return proto.QuotaKey{}, fmt.Errorf("give one of -u, -g and -p")
	case n == 0 && def:
		return proto.QuotaKey{Type: proto.QuotaUser, ID: uint32(os.Getuid())}, nil
	case n == 0:
		return proto.QuotaKey{}, fmt.Errorf("give -u USER, -g GROUP or -p PROJID")
	}
	parse := func(s string, lookup func(string) (string, error)) (uint32, error) {
		if v, err := strconv.ParseUint(s, 10, 32); err == nil {
			return uint32(v), nil
		}
		if lookup == nil {
			return 0, fmt.Errorf("bad id %q", s)
		}
		id, err := lookup(s)
		if err != nil {
			return 0, err
		}
		v, err := strconv.ParseUint(id, 10, 32)
		return uint32(v), err
	}
	var k proto.QuotaKey
	var err error
	switch {
	case q.user != "":
		k.Type = proto.QuotaUser
		k.ID, err = parse(q.user, func(s string) (string, error) {
			u, err := user.Lookup(s)
			if err != nil {
				return "", err
			}
			return u.Uid, nil
		})
	case q.group != "":
		k.Type = proto.QuotaGroup
		k.ID, err = parse(q.group, func(s string) (string, error) {
			g, err := user.LookupGroup(s)
			if err != nil {
				return "", err
			}
			return g.Gid, nil
		})
	default:
		k.Type = proto.QuotaProject
		k.ID, err = parse(q.project, nil)
	}
	return k, err
}

// parseBlockLimit reads a block limit the way lfs setquota does: a bare
// number is KiB, and k, m, g, t (binary) suffixes give other units.
func parseBlockLimit(s string) (uint64, error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	n, err := parseLfsUnits(s, 1<<10)
	if err != nil {
		return 0, fmt.Errorf("bad block limit %q (KiB, or with k, m, g, t)", s)
	}
	return n, nil
}

// parseSoftHard reads "SOFT:HARD" (or one number for both).
func parseSoftHard(s string, one func(string) (uint64, error)) (soft, hard uint64, err error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		b = a
	}
	if soft, err = one(a); err != nil {
		return 0, 0, err
	}
	if hard, err = one(b); err != nil {
		return 0, 0, err
	}
	if hard != 0 && soft > hard {
		return 0, 0, fmt.Errorf("soft limit %d above hard limit %d", soft, hard)
	}
	return soft, hard, nil
}

// mountRoot walks up from path to the root of the filesystem it is on.
func mountRoot(path string) (string, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return "", err
	}
	for p != "/" {
		var up unix.Stat_t
		parent := filepath.Dir(p)
		if err := unix.Stat(parent, &up); err != nil || up.Dev != st.Dev {
			return p, nil
		}
		p = parent
	}
	return p, nil
}

// readLimit reads the limit of k from the mount's root.
func readLimit(root string, k proto.QuotaKey) (proto.QuotaLimit, error) {
	v, err := xattr.Get(root, proto.QuotaXattrName(k))
	if errors.Is(err, xattr.ENOATTR) || errors.Is(err, syscall.ENODATA) {
		return proto.QuotaLimit{Key: k}, nil
	}
	if err != nil {
		return proto.QuotaLimit{Key: k}, fmt.Errorf("%s: %w", root, err)
	}
	return proto.ParseQuotaLimit(k, string(v))
}

func setquotaCmd() *cobra.Command {
	var id quotaID
	var blocks, inodes string
	cmd := &cobra.Command{
		Use:   "setquota -u|-g|-p ID [-b SOFT:HARD] [-i SOFT:HARD] MOUNTPOINT",
		Short: "Set user, group or project limits (lfs setquota)",
		Long: `Set the block and inode limits of a user, group or project. Block limits
are KiB as with lfs, or take a suffix: -b 0:10M, -b 1G:2G. Inode limits
are counts. 0 means no limit; a part not given keeps its current value.
Only hard limits are enforced (EDQUOT); soft limits are shown by quota.
The limits are kept by MDT0 as extended attributes of the filesystem root
(stripefs.quota.u.ID, .g.ID, .p.ID), so setting them needs root.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := id.key(false)
			if err != nil {
				return err
			}
			if k.ID == 0 {
				return fmt.Errorf("%s: id 0 is not limited (root, and files outside any project)", k)
			}
			if blocks == "" && inodes == "" {
				return fmt.Errorf("nothing to set: give -b and/or -i")
			}
			root, err := mountRoot(args[0])
			if err != nil {
				return err
			}
			l, err := readLimit(root, k)
			if err != nil {
				return err
			}
			if blocks != "" {
				if l.BlockSoft, l.BlockHard, err = parseSoftHard(blocks, parseBlockLimit); err != nil {
					return err
				}
			}
			if inodes != "" {
				count := func(s string) (uint64, error) {
					if s == "" {
						return 0, nil
					}
					return strconv.ParseUint(s, 10, 64)
				}
				if l.InodeSoft, l.InodeHard, err = parseSoftHard(inodes, count); err != nil {
					return err
				}
			}
			name := proto.QuotaXattrName(k)
			if l == (proto.QuotaLimit{Key: k}) {
				err = xattr.Remove(root, name)
				if errors.Is(err, xattr.ENOATTR) || errors.Is(err, syscall.ENODATA) {
					err = nil
				}
			} else {
				err = xattr.Set(root, name, []byte(l.Value()))
			}
			if err != nil {
				return fmt.Errorf("%s: set %s: %w", root, name, err)
			}
			// Best effort: every target rereads the limits now.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, errs := queryQuota(ctx, root, k, true)
			for _, e := range errs {
				fmt.Fprintf(cmd.ErrOrStderr(), "stripefs: setquota: %v (it will pick the limit up by itself)\n", e)
			}
			return nil
		},
	}
	id.add(cmd)
	cmd.Flags().StringVarP(&blocks, "block", "b", "", "block limits SOFT:HARD (KiB, or 10M, 1G…)")
	cmd.Flags().StringVarP(&inodes, "inode", "i", "", "inode limits SOFT:HARD")
	return cmd
}

// targetQuota is one target's part of a quota.
type targetQuota struct {
	Target    string `json:"target"`
	Usage     uint64 `json:"usage"`
	Allowance uint64 `json:"allowance"`
	Limited   bool   `json:"limited"`
	Error     string `json:"error,omitempty"`
}

// queryQuota asks every target of the filesystem under root for k.
func queryQuota(ctx context.Context, root string, k proto.QuotaKey, refresh bool) ([]targetQuota, []error) {
	mgs, err := mountMGS(root)
	if err != nil {
		return nil, []error{err}
	}
	cfg, err := targets.Map(ctx, mgs, "quota", 5*time.Second)
	if err != nil {
		return nil, []error{err}
	}
	ts := targets.Of(cfg)
	// Each MDT twice: its inodes, then the blocks of the file data it
	// keeps (Data-on-MDT), asked as an OST's (mdt0-dom).
	nMDT := len(cfg.MDTs)
	ts = append(ts, ts[:nMDT]...)
	out := make([]targetQuota, len(ts))
	targets.AskEach(ctx, ts, "quota", 5*time.Second, func(ctx context.Context, rc *rpc.Client, i int) error {
		out[i].Target = ts[i].Name()
		method := uint16(proto.OQuotaGet)
		switch {
		case i >= len(ts)-nMDT:
			out[i].Target += "-dom"
		case ts[i].Kind == proto.KindMDT:
			method = proto.MQuotaGet
		}
		r, err := rpc.Invoke[proto.QuotaGetReply](ctx, rc, method, &proto.QuotaGetReq{Key: k, Refresh: refresh})
		if err != nil {
			out[i].Error = err.Error()
			return err
		}
		out[i].Usage, out[i].Allowance, out[i].Limited = r.Usage, r.Allowance, r.Limited
		return nil
	})
	var errs []error
	kept := out[:0]
	for i, t := range out {
		if i >= len(ts)-nMDT && strings.Contains(t.Error, syscall.ENOSYS.Error()) {
			continue // an MDT that keeps no file data
		}
		if t.Error != "" {
			errs = append(errs, fmt.Errorf("%s: %s", t.Target, t.Error))
		}
		kept = append(kept, t)
	}
	return kept, errs
}

// isBlockTarget reports whether a quota row counts blocks (an OST's, or
// an MDT's file data) rather than inodes.
func isBlockTarget(name string) bool {
	return strings.HasPrefix(name, "ost") || strings.HasSuffix(name, "-dom")
}

// quotaReport is what quota prints.
type quotaReport struct {
	Type       string        `json:"type"`
	ID         uint32        `json:"id"`
	Mount      string        `json:"mount"`
	BlockBytes uint64        `json:"block_bytes"`
	BlockSoft  uint64        `json:"block_soft"`
	BlockHard  uint64        `json:"block_hard"`
	Inodes     uint64        `json:"inodes"`
	InodeSoft  uint64        `json:"inode_soft"`
	InodeHard  uint64        `json:"inode_hard"`
	Targets    []targetQuota `json:"targets"`
	// Incomplete says a target did not answer: usage is a lower bound.
	Incomplete bool `json:"incomplete,omitempty"`
}

func quotaCmd() *cobra.Command {
	var id quotaID
	var verbose, human, asJSON bool
	cmd := &cobra.Command{
		Use:   "quota [-u|-g|-p ID] [-v] [-h] [--json] MOUNTPOINT",
		Short: "Show a user's, group's or project's usage and limits (lfs quota)",
		Long: `Show usage and limits, summed over every target: blocks from the OSTs
and from the file data the MDTs keep (Data-on-MDT, rows mdtN-dom), inodes
from the MDTs. Without -u, -g or -p: the calling user. A '*' marks
usage above a limit. -v adds each target's usage and the allowance the
quota master gave it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := id.key(true)
			if err != nil {
				return err
			}
			root, err := mountRoot(args[0])
			if err != nil {
				return err
			}
			l, err := readLimit(root, k)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ts, errs := queryQuota(ctx, root, k, false)
			if ts == nil && len(errs) > 0 {
				return errs[0]
			}
			r := quotaReport{Type: proto.QuotaTypeName(k.Type), ID: k.ID, Mount: root, Targets: ts, Incomplete: len(errs) > 0,
				BlockSoft: l.BlockSoft, BlockHard: l.BlockHard, InodeSoft: l.InodeSoft, InodeHard: l.InodeHard}
			for _, t := range ts {
				if isBlockTarget(t.Target) {
					r.BlockBytes += t.Usage
				} else {
					r.Inodes += t.Usage
				}
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(&r)
			}
			r.write(cmd.OutOrStdout(), verbose, human)
			for _, e := range errs {
				fmt.Fprintf(cmd.ErrOrStderr(), "stripefs: quota: %v\n", e)
			}
			return nil
		},
	}
	id.add(cmd)
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "show each target")
	cmd.Flags().BoolVarP(&human, "human-readable", "h", false, "sizes as 1.5G instead of KiB")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().Bool("help", false, "help for quota") // -h is human-readable, as in lfs
	return cmd
}

// write prints r the way lfs quota does.
func (r *quotaReport) write(w io.Writer, verbose, human bool) {
	size := func(n uint64) string {
		if human {
			return humanSize(n)
		}
		return strconv.FormatUint((n+1023)/1024, 10)
	}
	mark := func(used, soft, hard uint64) string {
		if hard != 0 && used > hard || soft != 0 && used > soft {
			return "*"
		}
		return ""
	}
	unit := "kbytes"
	if human {
		unit = "used"
	}
	fmt.Fprintf(w, "Disk quotas for %s %d:\n", r.Type, r.ID)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "Filesystem\t%s\tquota\tlimit\tgrace\tfiles\tquota\tlimit\tgrace\t\n", unit)
	fmt.Fprintf(tw, "%s\t%s%s\t%s\t%s\t-\t%d%s\t%d\t%d\t-\t\n", r.Mount,
		size(r.BlockBytes), mark(r.BlockBytes, r.BlockSoft, r.BlockHard), size(r.BlockSoft), size(r.BlockHard),
		r.Inodes, mark(r.Inodes, r.InodeSoft, r.InodeHard), r.InodeSoft, r.InodeHard)
	if verbose {
		for _, t := range r.Targets {
			switch {
			case t.Error != "":
				fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t-\t\n", t.Target)
			case isBlockTarget(t.Target):
				fmt.Fprintf(tw, "%s\t%s\t-\t%s\t-\t-\t-\t-\t-\t\n", t.Target, size(t.Usage), allowance(t, size))
			default:
				fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t%d\t-\t%s\t-\t\n", t.Target, t.Usage,
					allowance(t, func(n uint64) string { return strconv.FormatUint(n, 10) }))
			}
		}
	}
	tw.Flush()
	if verbose {
		fmt.Fprintln(w, "(per target, \"limit\" is the allowance the quota master gave that target)")
	}
}

func allowance(t targetQuota, f func(uint64) string) string {
	if !t.Limited {
		return "-"
	}
	return f(t.Allowance)
}

func humanSize(n uint64) string {
	for _, u := range []struct {
		s string
		v uint64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"k", 1 << 10}} {
		if n >= u.v {
			return strings.TrimSuffix(strconv.FormatFloat(float64(n)/float64(u.v), 'f', 1, 64), ".0") + u.s
		}
	}
	return strconv.FormatUint(n, 10)
}

func projectCmd() *cobra.Command {
	var projid string
	cmd := &cobra.Command{
		Use:   "project [-p ID] PATH...",
		Short: "Show or set the project id of files and directories (lfs project)",
		Long: `Without -p, print each path's project id. With -p, set it: files and
directories created in a directory afterwards inherit the directory's
project id. Existing children keep theirs (set them one by one).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, p := range args {
				if projid == "" {
					v, err := xattr.Get(p, proto.ProjidXattr)
					if errors.Is(err, xattr.ENOATTR) || errors.Is(err, syscall.ENODATA) {
						v, err = []byte("0"), nil
					}
					if err != nil {
						return fmt.Errorf("%s: %w", p, err)
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%8s - %s\n", v, p)
					continue
				}
				n, err := strconv.ParseUint(projid, 10, 32)
				if err != nil {
					return fmt.Errorf("bad project id %q", projid)
				}
				if err := xattr.Set(p, proto.ProjidXattr, []byte(strconv.FormatUint(n, 10))); err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&projid, "proj-inherit", "p", "", "project id to set")
	return cmd
}
