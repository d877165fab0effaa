package ost

import (
	"context"
	"fmt"
	"log/slog"
	"math/bits"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/proto"
)

// space is the OST's accounting of bytes: allocated to objects (used),
// promised to clients and not yet used (granted), and reserved by
// allocating writes in flight (pending). What the OST can still promise is
//
//	free = min(capacity − used, disk available) − granted − pending
//
// and grants are only ever taken out of free, so the OST never promises
// more space than it has. A write that allocates takes its space from the
// writing client's grant first and from free for the rest; if free cannot
// cover the rest the write fails with ENOSPC before a byte is written.
//
// Per-id block usage (user, group, project) lives here too, beside the
// bytes it counts, under the same lock.
type space struct {
	o *OST

	mu       sync.Mutex
	capacity uint64 // 0: the disk's
	used     uint64
	granted  uint64
	inline   int64 // inline objects (inline.go)
	pending  uint64
	usage    map[proto.QuotaKey]uint64 // allocated bytes per id
	qpending map[proto.QuotaKey]uint64 // reserved by writes in flight, per id
	clients  map[uint64]*grantee
	byConn   map[uint64]map[uint64]struct{} // connection → clients that wrote on it
	// seq orders the grants replies report. A client keeps the reply
	// with the highest, so it starts from the clock, not from 0: a
	// restarted OST's replies must supersede the ones before the restart,
	// or the client would count on its old grant, cut at the restart
	// (fitGrantsLocked) or taken back, until the count caught up.
	seq   uint64
	bound sync.Map // connClient → struct{}: fast path of bind
}

// grantee is one client's grant.
type grantee struct {
	id        uint64
	grant     uint64
	conns     int       // live connections it wrote on
	gone      time.Time // when the last one went away; zero while connected
	lastAlloc time.Time
}

type connClient struct{ conn, client uint64 }

func newSpace(o *OST, capacity uint64) *space {
	return &space{o: o, capacity: capacity, usage: map[proto.QuotaKey]uint64{}, qpending: map[proto.QuotaKey]uint64{},
		clients: map[uint64]*grantee{}, byConn: map[uint64]map[uint64]struct{}{}, seq: uint64(time.Now().UnixNano())}
}

// load sums the object records and restores the grants. Every client
// starts disconnected: one that does not come back within the grace
// period loses its grant.
func (s *space) load() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	err := s.o.idx.scan(func(_ proto.ObjID, r objRecord) {
		if r.Inline {
			s.inline++
		}
		s.used += r.Bytes
		for _, k := range r.Owner.Keys() {
			s.usage[k] += r.Bytes
		}
	}, func(client, grant uint64) {
		s.clients[client] = &grantee{id: client, grant: grant, gone: now, lastAlloc: now}
		s.granted += grant
	})
	if err != nil {
		return err
	}
	return s.fitGrantsLocked()
}

// fitGrantsLocked cuts the grants, each in the same proportion, to what
// the OST has left. After an unclean stop the grants are as the index
// last committed them, but the object records were reconciled with the
// files, and the files may hold more than the index knew: allocations
// whose record and grant change were lost with the WAL tail (a write
// fdatasync'd by OSync within a group commit of the crash, or one the
// disk wrote on its own), objects whose destroy did not survive and whose
// freed space had been granted again. Kept as they were, the grants would
// promise space that is not there: a client would cache data it cannot
// write, and a full disk would fence the OST. A disk that filled while
// the OST was down does the same. s.mu is held.
func (s *space) fitGrantsLocked() error {
	room := s.availLocked()
	if s.granted <= room {
		return nil
	}
	b := s.o.idx.db.NewBatch()
	before := s.granted
	s.granted = 0
	for id, g := range s.clients {
		hi, lo := bits.Mul64(g.grant, room)
		cut, _ := bits.Div64(hi, lo, before) // hi < before: g.grant ≤ before, room < before
		s.o.ctr.grantReturned.Add(int64(g.grant - cut))
		g.grant = cut
		s.granted += cut
		b.Set(grantKey(id), grantRecord{Grant: cut}.marshal(), nil)
	}
	s.o.logf(slog.LevelInfo, "%d bytes granted, %d left (used %d): grants cut to fit", before, room, s.used)
	if err := s.o.idx.commit(b); err != nil {
		return fmt.Errorf("%s: fit grants: %w", s.o.name, err)
	}
	return nil
}

// diskAvail is what the filesystem under the OST has for unprivileged
// writers beyond the OST's reserve (internal/diskspace): its index,
// truncates and destroys always find room.
func (s *space) diskAvail() uint64 {
	usable, err := s.o.reserve.Usable(s.o.dir)
	if err != nil {
		return 0 // promise nothing we cannot see
	}
	return usable
}

// availLocked is what the OST has left to allocate, granted or not.
// s.mu is held.
func (s *space) availLocked() uint64 {
	avail := s.diskAvail()
	if s.capacity > 0 {
		avail = min(avail, sub(s.capacity, s.used))
	}
	return avail
}

// freeLocked is what the OST can still promise. s.mu is held.
func (s *space) freeLocked() uint64 {
	avail := s.availLocked()
	taken := s.granted + s.pending
	if avail <= taken {
		return 0
	}
	return avail - taken
}

// usageOf is an id's usage with the writes in flight, as the quota slave
// must see it.
func (s *space) usageOf(k proto.QuotaKey) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage[k] + s.qpending[k]
}

// reservation is an admitted allocating write.
type reservation struct {
	client    *grantee // nil for a write without a grant
	owner     proto.Owner
	est       uint64
	fromGrant uint64
}

// admit reserves est bytes for a write by client on behalf of owner:
// quota first (asking the master for allowance when needed, without
// holding the lock), then space, from the client's grant unless through
// says the client does not count on it for this write. It fails with
// EDQUOT or ENOSPC.
func (s *space) admit(ctx context.Context, client uint64, owner proto.Owner, est uint64, through bool) (*reservation, error) {
	keys := owner.Keys()
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		short := -1
		for i, k := range keys {
			if !s.o.quota.Within(k, s.usage[k]+s.qpending[k]+est) {
				short = i
				break
			}
		}
		if short >= 0 {
			k := keys[short]
			usage := s.usage[k] + s.qpending[k]
			s.mu.Unlock()
			if attempt >= 4 { // others keep taking what we acquire
				s.o.ctr.edquot.Add(1)
				return nil, fmt.Errorf("%s: quota %s: %w", s.o.name, k, syscall.EDQUOT)
			}
			if err := s.o.quota.Acquire(ctx, k, usage, est); err != nil {
				if isErrno(err, syscall.EDQUOT) {
					s.o.ctr.edquot.Add(1)
				}
				return nil, err
			}
			continue
		}
		g := s.clients[client]
		var fromGrant uint64
		if g != nil && !through {
			fromGrant = min(est, g.grant)
		}
		if rest := est - fromGrant; rest > 0 && rest > s.freeLocked() {
			s.mu.Unlock()
			s.o.ctr.enospc.Add(1)
			return nil, fmt.Errorf("%s: %d bytes to allocate, %d covered by grant, no space for the rest: %w",
				s.o.name, est, fromGrant, syscall.ENOSPC)
		}
		if g != nil {
			g.grant -= fromGrant
			s.granted -= fromGrant
		}
		s.pending += est
		for _, k := range keys {
			s.qpending[k] += est
		}
		s.mu.Unlock()
		return &reservation{client: g, owner: owner, est: est, fromGrant: fromGrant}, nil
	}
}

// settle ends an allocating write: the object now has after bytes
// allocated and size bytes. The change from the record is charged to the
// owner (the record moves to the write's owner first if the file changed
// hands: a lazy chown). The grant the write took is reduced to what it
// really allocated, the client's grant is topped up towards want, and the
// object and grant records are committed together, with the object's
// bytes when it is inline (rec.Inline). It returns the client's new
// grant.
func (s *space) settle(res *reservation, id proto.ObjID, rec objRecord, had bool, after, size, want uint64, inline []byte) (proto.GrantReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending -= res.est
	for _, k := range res.owner.Keys() {
		s.qpending[k] -= res.est
	}
	if had && rec.Owner != res.owner {
		for _, k := range rec.Owner.Keys() {
			s.usage[k] = sub(s.usage[k], rec.Bytes)
		}
		for _, k := range res.owner.Keys() {
			s.usage[k] += rec.Bytes
		}
		s.o.ctr.ownerChanges.Add(1)
	}
	rec.Owner = res.owner
	if rec.Inline && !had {
		s.inline++
	}
	if after >= rec.Bytes {
		d := after - rec.Bytes
		s.used += d
		for _, k := range res.owner.Keys() {
			s.usage[k] += d
		}
		s.o.ctr.allocatedBytes.Add(int64(d))
		if g := res.client; g != nil {
			// Grant taken beyond what was allocated goes back to it.
			used := min(res.fromGrant, d)
			g.grant += res.fromGrant - used
			s.granted += res.fromGrant - used
			s.o.ctr.grantUsed.Add(int64(used))
		}
	} else {
		s.release(rec.Owner, rec.Bytes-after)
		if g := res.client; g != nil {
			g.grant += res.fromGrant
			s.granted += res.fromGrant
		}
	}
	rec.Bytes, rec.Size = after, size
	b := s.o.idx.db.NewBatch()
	putObject(b, id, rec, inline)
	var reply proto.GrantReply
	if g := res.client; g != nil {
		g.lastAlloc = time.Now()
		s.topUp(g, want)
		s.seq++
		reply = proto.GrantReply{Grant: g.grant, Seq: s.seq}
		b.Set(grantKey(g.id), grantRecord{Grant: g.grant}.marshal(), nil)
	}
	// Committed under s.mu: records of the same client or object land in
	// the order their values were computed.
	return reply, s.o.idx.commit(b)
}

// grantNow is client's grant as a write that allocates nothing (a
// rewrite, or an empty write that only asks for a grant) reports it:
// topped up towards want when it holds less than half of that, so that a
// client that only rewrites, or has not written here yet, holds one too.
func (s *space) grantNow(client, want uint64) (proto.GrantReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.clients[client]
	if g == nil {
		return proto.GrantReply{}, nil
	}
	if g.grant < min(want, maxGrant)/2 {
		s.topUp(g, want)
		b := s.o.idx.db.NewBatch()
		b.Set(grantKey(g.id), grantRecord{Grant: g.grant}.marshal(), nil)
		if err := s.o.idx.commit(b); err != nil {
			return proto.GrantReply{}, err
		}
	}
	s.seq++
	return proto.GrantReply{Grant: g.grant, Seq: s.seq}, nil
}

// maxGrant bounds what one client may hold on one OST.
const maxGrant = 1 << 30

// topUp moves g's grant towards want: up by at most half of what is free
// (so grants shrink as the OST fills and a new client always finds some
// space), down to want when it holds more. s.mu is held.
func (s *space) topUp(g *grantee, want uint64) {
	want = min(want, maxGrant)
	switch {
	case g.grant < want:
		give := min(want-g.grant, s.freeLocked()/2)
		g.grant += give
		s.granted += give
		s.o.ctr.grantGiven.Add(int64(give))
	case g.grant > want:
		back := g.grant - want
		g.grant -= back
		s.granted -= back
		s.o.ctr.grantReturned.Add(int64(back))
	}
}

// release frees n bytes of owner's allocation. s.mu is held.
func (s *space) release(owner proto.Owner, n uint64) {
	s.used = sub(s.used, n)
	for _, k := range owner.Keys() {
		s.usage[k] = sub(s.usage[k], n)
		s.o.quota.Release(k) // another OST may need the quota now
	}
	s.o.ctr.freedBytes.Add(int64(n))
}

// shrink records that an object (punch, destroy) now has after bytes
// allocated; after ≤ the record's, which had says existed. A destroyed object's record is
// deleted, and its bytes if it was inline; an inline one that stays
// holds inline now.
func (s *space) shrink(id proto.ObjID, rec objRecord, had bool, after, size uint64, destroyed bool, inline []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.o.idx.db.NewBatch()
	s.recharge(rec.Owner, rec.Bytes, after) // punch never allocates, but be exact
	if rec.Inline {
		switch {
		case destroyed:
			s.inline--
		case !had: // a truncate made it
			s.inline++
		}
	}
	if destroyed {
		b.Delete(objKey(id), nil)
		if rec.Inline {
			b.Delete(inlineKey(id), nil)
		}
	} else {
		rec.Bytes, rec.Size = after, size
		putObject(b, id, rec, inline)
	}
	return s.o.idx.commit(b)
}

// spilled records that an inline object is a file now, of after bytes
// allocated and size bytes, and drops its inline bytes (inline.go).
func (s *space) spilled(id proto.ObjID, rec objRecord, after, size uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recharge(rec.Owner, rec.Bytes, after)
	s.inline--
	rec.Bytes, rec.Size, rec.Inline = after, size, false
	b := s.o.idx.db.NewBatch()
	b.Set(objKey(id), rec.marshal(), nil)
	b.Delete(inlineKey(id), nil)
	return s.o.idx.commit(b)
}

// recharge moves owner's allocation of an object from before to after
// bytes. s.mu is held.
func (s *space) recharge(owner proto.Owner, before, after uint64) {
	if after < before {
		s.release(owner, before-after)
		return
	}
	d := after - before
	s.used += d
	for _, k := range owner.Keys() {
		s.usage[k] += d
	}
}

func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// bind notes that client wrote on connection conn (from the request's
// peer address), so its grant is kept while it is connected.
func (s *space) bind(peer string, client uint64) {
	conn := connOf(peer)
	if client == 0 || conn == 0 {
		return
	}
	key := connClient{conn, client}
	if _, ok := s.bound.Load(key); ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.byConn[conn]
	if cs == nil {
		cs = map[uint64]struct{}{}
		s.byConn[conn] = cs
	}
	if _, ok := cs[client]; !ok {
		cs[client] = struct{}{}
		g := s.clients[client]
		if g == nil {
			g = &grantee{id: client, lastAlloc: time.Now()}
			s.clients[client] = g
		}
		g.conns++
		g.gone = time.Time{}
	}
	s.bound.Store(key, struct{}{})
}

// connClosed is called when a connection ends: its clients with no other
// connection start their grace period.
func (s *space) connClosed(conn uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for client := range s.byConn[conn] {
		s.bound.Delete(connClient{conn, client})
		if g := s.clients[client]; g != nil {
			g.conns--
			if g.conns <= 0 {
				g.conns, g.gone = 0, now
			}
		}
	}
	delete(s.byConn, conn)
}

// reclaim takes back the grants of clients gone for longer than grace
// (disconnected or evicted) and of connected clients that have not
// allocated for idle. Their records go in one batch.
func (s *space) reclaim(grace, idle time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.o.idx.db.NewBatch()
	n := 0
	for id, g := range s.clients {
		switch {
		case g.conns == 0 && !g.gone.IsZero() && time.Since(g.gone) >= grace:
			s.granted -= g.grant
			s.o.ctr.grantReturned.Add(int64(g.grant))
			s.o.ctr.grantEvictions.Add(1)
			delete(s.clients, id)
			b.Delete(grantKey(id), nil)
			n++
		case g.grant > 0 && idle > 0 && time.Since(g.lastAlloc) >= idle:
			s.granted -= g.grant
			s.o.ctr.grantReturned.Add(int64(g.grant))
			s.o.ctr.grantShrinks.Add(1)
			g.grant = 0
			s.seq++
			b.Set(grantKey(id), grantRecord{}.marshal(), nil)
			n++
		}
	}
	if n > 0 {
		if err := s.o.idx.commit(b); err != nil {
			s.o.logf(slog.LevelWarn, "reclaim grants: %v", err)
		}
	}
}

// snapshot is the space accounting for stats and statfs.
type spaceSnapshot struct {
	capacity, used, granted, pending, free uint64
	clients                                int
	inline                                 int64
}

func (s *space) snapshot() spaceSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return spaceSnapshot{capacity: s.capacity, used: s.used, granted: s.granted, pending: s.pending,
		free: s.freeLocked(), clients: len(s.clients), inline: s.inline}
}

// grantOf is the grant held by client (tests).
func (s *space) grantOf(client uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.clients[client]; g != nil {
		return g.grant
	}
	return 0
}

// Connection tracking. The rpc server knows nothing of grants; the OST
// wraps its listener so that every connection carries an id in its remote
// address (which the rpc layer reports as Request.Peer) and reports its
// close.

// Track wraps l so that o follows its connections: a server that serves
// o's methods on its own listener (an MDT, for Data-on-MDT) passes it
// through this, or o's grants never learn a client left.
func (o *OST) Track(l net.Listener) net.Listener { return trackedListener{Listener: l, s: o.space} }

type trackedListener struct {
	net.Listener
	s *space
}

func (l trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	id := l.s.o.nextConn.Add(1)
	closed := func() { l.s.connClosed(id) }
	// A *net.TCPConn is embedded as such, so the rpc layer's writev
	// (net.Buffers) still reaches it.
	if tc, ok := c.(*net.TCPConn); ok {
		return &trackedTCPConn{TCPConn: tc, id: id, closed: closed}, nil
	}
	return &trackedConn{Conn: c, id: id, closed: closed}, nil
}

type trackedConn struct {
	net.Conn
	id     uint64
	once   sync.Once
	closed func()
}

func (c *trackedConn) RemoteAddr() net.Addr { return connAddr{c.Conn.RemoteAddr(), c.id} }
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.closed)
	return err
}

type trackedTCPConn struct {
	*net.TCPConn
	id     uint64
	once   sync.Once
	closed func()
}

func (c *trackedTCPConn) RemoteAddr() net.Addr { return connAddr{c.TCPConn.RemoteAddr(), c.id} }
func (c *trackedTCPConn) Close() error {
	err := c.TCPConn.Close()
	c.once.Do(c.closed)
	return err
}

// connAddr is a remote address with the connection id appended: "addr#id".
type connAddr struct {
	net.Addr
	id uint64
}

func (a connAddr) String() string { return a.Addr.String() + "#" + strconv.FormatUint(a.id, 10) }

// connOf extracts the connection id from a peer address; 0 if none.
func connOf(peer string) uint64 {
	i := strings.LastIndexByte(peer, '#')
	if i < 0 {
		return 0
	}
	n, _ := strconv.ParseUint(peer[i+1:], 10, 64)
	return n
}
