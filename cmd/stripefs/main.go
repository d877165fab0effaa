// Command stripefs runs every part of stripefs: servers (mds, ost), the
// client mount, the embedded single-host filesystem (up), the lfs-style
// tools and the benchmarks.
package main

import (
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // --pprof
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stripefs/stripefs/internal/logging"
)

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	_ = logging.Setup(os.Stderr, "info", "text") // before flags are read: the mount helper logs too
	if args, ok := mountHelperArgs(filepath.Base(os.Args[0]), os.Args[1:]); ok {
		if err := runMountHelper(args); err != nil {
			fmt.Fprintf(os.Stderr, "mount.fuse.stripefs: %v\n", err)
			os.Exit(32) // mount(8)'s "mount failure"
		}
		return
	}
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "stripefs: %v\n", err)
		os.Exit(1)
	}
}

// newRoot is the command tree (a takeover runs it again with the old
// daemon's arguments, takeover.go).
func newRoot() *cobra.Command {
	var pprofAddr, logLevel, logFormat string
	var kf keyFlags
	root := &cobra.Command{
		Use:           "stripefs",
		Short:         "A parallel filesystem: Pebble MDTs, striped OSTs, a FUSE client",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if err := logging.Setup(os.Stderr, logLevel, logFormat); err != nil {
				return err
			}
			if err := kf.resolveFor(cmd, args); err != nil {
				return err
			}
			if pprofAddr == "" {
				return nil
			}
			l, err := net.Listen("tcp", pprofAddr)
			if err != nil {
				return fmt.Errorf("--pprof: %w", err)
			}
			slog.Info(fmt.Sprintf("pprof on http://%s/debug/pprof/", l.Addr()), "addr", l.Addr().String())
			go http.Serve(l, nil)
			return nil
		},
	}
	root.PersistentFlags().StringVar(&pprofAddr, "pprof", "", "serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060)")
	root.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log records at this level and above: debug, info, warn, error")
	root.PersistentFlags().StringVar(&logFormat, "log-format", "text", "log records as text (key=value) or json, one object a line")
	kf.add(root.PersistentFlags())
	root.AddCommand(mdsCmd(), ostCmd(), mountCmd(), upCmd(), benchCmd(), loopbackCmd(), keygenCmd(),
		setstripeCmd(), getstripeCmd(), statsCmd(),
		mkdirCmd(), setdirstripeCmd(), getdirstripeCmd(), setParamCmd(), fsckCmd(), rebuildCmd(), scrubCmd(),
		nfsCmd(), nfsexportCmd(),
		setquotaCmd(), quotaCmd(), projectCmd(), dfCmd(), nodemapCmd(), findCmd())
	return root
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
