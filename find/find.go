// Package find is stripefs find, Lustre's lfs find: the files under a
// path that match predicates (-name, -size, -newer, -type, --mdt,
// --ost), found by an ordinary walk of the mount, or, for a whole
// filesystem, from every MDT's own inodes and entries at once (Scan),
// in far fewer round trips. Predicates mean what find(1) means by them.
package find

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"syscall"
)

// Pred is a conjunction of predicates; the zero value matches all.
type Pred struct {
	Name     string // -name: a shell pattern on the last element
	Type     byte   // -type: 'f', 'd' or 'l'; 0 any
	Size     *Size  // -size
	Newer    int64  // -newer: mtime after this (unix nanoseconds); 0 none
	HasNewer bool
	MDT      int // --mdt: the inode's MDT; -1 any
	OST      int // --ost: an object on this OST; -1 any
}

// Entry is what the predicates look at.
type Entry struct {
	Path  string
	Mode  uint32 // st_mode
	Size  uint64
	Mtime int64 // unix nanoseconds
	MDT   int
	OSTs  []uint32 // a regular file's objects' OSTs
}

// Size is find's -size: [+-]N[ckMG], N units of 512 bytes by default,
// the file's size rounded up to whole units.
type Size struct {
	Cmp  int // -1: less than, 0: exactly, +1: more than
	N    uint64
	Unit uint64
}

// ParseSize reads -size's argument.
func ParseSize(s string) (*Size, error) {
	z := &Size{Unit: 512}
	switch {
	case strings.HasPrefix(s, "+"):
		z.Cmp, s = 1, s[1:]
	case strings.HasPrefix(s, "-"):
		z.Cmp, s = -1, s[1:]
	}
	if s == "" {
		return nil, fmt.Errorf("-size: no number: %w", syscall.EINVAL)
	}
	units := map[byte]uint64{'c': 1, 'w': 2, 'b': 512, 'k': 1 << 10, 'M': 1 << 20, 'G': 1 << 30, 'T': 1 << 40}
	if u, ok := units[s[len(s)-1]]; ok {
		z.Unit, s = u, s[:len(s)-1]
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("-size %q: %w", s, syscall.EINVAL)
	}
	z.N = n
	return z, nil
}

func (z *Size) match(size uint64) bool {
	units := (size + z.Unit - 1) / z.Unit
	switch z.Cmp {
	case 1:
		return units > z.N
	case -1:
		return units < z.N
	}
	return units == z.N
}

// NoMDT and NoOST leave --mdt and --ost out.
const (
	NoMDT = -1
	NoOST = -1
)

// Match reports whether e satisfies every predicate of p.
func (p *Pred) Match(e *Entry) bool {
	if p.Name != "" {
		if ok, _ := path.Match(p.Name, path.Base(e.Path)); !ok {
			return false
		}
	}
	switch p.Type {
	case 'f':
		if e.Mode&syscall.S_IFMT != syscall.S_IFREG {
			return false
		}
	case 'd':
		if e.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return false
		}
	case 'l':
		if e.Mode&syscall.S_IFMT != syscall.S_IFLNK {
			return false
		}
	}
	if p.Size != nil && !p.Size.match(e.Size) {
		return false
	}
	if p.HasNewer && e.Mtime <= p.Newer {
		return false
	}
	if p.MDT != NoMDT && e.MDT != p.MDT {
		return false
	}
	if p.OST != NoOST {
		found := false
		for _, o := range e.OSTs {
			found = found || int(o) == p.OST
		}
		if !found {
			return false
		}
	}
	return true
}

// NeedsLayout reports whether p looks at where entries live (--mdt,
// --ost), which a walk reads from xattrs.
func (p *Pred) NeedsLayout() bool { return p.MDT != NoMDT || p.OST != NoOST }
