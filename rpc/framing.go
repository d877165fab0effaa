package rpc

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"sync"
	"time"
)

// ErrBadMAC reports a frame whose MAC does not match (integrity flavour):
// it was changed on the way, or forged. The connection is closed.
var ErrBadMAC = errors.New("rpc: frame MAC mismatch")

// macSize is the HMAC-SHA256 tag that follows each frame under the
// integrity flavour. Frames are numbered per direction and the number is
// MACed with them, so that none can be replayed, dropped or reordered.
const macSize = sha256.Size

type frameMAC struct {
	h   hash.Hash
	seq uint64
	buf [macSize]byte
}

func newFrameMAC(key []byte) *frameMAC { return &frameMAC{h: hmac.New(sha256.New, key)} }

func (m *frameMAC) start(hb []byte) {
	m.h.Reset()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], m.seq)
	m.h.Write(n[:])
	m.h.Write(hb)
}

func (m *frameMAC) sum() []byte {
	m.seq++
	return m.h.Sum(m.buf[:0])
}

// frameWriter sends whole frames on one connection: the writes of several
// goroutines go out one frame at a time, each (integrity flavour)
// followed by its MAC.
type frameWriter struct {
	mu  sync.Mutex
	c   net.Conn
	mac *frameMAC
}

// write sends header, message and bulk with one writev and no copy of
// the bulk data. h's lengths are set from msg and bulk.
func (w *frameWriter) write(h Header, msg []byte, bulk [][]byte) error {
	n := 0
	for _, b := range bulk {
		n += len(b)
	}
	h.MsgLen, h.BulkLen = uint32(len(msg)), uint32(n)
	buf := make([]byte, HeaderSize, HeaderSize+len(msg))
	h.Encode(buf)
	buf = append(buf, msg...)
	bufs := make(net.Buffers, 0, 2+len(bulk))
	bufs = append(bufs, buf)
	for _, b := range bulk {
		if len(b) > 0 {
			bufs = append(bufs, b)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mac != nil {
		w.mac.start(buf[:HeaderSize])
		w.mac.h.Write(msg)
		for _, b := range bulk {
			w.mac.h.Write(b)
		}
		bufs = append(bufs, w.mac.sum())
	}
	_, err := bufs.WriteTo(w.c)
	return err
}

// frameReader reads frames from one connection. Once a frame's first
// byte has come, the rest must come within timeout (0: no bound), so a
// peer that starts a frame and stalls holds nothing for long.
type frameReader struct {
	r       *bufio.Reader
	c       net.Conn
	mac     *frameMAC
	timeout time.Duration
	hb      [HeaderSize]byte
	timed   bool
}

// header waits for the next frame and returns its validated header.
func (fr *frameReader) header() (Header, error) {
	if _, err := fr.r.Peek(1); err != nil {
		return Header{}, err
	}
	if fr.timeout > 0 {
		_ = fr.c.SetReadDeadline(time.Now().Add(fr.timeout))
		fr.timed = true
	}
	if _, err := io.ReadFull(fr.r, fr.hb[:]); err != nil {
		return Header{}, err
	}
	if fr.mac != nil {
		fr.mac.start(fr.hb[:])
	}
	return DecodeHeader(fr.hb[:])
}

// read fills p with the frame's next bytes.
func (fr *frameReader) read(p []byte) error {
	if _, err := io.ReadFull(fr.r, p); err != nil {
		return err
	}
	if fr.mac != nil {
		fr.mac.h.Write(p)
	}
	return nil
}

// discard skips the frame's next n bytes.
func (fr *frameReader) discard(n int) error {
	if fr.mac == nil {
		_, err := fr.r.Discard(n)
		return err
	}
	var scratch [16 << 10]byte
	for n > 0 {
		k := min(n, len(scratch))
		if err := fr.read(scratch[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// body reads a frame's n bytes into a pooled buffer (putBody) that grows
// as they arrive: a header's lengths alone, before the bytes come, never
// cost more than 64 KiB.
func (fr *frameReader) body(n int) ([]byte, error) {
	first := min(n, bodyClasses[1])
	b := getBody(first)
	if err := fr.read(b); err != nil {
		putBody(b)
		return nil, err
	}
	if first == n {
		return b, nil
	}
	all := getBody(n)
	copy(all, b)
	putBody(b)
	if err := fr.read(all[first:]); err != nil {
		putBody(all)
		return nil, err
	}
	return all, nil
}

// end finishes a frame: its MAC is read and checked, and the frame's
// deadline lifted.
func (fr *frameReader) end() error {
	if fr.mac != nil {
		var tag [macSize]byte
		if _, err := io.ReadFull(fr.r, tag[:]); err != nil {
			return err
		}
		if !hmac.Equal(tag[:], fr.mac.sum()) {
			return fmt.Errorf("%w (frame %d)", ErrBadMAC, fr.mac.seq-1)
		}
	}
	if fr.timed {
		_ = fr.c.SetReadDeadline(time.Time{})
		fr.timed = false
	}
	return nil
}
