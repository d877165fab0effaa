package ost

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkObjectFileWriteAt is a 4 KiB write straight to an *os.File
// and through DiskFS, the seam's default: the seam must cost nothing
// measurable and allocate nothing.
func BenchmarkObjectFileWriteAt(b *testing.B) {
	data := pattern(4096, 1)
	p := filepath.Join(b.TempDir(), "obj")
	b.Run("os.File", func(b *testing.B) {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			if _, err := f.WriteAt(data, int64(i%64)*4096); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DiskFS", func(b *testing.B) {
		f, err := DiskFS.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			if _, err := f.WriteAt(data, int64(i%64)*4096); err != nil {
				b.Fatal(err)
			}
		}
	})
}
