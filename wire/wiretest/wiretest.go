// Package wiretest holds hand-written codecs (wire.Appender and
// wire.Unmarshaler) to what wire does by reflection: the same bytes out,
// the same values and the same failures in.
package wiretest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"

	"github.com/stripefs/stripefs/wire"
)

// Same checks one value v, of a type with its own codec, against plain,
// a new value of a type of the same fields without it (type plain T):
// the encodings, and the decodings of the encoding whole, cut at random,
// with a byte added and with a byte flipped.
func Same(rng *rand.Rand, v, plain any) error {
	fast := wire.Marshal(nil, v)
	slow := wire.Marshal(nil, reflect.ValueOf(v).Convert(reflect.TypeOf(plain)).Interface())
	if !bytes.Equal(fast, slow) {
		return fmt.Errorf("encodings differ\n own        %x\n reflection %x", fast, slow)
	}
	bad := bytes.Clone(fast)
	bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
	for _, in := range [][]byte{fast, fast[:rng.IntN(len(fast)+1)], append(bytes.Clone(fast), 0), bad} {
		if err := SameDecoding(in, v, plain); err != nil {
			return err
		}
	}
	return nil
}

// SameDecoding decodes in into a new value of v's type and of plain's
// (pointers to structs of the same fields, one with its own codec) and
// reports a difference in the outcome or the value.
func SameDecoding(in []byte, v, plain any) error {
	own := reflect.New(reflect.TypeOf(v).Elem())
	refl := reflect.New(reflect.TypeOf(plain).Elem())
	errA, errB := wire.Unmarshal(in, own.Interface()), wire.Unmarshal(in, refl.Interface())
	if (errA == nil) != (errB == nil) {
		return fmt.Errorf("own codec says %v, reflection %v, on %x", errA, errB, in)
	}
	if errA == nil && !reflect.DeepEqual(own.Elem().Convert(refl.Elem().Type()).Interface(), refl.Elem().Interface()) {
		return fmt.Errorf("decodings differ on %x\n own        %+v\n reflection %+v", in, own.Elem().Interface(), refl.Elem().Interface())
	}
	if errA == nil {
		if back := wire.Marshal(nil, own.Interface()); !bytes.Equal(back, in) {
			return fmt.Errorf("decoded %x, encoded back %x", in, back)
		}
	}
	return nil
}
