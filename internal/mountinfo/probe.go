package mountinfo

import (
	"errors"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// IsMountPoint says whether something is mounted on dir: its device
// differs from its parent's, or it can no longer be reached (a FUSE mount
// whose daemon died answers ENOTCONN).
func IsMountPoint(dir string) bool {
	var st, parent unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return errors.Is(err, unix.ENOTCONN)
	}
	if err := unix.Stat(filepath.Dir(dir), &parent); err != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// IsFUSE says whether dir is the root of a live FUSE mount (not the empty
// directory under it that a failed mount leaves).
func IsFUSE(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.FUSE_SUPER_MAGIC && IsMountPoint(dir)
}

// Stale says whether dir is a FUSE mount whose daemon is gone
// ("transport endpoint is not connected").
func Stale(dir string) bool {
	var st unix.Stat_t
	return errors.Is(unix.Stat(dir, &st), unix.ENOTCONN)
}

// LazyUnmount detaches whatever is mounted on dir (umount -l): through
// fusermount3 (or fusermount) where installed, so that it works without
// root for the user's own FUSE mounts, else directly.
func LazyUnmount(dir string) {
	for _, prog := range []string{"fusermount3", "fusermount"} {
		if exec.Command(prog, "-u", "-z", dir).Run() == nil {
			return
		}
	}
	_ = unix.Unmount(dir, unix.MNT_DETACH)
}
