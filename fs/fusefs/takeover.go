package fusefs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/proto"
)

// Taking over a live mount. A daemon hands its FUSE session to a new
// process (a new binary after an upgrade) with no program on the mount
// seeing an error:
//
//  1. StopReading: the old daemon stops taking requests from the kernel.
//     The device is made non-blocking and every thread is signalled, so a
//     read waiting for a request returns EAGAIN and its go-fuse loop ends;
//     a loop in a request finishes it first (go-fuse answers each request
//     in the loop that read it), so every request read is answered.
//     Requests that arrive meanwhile wait in the kernel's queue.
//  2. WithdrawWaits: blocking lock waits, which may last for ever, are
//     withdrawn from the MDTs and go to the successor (lockwait.go).
//  3. The old daemon quiesces its client (fs.Client.Quiesce) and passes
//     the device, the kernel's FUSE_INIT, its open handles, its lock
//     waits and its client identity over a Unix socket, then exits.
//  4. Resume: the new daemon makes the device blocking again, lets
//     go-fuse take the old INIT as if the kernel had sent it, serves, and
//     waits for the lock waits again (AdoptWaits). Node ids are inode
//     numbers derived from FIDs, so no table of them passes; file handles
//     keep their numbers.
//
// The successor serves the same device description, not a clone: a reply
// goes to the description that read its request, and the lock waits were
// read by the old daemon's.

// Session is what a successor needs of a mount besides the device.
type Session struct {
	// Init is the kernel's FUSE_INIT as go-fuse kept it: the successor's
	// go-fuse agrees to it again, as the kernel agreed with ours.
	Init []byte
	// Request is the FUSE request size the kernel agreed to at INIT
	// (requestsize.go): the successor reads requests of this size
	// whatever it would ask now. 0 (a predecessor from before requests
	// could be larger) is 1 MiB.
	Request int
	Handles []Handle
	NextFh  uint64
	// Waits are the blocking lock requests read and not answered: the
	// successor waits for each again and answers it.
	Waits []fuse.LkIn
}

// Handle is one open file or directory handle.
type Handle struct {
	Fh    uint64
	FID   proto.FID
	Dir   bool
	Flags int
	// Known is what the client knew of an open file (fs.File.Known): the
	// successor needs no RPC to take it on.
	Known proto.Attr
	// LockOwners are the POSIX lock owners that locked through the
	// handle (flock.go).
	LockOwners []uint64
}

// requests counts the requests being served, and lockWaits the blocking
// lock waits among them, which a handover does not wait for; started
// counts every request begun, so a handover sees one that began and
// ended between two of its looks.
type requests struct {
	busy, lockWaits, started atomic.Int64
}

// begin counts a request being served.
func (r *requests) begin() {
	r.started.Add(1)
	r.busy.Add(1)
}

// CanHandOver says whether a new server, this one's successor or itself
// after a failed handover, could read f's session's requests now.
func (f *FS) CanHandOver() error { return requestFits(f.request) }

// requestFits says whether a server could read FUSE requests of n bytes
// now: go-fuse's buffers are no larger than the kernel allows today
// (max_pages_limit), which must still hold the largest request the
// kernel agreed to at INIT, or it fails every larger one with EIO.
func requestFits(n int) error {
	if k := kernelMaxRequest(); n > k {
		return fmt.Errorf("the session's FUSE requests are %d KiB, and this kernel now allows %d KiB (%s was lowered since the mount; raise it again)",
			n>>10, k>>10, maxPagesLimit)
	}
	return nil
}

// Snapshot is f's session, for a successor: srv's INIT and the open
// handles. Take it once srv has stopped reading.
func (f *FS) Snapshot(srv *fuse.Server) Session {
	in := srv.KernelSettings()
	s := Session{Init: append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(in)), unsafe.Sizeof(*in))...), Request: f.request, NextFh: f.nextFh.Load()}
	f.mu.Lock()
	defer f.mu.Unlock()
	for fh, h := range f.handles {
		switch h := h.(type) {
		case *fs.File:
			hs := Handle{Fh: fh, FID: h.FID(), Flags: h.Flags, Known: h.Known()}
			for o := range f.lockOwners[fh] {
				hs.LockOwners = append(hs.LockOwners, o)
			}
			s.Handles = append(s.Handles, hs)
		case *dirHandle:
			s.Handles = append(s.Handles, Handle{Fh: fh, FID: h.fid, Dir: true})
		}
	}
	return s
}

// Adopt takes on a predecessor's open handles, under their numbers
// (files the predecessor did not describe are asked of the MDTs, in
// parallel: the kernel holds every request meanwhile).
func (f *FS) Adopt(ctx context.Context, s Session) error {
	files := make([]*fs.File, len(s.Handles))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i, h := range s.Handles {
		if !h.Dir {
			g.Go(func() (err error) {
				files[i], err = f.c.Adopt(gctx, h.FID, h.Known, h.Flags)
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, h := range s.Handles {
		var v any = &dirHandle{fid: h.FID}
		if !h.Dir {
			v = files[i]
		}
		f.handles[h.Fh] = v
		for _, o := range h.LockOwners {
			if f.lockOwners[h.Fh] == nil {
				f.lockOwners[h.Fh] = map[uint64]bool{}
			}
			f.lockOwners[h.Fh][o] = true
		}
	}
	for {
		n := f.nextFh.Load()
		if n >= s.NextFh || f.nextFh.CompareAndSwap(n, s.NextFh) {
			return nil
		}
	}
}

// WithdrawWaits withdraws the blocking lock waits f serves from the
// MDTs (step 2 above), within limit, for Session.Waits. Settle must
// follow.
func (f *FS) WithdrawWaits(limit time.Duration) ([]fuse.LkIn, error) {
	return f.gate.withdraw(limit)
}

// Settle ends a handover that WithdrawWaits began: the withdrawn waits
// are the successor's if handedOver (never answered here), else they
// wait on the MDTs again.
func (f *FS) Settle(handedOver bool) { f.gate.settle(handedOver) }

// Busy reports the requests f is serving that are not lock waits.
func (f *FS) Busy() int64 { return f.reqs.busy.Load() - f.reqs.lockWaits.Load() }

// Serving reports every request f is serving.
func (f *FS) Serving() int64 { return f.reqs.busy.Load() }

// StopReading makes srv stop taking requests from the kernel (step 1
// above) and returns a descriptor of its device, which srv itself closes
// once its last loop ends. It waits for the requests being served, but
// for lock waits, within limit.
func StopReading(srv *fuse.Server, f *FS, limit time.Duration) (*os.File, error) {
	fd, err := fuseDevice()
	if err != nil {
		return nil, err
	}
	dev, err := unix.Dup(fd)
	if err != nil {
		return nil, fmt.Errorf("takeover: dup /dev/fuse: %w", err)
	}
	unix.CloseOnExec(dev)
	file := os.NewFile(uintptr(dev), "/dev/fuse")
	if err := unix.SetNonblock(dev, true); err != nil {
		file.Close()
		return nil, fmt.Errorf("takeover: make /dev/fuse non-blocking: %w", err)
	}
	ended := make(chan struct{})
	go func() { srv.Wait(); close(ended) }()
	deadline := time.Now().Add(limit)
	quiet, seen := time.Time{}, f.reqs.started.Load()
	for {
		kickThreads()
		select {
		case <-ended:
			return file, nil
		case <-time.After(2 * time.Millisecond):
		}
		// Loops still there are serving requests: once none is but
		// lock waits, and none has begun for a while, no loop reads. A
		// loop that served a request between two looks is still
		// reading: it may take an open whose handle the snapshot would
		// miss (the successor then answers EBADF for it).
		if n := f.reqs.started.Load(); f.Busy() > 0 || n != seen {
			quiet, seen = time.Time{}, n
		} else if quiet.IsZero() {
			quiet = time.Now()
		} else if time.Since(quiet) > 50*time.Millisecond {
			return file, nil
		}
		if time.Now().After(deadline) {
			_ = unix.SetNonblock(dev, false)
			file.Close()
			return nil, fmt.Errorf("takeover: requests still being served after %v", limit)
		}
	}
}

// fuseDevice is this process's descriptor of /dev/fuse (a mount has
// one).
func fuseDevice() (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1, err
	}
	for _, e := range ents {
		if t, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && t == "/dev/fuse" {
			return strconv.Atoi(e.Name())
		}
	}
	return -1, errors.New("takeover: this process has no /dev/fuse descriptor")
}

// kickThreads signals every thread of the process with SIGURG (the Go
// runtime's preemption signal, which it ignores when unasked): a read of
// the device waiting for a request is restarted, and finds it
// non-blocking.
func kickThreads() {
	pid := unix.Getpid()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			_ = unix.Tgkill(pid, tid, unix.SIGURG)
		}
	}
}

// Resume serves the FUSE session of dev (a predecessor's device) with f,
// taking the kernel's INIT from s, with go-fuse's options for c and o as
// Mount has them (step 4 above). The caller adopts s's handles before
// and unmounts by path after (the server knows no mount point).
func Resume(f *FS, c *fs.Client, dev *os.File, s Session, o MountOptions) (*fuse.Server, error) {
	var in fuse.InitIn
	if len(s.Init) != int(unsafe.Sizeof(in)) {
		return nil, fmt.Errorf("takeover: INIT of %d bytes, this go-fuse's is %d", len(s.Init), unsafe.Sizeof(in))
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&in)), unsafe.Sizeof(in)), s.Init)
	mo := fuseOptions(c, o)
	mo.MaxWrite = cmp.Or(s.Request, 1<<20)
	if err := requestFits(mo.MaxWrite); err != nil {
		return nil, fmt.Errorf("takeover: %w", err)
	}
	in.Length, in.Opcode, in.Unique, in.NodeId = uint32(unsafe.Sizeof(in)), opInit, 1, 0
	// The predecessor left the description non-blocking (StopReading).
	if err := unix.SetNonblock(int(dev.Fd()), false); err != nil {
		return nil, fmt.Errorf("takeover: make /dev/fuse blocking: %w", err)
	}
	// go-fuse reads INIT first: from a socket we write it to.
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(sp[1])
	if _, err := unix.Write(sp[1], unsafe.Slice((*byte)(unsafe.Pointer(&in)), unsafe.Sizeof(in))); err != nil {
		unix.Close(sp[0])
		return nil, fmt.Errorf("takeover: hand INIT to go-fuse: %w", err)
	}
	f.request = mo.MaxWrite
	srv, err := fuse.NewServer(f, fmt.Sprintf("/dev/fd/%d", sp[0]), mo)
	if err != nil {
		return nil, fmt.Errorf("takeover: %w", err)
	}
	// INIT read, the socket becomes the device under its number.
	if err := unix.Dup3(int(dev.Fd()), sp[0], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("takeover: %w", err)
	}
	f.SetServer(srv)
	go srv.Serve()
	return srv, nil
}

const opInit = 26 // FUSE_INIT

// UnmountPath unmounts dir, as the server of a taken-over session cannot
// (it knows no mount point): directly as root, else with fusermount3.
func UnmountPath(dir string) error {
	if err := syscall.Unmount(dir, 0); err == nil || !errors.Is(err, syscall.EPERM) {
		return err
	}
	for _, prog := range []string{"fusermount3", "fusermount"} {
		if p, err := exec.LookPath(prog); err == nil {
			if out, err := exec.Command(p, "-u", dir).CombinedOutput(); err != nil {
				return fmt.Errorf("unmount %s: %v: %s", dir, err, out)
			}
			return nil
		}
	}
	return fmt.Errorf("unmount %s: not root, and no fusermount3", dir)
}
