package fs

import (
	"testing"

	"github.com/stripefs/stripefs/proto"
)

// layOver: this client's size wins over a reply's unless the reply's is
// larger (another client wrote past this one's end), and then too when
// the reply may predate this client's own truncate.
func TestLayOver(t *testing.T) {
	for _, tc := range []struct {
		name              string
		mdtSize, ownSize  uint64
		mdtMtime, ownTime int64
		cut, stamp        uint64
		wantSize          uint64
		wantMtime         int64
	}{
		{"own writes past the reply", 100, 200, 5, 7, 0, 3, 200, 7},
		{"the same size", 200, 200, 9, 7, 0, 3, 200, 7},
		{"another client wrote further", 300, 200, 9, 7, 0, 3, 300, 9},
		{"another client wrote further, own mtime later", 300, 200, 5, 7, 0, 3, 300, 7},
		{"reply older than own truncate", 300, 10, 9, 7, 4, 3, 10, 7},
		{"reply sent after own truncate landed", 300, 10, 9, 7, 4, 4, 300, 9},
	} {
		a := proto.Attr{Size: tc.mdtSize, Mtime: tc.mdtMtime}
		layOver(&a, reportedSize{size: tc.ownSize, mtime: tc.ownTime, cut: tc.cut}, tc.stamp)
		if a.Size != tc.wantSize || a.Mtime != tc.wantMtime {
			t.Errorf("%s: size %d mtime %d, want %d %d", tc.name, a.Size, a.Mtime, tc.wantSize, tc.wantMtime)
		}
	}
}
