package nfsexport

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/proto"
)

// openFiles keeps recently used files open. NFS has no open or close: every
// WRITE and READ names its file by handle. Giving each its own fs.File
// would throw away what the client library does for a file that stays
// open — the write-back cache that merges consecutive writes by file
// offset and sends whole stripe units, and read-ahead — so consecutive
// calls on one FID share one fs.File from here.
//
// A file leaves the cache when it is the least recently used of more than
// max, when it has been idle for idle (so other clients soon see its size:
// close-to-open as far as NFS allows), when its handle is invalidated
// (remove, rename) and when the gateway closes. Leaving releases the
// fs.File, which flushes its dirty data; a flush error is kept for the
// next COMMIT of that file, so the client learns of it.
type openFiles struct {
	c    *fs.Client
	max  int
	idle time.Duration
	logf func(string, ...any)

	mu     sync.Mutex
	m      map[proto.FID]*openFile
	lru    list.List // *openFile, most recently used first
	failed map[proto.FID]error
	closed bool
	active int            // calls between acquire and put
	quiet  *sync.Cond     // signalled when active drops to 0
	bg     sync.WaitGroup // releases scheduled or running
}

// openFile is one cached fs.File. users counts the calls using it now: a
// file evicted while in use is released by its last user.
type openFile struct {
	fid   proto.FID
	ready chan struct{} // closed once f or err is set
	f     *fs.File
	err   error

	// Guarded by openFiles.mu.
	users  int
	gone   bool // out of the map; the last user releases
	used   time.Time
	elem   *list.Element
	attr   proto.Attr // as last read from the MDT (or the create)
	attrAt time.Time  // when; zero: none, or f is not open yet
}

// attrTTL is how long the attributes of an open file are answered from
// memory (the kernel's attr_timeout for the FUSE mount is the same): every
// WRITE and READ asks for them twice, and an MDT round trip each time cost
// a quarter of the gateway's write rate. The size is always the open
// file's own, which includes this gateway's unflushed writes.
const attrTTL = time.Second

// maxFailed bounds the flush errors kept for COMMIT.
const maxFailed = 1024

func newOpenFiles(c *fs.Client, max int, idle time.Duration, logf func(string, ...any)) *openFiles {
	o := &openFiles{c: c, max: max, idle: idle, logf: logf, m: map[proto.FID]*openFile{}, failed: map[proto.FID]error{}}
	o.quiet = sync.NewCond(&o.mu)
	return o
}

// acquire returns fid's open file, opening it if needed, for one call;
// the caller must put it back. Only regular files are opened: reading a
// directory through a file handle is the client's mistake, not ours.
func (o *openFiles) acquire(ctx context.Context, fid proto.FID) (*openFile, error) {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil, fmt.Errorf("nfs: gateway closed: %w", syscall.ESHUTDOWN)
	}
	o.active++
	of := o.m[fid]
	if of != nil {
		of.users++
		of.used = time.Now()
		o.lru.MoveToFront(of.elem)
		o.mu.Unlock()
		<-of.ready
		if of.err != nil {
			o.put(of)
			return nil, of.err
		}
		return of, nil
	}
	of = &openFile{fid: fid, ready: make(chan struct{}), users: 1, used: time.Now()}
	of.elem = o.lru.PushFront(of)
	o.m[fid] = of
	rel := o.evictLocked()
	o.mu.Unlock()
	o.start(rel)

	var a *proto.Attr
	of.f, a, of.err = o.open(ctx, fid)
	o.mu.Lock()
	if of.err != nil {
		o.removeLocked(of) // the next call tries again
	} else {
		of.attr, of.attrAt = *a, time.Now()
	}
	o.mu.Unlock()
	close(of.ready)
	if of.err != nil {
		o.put(of)
		return nil, of.err
	}
	return of, nil
}

func (o *openFiles) open(ctx context.Context, fid proto.FID) (*fs.File, *proto.Attr, error) {
	a, err := o.c.Getattr(ctx, fid)
	if err != nil {
		return nil, nil, err
	}
	switch a.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
	case syscall.S_IFDIR:
		return nil, nil, fmt.Errorf("nfs: open %s: %w", fid, syscall.EISDIR)
	default:
		return nil, nil, fmt.Errorf("nfs: open %s: not a regular file: %w", fid, syscall.EINVAL)
	}
	f, err := o.c.Open(ctx, fid, os.O_RDWR)
	return f, a, err
}

// attr returns the attributes of fid if it is open here and they are
// fresh (see attrTTL).
func (o *openFiles) attr(fid proto.FID) (proto.Attr, bool) {
	o.mu.Lock()
	of := o.m[fid]
	if of == nil || of.attrAt.IsZero() || time.Since(of.attrAt) > attrTTL {
		o.mu.Unlock()
		return proto.Attr{}, false
	}
	a, f := of.attr, of.f
	o.mu.Unlock()
	a.Size = f.Size()
	return a, true
}

// noteAttr refreshes the attributes of an open file from a getattr.
func (o *openFiles) noteAttr(a *proto.Attr) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if of := o.m[a.FID]; of != nil && !of.attrAt.IsZero() {
		of.attr, of.attrAt = *a, time.Now()
	}
}

// forgetAttr drops fid's attributes after a change through this gateway.
func (o *openFiles) forgetAttr(fid proto.FID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if of := o.m[fid]; of != nil {
		of.attrAt = time.Time{}
	}
}

// adopt puts a file the caller opened (a create) into the cache, unless
// the FID is cached already, in which case the new handle is released.
func (o *openFiles) adopt(f *fs.File, a *proto.Attr) {
	of := &openFile{fid: f.FID(), ready: make(chan struct{}), f: f, used: time.Now(), attr: *a, attrAt: time.Now()}
	close(of.ready)
	o.mu.Lock()
	var rel []*openFile
	if o.closed || o.m[of.fid] != nil {
		of.gone = true
		rel = o.scheduleLocked(of)
	} else {
		of.elem = o.lru.PushFront(of)
		o.m[of.fid] = of
		rel = o.evictLocked()
	}
	o.mu.Unlock()
	o.start(rel)
}

// put ends one call's use of of.
func (o *openFiles) put(of *openFile) {
	o.mu.Lock()
	of.users--
	var rel []*openFile
	if of.gone && of.users == 0 {
		rel = o.scheduleLocked(of)
	}
	if o.active--; o.active == 0 {
		o.quiet.Broadcast()
	}
	o.mu.Unlock()
	o.start(rel)
}

// evictLocked takes the least recently used files out of the cache until
// it holds at most max, and schedules the release of those no call uses.
func (o *openFiles) evictLocked() []*openFile {
	var rel []*openFile
	for o.lru.Len() > o.max {
		of := o.lru.Back().Value.(*openFile)
		if o.removeLocked(of) {
			rel = append(rel, o.scheduleLocked(of)...)
		}
	}
	return rel
}

// removeLocked takes of out of the cache and reports whether it is unused
// (the caller schedules its release then; otherwise its last user will).
func (o *openFiles) removeLocked(of *openFile) bool {
	if of.gone {
		return false
	}
	of.gone = true
	o.lru.Remove(of.elem)
	if o.m[of.fid] == of {
		delete(o.m, of.fid)
	}
	return of.users == 0
}

// scheduleLocked counts releases before they start, under o.mu, so that
// close, which waits for them, cannot miss one.
func (o *openFiles) scheduleLocked(of *openFile) []*openFile {
	if of.f == nil {
		return nil // it never opened
	}
	o.bg.Add(1)
	return []*openFile{of}
}

// start releases scheduled files in the background: a release flushes
// dirty data, which an NFS call waiting for its own reply should not pay
// for.
func (o *openFiles) start(rel []*openFile) {
	for _, of := range rel {
		go func() {
			defer o.bg.Done()
			o.releaseFile(of.f)
		}()
	}
}

func (o *openFiles) releaseFile(f *fs.File) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := f.Release(ctx); err != nil {
		o.logf("nfs: release %s: %v (reported to the next COMMIT)", f.FID(), err)
		o.mu.Lock()
		if len(o.failed) >= maxFailed {
			clear(o.failed) // bounded memory beats remembering every failure
		}
		o.failed[f.FID()] = err
		o.mu.Unlock()
	}
}

// drop takes fid out of the cache (its handle was invalidated).
func (o *openFiles) drop(fid proto.FID) {
	o.mu.Lock()
	var rel []*openFile
	if of := o.m[fid]; of != nil && o.removeLocked(of) {
		rel = o.scheduleLocked(of)
	}
	o.mu.Unlock()
	o.start(rel)
}

// expire releases files idle for at least o.idle.
func (o *openFiles) expire(now time.Time) {
	o.mu.Lock()
	var rel []*openFile
	for e := o.lru.Back(); e != nil; {
		of := e.Value.(*openFile)
		e = e.Prev()
		if now.Sub(of.used) < o.idle {
			break // the rest were used more recently
		}
		if of.users == 0 && o.removeLocked(of) {
			rel = append(rel, o.scheduleLocked(of)...)
		}
	}
	o.mu.Unlock()
	o.start(rel)
}

// write is one NFS WRITE: the data goes into the file's write-back cache
// through WriteV, so a write that starts in the middle of a stripe unit
// merges with its neighbours by file offset, whatever its boundaries.
func (o *openFiles) write(ctx context.Context, fid proto.FID, off int64, p []byte) (int, error) {
	of, err := o.acquire(ctx, fid)
	if err != nil {
		return 0, err
	}
	defer o.put(of)
	return of.f.WriteV(ctx, off, [][]byte{p})
}

// readAt is one NFS READ.
func (o *openFiles) readAt(ctx context.Context, fid proto.FID, p []byte, off int64) (int, error) {
	of, err := o.acquire(ctx, fid)
	if err != nil {
		return 0, err
	}
	defer o.put(of)
	return of.f.ReadAt(ctx, p, off)
}

// commit makes fid's data durable (NFS COMMIT, and stable WRITEs): every
// object synced on its OST, the size committed on the MDT. A flush that
// failed when the file left the cache is reported here, once.
func (o *openFiles) commit(ctx context.Context, fid proto.FID) error {
	o.mu.Lock()
	ferr := o.failed[fid]
	delete(o.failed, fid)
	o.mu.Unlock()
	of, err := o.acquire(ctx, fid)
	if err != nil {
		return err
	}
	defer o.put(of)
	if err := of.f.Fsync(ctx); err != nil {
		return err
	}
	return ferr
}

// close releases every file once the calls in progress end, and waits
// for the releases; later calls fail.
func (o *openFiles) close() error {
	o.mu.Lock()
	o.closed = true
	var rel []*openFile
	for _, of := range o.m {
		if o.removeLocked(of) {
			rel = append(rel, o.scheduleLocked(of)...)
		}
	}
	for o.active > 0 {
		o.quiet.Wait() // their last put schedules the rest
	}
	o.mu.Unlock()
	o.start(rel)
	o.bg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	var errs []error
	for fid, err := range o.failed {
		errs = append(errs, fmt.Errorf("%s: %w", fid, err))
	}
	return errors.Join(errs...)
}
