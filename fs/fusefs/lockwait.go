package fusefs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Blocking lock waits across a takeover. A wait may last for ever, and
// the go-fuse loop serving it reads the device again once it answers:
// left in the old daemon, it would take requests meant for the
// successor (an open whose handle the successor never learns: EBADF).
// So a handover withdraws every wait from the MDT instead, the old
// daemon exits without answering them, and the successor waits again
// and answers the kernel itself: a FUSE reply goes to the device
// description that read the request, which the successor serves too.

// waitGate is the lock waits being served, and the handover that may
// take them.
type waitGate struct {
	mu     sync.Mutex
	ctx    context.Context // ends when a handover withdraws the waits
	cancel context.CancelFunc
	waits  map[uint64]*lockWait // by the kernel's request id
	// settled is closed when the handover ends; handedOver says how.
	settled    chan struct{}
	handedOver bool
}

type lockWait struct {
	in        fuse.LkIn
	withdrawn bool // let go on the MDT for a handover, waiting for its outcome
}

func (g *waitGate) init() {
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.waits = map[uint64]*lockWait{}
}

// enter registers the wait of in and returns the context that a
// handover ends.
func (g *waitGate) enter(in *fuse.LkIn) (context.Context, *lockWait) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := &lockWait{in: *in}
	g.waits[in.Unique] = w
	return g.ctx, w
}

// leave forgets an answered wait.
func (g *waitGate) leave(w *lockWait) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.waits, w.in.Unique)
}

// withdrawn records that w let go for a handover and blocks until it
// ends: true if the successor has the wait now (w's request must not be
// answered from here), false if this daemon serves on and waits again.
func (g *waitGate) withdrawn(w *lockWait) bool {
	g.mu.Lock()
	w.withdrawn = true
	settled := g.settled
	g.mu.Unlock()
	<-settled
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.handedOver {
		return true
	}
	w.withdrawn = false
	return false
}

// withdraw ends every wait's MDT request and returns the waits, once each
// has let go or been answered, within limit.
func (g *waitGate) withdraw(limit time.Duration) ([]fuse.LkIn, error) {
	g.mu.Lock()
	g.settled = make(chan struct{})
	g.handedOver = false
	g.cancel()
	g.mu.Unlock()
	for deadline := time.Now().Add(limit); ; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		var ins []fuse.LkIn
		all := true
		for _, w := range g.waits {
			all = all && w.withdrawn
			ins = append(ins, w.in)
		}
		g.mu.Unlock()
		if all {
			return ins, nil
		}
		if time.Now().After(deadline) {
			g.settle(false)
			return nil, fmt.Errorf("takeover: lock waits not withdrawn after %v", limit)
		}
	}
}

// settle ends a handover: withdrawn waits stay parked for good if it
// handed the mount over, or wait again.
func (g *waitGate) settle(handedOver bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.settled == nil {
		return
	}
	g.handedOver = handedOver
	close(g.settled)
	g.settled = nil
	if !handedOver {
		g.ctx, g.cancel = context.WithCancel(context.Background())
	}
}

// waitLock serves a blocking lock request: it waits on the MDT under
// ctx (the request's), and waits again there if a handover that failed
// withdrew it. When a handover succeeds it never returns: the successor
// answers the request.
func (f *FS) waitLock(ctx context.Context, in *fuse.LkIn, wait func(context.Context) error) error {
	for {
		gctx, w := f.gate.enter(in)
		c, stop := context.WithCancel(ctx)
		unhook := context.AfterFunc(gctx, stop)
		err := wait(c)
		unhook()
		stop()
		if err == nil || ctx.Err() != nil || gctx.Err() == nil || !errors.Is(err, syscall.EINTR) {
			f.gate.leave(w)
			return err
		}
		if f.gate.withdrawn(w) {
			select {} // this process ends: the successor answers the kernel
		}
		f.gate.leave(w)
	}
}

// AdoptWaits waits again for a predecessor's lock waits and answers each
// on dev, the device description that read it.
func (f *FS) AdoptWaits(dev *os.File, ins []fuse.LkIn) {
	for _, in := range ins {
		go func() {
			st := f.SetLkw(nil, &in)
			out := fuse.OutHeader{Length: uint32(unsafe.Sizeof(fuse.OutHeader{})), Status: -int32(st), Unique: in.Unique}
			if _, err := dev.Write(unsafe.Slice((*byte)(unsafe.Pointer(&out)), unsafe.Sizeof(out))); err != nil {
				slog.Error(fmt.Sprintf("fusefs: answering a lock wait taken over: %v", err))
			}
		}()
	}
}
