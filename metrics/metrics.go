// Package metrics serves a process's figures as Prometheus metrics
// (github.com/prometheus/client_golang), for `--metrics ADDR`: each
// target's and client's counters (the ones `stripefs stats` prints, read
// from the same atomics at scrape time), RPC counts, bytes and latency
// histograms by method and target on both sides, requests in flight, and
// each store's Pebble figures. Nothing is kept twice: a scrape reads the
// live counters, so serving metrics costs the hot path nothing.
//
// Names follow Prometheus's conventions: stripefs_<side>_<name>_total for
// counters, no suffix for gauges (a counter named …_now in `stripefs
// stats`, or one of the levels listed in gauges), _seconds and _bytes
// units, and a target label as Lustre names targets (MDT0000, OST0001).
package metrics

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Counter is one named figure of a target or a client, as `stripefs
// stats` prints it (the stats method's own).
type Counter = rpc.Counter

// Target is what a target served in this process shows: its server's
// RPC statistics, its counters, and its store's Pebble metrics (nil when
// it has none or its store failed).
type Target interface {
	RPCStats() *rpc.Stats
	InFlight() int64
	Counters() []Counter
	StoreMetrics() *pebble.Metrics
}

// Client is what a client (the mount, the NFS gateway) shows: its RPC
// statistics to each target and its counters.
type Client interface {
	TargetStats() map[string]*rpc.Stats
	Counters() []Counter
}

// Registry is one process's metrics.
type Registry struct {
	reg *prometheus.Registry
}

// New is a registry with the Go runtime's and the process's own metrics.
func New() *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Registry{reg: reg}
}

// Gatherer is the registry, for tests and handlers.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// AddTarget adds the target of the given kind and index; get returns the
// one serving now (a target reopened after its store failed is another
// value).
func (r *Registry) AddTarget(kind string, index uint32, get func() Target) {
	r.reg.MustRegister(&targetCollector{side: kind, target: proto.TargetName(kind, index), get: get})
}

// AddClient adds a client; frontend names it (mount, nfs).
func (r *Registry) AddClient(frontend string, c Client) {
	r.reg.MustRegister(&clientCollector{frontend: frontend, c: c})
}

// Serve serves /metrics on addr in the background and returns the
// address it listens on (addr may give port 0).
func (r *Registry) Serve(addr string) (net.Addr, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorLog: log.Default()}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error(fmt.Sprintf("metrics: %v", err), "addr", l.Addr().String())
		}
	}()
	return l.Addr(), nil
}

// gauges are the figures `stripefs stats` names without _now that are
// levels, not counts.
var gauges = map[string]bool{
	"dirty_bytes": true, "dirty_bytes_peak": true, "max_dirty_bytes": true, "clients": true, "dtx_pending": true,
	"grant_bytes": true, "recovery_status": true, "recovery_window_ms": true, "recovery_clients_known": true,
	"recovery_requests_waiting": true, "remote_sync": true, "fiemap_fail": true, "locks_held": true, "flocks_held": true,
	"ldlm_callback_wait_us_max": true,
}

var badName = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// counterMetric is c as a Prometheus metric of side (mdt, ost, client)
// with the given labels.
func counterMetric(side string, c Counter, labels []string, values []string) prometheus.Metric {
	name := badName.ReplaceAllString(c.Name, "_")
	kind := prometheus.CounterValue
	switch {
	case strings.HasSuffix(name, "_now"):
		name, kind = strings.TrimSuffix(name, "_now"), prometheus.GaugeValue
	case gauges[name]:
		kind = prometheus.GaugeValue
	case !strings.HasSuffix(name, "_total"):
		name += "_total"
	}
	desc := prometheus.NewDesc("stripefs_"+side+"_"+name, "stripefs stats: "+c.Name, labels, nil)
	return prometheus.MustNewConstMetric(desc, kind, float64(c.Value), values...)
}

// rpcMetrics sends s's counts, bytes and latencies, by method.
func rpcMetrics(ch chan<- prometheus.Metric, side string, s *rpc.Stats, labels, values []string) {
	if s == nil {
		return
	}
	labels = append(labels[:len(labels):len(labels)], "method")
	reqs := prometheus.NewDesc("stripefs_rpc_"+side+"_requests_total", "RPCs by method", labels, nil)
	in := prometheus.NewDesc("stripefs_rpc_"+side+"_bulk_in_bytes_total", "bulk bytes of requests", labels, nil)
	out := prometheus.NewDesc("stripefs_rpc_"+side+"_bulk_out_bytes_total", "bulk bytes of replies", labels, nil)
	lat := prometheus.NewDesc("stripefs_rpc_"+side+"_latency_seconds", "RPC latency: arrival to reply on a server, send to reply on a client", labels, nil)
	for _, m := range s.Snapshot() {
		v := append(values[:len(values):len(values)], proto.MethodName(m.Method))
		ch <- prometheus.MustNewConstMetric(reqs, prometheus.CounterValue, float64(m.Calls), v...)
		ch <- prometheus.MustNewConstMetric(in, prometheus.CounterValue, float64(m.BytesIn), v...)
		ch <- prometheus.MustNewConstMetric(out, prometheus.CounterValue, float64(m.BytesOut), v...)
	}
	for _, m := range s.Latencies() {
		v := append(values[:len(values):len(values)], proto.MethodName(m.Method))
		buckets := make(map[float64]uint64, rpc.LatencyBuckets-1)
		var n uint64
		for i, c := range m.Buckets {
			n += uint64(c)
			if i < rpc.LatencyBuckets-1 {
				buckets[rpc.LatencyBound(i).Seconds()] = n
			}
		}
		ch <- prometheus.MustNewConstHistogram(lat, n, m.Sum.Seconds(), buckets, v...)
	}
}

// pebbleMetrics sends a store's figures.
func pebbleMetrics(ch chan<- prometheus.Metric, side string, m *pebble.Metrics, labels, values []string) {
	if m == nil {
		return
	}
	one := func(name, help string, kind prometheus.ValueType, v float64) {
		desc := prometheus.NewDesc("stripefs_"+side+"_pebble_"+name, help, labels, nil)
		ch <- prometheus.MustNewConstMetric(desc, kind, v, values...)
	}
	one("compactions_total", "compactions", prometheus.CounterValue, float64(m.Compact.Count))
	one("flushes_total", "memtable flushes", prometheus.CounterValue, float64(m.Flush.Count))
	one("wal_bytes_written_total", "bytes written to the WAL", prometheus.CounterValue, float64(m.WAL.BytesWritten))
	one("wal_files", "WAL files", prometheus.GaugeValue, float64(m.WAL.Files))
	one("block_cache_hits_total", "block cache hits", prometheus.CounterValue, float64(m.BlockCache.Hits))
	one("block_cache_misses_total", "block cache misses", prometheus.CounterValue, float64(m.BlockCache.Misses))
	one("block_cache_bytes", "block cache size", prometheus.GaugeValue, float64(m.BlockCache.Size))
	one("memtable_bytes", "memtable size", prometheus.GaugeValue, float64(m.MemTable.Size))
	one("disk_usage_bytes", "bytes of the store on disk", prometheus.GaugeValue, float64(m.DiskSpaceUsage()))
	one("read_amplification", "sublevels a read may visit", prometheus.GaugeValue, float64(m.ReadAmp()))
}

// targetCollector collects one target's metrics at scrape time.
type targetCollector struct {
	side, target string
	get          func() Target
}

func (t *targetCollector) Describe(chan<- *prometheus.Desc) {} // unchecked: names come from the counters

func (t *targetCollector) Collect(ch chan<- prometheus.Metric) {
	tg := t.get()
	labels, values := []string{"target"}, []string{t.target}
	for _, c := range tg.Counters() {
		ch <- counterMetric(t.side, c, labels, values)
	}
	rpcMetrics(ch, "server", tg.RPCStats(), labels, values)
	inflight := prometheus.NewDesc("stripefs_rpc_server_inflight_requests", "requests being handled", labels, nil)
	ch <- prometheus.MustNewConstMetric(inflight, prometheus.GaugeValue, float64(tg.InFlight()), values...)
	pebbleMetrics(ch, t.side, tg.StoreMetrics(), labels, values)
}

// clientCollector collects one client's metrics at scrape time.
type clientCollector struct {
	frontend string
	c        Client
}

func (c *clientCollector) Describe(chan<- *prometheus.Desc) {}

func (c *clientCollector) Collect(ch chan<- prometheus.Metric) {
	labels, values := []string{"frontend"}, []string{c.frontend}
	for _, k := range c.c.Counters() {
		ch <- counterMetric("client", k, labels, values)
	}
	stats := c.c.TargetStats()
	names := make([]string, 0, len(stats))
	for n := range stats {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		rpcMetrics(ch, "client", stats[n], []string{"frontend", "target"}, []string{c.frontend, n})
	}
}
