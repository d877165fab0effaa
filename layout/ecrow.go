package layout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"

	"github.com/klauspost/reedsolomon"
)

// Rows of an erasure-coded file: parity, tags and reconstruction, pure.
//
// Every unit written carries a tag, which its OST stores beside the data:
// the version of the write that produced the unit and the CRC-32C of the
// unit's bytes (zero padded to the unit size). A parity unit's tag also
// lists the (version, CRC) of each data unit the parity was computed
// from: its manifest. A unit is valid when its bytes match its CRC.
// Reconstruction uses only units that agree with one manifest: valid data
// units whose tag is the manifest's entry, and valid parity units that
// carry that manifest. With K of them the row decodes to data that was
// written together; with fewer it does not decode at all. A crash between
// the data and parity writes of a row, or a unit torn on its OST, can
// therefore make a row unrecoverable (EIO) but never make it decode to
// bytes nobody wrote. A unit that was never written (a hole) has no tag
// and reads as zeros: it counts as the hole tag, version 0 and the CRC of
// a zero unit, and a parity unit without a tag as the parity of an
// all-hole row, so unwritten rows reconstruct to zeros.

// UnitRef is the version and CRC of one unit.
type UnitRef struct {
	Version uint64
	CRC     uint32
}

// Tag labels one unit of a row.
type Tag struct {
	UnitRef
	// Parity is set on parity units; Data is then the manifest: the tag of
	// each data unit of the row the parity was computed from.
	Parity bool
	Data   []UnitRef
}

const tagFormat = 1

// Marshal encodes t for the OST: format, kind, version, CRC, and for
// parity the manifest's length and entries.
func (t Tag) Marshal() []byte {
	b := make([]byte, 0, 14+2+12*len(t.Data))
	b = append(b, tagFormat, 0)
	if t.Parity {
		b[1] = 1
	}
	b = binary.LittleEndian.AppendUint64(b, t.Version)
	b = binary.LittleEndian.AppendUint32(b, t.CRC)
	if t.Parity {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(t.Data)))
		for _, r := range t.Data {
			b = binary.LittleEndian.AppendUint64(b, r.Version)
			b = binary.LittleEndian.AppendUint32(b, r.CRC)
		}
	}
	return b
}

// ErrBadTag reports a stored tag that does not parse.
var ErrBadTag = errors.New("ec: malformed unit tag")

// ParseTag decodes a tag stored for a unit of a row with k data units;
// parity tags must list exactly k entries.
func ParseTag(b []byte, k int) (Tag, error) {
	var t Tag
	if len(b) < 14 || b[0] != tagFormat || b[1] > 1 {
		return t, ErrBadTag
	}
	t.Parity = b[1] == 1
	t.Version = binary.LittleEndian.Uint64(b[2:])
	t.CRC = binary.LittleEndian.Uint32(b[10:])
	b = b[14:]
	if !t.Parity {
		if len(b) != 0 {
			return Tag{}, ErrBadTag
		}
		return t, nil
	}
	if len(b) < 2 || int(binary.LittleEndian.Uint16(b)) != k || len(b) != 2+12*k {
		return Tag{}, ErrBadTag
	}
	t.Data = make([]UnitRef, k)
	for i := range t.Data {
		p := b[2+12*i:]
		t.Data[i] = UnitRef{Version: binary.LittleEndian.Uint64(p), CRC: binary.LittleEndian.Uint32(p[8:])}
	}
	return t, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C of a unit's bytes.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

var zeroCRCs sync.Map // unit size → uint32

// ZeroCRC is the CRC-32C of a unit of zeros.
func ZeroCRC(unit uint64) uint32 {
	if v, ok := zeroCRCs.Load(unit); ok {
		return v.(uint32)
	}
	var zeros [64 << 10]byte
	var c uint32
	for left := unit; left > 0; {
		n := min(left, uint64(len(zeros)))
		c = crc32.Update(c, castagnoli, zeros[:n])
		left -= n
	}
	zeroCRCs.Store(unit, c)
	return c
}

// Codec computes and checks the rows of one geometry.
type Codec struct {
	G   EC
	enc reedsolomon.Encoder
}

var encoders sync.Map // [2]int{k, m} → reedsolomon.Encoder

// NewCodec returns the codec of g.
func NewCodec(g EC) (*Codec, error) {
	if g.K < 1 || g.M < 1 || g.N() > 256 || g.Unit == 0 {
		return nil, fmt.Errorf("ec: no codec for %d+%d with %d-byte units", g.K, g.M, g.Unit)
	}
	key := [2]int{g.K, g.M}
	if e, ok := encoders.Load(key); ok {
		return &Codec{G: g, enc: e.(reedsolomon.Encoder)}, nil
	}
	e, err := reedsolomon.New(g.K, g.M)
	if err != nil {
		return nil, fmt.Errorf("ec: %d+%d: %w", g.K, g.M, err)
	}
	v, _ := encoders.LoadOrStore(key, e)
	return &Codec{G: g, enc: v.(reedsolomon.Encoder)}, nil
}

// HoleTag is the tag of unit j of a row that was never written.
func (c *Codec) HoleTag(j int) Tag {
	t := Tag{UnitRef: UnitRef{CRC: ZeroCRC(c.G.Unit)}}
	if j >= c.G.K {
		t.Parity = true
		t.Data = make([]UnitRef, c.G.K)
		for i := range t.Data {
			t.Data[i] = t.UnitRef
		}
	}
	return t
}

// encodeSlice is how much of each unit Encode encodes at a time: small
// enough that the slices of a row stay in cache while they are
// checksummed.
const encodeSlice = 64 << 10

// Encode computes the parity of a row into parity (M buffers of Unit
// bytes, not aliasing data) from its K data units, and returns the CRC-32C
// of every unit, data then parity. It works through the row a slice at a
// time and checksums each slice while the encoder has it in cache: the
// checksums then cost a fraction of a separate pass over cold memory.
func (c *Codec) Encode(data, parity [][]byte) ([]uint32, error) {
	if len(data) != c.G.K || len(parity) != c.G.M {
		return nil, fmt.Errorf("ec: encode: %d data and %d parity units for %d+%d", len(data), len(parity), c.G.K, c.G.M)
	}
	shards := make([][]byte, 0, c.G.N())
	shards = append(append(shards, data...), parity...)
	for i, s := range shards {
		if uint64(len(s)) != c.G.Unit {
			return nil, fmt.Errorf("ec: encode: unit %d is %d bytes, not %d", i, len(s), c.G.Unit)
		}
	}
	crcs := make([]uint32, len(shards))
	sub := make([][]byte, len(shards))
	for off := 0; off < len(shards[0]); off += encodeSlice {
		end := min(off+encodeSlice, len(shards[0]))
		for i, s := range shards {
			sub[i] = s[off:end]
		}
		if err := c.enc.Encode(sub); err != nil {
			return nil, fmt.Errorf("ec: encode: %w", err)
		}
		for i, s := range sub {
			crcs[i] = crc32.Update(crcs[i], castagnoli, s)
		}
	}
	return crcs, nil
}

// ParityTags returns the tags of a row's parity units, whose CRCs are
// crcs, computed from the data units tagged dataTags.
func ParityTags(crcs []uint32, dataTags []Tag, version uint64) []Tag {
	manifest := make([]UnitRef, len(dataTags))
	for j, t := range dataTags {
		manifest[j] = t.UnitRef
	}
	tags := make([]Tag, len(crcs))
	for i, crc := range crcs {
		tags[i] = Tag{UnitRef: UnitRef{Version: version, CRC: crc}, Parity: true, Data: manifest}
	}
	return tags
}

// Seal computes the parity of a row and its tags. data holds the K data
// units, each Unit bytes; dataTags their tags as they will be stored.
// The parity units go to parity (M buffers of Unit bytes), which must not
// alias data.
func (c *Codec) Seal(data [][]byte, dataTags []Tag, parity [][]byte, version uint64) ([]Tag, error) {
	if len(dataTags) != c.G.K {
		return nil, fmt.Errorf("ec: seal: %d tags for %d data units", len(dataTags), c.G.K)
	}
	crcs, err := c.Encode(data, parity)
	if err != nil {
		return nil, err
	}
	return ParityTags(crcs[c.G.K:], dataTags, version), nil
}

// DataTag is the tag of a data unit written by version.
func DataTag(data []byte, version uint64) Tag {
	return Tag{UnitRef: UnitRef{Version: version, CRC: Checksum(data)}}
}

// Unit is what was read of one unit of a row.
type Unit struct {
	// Data is the unit's bytes zero padded to the unit size; nil when the
	// unit could not be read (its OST is down or failed the read).
	Data []byte
	// Extent is how many bytes of the unit the object holds.
	Extent int
	// Tag is the tag stored with the unit, nil if none.
	Tag []byte
}

// unitState is a unit as the codec judges it.
type unitState struct {
	valid bool // read, and its bytes match its tag
	tag   Tag
}

func (c *Codec) judge(units []Unit) ([]unitState, error) {
	if len(units) != c.G.N() {
		return nil, fmt.Errorf("ec: %d units for a %d+%d row", len(units), c.G.K, c.G.M)
	}
	st := make([]unitState, len(units))
	for j, u := range units {
		if u.Extent < 0 || uint64(u.Extent) > c.G.Unit {
			return nil, fmt.Errorf("ec: unit %d holds %d bytes of %d", j, u.Extent, c.G.Unit)
		}
		if u.Data == nil {
			continue
		}
		if uint64(len(u.Data)) != c.G.Unit {
			return nil, fmt.Errorf("ec: unit %d is %d bytes, not %d", j, len(u.Data), c.G.Unit)
		}
		if u.Tag == nil {
			st[j].tag = c.HoleTag(j)
		} else {
			t, err := ParseTag(u.Tag, c.G.K)
			if err != nil || t.Parity != (j >= c.G.K) {
				continue // read, but not valid
			}
			st[j].tag = t
		}
		st[j].valid = Checksum(u.Data) == st[j].tag.CRC
	}
	return st, nil
}

// ErrUnrecoverable reports a row too damaged to rebuild: fewer than K
// units agree with any parity unit's manifest.
var ErrUnrecoverable = errors.New("ec: too few consistent units to rebuild the row")

// consistent returns the units that agree with manifest m.
func (c *Codec) consistent(st []unitState, m []UnitRef) []int {
	var set []int
	for j := range st {
		switch {
		case !st[j].valid:
		case j < c.G.K && st[j].tag.UnitRef == m[j]:
			set = append(set, j)
		case j >= c.G.K && slices.Equal(st[j].tag.Data, m):
			set = append(set, j)
		}
	}
	return set
}

// decode rebuilds every data unit of the row as of the best manifest the
// valid parity units carry: the one the most units agree with (the newest
// on a tie). It returns the K data units and the manifest.
func (c *Codec) decode(units []Unit, st []unitState) ([][]byte, []UnitRef, error) {
	var best []int
	var bestM []UnitRef
	var bestV uint64
	for i := c.G.K; i < c.G.N(); i++ {
		if !st[i].valid {
			continue
		}
		m := st[i].tag.Data
		set := c.consistent(st, m)
		if len(set) > len(best) || len(set) == len(best) && st[i].tag.Version > bestV {
			best, bestM, bestV = set, m, st[i].tag.Version
		}
	}
	if len(best) < c.G.K {
		return nil, nil, ErrUnrecoverable
	}
	shards := make([][]byte, c.G.N())
	for _, j := range best[:c.G.K] { // data units come first in the set
		shards[j] = units[j].Data
	}
	if err := c.enc.ReconstructData(shards); err != nil {
		return nil, nil, fmt.Errorf("ec: reconstruct: %w", err)
	}
	for j := 0; j < c.G.K; j++ {
		if Checksum(shards[j]) != bestM[j].CRC {
			// The manifest promised other bytes: never hand them out.
			return nil, nil, fmt.Errorf("ec: unit %d rebuilt with the wrong checksum: %w", j, ErrUnrecoverable)
		}
	}
	return shards[:c.G.K], bestM, nil
}

// Recover returns the K data units of a row for a reader: those that were
// read as they are, the others rebuilt. The rebuilt units are what the
// row held when a set of at least K mutually consistent units was
// written; ErrUnrecoverable if there is no such set.
func (c *Codec) Recover(units []Unit) ([][]byte, error) {
	st, err := c.judge(units)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, c.G.K)
	missing := false
	for j := range out {
		out[j] = units[j].Data
		missing = missing || out[j] == nil
	}
	if !missing {
		return out, nil
	}
	rebuilt, _, err := c.decode(units, st)
	if err != nil {
		return nil, err
	}
	for j := range out {
		if out[j] == nil {
			out[j] = rebuilt[j]
		}
	}
	return out, nil
}

// UnitWrite is one unit to store: Data at the unit's start (possibly
// shorter than the unit, the rest being zeros; empty for a tag-only
// write) and its tag.
type UnitWrite struct {
	Index int
	Data  []byte
	Tag   Tag
}

// RowReport says what a check of a row found.
type RowReport struct {
	Missing   []int // units that could not be read, or were declared lost
	BadData   []int // data units that do not match their tag
	BadParity []int // parity units that do not match the data
	// Unrecoverable: missing data units could not be rebuilt.
	Unrecoverable bool
}

// OK reports whether the row needed nothing.
func (r RowReport) OK() bool {
	return len(r.Missing) == 0 && len(r.BadData) == 0 && len(r.BadParity) == 0 && !r.Unrecoverable
}

// Repair checks a row and returns the writes that make it whole and
// consistent again, with parity new version where it changes. Units in
// lost are treated as gone whatever was read (an OST being rebuilt). The
// data units that can be read are the row's content, as a normal read
// returns them; lost or unreadable data units are rebuilt as of the
// manifest most units agree with and written back with their old tags; a
// data unit whose bytes do not match its tag is re-tagged; parity is
// recomputed from the data and rewritten wherever it differs in bytes or
// manifest. A row whose missing data cannot be rebuilt gets no writes.
func (c *Codec) Repair(units []Unit, lost []bool, version uint64) ([]UnitWrite, RowReport, error) {
	units = slices.Clone(units)
	var rep RowReport
	for j := range units {
		if units[j].Data == nil || j < len(lost) && lost[j] {
			// Extent stays: a rewrite must cover what the object holds.
			units[j].Data, units[j].Tag = nil, nil
			rep.Missing = append(rep.Missing, j)
		}
	}
	st, err := c.judge(units)
	if err != nil {
		return nil, rep, err
	}
	k := c.G.K
	data := make([][]byte, k)
	tags := make([]Tag, k)
	var writes []UnitWrite
	var rebuilt [][]byte
	var manifest []UnitRef
	for j := 0; j < k; j++ {
		if units[j].Data != nil {
			continue
		}
		if rebuilt == nil {
			if rebuilt, manifest, err = c.decode(units, st); err != nil {
				rep.Unrecoverable = true
				return nil, rep, nil
			}
		}
		data[j], tags[j] = rebuilt[j], Tag{UnitRef: manifest[j]}
		n := max(len(trimZeros(rebuilt[j])), units[j].Extent)
		writes = append(writes, UnitWrite{Index: j, Data: rebuilt[j][:n], Tag: tags[j]})
	}
	for j := 0; j < k; j++ {
		if units[j].Data == nil {
			continue
		}
		data[j], tags[j] = units[j].Data, st[j].tag
		if !st[j].valid {
			rep.BadData = append(rep.BadData, j)
			tags[j] = DataTag(data[j], version)
			writes = append(writes, UnitWrite{Index: j, Tag: tags[j]})
		}
	}
	parity := make([][]byte, c.G.M)
	for i := range parity {
		parity[i] = make([]byte, c.G.Unit)
	}
	ptags, err := c.Seal(data, tags, parity, version)
	if err != nil {
		return nil, rep, err
	}
	for i := range parity {
		j := k + i
		if st[j].valid && bytes.Equal(units[j].Data, parity[i]) && slices.Equal(st[j].tag.Data, ptags[i].Data) {
			continue
		}
		if units[j].Data != nil {
			rep.BadParity = append(rep.BadParity, j)
		}
		// Cover the bytes the old parity held: no stale tail may remain.
		n := max(len(trimZeros(parity[i])), units[j].Extent)
		writes = append(writes, UnitWrite{Index: j, Data: parity[i][:n], Tag: ptags[i]})
	}
	return writes, rep, nil
}

// trimZeros returns b without its trailing zero bytes.
func trimZeros(b []byte) []byte {
	n := len(b)
	for n >= 8 && binary.LittleEndian.Uint64(b[n-8:n]) == 0 {
		n -= 8
	}
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return b[:n]
}
