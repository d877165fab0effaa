package fusefs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultReadAheadKB is the kernel read-ahead window a mount asks for:
// one FUSE request's worth (MaxWrite, 1 MiB), so a sequential reader's
// pages come in 1 MiB reads, stripe-unit sized, instead of the 128 KiB
// the kernel gives a FUSE mount's bdi by default (Lustre's llite reads
// ahead far more). Larger windows send several 1 MiB reads at once; the
// cost is read-around on mmap page faults, which fetch this much.
const DefaultReadAheadKB = 1024

// SetReadAhead sets the read-ahead window of the mount at dir through its
// bdi's read_ahead_kb in sysfs, which needs root. The kernel takes at most
// the window the mount negotiated at INIT, so the sysfs knob is the only
// way past 128 KiB.
func SetReadAhead(dir string, kb int) error {
	dev, err := mountDevice(dir)
	if err != nil {
		return err
	}
	p := filepath.Join("/sys/class/bdi", dev, "read_ahead_kb")
	if err := os.WriteFile(p, []byte(strconv.Itoa(kb)), 0); err != nil {
		return fmt.Errorf("read_ahead_kb=%d: %w", kb, err)
	}
	return nil
}

// mountDevice is the device (major:minor) of the filesystem mounted at dir,
// from /proc/self/mountinfo rather than a stat of dir, which would wait
// on the mount's own server.
func mountDevice(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	dev := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// "36 35 98:0 /root /mnt/point rw,... - type source opts"
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 && unescapeMountinfo(fields[4]) == abs {
			dev = fields[2] // the last one: a later mount hides earlier ones
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if dev == "" {
		return "", fmt.Errorf("%s is not in /proc/self/mountinfo", abs)
	}
	return dev, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) the
// kernel writes in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
