package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pkg/xattr"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/stats"
)

// RPCsConfig is the round-trip count: each common operation done Reps
// times on a stripefs mount, the mount's RPCs counted around it.
type RPCsConfig struct {
	Dir  string `json:"dir"`
	Reps int    `json:"reps"`
	// Other, if set, is Dir through another mount (another client):
	// files made there are stat'ed here without this client holding
	// their locks.
	Other string `json:"other,omitempty"`
}

// RPCOp is one operation's cost: RPCs per operation, all and by method.
type RPCOp struct {
	Op       string             `json:"op"`
	PerOp    float64            `json:"rpcs_per_op"`
	ByMethod map[string]float64 `json:"by_method,omitempty"`
	Note     string             `json:"note,omitempty"`
}

// RPCsResult is one run.
type RPCsResult struct {
	Benchmark string     `json:"benchmark"`
	Time      time.Time  `json:"time"`
	Config    RPCsConfig `json:"config"`
	Ops       []RPCOp    `json:"ops"`
}

// background are methods a client sends on its own, whatever it does.
var background = map[string]bool{"ping": true}

// mountCalls reads the mount's RPC counts by method (an xattr the mount
// answers itself: reading it costs no RPC).
func mountCalls(path string) (map[string]int64, int64, error) {
	b, err := xattr.Get(path, stats.ClientXattr)
	if err != nil {
		return nil, 0, fmt.Errorf("rpcs: %s is not on a stripefs mount: %w", path, err)
	}
	var cl stats.Client
	if err := json.Unmarshal(b, &cl); err != nil {
		return nil, 0, err
	}
	out := map[string]int64{}
	for _, m := range cl.Methods {
		if !background[m.Name] {
			out[m.Name] = m.Calls
		}
	}
	return out, cl.Counters["dirty_bytes"] + cl.Counters["object_destroys_now"], nil
}

// RPCs runs the count.
func RPCs(ctx context.Context, c RPCsConfig) (*RPCsResult, error) {
	if c.Dir == "" || c.Reps < 1 || c.Reps > 10000 {
		return nil, errors.New("rpcs: a directory on a stripefs mount and 1 to 10000 repetitions are needed")
	}
	work, err := os.MkdirTemp(c.Dir, ".bench-rpcs-")
	if err != nil {
		return nil, fmt.Errorf("rpcs: %w", err)
	}
	defer os.RemoveAll(work)
	res := &RPCsResult{Benchmark: "rpcs", Config: c}
	name := func(kind string, i int) string { return filepath.Join(work, fmt.Sprintf("%s.%d", kind, i)) }
	// measure runs prepare (not counted) then op Reps times, and counts
	// the mount's RPCs once its cached writes have gone out.
	measure := func(op, note string, prepare func() error, do func(i int) error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if prepare != nil {
			if err := prepare(); err != nil {
				return fmt.Errorf("rpcs: %s: prepare: %w", op, err)
			}
		}
		if err := settle(ctx, work); err != nil {
			return err
		}
		before, _, err := mountCalls(work)
		if err != nil {
			return err
		}
		for i := 0; i < c.Reps; i++ {
			if err := do(i); err != nil {
				return fmt.Errorf("rpcs: %s: %w", op, err)
			}
		}
		if err := settle(ctx, work); err != nil {
			return err
		}
		after, _, err := mountCalls(work)
		if err != nil {
			return err
		}
		r := RPCOp{Op: op, Note: note, ByMethod: map[string]float64{}}
		for m, n := range after {
			if d := n - before[m]; d > 0 {
				r.ByMethod[m] = float64(d) / float64(c.Reps)
				r.PerOp += float64(d) / float64(c.Reps)
			}
		}
		res.Ops = append(res.Ops, r)
		return nil
	}
	small := make([]byte, 4096)
	large := make([]byte, 8<<20)
	for i := range large {
		large[i] = byte(i)
	}
	steps := []struct {
		op, note string
		prepare  func() error
		do       func(i int) error
	}{
		{"create", "open(O_CREAT|O_EXCL) and close of a new empty file", nil, func(i int) error {
			f, err := os.OpenFile(name("c", i), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}},
		{"stat_cached", "lstat of a file this client just made (its locks held)", nil, func(i int) error {
			_, err := os.Lstat(name("c", i))
			return err
		}},
		{"create_write_4k_close", "a new 4 KiB file: open, write, close (and its data sent)", nil, func(i int) error {
			return os.WriteFile(name("w", i), small, 0o644)
		}},
		{"open_read_close_4k", "open, read and close of a 4 KiB file written earlier", nil, func(i int) error {
			_, err := os.ReadFile(name("w", i))
			return err
		}},
		{"open_read_close_8m", "open, read and close of an 8 MiB file written earlier", func() error {
			for i := 0; i < c.Reps; i++ {
				if err := os.WriteFile(name("l", i), large, 0o644); err != nil {
					return err
				}
			}
			return nil
		}, func(i int) error {
			_, err := os.ReadFile(name("l", i))
			return err
		}},
		{"getxattr_absent", "lgetxattr of an xattr the file lacks, asked before (ls -l asks two a file)", func() error {
			for i := 0; i < c.Reps; i++ {
				if _, err := xattr.LGet(name("c", i), "security.selinux"); err == nil {
					return fmt.Errorf("%s has security.selinux", name("c", i))
				}
			}
			return nil
		}, func(i int) error {
			if _, err := xattr.LGet(name("c", i), "security.selinux"); err == nil {
				return fmt.Errorf("security.selinux appeared")
			}
			return nil
		}},
		{"rename", "rename within a directory", nil, func(i int) error {
			return os.Rename(name("c", i), name("r", i))
		}},
		{"unlink", "unlink of a file", nil, func(i int) error { return os.Remove(name("r", i)) }},
		{"mkdir", "mkdir beside its parent on one MDT", nil, func(i int) error { return os.Mkdir(name("d", i), 0o755) }},
		{"rmdir", "rmdir of an empty directory", nil, func(i int) error { return os.Remove(name("d", i)) }},
		{"readdir_1000", "read a directory of 1000 files (names and types)", func() error {
			if err := os.Mkdir(name("big", 0), 0o755); err != nil {
				return err
			}
			for i := 0; i < 1000; i++ {
				f, err := os.Create(filepath.Join(name("big", 0), fmt.Sprint(i)))
				if err != nil {
					return err
				}
				f.Close()
			}
			return nil
		}, func(int) error {
			ents, err := os.ReadDir(name("big", 0))
			if err == nil && len(ents) != 1000 {
				err = fmt.Errorf("%d entries", len(ents))
			}
			return err
		}},
	}
	for _, s := range steps {
		if err := measure(s.op, s.note, s.prepare, s.do); err != nil {
			return nil, err
		}
	}
	if remote, ok := remoteParent(work); ok {
		if err := measure("mkdir_remote", "mkdir of a directory on another MDT than its parent's", nil, func(i int) error {
			return os.Mkdir(filepath.Join(remote, fmt.Sprint(i)), 0o755)
		}); err != nil {
			return nil, err
		}
	}
	// otherWrites has the other mount write n bytes to each file kind.i
	// and waits for its closes.
	otherWrites := func(kind string, n int) func() error {
		return func() error {
			otherWork := filepath.Join(c.Other, filepath.Base(work))
			before, _, err := mountCalls(otherWork)
			if err != nil {
				return err
			}
			for i := 0; i < c.Reps; i++ {
				if err := os.WriteFile(filepath.Join(otherWork, fmt.Sprintf("%s.%d", kind, i)), small[:n], 0o644); err != nil {
					return err
				}
			}
			// The other mount's closes go out after close(2) returns
			// (the kernel's release is asynchronous): wait for them.
			for deadline := time.Now().Add(10 * time.Second); ; {
				after, _, err := mountCalls(otherWork)
				if err != nil || after["close"]-before["close"] >= int64(c.Reps) || time.Now().After(deadline) {
					return err
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	lstat := func(kind string) func(i int) error {
		return func(i int) error {
			_, err := os.Lstat(name(kind, i))
			return err
		}
	}
	if c.Other != "" {
		if err := measure("stat_uncached", "lstat of a file another client just made", otherWrites("o", 0), lstat("o")); err != nil {
			return nil, err
		}
		if err := measure("stat_uncached_4k", "lstat of a 4 KiB file another client just wrote (st_blocks from its OST)", otherWrites("p", 4096), lstat("p")); err != nil {
			return nil, err
		}
	}
	// Data-on-MDT, where the MDTs keep file data: the same small-file
	// operations in a directory whose files keep their first 64 KiB there.
	dom := filepath.Join(work, "dom")
	if err := os.Mkdir(dom, 0o755); err != nil {
		return nil, fmt.Errorf("rpcs: %w", err)
	}
	if xattr.Set(dom, proto.LayoutXattr, []byte("extent=0-65536 pattern=mdt;extent=65536-EOF stripe_count=1")) != nil {
		return res, nil // this filesystem's MDTs keep no data
	}
	domName := func(kind string, i int) string { return filepath.Join(dom, fmt.Sprintf("%s.%d", kind, i)) }
	for _, s := range []struct {
		op, note string
		prepare  func() error
		do       func(i int) error
	}{
		{"create_write_4k_close_dom", "a new 4 KiB file on its MDT (Data-on-MDT): open, write, close", nil, func(i int) error {
			return os.WriteFile(domName("w", i), small, 0o644)
		}},
		{"open_read_close_4k_dom", "open, read and close of a 4 KiB Data-on-MDT file written earlier", nil, func(i int) error {
			_, err := os.ReadFile(domName("w", i))
			return err
		}},
	} {
		if err := measure(s.op, s.note, s.prepare, s.do); err != nil {
			return nil, err
		}
	}
	if c.Other != "" {
		if err := measure("stat_uncached_4k_dom", "lstat of a 4 KiB Data-on-MDT file another client just wrote", otherWrites("dom/q", 4096),
			lstat("dom/q")); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// remoteParent makes a directory under work whose new subdirectories go
// to another MDT than its own (a default directory layout), if the
// filesystem has another.
func remoteParent(work string) (string, bool) {
	d := filepath.Join(work, "remote")
	if os.Mkdir(d, 0o755) != nil {
		return "", false
	}
	v, err := xattr.Get(d, "lustre.lmv") // where the directory lives
	if err != nil {
		return "", false
	}
	var idx, count int
	if _, err := fmt.Sscanf(string(v), "mdt_index=%d mdt_count=%d", &idx, &count); err != nil {
		return "", false
	}
	for other := range 8 {
		if other != idx && xattr.Set(d, proto.DirDefaultXattr, []byte(fmt.Sprintf("mdt_index=%d mdt_count=1", other))) == nil {
			return d, true
		}
	}
	return "", false
}

// settle waits until the mount has no cached writes to send and no
// removed file's objects to destroy (both go out in the background), so
// that an operation's RPCs count with it and not with the next.
func settle(ctx context.Context, path string) error {
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, busy, err := mountCalls(path)
		if err != nil || busy == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rpcs: the mount is still busy after 30s (%d bytes dirty or objects to destroy)", busy)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// WriteJSON writes the result as one JSON object.
func (r *RPCsResult) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteTable prints the result for people.
func (r *RPCsResult) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "rpcs: the mount's RPCs per operation, %d of each, in %s\n", r.Config.Reps, r.Config.Dir)
	for _, op := range r.Ops {
		fmt.Fprintf(w, "  %-22s %6.2f   %s\n", op.Op, op.PerOp, formatCalls(op.ByMethod))
	}
	return nil
}

// formatCalls prints calls per operation by method, in name order.
func formatCalls(byMethod map[string]float64) string {
	methods := slices.Sorted(maps.Keys(byMethod))
	parts := make([]string, len(methods))
	for i, m := range methods {
		parts[i] = fmt.Sprintf("%s %.2g", m, byMethod[m])
	}
	return strings.Join(parts, ", ")
}
