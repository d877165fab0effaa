package rpc

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/stripefs/stripefs/wire"
)

// Cred is the user a request acts for: ids as the client's kernel gave
// them, carried by the rpc layer for every method the way ONC RPC's
// AUTH_UNIX carries them, so that each server checks permissions (and
// squashes ids) in one place rather than per message type.
type Cred struct {
	Uid, Gid uint32
	Groups   []uint32 // supplementary groups
}

// MaxGroups bounds a credential's supplementary groups (NGROUPS_MAX of
// Linux is 65536; NFS's AUTH_UNIX carries 16).
const MaxGroups = 1024

// InGroup reports whether gid is the credential's group or one of its
// supplementary ones.
func (c *Cred) InGroup(gid uint32) bool {
	if c.Gid == gid {
		return true
	}
	for _, g := range c.Groups {
		if g == gid {
			return true
		}
	}
	return false
}

func (c *Cred) String() string {
	if c == nil {
		return "(no credential)"
	}
	return fmt.Sprintf("uid %d gid %d groups %v", c.Uid, c.Gid, c.Groups)
}

type credKey struct{}

// WithCred returns ctx whose calls (Client.Do) act for c.
func WithCred(ctx context.Context, c *Cred) context.Context {
	return context.WithValue(ctx, credKey{}, c)
}

// CredOf returns the credential calls under ctx act for, nil if none.
func CredOf(ctx context.Context) *Cred {
	c, _ := ctx.Value(credKey{}).(*Cred)
	return c
}

// putCred prefixes msg with c: a 4-byte length and c's encoding.
func putCred(c *Cred, msg []byte) []byte {
	enc := wire.Marshal(nil, c)
	out := make([]byte, 4, 4+len(enc)+len(msg))
	binary.LittleEndian.PutUint32(out, uint32(len(enc)))
	return append(append(out, enc...), msg...)
}

// takeCred splits a FlagCred request message into its credential and
// the message proper.
func takeCred(msg []byte) (*Cred, []byte, error) {
	if len(msg) < 4 {
		return nil, nil, fmt.Errorf("%w: credential cut short", ErrBadFrame)
	}
	n := binary.LittleEndian.Uint32(msg)
	if uint64(n) > uint64(len(msg)-4) {
		return nil, nil, fmt.Errorf("%w: credential of %d bytes in a %d-byte message", ErrBadFrame, n, len(msg))
	}
	c := &Cred{}
	if err := wire.Unmarshal(msg[4:4+n], c); err != nil {
		return nil, nil, fmt.Errorf("%w: credential: %v", ErrBadFrame, err)
	}
	if len(c.Groups) > MaxGroups {
		return nil, nil, fmt.Errorf("%w: credential with %d groups", ErrBadFrame, len(c.Groups))
	}
	return c, msg[4+n:], nil
}
