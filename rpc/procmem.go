package rpc

import (
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
)

// ProcessCounters are what the process answering a stats request holds
// in memory: its resident set (what the kernel charges it) and the Go
// heap's live objects. Several targets in one process (stripefs up)
// report the same process_pid, so a tool counts their memory once.
func ProcessCounters() []Counter {
	out := []Counter{{Name: "process_pid", Value: int64(os.Getpid())}}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if pages, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				out = append(out, Counter{Name: "process_rss_bytes", Value: pages * int64(os.Getpagesize())})
			}
		}
	}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		out = append(out, Counter{Name: "go_heap_bytes", Value: int64(s[0].Value.Uint64())})
	}
	return out
}
