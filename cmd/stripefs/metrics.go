package main

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/spf13/pflag"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/metrics"
	"github.com/stripefs/stripefs/nfsexport"
	"github.com/stripefs/stripefs/rpc"
)

// The process's Prometheus metrics (--metrics ADDR on mds, ost, mount,
// nfs and up): one registry whatever runs in the process, served once.
var (
	metricsAddr string
	metricsOnce sync.Once
	metricsReg  *metrics.Registry
)

func metricsFlag(f *pflag.FlagSet) {
	f.StringVar(&metricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464; port 0 picks one, printed)")
}

// procMetrics is the process's registry, served on --metrics at first
// use; nil without --metrics.
func procMetrics() *metrics.Registry {
	if metricsAddr == "" {
		return nil
	}
	metricsOnce.Do(func() {
		reg := metrics.New()
		addr, err := reg.Serve(metricsAddr)
		if err != nil {
			slog.Warn(fmt.Sprintf("%v: running without metrics", err), "addr", metricsAddr)
			return
		}
		fmt.Printf("metrics on http://%s/metrics\n", addr)
		metricsReg = reg
	})
	return metricsReg
}

// clientMetrics is a client library instance as metrics show it; extra
// adds a frontend's own counters.
type clientMetrics struct {
	c     *fs.Client
	extra func() []metrics.Counter
}

func (m clientMetrics) TargetStats() map[string]*rpc.Stats { return m.c.TargetStats() }
func (m clientMetrics) Counters() []metrics.Counter {
	var out []metrics.Counter
	for _, k := range m.c.Counters() {
		out = append(out, metrics.Counter{Name: k.Name, Value: k.Value})
	}
	if m.extra != nil {
		out = append(out, m.extra()...)
	}
	return out
}

// gatewayCounters are the NFS gateway's own counters.
func gatewayCounters(g *nfsexport.Gateway) func() []metrics.Counter {
	return func() []metrics.Counter {
		st := g.Stats()
		return []metrics.Counter{
			{Name: "nfs_unstable_writes", Value: st.UnstableWrites}, {Name: "nfs_stable_writes", Value: st.StableWrites},
			{Name: "nfs_commits", Value: st.Commits}, {Name: "nfs_sync_errors", Value: st.SyncErrors},
			{Name: "nfs_clients_refused", Value: st.Refused},
		}
	}
}
