package nodemapsync

import (
	"path/filepath"
	"testing"

	"github.com/stripefs/stripefs/nodemap"
	"github.com/stripefs/stripefs/rpc"
)

// A follower keeps the newest table it saw on disk, and a new one (the
// target restarted while MDT0 was away) starts from it.
func TestFollowerKeepsTable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "nodemaps")
	f, err := New("ostX", file, rpc.NewServer("ostX"))
	if err != nil {
		t.Fatal(err)
	}
	ro := nodemap.Map{Name: "ro", KeyGroups: []string{"ro"}, ReadOnly: true}
	f.Set(&nodemap.Table{Maps: []nodemap.Map{ro}, Gen: 3})
	f.Set(&nodemap.Table{Gen: 2}) // older: ignored
	again, err := New("ostX", file, rpc.NewServer("ostX"))
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Table(); got.Gen != 3 || len(got.Maps) != 1 || !got.Maps[0].ReadOnly {
		t.Fatalf("after a restart: %+v", got)
	}
	if p := again.Policy(rpc.Caller{Role: rpc.RoleClient, Group: "ro"}); !p.ReadOnly {
		t.Errorf("the group's policy: %+v", p)
	}
	if p := again.Policy(rpc.Caller{Role: rpc.RoleServer, Group: "ro"}); p.ReadOnly {
		t.Errorf("a server is no client of a nodemap: %+v", p)
	}
}
