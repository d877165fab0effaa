package fsck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/stripefs/stripefs/internal/targets"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Gather reads every MDT's inodes and entries and every OST's objects.
func Gather(ctx context.Context, mgs string) (*View, *proto.Config, error) {
	cfg, err := targets.Map(ctx, mgs, "fsck", 0)
	if err != nil {
		return nil, nil, fmt.Errorf("fsck: %w", err)
	}
	v := &View{Objects: map[uint32][]proto.ObjID{}}
	// First every MDT puts in place the parts of cross-MDT operations it
	// still owes the others (an async remote mkdir's directory inode), or
	// their entries would look dangling, and --repair would remove them.
	for _, t := range cfg.MDTs {
		c := rpc.NewClient(t.Addr, "fsck")
		_, err := rpc.Invoke[proto.Empty](ctx, c, proto.MSync, &proto.SyncReq{})
		c.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("fsck: mdt%d: sync: %w", t.Index, err)
		}
	}
	for _, t := range cfg.MDTs {
		c := rpc.NewClient(t.Addr, "fsck")
		err := scanMDT(ctx, c, v)
		c.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("fsck: mdt%d: %w", t.Index, err)
		}
	}
	for _, t := range cfg.OSTs {
		objs, err := listObjects(ctx, t.Addr)
		if err != nil {
			return nil, nil, fmt.Errorf("fsck: ost%d: %w", t.Index, err)
		}
		v.Objects[t.Index] = objs
	}
	// The file data MDTs keep (Data-on-MDT), under the name layouts give
	// it; an MDT that keeps none does not serve the listing.
	for _, t := range cfg.MDTs {
		objs, err := listObjects(ctx, t.Addr)
		if errors.Is(err, syscall.ENOSYS) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("fsck: mdt%d: file data: %w", t.Index, err)
		}
		v.Objects[proto.DoMTarget(t.Index)] = objs
	}
	return v, cfg, nil
}

// listObjects pages through the objects of the target at addr.
func listObjects(ctx context.Context, addr string) ([]proto.ObjID, error) {
	c := rpc.NewClient(addr, "fsck")
	defer c.Close()
	var objs []proto.ObjID
	var after proto.ObjID
	for {
		r, err := rpc.Invoke[proto.OListReply](ctx, c, proto.OList, &proto.OListReq{After: after, Max: 4096})
		if err != nil {
			return nil, err
		}
		objs = append(objs, r.Objs...)
		if r.EOF || len(r.Objs) == 0 {
			return objs, nil
		}
		after = r.Objs[len(r.Objs)-1]
	}
}

func scanMDT(ctx context.Context, c *rpc.Client, v *View) error {
	inodes, dirents, err := ScanMDT(ctx, c)
	v.Inodes = append(v.Inodes, inodes...)
	v.Dirents = append(v.Dirents, dirents...)
	return err
}

// ScanMDT pages through every inode and every entry of the MDT c is
// connected to, 4096 a round trip (the admin key's methods).
func ScanMDT(ctx context.Context, c *rpc.Client) (inodes []proto.ScanInode, dirents []proto.ScanDirent, err error) {
	for after := []byte(nil); ; {
		r, err := rpc.Invoke[proto.ScanInodesReply](ctx, c, proto.MScanInodes, &proto.ScanReq{After: after, Max: 4096})
		if err != nil {
			return inodes, dirents, err
		}
		inodes = append(inodes, r.Inodes...)
		if r.EOF {
			break
		}
		after = r.Next
	}
	for after := []byte(nil); ; {
		r, err := rpc.Invoke[proto.ScanDirentsReply](ctx, c, proto.MScanDirents, &proto.ScanReq{After: after, Max: 4096})
		if err != nil {
			return inodes, dirents, err
		}
		dirents = append(dirents, r.Dirents...)
		if r.EOF {
			break
		}
		after = r.Next
	}
	return inodes, dirents, nil
}

// Report is a run's outcome.
type Report struct {
	Inodes   int       `json:"inodes"`
	Dirents  int       `json:"entries"`
	Objects  int       `json:"objects"`
	Findings []Finding `json:"findings"`
	// Settled counts what one scan found and the next did not: operations
	// in flight on a filesystem in use. They are neither reported nor
	// repaired.
	Settled  int `json:"settled"`
	Repaired int `json:"repaired"`
	// Skipped counts repairs an MDT refused because what they would fix
	// changed after the scans.
	Skipped int `json:"skipped"`
}

// Options tune RunOptions.
type Options struct {
	Repair bool
	// Gather replaces the scan of the targets (tests show fsck a
	// filesystem caught in the middle of an operation with it).
	Gather func(ctx context.Context, mgs string) (*View, *proto.Config, error)
}

// Run checks the filesystem and, with repair, fixes what it found:
// dangling entries are removed, orphan inodes linked into /lost+found,
// link counts set to what the entries say, orphan objects destroyed. It
// runs until a check finds nothing to repair (a repair can change link
// counts) or three passes, and reports the first pass's findings.
func Run(ctx context.Context, mgs string, repair bool) (*Report, error) {
	return RunOptions(ctx, mgs, Options{Repair: repair})
}

// RunOptions is Run with options.
//
// The filesystem may be in use: one scan can catch an operation half
// done (an entry made on one MDT whose inode another has yet to write, an
// object written for a file whose inode was scanned before it existed).
// So a finding counts only when a second scan, after every MDT synced
// again, finds it exactly as the first did; and each repair is
// conditional on the MDT (proto.FsckFixReq), which refuses it when what
// it would fix changed since.
func RunOptions(ctx context.Context, mgs string, o Options) (*Report, error) {
	gather := o.Gather
	if gather == nil {
		gather = Gather
	}
	var rep *Report
	for pass := 0; pass < 3; pass++ {
		v, cfg, err := gather(ctx, mgs)
		if err != nil {
			return nil, err
		}
		found := Check(v)
		settled := 0
		if len(found) > 0 {
			v2, cfg2, err := gather(ctx, mgs)
			if err != nil {
				return nil, err
			}
			again := Check(v2)
			confirmed := found[:0:0]
			for _, f := range found {
				if slices.Contains(again, f) {
					confirmed = append(confirmed, f)
				}
			}
			settled = len(found) - len(confirmed)
			v, cfg, found = v2, cfg2, confirmed
		}
		if rep == nil {
			rep = &Report{Inodes: len(v.Inodes), Dirents: len(v.Dirents), Findings: found, Settled: settled}
			for _, objs := range v.Objects {
				rep.Objects += len(objs)
			}
		}
		if !o.Repair || len(found) == 0 {
			return rep, nil
		}
		n, skipped, err := applyRepairs(ctx, cfg, found)
		rep.Repaired += n
		rep.Skipped += skipped
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// applyRepairs fixes found; it returns the repairs made and those the
// targets refused as stale.
func applyRepairs(ctx context.Context, cfg *proto.Config, found []Finding) (repaired, skipped int, err error) {
	clients := map[string]*rpc.Client{}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	client := func(addr string) *rpc.Client {
		if clients[addr] == nil {
			clients[addr] = rpc.NewClient(addr, "fsck")
		}
		return clients[addr]
	}
	mdt := func(idx int) (*rpc.Client, error) {
		for _, t := range cfg.MDTs {
			if int(t.Index) == idx {
				return client(t.Addr), nil
			}
		}
		return nil, fmt.Errorf("fsck: mdt%d not in the cluster map", idx)
	}
	fix := func(idx int, req *proto.FsckFixReq) error {
		c, err := mdt(idx)
		if err != nil {
			return err
		}
		_, err = rpc.Invoke[proto.Empty](ctx, c, proto.MFsckFix, req)
		return err
	}
	var lostFound proto.FID
	ensureLost := func() error {
		if !lostFound.IsZero() {
			return nil
		}
		c, err := mdt(0)
		if err != nil {
			return err
		}
		a, err := rpc.Invoke[proto.AttrReply](ctx, c, proto.MLookup, &proto.LookupReq{Parent: proto.RootFID, Name: lostAndFound})
		if errors.Is(err, syscall.ENOENT) {
			a, err = rpc.Invoke[proto.AttrReply](ctx, c, proto.MMkdir, &proto.MkdirReq{Parent: proto.RootFID, Name: lostAndFound, Mode: 0o700, MDT: 0})
		}
		if err != nil {
			return fmt.Errorf("fsck: /lost+found: %w", err)
		}
		lostFound = a.Attr.FID
		return nil
	}
	for _, f := range found {
		var err error
		switch f.Kind {
		case MissingStripe:
			continue // reported only: what the stripe held is gone, nothing can bring it back
		case Dangling:
			err = fix(f.Parent.MDT(), &proto.FsckFixReq{Action: proto.FixDropDirent, Parent: f.Parent, Name: f.Name, FID: f.FID})
		case WrongNlink:
			err = fix(f.FID.MDT(), &proto.FsckFixReq{Action: proto.FixSetNlink, FID: f.FID, Nlink: f.Want, Have: f.Have})
		case Orphan:
			if err = ensureLost(); err == nil {
				err = fix(0, &proto.FsckFixReq{Action: proto.FixLinkLost, Parent: lostFound,
					Name: fmt.Sprintf("#%x:%x:%x", f.FID.Seq, f.FID.Oid, f.FID.Ver), FID: f.FID, Mode: f.Mode})
			}
		case OrphanObj:
			ts, idx := cfg.OSTs, f.OST
			if proto.IsDoMOST(f.OST) {
				ts, idx = cfg.MDTs, proto.DoMIndex(f.OST)
			}
			for _, t := range ts {
				if t.Index == idx {
					_, err = rpc.Invoke[proto.Empty](ctx, client(t.Addr), proto.ODestroy, &proto.ODestroyReq{Obj: f.Obj})
				}
			}
		}
		if errors.Is(err, syscall.ESTALE) {
			skipped++
			continue
		}
		if err != nil {
			return repaired, skipped, fmt.Errorf("fsck: repair %s: %w", f, err)
		}
		repaired++
	}
	return repaired, skipped, nil
}
