package mgs

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/stripefs/stripefs/proto"
)

// memStore is a Store in memory that counts saves and can fail them.
type memStore struct {
	cfg   *proto.Config
	saves int
	fail  error
}

func (s *memStore) Load() (proto.Config, bool, error) {
	if s.cfg == nil {
		return proto.Config{}, false, nil
	}
	return *s.cfg, true, nil
}

func (s *memStore) Save(c *proto.Config) error {
	if s.fail != nil {
		return s.fail
	}
	s.saves++
	cp := *c
	cp.MDTs = append([]proto.Target(nil), c.MDTs...)
	cp.OSTs = append([]proto.Target(nil), c.OSTs...)
	s.cfg = &cp
	return nil
}

func TestRegister(t *testing.T) {
	store := &memStore{}
	s, err := Open(store, "testfs", "MDT0000")
	if err != nil {
		t.Fatal(err)
	}
	ost := func(i uint32, addr string) proto.Target {
		return proto.Target{Kind: proto.KindOST, Index: i, Addr: addr}
	}
	for _, c := range []struct {
		name  string
		t     proto.Target
		err   error
		saves int // after the call
	}{
		{"first OST", ost(3, "h:1"), nil, 1},
		{"second, lower index", ost(1, "h:2"), nil, 2},
		{"same address again: nothing to save", ost(3, "h:1"), nil, 2},
		{"restarted on another port", ost(3, "h:9"), nil, 3},
		{"an MDT", proto.Target{Kind: proto.KindMDT, Index: 1, Addr: "m:1"}, nil, 4},
		{"no address", ost(4, ""), syscall.EINVAL, 4},
		{"MDT index out of range", proto.Target{Kind: proto.KindMDT, Index: proto.MaxMDTs, Addr: "m:2"}, syscall.EINVAL, 4},
		{"OST index out of range", ost(65536, "h:3"), syscall.EINVAL, 4},
		{"unknown kind", proto.Target{Kind: "xyz", Index: 0, Addr: "x:1"}, syscall.EINVAL, 4},
	} {
		err := s.Register(c.t)
		if !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
		if store.saves != c.saves {
			t.Errorf("%s: %d saves, want %d", c.name, store.saves, c.saves)
		}
	}
	cfg, _ := s.Config(context.Background())
	if cfg.FSName != "testfs" || cfg.Default.StripeSize != proto.DefaultStripeSize || len(cfg.OSTs) != 2 ||
		cfg.OSTs[0] != ost(1, "h:2") || cfg.OSTs[1] != ost(3, "h:9") || len(cfg.MDTs) != 1 {
		t.Fatalf("map %+v", cfg)
	}
	cfg.OSTs[0].Addr = "changed by a caller"
	if again, _ := s.Config(context.Background()); again.OSTs[0].Addr != "h:2" {
		t.Fatal("a caller's copy of the map changed the service's")
	}

	// A restart reads the saved map; a failed save is the caller's error.
	s, err = Open(store, "ignored", "MDT0000")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _ := s.Config(context.Background()); cfg.FSName != "testfs" || len(cfg.OSTs) != 2 {
		t.Fatalf("map after restart %+v", cfg)
	}
	store.fail = syscall.ENOSPC
	if err := s.Register(ost(7, "h:7")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("register with a failing store: %v", err)
	}
	if cfg, _ := s.Config(context.Background()); len(cfg.OSTs) != 2 {
		t.Fatalf("a map that was not saved is served: %+v", cfg.OSTs)
	}
}
