package mds

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stripefs/stripefs/fsck"
	"github.com/stripefs/stripefs/proto"
)

// TestCrossMDTNamespace drives rename, link and unlink between
// directories on two MDTs, and checks link counts, "..", the inodes left
// and fsck after each step.
func TestCrossMDTNamespace(t *testing.T) {
	p := newPair(t, fmt.Sprintf("xmdt-%d", time.Now().UnixNano()))
	defer func() { p.close(1); p.close(0) }()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(parent proto.FID, name string, mdt int32) proto.FID {
		t.Helper()
		var a proto.AttrReply
		must(p.call(parent.MDT(), proto.MMkdir, &proto.MkdirReq{Parent: parent, Name: name, Mode: 0o755, MDT: mdt}, &a))
		return a.Attr.FID
	}
	mknod := func(parent proto.FID, name string) proto.FID {
		t.Helper()
		var a proto.AttrReply
		must(p.call(parent.MDT(), proto.MCreate, &proto.CreateReq{Parent: parent, Name: name, Mode: syscall.S_IFIFO | 0o644}, &a))
		return a.Attr.FID
	}
	rename := func(sp proto.FID, sn string, dp proto.FID, dn string, flags uint32) error {
		return p.call(sp.MDT(), proto.MRename, &proto.RenameReq{SrcParent: sp, SrcName: sn, DstParent: dp, DstName: dn, Flags: flags}, &proto.RenameReply{})
	}
	attr := func(f proto.FID) (proto.Attr, error) {
		var a proto.AttrReply
		err := p.call(f.MDT(), proto.MGetattr, &proto.GetattrReq{FID: f}, &a)
		return a.Attr, err
	}
	nlink := func(f proto.FID, want uint32) {
		t.Helper()
		a, err := attr(f)
		must(err)
		if a.Nlink != want {
			t.Fatalf("%s: nlink %d, want %d", f, a.Nlink, want)
		}
	}
	clean := func(step string) {
		t.Helper()
		p.converge()
		if err := p.fsck(); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		rep, err := fsck.Run(context.Background(), p.addr(0), false)
		if err != nil || len(rep.Findings) > 0 {
			t.Fatalf("%s: stripefs fsck: %v %v", step, err, rep.Findings)
		}
	}
	root := proto.RootFID
	on1 := mkdir(root, "on1", 1)

	// A file moves from mdt0's root into a directory on mdt1: a remote entry.
	f := mknod(root, "f")
	must(rename(root, "f", on1, "g", 0))
	if fid, err := p.lookup(on1, "g"); err != nil || fid != f {
		t.Fatalf("on1/g: %v %v, want %s", fid, err, f)
	}
	if _, err := p.lookup(root, "f"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("root/f after the move: %v", err)
	}
	nlink(f, 1)
	clean("file moved")

	// A directory tree moves from mdt0 to under on1 and back; ".." follows.
	d := mkdir(root, "d", 0)
	mkdir(d, "sub", 0)
	must(rename(root, "d", on1, "d", 0))
	if up, err := p.lookup(d, ".."); err != nil || up != on1 {
		t.Fatalf("d/.. = %s %v, want %s", up, err, on1)
	}
	nlink(root, 3) // on1 only
	nlink(on1, 3)  // d
	clean("directory moved")
	// Into its own subtree: refused, across MDTs as locally.
	if err := rename(root, "on1", d, "x", 0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("on1 into its own subtree: %v", err)
	}
	must(rename(on1, "d", root, "d2", 0))
	if up, err := p.lookup(d, ".."); err != nil || up != root {
		t.Fatalf("d/.. = %s %v after moving back", up, err)
	}
	nlink(root, 4)
	nlink(on1, 2)
	clean("directory moved back")

	// Over an existing file on the other MDT: the replaced inode goes.
	h := mknod(on1, "h")
	x := mknod(root, "x")
	if err := rename(root, "x", on1, "h", proto.RenameNoReplace); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("RENAME_NOREPLACE over on1/h: %v", err)
	}
	if err := rename(root, "x", on1, "h", proto.RenameExchange); !errors.Is(err, syscall.EXDEV) {
		t.Fatalf("RENAME_EXCHANGE across MDTs: %v", err)
	}
	must(rename(root, "x", on1, "h", 0))
	if _, err := attr(h); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("replaced inode: %v", err)
	}
	if fid, _ := p.lookup(on1, "h"); fid != x {
		t.Fatalf("on1/h names %s, want %s", fid, x)
	}
	// Over an empty directory: a directory on mdt0 replaces one on mdt1.
	e := mkdir(on1, "e", 1)
	must(rename(root, "d2", on1, "e", 0))
	if _, err := attr(e); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("replaced directory: %v", err)
	}
	nlink(on1, 3)
	nlink(root, 3)
	clean("renames over targets")

	// A hard link in root (mdt0) to an inode on mdt1: a remote entry.
	y := mknod(on1, "y") // inode on mdt1
	must(p.call(0, proto.MLink, &proto.LinkReq{FID: y, Parent: root, Name: "ly"}, &proto.AttrReply{}))
	nlink(y, 2)
	var la proto.AttrReply
	must(p.call(0, proto.MLookup, &proto.LookupReq{Parent: root, Name: "ly"}, &la))
	if !la.Remote || la.Attr.FID != y || la.Attr.Mode&sIFMT != syscall.S_IFIFO {
		t.Fatalf("lookup of a remote entry: %+v", la)
	}
	clean("remote link")
	must(p.call(1, proto.MUnlink, &proto.UnlinkReq{Parent: on1, Name: "y"}, &proto.UnlinkReply{}))
	nlink(y, 1)
	// Open, then unlink the last (remote) name: the inode stays until close.
	must(p.call(1, proto.MOpen, &proto.OpenReq{FID: y}, &proto.AttrReply{}))
	must(p.call(0, proto.MUnlink, &proto.UnlinkReq{Parent: root, Name: "ly"}, &proto.UnlinkReply{}))
	nlink(y, 0)
	clean("open, unlinked")
	must(p.call(1, proto.MClose, &proto.CloseReq{FID: y}, &proto.CloseReply{}))
	if _, err := attr(y); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("unlinked inode after its last close: %v", err)
	}
	// Unlink of a remote entry with no open: the inode goes at once.
	must(p.call(1, proto.MUnlink, &proto.UnlinkReq{Parent: on1, Name: "g"}, &proto.UnlinkReply{}))
	if _, err := attr(f); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("inode after its last remote name went: %v", err)
	}
	clean("all unlinked")
}
