package proto

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Comp is one component of a composite layout (Lustre's progressive file
// layout, PFL): the file bytes [Start, End) are striped by a plain layout
// of their own. Offsets stay the file's: stripe unit u of a component is
// the file's unit u, so an object of a component that starts at 1 MiB
// holds nothing below its share of that MiB (a sparse start), and each
// component's arithmetic is the plain one. A component's objects are the
// file's objects Base to Base+StripeCount-1 (their ObjID stripes); they
// are allocated (Inst) when a write first reaches the component, not at
// create, so a small file pays for the first component only.
type Comp struct {
	Start, End  uint64 // End is ExtentEOF for a component to the end of any file
	StripeSize  uint32
	StripeCount uint32 // AllOSTs (-c -1) until instantiated
	FirstOST    int32
	// ECData and ECParity make an erasure-coded component (at most one
	// per layout, its ends on its rows: ECComp).
	ECData, ECParity uint16
	Base             uint32
	Inst             bool
}

// ExtentEOF ends the component that reaches to the end of any file
// (setstripe -E -1).
const ExtentEOF = ^uint64(0)

// MaxComps bounds the components of a composite layout (Lustre's
// LOV_MAX_COMPS is larger, but no layout needs more than a handful).
const MaxComps = 16

// IsComposite reports whether l is a composite (PFL) layout. Its
// top-level fields then describe its objects as a whole: OSTs lists the
// OST of every instantiated object in the order of their stripes,
// StripeCount is how many there are, and StripeSize is the first
// component's (so IsSet holds); it is never erasure-coded as a whole.
func (l Layout) IsComposite() bool { return len(l.Comps) > 0 }

// Sub is component i as a plain layout, with its objects' OSTs once it is
// instantiated.
func (l Layout) Sub(i int) Layout {
	c := l.Comps[i]
	s := Layout{StripeSize: c.StripeSize, StripeCount: c.StripeCount, FirstOST: c.FirstOST, ECData: c.ECData, ECParity: c.ECParity}
	if c.Inst && int(c.Base)+int(c.StripeCount) <= len(l.OSTs) {
		s.OSTs = l.OSTs[c.Base : c.Base+c.StripeCount]
	}
	return s
}

// InstEnd is where the instantiated part of l ends: every file byte below
// it has an object. A plain layout is instantiated whole.
func (l Layout) InstEnd() uint64 {
	if !l.IsComposite() {
		return ExtentEOF
	}
	end := uint64(0)
	for _, c := range l.Comps {
		if !c.Inst {
			break
		}
		end = c.End
	}
	return end
}

// End is where l's last component ends: no file byte at or past it can be
// written (EFBIG). A plain layout has no end.
func (l Layout) End() uint64 {
	if !l.IsComposite() {
		return ExtentEOF
	}
	return l.Comps[len(l.Comps)-1].End
}

// CompOf is the index of the component that holds object stripe, or -1.
func (l Layout) CompOf(stripe int) int {
	for i, c := range l.Comps {
		if c.Inst && stripe >= int(c.Base) && stripe < int(c.Base+c.StripeCount) {
			return i
		}
	}
	return -1
}

// InstantiateTo gives objects to every component that starts below end
// and has none yet, in order (the instantiated components are always a
// prefix, so their objects' stripes never move): a count of -1, or one
// larger than the OSTs there are, becomes every OST, a component with
// no first OST starts at start+i, and a Data-on-MDT component's object is
// on mdt, the file's MDT. It returns a new layout and leaves l's slices
// alone (a client may be reading them).
func (l Layout) InstantiateTo(end uint64, nOST, start int, mdt uint32) Layout {
	l.OSTs = slices.Clone(l.OSTs)
	l.Comps = slices.Clone(l.Comps)
	for i := range l.Comps {
		c := &l.Comps[i]
		if c.Inst {
			continue
		}
		if c.Start >= end {
			break
		}
		if c.IsDoM() {
			c.Base, c.Inst = uint32(len(l.OSTs)), true
			l.OSTs = append(l.OSTs, DoMTarget(mdt))
			continue
		}
		if c.StripeCount == AllOSTs || c.StripeCount > uint32(nOST) {
			c.StripeCount = uint32(nOST)
		}
		first := int(c.FirstOST)
		if first < 0 {
			first = (start + i) % nOST
		}
		c.FirstOST, c.Base, c.Inst = int32(first), uint32(len(l.OSTs)), true
		for j := range int(c.StripeCount) {
			l.OSTs = append(l.OSTs, uint32((first+j)%nOST))
		}
	}
	return l.normalized()
}

// normalized sets a composite layout's top-level fields from its
// components.
func (l Layout) normalized() Layout {
	l.StripeSize = l.Comps[0].StripeSize
	l.StripeCount = uint32(len(l.OSTs))
	l.FirstOST = -1
	l.ECData, l.ECParity = 0, 0
	return l
}

// validateComposite checks a composite layout: components in order, each
// starting where the one before ends and ending on its stripe size, each
// a valid plain layout, and the instantiated ones a prefix whose objects
// are the layout's OSTs.
func (l Layout) validateComposite(nOST int) error {
	if len(l.Comps) > MaxComps {
		return fmt.Errorf("%d components, at most %d: %w", len(l.Comps), MaxComps, syscall.EINVAL)
	}
	objs := uint32(0)
	inst := true
	for i, c := range l.Comps {
		var prevEnd uint64
		if i > 0 {
			prevEnd = l.Comps[i-1].End
		}
		switch {
		case c.Start != prevEnd:
			return fmt.Errorf("component %d starts at %d, not where the one before ends (%d): components must be in order without gaps or overlaps: %w",
				i, c.Start, prevEnd, syscall.EINVAL)
		case c.End <= c.Start:
			return fmt.Errorf("component %d: extent [%d, %s) is empty: %w", i, c.Start, extentString(c.End), syscall.EINVAL)
		case c.End == ExtentEOF && i != len(l.Comps)-1:
			return fmt.Errorf("component %d reaches EOF but is not the last: %w", i, syscall.EINVAL)
		case c.End != ExtentEOF && c.StripeSize != 0 && c.End%uint64(c.StripeSize) != 0:
			return fmt.Errorf("component %d: end %d is not a multiple of its stripe size %d: %w", i, c.End, c.StripeSize, syscall.EINVAL)
		}
		if c.ECData != 0 || c.ECParity != 0 {
			if err := l.validateECComp(i); err != nil {
				return err
			}
		}
		if c.IsDoM() {
			if err := validateDoM(i, c); err != nil {
				return err
			}
		} else if err := validateSub(i, c, nOST); err != nil {
			return err
		}
		if c.Inst {
			if !inst {
				return fmt.Errorf("component %d has objects but one before it has none: %w", i, syscall.EINVAL)
			}
			if c.Base != objs || c.StripeCount == AllOSTs {
				return fmt.Errorf("component %d: objects from %d, count %s; the ones before end at %d: %w",
					i, c.Base, countString(c.StripeCount), objs, syscall.EINVAL)
			}
			objs += c.StripeCount
		} else {
			inst = false
		}
	}
	if int(objs) != len(l.OSTs) {
		return fmt.Errorf("components hold %d objects, the layout names %d: %w", objs, len(l.OSTs), syscall.EINVAL)
	}
	if i := l.ECComp(); i >= 0 && l.Comps[i].Inst {
		if err := l.Sub(i).validateEC(nOST); err != nil { // a row's units on distinct OSTs
			return fmt.Errorf("component %d: %w", i, err)
		}
	}
	for s, o := range l.OSTs {
		ci := l.CompOf(s)
		if ci < 0 {
			return fmt.Errorf("object %d belongs to no component: %w", s, syscall.EINVAL)
		}
		dom := l.Comps[ci].IsDoM()
		switch {
		case dom != IsDoMOST(o):
			return fmt.Errorf("object %d is on %s, its component %d has pattern mdt %v: %w", s, OSTName(o), ci, dom, syscall.EINVAL)
		case !dom && int(o) >= nOST:
			return fmt.Errorf("OST index %d does not exist (%d OSTs): %w", o, nOST, syscall.EINVAL)
		}
	}
	return nil
}

// ECComp is the index of l's erasure-coded component, or -1. A composite
// layout has at most one, and it starts and ends on rows of its own
// (validateECComp), so each row of the file is wholly in it or out of it:
// its rows are the file's rows, row r holding bytes [r*rowSize,
// (r+1)*rowSize), and its objects hold nothing below its start.
func (l Layout) ECComp() int {
	for i, c := range l.Comps {
		if c.ECParity != 0 {
			return i
		}
	}
	return -1
}

// validateECComp checks the erasure-coded component i of l: the only one,
// its start and end on its rows.
func (l Layout) validateECComp(i int) error {
	c := l.Comps[i]
	row := uint64(c.ECData) * uint64(c.StripeSize)
	switch {
	case c.ECParity == 0:
		return fmt.Errorf("component %d: erasure coding %d+%d needs at least 1 parity unit: %w", i, c.ECData, c.ECParity, syscall.EINVAL)
	case l.ECComp() != i:
		return fmt.Errorf("component %d: a layout may have one erasure-coded component, component %d is one already: %w", i, l.ECComp(), syscall.EINVAL)
	case row == 0:
		return fmt.Errorf("component %d: erasure coding %d+%d with stripe size %d: %w", i, c.ECData, c.ECParity, c.StripeSize, syscall.EINVAL)
	case c.Start%row != 0 || c.End != ExtentEOF && c.End%row != 0:
		return fmt.Errorf("component %d: extent [%d, %s) of an erasure-coded component must start and end on its rows of %d bytes (ec=%d+%d × stripe size %d): %w",
			i, c.Start, extentString(c.End), row, c.ECData, c.ECParity, c.StripeSize, syscall.EINVAL)
	}
	return nil
}

// validateSub checks component i, striped over OSTs, as a plain layout.
func validateSub(i int, c Comp, nOST int) error {
	sub := Layout{StripeSize: c.StripeSize, StripeCount: c.StripeCount, FirstOST: c.FirstOST, ECData: c.ECData, ECParity: c.ECParity}
	if c.StripeCount != AllOSTs && int(c.StripeCount) > nOST && !c.Inst && c.ECParity == 0 {
		sub.StripeCount = uint32(nOST) // shrinks to the OSTs there are when instantiated
	}
	if err := sub.Validate(nOST); err != nil {
		return fmt.Errorf("component %d: %w", i, err)
	}
	return nil
}

func extentString(e uint64) string {
	if e == ExtentEOF {
		return "EOF"
	}
	return strconv.FormatUint(e, 10)
}

// compositeString renders a composite layout in the LayoutXattr form: one
// line per component, "extent=START-END" and the plain keys.
func (l Layout) compositeString() string {
	var b strings.Builder
	for i := range l.Comps {
		if i > 0 {
			b.WriteByte('\n')
		}
		c := l.Comps[i]
		if c.IsDoM() {
			// Its object is the MDT's: no striping keys.
			fmt.Fprintf(&b, "extent=%d-%s pattern=mdt", c.Start, extentString(c.End))
			if c.Inst && int(c.Base) < len(l.OSTs) {
				fmt.Fprintf(&b, " osts=%s", OSTName(l.OSTs[c.Base]))
			}
			continue
		}
		sub := l.Sub(i)
		sub.FirstOST = c.FirstOST
		fmt.Fprintf(&b, "extent=%d-%s %s", c.Start, extentString(c.End), sub)
	}
	return b.String()
}

// parseComposite reads the composite LayoutXattr form: components on
// their own lines (or separated by ';'), each with extent=START-END
// (END may be EOF or -1). Keys a component leaves out are the previous
// component's, and for the first base's (Lustre's setstripe does the same).
func parseComposite(s string, base Layout) (Layout, error) {
	prev := base
	if base.IsComposite() {
		prev = base.Sub(0)
	}
	prev.OSTs, prev.Comps = nil, nil
	if !prev.IsSet() {
		prev = Layout{StripeSize: DefaultStripeSize, StripeCount: DefaultStripeCount, FirstOST: -1}
	}
	var l Layout
	for _, line := range strings.FieldsFunc(strings.TrimRight(s, "\x00"), func(r rune) bool { return r == '\n' || r == ';' }) {
		var rest []string
		var start, end uint64
		var haveExtent, dom bool
		for _, f := range strings.Fields(line) {
			if p, ok := strings.CutPrefix(f, "pattern="); ok {
				switch p {
				case "mdt":
					dom = true
				case "raid0":
				default:
					return l, fmt.Errorf("layout: pattern=%q: the patterns are raid0 and mdt: %w", p, syscall.EINVAL)
				}
				continue
			}
			v, ok := strings.CutPrefix(f, "extent=")
			if !ok {
				rest = append(rest, f)
				continue
			}
			a, z, ok := strings.Cut(v, "-")
			var err error
			if ok {
				if start, err = strconv.ParseUint(a, 10, 64); err == nil {
					end, err = parseExtentEnd(z)
				}
			}
			if !ok || err != nil {
				return l, fmt.Errorf("layout: extent=%q is not START-END: %w", v, syscall.EINVAL)
			}
			haveExtent = true
		}
		if !haveExtent {
			return l, fmt.Errorf("layout: component %q has no extent=: %w", strings.TrimSpace(line), syscall.EINVAL)
		}
		if dom {
			// The MDT holds the component whole, in one object; the
			// components after it inherit what came before it.
			for _, f := range rest {
				if !strings.HasPrefix(f, "osts=") && !strings.HasPrefix(f, "fid=") {
					return l, fmt.Errorf("layout: a component on the MDT (pattern=mdt) takes no striping keys, got %q: %w", f, syscall.EINVAL)
				}
			}
			l.Comps = append(l.Comps, domComp(end))
			l.Comps[len(l.Comps)-1].Start = start
			continue
		}
		sub, err := ParseLayout(strings.Join(rest, " "), prev)
		if err != nil {
			return l, err
		}
		l.Comps = append(l.Comps, Comp{Start: start, End: end, StripeSize: sub.StripeSize, StripeCount: sub.StripeCount,
			FirstOST: sub.FirstOST, ECData: sub.ECData, ECParity: sub.ECParity})
		prev = sub
		prev.FirstOST = -1 // a first OST is one component's
	}
	if len(l.Comps) == 0 {
		return l, fmt.Errorf("layout: no components: %w", syscall.EINVAL)
	}
	return l.normalized(), nil
}

// parseExtentEnd reads a component's end: bytes, EOF or -1.
func parseExtentEnd(s string) (uint64, error) {
	if s == "EOF" || s == "eof" || s == "-1" {
		return ExtentEOF, nil
	}
	return strconv.ParseUint(s, 10, 64)
}

// MLayoutIntent asks a file's MDT to instantiate the components of its
// composite layout that a write up to End will touch (Lustre's layout
// intent). The reply is the file's attributes with the new layout.
const MLayoutIntent uint16 = MNodemapMine + 1

func init() { methodNames[MLayoutIntent] = "layout_intent" }

// LayoutIntentReq says a client is about to write file bytes below End.
type LayoutIntentReq struct {
	FID FID
	End uint64
}
