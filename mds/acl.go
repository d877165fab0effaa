package mds

import (
	"context"
	"fmt"
	"syscall"

	"github.com/stripefs/stripefs/perm"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// POSIX ACLs. An inode carries its access ACL in Attr.ACL, so that every
// permission check here, in a client's cache and in the NFS gateway sees
// it with the mode, and a directory its default ACL in DefACL. With
// FUSE's ACL capability the kernel leaves to the filesystem what ext4
// does in posix_acl_update_mode, posix_acl_create and posix_acl_chmod:
// the MDT does it, so every client gets the same answer.

// newOwner is the owner, mode and ACLs of a new inode of mode (with its
// type bits) made by c in dir, with the creator's umask: perm.NewOwner's
// setgid rules, then dir's default ACL in place of the umask.
func newOwner(dir *inode, mode, umask uint32, c *rpc.Cred) (a proto.Attr, defACL string) {
	uid, gid, mode := perm.NewOwner(&dir.Attr, mode, c)
	mode, acl, def := perm.CreateACL(dir.DefACL, mode, umask)
	return proto.Attr{Mode: mode, Uid: uid, Gid: gid, ACL: acl}, def
}

// isACLXattr reports the names under which ACLs are read and set.
func isACLXattr(name string) bool {
	return name == perm.ACLAccessXattr || name == perm.ACLDefaultXattr
}

// aclOf is the ACL name names on n, empty when it has none.
func aclOf(n *inode, name string) string {
	if name == perm.ACLAccessXattr {
		return n.Attr.ACL
	}
	return n.DefACL
}

// setACL sets (value of no entries: removes) n's ACL name for c, which
// perm.SetXattr has let change it, with setxattr's flags. The access
// ACL rewrites the mode's permission bits, and is kept only when the
// mode cannot say the same; setting it drops setgid for one outside
// the file's group, as the kernel does for a local filesystem. m.mu is
// held; n is written by the caller.
func (m *MDT) setACL(n *inode, name string, value []byte, flags uint32, c *rpc.Cred) error {
	acl, err := perm.ParseACL(value)
	if err != nil {
		return fmt.Errorf("mdt%d: setxattr %q on %s: %w", m.cfg.Index, name, n.Attr.FID, err)
	}
	exists := aclOf(n, name) != ""
	switch {
	case flags&xattrCreate != 0 && exists:
		return m.errorf("setxattr", name, syscall.EEXIST)
	case flags&xattrReplace != 0 && !exists:
		return m.errorf("setxattr", name, syscall.ENODATA)
	}
	if name == perm.ACLDefaultXattr {
		if !n.isDir() {
			return m.errorf("setxattr", name, syscall.EACCES) // as set_posix_acl
		}
		n.DefACL = acl.String()
		return nil
	}
	if acl != nil {
		mode, equiv := acl.EquivMode(n.Attr.Mode)
		n.Attr.Mode = mode
		if equiv {
			acl = nil
		}
		if !perm.IsRoot(c) && !c.InGroup(n.Attr.Gid) {
			n.Attr.Mode &^= sISGID
		}
	}
	n.Attr.ACL = acl.String()
	return nil
}

// chmodACL makes n's access ACL follow a new mode (posix_acl_chmod).
func chmodACL(n *inode) {
	if n.Attr.ACL != "" {
		n.Attr.ACL = perm.ChmodACL(n.Attr.ACL, n.Attr.Mode)
	}
}

// aclXattr answers getxattr of an ACL.
func aclXattr(n *inode, name string) (any, error) {
	v := aclOf(n, name)
	if v == "" {
		return nil, syscall.ENODATA
	}
	return &proto.XattrReply{Value: []byte(v)}, nil
}

// aclNames are the ACL names listxattr shows for n.
func aclNames(n *inode) []string {
	var out []string
	if n.Attr.ACL != "" {
		out = append(out, perm.ACLAccessXattr)
	}
	if n.DefACL != "" {
		out = append(out, perm.ACLDefaultXattr)
	}
	return out
}

// aclChange is setxattr or removexattr of an ACL on r.FID: checked,
// applied, and committed with a new ctime.
func (m *MDT) aclChange(ctx context.Context, n *inode, r *proto.XattrReq, remove bool) error {
	if remove {
		if aclOf(n, r.Name) == "" {
			return syscall.ENODATA
		}
		if r.Name == perm.ACLAccessXattr {
			n.Attr.ACL = ""
		} else {
			n.DefACL = ""
		}
	} else if err := m.setACL(n, r.Name, r.Value, r.Flags, m.cred(ctx)); err != nil {
		return err
	}
	n.Attr.Ctime = now()
	b := m.newBatch(ctx)
	m.putInode(b, n)
	return m.commit(b, false)
}
