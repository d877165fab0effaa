package fs

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"syscall"
	"time"
	"weak"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Space grants and owners on the write path.
//
// Every write to an OST names this client (a random id, so the OST can
// keep its grant across reconnects), the file's owner (charged for the
// blocks the write allocates: uid and gid from the MDT, the project id
// from its xattr) and the grant the client would like to hold on that
// OST. The reply carries the grant the OST now holds for us, so topping
// up costs no round trip of its own; replies of writes in flight together
// may come back in any order, and the OST's sequence number keeps the
// newest. A write inside the grant cannot fail for want of space.
//
// Owners are cached per file for ownerTTL: a chown shows in the blocks
// allocated after that (the OST moves the object's usage to the new owner
// at its next allocating write).
//
// What this client does not do, and Lustre's does: hold back dirty data
// the grant does not cover, writing it synchronously instead. Here write
// errors (ENOSPC, EDQUOT) surface at fsync or close, and the failed data
// stays cached for a retry, as any write-back error does.

// ownerTTL bounds how long a file's owner is taken from the cache.
const ownerTTL = 30 * time.Second

// maxOwners bounds the owner cache.
const maxOwners = 1 << 14

// grantState is one client's grants and owner cache.
type grantState struct {
	id uint64

	mu     sync.Mutex
	osts   map[uint32]proto.GrantReply
	owners map[proto.FID]ownerEntry
}

type ownerEntry struct {
	owner proto.Owner
	at    time.Time
}

// grantStates holds each Client's state without a field in Client: keyed
// by a weak pointer, dropped when the Client is collected.
var grantStates sync.Map // weak.Pointer[Client] → *grantState

func (c *Client) grants() *grantState {
	wp := weak.Make(c)
	if v, ok := grantStates.Load(wp); ok {
		return v.(*grantState)
	}
	g := &grantState{id: randomID(), osts: map[uint32]proto.GrantReply{}, owners: map[proto.FID]ownerEntry{}}
	v, loaded := grantStates.LoadOrStore(wp, g)
	if !loaded {
		runtime.AddCleanup(c, func(k weak.Pointer[Client]) { grantStates.Delete(k) }, wp)
	}
	return v.(*grantState)
}

func randomID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// grantWant is the grant this client asks each OST for: enough for the
// writes it may have in flight there, twice over.
func (c *Client) grantWant() uint64 {
	return uint64(min(2*int64(c.opts.RPCsInFlight)*maxRPC, c.opts.MaxDirty))
}

// writeCall builds the OST write of data at off in object obj of file
// fid, on OST ost.
func (c *Client) writeCall(ctx context.Context, fid proto.FID, ost uint32, obj proto.ObjID, off uint64, data []byte) (*rpc.Call, error) {
	owner, err := c.ownerOf(ctx, fid)
	if err != nil {
		return nil, err
	}
	g := c.grants()
	req := &proto.OWriteReq{Obj: obj, Off: off, Grant: proto.WriteGrant{Client: g.id, Owner: owner, Want: c.grantWant()}}
	return &rpc.Call{Method: proto.OWrite, Req: req, Resp: &proto.OWriteReply{}, BulkOut: [][]byte{data}}, nil
}

// noteGrant records the grant a successful write's reply carries.
func (c *Client) noteGrant(ost uint32, call *rpc.Call) {
	if call.Direct {
		c.counters.directWrites.Add(1)
	}
	r, ok := call.Resp.(*proto.OWriteReply)
	if !ok || r.Grant.Seq == 0 {
		return
	}
	g := c.grants()
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.Grant.Seq > g.osts[ost].Seq {
		g.osts[ost] = r.Grant
	}
}

// Grants returns the grant this client holds on each OST it wrote to, as
// the OSTs last reported it.
func (c *Client) Grants() map[uint32]uint64 {
	g := c.grants()
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[uint32]uint64, len(g.osts))
	for ost, r := range g.osts {
		out[ost] = r.Grant
	}
	return out
}

// grantBytes is the space the OSTs have promised this client, in all
// (Lustre's cur_grant_bytes, summed over OSTs).
func (c *Client) grantBytes() int64 {
	var n uint64
	for _, b := range c.Grants() {
		n += b
	}
	return int64(n)
}

// ownerOf returns who fid's blocks are charged to.
func (c *Client) ownerOf(ctx context.Context, fid proto.FID) (proto.Owner, error) {
	g := c.grants()
	g.mu.Lock()
	e, ok := g.owners[fid]
	g.mu.Unlock()
	if ok && time.Since(e.at) < ownerTTL {
		return e.owner, nil
	}
	r, err := c.target(ctx, proto.KindMDT, uint32(fid.MDT()))
	if err != nil {
		return proto.Owner{}, err
	}
	var rep proto.OwnerReply
	err = c.call(ctx, r, &rpc.Call{Method: proto.MOwner, Req: &proto.OwnerReq{FID: fid}, Resp: &rep})
	if errors.Is(err, syscall.ENOENT) {
		// Removed meanwhile: the data goes nowhere anyone sees; charge
		// nobody in particular rather than fail the flush.
		err = nil
	}
	if err != nil {
		return proto.Owner{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.owners) >= maxOwners {
		for f, e := range g.owners {
			if time.Since(e.at) >= ownerTTL {
				delete(g.owners, f)
			}
		}
		if len(g.owners) >= maxOwners {
			clear(g.owners)
		}
	}
	g.owners[fid] = ownerEntry{owner: rep.Owner, at: time.Now()}
	return rep.Owner, nil
}
