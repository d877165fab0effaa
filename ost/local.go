package ost

import (
	"syscall"

	"github.com/stripefs/stripefs/proto"
)

// LocalRead lends a client in this process (stripefs up) the object file
// itself for a read of [off, off+n) of obj, so the FUSE reply is spliced
// from the page cache as a loopback mount's is, without the bytes
// crossing the RPC. It lends only what the object holds in full (a hole
// reads as zeros; a range past the object's end is refused, since a
// short splice would look like end of file to the kernel), and holds the
// object's shared lock until release, so that no punch cuts it
// meanwhile. ok is false when the read must take the RPC.
func (o *OST) LocalRead(obj proto.ObjID, off int64, n int) (fd uintptr, release func(), ok bool) {
	if off < 0 || n <= 0 {
		return 0, nil, false
	}
	mu := o.lock(obj)
	mu.RLock()
	of, err := o.get(obj, false)
	if err != nil {
		mu.RUnlock()
		return 0, nil, false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(of.f.Fd()), &st); err != nil || st.Size < off+int64(n) {
		o.put(of)
		mu.RUnlock()
		return 0, nil, false
	}
	o.ctr.localReads.Add(1)
	return of.f.Fd(), func() { o.put(of); mu.RUnlock() }, true
}
