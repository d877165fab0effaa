package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pkg/xattr"

	"github.com/stripefs/stripefs/proto"
)

// TestPFLEC: a composite layout whose last component is erasure-coded
// (-E 2M -c 1 -i 0 -E -1 --ec 2+1 -S 1M), through two mount processes:
// files written by one read exact by the other, including after its
// appends and a truncate into a row; an OST of the erasure-coded part
// killed (both mounts rebuild the rows they read, counted), then wiped
// and rebuilt; scrub and fsck clean at the end.
func TestPFLEC(t *testing.T) {
	c, mnts := coherent(t, 2)
	a, b := mnts[0], mnts[1]
	must(t, os.Mkdir(filepath.Join(a, "pec"), 0o755))
	// The plain component on OST 0, so the OST this test takes away
	// holds only units of rows, which parity covers.
	sfRun(t, c, "setstripe", "-E", "2M", "-c", "1", "-i", "0", "-E", "-1", "--ec", "2+1", "-S", "1M", filepath.Join(a, "pec"))
	comps := pflComps(t, c, filepath.Join(a, "pec"))
	if len(comps) != 2 || comps[1].Pattern != "ec" || comps[1].Count != 3 {
		t.Fatalf("directory default: %+v", comps)
	}
	sizes := []int64{1000, 2<<20 + 1, 5<<20 + 12345, 9 << 20}
	var files []ecFile
	for i, size := range sizes {
		files = append(files, writeECFile(t, filepath.Join(a, "pec", fmt.Sprintf("f%d", i)), size, 0, byte(i)))
	}
	files = append(files, writeECFile(t, filepath.Join(a, "pec", "holes"), 7<<20+3, 3<<20+5, 9))
	onB := func(fs []ecFile) []ecFile {
		out := slices.Clone(fs)
		for i := range out {
			out[i].path = filepath.Join(b, strings.TrimPrefix(out[i].path, a))
		}
		return out
	}
	verifyEC(t, "written by a, read by b", onB(files))

	// The small file has the plain component only; the others both, the
	// erasure-coded one on three distinct OSTs.
	if n := pflInit(t, c, files[0].path); n != 1 {
		t.Fatalf("a 1000-byte file has %d components instantiated", n)
	}
	ecOSTs := map[uint32]bool{}
	for _, f := range files[1:] {
		cs := pflComps(t, c, f.path)
		if len(cs) != 2 || cs[0].Flags != "init" || cs[1].Flags != "init" || !slices.Equal(cs[0].OSTs, []string{"0"}) || len(cs[1].OSTs) != 3 {
			t.Fatalf("%s: components %+v", f.path, cs)
		}
		for _, o := range cs[1].OSTs {
			n, err := strconv.Atoi(o)
			must(t, err)
			ecOSTs[uint32(n)] = true
		}
	}
	if v, err := xattr.Get(files[1].path, proto.LayoutXattr); err != nil || !strings.Contains(string(v), "extent=2097152-EOF stripe_count=3 stripe_size=1048576") || !strings.Contains(string(v), "ec=2+1") {
		t.Fatalf("lustre.lov: %q, %v", v, err)
	}

	// b appends across rows; a truncates one file into a row: each sees
	// the other's change at once.
	app := filepath.Join(b, "pec", "f2")
	fb, err := os.OpenFile(app, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	more := make([]byte, 3<<20+777)
	pattern(more, 0, 77)
	_, err = fb.Write(more)
	must(t, err)
	must(t, fb.Close())
	want := make([]byte, sizes[2])
	pattern(want, 0, 2)
	want = append(want, more...)
	if got := readFile(t, files[2].path); !bytes.Equal(got, want) {
		t.Fatalf("b's append, read by a: %d bytes, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	files[2].size, files[2].sum = int64(len(want)), sha256.Sum256(want)
	must(t, os.Truncate(files[3].path, 6<<20+4321))
	want = make([]byte, 9<<20)
	pattern(want, 0, 3)
	want = want[:6<<20+4321]
	files[3].size, files[3].sum = int64(len(want)), sha256.Sum256(want)
	verifyEC(t, "after b's append and a's truncate, by b", onB(files))
	verifyEC(t, "after b's append and a's truncate, by a", files)

	// An OST of the erasure-coded parts down: both mounts read every file.
	lost := -1
	for o := range ecOSTs {
		if o != 0 {
			lost = int(o)
			break
		}
	}
	if lost < 0 {
		t.Fatalf("the erasure-coded components are on OSTs %v", ecOSTs)
	}
	c.Kill9(c.OSTs[lost])
	verifyEC(t, fmt.Sprintf("ost%d killed, by a", lost), files)
	verifyEC(t, fmt.Sprintf("ost%d killed, by b", lost), onB(files))
	for _, m := range mnts {
		if n := clientCounter(t, m, "degraded_reads"); n == 0 {
			t.Fatalf("%s: no degraded reads counted with ost%d down", m, lost)
		}
	}
	c.Restart(c.OSTs[lost])

	// The OST comes back empty and is rebuilt from the others.
	c.Stop(c.OSTs[lost])
	must(t, os.RemoveAll(filepath.Join(c.Dir, fmt.Sprintf("ost%d", lost))))
	c.Restart(c.OSTs[lost])
	out := sfRun(t, c, "rebuild", "--ost", fmt.Sprint(lost), a)
	if !strings.Contains(out, " 0 unrecoverable") || strings.Contains(out, " 0 repaired") || !strings.Contains(out, "row 1: missing units") {
		t.Fatalf("rebuild (rows of the component from row 1, some repaired, none lost):\n%s", out)
	}
	if out := sfRun(t, c, "scrub", a); !strings.Contains(out, " 0 rows with findings") {
		t.Fatalf("scrub after rebuild:\n%s", out)
	}
	// With another OST of the rows down, the rebuilt units carry reads.
	for o := range ecOSTs {
		if o != 0 && int(o) != lost {
			c.Kill9(c.OSTs[o])
			verifyEC(t, fmt.Sprintf("ost%d rebuilt, ost%d killed", lost, o), onB(files))
			c.Restart(c.OSTs[o])
			break
		}
	}
	sfRun(t, c, "fsck", a)
}
