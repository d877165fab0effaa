#!/bin/sh
# dne-servers.sh: run `stripefs bench dne` with each MDT in a server
# process of its own, as on separate metadata servers (the shape of the
# first field report), instead of all in one `stripefs up` process.
#
# Usage: dne-servers.sh [BENCH-DNE-FLAGS...]   e.g. --json, --rounds 15
# Environment: STRIPEFS (default: stripefs on PATH, else ./bin/stripefs),
#   PORT (first TCP port, default 19400; MDTs take PORT and PORT+1, the OST
#   PORT+100), WORK (scratch directory, default a fresh one under /tmp),
#   PIN=1 (mdt1 on CPU 1, everything else on CPU 0, with taskset: the
#   participant as on a server of its own, on a 2-core host).
# Needs root or fuse access, and the ports free on 127.0.0.1.
set -eu
if [ -z "${STRIPEFS:-}" ]; then
	STRIPEFS=$(command -v stripefs || echo ./bin/stripefs)
fi
[ -x "$STRIPEFS" ] || { echo "dne-servers.sh: $STRIPEFS not found (make build)" >&2; exit 2; }
PORT=${PORT:-19400}
WORK=${WORK:-$(mktemp -d /tmp/dne-servers.XXXXXX)}
MGS=127.0.0.1:$PORT
mkdir -p "$WORK/mdt0" "$WORK/mdt1" "$WORK/ost0" "$WORK/mnt"
pids=""
cleanup() {
	fusermount3 -uz "$WORK/mnt" 2>/dev/null || true
	# shellcheck disable=SC2086
	[ -z "$pids" ] || kill $pids 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
cpus() { # name: the taskset prefix for it under PIN=1
	[ "${PIN:-}" = 1 ] || return 0
	if [ "$1" = mdt1 ]; then echo "taskset -c 1"; else echo "taskset -c 0"; fi
}
start() { # name, then the command's arguments
	name=$1
	shift
	# shellcheck disable=SC2046
	$(cpus "$name") "$STRIPEFS" "$@" >"$WORK/$name.log" 2>&1 &
	pids="$pids $!"
}
wait_for() { # what, test...
	what=$1
	shift
	i=0
	until "$@" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 100 ]; then
			echo "dne-servers.sh: $what did not come up; its log:" >&2
			cat "$WORK"/*.log >&2
			exit 1
		fi
		sleep 0.1
	done
}
ready() { grep -q "ready on" "$WORK/$1.log"; }
start mdt0 mds --index 0 --data "$WORK/mdt0" --listen "$MGS" --recovery-window 1s
wait_for mdt0 ready mdt0
start mdt1 mds --index 1 --data "$WORK/mdt1" --listen "127.0.0.1:$((PORT + 1))" --mgs "$MGS" --recovery-window 1s
start ost0 ost --index 0 --data "$WORK/ost0" --listen "127.0.0.1:$((PORT + 100))" --mgs "$MGS"
wait_for mdt1 ready mdt1
wait_for ost0 ready ost0
start mount mount --mgs "$MGS" "$WORK/mnt"
wait_for mount mountpoint -q "$WORK/mnt"
# shellcheck disable=SC2046
$(cpus bench) "$STRIPEFS" bench dne --mount "$WORK/mnt" "$@"
