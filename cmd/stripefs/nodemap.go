package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stripefs/stripefs/nodemap"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

func nodemapCmd() *cobra.Command {
	var mgs, mnt string
	cmd := &cobra.Command{
		Use:   "nodemap add|set|list|del",
		Short: "Group client nodes by address or key and set how their requests are taken (Lustre's nodemap)",
		Long: `Nodemaps group client nodes, by the addresses they connect from (--range,
CIDR prefixes that no two maps share) or by the group of the client key they
prove (--key-group; keys from stripefs keygen --role client --group NAME), and
say for each group:
  --root-squash UID:GID   root's requests run as UID:GID (NFS's root_squash)
  --all-squash UID:GID    every user's requests run as UID:GID
  --trusted               ids are taken as the client sends them (the default)
  --read-only             every change is refused with EROFS, by MDTs and OSTs
  --fileset PATH          the group's clients see PATH as the filesystem root
Clients that no map names keep trusted ids, read-write, the whole
filesystem, as with Lustre's nodemaps inactive. MDT0 keeps the maps and
hands every change to each MDT and OST at once (a target that misses it
pulls the maps within 10 seconds). Needs an admin or server key.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&mgs, "mgs", "", "MGS address")
	pf.StringVar(&mnt, "mount", "", "a stripefs mount point (to find the MGS)")
	client := func() (*rpc.Client, error) {
		mgs, err := mgsOf(mgs, mnt, "--mount")
		if err != nil {
			return nil, err
		}
		c := rpc.NewClient(mgs, "nodemap")
		c.RetryFor = 10 * time.Second
		return c, nil
	}
	call := func(method uint16, req any) (*proto.NodemapTable, error) {
		c, err := client()
		if err != nil {
			return nil, err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return rpc.Invoke[proto.NodemapTable](ctx, c, method, req)
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "Show every nodemap",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := call(proto.MNodemapList, &proto.Empty{})
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(t)
			}
			for _, m := range t.Maps {
				fmt.Println(nodemap.Format(&m))
			}
			d := nodemap.Default
			fmt.Println(nodemap.Format(&d) + " (every other client)")
			return nil
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print the table as JSON")
	del := &cobra.Command{
		Use:   "del NAME",
		Short: "Remove a nodemap: its clients become default clients",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := call(proto.MNodemapDel, &proto.NodemapDelReq{Name: args[0]})
			return err
		},
	}
	change := func(isNew bool) *cobra.Command {
		var mf mapFlags
		use, short := "set NAME [flags]", "Change a nodemap (the flags given; the rest stays)"
		if isNew {
			use, short = "add NAME [--range CIDR]... [--key-group G]... [flags]", "Add a nodemap"
		}
		c := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				m := proto.Nodemap{Name: args[0], SquashUID: nodemap.DefaultSquash, SquashGID: nodemap.DefaultSquash}
				if !isNew {
					t, err := call(proto.MNodemapList, &proto.Empty{})
					if err != nil {
						return err
					}
					var ok bool
					if m, ok = nodemap.Get(t, args[0]); !ok {
						return fmt.Errorf("no nodemap %q (nodemap add makes one)", args[0])
					}
				}
				if err := mf.apply(cmd.Flags(), &m); err != nil {
					return err
				}
				t, err := call(proto.MNodemapSet, &proto.NodemapSetReq{Map: m, New: isNew})
				if err != nil {
					return err
				}
				if got, ok := nodemap.Get(t, m.Name); ok {
					fmt.Println(nodemap.Format(&got))
				}
				return nil
			},
		}
		mf.add(c.Flags(), !isNew)
		return c
	}
	cmd.AddCommand(change(true), change(false), list, del)
	return cmd
}

// mapFlags are the policy flags of nodemap add and set.
type mapFlags struct {
	ranges, groups                        []string
	rootSquash, allSquash, fileset        string
	trusted, readOnly, readWrite, noFiles bool
}

func (mf *mapFlags) add(f *pflag.FlagSet, set bool) {
	f.StringSliceVar(&mf.ranges, "range", nil, "client addresses, CIDR (10.0.0.0/8); repeat or comma-separate")
	f.StringSliceVar(&mf.groups, "key-group", nil, "client key groups whose holders belong here")
	f.StringVar(&mf.rootSquash, "root-squash", "", "UID:GID root's requests run as")
	f.StringVar(&mf.allSquash, "all-squash", "", "UID:GID every request runs as")
	f.BoolVar(&mf.readOnly, "read-only", false, "refuse every change (EROFS)")
	f.StringVar(&mf.fileset, "fileset", "", "the directory the group sees as the root")
	if set {
		f.BoolVar(&mf.trusted, "trusted", false, "take ids as the client sends them (no squash)")
		f.BoolVar(&mf.readWrite, "read-write", false, "allow changes again")
		f.BoolVar(&mf.noFiles, "no-fileset", false, "the whole filesystem again")
	}
}

func (mf *mapFlags) apply(f *pflag.FlagSet, m *proto.Nodemap) error {
	if f.Changed("range") {
		m.Ranges = mf.ranges
	}
	if f.Changed("key-group") {
		m.KeyGroups = mf.groups
	}
	squash := func(flag, v string) error {
		uid, gid, ok := strings.Cut(v, ":")
		u, err1 := strconv.ParseUint(uid, 10, 32)
		g, err2 := strconv.ParseUint(gid, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("--%s %q: want UID:GID, e.g. 65534:65534", flag, v)
		}
		m.SquashUID, m.SquashGID = uint32(u), uint32(g)
		return nil
	}
	switch {
	case f.Changed("root-squash") && f.Changed("all-squash"):
		return fmt.Errorf("--root-squash and --all-squash: one or the other")
	case f.Changed("root-squash"):
		m.RootSquash, m.AllSquash = true, false
		if err := squash("root-squash", mf.rootSquash); err != nil {
			return err
		}
	case f.Changed("all-squash"):
		m.RootSquash, m.AllSquash = false, true
		if err := squash("all-squash", mf.allSquash); err != nil {
			return err
		}
	case mf.trusted:
		m.RootSquash, m.AllSquash = false, false
	}
	switch {
	case mf.readOnly && mf.readWrite:
		return fmt.Errorf("--read-only and --read-write: one or the other")
	case mf.readOnly:
		m.ReadOnly = true
	case mf.readWrite:
		m.ReadOnly = false
	}
	switch {
	case f.Changed("fileset"):
		m.Fileset = mf.fileset
	case mf.noFiles:
		m.Fileset = ""
	}
	return nil
}
