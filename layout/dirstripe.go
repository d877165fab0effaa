package layout

import "hash/fnv"

// Striped directories: which stripe a name lives in, and the readdir
// cookies of a directory read stripe after stripe.

// DirHashFNV1a64 is the name hash of striped directories, Lustre's
// LMV_HASH_TYPE_FNV_1A_64: stripe = fnv1a64(name) mod stripe count.
const DirHashFNV1a64 = "fnv_1a_64"

// DirStripe returns the stripe of a directory striped over count stripes
// that name belongs to.
func DirStripe(name string, count int) int {
	if count <= 1 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return int(h.Sum64() % uint64(count))
}

// A striped directory's readdir cookie holds the stripe index and the
// stripe's own cookie, so a cookie stays valid while entries come and go
// anywhere (telldir/seekdir, NFS cookies), like a plain directory's.
//
// A stripe's own cookie is its MDT's 63-bit name hash (3 and up; 1 and 2
// are "." and ".."). Bit 63 stays clear (some callers treat offsets as
// signed), the next dirCookieStripeBits hold the stripe, and the rest the
// top of the stripe's cookie, plus 3 so that no entry's cookie is 0 (the
// start), 1 or 2 ("." and "..", which only stripe 0 gives, once). Keeping
// the top bits keeps the order within a stripe; two names of one stripe
// whose hashes agree in all of them share a cookie, as two names with
// one full hash do in a plain directory.
const (
	dirCookieStripeBits = 8 // proto.MaxMDTs stripes at most
	dirCookieLowBits    = 63 - dirCookieStripeBits
	dirCookieDrop       = dirCookieStripeBits + 1 // low bits of a stripe cookie not kept
	dirCookieFirst      = 3
)

// DirCookie returns the directory cookie of an entry that stripe returned
// with cookie c.
func DirCookie(stripe int, c uint64) uint64 {
	if stripe == 0 && c < dirCookieFirst {
		return c // "." and ".."
	}
	return uint64(stripe)<<dirCookieLowBits | (c>>dirCookieDrop + dirCookieFirst)
}

// SplitDirCookie reverses DirCookie for resuming: the stripe to read and
// the cookie to pass it, which makes the stripe return the entries after
// the one that had cookie c (the next stripe's first ones once this is
// exhausted is the caller's business). Cookie 0 starts at stripe 0 with
// "." and "..".
func SplitDirCookie(c uint64) (stripe int, after uint64) {
	if c < dirCookieFirst {
		return 0, c
	}
	stripe = int(c >> dirCookieLowBits)
	low := c & (1<<dirCookieLowBits - 1)
	if low < dirCookieFirst {
		return stripe, 2 // no entry has this cookie: the stripe's start, past "." and ".."
	}
	return stripe, (low-dirCookieFirst)<<dirCookieDrop | (1<<dirCookieDrop - 1)
}
