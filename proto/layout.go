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
)

// Layout says where a regular file's bytes live: stripe unit i of the file
// goes to object i%StripeCount, held by OST OSTs[i%StripeCount].
type Layout struct {
	StripeSize  uint32
	StripeCount uint32
	// FirstOST is the OST of stripe 0 as requested; -1 lets the MDT choose.
	FirstOST int32
	// OSTs holds the OST index of each stripe, fixed when the layout is
	// instantiated at create time.
	OSTs []uint32
}

// IsSet reports whether l carries a stripe size (a directory default or a
// file layout), as opposed to "inherit".
func (l Layout) IsSet() bool { return l.StripeSize != 0 }

// Validate checks a requested layout against the number of OSTs. A count
// of -1 (all OSTs) must be resolved before calling it.
func (l Layout) Validate(nOST int) error {
	switch {
	case l.StripeSize == 0 || l.StripeSize%MinStripeSize != 0:
		return fmt.Errorf("stripe size %d is not a positive multiple of 64 KiB: %w", l.StripeSize, syscall.EINVAL)
	case l.StripeSize > MaxStripeSize:
		return fmt.Errorf("stripe size %d is over the %d limit: %w", l.StripeSize, MaxStripeSize, syscall.EINVAL)
	case l.StripeCount == 0:
		return fmt.Errorf("stripe count 0: %w", syscall.EINVAL)
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

// Instantiate fixes the OST of each stripe, starting at FirstOST or, when
// that is -1, at start.
func (l Layout) Instantiate(nOST int, start int) Layout {
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
// set may give any subset of the keys (osts is read-only).
const LayoutXattr = "lustre.lov"

// AllOSTs as a stripe count means "stripe over every OST" (-c -1).
const AllOSTs = ^uint32(0)

// String renders l in the LayoutXattr form.
func (l Layout) String() string {
	var b strings.Builder
	count := strconv.FormatUint(uint64(l.StripeCount), 10)
	if l.StripeCount == AllOSTs {
		count = "-1"
	}
	fmt.Fprintf(&b, "stripe_count=%s stripe_size=%d stripe_offset=%d", count, l.StripeSize, l.FirstOST)
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
// in base; osts is ignored (the MDT chooses OSTs at create time).
func ParseLayout(s string, base Layout) (Layout, error) {
	l := base
	l.OSTs = nil
	for _, f := range strings.Fields(strings.TrimRight(s, "\x00")) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return l, fmt.Errorf("layout: %q is not key=value: %w", f, syscall.EINVAL)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil && k != "osts" && k != "fid" {
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
		default:
			return l, fmt.Errorf("layout: unknown key %q: %w", k, syscall.EINVAL)
		}
	}
	return l, nil
}
