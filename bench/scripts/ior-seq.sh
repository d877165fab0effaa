#!/bin/sh
# ior-seq.sh: run real IOR (sequential, file per process) and mdtest over
# MPI on a directory, e.g. a stripefs mount, for comparison with
# `stripefs bench baseline` (which needs neither MPI nor IOR).
#
# Usage: ior-seq.sh DIR [NPROCS]
#   DIR      directory on the filesystem under test (must exist)
#   NPROCS   MPI ranks (default 4); add hosts with MPIRUN_ARGS="--hostfile hosts"
# Environment: BLOCK (per-rank file size, default 1g), XFER (default 1m),
#   FILES (mdtest files per rank, default 10000), MPIRUN (default mpirun).
# Needs ior and mdtest (https://github.com/hpc/ior) and an MPI on PATH.
set -eu
[ $# -ge 1 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
DIR=$1 NP=${2:-4}
BLOCK=${BLOCK:-1g} XFER=${XFER:-1m} FILES=${FILES:-10000} MPIRUN=${MPIRUN:-mpirun}
[ -d "$DIR" ] || { echo "ior-seq.sh: $DIR is not a directory" >&2; exit 2; }
for p in "$MPIRUN" ior mdtest; do
	command -v "$p" >/dev/null || { echo "ior-seq.sh: $p not found" >&2; exit 2; }
done
# As root, Open MPI also wants --allow-run-as-root.
[ "$(id -u)" -ne 0 ] || case $("$MPIRUN" --version 2>&1) in *"Open MPI"*) MPIRUN_ARGS="${MPIRUN_ARGS:-} --allow-run-as-root" ;; esac

# -w -r: write then read; -F: file per process; -e: fsync after writing;
# -C: read back another rank's file, defeating the client page cache.
# shellcheck disable=SC2086
$MPIRUN ${MPIRUN_ARGS:-} -np "$NP" ior -a POSIX -w -r -C -e -F -t "$XFER" -b "$BLOCK" -o "$DIR/ior.dat"
rm -f "$DIR"/ior.dat*

# -F: files only; create, stat and remove FILES files per rank.
# shellcheck disable=SC2086
$MPIRUN ${MPIRUN_ARGS:-} -np "$NP" mdtest -F -n "$FILES" -d "$DIR/mdtest"
