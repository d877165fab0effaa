package fsck

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/layout"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// ECReport is the outcome of a scrub or rebuild of the erasure-coded
// files.
type ECReport struct {
	Files         int    `json:"files"` // erasure-coded files checked
	Rows          uint64 `json:"rows"`
	DamagedRows   int    `json:"damaged_rows"` // rows with a finding
	RepairedRows  int    `json:"repaired_rows"`
	Unrecoverable int    `json:"unrecoverable_rows"`
	// Damaged lists the files with findings, by FID.
	Damaged []fs.ECFileReport `json:"damaged,omitempty"`
	// Errors lists files that could not be checked or repaired.
	Errors []string `json:"errors,omitempty"`
}

// ECOptions say what ScrubEC does.
type ECOptions struct {
	fs.ECCheck
	// Workers is how many files are checked at once (default 4).
	Workers int
}

// ScrubEC walks every erasure-coded file of the filesystem (inodes from
// every MDT) and checks that each row's parity matches its data, with
// opts.Repair fixing what it can. With opts.Lost it rebuilds every unit
// the OST opts.LostOST holds from the other OSTs (a replaced or wiped
// OST): only the files with an object there are read.
func ScrubEC(ctx context.Context, mgs string, opts ECOptions) (*ECReport, error) {
	c, err := fs.Connect(ctx, fs.Options{MGS: mgs, Name: "scrub"})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	files, err := ecFiles(ctx, c.Config(), opts)
	if err != nil {
		return nil, err
	}
	rep := &ECReport{Files: len(files)}
	var mu sync.Mutex
	work := make(chan *proto.Attr)
	var wg sync.WaitGroup
	for range max(opts.Workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				fr, err := c.CheckEC(ctx, a, opts.ECCheck)
				mu.Lock()
				if err != nil {
					rep.Errors = append(rep.Errors, err.Error())
				}
				if fr != nil {
					rep.Rows += fr.Rows
					for _, f := range fr.Findings {
						rep.DamagedRows++
						if f.Repaired {
							rep.RepairedRows++
						}
						if f.Unrecoverable {
							rep.Unrecoverable++
						}
					}
					if len(fr.Findings) > 0 {
						rep.Damaged = append(rep.Damaged, *fr)
					}
				}
				mu.Unlock()
			}
		}()
	}
	for i := range files {
		select {
		case work <- &files[i]:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	slices.SortFunc(rep.Damaged, func(a, b fs.ECFileReport) int {
		switch {
		case less(a.FID, b.FID):
			return -1
		case less(b.FID, a.FID):
			return 1
		}
		return 0
	})
	slices.Sort(rep.Errors)
	return rep, ctx.Err()
}

// ecFiles returns the regular files of every MDT that are erasure-coded
// or have an erasure-coded component (those with an object of it on the
// lost OST, when rebuilding).
func ecFiles(ctx context.Context, cfg proto.Config, opts ECOptions) ([]proto.Attr, error) {
	var out []proto.Attr
	for _, t := range cfg.MDTs {
		mc := rpc.NewClient(t.Addr, "scrub")
		var after []byte
		for {
			r, err := rpc.Invoke[proto.ScanInodesReply](ctx, mc, proto.MScanInodes, &proto.ScanReq{After: after, Max: 4096})
			if err != nil {
				mc.Close()
				return nil, fmt.Errorf("scrub: mdt%d: %w", t.Index, err)
			}
			for _, n := range r.Inodes {
				a := n.Attr
				ep, ok := layout.ECPartOf(a.Layout)
				if a.Mode&0o170000 != 0o100000 || !ok {
					continue
				}
				if opts.Lost && !slices.Contains(ep.Layout.OSTs, opts.LostOST) {
					continue
				}
				out = append(out, a)
			}
			if r.EOF {
				break
			}
			after = r.Next
		}
		mc.Close()
	}
	return out, nil
}
