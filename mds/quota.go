package mds

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/wire"
)

// Quotas on the MDT side (see proto/quota.go for the whole picture).
//
// Every MDT is an inode-quota slave: it checks a create against the
// allowance the master gave it. The owner an inode is charged to is
// recorded beside the inode, in the same batch, so its removal uncharges
// the same ids whatever chown did since (moving usage on chown is left
// out). These records are the truth; the counts per id live in memory,
// summed from them at start and kept current by applying each batch's
// changes when the batch commits (quotaCommitted, from MDT.commit). No
// counter is read and rewritten per create: a namespace operation pays one
// extra key written, and an unlink one extra point read.
//
// MDT0 is also the quota master. The limits are the root's
// stripefs.quota.* extended attributes, set through any mount; the master
// hands every slave target (MDTs for inodes, OSTs for blocks) an
// allowance per limited id and keeps the sum within the hard limit. The
// allowances are committed before they are answered: the master must not
// forget space it handed out.
//
// A project id is the ProjidXattr of an inode; new inodes inherit their
// parent directory's.

// Keys under the 'Q' prefix.
const (
	pQuota = 'Q'
	qOwner = 'c' // Q c fid → proto.Owner the inode is charged to
	qAlloc = 'a' // Q a kind type id target → allowance of one slave (master)
)

// keyQuotaVersion marks a database whose inodes all have owner records.
var keyQuotaVersion = []byte{pQuota, 'v'}

func ownerKey(f proto.FID) []byte {
	k := f.Key()
	return append([]byte{pQuota, qOwner}, k[:]...)
}

func allocPrefix(kind uint8, k proto.QuotaKey) []byte {
	return binary.BigEndian.AppendUint32([]byte{pQuota, qAlloc, kind, k.Type}, k.ID)
}

// quotaState is an MDT's quota machinery.
type quotaState struct {
	slave  *proto.QuotaSlave
	master *quotaMaster // MDT0 only
	conn   *rpc.Client  // others: to MDT0
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	usage   map[proto.QuotaKey]uint64 // inodes per id, as committed
	pending map[*pebble.Batch]*batchDeltas
}

// batchDeltas are the inode counts a batch changes, applied if it commits.
type batchDeltas struct {
	d    map[proto.QuotaKey]int64
	born time.Time
}

// quotaMaster hands out allowances (MDT0).
type quotaMaster struct {
	m  *MDT
	mu sync.Mutex
}

// openQuota counts inode usage if this database has never done so,
// registers the quota methods and starts the slave.
func (m *MDT) openQuota() error {
	if err := m.quotaCheck(); err != nil {
		return err
	}
	q := &quotaState{done: make(chan struct{}), pending: map[*pebble.Batch]*batchDeltas{}}
	var err error
	if q.usage, err = m.countOwners(); err != nil {
		return err
	}
	name := fmt.Sprintf("mdt%d", m.cfg.Index)
	q.slave = &proto.QuotaSlave{Target: name, Kind: proto.QuotaInodes, Usage: m.inodeUsage, Idle: 2 * time.Second}
	if m.cfg.Index == 0 {
		q.master = &quotaMaster{m: m}
		q.slave.Master = q.master
		rpc.HandleFunc(m.Srv, proto.MQuotaLimits, func(ctx context.Context, _ *proto.Empty) (any, error) {
			l, err := q.master.QuotaLimits(ctx)
			return &proto.QuotaLimitsReply{Limits: l}, err
		})
		rpc.HandleFunc(m.Srv, proto.MQuotaAcquire, func(ctx context.Context, r *proto.QuotaAcquireReq) (any, error) {
			return q.master.QuotaAcquire(ctx, r)
		})
	} else {
		q.conn = rpc.NewClient(m.cfg.MGS, name)
		q.conn.Role = rpc.RoleServer
		q.conn.RetryFor = 10 * time.Second
		q.slave.Master = rpcMaster{q.conn}
	}
	rpc.HandleFunc(m.Srv, proto.MQuotaGet, m.quotaGet)
	rpc.HandleFunc(m.Srv, proto.MOwner, m.owner)
	prev := m.Srv.Counters
	m.Srv.Counters = func() []rpc.Counter {
		var out []rpc.Counter
		if prev != nil {
			out = prev()
		}
		return append(out,
			rpc.Counter{Name: "quota_acquires", Value: q.slave.Acquires.Load()},
			rpc.Counter{Name: "quota_refusals", Value: q.slave.Refusals.Load()},
			rpc.Counter{Name: "quota_releases", Value: q.slave.Releases.Load()},
			rpc.Counter{Name: "quota_master_failures", Value: q.slave.Failures.Load()})
	}
	ctx, cancel := context.WithCancel(context.Background())
	q.cancel = cancel
	m.quota = q
	go func() {
		defer close(q.done)
		q.slave.Run(ctx, 10*time.Second, time.Second)
	}()
	return nil
}

// closeQuota stops the slave.
func (m *MDT) closeQuota() {
	if q := m.quota; q != nil {
		q.cancel()
		<-q.done
		if q.conn != nil {
			q.conn.Close()
		}
	}
}

// quotaCheck counts the inodes of a database that predates quotas (or
// lost its counts), charging each to its current owner.
func (m *MDT) quotaCheck() error {
	if _, closer, err := m.db.Get(keyQuotaVersion); err == nil {
		closer.Close()
		return nil
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("mdt%d: quota: %w", m.cfg.Index, err)
	}
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pInode}, UpperBound: []byte{pInode + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	b := m.db.NewBatch()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		var in inode
		if unmarshalInode(it.Value(), &in) != nil {
			continue
		}
		ow := proto.Owner{Uid: in.Attr.Uid, Gid: in.Attr.Gid, Projid: m.projid(in.Attr.FID)}
		b.Set(ownerKey(in.Attr.FID), encode(&ow), nil)
		n++
	}
	b.Set(keyQuotaVersion, []byte{1}, nil)
	if err := m.write(b, pebble.Sync); err != nil {
		return fmt.Errorf("mdt%d: quota check: %w", m.cfg.Index, err)
	}
	if n > 1 {
		m.logf(slog.LevelInfo, "recorded the quota owners of %d inodes", n)
	}
	return nil
}

// countOwners sums the owner records: the inodes each id owns.
func (m *MDT) countOwners() (map[proto.QuotaKey]uint64, error) {
	p := []byte{pQuota, qOwner}
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("mdt%d: quota: %w", m.cfg.Index, err)
	}
	defer it.Close()
	usage := map[proto.QuotaKey]uint64{}
	for ok := it.First(); ok; ok = it.Next() {
		var ow proto.Owner
		if wire.Unmarshal(it.Value(), &ow) != nil {
			continue
		}
		for _, k := range ow.Keys() {
			usage[k]++
		}
	}
	return usage, it.Error()
}

// projid is an inode's project id as committed (0 when it has none).
func (m *MDT) projid(f proto.FID) uint32 {
	v, closer, err := m.db.Get(xattrKey(f, proto.ProjidXattr))
	if err != nil {
		return 0
	}
	defer closer.Close()
	n, err := strconv.ParseUint(string(v), 10, 32)
	if err != nil {
		return 0
	}
	return uint32(n)
}

// batchGet finds key among b's updates: the value of its last set, or
// deleted if its last update removed it. Namespace batches hold a handful
// of keys, so reading them back is cheap, and it lets two inodes created
// in one batch count twice.
func batchGet(b *pebble.Batch, key []byte) (value []byte, found, deleted bool) {
	r := b.Reader()
	for {
		kind, k, v, ok, err := r.Next()
		if !ok || err != nil {
			return value, found, deleted
		}
		if string(k) != string(key) {
			continue
		}
		switch kind {
		case pebble.InternalKeyKindSet:
			value, found, deleted = v, true, false
		case pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete:
			value, found, deleted = nil, false, true
		}
	}
}

// addPending records that b changes k's inode count by delta.
func (m *MDT) addPending(b *pebble.Batch, ow proto.Owner, delta int64) {
	q := m.quota
	if q == nil {
		return // at load, before the counts are summed from the records
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	p := q.pending[b]
	if p == nil {
		if len(q.pending) > 64 {
			// Batches that never reach commit (an operation that failed
			// after preparing its inode) are forgotten after a while.
			for ob, op := range q.pending {
				if time.Since(op.born) > time.Minute {
					delete(q.pending, ob)
				}
			}
		}
		p = &batchDeltas{d: map[proto.QuotaKey]int64{}, born: time.Now()}
		q.pending[b] = p
	}
	for _, k := range ow.Keys() {
		p.d[k] += delta
	}
}

// quotaMerge moves the inode counts pending on from to into, when from's
// changes are applied to into (pebble.Batch.Apply).
func (m *MDT) quotaMerge(from, into *pebble.Batch) {
	q := m.quota
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	p := q.pending[from]
	if p == nil {
		return
	}
	delete(q.pending, from)
	if to := q.pending[into]; to != nil {
		for k, d := range p.d {
			to.d[k] += d
		}
		return
	}
	q.pending[into] = p
}

// quotaCommitted is MDT.commit's hook: b's inode counts apply if it
// committed and are dropped if not.
func (m *MDT) quotaCommitted(b *pebble.Batch, ok bool) {
	q := m.quota
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	p := q.pending[b]
	if p == nil {
		return
	}
	delete(q.pending, b)
	if !ok {
		return
	}
	for k, d := range p.d {
		switch u := q.usage[k]; {
		case d >= 0:
			q.usage[k] = u + uint64(d)
		case uint64(-d) >= u:
			delete(q.usage, k)
		default:
			q.usage[k] = u - uint64(-d)
		}
	}
}

// inodeUsage is k's inode count, counting creates not yet committed (as
// the slave must: they are about to be).
func (m *MDT) inodeUsage(k proto.QuotaKey) uint64 {
	q := m.quota
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	u := q.usage[k]
	for _, p := range q.pending {
		if d := p.d[k]; d > 0 {
			u += uint64(d)
		}
	}
	return u
}

// quotaNewChild is newChild's hook: n is about to be created in dir with
// b. It gives n its parent's project id and fails with EDQUOT when one of
// n's owners has no inode left.
func (m *MDT) quotaNewChild(b *pebble.Batch, dir *inode, n *inode) error {
	proj := m.projid(dir.Attr.FID)
	if proj != 0 {
		b.Set(xattrKey(n.Attr.FID, proto.ProjidXattr), []byte(strconv.FormatUint(uint64(proj), 10)), nil)
	}
	if m.quota == nil {
		return nil
	}
	ow := proto.Owner{Uid: n.Attr.Uid, Gid: n.Attr.Gid, Projid: proj}
	for _, k := range ow.Keys() {
		if !m.quota.slave.Limited(k) {
			continue // the common case: no count to read
		}
		u := m.inodeUsage(k)
		if m.quota.slave.Within(k, u+1) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := m.quota.slave.Acquire(ctx, k, u, 1)
		cancel()
		if err != nil {
			return fmt.Errorf("mdt%d: create: %w", m.cfg.Index, err)
		}
	}
	return nil
}

// quotaCharge is newInode's hook: it charges n to its owners in b.
func (m *MDT) quotaCharge(b *pebble.Batch, n *inode) {
	ow := proto.Owner{Uid: n.Attr.Uid, Gid: n.Attr.Gid}
	if v, found, _ := batchGet(b, xattrKey(n.Attr.FID, proto.ProjidXattr)); found {
		if p, err := strconv.ParseUint(string(v), 10, 32); err == nil {
			ow.Projid = uint32(p)
		}
	}
	b.Set(ownerKey(n.Attr.FID), encode(&ow), nil)
	m.addPending(b, ow, 1)
}

// quotaUncharge is deleteInode's hook: it gives f's inode back to the
// owners it was charged to.
func (m *MDT) quotaUncharge(b *pebble.Batch, f proto.FID) {
	key := ownerKey(f)
	var ow proto.Owner
	if v, found, deleted := batchGet(b, key); found {
		if wire.Unmarshal(v, &ow) != nil {
			return
		}
	} else if deleted {
		return // already uncharged in this batch
	} else {
		v, closer, err := m.db.Get(key)
		if err != nil {
			return // never charged
		}
		err = wire.Unmarshal(v, &ow)
		closer.Close()
		if err != nil {
			return
		}
	}
	b.Delete(key, nil)
	m.addPending(b, ow, -1)
	if m.quota != nil {
		for _, k := range ow.Keys() {
			m.quota.slave.Release(k) // another MDT may need the quota now
		}
	}
}

// quotaGet answers this MDT's inode usage of one quota.
func (m *MDT) quotaGet(ctx context.Context, r *proto.QuotaGetReq) (any, error) {
	if r.Key.Type > proto.QuotaProject {
		return nil, fmt.Errorf("mdt%d: quota type %d: %w", m.cfg.Index, r.Key.Type, syscall.EINVAL)
	}
	if r.Refresh {
		if err := m.quota.slave.Refresh(ctx); err != nil {
			return nil, fmt.Errorf("mdt%d: %v: %w", m.cfg.Index, err, syscall.EIO)
		}
	}
	allow, limited := m.quota.slave.State(r.Key)
	return &proto.QuotaGetReply{Target: m.Srv.Name, Kind: proto.QuotaInodes, Usage: m.inodeUsage(r.Key),
		Allowance: allow, Limited: limited}, nil
}

// owner answers who a file's blocks are charged to.
func (m *MDT) owner(ctx context.Context, r *proto.OwnerReq) (any, error) {
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	return &proto.OwnerReply{Owner: proto.Owner{Uid: n.Attr.Uid, Gid: n.Attr.Gid, Projid: m.projid(r.FID)}}, nil
}

// QuotaLimits reads the limits from the root's xattrs.
func (q *quotaMaster) QuotaLimits(ctx context.Context) ([]proto.QuotaLimit, error) {
	m := q.m
	p := xattrKey(proto.RootFID, proto.QuotaXattrPrefix)
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("mdt0: quota limits: %v: %w", err, syscall.EIO)
	}
	defer it.Close()
	var out []proto.QuotaLimit
	for ok := it.First(); ok; ok = it.Next() {
		name := string(it.Key()[len(xattrPrefix(proto.RootFID)):])
		k, ok := proto.ParseQuotaXattrName(name)
		if !ok {
			continue
		}
		l, err := proto.ParseQuotaLimit(k, string(it.Value()))
		if err != nil {
			logLimitOnce(name, err)
			continue
		}
		out = append(out, l)
	}
	return out, nil
}

func (q *quotaMaster) limit(k proto.QuotaKey) (proto.QuotaLimit, bool) {
	v, closer, err := q.m.db.Get(xattrKey(proto.RootFID, proto.QuotaXattrName(k)))
	if err != nil {
		return proto.QuotaLimit{Key: k}, false
	}
	defer closer.Close()
	l, err := proto.ParseQuotaLimit(k, string(v))
	if err != nil {
		logLimitOnce(proto.QuotaXattrName(k), err)
		return proto.QuotaLimit{Key: k}, false
	}
	return l, true
}

// qunit is the extra allowance a slave gets beyond what it needs, so that
// not every allocation is an RPC to the master: a sixteenth of the limit,
// within bounds, and never more than half of what is left.
func qunit(kind uint8, hard uint64) uint64 {
	if kind == proto.QuotaInodes {
		return min(max(hard/16, 1), 4096)
	}
	return min(max(hard/16, 1<<20), 256<<20)
}

// QuotaAcquire sets one slave's allowance (see QuotaAcquireReq). The sum
// of the allowances of an id stays within its hard limit, except where
// usage alone passes it (a limit set or lowered below what is used):
// a slave's allowance never drops below its usage.
func (q *quotaMaster) QuotaAcquire(ctx context.Context, r *proto.QuotaAcquireReq) (*proto.QuotaAcquireReply, error) {
	if r.Target == "" || len(r.Target) > 64 || r.Kind > proto.QuotaInodes || r.Key.Type > proto.QuotaProject {
		return nil, fmt.Errorf("mdt0: quota acquire: bad request: %w", syscall.EINVAL)
	}
	m := q.m
	l, ok := q.limit(r.Key)
	hard := l.Hard(r.Kind)
	q.mu.Lock()
	defer q.mu.Unlock()
	p := allocPrefix(r.Kind, r.Key)
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("mdt0: quota acquire: %v: %w", err, syscall.EIO)
	}
	var others, cur uint64
	var stale [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Value()) != 8 {
			continue
		}
		v := binary.BigEndian.Uint64(it.Value())
		if string(it.Key()[len(p):]) == r.Target {
			cur = v
		} else {
			others += v
		}
		stale = append(stale, append([]byte(nil), it.Key()...))
	}
	it.Close()
	b := m.db.NewBatch()
	if !ok || hard == 0 {
		// No limit (any more): forget the allowances of this id.
		if len(stale) == 0 {
			return &proto.QuotaAcquireReply{Granted: r.Usage + r.Need}, nil
		}
		for _, k := range stale {
			b.Delete(k, nil)
		}
		return &proto.QuotaAcquireReply{Granted: r.Usage + r.Need}, m.commit(b, true)
	}
	room := sub64(hard, others)
	want := r.Usage + r.Need
	var g uint64
	switch {
	case r.Release:
		g = r.Usage
	case want <= room && r.Need == 0:
		g = want // registering its usage: no extra to park idle
	case want <= room:
		g = want + min(qunit(r.Kind, hard), (room-want)/2)
	default:
		g = max(r.Usage, min(cur, room))
	}
	b.Set(append(p, r.Target...), binary.BigEndian.AppendUint64(nil, g), nil)
	if err := m.commit(b, true); err != nil {
		return nil, err
	}
	return &proto.QuotaAcquireReply{Granted: g, Limited: true}, nil
}

func sub64(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

var badLimits sync.Map

func logLimitOnce(name string, err error) {
	if _, dup := badLimits.LoadOrStore(name+err.Error(), true); !dup {
		slog.Warn(fmt.Sprintf("mdt0: ignoring quota limit %s: %v", name, err), "target", proto.TargetName(proto.KindMDT, 0), "limit", name)
	}
}

// rpcMaster reaches the master on MDT0 from another MDT.
type rpcMaster struct{ c *rpc.Client }

func (r rpcMaster) QuotaLimits(ctx context.Context) ([]proto.QuotaLimit, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rep, err := invokePeer[proto.QuotaLimitsReply](ctx, r.c, proto.MQuotaLimits, &proto.Empty{})
	if err != nil {
		return nil, err
	}
	return rep.Limits, nil
}

func (r rpcMaster) QuotaAcquire(ctx context.Context, req *proto.QuotaAcquireReq) (*proto.QuotaAcquireReply, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return invokePeer[proto.QuotaAcquireReply](ctx, r.c, proto.MQuotaAcquire, req) // it sets an allowance: twice is once
}
