package fusefs

import (
	"context"
	"math"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/proto"
)

// Application locks through FUSE: fcntl record locks and OFD locks reach
// us as POSIX locks (told apart by their owners), flock(2) as whole-file
// locks flagged LK_FLOCK; all are granted by the file's MDT, so they hold
// across every mount (-o flock, the default). -o localflock leaves them
// to this kernel alone, as node-local locks; -o noflock refuses them
// (ENOSYS), as Lustre's mount options do.

// FlockMode is the mount's application-lock mode.
type FlockMode uint8

const (
	FlockCluster FlockMode = iota // -o flock
	FlockLocal                    // -o localflock
	FlockNone                     // -o noflock
)

// offsetMax is the kernel's OFFSET_MAX: a FUSE lock that reaches it
// reaches the end of the file.
const offsetMax = math.MaxInt64

func lockOf(in *fuse.LkIn) (fs.FlockLock, error) {
	l := fs.FlockLock{Kind: proto.FlockPOSIX, Owner: in.Owner, Start: in.Lk.Start, Pid: in.Lk.Pid}
	if in.LkFlags&fuse.LK_FLOCK != 0 {
		l.Kind = proto.FlockBSD
	}
	switch in.Lk.Typ {
	case syscall.F_RDLCK:
		l.Type = proto.FlockRead
	case syscall.F_WRLCK:
		l.Type = proto.FlockWrite
	case syscall.F_UNLCK:
	default:
		return l, syscall.EINVAL
	}
	switch {
	case in.Lk.Start > offsetMax || in.Lk.End < in.Lk.Start:
		return l, syscall.EINVAL
	case in.Lk.End >= offsetMax:
		l.End = proto.LockEOF
	default:
		l.End = in.Lk.End + 1
	}
	if l.Kind == proto.FlockBSD {
		l.Start, l.End = 0, proto.LockEOF
	}
	return l, nil
}

func (f *FS) flockFile(fh uint64) (*fs.File, fuse.Status) {
	if f.flockMode == FlockNone {
		return nil, fuse.ENOSYS
	}
	return f.file(fh)
}

// GetLk is F_GETLK: the lock that would keep the asked one out, on any
// mount.
func (f *FS) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	file, st := f.flockFile(in.Fh)
	if !st.Ok() {
		return st
	}
	l, err := lockOf(in)
	if err != nil || l.Type == 0 {
		return fuse.EINVAL
	}
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	cf, err := f.c.FlockTest(c, file.FID(), l)
	if err != nil {
		return status(err)
	}
	if cf.Type == 0 {
		out.Lk = fuse.FileLock{Typ: syscall.F_UNLCK}
		return fuse.OK
	}
	out.Lk = fuse.FileLock{Start: cf.Start, End: offsetMax, Pid: cf.Pid, Typ: syscall.F_RDLCK}
	if cf.End != proto.LockEOF {
		out.Lk.End = cf.End - 1
	}
	if cf.Type == proto.FlockWrite {
		out.Lk.Typ = syscall.F_WRLCK
	}
	return fuse.OK
}

// SetLk is F_SETLK (and flock with LOCK_NB): EAGAIN when held elsewhere.
func (f *FS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return f.setLk(cancel, in, false)
}

// SetLkw is F_SETLKW (and flock without LOCK_NB): it waits on the MDT
// until granted, EDEADLK for a cycle, EINTR when a signal interrupts it.
func (f *FS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return f.setLk(cancel, in, true)
}

func (f *FS) setLk(cancel <-chan struct{}, in *fuse.LkIn, wait bool) fuse.Status {
	file, st := f.flockFile(in.Fh)
	if !st.Ok() {
		return st
	}
	l, err := lockOf(in)
	if err != nil {
		return fuse.EINVAL
	}
	if l.Type == 0 {
		c, stop := f.ctx(cancel, &in.InHeader)
		defer stop()
		return status(f.c.FlockUnlock(c, file.FID(), l.Kind, l.Owner, l.Start, l.End))
	}
	f.noteLockOwner(in.Fh, l)
	c, stop := f.ctx(cancel, &in.InHeader)
	defer stop()
	if !wait {
		return status(f.c.Flock(c, file.FID(), l, false))
	}
	f.reqs.lockWaits.Add(1) // may take for ever: a takeover moves it (lockwait.go)
	defer f.reqs.lockWaits.Add(-1)
	// Unlike other requests, a wait ends with the kernel's interrupt:
	// the program got a signal, and the MDT withdraws the wait.
	c, end := context.WithCancel(c)
	defer end()
	go func() {
		select {
		case <-cancel:
			end()
		case <-c.Done():
		}
	}()
	return status(f.waitLock(c, in, func(c context.Context) error { return f.c.Flock(c, file.FID(), l, true) }))
}

// noteLockOwner records a POSIX lock owner that locks through handle fh.
func (f *FS) noteLockOwner(fh uint64, l fs.FlockLock) {
	if l.Kind != proto.FlockPOSIX {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.lockOwners[fh]
	if m == nil {
		m = map[uint64]bool{}
		f.lockOwners[fh] = m
	}
	m[l.Owner] = true
}

// takeLockOwners returns and forgets the POSIX owners that locked
// through fh.
func (f *FS) takeLockOwners(fh uint64) []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []uint64
	for o := range f.lockOwners[fh] {
		out = append(out, o)
	}
	delete(f.lockOwners, fh)
	return out
}

// releaseLocks gives up what a close ends: a process's POSIX locks on
// the file at any of its closes (flush), an open file's flock at its
// last (release).
func (f *FS) releaseLocks(file *fs.File, kind uint8, owner uint64) {
	if f.flockMode != FlockCluster || owner == 0 {
		return
	}
	_ = f.c.FlockRelease(context.Background(), file.FID(), kind, owner)
}
