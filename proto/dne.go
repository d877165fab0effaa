package proto

// Messages between MDTs for distributed namespace operations. The record
// itself travels wire-encoded (RecordBytes) so that proto need not import
// the decision package.

// TxnApplyReq asks a participant to apply its part of a record (and store
// the record in the same batch). Check names a precondition the
// participant verifies first ("rmdir": the inode is an empty directory).
type TxnApplyReq struct {
	RecordBytes []byte
	Check       string
}

// TxnApplyReply returns the record as stored: a participant that creates
// an inode fills in the FID it allocated.
type TxnApplyReply struct {
	RecordBytes []byte
	Attr        Attr
	// Attrs are the inodes whose links the part changed, after the
	// change; Destroy the files whose last link it removed while nobody
	// had them open (the coordinator's client destroys their objects).
	Attrs   []Attr
	Destroy []Attr
}

// TxnID is dtx.OpID on the wire.
type TxnID struct {
	Coord uint32
	Epoch uint32
	Seq   uint64
}

// TxnStatusReq asks whether operations were applied; with Sync the answer
// is about durable state (the participant syncs its log first).
type TxnStatusReq struct {
	IDs  []TxnID
	Sync bool
}

// TxnStatusReply says, per operation, whether it was applied, and whether
// the answering MDT has already cancelled its record (every part was
// durable by then).
type TxnStatusReply struct {
	Applied   []bool
	Cancelled []bool
}

type TxnRedoReq struct{ RecordBytes []byte }

type TxnCancelReq struct{ IDs []TxnID }

// SetParamReq changes a runtime tunable (lctl set_param).
type SetParamReq struct {
	Name  string
	Value string
}

// TxnListReq asks an MDT for the records it holds in which MDT takes part
// (a restarting MDT gathers them to redo what it lost).
type TxnListReq struct{ MDT uint32 }

type TxnListReply struct{ Records [][]byte }

// TxnPullReq asks the coordinator a FID was granted to for the record
// that creates it: a request for the FID reached its MDT before the
// coordinator's push did.
type TxnPullReq struct{ FID FID }

// TxnPullReply holds the record, or nothing if the coordinator has none.
type TxnPullReply struct{ RecordBytes []byte }

// TxnApplyBatchReq carries records whose parts a coordinator pushes to a
// participant after it has replied to the client, in operation order.
type TxnApplyBatchReq struct{ Records [][]byte }
