package fs

import (
	"context"
	"fmt"
	"syscall"

	"github.com/stripefs/stripefs/proto"
)

// Composite layouts (PFL) get objects only as the file grows: a write
// asks the MDT for the components it needs first (cover), and a read
// past what this client's copy of the layout has instantiated asks for
// the current one (refreshLayout), since another client may have grown
// the file. Instantiated components never change, so a copy of the
// layout is exact below its own InstEnd and the newer copy always wins.

// cover makes st's layout hold objects for every file byte below end:
// EFBIG past the layout's last component.
func (c *Client) cover(ctx context.Context, st *inodeState, end uint64) error {
	st.mu.Lock()
	l := st.layout
	st.mu.Unlock()
	if !l.IsComposite() || end <= l.InstEnd() {
		return nil
	}
	if end > l.End() {
		return fmt.Errorf("write of %s to %d, past its layout's last component (%d): %w", st.fid, end, l.End(), syscall.EFBIG)
	}
	var r proto.AttrReply
	if err := c.mdtCall(ctx, st.fid, proto.MLayoutIntent, &proto.LayoutIntentReq{FID: st.fid, End: end}, &r); err != nil {
		return err
	}
	st.adoptLayout(r.Attr.Layout)
	c.dropXattrs(st.fid) // lustre.lov changed
	return nil
}

// refreshLayout fetches the file's layout from its MDT when a read below
// end goes past what st's copy of it has instantiated.
func (c *Client) refreshLayout(ctx context.Context, st *inodeState, end uint64) error {
	st.mu.Lock()
	l := st.layout
	end = min(end, st.size)
	st.mu.Unlock()
	if !l.IsComposite() || end <= l.InstEnd() {
		return nil
	}
	var r proto.AttrReply
	if err := c.mdtCall(ctx, st.fid, proto.MGetattr, &proto.GetattrReq{FID: st.fid}, &r); err != nil {
		return err
	}
	st.adoptLayout(r.Attr.Layout)
	return nil
}

// adoptLayout takes l as the file's layout if it has instantiated more
// of it than st's copy. st.mu is not held.
func (st *inodeState) adoptLayout(l proto.Layout) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if l.IsComposite() && len(l.Comps) == len(st.layout.Comps) && l.InstEnd() > st.layout.InstEnd() {
		st.layout = l
	}
}
