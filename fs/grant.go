package fs

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"
	"weak"

	"github.com/stripefs/stripefs/layout"
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
// Dirty data is held back only within the grants, as Lustre's osc does:
// each chunk buffer in the write-back cache is charged to the OSTs it
// will be written to (a whole chunk, however much of it is dirty; an
// erasure-coded row a unit to each of its objects) until the OST has
// acknowledged it. A write that needs a new chunk the grants cannot cover
// is written through instead (writethrough.go), so ENOSPC comes back from
// write() itself, and a size is never published for data that no OST
// took. The charge is conservative: a rewrite of allocated blocks costs
// the OST no grant, but the client cannot tell.

// ownerTTL bounds how long a file's owner is taken from the cache.
const ownerTTL = 30 * time.Second

// maxOwners bounds the owner cache.
const maxOwners = 1 << 14

// grantState is one client's grants and owner cache.
type grantState struct {
	id uint64

	mu      sync.Mutex
	osts    map[uint32]proto.GrantReply
	heard   map[uint32]time.Time // when each OST last reported the grant
	charged map[uint32]int64     // chunk buffers not yet acknowledged, per OST
	// overQuota: owners an OST said are near a hard limit (OverQuota),
	// and when; their writes are written through for overQuotaTTL.
	overQuota map[proto.Owner]time.Time
	owners    map[proto.FID]ownerEntry
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
	g := &grantState{id: randomID(), osts: map[uint32]proto.GrantReply{}, heard: map[uint32]time.Time{}, charged: map[uint32]int64{}, overQuota: map[proto.Owner]time.Time{}, owners: map[proto.FID]ownerEntry{}}
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
// writes it may have in flight there twice over, and for a file's dirty
// data bound with a window of writes beyond it, so that one stream never
// waits on its grant.
func (c *Client) grantWant() uint64 {
	window := int64(c.opts.RPCsInFlight) * maxRPC
	return uint64(min(max(2*window, c.opts.MaxDirtyPerFile+window), c.opts.MaxDirty+window))
}

// overQuotaTTL bounds how long an OST's word that an owner is near its
// limit holds without a write to confirm it (a raised limit, freed space).
const overQuotaTTL = 30 * time.Second

// nearQuota reports whether fid's owner was said to be near a hard limit.
func (c *Client) nearQuota(ctx context.Context, fid proto.FID) bool {
	g := c.grants()
	g.mu.Lock()
	n := len(g.overQuota)
	g.mu.Unlock()
	if n == 0 {
		return false
	}
	owner, err := c.ownerOf(ctx, fid)
	if err != nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	at, ok := g.overQuota[owner]
	if ok && time.Since(at) > overQuotaTTL {
		delete(g.overQuota, owner)
		return false
	}
	return ok
}

// chunkCharge is what the buffer of chunk idx of a file with layout lay
// and chunk size size charges to each of the OSTs it names.
func chunkCharge(lay proto.Layout, size, idx int64) ([]uint32, int64) {
	if ep, ok := ecRow(lay, idx); ok {
		return ep.Layout.OSTs, int64(ep.Geometry().Unit) // none for a component without objects: never dirty
	}
	ms := chunkPieces(lay, size, idx)
	if len(ms) == 1 {
		if ms[0].Stripe == layout.NoObject {
			return nil, 0 // never dirty: writes get their components first (pfl.go)
		}
		return lay.OSTs[ms[0].Stripe : ms[0].Stripe+1], size
	}
	// A chunk across a Data-on-MDT component's end: each side is charged
	// the whole buffer, which may go to either.
	var osts []uint32
	for _, m := range ms {
		if m.Stripe != layout.NoObject {
			osts = append(osts, lay.OSTs[m.Stripe])
		}
	}
	return osts, size
}

// chargeIfCovered charges the buffers of chunks idxs to the OSTs they go
// to if every OST's grant covers them with what is charged already, and
// reports whether it did.
func (c *Client) chargeIfCovered(lay proto.Layout, size int64, idxs []int64) bool {
	if len(idxs) == 0 {
		return true
	}
	g := c.grants()
	g.mu.Lock()
	defer g.mu.Unlock()
	need := map[uint32]int64{}
	for _, idx := range idxs {
		osts, each := chunkCharge(lay, size, idx)
		for _, o := range osts {
			need[o] += each
		}
	}
	for o, n := range need {
		if g.charged[o]+n > int64(g.fresh(o).Grant) {
			c.counters.grantShort.Add(1)
			return false
		}
	}
	for o, n := range need {
		g.charged[o] += n
	}
	return true
}

// grantFresh is how long an OST's word on this client's grant is taken
// without a newer reply: an OST takes back the grant of a client that
// allocates nothing for a while (ost.Config.GrantIdle, 5 minutes by
// default) and cannot say so until the client writes again.
var grantFresh = 2 * time.Minute

// fresh is what OST o last said of this client's grant, or nothing if it
// said it too long ago. g.mu is held.
func (g *grantState) fresh(o uint32) proto.GrantReply {
	if time.Since(g.heard[o]) > grantFresh {
		return proto.GrantReply{}
	}
	return g.osts[o]
}

// askGrants asks each OST the chunks idxs go to, and from which this
// client holds no grant it heard of lately, for one: an empty write to
// the file's object there, whose reply carries it.
func (c *Client) askGrants(ctx context.Context, fid proto.FID, lay proto.Layout, size int64, idxs []int64) error {
	g := c.grants()
	asked := map[uint32]bool{}
	for _, idx := range idxs {
		osts, _ := chunkCharge(lay, size, idx)
		for _, o := range osts {
			g.mu.Lock()
			known := time.Since(g.heard[o]) <= grantFresh
			g.mu.Unlock()
			if known || asked[o] {
				continue
			}
			asked[o] = true
			stripe := slices.Index(lay.OSTs, o)
			call, err := c.writeCall(ctx, fid, o, proto.ObjID{FID: fid, Stripe: uint32(stripe)}, 0, nil)
			c.counters.grantAsks.Add(1)
			if err == nil {
				err = c.ostDo(ctx, o, call)
			}
			if err != nil {
				return fmt.Errorf("ask ost%d for a grant: %w", o, err)
			}
			c.noteGrant(o, call)
			g.mu.Lock()
			g.heard[o] = time.Now() // even with none to give: not asked again soon
			g.mu.Unlock()
		}
	}
	return nil
}

// uncharge ends the charge of chunk idx's buffer: acknowledged, merged
// into a newer buffer, or dropped.
func (c *Client) uncharge(lay proto.Layout, size, idx int64) {
	g := c.grants()
	g.mu.Lock()
	defer g.mu.Unlock()
	osts, each := chunkCharge(lay, size, idx)
	for _, o := range osts {
		if g.charged[o] -= each; g.charged[o] <= 0 {
			delete(g.charged, o)
		}
	}
}

// writeCall builds the OST write of data at off in object obj of file
// fid, on OST ost.
func (c *Client) writeCall(ctx context.Context, fid proto.FID, ost uint32, obj proto.ObjID, off uint64, data []byte) (*rpc.Call, error) {
	owner, err := c.ownerOf(ctx, fid)
	if err != nil {
		return nil, err
	}
	g := c.grants()
	req := &proto.OWriteReq{Obj: obj, Off: off, Grant: proto.WriteGrant{Client: g.id, Owner: owner, Want: c.grantWant(), Through: isThrough(ctx)}}
	return &rpc.Call{Method: proto.OWrite, Req: req, Resp: &proto.OWriteReply{}, BulkOut: [][]byte{data}}, nil
}

type throughKey struct{}

// withThrough marks the writes made under ctx as written through
// (WriteGrant.Through).
func withThrough(ctx context.Context) context.Context {
	return context.WithValue(ctx, throughKey{}, true)
}

func isThrough(ctx context.Context) bool { return ctx.Value(throughKey{}) != nil }

// noteGrant records the grant a successful write's reply carries.
func (c *Client) noteGrant(ost uint32, call *rpc.Call) {
	if call.Direct {
		c.counters.directWrites.Add(1)
	}
	r, ok := call.Resp.(*proto.OWriteReply)
	if !ok {
		return
	}
	g := c.grants()
	g.mu.Lock()
	defer g.mu.Unlock()
	if req, ok := call.Req.(*proto.OWriteReq); ok {
		if r.OverQuota {
			g.overQuota[req.Grant.Owner] = time.Now()
		} else {
			delete(g.overQuota, req.Grant.Owner)
		}
	}
	if r.Grant.Seq > 0 {
		g.heard[ost] = time.Now()
	}
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
	c.noteOwner(fid, rep.Owner)
	return rep.Owner, nil
}

// noteOwner remembers who fid's blocks are charged to, for ownerTTL.
func (c *Client) noteOwner(fid proto.FID, owner proto.Owner) {
	g := c.grants()
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
	g.owners[fid] = ownerEntry{owner: owner, at: time.Now()}
}
