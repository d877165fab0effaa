package rpc

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Backoff is the wait between tries of a retry loop: doubling from its
// first delay up to its most, each drawn at random within ±50% of that
// (cenkalti/backoff's exponential schedule). The jitter matters at
// scale: the clients of a restarted server would otherwise all come
// back in the same millisecond, again and again. Not safe for
// concurrent use; each loop has its own.
type Backoff struct {
	b backoff.ExponentialBackOff
}

// NewBackoff returns a schedule that starts near first and grows to
// near most.
func NewBackoff(first, most time.Duration) *Backoff {
	return &Backoff{b: backoff.ExponentialBackOff{InitialInterval: first, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: most}}
}

// Next is the next wait.
func (b *Backoff) Next() time.Duration { return b.b.NextBackOff() }

// Wait sleeps for the next wait, or until ctx ends: then it returns ctx's
// error.
func (b *Backoff) Wait(ctx context.Context) error {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DoResending performs call with c, and sends it again under the same
// XID while it fails because its connection broke before the reply
// (ErrDisconnected: the server restarting) or again says so, for up to
// retryFor, waiting by a Backoff in between. Only for calls the server
// may receive twice: reads, and changes it recognises as resent.
func DoResending(ctx context.Context, c *Client, call *Call, retryFor time.Duration, again func(error) bool) error {
	deadline := time.Now().Add(retryFor)
	wait := NewBackoff(50*time.Millisecond, 500*time.Millisecond)
	for {
		err := c.Do(ctx, call)
		if err == nil || !(errors.Is(err, ErrDisconnected) || again != nil && again(err)) || time.Now().After(deadline) {
			return err
		}
		if err := wait.Wait(ctx); err != nil {
			return err
		}
	}
}
