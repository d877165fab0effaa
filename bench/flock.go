package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// FlockConfig is the application-lock benchmark: Ops lock/unlock pairs of
// an uncontended fcntl lock on A, and, with B (the same file through
// another mount), Handoffs of one exclusive lock between the two mounts.
type FlockConfig struct {
	A        string `json:"path_a"`
	B        string `json:"path_b,omitempty"`
	Ops      int    `json:"ops"`
	Handoffs int    `json:"handoffs"`
}

// FlockResult is one run.
type FlockResult struct {
	Benchmark string      `json:"benchmark"`
	Time      time.Time   `json:"time"`
	Config    FlockConfig `json:"config"`
	// Uncontended lock+unlock pairs per second on one mount.
	PairsPerSec float64 `json:"uncontended_pairs_per_s"`
	// Contended hand-offs per second between the mounts, and the time
	// from a holder's unlock to the waiter's grant.
	HandoffsPerSec float64 `json:"handoffs_per_s,omitempty"`
	WakeMedianUs   float64 `json:"wake_median_us,omitempty"`
	WakeP99Us      float64 `json:"wake_p99_us,omitempty"`
}

func ofdLock(fd int, typ int16, wait bool) error {
	cmd := unix.F_OFD_SETLK
	if wait {
		cmd = unix.F_OFD_SETLKW
	}
	lk := unix.Flock_t{Type: typ}
	for {
		err := unix.FcntlFlock(uintptr(fd), cmd, &lk)
		if err != unix.EINTR {
			return err
		}
	}
}

// FlockBench runs the benchmark.
func FlockBench(ctx context.Context, c FlockConfig) (*FlockResult, error) {
	switch {
	case c.A == "":
		return nil, errors.New("flock: a path is needed")
	case c.Ops < 1 || c.Ops > 10_000_000 || c.Handoffs < 0 || c.Handoffs > 10_000_000:
		return nil, fmt.Errorf("flock: ops must be 1 to 10000000 and hand-offs 0 to 10000000")
	}
	res := &FlockResult{Benchmark: "flock", Config: c}
	fa, err := unix.Open(c.A, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("flock: %w", err)
	}
	defer os.Remove(c.A)
	defer unix.Close(fa)
	start := time.Now()
	for i := range c.Ops {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lk := unix.Flock_t{Type: unix.F_WRLCK, Start: int64(i % 64), Len: 1}
		if err := unix.FcntlFlock(uintptr(fa), unix.F_SETLK, &lk); err != nil {
			return nil, fmt.Errorf("flock: lock %d: %w", i, err)
		}
		lk.Type = unix.F_UNLCK
		if err := unix.FcntlFlock(uintptr(fa), unix.F_SETLK, &lk); err != nil {
			return nil, fmt.Errorf("flock: unlock %d: %w", i, err)
		}
	}
	res.PairsPerSec = float64(c.Ops) / time.Since(start).Seconds()
	if c.B == "" || c.Handoffs == 0 {
		return res, nil
	}
	fb, err := unix.Open(c.B, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("flock: %s (the same file through the second mount): %w", c.B, err)
	}
	defer unix.Close(fb)
	// Two owners on two mounts take one lock in turn: the waiter asks and
	// blocks on the MDT, the holder unlocks, and the waiter's grant ends
	// the wake-up. The pause that lets the wait reach the MDT first is not
	// counted in the hand-off rate.
	if err := ofdLock(fa, unix.F_WRLCK, true); err != nil {
		return nil, fmt.Errorf("flock: %w", err)
	}
	fds := []int{fa, fb}
	wakes := make([]time.Duration, 0, c.Handoffs)
	const settle = 200 * time.Microsecond
	holder := 0
	begin := time.Now()
	for range c.Handoffs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		waiter := 1 - holder
		granted := make(chan time.Time, 1)
		errc := make(chan error, 1)
		go func() {
			err := ofdLock(fds[waiter], unix.F_WRLCK, true)
			granted <- time.Now()
			errc <- err
		}()
		time.Sleep(settle)
		t0 := time.Now()
		if err := ofdLock(fds[holder], unix.F_UNLCK, false); err != nil {
			return nil, fmt.Errorf("flock: unlock: %w", err)
		}
		g := <-granted
		if err := <-errc; err != nil {
			return nil, fmt.Errorf("flock: hand-off: %w", err)
		}
		wakes = append(wakes, g.Sub(t0))
		holder = waiter
	}
	_ = ofdLock(fds[holder], unix.F_UNLCK, false)
	elapsed := time.Since(begin) - time.Duration(c.Handoffs)*settle
	res.HandoffsPerSec = float64(c.Handoffs) / elapsed.Seconds()
	slices.Sort(wakes)
	if len(wakes) > 0 {
		res.WakeMedianUs = float64(wakes[len(wakes)/2].Microseconds())
		res.WakeP99Us = float64(wakes[len(wakes)*99/100].Microseconds())
	}
	return res, nil
}

// WriteJSON writes the result as one JSON object.
func (r *FlockResult) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteTable prints the result for people.
func (r *FlockResult) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "flock: %d uncontended fcntl lock+unlock pairs on %s: %.0f pairs/s\n", r.Config.Ops, r.Config.A, r.PairsPerSec)
	if r.HandoffsPerSec > 0 {
		fmt.Fprintf(w, "flock: %d hand-offs of one exclusive lock between two mounts: %.0f/s; wake-up (unlock to grant) median %.0f us, p99 %.0f us\n",
			r.Config.Handoffs, r.HandoffsPerSec, r.WakeMedianUs, r.WakeP99Us)
	}
	return nil
}
