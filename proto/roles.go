package proto

import "github.com/stripefs/stripefs/rpc"

// ServerMethods are what only servers call on each other: the update
// log of distributed transactions, FID reservations, stripe freezes,
// lock revocations for another MDT, the quota master's allowances and
// target registration with the MGS. A client's or an admin tool's key
// gets EPERM.
var ServerMethods = []uint16{MTxnApply, MTxnStatus, MTxnRedo, MTxnCancel, MTxnList, MTxnPull, MReserveFIDs,
	MStripeFreeze, MTxnApplyBatch, MLockRevoke, MQuotaLimits, MQuotaAcquire, GRegister, MNodemapPush}

// AdminMethods are the management tools' (lctl set_param, fsck, scrub,
// stats, nodemaps): an admin or server key may call them, a client's
// gets EPERM.
var AdminMethods = []uint16{MSetParam, MScanInodes, MScanDirents, MFsckFix, OList, OSetParam, rpc.MethodStats,
	MNodemapSet, MNodemapDel, MNodemapList}

// RequireRoles restricts s's server and admin methods to their roles.
func RequireRoles(s *rpc.Server) {
	s.Require(rpc.RoleServer, ServerMethods...)
	s.Require(rpc.RoleAdmin, AdminMethods...)
}
