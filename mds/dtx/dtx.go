// Package dtx decides distributed namespace transactions between MDTs.
// It is pure, in the manner of etcd's raft: it says what each participant
// must do and when a record may go; reading and writing Pebble and
// sending RPCs are the caller's.
//
// A cross-MDT operation (a directory created on another MDT than its
// parent's, or removed from there) has a coordinator (the parent's MDT)
// and participants. Every participant writes the description of the
// WHOLE operation (its record) in the same Pebble batch as its own part,
// without waiting for a disk sync. A participant "has applied" an
// operation when it holds the record, or when it has already cancelled it.
// Recovery then needs no vote: if any participant applied the operation,
// the ones that did not (they crashed before their batch reached the disk)
// apply their part from the record: roll forward. If none did, the
// operation never happened.
//
// Records are cancelled only once every part is durable, by the
// coordinator, in operation order; each participant remembers the highest
// cancelled sequence per coordinator epoch, so "cancelled" and "never had
// it" stay distinguishable after the record is gone.
package dtx

import (
	"encoding/binary"
	"fmt"
	"iter"
	"slices"

	"github.com/stripefs/stripefs/proto"
)

// OpID names an operation: its coordinator, the coordinator's boot epoch
// (so sequence numbers lost in a crash are never reused) and a sequence.
type OpID struct {
	Coord uint32
	Epoch uint32
	Seq   uint64
}

func (id OpID) String() string { return fmt.Sprintf("mdt%d:%d:%d", id.Coord, id.Epoch, id.Seq) }

// Less orders operations of one coordinator.
func (id OpID) Less(o OpID) bool {
	if id.Coord != o.Coord {
		return id.Coord < o.Coord
	}
	if id.Epoch != o.Epoch {
		return id.Epoch < o.Epoch
	}
	return id.Seq < o.Seq
}

// Kinds of primitive update. Each is applied exactly once per participant
// (guarded by the record), so they need not be idempotent.
const (
	CreateInode  = "create_inode"  // Inode holds the whole new inode
	DeleteInode  = "delete_inode"  // FID
	InsertDirent = "insert_dirent" // Parent, Name → FID, Mode
	DeleteDirent = "delete_dirent" // Parent, Name (naming FID)
	// ParentLink: Parent's Nlink += Delta, mtime/ctime = Time. With FID
	// set it belongs to the entry update of (Parent, Name, FID) in the
	// same part, and a redo that skips that entry update skips it too;
	// without (records of mkdir/rmdir), to any entry update of Parent.
	ParentLink = "parent_link"
	// InodeLink: FID's Nlink += Delta, ctime = Time. A file whose last
	// link goes is removed, or kept as an orphan while it is open (the
	// local unlink's rule). It is how a name on one MDT counts on an
	// inode on another (Lustre DNE's remote entries).
	InodeLink = "inode_link"
	// SetParent: directory FID's parent pointer ("..") = Parent, ctime =
	// Time; a directory moved between MDTs keeps its ".." right.
	SetParent = "set_parent"
	// SetXattr stores an extended attribute of FID: Name → Inode (the
	// bytes, opaque to dtx). A striped directory's layout travels so, in
	// the same part as the inode it describes.
	SetXattr = "set_xattr"
	// ClientDone: the client request that started the operation (client
	// UUID in Name, XID in Inode, see Done) is done, on the coordinator,
	// which the client talks to. A coordinator that lost its part in a
	// crash and redoes it from a peer's log must also answer the
	// client's resend of that request as done, not do it again.
	ClientDone = "client_done"
)

// Done is the ClientDone update of a coordinator's record for the request
// xid of client, done at t.
func Done(coord uint32, client string, xid uint64, t int64) Update {
	return Update{Kind: ClientDone, MDT: coord, Name: client, Inode: binary.BigEndian.AppendUint64(nil, xid), Time: t}
}

// DoneXID is the XID of a ClientDone update.
func DoneXID(u Update) (uint64, bool) {
	if u.Kind != ClientDone || len(u.Inode) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(u.Inode), true
}

// Update is one primitive change on one MDT.
type Update struct {
	Kind   string
	MDT    uint32
	FID    proto.FID
	Parent proto.FID
	Name   string
	Mode   uint32
	Delta  int32
	Time   int64
	// Inode is the encoded inode of CreateInode, or the value of
	// SetXattr, opaque to dtx.
	Inode []byte
}

// Record describes a whole operation: every participant's updates.
type Record struct {
	ID      OpID
	Op      string // "mkdir", "rmdir", "mkdir_striped", "rmdir_striped": for logs and fsck
	Started int64  // unix nanoseconds, when the coordinator began it
	Updates []Update
}

// Participants lists the MDTs that take part, coordinator last: remote
// parts are applied first, so a precondition that fails there (a directory
// that is not empty) aborts before anything changed where the name lives.
func (r *Record) Participants() []uint32 {
	var out []uint32
	for _, u := range r.Updates {
		if !slices.Contains(out, u.MDT) {
			out = append(out, u.MDT)
		}
	}
	slices.SortFunc(out, func(a, b uint32) int {
		switch {
		case a == r.ID.Coord:
			return 1
		case b == r.ID.Coord:
			return -1
		}
		return int(a) - int(b)
	})
	return out
}

// Part yields the updates of one participant, in order. It allocates
// nothing: an MDT walks its part several times for every record.
func (r *Record) Part(mdt uint32) iter.Seq[Update] {
	return func(yield func(Update) bool) {
		for _, u := range r.Updates {
			if u.MDT == mdt && !yield(u) {
				return
			}
		}
	}
}

// Validate rejects records no coordinator would write.
func (r *Record) Validate() error {
	if len(r.Updates) == 0 {
		return fmt.Errorf("dtx: %s: no updates", r.ID)
	}
	for _, u := range r.Updates {
		switch u.Kind {
		case CreateInode, DeleteInode, InsertDirent, DeleteDirent, ParentLink, InodeLink, SetParent, SetXattr:
		case ClientDone:
			if _, ok := DoneXID(u); !ok || u.MDT != r.ID.Coord {
				return fmt.Errorf("dtx: %s: bad client_done update", r.ID)
			}
		default:
			return fmt.Errorf("dtx: %s: unknown update %q", r.ID, u.Kind)
		}
	}
	if !slices.ContainsFunc(r.Updates, func(u Update) bool { return u.MDT == r.ID.Coord }) {
		return fmt.Errorf("dtx: %s: the coordinator has no part", r.ID)
	}
	return nil
}

// Applied reports whether a participant applied an operation, from what
// it holds: the record itself, or a cancel watermark at or past it.
func Applied(hasRecord bool, cancelledUpTo uint64, id OpID) bool {
	return hasRecord || id.Seq <= cancelledUpTo
}

// Recovery is what to do about one record once every participant has said
// whether it applied the operation.
type Recovery struct {
	// Redo lists the participants that must apply their part now.
	Redo []uint32
}

// Recover decides roll-forward. applied has an entry for every
// participant; at least one applied (someone holds the record).
func Recover(r *Record, applied map[uint32]bool) Recovery {
	var rec Recovery
	any := false
	for _, p := range r.Participants() {
		any = any || applied[p]
	}
	if !any {
		return rec
	}
	for _, p := range r.Participants() {
		if !applied[p] {
			rec.Redo = append(rec.Redo, p)
		}
	}
	return rec
}

// CanCancel reports whether a record may be cancelled: every part is
// durable on its MDT.
func CanCancel(r *Record, durable map[uint32]bool) bool {
	for _, p := range r.Participants() {
		if !durable[p] {
			return false
		}
	}
	return true
}

// The builders below turn what a coordinator found into a record's
// updates: which MDT does what is decided here, without I/O, so it is
// table-tested; the MDT only looks things up and applies.

const (
	modeType = 0o170000
	modeDir  = 0o040000
)

func mdtOf(f proto.FID) uint32 { return uint32(f.MDT()) }

// entryUpdate removes or inserts the entry (parent, name) → fid with the
// matching link-count change of parent (a subdirectory counts; a file
// only touches its times).
func entryUpdate(kind string, parent proto.FID, name string, fid proto.FID, mode uint32, t int64) []Update {
	delta := int32(0)
	if mode&modeType == modeDir {
		delta = 1
		if kind == DeleteDirent {
			delta = -1
		}
	}
	return []Update{
		{Kind: kind, MDT: mdtOf(parent), Parent: parent, Name: name, FID: fid, Mode: mode & modeType},
		{Kind: ParentLink, MDT: mdtOf(parent), Parent: parent, Name: name, FID: fid, Delta: delta, Time: t},
	}
}

// RenamePlan is what the coordinator of a rename found: the entry that
// moves (Src, of type SrcMode) and, if the destination name exists, the
// entry it replaces (Dst, DstMode). Types are S_IF* bits.
type RenamePlan struct {
	SrcParent, DstParent proto.FID
	SrcName, DstName     string
	Src                  proto.FID
	SrcMode              uint32
	Dst                  proto.FID // zero: the destination name is free
	DstMode              uint32
	Time                 int64
}

// Rename lists the updates of a rename whose parts may live on several
// MDTs: the source entry goes, a replaced entry goes and its inode loses
// a link (an empty directory goes whole), the new entry comes, and a
// moved directory's ".." follows it. A moved file only gets a new ctime.
func Rename(p RenamePlan) []Update {
	var out []Update
	out = append(out, entryUpdate(DeleteDirent, p.SrcParent, p.SrcName, p.Src, p.SrcMode, p.Time)...)
	if !p.Dst.IsZero() {
		out = append(out, entryUpdate(DeleteDirent, p.DstParent, p.DstName, p.Dst, p.DstMode, p.Time)...)
	}
	out = append(out, entryUpdate(InsertDirent, p.DstParent, p.DstName, p.Src, p.SrcMode, p.Time)...)
	if p.SrcMode&modeType == modeDir {
		out = append(out, Update{Kind: SetParent, MDT: mdtOf(p.Src), FID: p.Src, Parent: p.DstParent, Time: p.Time})
	} else {
		out = append(out, Update{Kind: InodeLink, MDT: mdtOf(p.Src), FID: p.Src, Delta: 0, Time: p.Time})
	}
	if !p.Dst.IsZero() {
		if p.DstMode&modeType == modeDir {
			out = append(out, Update{Kind: DeleteInode, MDT: mdtOf(p.Dst), FID: p.Dst})
		} else {
			out = append(out, Update{Kind: InodeLink, MDT: mdtOf(p.Dst), FID: p.Dst, Delta: -1, Time: p.Time})
		}
	}
	return out
}

// Link lists the updates of a hard link named in parent (one MDT) to an
// inode on another: the entry here, one more link there. mode may be 0
// when the coordinator does not know the type yet: the inode's MDT fills
// it in when it applies its part (first).
func Link(parent proto.FID, name string, fid proto.FID, mode uint32, t int64) []Update {
	out := []Update{{Kind: InodeLink, MDT: mdtOf(fid), FID: fid, Delta: 1, Time: t}}
	return append(out, entryUpdate(InsertDirent, parent, name, fid, mode, t)...)
}

// Unlink lists the updates of removing a name whose (non-directory)
// inode lives on another MDT: the entry here, one link less there.
func Unlink(parent proto.FID, name string, fid proto.FID, mode uint32, t int64) []Update {
	out := []Update{{Kind: InodeLink, MDT: mdtOf(fid), FID: fid, Delta: -1, Time: t}}
	return append(out, entryUpdate(DeleteDirent, parent, name, fid, mode, t)...)
}
