package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stripefs/stripefs/cluster"
	"github.com/stripefs/stripefs/internal/diskspace"
	"github.com/stripefs/stripefs/mds"
	"github.com/stripefs/stripefs/mds/lockd"
	"github.com/stripefs/stripefs/mds/mgs"
	"github.com/stripefs/stripefs/ost"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// stopSignals delivers SIGINT and SIGTERM from now on: taken before a
// program says it is ready, so that whoever stops it at once is heard.
func stopSignals() <-chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	return ch
}

// reserveFlag adds --reserve: the share of a target's disk kept back.
func reserveFlag(f *pflag.FlagSet, then string) *diskspace.Reserve {
	r := diskspace.Default
	f.Var(&r, "reserve", fmt.Sprintf("share of the disk kept back for deletes, recovery and the target's own database (at least %d MiB): past it %s", diskspace.MinReserve>>20, then))
	return &r
}

func mdsCmd() *cobra.Command {
	var cfg mds.Config
	var listen, advertise, domMax, domInline string
	cmd := &cobra.Command{
		Use:   "mds --index N --data DIR --listen ADDR [--mgs ADDR]",
		Short: "Run one metadata target (MDT0 also serves the cluster map)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.DataDir == "" {
				return fmt.Errorf("--data is required")
			}
			key, err := serverKey(fmt.Sprintf("mdt%d", cfg.Index))
			if err != nil {
				return err
			}
			switch {
			case !cmd.Flags().Changed("fsname"):
				cfg.FSName = key.FSName
			case cfg.FSName != key.FSName:
				return fmt.Errorf("mdt%d: --fsname %q, but %s is filesystem %q's key", cfg.Index, cfg.FSName, key.Path, key.FSName)
			}
			if cfg.CacheSize < 1 {
				return fmt.Errorf("--cache-mb %d: at least 1", cfg.CacheSize)
			}
			cfg.CacheSize <<= 20
			if cfg.DoMMax, err = parseDoMMax(domMax); err != nil {
				return err
			}
			if cfg.DoMInline, err = parseDoMInline(domInline); err != nil {
				return err
			}
			switch {
			case cfg.EvictAfter < 0:
				return fmt.Errorf("--evict-after %v: a duration of 0 (never) or more", cfg.EvictAfter)
			case cfg.EvictAfter == 0:
				cfg.EvictAfter = -1 // mds.Config spells never so
			}
			l, err := rpc.Listen(listen)
			if err != nil {
				return fmt.Errorf("mdt%d: %w", cfg.Index, err)
			}
			cfg.Addr = advertised(advertise, l.Addr().String())
			if cfg.Index == 0 {
				cfg.MGS = cfg.Addr
			}
			m, err := mds.Open(cfg)
			if err != nil {
				return err
			}
			go m.Serve(l)
			r := cluster.RunMDT(cfg, m, l.Addr().String())
			if reg := procMetrics(); reg != nil {
				cluster.AddMDT(reg, cfg.Index, r)
			}
			if cfg.Index > 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				err := mgs.Register(ctx, cfg.MGS, proto.Target{Kind: proto.KindMDT, Index: uint32(cfg.Index), Addr: cfg.Addr})
				cancel()
				if err != nil {
					r.Close()
					return err
				}
			}
			stop := stopSignals()
			fmt.Printf("mdt%d ready on %s\n", cfg.Index, cfg.Addr)
			notify(daemon.SdNotifyReady)
			s := <-stop
			slog.Info(fmt.Sprintf("mdt%d: %v: stopping", cfg.Index, s), "target", proto.TargetName(proto.KindMDT, uint32(cfg.Index)), "signal", s.String())
			notify(daemon.SdNotifyStopping)
			return r.Close()
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Index, "index", 0, "MDT index")
	f.StringVar(&cfg.DataDir, "data", "", "data directory (the Pebble database lives here)")
	f.StringVar(&listen, "listen", "127.0.0.1:9400", "address to listen on")
	f.StringVar(&advertise, "advertise", "", "address clients use to reach this MDT (default: the listen address)")
	f.StringVar(&cfg.MGS, "mgs", "", "MDT0's address (required for MDTs other than 0)")
	f.StringVar(&cfg.FSName, "fsname", "stripefs", "filesystem name (MDT0, first start; default: the key's)")
	f.DurationVar(&cfg.CommitInterval, "commit-interval", 100*time.Millisecond, "group commit interval")
	f.DurationVar(&cfg.ClientWindow, "recovery-window", mds.DefaultClientWindow,
		fmt.Sprintf("after a restart, how long to wait for the clients this MDT knew to reconnect and replay before serving others and evicting the missing (at most %v)", mds.MaxClientWindow))
	f.Int64Var(&cfg.CacheSize, "cache-mb", mds.DefaultCacheSize>>20, "the MDT's metadata (block) cache, MiB")
	f.StringVar(&domMax, "dom-max", "1M",
		"largest Data-on-MDT component this MDT keeps (Lustre's dom_stripesize): a multiple of 64k up to 64M; 0: it keeps no file data")
	domInlineFlag(f, &domInline)
	cfg.Reserve = reserveFlag(f, "new inodes, entries and xattrs get ENOSPC")
	f.DurationVar(&cfg.EvictAfter, "evict-after", mds.DefaultEvictAfter,
		"evict a client of the client table that has had no connection this long: its changes are committed and a restart no longer waits for it (0: never)")
	f.BoolVar(&cfg.RemoteSync, "remote-sync", false, "commit cross-MDT operations synchronously (the old osd_sync behaviour; atomicity does not need it)")
	f.DurationVar(&cfg.LockTimeout, "lock-timeout", lockd.DefaultTimeout,
		"how long a client may take to answer a lock callback (flush and give the lock up) before it is evicted")
	addLimitFlags(f)
	metricsFlag(f)
	return cmd
}

// addLimitFlags are a server's bounds on each peer (rpc.Limits): they
// change rpc.DefaultLimits, which the servers of the process start with.
func addLimitFlags(f *pflag.FlagSet) {
	l := &rpc.DefaultLimits
	f.DurationVar(&l.FrameTimeout, "frame-timeout", l.FrameTimeout, "a peer that starts a frame must send all of it within this, or is disconnected")
	f.DurationVar(&l.HelloTimeout, "hello-timeout", l.HelloTimeout, "a connection must finish its authentication within this")
	f.IntVar(&l.MaxHellosPerAddr, "max-hellos-per-addr", l.MaxHellosPerAddr, "connections from one address that may be in their handshake at once; more are closed")
	f.IntVar(&l.MaxConnsPerAddr, "max-conns-per-addr", l.MaxConnsPerAddr, "authenticated connections one address may hold")
	f.Int64Var(&l.MaxInFlightBytes, "max-inflight-bytes", l.MaxInFlightBytes, "request bytes of one connection held at once; its reads wait beyond")
}

func ostCmd() *cobra.Command {
	var cfg ost.Config
	var listen, advertise, mgsAddr string
	var capacity sizeValue
	cmd := &cobra.Command{
		Use:   "ost --index N --data DIR --listen ADDR --mgs ADDR [--capacity BYTES]",
		Short: "Run one object storage target",
		Long: `Run one object storage target: objects as sparse files under DIR/O, an
index of owners, sizes and client grants in DIR/index. MDT0 (--mgs) is also
the quota master the OST asks for block allowance.

Test and benchmark knobs: --capacity BYTES makes the OST act as if it had
only that much space (grants, ENOSPC) without filling a disk;
STRIPEFS_FIEMAP_FAIL=1 in its environment makes every FIEMAP call fail with
EFAULT, so the SEEK_DATA/SEEK_HOLE fallback of the allocated-range check runs
(bench survey --fiemap-fail sets the same at run time over RPC).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.DataDir == "" || mgsAddr == "" {
				return fmt.Errorf("--data and --mgs are required")
			}
			if _, err := serverKey(fmt.Sprintf("ost%d", cfg.Index)); err != nil {
				return err
			}
			l, err := rpc.Listen(listen)
			if err != nil {
				return fmt.Errorf("ost%d: %w", cfg.Index, err)
			}
			cfg.MGS, cfg.Capacity = mgsAddr, uint64(capacity)
			o, err := ost.Open(cfg)
			if err != nil {
				return err
			}
			go o.Serve(l)
			r := cluster.RunOST(cfg, o, l.Addr().String())
			if reg := procMetrics(); reg != nil {
				cluster.AddOST(reg, cfg.Index, r)
			}
			addr := advertised(advertise, l.Addr().String())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			err = mgs.Register(ctx, mgsAddr, proto.Target{Kind: proto.KindOST, Index: uint32(cfg.Index), Addr: addr})
			cancel()
			if err != nil {
				r.Close()
				return err
			}
			stop := stopSignals()
			fmt.Printf("ost%d ready on %s\n", cfg.Index, addr)
			notify(daemon.SdNotifyReady)
			s := <-stop
			slog.Info(fmt.Sprintf("ost%d: %v: stopping", cfg.Index, s), "target", proto.TargetName(proto.KindOST, uint32(cfg.Index)), "signal", s.String())
			notify(daemon.SdNotifyStopping)
			return r.Close()
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Index, "index", 0, "OST index")
	f.StringVar(&cfg.DataDir, "data", "", "data directory (objects live here)")
	f.StringVar(&listen, "listen", "127.0.0.1:9500", "address to listen on")
	f.StringVar(&advertise, "advertise", "", "address clients use to reach this OST (default: the listen address)")
	f.StringVar(&mgsAddr, "mgs", "", "MDT0's address")
	f.Var(&capacity, "capacity", "cap on the bytes this OST allocates and grants (64MiB, 1GiB…; default: the disk's free space), to run it full without filling a disk")
	f.DurationVar(&cfg.GrantGrace, "grant-grace", 30*time.Second, "how long a disconnected client keeps its space grant")
	cfg.Reserve = reserveFlag(f, "it grants and allocates no more")
	f.BoolVar(&cfg.NoEarlyWriteback, "no-early-writeback", false, "do not start the disk write of large writes at once (leave it to the kernel's flusher and fsync)")
	addLimitFlags(f)
	metricsFlag(f)
	return cmd
}

// serverKey is the process's key, which must be the servers' own.
func serverKey(name string) (*rpc.Key, error) {
	k, err := rpc.ProcessKey()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if k.Role != rpc.RoleServer {
		return nil, fmt.Errorf("%s: %s is a %s key; a server needs the filesystem's server key", name, k.Path, k.Role)
	}
	return k, nil
}

// advertised is the address to register: an explicit one, else the
// listener's.
func advertised(explicit, listened string) string {
	if explicit != "" {
		return explicit
	}
	return listened
}

// domInlineFlag adds --dom-inline, read by parseDoMInline.
func domInlineFlag(f *pflag.FlagSet, v *string) {
	f.StringVar(v, "dom-inline", "64k",
		fmt.Sprintf("Data-on-MDT file data up to this size is kept in the MDT's store index rather than as a file each (at most %dk; 0: a file each)", ost.MaxInline>>10))
}

// parseDoMInline reads --dom-inline as mds.Config.DoMInline spells it.
func parseDoMInline(s string) (int, error) {
	n, err := parseLfsSize(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("--dom-inline: %w", err)
	case n == 0:
		return -1, nil
	case n < 0 || n > ost.MaxInline:
		return 0, fmt.Errorf("--dom-inline %s: at most %dk, or 0", s, ost.MaxInline>>10)
	}
	return int(n), nil
}

// parseDoMMax reads --dom-max as mds.Config.DoMMax spells it.
func parseDoMMax(s string) (int64, error) {
	n, err := parseLfsSize(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("--dom-max: %w", err)
	case n == 0:
		return -1, nil
	case n%proto.MinStripeSize != 0 || n > proto.MaxStripeSize:
		return 0, fmt.Errorf("--dom-max %s: a multiple of 64k up to %dM, or 0", s, proto.MaxStripeSize>>20)
	}
	return n, nil
}
