package fusefs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/stripefs/stripefs/internal/mountinfo"
)

// ReadAheadOneRequest, a mount's default ReadAheadKB, makes the kernel's
// read-ahead window one FUSE request's worth (MaxWrite: 1 MiB, or up to
// 4 MiB where the kernel allows, requestsize.go), so a sequential
// reader's pages come in whole requests instead of the 128 KiB the
// kernel gives a FUSE mount's bdi by default (Lustre's llite reads ahead
// far more). Larger windows send several requests at once; the cost is
// read-around on mmap page faults, which fetch this much.
const ReadAheadOneRequest = -1

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
	mounts, err := mountinfo.Read()
	if err != nil {
		return "", err
	}
	dev := ""
	for _, m := range mounts {
		if m.Point == abs {
			dev = m.Dev // the last one: a later mount hides earlier ones
		}
	}
	if dev == "" {
		return "", fmt.Errorf("%s is not in /proc/self/mountinfo", abs)
	}
	return dev, nil
}
