package mds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/wire"
)

// mgs is the management service on MDT0: the cluster map of targets and
// their addresses, kept in MDT0's database so it survives restarts.
type mgs struct {
	m   *MDT
	mu  sync.Mutex
	cfg proto.Config
}

func openMGS(m *MDT) (*mgs, error) {
	g := &mgs{m: m}
	v, closer, err := m.db.Get(keyConfig)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		g.cfg = proto.Config{FSName: m.cfg.FSName, Default: proto.Layout{
			StripeSize: proto.DefaultStripeSize, StripeCount: proto.DefaultStripeCount, FirstOST: -1}}
	case err != nil:
		return nil, fmt.Errorf("mgs: read cluster map: %w", err)
	default:
		err = wire.Unmarshal(v, &g.cfg)
		closer.Close()
		if err != nil {
			return nil, fmt.Errorf("mgs: corrupt cluster map: %w", err)
		}
	}
	if m.cfg.Addr != "" {
		if err := g.register(proto.Target{Kind: proto.KindMDT, Index: 0, Addr: m.cfg.Addr}); err != nil {
			return nil, err
		}
	}
	rpc.HandleFunc(m.Srv, proto.GConfig, func(ctx context.Context, _ *proto.Empty) (any, error) {
		return g.get(), nil
	})
	rpc.HandleFunc(m.Srv, proto.GRegister, func(ctx context.Context, r *proto.RegisterReq) (any, error) {
		return &proto.Empty{}, g.register(r.Target)
	})
	return g, nil
}

func (g *mgs) get() *proto.Config {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.cfg
	c.MDTs = append([]proto.Target(nil), c.MDTs...)
	c.OSTs = append([]proto.Target(nil), c.OSTs...)
	return &c
}

// register adds a target or updates its address (a restarted server may
// come back on another port).
func (g *mgs) register(t proto.Target) error {
	if t.Addr == "" {
		return fmt.Errorf("mgs: register %s%d without an address: %w", t.Kind, t.Index, syscall.EINVAL)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var list *[]proto.Target
	switch t.Kind {
	case proto.KindMDT:
		list = &g.cfg.MDTs
		if t.Index >= proto.MaxMDTs {
			return fmt.Errorf("mgs: mdt index %d out of range: %w", t.Index, syscall.EINVAL)
		}
	case proto.KindOST:
		list = &g.cfg.OSTs
		if t.Index >= 65536 {
			return fmt.Errorf("mgs: ost index %d out of range: %w", t.Index, syscall.EINVAL)
		}
	default:
		return fmt.Errorf("mgs: unknown target kind %q: %w", t.Kind, syscall.EINVAL)
	}
	for i := range *list {
		if (*list)[i].Index == t.Index {
			if (*list)[i].Addr == t.Addr {
				return nil
			}
			(*list)[i].Addr = t.Addr
			return g.save()
		}
	}
	*list = append(*list, t)
	sort.Slice(*list, func(i, j int) bool { return (*list)[i].Index < (*list)[j].Index })
	slog.Info(fmt.Sprintf("mgs: %s%d registered at %s", t.Kind, t.Index, t.Addr),
		"target", proto.TargetName(proto.KindMDT, uint32(g.m.cfg.Index)), "registered", proto.TargetName(t.Kind, t.Index), "addr", t.Addr)
	return g.save()
}

func (g *mgs) save() error {
	b := g.m.db.NewBatch()
	b.Set(keyConfig, encode(&g.cfg), nil)
	return g.m.commit(b, true)
}

// Register announces a target to the MGS at addr, retrying while the MGS
// starts.
func Register(ctx context.Context, mgsAddr string, t proto.Target) error {
	c := rpc.NewClient(mgsAddr, fmt.Sprintf("%s%d", t.Kind, t.Index))
	c.Role = rpc.RoleServer
	defer c.Close()
	_, err := rpc.Invoke[proto.Empty](ctx, c, proto.GRegister, &proto.RegisterReq{Target: t})
	if err != nil {
		return fmt.Errorf("register %s%d with mgs %s: %w", t.Kind, t.Index, mgsAddr, err)
	}
	return nil
}
