package fusefs

import (
	"bytes"
	"fmt"
	"log"
	"strconv"
	"strings"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stripefs/stripefs/fs"
)

// MountOptions are the options of a stripefs mount, parsed from -o the way
// mount(8) passes them.
type MountOptions struct {
	Options
	AllowOther         bool
	DefaultPermissions bool // let the kernel check mode bits, owners, groups, sticky dirs
	ReadOnly           bool
	FSName             string
	Debug              bool
	// ReadAheadKB is the kernel's read-ahead window for the mount
	// (readahead.go); 0 leaves the kernel's, ReadAheadOneRequest makes
	// it one FUSE request.
	ReadAheadKB int
	// MaxRequestKB (-o max_request_kb) is the largest FUSE read or write
	// the mount asks the kernel for (requestsize.go); 0 is the default.
	MaxRequestKB int
	// NoLocks (-o nolock) mounts without caching under locks: the kernel
	// page cache and close-to-open coherency, for comparison.
	NoLocks bool
	// SyncClose (-o sync_close) sends a small Data-on-MDT file's data at
	// close(2), as any other file's, so close(2) reports its write
	// errors; by default the release's close carries it (one round
	// trip fewer per small file; fs.Options.NoCloseWrite).
	SyncClose bool
	// NoACL (-o noacl) leaves POSIX ACLs out of the kernel: setfacl then
	// fails with EOPNOTSUPP on this mount, and the kernel checks modes
	// alone (the MDT still applies the ACLs other mounts set). It
	// follows from no_default_permissions, as the kernel enforces ACLs
	// only with its own permission checks.
	NoACL bool
}

// DefaultMountOptions are what a bare mount gets: one-second kernel caches
// (a minute for what a held lock guards) and kernel permission checks.
func DefaultMountOptions() MountOptions {
	return MountOptions{Options: Options{EntryTimeout: time.Second, AttrTimeout: time.Second, LockedTimeout: DefaultLockedTimeout}, DefaultPermissions: true,
		ReadAheadKB: ReadAheadOneRequest, MaxRequestKB: DefaultMaxRequestKB}
}

// ParseOptions applies a comma-separated -o string. Options mount(8) adds
// for every filesystem (rw, dev, suid, _netdev, noauto…) are accepted and
// ignored; unknown ones are an error, so a typo does not pass silently.
func (o *MountOptions) ParseOptions(s string) error {
	for _, opt := range strings.Split(s, ",") {
		k, v, hasV := strings.Cut(strings.TrimSpace(opt), "=")
		switch k {
		case "":
		case "allow_other":
			o.AllowOther = true
		case "default_permissions":
			o.DefaultPermissions = true
		case "no_default_permissions":
			o.DefaultPermissions = false
		case "ro":
			o.ReadOnly = true
		case "rw":
			o.ReadOnly = false
		case "debug":
			o.Debug = true
		case "nolock":
			o.NoLocks = true
		case "sync_close":
			if hasV {
				return fmt.Errorf("mount option sync_close takes no value, got %q", v)
			}
			o.SyncClose = true
		case "acl":
			o.NoACL = false
		case "noacl":
			o.NoACL = true
		case "flock":
			o.Flock = FlockCluster
		case "localflock":
			o.Flock = FlockLocal
		case "noflock":
			o.Flock = FlockNone
		case "attr_timeout", "entry_timeout", "locked_timeout":
			secs, err := strconv.ParseFloat(v, 64)
			if !hasV || err != nil || secs < 0 {
				return fmt.Errorf("mount option %s needs a number of seconds, got %q", k, v)
			}
			d := time.Duration(secs * float64(time.Second))
			switch k {
			case "attr_timeout":
				o.AttrTimeout = d
			case "entry_timeout":
				o.EntryTimeout = d
			default:
				o.LockedTimeout = d
			}
		case "fsname":
			o.FSName = v
		case "read_ahead_kb":
			kb, err := strconv.Atoi(v)
			if !hasV || err != nil || kb < 0 || kb > 1<<20 {
				return fmt.Errorf("mount option read_ahead_kb needs a number of KiB from 0 (the kernel's default) to 1048576, got %q", v)
			}
			o.ReadAheadKB = kb
		case "max_request_kb":
			kb, err := strconv.Atoi(v)
			if !hasV || err != nil || kb < 4 || kb > maxRequestKBLimit {
				return fmt.Errorf("mount option max_request_kb needs a number of KiB from 4 to %d, got %q", maxRequestKBLimit, v)
			}
			o.MaxRequestKB = kb
		case "dev", "nodev", "suid", "nosuid", "exec", "noexec", "auto", "noauto", "user", "nouser",
			"users", "_netdev", "nofail", "defaults", "async", "atime", "noatime", "relatime", "x-systemd.automount":
		default:
			return fmt.Errorf("unknown mount option %q", k)
		}
	}
	if !o.DefaultPermissions {
		// The kernel then checks nothing on a path walk through names it
		// caches: every walk asks the MDT, which checks search rights.
		o.EntryTimeout = 0
	}
	return nil
}

// Mount mounts c at dir and starts serving. The caller waits on the
// returned server and unmounts it.
func Mount(c *fs.Client, dir string, o MountOptions) (*fuse.Server, error) {
	srv, _, err := MountFS(c, dir, o)
	return srv, err
}

// MountFS is Mount that also returns the FUSE mapping it serves (for a
// takeover, takeover.go).
func MountFS(c *fs.Client, dir string, o MountOptions) (*fuse.Server, *FS, error) {
	mo := fuseOptions(c, o)
	fsys := New(c, o.Options)
	fsys.request = mo.MaxWrite
	srv, err := fuse.NewServer(fsys, dir, mo)
	if err != nil {
		return nil, nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	fsys.SetServer(srv)
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	if ra := o.readAheadKB(mo.MaxWrite); ra > 0 {
		if err := SetReadAhead(dir, ra); err != nil {
			// Not fatal: reads work, in the kernel's 128 KiB pieces.
			log.Printf("stripefs: %s: kernel read-ahead window left as it was: %v", dir, err)
		}
	}
	return srv, fsys, nil
}

// fuseOptions are go-fuse's options for a mount of c with o: the same for
// a mount and for a takeover of one, whose kernel agreed to them.
func fuseOptions(c *fs.Client, o MountOptions) *fuse.MountOptions {
	mo := &fuse.MountOptions{
		AllowOther:    o.AllowOther,
		FsName:        o.FSName,
		Name:          "stripefs",
		MaxWrite:      o.Request(),
		MaxReadAhead:  1 << 20,
		MaxBackground: 64,
		Debug:         o.Debug,
		// POSIX ACLs: the kernel enforces them, caching each inode's
		// (dropped with the inode's attributes when a lock is called
		// back), and sends us the mode and umask unmasked (DONT_MASK) so
		// that the MDT applies a directory's default ACL in place of the
		// umask, as a local filesystem does.
		EnableAcl: !o.NoACL && o.DefaultPermissions,
		// Replies in memory are written as they are (dataResult offers
		// slices, which go-fuse never splices); only object files an OST
		// in this process lends (fileResult, stripefs up) are spliced,
		// page-cache to FUSE device, as a loopback mount's reads are.
		DisableSplice: false,
		// Export support lets the kernel turn a file handle back into a
		// node it has forgotten (LOOKUP of "." and ".."): what kernel nfsd
		// and open_by_handle_at need to re-export the mount. Node ids are
		// FID-derived, so any id the kernel presents can be answered.
		//
		// Async direct I/O lets the kernel send every request of one
		// O_DIRECT call at once instead of one after another (libfuse's
		// default too). nfsd's 1 MiB vector [3500-byte head, 255 pages,
		// 596-byte tail] spans 257 pages and reaches us as two requests;
		// in flight together, the 596-byte one costs little more than its
		// copy (bench nfswrite --through: nfs/aligned medians 0.95-0.96
		// without it, 1.01-1.06 with it).
		ExtraCapabilities: fuse.CAP_EXPORT_SUPPORT | fuse.CAP_ASYNC_DIO | fuse.CAP_DONT_MASK,
		// fcntl, OFD and flock locks come to us (flock.go), unless the
		// mount leaves them to this kernel (-o localflock).
		EnableLocks: o.Flock != FlockLocal,
	}
	if mo.FsName == "" {
		mo.FsName = "stripefs"
	}
	mo.Logger = log.New(fuseLog{}, "", 0)
	if o.DefaultPermissions {
		mo.Options = append(mo.Options, "default_permissions")
	}
	if o.ReadOnly {
		mo.Options = append(mo.Options, "ro")
	}
	if c.Coherent() {
		// Pages a program maps are the only file data the kernel caches
		// under locks (the rest is FOPEN_DIRECT_IO); they are dropped when
		// the lock goes, like the rest of the kernel's caches.
		mo.ExtraCapabilities |= fuse.CAP_DIRECT_IO_ALLOW_MMAP
	}
	return mo
}

// Request is the FUSE request size, in bytes, a mount with o gets from
// this kernel now.
func (o MountOptions) Request() int { return RequestBytes(o.requestKB()) }

// requestKB is the FUSE request size o asks for.
func (o MountOptions) requestKB() int {
	if o.MaxRequestKB == 0 {
		return DefaultMaxRequestKB
	}
	return o.MaxRequestKB
}

// readAheadKB is the read-ahead window o sets on a mount whose FUSE
// requests are request bytes.
func (o MountOptions) readAheadKB(request int) int {
	if o.ReadAheadKB == ReadAheadOneRequest {
		return request >> 10
	}
	return o.ReadAheadKB
}

// fuseLog takes go-fuse's log lines to the log package, less the EAGAIN
// each of its read loops reports as it ends for a takeover (takeover.go).
type fuseLog struct{}

func (fuseLog) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte("Failed to read from fuse conn: 11=")) {
		_ = log.Output(4, string(p))
	}
	return len(p), nil
}
