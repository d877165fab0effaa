// Package mgs is the management service (Lustre's MGS): the cluster map
// of the filesystem's targets and their addresses, which every client,
// MDT and OST reads at start. Service is the map's owner, run by MDT0
// over MDT0's database (a Store); Client is how the other MDTs read it,
// cached; Register is how a starting server announces its address.
package mgs

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"syscall"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Store keeps the cluster map across restarts.
type Store interface {
	// Load returns the stored map; ok is false when none was stored yet.
	Load() (c proto.Config, ok bool, err error)
	// Save stores c durably before it returns.
	Save(c *proto.Config) error
}

// Source gives the cluster map: a Service on MDT0, a Client elsewhere.
type Source interface {
	Config(ctx context.Context) (*proto.Config, error)
}

// Service owns the cluster map.
type Service struct {
	store Store
	self  string // the hosting target's name, for logs
	mu    sync.Mutex
	cfg   proto.Config // under mu; saved to store before a change is answered
}

// Open loads the map from store, or starts one for a new filesystem
// named fsname with the default layout. self names the hosting target in
// log lines.
func Open(store Store, fsname, self string) (*Service, error) {
	cfg, ok, err := store.Load()
	if err != nil {
		return nil, fmt.Errorf("mgs: read cluster map: %w", err)
	}
	if !ok {
		cfg = proto.Config{FSName: fsname, Default: proto.Layout{
			StripeSize: proto.DefaultStripeSize, StripeCount: proto.DefaultStripeCount, FirstOST: -1}}
	}
	return &Service{store: store, self: self, cfg: cfg}, nil
}

// Serve answers the MGS methods (GConfig, GRegister) on srv.
func (s *Service) Serve(srv *rpc.Server) {
	rpc.HandleFunc(srv, proto.GConfig, func(ctx context.Context, _ *proto.Empty) (any, error) {
		return s.Config(ctx)
	})
	rpc.HandleFunc(srv, proto.GRegister, func(ctx context.Context, r *proto.RegisterReq) (any, error) {
		return &proto.Empty{}, s.Register(r.Target)
	})
}

// Config returns a copy of the map; it never fails.
func (s *Service) Config(context.Context) (*proto.Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cfg
	c.MDTs = append([]proto.Target(nil), c.MDTs...)
	c.OSTs = append([]proto.Target(nil), c.OSTs...)
	return &c, nil
}

// Register adds a target or updates its address (a restarted server may
// come back on another port), durably before it returns; a map that could
// not be saved is not served either.
func (s *Service) Register(t proto.Target) error {
	if t.Addr == "" {
		return fmt.Errorf("mgs: register %s%d without an address: %w", t.Kind, t.Index, syscall.EINVAL)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.cfg
	next.MDTs = append([]proto.Target(nil), s.cfg.MDTs...)
	next.OSTs = append([]proto.Target(nil), s.cfg.OSTs...)
	var list *[]proto.Target
	switch t.Kind {
	case proto.KindMDT:
		list = &next.MDTs
		if t.Index >= proto.MaxMDTs {
			return fmt.Errorf("mgs: mdt index %d out of range: %w", t.Index, syscall.EINVAL)
		}
	case proto.KindOST:
		list = &next.OSTs
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
			return s.save(next)
		}
	}
	*list = append(*list, t)
	sort.Slice(*list, func(i, j int) bool { return (*list)[i].Index < (*list)[j].Index })
	if err := s.save(next); err != nil {
		return err
	}
	slog.Info(fmt.Sprintf("mgs: %s%d registered at %s", t.Kind, t.Index, t.Addr),
		"target", s.self, "registered", proto.TargetName(t.Kind, t.Index), "addr", t.Addr)
	return nil
}

// save stores next and serves it. Called with mu held.
func (s *Service) save(next proto.Config) error {
	if err := s.store.Save(&next); err != nil {
		return fmt.Errorf("mgs: save cluster map: %w", err)
	}
	s.cfg = next
	return nil
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
