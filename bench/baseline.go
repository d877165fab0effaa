package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stripefs/stripefs/internal/child"
	"github.com/stripefs/stripefs/internal/mountinfo"
)

// BaselineConfig is bench baseline's: stripefs (`stripefs up`) and a
// plain go-fuse loopback mount (the hidden `stripefs loopback`), both
// served by child processes of Exe, measured alike.
type BaselineConfig struct {
	Exe   string // the stripefs executable
	Data  string // working directory; "": a fresh one under $TMPDIR, removed afterwards
	Size  int64  // bytes SeqIO writes and reads
	Xfer  int    // its transfer size
	Files int    // files Meta creates, stats and removes
	Log   io.Writer
}

// The lines the two children announce readiness with.
const (
	upReady       = "stripefs up:"
	loopbackReady = "stripefs: mounted "
)

// Baseline runs SeqIO and Meta on a stripefs mount and on a loopback
// mount of a directory of the same disk, so a reader can factor the FUSE
// cost out. Progress lines go to cfg.Log. Both children are stopped
// however it returns.
func Baseline(ctx context.Context, cfg BaselineConfig) (r *Report, err error) {
	progress := func(format string, a ...any) { fmt.Fprintf(cfg.Log, "bench: "+format+"\n", a...) }
	data := cfg.Data
	if data == "" {
		if data, err = os.MkdirTemp("", "stripefs-bench-"); err != nil {
			return nil, err
		}
		defer func() {
			if mountinfo.IsMountPoint(filepath.Join(data, "mnt")) || mountinfo.IsMountPoint(filepath.Join(data, "lo-mnt")) {
				progress("not removing %s: a mount is still there", data)
				return
			}
			if rerr := os.RemoveAll(data); rerr != nil {
				progress("remove %s: %v", data, rerr)
			}
		}()
	} else if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	if data, err = filepath.Abs(data); err != nil {
		return nil, err
	}
	sfMnt, loSrc, loMnt := filepath.Join(data, "mnt"), filepath.Join(data, "lo-src"), filepath.Join(data, "lo-mnt")
	for _, d := range []string{sfMnt, loSrc, loMnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}

	var mounts []*mountChild
	defer func() {
		for _, c := range mounts {
			if serr := c.stop(); serr != nil {
				if err == nil {
					err = serr
				} else {
					progress("%v", serr)
				}
			}
		}
	}()
	progress("starting stripefs up in %s", data)
	sf, err := startMount(ctx, cfg.Exe, "stripefs up", sfMnt, filepath.Join(data, "up.log"), upReady,
		"up", "--data", filepath.Join(data, "fs"), "--mount", sfMnt)
	if err != nil {
		return nil, err
	}
	mounts = append(mounts, sf)
	progress("starting loopback mount of %s", loSrc)
	lo, err := startMount(ctx, cfg.Exe, "loopback", loMnt, filepath.Join(data, "loopback.log"), loopbackReady,
		"loopback", "--src", loSrc, loMnt)
	if err != nil {
		return nil, err
	}
	mounts = append(mounts, lo)

	r = &Report{
		Benchmark: "baseline", Size: cfg.Size, Xfer: cfg.Xfer, Files: cfg.Files,
		Targets: []Target{{Name: "stripefs", Dir: sfMnt}, {Name: "loopback", Dir: loMnt}},
		Notes: []string{
			"stripefs: " + strings.TrimSpace(strings.SplitN(sf.ReadyLine(), ";", 2)[0]),
			"loopback: go-fuse fs.NewLoopbackRoot over " + loSrc + " (passthrough off)",
		},
	}
	for i := range r.Targets {
		t := &r.Targets[i]
		if !mountinfo.IsFUSE(t.Dir) {
			return nil, fmt.Errorf("%s: %s is not a FUSE mount", t.Name, t.Dir)
		}
		progress("%s: seqio %s in %s transfers", t.Name, FormatSize(cfg.Size), FormatSize(int64(cfg.Xfer)))
		seq, err := SeqIO(ctx, t.Dir, cfg.Size, cfg.Xfer)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		t.SeqIO = &seq
		progress("%s: write %.1f MiB/s, read %.1f MiB/s", t.Name, seq.WriteMiBps, seq.ReadMiBps)
		progress("%s: meta %d files", t.Name, cfg.Files)
		meta, err := Meta(ctx, t.Dir, cfg.Files)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		t.Meta = &meta
		progress("%s: create %.0f/s, stat %.0f/s, remove %.0f/s", t.Name, meta.CreateOps, meta.StatOps, meta.RemoveOps)
	}
	return r, nil
}

// mountChild is a child process serving a mount.
type mountChild struct {
	*child.Proc
	mnt string
}

// startMount runs exe with args, a program that mounts mnt and then
// prints a line starting with ready; it gives it three minutes.
func startMount(ctx context.Context, exe, name, mnt, log, ready string, args ...string) (*mountChild, error) {
	p, err := child.Start(ctx, child.Config{
		Name: name, Path: exe, Args: args, Log: log, Timeout: 3 * time.Minute, OwnGroup: true,
		Ready: func(l string) (string, bool) { return l, strings.HasPrefix(l, ready) },
	})
	if err != nil {
		return nil, err
	}
	return &mountChild{p, mnt}, nil
}

// stop stops the child, which unmounts as it goes; a mount it left
// behind (killed, or failed) is detached.
func (c *mountChild) stop() error {
	err := c.Stop(time.Minute)
	if err != nil && mountinfo.IsMountPoint(c.mnt) {
		mountinfo.LazyUnmount(c.mnt)
	}
	return err
}
