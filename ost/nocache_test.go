package ost

import (
	"bytes"
	"context"
	"testing"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// TestNoCacheWrites checks which writes go around the page cache: NoCache
// ones whose offset and length are aligned, from an aligned buffer or
// through an aligned copy; the rest are written buffered. Every one reads
// back as written, through the buffered descriptor too.
func TestNoCacheWrites(t *testing.T) {
	to := startOST(t, Config{})
	o := to.o
	of, err := o.get(obj(9), true)
	if err != nil {
		t.Fatal(err)
	}
	defer o.put(of)
	if df, _, _ := o.directFile(of); df == nil {
		t.Skip("the filesystem under the test's temporary directory has no direct I/O")
	}
	_, align, mem := o.directFile(of)
	buf := getAligned(256<<10+mem, mem) // aligned; b[1:] is not
	tests := []struct {
		name    string
		noCache bool
		off, n  int
		shift   int // buffer start past an aligned address
		direct  bool
		copied  bool
	}{
		{"cached", false, 0, 64 << 10, 0, false, false},
		{"aligned", true, 64 << 10, 64 << 10, 0, true, false},
		{"unaligned buffer", true, 128 << 10, 64 << 10, 1, true, true},
		{"unaligned offset", true, 192<<10 + 1, 4096, 0, false, false},
		{"short length", true, 256 << 10, align - 1, 0, align == 1, false},
	}
	for i, tc := range tests {
		data := buf.b[tc.shift : tc.shift+tc.n]
		for j := range data {
			data[j] = byte(i*31 + j*7)
		}
		want := bytes.Clone(data)
		d0, c0 := o.ctr.directWrites.Load(), o.ctr.directCopies.Load()
		direct, err := o.writeData(of, data, int64(tc.off), tc.noCache)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if direct != tc.direct || (o.ctr.directWrites.Load() > d0) != tc.direct || (o.ctr.directCopies.Load() > c0) != tc.copied {
			t.Errorf("%s: direct %v (counted %d, copies %d), want direct %v copied %v", tc.name, direct,
				o.ctr.directWrites.Load()-d0, o.ctr.directCopies.Load()-c0, tc.direct, tc.copied)
		}
		got := make([]byte, tc.n)
		if _, err := of.f.ReadAt(got, int64(tc.off)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: read back differs (%v)", tc.name, err)
		}
	}
	// Through the RPC: a parity-like write is written direct and reads
	// back; a buffered write over it afterwards is seen too.
	c := to.client(1, proto.Owner{})
	data := pattern(1<<20, 3)
	d0 := counter(o, "direct_writes")
	if err := c.rc.Do(context.Background(), &rpc.Call{Method: proto.OWrite,
		Req:     &proto.OWriteReq{Obj: obj(10), Grant: proto.WriteGrant{Client: c.id, Want: c.want}, NoCache: true},
		BulkOut: [][]byte{data}, Resp: &proto.OWriteReply{}}); err != nil {
		t.Fatal(err)
	}
	if counter(o, "direct_writes") == d0 {
		t.Error("a NoCache write of 1 MiB at 0 was not written direct")
	}
	if got := c.read(obj(10), 0, len(data)); !bytes.Equal(got, data) {
		t.Fatal("the direct write does not read back")
	}
	must(t, c.write(obj(10), 4096, []byte("buffered")))
	if got := c.read(obj(10), 4096, 8); string(got) != "buffered" {
		t.Fatalf("buffered write over a direct one reads %q", got)
	}
}
