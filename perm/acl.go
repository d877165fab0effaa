package perm

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/stripefs/stripefs/rpc"
)

// POSIX ACLs as Linux keeps them (fs/posix_acl.c), in the form of the
// system.posix_acl_access and system.posix_acl_default extended
// attributes: a little-endian version word, then 8-byte entries of tag,
// permission bits and id. The MDT stores that form as it is, so what
// getfacl reads back is byte for byte what setfacl wrote, and decides
// with it (AccessACL, CreateACL, ChmodACL) as the kernel decides for a
// local filesystem.

// Names of the ACL extended attributes.
const (
	ACLAccessXattr  = "system.posix_acl_access"
	ACLDefaultXattr = "system.posix_acl_default"
)

// Entry tags, as in <linux/posix_acl.h>.
const (
	TagUserObj  = 0x01
	TagUser     = 0x02
	TagGroupObj = 0x04
	TagGroup    = 0x08
	TagMask     = 0x10
	TagOther    = 0x20
)

const (
	aclVersion  = 2
	aclHeader   = 4
	aclEntry    = 8
	undefinedID = ^uint32(0)
	// aclMaxEntries bounds an ACL as ext4's block does: more would not
	// fit an xattr Linux can set anyway.
	aclMaxEntries = 1024
)

// ACLEntry is one entry of an ACL. ID is a uid for TagUser, a gid for
// TagGroup, and unused for the rest.
type ACLEntry struct {
	Tag  uint16
	Perm uint16
	ID   uint32
}

// ACL is a parsed ACL, its entries in the order Linux keeps them
// (posix_acl_valid): owner, named users by uid, owning group, named
// groups by gid, mask, other.
type ACL []ACLEntry

// ParseACL reads the xattr form of an ACL and checks it as
// posix_acl_valid does. An ACL of no entries (the header alone) parses
// as nil, which setfacl means as "remove".
func ParseACL(b []byte) (ACL, error) {
	if len(b) < aclHeader || (len(b)-aclHeader)%aclEntry != 0 {
		return nil, fmt.Errorf("acl: %d bytes is not a header and whole entries: %w", len(b), syscall.EINVAL)
	}
	if v := binary.LittleEndian.Uint32(b); v != aclVersion {
		return nil, fmt.Errorf("acl: version %d, want %d: %w", v, aclVersion, syscall.EOPNOTSUPP)
	}
	n := (len(b) - aclHeader) / aclEntry
	if n == 0 {
		return nil, nil
	}
	if n > aclMaxEntries {
		return nil, fmt.Errorf("acl: %d entries: %w", n, syscall.E2BIG)
	}
	acl := make(ACL, n)
	for i := range acl {
		p := b[aclHeader+i*aclEntry:]
		e := ACLEntry{Tag: binary.LittleEndian.Uint16(p), Perm: binary.LittleEndian.Uint16(p[2:]), ID: binary.LittleEndian.Uint32(p[4:])}
		if e.Tag != TagUser && e.Tag != TagGroup {
			e.ID = undefinedID
		}
		acl[i] = e
	}
	if err := acl.valid(); err != nil {
		return nil, err
	}
	return acl, nil
}

// valid is posix_acl_valid: entries in tag order, one of each object
// entry, named ids ascending without repeats, a mask when there are named
// entries, and permission bits within rwx.
func (acl ACL) valid() error {
	bad := func(why string) error { return fmt.Errorf("acl: %s: %w", why, syscall.EINVAL) }
	state := TagUserObj
	needMask, haveMask := false, false
	var lastID uint32
	first := true
	for _, e := range acl {
		if e.Perm&^7 != 0 {
			return bad("permission bits beyond rwx")
		}
		switch e.Tag {
		case TagUserObj:
			if state != TagUserObj {
				return bad("owner entry out of place")
			}
			state, first = TagUser, true
		case TagUser:
			if state != TagUser {
				return bad("named user out of place")
			}
			if !first && e.ID <= lastID {
				return bad("named users not in ascending order")
			}
			lastID, first, needMask = e.ID, false, true
		case TagGroupObj:
			if state != TagUser {
				return bad("owning group entry out of place")
			}
			state, first = TagGroup, true
		case TagGroup:
			if state != TagGroup {
				return bad("named group out of place")
			}
			if !first && e.ID <= lastID {
				return bad("named groups not in ascending order")
			}
			lastID, first, needMask = e.ID, false, true
		case TagMask:
			if state != TagGroup {
				return bad("mask out of place")
			}
			state, haveMask = TagOther, true
		case TagOther:
			if state == TagGroup {
				state = TagOther
			}
			if state != TagOther {
				return bad("other entry out of place")
			}
			state = 0
		default:
			return bad(fmt.Sprintf("unknown tag %#x", e.Tag))
		}
	}
	if state != 0 {
		return bad("missing owner, owning group or other entry")
	}
	if needMask && !haveMask {
		return bad("named entries without a mask")
	}
	return nil
}

// Bytes is the xattr form of acl.
func (acl ACL) Bytes() []byte {
	b := make([]byte, aclHeader, aclHeader+len(acl)*aclEntry)
	binary.LittleEndian.PutUint32(b, aclVersion)
	for _, e := range acl {
		b = binary.LittleEndian.AppendUint16(b, e.Tag)
		b = binary.LittleEndian.AppendUint16(b, e.Perm)
		b = binary.LittleEndian.AppendUint32(b, e.ID)
	}
	return b
}

// String is the xattr form as a string, as inodes carry it.
func (acl ACL) String() string {
	if len(acl) == 0 {
		return ""
	}
	return string(acl.Bytes())
}

// mustACL parses an ACL the MDT stored itself: it was checked when set.
func mustACL(s string) ACL {
	acl, err := ParseACL([]byte(s))
	if err != nil {
		return nil
	}
	return acl
}

// EquivMode is posix_acl_equiv_mode: the permission bits acl gives the
// owner, the group class (the mask when there is one) and others, in
// place of mode's, and whether the mode alone says all that acl says.
func (acl ACL) EquivMode(mode uint32) (newMode uint32, equiv bool) {
	newMode, equiv = mode&^0o777, true
	for _, e := range acl {
		p := uint32(e.Perm & 7)
		switch e.Tag {
		case TagUserObj:
			newMode |= p << 6
		case TagGroupObj:
			if !acl.hasMask() {
				newMode |= p << 3
			}
		case TagMask:
			newMode |= p << 3
			equiv = false
		case TagOther:
			newMode |= p
		default:
			equiv = false
		}
	}
	return newMode, equiv
}

func (acl ACL) hasMask() bool {
	for _, e := range acl {
		if e.Tag == TagMask {
			return true
		}
	}
	return false
}

// Chmod is posix_acl_chmod: the ACL after chmod(mode), whose owner,
// other and mask (else owning group) entries follow the new bits.
func (acl ACL) Chmod(mode uint32) ACL {
	out := append(ACL(nil), acl...)
	mask := out.hasMask()
	for i := range out {
		switch e := &out[i]; e.Tag {
		case TagUserObj:
			e.Perm = uint16(mode>>6) & 7
		case TagGroupObj:
			if !mask {
				e.Perm = uint16(mode>>3) & 7
			}
		case TagMask:
			e.Perm = uint16(mode>>3) & 7
		case TagOther:
			e.Perm = uint16(mode) & 7
		}
	}
	return out
}

// createMasq is posix_acl_create_masq: a parent's default ACL masked by
// the mode a new inode is created with. It returns the new inode's access
// ACL and mode; the ACL is nil when the mode says it all.
func (acl ACL) createMasq(mode uint32) (ACL, uint32) {
	out := append(ACL(nil), acl...)
	equiv := true
	var group, mask *ACLEntry
	for i := range out {
		switch e := &out[i]; e.Tag {
		case TagUserObj:
			e.Perm &= uint16(mode>>6) & 7
			mode &= uint32(e.Perm)<<6 | ^uint32(0o700)
		case TagUser, TagGroup:
			equiv = false
		case TagGroupObj:
			group = e
		case TagOther:
			e.Perm &= uint16(mode) & 7
			mode &= uint32(e.Perm) | ^uint32(0o7)
		case TagMask:
			mask, equiv = e, false
		}
	}
	if mask == nil {
		mask = group
	}
	if mask != nil {
		mask.Perm &= uint16(mode>>3) & 7
		mode &= uint32(mask.Perm)<<3 | ^uint32(0o70)
	}
	if equiv {
		return nil, mode
	}
	return out, mode
}

// CreateACL is posix_acl_create for a new inode of mode (with its type
// bits) under a directory whose default ACL is dirDefault: without one,
// the umask applies; with one, it replaces the umask, the new inode's
// access ACL is the default masked by mode, and a new directory inherits
// the default itself. Symlinks take neither.
func CreateACL(dirDefault string, mode, umask uint32) (newMode uint32, access, def string) {
	if mode&sIFMT == sIFLNK {
		return mode, "", ""
	}
	d := mustACL(dirDefault)
	if d == nil {
		return mode &^ (umask & 0o777), "", ""
	}
	a, newMode := d.createMasq(mode)
	if mode&sIFMT == sIFDIR {
		def = dirDefault
	}
	return newMode, a.String(), def
}

// accessACL is posix_acl_permission: c's access to a file whose access
// ACL is acl, owned by uid and gid. The owner gets the owner entry's
// bits; a named user its entry's bits within the mask; a member of the
// owning or a named group the union of its groups' entries within the
// mask; anyone else the other entry's.
func accessACL(acl ACL, uid, gid uint32, c *rpc.Cred, want Want) error {
	var mask uint16 = 7
	for _, e := range acl {
		if e.Tag == TagMask {
			mask = e.Perm
		}
	}
	ok := func(p uint16) bool { return Want(p&7)&want == want }
	inGroup := false
	for _, e := range acl {
		switch e.Tag {
		case TagUserObj:
			if c.Uid == uid {
				return allowed(ok(e.Perm))
			}
		case TagUser:
			if c.Uid == e.ID {
				return allowed(ok(e.Perm & mask))
			}
		case TagGroupObj:
			if c.InGroup(gid) {
				inGroup = true
				if ok(e.Perm & mask) {
					return nil
				}
			}
		case TagGroup:
			if c.InGroup(e.ID) {
				inGroup = true
				if ok(e.Perm & mask) {
					return nil
				}
			}
		case TagOther:
			if inGroup {
				return syscall.EACCES
			}
			return allowed(ok(e.Perm))
		}
	}
	return syscall.EACCES
}

func allowed(ok bool) error {
	if ok {
		return nil
	}
	return syscall.EACCES
}

// ChmodACL is Chmod of an ACL in its xattr form.
func ChmodACL(acl string, mode uint32) string {
	return mustACL(acl).Chmod(mode).String()
}
