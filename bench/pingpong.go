package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/stripefs/stripefs/stats"
)

// PingPongConfig is a lock ping-pong between two mounts: one block of
// one file, written on one mount and read back on the other, then the
// other way, Rounds times. On stripefs every write calls the other
// mount's read lock back and every read the other's write lock: the
// figure is how fast the lock service hands a block between clients.
type PingPongConfig struct {
	A      string `json:"path_a"` // the same file through two mounts
	B      string `json:"path_b"`
	Rounds int    `json:"rounds"`
	Block  int    `json:"block"` // bytes written and read each time
}

// PingPongResult is one run.
type PingPongResult struct {
	Benchmark string         `json:"benchmark"`
	Time      time.Time      `json:"time"`
	Config    PingPongConfig `json:"config"`
	Seconds   float64        `json:"seconds"`
	// RoundTrips is hand-offs there and back per second (a write and a
	// read on each side); Handoff is one write on one mount and the read
	// of it on the other.
	RoundTripsPerSec float64 `json:"round_trips_per_s"`
	HandoffMedianUs  float64 `json:"handoff_median_us"`
	HandoffP99Us     float64 `json:"handoff_p99_us"`
	// Callbacks and CallbackUs are the MDTs' lock callbacks during the
	// run and their mean answer time (stripefs only).
	Callbacks    int64    `json:"lock_callbacks"`
	CallbackUs   float64  `json:"callback_mean_us"`
	CallbackMaxU float64  `json:"callback_max_us"`
	Notes        []string `json:"notes,omitempty"`
}

// PingPong runs the ping-pong.
func PingPong(ctx context.Context, c PingPongConfig) (*PingPongResult, error) {
	switch {
	case c.A == "" || c.B == "":
		return nil, errors.New("pingpong: two paths to one file are needed, one per mount")
	case c.Rounds < 1 || c.Rounds > 10_000_000:
		return nil, fmt.Errorf("pingpong: rounds must be 1 to 10000000, got %d", c.Rounds)
	case c.Block < 8 || c.Block > 16<<20:
		return nil, fmt.Errorf("pingpong: block must be 8 bytes to 16 MiB, got %d", c.Block)
	}
	fa, err := os.OpenFile(c.A, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pingpong: %w", err)
	}
	defer fa.Close()
	defer os.Remove(c.A)
	fb, err := os.OpenFile(c.B, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("pingpong: %s (the same file through the second mount): %w", c.B, err)
	}
	defer fb.Close()
	res := &PingPongResult{Benchmark: "pingpong", Config: c}
	before := serverSnap(ctx, filepath.Dir(c.A))
	out, in := make([]byte, c.Block), make([]byte, c.Block)
	hand := make([]time.Duration, 0, 2*c.Rounds)
	start := time.Now()
	for i := range 2 * c.Rounds {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		w, r := fa, fb
		if i%2 == 1 {
			w, r = fb, fa
		}
		t0 := time.Now()
		binary.LittleEndian.PutUint64(out, uint64(i)+1)
		if _, err := w.WriteAt(out, 0); err != nil {
			return nil, fmt.Errorf("pingpong: write %d: %w", i, err)
		}
		if _, err := r.ReadAt(in, 0); err != nil && err != io.EOF {
			return nil, fmt.Errorf("pingpong: read %d: %w", i, err)
		}
		hand = append(hand, time.Since(t0))
		if got := binary.LittleEndian.Uint64(in); got != uint64(i)+1 {
			return nil, fmt.Errorf("pingpong: %w: hand-off %d read %d from the other mount, not what it wrote", ErrCorrupt, i, got)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.RoundTripsPerSec = float64(c.Rounds) / res.Seconds
	slices.Sort(hand)
	res.HandoffMedianUs = float64(hand[len(hand)/2].Microseconds())
	res.HandoffP99Us = float64(hand[len(hand)*99/100].Microseconds())
	if after := serverSnap(ctx, filepath.Dir(c.A)); before != nil && after != nil {
		d := after.Sub(before)
		res.Callbacks = d.Counter("mdt", "ldlm_callbacks_sent")
		if res.Callbacks > 0 {
			res.CallbackUs = float64(d.Counter("mdt", "ldlm_callback_wait_us_total")) / float64(res.Callbacks)
		}
		for _, t := range after.Targets {
			if v := t.Counters["ldlm_callback_wait_us_max"]; float64(v) > res.CallbackMaxU {
				res.CallbackMaxU = float64(v)
			}
		}
	} else {
		res.Notes = append(res.Notes, "no stripefs server counters")
	}
	return res, nil
}

func serverSnap(ctx context.Context, dir string) *stats.Snapshot {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := stats.FromMount(ctx, dir)
	if err != nil {
		return nil
	}
	return s
}

// WriteJSON writes the result as one JSON object.
func (r *PingPongResult) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteTable prints the result for people.
func (r *PingPongResult) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "pingpong: %d-byte block of %s, written and read back across two mounts, %d round trips\n",
		r.Config.Block, r.Config.A, r.Config.Rounds)
	fmt.Fprintf(w, "round trips/s %.0f; hand-off median %.0f us, p99 %.0f us\n", r.RoundTripsPerSec, r.HandoffMedianUs, r.HandoffP99Us)
	if r.Callbacks > 0 {
		fmt.Fprintf(w, "lock callbacks %d (%.1f per round trip), mean answer %.0f us, longest since start %.0f us\n",
			r.Callbacks, float64(r.Callbacks)/float64(r.Config.Rounds), r.CallbackUs, r.CallbackMaxU)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
