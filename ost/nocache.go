package ost

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Writes marked NoCache (the parity units of erasure-coded files, which
// normal reads never touch) go around the page cache: O_DIRECT through a
// second descriptor of the object. Buffered, every parity byte would be
// copied into a freshly allocated page-cache page, kept there until
// memory pressure evicts it, and pushed out by write-back: half again the
// copying and cache footprint of the file's data for bytes nobody reads.
// Lustre's OSS makes the same call with its writethrough cache settings.
//
// Direct I/O needs the offset, the length and the buffer aligned as the
// filesystem says (statx STATX_DIOALIGN of the object). A write that is not, or an OST
// on a filesystem without direct I/O, is written buffered as before; an
// aligned write from a buffer that is not (a request read off a socket)
// is copied into an aligned one first, a copy between two hot buffers.

// directFile returns of's O_DIRECT descriptor, opening it on first use,
// and the alignment direct I/O needs of offsets and lengths and of
// memory; nil when direct I/O cannot be used for the object.
func (o *OST) directFile(of *objFile) (f ObjectFile, align, mem int) {
	of.dmu.Lock()
	defer of.dmu.Unlock()
	if of.direct == nil && !of.noDirect {
		var st unix.Statx_t
		err := unix.Statx(int(of.f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &st)
		if err != nil || st.Mask&unix.STATX_DIOALIGN == 0 || st.Dio_offset_align == 0 {
			of.noDirect = true // a filesystem (or kernel) without direct I/O
			return nil, 0, 0
		}
		f, err := o.fs.OpenFile(o.objPath(of.id), os.O_WRONLY|syscall.O_DIRECT, 0)
		if err != nil {
			of.noDirect = true
			return nil, 0, 0
		}
		of.direct, of.dioOff, of.dioMem = f, int(st.Dio_offset_align), int(max(st.Dio_mem_align, 1))
	}
	return of.direct, of.dioOff, of.dioMem
}

// writeData writes data at off into of, around the page cache when
// noCache asks for it and alignment allows. It reports whether the write
// went direct.
func (o *OST) writeData(of *objFile, data []byte, off int64, noCache bool) (direct bool, err error) {
	var df ObjectFile
	var align, mem int
	if noCache && len(data) > 0 {
		df, align, mem = o.directFile(of)
	}
	if df == nil || off%int64(align) != 0 || len(data)%align != 0 {
		_, err = of.f.WriteAt(data, off)
		return false, err
	}
	buf := data
	if uintptr(unsafe.Pointer(unsafe.SliceData(data)))%uintptr(mem) != 0 {
		a := getAligned(len(data), mem)
		defer putAligned(a)
		buf = a.b
		copy(buf, data)
		o.ctr.directCopies.Add(1)
	}
	_, err = df.WriteAt(buf, off)
	if errors.Is(err, syscall.EINVAL) {
		// The filesystem refused this one after all: write it buffered,
		// and stop trying direct I/O on this object.
		of.dmu.Lock()
		of.noDirect = true
		of.dmu.Unlock()
		_, err = of.f.WriteAt(data, off)
		return false, err
	}
	if err == nil {
		o.ctr.directWrites.Add(1)
	}
	return err == nil, err
}

// aligned is a buffer whose first byte is aligned for direct I/O.
type aligned struct {
	raw []byte
	b   []byte
}

var alignedPools sync.Map // size → *sync.Pool of *aligned

func getAligned(n, mem int) *aligned {
	p, _ := alignedPools.LoadOrStore(n, &sync.Pool{})
	if a, ok := p.(*sync.Pool).Get().(*aligned); ok && uintptr(unsafe.Pointer(unsafe.SliceData(a.b)))%uintptr(mem) == 0 {
		return a
	}
	raw := make([]byte, n+mem)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))) % uintptr(mem)); r != 0 {
		skip = mem - r
	}
	return &aligned{raw: raw, b: raw[skip : skip+n]}
}

func putAligned(a *aligned) {
	if p, ok := alignedPools.Load(len(a.b)); ok {
		p.(*sync.Pool).Put(a)
	}
}
