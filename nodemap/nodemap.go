// Package nodemap decides what a client node may be, as Lustre's nodemap
// does: clients are grouped by the addresses they connect from or by the
// group of the key they prove, and each group says how their users' ids
// are taken (trusted, root squashed, all squashed), whether they may
// change anything, and which subdirectory they see as the root (the
// fileset). It is pure: the MDT that keeps the maps, and every target
// that applies them, hand it what they know of a connection.
package nodemap

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// DefaultSquash is the id squashed users become unless a map names
// another: nobody:nogroup (65534), as NFS's anonuid.
const DefaultSquash = 65534

// Map is one nodemap (proto.Nodemap, as it travels and is stored).
type Map = proto.Nodemap

// Table is every nodemap of a filesystem.
type Table = proto.NodemapTable

// Default is the policy of clients no map names: trusted ids, read-write,
// the whole filesystem (Lustre's behaviour with nodemaps inactive).
var Default = Map{Name: "default", SquashUID: DefaultSquash, SquashGID: DefaultSquash}

// Check validates a map as an administrator gives it.
func Check(m *Map) error {
	if m.Name == "" || m.Name == Default.Name || len(m.Name) > 64 || strings.ContainsAny(m.Name, " /\t\n\x00") {
		return fmt.Errorf("nodemap name %q: 1 to 64 characters, no spaces or slashes, not %q", m.Name, Default.Name)
	}
	for _, r := range m.Ranges {
		if _, err := netip.ParsePrefix(r); err != nil {
			return fmt.Errorf("nodemap %s: range %q: want an address prefix such as 10.0.0.0/8 or 192.168.1.7/32", m.Name, r)
		}
	}
	for _, g := range m.KeyGroups {
		if g == "" || strings.ContainsAny(g, " \t\n\x00") {
			return fmt.Errorf("nodemap %s: key group %q", m.Name, g)
		}
	}
	if m.Fileset != "" && !strings.HasPrefix(m.Fileset, "/") {
		return fmt.Errorf("nodemap %s: fileset %q: an absolute path within the filesystem", m.Name, m.Fileset)
	}
	return nil
}

// ErrOverlap reports ranges two maps share (Lustre refuses them too): a
// client's map would depend on their order.
var ErrOverlap = errors.New("address ranges overlap")

// Put adds or replaces m in t.
func Put(t *Table, m Map) error {
	if err := Check(&m); err != nil {
		return err
	}
	for _, o := range t.Maps {
		if o.Name == m.Name {
			continue
		}
		for _, a := range o.Ranges {
			pa, _ := netip.ParsePrefix(a)
			for _, b := range m.Ranges {
				pb, _ := netip.ParsePrefix(b)
				if pa.Overlaps(pb) {
					return fmt.Errorf("nodemap %s: %s and nodemap %s's %s: %w", m.Name, b, o.Name, a, ErrOverlap)
				}
			}
		}
		for _, g := range o.KeyGroups {
			if slices.Contains(m.KeyGroups, g) {
				return fmt.Errorf("nodemap %s: key group %q is nodemap %s's already", m.Name, g, o.Name)
			}
		}
	}
	t.Gen++
	for i := range t.Maps {
		if t.Maps[i].Name == m.Name {
			t.Maps[i] = m
			return nil
		}
	}
	t.Maps = append(t.Maps, m)
	slices.SortFunc(t.Maps, func(a, b Map) int { return strings.Compare(a.Name, b.Name) })
	return nil
}

// Del removes the map named name from t.
func Del(t *Table, name string) bool {
	for i := range t.Maps {
		if t.Maps[i].Name == name {
			t.Maps = slices.Delete(t.Maps, i, i+1)
			t.Gen++
			return true
		}
	}
	return false
}

// Get returns t's map named name.
func Get(t *Table, name string) (Map, bool) {
	for _, m := range t.Maps {
		if m.Name == name {
			return m, true
		}
	}
	return Map{}, false
}

// Match returns the policy of a client: the map of its key's group, else
// the map whose ranges hold its address (ranges never overlap), else
// Default. peer is the connection's remote address ("host:port", or a
// pipe's or Unix socket's name, which no range holds).
func Match(t *Table, peer, keyGroup string) Map {
	if keyGroup != "" {
		for _, m := range t.Maps {
			if slices.Contains(m.KeyGroups, keyGroup) {
				return m
			}
		}
	}
	if i := strings.LastIndexByte(peer, '#'); i >= 0 {
		peer = peer[:i] // an OST's peer names its connection too: "addr#id"
	}
	addr, err := netip.ParseAddrPort(peer)
	if err != nil {
		return Default
	}
	ip := addr.Addr().Unmap()
	for _, m := range t.Maps {
		for _, r := range m.Ranges {
			if p, err := netip.ParsePrefix(r); err == nil && p.Contains(ip) {
				return m
			}
		}
	}
	return Default
}

// Squash is c as the map takes it: under root squash, uid 0 and gid 0
// (also among the supplementary groups) become the squash ids; under all
// squash every user is the squash user, in no other group.
func Squash(m *Map, c *rpc.Cred) *rpc.Cred {
	switch {
	case m.AllSquash:
		return &rpc.Cred{Uid: m.SquashUID, Gid: m.SquashGID}
	case m.RootSquash && (c.Uid == 0 || c.Gid == 0 || slices.Contains(c.Groups, 0)):
		out := &rpc.Cred{Uid: c.Uid, Gid: c.Gid}
		if out.Uid == 0 {
			out.Uid = m.SquashUID
		}
		if out.Gid == 0 {
			out.Gid = m.SquashGID
		}
		for _, g := range c.Groups {
			if g == 0 {
				g = m.SquashGID
			}
			out.Groups = append(out.Groups, g)
		}
		return out
	}
	return c
}

// Format is the map as `stripefs nodemap list` shows it.
func Format(m *Map) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", m.Name)
	if len(m.Ranges) > 0 {
		fmt.Fprintf(&b, " ranges=%s", strings.Join(m.Ranges, ","))
	}
	if len(m.KeyGroups) > 0 {
		fmt.Fprintf(&b, " key_groups=%s", strings.Join(m.KeyGroups, ","))
	}
	switch {
	case m.AllSquash:
		fmt.Fprintf(&b, " all_squash=%d:%d", m.SquashUID, m.SquashGID)
	case m.RootSquash:
		fmt.Fprintf(&b, " root_squash=%d:%d", m.SquashUID, m.SquashGID)
	default:
		b.WriteString(" trusted")
	}
	if m.ReadOnly {
		b.WriteString(" read_only")
	}
	if m.Fileset != "" && m.Fileset != "/" {
		fmt.Fprintf(&b, " fileset=%s", m.Fileset)
	}
	return b.String()
}
