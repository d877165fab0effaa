package perm

import (
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// acl builds an ACL from setfacl's short text ("u::rw-,u:1001:r--,g::r--,
// m::rw-,o::---"), in the order given, so that bad orders can be written.
func acl(t *testing.T, text string) ACL {
	t.Helper()
	var out ACL
	for _, e := range strings.Split(text, ",") {
		f := strings.Split(e, ":")
		if len(f) != 3 || len(f[2]) != 3 {
			t.Fatalf("bad entry %q", e)
		}
		var p uint16
		for i, c := range f[2] {
			if c != '-' {
				p |= 4 >> i
			}
		}
		tags := map[string][2]uint16{"u": {TagUserObj, TagUser}, "g": {TagGroupObj, TagGroup}, "m": {TagMask, TagMask}, "o": {TagOther, TagOther}}
		tag, ok := tags[f[0]]
		if !ok {
			t.Fatalf("bad tag %q", e)
		}
		en := ACLEntry{Tag: tag[0], Perm: p, ID: undefinedID}
		if f[1] != "" {
			id, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			en.Tag, en.ID = tag[1], uint32(id)
		}
		out = append(out, en)
	}
	return out
}

func TestParseACL(t *testing.T) {
	for _, tc := range []struct {
		text string
		err  error
	}{
		{"u::rw-,g::r--,o::r--", nil},
		{"u::rwx,u:1000:r--,u:1001:rw-,g::r-x,g:50:--x,m::rwx,o::---", nil},
		{"u::rw-,g::r--,m::r--,o::r--", nil}, // a mask without named entries is allowed
		{"g::r--,u::rw-,o::r--", syscall.EINVAL},
		{"u::rw-,u:1000:r--,g::r--,o::r--", syscall.EINVAL},                   // named entry without a mask
		{"u::rw-,u:1001:r--,u:1000:r--,g::r--,m::r--,o::r--", syscall.EINVAL}, // unsorted
		{"u::rw-,u:1000:r--,u:1000:rw-,g::r--,m::r--,o::r--", syscall.EINVAL}, // repeated
		{"u::rw-,g::r--", syscall.EINVAL},                                     // no other
		{"u::rw-,u::rw-,g::r--,o::r--", syscall.EINVAL},                       // two owners
		{"u::rw-,g::r--,o::r--,m::r--", syscall.EINVAL},                       // mask after other
		{"u::rw-,g::r--,g:10:r--,g:20:r--,m::rw-,o::---", nil},
	} {
		_, err := ParseACL(acl(t, tc.text).Bytes())
		if !is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.text, err, tc.err)
		}
	}
	for _, b := range [][]byte{nil, {2, 0, 0}, {1, 0, 0, 0}, append(acl(t, "u::rw-,g::r--,o::r--").Bytes(), 1)} {
		if _, err := ParseACL(b); err == nil {
			t.Errorf("%x parsed", b)
		}
	}
	if a, err := ParseACL([]byte{2, 0, 0, 0}); err != nil || a != nil {
		t.Errorf("header alone: %v %v, want no ACL", a, err)
	}
	bad := acl(t, "u::rw-,g::r--,o::r--")
	bad[1].Perm = 8
	if _, err := ParseACL(bad.Bytes()); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("permission 8: %v", err)
	}
}

func TestAccessACL(t *testing.T) {
	// alice (1000) owns the files, group 1000; bob (1001) is in group
	// 50; eve (1002) in no group that matters.
	f := func(mode uint32, text string) *proto.Attr {
		a := file(mode, 1000, 1000)
		a.ACL = acl(t, text).String()
		return a
	}
	named := f(0o640, "u::rw-,u:1002:rw-,g::r--,g:50:rw-,m::r--,o::---")
	for _, tc := range []struct {
		name string
		a    *proto.Attr
		c    *rpc.Cred
		want Want
		err  error
	}{
		{"owner by owner entry", named, alice, Read | Write, nil},
		{"named user within mask", named, eve, Read, nil},
		{"named user beyond mask", named, eve, Write, syscall.EACCES},
		{"named group within mask", named, bob, Read, nil},
		{"named group beyond mask", named, bob, Write, syscall.EACCES},
		{"other gets nothing", named, &rpc.Cred{Uid: 2000, Gid: 2000}, Read, syscall.EACCES},
		{"root", named, Root, Read | Write, nil},
		{"mask opens named user", f(0o660, "u::rw-,u:1002:rw-,g::r--,m::rw-,o::---"), eve, Write, nil},
		{"named user denied though other may", f(0o604, "u::rw-,u:1002:---,g::r--,m::r--,o::r--"), eve, Read, syscall.EACCES},
		{"group member denied though other may", f(0o604, "u::rw-,g::---,g:50:---,m::---,o::r--"), bob, Read, syscall.EACCES},
		{"any matching group grants", f(0o640, "u::rw-,g::---,g:50:r--,g:60:---,m::r--,o::---"), &rpc.Cred{Uid: 3000, Gid: 60, Groups: []uint32{50}}, Read, nil},
		{"owner entry only for owner", f(0o070, "u::---,g::rwx,o::---"), alice, Read, syscall.EACCES},
	} {
		if err := Access(tc.a, tc.c, tc.want); !is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
}

func TestCreateACL(t *testing.T) {
	def := acl(t, "u::rwx,u:1002:rwx,g::r-x,m::rwx,o::r-x").String()
	for _, tc := range []struct {
		name       string
		def        string
		mode       uint32
		umask      uint32
		wantMode   uint32
		wantAccess string
		wantDef    string
	}{
		{"no default: umask", "", sIFREG | 0o666, 0o022, sIFREG | 0o644, "", ""},
		{"default replaces umask", def, sIFREG | 0o666, 0o077, sIFREG | 0o664, "u::rw-,u:1002:rwx,g::r-x,m::rw-,o::r--", ""},
		{"directory inherits the default", def, sIFDIR | 0o777, 0o022, sIFDIR | 0o775, "u::rwx,u:1002:rwx,g::r-x,m::rwx,o::r-x", def},
		{"mode masks the mask", def, sIFREG | 0o600, 0, sIFREG | 0o600, "u::rw-,u:1002:rwx,g::r-x,m::---,o::---", ""},
		{"minimal default leaves no ACL", acl(t, "u::rwx,g::r-x,o::---").String(), sIFREG | 0o666, 0o022, sIFREG | 0o640, "", ""},
		{"symlink takes nothing", def, sIFLNK | 0o777, 0o022, sIFLNK | 0o777, "", ""},
	} {
		mode, access, d := CreateACL(tc.def, tc.mode, tc.umask)
		want := ""
		if tc.wantAccess != "" {
			want = acl(t, tc.wantAccess).String()
		}
		if mode != tc.wantMode || access != want || d != tc.wantDef {
			t.Errorf("%s: mode %o access %x default %x, want %o %x %x", tc.name, mode, access, d, tc.wantMode, want, tc.wantDef)
		}
	}
}

func TestACLModes(t *testing.T) {
	for _, tc := range []struct {
		text  string
		mode  uint32 // what EquivMode makes of sIFREG|0o7000
		equiv bool
	}{
		{"u::rw-,g::r--,o::r--", 0o7644, true},
		{"u::rwx,g::r--,m::rw-,o::---", 0o7760, false},
		{"u::rw-,u:5:rwx,g::---,m::r-x,o::--x", 0o7651, false},
	} {
		mode, equiv := acl(t, tc.text).EquivMode(sIFREG | 0o7000)
		if mode != sIFREG|tc.mode || equiv != tc.equiv {
			t.Errorf("%s: %o %v, want %o %v", tc.text, mode, equiv, tc.mode, tc.equiv)
		}
	}
	got := ChmodACL(acl(t, "u::rw-,u:5:rwx,g::r--,m::rwx,o::r--").String(), sIFREG|0o750)
	if want := acl(t, "u::rwx,u:5:rwx,g::r--,m::r-x,o::---").String(); got != want {
		t.Errorf("chmod with a mask: %x, want %x", got, want)
	}
	got = ChmodACL(acl(t, "u::rw-,g::r--,o::r--").String(), sIFREG|0o705)
	if want := acl(t, "u::rwx,g::---,o::r-x").String(); got != want {
		t.Errorf("chmod without a mask: %x, want %x", got, want)
	}
}
