package fs

import (
	"context"
	"fmt"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/proto"
)

// Scrub and rebuild of erasure-coded files, one file at a time: every
// unit of every row is read with its tag and the row checked and, when
// asked, repaired by layout.Codec.Repair. The callers (package fsck) walk
// the MDTs for the files.

// RowFinding is what the check of one row found.
type RowFinding struct {
	Row           uint64 `json:"row"`
	Missing       []int  `json:"missing,omitempty"`    // units not read, or on the OST being rebuilt
	BadData       []int  `json:"bad_data,omitempty"`   // data units whose bytes do not match their tag
	BadParity     []int  `json:"bad_parity,omitempty"` // parity units that do not match the data
	Unrecoverable bool   `json:"unrecoverable,omitempty"`
	Repaired      bool   `json:"repaired,omitempty"`
	Error         string `json:"error,omitempty"` // the repair's writes failed
}

// ECFileReport is the check of one erasure-coded file (or of the
// erasure-coded component of a composite one: its rows only).
type ECFileReport struct {
	FID      proto.FID    `json:"fid"`
	Rows     uint64       `json:"rows"`
	Findings []RowFinding `json:"findings,omitempty"`
}

// ECCheck says how CheckEC works.
type ECCheck struct {
	// Repair writes what makes each row whole and consistent.
	Repair bool
	// Lost, if set, names an OST whose units are rebuilt whatever they
	// hold (a replaced or wiped OST); implies Repair.
	Lost    bool
	LostOST uint32
}

// CheckEC checks (and repairs) every row of the erasure-coded file a
// describes, or of its erasure-coded component. Writers of the file should
// be quiet meanwhile: a row being rewritten may look damaged, and its
// repair may undo the write.
func (c *Client) CheckEC(ctx context.Context, a *proto.Attr, how ECCheck) (*ECFileReport, error) {
	ep, ok := layout.ECPartOf(a.Layout)
	if !ok {
		return nil, fmt.Errorf("%s: not an erasure-coded file: %w", a.FID, syscall.EINVAL)
	}
	first, end := ep.Rows(a.Size)
	rep := &ECFileReport{FID: a.FID, Rows: end - first}
	if end == first || !ep.Instantiated() {
		return rep, nil // no write reached the component: no objects, nothing to check
	}
	cd, err := codecOf(ep)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.FID, err)
	}
	g := cd.G
	lost := make([]bool, g.N()) // by object of the part
	if how.Lost {
		how.Repair = true
		for obj, ost := range ep.Layout.OSTs {
			if ost == how.LostOST {
				lost[obj] = true
				// Recreate the object even if no row gives it data, so
				// that reads do not take it for lost.
				call, err := c.writeCall(ctx, a.FID, ost, proto.ObjID{FID: a.FID, Stripe: ep.Stripe(obj)}, 0, nil)
				if err == nil {
					err = c.ostDo(ctx, ost, call)
				}
				if err != nil {
					return nil, fmt.Errorf("%s: recreate object %d on ost%d: %w", a.FID, obj, ost, err)
				}
			}
		}
	}
	units := make([]layout.Unit, g.N())
	bufs := make([][]byte, g.N())
	for j := range bufs {
		bufs[j] = make([]byte, g.Unit)
	}
	var firstErr error
	for r := first; r < end; r++ {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		unitLost := make([]bool, g.N())
		var eg errgroup.Group
		for j := range units {
			obj, objOff := g.UnitAt(r, j)
			unitLost[j] = lost[obj]
			units[j] = layout.Unit{}
			eg.Go(func() error {
				n, tag, err := c.readUnit(ctx, a.FID, ep, obj, objOff, 0, bufs[j], unitIO{fast: true, wantTag: true})
				if err == nil {
					units[j] = layout.Unit{Data: bufs[j], Extent: n, Tag: tag}
				}
				return nil
			})
		}
		eg.Wait()
		writes, rr, err := cd.Repair(units, unitLost, c.ecVersion())
		if err != nil {
			return rep, fmt.Errorf("%s: row %d: %w", a.FID, r, err)
		}
		if rr.OK() && len(writes) == 0 {
			continue
		}
		f := RowFinding{Row: r, Missing: rr.Missing, BadData: rr.BadData, BadParity: rr.BadParity, Unrecoverable: rr.Unrecoverable}
		if how.Repair && len(writes) > 0 {
			wg, wctx := errgroup.WithContext(ctx)
			for _, w := range writes {
				wg.Go(func() error { return c.writeUnit(wctx, a.FID, ep, r, w.Index, 0, w.Data, w.Tag) })
			}
			if err := wg.Wait(); err != nil {
				f.Error = err.Error()
				if firstErr == nil {
					firstErr = fmt.Errorf("%s: repair of row %d: %w", a.FID, r, err)
				}
			} else {
				f.Repaired = true
			}
		}
		rep.Findings = append(rep.Findings, f)
	}
	return rep, firstErr
}
