package mds

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/stripefs/stripefs/ost"
	"github.com/stripefs/stripefs/proto"
)

// Data-on-MDT: an MDT keeps the first component of the files whose
// layout says pattern=mdt (proto/dom.go) in an object store of the OST's
// kind beside its database (DataDir/dom), and serves the data methods
// (ost_write, ost_read, ost_punch ...) for them on its own connection. A
// small file's create, write, read and stat so never leave its MDT, its
// data stays under the MDT's extent locks like any other, and its blocks
// are charged to block quota by the store as an OST charges them (the
// store is a quota slave named mdtN-dom).

// openDoM opens the MDT's store of file data, unless the MDT keeps none
// (Config.DoMMax negative, or a database not on the disk).
func (m *MDT) openDoM() error {
	if m.cfg.DoMMax < 0 || m.cfg.FS != nil || m.cfg.DataDir == "" {
		return nil
	}
	cfg := ost.Config{Index: m.cfg.Index, DataDir: filepath.Join(m.cfg.DataDir, "dom"), Name: fmt.Sprintf("mdt%d-dom", m.cfg.Index),
		Nodemaps: m.nodemaps, Reserve: m.cfg.Reserve}
	if m.quota.master != nil {
		cfg.QuotaMaster = m.quota.master
	} else {
		cfg.MGS = m.cfg.MGS
	}
	d, err := ost.Open(cfg)
	if err != nil {
		return fmt.Errorf("mdt%d: data-on-MDT store: %w", m.cfg.Index, err)
	}
	d.RegisterData(m.Srv)
	m.dom = d
	return nil
}

// domMax is the largest Data-on-MDT component this MDT accepts: 0 when it
// keeps no file data.
func (m *MDT) domMax() uint64 {
	if m.dom == nil {
		return 0
	}
	if m.cfg.DoMMax == 0 {
		return proto.DefaultDoMMax
	}
	return uint64(m.cfg.DoMMax)
}

// closeDoM closes the store after the MDT stopped serving.
func (m *MDT) closeDoM() {
	if m.dom != nil {
		if err := m.dom.Close(); err != nil {
			m.logf(slog.LevelWarn, "data-on-MDT store: close: %v", err)
		}
	}
}

// withBlocks adds to r the blocks of a file whose objects are all this
// MDT's (a Data-on-MDT file that has not grown past its MDT part).
func (m *MDT) withBlocks(r *proto.AttrReply) *proto.AttrReply {
	l := r.Attr.Layout
	if m.dom == nil || len(l.OSTs) != 1 || l.OSTs[0] != proto.DoMTarget(uint32(m.cfg.Index)) {
		return r
	}
	r.Blocks, r.HasBlocks = m.dom.Blocks(proto.ObjID{FID: r.Attr.FID})
	return r
}
