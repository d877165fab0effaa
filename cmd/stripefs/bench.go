package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stripefs/stripefs/bench"
	"github.com/stripefs/stripefs/cluster"
	"github.com/stripefs/stripefs/fs/fusefs"
)

// sizeValue is a pflag.Value for byte counts written as 1GiB, 64MiB, 4096…
type sizeValue int64

func (s *sizeValue) String() string { return bench.FormatSize(int64(*s)) }
func (s *sizeValue) Type() string   { return "size" }
func (s *sizeValue) Set(v string) error {
	n, err := bench.ParseSize(v)
	if err != nil {
		return err
	}
	*s = sizeValue(n)
	return nil
}

// ioFlags are the sequential I/O parameters shared by bench baseline and
// bench seqio.
type ioFlags struct {
	size, xfer sizeValue
}

func (f *ioFlags) add(cmd *cobra.Command) {
	f.size, f.xfer = 1<<30, 1<<20
	cmd.Flags().Var(&f.size, "size", "file size for the sequential write/read pass (B, KiB, MiB, GiB, TiB; kB, MB, GB)")
	cmd.Flags().Var(&f.xfer, "xfer", "transfer size of each write and read call")
}

func (f *ioFlags) check() error {
	if f.size < 1 {
		return fmt.Errorf("--size must be at least 1 byte")
	}
	if f.xfer < 1 || f.xfer > bench.MaxXfer {
		return fmt.Errorf("--xfer must be 1 byte to %s, got %s", bench.FormatSize(bench.MaxXfer), f.xfer.String())
	}
	return nil
}

func checkFiles(n int) error {
	if n < 1 || n > bench.MaxFiles {
		return fmt.Errorf("--files must be 1 to %d, got %d", bench.MaxFiles, n)
	}
	return nil
}

func benchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmarks: IOR-style I/O, metadata (mdtest-like), the NFS write pattern",
		Long: `Benchmarks. "bench baseline" compares stripefs with a plain go-fuse
loopback mount on the same disk, so the FUSE cost is factored out; "bench seqio"
and "bench meta" run one benchmark on any directory, e.g. an existing mount.
For real IOR and mdtest over MPI see bench/scripts/ior-seq.sh.

IOR and the NFS write pattern, on any directory (on a stripefs mount each
phase also shows the OST write and read RPCs and the client read-modify-writes
it caused):
  bench ior       IOR's flags without MPI: tasks are goroutines (--procs N),
                  each with its own descriptor. -w/-r, -t XFER, -b BLOCK,
                  -s SEGMENTS, -F (file per process, else IOR's segmented
                  shared file), -C (read another task's data), -e (fsync),
                  -z (random offsets), -W/-R (verify), -k, -G SEED.
                  e.g. bench ior -w -r -t 1m -b 64m -s 2 --procs 4 -F -e -C -o MNT/ior
  bench nfswrite  the third field report: 1 MiB O_DIRECT pwritev calls shaped
                  as kernel nfsd sends them ([3500-byte head, 255 pages,
                  596-byte tail]) against plain 1 MiB pwrites, with their
                  ratio; a pure write workload should show no OST reads.
                  e.g. bench nfswrite -o MNT/nfs -s 256MiB

Comparisons on a stripefs mount, in alternating rounds, with their ratios:
  bench dne       remote vs local mkdir (and with remote_sync=1), and mdtest
                  files on one MDT vs round-robin over the MDTs.
  bench ec        ior write and read of an erasure-coded file (--ec 4+2)
                  against a plain one striped over as many OSTs.
                  e.g. bench ec --mount MNT --rounds 6

Two mounts of one filesystem (two clients):
  bench pingpong  one block written on one mount and read back on the other,
                  then the other way: lock hand-offs per second, hand-off
                  latency and the MDTs' callback answer time.
                  e.g. bench pingpong MNT1/pp MNT2/pp --rounds 2000
  bench ior --via the same test path through other mounts: task t uses the
                  (t mod n)-th (IOR's ranks on several nodes).
  bench flock     uncontended fcntl lock/unlock pairs per second, and with a
                  second path one exclusive lock handed between two mounts:
                  hand-offs per second and the wake-up latency.
                  e.g. bench flock MNT1/lk MNT2/lk

Round trips:
  bench rpcs      the mount's RPCs per common operation (create, stat,
                  small and large open/read/close, rename, unlink, mkdir
                  local and remote, readdir of 1000), from its counters.
                  e.g. bench rpcs MNT/dir [--other MNT2/dir] --json

Growth:
  bench scale     creates many empty files in one directory, each --step a
                  line: the create rate and every process's memory (RSS,
                  the MDTs' block cache and memtables); then readdir and
                  remove rates.
                  e.g. bench scale MNT/dir --files 2000000 --step 100000

A mount's daemon replaced under load:
  bench takeover  a read loop and a write loop on the mount while its daemon
                  is taken over (stripefs mount --takeover) several times:
                  the slowest call of each loop then, against before.
                  e.g. bench takeover MNT --takeovers 5

OSTs without a client (obdfilter-survey):
  bench survey    write, rewrite and read objects over RPC straight to the
                  OSTs, beside the same pattern written to plain files on
                  the same disk; prints rewrite/write and ost/files and the
                  OSTs' allocation, FIEMAP, grant and quota counters.
                  e.g. bench survey --data /tmp/sv --threads 4 --size 512MiB`,
	}
	cmd.AddCommand(baselineCmd(), seqioCmd(), metaCmd(), iorCmd(), nfswriteCmd(), surveyCmd(), benchMdtestCmd(), benchDNECmd(), benchECCmd(), pingpongCmd(), flockBenchCmd(), takeoverBenchCmd(), rpcsBenchCmd(), scaleBenchCmd())
	return cmd
}

// interruptible returns a context cancelled by SIGINT or SIGTERM.
func interruptible() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

func writeReport(w io.Writer, r *bench.Report, asJSON bool) error {
	return printResult(context.Background(), w, asJSON, r, nil, func(r *bench.Report) *time.Time { return &r.Time })
}

// printResult ends a benchmark: its error ("interrupted" after Ctrl-C),
// or its result stamped with the time and printed as a table or JSON.
func printResult[R interface {
	WriteJSON(io.Writer) error
	WriteTable(io.Writer) error
}](ctx context.Context, w io.Writer, asJSON bool, res R, err error, stamp func(R) *time.Time) error {
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted")
		}
		return err
	}
	*stamp(res) = time.Now().UTC().Truncate(time.Second)
	if asJSON {
		return res.WriteJSON(w)
	}
	return res.WriteTable(w)
}

func iorCmd() *cobra.Command {
	var c bench.IORConfig
	var xfer, block sizeValue = 1 << 20, 1 << 20
	var seed uint64
	var asJSON bool
	var plotFile string
	cmd := &cobra.Command{
		Use:   "ior -o PATH [-w] [-r] [-t XFER] [-b BLOCK] [-s SEGMENTS] [--procs N] [-F] [-C] [-e] [-z] [-W] [-R] [-k] [--json]",
		Short: "IOR-style parallel write/read of a shared file or a file per task",
		Long: `An IOR-style benchmark without MPI: N tasks (goroutines, each with its own
file descriptor, so the I/O is really parallel) write and/or read SEGMENTS ×
BLOCK bytes each in XFER-byte pwrite/pread calls. Without -F the tasks share
one file in IOR's segmented layout: task t's k-th transfer of segment s is at
offset (s×N + t)×BLOCK + k×XFER. With -F each task has PATH.00000000 and so on.
Phases (write, the -W check, read) are separated by barriers; each is timed
as open, transfers (with the -e fsync) and close, and bandwidth is bytes over
the total. Before a read pass the files' cached pages are dropped.
Without -w and -r both are done, as IOR does. The files are removed at the
end unless -k; a later read-only run (-r -R -k -G SEED) can check them.
On a stripefs mount each phase also shows the OST write and read RPCs and the
client read-modify-writes counted during it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !c.Write && !c.Read {
				c.Write, c.Read = true, true
			}
			c.Xfer, c.Block = int64(xfer), int64(block)
			c.Seed, c.HaveSeed = seed, cmd.Flags().Changed("seed")
			if err := c.Validate(); err != nil {
				return err
			}
			ctx, stop := interruptible()
			defer stop()
			c.Meter = new(bench.Meter)
			done := showProgress(c.Meter, "ior", true, asJSON)
			res, err := bench.IOR(ctx, c)
			done()
			if err == nil && plotFile != "" {
				labels, values := make([]string, len(res.Phases)), make([]float64, len(res.Phases))
				for i, ph := range res.Phases {
					labels[i], values[i] = ph.Access, ph.MiBps
				}
				title := fmt.Sprintf("ior: %d task(s), %s transfers, %s each", c.Tasks, kibOf(c.Xfer), kibOf(res.Aggregate/int64(c.Tasks)))
				if err := bench.PlotBars(plotFile, title, "MiB/s", labels, values); err != nil {
					return err
				}
			}
			return printResult(ctx, cmd.OutOrStdout(), asJSON, res, err, func(r *bench.IORResult) *time.Time { return &r.Time })
		},
	}
	f := cmd.Flags()
	f.StringVar(&plotFile, "plot", "", "also draw each phase's bandwidth in this file (.svg, .png or .pdf)")
	f.StringVarP(&c.Path, "output", "o", "", "test file path (with -F, PATH.00000000 and so on)")
	f.BoolVarP(&c.Write, "write", "w", false, "write phase")
	f.BoolVarP(&c.Read, "read", "r", false, "read phase")
	f.VarP(&xfer, "transfer-size", "t", "bytes per read or write call (1m, 64KiB, 4096…)")
	f.VarP(&block, "block-size", "b", "contiguous bytes per task per segment; a multiple of -t")
	f.IntVarP(&c.Segments, "segments", "s", 1, "number of segments")
	f.IntVarP(&c.Tasks, "procs", "N", 1, "number of tasks (goroutines with their own descriptors)")
	f.BoolVarP(&c.FilePerProc, "file-per-proc", "F", false, "a file per task instead of one shared file")
	f.BoolVarP(&c.Reorder, "reorder-tasks", "C", false, "read back the data of task (i+1)%N, not the task's own")
	f.BoolVarP(&c.Fsync, "fsync", "e", false, "fsync each file after writing it, inside the timed phase")
	f.BoolVarP(&c.Random, "random", "z", false, "random order of each task's transfers (each offset once)")
	f.BoolVarP(&c.CheckWrite, "check-write", "W", false, "after writing, read back and verify")
	f.BoolVarP(&c.CheckRead, "check-read", "R", false, "verify the data of the read phase")
	f.BoolVarP(&c.Keep, "keep-file", "k", false, "do not remove the test files")
	f.Uint64VarP(&seed, "seed", "G", 0, "data pattern seed (default random; give the printed one to -R a kept file)")
	f.BoolVar(&c.DropCaches, "drop-caches", false, "empty the whole page cache before each read pass (root)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	f.StringSliceVar(&c.Via, "via", nil, "the same -o path through other mounts (other clients): task t uses the (t mod n)-th of -o and these")
	return cmd
}

// throughFlags are the through-the-mount comparison's flags, shared by
// bench survey and bench nfswrite.
type throughFlags struct {
	c    bench.ThroughConfig
	size sizeValue
}

func (t *throughFlags) add(f *pflag.FlagSet, what string) {
	t.size = sizeValue(256 << 20)
	f.StringVar(&t.c.Dir, "through", "", "also run "+what+" with plain syscalls in this directory of a mount (its layout is the files')")
	f.Var(&t.size, "through-size", "with --through: bytes per stream and pass")
	f.IntVar(&t.c.Streams, "through-streams", 1, "with --through: files written at once")
	f.IntVar(&t.c.Rounds, "through-rounds", 3, "with --through: rounds (the ratio is taken within each)")
}

func (t *throughFlags) config() bench.ThroughConfig {
	c := t.c
	c.Size = int64(t.size)
	return c
}

func surveyCmd() *cobra.Command {
	var c bench.SurveyConfig
	var through throughFlags
	var ostSel, tests, data, refDir string
	rsize, size := sizeValue(1<<20), sizeValue(256<<20)
	var nOSTs int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "survey (--mgs ADDR | --data DIR) [--ost N|all] [--threads 4] [--objects 4] [--rsize 1MiB] [--size 256MiB] [--tests write,rewrite,read] [--ref-dir DIR] [--fiemap-fail] [--through DIR] [--json]",
		Short: "obdfilter-survey: drive OSTs over RPC (write, rewrite, read) and compare with raw file writes",
		Long: `An obdfilter-survey-style benchmark. It talks to the OSTs directly over RPC,
with no client cache or mount in the way: each selected OST gets --objects
objects of --size/--objects bytes, written by --threads workers in --rsize
records (write), written again at the same offsets (rewrite) and read back
(read, each record's stamp checked). Write passes end with an OST sync of
their objects inside the timing (--sync=false to leave it out). The OSTs'
own counters over each pass are shown: FIEMAP calls and fallbacks, rewrites
that skipped accounting, new allocations, grant and quota activity.

A rewrite must cost no more than a first write (the second field report):
rewrite/write of 1.0 or more is right. --fiemap-fail makes the OSTs' FIEMAP
fail (set_param fiemap_fail=1 for the run; STRIPEFS_FIEMAP_FAIL=1 in an
OST's environment does the same from its start), so the SEEK_DATA/SEEK_HOLE
fallback is what is measured.

With --data DIR the survey starts its own cluster in this process (1 MDT,
--osts OSTs, on loopback TCP, data in DIR/fs) and writes the reference files
in DIR/ref, on the same disk. With --mgs it uses a running cluster and
writes the reference in --ref-dir, if given.

--through DIR (a directory on a mount) adds what a user measures with plain
programs: --through-streams files of --through-size written with 1 MiB
pwrites and fsync'd, then written again and fsync'd, buffered and with
O_DIRECT, in --through-rounds rounds; rewrite/write is taken within each
round. With --through and neither --mgs nor --data, the cluster is the
mount's. --fiemap-fail holds for the through passes too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.RSize, c.Size = int64(rsize), int64(size)
			if tests != "" {
				c.Tests = strings.Split(tests, ",")
			}
			if ostSel != "" && ostSel != "all" {
				for _, s := range strings.Split(ostSel, ",") {
					n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(s), "ost"))
					if err != nil || n < 0 {
						return fmt.Errorf("--ost %q: want an OST index, a list of them, or all", ostSel)
					}
					c.OSTs = append(c.OSTs, n)
				}
			}
			ctx, stop := interruptible()
			defer stop()
			switch {
			case data != "" && c.MGS != "":
				return fmt.Errorf("give --mgs or --data, not both")
			case data != "":
				if nOSTs < 1 || nOSTs > 64 {
					return fmt.Errorf("--osts must be 1 to 64")
				}
				if _, err := ownKey(filepath.Join(data, "fs"), "stripefs"); err != nil {
					return err
				}
				sctx, cancel := context.WithTimeout(ctx, time.Minute)
				cl, err := cluster.Start(sctx, cluster.Spec{DataDir: filepath.Join(data, "fs"), MDTs: 1, OSTs: nOSTs})
				cancel()
				if err != nil {
					return err
				}
				defer cl.Close()
				c.MGS = cl.MGS
				if refDir == "" {
					refDir = filepath.Join(data, "ref")
				}
			case c.MGS == "" && through.c.Dir != "":
				addr, err := mountMGS(through.c.Dir)
				if err != nil {
					return fmt.Errorf("--through: %w", err)
				}
				c.MGS = addr
			case c.MGS == "":
				return fmt.Errorf("give --mgs ADDR (a running cluster) or --data DIR (start one here)")
			}
			if through.c.Dir != "" {
				tc := through.config()
				c.Through = &tc
			}
			if refDir != "" {
				if err := os.MkdirAll(refDir, 0o755); err != nil {
					return err
				}
			}
			c.RefDir = refDir
			res, err := bench.Survey(ctx, c, func(s string) { fmt.Fprintf(cmd.ErrOrStderr(), "bench: survey: %s\n", s) })
			return printResult(ctx, cmd.OutOrStdout(), asJSON, res, err, func(r *bench.SurveyResult) *time.Time { return &r.Time })
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.MGS, "mgs", "", "MGS (MDT0) address of a running cluster")
	f.StringVar(&data, "data", "", "start a cluster in this process with its data here (and the reference files in DIR/ref)")
	f.IntVar(&nOSTs, "osts", 4, "with --data: number of OSTs")
	f.StringVar(&ostSel, "ost", "all", "OST index, comma-separated indexes, or all")
	f.IntVar(&c.Threads, "threads", 4, "workers per OST (each its own connection)")
	f.IntVar(&c.Objects, "objects", 4, "objects per OST")
	f.Var(&rsize, "rsize", "record size: bytes per write or read RPC")
	f.Var(&size, "size", "bytes per OST, spread over its objects")
	f.StringVar(&tests, "tests", "write,rewrite,read", "tests to run, comma-separated")
	f.BoolVar(&c.Sync, "sync", true, "end each write pass with a sync of its objects (fdatasync for the reference), inside the timing")
	f.StringVar(&refDir, "ref-dir", "", "directory for the raw-file reference (default with --data: DIR/ref; none with --mgs)")
	f.BoolVar(&c.FiemapFail, "fiemap-fail", false, "make the OSTs' FIEMAP fail for the run, to measure the SEEK_DATA fallback")
	f.BoolVar(&c.DropCaches, "drop-caches", false, "drop the page cache before read passes (root)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	through.add(f, "write and rewrite")
	return cmd
}

func flockBenchCmd() *cobra.Command {
	var c bench.FlockConfig
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "flock PATH [PATH-ON-ANOTHER-MOUNT] [--ops 10000] [--handoffs 1000] [--json]",
		Short: "Application locks: uncontended lock/unlock rate, and hand-offs between two mounts",
		Long: `Takes and drops an fcntl write lock on PATH --ops times (run it on a mount
with -o localflock too, to compare with node-local locks). With a second
path, the same file through another mount, one exclusive OFD lock is handed
between the two --handoffs times: the waiter blocks on the MDT and is woken
by the holder's unlock; the run prints hand-offs per second and the wake-up
latency (median, p99). The file is removed at the end.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.A = args[0]
			if len(args) == 2 {
				c.B = args[1]
			}
			ctx, stop := interruptible()
			defer stop()
			res, err := bench.FlockBench(ctx, c)
			return printResult(ctx, cmd.OutOrStdout(), asJSON, res, err, func(r *bench.FlockResult) *time.Time { return &r.Time })
		},
	}
	cmd.Flags().IntVar(&c.Ops, "ops", 10000, "uncontended lock/unlock pairs")
	cmd.Flags().IntVar(&c.Handoffs, "handoffs", 1000, "hand-offs between the two mounts")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	return cmd
}

func rpcsBenchCmd() *cobra.Command {
	c := bench.RPCsConfig{Reps: 20}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rpcs DIR [--reps 20] [--other DIR-ON-ANOTHER-MOUNT] [--json]",
		Short: "RPCs per common operation, counted by the mount",
		Long: `Does each common operation --reps times in a new directory under DIR (on a
stripefs mount) and prints the mount's RPCs per operation, in all and by
method, from its own counters (background pings left out; an operation's
cached writes are waited for and counted with it). With --other (the same
DIR through another mount) also a stat of files another client just made.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.Dir = args[0]
			ctx, stop := interruptible()
			defer stop()
			res, err := bench.RPCs(ctx, c)
			return printResult(ctx, cmd.OutOrStdout(), asJSON, res, err, func(r *bench.RPCsResult) *time.Time { return &r.Time })
		},
	}
	cmd.Flags().IntVar(&c.Reps, "reps", c.Reps, "how many times each operation is done")
	cmd.Flags().StringVar(&c.Other, "other", "", "DIR through another mount of the same filesystem")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	return cmd
}

func takeoverBenchCmd() *cobra.Command {
	c := bench.TakeoverConfig{Takeovers: 5, Gap: time.Second, Block: 64 << 10}
	size := sizeValue(16 << 20)
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "takeover MOUNTPOINT [--takeovers 5] [--gap 1s] [--size 16MiB] [--json]",
		Short: "The pause programs see when a mount's daemon is taken over",
		Long: `Reads a file and writes another on the stripefs mount at MOUNTPOINT, one
--block at a time in a loop, while "stripefs mount --takeover MOUNTPOINT" hands
the mount to a new daemon --takeovers times, --gap apart. Prints how long each
takeover took and the slowest call of each loop during the takeovers, beside
the slowest in as long a time before them. A loop that sees an error fails it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.Mount, c.Size = args[0], int64(size)
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			c.Takeover = func(ctx context.Context) error {
				out, err := exec.CommandContext(ctx, exe, "mount", "--takeover", "--background", c.Mount).CombinedOutput()
				if err != nil {
					return fmt.Errorf("%v: %s", err, out)
				}
				return nil
			}
			ctx, stop := interruptible()
			defer stop()
			res, err := bench.Takeover(ctx, c)
			return printResult(ctx, cmd.OutOrStdout(), asJSON, res, err, func(r *bench.TakeoverResult) *time.Time { return &r.Time })
		},
	}
	cmd.Flags().IntVar(&c.Takeovers, "takeovers", c.Takeovers, "how many times the daemon is taken over")
	cmd.Flags().DurationVar(&c.Gap, "gap", c.Gap, "time between takeovers")
	cmd.Flags().Var(&size, "size", "size of the file read")
	cmd.Flags().IntVar(&c.Block, "block", c.Block, "bytes per read and write call")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	return cmd
}

func pingpongCmd() *cobra.Command {
	var c bench.PingPongConfig
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pingpong PATH-ON-MOUNT-A PATH-ON-MOUNT-B [--rounds 1000] [--block 4096] [--json]",
		Short: "Lock ping-pong: one block handed back and forth between two mounts",
		Long: `Writes one block of a file through the first path, reads it back through the
second (the same file on another mount: another client), then the other way,
--rounds times, checking each read holds what the other side wrote. On
stripefs every hand-off calls a lock back: the run prints round trips per
second, the hand-off latency (median, p99), and the MDTs' callbacks and their
mean answer time. The file is removed at the end.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.A, c.B = args[0], args[1]
			ctx, stop := interruptible()
			defer stop()
			res, err := bench.PingPong(ctx, c)
			return printResult(ctx, cmd.OutOrStdout(), asJSON, res, err, func(r *bench.PingPongResult) *time.Time { return &r.Time })
		},
	}
	cmd.Flags().IntVar(&c.Rounds, "rounds", 1000, "round trips")
	cmd.Flags().IntVar(&c.Block, "block", 4096, "bytes written and read each hand-off")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	return cmd
}

func nfswriteCmd() *cobra.Command {
	var c bench.NFSWriteConfig
	var through throughFlags
	size := sizeValue(256 << 20)
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "nfswrite (-o PATH | --through DIR) [-s 256MiB] [--keep] [--aligned-direct] [--through-size 256MiB] [--through-streams 1] [--through-rounds 3] [--json]",
		Short: "Write as kernel nfsd does (unaligned O_DIRECT pwritev) and with aligned pwrites; compare",
		Long: `Reproduces the third field report: kernel nfsd hands a 1 MiB WRITE to the
filesystem as a vector whose first element is a partial page (the RPC header
shares that page). PATH.nfs is written with one O_DIRECT pwritev per MiB of
[3500-byte head, 255 pages, 596-byte tail]; PATH.aligned with plain 1 MiB
pwrites. Each phase ends with fsync and close and is timed. The command
prints both rates and nfs/aligned, and on stripefs the OST read RPCs, OST write
RPCs and client read-modify-writes of each phase: a pure write workload should
cause no reads. If the filesystem refuses O_DIRECT with an unaligned vector
(EINVAL), the nfs phase is written buffered and the output says so. Both files
are read back and verified, then removed unless --keep. --aligned-direct adds
1 MiB O_DIRECT pwrites to PATH.direct, to tell O_DIRECT's cost from the
vector shape's.

--through DIR (a directory on a mount) compares like with like, as a user
re-exporting the mount would: O_DIRECT 1 MiB pwrites from an aligned buffer
against O_DIRECT pwritevs of nfsd's vector, --through-streams files of
--through-size at once, in --through-rounds rounds of alternating order,
nfs/aligned taken within each round, with the OST reads of every pass.
-o may then be left out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.Size = int64(size)
			if through.c.Dir != "" {
				tc := through.config()
				c.Through = &tc
			}
			ctx, stop := interruptible()
			defer stop()
			res, err := bench.NFSWrite(ctx, c)
			return printResult(ctx, cmd.OutOrStdout(), asJSON, res, err, func(r *bench.NFSWriteResult) *time.Time { return &r.Time })
		},
	}
	cmd.Flags().StringVarP(&c.Path, "output", "o", "", "path prefix of the test files (PATH.nfs, PATH.aligned)")
	cmd.Flags().VarP(&size, "size", "s", "bytes per file, a whole number of MiB")
	cmd.Flags().BoolVar(&c.Keep, "keep", false, "keep the test files")
	cmd.Flags().BoolVar(&c.AlignedDirect, "aligned-direct", false, "add a phase of aligned 1 MiB O_DIRECT pwrites")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	through.add(cmd.Flags(), "aligned against nfsd-shaped O_DIRECT writes")
	return cmd
}

func seqioCmd() *cobra.Command {
	var iof ioFlags
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "seqio -o DIR [--size 1GiB] [--xfer 1MiB] [--json]",
		Short: "Write one file sequentially, fsync, drop caches, read it back and verify",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return fmt.Errorf("-o DIR is required")
			}
			if err := iof.check(); err != nil {
				return err
			}
			ctx, stop := interruptible()
			defer stop()
			res, err := bench.SeqIO(ctx, dir, int64(iof.size), int(iof.xfer))
			if err != nil {
				return err
			}
			return writeReport(cmd.OutOrStdout(), &bench.Report{
				Benchmark: "seqio", Size: res.Bytes, Xfer: res.Xfer,
				Targets: []bench.Target{{Name: filepath.Base(dir), Dir: dir, SeqIO: &res}},
			}, asJSON)
		},
	}
	iof.add(cmd)
	cmd.Flags().StringVarP(&dir, "output", "o", "", "directory to write the test file in")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	return cmd
}

func metaCmd() *cobra.Command {
	var dir string
	var n int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "meta -d DIR [-n 10000] [--json]",
		Short: "Create, stat and remove N empty files in one directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return fmt.Errorf("-d DIR is required")
			}
			if err := checkFiles(n); err != nil {
				return err
			}
			ctx, stop := interruptible()
			defer stop()
			res, err := bench.Meta(ctx, dir, n)
			if err != nil {
				return err
			}
			return writeReport(cmd.OutOrStdout(), &bench.Report{
				Benchmark: "meta", Files: n,
				Targets: []bench.Target{{Name: filepath.Base(dir), Dir: dir, Meta: &res}},
			}, asJSON)
		},
	}
	cmd.Flags().StringVarP(&dir, "dir", "d", "", "directory to work in (a subdirectory is created and removed)")
	cmd.Flags().IntVarP(&n, "files", "n", 10000, "number of files")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	return cmd
}

func baselineCmd() *cobra.Command {
	var iof ioFlags
	var files int
	var data string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "baseline [--size 1GiB] [--xfer 1MiB] [--files 10000] [--data DIR] [--json]",
		Short: "Compare stripefs (stripefs up) with a go-fuse loopback mount on the same disk",
		Long: `Starts "stripefs up" and a plain go-fuse loopback mount (passthrough off, so
its daemon carries the data too) as child processes under DIR, runs the
sequential I/O and metadata benchmarks on both and prints both figures and
their ratio (stripefs/loopback). Without --data a fresh directory under
$TMPDIR is used and removed afterwards. Page caches are dropped before each
read pass when running as root.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := iof.check(); err != nil {
				return err
			}
			if err := checkFiles(files); err != nil {
				return err
			}
			ctx, stop := interruptible()
			defer stop()
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			r, err := bench.Baseline(ctx, bench.BaselineConfig{Exe: exe, Data: data, Size: int64(iof.size), Xfer: int(iof.xfer),
				Files: files, Log: cmd.ErrOrStderr()})
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("interrupted")
				}
				return err
			}
			return writeReport(cmd.OutOrStdout(), r, asJSON)
		},
	}
	iof.add(cmd)
	cmd.Flags().IntVar(&files, "files", 10000, "number of files for the metadata pass")
	cmd.Flags().StringVar(&data, "data", "", "working directory (default: a fresh one under $TMPDIR, removed afterwards)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of a table")
	return cmd
}

// dropLines writes what it is given to w, except lines containing a
// string.
type dropLines struct {
	w          io.Writer
	containing string
}

func (d dropLines) Write(p []byte) (int, error) {
	if strings.Contains(string(p), d.containing) {
		return len(p), nil
	}
	return d.w.Write(p)
}

func loopbackCmd() *cobra.Command {
	var src string
	var readAheadKB int
	request := fusefs.RequestBytes(fusefs.DefaultMaxRequestKB)
	cmd := &cobra.Command{
		Use:         "loopback --src DIR MOUNTPOINT",
		Short:       "Mount DIR at MOUNTPOINT through a plain go-fuse loopback (the benchmarks' baseline)",
		Hidden:      true,
		Annotations: map[string]string{keyUse: keyNone},
		Args:        cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if src == "" {
				return fmt.Errorf("--src is required")
			}
			src, err := filepath.Abs(src)
			if err != nil {
				return err
			}
			mnt := args[0]
			for _, d := range []string{src, mnt} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			root, err := gofs.NewLoopbackRoot(src)
			if err != nil {
				return err
			}
			// The same kernel-facing settings as a stripefs mount
			// (fusefs.Mount, DefaultMountOptions: its request size and
			// read-ahead window), and no passthrough,
			// so the daemon carries every read and write as stripefs's does.
			timeout := time.Second
			clearStaleMount(mnt)
			srv, err := gofs.Mount(mnt, root, &gofs.Options{
				EntryTimeout: &timeout,
				AttrTimeout:  &timeout,
				MountOptions: fuse.MountOptions{
					FsName:               src,
					Name:                 "stripefs-loopback",
					MaxWrite:             request,
					MaxReadAhead:         1 << 20,
					MaxBackground:        64,
					Options:              []string{"default_permissions"},
					DisabledCapabilities: fuse.CAP_PASSTHROUGH,
					// go-fuse logs each read it fails to splice (a 1 MiB
					// read and its header do not fit a pipe of the default
					// pipe-max-size) before copying it; a stripefs mount
					// copies those without trying, and so, in effect,
					// does the baseline, without a log line per read.
					Logger: log.New(dropLines{w: os.Stderr, containing: "trySplice: splice: want"}, "", log.LstdFlags),
				},
			})
			if err != nil {
				return fmt.Errorf("mount %s: %w", mnt, err)
			}
			if readAheadKB > 0 {
				if err := fusefs.SetReadAhead(mnt, readAheadKB); err != nil {
					log.Printf("loopback: %s: kernel read-ahead window left as it was: %v", mnt, err)
				}
			}
			sig := stopSignals()
			fmt.Printf("%s%s\n", readyPrefix, mnt)
			return serveUntilSignal(&liveMount{dir: mnt, srv: srv}, sig, nil)
		},
	}
	cmd.Flags().StringVar(&src, "src", "", "directory to expose")
	cmd.Flags().IntVar(&readAheadKB, "read-ahead-kb", request>>10,
		"kernel read-ahead window, as a stripefs mount's -o read_ahead_kb (0: the kernel's 128 KiB)")
	return cmd
}

// kibOf is n bytes for a chart's title: 1 MiB, 64 KiB, 512 B.
func kibOf(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
