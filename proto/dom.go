package proto

import (
	"fmt"
	"strconv"
	"syscall"
)

// Data-on-MDT (Lustre's DoM): the first component of a composite layout
// may keep its bytes on the file's MDT (pattern=mdt) instead of on OSTs,
// so a small file costs MDT round trips only. Its one object is the
// component's stripe 0 as for any component, and the layout names the
// MDT in its OSTs list with DoMOST set: the data path addresses it as
// it addresses an OST object (ost_write, ost_read, ost_punch ... to the
// MDT, which serves those methods for its own files), and everything that
// counts, maps or truncates objects stays as it is.

// DoMFirstOST is the FirstOST of a Data-on-MDT component. The component
// is marked by it, rather than by a field of its own, so that stored
// inodes keep their encoding.
const DoMFirstOST int32 = -2

// DoMOST marks an entry of Layout.OSTs that names an MDT's data (the low
// bits are the MDT's index), not an OST.
const DoMOST uint32 = 1 << 31

// DefaultDoMMax is the largest Data-on-MDT component an MDT accepts
// unless configured otherwise (Lustre's dom_stripesize default).
const DefaultDoMMax = 1 << 20

// DoMTarget is the OSTs entry naming MDT mdt's data.
func DoMTarget(mdt uint32) uint32 { return DoMOST | mdt }

// IsDoMOST reports whether an OSTs entry names an MDT.
func IsDoMOST(o uint32) bool { return o&DoMOST != 0 }

// DoMIndex is the MDT an OSTs entry with DoMOST names.
func DoMIndex(o uint32) uint32 { return o &^ DoMOST }

// OSTName renders an OSTs entry for people: "3", or "mdt0" for an MDT's
// data.
func OSTName(o uint32) string {
	if IsDoMOST(o) {
		return "mdt" + strconv.FormatUint(uint64(DoMIndex(o)), 10)
	}
	return strconv.FormatUint(uint64(o), 10)
}

// IsDoM reports whether c keeps its bytes on the file's MDT.
func (c Comp) IsDoM() bool { return c.FirstOST == DoMFirstOST }

// DoMEnd is where l's Data-on-MDT component ends: 0 without one.
func (l Layout) DoMEnd() uint64 {
	if l.IsComposite() && l.Comps[0].IsDoM() {
		return l.Comps[0].End
	}
	return 0
}

// domComp is the component [0, end) on the MDT.
func domComp(end uint64) Comp {
	return Comp{Start: 0, End: end, StripeSize: uint32(end), StripeCount: 1, FirstOST: DoMFirstOST}
}

// validateDoM checks a Data-on-MDT component (index i of its layout):
// the first, its stripe size its end (one object holds it all), and that
// end a multiple of 64 KiB within MaxStripeSize. How large an MDT lets it
// be is the MDT's to say (CheckDoMMax).
func validateDoM(i int, c Comp) error {
	switch {
	case i != 0:
		return fmt.Errorf("component %d: only the first component may be on the MDT (pattern=mdt): %w", i, syscall.EINVAL)
	case c.End == ExtentEOF:
		return fmt.Errorf("component 0 on the MDT reaches EOF: Data-on-MDT holds a file's first bytes only, give it an end: %w", syscall.EINVAL)
	case c.End%MinStripeSize != 0 || c.End > MaxStripeSize:
		return fmt.Errorf("component 0 on the MDT ends at %d: must be a multiple of 64 KiB up to %d: %w", c.End, MaxStripeSize, syscall.EINVAL)
	case uint64(c.StripeSize) != c.End || c.StripeCount != 1:
		return fmt.Errorf("component 0 on the MDT: stripe size %d and count %s, must be its end (%d) and 1: %w",
			c.StripeSize, countString(c.StripeCount), c.End, syscall.EINVAL)
	case c.ECData != 0 || c.ECParity != 0:
		return fmt.Errorf("component 0 on the MDT cannot be erasure-coded: %w", syscall.EINVAL)
	}
	return nil
}

// CheckDoMMax refuses a layout whose Data-on-MDT component is larger
// than max, the MDT's limit (0: the MDT keeps no file data).
func (l Layout) CheckDoMMax(max uint64) error {
	end := l.DoMEnd()
	switch {
	case end == 0:
		return nil
	case max == 0:
		return fmt.Errorf("Data-on-MDT (pattern=mdt): this filesystem's MDTs keep no file data: %w", syscall.EINVAL)
	case end > max:
		return fmt.Errorf("Data-on-MDT component of %d bytes: the MDT allows at most %d (dom_stripesize): %w", end, max, syscall.EINVAL)
	}
	return nil
}
