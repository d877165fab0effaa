// Package diskspace is a target's view of the disk under its data: what
// it keeps back so that deletes, truncates, recovery and its own database
// always have room, and what is left to give out.
package diskspace

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// MinReserve is kept back whatever the share: room for a Pebble
// database to flush its memtables, compact and write its WAL while
// deletes and recovery run on a disk that is otherwise full.
const MinReserve = 16 << 20

// DefaultShare is the share of the filesystem a target keeps back by
// default.
const DefaultShare = 0.02

// Reserve is what a target keeps back of the filesystem its data is on:
// Share of its size, at least MinReserve.
type Reserve struct{ Share float64 }

// Default is the reserve of a target started without --reserve.
var Default = Reserve{Share: DefaultShare}

// Of is the bytes kept back of a filesystem of total bytes.
func (r Reserve) Of(total uint64) uint64 {
	return max(uint64(float64(total)*r.Share), MinReserve)
}

// Usable is what a target may still fill in dir: the bytes available to
// unprivileged writers beyond the reserve.
func (r Reserve) Usable(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	avail, total := st.Bavail*uint64(st.Bsize), st.Blocks*uint64(st.Bsize)
	keep := r.Of(total)
	if avail <= keep {
		return 0, nil
	}
	return avail - keep, nil
}

// String is the share as a percentage, as --reserve takes it.
func (r Reserve) String() string {
	return strconv.FormatFloat(r.Share*100, 'f', -1, 64) + "%"
}

// Set parses "PCT%" (0 to 50), for a flag.
func (r *Reserve) Set(s string) error {
	v, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
	f, err := strconv.ParseFloat(v, 64)
	if !ok || err != nil || f < 0 || f > 50 {
		return fmt.Errorf("reserve %q: want a share of the disk such as 2%% (0%% to 50%%; %d MiB are kept back whatever it says)", s, MinReserve>>20)
	}
	r.Share = f / 100
	return nil
}

// Type names the flag's value in help.
func (r *Reserve) Type() string { return "percent" }
