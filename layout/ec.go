package layout

import "github.com/stripefs/stripefs/proto"

// Erasure-coded geometry. A file is cut into rows of K data units of
// StripeSize bytes; each row adds M parity units. The N = K+M units of
// row r go to the N objects in turn, starting one further for each row:
// unit j of row r (j < K data, j >= K parity) lives on object (r+j) mod N
// at object offset r*StripeSize. Every object so holds exactly one unit
// of every row, back to back, and parity rotates over the OSTs.

// EC is the geometry of an erasure-coded layout.
type EC struct {
	K, M int    // data and parity units per row
	Unit uint64 // bytes per unit (the stripe size)
}

// ECOf returns the geometry of l, which must be a valid erasure-coded
// layout (proto.Layout.Validate).
func ECOf(l proto.Layout) EC {
	return EC{K: int(l.ECData), M: int(l.ECParity), Unit: uint64(l.StripeSize)}
}

// N is the number of units of a row, and of objects of a file.
func (g EC) N() int { return g.K + g.M }

// valid reports whether g can be computed with: layouts are validated
// before use, this keeps a bad one from dividing by zero.
func (g EC) valid() bool { return g.K >= 1 && g.M >= 1 && g.Unit > 0 }

// RowSize is the file bytes one row holds.
func (g EC) RowSize() uint64 { return uint64(g.K) * g.Unit }

// Locate returns the row, the data unit of the row and the offset in the
// unit of file offset off.
func (g EC) Locate(off uint64) (row uint64, unit int, in uint64) {
	row = off / g.RowSize()
	inRow := off % g.RowSize()
	return row, int(inRow / g.Unit), inRow % g.Unit
}

// UnitAt returns the object holding unit j of row r and the unit's
// offset in it.
func (g EC) UnitAt(r uint64, j int) (obj int, objOff uint64) {
	n := uint64(g.N())
	return int((r%n + uint64(j)) % n), r * g.Unit
}

// UnitOf returns which unit of row r object obj holds.
func (g EC) UnitOf(r uint64, obj int) int {
	n := uint64(g.N())
	return int((uint64(obj) + n - r%n) % n)
}

// UnitLen is how many bytes of unit j of row r a file of size bytes
// covers: for a data unit the file's bytes in it, for a parity unit the
// longest data unit of the row (the parity of the rest is zeros).
func (g EC) UnitLen(size, r uint64, j int) uint64 {
	start := r * g.RowSize()
	if size <= start {
		return 0
	}
	rest := size - start
	if j >= g.K {
		return min(rest, g.Unit)
	}
	first := uint64(j) * g.Unit
	if rest <= first {
		return 0
	}
	return min(rest-first, g.Unit)
}

// Rows is the number of rows a file of size bytes has.
func (g EC) Rows(size uint64) uint64 {
	return (size + g.RowSize() - 1) / g.RowSize()
}

// ObjectSize is how many bytes object obj holds for a file of size bytes
// written without holes at its end: a unit for each full row, and its
// unit's share of the last row.
func (g EC) ObjectSize(size uint64, obj int) uint64 {
	if size == 0 {
		return 0
	}
	last := (size - 1) / g.RowSize()
	return last*g.Unit + g.UnitLen(size, last, g.UnitOf(last, obj))
}

// FileEnd is the smallest file size that gives object obj objSize bytes
// under ObjectSize's rule: for an object whose last unit is a data unit
// the end of that unit's bytes in the file, for one whose last unit is
// parity the end of the row's first data unit.
func (g EC) FileEnd(obj int, objSize uint64) uint64 {
	if objSize == 0 {
		return 0
	}
	last := objSize - 1
	r := last / g.Unit
	j := g.UnitOf(r, obj)
	if j >= g.K {
		j = 0
	}
	return r*g.RowSize() + uint64(j)*g.Unit + last%g.Unit + 1
}

// mapEC is Map for an erasure-coded layout: the data units a file range
// covers.
func (g EC) mapEC(off uint64, n int) []Chunk {
	out := make([]Chunk, 0, (uint64(n)+off%g.Unit)/g.Unit+1)
	end := off + uint64(n)
	for off < end {
		r, j, in := g.Locate(off)
		ln := min(g.Unit-in, end-off)
		obj, objOff := g.UnitAt(r, j)
		out = append(out, Chunk{Stripe: obj, FileOff: off, ObjOff: objOff + in, Len: int(ln)})
		off += ln
	}
	return out
}
