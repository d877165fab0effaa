package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// TakeoverConfig is the takeover benchmark: a read loop and a write loop
// on a mount while its daemon is handed to a new process Takeovers
// times, a Gap apart (stripefs mount --takeover, which Takeover runs).
type TakeoverConfig struct {
	Mount     string        `json:"mount"`
	Takeovers int           `json:"takeovers"`
	Gap       time.Duration `json:"gap_ns"`
	Size      int64         `json:"file_bytes"`
	Block     int           `json:"block_bytes"`
	// Takeover hands the mount over once and returns when the new daemon
	// serves it.
	Takeover func(ctx context.Context) error `json:"-"`
}

// TakeoverResult is one run: how long each takeover command took, and
// the pauses the loops saw: the slowest call of each loop while
// takeovers happened, against the slowest in as long a time before the
// first (the machine's own noise).
type TakeoverResult struct {
	Benchmark      string         `json:"benchmark"`
	Time           time.Time      `json:"time"`
	Config         TakeoverConfig `json:"config"`
	TakeoverMs     []float64      `json:"takeover_ms"`
	ReadMaxMs      float64        `json:"read_max_ms"`
	WriteMaxMs     float64        `json:"write_max_ms"`
	ReadMaxQuietMs float64        `json:"read_max_quiet_ms"`
	WriteMaxQuiet  float64        `json:"write_max_quiet_ms"`
	ReadP99Us      float64        `json:"read_p99_us"`
	WriteP99Us     float64        `json:"write_p99_us"`
	Reads          int            `json:"reads"`
	Writes         int            `json:"writes"`
}

// loopStats are one loop's call latencies, before and during the
// takeovers.
type loopStats struct {
	mu            sync.Mutex
	quiet, during []time.Duration
	err           error
	calls         int
}

func (s *loopStats) note(d time.Duration, during bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if during {
		s.during = append(s.during, d)
	} else {
		s.quiet = append(s.quiet, d)
	}
}

func maxMs(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	return float64(slices.Max(ds).Microseconds()) / 1000
}

func p99Us(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)*99/100].Microseconds())
}

// Takeover runs the benchmark. Any error a loop sees fails it: a
// takeover must not show one.
func Takeover(ctx context.Context, c TakeoverConfig) (*TakeoverResult, error) {
	switch {
	case c.Mount == "" || c.Takeover == nil:
		return nil, errors.New("takeover: a mount is needed")
	case c.Takeovers < 1 || c.Takeovers > 1000 || c.Block < 512 || c.Size < int64(c.Block) || c.Gap < 0:
		return nil, fmt.Errorf("takeover: takeovers 1 to 1000, a block of at least 512 bytes and a file of at least one block")
	}
	dir, err := os.MkdirTemp(c.Mount, ".bench-takeover-")
	if err != nil {
		return nil, fmt.Errorf("takeover: %w", err)
	}
	defer os.RemoveAll(dir)
	block := make([]byte, c.Block)
	for i := range block {
		block[i] = byte(i * 7)
	}
	rpath, wpath := filepath.Join(dir, "read"), filepath.Join(dir, "write")
	rf, err := os.Create(rpath)
	if err != nil {
		return nil, fmt.Errorf("takeover: %w", err)
	}
	defer rf.Close()
	for off := int64(0); off < c.Size; off += int64(c.Block) {
		if _, err := rf.WriteAt(block, off); err != nil {
			return nil, fmt.Errorf("takeover: %w", err)
		}
	}
	wf, err := os.Create(wpath)
	if err != nil {
		return nil, fmt.Errorf("takeover: %w", err)
	}
	defer wf.Close()

	var during sync.Mutex
	takingOver := false
	phase := func() bool { during.Lock(); defer during.Unlock(); return takingOver }
	var reads, writes loopStats
	stop := make(chan struct{})
	var wg sync.WaitGroup
	loop := func(s *loopStats, call func(off int64) error) {
		defer wg.Done()
		buf := int64(c.Block)
		for off := int64(0); ; off = (off + buf) % (c.Size - c.Size%buf) {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			if err := call(off); err != nil {
				s.mu.Lock()
				s.err = fmt.Errorf("at %d: %w", off, err)
				s.mu.Unlock()
				return
			}
			s.note(time.Since(t0), phase())
		}
	}
	rbuf := make([]byte, c.Block)
	wg.Add(2)
	go loop(&reads, func(off int64) error {
		n, err := rf.ReadAt(rbuf, off)
		if err == nil && n != len(rbuf) {
			err = io.ErrUnexpectedEOF
		}
		return err
	})
	go loop(&writes, func(off int64) error { _, err := wf.WriteAt(block, off); return err })

	res := &TakeoverResult{Benchmark: "takeover", Config: c}
	quietFor := time.Duration(c.Takeovers) * c.Gap
	var runErr error
	select {
	case <-time.After(max(quietFor, time.Second)):
	case <-ctx.Done():
		runErr = ctx.Err()
	}
	if runErr == nil {
		during.Lock()
		takingOver = true
		during.Unlock()
		for i := 0; i < c.Takeovers && runErr == nil; i++ {
			t0 := time.Now()
			if err := c.Takeover(ctx); err != nil {
				runErr = fmt.Errorf("takeover %d: %w", i+1, err)
				break
			}
			res.TakeoverMs = append(res.TakeoverMs, float64(time.Since(t0).Microseconds())/1000)
			select {
			case <-time.After(c.Gap):
			case <-ctx.Done():
				runErr = ctx.Err()
			}
		}
	}
	close(stop)
	wg.Wait()
	if runErr != nil {
		return nil, runErr
	}
	for name, s := range map[string]*loopStats{"read": &reads, "write": &writes} {
		if s.err != nil {
			return nil, fmt.Errorf("takeover: the %s loop failed: %w", name, s.err)
		}
	}
	if err := wf.Sync(); err != nil {
		return nil, fmt.Errorf("takeover: fsync after the takeovers: %w", err)
	}
	res.ReadMaxMs, res.WriteMaxMs = maxMs(reads.during), maxMs(writes.during)
	res.ReadMaxQuietMs, res.WriteMaxQuiet = maxMs(reads.quiet), maxMs(writes.quiet)
	res.ReadP99Us, res.WriteP99Us = p99Us(reads.during), p99Us(writes.during)
	res.Reads, res.Writes = reads.calls, writes.calls
	return res, nil
}

// WriteJSON writes the result as one JSON object.
func (r *TakeoverResult) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteTable prints the result for people.
func (r *TakeoverResult) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "takeover: %d takeovers of %s, %v apart: each took %v ms\n", r.Config.Takeovers, r.Config.Mount, r.Config.Gap, r.TakeoverMs)
	fmt.Fprintf(w, "takeover: read loop (%d calls of %d bytes): slowest %.1f ms during the takeovers, %.1f ms before them; p99 %.0f us\n",
		r.Reads, r.Config.Block, r.ReadMaxMs, r.ReadMaxQuietMs, r.ReadP99Us)
	fmt.Fprintf(w, "takeover: write loop (%d calls): slowest %.1f ms during the takeovers, %.1f ms before them; p99 %.0f us\n",
		r.Writes, r.WriteMaxMs, r.WriteMaxQuiet, r.WriteP99Us)
	return nil
}
