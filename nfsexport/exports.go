package nfsexport

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pkg/xattr"

	"github.com/stripefs/stripefs/internal/mountinfo"
	"github.com/stripefs/stripefs/internal/targets"
	"github.com/stripefs/stripefs/stats"
)

// Export is a FUSE mount of stripefs as kernel nfsd should export it.
type Export struct {
	Mountpoint string
	FSName     string // the filesystem's name, from the cluster map
	MGS        string
	FSID       uint32   // see FSID
	Options    []string // the mount's options, as /proc/self/mountinfo shows them
}

// FSID is the number nfsd puts into file handles to name the filesystem.
// FUSE filesystems have no device number or UUID that stays the same
// across remounts, so without fsid= a remount would make every handle
// held by an NFS client stale. It is derived from the filesystem name and
// the MGS address: the same filesystem gets the same number on every
// host, and two filesystems on one host differ (with 2^31 values,
// collisions are unlikely but possible: exportfs refuses duplicates).
func FSID(fsname, mgs string) uint32 {
	h := fnv.New32a()
	io.WriteString(h, fsname)
	io.WriteString(h, "\x00")
	io.WriteString(h, mgs)
	id := h.Sum32() & 0x7fffffff // some tools parse fsid= as a signed int
	if id == 0 {
		id = 1 // fsid=0 is NFSv4's pseudo-root
	}
	return id
}

// Inspect describes the stripefs mount at mnt, asking its MGS for the
// filesystem's name.
func Inspect(ctx context.Context, mnt string) (*Export, error) {
	abs, err := filepath.Abs(mnt)
	if err != nil {
		return nil, fmt.Errorf("nfsexport: %s: %w", mnt, err)
	}
	mgs, err := xattr.Get(abs, stats.MGSXattr)
	if err != nil {
		return nil, fmt.Errorf("nfsexport: %s is not a stripefs mount: %w", abs, err)
	}
	e := &Export{Mountpoint: abs, MGS: string(mgs)}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("nfsexport: %w", err)
	}
	defer f.Close()
	point, opts, found, err := findMount(f, abs)
	if err != nil {
		return nil, fmt.Errorf("nfsexport: /proc/self/mountinfo: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("nfsexport: %s is inside a stripefs mount, not its mount point (%s): nfsd exports mount points", abs, point)
	}
	e.Options = opts
	cfg, err := targets.Map(ctx, e.MGS, "nfsexport", 0)
	if err != nil {
		return nil, fmt.Errorf("nfsexport: %w", err)
	}
	e.FSName = cfg.FSName
	e.FSID = FSID(e.FSName, e.MGS)
	return e, nil
}

// findMount looks for the FUSE mount whose mount point is dir; when dir is
// only inside one, point is the deepest mount point above it.
func findMount(r io.Reader, dir string) (point string, opts []string, found bool, err error) {
	mounts, err := mountinfo.Parse(r)
	for _, m := range mounts {
		if !strings.HasPrefix(m.FSType, "fuse") {
			continue
		}
		if m.Point == dir {
			for _, o := range slices.Concat(m.Options, m.Super) {
				if !slices.Contains(opts, o) {
					opts = append(opts, o)
				}
			}
			return m.Point, opts, true, err
		}
		if strings.HasPrefix(dir, m.Point+"/") && len(m.Point) > len(point) {
			point = m.Point
		}
	}
	return point, nil, false, err
}

// Line is the /etc/exports entry for clients (a host, network or "*"),
// with comments that explain its choices.
func (e *Export) Line(clients string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# stripefs filesystem %q (MGS %s), FUSE mount at %s\n", e.FSName, e.MGS, e.Mountpoint)
	fmt.Fprintf(&b, "# mount options: %s\n", strings.Join(e.Options, ","))
	if !slices.Contains(e.Options, "allow_other") {
		b.WriteString("# WARNING: mounted without allow_other: FUSE refuses nfsd's requests for any user\n" +
			"#   but the one who mounted. Remount with -o allow_other.\n")
	}
	b.WriteString("# fsid: derived from the filesystem name and MGS, the same on every host. FUSE has no\n" +
		"#   stable device number, so without it a remount makes every client's file handle stale.\n" +
		"#   With it, handles (FID-derived inode numbers) survive remounts and server restarts.\n")
	b.WriteString("# sync: nfsd syncs before it answers COMMIT or a stable WRITE (fsync: each object on\n" +
		"#   its OST, the size on the MDT). Clients write UNSTABLE and COMMIT at close, so bulk\n" +
		"#   writes still go through the mount's write-back cache (--max-dirty-mb, --rpcs-in-flight).\n" +
		"#   async answers before the data is anywhere durable: a crash of this host then loses\n" +
		"#   writes the clients were told are safe. Keep sync.\n")
	b.WriteString("# no_subtree_check: handles name files by FID, and renames must not make them stale.\n")
	b.WriteString("# Writes: the mount takes FUSE writes of up to 1 MiB (max_write), nfsd's largest; a WRITE\n" +
		"#   whose first page is partial is merged with its neighbours by file offset, never read.\n")
	point := e.Mountpoint
	if strings.ContainsAny(point, " \t\"") {
		point = strconv.Quote(point)
	}
	fmt.Fprintf(&b, "%s %s(rw,sync,no_subtree_check,fsid=%d)\n", point, clients, e.FSID)
	return b.String()
}
