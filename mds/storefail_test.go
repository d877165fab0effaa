package mds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/stripefs/stripefs/internal/storeguard"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// fullDisk refuses writes with ENOSPC while on: the disk under the MDT's
// database filled by someone else, past the MDT's reserve.
type fullDisk struct{ on, hits atomic.Bool }

func (d *fullDisk) String() string { return "full disk" }
func (d *fullDisk) MaybeError(op errorfs.Op) error {
	if d.on.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
		d.hits.Store(true)
		return fmt.Errorf("%v %s: %w", op.Kind, op.Path, syscall.ENOSPC)
	}
	return nil
}

// A full disk under an MDT's database is Pebble's fatal commit error:
// the MDT answers ENOSPC, keeps serving lookups, stays up, and is
// reopened on its address by its runner once the disk has room, where the
// client's change goes through and what was committed before is there.
func TestStoreFailureReadOnlyThenReopen(t *testing.T) {
	oldPoll, oldPause := storeguard.Poll, storeguard.Pause
	storeguard.Poll, storeguard.Pause = 10*time.Millisecond, 50*time.Millisecond
	defer func() { storeguard.Poll, storeguard.Pause = oldPoll, oldPause }()

	disk := &fullDisk{}
	fs := errorfs.Wrap(vfs.NewMem(), disk)
	addr := "inproc:" + t.Name() + "/mdt0"
	cfg := Config{Index: 0, DataDir: "/mdt0", FS: fs, MGS: addr, Addr: addr, CommitInterval: 5 * time.Millisecond,
		ClientWindow: 200 * time.Millisecond}
	l, err := rpc.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go m.Serve(l)
	var room atomic.Bool
	r := storeguard.Run(m.Name(), m,
		func() (net.Listener, error) { return rpc.Listen(addr) },
		func(net.Listener) (*MDT, error) { return Open(cfg) },
		room.Load)
	defer r.Close()
	cl := rpc.NewClient(addr, "test")
	cl.RetryFor = 10 * time.Second
	cl.Replay = true // as a mount's: changes kept until committed
	defer cl.Close()
	call := func(method uint16, req, resp any) error {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		return cl.Do(ctx, &rpc.Call{Method: method, Req: req, Resp: resp, Replay: method == proto.MCreate})
	}
	create := func(name string) error {
		return call(proto.MCreate, &proto.CreateReq{Parent: proto.RootFID, Name: name, Mode: syscall.S_IFIFO | 0o644, Excl: true}, &proto.AttrReply{})
	}
	if err := create("before"); err != nil {
		t.Fatal(err)
	}
	if err := call(proto.MSync, &proto.Empty{}, &proto.Empty{}); err != nil {
		t.Fatal(err)
	}

	disk.on.Store(true)
	start := time.Now()
	// A change is answered once applied, before the WAL reaches the
	// disk: the first creates may be answered (the client keeps them
	// for replay), then the group commit meets the full disk and the
	// rest are refused.
	var acked []string
	for i := 0; ; i++ {
		name := fmt.Sprint("full", i)
		err = create(name)
		if err != nil {
			break
		}
		acked = append(acked, name)
		if i == 1000 {
			t.Fatal("1000 creates answered on a full disk")
		}
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create on a full disk: %v, want ENOSPC", err)
	}
	if !disk.hits.Load() {
		t.Fatal("the full disk refused nothing: the fault did not happen where the test says")
	}
	select {
	case <-m.StoreFailed():
	case <-time.After(5 * time.Second):
		t.Fatal("the MDT's store did not fail")
	}
	if err := create("refused"); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("second create while full: %v, want ENOSPC", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("ENOSPC took %v", d)
	}
	var a proto.AttrReply
	if err := call(proto.MLookup, &proto.LookupReq{Parent: proto.RootFID, Name: "before"}, &a); err != nil {
		t.Errorf("lookup while read-only: %v", err)
	}
	var st proto.StatfsReply
	if err := call(proto.MStatfs, &proto.Empty{}, &st); err != nil || st.Flags&proto.StatfsNoSpace == 0 {
		t.Errorf("statfs while full: flags %#x, %v; want S", st.Flags, err)
	}
	if n := counterOf(m, "store_failed_now"); n != 1 {
		t.Errorf("store_failed_now %d while failed", n)
	}

	disk.on.Store(false)
	room.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for r.Reopens() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r.Reopens() != 1 {
		t.Fatalf("reopens %d after the disk had room", r.Reopens())
	}
	if err := create("after"); err != nil {
		t.Fatalf("create after the reopen: %v", err)
	}
	// What was answered survives (replayed if the disk lost it); what
	// was refused was not made.
	for _, name := range append([]string{"before", "after"}, acked...) {
		if err := call(proto.MLookup, &proto.LookupReq{Parent: proto.RootFID, Name: name}, &a); err != nil {
			t.Errorf("lookup %s after the reopen: %v", name, err)
		}
	}
	if err := call(proto.MLookup, &proto.LookupReq{Parent: proto.RootFID, Name: "refused"}, &a); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("lookup of the refused create after the reopen: %v, want ENOENT", err)
	}
	if n := counterOf(r.Current(), "store_failed_now"); n != 0 {
		t.Errorf("store_failed_now %d after the reopen", n)
	}
}

func counterOf(m *MDT, name string) int64 {
	for _, c := range m.Srv.Counters() {
		if c.Name == name {
			return c.Value
		}
	}
	return -1
}
