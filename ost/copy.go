package ost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// copyRange is ost_copy, one piece of copy_file_range(2): the bytes of
// another object, here or on a peer OST, written into one here as a
// write through is (quota and space taken from what is free, never from
// a client's grant), so the data goes OST to OST, or not at all across
// the network when both objects are here. Where the source ends or has
// a hole the destination reads as zeros. The client holds the read lock
// of the source range and the write lock of the destination's, so
// neither changes meanwhile.
func (o *OST) copyRange(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
	var req proto.OCopyReq
	if err := r.Decode(&req); err != nil {
		return rpc.Reply{}, fmt.Errorf("%s: copy: %v: %w", o.name, err, syscall.EINVAL)
	}
	if req.Len == 0 || req.Len > rpc.MaxBulk || req.Off > 1<<50 || req.SrcOff > 1<<50 {
		return rpc.Reply{}, o.errorf("copy", req.Obj, syscall.EINVAL)
	}
	if err := o.writable(ctx, "copy", req.Obj); err != nil {
		return rpc.Reply{}, err
	}
	buf := make([]byte, req.Len)
	n, err := o.copySource(ctx, &req, buf)
	if err != nil {
		return rpc.Reply{}, fmt.Errorf("%s: copy from %s on ost%d: %w", o.name, req.Src, req.SrcOST, err)
	}
	if n > 0 {
		w := proto.OWriteReq{Obj: req.Obj, Off: req.Off, Grant: proto.WriteGrant{Owner: req.Owner, Through: true}}
		if _, err := o.writeObject(ctx, w, buf[:n]); err != nil {
			return rpc.Reply{}, err
		}
	}
	if n < len(buf) {
		// Past the source's end: what the destination held there goes.
		punch := &proto.OFallocateReq{Obj: req.Obj, Off: req.Off + uint64(n), Len: uint64(len(buf) - n), Mode: proto.FallocPunch, Owner: req.Owner}
		if _, err := o.fallocate(ctx, punch); err != nil {
			return rpc.Reply{}, err
		}
	}
	o.ctr.copiedBytes.Add(int64(n))
	return rpc.Reply{Msg: &proto.Empty{}}, nil
}

// copySource reads the source range into buf and says how much of it the
// source holds (the rest is past its end).
func (o *OST) copySource(ctx context.Context, req *proto.OCopyReq, buf []byte) (int, error) {
	if int(req.SrcOST) == o.cfg.Index {
		if o.cfg.InlineMax > 0 {
			if n, _, ok, err := o.readInline(req.Src, req.SrcOff, buf); err != nil || ok {
				return n, err
			}
		}
		of, err := o.get(req.Src, false)
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil // never written: a hole
		}
		if err != nil {
			return 0, err
		}
		defer o.put(of)
		n, err := of.f.ReadAt(buf, int64(req.SrcOff))
		if err != nil && err != io.EOF {
			return 0, err
		}
		return n, nil
	}
	c, err := o.peers.get(req.SrcAddr, o.name)
	if err != nil {
		return 0, err
	}
	var rep proto.OReadReply
	call := &rpc.Call{Method: proto.ORead, Req: &proto.OReadReq{Obj: req.Src, Off: req.SrcOff, Len: uint32(len(buf))}, Resp: &rep, BulkIn: buf}
	if err := c.Do(ctx, call); err != nil {
		return 0, err
	}
	return call.NBulkIn, nil
}

// peers are an OST's connections to other OSTs, by address, made as a
// server (the filesystem's key proves both ends). The address is the
// client's to give, as the client could read the source itself; a bound
// on how many keeps a client from making the OST dial without end.
type peers struct {
	mu sync.Mutex
	m  map[string]*rpc.Client
}

const maxPeers = 4096

func (p *peers) get(addr, name string) (*rpc.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.m[addr]; c != nil {
		return c, nil
	}
	if addr == "" || len(p.m) >= maxPeers {
		return nil, fmt.Errorf("no connection to source OST at %q: %w", addr, syscall.EINVAL)
	}
	if p.m == nil {
		p.m = map[string]*rpc.Client{}
	}
	c := rpc.NewClient(addr, name)
	c.Role = rpc.RoleServer
	c.RetryFor = 10 * time.Second
	p.m[addr] = c
	return c, nil
}

func (o *OST) closePeers() {
	o.peers.mu.Lock()
	defer o.peers.mu.Unlock()
	for _, c := range o.peers.m {
		c.Close()
	}
	o.peers.m = nil
}
