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
	type file interface {
		WriteAt([]byte, int64) (int, error)
		Close() error
	}
	for _, bc := range []struct {
		name string
		open func() (file, error)
	}{
		{"os.File", func() (file, error) { return os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600) }},
		{"DiskFS", func() (file, error) { return DiskFS.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f, err := bc.open()
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
}
