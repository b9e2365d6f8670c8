#!/usr/bin/env bash
# vm-stage.sh - stage 4 of scripts/test.sh in one boot of the RDMA VM (a
# boot under TCG costs tens of seconds, so the steps share one):
#   smoke      tests/rdma/smoke.sh (rxe0, memlock, rping, ib_write_bw, FUSE)
#   quickstart tests/rdma/quickstart.sh (the quickstart over verbs)
#   meson      the C tests that need real verbs (meson suite "verbs", if any)
#   pytest     the integration suite with RPFS_TRANSPORT=verbs on the
#              soft-RoCE address, but for the tests marked host_only and
#              vm_spared, under pytest-xdist
#   vb_live    test_vb_live from the sanitizer build, once the host has
#              built it (scripts/test.sh builds it beside this stage)
#
#   tests/rdma/vm-stage.sh RESULTS   on the host: boots the VM and runs itself
#                                    inside; inside: the steps above
# RESULTS (a directory under the checkout, so the VM sees it) receives
# STEP.rc, each step's exit status, as the step ends; pytest's junit file is
# RESULTS/junit-vm.xml and the meson log RESULTS/meson-verbs.log. A step
# with no STEP.rc did not run to its end (the VM stopped or timed out).
#
# Environment (rdma-vm.sh passes every RPFS_* variable into the VM but
# RPFS_VM_*, its own; the host side writes those below to RESULTS/stage.env
# and the guest side reads them from there):
#   RPFS_BUILD           the release build the steps use (default build-vm)
#   RPFS_VM_VB_LIVE      test_vb_live to run (a path under the checkout)
#   RPFS_VM_VB_READY     a file the host writes once RPFS_VM_VB_LIVE is
#                        built ("ok") or failed to build (anything else);
#                        vb_live waits for it up to RPFS_VM_VB_WAIT seconds
#                        (default 1800)
#   RPFS_VM_VERBS_TESTS  the meson test names of the verbs C tests (words)
#   RPFS_VM_PYTHON       the python3 with pytest (absolute path)
#   RPFS_VM_WORKERS      pytest-xdist workers in the VM (default 2)
#   RPFS_VM_PYTEST_TIMEOUT, RPFS_VM_BIG_MIB, RPFS_VM_TAR_FILES,
#   RPFS_VM_READDIR_N, RPFS_VM_NETEM, RPFS_VM_NETFAULT_TIMEOUT,
#   RPFS_PYTEST_ARGS     as scripts/test.sh documents them
#   RPFS_VM_TIMEOUT      the whole boot's limit in seconds (default 5400)
# Exits 0 when every step passed, 1 otherwise (124/125 from the VM harness).
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

if [ "${RPFS_IN_VM:-}" != 1 ]; then
	[ $# -eq 1 ] || { echo "usage: tests/rdma/vm-stage.sh RESULTS" >&2; exit 2; }
	mkdir -p "$1" || exit 1
	RPFS_VM_RESULTS=$(cd "$1" && pwd -P)
	case "$RPFS_VM_RESULTS/" in
	"$(cd "$REPO" && pwd -P)"/*) ;;
	*) echo "vm-stage.sh: $1: not under the checkout (the VM would not see it)" >&2; exit 2 ;;
	esac
	rm -f "$RPFS_VM_RESULTS"/*.rc
	for v in $(compgen -e | grep '^RPFS_VM_' || true); do
		declare -p "$v"
	done >"$RPFS_VM_RESULTS/stage.env" || exit 1
	exec "$REPO/scripts/rdma-vm.sh" run --mem 8192 --timeout "${RPFS_VM_TIMEOUT:-5400}" -- \
		"$HERE/vm-stage.sh" "$RPFS_VM_RESULTS"
fi

RES=$1
# the host's RPFS_VM_* settings (see the header)
. "$RES/stage.env" || { echo "vm-stage.sh: cannot read $RES/stage.env" >&2; exit 1; }
BUILD=${RPFS_BUILD:-build-vm}
PY=${RPFS_VM_PYTHON:-/usr/bin/python3}
failed=0

# step NAME CMD...: run CMD, record its exit status in RES/NAME.rc and say
# how long it took.
step() {
	local name=$1 t0 rc
	shift
	t0=$(date +%s)
	echo "=== vm step $name"
	"$@"
	rc=$?
	echo "$rc" >"$RES/$name.rc"
	echo "--- vm step $name: exit $rc after $(($(date +%s) - t0)) s"
	[ "$rc" -eq 0 ] || failed=1
}

# meson_verbs: the C tests of meson suite "verbs"; their log in RES.
meson_verbs() {
	local rc
	# shellcheck disable=SC2086 # test names, as words
	timeout -k 10 1200 meson test -C "$BUILD" --no-rebuild --print-errorlogs $RPFS_VM_VERBS_TESTS \
		>"$RES/meson-verbs.log" 2>&1
	rc=$?
	cat "$RES/meson-verbs.log"
	return $rc
}

# run_pytest: the integration suite over verbs, under pytest-xdist.
run_pytest() {
	# RPFS_PYTEST_ARGS as shell words, as on the host
	eval "set -- ${RPFS_PYTEST_ARGS:-}"
	RPFS_TRANSPORT=${RPFS_TRANSPORT:-verbs} RPFS_TEST_PIDS= RPFS_TEST_NETNS= \
		RPFS_TEST_HOST=$RPFS_RDMA_ADDR RPFS_TEST_BIG_MIB=${RPFS_VM_BIG_MIB:-256} \
		RPFS_TEST_TAR_FILES=${RPFS_VM_TAR_FILES:-600} \
		RPFS_TEST_READDIR_N=${RPFS_VM_READDIR_N:-2000} \
		RPFS_NETEM=${RPFS_VM_NETEM:-delay 1ms loss 0.5%} \
		RPFS_NETFAULT_TIMEOUT=${RPFS_VM_NETFAULT_TIMEOUT:-10} \
		timeout -k 30 "${RPFS_VM_PYTEST_TIMEOUT:-3900}" "$PY" -m pytest tests/integration -v \
		-n "${RPFS_VM_WORKERS:-2}" --dist loadfile -m 'not host_only and not vm_spared' \
		--junitxml="$RES/junit-vm.xml" "$@" </dev/null
}

# vb_live: test_vb_live from the sanitizer build, once the host says it
# is built.
vb_live() {
	local waited=0 limit=${RPFS_VM_VB_WAIT:-1800}
	while [ ! -s "${RPFS_VM_VB_READY:-/nonexistent}" ]; do
		if [ $waited -ge "$limit" ]; then
			echo "vb_live: the host did not build $RPFS_VM_VB_LIVE within ${limit}s"
			return 1
		fi
		sleep 5
		waited=$((waited + 5))
	done
	if [ "$(cat "$RPFS_VM_VB_READY")" != ok ]; then
		echo "vb_live: the host's build of $RPFS_VM_VB_LIVE failed"
		return 1
	fi
	RPFS_TRANSPORT=${RPFS_TRANSPORT:-verbs} UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		timeout -k 10 900 "$RPFS_VM_VB_LIVE"
}

cd "$REPO" || exit 1
step smoke "$HERE/smoke.sh"
step quickstart env RPFS_BUILD="$BUILD" "$HERE/quickstart.sh"
if [ -n "${RPFS_VM_VERBS_TESTS:-}" ]; then
	step meson meson_verbs
fi
step pytest run_pytest
step vb_live vb_live
exit $failed
