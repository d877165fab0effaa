package ost

import (
	"os"

	"golang.org/x/sys/unix"
)

// ObjectFS is what the OST does to its object files and their
// directories under DataDir/O, and nothing more: a seam, as Pebble's vfs
// is for the index, through which a test can cut the power of the object
// files (TestObjectPowerLoss) as vfs.NewCrashableMem cuts the index's.
//
// Every change to an object goes through it, so that a crashable
// implementation can tell what was made durable and what was not. What
// only a real descriptor can do and that changes no byte, size or name
// (FIEMAP, SEEK_DATA/SEEK_HOLE, fstat, statx, sync_file_range's
// write-out, splice) uses ObjectFile.Fd, which every implementation must
// back with a real file.
//
// The index's reconcile (index.go) still reads the directories and the
// owner xattrs straight from the disk; a crashable implementation keeps
// the disk in the state it pretends to have, so that reading it is
// right.
type ObjectFS interface {
	// OpenFile opens an object file, as os.OpenFile: O_RDWR, with O_CREATE
	// to create the object, or O_WRONLY|O_DIRECT for the second
	// descriptor of NoCache writes (nocache.go).
	OpenFile(name string, flag int, perm os.FileMode) (ObjectFile, error)
	MkdirAll(dir string, perm os.FileMode) error
	Remove(name string) error
	ReadDir(dir string) ([]os.DirEntry, error)
	Stat(name string, st *unix.Stat_t) error
	Statfs(dir string, st *unix.Statfs_t) error
}

// ObjectFile is an open object file.
type ObjectFile interface {
	ReadAt(b []byte, off int64) (int, error)
	WriteAt(b []byte, off int64) (int, error)
	Truncate(size int64) error
	// Fallocate is fallocate(2): mode FALLOC_FL_KEEP_SIZE,
	// FALLOC_FL_PUNCH_HOLE or FALLOC_FL_ZERO_RANGE, as unix.Fallocate.
	Fallocate(mode uint32, off, size int64) error
	// Datasync makes the file's data and size durable (fdatasync) and,
	// on the journaling filesystems the OST runs on, its creation too: a
	// new file's directory entry is committed with, or before, its size.
	Datasync() error
	SetXattr(name string, value []byte) error
	// Fd is the real descriptor, for what changes nothing (see ObjectFS).
	Fd() uintptr
	Close() error
}

// DiskFS is the ObjectFS of the real filesystem, the default.
var DiskFS ObjectFS = diskFS{}

type diskFS struct{}

func (diskFS) OpenFile(name string, flag int, perm os.FileMode) (ObjectFile, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	// A conversion, not a wrapper: an *os.File is all the disk needs, and
	// a pointer in an interface costs no allocation.
	return (*diskFile)(f), nil
}

func (diskFS) MkdirAll(dir string, perm os.FileMode) error   { return os.MkdirAll(dir, perm) }
func (diskFS) Remove(name string) error                      { return os.Remove(name) }
func (diskFS) ReadDir(dir string) ([]os.DirEntry, error)     { return os.ReadDir(dir) }
func (diskFS) Stat(name string, st *unix.Stat_t) error       { return unix.Stat(name, st) }
func (diskFS) Statfs(dir string, st *unix.Statfs_t) error    { return unix.Statfs(dir, st) }
func (f *diskFile) ReadAt(b []byte, off int64) (int, error)  { return (*os.File)(f).ReadAt(b, off) }
func (f *diskFile) WriteAt(b []byte, off int64) (int, error) { return (*os.File)(f).WriteAt(b, off) }
func (f *diskFile) Truncate(size int64) error                { return (*os.File)(f).Truncate(size) }
func (f *diskFile) Datasync() error                          { return unix.Fdatasync(int(f.Fd())) }
func (f *diskFile) Fd() uintptr                              { return (*os.File)(f).Fd() }
func (f *diskFile) Close() error                             { return (*os.File)(f).Close() }

func (f *diskFile) Fallocate(mode uint32, off, size int64) error {
	return unix.Fallocate(int(f.Fd()), mode, off, size)
}

func (f *diskFile) SetXattr(name string, value []byte) error {
	return unix.Fsetxattr(int(f.Fd()), name, value, 0)
}

// diskFile is an object file on the disk: an *os.File.
type diskFile os.File
