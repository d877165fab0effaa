package layout

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/stripefs/stripefs/proto"
)

func ecLay(ss uint32, k, m uint16) proto.Layout {
	return proto.Layout{StripeSize: ss, StripeCount: uint32(k + m), ECData: k, ECParity: m}
}

func TestECLocate(t *testing.T) {
	g := EC{K: 4, M: 2, Unit: 100} // rows of 400 bytes
	tests := []struct {
		off     uint64
		row     uint64
		unit    int
		in      uint64
		obj     int
		objOff  uint64
		comment string
	}{
		{0, 0, 0, 0, 0, 0, "first byte"},
		{99, 0, 0, 99, 0, 99, "end of the first unit"},
		{100, 0, 1, 0, 1, 100 - 100, "second data unit"},
		{399, 0, 3, 99, 3, 99, "last byte of row 0"},
		{400, 1, 0, 0, 1, 100, "row 1 starts one object further"},
		{750, 1, 3, 50, 4, 150, "row 1 unit 3"},
		{2400, 6, 0, 0, 0, 600, "row 6 wraps to object 0"},
		{2799, 6, 3, 99, 3, 699, "row 6 last byte"},
		{5 * 400, 5, 0, 0, 5, 500, "row 5 starts on the last object"},
		{5*400 + 100, 5, 1, 0, 0, 500, "and wraps within the row"},
	}
	for _, tc := range tests {
		r, j, in := g.Locate(tc.off)
		if r != tc.row || j != tc.unit || in != tc.in {
			t.Errorf("%s: Locate(%d) = %d,%d,%d, want %d,%d,%d", tc.comment, tc.off, r, j, in, tc.row, tc.unit, tc.in)
		}
		obj, objOff := g.UnitAt(r, j)
		if obj != tc.obj || objOff+in != tc.objOff {
			t.Errorf("%s: unit at object %d offset %d, want %d, %d", tc.comment, obj, objOff+in, tc.obj, tc.objOff)
		}
		if back := g.UnitOf(r, obj); back != j {
			t.Errorf("%s: UnitOf(%d, %d) = %d, want %d", tc.comment, r, obj, back, j)
		}
	}
}

// TestECParityRotates checks that each object holds one unit of every row
// and that parity visits every object equally often.
func TestECParityRotates(t *testing.T) {
	for _, g := range []EC{{4, 2, 64}, {2, 1, 64}, {1, 1, 64}, {6, 3, 64}, {1, 5, 64}} {
		n := g.N()
		parity := make([]int, n)
		for r := uint64(0); r < uint64(3*n); r++ {
			seen := make([]bool, n)
			for j := 0; j < n; j++ {
				obj, off := g.UnitAt(r, j)
				if seen[obj] {
					t.Fatalf("%+v row %d: object %d holds two units", g, r, obj)
				}
				if off != r*g.Unit {
					t.Fatalf("%+v row %d unit %d at object offset %d", g, r, j, off)
				}
				seen[obj] = true
				if j >= g.K {
					parity[obj]++
				}
			}
		}
		for obj, c := range parity {
			if c != 3*g.M {
				t.Fatalf("%+v: object %d holds %d parity units over %d rows, want %d", g, obj, c, 3*n, 3*g.M)
			}
		}
	}
}

func TestECMap(t *testing.T) {
	const U = 64 << 10
	l := ecLay(U, 4, 2)
	tests := []struct {
		name string
		off  uint64
		n    int
		want []Chunk
	}{
		{"inside unit", 10, 20, []Chunk{{0, 10, 10, 20}}},
		{"across units", U - 10, 30, []Chunk{{0, U - 10, U - 10, 10}, {1, U, 0, 20}}},
		{"across rows", 4*U - 5, 10, []Chunk{{3, 4*U - 5, U - 5, 5}, {1, 4 * U, U, 5}}},
		{"whole row 2", 8 * U, 4 * U, []Chunk{{2, 8 * U, 2 * U, U}, {3, 9 * U, 2 * U, U}, {4, 10 * U, 2 * U, U}, {5, 11 * U, 2 * U, U}}},
	}
	for _, tc := range tests {
		got := Map(l, tc.off, tc.n)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: Map = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestECObjectSize(t *testing.T) {
	g := EC{K: 4, M: 2, Unit: 100}
	tests := []struct {
		size uint64
		want [6]uint64
	}{
		{0, [6]uint64{}},
		{1, [6]uint64{1, 0, 0, 0, 1, 1}},          // unit 0 and both parities
		{150, [6]uint64{100, 50, 0, 0, 100, 100}}, // parity as long as the longest data unit
		{400, [6]uint64{100, 100, 100, 100, 100, 100}},
		{401, [6]uint64{101, 101, 100, 100, 100, 101}}, // row 1: unit 0 on object 1, parity on 5 and 0
		{401 + 399, [6]uint64{200, 200, 200, 200, 200, 200}},
	}
	for _, tc := range tests {
		for obj := 0; obj < 6; obj++ {
			if got := g.ObjectSize(tc.size, obj); got != tc.want[obj] {
				t.Errorf("size %d object %d: ObjectSize %d, want %d", tc.size, obj, got, tc.want[obj])
			}
		}
	}
}

// TestECObjectSizeAgainstModel checks ObjectSize, UnitLen and FileEnd
// against a unit-by-unit model, over random geometries and sizes that are
// mostly not multiples of the row.
func TestECObjectSizeAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for iter := 0; iter < 500; iter++ {
		k, m := 1+rng.Intn(6), 1+rng.Intn(3)
		g := EC{K: k, M: m, Unit: uint64(1+rng.Intn(4)) * 16}
		size := uint64(rng.Intn(3000))
		want := make([]uint64, g.N())
		for r := uint64(0); r*g.RowSize() < size; r++ {
			longest := uint64(0)
			for j := 0; j < k; j++ {
				start := r*g.RowSize() + uint64(j)*g.Unit
				if start < size {
					n := min(size-start, g.Unit)
					longest = max(longest, n)
					obj, off := g.UnitAt(r, j)
					want[obj] = max(want[obj], off+n)
				}
			}
			for j := k; j < g.N(); j++ {
				obj, off := g.UnitAt(r, j)
				want[obj] = max(want[obj], off+longest)
			}
		}
		var end uint64
		for obj := range want {
			if got := g.ObjectSize(size, obj); got != want[obj] {
				t.Fatalf("%+v size %d object %d: ObjectSize %d, want %d", g, size, obj, got, want[obj])
			}
			end = max(end, g.FileEnd(obj, want[obj]))
		}
		if end != size {
			t.Fatalf("%+v size %d: FileEnd max %d", g, size, end)
		}
		if rows := g.Rows(size); rows*g.RowSize() < size || rows > 0 && (rows-1)*g.RowSize() >= size {
			t.Fatalf("%+v size %d: %d rows", g, size, rows)
		}
	}
}

func TestTagRoundTrip(t *testing.T) {
	tags := []Tag{
		{UnitRef: UnitRef{Version: 7, CRC: 99}},
		{UnitRef: UnitRef{Version: 1 << 60, CRC: 1}, Parity: true, Data: []UnitRef{{1, 2}, {3, 4}, {0, 5}}},
	}
	for _, tg := range tags {
		got, err := ParseTag(tg.Marshal(), 3)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tg) {
			t.Fatalf("round trip of %+v: %+v, %v", tg, got, err)
		}
	}
	bad := [][]byte{nil, {1}, {2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, append(tags[0].Marshal(), 0),
		tags[1].Marshal()[:20], {1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0}}
	for _, b := range bad {
		if _, err := ParseTag(b, 3); err == nil {
			t.Fatalf("ParseTag(%x) accepted", b)
		}
	}
	if _, err := ParseTag(tags[1].Marshal(), 4); err == nil {
		t.Fatal("a parity tag for 3 data units passed for 4")
	}
}

// row is a test row: its data (the file bytes of the row, zero padded)
// and the units as an OST would return them.
type row struct {
	data  [][]byte
	units []Unit
}

func sealRow(t *testing.T, c *Codec, content []byte, version uint64) row {
	t.Helper()
	g := c.G
	r := row{data: make([][]byte, g.K), units: make([]Unit, g.N())}
	tags := make([]Tag, g.K)
	for j := range r.data {
		r.data[j] = make([]byte, g.Unit)
		if s := uint64(j) * g.Unit; s < uint64(len(content)) {
			copy(r.data[j], content[s:])
		}
		tags[j] = DataTag(r.data[j], version)
	}
	parity := make([][]byte, g.M)
	for i := range parity {
		parity[i] = make([]byte, g.Unit)
	}
	ptags, err := c.Seal(r.data, tags, parity, version)
	if err != nil {
		t.Fatal(err)
	}
	for j := 0; j < g.K; j++ {
		r.units[j] = Unit{Data: bytes.Clone(r.data[j]), Extent: int(g.Unit), Tag: tags[j].Marshal()}
	}
	for i := range parity {
		r.units[g.K+i] = Unit{Data: parity[i], Extent: int(g.Unit), Tag: ptags[i].Marshal()}
	}
	return r
}

// TestECRecoverRoundTrip seals rows of sizes that are not multiples of
// the row, drops every combination of up to M units and checks the data
// comes back; with M+1 units gone it must fail, never return other data.
func TestECRecoverRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, g := range []EC{{4, 2, 64}, {2, 1, 128}, {1, 1, 64}, {3, 3, 64}, {6, 2, 64}} {
		c, err := NewCodec(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{1, 63, 64, 65, int(g.RowSize()) - 1, int(g.RowSize())} {
			content := make([]byte, size)
			rng.Read(content)
			r := sealRow(t, c, content, 5)
			for mask := 0; mask < 1<<g.N(); mask++ {
				units := make([]Unit, g.N())
				lost := 0
				for j := range units {
					units[j] = r.units[j]
					if mask&(1<<j) != 0 {
						units[j].Data, units[j].Tag = nil, nil
						lost++
					}
				}
				got, err := c.Recover(units)
				if lost > g.M {
					if !errors.Is(err, ErrUnrecoverable) {
						t.Fatalf("%+v size %d mask %b: %d units lost, got %v", g, size, mask, lost, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%+v size %d mask %b: %v", g, size, mask, err)
				}
				for j := range got {
					if !bytes.Equal(got[j], r.data[j]) {
						t.Fatalf("%+v size %d mask %b: data unit %d differs", g, size, mask, j)
					}
				}
			}
		}
	}
}

// TestECHoleRows checks that units never written (no tag, zeros)
// reconstruct to zeros, alone or beside a written data unit.
func TestECHoleRows(t *testing.T) {
	g := EC{K: 4, M: 2, Unit: 64}
	c, _ := NewCodec(g)
	zero := make([]byte, g.Unit)
	units := make([]Unit, g.N())
	for j := range units {
		units[j] = Unit{Data: make([]byte, g.Unit)}
	}
	units[2].Data = nil
	got, err := c.Recover(units)
	if err != nil || !bytes.Equal(got[2], zero) {
		t.Fatalf("hole row: %v", err)
	}
	// A short file: only unit 0 written; units 1-3 were never written
	// and the parity's manifest says so.
	data := [][]byte{make([]byte, g.Unit), zero, zero, zero}
	copy(data[0], "hello")
	tags := []Tag{DataTag(data[0], 9), c.HoleTag(1), c.HoleTag(2), c.HoleTag(3)}
	parity := [][]byte{make([]byte, g.Unit), make([]byte, g.Unit)}
	ptags, err := c.Seal(data, tags, parity, 9)
	if err != nil {
		t.Fatal(err)
	}
	units = []Unit{{}, {Data: zero}, {Data: zero}, {Data: zero},
		{Data: parity[0], Tag: ptags[0].Marshal()}, {Data: parity[1], Tag: ptags[1].Marshal()}}
	got, err = c.Recover(units)
	if err != nil || !bytes.Equal(got[0], data[0]) {
		t.Fatalf("short file, unit 0 lost: %v", err)
	}
}

// TestECTornRows simulates crashes between the writes of a row: each unit
// of a row rewritten with new content holds, at random, its old or new
// version, and unit writes torn on the OST (new data, old tag). Whatever
// is lost, a recovered data unit must equal the old or the new content of
// that unit, never anything else.
func TestECTornRows(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for _, g := range []EC{{4, 2, 64}, {2, 2, 64}, {1, 2, 64}, {3, 1, 64}} {
		c, _ := NewCodec(g)
		for iter := 0; iter < 400; iter++ {
			oldC, newC := make([]byte, g.RowSize()), make([]byte, g.RowSize())
			rng.Read(oldC)
			rng.Read(newC)
			old, nw := sealRow(t, c, oldC, 1), sealRow(t, c, newC, 2)
			units := make([]Unit, g.N())
			for j := range units {
				switch rng.Intn(3) {
				case 0:
					units[j] = old.units[j]
				case 1:
					units[j] = nw.units[j]
				default: // torn: the new bytes landed, the tag did not
					units[j] = Unit{Data: nw.units[j].Data, Extent: int(g.Unit), Tag: old.units[j].Tag}
				}
				if rng.Intn(3) == 0 {
					units[j].Data = nil
				}
			}
			got, err := c.Recover(units)
			if err != nil {
				if !errors.Is(err, ErrUnrecoverable) {
					t.Fatalf("%+v: %v", g, err)
				}
				continue
			}
			for j := range got {
				if !bytes.Equal(got[j], old.data[j]) && !bytes.Equal(got[j], nw.data[j]) {
					t.Fatalf("%+v iter %d: data unit %d is neither the old nor the new content", g, iter, j)
				}
			}
		}
	}
}

// TestECStaleParity is the crash the design names: the data units of a
// row were rewritten but the parity writes never happened. A lost data
// unit must give ErrUnrecoverable, not a decode of new data with old
// parity.
func TestECStaleParity(t *testing.T) {
	g := EC{K: 4, M: 2, Unit: 64}
	c, _ := NewCodec(g)
	oldC, newC := bytes.Repeat([]byte{1}, int(g.RowSize())), bytes.Repeat([]byte{2}, int(g.RowSize()))
	old, nw := sealRow(t, c, oldC, 1), sealRow(t, c, newC, 2)
	units := append(append([]Unit(nil), nw.units[:g.K]...), old.units[g.K:]...)
	units[1].Data = nil
	if _, err := c.Recover(units); !errors.Is(err, ErrUnrecoverable) {
		t.Fatalf("new data with old parity, one data unit lost: %v", err)
	}
	// Two data units rewritten: the other two and the old parity are
	// only 4-1 consistent units, too few.
	units = append(append([]Unit(nil), nw.units[:2]...), old.units[2:]...)
	units[3].Data = nil
	if _, err := c.Recover(units); !errors.Is(err, ErrUnrecoverable) {
		t.Fatalf("two new units, old parity, an old unit lost: %v", err)
	}
	// One data unit rewritten: the other three and the old parity agree,
	// so a lost old unit comes back as it was...
	units = append(append([]Unit(nil), nw.units[:1]...), old.units[1:]...)
	units[3].Data = nil
	got, err := c.Recover(units)
	if err != nil || !bytes.Equal(got[3], old.data[3]) || !bytes.Equal(got[0], nw.data[0]) {
		t.Fatalf("old unit beside a new one: %v", err)
	}
	// ...and the lost new unit as it was before the interrupted write.
	units[3], units[0].Data = old.units[3], nil
	got, err = c.Recover(units)
	if err != nil || !bytes.Equal(got[0], old.data[0]) {
		t.Fatalf("lost new unit with old parity: %v", err)
	}
}

func TestECRepair(t *testing.T) {
	g := EC{K: 4, M: 2, Unit: 64}
	c, _ := NewCodec(g)
	content := make([]byte, 3*64+10) // the last data unit is short
	rand.New(rand.NewSource(4)).Read(content)
	good := sealRow(t, c, content, 1)
	apply := func(units []Unit, ws []UnitWrite) []Unit {
		out := append([]Unit(nil), units...)
		for _, w := range ws {
			u := out[w.Index]
			d := make([]byte, g.Unit)
			if u.Data != nil && len(w.Data) == 0 {
				copy(d, u.Data) // tag-only write
			} else {
				copy(d, w.Data)
			}
			out[w.Index] = Unit{Data: d, Extent: max(u.Extent, len(w.Data)), Tag: w.Tag.Marshal()}
		}
		return out
	}
	check := func(name string, units []Unit) {
		t.Helper()
		ws, rep, err := c.Repair(units, nil, 2)
		if err != nil || len(ws) != 0 || !rep.OK() {
			t.Fatalf("%s: after repair: %d writes, %+v, %v", name, len(ws), rep, err)
		}
		for j := 0; j < g.N(); j++ { // each unit can now be lost alone
			u := append([]Unit(nil), units...)
			u[j].Data = nil
			got, err := c.Recover(u)
			if err != nil {
				t.Fatalf("%s: unit %d lost after repair: %v", name, j, err)
			}
			for d := range got {
				if !bytes.Equal(got[d], good.data[d]) {
					t.Fatalf("%s: unit %d lost after repair: data unit %d differs", name, j, d)
				}
			}
		}
	}
	check("healthy", good.units)

	// An OST replaced: units 1 and 4 gone (data and parity).
	lost := []bool{false, true, false, false, true, false}
	ws, rep, err := c.Repair(good.units, lost, 2)
	if err != nil || len(rep.Missing) != 2 || len(ws) != 2 {
		t.Fatalf("rebuild: %d writes, %+v, %v", len(ws), rep, err)
	}
	blank := append([]Unit(nil), good.units...)
	blank[1], blank[4] = Unit{Data: make([]byte, g.Unit)}, Unit{Data: make([]byte, g.Unit)}
	check("rebuilt", apply(blank, ws))

	// Corrupt parity bytes under a valid-looking tag? The CRC catches it:
	// a flipped byte makes the unit invalid and repair rewrites it.
	bad := append([]Unit(nil), good.units...)
	bad[5].Data = bytes.Clone(bad[5].Data)
	bad[5].Data[3] ^= 1
	ws, rep, _ = c.Repair(bad, nil, 2)
	if len(rep.BadParity) != 1 || len(ws) != 1 {
		t.Fatalf("flipped parity byte: %+v, %d writes", rep, len(ws))
	}
	check("parity fixed", apply(bad, ws))

	// Stale parity: data rewritten, parity not. The data is what reads
	// return, so repair re-encodes the parity from it.
	newC := bytes.Repeat([]byte{7}, int(g.RowSize()))
	nw := sealRow(t, c, newC, 3)
	stale := append(append([]Unit(nil), nw.units[:g.K]...), good.units[g.K:]...)
	ws, rep, _ = c.Repair(stale, nil, 4)
	if len(rep.BadParity) != 2 || len(ws) != 2 {
		t.Fatalf("stale parity: %+v, %d writes", rep, len(ws))
	}
	good = nw
	check("re-encoded", apply(stale, ws))

	// A data unit torn on its OST (bytes and tag disagree) is re-tagged.
	torn := append([]Unit(nil), good.units...)
	torn[2].Tag = DataTag([]byte("other"), 1).Marshal()
	ws, rep, _ = c.Repair(torn, nil, 5)
	if len(rep.BadData) != 1 || len(ws) != 3 { // the tag and both parity manifests
		t.Fatalf("torn data unit: %+v, %d writes", rep, len(ws))
	}
	check("re-tagged", apply(torn, ws))

	// Too much lost: nothing is written.
	gone := append([]Unit(nil), good.units...)
	gone[0].Data, gone[1].Data, gone[2].Data = nil, nil, nil
	ws, rep, err = c.Repair(gone, nil, 6)
	if err != nil || !rep.Unrecoverable || len(ws) != 0 {
		t.Fatalf("three of 4+2 lost: %+v, %d writes, %v", rep, len(ws), err)
	}
}

func TestECRejectsBadInput(t *testing.T) {
	if _, err := NewCodec(EC{K: 0, M: 1, Unit: 64}); err == nil {
		t.Fatal("0 data units accepted")
	}
	c, _ := NewCodec(EC{K: 2, M: 1, Unit: 64})
	if _, err := c.Recover(make([]Unit, 2)); err == nil {
		t.Fatal("wrong unit count accepted")
	}
	if _, err := c.Recover([]Unit{{Data: make([]byte, 10)}, {}, {}}); err == nil {
		t.Fatal("short unit accepted")
	}
	if _, _, err := c.Repair([]Unit{{Extent: 65}, {}, {}}, nil, 1); err == nil {
		t.Fatal("extent past the unit accepted")
	}
}

// TestEncodeChecksums: Encode's slice-by-slice checksums equal those of
// whole units, for unit sizes that are and are not multiples of a slice.
func TestEncodeChecksums(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	for _, u := range []uint64{100, encodeSlice, 3*encodeSlice + 17} {
		c, _ := NewCodec(EC{K: 3, M: 2, Unit: u})
		data := [][]byte{make([]byte, u), make([]byte, u), make([]byte, u)}
		for _, d := range data {
			rng.Read(d)
		}
		parity := [][]byte{make([]byte, u), make([]byte, u)}
		crcs, err := c.Encode(data, parity)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range append(append([][]byte(nil), data...), parity...) {
			if crcs[i] != Checksum(s) {
				t.Fatalf("unit size %d: unit %d checksum %x, want %x", u, i, crcs[i], Checksum(s))
			}
		}
		ok, err := c.enc.Verify(append(append([][]byte(nil), data...), parity...))
		if err != nil || !ok {
			t.Fatalf("unit size %d: parity does not verify: %v", u, err)
		}
	}
}

// TestECBadLayoutNoPanic: the layout functions take layouts that came
// over the wire; an invalid erasure-coded one maps to nothing rather than
// dividing by zero.
func TestECBadLayoutNoPanic(t *testing.T) {
	for _, l := range []proto.Layout{
		{StripeSize: 0, StripeCount: 3, ECData: 2, ECParity: 1},
		{StripeSize: 65536, StripeCount: 1, ECData: 0, ECParity: 1},
	} {
		if Map(l, 100, 10) != nil || ObjectSize(l, 1000, 0) != 0 || FileEnd(l, 0, 10) != 0 {
			t.Fatalf("layout %+v mapped", l)
		}
	}
}

// FuzzECRow feeds rows of arbitrary bytes and tags (as OSTs could return
// them) to Recover and Repair: they must never panic, and whatever Recover
// returns for a lost unit must match a checksum some stored tag promised.
func FuzzECRow(f *testing.F) {
	c, _ := NewCodec(EC{K: 2, M: 2, Unit: 16})
	r := sealRowF(c, []byte("0123456789abcdefghijklmnopqrstuv"), 3)
	f.Add(r[0].Tag, r[2].Tag, r[3].Tag, r[0].Data, r[2].Data, r[3].Data, uint8(2))
	f.Add([]byte{}, []byte{1, 1}, []byte(nil), []byte("x"), []byte{}, []byte(nil), uint8(0))
	f.Fuzz(func(t *testing.T, t0, t2, t3, d0, d2, d3 []byte, lostMask uint8) {
		pad := func(b []byte) []byte {
			out := make([]byte, 16)
			copy(out, b)
			return out
		}
		units := []Unit{{Data: pad(d0), Tag: t0, Extent: 16}, {}, {Data: pad(d2), Tag: t2}, {Data: pad(d3), Tag: t3, Extent: len(d3) % 17}}
		data, err := c.Recover(units)
		if err == nil {
			got := Checksum(data[1])
			ok := false
			for _, tb := range [][]byte{t2, t3} {
				if tg, err := ParseTag(tb, 2); err == nil && tg.Parity && tg.Data[1].CRC == got {
					ok = true
				}
			}
			if tg := c.HoleTag(2); tg.Data[1].CRC == got && (t2 == nil || t3 == nil) {
				ok = true
			}
			if !ok {
				t.Fatalf("rebuilt unit 1 matches no manifest")
			}
		}
		lost := []bool{lostMask&1 != 0, lostMask&2 != 0, lostMask&4 != 0, lostMask&8 != 0}
		_, _, _ = c.Repair(units, lost, 9)
	})
}

func sealRowF(c *Codec, content []byte, version uint64) []Unit {
	g := c.G
	data := make([][]byte, g.K)
	tags := make([]Tag, g.K)
	for j := range data {
		data[j] = make([]byte, g.Unit)
		copy(data[j], content[uint64(j)*g.Unit:])
		tags[j] = DataTag(data[j], version)
	}
	parity := [][]byte{make([]byte, g.Unit), make([]byte, g.Unit)}
	ptags, _ := c.Seal(data, tags, parity, version)
	units := make([]Unit, g.N())
	for j := range data {
		units[j] = Unit{Data: data[j], Extent: int(g.Unit), Tag: tags[j].Marshal()}
	}
	for i := range parity {
		units[g.K+i] = Unit{Data: parity[i], Extent: int(g.Unit), Tag: ptags[i].Marshal()}
	}
	return units
}
