package proto

// The lock service (package ldlm decides, mds/lockd serves): clients
// cache metadata and data only under locks the MDT of the inode grants,
// and give them up when the MDT calls them back.

// Lock methods, continuing the MDT's numbers.
const (
	MLockEnqueue uint16 = MTxnApplyBatch + 1 + iota // a data lock, waiting until granted
	MLockCancel                                     // give locks back, with what a writer's locks leave (LVB)
	MLockReplay                                     // after an MDT restart: the locks a client held
	MLockRevoke                                     // between MDTs: call other clients' metadata locks back before a change
)

// Callback methods: the MDT calling a client back on its connection
// (rpc.Server.Callback). They have a table of their own on the client.
const (
	// CBBlocking asks a holder to give a lock up: it flushes and drops
	// what the lock covers, then answers with its LVB; the answer is the
	// cancel.
	CBBlocking uint16 = 1
	// CBGlimpse asks a writer for the size and mtime its cache holds,
	// without taking its lock (Lustre's glimpse AST).
	CBGlimpse uint16 = 2
)

func init() {
	for m, n := range map[uint16]string{MLockEnqueue: "lock_enqueue", MLockCancel: "lock_cancel", MLockReplay: "lock_replay", MLockRevoke: "lock_revoke"} {
		methodNames[m] = n
	}
}

// Lock kinds, modes and bits, as package ldlm numbers them.
const (
	LockBits   uint8 = 1
	LockExtent uint8 = 2

	LockPR uint8 = 1
	LockPW uint8 = 2

	LockLookup uint8 = 1
	LockUpdate uint8 = 2
	LockLayout uint8 = 4
)

// LockEOF ends an extent that reaches to the end of the file.
const LockEOF = ^uint64(0)

// LockDesc is a lock as client and server name it.
type LockDesc struct {
	ID    uint64 // the server's handle (0 in a request)
	Res   FID
	Kind  uint8
	Mode  uint8
	Bits  uint8
	Start uint64 // extents: [Start, End)
	End   uint64
}

// LockEnqueueReq asks for a data lock. Cookie is the client's own name
// for the request, the same on a resend: the server answers a resent
// request with the lock it already granted for it.
type LockEnqueueReq struct {
	Lock   LockDesc
	Align  uint64 // keep a widened grant's ends on multiples of this (EC rows)
	Cookie uint64
}

// LockEnqueueReply is the granted lock, widened, and the file's
// attributes as of the grant: its size includes what every writer whose
// lock was called back for this one reported.
type LockEnqueueReply struct {
	Lock LockDesc
	Attr Attr
}

// LVB (Lustre's lock value block) is what a data lock's holder knows of
// the file's size and mtime: its writes, flushed before it answers.
type LVB struct {
	Valid bool
	Size  uint64
	Mtime int64
}

// LockCancelReq gives locks back; LVBs, if given, pair with IDs.
type LockCancelReq struct {
	Res  []FID
	IDs  []uint64
	LVBs []LVB
}

// BlockingReq asks the holder of lock ID on Res to cancel it.
type BlockingReq struct {
	ID  uint64
	Res FID
}

// BlockingReply is the cancel: the lock is given up, its LVB attached.
type BlockingReply struct {
	LVB LVB
}

// GlimpseReq asks the holder of write lock ID on Res for its LVB.
type GlimpseReq struct {
	ID  uint64
	Res FID
}

type GlimpseReply struct {
	LVB LVB
}

// LockReplayReq puts a client's locks back after the MDT restarted;
// the reply says, lock by lock, which the MDT took (it refuses those that
// conflict with locks granted since, and all once its recovery window is
// over).
type LockReplayReq struct {
	Locks []LockDesc
}

type LockReplayReply struct {
	OK []bool
}

// LockRevokeReq asks another MDT to call back, before a change made for
// Client, the metadata locks other clients hold on FID.
type LockRevokeReq struct {
	FID    FID
	Bits   uint8
	Client string
}

// WantLocks returns the metadata locks a request asks for with its reply.
func (r CreateReq) WantLocks() uint8  { return r.Want }
func (r MkdirReq) WantLocks() uint8   { return r.Want }
func (r SymlinkReq) WantLocks() uint8 { return r.Want }
func (r LinkReq) WantLocks() uint8    { return r.Want }

// LockGrant is a metadata lock granted with a reply (Lustre's intent
// locks): the asker may cache what Bits cover until it is called back.
type LockGrant struct {
	ID   uint64
	Bits uint8
}

// Application locks (fcntl, OFD and flock), granted by the MDT of the
// file (package ldlm's Flocks).
const (
	MFlock       uint16 = MLockRevoke + 1 + iota // set, test, unlock or release an owner's, or cancel a wait
	MFlockReplay                                 // after an MDT restart: the application locks a client held
)

// CBPing asks a client whether it is there (it answers at once).
const CBPing uint16 = 3

func init() {
	methodNames[MFlock] = "flock"
	methodNames[MFlockReplay] = "flock_replay"
}

// FlockReq operations.
const (
	FlockSet     uint8 = 1 // take a lock (Wait: until granted)
	FlockTest    uint8 = 2 // F_GETLK: the first lock in the way
	FlockUnlock  uint8 = 3 // give up [Start, End)
	FlockRelease uint8 = 4 // give up every lock of Owner on the file (a close)
	FlockCancel  uint8 = 5 // an interrupted wait: withdraw the Set sent with Cookie
)

// Application lock kinds and types.
const (
	FlockPOSIX uint8 = 1
	FlockBSD   uint8 = 2

	FlockRead  uint8 = 1
	FlockWrite uint8 = 2
)

// FlockReq is one application lock operation. Owner is the lock owner
// the kernel gave (with the client, it names who holds the lock).
type FlockReq struct {
	Op     uint8
	Res    FID
	Kind   uint8
	Type   uint8
	Owner  uint64
	Start  uint64 // [Start, End)
	End    uint64
	Pid    uint32
	Wait   bool
	Cookie uint64 // names a Set, for its FlockCancel
}

// FlockReply answers FlockTest with the lock in the way (Type 0: none);
// Mine says its holder is the asking client (its Pid then means
// something there).
type FlockReply struct {
	Type       uint8
	Start, End uint64
	Pid        uint32
	Mine       bool
}

// FlockReplayReq puts a client's application locks back.
type FlockReplayReq struct {
	Locks []FlockReq
}
