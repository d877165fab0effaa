package proto

// Nodemaps (package nodemap decides): groups of client nodes, by address
// or key group, and how each group's requests are taken. MDT0 keeps them;
// every MDT and OST applies them.

const (
	MNodemapSet  uint16 = MFlockReplay + 1 + iota // admin, MDT0: add or change a nodemap
	MNodemapDel                                   // admin, MDT0: remove one
	MNodemapList                                  // admin (and servers), MDT0: every nodemap
	MNodemapPush                                  // MDT0 to every target: the table, after a change
	MNodemapMine                                  // a client: the policy its requests get
)

func init() {
	for m, n := range map[uint16]string{MNodemapSet: "nodemap_set", MNodemapDel: "nodemap_del", MNodemapList: "nodemap_list",
		MNodemapPush: "nodemap_push", MNodemapMine: "nodemap_mine"} {
		methodNames[m] = n
	}
}

// Nodemap is one group of clients and its policy.
type Nodemap struct {
	Name string
	// Ranges are the client addresses of the group, as CIDR prefixes
	// ("10.0.0.0/8", "192.168.1.7/32").
	Ranges []string
	// KeyGroups are the groups of client keys (keygen --group) whose
	// holders belong to the map, wherever they connect from.
	KeyGroups []string
	// RootSquash makes root (uid 0) SquashUID:SquashGID; AllSquash makes
	// every user so. Neither: ids are trusted as the client says them.
	RootSquash, AllSquash bool
	SquashUID, SquashGID  uint32
	// ReadOnly refuses every change (EROFS).
	ReadOnly bool
	// Fileset is the directory the group's clients see as the root
	// ("": the whole filesystem), and FilesetFID what MDT0 resolved it
	// to when the map was set.
	Fileset    string
	FilesetFID FID
}

// NodemapTable is every nodemap of a filesystem; Gen counts its changes.
type NodemapTable struct {
	Maps []Nodemap
	Gen  uint64
}

type NodemapSetReq struct {
	Map Nodemap
	// New refuses to replace a map of the same name (nodemap add).
	New bool
}

type NodemapDelReq struct{ Name string }
