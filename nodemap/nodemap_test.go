package nodemap

import (
	"errors"
	"slices"
	"testing"

	"github.com/stripefs/stripefs/rpc"
)

func table(t *testing.T, maps ...Map) *Table {
	t.Helper()
	tab := &Table{}
	for _, m := range maps {
		if err := Put(tab, m); err != nil {
			t.Fatal(err)
		}
	}
	return tab
}

func TestMatch(t *testing.T) {
	tab := table(t,
		Map{Name: "campus", Ranges: []string{"10.0.0.0/8"}, RootSquash: true, SquashUID: 99, SquashGID: 99},
		Map{Name: "lab", Ranges: []string{"172.16.0.0/12", "fd00::/8"}, ReadOnly: true},
		Map{Name: "guests", KeyGroups: []string{"guest"}, AllSquash: true, SquashUID: 7, SquashGID: 8},
	)
	for _, tc := range []struct{ peer, group, want string }{
		{"10.9.9.9:1234", "", "campus"},
		{"172.17.2.3:1234", "", "lab"},
		{"172.17.2.3:1234#17", "", "lab"}, // as an OST (or an MDT keeping file data) names a connection
		{"[fd00::1]:1234", "", "lab"},
		{"[::ffff:172.17.2.3]:1234", "", "lab"}, // an IPv4 client on an IPv6 socket
		{"192.168.0.1:1234", "", "default"},
		{"10.1.2.3:1234", "guest", "guests"}, // the key's group wins over the address
		{"pipe:3", "", "default"},
		{"@", "", "default"},
		{"192.168.0.1:1234", "nobody-knows", "default"},
	} {
		if got := Match(tab, tc.peer, tc.group); got.Name != tc.want {
			t.Errorf("%s (group %q): %s, want %s", tc.peer, tc.group, got.Name, tc.want)
		}
	}
}

func TestPutRefuses(t *testing.T) {
	tab := table(t, Map{Name: "a", Ranges: []string{"10.0.0.0/8"}, KeyGroups: []string{"g"}})
	for name, m := range map[string]Map{
		"overlapping range": {Name: "b", Ranges: []string{"10.2.0.0/16"}},
		"taken key group":   {Name: "b", KeyGroups: []string{"g"}},
		"bad range":         {Name: "b", Ranges: []string{"10.0.0.0/33"}},
		"the default":       {Name: "default"},
		"relative fileset":  {Name: "b", Fileset: "projects"},
		"name with a slash": {Name: "a/b"},
	} {
		if err := Put(tab, m); err == nil {
			t.Errorf("%s: accepted", name)
		} else if name == "overlapping range" && !errors.Is(err, ErrOverlap) {
			t.Errorf("%s: %v", name, err)
		}
	}
	gen := tab.Gen
	if err := Put(tab, Map{Name: "a", Ranges: []string{"10.0.0.0/16"}}); err != nil || tab.Gen != gen+1 {
		t.Errorf("replacing a map's own range: %v, gen %d→%d", err, gen, tab.Gen)
	}
	if !Del(tab, "a") || Del(tab, "a") || len(tab.Maps) != 0 {
		t.Error("delete")
	}
}

func TestSquash(t *testing.T) {
	root := &rpc.Cred{Uid: 0, Gid: 0, Groups: []uint32{0, 10}}
	user := &rpc.Cred{Uid: 1000, Gid: 1000, Groups: []uint32{10}}
	rs := Map{RootSquash: true, SquashUID: 99, SquashGID: 98}
	as := Map{AllSquash: true, SquashUID: 7, SquashGID: 8}
	if c := Squash(&rs, root); c.Uid != 99 || c.Gid != 98 || !slices.Equal(c.Groups, []uint32{98, 10}) {
		t.Errorf("root squashed: %+v", c)
	}
	if c := Squash(&rs, user); c != user {
		t.Errorf("a user under root squash: %+v", c)
	}
	if c := Squash(&as, user); c.Uid != 7 || c.Gid != 8 || len(c.Groups) != 0 {
		t.Errorf("all squash: %+v", c)
	}
	if c := Squash(&Default, root); c != root {
		t.Errorf("default: %+v", c)
	}
}
