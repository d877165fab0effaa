package find

import (
	"context"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/pkg/xattr"

	"github.com/stripefs/stripefs/proto"
)

// Walk finds by walking the mount from root (root included, as find(1)
// does): a stat a file, and for --ost a read of its layout xattr.
func Walk(ctx context.Context, root string, p *Pred, emit func(path string)) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !p.needsStat() && path != root {
			// Name and type come with the directory's entries: no stat
			// (find(1) does the same).
			if e := (&Entry{Path: path, Mode: typeBits(d.Type()), MDT: NoMDT}); p.Match(e) {
				emit(path)
			}
			return nil
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			return &fs.PathError{Op: "lstat", Path: path, Err: err}
		}
		e := &Entry{Path: path, Mode: st.Mode, Size: uint64(st.Size), Mtime: st.Mtim.Nano(), MDT: proto.FIDFromIno(st.Ino).MDT()}
		if path == root && st.Ino == 1 {
			e.MDT = 0 // the mount's root: node 1 to FUSE, the root on MDT0
		}
		if p.OST != NoOST && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			if v, err := xattr.LGet(path, proto.LayoutXattr); err == nil {
				e.OSTs = layoutOSTs(string(v))
			}
		}
		if p.Match(e) {
			emit(path)
		}
		return nil
	})
}

// layoutOSTs reads the osts= fields of a lustre.lov value: one, or one
// per instantiated component of a composite layout.
func layoutOSTs(lov string) []uint32 {
	var out []uint32
	for _, f := range strings.Fields(lov) {
		if v, ok := strings.CutPrefix(f, "osts="); ok {
			for _, s := range strings.Split(v, ",") {
				if n, err := strconv.ParseUint(s, 10, 32); err == nil {
					out = append(out, uint32(n))
				}
			}
		}
	}
	return out
}

// needsStat reports whether p looks past names and types.
func (p *Pred) needsStat() bool { return p.Size != nil || p.HasNewer || p.NeedsLayout() }

// typeBits is st_mode's type for a directory entry's type.
func typeBits(t fs.FileMode) uint32 {
	switch {
	case t&fs.ModeDir != 0:
		return syscall.S_IFDIR
	case t&fs.ModeSymlink != 0:
		return syscall.S_IFLNK
	case t&fs.ModeNamedPipe != 0:
		return syscall.S_IFIFO
	case t&fs.ModeSocket != 0:
		return syscall.S_IFSOCK
	case t&fs.ModeCharDevice != 0:
		return syscall.S_IFCHR
	case t&fs.ModeDevice != 0:
		return syscall.S_IFBLK
	}
	return syscall.S_IFREG
}
