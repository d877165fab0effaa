package mds

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// FIDs reserved for another MDT's mkdirs. A coordinator that creates a
// directory (or a striped directory's master and stripes) on other MDTs
// names the new objects itself, from FIDs those MDTs reserved for it in
// advance: it needs no answer from them before it can write its record,
// and a FID a record carries can never be handed out again after a crash,
// because each block is durable on its MDT before it leaves. The
// coordinator keeps what is left of each block in a pool.

var (
	keyStripedSeq = []byte("Mseq.striped")
	keyStripeSeq  = []byte("Mseq.stripe")
)

// fidBlock is how many FIDs of a kind one reservation covers: one synced
// batch per that many objects.
func fidBlock(kind uint8) uint32 {
	if kind == proto.FIDPlain {
		return 1024
	}
	return 32
}

type poolKey struct {
	mdt  uint32
	kind uint8
}

func (m *MDT) registerFIDReserve() {
	rpc.HandleFunc(m.Srv, proto.MReserveFIDs, func(ctx context.Context, r *proto.ReserveFIDsReq) (any, error) {
		if r.Coord >= proto.MaxMDTs || r.Coord == uint32(m.cfg.Index) {
			return nil, fmt.Errorf("mdt%d: reserve FIDs for mdt%d: %w", m.cfg.Index, r.Coord, syscall.EINVAL)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		fids, err := m.reserveFIDsLocked(r.Kind, r.N, r.Coord)
		if err != nil {
			return nil, err
		}
		return &proto.ReserveFIDsReply{FIDs: fids}, nil
	})
}

// reserveFIDsLocked hands out n consecutive FIDs of one kind, durably
// reserved before they leave, for MDT coord (this one's own pool when
// coord is this MDT). Plain FIDs come from the sequence every inode here
// takes its FID from, and are remembered by coordinator so that a request
// for one that arrives before the record creating it can pull the record
// (mkdir_async.go). m.mu is held.
func (m *MDT) reserveFIDsLocked(kind uint8, n, coord uint32) ([]proto.FID, error) {
	if n == 0 || n > 4096 {
		return nil, fmt.Errorf("mdt%d: reserve %d FIDs: %w", m.cfg.Index, n, syscall.EINVAL)
	}
	b := m.db.NewBatch()
	var seq uint64
	var first uint32
	switch kind {
	case proto.FIDPlain:
		if m.seq.NextOid == 0 || uint64(m.seq.NextOid)+uint64(n) >= 1<<32 {
			if err := m.nextSeqLocked(); err != nil {
				b.Close()
				return nil, err
			}
		}
		seq, first = m.seq.Seq, m.seq.NextOid
		m.seq.NextOid += n
		if err := m.seqAdvanced(); err != nil { // durable before the FIDs leave
			b.Close()
			return nil, err
		}
	case proto.FIDStripedMaster, proto.FIDDirStripe:
		key, local := keyStripedSeq, uint64(proto.StripedSeqLocal)
		if kind == proto.FIDDirStripe {
			key, local = keyStripeSeq, proto.StripeSeqLocal
		}
		first = 1
		if v, closer, err := m.db.Get(key); err == nil {
			if len(v) == 4 {
				first = binary.BigEndian.Uint32(v)
			}
			closer.Close()
		} else if !errors.Is(err, pebble.ErrNotFound) {
			b.Close()
			return nil, fmt.Errorf("mdt%d: reserve FIDs: %v: %w", m.cfg.Index, err, syscall.EIO)
		}
		if uint64(first)+uint64(n) > 1<<32 {
			b.Close()
			return nil, fmt.Errorf("mdt%d: striped directory FIDs exhausted: %w", m.cfg.Index, syscall.ENOSPC)
		}
		seq = proto.MDTSeq(m.cfg.Index, local)
		b.Set(key, binary.BigEndian.AppendUint32(nil, first+n), nil)
	default:
		b.Close()
		return nil, fmt.Errorf("mdt%d: reserve FIDs of kind %d: %w", m.cfg.Index, kind, syscall.EINVAL)
	}
	if kind == proto.FIDPlain && coord != uint32(m.cfg.Index) {
		// Who holds the block outlives a restart: a client may ask for
		// one of its FIDs before the coordinator's record arrives, and
		// only then can the record be pulled (pullOnMiss).
		b.Set(fidGrantKey(seq, first), binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, coord), first+n), nil)
	}
	if b.Count() == 0 {
		b.Close() // plain, our own: seqAdvanced made the reservation durable
	} else if err := m.commit(b, true); err != nil {
		return nil, err
	}
	if kind == proto.FIDPlain && coord != uint32(m.cfg.Index) {
		m.grants.mu.Lock()
		m.grants.out = append(m.grants.out, fidRange{coord: coord, seq: seq, first: first, end: first + n})
		m.grants.mu.Unlock()
		m.grants.given.Add(1)
	}
	out := make([]proto.FID, n)
	for i := range out {
		out[i] = proto.FID{Seq: seq, Oid: first + uint32(i)}
	}
	return out, nil
}

// takeFID returns a FID of the given kind for an object this MDT's
// operation creates on MDT mdt. The pool is refilled in the background
// when it runs low, so a storm of mkdirs rarely waits for a reservation;
// an empty pool reserves a block there and then.
func (m *MDT) takeFID(ctx context.Context, mdt uint32, kind uint8) (proto.FID, error) {
	if f, ok := m.pooledFID(mdt, kind); ok {
		return f, nil
	}
	k := poolKey{mdt, kind}
	fids, err := m.reserveBlock(ctx, k)
	if err != nil {
		return proto.FID{}, err
	}
	m.pools.add(k, fids[1:], false)
	return fids[0], nil
}

// pooledFID is takeFID when the pool has one, which never waits: false
// when it is empty.
func (m *MDT) pooledFID(mdt uint32, kind uint8) (proto.FID, bool) {
	k := poolKey{mdt, kind}
	// Only another MDT's pool is refilled ahead: that costs a round
	// trip (and touches no local state, so it may outlive this MDT).
	low := -1
	if mdt != uint32(m.cfg.Index) {
		low = int(fidBlock(kind) / 4)
	}
	f, ok, refill := m.pools.take(k, low)
	if refill {
		go m.refill(k)
	}
	return f, ok
}

// refill adds a block to the pool of k in the background.
func (m *MDT) refill(k poolKey) {
	ctx, cancel := m.untilStop(context.Background())
	defer cancel()
	fids, _ := m.reserveBlock(ctx, k) // on failure, the next take that finds the pool empty reserves, and reports
	m.pools.add(k, fids, true)
}

// fidPools are the FIDs other MDTs (and this one) reserved for this
// MDT's operations, by MDT and kind, under their own lock.
type fidPools struct {
	mu        sync.Mutex
	fids      map[poolKey][]proto.FID
	refilling map[poolKey]bool // a background refill of that pool is on its way
}

// take returns the first FID of k's pool, if it has one. refill says the
// caller is to refill the pool in the background: fewer than low are
// left (low < 0: never) and no refill is on its way.
func (p *fidPools) take(k poolKey, low int) (f proto.FID, ok, refill bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pool := p.fids[k]
	if len(pool) == 0 {
		return proto.FID{}, false, false
	}
	f, p.fids[k] = pool[0], pool[1:]
	if len(pool)-1 < low && !p.refilling[k] {
		if p.refilling == nil {
			p.refilling = map[poolKey]bool{}
		}
		p.refilling[k] = true
		refill = true
	}
	return f, true, refill
}

// add puts fids in k's pool; refilled ends the refill under way.
func (p *fidPools) add(k poolKey, fids []proto.FID, refilled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if refilled {
		delete(p.refilling, k)
	}
	if p.fids == nil {
		p.fids = map[poolKey][]proto.FID{}
	}
	p.fids[k] = append(p.fids[k], fids...)
}

// reserveBlock reserves a block of FIDs of k's kind on k's MDT.
func (m *MDT) reserveBlock(ctx context.Context, k poolKey) ([]proto.FID, error) {
	self := uint32(m.cfg.Index)
	var fids []proto.FID
	if k.mdt == self {
		m.mu.Lock()
		var err error
		fids, err = m.reserveFIDsLocked(k.kind, fidBlock(k.kind), self)
		m.mu.Unlock()
		if err != nil {
			return nil, err
		}
	} else {
		c, err := m.peer(ctx, k.mdt)
		if err != nil {
			return nil, err
		}
		// Sent again if the reply is lost, a block is wasted, not reused.
		r, err := invokePeer[proto.ReserveFIDsReply](ctx, c, proto.MReserveFIDs, &proto.ReserveFIDsReq{Kind: k.kind, N: fidBlock(k.kind), Coord: self})
		if err != nil {
			return nil, fmt.Errorf("mdt%d: reserve FIDs on mdt%d: %w", m.cfg.Index, k.mdt, err)
		}
		for _, f := range r.FIDs {
			if f.MDT() != int(k.mdt) || f.Oid == 0 || kindOf(f) != k.kind {
				return nil, fmt.Errorf("mdt%d: mdt%d reserved FID %s of the wrong kind: %w", m.cfg.Index, k.mdt, f, syscall.EIO)
			}
		}
		fids = r.FIDs
	}
	if len(fids) == 0 {
		return nil, fmt.Errorf("mdt%d: mdt%d reserved no FIDs: %w", m.cfg.Index, k.mdt, syscall.EIO)
	}
	return fids, nil
}

func kindOf(f proto.FID) uint8 {
	switch {
	case f.IsDirStripe():
		return proto.FIDDirStripe
	case f.IsStripedDir():
		return proto.FIDStripedMaster
	}
	return proto.FIDPlain
}

// keyFIDGrant prefixes the records of plain FID blocks granted to other
// MDTs: seq and first FID in the key, coordinator and end in the value.
var keyFIDGrant = []byte("Mfidgrant.")

func fidGrantKey(seq uint64, first uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(append([]byte(nil), keyFIDGrant...), seq), first)
}

// loadFIDGrants reads back the blocks granted to other MDTs before a
// restart.
func (m *MDT) loadFIDGrants() error {
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: keyFIDGrant, UpperBound: prefixEnd(keyFIDGrant)})
	if err != nil {
		return fmt.Errorf("mdt%d: load FID grants: %w", m.cfg.Index, err)
	}
	defer it.Close()
	m.grants.mu.Lock()
	defer m.grants.mu.Unlock()
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key()[len(keyFIDGrant):], it.Value()
		if len(k) != 12 || len(v) != 8 {
			continue
		}
		m.grants.out = append(m.grants.out, fidRange{coord: binary.BigEndian.Uint32(v), seq: binary.BigEndian.Uint64(k),
			first: binary.BigEndian.Uint32(k[8:]), end: binary.BigEndian.Uint32(v[4:])})
	}
	return it.Error()
}
