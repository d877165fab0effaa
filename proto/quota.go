package proto

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Space grants and quotas.
//
// Grants: every OWriteReq carries a WriteGrant naming the client instance,
// the owner to charge and the grant the client would like to hold on that
// OST; every OWriteReply carries the grant the OST now holds for it. Space
// an OST has granted is set aside from what it can promise anyone else, so
// writes covered by a grant cannot fail with ENOSPC.
//
// Quotas follow Lustre's master/slave split. Limits live on MDT0 as extended
// attributes of the filesystem root (QuotaXattrPrefix + "u.1000"), set
// through any mount. MDT0 is the quota master: it hands each slave target
// (OSTs for blocks, MDTs for inodes) an allowance per limited id and keeps
// the sum of allowances within the hard limit. A slave checks each
// allocation against its allowance and asks the master for more only when
// it runs out, so the hot path is local.

// Quota types, as lfs quota's -u, -g and -p.
const (
	QuotaUser uint8 = iota
	QuotaGroup
	QuotaProject
)

// Quota kinds: what a slave target enforces.
const (
	QuotaBlocks uint8 = iota // bytes allocated, enforced by OSTs
	QuotaInodes              // inodes, enforced by MDTs
)

// QuotaKey names one quota: a user, group or project id.
type QuotaKey struct {
	Type uint8
	ID   uint32
}

var quotaLetters = [...]string{QuotaUser: "u", QuotaGroup: "g", QuotaProject: "p"}

// QuotaTypeName is "usr", "grp" or "prj", as lfs quota prints them.
func QuotaTypeName(t uint8) string {
	switch t {
	case QuotaUser:
		return "usr"
	case QuotaGroup:
		return "grp"
	case QuotaProject:
		return "prj"
	}
	return "?"
}

func (k QuotaKey) String() string {
	if int(k.Type) < len(quotaLetters) {
		return quotaLetters[k.Type] + ":" + strconv.FormatUint(uint64(k.ID), 10)
	}
	return fmt.Sprintf("type%d:%d", k.Type, k.ID)
}

// Owner is who a file's blocks and inodes are charged to.
type Owner struct {
	Uid, Gid, Projid uint32
}

// Keys returns the user, group and project quotas o is charged to.
func (o Owner) Keys() [3]QuotaKey {
	return [3]QuotaKey{{QuotaUser, o.Uid}, {QuotaGroup, o.Gid}, {QuotaProject, o.Projid}}
}

// QuotaLimit is one quota's limits; 0 means no limit. Block limits are
// bytes. Only hard limits are enforced; soft limits are reported.
type QuotaLimit struct {
	Key                  QuotaKey
	BlockSoft, BlockHard uint64
	InodeSoft, InodeHard uint64
}

// Hard is the hard limit of the given kind.
func (l QuotaLimit) Hard(kind uint8) uint64 {
	if kind == QuotaInodes {
		return l.InodeHard
	}
	return l.BlockHard
}

const (
	// QuotaXattrPrefix names the root's extended attributes that hold the
	// limits: QuotaXattrPrefix + "u.1000" for user 1000.
	QuotaXattrPrefix = "stripefs.quota."
	// ProjidXattr holds an inode's project id (decimal). New files and
	// directories inherit their parent's.
	ProjidXattr = "stripefs.projid"
)

// QuotaXattrName is the root xattr that holds k's limits.
func QuotaXattrName(k QuotaKey) string {
	return QuotaXattrPrefix + strings.Replace(k.String(), ":", ".", 1)
}

// ParseQuotaXattrName reverses QuotaXattrName.
func ParseQuotaXattrName(name string) (QuotaKey, bool) {
	rest, ok := strings.CutPrefix(name, QuotaXattrPrefix)
	if !ok {
		return QuotaKey{}, false
	}
	t, id, ok := strings.Cut(rest, ".")
	if !ok {
		return QuotaKey{}, false
	}
	typ, err := ParseQuotaType(t)
	if err != nil {
		return QuotaKey{}, false
	}
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		return QuotaKey{}, false
	}
	return QuotaKey{typ, uint32(n)}, true
}

// ParseQuotaType reads "u", "g" or "p" (or usr, grp, prj, user, group,
// project).
func ParseQuotaType(s string) (uint8, error) {
	switch s {
	case "u", "usr", "user":
		return QuotaUser, nil
	case "g", "grp", "group":
		return QuotaGroup, nil
	case "p", "prj", "project":
		return QuotaProject, nil
	}
	return 0, fmt.Errorf("quota type %q: want u, g or p", s)
}

// Value is the xattr value that holds l: "bsoft=0 bhard=10485760 isoft=0
// ihard=1000".
func (l QuotaLimit) Value() string {
	return fmt.Sprintf("bsoft=%d bhard=%d isoft=%d ihard=%d", l.BlockSoft, l.BlockHard, l.InodeSoft, l.InodeHard)
}

// ParseQuotaLimit reads a Value. Missing fields are 0 (no limit); unknown
// ones and soft limits above hard ones are errors.
func ParseQuotaLimit(k QuotaKey, v string) (QuotaLimit, error) {
	l := QuotaLimit{Key: k}
	for _, f := range strings.Fields(v) {
		name, val, ok := strings.Cut(f, "=")
		n, err := strconv.ParseUint(val, 10, 64)
		if !ok || err != nil {
			return l, fmt.Errorf("quota %s: bad field %q: %w", k, f, syscall.EINVAL)
		}
		switch name {
		case "bsoft":
			l.BlockSoft = n
		case "bhard":
			l.BlockHard = n
		case "isoft":
			l.InodeSoft = n
		case "ihard":
			l.InodeHard = n
		default:
			return l, fmt.Errorf("quota %s: unknown field %q: %w", k, name, syscall.EINVAL)
		}
	}
	if l.BlockHard != 0 && l.BlockSoft > l.BlockHard || l.InodeHard != 0 && l.InodeSoft > l.InodeHard {
		return l, fmt.Errorf("quota %s: soft limit above hard limit: %w", k, syscall.EINVAL)
	}
	return l, nil
}

// WriteGrant rides on every OWriteReq.
type WriteGrant struct {
	// Client identifies the client instance (random, one per mount); the
	// OST keeps its grant under it across reconnects. 0 writes without a
	// grant.
	Client uint64
	// Owner is charged for the blocks the write allocates.
	Owner Owner
	// Want is the grant the client would like to hold after this write.
	Want uint64
	// Through marks a write the client's grant does not cover (written
	// through, not cached): the OST takes its space from what is free
	// and never from the grant, which the client's cached data counts
	// on, so that it fails with ENOSPC rather than a later flush.
	Through bool
}

// GrantReply is the grant the OST holds for the writing client after a
// write. Replies of writes in flight together can arrive in any order:
// Seq increases with every change, and 0 means "unchanged".
type GrantReply struct {
	Grant uint64
	Seq   uint64
}

// QuotaLimitsReply is every limit the master knows.
type QuotaLimitsReply struct{ Limits []QuotaLimit }

// QuotaAcquireReq asks the master to set the slave's allowance for Key to
// at least Usage+Need. With Need 0 a slave registers its usage (when it
// learns of a limit); with Release it hands back what exceeds Usage.
type QuotaAcquireReq struct {
	Target  string // "ost3", "mdt1"
	Kind    uint8
	Key     QuotaKey
	Usage   uint64 // the slave's usage, writes in flight included
	Need    uint64
	Release bool
}

// QuotaAcquireReply is the slave's allowance after the request. Granted
// below Usage+Need is a refusal (EDQUOT). Limited false says there is no
// hard limit of this kind: the slave stops tracking the id.
type QuotaAcquireReply struct {
	Granted uint64
	Limited bool
}

// QuotaGetReq asks a target for its usage of one quota; Refresh makes it
// re-read the limits from the master first (setquota pokes every target
// this way so a new limit applies at once).
type QuotaGetReq struct {
	Key     QuotaKey
	Refresh bool
}

// QuotaGetReply is one target's part of a quota. Usage is bytes (OSTs) or
// inodes (MDTs). OSTs add their space accounting.
type QuotaGetReply struct {
	Target    string
	Kind      uint8
	Usage     uint64
	Allowance uint64
	Limited   bool
	// OSTs only: bytes allocated to objects, granted to clients and not
	// yet used, and the capacity the OST promises from.
	SpaceUsed, SpaceGranted, SpaceTotal uint64
}

// OwnerReq asks a file's MDT who the file's blocks are charged to.
type OwnerReq struct{ FID FID }

type OwnerReply struct{ Owner Owner }

// OSetParamReq changes an OST tunable at run time, as lctl set_param
// does: "fiemap_fail" (test and benchmark knob), "capacity".
type OSetParamReq struct {
	Name  string
	Value string
}

// QuotaMaster is the quota master (MDT0) as a slave target sees it.
type QuotaMaster interface {
	QuotaLimits(ctx context.Context) ([]QuotaLimit, error)
	QuotaAcquire(ctx context.Context, req *QuotaAcquireReq) (*QuotaAcquireReply, error)
}

// QuotaSlave is a target's side of quota enforcement (Lustre's qsd). Per
// id with a hard limit of its kind it holds the allowance the master
// granted; Within answers from memory, and only an allocation that would
// pass the allowance pays an RPC to the master (Acquire). Allowances above
// usage go back to the master after Idle without allocations, so an id's
// quota does not stay parked on a target that stopped writing.
//
// Before the first successful Refresh the slave knows no limits and
// enforces none: a target must not refuse writes because MDT0 is slow to
// start. Allowances are not persisted: a restarted slave registers its
// usage again and the master recomputes its share.
type QuotaSlave struct {
	Target string
	Kind   uint8
	Master QuotaMaster
	// Usage returns the target's current usage of a quota.
	Usage func(QuotaKey) uint64
	// Idle is how long unused allowance is kept after the last allocation.
	Idle time.Duration

	acqMu  sync.Mutex // one master RPC at a time, so replies apply in order
	mu     sync.Mutex
	limits map[QuotaKey]QuotaLimit // ids with a hard limit of Kind
	allow  map[QuotaKey]*allowance
	kick   chan struct{} // wakes Run to release at once

	Acquires, Refusals, Releases, Failures atomic.Int64
}

type allowance struct {
	granted uint64
	last    time.Time
}

// Within reports whether usage may grow to total for k without asking the
// master.
func (s *QuotaSlave) Within(k QuotaKey, total uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, limited := s.limits[k]; !limited {
		return true
	}
	a := s.allow[k]
	if a == nil || total > a.granted {
		return false
	}
	a.last = time.Now() // in use: not idle, not to be released under a writer
	return true
}

// Limited reports whether k has a hard limit of the slave's kind.
func (s *QuotaSlave) Limited(k QuotaKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, limited := s.limits[k]
	return limited
}

// State returns k's allowance and whether k is limited here.
func (s *QuotaSlave) State(k QuotaKey) (allowance uint64, limited bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, limited = s.limits[k]
	if a := s.allow[k]; a != nil {
		allowance = a.granted
	}
	return allowance, limited
}

// Acquire makes sure the allowance for k covers usage+need, asking the
// master if it does not. It fails with EDQUOT when the master refuses and
// with EIO when the master cannot be reached.
func (s *QuotaSlave) Acquire(ctx context.Context, k QuotaKey, usage, need uint64) error {
	s.acqMu.Lock()
	defer s.acqMu.Unlock()
	if s.Within(k, usage+need) { // another writer acquired meanwhile
		return nil
	}
	return s.ask(ctx, &QuotaAcquireReq{Target: s.Target, Kind: s.Kind, Key: k, Usage: usage, Need: need})
}

// ask sends one request to the master and applies the answer. acqMu is
// held.
func (s *QuotaSlave) ask(ctx context.Context, req *QuotaAcquireReq) error {
	s.Acquires.Add(1)
	r, err := s.Master.QuotaAcquire(ctx, req)
	if err != nil {
		s.Failures.Add(1)
		return fmt.Errorf("%s: quota %s: ask the master: %v: %w", s.Target, req.Key, err, syscall.EIO)
	}
	s.mu.Lock()
	if !r.Limited {
		delete(s.limits, req.Key)
		delete(s.allow, req.Key)
		s.mu.Unlock()
		return nil
	}
	if s.allow == nil {
		s.allow = map[QuotaKey]*allowance{}
	}
	a := s.allow[req.Key]
	if a == nil {
		a = &allowance{}
		s.allow[req.Key] = a
	}
	a.granted = r.Granted
	if !req.Release {
		a.last = time.Now()
	}
	s.mu.Unlock()
	if r.Granted < req.Usage+req.Need {
		s.Refusals.Add(1)
		return fmt.Errorf("%s: quota %s exceeded: %w", s.Target, req.Key, syscall.EDQUOT)
	}
	return nil
}

// Refresh rereads the limits from the master. Ids that became limited are
// registered with their current usage, so the master counts them before
// it grants anyone else more.
func (s *QuotaSlave) Refresh(ctx context.Context) error {
	lims, err := s.Master.QuotaLimits(ctx)
	if err != nil {
		s.Failures.Add(1)
		return fmt.Errorf("%s: quota limits: %w", s.Target, err)
	}
	next := map[QuotaKey]QuotaLimit{}
	for _, l := range lims {
		if l.Hard(s.Kind) > 0 {
			next[l.Key] = l
		}
	}
	var fresh []QuotaKey
	s.mu.Lock()
	for k, l := range next {
		if old, ok := s.limits[k]; ok && old != l {
			// A changed limit (a lowered one above all) must not be
			// exceeded on the strength of an allowance granted under the
			// old one: start again from usage.
			delete(s.allow, k)
		}
		if s.allow[k] == nil {
			fresh = append(fresh, k)
		}
	}
	for k := range s.allow {
		if _, ok := next[k]; !ok {
			delete(s.allow, k)
		}
	}
	s.limits = next
	s.mu.Unlock()
	s.acqMu.Lock()
	defer s.acqMu.Unlock()
	for _, k := range fresh {
		if s.allowanceOf(k) != nil {
			continue
		}
		err := s.ask(ctx, &QuotaAcquireReq{Target: s.Target, Kind: s.Kind, Key: k, Usage: s.Usage(k)})
		if err != nil && !errors.Is(err, syscall.EDQUOT) {
			return err
		}
	}
	return nil
}

func (s *QuotaSlave) allowanceOf(k QuotaKey) *allowance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.allow[k]
}

// ReleaseIdle hands back the allowance above usage of ids that have not
// allocated for Idle.
func (s *QuotaSlave) ReleaseIdle(ctx context.Context) {
	// Usage is never called with mu held: the target's own lock is taken
	// before mu on its allocation path.
	var idle []QuotaKey
	s.mu.Lock()
	for k, a := range s.allow {
		if time.Since(a.last) >= s.Idle {
			idle = append(idle, k)
		}
	}
	s.mu.Unlock()
	if len(idle) == 0 {
		return
	}
	s.acqMu.Lock()
	defer s.acqMu.Unlock()
	for _, k := range idle {
		usage := s.Usage(k)
		s.mu.Lock()
		a := s.allow[k]
		stale := a != nil && time.Since(a.last) >= s.Idle && a.granted > usage
		s.mu.Unlock()
		if !stale {
			continue
		}
		if err := s.ask(ctx, &QuotaAcquireReq{Target: s.Target, Kind: s.Kind, Key: k, Usage: usage, Release: true}); err == nil {
			s.Releases.Add(1)
		}
	}
}

// Release marks k's allowance as unused, so that Run hands back what
// exceeds usage at once rather than after Idle: usage dropped (a file was
// removed), and another target may need the quota now. It never blocks.
func (s *QuotaSlave) Release(k QuotaKey) {
	s.mu.Lock()
	a := s.allow[k]
	if a != nil {
		a.last = time.Time{}
	}
	if s.kick == nil {
		s.kick = make(chan struct{}, 1)
	}
	kick := s.kick
	s.mu.Unlock()
	if a != nil {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

// Run refreshes the limits every refresh and releases idle allowance
// every tick until ctx ends. The first refresh is retried each tick until
// it succeeds.
func (s *QuotaSlave) Run(ctx context.Context, refresh, tick time.Duration) {
	s.mu.Lock()
	if s.kick == nil {
		s.kick = make(chan struct{}, 1)
	}
	kick := s.kick
	s.mu.Unlock()
	loaded := s.Refresh(ctx) == nil
	last := time.Now()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
		if !loaded || time.Since(last) >= refresh {
			loaded = s.Refresh(ctx) == nil || loaded
			last = time.Now()
		}
		s.ReleaseIdle(ctx)
	}
}
