// Package targets is how the tools that ask every server of a filesystem
// something (stats, quota, df) reach them: all at once, each over a
// client of its own, a dead one given up on after a few seconds.
package targets

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Target is one server of the cluster map.
type Target struct {
	Kind  string // proto.KindMDT or proto.KindOST
	Index uint32
	Addr  string
}

// Name is the target's name in the tools' output: mdt0, ost3.
func (t Target) Name() string { return fmt.Sprintf("%s%d", t.Kind, t.Index) }

// Of lists the MDTs, then the OSTs, of a cluster map.
func Of(cfg *proto.Config) []Target {
	var ts []Target
	for _, t := range cfg.MDTs {
		ts = append(ts, Target{proto.KindMDT, t.Index, t.Addr})
	}
	for _, t := range cfg.OSTs {
		ts = append(ts, Target{proto.KindOST, t.Index, t.Addr})
	}
	return ts
}

// AskEach calls ask for every target at once, each over a client of its
// own (named name) that stops redialing a dead target after retryFor,
// and returns the error of each (nil where ask succeeded).
func AskEach(ctx context.Context, ts []Target, name string, retryFor time.Duration, ask func(ctx context.Context, c *rpc.Client, i int) error) []error {
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := rpc.NewClient(t.Addr, name)
			c.RetryFor = retryFor
			defer c.Close()
			errs[i] = ask(ctx, c, i)
		}()
	}
	wg.Wait()
	return errs
}

// Map asks the MGS at mgs for the cluster map, over a client named name
// that stops redialing after retryFor (the client's default for 0).
func Map(ctx context.Context, mgs, name string, retryFor time.Duration) (*proto.Config, error) {
	c := rpc.NewClient(mgs, name)
	if retryFor > 0 {
		c.RetryFor = retryFor
	}
	defer c.Close()
	cfg, err := rpc.Invoke[proto.Config](ctx, c, proto.GConfig, &proto.Empty{})
	if err != nil {
		return nil, fmt.Errorf("cluster map from %s: %w", mgs, err)
	}
	return cfg, nil
}
