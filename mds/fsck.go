package mds

import (
	"context"
	"fmt"
	"syscall"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// The MDT's side of fsck: scans of its inodes and entries, and the few
// repairs the checker decides. The deciding is the checker's (package
// fsck); this is storage access only.

func (m *MDT) registerFsck() {
	rpc.HandleFunc(m.Srv, proto.MScanInodes, m.scanInodes)
	rpc.HandleFunc(m.Srv, proto.MScanDirents, m.scanDirents)
	rpc.HandleFunc(m.Srv, proto.MFsckFix, m.fsckFix)
}

// scan pages through keys with prefix p after r.After.
func (m *MDT) scan(p byte, r *proto.ScanReq, each func(k, v []byte) error) (next []byte, eof bool, err error) {
	lower := []byte{p}
	if len(r.After) > 0 {
		if r.After[0] != p {
			return nil, false, fmt.Errorf("mdt%d: scan: resume key of another kind: %w", m.cfg.Index, syscall.EINVAL)
		}
		lower = append(append([]byte(nil), r.After...), 0)
	}
	it, err := m.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{p + 1}})
	if err != nil {
		return nil, false, err
	}
	defer it.Close()
	limit := int(min(max(r.Max, 1), 4096))
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n == limit {
			return next, false, nil
		}
		if err := each(it.Key(), it.Value()); err != nil {
			return nil, false, err
		}
		next = append(next[:0], it.Key()...)
		n++
	}
	return next, true, nil
}

func (m *MDT) scanInodes(ctx context.Context, r *proto.ScanReq) (any, error) {
	out := &proto.ScanInodesReply{}
	var err error
	out.Next, out.EOF, err = m.scan(pInode, r, func(k, v []byte) error {
		n := new(inode)
		if err := unmarshalInode(v, n); err != nil {
			return fmt.Errorf("mdt%d: inode %x corrupt: %v: %w", m.cfg.Index, k, err, syscall.EIO)
		}
		_, closer, err := m.db.Get(orphanKey(n.Attr.FID))
		open := err == nil
		if open {
			closer.Close()
		}
		si := proto.ScanInode{Attr: n.Attr, Parent: n.Parent, Open: open, StripeIndex: -1}
		if f := n.Attr.FID; f.IsStripedDir() || f.IsDirStripe() {
			// A striped directory without its layout shows as a master
			// with no stripes, or a stripe of no master: fsck reports it.
			if l, err := m.getLMV(f); err == nil {
				si.Stripes, si.Master, si.StripeIndex = l.Stripes, l.Master, l.Index
			}
		}
		out.Inodes = append(out.Inodes, si)
		return nil
	})
	return out, err
}

func (m *MDT) scanDirents(ctx context.Context, r *proto.ScanReq) (any, error) {
	out := &proto.ScanDirentsReply{}
	var err error
	out.Next, out.EOF, err = m.scan(pDirent, r, func(k, v []byte) error {
		if len(k) < 1+16+8 {
			return nil
		}
		parent, _ := proto.FIDFromKey(k[1:17])
		var d dirent
		if err := unmarshalDirent(v, &d); err != nil {
			return fmt.Errorf("mdt%d: entry %x corrupt: %v: %w", m.cfg.Index, k, err, syscall.EIO)
		}
		out.Dirents = append(out.Dirents, proto.ScanDirent{Parent: parent, Name: string(k[25:]), FID: d.FID, Mode: d.Mode})
		return nil
	})
	return out, err
}

func (m *MDT) fsckFix(ctx context.Context, r *proto.FsckFixReq) (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.newBatch(ctx)
	switch r.Action {
	case proto.FixDropDirent:
		d, err := m.getDirent(r.Parent, r.Name)
		if err != nil {
			return nil, err
		}
		if d.FID != r.FID {
			return nil, fmt.Errorf("mdt%d: fsck: %s/%q names %s now, not %s: %w", m.cfg.Index, r.Parent, r.Name, d.FID, r.FID, syscall.ESTALE)
		}
		b.Delete(direntKey(r.Parent, r.Name), nil)
	case proto.FixSetNlink:
		n, err := m.getInode(r.FID)
		if err != nil {
			return nil, err
		}
		if n.Attr.Nlink != r.Have {
			return nil, fmt.Errorf("mdt%d: fsck: %s has nlink %d now, not %d: %w", m.cfg.Index, r.FID, n.Attr.Nlink, r.Have, syscall.ESTALE)
		}
		n.Attr.Nlink = r.Nlink
		m.putInode(b, n)
	case proto.FixLinkLost:
		if err := m.checkName("fsck", r.Name); err != nil {
			return nil, err
		}
		if _, err := m.getDirent(r.Parent, r.Name); err == nil {
			return nil, m.errorf("fsck", r.Name, syscall.EEXIST)
		}
		b.Set(direntKey(r.Parent, r.Name), (&dirent{FID: r.FID, Mode: r.Mode & sIFMT}).marshal(), nil)
		if r.FID.MDT() == m.cfg.Index && r.Mode&sIFMT == sIFDIR {
			if n, err := m.getInode(r.FID); err == nil {
				n.Parent = r.Parent
				m.putInode(b, n)
			}
		}
	default:
		return nil, fmt.Errorf("mdt%d: fsck: unknown repair %q: %w", m.cfg.Index, r.Action, syscall.EINVAL)
	}
	return &proto.Empty{}, m.commit(b, true)
}
