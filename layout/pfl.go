package layout

import "github.com/stripefs/stripefs/proto"

// NoObject is the Stripe of a chunk that no object holds yet: a range in a
// component of a composite layout that is not instantiated, or past its
// last component. It reads as a hole.
const NoObject = -1

// mapComposite is Map for a composite layout: each component's part of
// the range mapped by the component's own striping (at the file's
// offsets), its stripes made the file's object indexes.
func mapComposite(l proto.Layout, off uint64, n int) []Chunk {
	end := off + uint64(n)
	var out []Chunk
	for i, c := range l.Comps {
		if c.End <= off {
			continue
		}
		if c.Start >= end {
			break
		}
		lo, hi := max(off, c.Start), min(end, c.End)
		if !c.Inst {
			out = append(out, Chunk{Stripe: NoObject, FileOff: lo, Len: int(hi - lo)})
			continue
		}
		for _, ch := range Map(l.Sub(i), lo, int(hi-lo)) {
			ch.Stripe += int(c.Base)
			out = append(out, ch)
		}
	}
	if last := l.End(); end > last {
		lo := max(off, last)
		out = append(out, Chunk{Stripe: NoObject, FileOff: lo, Len: int(end - lo)})
	}
	return out
}

// ObjectRange is the part of object stripe that holds file bytes
// [off, end): from the object's size for a file of off bytes to its size
// for end bytes, where for a component of a composite layout neither
// counts what lies outside the component (its objects start sparse).
func ObjectRange(l proto.Layout, off, end uint64, stripe int) (from, to uint64) {
	if i := l.CompOf(stripe); l.IsComposite() && i >= 0 {
		c := l.Comps[i]
		off, end = min(max(off, c.Start), c.End), min(max(end, c.Start), c.End)
		if end <= off {
			return 0, 0
		}
		sub := l.Sub(i)
		local := stripe - int(c.Base)
		return ObjectSize(sub, off, local), ObjectSize(sub, end, local)
	}
	return ObjectSize(l, off, stripe), ObjectSize(l, end, stripe)
}

func objectSizeComposite(l proto.Layout, size uint64, stripe int) uint64 {
	i := l.CompOf(stripe)
	if i < 0 || size <= l.Comps[i].Start {
		return 0
	}
	c, sub, local := l.Comps[i], l.Sub(i), stripe-int(l.Comps[i].Base)
	// The plain arithmetic counts the object's share of the bytes below
	// the component too, which it never holds: an object that gets none
	// of [Start, size) is empty.
	n := ObjectSize(sub, min(size, c.End), local)
	if n <= ObjectSize(sub, c.Start, local) {
		return 0
	}
	return n
}

func fileEndComposite(l proto.Layout, stripe int, objSize uint64) uint64 {
	i := l.CompOf(stripe)
	if i < 0 {
		return 0
	}
	c := l.Comps[i]
	return min(FileEnd(l.Sub(i), stripe-int(c.Base), objSize), c.End)
}
