package lockd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/ldlm"
	"github.com/stripefs/stripefs/proto"
)

// Application locks (fcntl, OFD, flock): ldlm.Flocks decides; here a
// blocked Set waits for its grant (never polling: the unlock that lets it
// go wakes it), an interrupted one is withdrawn by its cookie, and a
// holder whose client has lost its connection while others wait is
// evicted once it stays away for the timeout, so its waiters go ahead.

// flockState is the application-lock part of a Service, under its mu.
type flockState struct {
	tab       *ldlm.Flocks
	waits     map[uint64]chan error  // waiter id → its answer
	byCookie  map[cookie]uint64      // a waiting Set's cookie → waiter id
	cancelled map[cookie]time.Time   // cookies cancelled before their Set came
	away      map[string]*time.Timer // clients without a connection, until evicted
	down      map[string]bool        // clients with no connection now

	deadlocks, waited, grantsAfterWait int64
}

func (f *flockState) init() {
	f.tab = ldlm.NewFlocks()
	f.waits, f.byCookie, f.cancelled = map[uint64]chan error{}, map[cookie]uint64{}, map[cookie]time.Time{}
	f.away, f.down = map[string]*time.Timer{}, map[string]bool{}
}

func flockOf(client string, r *proto.FlockReq) ldlm.Flock {
	return ldlm.Flock{Res: r.Res, Kind: ldlm.FlockKind(r.Kind), Owner: ldlm.FlockOwner{Client: client, ID: r.Owner},
		Type: ldlm.FlockType(r.Type), Start: r.Start, End: r.End, Pid: r.Pid}
}

// Flock serves MFlock.
func (s *Service) Flock(ctx context.Context, client, name string, r *proto.FlockReq) (*proto.FlockReply, error) {
	if client == "" {
		return nil, s.errorf("flock without a client identity: %w", syscall.EPROTO)
	}
	if s.IsEvicted(client) {
		return nil, s.errorf("flock from evicted client %s: %w", client, ErrEvicted)
	}
	if r.Kind != proto.FlockPOSIX && r.Kind != proto.FlockBSD {
		return nil, s.errorf("flock: kind %d: %w", r.Kind, syscall.EINVAL)
	}
	switch r.Op {
	case proto.FlockSet:
		return s.flockSet(ctx, client, name, r)
	case proto.FlockTest:
		l := flockOf(client, r)
		if err := ldlm.CheckFlock(&l); err != nil {
			return nil, s.errorf("flock test: %v: %w", err, syscall.EINVAL)
		}
		s.mu.Lock()
		c := s.fl.tab.Test(l)
		s.mu.Unlock()
		if c == nil {
			return &proto.FlockReply{}, nil
		}
		return &proto.FlockReply{Type: uint8(c.Type), Start: c.Start, End: c.End, Pid: c.Pid, Mine: c.Owner.Client == client}, nil
	case proto.FlockUnlock, proto.FlockRelease:
		start, end := r.Start, r.End
		if r.Op == proto.FlockRelease {
			start, end = 0, ldlm.EOF
		}
		if start >= end {
			return nil, s.errorf("flock unlock of [%d, %d): %w", start, end, syscall.EINVAL)
		}
		s.mu.Lock()
		woken := s.fl.tab.Unlock(r.Res, ldlm.FlockKind(r.Kind), ldlm.FlockOwner{Client: client, ID: r.Owner}, start, end)
		s.wakeLocked(woken)
		s.mu.Unlock()
		return &proto.FlockReply{}, nil
	case proto.FlockCancel:
		s.mu.Lock()
		k := cookie{client, r.Cookie}
		if id, ok := s.fl.byCookie[k]; ok {
			s.fl.tab.Withdraw(id)
			s.answerLocked(id, syscall.EINTR)
		} else {
			s.fl.cancelled[k] = time.Now() // the Set is still on its way
			for c, t := range s.fl.cancelled {
				if time.Since(t) > time.Minute {
					delete(s.fl.cancelled, c)
				}
			}
		}
		s.mu.Unlock()
		return &proto.FlockReply{}, nil
	}
	return nil, s.errorf("flock: operation %d: %w", r.Op, syscall.EINVAL)
}

func (s *Service) flockSet(ctx context.Context, client, name string, r *proto.FlockReq) (*proto.FlockReply, error) {
	l := flockOf(client, r)
	if err := ldlm.CheckFlock(&l); err != nil {
		return nil, s.errorf("flock: %v: %w", err, syscall.EINVAL)
	}
	// Held locks outlive a restart only if replayed, and a restarted MDT
	// waits only for the clients it knows.
	if err := s.store.Register(client, name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	k := cookie{client, r.Cookie}
	if _, gone := s.fl.cancelled[k]; gone && r.Cookie != 0 {
		delete(s.fl.cancelled, k)
		s.mu.Unlock()
		return nil, s.errorf("flock wait interrupted: %w", syscall.EINTR)
	}
	w, woken, err := s.fl.tab.Set(l, r.Wait)
	s.wakeLocked(woken)
	switch {
	case errors.Is(err, ldlm.ErrWouldBlock):
		s.mu.Unlock()
		return nil, syscall.EAGAIN
	case errors.Is(err, ldlm.ErrDeadlock):
		s.fl.deadlocks++
		s.mu.Unlock()
		return nil, syscall.EDEADLK
	case err != nil:
		s.mu.Unlock()
		return nil, s.errorf("flock: %v: %w", err, syscall.EINVAL)
	case w == nil:
		s.mu.Unlock()
		return &proto.FlockReply{}, nil
	}
	answer := make(chan error, 1)
	s.fl.waits[w.ID] = answer
	if r.Cookie != 0 {
		s.fl.byCookie[k] = w.ID
	}
	s.fl.waited++
	// Holders whose clients are away are evicted if they stay away.
	for _, h := range s.fl.tab.Held(l.Res, l.Kind) {
		if h.Owner.Client != client && s.fl.down[h.Owner.Client] {
			s.awayLocked(h.Owner.Client)
		}
	}
	s.mu.Unlock()
	select {
	case err := <-answer:
		if err != nil {
			return nil, err
		}
		return &proto.FlockReply{}, nil
	case <-ctx.Done():
		s.mu.Lock()
		if s.fl.tab.Waiting(w.ID) {
			s.fl.tab.Withdraw(w.ID)
			s.forgetWaitLocked(w.ID)
			s.mu.Unlock()
			return nil, s.errorf("flock wait: %w", ctx.Err())
		}
		s.mu.Unlock()
		// Granted (or answered) as the asker gave up: the answer stands.
		if err := <-answer; err != nil {
			return nil, err
		}
		return &proto.FlockReply{}, nil
	}
}

// wakeLocked answers the waiters a change granted. s.mu is held.
func (s *Service) wakeLocked(ws []*ldlm.FlockWaiter) {
	for _, w := range ws {
		s.fl.grantsAfterWait++
		s.answerLocked(w.ID, nil)
	}
}

func (s *Service) answerLocked(id uint64, err error) {
	if ch := s.fl.waits[id]; ch != nil {
		ch <- err
	}
	s.forgetWaitLocked(id)
}

func (s *Service) forgetWaitLocked(id uint64) {
	delete(s.fl.waits, id)
	for k, x := range s.fl.byCookie {
		if x == id {
			delete(s.fl.byCookie, k)
		}
	}
}

// ConnChange is told when a client's last connection goes (up false) and
// when it has one again: a client that holds application locks others
// wait for, and stays away for the timeout, is evicted.
func (s *Service) ConnChange(client string, up bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if up {
		delete(s.fl.down, client)
		if t := s.fl.away[client]; t != nil {
			t.Stop()
			delete(s.fl.away, client)
		}
		return
	}
	s.fl.down[client] = true
	if s.blocksWaitersLocked(client) {
		s.awayLocked(client)
	}
}

// blocksWaitersLocked reports whether client holds a lock someone waits
// for.
func (s *Service) blocksWaitersLocked(client string) bool {
	return s.fl.tab.HoldsAnyBlocking(client)
}

func (s *Service) awayLocked(client string) {
	if s.fl.away[client] != nil {
		return
	}
	s.fl.away[client] = time.AfterFunc(s.cfg.Timeout, func() {
		s.mu.Lock()
		stillAway := s.fl.down[client] && s.fl.away[client] != nil
		delete(s.fl.away, client)
		s.mu.Unlock()
		if stillAway {
			s.Evict(client, fmt.Sprintf("holds application locks others wait for and has had no connection for %v", s.cfg.Timeout))
		}
	})
}

// dropFlocksLocked removes client's application locks and waits; the
// waiters it blocked go ahead.
func (s *Service) dropFlocksLocked(client string) {
	for _, id := range s.fl.tab.WaitersOf(client) {
		s.fl.tab.Withdraw(id)
		s.answerLocked(id, fmt.Errorf("%s: client evicted while waiting: %w", s.cfg.Name, ErrEvicted))
	}
	s.wakeLocked(s.fl.tab.DropClient(client))
}

// FlockReplay serves MFlockReplay: the application locks a client held
// before the MDT restarted, taken only while its recovery window is open.
func (s *Service) FlockReplay(client string, r *proto.FlockReplayReq) (*proto.LockReplayReply, error) {
	if len(r.Locks) > 1<<20 {
		return nil, s.errorf("flock replay of %d locks: %w", len(r.Locks), syscall.EINVAL)
	}
	out := &proto.LockReplayReply{OK: make([]bool, len(r.Locks))}
	if client == "" || s.IsEvicted(client) || !s.Recovering() {
		s.ctr.ReplayRefused.Add(int64(len(r.Locks)))
		return out, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range r.Locks {
		if err := s.fl.tab.Replay(flockOf(client, &r.Locks[i])); err != nil {
			slog.Error(fmt.Sprintf("%s: flock replay from %s refused: %v", s.cfg.Name, client, err), "server", s.cfg.Name, "client", client)
			s.ctr.ReplayRefused.Add(1)
			continue
		}
		out.OK[i] = true
		s.ctr.Replayed.Add(1)
	}
	return out, nil
}
