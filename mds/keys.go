package mds

import (
	"encoding/binary"
	"hash/fnv"

	"github.com/stripefs/stripefs/proto"
)

// Key space of one MDT's Pebble database. One prefix byte per kind keeps
// each kind contiguous for scans.
const (
	pInode  = 'I' // I fid → inode
	pDirent = 'D' // D parent-fid hash name → dirent
	pXattr  = 'X' // X fid name → value
	pOrphan = 'O' // O fid → nothing: unlinked, still open
	pMeta   = 'M' // M name → MDT state (FID allocator, cluster map)
)

var (
	keySeq    = []byte("Mseq")
	keyConfig = []byte("Mconfig")
)

func inodeKey(f proto.FID) []byte {
	k := f.Key()
	return append([]byte{pInode}, k[:]...)
}

func orphanKey(f proto.FID) []byte {
	k := f.Key()
	return append([]byte{pOrphan}, k[:]...)
}

// direntPrefix is the common prefix of a directory's entries.
func direntPrefix(dir proto.FID) []byte {
	k := dir.Key()
	return append([]byte{pDirent}, k[:]...)
}

// direntKey orders a directory's entries by name hash: the hash is the
// readdir cookie, stable whatever is inserted or removed meanwhile (the
// approach of ext4 htree and Lustre), and a lookup is one point read.
func direntKey(dir proto.FID, name string) []byte {
	b := direntPrefix(dir)
	b = binary.BigEndian.AppendUint64(b, nameHash(name))
	return append(b, name...)
}

// cookieKey is the first key of dir with a hash at or above cookie.
func cookieKey(dir proto.FID, cookie uint64) []byte {
	return binary.BigEndian.AppendUint64(direntPrefix(dir), cookie)
}

// firstCookie is the smallest entry cookie: 1 and 2 are "." and "..".
const firstCookie = 3

// nameHash is a 63-bit FNV-1a hash kept clear of the cookies that "." and
// ".." use, and of the top bit (some callers treat offsets as signed).
func nameHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	v := h.Sum64() >> 1
	if v < firstCookie {
		v += firstCookie
	}
	return v
}

func xattrPrefix(f proto.FID) []byte {
	k := f.Key()
	return append([]byte{pXattr}, k[:]...)
}

func xattrKey(f proto.FID, name string) []byte {
	return append(xattrPrefix(f), name...)
}

// prefixEnd returns the smallest key after every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
