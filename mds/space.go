package mds

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/internal/diskspace"
	"github.com/stripefs/stripefs/proto"
)

// The space an MDT keeps back (internal/diskspace). New inodes, entries
// and xattrs are refused with ENOSPC once the disk under the database has
// no more than the reserve left, long before Pebble would fail a commit
// (which it treats as fatal): deletes, renames, recovery and Pebble's own
// flushes and compactions always find room, and the refusals end by
// themselves once space comes back.

// spaceCheckEvery bounds how often the disk is asked: a create storm on a
// nearly full disk overshoots by at most that much of its records, far
// less than the minimum reserve.
const spaceCheckEvery = 100 * time.Millisecond

// leaveReserve is how much must be free beyond the reserve before a full
// MDT takes new names again.
const leaveReserve = diskspace.MinReserve / 4

type spaceGuard struct {
	index   int
	dir     string // "" when the database is not on a disk of its own (tests)
	reserve diskspace.Reserve
	checked atomic.Int64 // unix ns of the last look at the disk
	full    atomic.Bool
	refused atomic.Int64
}

// room fails op with ENOSPC while the disk has no more than the reserve.
func (g *spaceGuard) room(op string, what any) error {
	if g.atReserve() {
		g.refused.Add(1)
		return fmt.Errorf("mdt%d: %s %v: the MDT's disk is down to its reserve: %w", g.index, op, what, syscall.ENOSPC)
	}
	return nil
}

// atReserve reports whether the disk is down to its reserve, looking
// again if the last look is spaceCheckEvery old.
func (g *spaceGuard) atReserve() bool {
	if g.dir == "" {
		return false
	}
	now := time.Now().UnixNano()
	if last := g.checked.Load(); now-last >= int64(spaceCheckEvery) && g.checked.CompareAndSwap(last, now) {
		usable, err := g.reserve.Usable(g.dir)
		// Hysteresis: Pebble's flushes and compactions free and take
		// megabytes as they go, so a disk at the reserve would flap
		// between full and not with every look.
		full := err == nil && (usable == 0 || g.full.Load() && usable < leaveReserve)
		if was := g.full.Swap(full); was != full {
			if full {
				slog.Error(fmt.Sprintf("mdt%d: the disk under %s is down to its reserve (%s, at least %d MiB): new inodes, entries and xattrs get ENOSPC until space comes back", g.index, g.dir, g.reserve, diskspace.MinReserve>>20),
					"target", proto.TargetName(proto.KindMDT, uint32(g.index)))
			} else {
				slog.Info(fmt.Sprintf("mdt%d: space came back under %s: new inodes, entries and xattrs are taken again", g.index, g.dir),
					"target", proto.TargetName(proto.KindMDT, uint32(g.index)))
			}
		}
	}
	return g.full.Load()
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
