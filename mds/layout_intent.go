package mds

import (
	"context"
	"fmt"
	"syscall"

	"github.com/stripefs/stripefs/proto"
)

// layoutIntent instantiates the components of a composite layout that a
// client's write below r.End needs (Lustre's layout intent): the file
// gets objects only where it grows. Instantiated components never change
// and are a prefix of the layout, so a client holding an older layout
// reads correctly everything below its own InstEnd and asks again only
// past it: only what other clients cached of lustre.lov is called back
// (changeTargets). The commit is synced: a client
// writes to the new objects as soon as the reply comes, and those must
// not outlive a layout an MDT crash would forget. A repeat (a resend, or
// a second client racing to the same component) changes nothing.
func (m *MDT) layoutIntent(ctx context.Context, r *proto.LayoutIntentReq) (any, error) {
	if err := m.writable(ctx, "layout_intent", r.FID); err != nil {
		return nil, err
	}
	cfg, err := m.config(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.getInode(r.FID)
	if err != nil {
		return nil, err
	}
	a := &n.Attr
	if a.Mode&sIFMT != sIFREG {
		return nil, m.errorf("layout_intent", r.FID.String(), syscall.EINVAL)
	}
	if c := m.cred(ctx); !m.mayWrite(ctx, a, c) {
		return nil, m.denied("layout_intent", r.FID, c, syscall.EACCES)
	}
	l := a.Layout
	if !l.IsComposite() || r.End <= l.InstEnd() {
		return &proto.AttrReply{Attr: *a}, nil
	}
	if r.End > l.End() {
		return nil, fmt.Errorf("mdt%d: layout_intent %s: write to %d past the layout's last component (%d): %w",
			m.cfg.Index, r.FID, r.End, l.End(), syscall.EFBIG)
	}
	nl := l.InstantiateTo(r.End, numOSTs(cfg), int(m.rr.Add(1)-1), uint32(m.cfg.Index))
	if err := nl.Validate(numOSTs(cfg)); err != nil {
		return nil, fmt.Errorf("mdt%d: layout_intent %s: %w", m.cfg.Index, r.FID, err)
	}
	a.Layout = nl
	b := m.newBatch(ctx)
	m.putInode(b, n)
	if err := m.commit(b, true); err != nil {
		return nil, err
	}
	return &proto.AttrReply{Attr: *a}, nil
}
