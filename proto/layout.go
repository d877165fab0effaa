package proto

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

const (
	// MinStripeSize is the unit every stripe size is a multiple of, as in
	// Lustre (64 KiB).
	MinStripeSize = 64 << 10
	// MaxStripeSize bounds a stripe unit (and so one object write).
	MaxStripeSize = 64 << 20
	// DefaultStripeSize and DefaultStripeCount apply when no directory on
	// the path sets a default.
	DefaultStripeSize  = 1 << 20
	DefaultStripeCount = 1
	// MaxECShards bounds data plus parity units of an erasure-coded row
	// (the Reed-Solomon code works over GF(2^8)).
	MaxECShards = 256
	// MaxECRowSize bounds the data of one erasure-coded row: a client
	// holds whole rows in memory while it writes them.
	MaxECRowSize = 64 << 20
)

// Layout says where a regular file's bytes live: stripe unit i of the file
// goes to object i%StripeCount, held by OST OSTs[i%StripeCount].
//
// An erasure-coded layout (ECParity > 0) groups the file into rows of
// ECData data units of StripeSize, each row with ECParity parity units,
// over StripeCount = ECData+ECParity objects on distinct OSTs; where each
// unit lives is layout.ECGeometry's to say.
type Layout struct {
	StripeSize  uint32
	StripeCount uint32
	// FirstOST is the OST of stripe 0 as requested; -1 lets the MDT choose.
	FirstOST int32
	// OSTs holds the OST index of each stripe, fixed when the layout is
	// instantiated at create time.
	OSTs []uint32
	// ECData and ECParity are the data and parity units of an
	// erasure-coded row (K and M of K+M); both 0 for plain striping.
	ECData, ECParity uint16
	// Comps are the components of a composite layout (pfl.go), in file
	// order; nil for a plain one.
	Comps []Comp
}

// IsEC reports whether l is erasure-coded.
func (l Layout) IsEC() bool { return l.ECParity != 0 }

// IsSet reports whether l carries a stripe size (a directory default or a
// file layout), as opposed to "inherit".
func (l Layout) IsSet() bool { return l.StripeSize != 0 }

// Validate checks a requested layout against the number of OSTs. A count
// of -1 (all OSTs) must be resolved before calling it.
func (l Layout) Validate(nOST int) error {
	if l.IsComposite() {
		return l.validateComposite(nOST)
	}
	switch {
	case l.StripeSize == 0 || l.StripeSize%MinStripeSize != 0:
		return fmt.Errorf("stripe size %d is not a positive multiple of 64 KiB: %w", l.StripeSize, syscall.EINVAL)
	case l.StripeSize > MaxStripeSize:
		return fmt.Errorf("stripe size %d is over the %d limit: %w", l.StripeSize, MaxStripeSize, syscall.EINVAL)
	case l.StripeCount == 0:
		return fmt.Errorf("stripe count 0: %w", syscall.EINVAL)
	}
	if l.IsEC() || l.ECData != 0 {
		if err := l.validateEC(nOST); err != nil {
			return err
		}
	}
	switch {
	case l.StripeCount != AllOSTs && int(l.StripeCount) > nOST:
		return fmt.Errorf("stripe count %d is above the %d OSTs: %w", l.StripeCount, nOST, syscall.EINVAL)
	case l.FirstOST >= int32(nOST) || l.FirstOST < -1:
		return fmt.Errorf("first OST %d does not exist (%d OSTs): %w", l.FirstOST, nOST, syscall.EINVAL)
	}
	for _, o := range l.OSTs {
		if int(o) >= nOST {
			return fmt.Errorf("OST index %d does not exist (%d OSTs): %w", o, nOST, syscall.EINVAL)
		}
	}
	return nil
}

// validateEC checks the erasure-coding parameters of l.
func (l Layout) validateEC(nOST int) error {
	k, m := int(l.ECData), int(l.ECParity)
	switch {
	case k < 1 || m < 1:
		return fmt.Errorf("erasure coding %d+%d: needs at least 1 data and 1 parity unit per row: %w", k, m, syscall.EINVAL)
	case k+m > MaxECShards:
		return fmt.Errorf("erasure coding %d+%d: at most %d units per row: %w", k, m, MaxECShards, syscall.EINVAL)
	case k+m > nOST:
		return fmt.Errorf("erasure coding %d+%d needs %d OSTs, the filesystem has %d: %w", k, m, k+m, nOST, syscall.EINVAL)
	case l.StripeCount != uint32(k+m):
		return fmt.Errorf("erasure coding %d+%d: stripe count must be %d, not %s: %w", k, m, k+m, countString(l.StripeCount), syscall.EINVAL)
	case uint64(k)*uint64(l.StripeSize) > MaxECRowSize:
		return fmt.Errorf("erasure coding %d+%d: a row of %d units of %d bytes is over the %d MiB limit: %w",
			k, m, k, l.StripeSize, MaxECRowSize>>20, syscall.EINVAL)
	}
	if len(l.OSTs) > 0 {
		seen := make(map[uint32]bool, len(l.OSTs))
		for _, o := range l.OSTs {
			if seen[o] {
				return fmt.Errorf("erasure coding: OST %d holds two units of a row: %w", o, syscall.EINVAL)
			}
			seen[o] = true
		}
	}
	return nil
}

// CheckFile validates the layout of an existing regular file as a client
// receives it from an MDT: everything the data path indexes by must be
// consistent, so a damaged or hostile reply fails with EIO instead of
// crashing the client. Whether its OSTs exist is the cluster map's to say.
func (l Layout) CheckFile() error {
	if l.IsComposite() {
		if l.StripeCount != uint32(len(l.OSTs)) || !l.Comps[0].Inst {
			return fmt.Errorf("layout %q: %d OSTs for %d objects, first component without objects: %w", l, len(l.OSTs), l.StripeCount, syscall.EIO)
		}
		if err := l.validateComposite(1 << 30); err != nil {
			return fmt.Errorf("layout %q: %v: %w", l, err, syscall.EIO)
		}
		return nil
	}
	if l.StripeCount == AllOSTs || int(l.StripeCount) != len(l.OSTs) {
		return fmt.Errorf("layout %s: %d OSTs for stripe count %s: %w", l, len(l.OSTs), countString(l.StripeCount), syscall.EIO)
	}
	if err := l.Validate(1 << 30); err != nil {
		return fmt.Errorf("layout %s: %v: %w", l, err, syscall.EIO)
	}
	return nil
}

func countString(c uint32) string {
	if c == AllOSTs {
		return "-1"
	}
	return strconv.FormatUint(uint64(c), 10)
}

// Instantiate fixes the OST of each stripe, starting at FirstOST or, when
// that is -1, at start. A composite layout gets its first component's
// objects only (on mdt, the file's MDT, for Data-on-MDT).
func (l Layout) Instantiate(nOST int, start int, mdt uint32) Layout {
	if l.IsComposite() {
		return l.InstantiateTo(1, nOST, start, mdt)
	}
	first := int(l.FirstOST)
	if first < 0 {
		first = start % nOST
	}
	l.FirstOST = int32(first)
	l.OSTs = make([]uint32, l.StripeCount)
	for i := range l.OSTs {
		l.OSTs[i] = uint32((first + i) % nOST)
	}
	return l
}

// LayoutXattr is the extended attribute through which layouts are read and
// set on the mount, as Lustre's lustre.lov. Its value is text:
// "stripe_count=4 stripe_size=1048576 stripe_offset=-1 osts=0,1,2,3"; a
// set may give any subset of the keys (osts is read-only). Erasure-coded
// layouts add "ec=K+M" (stripe_count is then K+M); "ec=none" turns it off.
// A composite layout is one line per component, each with
// "extent=START-END" (END may be EOF) before the plain keys.
const LayoutXattr = "lustre.lov"

// AllOSTs as a stripe count means "stripe over every OST" (-c -1).
const AllOSTs = ^uint32(0)

// String renders l in the LayoutXattr form.
func (l Layout) String() string {
	if l.IsComposite() {
		return l.compositeString()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "stripe_count=%s stripe_size=%d stripe_offset=%d", countString(l.StripeCount), l.StripeSize, l.FirstOST)
	if l.IsEC() {
		fmt.Fprintf(&b, " ec=%d+%d", l.ECData, l.ECParity)
	}
	if len(l.OSTs) > 0 {
		b.WriteString(" osts=")
		for i, o := range l.OSTs {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatUint(uint64(o), 10))
		}
	}
	return b.String()
}

// ParseLayout reads the LayoutXattr form. Keys left out keep their value
// in base; osts is ignored (the MDT chooses OSTs at create time). A
// stripe_count without ec= makes the layout plain; ec=K+M without a
// stripe_count sets it to K+M.
//
// A value with extent= keys is a composite layout (pfl.go); a plain value
// set over a composite base starts from its first component.
func ParseLayout(s string, base Layout) (Layout, error) {
	if strings.Contains(s, "extent=") {
		return parseComposite(s, base)
	}
	if base.IsComposite() {
		base = base.Sub(0)
	}
	l := base
	l.OSTs, l.Comps = nil, nil
	var countSet, ecSet bool
	for _, f := range strings.Fields(strings.TrimRight(s, "\x00")) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return l, fmt.Errorf("layout: %q is not key=value: %w", f, syscall.EINVAL)
		}
		if k == "ec" {
			kk, mm, err := ParseEC(v)
			if err != nil {
				return l, fmt.Errorf("layout: %w", err)
			}
			l.ECData, l.ECParity, ecSet = kk, mm, true
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil && k != "osts" && k != "fid" && k != "pattern" {
			return l, fmt.Errorf("layout: %s=%q is not a number: %w", k, v, syscall.EINVAL)
		}
		switch k {
		case "stripe_count":
			switch {
			case n == -1:
				l.StripeCount = AllOSTs
			case n < 1 || n > 65535:
				return l, fmt.Errorf("layout: stripe_count %d out of range: %w", n, syscall.EINVAL)
			default:
				l.StripeCount = uint32(n)
			}
			countSet = true
		case "stripe_size":
			if n < 0 || n > MaxStripeSize {
				return l, fmt.Errorf("layout: stripe_size %d out of range: %w", n, syscall.EINVAL)
			}
			l.StripeSize = uint32(n)
		case "stripe_offset":
			if n < -1 || n > 65535 {
				return l, fmt.Errorf("layout: stripe_offset %d out of range: %w", n, syscall.EINVAL)
			}
			l.FirstOST = int32(n)
		case "osts", "fid":
		case "pattern":
			if v != "raid0" {
				return l, fmt.Errorf("layout: pattern=%s is a component of a composite layout: give its end (setstripe -E 1M -L mdt -E -1 ...): %w", v, syscall.EINVAL)
			}
		default:
			return l, fmt.Errorf("layout: unknown key %q: %w", k, syscall.EINVAL)
		}
	}
	switch {
	case ecSet && l.IsEC():
		want := uint32(l.ECData) + uint32(l.ECParity)
		if countSet && l.StripeCount != want {
			return l, fmt.Errorf("layout: stripe_count %s does not match ec=%d+%d (%d units per row): %w",
				countString(l.StripeCount), l.ECData, l.ECParity, want, syscall.EINVAL)
		}
		l.StripeCount = want
	case countSet && !ecSet:
		l.ECData, l.ECParity = 0, 0 // a plain layout of that count
	}
	return l, nil
}

// ParseEC reads "K+M" (K data and M parity units per row), or "none" or
// "0" for no erasure coding.
func ParseEC(s string) (k, m uint16, err error) {
	if s == "none" || s == "0" {
		return 0, 0, nil
	}
	ks, ms, ok := strings.Cut(s, "+")
	kn, kerr := strconv.ParseUint(ks, 10, 16)
	mn, merr := strconv.ParseUint(ms, 10, 16)
	switch {
	case !ok || kerr != nil || merr != nil:
		return 0, 0, fmt.Errorf("ec=%q is not K+M (data+parity units per row, e.g. 4+2): %w", s, syscall.EINVAL)
	case kn < 1 || mn < 1:
		return 0, 0, fmt.Errorf("ec=%s: needs at least 1 data and 1 parity unit per row: %w", s, syscall.EINVAL)
	case kn+mn > MaxECShards:
		return 0, 0, fmt.Errorf("ec=%s: at most %d units per row: %w", s, MaxECShards, syscall.EINVAL)
	}
	return uint16(kn), uint16(mn), nil
}
