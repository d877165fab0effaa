package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/stripefs/stripefs/wire"
)

// Callbacks: a server calls a client back over the client's own
// connection (Lustre's blocking and glimpse ASTs travel the same way), so
// a client behind NAT or a firewall, which accepts no connections, can
// still be asked to give up a lock. The frames are the ordinary ones with
// their roles swapped: the server sends a KindRequest on a connection it
// accepted, the client's read loop hands it to the handler registered
// with HandleCallback and answers with a KindReply, which the server's
// read loop routes to the waiting Callback. The two directions number
// their requests independently; a frame's kind says which way it goes.

// ErrNoConnection reports a callback to a client that has no connection
// to this server (it died, or is between reconnects).
var ErrNoConnection = errors.New("rpc: client has no connection")

// HandleCallback registers h for callbacks of method m from the server.
// Set handlers before the first call: the read loop does not lock them.
func (c *Client) HandleCallback(m uint16, h Handler) {
	if int(m) >= len(c.callbacks) {
		panic(fmt.Sprintf("rpc: callback method %d out of range", m))
	}
	c.callbacks[m] = h
}

// serveCallback reads a callback request's body and runs its handler in
// a goroutine of its own, so a slow handler (a flush) never stalls the
// replies the read loop must deliver meanwhile.
func (cc *clientConn) serveCallback(fr *frameReader, h Header, handlers *[256]Handler, name string) error {
	body := make([]byte, int(h.MsgLen)+int(h.BulkLen))
	if err := fr.read(body); err != nil {
		return err
	}
	if err := fr.end(); err != nil {
		return err
	}
	req := &Request{Method: h.Method, Msg: body[:h.MsgLen], Bulk: body[h.MsgLen:], XID: h.XID}
	hd := handlers[h.Method]
	go func() {
		var reply Reply
		var err error
		if hd == nil {
			err = fmt.Errorf("%s: no callback for method %d: %w", name, h.Method, syscall.ENOSYS)
		} else {
			reply, err = runCallback(hd, req, name)
		}
		if reply.Done != nil {
			defer reply.Done()
		}
		out, msg, bulk := replyFrame(Header{Kind: KindReply, Method: h.Method, ReqID: h.ReqID}, reply, err)
		if werr := cc.w.write(out, msg, bulk); werr != nil {
			cc.fail(fmt.Errorf("%w: %v", ErrDisconnected, werr))
		}
	}()
	return nil
}

func runCallback(h Handler, req *Request, name string) (reply Reply, err error) {
	defer func() {
		if p := recover(); p != nil {
			slog.Error(fmt.Sprintf("rpc: panic in callback method %d: %v\n%s", req.Method, p, debug.Stack()),
				"client", name, "method", req.Method, "xid", req.XID)
			reply, err = Reply{}, fmt.Errorf("callback: internal error: %w", syscall.EIO)
		}
	}()
	return h(context.Background(), req)
}

// replyFrame is the header, message and bulk answering a request with a
// handler's reply or error.
func replyFrame(out Header, reply Reply, err error) (Header, []byte, [][]byte) {
	var msg []byte
	var bulk [][]byte
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) && errno != 0 {
			out.Status = int32(errno)
		} else {
			out.Status = StatusError
			msg = wire.Marshal(nil, &wireError{Text: err.Error()})
		}
	} else {
		switch m := reply.Msg.(type) {
		case nil:
		case RawMsg:
			msg = m
		default:
			msg = wire.Marshal(nil, reply.Msg)
		}
		bulk = reply.Bulk
	}
	n := 0
	for _, b := range bulk {
		n += len(b)
	}
	out.BulkLen = uint32(n)
	out.MsgLen = uint32(len(msg))
	return out, msg, bulk
}

// pendingCallback is a callback waiting for its reply.
type pendingCallback struct {
	resp    any
	onReply func(error)
	done    chan struct{}
	err     error
}

// Callback calls client (a UUID from a hello) back over its newest
// connection and decodes the reply into resp. It fails with
// ErrNoConnection when the client has none, and with ErrDisconnected when
// the connection closes before the reply; ctx bounds the wait.
func (s *Server) Callback(ctx context.Context, client string, method uint16, req, resp any) error {
	return s.CallbackAnd(ctx, client, method, req, resp, nil)
}

// CallbackAnd is Callback that runs onReply, when the reply comes, on the
// connection's reader before it reads anything the client sent after the
// reply: what the reply says is in effect for every later request of the
// client (a lock's cancel and the size it reported, before the client's
// next stat).
func (s *Server) CallbackAnd(ctx context.Context, client string, method uint16, req, resp any, onReply func(error)) error {
	s.mu.Lock()
	sc := s.byClient[client]
	s.mu.Unlock()
	if sc == nil {
		return fmt.Errorf("%s: callback to %s: %w", s.Name, client, ErrNoConnection)
	}
	msg := wire.Marshal(nil, req)
	if len(msg) > MaxMsg {
		return fmt.Errorf("rpc: callback too large (%d bytes)", len(msg))
	}
	pc := &pendingCallback{resp: resp, onReply: onReply, done: make(chan struct{})}
	sc.cbMu.Lock()
	if sc.cbDead {
		sc.cbMu.Unlock()
		return fmt.Errorf("%s: callback to %s: %w", s.Name, client, ErrDisconnected)
	}
	sc.cbNext++
	id := sc.cbNext
	sc.cbPending[id] = pc
	sc.cbMu.Unlock()
	h := Header{Kind: KindRequest, Method: method, ReqID: id}
	if dl, ok := ctx.Deadline(); ok {
		h.TimeoutMs = uint32(min(max(time.Until(dl).Milliseconds(), 1), 1<<31))
	}
	if err := sc.write(h, msg, nil); err != nil {
		sc.failCallbacks(fmt.Errorf("%w: %v", ErrDisconnected, err))
	}
	select {
	case <-pc.done:
		return pc.err
	case <-ctx.Done():
		sc.cbMu.Lock()
		delete(sc.cbPending, id)
		sc.cbMu.Unlock()
		return fmt.Errorf("%s: callback to %s: %w", s.Name, client, ctx.Err())
	}
}

// readCallbackReply consumes a reply to one of our callbacks.
func (sc *serverConn) readCallbackReply(fr *frameReader, h Header) error {
	msg := make([]byte, h.MsgLen)
	if err := fr.read(msg); err != nil {
		return err
	}
	if err := fr.discard(int(h.BulkLen)); err != nil {
		return err
	}
	if err := fr.end(); err != nil {
		return err
	}
	sc.cbMu.Lock()
	pc := sc.cbPending[h.ReqID]
	delete(sc.cbPending, h.ReqID)
	sc.cbMu.Unlock()
	if pc == nil {
		return nil // its caller gave up
	}
	pc.err = replyErr(h, msg, pc.resp)
	if pc.onReply != nil {
		pc.onReply(pc.err)
	}
	close(pc.done)
	return nil
}

// failCallbacks ends every callback waiting on sc (its connection died).
func (sc *serverConn) failCallbacks(err error) {
	sc.cbMu.Lock()
	sc.cbDead = true
	pending := sc.cbPending
	sc.cbPending = map[uint64]*pendingCallback{}
	sc.cbMu.Unlock()
	for _, pc := range pending {
		pc.err = err
		close(pc.done)
	}
}
