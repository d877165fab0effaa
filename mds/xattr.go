package mds

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/proto"
)

const (
	xattrCreate  = 1 // XATTR_CREATE
	xattrReplace = 2 // XATTR_REPLACE
)

func (m *MDT) getxattr(ctx context.Context, r *proto.XattrReq) (any, error) {
	if _, err := m.getInode(r.FID); err != nil {
		return nil, err
	}
	v, closer, err := m.db.Get(xattrKey(r.FID, r.Name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, syscall.ENODATA
	}
	if err != nil {
		return nil, fmt.Errorf("mdt%d: getxattr %q: %v: %w", m.cfg.Index, r.Name, err, syscall.EIO)
	}
	defer closer.Close()
	return &proto.XattrReply{Value: append([]byte(nil), v...)}, nil
}

func (m *MDT) setxattr(ctx context.Context, r *proto.XattrReq) (any, error) {
	switch {
	case r.Name == "" || len(r.Name) > nameMax:
		return nil, m.errorf("setxattr", r.Name, syscall.ERANGE)
	case len(r.Value) > xattrMax:
		return nil, m.errorf("setxattr", r.Name, syscall.E2BIG)
	case r.Flags&^(xattrCreate|xattrReplace) != 0:
		return nil, m.errorf("setxattr", r.Name, syscall.EINVAL)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	_, closer, err := m.db.Get(xattrKey(r.FID, r.Name))
	exists := err == nil
	if exists {
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("mdt%d: setxattr %q: %v: %w", m.cfg.Index, r.Name, err, syscall.EIO)
	}
	if r.Flags&xattrCreate != 0 && exists {
		return nil, m.errorf("setxattr", r.Name, syscall.EEXIST)
	}
	if r.Flags&xattrReplace != 0 && !exists {
		return nil, m.errorf("setxattr", r.Name, syscall.ENODATA)
	}
	b := m.db.NewBatch()
	b.Set(xattrKey(r.FID, r.Name), r.Value, nil)
	n.Attr.Ctime = now()
	m.putInode(b, n)
	return &proto.Empty{}, m.commit(b, false)
}

func (m *MDT) listxattr(ctx context.Context, r *proto.XattrReq) (any, error) {
	if _, err := m.getInode(r.FID); err != nil {
		return nil, err
	}
	p := xattrPrefix(r.FID)
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("mdt%d: listxattr: %v: %w", m.cfg.Index, err, syscall.EIO)
	}
	defer it.Close()
	out := &proto.XattrReply{}
	for ok := it.First(); ok; ok = it.Next() {
		out.Names = append(out.Names, string(it.Key()[len(p):]))
	}
	return out, nil
}

func (m *MDT) removexattr(ctx context.Context, r *proto.XattrReq) (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	_, closer, err := m.db.Get(xattrKey(r.FID, r.Name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, syscall.ENODATA
	} else if err != nil {
		return nil, fmt.Errorf("mdt%d: removexattr %q: %v: %w", m.cfg.Index, r.Name, err, syscall.EIO)
	}
	closer.Close()
	b := m.db.NewBatch()
	b.Delete(xattrKey(r.FID, r.Name), nil)
	n.Attr.Ctime = now()
	m.putInode(b, n)
	return &proto.Empty{}, m.commit(b, false)
}

// open counts an open; the count keeps an unlinked file's inode (and so
// its data) until the last close.
func (m *MDT) open(ctx context.Context, r *proto.OpenReq) (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	m.opens[r.FID]++
	return &proto.AttrReply{Attr: n.Attr}, nil
}

// close drops an open, records the size and mtime the client's writes
// produced, and finishes an orphan's removal on its last close.
func (m *MDT) close(ctx context.Context, r *proto.CloseReq) (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	if c := m.opens[r.FID]; c > 1 {
		m.opens[r.FID] = c - 1
	} else {
		delete(m.opens, r.FID)
	}
	b := m.db.NewBatch()
	if r.SetSize {
		n.Attr.Size = r.Size
		n.Attr.Mtime = r.Mtime
		n.Attr.Ctime = max(n.Attr.Ctime, r.Mtime)
	}
	reply := &proto.CloseReply{Attr: n.Attr}
	if n.Attr.Nlink == 0 && m.opens[r.FID] == 0 {
		m.deleteInode(b, r.FID)
		b.Delete(orphanKey(r.FID), nil)
		reply.Destroy = n.Attr.Mode&sIFMT == sIFREG
	} else if r.SetSize {
		m.putInode(b, n)
	} else {
		return reply, nil
	}
	return reply, m.commit(b, false)
}
