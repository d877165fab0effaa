package ost

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The allocated-range check. A write wholly inside blocks the object file
// already has costs no grant, no quota and no accounting: the second field
// report was a rewrite made slower than a first write because an extent
// query failed (EFAULT) and the range was then taken as unmapped, so space
// was charged again for blocks that had it. Here the answer comes from
// FIEMAP; when FIEMAP fails or is unsupported, from SEEK_DATA/SEEK_HOLE;
// only when both fail is the range unknown, and even then nothing is
// charged twice: the caller reserves the whole range for admission but
// charges what fstat says the write really allocated.

// fsIocFiemap is FS_IOC_FIEMAP, _IOWR('f', 11, struct fiemap), which
// golang.org/x/sys/unix does not define.
const fsIocFiemap = 0xC020660B

// FIEMAP extent flags (linux/fiemap.h).
const (
	fiemapExtentLast = 0x1
)

// fiemapExtents is how many extents one FIEMAP call returns at most; a
// range with more takes further calls.
const fiemapExtents = 32

// fiemapHeader is struct fiemap without its flexible array.
type fiemapHeader struct {
	Start, Length uint64
	Flags         uint32
	MappedExtents uint32
	ExtentCount   uint32
	_             uint32
}

// fiemapExtent is struct fiemap_extent.
type fiemapExtent struct {
	Logical, Physical, Length uint64
	_                         [2]uint64
	Flags                     uint32
	_                         [3]uint32
}

// fiemapBuf is one FIEMAP request with room for its answer, laid out as
// the kernel expects (the header directly followed by the extents).
type fiemapBuf struct {
	Hdr     fiemapHeader
	Extents [fiemapExtents]fiemapExtent
}

// FiemapFunc issues FS_IOC_FIEMAP on fd with buf as its argument. It is
// the seam through which tests and the STRIPEFS_FIEMAP_FAIL knob make the
// call fail, so the fallback path is exercised and measured.
type FiemapFunc func(fd uintptr, buf *fiemapBuf) error

// ioctlFiemap is the real FiemapFunc.
func ioctlFiemap(fd uintptr, buf *fiemapBuf) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, fd, fsIocFiemap, uintptr(unsafe.Pointer(buf)))
	if e != 0 {
		return e
	}
	return nil
}

// failingFiemap is the FiemapFunc of an OST told to fail FIEMAP: EFAULT,
// the error of the field report.
func failingFiemap(uintptr, *fiemapBuf) error { return syscall.EFAULT }

// extentChecker answers "how much of this range is not allocated yet?".
type extentChecker struct {
	fiemap    FiemapFunc
	blockSize uint64
	ctr       *counters
}

// unallocated returns the bytes of [off, end), widened to whole blocks,
// that the file open as fd has no blocks for. known is false when neither FIEMAP nor
// SEEK_DATA/SEEK_HOLE could answer; then n is the whole widened range.
func (x *extentChecker) unallocated(fd uintptr, off, end uint64) (n uint64, known bool) {
	bs := x.blockSize
	start := off / bs * bs
	stop := (end + bs - 1) / bs * bs
	if stop <= start {
		return 0, true
	}
	x.ctr.fiemapCalls.Add(1)
	holes, err := fiemapHoles(x.fiemap, fd, start, stop)
	if err == nil {
		return holes, true
	}
	x.ctr.fiemapFallbacks.Add(1)
	holes, err2 := seekHoles(int(fd), start, stop, bs)
	if err2 == nil {
		return holes, true
	}
	x.ctr.allocCheckFailures.Add(1)
	logOnce(fmt.Sprintf("allocated-range check failed (fiemap: %v; seek_data: %v); charging what fstat reports", err, err2))
	return stop - start, false
}

// fiemapHoles returns the bytes of the block-aligned range [start, stop)
// not covered by any extent FIEMAP reports. Delayed-allocation and
// unwritten extents count as allocated: their space is already reserved.
func fiemapHoles(call FiemapFunc, fd uintptr, start, stop uint64) (uint64, error) {
	var buf fiemapBuf
	covered := uint64(0)
	pos := start
	for pos < stop {
		buf.Hdr = fiemapHeader{Start: pos, Length: stop - pos, ExtentCount: fiemapExtents}
		if err := call(fd, &buf); err != nil {
			return 0, fmt.Errorf("fiemap [%d,%d): %w", pos, stop, err)
		}
		n := int(buf.Hdr.MappedExtents)
		if n > fiemapExtents {
			return 0, fmt.Errorf("fiemap returned %d extents for %d slots: %w", n, fiemapExtents, syscall.EINVAL)
		}
		if n == 0 {
			break
		}
		last := false
		next := pos
		for _, e := range buf.Extents[:n] {
			s, t := max(e.Logical, pos), min(e.Logical+e.Length, stop)
			if e.Logical+e.Length < e.Logical { // overflow: a corrupt answer
				return 0, fmt.Errorf("fiemap extent [%d,+%d) overflows: %w", e.Logical, e.Length, syscall.EINVAL)
			}
			if t > s {
				covered += t - s
			}
			next = max(next, e.Logical+e.Length)
			if e.Flags&fiemapExtentLast != 0 {
				last = true
			}
		}
		if last || n < fiemapExtents || next <= pos {
			break
		}
		pos = next
	}
	return stop - start - min(covered, stop-start), nil
}

// seekHoles is fiemapHoles by SEEK_DATA/SEEK_HOLE. Data ranges are widened
// to whole blocks: the hole the kernel reports at end of file starts at
// the file size, inside a block that is allocated.
func seekHoles(fd int, start, stop, bs uint64) (uint64, error) {
	covered := uint64(0)
	pos := start
	for pos < stop {
		d, err := unix.Seek(fd, int64(pos), unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data at or after pos
		}
		if err != nil {
			return 0, fmt.Errorf("seek_data %d: %w", pos, err)
		}
		h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
		if err != nil {
			return 0, fmt.Errorf("seek_hole %d: %w", d, err)
		}
		if h <= d {
			return 0, fmt.Errorf("seek_hole %d answered %d: %w", d, h, syscall.EINVAL)
		}
		ds := uint64(d) / bs * bs
		de := (uint64(h) + bs - 1) / bs * bs
		if ds >= stop {
			break
		}
		s, t := max(ds, pos), min(de, stop)
		if t > s {
			covered += t - s
		}
		pos = max(de, pos+1)
	}
	return stop - start - min(covered, stop-start), nil
}
