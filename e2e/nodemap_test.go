package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// groupKey writes a client key of the test's filesystem for a nodemap
// key group and returns its file.
func groupKey(t *testing.T, group string) (*rpc.Key, string) {
	t.Helper()
	master, err := rpc.ProcessKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := master.Derive(rpc.RoleClient, group)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), group+".key")
	must(t, rpc.WriteKey(path, k))
	return k, path
}

// TestNodemaps: clients grouped by key get root squash, all squash, a
// read-only view and a fileset through their mounts, applied by every
// MDT and OST, kept by MDT0 across restarts and changed at once.
func TestNodemaps(t *testing.T) {
	c := testcluster.Start(t, 2, 2)
	mnt := c.MountFS()
	p := func(s string) string { return filepath.Join(mnt, s) }
	must(t, os.Chmod(mnt, 0o777))
	writeFile(t, p("rootonly"), []byte("root's"))
	must(t, os.Chmod(p("rootonly"), 0o600))
	must(t, os.MkdirAll(p("projects/a"), 0o777))
	must(t, os.Chmod(p("projects/a"), 0o777))
	writeFile(t, p("projects/a/readme"), []byte("project a"))
	writeFile(t, p("projects/b"), []byte("not a's"))
	// A directory on MDT1, so that MDT1's copy of the maps is tested.
	sfRun(t, c, "mkdir", "-i", "1", p("on1"))
	must(t, os.Chmod(p("on1"), 0o777))

	nm := func(args ...string) string {
		t.Helper()
		return sfRun(t, c, append(append([]string{"nodemap"}, args...), "--mgs", c.MGS)...)
	}
	nm("add", "squashed", "--key-group", "sq", "--root-squash", "65534:65534")
	nm("add", "guests", "--key-group", "guest", "--all-squash", "4000:4000")
	nm("add", "readers", "--key-group", "ro", "--read-only")
	nm("add", "proj", "--key-group", "proj", "--fileset", "/projects/a")
	list := nm("list")
	for _, want := range []string{"squashed key_groups=sq root_squash=65534:65534", "guests key_groups=guest all_squash=4000:4000",
		"readers key_groups=ro trusted read_only", "proj key_groups=proj trusted fileset=/projects/a"} {
		if !strings.Contains(list, want) {
			t.Errorf("nodemap list lacks %q:\n%s", want, list)
		}
	}
	mountAs := func(group string) string {
		_, path := groupKey(t, group)
		_, m := c.MountAtArgs("mnt-"+group, []string{"--key", path})
		return m
	}
	sq, guest, ro, proj := mountAs("sq"), mountAs("guest"), mountAs("ro"), mountAs("proj")

	// Root squash: root is nobody there, others are themselves.
	if _, err := os.ReadFile(filepath.Join(sq, "rootonly")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("squashed root reading root's 0600 file: %v", err)
	}
	writeFile(t, filepath.Join(sq, "by-squashed-root"), []byte("x"))
	if u := owner(t, p("by-squashed-root")); u != 65534 {
		t.Errorf("a file squashed root made is owned by %d", u)
	}
	if err := os.Chown(filepath.Join(sq, "by-squashed-root"), 0, 0); !errors.Is(err, syscall.EPERM) {
		t.Errorf("squashed root chowning: %v", err)
	}
	if got := asUser(t, 1000, 1000, nil, "create "+filepath.Join(sq, "by-1000")); got != 0 {
		t.Errorf("uid 1000 through the root-squash mount: %v", got)
	} else if u := owner(t, p("by-1000")); u != 1000 {
		t.Errorf("uid 1000's file under root squash is owned by %d", u)
	}
	// All squash: everyone is 4000.
	if got := asUser(t, 1000, 1000, nil, "create "+filepath.Join(guest, "by-guest")); got != 0 {
		t.Errorf("uid 1000 through the all-squash mount: %v", got)
	} else if u := owner(t, p("by-guest")); u != 4000 {
		t.Errorf("a guest's file is owned by %d", u)
	}
	// Read-only: reads work, no change does, on either MDT.
	if b, err := os.ReadFile(filepath.Join(ro, "projects/a/readme")); err != nil || string(b) != "project a" {
		t.Errorf("read through the read-only mount: %q %v", b, err)
	}
	for name, err := range map[string]error{
		"create":         os.WriteFile(filepath.Join(ro, "new"), []byte("x"), 0o644),
		"mkdir on mdt1":  os.Mkdir(filepath.Join(ro, "on1", "d"), 0o755),
		"write existing": openWrite(filepath.Join(ro, "projects/a/readme")),
		"chmod":          os.Chmod(filepath.Join(ro, "projects/b"), 0o600),
		"unlink":         os.Remove(filepath.Join(ro, "projects/b")),
	} {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("read-only mount: %s: %v, want EROFS", name, err)
		}
	}
	var err error
	// The OSTs refuse the read-only group's writes too.
	roKey, _ := groupKey(t, "ro")
	oc := rpc.NewClient(c.OSTs[0].Addr, "ro-writer")
	oc.Key = roKey
	defer oc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = oc.Do(ctx, &rpc.Call{Method: proto.OWrite, Req: &proto.OWriteReq{Obj: proto.ObjID{FID: proto.FID{Seq: 1 << 40, Oid: 1}}}, BulkOut: [][]byte{[]byte("x")}})
	cancel()
	if !errors.Is(err, syscall.EROFS) {
		t.Errorf("ost0: write from the read-only group: %v, want EROFS", err)
	}
	// Fileset: the subtree is the root, and there is nothing above it.
	if b, err := os.ReadFile(filepath.Join(proj, "readme")); err != nil || string(b) != "project a" {
		t.Errorf("the fileset mount's root: %q %v", b, err)
	}
	entries, err := os.ReadDir(proj)
	if err != nil || len(entries) != 1 || entries[0].Name() != "readme" {
		t.Errorf("the fileset mount lists %v (%v)", entries, err)
	}
	writeFile(t, filepath.Join(proj, "from-proj"), []byte("x"))
	if _, err := os.Stat(p("projects/a/from-proj")); err != nil {
		t.Errorf("a file made through the fileset mount: %v", err)
	}
	plain := newIntruder(t, c)
	projDir, err := plain.lookup(0, proto.RootFID, "projects")
	must(t, err)
	aDir, err := plain.lookup(0, projDir.FID, "a")
	must(t, err)
	projKey, _ := groupKey(t, "proj")
	in := newIntruder(t, c)
	in.key = projKey
	in.mdts = map[uint32]*rpc.Client{}
	if up, err := in.lookup(0, aDir.FID, ".."); err != nil || up.FID != aDir.FID {
		t.Errorf("\"..\" of the fileset's root: %v %v, want the root itself %v", up.FID, err, aDir.FID)
	}
	var mine proto.Nodemap
	must(t, in.call(0, proto.RootFID, proto.MNodemapMine, &proto.Empty{}, &mine))
	if mine.Name != "proj" || mine.FilesetFID != aDir.FID || len(mine.KeyGroups) != 0 {
		t.Errorf("the fileset client's policy: %+v", mine)
	}
	if _, err := in.lookup(0, proto.RootFID, "rootonly"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("a fileset client looking up in the real root: %v, want EACCES", err)
	}
	if err := in.call(0, proto.RootFID, proto.MReaddir, &proto.ReaddirReq{FID: proto.RootFID, Max: 10}, &proto.ReaddirReply{}); !errors.Is(err, syscall.EACCES) {
		t.Errorf("a fileset client listing the real root: %v, want EACCES", err)
	}

	// A change reaches every target at once, and survives restarts.
	nm("set", "readers", "--read-write")
	if err := os.WriteFile(filepath.Join(ro, "now-writable"), []byte("x"), 0o644); err != nil {
		t.Errorf("after nodemap set --read-write: %v", err)
	}
	nm("set", "readers", "--read-only")
	c.Stop(c.MDTs[1])
	c.Restart(c.MDTs[1])
	c.Stop(c.MDTs[0])
	c.Restart(c.MDTs[0])
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := os.Mkdir(filepath.Join(ro, "on1", "after-restart"), 0o755)
		if errors.Is(err, syscall.EROFS) {
			break
		}
		if err == nil {
			t.Fatal("mdt1 forgot the read-only nodemap over the restarts")
		}
		if time.Now().After(deadline) {
			t.Fatalf("mkdir on mdt1 after the restarts: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if l := nm("list"); !strings.Contains(l, "readers key_groups=ro trusted read_only") {
		t.Errorf("nodemaps after MDT0's restart:\n%s", l)
	}
	nm("del", "readers")
	if l := nm("list"); strings.Contains(l, "readers") {
		t.Errorf("after del:\n%s", l)
	}
}

func owner(t *testing.T, path string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	must(t, syscall.Stat(path, &st))
	return st.Uid
}

func openWrite(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err == nil {
		f.Close()
	}
	return err
}
