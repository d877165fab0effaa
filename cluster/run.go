package cluster

import (
	"net"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/internal/diskspace"
	"github.com/stripefs/stripefs/internal/storeguard"
	"github.com/stripefs/stripefs/mds"
	"github.com/stripefs/stripefs/metrics"
	"github.com/stripefs/stripefs/ost"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// reopenRoom is the free space a failed store waits for before it is
// reopened: enough for Pebble to write a new WAL and manifest and flush;
// the target's own reserve then keeps new data out until there is more.
const reopenRoom = diskspace.MinReserve / 2

// RunMDT keeps m, serving on addr, serving across failures of its
// database (storeguard.Runner): it is reopened with cfg on the same
// address once its disk has room.
func RunMDT(cfg mds.Config, m *mds.MDT, addr string) *storeguard.Runner[*mds.MDT] {
	return storeguard.Run(m.Name(), m,
		func() (net.Listener, error) { return rpc.Listen(addr) },
		func(net.Listener) (*mds.MDT, error) { return mds.Open(cfg) },
		func() bool { return cfg.FS != nil || storeguard.HasRoom(cfg.DataDir, reopenRoom) })
}

// RunOST does for an OST what RunMDT does for an MDT. A mount in this
// process may read the objects of the OST serving on each listener
// directly (rpc.SetLocal), as at the start.
func RunOST(cfg ost.Config, o *ost.OST, addr string) *storeguard.Runner[*ost.OST] {
	return storeguard.Run(o.Name(), o,
		func() (net.Listener, error) { return rpc.Listen(addr) },
		func(l net.Listener) (*ost.OST, error) {
			o, err := ost.Open(cfg)
			if err == nil {
				rpc.SetLocal(l, o)
			}
			return o, err
		},
		func() bool {
			return cfg.IndexFS != nil || storeguard.HasRoom(cfg.DataDir, reopenRoom)
		})
}

// served is a target as --metrics shows it.
type served struct {
	srv   *rpc.Server
	store interface{ StoreMetrics() *pebble.Metrics }
}

func (s served) RPCStats() *rpc.Stats          { return s.srv.Stats }
func (s served) InFlight() int64               { return s.srv.InFlight() }
func (s served) StoreMetrics() *pebble.Metrics { return s.store.StoreMetrics() }
func (s served) Counters() []metrics.Counter {
	if s.srv.Counters == nil {
		return nil
	}
	return s.srv.Counters()
}

// AddMDT shows the MDT a runner keeps in reg.
func AddMDT(reg *metrics.Registry, index int, r *storeguard.Runner[*mds.MDT]) {
	reg.AddTarget(proto.KindMDT, uint32(index), func() metrics.Target { m := r.Current(); return served{m.Srv, m} })
}

// AddOST shows the OST a runner keeps in reg.
func AddOST(reg *metrics.Registry, index int, r *storeguard.Runner[*ost.OST]) {
	reg.AddTarget(proto.KindOST, uint32(index), func() metrics.Target { o := r.Current(); return served{o.Srv, o} })
}

// AddMetrics shows every target of the cluster in reg.
func (c *Cluster) AddMetrics(reg *metrics.Registry) {
	for i, r := range c.mdts {
		AddMDT(reg, i, r)
	}
	for i, r := range c.osts {
		AddOST(reg, i, r)
	}
}
