package wire

import (
	"bytes"
	"reflect"
	"testing"
)

type inner struct {
	A uint32
	B string
}

type msg struct {
	I8    int8
	U16   uint16
	I64   int64
	Ok    bool
	S     string
	Bytes []byte
	List  []inner
	Arr   [3]uint8
	In    inner
}

func TestRoundTrip(t *testing.T) {
	cases := []msg{
		{},
		{I8: -3, U16: 65535, I64: -1 << 40, Ok: true, S: "héllo", Bytes: []byte{0, 1, 2},
			List: []inner{{1, "a"}, {2, ""}}, Arr: [3]uint8{7, 8, 9}, In: inner{5, "x"}},
	}
	for _, m := range cases {
		b := Marshal(nil, &m)
		var got msg
		if err := Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
	}
}

func TestRejects(t *testing.T) {
	good := Marshal(nil, &msg{S: "abc", List: []inner{{1, "x"}}})
	cases := map[string][]byte{
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(append([]byte(nil), good...), 0),
		"empty":          nil,
		"huge length":    append(bytes.Repeat([]byte{0}, 13), 0xff, 0xff, 0xff, 0xff, 0x0f),
		"bad bool":       append(bytes.Repeat([]byte{0}, 11), 2),
	}
	for name, b := range cases {
		var m msg
		if err := Unmarshal(b, &m); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add(Marshal(nil, &msg{S: "abc", List: []inner{{1, "x"}}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m msg
		if err := Unmarshal(b, &m); err != nil {
			return
		}
		// Whatever decodes must encode back to the same bytes.
		if out := Marshal(nil, &m); !bytes.Equal(out, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, out)
		}
	})
}
