package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/pkg/xattr"

	"github.com/stripefs/stripefs/wire"
)

// testdata/format5 is the data directory of a `stripefs up --mdts 2
// --osts 3` made by the build of commit cdb194a (MDT database format 5,
// OST index format 1: positional records), holding what each kind of
// record stores: a nested tree with an xattr, an access ACL and a hard
// link, a directory on MDT1, a directory striped over both MDTs, a file
// striped over three OSTs, a composite (PFL) file whose first component
// is on the MDT, a Data-on-MDT file, an erasure-coded file, a symlink, a
// FIFO, a sparse file and a file owned by uid 1000. Git keeps neither the
// object files' owner xattrs nor their holes; the servers were stopped
// cleanly, so the indexes' records are what is read. The files' bytes
// come from fixturePattern.

// fixturePattern is the content of the fixture's generated files: byte i
// of the file made with seed s.
func fixturePattern(n, s int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + i>>8 + s)
	}
	return b
}

// TestFormat5Fixture: a filesystem written by an older build opens with
// this one, converts its records (MDT format 6, OST index format 3) and
// serves everything it held; what is written after the conversion
// survives a restart.
func TestFormat5Fixture(t *testing.T) {
	data, mnt := filepath.Join(t.TempDir(), "data"), t.TempDir()
	must(t, os.CopyFS(data, os.DirFS("testdata/format5")))
	must(t, os.Chmod(filepath.Join(data, "stripefs.key"), 0o600)) // git keeps no modes but x
	for _, db := range []string{"mdt0/db", "mdt1/db", "ost0/index", "mdt0/dom/index"} {
		if f := storedFormat(t, filepath.Join(data, db)); f != map[bool]uint32{false: 5, true: 0}[isIndex(db)] {
			t.Fatalf("fixture %s holds format %d", db, f)
		}
	}
	cmd := startUp(t, data, mnt)
	p := func(name string) string { return filepath.Join(mnt, name) }
	want := map[string][]byte{
		"a/b/c/hello.txt": []byte("hello\n"),
		"hard":            []byte("hello\n"),
		"remote/f1":       []byte("on mdt1\n"),
		"dom":             []byte("small data on the mdt\n"),
		"wide":            fixturePattern(300000, 1),
		"pfl":             fixturePattern(400000, 2),
		"ec":              fixturePattern(200000, 3),
		"sparse":          make([]byte, 5000000),
	}
	for i := 1; i <= 6; i++ {
		want[fmt.Sprintf("striped/e%d", i)] = fmt.Appendf(nil, "entry %d\n", i)
	}
	// The directories striped and a/b/c gain an entry below; their
	// counts at first are these.
	entries := map[string]int{"striped": 6, "a/b/c": 1}
	check := func(stage string) {
		t.Helper()
		for name, data := range want {
			if got, err := os.ReadFile(p(name)); err != nil || !bytes.Equal(got, data) {
				t.Errorf("%s: %s: %d bytes (sha256 %x), %v; want %d bytes", stage, name, len(got), sha256.Sum256(got), err, len(data))
			}
		}
		var st, hst os.FileInfo
		st, err := os.Stat(p("a/b/c/hello.txt"))
		must(t, err)
		hst, err = os.Stat(p("hard"))
		must(t, err)
		if !os.SameFile(st, hst) || st.Mode().Perm() != 0o640 {
			t.Errorf("%s: hello.txt %v, hard link the same file: %v", stage, st.Mode(), os.SameFile(st, hst))
		}
		if v, err := xattr.Get(p("a/b/c/hello.txt"), "user.color"); err != nil || string(v) != "blue" {
			t.Errorf("%s: user.color %q %v", stage, v, err)
		}
		if v, err := xattr.Get(p("a"), "system.posix_acl_access"); err != nil || len(v) == 0 {
			t.Errorf("%s: a's access ACL %q %v", stage, v, err)
		}
		if l, err := os.Readlink(p("link")); err != nil || l != "a/b/c/hello.txt" {
			t.Errorf("%s: link → %q %v", stage, l, err)
		}
		if st, err := os.Lstat(p("fifo")); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
			t.Errorf("%s: fifo %v %v", stage, st, err)
		}
		var sys syscall.Stat_t
		if err := syscall.Stat(p("remote/f1"), &sys); err != nil || sys.Uid != 1000 || sys.Gid != 1000 {
			t.Errorf("%s: remote/f1 owned by %d:%d (%v)", stage, sys.Uid, sys.Gid, err)
		}
		for dir, n := range entries {
			if ents, err := os.ReadDir(p(dir)); err != nil || len(ents) != n {
				t.Errorf("%s: %s has %d entries (%v), want %d", stage, dir, len(ents), err, n)
			}
		}
	}
	check("after the conversion")
	// New records next to converted ones: a file in a converted
	// directory, one on MDT1, one in the striped directory, a mkdir.
	want["a/b/c/new"] = fixturePattern(70000, 4)
	want["remote/new"] = []byte("new on mdt1\n")
	want["striped/new"] = []byte("new in striped\n")
	must(t, os.Mkdir(p("newdir"), 0o755))
	want["newdir/f"] = fixturePattern(1000, 5)
	for _, name := range []string{"a/b/c/new", "remote/new", "striped/new", "newdir/f"} {
		writeFile(t, p(name), want[name])
	}
	entries["striped"]++
	entries["a/b/c"]++
	stopUp(t, cmd)
	for _, db := range []string{"mdt0/db", "mdt1/db", "ost0/index", "ost2/index", "mdt0/dom/index"} {
		if f := storedFormat(t, filepath.Join(data, db)); f != map[bool]uint32{false: 6, true: 3}[isIndex(db)] {
			t.Fatalf("%s holds format %d after the conversion", db, f)
		}
	}
	cmd = startUp(t, data, mnt)
	defer stopUp(t, cmd)
	check("after a restart")
}

// isIndex says whether a store is an OST index (an OST's, or the one of
// an MDT's Data-on-MDT store), not an MDT database.
func isIndex(dir string) bool { return strings.HasSuffix(dir, "/index") }

// storedFormat reads the format marker of an MDT database or an OST
// index (0: none).
func storedFormat(t *testing.T, dir string) uint32 {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true})
	must(t, err)
	defer db.Close()
	key := map[bool]string{false: "Mformat", true: "mformat"}[isIndex(dir)]
	v, closer, err := db.Get([]byte(key))
	if err == pebble.ErrNotFound {
		return 0
	}
	must(t, err)
	defer closer.Close()
	var f struct{ Format uint32 }
	must(t, wire.Unmarshal(v, &f))
	return f.Format
}
