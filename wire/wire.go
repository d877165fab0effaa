// Package wire is the message codec of the stripefs protocol: a compact,
// schema-less binary encoding of Go structs, driven by reflection.
//
// Fields are encoded in declaration order: fixed-width little-endian
// integers, bools as one byte, strings and byte slices as a uvarint length
// and the bytes, slices as a uvarint count and the elements, structs field by
// field. There are no field tags on the wire, so both ends must agree on the
// message version; the rpc layer exchanges that version at connect.
//
// Decoding never trusts a length: every length and count is checked against
// the bytes that remain and against MaxLen before anything is allocated.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
)

// MaxLen bounds any single string, byte slice or slice count in a message.
const MaxLen = 16 << 20

// ErrShort reports a message that ends before its fields do.
var ErrShort = errors.New("wire: message truncated")

// Marshal appends the encoding of v (a struct or pointer to one) to buf.
func Marshal(buf []byte, v any) []byte {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	return encode(buf, rv)
}

// Unmarshal decodes b into v, which must be a pointer to a struct. Trailing
// bytes are an error: a message that does not match its type is rejected
// rather than half-read.
func Unmarshal(b []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("wire: unmarshal into non-pointer %T", v)
	}
	d := decoder{b: b}
	d.decode(rv.Elem())
	if d.err != nil {
		return fmt.Errorf("wire: decode %T: %w", v, d.err)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("wire: decode %T: %d trailing bytes", v, len(d.b))
	}
	return nil
}

var kindCheck sync.Map // reflect.Type -> error

// Check reports whether t can be encoded; message types are checked once at
// registration so an unsupported field is a start-up error, not a runtime one.
func Check(t reflect.Type) error {
	if e, ok := kindCheck.Load(t); ok {
		if e == nil {
			return nil
		}
		return e.(error)
	}
	err := check(t)
	kindCheck.Store(t, err)
	return err
}

func check(t reflect.Type) error {
	switch t.Kind() {
	case reflect.Bool, reflect.Int8, reflect.Uint8, reflect.Int16, reflect.Uint16,
		reflect.Int32, reflect.Uint32, reflect.Int64, reflect.Uint64, reflect.Int,
		reflect.Uint, reflect.String, reflect.Float64:
		return nil
	case reflect.Slice:
		return check(t.Elem())
	case reflect.Array:
		return check(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				return fmt.Errorf("wire: %s.%s is unexported", t.Name(), f.Name)
			}
			if err := check(f.Type); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("wire: unsupported kind %s", t)
}

func encode(b []byte, v reflect.Value) []byte {
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			return append(b, 1)
		}
		return append(b, 0)
	case reflect.Int8, reflect.Uint8:
		if v.Kind() == reflect.Int8 {
			return append(b, byte(v.Int()))
		}
		return append(b, byte(v.Uint()))
	case reflect.Int16:
		return binary.LittleEndian.AppendUint16(b, uint16(v.Int()))
	case reflect.Uint16:
		return binary.LittleEndian.AppendUint16(b, uint16(v.Uint()))
	case reflect.Int32:
		return binary.LittleEndian.AppendUint32(b, uint32(v.Int()))
	case reflect.Uint32:
		return binary.LittleEndian.AppendUint32(b, uint32(v.Uint()))
	case reflect.Int64, reflect.Int:
		return binary.LittleEndian.AppendUint64(b, uint64(v.Int()))
	case reflect.Uint64, reflect.Uint:
		return binary.LittleEndian.AppendUint64(b, v.Uint())
	case reflect.Float64:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Float()))
	case reflect.String:
		s := v.String()
		b = binary.AppendUvarint(b, uint64(len(s)))
		return append(b, s...)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			bs := v.Bytes()
			b = binary.AppendUvarint(b, uint64(len(bs)))
			return append(b, bs...)
		}
		n := v.Len()
		b = binary.AppendUvarint(b, uint64(n))
		for i := 0; i < n; i++ {
			b = encode(b, v.Index(i))
		}
		return b
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			b = encode(b, v.Index(i))
		}
		return b
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			b = encode(b, v.Field(i))
		}
		return b
	}
	panic(fmt.Sprintf("wire: cannot encode %s", v.Type()))
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = ErrShort
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

// length reads a uvarint length and checks it against the remaining bytes
// (each element takes at least minElem bytes) and MaxLen.
func (d *decoder) length(minElem int) int {
	if d.err != nil {
		return 0
	}
	n, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.err = ErrShort
		return 0
	}
	if k > 1 && d.b[k-1] == 0 {
		d.err = fmt.Errorf("non-minimal length encoding") // one value, one encoding
		return 0
	}
	d.b = d.b[k:]
	if n > MaxLen {
		d.err = fmt.Errorf("length %d over limit %d", n, MaxLen)
		return 0
	}
	if minElem > 0 && n*uint64(minElem) > uint64(len(d.b)) {
		d.err = fmt.Errorf("length %d exceeds the %d bytes left: %w", n, len(d.b), ErrShort)
		return 0
	}
	return int(n)
}

func (d *decoder) decode(v reflect.Value) {
	if d.err != nil {
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		if p := d.take(1); p != nil {
			if p[0] > 1 {
				d.err = fmt.Errorf("bad bool %d", p[0])
				return
			}
			v.SetBool(p[0] == 1)
		}
	case reflect.Int8:
		if p := d.take(1); p != nil {
			v.SetInt(int64(int8(p[0])))
		}
	case reflect.Uint8:
		if p := d.take(1); p != nil {
			v.SetUint(uint64(p[0]))
		}
	case reflect.Int16:
		if p := d.take(2); p != nil {
			v.SetInt(int64(int16(binary.LittleEndian.Uint16(p))))
		}
	case reflect.Uint16:
		if p := d.take(2); p != nil {
			v.SetUint(uint64(binary.LittleEndian.Uint16(p)))
		}
	case reflect.Int32:
		if p := d.take(4); p != nil {
			v.SetInt(int64(int32(binary.LittleEndian.Uint32(p))))
		}
	case reflect.Uint32:
		if p := d.take(4); p != nil {
			v.SetUint(uint64(binary.LittleEndian.Uint32(p)))
		}
	case reflect.Int64, reflect.Int:
		if p := d.take(8); p != nil {
			v.SetInt(int64(binary.LittleEndian.Uint64(p)))
		}
	case reflect.Uint64, reflect.Uint:
		if p := d.take(8); p != nil {
			v.SetUint(binary.LittleEndian.Uint64(p))
		}
	case reflect.Float64:
		if p := d.take(8); p != nil {
			v.SetFloat(math.Float64frombits(binary.LittleEndian.Uint64(p)))
		}
	case reflect.String:
		n := d.length(1)
		if p := d.take(n); d.err == nil {
			v.SetString(string(p))
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			n := d.length(1)
			if p := d.take(n); d.err == nil && n > 0 {
				v.SetBytes(append([]byte(nil), p...))
			}
			return
		}
		n := d.length(1)
		if d.err != nil || n == 0 {
			return // empty slices decode as nil
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := 0; i < n && d.err == nil; i++ {
			d.decode(s.Index(i))
		}
		v.Set(s)
	case reflect.Array:
		for i := 0; i < v.Len() && d.err == nil; i++ {
			d.decode(v.Index(i))
		}
	case reflect.Struct:
		for i := 0; i < v.NumField() && d.err == nil; i++ {
			d.decode(v.Field(i))
		}
	default:
		d.err = fmt.Errorf("cannot decode %s", v.Type())
	}
}
