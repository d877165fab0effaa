// Package cluster runs a whole filesystem's servers in one process, each
// on its own TCP address and talking the same RPC as separate processes
// would: what `stripefs up` and the benchmarks start.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/stripefs/stripefs/internal/storeguard"
	"github.com/stripefs/stripefs/mds"
	"github.com/stripefs/stripefs/mds/mgs"
	"github.com/stripefs/stripefs/ost"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Spec describes a cluster on one host.
type Spec struct {
	DataDir string
	MDTs    int
	OSTs    int
	// Host is the address servers listen on; 127.0.0.1 when empty.
	Host string
	// InProc runs the servers on the in-process transport instead of TCP
	// (for tests): same frames, no sockets.
	InProc bool
	// Unix puts the OSTs on Unix sockets in DataDir: file data then moves
	// without the TCP stack, for a client on this same host.
	Unix bool
	// ClientWindow is the MDTs' recovery window for known clients (zero:
	// mds.DefaultClientWindow).
	ClientWindow time.Duration
	// DoMInline is the MDTs' mds.Config.DoMInline.
	DoMInline int
}

// Cluster is a running set of servers.
type Cluster struct {
	MGS  string // MDT0's address
	Spec Spec
	// Each target runs under a runner that reopens it if its store fails.
	mdts []*storeguard.Runner[*mds.MDT]
	osts []*storeguard.Runner[*ost.OST]

	closeOnce sync.Once // Close may come twice (a takeover of up's mount stops the servers first)
}

// saved is what a data directory remembers of its cluster: the shape and
// the addresses, reused on restart so clients and exports keep working.
type saved struct {
	MDTs, OSTs int
	Addrs      map[string]string
}

// Start opens or creates the cluster in spec.DataDir. A data directory
// keeps the shape it was created with; asking for another is an error
// rather than a silently different filesystem.
func Start(ctx context.Context, spec Spec) (*Cluster, error) {
	if spec.Host == "" {
		spec.Host = "127.0.0.1"
	}
	if err := os.MkdirAll(spec.DataDir, 0o755); err != nil {
		return nil, err
	}
	statePath := filepath.Join(spec.DataDir, "cluster.json")
	var st saved
	if b, err := os.ReadFile(statePath); err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("%s: %w", statePath, err)
		}
		if (spec.MDTs != 0 && spec.MDTs != st.MDTs) || (spec.OSTs != 0 && spec.OSTs != st.OSTs) {
			return nil, fmt.Errorf("%s holds a filesystem of %d MDTs and %d OSTs; asked for %d and %d",
				spec.DataDir, st.MDTs, st.OSTs, spec.MDTs, spec.OSTs)
		}
		spec.MDTs, spec.OSTs = st.MDTs, st.OSTs
	} else if errors.Is(err, os.ErrNotExist) {
		st = saved{MDTs: spec.MDTs, OSTs: spec.OSTs}
	} else {
		return nil, err
	}
	if spec.MDTs < 1 || spec.MDTs > proto.MaxMDTs || spec.OSTs < 1 || spec.OSTs > 1024 {
		return nil, fmt.Errorf("cluster: need 1-%d MDTs and 1-1024 OSTs, got %d and %d", proto.MaxMDTs, spec.MDTs, spec.OSTs)
	}
	if st.Addrs == nil {
		st.Addrs = map[string]string{}
	}
	c := &Cluster{Spec: spec}
	listen := func(name string) (net.Listener, error) {
		if a := st.Addrs[name]; a != "" && !spec.InProc && !strings.HasPrefix(a, "unix:") {
			if l, err := rpc.Listen(a); err == nil {
				return l, nil
			}
		}
		addr := net.JoinHostPort(spec.Host, "0")
		switch {
		case spec.InProc:
			addr = "inproc:" + spec.DataDir + "/" + name
		case spec.Unix && strings.HasPrefix(name, "ost"):
			addr = "unix:" + filepath.Join(spec.DataDir, name+".sock")
		}
		l, err := rpc.Listen(addr)
		if err == nil {
			st.Addrs[name] = l.Addr().String()
		}
		return l, err
	}
	for i := 0; i < spec.MDTs; i++ {
		name := fmt.Sprintf("mdt%d", i)
		l, err := listen(name)
		if err != nil {
			c.Close()
			return nil, err
		}
		if i == 0 {
			c.MGS = l.Addr().String()
		}
		cfg := mds.Config{Index: i, DataDir: filepath.Join(spec.DataDir, name), MGS: c.MGS, Addr: l.Addr().String(),
			ClientWindow: spec.ClientWindow, DoMInline: spec.DoMInline}
		m, err := mds.Open(cfg)
		if err != nil {
			l.Close()
			c.Close()
			return nil, err
		}
		go m.Serve(l)
		c.mdts = append(c.mdts, RunMDT(cfg, m, l.Addr().String()))
		if i > 0 {
			if err := mgs.Register(ctx, c.MGS, proto.Target{Kind: proto.KindMDT, Index: uint32(i), Addr: l.Addr().String()}); err != nil {
				c.Close()
				return nil, err
			}
		}
	}
	for i := 0; i < spec.OSTs; i++ {
		name := fmt.Sprintf("ost%d", i)
		l, err := listen(name)
		if err != nil {
			c.Close()
			return nil, err
		}
		cfg := ost.Config{Index: i, DataDir: filepath.Join(spec.DataDir, name), MGS: c.MGS}
		o, err := ost.Open(cfg)
		if err != nil {
			l.Close()
			c.Close()
			return nil, err
		}
		rpc.SetLocal(l, o) // a mount in this process may read its objects directly
		go o.Serve(l)
		c.osts = append(c.osts, RunOST(cfg, o, l.Addr().String()))
		if err := mgs.Register(ctx, c.MGS, proto.Target{Kind: proto.KindOST, Index: uint32(i), Addr: l.Addr().String()}); err != nil {
			c.Close()
			return nil, err
		}
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(statePath, b, 0o644); err != nil {
		slog.Warn(fmt.Sprintf("cluster: save %s: %v", statePath, err), "path", statePath)
	}
	return c, nil
}

// WrapMDT puts f around MDT i's handler of method m, as it runs now (a
// reopen after a store failure starts without it): tests delay or fail
// one kind of request there.
func (c *Cluster) WrapMDT(i int, m uint16, f func(rpc.Handler) rpc.Handler) {
	c.mdts[i].Current().Srv.Wrap(m, f)
}

// Close stops every server; MDTs commit before closing.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		for _, o := range c.osts {
			o.Close()
		}
		for i := len(c.mdts) - 1; i >= 0; i-- {
			c.mdts[i].Close()
		}
	})
}
