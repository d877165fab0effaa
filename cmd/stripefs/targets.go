package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// target is one server of the cluster map, as the tools that ask every
// server something (quota, df) see it.
type target struct {
	Kind  string // proto.KindMDT or proto.KindOST
	Index uint32
	Addr  string
}

// Name is the target's name in the tools' output: mdt0, ost3.
func (t target) Name() string { return fmt.Sprintf("%s%d", t.Kind, t.Index) }

// targetsOf lists the MDTs, then the OSTs, of a cluster map.
func targetsOf(cfg *proto.Config) []target {
	var ts []target
	for _, t := range cfg.MDTs {
		ts = append(ts, target{proto.KindMDT, t.Index, t.Addr})
	}
	for _, t := range cfg.OSTs {
		ts = append(ts, target{proto.KindOST, t.Index, t.Addr})
	}
	return ts
}

// askEach calls ask for every target at once, each over a client of its
// own that stops redialing a dead target after retryFor, and returns the
// error of each (nil where ask succeeded).
func askEach(ctx context.Context, ts []target, retryFor time.Duration, ask func(ctx context.Context, c *rpc.Client, i int) error) []error {
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := rpc.NewClient(t.Addr, "stripefs-tool")
			c.RetryFor = retryFor
			defer c.Close()
			errs[i] = ask(ctx, c, i)
		}()
	}
	wg.Wait()
	return errs
}
