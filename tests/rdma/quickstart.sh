#!/usr/bin/env bash
# quickstart.sh - check scripts/quickstart.sh over verbs inside the RDMA VM:
# RPFS_TRANSPORT=verbs brings the cluster up on the soft-RoCE address and
# rpfs.stats says "verbs" (started from the default 8 MiB RLIMIT_MEMLOCK,
# which the quickstart raises itself); files of 1 KiB to 32 MiB copied in with cp read
# back equal (cmp, page cache dropped first); the client counters moved by
# the inline, the fast and the RDMA paths both ways (writes: RDMA Read by
# the iods, reads: RDMA Write, in a directory with 1 MiB stripe units); `quickstart.sh stop` unmounts and stops every daemon;
# and RPFS_TRANSPORT=auto picks verbs by itself on this machine.
#
#   tests/rdma/quickstart.sh   on the host: boots the VM (scripts/rdma-vm.sh)
#                              and runs itself inside; inside: the checks
# Uses the prebuilt $RPFS_BUILD (default build-vm; built on the host if
# missing), state and mount point under the VM's /tmp (its root is read-only).
# Exits 0 if every check passed, 1 otherwise (124/125 from the VM harness).
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
export RPFS_BUILD=${RPFS_BUILD:-build-vm}
if [ "${RPFS_IN_VM:-}" != 1 ]; then
	# The VM has no network: quickstart.sh must find all its packages
	# there (the build's, util-linux, attr, iproute2), and so must this
	# script (python3, diffutils); rdma-vm.sh installs the VM's own.
	. "$REPO/scripts/packages.sh"
	pkg_install "${RPFS_BUILD_PACKAGES[@]}" util-linux attr iproute2 python3 diffutils ||
		exit 1
	case "$RPFS_BUILD" in /*) b=$RPFS_BUILD ;; *) b=$REPO/$RPFS_BUILD ;; esac
	if [ ! -f "$b/build.ninja" ]; then
		meson setup "$b" --buildtype=release -Dwerror=true -Dverbs=enabled || exit 1
	fi
	ninja -C "$b" >/dev/null || exit 1
	exec "$REPO/scripts/rdma-vm.sh" run --timeout 900 -- "$HERE/quickstart.sh"
fi

export RPFS_STATE=/tmp/qs-state RPFS_MOUNT=/tmp/qs-mnt
unset RPFS_HOST
QS=$REPO/scripts/quickstart.sh
SRC=$(mktemp -d /tmp/qs-src.XXXXXX)
KiB=1024
MiB=$((1024 * 1024))
SIZES=(1024 4096 32768 65536 $((256 * KiB)) "$MiB" $((4 * MiB)) $((32 * MiB)))
failed=0

pass() { echo "qs-verbs: ok   $*"; }
fail() { echo "qs-verbs: FAIL $*"; failed=1; }

# stats: the mount's client counters (rpfs.stats, JSON) on one line.
stats() {
	getfattr --absolute-names --only-values -n rpfs.stats "$RPFS_MOUNT"
}

# counter_delta NAME BEFORE AFTER: AFTER's NAME minus BEFORE's.
counter_delta() {
	/usr/bin/python3 -c 'import json, sys
a, b = json.loads(sys.argv[2]), json.loads(sys.argv[3])
print(b[sys.argv[1]] - a[sys.argv[1]])' "$@"
}

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# all_stopped: no quickstart daemon alive, nothing mounted.
all_stopped() {
	local f
	mountpoint -q "$RPFS_MOUNT" && return 1
	for f in "$RPFS_STATE"/pids/*.pid; do
		[ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && return 1
	done
	return 0
}

# ---- verbs, explicitly, from the default RLIMIT_MEMLOCK of a login (8 MiB
# soft and hard; the VM's init raised ours): the quickstart must raise it
# itself, since each verbs iod pins about 38 MB
out=$(prlimit --memlock=8388608:8388608 env RPFS_TRANSPORT=verbs "$QS" 2>&1)
rc=$?
echo "$out"
if [ $rc -ne 0 ]; then
	fail "RPFS_TRANSPORT=verbs quickstart.sh exited $rc"
	tail -n 20 "$RPFS_STATE"/logs/*.log
	exit 1
fi
if echo "$out" | grep -q "^quickstart: rpfs is up (transport: verbs, from rpfs.stats"; then
	pass "quickstart reports transport verbs"
else
	fail "quickstart does not report transport verbs"
fi
if echo "$out" | grep -q "mgr  *$RPFS_RDMA_ADDR:"; then
	pass "the mgr listens on the RDMA address $RPFS_RDMA_ADDR"
else
	fail "the mgr does not listen on $RPFS_RDMA_ADDR"
fi
s0=$(stats)
case "$s0" in *'"transport":"verbs"'*|*'"transport": "verbs"'*)
	pass "rpfs.stats: transport verbs" ;;
*) fail "rpfs.stats: $s0" ;;
esac

for n in "${SIZES[@]}"; do
	head -c "$n" /dev/urandom >"$SRC/f$n"
done
# Every file in the default layout (64 KiB units: the kernel's 128 KiB
# reads reach each iod as 64 KiB, the fast path) and the big ones again in a
# directory with 1 MiB units (a read request stays whole on one iod and
# above fast_max: RDMA Write by the iod).
mkdir "$RPFS_MOUNT/u1m" &&
	setfattr -n user.rpfs.layout -v unit=1048576,count=4 "$RPFS_MOUNT/u1m" ||
	fail "cannot make the 1 MiB-unit directory"
FILES=()
for n in "${SIZES[@]}"; do
	FILES+=("f$n")
	[ "$n" -ge $MiB ] && FILES+=("u1m/f$n")
done
for f in "${FILES[@]}"; do
	cp "$SRC/${f#u1m/}" "$RPFS_MOUNT/$f" || fail "cp $f"
done
sync
s1=$(stats)
drop_caches
for f in "${FILES[@]}"; do
	if cmp "$SRC/${f#u1m/}" "$RPFS_MOUNT/$f"; then
		pass "cp + cmp of $f ($(stat -c %s "$SRC/${f#u1m/}") bytes)"
	else
		fail "cmp of $f"
	fi
done
s2=$(stats)
echo "counters after the writes: $s1"
echo "counters after the reads:  $s2"
# The mount's requests lie in its declared FUSE buffers (fe_loop.c), so
# small ones go by fast RDMA too, never inline, and nothing is copied.
for c in fast_bytes rdma_read_bytes; do
	d=$(counter_delta "$c" "$s0" "$s1")
	if [ "${d:-0}" -gt 0 ]; then pass "writes: $c +$d"; else fail "writes: $c +${d:-?}"; fi
done
for c in fast_bytes rdma_write_bytes; do
	d=$(counter_delta "$c" "$s1" "$s2")
	if [ "${d:-0}" -gt 0 ]; then pass "reads: $c +$d"; else fail "reads: $c +${d:-?}"; fi
done
for c in inline_bytes client_copy_bytes; do
	d=$(counter_delta "$c" "$s0" "$s2")
	if [ "${d:-1}" -eq 0 ]; then pass "writes and reads: $c +0"; else fail "writes and reads: $c +${d:-?}"; fi
done

"$QS" stop || fail "quickstart.sh stop exited $?"
if all_stopped; then pass "stop: unmounted, daemons gone"; else fail "stop left something running"; fi

# ---- auto: an RDMA device with an address is there, so verbs
out=$(RPFS_TRANSPORT=auto "$QS" 2>&1)
rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q "^quickstart: rpfs is up (transport: verbs,"; then
	pass "RPFS_TRANSPORT=auto comes up on verbs"
else
	echo "$out"
	fail "RPFS_TRANSPORT=auto: exit $rc, not up on verbs"
fi
"$QS" stop >/dev/null || fail "quickstart.sh stop exited $?"
if all_stopped; then pass "stop after auto"; else fail "stop after auto left something running"; fi

rm -rf "$SRC" "$RPFS_STATE"
if [ $failed -eq 0 ]; then
	echo "qs-verbs: all checks passed"
	exit 0
fi
exit 1
