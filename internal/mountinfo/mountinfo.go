// Package mountinfo reads the kernel's table of mounts as a process sees
// them (/proc/self/mountinfo, proc(5)), and probes and detaches a single
// mount point (probe.go): the one place the commands, the benchmarks and
// the test cluster ask whether a directory is mounted.
package mountinfo

import (
	"bufio"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Mount is one line of the table.
type Mount struct {
	Dev     string   // major:minor of the filesystem (its bdi for FUSE)
	Point   string   // the mount point, unescaped
	Options []string // per-mount options (rw, nosuid…)
	FSType  string   // e.g. fuse.stripefs
	Super   []string // superblock options
}

// Read returns the mounts of this process, oldest first: of several
// mounts on one point, the last is the one seen.
func Read() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Parse reads a table in the mountinfo format, skipping lines it cannot
// make sense of.
func Parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		f := strings.Fields(sc.Text())
		sep := slices.Index(f, "-")
		if len(f) < 6 || sep < 6 || sep+3 >= len(f) {
			continue
		}
		out = append(out, Mount{Dev: f[2], Point: unescape(f[4]), Options: strings.Split(f[5], ","),
			FSType: f[sep+1], Super: strings.Split(f[sep+3], ",")})
	}
	return out, sc.Err()
}

// unescape undoes the kernel's octal escapes (\040 for a space…).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
