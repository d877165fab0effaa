// Package layout is the pure arithmetic of striping and erasure coding:
// which object and object offset hold a file byte, how big each object is
// for a file size, and (ec.go, ecrow.go) where the units of an
// erasure-coded row live, their parity, tags and reconstruction. It does
// no I/O.
package layout

import "github.com/stripefs/stripefs/proto"

// Chunk is a piece of a file range that lives in one object, contiguous in
// the file and in the object.
type Chunk struct {
	Stripe  int    // index into the layout's objects
	FileOff uint64 // where the chunk starts in the file
	ObjOff  uint64 // where it starts in the object
	Len     int
}

// Map splits the file range [off, off+n) into chunks, one per stripe unit
// crossed. A one-stripe layout maps the whole range to one chunk. For an
// erasure-coded layout the chunks are pieces of data units; for a
// composite one, a range no object holds yet is a chunk of NoObject.
func Map(l proto.Layout, off uint64, n int) []Chunk {
	if n <= 0 {
		return nil
	}
	if l.IsComposite() {
		return mapComposite(l, off, n)
	}
	if l.IsEC() {
		if g := ECOf(l); g.valid() {
			return g.mapEC(off, n)
		}
		return nil
	}
	ss, sc := uint64(l.StripeSize), uint64(l.StripeCount)
	if sc == 1 {
		return []Chunk{{Stripe: 0, FileOff: off, ObjOff: off, Len: n}}
	}
	out := make([]Chunk, 0, (uint64(n)+off%ss)/ss+1)
	end := off + uint64(n)
	for off < end {
		unit := off / ss
		in := off % ss
		ln := min(ss-in, end-off)
		out = append(out, Chunk{
			Stripe:  int(unit % sc),
			FileOff: off,
			ObjOff:  unit/sc*ss + in,
			Len:     int(ln),
		})
		off += ln
	}
	return out
}

// ObjectSize is how many bytes object stripe holds for a file of size
// bytes (with no holes at its end): the object's share of full rows plus
// its part of the last, partial row.
func ObjectSize(l proto.Layout, size uint64, stripe int) uint64 {
	if l.IsComposite() {
		return objectSizeComposite(l, size, stripe)
	}
	if l.IsEC() {
		if g := ECOf(l); g.valid() {
			return g.ObjectSize(size, stripe)
		}
		return 0
	}
	ss, sc := uint64(l.StripeSize), uint64(l.StripeCount)
	row := ss * sc
	full := size / row
	rest := size % row
	objSize := full * ss
	start := uint64(stripe) * ss
	if rest > start {
		objSize += min(rest-start, ss)
	}
	return objSize
}

// FileEnd is the file size implied by an object of objSize bytes at
// stripe: the end, in file offsets, of the object's last byte.
func FileEnd(l proto.Layout, stripe int, objSize uint64) uint64 {
	if objSize == 0 {
		return 0
	}
	if l.IsComposite() {
		return fileEndComposite(l, stripe, objSize)
	}
	if l.IsEC() {
		if g := ECOf(l); g.valid() {
			return g.FileEnd(stripe, objSize)
		}
		return 0
	}
	ss, sc := uint64(l.StripeSize), uint64(l.StripeCount)
	last := objSize - 1
	unit := last/ss*sc + uint64(stripe)
	return unit*ss + last%ss + 1
}
