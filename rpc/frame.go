// Package rpc is the stripefs wire: length-framed messages with a request id,
// many calls in flight on one connection, bulk data carried after the message
// without extra copies, deadlines, reconnect and a version handshake.
//
// A frame is a fixed 32-byte header, a message (wire-encoded struct) and an
// optional bulk payload (file data). Every length in a header is checked
// against the limits below before a byte is allocated for it.
package rpc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

const (
	// Magic opens every frame; a peer that does not speak stripefs is
	// dropped at its first frame.
	Magic uint32 = 0x53465331 // "SFS1"
	// Version is the protocol version exchanged at connect. Bump it when a
	// message layout changes.
	Version uint32 = 20 // 20: a close may turn the write lock it names into a read lock (CloseReq.Downgrade, CloseReply.Downgraded); 19: a close may carry a Data-on-MDT write (CloseReq.Write, CloseReply.Write); 18: read-only opens may ask for a small Data-on-MDT file's data with the reply (OpenReq.ReadData, AttrReply.Bytes); 17: Data-on-MDT writes that set the size reply with the attributes and blocks they left; 16: the update-log records MDTs exchange (and the inodes in them) are protocol buffers, package recordpb; 15: Data-on-MDT (layouts name an MDT, which serves the data methods; attribute replies carry its blocks); 14: layouts carry components (PFL), layout_intent, ost_write of several extents; 13: attributes carry the access ACL, create and mkdir the umask, create replies the owner and a write lock, closes give locks back, ost_copy; 12: statfs replies carry the target's flags and its filesystem's id; 11: pings, writes through that leave grants alone, OWriteReply.OverQuota; 10: authenticated hello (keys, roles, flavours), credentials in requests; 9: servers call clients back on their connections (callbacks), lock service; 8: create, mkdir, symlink and unlink replies carry the parent's attributes; 7: distributed records carry the client request (client_done), FlagResent; 6: fsck repairs carry what the scan saw

	HeaderSize = 56
	// MaxMsg bounds the message part of a frame.
	MaxMsg = 8 << 20
	// MaxBulk bounds the bulk part of a frame (one RPC's file data).
	MaxBulk = 64 << 20
)

// Frame kinds.
const (
	KindHello   uint8 = 1
	KindRequest uint8 = 2
	KindReply   uint8 = 3
	// KindAuth carries the handshake's proofs, after the hellos (auth.go).
	KindAuth uint8 = 4
)

// Request flags (Header.Flags).
const (
	// FlagKept marks a change the client keeps until the server commits
	// it and replays if the server restarts first. A server remembers the
	// clients that send it (Lustre's last_rcvd), so that after a restart it
	// knows whom to wait for.
	FlagKept uint8 = 1 << 0
	// FlagReplay marks a change an earlier start of the server answered,
	// sent again after a restart; the header's Transno is the transno that
	// start gave it, by which replays of all clients are ordered, and the
	// bulk carries that start's reply message (FirstReply), so that the
	// change can be made again as it was: a create gets the FID the client
	// already uses. Only changes without bulk of their own are kept.
	FlagReplay uint8 = 1 << 1
	// FlagResent marks a request sent before under the same XID (its
	// connection broke before the reply came, or it is a replay): only
	// such a request may already have been done, so a server looks for
	// it among the requests it did (Lustre's MSG_RESENT) for these alone.
	FlagResent uint8 = 1 << 2
	// FlagCred marks a request whose message starts with the credential
	// it acts under (credFrame): the user's ids, as ONC RPC's AUTH_UNIX
	// carries them in its header.
	FlagCred uint8 = 1 << 3
)

// Reply status values other than 0 (success) and positive errnos.
const (
	StatusError int32 = -1 // message is an error string
)

// Header is the fixed part of a frame.
type Header struct {
	Kind      uint8
	Flags     uint8
	Method    uint16
	ReqID     uint64
	Status    int32  // replies: 0, an errno, or StatusError
	MsgLen    uint32 // bytes of wire-encoded message that follow
	BulkLen   uint32 // bytes of bulk data after the message
	TimeoutMs uint32 // requests: the caller's remaining deadline, 0 = none
	// XID identifies a request across resends: the same client sends the
	// same XID again when a connection broke before the reply came, so a
	// server can tell a resend from a new request (Lustre's xid).
	XID uint64
	// Transno (replies) is the transaction number the server gave the
	// change the request made, 0 when it changed nothing; on a request
	// with FlagReplay, the transno it had before the restart. Committed is the
	// highest transno the server has made durable. A client keeps a change
	// until it is committed and replays it if the server restarts first.
	Transno   uint64
	Committed uint64
}

// ErrBadFrame reports a header that breaks the protocol.
var ErrBadFrame = errors.New("rpc: bad frame")

// Encode writes h into b, which must be at least HeaderSize long.
func (h *Header) Encode(b []byte) {
	_ = b[HeaderSize-1]
	binary.LittleEndian.PutUint32(b[0:], Magic)
	b[4] = h.Kind
	b[5] = h.Flags
	binary.LittleEndian.PutUint16(b[6:], h.Method)
	binary.LittleEndian.PutUint64(b[8:], h.ReqID)
	binary.LittleEndian.PutUint32(b[16:], uint32(h.Status))
	binary.LittleEndian.PutUint32(b[20:], h.MsgLen)
	binary.LittleEndian.PutUint32(b[24:], h.BulkLen)
	binary.LittleEndian.PutUint32(b[28:], h.TimeoutMs)
	binary.LittleEndian.PutUint64(b[32:], h.XID)
	binary.LittleEndian.PutUint64(b[40:], h.Transno)
	binary.LittleEndian.PutUint64(b[48:], h.Committed)
}

// DecodeHeader parses and validates a header.
func DecodeHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: %d-byte header", ErrBadFrame, len(b))
	}
	if m := binary.LittleEndian.Uint32(b[0:]); m != Magic {
		return h, fmt.Errorf("%w: magic %#x", ErrBadFrame, m)
	}
	h.Kind = b[4]
	h.Flags = b[5]
	h.Method = binary.LittleEndian.Uint16(b[6:])
	h.ReqID = binary.LittleEndian.Uint64(b[8:])
	h.Status = int32(binary.LittleEndian.Uint32(b[16:]))
	h.MsgLen = binary.LittleEndian.Uint32(b[20:])
	h.BulkLen = binary.LittleEndian.Uint32(b[24:])
	h.TimeoutMs = binary.LittleEndian.Uint32(b[28:])
	h.XID = binary.LittleEndian.Uint64(b[32:])
	h.Transno = binary.LittleEndian.Uint64(b[40:])
	h.Committed = binary.LittleEndian.Uint64(b[48:])
	if h.Kind < KindHello || h.Kind > KindAuth {
		return h, fmt.Errorf("%w: kind %d", ErrBadFrame, h.Kind)
	}
	if h.MsgLen > MaxMsg {
		return h, fmt.Errorf("%w: message length %d over %d", ErrBadFrame, h.MsgLen, MaxMsg)
	}
	if h.BulkLen > MaxBulk {
		return h, fmt.Errorf("%w: bulk length %d over %d", ErrBadFrame, h.BulkLen, MaxBulk)
	}
	return h, nil
}

// hello is the first frame each way: versions must match exactly. UUID
// names the client instance, stable across its reconnects. The rest is
// the authentication's first half (auth.go).
type hello struct {
	Version uint32
	Name    string
	UUID    string
	// Boot (server's hello) changes at every server start: a client that
	// sees it change replays what the server had not committed.
	Boot string
	// FSName, Role and Group (client's hello) say which key the client
	// will prove it holds.
	FSName string
	Role   Role
	Group  string
	// Flavor: the lowest the client accepts, and in the server's hello
	// the one the connection uses.
	Flavor Flavor
	Nonce  []byte
	// DH is an ephemeral X25519 public key: the integrity flavour's keys
	// come from the exchange, so that another holder of the same client
	// key who saw the handshake cannot forge frames.
	DH []byte
}
