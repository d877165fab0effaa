// Command stripefs runs every part of stripefs: servers (mds, ost), the
// client mount, the embedded single-host filesystem (up), the lfs-style
// tools and the benchmarks.
package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if args, ok := mountHelperArgs(filepath.Base(os.Args[0]), os.Args[1:]); ok {
		if err := runMountHelper(args); err != nil {
			fmt.Fprintf(os.Stderr, "mount.fuse.stripefs: %v\n", err)
			os.Exit(32) // mount(8)'s "mount failure"
		}
		return
	}
	root := &cobra.Command{
		Use:           "stripefs",
		Short:         "A parallel filesystem: Pebble MDTs, striped OSTs, a FUSE client",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(mdsCmd(), ostCmd(), mountCmd(), upCmd(), benchCmd(), loopbackCmd(),
		setstripeCmd(), getstripeCmd(), statsCmd())
	if err := root.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "stripefs: %v\n", err)
		os.Exit(1)
	}
}

// mountHelperArgs recognises the mount(8) helper calling conventions:
// as /sbin/mount.fuse.stripefs SOURCE DIR [-o OPTS], or through fuse3's
// mount.fuse as `stripefs SOURCE DIR -o OPTS`.
func mountHelperArgs(prog string, args []string) ([]string, bool) {
	if strings.HasPrefix(prog, "mount.") {
		return args, true
	}
	if len(args) >= 2 && strings.Contains(args[0], ":") && !strings.HasPrefix(args[0], "-") {
		return args, true
	}
	return nil, false
}
