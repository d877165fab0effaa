package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/hanwen/go-fuse/v2/splice"
	"github.com/spf13/cobra"

	"github.com/stripefs/stripefs/cluster"
	"github.com/stripefs/stripefs/fs/fusefs"
	"github.com/stripefs/stripefs/rpc"
)

func upCmd() *cobra.Command {
	var spec cluster.Spec
	var mnt, opts string
	var cf clientFlags
	var nf nfsFlags
	var nfsAddr string
	var shortcut bool
	var domInline string
	cmd := &cobra.Command{
		Use:   "up --data DIR --mount MNT [--mdts 2] [--osts 4] [--nfs ADDR]",
		Short: "Run a whole filesystem on this machine and mount it (the embedded default)",
		Long: `Run a whole filesystem on this machine and mount it (the embedded default).

Its servers and mount prove themselves with the filesystem key in the data
directory (DIR/stripefs.key, mode 0600), made on first start unless --key or
$STRIPEFS_KEY names one. Root's tools find it through the mount point
(stripefs df MNT); other programs take --key DIR/stripefs.key. To mount from
another host, copy the key there (/etc/stripefs/stripefs.key) or derive a
client key: stripefs keygen --role client --from DIR/stripefs.key FILE.`,
		Annotations: map[string]string{keyUse: keyOwn},
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if spec.DataDir == "" || mnt == "" {
				return fmt.Errorf("--data and --mount are required")
			}
			mo := fusefs.DefaultMountOptions()
			if err := mo.ParseOptions(opts); err != nil {
				return err
			}
			if !cmd.Flags().Changed("mdts") {
				spec.MDTs = 0 // take the data directory's shape, or the default below
			}
			if !cmd.Flags().Changed("osts") {
				spec.OSTs = 0
			}
			if _, err := os.Stat(spec.DataDir + "/cluster.json"); err != nil {
				spec.MDTs, spec.OSTs = or(spec.MDTs, 2), or(spec.OSTs, 4)
			}
			if spec.DoMInline, err = parseDoMInline(domInline); err != nil {
				return err
			}
			if err := os.MkdirAll(mnt, 0o755); err != nil {
				return err
			}
			key, err := ownKey(spec.DataDir, "stripefs")
			if err != nil {
				return err
			}
			rpc.Shortcut = shortcut
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			cl, err := cluster.Start(ctx, spec)
			cancel()
			if err != nil {
				return err
			}
			defer cl.Close()
			if reg := procMetrics(); reg != nil {
				cl.AddMetrics(reg)
			}
			if nfsAddr != "" {
				// The gateway has a client of its own, not the mount's:
				// NFS clients and local users do not share caches, as they
				// would not with the gateway on another host.
				stop, gerr := startGateway(&cf, &nf, cl.MGS, nfsAddr)
				if gerr != nil {
					return gerr
				}
				defer func() {
					if serr := stop(); err == nil && serr != nil {
						err = serr
					}
				}()
			}
			return runMount(cf.options(cl.MGS, "up:"+mnt), mnt, mo, func() {
				fmt.Printf("stripefs up: %d MDTs, %d OSTs, data in %s, mgs %s, key %s; Ctrl-C unmounts and stops\n",
					cl.Spec.MDTs, cl.Spec.OSTs, spec.DataDir, cl.MGS, key.Path)
				if got, asked := mo.Request(), cmp.Or(mo.MaxRequestKB, fusefs.DefaultMaxRequestKB)<<10; got < asked {
					slog.Info(fmt.Sprintf("stripefs up: this kernel allows FUSE requests of %d KiB; sysctl -w fs.fuse.max_pages_limit=%d before starting gives the %d KiB the mount asks (reads with 16 MiB buffers, data cached: 1.16x)",
						got>>10, asked/os.Getpagesize(), asked>>10))
				}
				if n, need := splice.MaxPipeSize(), fusefs.SpliceNeeds(mo.Request()); n < need {
					// go-fuse reads the limit once, at start: a hint is all
					// this process can give.
					slog.Info(fmt.Sprintf("stripefs up: fs.pipe-max-size is %d, so %d KiB reads of this host's OSTs are copied, not spliced; "+
						"sysctl -w fs.pipe-max-size=%d before starting lets them be (ior, 4 file-per-process readers: 1.24-1.84x a loopback mount with it, 0.81-0.87x without)",
						n, mo.Request()>>10, need))
				}
			}, func() error { cl.Close(); return nil }) // a successor starts the servers again on the same data
		},
	}
	f := cmd.Flags()
	cf.add(f)
	nf.add(f, "nfs-")
	f.StringVar(&nfsAddr, "nfs", "", "also serve the filesystem over NFSv3 on this address (e.g. 127.0.0.1:2049)")
	f.StringVar(&spec.DataDir, "data", "", "data directory for every server")
	f.BoolVar(&spec.Unix, "unix-osts", true, "serve the OSTs on Unix sockets in the data directory (faster for this host's mount; turn off to mount from other hosts)")
	f.BoolVar(&shortcut, "shortcut", true, "let the mount and the servers in this process talk over in-process pipes instead of their sockets (other processes still use the sockets)")
	f.DurationVar(&spec.ClientWindow, "recovery-window", 5*time.Second,
		"how long restarted MDTs wait for other clients to replay (this process's own mount comes back as a new client, so the window only serves mounts from elsewhere)")
	domInlineFlag(f, &domInline)
	f.StringVar(&mnt, "mount", "", "mount point")
	f.IntVar(&spec.MDTs, "mdts", 2, "number of MDTs (first start only)")
	f.IntVar(&spec.OSTs, "osts", 4, "number of OSTs (first start only)")
	f.StringVarP(&opts, "options", "o", "", "mount options, as for stripefs mount")
	metricsFlag(f)
	return cmd
}

func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
