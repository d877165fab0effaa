package nfsexport

import (
	"encoding/hex"
	"fmt"
	"strings"
	"syscall"

	"github.com/stripefs/stripefs/proto"
)

// Paths and handles.
//
// go-nfs names every object by a path: Handler.FromHandle turns a file
// handle into a []string, go-nfs appends the names a client sends, and the
// billy.Filesystem receives the elements joined by its own Join. A stripefs
// file handle is the 16-byte FID key, so the "path" of a handle is made of
// tokens that name FIDs directly:
//
//	the root:        []                    joined ""
//	any other FID f: [up(f), at(f)]        joined "\x00^<hex>/\x00=<hex>"
//	a name under f:  [up(f), at(f), name]  joined "\x00^<hex>/\x00=<hex>/name"
//
// Resolution starts from the last token and looks up only the plain names
// after it, so decoding a handle needs neither a table nor an RPC, and a
// name under it costs one lookup. The up token exists for go-nfs's own
// handling of "..", which drops the last path element: what remains,
// [up(f)], resolves to f's parent directory.
//
// Clients cannot forge tokens: an element that is empty or holds "/" or
// NUL makes the whole path invalid (NFS names may hold neither), and a
// token after a plain name is refused.

const (
	tokenMark = "\x00"
	tokenAt   = '=' // the FID itself
	tokenUp   = '^' // the FID's parent directory
	tokenLen  = 2 + 32

	// badPath is what Join returns for elements no path may hold; every
	// operation on it fails with EINVAL.
	badPath = "\x00!"
)

// handleOf is the NFS file handle of fid: its 16-byte key.
func handleOf(fid proto.FID) []byte {
	k := fid.Key()
	return k[:]
}

// fidOfHandle decodes a file handle, refusing anything that is not a
// FID key of a plausible FID.
func fidOfHandle(fh []byte) (proto.FID, error) {
	if len(fh) != 16 {
		return proto.FID{}, fmt.Errorf("nfs: file handle of %d bytes, want 16: %w", len(fh), syscall.ESTALE)
	}
	fid, err := proto.FIDFromKey(fh)
	if err != nil || fid.IsZero() || fid.MDT() >= proto.MaxMDTs {
		return proto.FID{}, fmt.Errorf("nfs: file handle %x names no file: %w", fh, syscall.ESTALE)
	}
	return fid, nil
}

func token(kind byte, fid proto.FID) string {
	k := fid.Key()
	return tokenMark + string(kind) + hex.EncodeToString(k[:])
}

// pathOf is the go-nfs path of fid.
func pathOf(fid proto.FID) []string {
	if fid == proto.RootFID {
		return []string{}
	}
	return []string{token(tokenUp, fid), token(tokenAt, fid)}
}

// joinPath is billy's Join for these paths.
func joinPath(elems ...string) string {
	var b strings.Builder
	for i, e := range elems {
		if !validElem(e) {
			return badPath
		}
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(e)
	}
	return b.String()
}

// validElem accepts a well-formed token or a plain name.
func validElem(e string) bool {
	if strings.HasPrefix(e, tokenMark) {
		_, _, ok := parseToken(e)
		return ok
	}
	return e != "" && !strings.ContainsAny(e, "/\x00")
}

func parseToken(e string) (fid proto.FID, up bool, ok bool) {
	if len(e) != tokenLen || !strings.HasPrefix(e, tokenMark) || (e[1] != tokenAt && e[1] != tokenUp) {
		return proto.FID{}, false, false
	}
	k, err := hex.DecodeString(e[2:])
	if err != nil {
		return proto.FID{}, false, false
	}
	fid, err = fidOfHandle(k)
	if err != nil {
		return proto.FID{}, false, false
	}
	return fid, e[1] == tokenUp, true
}

// parsedPath is a joined path taken apart: where to start, and the names
// to look up from there.
type parsedPath struct {
	start proto.FID
	up    bool // start at start's parent
	names []string
}

// parsePath takes a joined path apart without any RPC.
func parsePath(p string) (parsedPath, error) {
	pp := parsedPath{start: proto.RootFID}
	if p == "" {
		return pp, nil
	}
	for _, e := range strings.Split(p, "/") {
		switch {
		case e == "":
			// A leading or doubled slash: go-nfs's callers never make one,
			// and the root-relative form "/a/b" means what it says.
		case strings.HasPrefix(e, tokenMark):
			fid, up, ok := parseToken(e)
			if !ok || len(pp.names) > 0 {
				return parsedPath{}, syscall.EINVAL
			}
			pp.start, pp.up = fid, up
		default:
			pp.names = append(pp.names, e)
		}
	}
	return pp, nil
}

// split separates the last name: the directory it lives in and the name.
// Paths that end in a token name no directory entry (EINVAL).
func (pp parsedPath) split() (dir parsedPath, name string, err error) {
	if len(pp.names) == 0 {
		return parsedPath{}, "", syscall.EINVAL
	}
	dir = pp
	dir.names = pp.names[:len(pp.names)-1]
	return dir, pp.names[len(pp.names)-1], nil
}

// showPath makes a joined path printable for error messages.
func showPath(p string) string {
	if p == "" {
		return "/"
	}
	var out []string
	for _, e := range strings.Split(p, "/") {
		fid, up, ok := parseToken(e)
		switch {
		case ok && up:
			out = []string{fid.String(), ".."} // a token restarts the path
		case ok:
			out = []string{fid.String()}
		case strings.HasPrefix(e, tokenMark):
			out = append(out, "<invalid>")
		default:
			out = append(out, e)
		}
	}
	return strings.Join(out, "/")
}
