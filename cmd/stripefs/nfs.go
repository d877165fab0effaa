package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	gonfs "github.com/willscott/go-nfs"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/nfsexport"
)

// nfsFlags are the gateway's flags, shared by nfs and up.
type nfsFlags struct {
	allow     string
	readOnly  bool
	openFiles int
	idle      time.Duration
	squash    nfsexport.Squash
	anon      string
}

func (nf *nfsFlags) add(f *pflag.FlagSet, prefix string) {
	f.StringVar(&nf.allow, prefix+"allow", "127.0.0.0/8,::1", "clients served (comma-separated CIDR prefixes or addresses); others are disconnected")
	f.BoolVar(&nf.readOnly, prefix+"ro", false, "refuse every change")
	f.IntVar(&nf.openFiles, prefix+"open-files", 64, "files kept open between NFS calls (their write-back caches)")
	f.DurationVar(&nf.idle, prefix+"idle-close", time.Second, "how long an unused file stays open; closing it shows its size to other clients")
	f.BoolVar(&nf.squash.NoRootSquash, prefix+"no-root-squash", false, "run root's calls as root (exports(5) no_root_squash); by default root is the anonymous user")
	f.BoolVar(&nf.squash.AllSquash, prefix+"all-squash", false, "run every call as the anonymous user (exports(5) all_squash); also lets AUTH_NONE clients in")
	f.StringVar(&nf.anon, prefix+"anon", "65534:65534", "UID:GID of the anonymous user (exports(5) anonuid, anongid)")
}

func (nf *nfsFlags) options() (nfsexport.Options, error) {
	allow, err := nfsexport.ParseAllow(nf.allow)
	if err != nil {
		return nfsexport.Options{}, err
	}
	uid, gid, ok := strings.Cut(nf.anon, ":")
	u, err1 := strconv.ParseUint(uid, 10, 32)
	g, err2 := strconv.ParseUint(gid, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return nfsexport.Options{}, fmt.Errorf("--anon %q: want UID:GID", nf.anon)
	}
	sq := nf.squash
	sq.AnonUID, sq.AnonGID = uint32(u), uint32(g)
	return nfsexport.Options{Allow: allow, ReadOnly: nf.readOnly, MaxOpenFiles: nf.openFiles, IdleClose: nf.idle, Squash: sq}, nil
}

// startGateway connects a client of its own to mgs and serves it over NFS
// on listen. It prints the ready line once clients can connect.
func startGateway(cf *clientFlags, nf *nfsFlags, mgs, listen string) (stop func() error, err error) {
	opts, err := nf.options()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	c, err := fs.Connect(ctx, cf.options(mgs, "nfs:"+listen))
	cancel()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("nfs: %w", err)
	}
	if ap, err := netip.ParseAddrPort(l.Addr().String()); err == nil && !ap.Addr().IsLoopback() {
		slog.Info(fmt.Sprintf("nfs: listening on %s; serving %s", l.Addr(), nf.allow), "addr", l.Addr().String(), "allow", nf.allow)
	}
	// go-nfs logs expected conditions (a create's stat of the new name) as
	// errors; its own serious failures show as NFS errors to clients.
	// LOG_LEVEL=debug (go-nfs's own variable) brings its logging back.
	if os.Getenv("LOG_LEVEL") == "" {
		gonfs.Log.SetLevel(gonfs.FatalLevel)
	}
	g := nfsexport.New(c, opts)
	if reg := procMetrics(); reg != nil {
		reg.AddClient("nfs", clientMetrics{c: c, extra: gatewayCounters(g)})
	}
	served := make(chan error, 1)
	go func() { served <- g.Serve(l) }()
	fmt.Printf("nfs gateway ready on %s (mgs %s)\n", l.Addr(), mgs)
	return func() error {
		err := g.Close()
		if serr := <-served; err == nil {
			err = serr
		}
		st := g.Stats()
		slog.Info(fmt.Sprintf("nfs: stopped: %d unstable writes, %d stable writes, %d commits, %d sync errors, %d clients refused",
			st.UnstableWrites, st.StableWrites, st.Commits, st.SyncErrors, st.Refused), "addr", l.Addr().String())
		if cerr := c.Close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}

func nfsCmd() *cobra.Command {
	var mgs, listen string
	var cf clientFlags
	var nf nfsFlags
	cmd := &cobra.Command{
		Use:   "nfs --mgs ADDR [--listen 127.0.0.1:2049] [--allow CIDR,...]",
		Short: "Serve the filesystem over NFSv3 from user space, for hosts without kernel nfsd",
		Long: `Serve the filesystem over NFSv3 (and the MOUNT protocol, on the same port)
from user space, through the client library rather than a FUSE mount. The
export is "/" (a longer path mounts that directory). File handles are FIDs:
they survive gateway and server restarts.
Writes go through the client's write-back cache; COMMIT and stable writes are
synced before they are answered. Each call runs as the user its AUTH_UNIX
credential names, root squashed to the anonymous user unless --no-root-squash
(--all-squash: everyone); AUTH_NONE calls are refused unless --all-squash.
--allow decides who may connect at all (default: this host only).

Clients without portmapper use the port for both protocols, e.g. with
libnfs-utils: nfs-ls 'nfs://HOST//dir?nfsport=PORT&mountport=PORT&version=3&auto-traverse-mounts=0'
or mount -t nfs -o vers=3,proto=tcp,port=PORT,mountport=PORT,nolock HOST:/ /mnt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if mgs == "" {
				return fmt.Errorf("--mgs is required")
			}
			sig := stopSignals()
			stop, err := startGateway(&cf, &nf, mgs, listen)
			if err != nil {
				return err
			}
			notify(daemon.SdNotifyReady)
			s := <-sig
			slog.Info(fmt.Sprintf("nfs: %v: stopping", s), "signal", s.String())
			notify(daemon.SdNotifyStopping)
			return stop()
		},
	}
	f := cmd.Flags()
	cf.add(f)
	nf.add(f, "")
	f.StringVar(&mgs, "mgs", "", "MDT0's address")
	f.StringVar(&listen, "listen", "127.0.0.1:2049", "address to serve NFS and MOUNT on")
	metricsFlag(f)
	return cmd
}

func nfsexportCmd() *cobra.Command {
	var print bool
	var clients string
	cmd := &cobra.Command{
		Use:   "nfsexport --print MOUNTPOINT [--clients SPEC]",
		Short: "Print the /etc/exports line for re-exporting a stripefs mount with kernel nfsd",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !print {
				return fmt.Errorf("nothing to do: --print writes the exports line to stdout")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			e, err := nfsexport.Inspect(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Print(e.Line(clients))
			return nil
		},
	}
	cmd.Flags().BoolVar(&print, "print", false, "print the exports line (with comments) for MOUNTPOINT")
	cmd.Flags().StringVar(&clients, "clients", "*", "who may mount: a host, a network (10.0.0.0/24) or *")
	return cmd
}
