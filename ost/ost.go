// Package ost is an object storage target: each object a sparse file under
// the data directory, named by its FID and stripe index.
package ost

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Config configures one OST.
type Config struct {
	Index   int
	DataDir string
	// MaxOpenFiles bounds the cache of open object files.
	MaxOpenFiles int
}

// OST is one running object storage target.
type OST struct {
	cfg Config
	dir string // DataDir/O
	Srv *rpc.Server

	fdMu  sync.Mutex
	fds   map[proto.ObjID]*list.Element
	lru   *list.List // of *objFile, most recent at front
	locks [64]sync.RWMutex
}

type objFile struct {
	id   proto.ObjID
	f    *os.File
	refs int
	dead bool // evicted while in use: close at last unref
}

// Open opens (creating on first use) the OST in cfg.DataDir.
func Open(cfg Config) (*OST, error) {
	if cfg.Index < 0 || cfg.Index >= 65536 {
		return nil, fmt.Errorf("ost: index %d out of range", cfg.Index)
	}
	if cfg.MaxOpenFiles == 0 {
		cfg.MaxOpenFiles = 512
	}
	o := &OST{cfg: cfg, dir: filepath.Join(cfg.DataDir, "O"), fds: map[proto.ObjID]*list.Element{}, lru: list.New()}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return nil, fmt.Errorf("ost%d: %w", cfg.Index, err)
	}
	o.Srv = rpc.NewServer(fmt.Sprintf("ost%d", cfg.Index))
	o.register()
	return o, nil
}

// Serve answers RPCs on l until Close.
func (o *OST) Serve(l net.Listener) error { return o.Srv.Serve(l) }

// Close stops serving and closes every object file.
func (o *OST) Close() error {
	o.Srv.Close()
	o.fdMu.Lock()
	defer o.fdMu.Unlock()
	for e := o.lru.Front(); e != nil; e = e.Next() {
		e.Value.(*objFile).f.Close()
	}
	o.fds = map[proto.ObjID]*list.Element{}
	o.lru.Init()
	return nil
}

// objPath spreads objects over 256 subdirectories by object id.
func (o *OST) objPath(id proto.ObjID) string {
	return filepath.Join(o.dir, fmt.Sprintf("%02x", id.FID.Oid&0xff),
		fmt.Sprintf("%x_%x_%x_%d", id.FID.Seq, id.FID.Oid, id.FID.Ver, id.Stripe))
}

func parseObjName(name string) (proto.ObjID, bool) {
	p := strings.Split(name, "_")
	if len(p) != 4 {
		return proto.ObjID{}, false
	}
	seq, e1 := strconv.ParseUint(p[0], 16, 64)
	oid, e2 := strconv.ParseUint(p[1], 16, 32)
	ver, e3 := strconv.ParseUint(p[2], 16, 32)
	st, e4 := strconv.ParseUint(p[3], 10, 32)
	if e1 != nil || e2 != nil || e3 != nil || e4 != nil {
		return proto.ObjID{}, false
	}
	return proto.ObjID{FID: proto.FID{Seq: seq, Oid: uint32(oid), Ver: uint32(ver)}, Stripe: uint32(st)}, true
}

// lock orders size-changing operations (punch, destroy), which take it
// exclusively, against writes, which share it and run in parallel.
func (o *OST) lock(id proto.ObjID) *sync.RWMutex {
	return &o.locks[(uint64(id.FID.Oid)*31+uint64(id.Stripe))%uint64(len(o.locks))]
}

// get returns an open file for id, creating the object when create is set.
// A missing object with create unset gives os.ErrNotExist.
func (o *OST) get(id proto.ObjID, create bool) (*objFile, error) {
	o.fdMu.Lock()
	if e, ok := o.fds[id]; ok {
		of := e.Value.(*objFile)
		of.refs++
		o.lru.MoveToFront(e)
		o.fdMu.Unlock()
		return of, nil
	}
	o.fdMu.Unlock()
	p := o.objPath(id)
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(p, flags, 0o600)
	if errors.Is(err, os.ErrNotExist) && create {
		if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			f, err = os.OpenFile(p, flags, 0o600)
		}
	}
	if err != nil {
		return nil, err
	}
	o.fdMu.Lock()
	defer o.fdMu.Unlock()
	if e, ok := o.fds[id]; ok { // raced with another opener
		f.Close()
		of := e.Value.(*objFile)
		of.refs++
		return of, nil
	}
	of := &objFile{id: id, f: f, refs: 1}
	o.fds[id] = o.lru.PushFront(of)
	for o.lru.Len() > o.cfg.MaxOpenFiles {
		e := o.lru.Back()
		old := e.Value.(*objFile)
		o.lru.Remove(e)
		delete(o.fds, old.id)
		if old.refs == 0 {
			old.f.Close()
		} else {
			old.dead = true
		}
	}
	return of, nil
}

func (o *OST) put(of *objFile) {
	o.fdMu.Lock()
	defer o.fdMu.Unlock()
	of.refs--
	if of.refs == 0 && of.dead {
		of.f.Close()
	}
}

// forget drops id from the cache (after destroy).
func (o *OST) forget(id proto.ObjID) {
	o.fdMu.Lock()
	defer o.fdMu.Unlock()
	if e, ok := o.fds[id]; ok {
		of := e.Value.(*objFile)
		o.lru.Remove(e)
		delete(o.fds, id)
		if of.refs == 0 {
			of.f.Close()
		} else {
			of.dead = true
		}
	}
}

func (o *OST) errorf(op string, id proto.ObjID, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		errno = syscall.EIO
	}
	return fmt.Errorf("ost%d: %s %s: %v: %w", o.cfg.Index, op, id, err, errno)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

func (o *OST) register() {
	s := o.Srv
	s.Handle(proto.OWrite, o.write)
	s.Handle(proto.ORead, o.read)
	rpc.HandleFunc(s, proto.OPunch, o.punch)
	rpc.HandleFunc(s, proto.OGetattr, o.getattr)
	rpc.HandleFunc(s, proto.ODestroy, o.destroy)
	rpc.HandleFunc(s, proto.OStatfs, o.statfs)
	rpc.HandleFunc(s, proto.OSync, o.sync)
	rpc.HandleFunc(s, proto.OList, o.listObjects)
}

func (o *OST) write(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
	var req proto.OWriteReq
	if err := r.Decode(&req); err != nil {
		return rpc.Reply{}, fmt.Errorf("ost%d: write: %v: %w", o.cfg.Index, err, syscall.EINVAL)
	}
	if req.Off > 1<<50 {
		return rpc.Reply{}, o.errorf("write", req.Obj, syscall.EFBIG)
	}
	mu := o.lock(req.Obj)
	mu.RLock()
	defer mu.RUnlock()
	of, err := o.get(req.Obj, true)
	if err != nil {
		return rpc.Reply{}, o.errorf("write", req.Obj, err)
	}
	defer o.put(of)
	if _, err := of.f.WriteAt(r.Bulk, int64(req.Off)); err != nil {
		return rpc.Reply{}, o.errorf("write", req.Obj, err)
	}
	return rpc.Reply{Msg: &proto.OWriteReply{Size: req.Off + uint64(len(r.Bulk))}}, nil
}

func (o *OST) read(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
	var req proto.OReadReq
	if err := r.Decode(&req); err != nil {
		return rpc.Reply{}, fmt.Errorf("ost%d: read: %v: %w", o.cfg.Index, err, syscall.EINVAL)
	}
	if req.Len > rpc.MaxBulk || req.Off > 1<<50 {
		return rpc.Reply{}, o.errorf("read", req.Obj, syscall.EINVAL)
	}
	of, err := o.get(req.Obj, false)
	if errors.Is(err, os.ErrNotExist) {
		return rpc.Reply{Msg: &proto.OReadReply{}}, nil // never written: a hole
	}
	if err != nil {
		return rpc.Reply{}, o.errorf("read", req.Obj, err)
	}
	defer o.put(of)
	var buf []byte
	var done func()
	if req.Len <= 1<<20 {
		bp := bufPool.Get().(*[]byte)
		buf, done = (*bp)[:req.Len], func() { bufPool.Put(bp) }
	} else {
		buf = make([]byte, req.Len)
	}
	n, err := of.f.ReadAt(buf, int64(req.Off))
	if err != nil && err != io.EOF {
		if done != nil {
			done()
		}
		return rpc.Reply{}, o.errorf("read", req.Obj, err)
	}
	fi, err := of.f.Stat()
	if err != nil {
		if done != nil {
			done()
		}
		return rpc.Reply{}, o.errorf("read", req.Obj, err)
	}
	return rpc.Reply{Msg: &proto.OReadReply{N: uint32(n), Size: uint64(fi.Size())}, Bulk: [][]byte{buf[:n]}, Done: done}, nil
}

func (o *OST) punch(ctx context.Context, r *proto.OPunchReq) (any, error) {
	if r.Size > 1<<50 {
		return nil, o.errorf("punch", r.Obj, syscall.EFBIG)
	}
	mu := o.lock(r.Obj)
	mu.Lock()
	defer mu.Unlock()
	of, err := o.get(r.Obj, r.Size > 0)
	if errors.Is(err, os.ErrNotExist) {
		return &proto.Empty{}, nil // truncating a missing object to 0: nothing to do
	}
	if err != nil {
		return nil, o.errorf("punch", r.Obj, err)
	}
	defer o.put(of)
	if err := of.f.Truncate(int64(r.Size)); err != nil {
		return nil, o.errorf("punch", r.Obj, err)
	}
	return &proto.Empty{}, nil
}

func (o *OST) getattr(ctx context.Context, r *proto.OGetattrReq) (any, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(o.objPath(r.Obj), &st); errors.Is(err, syscall.ENOENT) {
		return &proto.OGetattrReply{}, nil
	} else if err != nil {
		return nil, o.errorf("getattr", r.Obj, err)
	}
	return &proto.OGetattrReply{Exists: true, Size: uint64(st.Size), Blocks: uint64(st.Blocks)}, nil
}

func (o *OST) destroy(ctx context.Context, r *proto.ODestroyReq) (any, error) {
	mu := o.lock(r.Obj)
	mu.Lock()
	defer mu.Unlock()
	o.forget(r.Obj)
	if err := os.Remove(o.objPath(r.Obj)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, o.errorf("destroy", r.Obj, err)
	}
	return &proto.Empty{}, nil
}

func (o *OST) statfs(ctx context.Context, _ *proto.Empty) (any, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(o.dir, &st); err != nil {
		return nil, fmt.Errorf("ost%d: statfs: %v: %w", o.cfg.Index, err, syscall.EIO)
	}
	bs := uint64(st.Bsize)
	return &proto.StatfsReply{Blocks: st.Blocks * bs, Bfree: st.Bfree * bs, Bavail: st.Bavail * bs,
		Files: st.Files, Ffree: st.Ffree}, nil
}

// sync makes the listed objects durable (fdatasync of each).
func (o *OST) sync(ctx context.Context, r *proto.OSyncReq) (any, error) {
	if len(r.Objs) > 4096 {
		return nil, fmt.Errorf("ost%d: sync of %d objects: %w", o.cfg.Index, len(r.Objs), syscall.EINVAL)
	}
	for _, id := range r.Objs {
		of, err := o.get(id, false)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, o.errorf("sync", id, err)
		}
		err = syscall.Fdatasync(int(of.f.Fd()))
		o.put(of)
		if err != nil {
			return nil, o.errorf("sync", id, err)
		}
	}
	return &proto.Empty{}, nil
}

// listObjects pages through every object, for fsck.
func (o *OST) listObjects(ctx context.Context, r *proto.OListReq) (any, error) {
	limit := int(min(max(r.Max, 1), 4096))
	var all []proto.ObjID
	subs, err := os.ReadDir(o.dir)
	if err != nil {
		return nil, fmt.Errorf("ost%d: list: %v: %w", o.cfg.Index, err, syscall.EIO)
	}
	for _, s := range subs {
		ents, err := os.ReadDir(filepath.Join(o.dir, s.Name()))
		if err != nil {
			continue
		}
		for _, e := range ents {
			if id, ok := parseObjName(e.Name()); ok && less(r.After, id) {
				all = append(all, id)
			}
		}
	}
	sortObjs(all)
	out := &proto.OListReply{EOF: len(all) <= limit}
	out.Objs = all[:min(limit, len(all))]
	return out, nil
}

func less(a, b proto.ObjID) bool {
	ka, kb := a.FID.Key(), b.FID.Key()
	if c := strings.Compare(string(ka[:]), string(kb[:])); c != 0 {
		return c < 0
	}
	return a.Stripe < b.Stripe
}

func sortObjs(s []proto.ObjID) {
	slices.SortFunc(s, func(a, b proto.ObjID) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	})
}
