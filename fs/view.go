package fs

import (
	"syscall"

	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// View is what ReadView answers: bytes, or a range of a file for the
// frontend to splice into its reply. Its user calls Release once done
// with it.
type View struct {
	// Data holds the bytes when File is 0. They may be a read-ahead
	// chunk's, lent: the user must not write to them.
	Data []byte
	// File, Off and Len name Len bytes of an open file, when File is not
	// 0: an object file of an OST in this process (localObjects).
	File uintptr
	Off  int64
	Len  int

	release func()
	stripe  int // the object's, for a File view (hintAhead)
}

// Size is the number of bytes the view holds.
func (v View) Size() int {
	if v.File != 0 {
		return v.Len
	}
	return len(v.Data)
}

// CopyTo copies the view into p, which holds at least Size bytes.
func (v View) CopyTo(p []byte) (int, error) {
	if v.File == 0 {
		return copy(p, v.Data), nil
	}
	n, err := syscall.Pread(int(v.File), p[:v.Len], v.Off)
	if err == nil && n < v.Len {
		clear(p[n:v.Len]) // cannot happen while the view holds the object; zeros rather than garbage
	}
	return v.Len, err
}

// Release gives back what the view lends.
func (v View) Release() {
	if v.release != nil {
		v.release()
	}
}

// localObjects is what an OST in this process lends its clients
// (ost.OST.LocalRead): the object file itself for a read, so that, under
// stripefs up, the FUSE reply is spliced from the page cache like a
// loopback mount's instead of the bytes crossing an RPC and three copies.
type localObjects interface {
	LocalRead(obj proto.ObjID, off int64, n int) (fd uintptr, release func(), ok bool)
}

// localView answers [off, off+n) of a file from one object of an OST in
// this process, when the range lies in one stripe unit (of an
// erasure-coded file, one data unit: normal reads never touch parity)
// that the object holds in full. Anything else, a lost object included,
// takes the RPC path, which for an erasure-coded file rebuilds what it
// cannot read. st.mu is held.
func (c *Client) localView(st *inodeState, lay proto.Layout, off int64, n int) (View, bool) {
	if c.opts.NoLocalReads || (lay.IsEC() && lay.CheckFile() != nil) {
		return View{}, false
	}
	m := layout.Map(lay, uint64(off), n)
	if len(m) != 1 || m[0].Stripe == layout.NoObject || m[0].Stripe >= len(lay.OSTs) {
		return View{}, false
	}
	ost := lay.OSTs[m[0].Stripe]
	c.mu.RLock()
	r := c.osts[ost]
	c.mu.RUnlock()
	if r == nil {
		return View{}, false
	}
	lo, ok := rpc.Local(r.Addr).(localObjects)
	if !ok {
		return View{}, false
	}
	fd, release, ok := lo.LocalRead(proto.ObjID{FID: st.fid, Stripe: uint32(m[0].Stripe)}, int64(m[0].ObjOff), n)
	if !ok {
		return View{}, false
	}
	c.counters.localReads.Add(1)
	return View{File: fd, Off: int64(m[0].ObjOff), Len: n, release: release, stripe: m[0].Stripe}, true
}
