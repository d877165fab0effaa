package layout

import "github.com/stripefs/stripefs/proto"

// ECPart is the erasure-coded part of a file: the whole file for an
// erasure-coded layout, or the erasure-coded component of a composite one
// (proto.Layout.ECComp). Its rows are the file's rows (row r holds file
// bytes [r*RowSize, (r+1)*RowSize)) and lie wholly in the part or out of
// it, so the row arithmetic of EC works on it unchanged: its objects are
// the file's objects Base to Base+N-1, and hold nothing below Start.
type ECPart struct {
	// Layout is the part as a plain erasure-coded layout, with its
	// objects' OSTs once it has objects (a component not yet
	// instantiated has none).
	Layout     proto.Layout
	Base       int    // the file's stripe of the part's object 0
	Start, End uint64 // the file bytes it holds; End is proto.ExtentEOF for all past Start
}

// ECPartOf returns the erasure-coded part of l, if it has one.
func ECPartOf(l proto.Layout) (ECPart, bool) {
	if l.IsEC() {
		return ECPart{Layout: l, End: proto.ExtentEOF}, true
	}
	i := l.ECComp()
	if i < 0 {
		return ECPart{}, false
	}
	c := l.Comps[i]
	return ECPart{Layout: l.Sub(i), Base: int(c.Base), Start: c.Start, End: c.End}, true
}

// Instantiated reports whether the part has its objects.
func (p ECPart) Instantiated() bool { return len(p.Layout.OSTs) > 0 }

// Geometry is the part's row geometry.
func (p ECPart) Geometry() EC { return ECOf(p.Layout) }

// HasRow reports whether row r of the file lies in the part.
func (p ECPart) HasRow(r uint64) bool {
	g := p.Geometry()
	if !g.valid() {
		return false
	}
	s := r * g.RowSize()
	return s >= p.Start && s < p.End
}

// Stripe is the file's stripe of the part's object obj.
func (p ECPart) Stripe(obj int) uint32 { return uint32(p.Base + obj) }

// Rows is the range of rows [first, end) of a file of size bytes that lie
// in the part.
func (p ECPart) Rows(size uint64) (first, end uint64) {
	g := p.Geometry()
	if !g.valid() {
		return 0, 0
	}
	first = p.Start / g.RowSize()
	end = g.Rows(min(size, p.End))
	return first, max(first, end)
}
