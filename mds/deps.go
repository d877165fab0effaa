package mds

import (
	"fmt"

	"github.com/stripefs/stripefs/mds/dtx"
)

// Dependencies of distributed parts on local changes not yet durable.
//
// Roll-forward redoes a lost part on the state its MDT kept. That is only
// right if the state the part was applied to survived too: a file created
// here and, before the next group commit, renamed to another MDT would,
// after a power loss here, be named there while its inode is gone (the
// rename's record rolls the rename forward; nothing brings the create
// back). So a part that needs an inode or an entry created since this
// MDT's last WAL sync syncs first, before any other MDT holds the record
// (Lustre's commit-on-sharing, narrowed to the objects shared). Only
// creations count: a lost removal or link-count change composes with the
// redone part (the record's deltas apply to the older state, and a name
// that comes back gets the recovered entry a name of its own). A remote
// mkdir into an established directory never syncs: the field report's
// lesson stands; a rename of a file made a moment ago does, once.

// markFresh notes that key was created by a change not yet durable; m.mu
// is held.
func (m *MDT) markFresh(key []byte) {
	m.fresh[string(key)] = m.syncGen
}

// depKeys lists the inodes and entries this MDT's part of rec needs to
// exist as they are.
func (m *MDT) depKeys(rec *dtx.Record) [][]byte {
	var out [][]byte
	for u := range rec.Part(uint32(m.cfg.Index)) {
		switch u.Kind {
		case dtx.DeleteDirent:
			out = append(out, direntKey(u.Parent, u.Name), inodeKey(u.Parent))
		case dtx.InsertDirent, dtx.ParentLink:
			out = append(out, inodeKey(u.Parent))
		case dtx.InodeLink, dtx.SetParent, dtx.DeleteInode:
			out = append(out, inodeKey(u.FID))
		}
	}
	return out
}

// needsSync reports whether rec's part here depends on a change not yet
// durable; m.mu is held.
func (m *MDT) needsSync(rec *dtx.Record) bool {
	if len(m.fresh) == 0 {
		return false
	}
	for _, k := range m.depKeys(rec) {
		if _, ok := m.fresh[string(k)]; ok {
			return true
		}
	}
	return false
}

// syncLocked makes every applied change durable while m.mu is held (so
// nothing is applied meanwhile and every fresh key is then durable).
func (m *MDT) syncLocked() error {
	m.ctr.dtxDepSyncs.Add(1)
	if err := m.logSync(); err != nil {
		return fmt.Errorf("mdt%d: sync: %v: %w", m.cfg.Index, err, storeErrno(err))
	}
	clear(m.fresh)
	m.syncGen++
	m.durableGen.Store(m.syncGen)
	return nil
}

// durableAfter, for a part that needs fresh changes, returns the
// generation whose WAL sync makes them durable; the part may reach
// another MDT once durableGen is there (an async push waits for the next
// group commit instead of syncing on the reply path). m.mu is held.
func (m *MDT) durableAfter(rec *dtx.Record) (gen uint64, wait bool) {
	if !m.needsSync(rec) {
		return 0, false
	}
	return m.syncGen, true
}

// synced forgets the keys created up to generation gen, which a WAL sync
// begun after them has made durable; m.mu is held.
func (m *MDT) synced(gen uint64) {
	for k, g := range m.fresh {
		if g <= gen {
			delete(m.fresh, k)
		}
	}
}
