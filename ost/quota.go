package ost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// rpcMaster reaches the quota master (MDT0) over RPC.
type rpcMaster struct{ c *rpc.Client }

// masterTimeout bounds one exchange with the master: a write waiting for
// allowance fails with EIO rather than hanging while MDT0 is away.
const masterTimeout = 10 * time.Second

func (m rpcMaster) QuotaLimits(ctx context.Context) ([]proto.QuotaLimit, error) {
	ctx, cancel := context.WithTimeout(ctx, masterTimeout)
	defer cancel()
	r, err := rpc.Invoke[proto.QuotaLimitsReply](ctx, m.c, proto.MQuotaLimits, &proto.Empty{})
	if err != nil {
		return nil, err
	}
	return r.Limits, nil
}

func (m rpcMaster) QuotaAcquire(ctx context.Context, req *proto.QuotaAcquireReq) (*proto.QuotaAcquireReply, error) {
	ctx, cancel := context.WithTimeout(ctx, masterTimeout)
	defer cancel()
	return rpc.Invoke[proto.QuotaAcquireReply](ctx, m.c, proto.MQuotaAcquire, req)
}

// noMaster is the master of an OST started without one: no limits.
type noMaster struct{}

func (noMaster) QuotaLimits(context.Context) ([]proto.QuotaLimit, error) { return nil, nil }
func (noMaster) QuotaAcquire(_ context.Context, req *proto.QuotaAcquireReq) (*proto.QuotaAcquireReply, error) {
	return &proto.QuotaAcquireReply{Granted: req.Usage + req.Need}, nil
}

// quotaGet answers one quota's usage on this OST, and the OST's space.
func (o *OST) quotaGet(ctx context.Context, r *proto.QuotaGetReq) (any, error) {
	if r.Key.Type > proto.QuotaProject {
		return nil, fmt.Errorf("%s: quota type %d: %w", o.name, r.Key.Type, syscall.EINVAL)
	}
	if r.Refresh {
		if err := o.quota.Refresh(ctx); err != nil {
			return nil, fmt.Errorf("%s: %v: %w", o.name, err, syscall.EIO)
		}
	}
	o.space.mu.Lock()
	usage := o.space.usage[r.Key]
	o.space.mu.Unlock()
	allow, limited := o.quota.State(r.Key)
	sn := o.space.snapshot()
	total := sn.capacity
	if total == 0 {
		total = sn.used + sn.granted + sn.pending + sn.free
	}
	return &proto.QuotaGetReply{Target: o.Srv.Name, Kind: proto.QuotaBlocks, Usage: usage, Allowance: allow, Limited: limited,
		SpaceUsed: sn.used, SpaceGranted: sn.granted, SpaceTotal: total}, nil
}

// setParam changes a tunable: fiemap_fail (0/1) or capacity (bytes, 0 for
// the disk's).
func (o *OST) setParam(ctx context.Context, r *proto.OSetParamReq) (any, error) {
	bad := func() error {
		return fmt.Errorf("%s: set_param %s=%q: %w", o.name, r.Name, r.Value, syscall.EINVAL)
	}
	switch r.Name {
	case "fiemap_fail":
		v, err := strconv.ParseBool(r.Value)
		if err != nil {
			return nil, bad()
		}
		o.SetFiemapFail(v)
	case "capacity":
		v, err := strconv.ParseUint(r.Value, 10, 64)
		if err != nil {
			return nil, bad()
		}
		o.space.mu.Lock()
		o.space.capacity = v
		o.space.mu.Unlock()
	default:
		return nil, bad()
	}
	o.logf(slog.LevelInfo, "set_param %s=%s", r.Name, r.Value)
	return &proto.Empty{}, nil
}

// counters are the OST's own statistics beside per-method RPC counts.
type counters struct {
	fiemapCalls, fiemapFallbacks, allocCheckFailures atomic.Int64
	rewritesSkipped, newAllocations                  atomic.Int64
	allocatedBytes, freedBytes                       atomic.Int64
	grantGiven, grantUsed, grantReturned             atomic.Int64
	grantEvictions, grantShrinks                     atomic.Int64
	enospc, edquot, ownerChanges                     atomic.Int64
	localReads                                       atomic.Int64 // reads lent to a client in this process (local.go)
	directWrites, directCopies                       atomic.Int64 // NoCache writes done with O_DIRECT, and those copied to align them (nocache.go)
	earlyWritebacks                                  atomic.Int64 // writes whose disk write was started at once (store)
	copiedBytes                                      atomic.Int64 // bytes ost_copy wrote (copy.go)
	inlineWrites, spills                             atomic.Int64 // writes to inline objects, and objects moved to files (inline.go)
}

// counters reports the statistics for the stats method (stripefs stats).
// Names ending in _now are gauges; the rest only grow.
func (o *OST) counters() []rpc.Counter {
	sn := o.space.snapshot()
	c := &o.ctr
	return []rpc.Counter{
		{Name: "fiemap_calls", Value: c.fiemapCalls.Load()},
		{Name: "fiemap_fallbacks", Value: c.fiemapFallbacks.Load()},
		{Name: "alloc_check_failures", Value: c.allocCheckFailures.Load()},
		{Name: "rewrites_skipped_accounting", Value: c.rewritesSkipped.Load()},
		{Name: "local_reads", Value: c.localReads.Load()},
		{Name: "direct_writes", Value: c.directWrites.Load()},
		{Name: "direct_write_copies", Value: c.directCopies.Load()},
		{Name: "early_writebacks", Value: c.earlyWritebacks.Load()},
		{Name: "copied_bytes", Value: c.copiedBytes.Load()},
		{Name: "inline_writes", Value: c.inlineWrites.Load()},
		{Name: "inline_spills", Value: c.spills.Load()},
		{Name: "inline_objects_now", Value: sn.inline},
		{Name: "new_allocations", Value: c.newAllocations.Load()},
		{Name: "allocated_bytes", Value: c.allocatedBytes.Load()},
		{Name: "freed_bytes", Value: c.freedBytes.Load()},
		{Name: "grant_given_bytes", Value: c.grantGiven.Load()},
		{Name: "grant_used_bytes", Value: c.grantUsed.Load()},
		{Name: "grant_returned_bytes", Value: c.grantReturned.Load()},
		{Name: "grant_evictions", Value: c.grantEvictions.Load()},
		{Name: "grant_shrinks", Value: c.grantShrinks.Load()},
		{Name: "grant_outstanding_bytes_now", Value: int64(sn.granted)},
		{Name: "grant_clients_now", Value: int64(sn.clients)},
		{Name: "space_used_bytes_now", Value: int64(sn.used)},
		{Name: "space_free_bytes_now", Value: int64(sn.free)},
		{Name: "disk_at_reserve_now", Value: b2i(o.space.diskAvail() == 0)},
		{Name: "store_failed_now", Value: b2i(o.readOnly() != nil)},
		{Name: "enospc_errors", Value: c.enospc.Load()},
		{Name: "quota_edquot_errors", Value: c.edquot.Load()},
		{Name: "quota_acquires", Value: o.quota.Acquires.Load()},
		{Name: "quota_refusals", Value: o.quota.Refusals.Load()},
		{Name: "quota_releases", Value: o.quota.Releases.Load()},
		{Name: "quota_master_failures", Value: o.quota.Failures.Load()},
		{Name: "quota_owner_changes", Value: c.ownerChanges.Load()},
	}
}

func isErrno(err error, want syscall.Errno) bool { return errors.Is(err, want) }

var logLimit struct {
	sync.Mutex
	last time.Time
}

// logOnce logs msg unless something was logged through it in the last
// minute: a failing check on every write must not flood the log.
func logOnce(msg string) {
	logLimit.Lock()
	defer logLimit.Unlock()
	if time.Since(logLimit.last) < time.Minute {
		return
	}
	logLimit.last = time.Now()
	slog.Warn("ost: " + msg)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
