package nfsexport

import (
	"context"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	billy "github.com/go-git/go-billy/v5"
	nfsfile "github.com/willscott/go-nfs/file"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/perm"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// fsys is the billy.Filesystem go-nfs serves: stripefs through the client
// library, with paths as described in paths.go. It also implements
// billy.Change (SETATTR's chmod, chown and times) and billy.Capable.
//
// go-nfs passes no caller identity to the filesystem, so every call is made
// as root (uid 0, gid 0), and new objects belong to root: the allow-list
// is what keeps strangers out.
type fsys struct {
	c        *fs.Client
	files    *openFiles
	names    *nameCache
	readOnly bool
	// call is the credential of the call being served on this fsys's
	// connection (nil: every call is root's), taken as squash says.
	call   *callGate
	squash Squash
}

// ctx is the context of the call being served: its user's credential.
func (s *fsys) ctx() context.Context {
	if s.call == nil {
		return bg()
	}
	return rpc.WithCred(bg(), s.squash.cred(s.call.current()))
}

// mayOpen checks that the caller may read (or write) fid, as nfsd does:
// by the mode, and the owner always (a file created read-only, or
// chmodded while open, stays the owner's to write).
func (s *fsys) mayOpen(ctx context.Context, fid proto.FID, write bool) error {
	a, ok := s.files.attr(fid)
	if !ok {
		ga, err := s.c.Getattr(ctx, fid)
		if err != nil {
			return err
		}
		a = *ga
	}
	c := rpc.CredOf(ctx)
	if c == nil || perm.Owns(&a, c) {
		return nil
	}
	want := perm.Read
	if write {
		want = perm.Write
	}
	return perm.Access(&a, c, want)
}

var (
	_ billy.Filesystem = (*fsys)(nil)
	_ billy.Change     = (*fsys)(nil)
	_ billy.Capable    = (*fsys)(nil)
)

// pathError gives go-nfs an error it can classify: os.IsNotExist and
// os.IsPermission look through *os.PathError to a bare errno, not through
// wrapping, so the errno goes in Err and the path says where.
func pathError(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return &os.PathError{Op: "nfs: " + op, Path: showPath(path), Err: fs.AnswerErrno(err)}
}

func bg() context.Context { return context.Background() }

// resolve finds path's FID and, when wantAttr is set or a name had to be
// looked up, its attributes (nil otherwise).
func (s *fsys) resolve(ctx context.Context, path string, wantAttr bool) (proto.FID, *proto.Attr, error) {
	if path == badPath {
		return proto.FID{}, nil, syscall.EINVAL
	}
	pp, err := parsePath(path)
	if err != nil {
		return proto.FID{}, nil, err
	}
	return s.walk(ctx, pp, wantAttr)
}

func (s *fsys) walk(ctx context.Context, pp parsedPath, wantAttr bool) (proto.FID, *proto.Attr, error) {
	fid := pp.start
	var a *proto.Attr
	if pp.up {
		pa, err := s.c.Parent(ctx, fid)
		if err != nil {
			return proto.FID{}, nil, err
		}
		fid, a = pa.FID, pa
	}
	for _, name := range pp.names {
		ca, err := s.c.Lookup(ctx, fid, name)
		if err != nil {
			return proto.FID{}, nil, err
		}
		s.names.put(fid, name, ca.FID)
		fid, a = ca.FID, ca
	}
	if wantAttr && a == nil {
		ga, err := s.c.Getattr(ctx, fid)
		if err != nil {
			return proto.FID{}, nil, err
		}
		a = ga
	}
	return fid, a, nil
}

// fidOf resolves path to a FID for ToHandle, using names seen in the last
// moments (go-nfs asks for a handle right after the Lstat or ReadDir that
// found the name) before asking the MDT.
func (s *fsys) fidOf(ctx context.Context, path string) (proto.FID, error) {
	pp, err := parsePath(path)
	if err != nil || path == badPath {
		return proto.FID{}, syscall.EINVAL
	}
	if dir, name, err := pp.split(); err == nil && !dir.up && len(dir.names) == 0 {
		if fid, ok := s.names.get(dir.start, name); ok {
			return fid, nil
		}
	}
	fid, _, err := s.walk(ctx, pp, false)
	return fid, err
}

// dirOf resolves the directory holding path's last name.
func (s *fsys) dirOf(ctx context.Context, path string) (proto.FID, string, error) {
	if path == badPath {
		return proto.FID{}, "", syscall.EINVAL
	}
	pp, err := parsePath(path)
	if err != nil {
		return proto.FID{}, "", err
	}
	dir, name, err := pp.split()
	if err != nil {
		return proto.FID{}, "", err
	}
	fid, _, err := s.walk(ctx, dir, false)
	return fid, name, err
}

// Capabilities: everything, or reading only.
func (s *fsys) Capabilities() billy.Capability {
	if s.readOnly {
		return billy.ReadCapability | billy.SeekCapability
	}
	return billy.DefaultCapabilities
}

func (s *fsys) writable(op, path string) error {
	if s.readOnly {
		return pathError(op, path, syscall.EROFS)
	}
	return nil
}

func (s *fsys) Join(elem ...string) string { return joinPath(elem...) }

// Create makes a file or opens the existing one, without truncating it,
// unlike billy's contract: it serves NFS CREATE, which in UNCHECKED mode
// must leave an existing file's data alone (a client that wants it
// truncated sends size 0 in the attributes, which go-nfs applies after).
func (s *fsys) Create(filename string) (billy.File, error) {
	return s.OpenFile(filename, os.O_RDWR|os.O_CREATE, 0o644)
}

func (s *fsys) Open(filename string) (billy.File, error) {
	return s.OpenFile(filename, os.O_RDONLY, 0)
}

// OpenFile returns a handle on a regular file. The handle holds only the
// FID: each read and write takes the shared open file from the cache, so
// a handle go-nfs forgets to close costs nothing.
func (s *fsys) OpenFile(filename string, flag int, perm os.FileMode) (billy.File, error) {
	ctx := s.ctx()
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC) != 0 {
		if err := s.writable("open", filename); err != nil {
			return nil, err
		}
	}
	if flag&os.O_CREATE != 0 && filename != badPath {
		pp, err := parsePath(filename)
		if err != nil {
			return nil, pathError("create", filename, err)
		}
		// A path that ends in a handle, not a name, is an existing file.
		if dirPath, name, err := pp.split(); err == nil {
			dir, _, err := s.walk(ctx, dirPath, false)
			if err != nil {
				return nil, pathError("create", filename, err)
			}
			mode := syscall.S_IFREG | goToMode(perm)&0o7777
			a, f, err := s.c.Create(ctx, dir, name, mode, 0, flag&os.O_EXCL != 0, true, os.O_RDWR)
			if err != nil {
				return nil, pathError("create", filename, err)
			}
			s.names.put(dir, name, a.FID)
			s.files.adopt(f, a)
			if flag&os.O_TRUNC != 0 && a.Size > 0 {
				_, err := s.c.Setattr(ctx, &fs.SetAttr{FID: a.FID, Valid: proto.SetSize})
				s.files.forgetAttr(a.FID)
				if err != nil {
					return nil, pathError("truncate", filename, err)
				}
			}
			return &file{s: s, fid: a.FID}, nil
		}
	}
	fid, _, err := s.resolve(ctx, filename, false)
	if err != nil {
		return nil, pathError("open", filename, err)
	}
	if err := s.mayOpen(ctx, fid, flag&(os.O_WRONLY|os.O_RDWR|os.O_TRUNC) != 0); err != nil {
		return nil, pathError("open", filename, err)
	}
	// The open file is the gateway's, shared by its callers: each call
	// is checked here, as nfsd checks each READ and WRITE.
	of, err := s.files.acquire(bg(), fid) // opens it, checking it is a file
	if err != nil {
		return nil, pathError("open", filename, err)
	}
	s.files.put(of)
	if flag&os.O_TRUNC != 0 {
		_, err := s.c.Setattr(ctx, &fs.SetAttr{FID: fid, Valid: proto.SetSize})
		s.files.forgetAttr(fid)
		if err != nil {
			return nil, pathError("truncate", filename, err)
		}
	}
	return &file{s: s, fid: fid}, nil
}

// Stat is Lstat: an NFS server never follows symbolic links, its clients
// do.
func (s *fsys) Stat(filename string) (os.FileInfo, error) { return s.Lstat(filename) }

// Lstat answers the attributes of a file open here from memory while they
// are fresh (see attrTTL); go-nfs asks twice for every READ and WRITE.
func (s *fsys) Lstat(filename string) (os.FileInfo, error) {
	pp, err := parsePath(filename)
	if err == nil && filename != badPath && !pp.up && len(pp.names) == 0 {
		if a, ok := s.files.attr(pp.start); ok {
			return &fileInfo{a: a}, nil
		}
	}
	_, a, err := s.resolve(s.ctx(), filename, true)
	if err != nil {
		return nil, pathError("stat", filename, err)
	}
	s.files.noteAttr(a)
	name := ""
	if len(pp.names) > 0 {
		name = pp.names[len(pp.names)-1]
	}
	return &fileInfo{name: name, a: *a}, nil
}

func (s *fsys) Rename(oldpath, newpath string) error {
	if err := s.writable("rename", oldpath); err != nil {
		return err
	}
	ctx := s.ctx()
	sdir, sname, err := s.dirOf(ctx, oldpath)
	if err != nil {
		return pathError("rename", oldpath, err)
	}
	ddir, dname, err := s.dirOf(ctx, newpath)
	if err != nil {
		return pathError("rename", newpath, err)
	}
	s.names.forget(sdir, sname)
	s.names.forget(ddir, dname)
	if err := s.c.Rename(ctx, sdir, sname, ddir, dname, 0); err != nil {
		return pathError("rename", oldpath, err)
	}
	return nil
}

// Remove unlinks a file or removes an empty directory (NFS REMOVE and
// RMDIR both arrive here).
func (s *fsys) Remove(filename string) error {
	if err := s.writable("remove", filename); err != nil {
		return err
	}
	ctx := s.ctx()
	dir, name, err := s.dirOf(ctx, filename)
	if err != nil {
		return pathError("remove", filename, err)
	}
	s.names.forget(dir, name)
	err = s.c.Unlink(ctx, dir, name)
	if fs.Errno(err) == syscall.EISDIR {
		err = s.c.Rmdir(ctx, dir, name)
	}
	return pathError("remove", filename, err)
}

func (s *fsys) TempFile(dir, prefix string) (billy.File, error) {
	return nil, billy.ErrNotSupported
}

// readdirBatch is how many entries one MDT readdir returns here.
const readdirBatch = 1024

// ReadDir lists a directory with attributes. go-nfs asks for the whole
// listing on every READDIR and pages it itself.
func (s *fsys) ReadDir(path string) ([]os.FileInfo, error) {
	ctx := s.ctx()
	dir, _, err := s.resolve(ctx, path, false)
	if err != nil {
		return nil, pathError("readdir", path, err)
	}
	var out []os.FileInfo
	for cookie := uint64(0); ; {
		ents, eof, err := s.c.Readdir(ctx, dir, cookie, readdirBatch, true)
		if err != nil {
			return nil, pathError("readdir", path, err)
		}
		for _, e := range ents {
			cookie = e.Cookie
			if e.Name == "." || e.Name == ".." {
				continue
			}
			a := e.Attr
			if a.FID.IsZero() {
				// The MDT answers attributes of the entries it holds; an
				// entry on another MDT is asked there.
				ga, err := s.c.Getattr(ctx, e.FID)
				if fs.Errno(err) == syscall.ENOENT {
					continue // removed meanwhile
				} else if err != nil {
					return nil, pathError("readdir", path, err)
				}
				a = *ga
			}
			s.names.put(dir, e.Name, a.FID)
			out = append(out, &fileInfo{name: e.Name, a: a})
		}
		if eof || len(ents) == 0 {
			return out, nil
		}
	}
}

// MkdirAll makes the last directory of the path; go-nfs has made sure its
// parent exists.
func (s *fsys) MkdirAll(filename string, perm os.FileMode) error {
	if err := s.writable("mkdir", filename); err != nil {
		return err
	}
	ctx := s.ctx()
	dir, name, err := s.dirOf(ctx, filename)
	if err != nil {
		return pathError("mkdir", filename, err)
	}
	a, err := s.c.Mkdir(ctx, dir, name, goToMode(perm)&0o7777)
	if fs.Errno(err) == syscall.EEXIST {
		if a, lerr := s.c.Lookup(ctx, dir, name); lerr == nil && a.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			return nil
		}
	}
	if err != nil {
		return pathError("mkdir", filename, err)
	}
	s.names.put(dir, name, a.FID)
	return nil
}

func (s *fsys) Symlink(target, link string) error {
	if err := s.writable("symlink", link); err != nil {
		return err
	}
	ctx := s.ctx()
	dir, name, err := s.dirOf(ctx, link)
	if err != nil {
		return pathError("symlink", link, err)
	}
	a, err := s.c.Symlink(ctx, dir, name, target)
	if err != nil {
		return pathError("symlink", link, err)
	}
	s.names.put(dir, name, a.FID)
	return nil
}

func (s *fsys) Readlink(link string) (string, error) {
	ctx := s.ctx()
	fid, _, err := s.resolve(ctx, link, false)
	if err != nil {
		return "", pathError("readlink", link, err)
	}
	t, err := s.c.Readlink(ctx, fid)
	if err != nil {
		return "", pathError("readlink", link, err)
	}
	return t, nil
}

func (s *fsys) Chroot(path string) (billy.Filesystem, error) { return nil, billy.ErrNotSupported }

func (s *fsys) Root() string { return "/" }

func (s *fsys) setattr(op, name string, req *fs.SetAttr) error {
	if err := s.writable(op, name); err != nil {
		return err
	}
	ctx := s.ctx()
	fid, _, err := s.resolve(ctx, name, false)
	if err != nil {
		return pathError(op, name, err)
	}
	req.FID = fid
	_, err = s.c.Setattr(ctx, req)
	s.files.forgetAttr(fid) // after: a getattr racing the change is dropped too
	return pathError(op, name, err)
}

func (s *fsys) Chmod(name string, mode os.FileMode) error {
	return s.setattr("chmod", name, &fs.SetAttr{Valid: proto.SetMode, Mode: goToMode(mode) & 0o7777})
}

// Lchown changes owner and group; a negative id leaves that one alone.
func (s *fsys) Lchown(name string, uid, gid int) error {
	req := &fs.SetAttr{}
	if uid >= 0 {
		req.Valid |= proto.SetUid
		req.Uid = uint32(uid)
	}
	if gid >= 0 {
		req.Valid |= proto.SetGid
		req.Gid = uint32(gid)
	}
	if req.Valid == 0 {
		return nil
	}
	return s.setattr("chown", name, req)
}

// Chown is Lchown: links are never followed here (see Stat).
func (s *fsys) Chown(name string, uid, gid int) error { return s.Lchown(name, uid, gid) }

func (s *fsys) Chtimes(name string, atime, mtime time.Time) error {
	return s.setattr("utimes", name, &fs.SetAttr{Valid: proto.SetAtime | proto.SetMtime, Atime: atime.UnixNano(), Mtime: mtime.UnixNano()})
}

// file is an open file as go-nfs sees it: a FID and a position. Reads and
// writes go through the shared open file of that FID.
type file struct {
	s   *fsys
	fid proto.FID
	pos int64
}

var _ billy.File = (*file)(nil)

// Name is a path that resolves to this file without a lookup.
func (f *file) Name() string { return joinPath(pathOf(f.fid)...) }

func (f *file) Write(p []byte) (int, error) {
	if err := f.s.writable("write", f.Name()); err != nil {
		return 0, err
	}
	n, err := f.s.files.write(bg(), f.fid, f.pos, p)
	f.pos += int64(n)
	if err != nil {
		return n, pathError("write", f.Name(), err)
	}
	return n, nil
}

func (f *file) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

// ReadAt returns io.EOF with a short count at the end of the file.
func (f *file) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.s.files.readAt(bg(), f.fid, p, off)
	if err != nil {
		return n, pathError("read", f.Name(), err)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *file) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		a, err := f.s.c.Getattr(bg(), f.fid)
		if err != nil {
			return f.pos, pathError("seek", f.Name(), err)
		}
		offset += int64(a.Size)
	default:
		return f.pos, pathError("seek", f.Name(), syscall.EINVAL)
	}
	if offset < 0 {
		return f.pos, pathError("seek", f.Name(), syscall.EINVAL)
	}
	f.pos = offset
	return f.pos, nil
}

// Close keeps the file open in the cache (see openFiles).
func (f *file) Close() error { return nil }

func (f *file) Lock() error   { return nil }
func (f *file) Unlock() error { return nil }

func (f *file) Truncate(size int64) error {
	if size < 0 {
		return pathError("truncate", f.Name(), syscall.EINVAL)
	}
	if err := f.s.writable("truncate", f.Name()); err != nil {
		return err
	}
	_, err := f.s.c.Setattr(bg(), &fs.SetAttr{FID: f.fid, Valid: proto.SetSize, Size: uint64(size)})
	f.s.files.forgetAttr(f.fid)
	return pathError("truncate", f.Name(), err)
}

// fileInfo is an inode's attributes as os.FileInfo; Sys carries what
// go-nfs puts into fattr3 beyond FileInfo (links, owner, device, fileid).
type fileInfo struct {
	name string
	a    proto.Attr
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return int64(fi.a.Size) }
func (fi *fileInfo) Mode() os.FileMode  { return modeToGo(fi.a.Mode) }
func (fi *fileInfo) ModTime() time.Time { return time.Unix(0, fi.a.Mtime) }
func (fi *fileInfo) IsDir() bool        { return fi.a.Mode&syscall.S_IFMT == syscall.S_IFDIR }
func (fi *fileInfo) Sys() any {
	return &nfsfile.FileInfo{
		Nlink:  fi.a.Nlink,
		UID:    fi.a.Uid,
		GID:    fi.a.Gid,
		Major:  fi.a.Rdev >> 8 & 0xfff,
		Minor:  fi.a.Rdev&0xff | fi.a.Rdev>>12&0xfff00,
		Fileid: fileID(fi.a.FID),
	}
}

// fileID is the inode number NFS clients see: the same as through the
// FUSE mount (the root is 1 there, by FUSE's rule), so tools that compare
// inode numbers across the two agree.
func fileID(fid proto.FID) uint64 {
	if fid == proto.RootFID {
		return 1
	}
	return fid.Ino()
}

// modeToGo converts st_mode bits to os.FileMode.
func modeToGo(m uint32) os.FileMode {
	gm := os.FileMode(m & 0o777)
	switch m & syscall.S_IFMT {
	case syscall.S_IFDIR:
		gm |= os.ModeDir
	case syscall.S_IFLNK:
		gm |= os.ModeSymlink
	case syscall.S_IFIFO:
		gm |= os.ModeNamedPipe
	case syscall.S_IFSOCK:
		gm |= os.ModeSocket
	case syscall.S_IFCHR:
		gm |= os.ModeDevice | os.ModeCharDevice
	case syscall.S_IFBLK:
		gm |= os.ModeDevice
	}
	if m&syscall.S_ISUID != 0 {
		gm |= os.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		gm |= os.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		gm |= os.ModeSticky
	}
	return gm
}

// goToMode converts os.FileMode's permission and special bits to st_mode
// bits (no type).
func goToMode(m os.FileMode) uint32 {
	out := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		out |= syscall.S_ISUID
	}
	if m&os.ModeSetgid != 0 {
		out |= syscall.S_ISGID
	}
	if m&os.ModeSticky != 0 {
		out |= syscall.S_ISVTX
	}
	return out
}

// nameCache remembers (directory, name) → FID for a moment, so go-nfs's
// ToHandle right after the Lstat, create or READDIR that found a name costs
// no second lookup. Entries live for nameTTL, like the kernel's one-second
// entry cache: a handle handed out within that moment of a rename by
// another client may name the entry's previous file. Renames and removes
// through this gateway forget their names at once.
type nameCache struct {
	mu sync.Mutex
	m  map[nameKey]nameVal
}

type nameKey struct {
	dir  proto.FID
	name string
}

type nameVal struct {
	fid proto.FID
	at  time.Time
}

const (
	nameTTL = time.Second
	// maxNames bounds the cache; a full cache is emptied, which costs only
	// lookups, never correctness.
	maxNames = 1 << 16
)

func newNameCache() *nameCache { return &nameCache{m: map[nameKey]nameVal{}} }

func (n *nameCache) put(dir proto.FID, name string, fid proto.FID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.m) >= maxNames {
		clear(n.m)
	}
	n.m[nameKey{dir, name}] = nameVal{fid, time.Now()}
}

func (n *nameCache) get(dir proto.FID, name string) (proto.FID, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.m[nameKey{dir, name}]
	if !ok || time.Since(v.at) > nameTTL {
		return proto.FID{}, false
	}
	return v.fid, true
}

func (n *nameCache) forget(dir proto.FID, name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.m, nameKey{dir, name})
}
