package mds

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/wire"
)

// Resent requests. A client whose connection broke before a reply came
// sends the request again with the same XID (a restarted MDT, a dropped
// connection). Every change an MDT makes records "client C's request X
// was done" in the same Pebble batch, so the record exists exactly when
// the change does; a resend that finds it is answered from the current
// state instead of being done twice (Lustre reconstructs replies from
// last_rcvd the same way).

const pResent = 'R' // R client-uuid xid → unix nanos when done

// replyKeep is how long done-records are kept: longer than any client
// keeps resending.
const replyKeep = 10 * time.Minute

func doneKey(c rpc.Caller) []byte {
	b := append([]byte{pResent}, c.Client...)
	return binary.BigEndian.AppendUint64(append(b, 0), c.XID)
}

var keyTransno = []byte("Mtransno")

// newBatch starts the batch of a change made for the request of ctx: it
// takes the next transno (the reply carries it; the client keeps the
// request until that transno is committed) and records the request as
// done. Callers hold m.mu until the batch is committed, so transnos are
// applied in order and "committed up to T" is exact.
func (m *MDT) newBatch(ctx context.Context) *pebble.Batch {
	b := m.db.NewBatch()
	t := m.lastTransno.Add(1)
	b.Set(keyTransno, binary.BigEndian.AppendUint64(nil, t), nil)
	rpc.SetTransno(ctx, t)
	if c, ok := rpc.CallerFrom(ctx); ok {
		b.Set(doneKey(c), binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano())), nil)
		noteClient(b, c, t)
	}
	return b
}

// loadTransno reads the last transno: everything on disk is committed.
func (m *MDT) loadTransno() error {
	v, closer, err := m.db.Get(keyTransno)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	if len(v) == 8 {
		m.lastTransno.Store(binary.BigEndian.Uint64(v))
		m.committed.Store(binary.BigEndian.Uint64(v))
	}
	return nil
}

// done reports whether the request of ctx was already carried out. Only
// a request sent before can have been (rpc.FlagResent): looking up every
// other request's done-record, which is never there, cost every change a
// Pebble lookup that misses in every level.
func (m *MDT) done(ctx context.Context) bool {
	c, ok := rpc.CallerFrom(ctx)
	if !ok || !c.Resent {
		return false
	}
	_, closer, err := m.db.Get(doneKey(c))
	if err != nil {
		return false
	}
	closer.Close()
	return true
}

// reconstruct answers a resent change from the current state.
type reconstruct func(ctx context.Context, msg []byte) (any, error)

func decodeThen[Req any](f func(ctx context.Context, r *Req) (any, error)) reconstruct {
	return func(ctx context.Context, msg []byte) (any, error) {
		r := new(Req)
		if err := wire.Unmarshal(msg, r); err != nil {
			return nil, err
		}
		return f(ctx, r)
	}
}

// resendable wraps the handlers of changing methods.
func (m *MDT) resendable() {
	byLookup := func(parent proto.FID, name string) (any, error) {
		return m.lookup(context.Background(), &proto.LookupReq{Parent: parent, Name: name})
	}
	getattr := func(fid proto.FID) (any, error) {
		return m.getattr(context.Background(), &proto.GetattrReq{FID: fid})
	}
	rec := map[uint16]reconstruct{
		proto.MCreate:  decodeThen(func(_ context.Context, r *proto.CreateReq) (any, error) { return byLookup(r.Parent, r.Name) }),
		proto.MMkdir:   decodeThen(func(_ context.Context, r *proto.MkdirReq) (any, error) { return byLookup(r.Parent, r.Name) }),
		proto.MSymlink: decodeThen(func(_ context.Context, r *proto.SymlinkReq) (any, error) { return byLookup(r.Parent, r.Name) }),
		proto.MLink: decodeThen(func(_ context.Context, r *proto.LinkReq) (any, error) {
			if r.FID.MDT() != m.cfg.Index {
				return byLookup(r.Parent, r.Name) // a remote entry: the client asks the inode's MDT
			}
			return getattr(r.FID)
		}),
		proto.MSetattr: decodeThen(func(_ context.Context, r *proto.SetattrReq) (any, error) { return getattr(r.FID) }),
		proto.MOpen:    decodeThen(func(_ context.Context, r *proto.OpenReq) (any, error) { return getattr(r.FID) }),
		// The first reply's "destroy these objects" is not kept: a resent
		// unlink can leave orphan objects, which fsck finds.
		proto.MUnlink:      func(context.Context, []byte) (any, error) { return &proto.UnlinkReply{}, nil },
		proto.MRename:      func(context.Context, []byte) (any, error) { return &proto.RenameReply{}, nil },
		proto.MClose:       func(context.Context, []byte) (any, error) { return &proto.CloseReply{}, nil },
		proto.MSetxattr:    func(context.Context, []byte) (any, error) { return &proto.Empty{}, nil },
		proto.MRemovexattr: func(context.Context, []byte) (any, error) { return &proto.Empty{}, nil },
	}
	for method, f := range rec {
		m.Srv.Wrap(method, func(next rpc.Handler) rpc.Handler {
			return func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
				if m.done(ctx) {
					m.ctr.resends.Add(1)
					msg, err := f(ctx, r.Msg)
					return rpc.Reply{Msg: msg}, err
				}
				return next(ctx, r)
			}
		})
	}
}

// pruneDone forgets done-records older than replyKeep.
func (m *MDT) pruneDone() {
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pResent}, UpperBound: []byte{pResent + 1}})
	if err != nil {
		return
	}
	defer it.Close()
	cutoff := uint64(time.Now().Add(-replyKeep).UnixNano())
	b := m.db.NewBatch()
	for ok := it.First(); ok; ok = it.Next() {
		if v := it.Value(); len(v) == 8 && binary.BigEndian.Uint64(v) < cutoff {
			b.Delete(it.Key(), nil)
		}
	}
	if b.Count() > 0 {
		if err := m.write(b, pebble.NoSync); err != nil {
			m.logf(slog.LevelWarn, "prune resend records: %v", err)
		}
	}
}
