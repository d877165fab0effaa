package mds

import (
	"fmt"
	"testing"
	"time"

	"github.com/stripefs/stripefs/proto"
)

// BenchmarkMkdir compares a local mkdir with a remote one (child on the
// other MDT) on two MDTs in this process, without FUSE: what the MDTs
// alone cost each (bench dne measures through a mount).
//
//	go test -run - -bench Mkdir -benchtime 20000x ./mds
func BenchmarkMkdir(b *testing.B) {
	for _, target := range []int32{0, 1} {
		b.Run(fmt.Sprintf("child-on-mdt%d", target), func(b *testing.B) {
			p := newPair(b, fmt.Sprintf("bench-%d-%d", target, time.Now().UnixNano()))
			defer func() { p.close(1); p.close(0) }()
			var parent proto.AttrReply
			if err := p.call(0, proto.MMkdir, &proto.MkdirReq{Parent: proto.RootFID, Name: "parent", Mode: 0o755, MDT: 0}, &parent); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := p.call(0, proto.MMkdir, &proto.MkdirReq{Parent: parent.Attr.FID, Name: fmt.Sprint("d", i), Mode: 0o755, MDT: target}, &proto.AttrReply{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
