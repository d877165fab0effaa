package mds

import (
	"encoding/binary"
	"slices"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/wire"
)

// Every metadata operation reads or writes an inode or two, and by
// reflection their encoding was a few per cent of an MDT's CPU. These
// write and read the very bytes wire.Marshal and wire.Unmarshal do
// (inode_codec_test.go compares them); a field added to inode, or to the
// proto types it holds, must be added here.

var le = binary.LittleEndian

// AppendWire implements wire.Appender.
func (n *inode) AppendWire(b []byte) []byte {
	b = slices.Grow(b, 162+len(n.Target)+len(n.Attr.ACL)+len(n.DefACL)+4*(len(n.Attr.Layout.OSTs)+len(n.DefLayout.OSTs)))
	a := &n.Attr
	b = proto.AppendFID(b, a.FID)
	b = le.AppendUint32(b, a.Mode)
	b = le.AppendUint32(b, a.Nlink)
	b = le.AppendUint32(b, a.Uid)
	b = le.AppendUint32(b, a.Gid)
	b = le.AppendUint32(b, a.Rdev)
	b = le.AppendUint64(b, a.Size)
	b = le.AppendUint64(b, uint64(a.Atime))
	b = le.AppendUint64(b, uint64(a.Mtime))
	b = le.AppendUint64(b, uint64(a.Ctime))
	b = appendLayout(b, &a.Layout)
	b = wire.AppendString(b, a.ACL)
	b = proto.AppendFID(b, n.Parent)
	b = wire.AppendString(b, n.Target)
	b = appendLayout(b, &n.DefLayout)
	if n.DefDir.Set {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = le.AppendUint32(b, uint32(n.DefDir.Index))
	b = le.AppendUint32(b, n.DefDir.Count)
	return wire.AppendString(b, n.DefACL)
}

func appendLayout(b []byte, l *proto.Layout) []byte {
	b = le.AppendUint32(b, l.StripeSize)
	b = le.AppendUint32(b, l.StripeCount)
	b = le.AppendUint32(b, uint32(l.FirstOST))
	b = wire.AppendLen(b, len(l.OSTs))
	for _, o := range l.OSTs {
		b = le.AppendUint32(b, o)
	}
	b = le.AppendUint16(b, l.ECData)
	b = le.AppendUint16(b, l.ECParity)
	b = wire.AppendLen(b, len(l.Comps))
	for i := range l.Comps {
		c := &l.Comps[i]
		b = le.AppendUint64(b, c.Start)
		b = le.AppendUint64(b, c.End)
		b = le.AppendUint32(b, c.StripeSize)
		b = le.AppendUint32(b, c.StripeCount)
		b = le.AppendUint32(b, uint32(c.FirstOST))
		b = le.AppendUint16(b, c.ECData)
		b = le.AppendUint16(b, c.ECParity)
		b = le.AppendUint32(b, c.Base)
		if c.Inst {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	return b
}

// UnmarshalWire implements wire.Unmarshaler.
func (n *inode) UnmarshalWire(w *wire.Reader) {
	a := &n.Attr
	a.FID = proto.ReadFID(w)
	a.Mode = w.Uint32()
	a.Nlink = w.Uint32()
	a.Uid = w.Uint32()
	a.Gid = w.Uint32()
	a.Rdev = w.Uint32()
	a.Size = w.Uint64()
	a.Atime = w.Int64()
	a.Mtime = w.Int64()
	a.Ctime = w.Int64()
	readLayout(w, &a.Layout)
	a.ACL = w.String()
	n.Parent = proto.ReadFID(w)
	n.Target = w.String()
	readLayout(w, &n.DefLayout)
	n.DefDir = DirLayout{Set: w.Bool(), Index: w.Int32(), Count: w.Uint32()}
	n.DefACL = w.String()
}

func readLayout(w *wire.Reader, l *proto.Layout) {
	l.StripeSize = w.Uint32()
	l.StripeCount = w.Uint32()
	l.FirstOST = w.Int32()
	l.OSTs = nil
	if k := w.Len(); k > 0 {
		l.OSTs = make([]uint32, k)
		for i := range l.OSTs {
			l.OSTs[i] = w.Uint32()
		}
	}
	l.ECData = w.Uint16()
	l.ECParity = w.Uint16()
	l.Comps = nil
	if k := w.Len(); k > 0 {
		l.Comps = make([]proto.Comp, k)
		for i := range l.Comps {
			c := &l.Comps[i]
			c.Start, c.End = w.Uint64(), w.Uint64()
			c.StripeSize, c.StripeCount, c.FirstOST = w.Uint32(), w.Uint32(), w.Int32()
			c.ECData, c.ECParity = w.Uint16(), w.Uint16()
			c.Base, c.Inst = w.Uint32(), w.Bool()
		}
	}
}
