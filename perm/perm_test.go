package perm

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

var (
	alice = &rpc.Cred{Uid: 1000, Gid: 1000}
	bob   = &rpc.Cred{Uid: 1001, Gid: 1001, Groups: []uint32{50}}
	eve   = &rpc.Cred{Uid: 1002, Gid: 1002}
)

func file(mode, uid, gid uint32) *proto.Attr {
	return &proto.Attr{Mode: sIFREG | mode, Uid: uid, Gid: gid}
}

func dir(mode, uid, gid uint32) *proto.Attr {
	return &proto.Attr{Mode: sIFDIR | mode, Uid: uid, Gid: gid}
}

func is(err, want error) bool {
	if want == nil {
		return err == nil
	}
	return errors.Is(err, want)
}

func TestAccess(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    *proto.Attr
		c    *rpc.Cred
		want Want
		err  error
	}{
		{"owner reads 0600", file(0o600, 1000, 1000), alice, Read, nil},
		{"other reads 0600", file(0o600, 1000, 1000), eve, Read, syscall.EACCES},
		{"group member by supplementary group", file(0o640, 1000, 50), bob, Read, nil},
		{"group bits do not apply to the owner", file(0o070, 1000, 1000), alice, Read, syscall.EACCES},
		{"other bits do not apply to the group", file(0o604, 1000, 50), bob, Read, syscall.EACCES},
		{"root reads 0000", file(0, 1000, 1000), Root, Read | Write, nil},
		{"root cannot exec a file nobody may", file(0o600, 1000, 1000), Root, Exec, syscall.EACCES},
		{"root searches a 0000 directory", dir(0, 1000, 1000), Root, Exec, nil},
		{"search without x", dir(0o666, 1000, 1000), eve, Exec, syscall.EACCES},
		{"write and search", dir(0o733, 1000, 1000), eve, Write | Exec, nil},
	} {
		if err := Access(tc.a, tc.c, tc.want); !is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
}

func TestRemoveAndRename(t *testing.T) {
	tmp := dir(0o1777, 0, 0)
	open := dir(0o777, 0, 0)
	mine := file(0o644, 1000, 1000)
	for _, tc := range []struct {
		name string
		err  error
		got  error
	}{
		{"sticky: another's file", syscall.EPERM, Remove(tmp, mine, eve)},
		{"sticky: own file", nil, Remove(tmp, mine, alice)},
		{"sticky: the directory's owner", nil, Remove(dir(0o1777, 1002, 0), mine, eve)},
		{"sticky: root", nil, Remove(tmp, mine, Root)},
		{"no sticky bit", nil, Remove(open, mine, eve)},
		{"no write on the directory", syscall.EACCES, Remove(dir(0o755, 0, 0), mine, alice)},
		{"rename out of a sticky dir", syscall.EPERM, Rename(tmp, mine, open, nil, eve)},
		{"rename over another's file in a sticky dir", syscall.EPERM, Rename(open, file(0o644, 1002, 0), tmp, mine, eve)},
		{"directory to another parent needs write on itself", syscall.EACCES,
			Rename(open, &proto.Attr{FID: proto.FID{Oid: 9}, Mode: sIFDIR | 0o555, Uid: 1002}, &proto.Attr{FID: proto.FID{Oid: 2}, Mode: sIFDIR | 0o777}, nil, eve)},
		{"not a directory", syscall.ENOTDIR, Create(mine, alice)},
	} {
		if !is(tc.got, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.err)
		}
	}
}

func TestSetattr(t *testing.T) {
	f := file(0o6755, 1000, 1000)
	for _, tc := range []struct {
		name  string
		a     *proto.Attr
		r     proto.SetattrReq
		c     *rpc.Cred
		write bool
		clear uint32
		err   error
	}{
		{"only root chowns", f, proto.SetattrReq{Valid: proto.SetUid, Uid: 1002}, alice, true, 0, syscall.EPERM},
		{"a non-owner's chown to the same owner", f, proto.SetattrReq{Valid: proto.SetUid | proto.SetGid, Uid: 1000, Gid: 1000}, eve, true, 0, syscall.EPERM},
		{"the owner's chown to itself", f, proto.SetattrReq{Valid: proto.SetUid, Uid: 1000}, alice, true, sISUID | sISGID, nil},
		{"root chowns, setuid and setgid go", f, proto.SetattrReq{Valid: proto.SetUid, Uid: 1002}, Root, true, sISUID | sISGID, nil},
		{"owner chgrps to own group", file(0o644, 1001, 1001), proto.SetattrReq{Valid: proto.SetGid, Gid: 50}, bob, true, sISUID, nil},
		{"owner chgrps to another group", file(0o644, 1001, 1001), proto.SetattrReq{Valid: proto.SetGid, Gid: 60}, bob, true, 0, syscall.EPERM},
		{"chmod of another's file", f, proto.SetattrReq{Valid: proto.SetMode, Mode: 0o777}, eve, true, 0, syscall.EPERM},
		{"chmod g+s outside the group", file(0o644, 1001, 60), proto.SetattrReq{Valid: proto.SetMode, Mode: 0o2755}, bob, true, sISGID, nil},
		{"chmod g+s in the group", file(0o644, 1001, 50), proto.SetattrReq{Valid: proto.SetMode, Mode: 0o2755}, bob, true, 0, nil},
		{"truncate without write", f, proto.SetattrReq{Valid: proto.SetSize}, eve, false, 0, syscall.EACCES},
		{"utimes to now as a writer", f, proto.SetattrReq{Valid: proto.SetAtimeNow | proto.SetMtimeNow}, eve, true, 0, nil},
		{"utimes to now, neither owner nor writer", f, proto.SetattrReq{Valid: proto.SetMtimeNow}, eve, false, 0, syscall.EACCES},
		{"utimes to a time, not the owner", f, proto.SetattrReq{Valid: proto.SetMtime}, eve, true, 0, syscall.EPERM},
		{"utimes to a time, the owner", f, proto.SetattrReq{Valid: proto.SetMtime}, alice, false, 0, nil},
	} {
		clear, err := Setattr(tc.a, &tc.r, tc.c, tc.write)
		if !is(err, tc.err) || err == nil && clear != tc.clear {
			t.Errorf("%s: clear %#o, %v; want %#o, %v", tc.name, clear, err, tc.clear, tc.err)
		}
	}
}

func TestXattrs(t *testing.T) {
	f := file(0o644, 1000, 1000)
	for _, tc := range []struct {
		name string
		got  error
		err  error
	}{
		{"trusted.* set by a user", SetXattr(f, "trusted.x", alice), syscall.EPERM},
		{"trusted.* read by a user", GetXattr(f, "trusted.x", alice), syscall.ENODATA},
		{"trusted.* by root", SetXattr(f, "trusted.x", Root), nil},
		{"quota limit by the owner of the root", SetXattr(dir(0o777, 1000, 0), proto.QuotaXattrPrefix+"u.1000", alice), syscall.EPERM},
		{"project id by the owner", SetXattr(f, proto.ProjidXattr, alice), syscall.EPERM},
		{"layout by the owner", SetXattr(f, proto.LayoutXattr, alice), nil},
		{"layout by another", SetXattr(file(0o666, 1000, 1000), proto.LayoutXattr, eve), syscall.EPERM},
		{"user.* without write", SetXattr(f, "user.x", eve), syscall.EACCES},
		{"user.* with write", SetXattr(file(0o666, 1000, 1000), "user.x", eve), nil},
		{"user.* on a symlink", SetXattr(&proto.Attr{Mode: 0o120777}, "user.x", Root), syscall.EPERM},
		{"user.* read without read", GetXattr(file(0o600, 1000, 1000), "user.x", eve), syscall.EACCES},
		{"security.* by a user", SetXattr(f, "security.selinux", alice), syscall.EPERM},
	} {
		if !is(tc.got, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.err)
		}
	}
}

func TestNewOwner(t *testing.T) {
	uid, gid, mode := NewOwner(dir(0o2775, 0, 50), sIFDIR|0o755, bob)
	if uid != 1001 || gid != 50 || mode&sISGID == 0 {
		t.Errorf("in a setgid dir: %d %d %#o", uid, gid, mode)
	}
	_, gid, mode = NewOwner(dir(0o2777, 0, 50), sIFREG|0o2755, eve)
	if gid != 50 || mode&sISGID != 0 {
		t.Errorf("setgid file outside the caller's groups: gid %d mode %#o", gid, mode)
	}
}
