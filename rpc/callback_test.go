package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

const mCallback uint16 = 9

// waitConn waits until the server knows a connection of client uuid.
func waitConn(t *testing.T, s *Server, uuid string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.mu.Lock()
		ok := s.byClient[uuid] != nil
		s.mu.Unlock()
		if ok {
			return
		}
	}
	t.Fatal("the server never saw the client's connection")
}

// A server calls a client back over the connection the client made, many
// at once and while the client's own calls share that connection; errnos
// and panics of a callback handler reach the server as they would a
// client.
func TestCallback(t *testing.T) {
	for _, tr := range []struct{ name, addr string }{{"tcp", "127.0.0.1:0"}, {"inproc", "inproc:callback"}} {
		t.Run(tr.name, func(t *testing.T) {
			s, addr := newServer(t, tr.addr)
			c := NewClient(addr, "t")
			defer c.Close()
			c.HandleCallback(mCallback, func(ctx context.Context, r *Request) (Reply, error) {
				var req echoReq
				if err := r.Decode(&req); err != nil {
					return Reply{}, err
				}
				switch req.Text {
				case "fail":
					return Reply{}, fmt.Errorf("busy: %w", syscall.EBUSY)
				case "panic":
					panic("callback boom")
				case "slow":
					time.Sleep(300 * time.Millisecond)
				}
				return Reply{Msg: &echoResp{N: req.N * 2, Text: req.Text}}, nil
			})
			// The connection exists once the client has called.
			if err := c.Do(context.Background(), &Call{Method: mEcho, Req: &echoReq{N: 1}, Resp: &echoResp{}}); err != nil {
				t.Fatal(err)
			}
			waitConn(t, s, c.UUID)
			var wg sync.WaitGroup
			errs := make(chan error, 100)
			for i := range 50 {
				wg.Add(2)
				go func() {
					defer wg.Done()
					var resp echoResp
					if err := s.Callback(context.Background(), c.UUID, mCallback, &echoReq{N: int64(i)}, &resp); err != nil {
						errs <- err
					} else if resp.N != int64(2*i) {
						errs <- fmt.Errorf("callback %d answered %d", i, resp.N)
					}
				}()
				go func() {
					defer wg.Done()
					var resp echoResp
					if err := c.Do(context.Background(), &Call{Method: mEcho, Req: &echoReq{N: int64(i)}, Resp: &resp}); err != nil || resp.N != int64(i) {
						errs <- fmt.Errorf("call %d: %v %d", i, err, resp.N)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if err := s.Callback(context.Background(), c.UUID, mCallback, &echoReq{Text: "fail"}, nil); !errors.Is(err, syscall.EBUSY) {
				t.Errorf("failing callback: %v", err)
			}
			if err := s.Callback(context.Background(), c.UUID, mCallback, &echoReq{Text: "panic"}, nil); !errors.Is(err, syscall.EIO) {
				t.Errorf("panicking callback: %v", err)
			}
			if err := s.Callback(context.Background(), c.UUID, mCallback+1, &echoReq{}, nil); !errors.Is(err, syscall.ENOSYS) {
				t.Errorf("callback without a handler: %v", err)
			}
			// A deadline bounds the wait for a slow client.
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			err := s.Callback(ctx, c.UUID, mCallback, &echoReq{Text: "slow"}, nil)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("slow callback past its deadline: %v", err)
			}
			// The connection still serves both ways after that.
			var resp echoResp
			if err := s.Callback(context.Background(), c.UUID, mCallback, &echoReq{N: 21}, &resp); err != nil || resp.N != 42 {
				t.Errorf("callback after a timed-out one: %v %d", err, resp.N)
			}
		})
	}
}

// A callback to a client without a connection fails at once, and one in
// flight when the connection dies fails then, not at its deadline.
func TestCallbackLostClient(t *testing.T) {
	s, addr := newServer(t, "127.0.0.1:0")
	if err := s.Callback(context.Background(), "nobody", mCallback, &echoReq{}, nil); !errors.Is(err, ErrNoConnection) {
		t.Fatalf("callback to an unknown client: %v", err)
	}
	c := NewClient(addr, "t")
	entered := make(chan struct{})
	c.HandleCallback(mCallback, func(ctx context.Context, r *Request) (Reply, error) {
		close(entered)
		select {} // never answers
	})
	if err := c.Do(context.Background(), &Call{Method: mEcho, Req: &echoReq{}, Resp: &echoResp{}}); err != nil {
		t.Fatal(err)
	}
	waitConn(t, s, c.UUID)
	done := make(chan error, 1)
	go func() { done <- s.Callback(context.Background(), c.UUID, mCallback, &echoReq{}, nil) }()
	<-entered
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrDisconnected) {
			t.Errorf("callback cut by a closed connection: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a callback outlived its connection")
	}
	if err := s.Callback(context.Background(), c.UUID, mCallback, &echoReq{}, nil); !errors.Is(err, ErrNoConnection) {
		t.Errorf("callback after the client left: %v", err)
	}
}

// A peer that sends a reply frame nobody asked for is ignored, and a
// request-kind frame is still a request.
func TestCallbackUnaskedReply(t *testing.T) {
	_, addr := newServer(t, "127.0.0.1:0")
	c := NewClient(addr, "t")
	defer c.Close()
	cc, err := c.connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := cc.w.write(Header{Kind: KindReply, ReqID: 777}, nil, nil); err != nil {
		t.Fatal(err)
	}
	var resp echoResp
	if err := c.do(context.Background(), cc, &Call{Method: mEcho, Req: &echoReq{N: 5}, Resp: &resp}); err != nil || resp.N != 5 {
		t.Fatalf("call after a stray reply frame: %v %d", err, resp.N)
	}
}
