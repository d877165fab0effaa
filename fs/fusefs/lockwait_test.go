package fusefs

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestWaitGate withdraws a lock wait for a handover: a failed handover
// sends it waiting again (and it is answered here), a successful one
// keeps it from ever being answered here; a wait answered before the
// handover is not passed on.
func TestWaitGate(t *testing.T) {
	for _, handedOver := range []bool{false, true} {
		t.Run(fmt.Sprint("handedOver=", handedOver), func(t *testing.T) {
			f := &FS{}
			f.gate.init()
			grant := make(chan struct{})
			waits := make(chan int, 4)
			wait := func(c context.Context) error {
				waits <- 1
				select {
				case <-grant:
					return nil
				case <-c.Done():
					return fmt.Errorf("withdrawn: %w", syscall.EINTR)
				}
			}
			answered := make(chan error, 1)
			in := &fuse.LkIn{InHeader: fuse.InHeader{Unique: 7}, Fh: 3}
			go func() { answered <- f.waitLock(context.Background(), in, wait) }()
			<-waits
			// A wait answered before the handover stays out of it.
			quick := make(chan error, 1)
			go func() {
				quick <- f.waitLock(context.Background(), &fuse.LkIn{InHeader: fuse.InHeader{Unique: 8}}, func(context.Context) error { return nil })
			}()
			if err := <-quick; err != nil {
				t.Fatal(err)
			}
			got, err := f.gate.withdraw(5 * time.Second)
			if err != nil || len(got) != 1 || got[0].Unique != 7 || got[0].Fh != 3 {
				t.Fatalf("withdraw: %+v %v, want request 7 only", got, err)
			}
			select {
			case err := <-answered:
				t.Fatalf("a withdrawn wait was answered before the handover ended: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
			f.gate.settle(handedOver)
			if handedOver {
				close(grant)
				select {
				case err := <-answered:
					t.Fatalf("a wait handed over was answered here: %v", err)
				case <-time.After(100 * time.Millisecond):
				}
				return
			}
			select {
			case <-waits: // waiting on the MDT again
			case <-time.After(5 * time.Second):
				t.Fatal("the wait did not wait again after a failed handover")
			}
			close(grant)
			if err := <-answered; err != nil {
				t.Fatalf("granted after a failed handover: %v", err)
			}
			// A later handover finds nothing to move.
			if got, err := f.gate.withdraw(time.Second); err != nil || len(got) != 0 {
				t.Fatalf("second withdraw: %+v %v", got, err)
			}
			f.gate.settle(false)
		})
	}
}
