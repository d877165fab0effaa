package fs

import (
	"context"

	"github.com/stripefs/stripefs/perm"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// Access answers access(2) for the caller of ctx (rpc.WithCred) on fid:
// its attributes, decided by package perm as the MDT decides every
// operation (without the nodemap's squashing, which the MDT applies when
// the operation itself comes).
func (c *Client) Access(ctx context.Context, fid proto.FID, mask uint32) error {
	a, err := c.Getattr(ctx, fid)
	if err != nil {
		return err
	}
	cred := rpc.CredOf(ctx)
	if cred == nil {
		cred = perm.Root
	}
	return perm.Access(a, cred, perm.Want(mask&7))
}
