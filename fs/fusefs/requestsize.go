package fusefs

import (
	"os"
	"strconv"
	"strings"
)

// DefaultMaxRequestKB is the largest FUSE read or write a mount asks the
// kernel for: 4 MiB, Lustre's RPC size for large I/O. A sequential
// reader or writer with large buffers then costs a quarter of the
// requests (and of the daemon's wake-ups) it would at 1 MiB, and each
// request covers several stripe units, which the client sends to their
// OSTs at once.
//
// The kernel grants at most /proc/sys/fs/fuse/max_pages_limit pages
// (Linux 6.13+; 256, 1 MiB, unless an administrator raises it; older
// kernels have no knob and stop at 1 MiB), so on a default system a
// mount gets 1 MiB requests whatever it asks.
const DefaultMaxRequestKB = 4096

// maxRequestKBLimit bounds -o max_request_kb: Lustre's largest RPC. The
// daemon keeps a buffer of this size for each request it reads at once.
const maxRequestKBLimit = 16 << 10

// maxPagesLimit is the sysctl that bounds a FUSE request.
const maxPagesLimit = "/proc/sys/fs/fuse/max_pages_limit"

// kernelMaxRequest is the largest FUSE request this kernel grants now, in
// bytes: max_pages_limit pages, or 1 MiB where the knob does not exist.
func kernelMaxRequest() int {
	pages := 256
	if b, err := os.ReadFile(maxPagesLimit); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			pages = n
		}
	}
	return pages * os.Getpagesize()
}

// RequestBytes is the FUSE request size a mount that asks for kb KiB
// gets from this kernel, as go-fuse negotiates it (MaxWrite, capped by
// max_pages_limit): reads, writes and the read-ahead window go in
// pieces of this size.
func RequestBytes(kb int) int {
	return min(kb<<10, kernelMaxRequest())
}
