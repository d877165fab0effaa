package cluster

import (
	"net"

	"github.com/stripefs/stripefs/internal/diskspace"
	"github.com/stripefs/stripefs/internal/storeguard"
	"github.com/stripefs/stripefs/mds"
	"github.com/stripefs/stripefs/ost"
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
