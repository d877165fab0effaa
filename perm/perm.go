// Package perm decides POSIX permissions: who may look up, read, write,
// create and remove, change attributes and extended attributes, as Linux
// decides them for a local filesystem (generic_permission, may_delete,
// setattr_prepare, xattr_permission). It is pure: the MDT asks it with
// the attributes it holds and the caller's credential, and a client asks
// it the same for what it answers from its cache, so both give the same
// answers.
package perm

import (
	"strings"
	"syscall"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Want is what an access asks for, as the mask of access(2).
type Want uint32

const (
	Exec  Want = 1
	Write Want = 2
	Read  Want = 4
)

const (
	sIFMT  = 0o170000
	sIFDIR = 0o040000
	sIFREG = 0o100000
	sIFLNK = 0o120000
	sISUID = 0o4000
	sISGID = 0o2000
	sISVTX = 0o1000
	sIXGRP = 0o010
)

// Root is the credential of the superuser.
var Root = &rpc.Cred{}

// IsRoot reports whether c is the superuser (CAP_DAC_OVERRIDE and
// CAP_FOWNER, which root holds and stripefs does not split).
func IsRoot(c *rpc.Cred) bool { return c.Uid == 0 }

// Owns reports whether c owns a, or is root (inode_owner_or_capable).
func Owns(a *proto.Attr, c *rpc.Cred) bool { return IsRoot(c) || c.Uid == a.Uid }

// Access reports whether c may access a as want asks: by a's access ACL
// when it has one, else by its mode. Root may do anything but execute a
// file nobody may execute.
func Access(a *proto.Attr, c *rpc.Cred, want Want) error {
	mode := a.Mode
	if IsRoot(c) {
		if want&Exec != 0 && mode&sIFMT != sIFDIR && mode&0o111 == 0 {
			return syscall.EACCES
		}
		return nil
	}
	if a.ACL != "" && c.Uid != a.Uid {
		if acl := mustACL(a.ACL); acl != nil {
			return accessACL(acl, a.Uid, a.Gid, c, want)
		}
	}
	var bits uint32
	switch {
	case c.Uid == a.Uid:
		bits = mode >> 6
	case c.InGroup(a.Gid):
		bits = mode >> 3
	default:
		bits = mode
	}
	if Want(bits&7)&want != want {
		return syscall.EACCES
	}
	return nil
}

// Open is what open flags ask of a file: reading, writing, or both, and
// writing for O_TRUNC.
func Open(flags uint32) Want {
	var w Want
	switch flags & syscall.O_ACCMODE {
	case syscall.O_RDONLY:
		w = Read
	case syscall.O_WRONLY:
		w = Write
	default:
		w = Read | Write
	}
	if flags&syscall.O_TRUNC != 0 {
		w |= Write
	}
	return w
}

// Writes reports whether open flags write.
func Writes(flags uint32) bool { return Open(flags)&Write != 0 }

// Create checks that c may add a name to dir: write and search.
func Create(dir *proto.Attr, c *rpc.Cred) error {
	if dir.Mode&sIFMT != sIFDIR {
		return syscall.ENOTDIR
	}
	return Access(dir, c, Write|Exec)
}

// Remove checks that c may remove victim's name from dir: write and
// search on dir, and in a sticky directory also owning dir or victim
// (may_delete's check_sticky).
func Remove(dir, victim *proto.Attr, c *rpc.Cred) error {
	if err := Create(dir, c); err != nil {
		return err
	}
	if dir.Mode&sISVTX != 0 && !IsRoot(c) && c.Uid != dir.Uid && c.Uid != victim.Uid {
		return syscall.EPERM
	}
	return nil
}

// Rename checks a rename of src from sdir to ddir, replacing dst (nil:
// none): removing src from sdir, adding to ddir (and removing dst from
// it), and, for a directory moving to another parent, writing its ".."
// (vfs_rename's MAY_WRITE on the source directory).
func Rename(sdir, src, ddir, dst *proto.Attr, c *rpc.Cred) error {
	if err := Remove(sdir, src, c); err != nil {
		return err
	}
	if dst != nil {
		if err := Remove(ddir, dst, c); err != nil {
			return err
		}
	} else if err := Create(ddir, c); err != nil {
		return err
	}
	if src.Mode&sIFMT == sIFDIR && sdir.FID != ddir.FID {
		return Access(src, c, Write)
	}
	return nil
}

// NewOwner is the owner a new inode in dir gets: the caller's ids, and
// the directory's group when it is setgid (a new directory inherits the
// bit too). The returned mode is mode with that adjustment.
func NewOwner(dir *proto.Attr, mode uint32, c *rpc.Cred) (uid, gid, newMode uint32) {
	uid, gid, newMode = c.Uid, c.Gid, mode
	if dir.Mode&sISGID != 0 {
		gid = dir.Gid
		if mode&sIFMT == sIFDIR {
			newMode |= sISGID
		}
	}
	if newMode&sISGID != 0 && newMode&sIFMT != sIFDIR && !IsRoot(c) && !c.InGroup(gid) {
		newMode &^= sISGID // inode_init_owner: setgid only in one's own group
	}
	return
}

// Setattr checks a change of a's attributes by c (setattr_prepare) and
// returns the mode bits the change clears besides: chmod by one outside
// the file's group drops setgid, chown of a non-directory drops setuid
// and a group-executable setgid. write tells whether c may write
// the file (open for writing, or the mode lets it).
func Setattr(a *proto.Attr, r *proto.SetattrReq, c *rpc.Cred, write bool) (clear uint32, err error) {
	owner := Owns(a, c)
	// chown_ok and chgrp_ok: the owner may "change" the owner to
	// itself, and the group to one of its groups; others, nothing.
	if r.Valid&proto.SetUid != 0 && !IsRoot(c) && (c.Uid != a.Uid || r.Uid != a.Uid) {
		return 0, syscall.EPERM
	}
	if r.Valid&proto.SetGid != 0 && !IsRoot(c) && (c.Uid != a.Uid || r.Gid != a.Gid && !c.InGroup(r.Gid)) {
		return 0, syscall.EPERM
	}
	if r.Valid&proto.SetMode != 0 {
		if !owner {
			return 0, syscall.EPERM
		}
		gid := a.Gid
		if r.Valid&proto.SetGid != 0 {
			gid = r.Gid
		}
		if r.Mode&sISGID != 0 && !IsRoot(c) && !c.InGroup(gid) {
			clear |= sISGID
		}
	}
	if r.Valid&(proto.SetUid|proto.SetGid) != 0 && a.Mode&sIFMT != sIFDIR {
		// chown_common: any chown of a non-directory, even root's.
		clear |= sISUID
		if a.Mode&sIXGRP != 0 {
			clear |= sISGID
		}
	}
	if r.Valid&proto.SetSize != 0 && !write {
		return 0, syscall.EACCES
	}
	// Times: to the present, the owner or a writer; to a given time,
	// the owner only (utimensat).
	if r.Valid&(proto.SetAtime|proto.SetMtime) != 0 && !owner {
		return 0, syscall.EPERM
	}
	if r.Valid&(proto.SetAtimeNow|proto.SetMtimeNow) != 0 && !owner && !write {
		return 0, syscall.EACCES
	}
	if r.Valid&proto.SetCtime != 0 && !owner {
		return 0, syscall.EPERM
	}
	return clear, nil
}

// Namespaces of extended attributes, by prefix.
const (
	UserPrefix     = "user."
	TrustedPrefix  = "trusted."
	SecurityPrefix = "security."
	SystemPrefix   = "system."
)

// RootXattr reports names only root may set, whatever the file's mode:
// besides trusted.*, what decides quotas (limits, a file's project).
func RootXattr(name string) bool {
	return strings.HasPrefix(name, TrustedPrefix) || strings.HasPrefix(name, proto.QuotaXattrPrefix) || name == proto.ProjidXattr
}

// OwnerXattr reports names the owner (or root) may set: ACLs and
// stripefs's layouts (lfs setstripe and setdirstripe).
func OwnerXattr(name string) bool {
	return strings.HasPrefix(name, SystemPrefix+"posix_acl_") || strings.HasPrefix(name, "lustre.")
}

// GetXattr checks that c may read a's extended attribute name
// (xattr_permission): trusted.* is root's alone, user.* needs read
// permission, the rest (security, system, layouts, quotas) any caller.
func GetXattr(a *proto.Attr, name string, c *rpc.Cred) error {
	switch {
	case strings.HasPrefix(name, TrustedPrefix):
		if !IsRoot(c) {
			return syscall.ENODATA // as Linux: unprivileged readers see none
		}
		return nil
	case strings.HasPrefix(name, UserPrefix):
		return Access(a, c, Read)
	}
	return nil
}

// SetXattr checks that c may set or remove a's extended attribute name.
func SetXattr(a *proto.Attr, name string, c *rpc.Cred) error {
	switch {
	case RootXattr(name), strings.HasPrefix(name, SecurityPrefix):
		if !IsRoot(c) {
			return syscall.EPERM
		}
		return nil
	case OwnerXattr(name):
		if !Owns(a, c) {
			return syscall.EPERM
		}
		return nil
	case strings.HasPrefix(name, UserPrefix):
		t := a.Mode & sIFMT
		if t != sIFREG && t != sIFDIR {
			return syscall.EPERM
		}
		if t == sIFDIR && a.Mode&sISVTX != 0 && !Owns(a, c) {
			return syscall.EPERM
		}
	}
	return Access(a, c, Write)
}
