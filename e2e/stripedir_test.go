package e2e

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/layout"
)

func lfs(t *testing.T, c *testcluster.Cluster) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, err := exec.Command(c.Bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("stripefs %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
}

// dirent is one entry getdents64 returned, with its d_off cookie.
type dirent struct {
	name string
	off  int64
}

// readDirents reads fd from its current position with getdents64 in
// small batches, up to max entries (0: to the end), so that the cookies
// the kernel hands back are the daemon's.
func readDirents(t *testing.T, fd int, max int) []dirent {
	t.Helper()
	var out []dirent
	buf := make([]byte, 1024)
	for {
		n, err := unix.Getdents(fd, buf)
		must(t, err)
		if n == 0 {
			return out
		}
		for b := buf[:n]; len(b) > 0; {
			reclen := int(binary.LittleEndian.Uint16(b[16:]))
			name := b[19:reclen]
			if i := strings.IndexByte(string(name), 0); i >= 0 {
				name = name[:i]
			}
			out = append(out, dirent{name: string(name), off: int64(binary.LittleEndian.Uint64(b[8:]))})
			b = b[reclen:]
		}
		if max > 0 && len(out) >= max {
			return out
		}
	}
}

// TestStripedDirectory drives a directory striped over both MDTs through
// the mount: entries spread over the MDTs by name, every name listed
// once, readdir cookies that survive entries coming and going, renames,
// rmdir refused until every stripe is empty, the -D -c default, and a
// clean fsck.
func TestStripedDirectory(t *testing.T) {
	c, mnt := mount(t)
	run := lfs(t, c)
	p := func(s string) string { return filepath.Join(mnt, s) }

	run("mkdir", "-c", "2", "-i", "1", p("s"))
	out := run("getdirstripe", p("s"))
	if !strings.Contains(out, "lmv_stripe_count: 2 lmv_stripe_offset: 1 lmv_hash_type: fnv_1a_64") {
		t.Fatalf("getdirstripe of a 2-stripe directory:\n%s", out)
	}
	var mdts []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 && strings.HasPrefix(f[1], "[") && !strings.HasPrefix(l, "master") {
			mdts = append(mdts, f[0])
		}
	}
	if strings.Join(mdts, ",") != "1,0" {
		t.Fatalf("stripes on MDTs %v, want 1,0:\n%s", mdts, out)
	}

	before := snapshot(t, mnt)
	const files, dirs = 2000, 50
	names := map[string]bool{}
	perStripe := [2]int{}
	for i := 0; i < files; i++ {
		n := fmt.Sprintf("f%04d", i)
		writeFile(t, p("s/"+n), nil)
		names[n] = true
		perStripe[layout.DirStripe(n, 2)]++
	}
	for i := 0; i < dirs; i++ {
		n := fmt.Sprintf("d%02d", i)
		must(t, os.Mkdir(p("s/"+n), 0o755))
		names[n] = true
	}
	after := snapshot(t, mnt)
	for i, want := range perStripe {
		mdt := fmt.Sprintf("mdt%d", 1-i) // stripe 0 is on MDT1
		got := after.Counter(mdt, "inodes") - before.Counter(mdt, "inodes")
		if got < int64(want) || got > int64(want+dirs) {
			t.Errorf("%s gained %d inodes; the %d files hashing to its stripe (and up to %d dirs) should be there", mdt, got, want, dirs)
		}
	}
	t.Logf("files per stripe: %v", perStripe)

	ents, err := os.ReadDir(p("s"))
	must(t, err)
	seen := map[string]int{}
	for _, e := range ents {
		seen[e.Name()]++
	}
	for n := range names {
		if seen[n] != 1 {
			t.Fatalf("%s listed %d times", n, seen[n])
		}
	}
	if len(seen) != len(names) {
		t.Fatalf("ls lists %d names, want %d", len(seen), len(names))
	}
	for n := range names {
		var st syscall.Stat_t
		must(t, syscall.Lstat(p("s/"+n), &st))
	}
	var st syscall.Stat_t
	must(t, syscall.Stat(p("s"), &st))
	if st.Nlink != 2+dirs {
		t.Fatalf("striped directory nlink %d, want %d", st.Nlink, 2+dirs)
	}
	if _, err := os.Stat(p("s/d07/../f0001")); err != nil {
		t.Fatalf(".. of a subdirectory of a striped directory: %v", err)
	}

	// Readdir with seekdir to saved cookies while entries come and go:
	// every name present throughout is seen exactly once.
	fd, err := unix.Open(p("s"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	first := readDirents(t, fd, 700)
	mid := first[len(first)/2]
	last := first[len(first)-1]
	for i := 0; i < 100; i++ { // 100 new, 100 of the old ones gone
		writeFile(t, p(fmt.Sprintf("s/new%03d", i)), nil)
		n := fmt.Sprintf("f%04d", 1000+i)
		must(t, os.Remove(p("s/"+n)))
		delete(names, n)
	}
	stable := func() map[string]bool {
		m := map[string]bool{".": true, "..": true}
		for n := range names {
			m[n] = true
		}
		return m
	}
	check := func(what string, upTo int64, parts ...[]dirent) {
		t.Helper()
		count := map[string]int{}
		for i, part := range parts {
			for _, e := range part {
				if i == 0 && e.off > upTo {
					break
				}
				count[e.name]++
			}
		}
		for n := range stable() {
			if count[n] != 1 {
				t.Fatalf("%s: %s seen %d times", what, n, count[n])
			}
		}
	}
	_, err = unix.Seek(fd, last.off, 0)
	must(t, err)
	check("resumed at the last cookie", last.off, first, readDirents(t, fd, 0))
	_, err = unix.Seek(fd, mid.off, 0)
	must(t, err)
	check("seekdir back to a middle cookie", mid.off, first, readDirents(t, fd, 0))
	unix.Close(fd)

	// Renames within it: two names on one stripe work now; names on two
	// stripes are TestStripedDirCrossStripeRename's.
	a, b := sameStripePair(2)
	writeFile(t, p("s/"+a), []byte("moved"))
	must(t, os.Rename(p("s/"+a), p("s/"+b)))
	if got := readFile(t, p("s/"+b)); string(got) != "moved" {
		t.Fatalf("renamed file reads %q", got)
	}
	must(t, os.Rename(p("s/d00"), p("s/"+pickStripe(layout.DirStripe("d00", 2), "d00x"))))

	wantErrno(t, "rmdir of a non-empty striped directory", syscall.Rmdir(p("s")), syscall.ENOTEMPTY)
	ents, err = os.ReadDir(p("s"))
	must(t, err)
	for _, e := range ents {
		must(t, os.Remove(p("s/"+e.Name()))) // unlink or rmdir, on whichever stripe
	}
	if ents, _ := os.ReadDir(p("s")); len(ents) != 0 {
		t.Fatalf("%d entries left", len(ents))
	}
	must(t, syscall.Stat(p("s"), &st))
	if st.Nlink != 2 {
		t.Fatalf("emptied striped directory nlink %d", st.Nlink)
	}
	must(t, syscall.Rmdir(p("s")))
	if _, err := os.Stat(p("s")); !os.IsNotExist(err) {
		t.Fatalf("striped directory still there: %v", err)
	}

	// -D -c 2: plain mkdir makes striped directories.
	must(t, os.Mkdir(p("def"), 0o755))
	run("setdirstripe", "-D", "-c", "2", p("def"))
	must(t, os.Mkdir(p("def/sub"), 0o750))
	if v := getxattr(t, p("def/sub"), "lustre.lmv"); !strings.Contains(v, "lmv_stripe_count=2") {
		t.Fatalf("mkdir under -D -c 2 made %q", v)
	}
	writeFile(t, p("def/sub/x"), []byte("x"))
	must(t, os.Mkdir(p("def/sub/y"), 0o755))
	must(t, syscall.Stat(p("def/sub"), &st))
	if st.Nlink != 3 || st.Mode&0o777 != 0o750 {
		t.Fatalf("striped subdirectory: nlink %d mode %o", st.Nlink, st.Mode&0o777)
	}

	// setdirstripe -c: an empty directory is made striped, a non-empty one refused.
	must(t, os.Mkdir(p("e"), 0o755))
	run("setdirstripe", "-c", "2", p("e"))
	if v := getxattr(t, p("e"), "lustre.lmv"); !strings.Contains(v, "lmv_stripe_count=2") {
		t.Fatalf("setdirstripe -c 2 on an empty directory made %q", v)
	}
	writeFile(t, p("e/f"), nil)
	for _, args := range [][]string{
		{"setdirstripe", "-c", "2", p("e")},     // not empty
		{"mkdir", "-c", "3", p("three")},        // more stripes than MDTs
		{"mkdir", "-c", "0", p("zero")},         // no stripes
		{"mkdir", "-c", "2", "-i", "2", p("x")}, // no MDT 2
		{"setdirstripe", "-D", "-c", "5", p("def")},
	} {
		out, err := exec.Command(c.Bin, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "invalid argument") {
			t.Fatalf("stripefs %v: %v\n%s", args, err, out)
		}
	}

	if out, err := exec.Command(c.Bin, "fsck", mnt).CombinedOutput(); err != nil {
		t.Fatalf("fsck after striped directories: %v\n%s", err, out)
	}
}

// TestStripedDirCrossStripeRename renames between names of one striped
// directory that live on different stripes, so on different MDTs: the
// client takes the cross-MDT rename path.
func TestStripedDirCrossStripeRename(t *testing.T) {
	c, mnt := mount(t)
	run := lfs(t, c)
	p := func(s string) string { return filepath.Join(mnt, s) }
	run("mkdir", "-c", "2", p("s"))
	a := pickStripe(0, "a")
	b := pickStripe(1, "b")
	writeFile(t, p("s/"+a), []byte("across"))
	must(t, os.Rename(p("s/"+a), p("s/"+b)))
	if got := readFile(t, p("s/"+b)); string(got) != "across" {
		t.Fatalf("renamed file reads %q", got)
	}
	if _, err := os.Stat(p("s/" + a)); !os.IsNotExist(err) {
		t.Fatalf("old name still there: %v", err)
	}
	must(t, os.Remove(p("s/"+b)))
	must(t, syscall.Rmdir(p("s")))
}

// pickStripe returns a name starting with prefix that hashes to stripe s
// of 2.
func pickStripe(s int, prefix string) string {
	for i := 0; ; i++ {
		n := fmt.Sprintf("%s%d", prefix, i)
		if layout.DirStripe(n, 2) == s {
			return n
		}
	}
}

// sameStripePair returns two names on one stripe of count.
func sameStripePair(count int) (string, string) {
	a := "ren-a"
	return a, pickStripe(layout.DirStripe(a, count), "ren-b")
}
