package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/fs/fusefs"
	"github.com/stripefs/stripefs/internal/mountinfo"
)

const readyPrefix = "stripefs: mounted "

// clientFlags are the client cache tunables shared by mount and up.
type clientFlags struct {
	maxDirtyMB, maxDirtyFileMB, rpcsInFlight int
	dirtyExpire, retryFor                    time.Duration
	readaheadMB, lruSize                     int
}

func (cf *clientFlags) add(f *pflag.FlagSet) {
	f.IntVar(&cf.maxDirtyMB, "max-dirty-mb", fs.DefaultMaxDirty>>20, "bound on unflushed write data of the whole mount (MiB)")
	f.IntVar(&cf.maxDirtyFileMB, "max-dirty-file-mb", fs.DefaultMaxDirtyPerFile>>20, "bound on unflushed write data of one file (MiB)")
	f.IntVar(&cf.rpcsInFlight, "rpcs-in-flight", fs.DefaultRPCsInFlight, "RPCs in flight to each OST")
	f.DurationVar(&cf.dirtyExpire, "dirty-expire", fs.DefaultDirtyExpire, "how long a partly written stripe unit may wait before it is sent")
	f.DurationVar(&cf.retryFor, "retry-for", time.Minute, "how long to wait for an unreachable server before failing with EIO")
	f.IntVar(&cf.readaheadMB, "readahead-mb", fs.DefaultReadAhead>>20, "read-ahead window of one sequential reader (MiB; 0 disables)")
	f.IntVar(&cf.lruSize, "lru-size", fs.DefaultLRUSize, "locks the client keeps; unused ones past it are given back early (Lustre's lru_size)")
}

func (cf *clientFlags) options(mgs, name string) fs.Options {
	return fs.Options{MGS: mgs, Name: name, MaxDirty: int64(cf.maxDirtyMB) << 20, MaxDirtyPerFile: int64(cf.maxDirtyFileMB) << 20,
		RPCsInFlight: cf.rpcsInFlight, DirtyExpire: cf.dirtyExpire, RetryFor: cf.retryFor, ReadAhead: readahead(cf.readaheadMB),
		LRUSize: cf.lruSize}
}

// readahead converts the flag: 0 means off, which fs.Options spells -1.
func readahead(mb int) int64 {
	if mb <= 0 {
		return -1
	}
	return int64(mb) << 20
}

func mountCmd() *cobra.Command {
	var mgs, opts, logFile string
	var background, takeover bool
	var cf clientFlags
	mo := fusefs.DefaultMountOptions()
	cmd := &cobra.Command{
		Use:   "mount --mgs ADDR [-o OPTIONS] MOUNTPOINT",
		Short: "Mount a stripefs filesystem with FUSE",
		Long: `Mount a stripefs filesystem with FUSE. Options (-o, comma separated):
allow_other, default_permissions (on by default: the kernel checks permissions
first, the MDTs always), no_default_permissions (the MDTs alone; names are
then not cached, entry_timeout=0, so that every path walk is checked), ro,
attr_timeout=SECONDS, entry_timeout=SECONDS, fsname=NAME, debug,
read_ahead_kb=KIB (the kernel's read-ahead window; 1024 by default, 0 leaves
the kernel's 128), nolock (no caching under locks: close-to-open coherency
between clients, the kernel's page cache, for comparison).
The fstab form is: MGSADDR MOUNTPOINT fuse.stripefs allow_other,_netdev 0 0

stripefs mount --takeover MOUNTPOINT (or SIGUSR2 to the daemon, which starts
that from the binary now at its path) moves a live mount to a new process:
the old daemon stops taking requests, finishes those in flight, flushes,
and passes the FUSE session, its open files, its application locks and its
client identity to the new one, which serves on with the old command line;
programs using the mount see no error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if takeover {
				if background {
					return startBackground(os.Args[1:], logFile)
				}
				return takeOver(args[0])
			}
			if mgs == "" {
				return fmt.Errorf("--mgs is required")
			}
			if err := mo.ParseOptions(opts); err != nil {
				return err
			}
			if background {
				return startBackground(os.Args[1:], logFile)
			}
			return runMount(cf.options(mgs, "mount:"+args[0]), args[0], mo, nil, nil)
		},
	}
	f := cmd.Flags()
	cf.add(f)
	f.StringVar(&mgs, "mgs", "", "MDT0's address")
	f.StringVarP(&opts, "options", "o", "", "mount options")
	f.DurationVar(&mo.AttrTimeout, "attr-timeout", time.Second, "kernel attribute cache timeout")
	f.DurationVar(&mo.EntryTimeout, "entry-timeout", time.Second, "kernel name cache timeout")
	f.DurationVar(&mo.LockedTimeout, "locked-timeout", fusefs.DefaultLockedTimeout, "how long the kernel may keep a name or a file's attributes while this client holds the lock that guards it (its callback drops them sooner)")
	f.BoolVar(&background, "background", false, "return once mounted, leaving the daemon running")
	f.StringVar(&logFile, "log", "", "with --background: where the daemon logs (default: discarded)")
	f.BoolVar(&takeover, "takeover", false, "take the live mount at MOUNTPOINT over from its daemon (after an upgrade): programs using it see no error; the old daemon exits. Its command line is used again")
	metricsFlag(f)
	return cmd
}

// runMount connects, mounts and serves until unmounted or signalled, or
// until a successor takes the mount over (takeover.go). onReady, if set,
// runs once the mount is up; beforeHandover before a successor gets it.
func runMount(opts fs.Options, dir string, mo fusefs.MountOptions, onReady func(), beforeHandover func() error) error {
	mgs := opts.MGS
	opts.NoLocks = mo.NoLocks
	opts.NoCloseWrite = mo.SyncClose
	if mo.FSName == "" {
		mo.FSName = mgs
	}
	var m *liveMount
	if resuming != nil {
		var err error
		if m, err = resuming.resumeMount(opts, dir, mo); err != nil {
			return err
		}
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		c, err := fs.Connect(ctx, opts)
		cancel()
		if err != nil {
			return err
		}
		clearStaleMount(dir)
		srv, fsys, err := fusefs.MountFS(c, dir, mo)
		if err != nil {
			c.Close()
			return err
		}
		m = &liveMount{dir: dir, name: opts.Name, c: c, fsys: fsys, srv: srv, mo: mo}
	}
	m.beforeHandover = beforeHandover
	if reg := procMetrics(); reg != nil {
		reg.AddClient("mount", clientMetrics{c: m.c})
	}
	tl, err := listenTakeover(dir)
	if err != nil {
		m.log(slog.LevelWarn, "stripefs: %s: no takeover: %v", dir, err)
	}
	sig := stopSignals()
	fmt.Printf("%s%s (mgs %s)\n", readyPrefix, dir, mgs)
	if os.Getenv(detachEnv) == "1" {
		detachStdio()
	}
	if onReady != nil {
		onReady()
	}
	if resuming == nil {
		notify(daemon.SdNotifyReady)
	}
	err = serveUntilSignal(m, sig, tl)
	if errors.Is(err, errHandedOver) {
		tl.leave() // the socket's path is the successor's now
		return nil // the successor is this client now: no goodbye to the servers
	}
	tl.close()
	m.c.Close()
	return err
}

// serveUntilSignal returns when the filesystem is unmounted from outside,
// or unmounts it on a signal from sig, or hands it to a successor that
// connects to tl (SIGUSR2 starts one).
func serveUntilSignal(m *liveMount, sig <-chan os.Signal, tl *takeoverListener) error {
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	defer signal.Stop(usr2)
	var conns chan *net.UnixConn
	if tl != nil {
		conns = tl.conns
	}
	for {
		done := make(chan struct{})
		go func(srv *fuse.Server) { srv.Wait(); close(done) }(m.srv)
		select {
		case <-done:
			return nil
		case <-usr2:
			m.log(slog.LevelInfo, "stripefs: SIGUSR2: starting a new daemon to take %s over", m.dir)
			go m.spawnSuccessor()
		case conn := <-conns:
			if err := m.handOver(conn); err != nil {
				return err
			}
		case s := <-sig:
			m.log(slog.LevelInfo, "stripefs: %v: unmounting %s", s, m.dir)
			notify(daemon.SdNotifyStopping)
			for i := 0; ; i++ {
				err := m.unmount()
				if err == nil {
					break
				}
				if i == 50 {
					return fmt.Errorf("unmount %s: %w", m.dir, err)
				}
				time.Sleep(100 * time.Millisecond) // busy: wait for users to leave
			}
			m.srv.Wait()
			return nil
		}
	}
}

// clearStaleMount lazily unmounts a FUSE mount whose daemon died
// ("transport endpoint is not connected"), so a restart can mount again.
func clearStaleMount(dir string) {
	if mountinfo.Stale(dir) {
		mountinfo.LazyUnmount(dir)
	}
}

// startBackground re-executes the mount in the foreground as a detached
// child and returns once it reports the mount is up.
func startBackground(args []string, logFile string) error {
	var childArgs []string
	for _, a := range args {
		if a != "--background" && a != "--background=true" {
			childArgs = append(childArgs, a)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, childArgs...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// Without --log the daemon's stderr is a pipe to us until it is
	// mounted, so that a failure says why; then it lets go of its stdio.
	var errPipe, errW *os.File
	cmd.Env = append(os.Environ(), detachEnv+"=1")
	if logFile != "" {
		lf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer lf.Close()
		cmd.Stderr = lf
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		defer r.Close()
		cmd.Stderr, errPipe, errW = w, r, w
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	err = cmd.Start()
	if errW != nil {
		errW.Close() // the child's copy is the pipe's only writer now
	}
	if err != nil {
		return err
	}
	var errText strings.Builder
	errDone := make(chan struct{})
	go func() {
		defer close(errDone)
		if errPipe != nil {
			// Bounded: a failing daemon says why in a few lines.
			_, _ = io.Copy(&errText, io.LimitReader(errPipe, 64<<10))
			_, _ = io.Copy(io.Discard, errPipe)
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, readyPrefix) {
		if err == nil { // it said something else and may still be running
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
		<-errDone
		why := strings.TrimSpace(errText.String())
		if why == "" {
			why = strings.TrimSpace(line)
		}
		if why == "" {
			why = "no message (see --log)"
		}
		return fmt.Errorf("mount daemon failed to start: %s", why)
	}
	fmt.Print(line)
	return nil
}

// detachEnv tells a daemon started by startBackground to let go of its
// stdio once it is mounted: its parent exits then, and a write to its
// closed pipe would end the daemon with SIGPIPE.
const detachEnv = "STRIPEFS_DETACH_STDIO"

// detachStdio points stdin, stdout and stderr at /dev/null, as daemon(3)
// does.
func detachStdio() {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer null.Close()
	for _, fd := range []int{0, 1, 2} {
		_ = unix.Dup2(int(null.Fd()), fd)
	}
}

// runMountHelper serves mount(8): SOURCE DIR [-o OPTIONS] [-n] [-s] [-f] [-v].
func runMountHelper(args []string) error {
	var pos []string
	var opts string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-o" && i+1 < len(args):
			i++
			opts = joinOpts(opts, args[i])
		case strings.HasPrefix(a, "-o"):
			opts = joinOpts(opts, a[2:])
		case a == "-n" || a == "-s" || a == "-f" || a == "-v" || a == "-r" || a == "-w":
			if a == "-r" {
				opts = joinOpts(opts, "ro")
			}
		case strings.HasPrefix(a, "-"):
			return fmt.Errorf("unknown option %q", a)
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return fmt.Errorf("usage: mount.fuse.stripefs MGSADDR MOUNTPOINT [-o OPTIONS]")
	}
	// key= and flavor= are the helper's, so that an fstab line can name
	// them; the mount itself takes them as flags.
	var flags []string
	var rest []string
	for _, o := range strings.Split(opts, ",") {
		switch k, v, _ := strings.Cut(o, "="); k {
		case "key", "flavor":
			if v == "" {
				return fmt.Errorf("mount option %q needs a value", o)
			}
			flags = append(flags, "--"+k, v)
		default:
			if o != "" {
				rest = append(rest, o)
			}
		}
	}
	opts = strings.Join(rest, ",")
	mo := fusefs.DefaultMountOptions()
	if err := mo.ParseOptions(opts); err != nil {
		return err
	}
	args = append([]string{"mount", "--mgs", pos[0]}, flags...)
	return startBackground(append(args, "-o", opts, pos[1]), "")
}

func joinOpts(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}
