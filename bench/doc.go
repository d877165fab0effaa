// Package bench holds the stripefs benchmarks and their orchestration;
// `stripefs bench` only wires flags to them. Each takes a config, returns
// a result that prints as a table or as one JSON object, and stops when
// its context ends.
//
// On any directory (a stripefs mount, another filesystem, a mount of
// another client):
//   - IOR: IOR's access patterns without MPI (tasks are goroutines):
//     file per process or segmented shared file, -C reordering, random
//     offsets, fsync, verification (ior.go).
//   - Mdtest: mdtest's create/stat/read/remove phases of directories and
//     files, shared or unique directories, mdtest-hard's -w/-e (mdtest.go).
//   - SeqIO and Meta: one sequential write/read pass and one
//     create/stat/remove pass, the baseline's two measures.
//   - NFSWrite: the third field report's unaligned O_DIRECT pwritev
//     pattern against aligned writes (nfswrite.go).
//   - Scale: create rate per step as one directory grows, with each
//     process's memory (scale.go).
//
// Comparisons that need a stripefs mount or its servers:
//   - Baseline: a whole `stripefs up` against a plain go-fuse loopback
//     mount of the same disk, both run as child processes (baseline.go,
//     through internal/child).
//   - DNE: local against remote mkdir, with and without remote_sync, and
//     file metadata on one MDT against round-robin (dne.go).
//   - EC: an erasure-coded layout against a plain one as wide (ec.go).
//   - Survey: obdfilter-survey's OST write/rewrite/read rates (survey.go).
//   - ThroughRewrite: rewrite against first write (through.go).
//   - RPCs: the round trips of each common operation, from the client's
//     counters (rpcs.go).
//
// Between two mounts (two clients): PingPong (lock hand-offs of a shared
// block), FlockBench (fcntl lock hand-offs) and Takeover (the pause a
// mount's daemon handover causes).
//
// Report, Meter (progress) and the plots (plot.go) are shared by all.
package bench
