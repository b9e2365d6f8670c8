#!/usr/bin/env bash
# mirror-bench.sh - what mirror=2 costs against mirror=1, and the resync
# rate, on a cluster of separate hosts (network namespaces joined by a
# bridge: tests/bench/mirror_bench.py says what it runs). A benchmark, not
# a test: it asserts nothing about speed.
#
#   scripts/mirror-bench.sh [--vm] [--netem "delay 1ms"] [mirror_bench.py options]
#
# Without --vm it runs on the host, whose kernel has no sch_netem: links
# have no delay there (--netem is refused). With --vm it runs inside the
# RDMA VM (scripts/rdma-vm.sh; the Debian kernel, which has sch_netem) and
# every link gets --netem (tc netem words; default none): run it twice,
# without and with "delay 1ms", for the two tables. Options after these go
# to mirror_bench.py (--size MIB, --runtime S, --reps N, --resync-mib MIB,
# --resync-rate MBS). Root is needed (namespaces, mounts).
#
# Environment: RPFS_BUILD (default build-vm: a release build, made if
# missing), RPFS_VM_BENCH_TIMEOUT (default 2400 s, the VM's limit).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
VM=0
NETEM=
ARGS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--vm) VM=1 ;;
	--netem) [ $# -ge 2 ] || { echo "mirror-bench: --netem: expected tc netem words" >&2; exit 2; }
		NETEM=$2; shift ;;
	*) ARGS+=("$1") ;;
	esac
	shift
done
export RPFS_BUILD=${RPFS_BUILD:-build-vm}
case "$RPFS_BUILD" in /*) BUILD=$RPFS_BUILD ;; *) BUILD=$REPO/$RPFS_BUILD ;; esac

. "$REPO/scripts/packages.sh"
pkg_install "${RPFS_BUILD_PACKAGES[@]}" "${RPFS_FIO_SRC_PACKAGES[@]}" fio attr python3 \
	iproute2 util-linux || { echo "mirror-bench: cannot install packages" >&2; exit 1; }
if [ ! -f "$BUILD/build.ninja" ]; then
	# configured as scripts/test.sh configures build-vm, so both can share it
	meson setup "$BUILD" --buildtype=release -Dwerror=true -Dverbs=enabled \
		-Dfio_engine=enabled
fi
ninja -C "$BUILD" >/dev/null
if [ $VM = 0 ]; then
	[ -z "$NETEM" ] || { echo "mirror-bench: --netem needs --vm (the host kernel has no sch_netem)" >&2; exit 2; }
	cd "$REPO"
	exec /usr/bin/python3 tests/bench/mirror_bench.py "${ARGS[@]}"
fi
q=$(printf '%q ' "${ARGS[@]}")
exec "$REPO/scripts/rdma-vm.sh" run --timeout "${RPFS_VM_BENCH_TIMEOUT:-2400}" -- \
	"cd $REPO && RPFS_BUILD=$RPFS_BUILD RPFS_NETEM=$(printf '%q' "$NETEM") \
	/usr/bin/python3 tests/bench/mirror_bench.py $q"
