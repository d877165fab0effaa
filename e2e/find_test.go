package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// lines is a command's output as a sorted list of lines.
func lines(out string) []string {
	l := strings.Fields(out)
	slices.Sort(l)
	return l
}

// TestFindLikeFind runs stripefs find, walking and scanning the MDTs,
// beside find(1) on the same tree, for each predicate; --mdt and --ost,
// which find(1) has not, walking against scanning and against where the
// files were put.
func TestFindLikeFind(t *testing.T) {
	c, mnt := mount(t)
	top := filepath.Join(mnt, "t")
	must(t, os.Mkdir(top, 0o755))
	sfRun(t, c, "mkdir", "-i", "1", filepath.Join(top, "remote"))
	sfRun(t, c, "mkdir", "-c", "2", filepath.Join(top, "striped"))
	must(t, os.Mkdir(filepath.Join(top, "plain"), 0o755))
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{"", "remote", "striped", "plain"} {
		for i, size := range []int{0, 100, 5000, 2 << 20} {
			p := filepath.Join(top, d, "f"+string(rune('a'+i))+".txt")
			writeFile(t, p, make([]byte, size))
			if i%2 == 0 {
				must(t, os.Chtimes(p, old, old))
			}
		}
		must(t, os.Symlink("fa.txt", filepath.Join(top, d, "link")))
	}
	onOST2 := filepath.Join(top, "plain", "on2")
	sfRun(t, c, "setstripe", "-c", "1", "-i", "2", onOST2)
	writeFile(t, onOST2, []byte("x"))
	ref := filepath.Join(top, "ref")
	writeFile(t, ref, nil)
	mid := time.Now().Add(-30 * time.Minute)
	must(t, os.Chtimes(ref, mid, mid))

	for _, pred := range [][]string{
		nil,
		{"-name", "*.txt"},
		{"-name", "f?.txt", "-type", "f"},
		{"-type", "d"},
		{"-type", "l"},
		{"-size", "+4k"},
		{"-size", "-1k"},
		{"-size", "2M"},
		{"-size", "100c"},
		{"-newer", ref},
		{"-newer", ref, "-type", "f", "-size", "-3k"},
	} {
		out, err := exec.Command("find", append([]string{top}, pred...)...).Output()
		must(t, err)
		want := lines(string(out))
		for _, mode := range []string{"--walk", "--scan"} {
			got := lines(sfRun(t, c, append(append([]string{"find", top}, pred...), mode)...))
			if !slices.Equal(got, want) {
				t.Errorf("find %v %s: %d paths, find(1) %d:\n got %v\nwant %v", pred, mode, len(got), len(want), got, want)
			}
		}
	}
	for _, pred := range [][]string{{"--mdt", "1"}, {"--mdt", "0", "-type", "f"}, {"--ost", "2"}} {
		walk := lines(sfRun(t, c, append(append([]string{"find", top}, pred...), "--walk")...))
		scan := lines(sfRun(t, c, append(append([]string{"find", top}, pred...), "--scan")...))
		if !slices.Equal(walk, scan) {
			t.Errorf("find %v: walking %v, scanning %v", pred, walk, scan)
		}
	}
	remote := lines(sfRun(t, c, "find", top, "--mdt", "1", "--scan"))
	if !slices.Contains(remote, filepath.Join(top, "remote")) || !slices.Contains(remote, filepath.Join(top, "remote", "fb.txt")) ||
		slices.Contains(remote, filepath.Join(top, "fb.txt")) {
		t.Errorf("--mdt 1: %v, want the remote directory and its files, not the top's", remote)
	}
	if on2 := lines(sfRun(t, c, "find", top, "--ost", "2", "--scan")); !slices.Contains(on2, onOST2) {
		t.Errorf("--ost 2: %v, want %s among them", on2, onOST2)
	}
	// From the mount's root, stripefs find scans by default.
	out, err := exec.Command("find", mnt, "-name", "f?.txt").Output()
	must(t, err)
	if got := lines(sfRun(t, c, "find", mnt, "-name", "f?.txt")); !slices.Equal(got, lines(string(out))) {
		t.Errorf("find from the root: %v, find(1) %v", got, lines(string(out)))
	}
	if _, err := exec.Command(c.Bin, "find", top, "--pool", "x").Output(); err == nil {
		t.Error("--pool was accepted")
	}
}
