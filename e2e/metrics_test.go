package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/stats"
)

// scrape reads url's metrics with Prometheus's own text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return fams
}

// sample sums the samples of family name whose labels include want; for
// a histogram, its count.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	var sum float64
outer:
	for _, m := range f.Metric {
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue outer
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// freePort is a TCP address on loopback nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().String()
}

// Every server, the mount and the NFS gateway serve Prometheus metrics
// with --metrics: each parses with Prometheus's text parser, the RPC
// latency histograms move with a workload, and the counts agree with
// what `stripefs stats` reads from the same counters.
func TestMetrics(t *testing.T) {
	c := testcluster.StartFlags(t, 2, 1, []string{"--metrics", "127.0.0.1:0"}, []string{"--metrics", "127.0.0.1:0"})
	mnt := c.MountWith([]string{"--metrics", "127.0.0.1:0"})
	for _, p := range append(append([]*testcluster.Proc{c.Mount}, c.MDTs...), c.OSTs...) {
		if p.Metrics == "" {
			t.Fatalf("%s printed no metrics address", p.Name)
		}
	}
	nfsMetrics := "http://" + freePort(t) + "/metrics"
	startNFS(t, c, "--metrics", strings.TrimSuffix(strings.TrimPrefix(nfsMetrics, "http://"), "/metrics"))

	mdt0, ost0, mount := c.MDTs[0].Metrics, c.OSTs[0].Metrics, c.Mount.Metrics
	create := map[string]string{"method": "create"}
	before := scrape(t, mdt0)
	dir := filepath.Join(mnt, "m")
	must(t, os.Mkdir(dir, 0o755))
	const n = 40
	for i := range n {
		must(t, os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), make([]byte, 64<<10), 0o644))
	}
	// The servers' counters settle before both are read: no call of this
	// test is in flight.
	time.Sleep(200 * time.Millisecond)
	after := scrape(t, mdt0)
	snap := snapshot(t, mnt)

	// MDT0: the creates moved the server's histogram by as many, and its
	// count is what stripefs stats says.
	if d := sample(after, "stripefs_rpc_server_latency_seconds", create) - sample(before, "stripefs_rpc_server_latency_seconds", create); d < n {
		t.Errorf("mdt0 create latency histogram moved by %v after %d creates", d, n)
	}
	if got, want := sample(after, "stripefs_rpc_server_requests_total", create), float64(snap.Calls("mdt0", "create")); got != want {
		t.Errorf("mdt0 creates: metrics %v, stripefs stats %v", got, want)
	}
	for _, name := range []string{"stripefs_mdt_pebble_wal_bytes_written_total", "stripefs_mdt_pebble_block_cache_hits_total",
		"stripefs_mdt_store_failed", "stripefs_rpc_server_inflight_requests"} {
		if after[name] == nil {
			t.Errorf("mdt0 has no %s", name)
		}
	}
	if got, want := sample(after, "stripefs_mdt_ldlm_granted_total", nil), float64(snap.Counter("mdt0", "ldlm_granted")); got > want || got == 0 {
		t.Errorf("mdt0 ldlm_granted: metrics %v, stripefs stats %v a moment later", got, want)
	}

	// OST0: the writes are there, with the disk's figures.
	ost := scrape(t, ost0)
	if got := sample(ost, "stripefs_rpc_server_latency_seconds", map[string]string{"method": "ost_write", "target": "OST0000"}); got < n {
		t.Errorf("ost0 write latency count %v after %d files of 64 KiB", got, n)
	}
	if sample(ost, "stripefs_ost_space_used_bytes", nil) < n*64<<10 {
		t.Errorf("ost0 space used %v", sample(ost, "stripefs_ost_space_used_bytes", nil))
	}

	// The mount: its calls to each target, as stripefs stats counts them.
	cl := scrape(t, mount)
	if got, want := sample(cl, "stripefs_rpc_client_requests_total", create), float64(clientCalls(snap, "create")); got != want || got < n {
		t.Errorf("mount creates: metrics %v, stripefs stats %v", got, want)
	}
	if got := sample(cl, "stripefs_rpc_client_latency_seconds", map[string]string{"method": "create", "target": "MDT0000"}) +
		sample(cl, "stripefs_rpc_client_latency_seconds", map[string]string{"method": "create", "target": "MDT0001"}); got < n {
		t.Errorf("mount create latency count %v", got)
	}
	if cl["stripefs_client_dirty_bytes"] == nil || cl["go_goroutines"] == nil {
		t.Error("the mount lacks its dirty bytes or the Go runtime's metrics")
	}

	// The gateway: a client of its own, with the NFS counters.
	gw := scrape(t, nfsMetrics)
	for _, name := range []string{"stripefs_client_nfs_commits_total", "stripefs_client_dirty_bytes"} {
		if gw[name] == nil {
			t.Errorf("the NFS gateway has no %s", name)
		}
	}

	// Every metric the Grafana dashboard plots is served by someone.
	dash, err := os.ReadFile("../deploy/grafana/stripefs.json")
	must(t, err)
	for _, name := range metricRE.FindAllString(string(dash), -1) {
		name = strings.TrimSuffix(name, "_bucket")
		if after[name] == nil && ost[name] == nil && cl[name] == nil && gw[name] == nil {
			t.Errorf("the dashboard plots %s, which nothing serves", name)
		}
	}
}

var metricRE = regexp.MustCompile(`stripefs_[a-z0-9_]+`)

// clientCalls is the mount's own count of calls of method.
func clientCalls(s *stats.Snapshot, method string) int64 {
	for _, m := range s.Client.Methods {
		if m.Name == method {
			return m.Calls
		}
	}
	return 0
}
