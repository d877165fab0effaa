package nfsexport

import (
	"context"
	"math"
	"net"
	"strings"
	"syscall"

	billy "github.com/go-git/go-billy/v5"
	nfs "github.com/willscott/go-nfs"

	"github.com/stripefs/stripefs/proto"
)

// handler is the go-nfs Handler: the mount protocol's export, and file
// handles that are FID keys. Handles need no table, survive gateway and
// server restarts, and decode without an RPC (see paths.go); that is why
// go-nfs's caching handler, which maps handles to paths in memory and
// forgets them, is not used.
type handler struct {
	fsys *fsys
}

var _ nfs.Handler = (*handler)(nil)

// Mount answers MNT. The whole filesystem is exported: "/" is its root,
// and a longer path mounts that directory (libnfs's tools mount the
// directory part of a URL's path). The path is resolved once, here; the
// client then holds the directory's handle.
func (h *handler) Mount(ctx context.Context, conn net.Conn, req nfs.MountRequest) (nfs.MountStatus, billy.Filesystem, []nfs.AuthFlavor) {
	flavors := []nfs.AuthFlavor{nfs.AuthFlavorUnix}
	if h.fsys.squash.AllSquash {
		flavors = append(flavors, nfs.AuthFlavorNull) // everyone is anonymous anyway
	}
	dir := proto.RootFID
	for _, name := range strings.Split(string(req.Dirpath), "/") {
		if name == "" {
			continue
		}
		a, err := h.fsys.c.Lookup(h.fsys.ctx(), dir, name)
		if err != nil {
			return nfs.MountStatusErrNoEnt, nil, nil
		}
		if a.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return nfs.MountStatusErrNotDir, nil, nil
		}
		dir = a.FID
	}
	if dir == proto.RootFID {
		return nfs.MountStatusOk, h.fsys, flavors
	}
	return nfs.MountStatusOk, &mountedDir{fsys: h.fsys, fid: dir}, flavors
}

// mountedDir is what Mount returns for a directory other than the root:
// go-nfs asks ToHandle for its "root" (the empty path) and nothing else.
type mountedDir struct {
	*fsys
	fid proto.FID
}

// Change returns the filesystem's SETATTR side, or nil when read-only.
func (h *handler) Change(billy.Filesystem) billy.Change {
	if h.fsys.readOnly {
		return nil
	}
	return h.fsys
}

// FSStat reports space over the OSTs and inodes over the MDTs.
func (h *handler) FSStat(ctx context.Context, _ billy.Filesystem, st *nfs.FSStat) error {
	s, err := h.fsys.c.Statfs(ctx)
	if err != nil {
		return pathError("statfs", "", err)
	}
	st.TotalSize, st.FreeSize, st.AvailableSize = s.Blocks, s.Bfree, s.Bavail
	st.TotalFiles, st.FreeFiles, st.AvailableFiles = s.Files+s.Ffree, s.Ffree, s.Ffree
	if h.fsys.readOnly {
		st.AvailableSize, st.AvailableFiles = 0, 0
	}
	return nil
}

// ToHandle returns the handle of the object at path. It cannot fail in
// go-nfs's API; an object that cannot be resolved gets the zero handle,
// which every later call rejects as stale.
func (h *handler) ToHandle(bfs billy.Filesystem, path []string) []byte {
	if len(path) == 0 {
		if md, ok := bfs.(*mountedDir); ok {
			return handleOf(md.fid)
		}
		return handleOf(proto.RootFID)
	}
	fid, err := h.fsys.fidOf(context.Background(), joinPath(path...))
	if err != nil {
		return make([]byte, 16)
	}
	return handleOf(fid)
}

// FromHandle turns a handle into its path: no table, no RPC.
func (h *handler) FromHandle(fh []byte) (billy.Filesystem, []string, error) {
	fid, err := fidOfHandle(fh)
	if err != nil {
		return nil, nil, err
	}
	return h.fsys, pathOf(fid), nil
}

// InvalidateHandle is called after a remove or rename of the object: the
// handle itself stays what it was (a FID), but a removed file's open
// handle must go, so the MDT can finish the removal.
func (h *handler) InvalidateHandle(_ billy.Filesystem, fh []byte) error {
	if fid, err := fidOfHandle(fh); err == nil {
		h.fsys.files.drop(fid)
	}
	return nil
}

// HandleLimit is unbounded: handles cost no memory here. (go-nfs also
// caps a READDIR reply at half this many entries.)
func (h *handler) HandleLimit() int { return math.MaxInt32 }
