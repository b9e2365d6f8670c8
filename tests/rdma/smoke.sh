#!/usr/bin/env bash
# smoke.sh - check that the RDMA test VM gives real kernel verbs: rxe0 is
# listed, RLIMIT_MEMLOCK is unlimited, rping and an RDMA-write benchmark pass
# over rdma_cm on the loopback address, and /dev/fuse exists.
#
#   tests/rdma/smoke.sh     on the host: boots the VM and runs itself inside
#                           (scripts/rdma-vm.sh run); inside: runs the checks
# Exits 0 if every check passed, 1 otherwise (124/125 from the VM harness).
set -u

if [ "${RPFS_IN_VM:-}" != 1 ]; then
	here=$(cd "$(dirname "$0")" && pwd)
	exec "$here/../../scripts/rdma-vm.sh" run --timeout 300 -- "$here/smoke.sh"
fi

DEV=${RPFS_RDMA_DEV:-rxe0}
ADDR=${RPFS_RDMA_ADDR:-10.55.0.1}
failed=0
tmp=$(mktemp -d)

pass() { echo "smoke: ok   $*"; }
fail() { echo "smoke: FAIL $*"; failed=1; }

# check_devices: the rxe device is listed and has an active port.
check_devices() {
	if ibv_devices 2>&1 | grep -qw "$DEV"; then
		pass "ibv_devices lists $DEV"
	else
		fail "ibv_devices does not list $DEV"; ibv_devices 2>&1
	fi
	if ibv_devinfo -d "$DEV" 2>&1 | grep -q 'state:.*PORT_ACTIVE'; then
		pass "$DEV port active"
	else
		fail "$DEV port not active"; ibv_devinfo -d "$DEV" 2>&1
	fi
}

# check_memlock: verbs registration needs RLIMIT_MEMLOCK unlimited.
check_memlock() {
	if [ "$(ulimit -l)" = unlimited ]; then
		pass "RLIMIT_MEMLOCK unlimited"
	else
		fail "RLIMIT_MEMLOCK is $(ulimit -l), not unlimited"
	fi
}

# check_rping: rdma_cm connection plus send/RDMA read/RDMA write, verified.
check_rping() {
	timeout 60 rping -s -a "$ADDR" -C 10 -V >"$tmp/rping-s" 2>&1 &
	spid=$!
	sleep 1
	if timeout 60 rping -c -a "$ADDR" -C 10 -V >"$tmp/rping-c" 2>&1 &&
		wait "$spid"; then
		pass "rping loopback to $ADDR (10 verified pings)"
	else
		wait "$spid"
		fail "rping loopback to $ADDR"; cat "$tmp/rping-s" "$tmp/rping-c"
	fi
}

# check_write_bw: RDMA writes of 64 KiB over an rdma_cm connection.
check_write_bw() {
	timeout 60 ib_write_bw -R -d "$DEV" -s 65536 -n 200 -F >"$tmp/bw-s" 2>&1 &
	spid=$!
	sleep 1
	if timeout 60 ib_write_bw -R -d "$DEV" -s 65536 -n 200 -F "$ADDR" >"$tmp/bw-c" 2>&1 &&
		wait "$spid"; then
		pass "ib_write_bw -R loopback: $(awk '$1 == 65536 { print $4 " MB/s" }' "$tmp/bw-c")"
	else
		wait "$spid"
		fail "ib_write_bw -R loopback"; cat "$tmp/bw-s" "$tmp/bw-c"
	fi
}

# check_fuse: the fuse module is loaded and its device is there.
check_fuse() {
	if [ -c /dev/fuse ]; then
		pass "/dev/fuse present"
	else
		fail "/dev/fuse missing"
	fi
}

check_devices
check_memlock
check_rping
check_write_bw
check_fuse
rm -rf "$tmp"
[ $failed -eq 0 ] && echo "smoke: all passed" || echo "smoke: some checks FAILED"
exit $failed
