package ost

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/internal/recordpb"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/wire"
)

// The index's values are protocol buffers (package recordpb), so a field
// added to objRecord or grantRecord is read as zero from older records.
// Format 1 (no marker) stored them in package wire's positional codec;
// an index of format 1 is rewritten once, when this code first opens it.
// Format 3 adds inline objects (inline.go): a format 2 index needs no
// conversion, only the new marker, so that code of format 2, which would
// take an inline object for a missing file, refuses to open it.
const indexFormat = 3

var keyFormat = []byte("mformat")

// objRecordV1 and grantRecordV1 are frozen copies of format 1's values:
// never edit them.
type objRecordV1 struct {
	Owner       struct{ Uid, Gid, Projid uint32 }
	Bytes, Size uint64
}

type grantRecordV1 struct{ Grant uint64 }

func (r *objRecord) marshal() []byte {
	b, _ := (&recordpb.Object{Owner: recordpb.NewOwner(r.Owner), Bytes: r.Bytes, Size: r.Size, Inline: r.Inline}).MarshalVT()
	return b
}

func (r *objRecord) unmarshal(b []byte) error {
	var p recordpb.Object
	if err := p.UnmarshalVT(b); err != nil {
		return err
	}
	*r = objRecord{Owner: p.Owner.Value(), Bytes: p.Bytes, Size: p.Size, Inline: p.Inline}
	return nil
}

func (g grantRecord) marshal() []byte {
	b, _ := (&recordpb.Grant{Grant: g.Grant}).MarshalVT()
	return b
}

func (g *grantRecord) unmarshal(b []byte) error {
	var p recordpb.Grant
	if err := p.UnmarshalVT(b); err != nil {
		return err
	}
	g.Grant = p.Grant
	return nil
}

// upgrade rewrites an index of an older format in the current one, in one
// synced batch, and marks a new index as current.
func (x *index) upgrade() error {
	v, closer, err := x.db.Get(keyFormat)
	if err == nil {
		var f struct{ Format uint32 }
		err := wire.Unmarshal(v, &f)
		closer.Close()
		switch {
		case err != nil:
			return fmt.Errorf("%s: index: corrupt format record: %w", x.name, err)
		case f.Format == indexFormat:
			return nil
		case f.Format == 2:
			if err := x.guard.Do(func() error { return x.db.Set(keyFormat, formatValue(), pebble.Sync) }); err != nil {
				return fmt.Errorf("%s: index: upgrade: %w", x.name, err)
			}
			x.logf(slog.LevelInfo, "index format 2 marked %d (inline objects)", indexFormat)
			return nil
		default:
			return fmt.Errorf("%s: index format %d, this version reads formats 1 to %d", x.name, f.Format, indexFormat)
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("%s: index: read format: %w", x.name, err)
	}
	b := x.db.NewBatch()
	defer b.Close()
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kGrant}, UpperBound: []byte{kObject + 1}})
	if err != nil {
		return fmt.Errorf("%s: index: upgrade: %w", x.name, err)
	}
	objects, grants := 0, 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		switch k[0] {
		case kObject:
			var r objRecordV1
			if err := wire.Unmarshal(it.Value(), &r); err != nil {
				it.Close()
				return fmt.Errorf("%s: index: upgrade: object record %x: %w", x.name, k, err)
			}
			b.Set(k, (&objRecord{Owner: proto.Owner(r.Owner), Bytes: r.Bytes, Size: r.Size}).marshal(), nil)
			objects++
		case kGrant:
			var g grantRecordV1
			if err := wire.Unmarshal(it.Value(), &g); err != nil {
				it.Close()
				return fmt.Errorf("%s: index: upgrade: grant record %x: %w", x.name, k, err)
			}
			b.Set(k, grantRecord(g).marshal(), nil)
			grants++
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("%s: index: upgrade: %w", x.name, err)
	}
	b.Set(keyFormat, formatValue(), nil)
	if err := x.guard.Do(func() error { return b.Commit(pebble.Sync) }); err != nil {
		return fmt.Errorf("%s: index: upgrade: %w", x.name, err)
	}
	if objects+grants > 0 {
		x.logf(slog.LevelInfo, "index upgraded from format 1 to %d: %d object records, %d grant records", indexFormat, objects, grants)
	}
	return nil
}

func formatValue() []byte { return wire.Marshal(nil, &struct{ Format uint32 }{indexFormat}) }
