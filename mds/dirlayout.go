package mds

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/stripefs/stripefs/proto"
)

// Directory placement through extended attributes, as lfs setdirstripe
// and getdirstripe use them:
//   - DirDefaultXattr on a directory: "mdt_index=-1 mdt_count=1" makes new
//     subdirectories go round-robin over the MDTs (or to one MDT).
//   - DirXattr (read-only): where a directory itself lives.
//   - MkdirXattr, set on a parent: "name=NAME mdt_index=N [mode=0755]"
//     creates NAME on MDT N (lfs mkdir -i). Like Lustre's default, this is
//     an administrator's tool: the directory is owned by root.
const (
	DirDefaultXattr = proto.DirDefaultXattr
	DirXattr        = "lustre.lmv"
	MkdirXattr      = "stripefs.mkdir"
)

// mkdirTarget picks the MDT of a new subdirectory of dir: the one asked
// for, else dir's default, else dir's own MDT.
func (m *MDT) mkdirTarget(ctx context.Context, dir *inode, asked int32) (uint32, error) {
	self := uint32(m.cfg.Index)
	if first, ok := firstAttr(ctx); ok && !first.FID.IsZero() && kindOf(first.FID) == proto.FIDPlain {
		// A replay goes where the first mkdir went, whatever the
		// round robin says now: the client uses the FID it was given
		// there (childFID, replayedFID).
		if mdt := first.FID.MDT(); mdt >= 0 && mdt < m.numMDTs(ctx) {
			return uint32(mdt), nil
		}
	}
	idx := int32(-2)
	switch {
	case asked >= 0:
		idx = asked
	case dir.DefDir.Set:
		idx = dir.DefDir.Index
	default:
		return self, nil
	}
	n := m.numMDTs(ctx)
	if idx == -1 {
		return uint32(m.rrDir.Add(1)-1) % uint32(max(n, 1)), nil
	}
	if idx < 0 || int(idx) >= n {
		return 0, fmt.Errorf("mdt%d: mkdir on mdt%d: only %d MDTs: %w", m.cfg.Index, idx, n, syscall.EINVAL)
	}
	return uint32(idx), nil
}

func parseKV(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range strings.Fields(strings.TrimRight(s, "\x00")) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value: %w", f, syscall.EINVAL)
		}
		out[k] = v
	}
	return out, nil
}

// setDirDefault stores a directory's default placement. m.mu is held.
func (m *MDT) setDirDefault(ctx context.Context, n *inode, value string) error {
	if !n.isDir() {
		return m.errorf("setdirstripe", n.Attr.FID.String(), syscall.ENOTDIR)
	}
	kv, err := parseKV(value)
	if err != nil {
		return err
	}
	d := DirLayout{Set: true, Index: -1, Count: 1}
	for k, v := range kv {
		x, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("mdt%d: setdirstripe: %s=%q: %w", m.cfg.Index, k, v, syscall.EINVAL)
		}
		switch k {
		case "mdt_index":
			if x < -1 || x >= m.numMDTs(context.Background()) {
				return fmt.Errorf("mdt%d: setdirstripe: no mdt%d: %w", m.cfg.Index, x, syscall.EINVAL)
			}
			d.Index = int32(x)
		case "mdt_count":
			if n := m.numMDTs(context.Background()); x < 1 || x > n {
				return fmt.Errorf("mdt%d: setdirstripe -D: stripe count %d, but there are %d MDTs: %w", m.cfg.Index, x, n, syscall.EINVAL)
			}
			d.Count = uint32(x)
		default:
			return fmt.Errorf("mdt%d: setdirstripe: unknown key %q: %w", m.cfg.Index, k, syscall.EINVAL)
		}
	}
	n.DefDir = d
	n.Attr.Ctime = now()
	b := m.newBatch(ctx)
	m.putInode(b, n)
	return m.commit(b, false)
}

func (d DirLayout) String() string {
	return fmt.Sprintf("mdt_index=%d mdt_count=%d", d.Index, max(d.Count, 1))
}

// mkdirXattr creates a subdirectory on a chosen MDT (lfs mkdir -i), or
// striped over mdt_count MDTs from there (lfs mkdir -c; mdt_index=-1
// follows the parent's default, else its own MDT).
func (m *MDT) mkdirXattr(ctx context.Context, parent proto.FID, value string) error {
	kv, err := parseKV(value)
	if err != nil {
		return err
	}
	idx, err := strconv.Atoi(kv["mdt_index"])
	if err != nil || kv["name"] == "" {
		return fmt.Errorf("mdt%d: mkdir: want name=NAME mdt_index=N: %w", m.cfg.Index, syscall.EINVAL)
	}
	mode := uint64(0o755)
	if v, ok := kv["mode"]; ok {
		if mode, err = strconv.ParseUint(v, 8, 32); err != nil {
			return fmt.Errorf("mdt%d: mkdir: mode %q: %w", m.cfg.Index, v, syscall.EINVAL)
		}
	}
	count := 1
	if v, ok := kv["mdt_count"]; ok {
		if count, err = strconv.Atoi(v); err != nil || count < 1 || count > m.numMDTs(ctx) {
			return fmt.Errorf("mdt%d: mkdir: stripe count %q, but there are %d MDTs: %w", m.cfg.Index, v, m.numMDTs(ctx), syscall.EINVAL)
		}
	}
	if idx < -1 || idx >= m.numMDTs(ctx) {
		return fmt.Errorf("mdt%d: mkdir: no mdt%d (there are %d): %w", m.cfg.Index, idx, m.numMDTs(ctx), syscall.EINVAL)
	}
	_, err = m.mkdirStriped(ctx, &proto.MkdirReq{Parent: parent, Name: kv["name"], Mode: uint32(mode), MDT: int32(idx)}, count)
	return err
}
