package fs

import (
	"sync"

	"github.com/stripefs/stripefs/proto"
)

// closedSizes remembers, for the last files released, the size and mtime
// their release reported and when (attrEpoch). A reply to a request sent
// before that report landed (a chmod racing the release's close, which
// carries a small file's data and size: closewrite.go) does not know
// them; overlay lays them over it as it does for an open file, or the
// kernel would keep the older size.
type closedSizes struct {
	mu   sync.Mutex
	last recent[proto.FID, reportedSize]
}

// closedSizesKept bounds the files remembered: a request older than the
// last this many releases is long answered.
const closedSizesKept = 4096

type reportedSize struct {
	size  uint64
	mtime int64
	epoch uint64
	cut   uint64 // the epoch of the state's last truncate (layOver)
}

// note remembers what fid's last release reported at epoch.
func (cs *closedSizes) note(fid proto.FID, r reportedSize) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.last.m == nil {
		cs.last = newRecent[proto.FID, reportedSize](closedSizesKept)
	}
	cs.last.put(fid, r)
}

// after returns what fid's release reported, if it landed after stamp.
func (cs *closedSizes) after(fid proto.FID, stamp uint64) (reportedSize, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	r, ok := cs.last.get(fid)
	return r, ok && r.epoch > stamp
}
