package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pkg/xattr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/stats"
)

// KeyDir is where programs look for a filesystem's key by default.
const KeyDir = "/etc/stripefs"

// keyFlags are every command's --key and --flavor.
type keyFlags struct {
	path   string
	flavor string
}

func (kf *keyFlags) add(f *pflag.FlagSet) {
	f.StringVar(&kf.path, "key", "", "the filesystem key (default: $STRIPEFS_KEY, the key of a mount point given as argument, or "+KeyDir+"/FSNAME.key)")
	f.StringVar(&kf.flavor, "flavor", "auth", "lowest security flavour to accept: auth (both ends authenticated), integrity (every frame MACed) or privacy (TLS)")
}

// Commands say how they come by a key in their annotation keyUse: keyNone
// needs none, keyOwn makes its own unless given one (ownKey); the rest
// find it as resolve says.
const (
	keyUse  = "key"
	keyNone = "none"
	keyOwn  = "own"
)

// resolveFor is resolve, as cmd's annotation asks.
func (kf *keyFlags) resolveFor(cmd *cobra.Command, args []string) error {
	switch cmd.Annotations[keyUse] {
	case keyNone:
		return nil
	case keyOwn:
		if kf.path == "" && os.Getenv("STRIPEFS_KEY") == "" {
			fl, err := rpc.ParseFlavor(kf.flavor)
			if err != nil {
				return fmt.Errorf("--flavor: %w", err)
			}
			rpc.DefaultFlavor = fl
			return nil
		}
	}
	return kf.resolve(cmd, args)
}

// resolve sets the process's key and flavour for cmd. Without a key the
// process can still run (keygen, loopback, up and the benchmarks that
// make their own), but every connection it tries says how to get one.
func (kf *keyFlags) resolve(cmd *cobra.Command, args []string) error {
	fl, err := rpc.ParseFlavor(kf.flavor)
	if err != nil {
		return fmt.Errorf("--flavor: %w", err)
	}
	rpc.DefaultFlavor = fl
	path, why := kf.path, "--key"
	if path == "" {
		path, why = os.Getenv("STRIPEFS_KEY"), "$STRIPEFS_KEY"
	}
	if path == "" {
		var mounts []string
		for _, name := range mountFlags {
			if f := cmd.Flags().Lookup(name); f != nil && f.Value.String() != "" {
				mounts = append(mounts, f.Value.String())
			}
		}
		mounts = append(mounts, args...)
		path, why = mountKeyFile(mounts), "the mount's key"
	}
	if path == "" {
		path, why = defaultKeyFile(cmd), ""
	}
	if path == "" {
		rpc.SetKeyError(noKeyError(cmd))
		return nil
	}
	k, err := rpc.LoadKey(path)
	switch {
	case err == nil:
		rpc.SetKey(k)
	case why == "--key" || why == "$STRIPEFS_KEY":
		return fmt.Errorf("%s: %w", why, err) // asked for: say so at once
	default:
		// Found, not asked for: tools that work through the mount need
		// no key, so only what connects to a server fails, with this.
		rpc.SetKeyError(fmt.Errorf("%s: %w", or2(why, "the default key"), err))
	}
	return nil
}

func or2(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func noKeyError(cmd *cobra.Command) error {
	return fmt.Errorf("no filesystem key: give --key FILE, set STRIPEFS_KEY, or copy the key to %s (`stripefs keygen` makes one; `stripefs up` keeps its own in its data directory)",
		filepath.Join(KeyDir, fsnameOf(cmd)+".key"))
}

// mountFlags are the flags that may name a place on a mount, whose key
// root's tools then use: bench survey --through and bench ior -o reach
// the servers of the mount they are pointed at.
var mountFlags = []string{"mount", "through", "output", "dir"}

// mountKeyFile is the key file of the first stripefs mount among args,
// which its mount answers in an xattr: root on the mount's host then
// needs no --key for the tools (the file is still its own, mode 0600).
func mountKeyFile(args []string) string {
	for _, a := range args {
		// A path that is yet to be made (ior's -o prefix) is asked
		// through the nearest directory that exists.
		for p := filepath.Clean(a); ; p = filepath.Dir(p) {
			if _, err := os.Lstat(p); err == nil {
				if v, err := xattr.Get(p, stats.KeyFileXattr); err == nil && len(v) > 0 {
					return string(v)
				}
				break
			}
			if p == filepath.Dir(p) {
				break
			}
		}
	}
	return ""
}

// fsnameOf is the filesystem the command names (--fsname), or the
// default's.
func fsnameOf(cmd *cobra.Command) string {
	if f := cmd.Flags().Lookup("fsname"); f != nil && f.Value.String() != "" {
		return f.Value.String()
	}
	return "stripefs"
}

// defaultKeyFile is KeyDir/FSNAME.key when it exists, else the only key
// in KeyDir when the command names no filesystem.
func defaultKeyFile(cmd *cobra.Command) string {
	path := filepath.Join(KeyDir, fsnameOf(cmd)+".key")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if f := cmd.Flags().Lookup("fsname"); f != nil && f.Changed {
		return ""
	}
	if all, _ := filepath.Glob(filepath.Join(KeyDir, "*.key")); len(all) == 1 {
		return all[0]
	}
	return ""
}

// ownKey makes the process use dir's key, made on first use, unless it
// was given one (a key from a file): what `stripefs up` and the
// self-contained benchmarks run their servers with.
func ownKey(dir, fsname string) (*rpc.Key, error) {
	if k, err := rpc.ProcessKey(); err == nil && k.Path != "" {
		return k, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, fsname+".key")
	k, err := rpc.LoadKey(path)
	if errors.Is(err, os.ErrNotExist) {
		if k, err = rpc.NewMasterKey(fsname); err != nil {
			return nil, err
		}
		if err = rpc.WriteKey(path, k); err != nil {
			return nil, err
		}
		k.Path = path
	}
	if err != nil {
		return nil, err
	}
	rpc.SetKey(k)
	return k, nil
}

func keygenCmd() *cobra.Command {
	var fsname, role, group, from string
	cmd := &cobra.Command{
		Use:   "keygen FILE [--fsname NAME] [--role server|admin|client --from SERVERKEY [--group NODEMAP]]",
		Short: "Make a filesystem key: the servers' (a new secret), or an admin or client key derived from it",
		Long: `Make a filesystem key, written to FILE with mode 0600 (an existing file is
never replaced).

With --role server (the default) it is a new filesystem's server key: every
server of the filesystem needs a copy (/etc/stripefs/FSNAME.key by default), and
it lets its holder act in any role. With --role admin or --role client it is a
key derived from the server key given with --from: an admin key runs the
management tools (set_param, fsck, stats, nodemap…) but cannot act as a server;
a client key mounts and runs the tools that clients may (df, getstripe, quota)
and nothing more. --group names the nodemap a client key's holders belong to.
Neither lets its holder pose as a server to others.`,
		Annotations: map[string]string{keyUse: keyNone},
		Args:        cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := rpc.ParseRole(role)
			if err != nil {
				return fmt.Errorf("--role: %w", err)
			}
			var k *rpc.Key
			if r == rpc.RoleServer {
				if from != "" || group != "" {
					return fmt.Errorf("a server key is new: --from and --group belong to admin and client keys")
				}
				if k, err = rpc.NewMasterKey(fsname); err != nil {
					return err
				}
			} else {
				if from == "" {
					return fmt.Errorf("an %s key is derived from the server key: give --from SERVERKEY", r)
				}
				master, err := rpc.LoadKey(from)
				if err != nil {
					return err
				}
				if k, err = master.Derive(r, group); err != nil {
					return err
				}
			}
			if err := rpc.WriteKey(args[0], k); err != nil {
				return err
			}
			fmt.Printf("wrote the %s key of filesystem %q to %s\n", k.Role, k.FSName, args[0])
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&fsname, "fsname", "stripefs", "filesystem name (a new server key)")
	f.StringVar(&role, "role", "server", "server, admin or client")
	f.StringVar(&group, "group", "", "a client key's nodemap group")
	f.StringVar(&from, "from", "", "the server key an admin or client key is derived from")
	return cmd
}
