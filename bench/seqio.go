package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// MaxXfer bounds the transfer size: SeqIO holds one buffer of it.
const MaxXfer = 1 << 30

// SeqResult is one sequential write-then-read pass over a single file.
type SeqResult struct {
	Dir          string  `json:"dir"`
	Bytes        int64   `json:"bytes"`
	Xfer         int     `json:"xfer"`
	WriteSeconds float64 `json:"write_seconds"` // pwrites, fsync and close
	WriteMiBps   float64 `json:"write_mib_s"`
	ReadSeconds  float64 `json:"read_seconds"` // open, reads (with verification) and close
	ReadMiBps    float64 `json:"read_mib_s"`
	// DroppedCaches says whether /proc/sys/vm/drop_caches took the "3";
	// if not, only the file's own pages were dropped (posix_fadvise), and
	// a backing filesystem under the mount may still serve reads from RAM.
	DroppedCaches bool `json:"dropped_caches"`
}

// seqHooks are test seams.
type seqHooks struct {
	seed       *uint64                 // fixed pattern seed instead of a random one
	afterWrite func(path string) error // runs between the write and read phases
	localDrop  bool                    // only fadvise the file: leave the machine's caches alone
}

// SeqIO writes one file of size bytes in dir with xfer-byte pwrite calls,
// fsyncs and closes it, drops the page cache for it, reads it back with
// xfer-byte reads and verifies every byte. The file is removed afterwards.
// Each 8-byte little-endian word of the file holds its offset XOR a
// per-run seed, so stale or misplaced data does not verify.
func SeqIO(ctx context.Context, dir string, size int64, xfer int) (SeqResult, error) {
	return seqIO(ctx, dir, size, xfer, seqHooks{})
}

func seqIO(ctx context.Context, dir string, size int64, xfer int, h seqHooks) (res SeqResult, err error) {
	if size <= 0 {
		return res, fmt.Errorf("seqio: size must be positive, got %d", size)
	}
	if xfer <= 0 || xfer > MaxXfer {
		return res, fmt.Errorf("seqio: transfer size must be 1 byte to %s, got %d", FormatSize(MaxXfer), xfer)
	}
	res = SeqResult{Dir: dir, Bytes: size, Xfer: xfer}
	var seed uint64
	if h.seed != nil {
		seed = *h.seed
	} else {
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:])
	}
	path := filepath.Join(dir, fmt.Sprintf("stripefs-bench-seqio.%d.%016x", os.Getpid(), seed))
	buf := make([]byte, xfer)

	// Write phase.
	start := time.Now()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return res, fmt.Errorf("seqio: %w", err)
	}
	defer os.Remove(path)
	for off := int64(0); off < size; off += int64(xfer) {
		if err := ctx.Err(); err != nil {
			f.Close()
			return res, err
		}
		chunk := buf[:min(int64(xfer), size-off)]
		fillPattern(chunk, off, seed)
		if _, err := f.WriteAt(chunk, off); err != nil { // pwrite(2)
			f.Close()
			return res, fmt.Errorf("seqio: write at %d: %w", off, err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return res, fmt.Errorf("seqio: fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return res, fmt.Errorf("seqio: close after write: %w", err)
	}
	res.WriteSeconds = time.Since(start).Seconds()
	res.WriteMiBps = mibps(size, res.WriteSeconds)

	if h.afterWrite != nil {
		if err := h.afterWrite(path); err != nil {
			return res, err
		}
	}
	res.DroppedCaches = dropCaches(path, !h.localDrop)
	if err := ctx.Err(); err != nil {
		return res, err
	}

	// Read phase.
	start = time.Now()
	f, err = os.Open(path)
	if err != nil {
		return res, fmt.Errorf("seqio: %w", err)
	}
	defer f.Close()
	var off int64
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		n, err := io.ReadFull(f, buf) // read(2)s of xfer bytes; short only at EOF
		if n > 0 {
			if off+int64(n) > size {
				return res, fmt.Errorf("seqio: %s is longer than the %d bytes written", path, size)
			}
			if err := verifyPattern(buf[:n], off, seed); err != nil {
				return res, err
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return res, fmt.Errorf("seqio: read at %d: %w", off, err)
		}
	}
	if off != size {
		return res, fmt.Errorf("seqio: read back %d bytes of the %d written", off, size)
	}
	if err := f.Close(); err != nil {
		return res, fmt.Errorf("seqio: close after read: %w", err)
	}
	res.ReadSeconds = time.Since(start).Seconds()
	res.ReadMiBps = mibps(size, res.ReadSeconds)
	return res, nil
}

// dropCaches evicts path's pages (posix_fadvise DONTNEED) and, when
// allowed, every clean page on the machine, so the read phase goes to the
// filesystem rather than to RAM. It reports whether the global drop worked.
func dropCaches(path string, global bool) bool {
	if f, err := os.Open(path); err == nil {
		_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
	}
	if !global {
		return false
	}
	unix.Sync() // drop_caches only drops clean pages
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0) == nil
}

func mibps(bytes int64, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(bytes) / (1 << 20) / secs
}

// patternWord is the file's 8-byte word starting at word-aligned offset o.
func patternWord(o int64, seed uint64) uint64 { return uint64(o) ^ seed }

func patternByte(pos int64, seed uint64) byte {
	return byte(patternWord(pos&^7, seed) >> (8 * (pos & 7)))
}

// fillPattern fills b with the file contents from offset off.
func fillPattern(b []byte, off int64, seed uint64) {
	i := 0
	for ; i < len(b) && (off+int64(i))&7 != 0; i++ {
		b[i] = patternByte(off+int64(i), seed)
	}
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], patternWord(off+int64(i), seed))
	}
	for ; i < len(b); i++ {
		b[i] = patternByte(off+int64(i), seed)
	}
}

// verifyPattern checks that b holds the file contents from offset off and
// names the first wrong byte if not.
func verifyPattern(b []byte, off int64, seed uint64) error {
	i := 0
	for ; i < len(b) && (off+int64(i))&7 != 0; i++ {
		if b[i] != patternByte(off+int64(i), seed) {
			return mismatch(b, off, i, seed)
		}
	}
	for ; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != patternWord(off+int64(i), seed) {
			for j := i; ; j++ {
				if b[j] != patternByte(off+int64(j), seed) {
					return mismatch(b, off, j, seed)
				}
			}
		}
	}
	for ; i < len(b); i++ {
		if b[i] != patternByte(off+int64(i), seed) {
			return mismatch(b, off, i, seed)
		}
	}
	return nil
}

// ErrCorrupt is wrapped by verification failures.
var ErrCorrupt = errors.New("data read back differs from data written")

func mismatch(b []byte, off int64, i int, seed uint64) error {
	pos := off + int64(i)
	return fmt.Errorf("seqio: %w: byte at offset %d is %#02x, want %#02x (word at %d reads %s)",
		ErrCorrupt, pos, b[i], patternByte(pos, seed), pos&^7, wordHint(b, off, pos, seed))
}

// wordHint says whether the wrong word is zeros or the content of another
// offset, which tells a hole or a misplaced write from random corruption.
func wordHint(b []byte, off, pos int64, seed uint64) string {
	start := int(pos&^7 - off)
	if start < 0 || start+8 > len(b) {
		return "partially outside this read"
	}
	w := binary.LittleEndian.Uint64(b[start:])
	switch {
	case w == 0:
		return "zero (a hole or lost write?)"
	case int64(w^seed) >= 0 && (w^seed)&7 == 0:
		return fmt.Sprintf("the data of offset %d", int64(w^seed))
	default:
		return fmt.Sprintf("%#016x", w)
	}
}
