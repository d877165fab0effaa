// Package stats collects a filesystem's counters: the client's, read from
// a mount through virtual extended attributes, and every server's, asked
// over RPC. Benchmarks and tests take two snapshots and subtract them.
package stats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/pkg/xattr"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/internal/targets"
	"github.com/stripefs/stripefs/rpc"
)

// The mount's virtual extended attributes (fs.ClientXattr and the rest).
const (
	ClientXattr  = fs.ClientXattr
	MGSXattr     = fs.MGSXattr
	KeyFileXattr = fs.KeyFileXattr
)

// Method is one method's call and bulk byte counts.
type Method = fs.MethodCount

// Target is one server's counters.
type Target struct {
	Name     string           `json:"name"`
	Methods  []Method         `json:"methods"`
	Counters map[string]int64 `json:"counters,omitempty"`
	// Error says the target did not answer; it has no counters.
	Error string `json:"error,omitempty"`
}

// Client is what a mount reports.
type Client = fs.Report

// Snapshot is the whole filesystem's counters at one moment.
type Snapshot struct {
	Client  *Client  `json:"client,omitempty"`
	Targets []Target `json:"targets"`
}

// FromMount reads the client counters of the mount that holds path and
// the counters of every server of its filesystem.
func FromMount(ctx context.Context, path string) (*Snapshot, error) {
	b, err := xattr.Get(path, ClientXattr)
	if err != nil {
		return nil, fmt.Errorf("%s is not on a stripefs mount: %w", path, err)
	}
	var cl Client
	if err := json.Unmarshal(b, &cl); err != nil {
		return nil, fmt.Errorf("%s: client stats: %w", path, err)
	}
	mgs, err := xattr.Get(path, MGSXattr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, err := FromServers(ctx, string(mgs))
	if s != nil {
		s.Client = &cl
	}
	return s, err
}

// FromServers asks every target in the cluster map for its counters. A
// target that does not answer within a few seconds is listed with its
// error, and the snapshot of the others comes back with an error that
// names it: callers that need every counter fail, a tool can still
// print the rest.
func FromServers(ctx context.Context, mgs string) (*Snapshot, error) {
	cfg, err := targets.Map(ctx, mgs, "stats", 0)
	if err != nil {
		return nil, err
	}
	ts := targets.Of(cfg)
	out := &Snapshot{Targets: make([]Target, len(ts))}
	errs := targets.AskEach(ctx, ts, "stats", 3*time.Second, func(ctx context.Context, rc *rpc.Client, i int) error {
		name := ts[i].Name()
		r, err := rpc.QueryStats(ctx, rc)
		if err != nil {
			out.Targets[i] = Target{Name: name, Error: err.Error()}
			return fmt.Errorf("%s: %w", name, err)
		}
		tg := Target{Name: name, Methods: fs.NamedMethods(r.Methods), Counters: map[string]int64{}}
		for _, c := range r.Counters {
			tg.Counters[c.Name] = c.Value
		}
		out.Targets[i] = tg
		return nil
	})
	return out, errors.Join(errs...)
}

// Calls sums the calls of a method (by name) over targets whose name
// starts with prefix ("ost", "mdt", or "" for all).
func (s *Snapshot) Calls(prefix, method string) int64 {
	var n int64
	for _, t := range s.Targets {
		if strings.HasPrefix(t.Name, prefix) {
			for _, m := range t.Methods {
				if m.Name == method {
					n += m.Calls
				}
			}
		}
	}
	return n
}

// Counter sums a named counter over targets whose name starts with prefix.
func (s *Snapshot) Counter(prefix, name string) int64 {
	var n int64
	for _, t := range s.Targets {
		if strings.HasPrefix(t.Name, prefix) {
			n += t.Counters[name]
		}
	}
	return n
}

// ClientCounter is a client counter, 0 when absent.
func (s *Snapshot) ClientCounter(name string) int64 {
	if s.Client == nil {
		return 0
	}
	return s.Client.Counters[name]
}

// Sub returns s - old, counter by counter (gauges such as dirty_bytes are
// kept as they are in s).
func (s *Snapshot) Sub(old *Snapshot) *Snapshot {
	out := &Snapshot{}
	oldT := map[string]Target{}
	for _, t := range old.Targets {
		oldT[t.Name] = t
	}
	for _, t := range s.Targets {
		o := oldT[t.Name]
		out.Targets = append(out.Targets, Target{Name: t.Name, Methods: subMethods(t.Methods, o.Methods), Counters: subCounters(t.Counters, o.Counters)})
	}
	if s.Client != nil {
		var oc Client
		if old.Client != nil {
			oc = *old.Client
		}
		out.Client = &Client{Methods: subMethods(s.Client.Methods, oc.Methods), Counters: subCounters(s.Client.Counters, oc.Counters)}
	}
	return out
}

var gauges = map[string]bool{"dirty_bytes": true, "dirty_bytes_peak": true, "max_dirty_bytes": true, "grant_bytes": true}

func subCounters(a, b map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range a {
		if gauges[k] {
			out[k] = v
		} else {
			out[k] = v - b[k]
		}
	}
	return out
}

func subMethods(a, b []Method) []Method {
	old := map[string]Method{}
	for _, m := range b {
		old[m.Name] = m
	}
	var out []Method
	for _, m := range a {
		o := old[m.Name]
		if d := (Method{Name: m.Name, Calls: m.Calls - o.Calls, BytesIn: m.BytesIn - o.BytesIn, BytesOut: m.BytesOut - o.BytesOut}); d.Calls != 0 {
			out = append(out, d)
		}
	}
	return out
}

// Write prints s the way lctl get_param does: one line a counter.
func (s *Snapshot) Write(w io.Writer) {
	line := func(prefix string, ms []Method, cs map[string]int64) {
		for _, m := range ms {
			fmt.Fprintf(w, "%s.%s=%d samples [reqs] bulk_in=%d bulk_out=%d\n", prefix, m.Name, m.Calls, m.BytesIn, m.BytesOut)
		}
		keys := make([]string, 0, len(cs))
		for k := range cs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "%s.%s=%d\n", prefix, k, cs[k])
		}
	}
	if s.Client != nil {
		line("llite.client", s.Client.Methods, s.Client.Counters)
	}
	for _, t := range s.Targets {
		kind := "obdfilter"
		if strings.HasPrefix(t.Name, "mdt") {
			kind = "mdt"
		}
		if t.Error != "" {
			fmt.Fprintf(w, "%s.%s: inactive device (%s)\n", kind, t.Name, t.Error)
			continue
		}
		line(kind+"."+t.Name, t.Methods, t.Counters)
	}
}
