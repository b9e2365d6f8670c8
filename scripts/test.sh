#!/usr/bin/env bash
# test.sh - everything, as CI runs it. After the packages (stage 0), two
# lanes run side by side, since the VM's lane is the longest and the host's
# tests mostly wait on timeouts, not on the CPU:
#   host lane
#     1. an ASan+UBSan build with -Werror, and its C unit tests (meson test);
#     2. the libFuzzer targets (clang), each for a bounded time, beside
#     3. the pytest integration suite against real daemons and FUSE mounts,
#        using the ASan build, on tcp (tests marked `verbs` deselected),
#        under pytest-xdist (whole files per worker): with the mgr on LMDB
#        and, at the same time, on PostgreSQL (one temporary PostgreSQL
#        cluster for both, scripts/pg-temp.sh; the PostgreSQL pass without
#        the tests marked own_store, which bring their own PostgreSQL and
#        run in the LMDB pass: the several-mgr tests and the database
#        failover matrix). Each pass has its own ports (RPFS_PORT_RANGE).
#   VM lane
#     4. the verbs transport in the RDMA VM (scripts/rdma-vm.sh: the Debian
#        kernel under qemu TCG, rdma_rxe on a veth pair), in one boot
#        (tests/rdma/vm-stage.sh): a release build with -Werror,
#        tests/rdma/smoke.sh, tests/rdma/quickstart.sh (the quickstart over
#        verbs), the C tests of meson suite "verbs" if any, the pytest
#        suite (test_verbs.py's mechanism tests included) with
#        RPFS_TRANSPORT=verbs on the soft-RoCE address under pytest-xdist,
#        but for the tests marked host_only and vm_spared (their transport
#        calls are ones the VM's other tests make; stage 3 runs them), and
#        test_vb_live from the ASan build of the host lane. The fault
#        harness, test_netfault.py, runs its own namespaces over tcp, with
#        netem on every link.
# The VM lane's lines are prefixed "[vm] ". At the end: each stage's wall
# and CPU time, the 15 slowest tests, and as the last line "N passed, N
# failed" over all stages (a skipped test counts as failed); exits
# non-zero if anything failed. HACKING.md "Time budget" gives each stage's
# share of CI's limit.
#
# Environment: RPFS_FUZZ_SECONDS (default 60) per fuzz target;
# RPFS_PYTEST_ARGS extra pytest arguments, shell words (e.g. "-k 'shell or
# quickstart'"), both stages;
# RPFS_TEST_WORKERS (default 3) pytest-xdist workers of each host pass and
# RPFS_VM_WORKERS (default 2) of the VM's;
# RPFS_VM_TRANSPORT (default verbs) the transport of stage 4;
# RPFS_VM_BIG_MIB (default 256) the big-file test's size, RPFS_VM_TAR_FILES
# (default 600) the tar test's files and RPFS_VM_READDIR_N (default 2000) the
# big directory's entries in the VM (the host stage keeps 1024, 3000 and
# 5000: under TCG those three alone would take over 15 minutes);
# RPFS_VM_PYTEST_TIMEOUT (default 3900) seconds for stage 4's pytest;
# RPFS_VM_NETEM (default "delay 1ms loss 0.5%") the tc netem of every link
# of the fault harness in the VM (tests/integration/test_netfault.py; the
# host's kernel has no sch_netem, so stage 3 runs it without) and
# RPFS_VM_NETFAULT_TIMEOUT (default 10) its clients' timeout= in seconds;
# RPFS_TEST_KEEP=1 keeps the temporary directory even when all passed.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$PWD
FUZZ_SECONDS=${RPFS_FUZZ_SECONDS:-60}
WORKERS=${RPFS_TEST_WORKERS:-3}
VM_WORKERS=${RPFS_VM_WORKERS:-2}
for v in FUZZ_SECONDS WORKERS VM_WORKERS; do
	if ! [[ "${!v}" =~ ^[1-9][0-9]*$ ]]; then
		echo "test.sh: $v: expected a whole number >= 1, got \"${!v}\"" >&2
		exit 2
	fi
done
. scripts/packages.sh
# Every tool this script, the scripts it runs and the tests call comes from
# these (or from Debian's required set): the build's and fio-src.sh's,
# clang and its runtime (fuzzing), python3-pytest and python3-pytest-xdist,
# fio, attr (getfattr, setfattr), util-linux (setpriv, prlimit,
# mountpoint, flock), mount (umount), fuse3 (fusermount3), diffutils (cmp,
# diff), systemd (systemd-analyze), iproute2 (ip, tc: the fault harness;
# nsenter is util-linux's), prometheus (prometheus, promtool:
# test_metrics.py), PostgreSQL 15 (scripts/pg-temp.sh: initdb, pg_ctl,
# psql; runuser, useradd), pg_auto_failover (scripts/ha-cluster.sh,
# tests/integration/test_ha.py); scripts/rdma-vm.sh installs the VM's own
# (qemu, busybox, kmod, ...).
PACKAGES=("${RPFS_BUILD_PACKAGES[@]}" "${RPFS_FIO_SRC_PACKAGES[@]}" "${RPFS_METRICS_TEST_PACKAGES[@]}"
	"${RPFS_PG_TEST_PACKAGES[@]}" "${RPFS_HA_PACKAGES[@]}"
	clang libclang-rt-14-dev
	python3 python3-pytest python3-pytest-xdist attr util-linux mount tar diffutils coreutils
	systemd iproute2)

PY= # chosen after stage 0 installed python3-pytest (see pick_python)
RUN_T0=$(date +%s)
RUN_TMP=$(mktemp -d /tmp/rpfs-test.XXXXXX)
export RPFS_TEST_PIDS=$RUN_TMP/pids
: >"$RPFS_TEST_PIDS"
# network namespaces of the fault harness (tests/integration/netns.py)
export RPFS_TEST_NETNS=$RUN_TMP/netns
: >"$RPFS_TEST_NETNS"
# "STAGE PASSED FAILED" lines, appended by every stage of either lane
COUNTS=$RUN_TMP/counts
: >"$COUNTS"
# "STAGE: WHAT" lines, one per failed test or step, for the summary
FAILURES=$RUN_TMP/failures
: >"$FAILURES"
# "STAGE WALL_S CPU_S" lines, one per stage as it ends
STAGE_TIMES=$RUN_TMP/stage-times
: >"$STAGE_TIMES"
# the temporary PostgreSQL cluster both host passes share
PG_DIR=

ASAN_BUILD=build-asan
FUZZ_BUILD=build-fuzz
VM_BUILD=build-vm
VM_TRANSPORT=${RPFS_VM_TRANSPORT:-verbs}
# the VM lane's results (under the checkout: the VM sees it), and the flag
# the host lane writes once the ASan build is done ("ok") or failed
VM_RESULTS=build-vm-results
VB_READY=$REPO/$VM_RESULTS/asan-ready

# C tests that need real verbs: meson suite "verbs", and vb_live.
VERBS_TESTS_RE=':verbs / \| / vb_live$'

say() { printf '\n=== %s\n' "$*"; }

# count STAGE PASSED FAILED: add to the totals (either lane, any subshell).
count() {
	printf '%s %d %d\n' "${1// /_}" "$2" "$3" >>"$COUNTS"
}

# failed STAGE WHAT: name a failed test or step in the summary's list
# (CI shows only the end of the output, after the failures' own logs).
failed() {
	printf '%s: %s\n' "$1" "$2" >>"$FAILURES"
}

# timed STAGE CMD...: run CMD as one stage: its header, then its wall and
# CPU time (user + system of everything it ran and waited for: the
# daemons, qemu) in STAGE_TIMES and on a closing line. Returns CMD's
# status.
timed() {
	local stage=$1 t0 rc=0 cpu tf=$RUN_TMP/time.$BASHPID
	shift
	say "$stage"
	t0=$(date +%s)
	local TIMEFORMAT='%U %S'
	{ time { "$@" 2>&4 4>&-; } ; } 4>&2 2>"$tf" || rc=$?
	cpu=$(awk '{ printf "%d", $1 + $2 + 0.5 }' "$tf" 2>/dev/null || echo 0)
	rm -f "$tf"
	printf '%s %d %d\n' "${stage// /_}" $(($(date +%s) - t0)) "${cpu:-0}" >>"$STAGE_TIMES"
	echo "--- $stage: $(($(date +%s) - t0)) s wall, ${cpu:-0} s CPU"
	return $rc
}

# cleanup: unmount whatever the tests left mounted under RUN_TMP, stop
# any process they started that is still running, delete the network
# namespaces they left and stop the shared PostgreSQL.
cleanup() {
	local mp pid ns
	{ grep -o " $RUN_TMP/[^ ]*" /proc/self/mounts 2>/dev/null || true; } | sort -r |
		while read -r mp; do
			fusermount3 -u "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true
		done
	if [ -s "$RPFS_TEST_PIDS" ]; then
		while read -r pid; do
			if kill -0 "$pid" 2>/dev/null &&
				tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'rpfs-\|python'; then
				kill -KILL "$pid" 2>/dev/null || true
			fi
		done <"$RPFS_TEST_PIDS"
	fi
	if [ -s "$RPFS_TEST_NETNS" ]; then
		while read -r ns; do
			ip netns del "$ns" 2>/dev/null || true
		done <"$RPFS_TEST_NETNS"
	fi
	if [ -n "$PG_DIR" ] && [ -d "$PG_DIR" ]; then
		scripts/pg-temp.sh stop "$PG_DIR" >/dev/null 2>&1 || true
		rm -rf "$PG_DIR"
	fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

# pick_python: set PY to an interpreter that can import pytest and xdist,
# as an absolute path (stage 4 runs it inside the VM, whose PATH differs).
# Called only after the packages are installed: Debian's /usr/bin/python3
# has python3-pytest then, while a `python3` earlier on PATH (pyenv, a CI
# image's own build) does not see Debian's modules. Falls back to
# /usr/bin/python3, so a missing pytest shows up as a failed stage, never
# as a silent skip.
pick_python() {
	local p
	for p in /usr/bin/python3 "$(command -v python3 || true)"; do
		if [ -n "$p" ] && "$p" -c 'import pytest, xdist' 2>/dev/null; then
			PY=$p
			return 0
		fi
	done
	PY=/usr/bin/python3
	echo "test.sh: no python3 with pytest and xdist (python3-pytest-xdist not installed?)"
}

# meson_counts STAGE LOG: count the "Ok:/Fail:/..." summary of a meson
# test log.
meson_counts() {
	local stage=$1 log=$2 ok xfail fail xpass skip tmo
	ok=$(sed -n 's/^Ok: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	xfail=$(sed -n 's/^Expected Fail: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	fail=$(sed -n 's/^Fail: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	xpass=$(sed -n 's/^Unexpected Pass: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	skip=$(sed -n 's/^Skipped: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	tmo=$(sed -n 's/^Timeout: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	if [ -z "$ok" ] && [ -z "$fail" ]; then
		echo "test.sh: no meson test summary found in $log"
		count "$stage" 0 1
		return
	fi
	count "$stage" $((${ok:-0} + ${xfail:-0})) $((${fail:-0} + ${xpass:-0} + ${skip:-0} + ${tmo:-0}))
	sed -n 's/^ *[0-9]*\/[0-9]* *\(.*[^ ]\) *\(FAIL\|TIMEOUT\|SKIP\|UNEXPECTEDPASS\) .*/\1 (\2)/p' "$log" |
		while read -r t; do failed "$stage" "$t"; done
}

# junit_counts STAGE XML: count the test cases of a pytest junit file
# (failure, error and skipped all count as failed; so do collection
# errors, and a file that is missing or holds no test at all).
junit_counts() {
	local stage=$1 junit=$2 p f
	if [ ! -s "$junit" ]; then
		echo "test.sh: pytest produced no results ($junit)"
		count "$stage" 0 1
		failed "$stage" "no results ($junit)"
		return
	fi
	read -r p f < <("$PY" - "$junit" "$stage" "$FAILURES" <<'EOF'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
p = f = 0
with open(sys.argv[3], 'a') as out:
    for tc in root.iter('testcase'):
        bad = [c.tag for c in tc if c.tag in ('failure', 'error', 'skipped')]
        if bad:
            f += 1
            out.write('%s: %s::%s (%s)\n' % (sys.argv[2], tc.get('classname', '').rsplit('.', 1)[-1],
                                            tc.get('name'), bad[0]))
        else:
            p += 1
# errors outside any test case (collection) count too
for ts in root.iter('testsuite'):
    if int(ts.get('tests', 0)) == 0 and int(ts.get('errors', 0)):
        f += int(ts.get('errors'))
print(p, f)
EOF
	) || { p=0; f=1; failed "$stage" "unreadable results ($junit)"; }
	count "$stage" "$p" "$f"
	if [ "$p" = 0 ] && [ "$f" = 0 ]; then
		echo "test.sh: pytest ran no tests ($junit)"
		count "$stage" 0 1
		failed "$stage" "no tests ran"
	fi
}

# pytest_args: RPFS_PYTEST_ARGS as shell words (quotes work, as in the VM,
# where vm-stage.sh takes the string as words too): split by shlex, never
# eval'ed, into the array PYTEST_ARGS. Returns 1 on unbalanced quotes.
pytest_args() {
	PYTEST_ARGS=()
	"$PY" -c 'import shlex, sys
sys.stdout.write("".join(a + "\0" for a in shlex.split(sys.argv[1])))' \
		"${RPFS_PYTEST_ARGS:-}" >"$RUN_TMP/pytest-args" 2>/dev/null || return 1
	mapfile -d '' -t PYTEST_ARGS <"$RUN_TMP/pytest-args"
}

# ------------------------------------------------------------- host lane

# build_asan: stage 1's build. Writes the VM lane's flag VB_READY ("ok" or
# "failed"), since vb_live runs from this build.
build_asan() {
	local ok=1
	if [ ! -f "$ASAN_BUILD/build.ninja" ]; then
		meson setup "$ASAN_BUILD" -Db_sanitize=address,undefined -Dwerror=true \
			-Dfio_engine=enabled -Dverbs=enabled -Dpostgresql=enabled --buildtype=debug || ok=0
	fi
	[ $ok = 1 ] && { ninja -C "$ASAN_BUILD" || ok=0; }
	mkdir -p "$(dirname "$VB_READY")"
	if [ $ok = 1 ]; then
		echo ok >"$VB_READY"
		return 0
	fi
	echo failed >"$VB_READY"
	echo "test.sh: the ASan build failed"
	count asan_build 0 1
	return 1
}

# unit_tests: the C tests but those that need real verbs (stage 4's).
# meson test runs each under its sanitizer defaults (halt_on_error=1,
# abort_on_error=1, print stack traces).
unit_tests() {
	local host_tests
	mapfile -t host_tests < <(meson test -C "$ASAN_BUILD" --list --no-rebuild 2>/dev/null |
		grep -v -e "$VERBS_TESTS_RE" | sed 's|.* / ||')
	# Their timeouts suit a quiet machine; here the VM lane runs beside
	# them and an fsync takes longer (test_mgr_db: 2 s alone, 30 s seen
	# beside the VM's build), so they get 4 times as long to tell a hang.
	meson test -C "$ASAN_BUILD" --print-errorlogs --timeout-multiplier 4 "${host_tests[@]}" \
		>"$RUN_TMP/meson-test.log" 2>&1
	# only the failures' logs and the summary: the list is in the log file
	grep -v -E '^ *[0-9]+/[0-9]+ .* OK +[0-9.]+s$' "$RUN_TMP/meson-test.log" || true
	meson_counts unit_tests "$RUN_TMP/meson-test.log"
}

# fuzz: build the libFuzzer targets and run each for FUZZ_SECONDS.
fuzz() {
	local ok=1 t name corpus src targets=()
	if [ ! -f "$FUZZ_BUILD/build.ninja" ]; then
		CC=clang meson setup "$FUZZ_BUILD" -Dfuzz=true -Db_sanitize=address,undefined \
			-Db_lundef=false --buildtype=debug >"$RUN_TMP/fuzz-build.log" 2>&1 || ok=0
	fi
	[ $ok = 1 ] && { ninja -C "$FUZZ_BUILD" >>"$RUN_TMP/fuzz-build.log" 2>&1 || ok=0; }
	if [ $ok = 1 ]; then
		for t in "$FUZZ_BUILD"/tests/fuzz/fuzz_*; do
			[ -x "$t" ] && [ -f "$t" ] && targets+=("$t")
		done
	else
		tail -n 40 "$RUN_TMP/fuzz-build.log"
	fi
	if [ ${#targets[@]} -eq 0 ]; then
		echo "test.sh: no fuzz target built"
		count fuzz 0 1
		return 1
	fi
	for t in "${targets[@]}"; do
		name=$(basename "$t")
		corpus=$RUN_TMP/corpus-$name
		mkdir -p "$corpus"
		for src in tests/fuzz/corpus/"$name" tests/fuzz/corpus; do
			if [ -d "$src" ]; then
				find "$src" -maxdepth 1 -type f -exec cp {} "$corpus/" \;
				break
			fi
		done
		if timeout -k 30 $((FUZZ_SECONDS + 120)) "$t" -max_total_time="$FUZZ_SECONDS" \
			-print_final_stats=1 -artifact_prefix="$RUN_TMP/$name-" "$corpus" \
			>"$RUN_TMP/$name.log" 2>&1; then
			grep -E '^stat::number_of_executed_units|^Done' "$RUN_TMP/$name.log" || true
			echo "fuzz $name: ok"
			count fuzz 1 0
		else
			tail -n 60 "$RUN_TMP/$name.log"
			echo "fuzz $name: FAILED (artifacts in $RUN_TMP)"
			count fuzz 0 1
			failed fuzz "$name"
		fi
	done
}

# host_pytest STORE NAME PORTS [TESTS...]: the integration suite (or the
# TESTS files) with the mgr on STORE (lmdb, or postgresql: every cluster
# gets a database of its own on the shared temporary cluster), its ports
# in PORTS ("LO-HI"), under pytest-xdist; results in $RUN_TMP/NAME.xml,
# output in $RUN_TMP/NAME.log (printed when the pass ends, so the passes
# do not interleave). $RPFS_MOUNT_OPTS, if set, goes to every mount.
host_pytest() {
	local store=$1 name=$2 ports=$3 junit=$RUN_TMP/$2.xml rc=0
	local tests=("${@:4}")
	[ ${#tests[@]} -gt 0 ] || tests=(tests/integration)
	if ! pytest_args; then
		echo "test.sh: RPFS_PYTEST_ARGS: expected shell words, got \"${RPFS_PYTEST_ARGS:-}\" (unbalanced quotes?); pytest not run"
		count "$name" 0 1
		return
	fi
	RPFS_STORE=$store RPFS_BUILD=$ASAN_BUILD RPFS_PORT_RANGE=$ports \
		timeout -k 60 3600 "$PY" -m pytest "${tests[@]}" -v -n "$WORKERS" --dist loadfile \
		-m "not verbs" --basetemp="$RUN_TMP/$name" --junitxml="$junit" \
		"${PYTEST_ARGS[@]}" </dev/null >"$RUN_TMP/$name.log" 2>&1 || rc=$?
	# the verdict lines and everything after the run (failures, summary)
	sed -n -e '/ \(FAILED\|ERROR\|SKIPPED\|XFAIL\|XPASS\) /p' \
		-e '/^=\+ \(FAILURES\|ERRORS\|short test summary\)/,$p' "$RUN_TMP/$name.log" |
		sed "s/^/[$name] /"
	tail -n 1 "$RUN_TMP/$name.log" | sed "s/^/[$name] /"
	[ $rc -eq 124 ] && echo "[$name] test.sh: pytest timed out"
	junit_counts "$name" "$junit"
}

# The POSIX and multi-mount checks run again with every mount on -o
# leases,deleg (fuse-client/frontend/fe_cb.h: READ and WRITE leases,
# delegated creates), so that both modes run here.
LEASES_TESTS=(test_meta.py test_ops.py test_shell.py test_multi.py test_truncate.py
	test_suid.py test_locks.py test_leases.py)

# host_passes: the shared PostgreSQL, then the LMDB and the PostgreSQL
# passes side by side, each in its own half of the port range below the
# kernel's ephemeral ports (util.free_port_run); then, in the LMDB
# pass's half, the leases pass (LEASES_TESTS with -o leases,deleg).
host_passes() {
	local uri lo
	PG_DIR=$(mktemp -d /tmp/rpfs-pg.XXXXXX)
	chmod 755 "$PG_DIR"
	if ! uri=$(scripts/pg-temp.sh start "$PG_DIR" | tail -n 1); then
		echo "test.sh: the temporary PostgreSQL did not start"
		count pytest-pg 0 1
		uri=
	fi
	lo=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	[ "$lo" -gt 12000 ] || { echo "test.sh: ephemeral ports start at $lo, below 12000"; lo=32768; }
	local mid=$(((10000 + lo) / 2))
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=0}
	RPFS_PG_URI=$uri RPFS_PG_SOCKDIR=$PG_DIR \
		timed "pytest lmdb" host_pytest lmdb pytest "10000-$mid" &
	local lmdb_pid=$!
	if [ -n "$uri" ]; then
		RPFS_PG_URI=$uri RPFS_PG_SOCKDIR=$PG_DIR \
			timed "pytest postgresql" host_pytest postgresql pytest-pg "$mid-$lo" || true
	fi
	wait $lmdb_pid || true
	RPFS_MOUNT_OPTS=leases,deleg timed "pytest leases" host_pytest lmdb pytest-leases \
		"10000-$mid" "${LEASES_TESTS[@]/#/tests/integration/}" || true
}

lane_host() {
	if ! timed "asan build" build_asan; then
		echo "test.sh: no ASan build: unit and integration tests not run"
		count pytest 0 1
		return
	fi
	timed "unit tests" unit_tests || true
	# Daemons run with leak detection on; a sanitizer report in any daemon
	# or client log fails the test that was running.
	timed "fuzz" fuzz &
	local fuzz_pid=$!
	host_passes
	wait $fuzz_pid || true
}

# --------------------------------------------------------------- VM lane

# build_vm: a release build (TCG runs every instruction in software: the
# ASan build would be several times slower), under the checkout so the VM
# sees it.
build_vm() {
	if [ ! -f "$VM_BUILD/build.ninja" ]; then
		meson setup "$VM_BUILD" --buildtype=release -Dwerror=true -Dverbs=enabled \
			-Dfio_engine=enabled -Dpostgresql=enabled >"$RUN_TMP/vm-build.log" 2>&1 ||
			{ tail -n 40 "$RUN_TMP/vm-build.log"; return 1; }
	fi
	ninja -C "$VM_BUILD" >>"$RUN_TMP/vm-build.log" 2>&1 || { tail -n 40 "$RUN_TMP/vm-build.log"; return 1; }
}

# vm_stage: tests/rdma/vm-stage.sh in one boot, then count each step.
vm_stage() {
	local vm_tests s rc=0
	mapfile -t vm_tests < <(meson test -C "$VM_BUILD" --list --no-rebuild 2>/dev/null |
		grep -e "$VERBS_TESTS_RE" | grep -v ' / vb_live$' | sed 's|.* / ||')
	mkdir -p "$VM_RESULTS"
	rm -f "$VM_RESULTS"/*.rc "$VM_RESULTS/junit-vm.xml"
	local vb_live=$ASAN_BUILD/tests/unit/transport/test_vb_live
	RPFS_BUILD=$VM_BUILD RPFS_TRANSPORT=$VM_TRANSPORT RPFS_VM_VB_LIVE=$REPO/$vb_live \
		RPFS_VM_VB_READY=$VB_READY RPFS_VM_VERBS_TESTS="${vm_tests[*]}" RPFS_VM_PYTHON=$PY \
		RPFS_VM_WORKERS=$VM_WORKERS \
		tests/rdma/vm-stage.sh "$VM_RESULTS" </dev/null || rc=$?
	[ $rc -eq 124 ] && echo "test.sh: the VM timed out"
	[ $rc -eq 125 ] && echo "test.sh: the VM failed to boot or stopped early"
	for s in smoke quickstart vb_live; do
		if [ "$(cat "$VM_RESULTS/$s.rc" 2>/dev/null)" = 0 ]; then
			echo "vm step $s: ok"
			count "vm_$s" 1 0
		else
			echo "vm step $s: FAILED"
			count "vm_$s" 0 1
			failed vm "step $s"
		fi
	done
	if [ ${#vm_tests[@]} -gt 0 ]; then
		meson_counts vm_meson "$VM_RESULTS/meson-verbs.log"
	fi
	junit_counts vm_pytest "$VM_RESULTS/junit-vm.xml"
}

lane_vm() {
	if ! timed "vm build" build_vm; then
		echo "test.sh: the VM build failed, stage 4 not run"
		count vm 0 1
		return
	fi
	timed "vm stage" vm_stage
}

# ---------------------------------------------------------------- summary

# summary: each stage's wall and CPU time, the whole run's, and the 15
# slowest tests of every pytest run (setup, call and teardown together).
summary() {
	say "time"
	awk '{ printf "  %-22s %6d s wall %7d s CPU\n", $1, $2, $3 }' "$STAGE_TIMES"
	printf '  %-22s %6d s wall\n' total $(($(date +%s) - RUN_T0))
	say "the 15 slowest tests"
	"$PY" - "$RUN_TMP/pytest.xml" "$RUN_TMP/pytest-pg.xml" "$VM_RESULTS/junit-vm.xml" \
		"$RUN_TMP/pytest-leases.xml" <<'EOF' || true
import os
import sys
import xml.etree.ElementTree as ET
rows = []
for path, tag in zip(sys.argv[1:], ('lmdb', 'pg', 'vm', 'leas')):
    if not os.path.exists(path):
        continue
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        continue
    for tc in root.iter('testcase'):
        name = '%s::%s' % (tc.get('classname', '').rsplit('.', 1)[-1], tc.get('name'))
        rows.append((float(tc.get('time') or 0), tag, name))
for t, tag, name in sorted(rows, reverse=True)[:15]:
    print('  %7.1f s  %-4s %s' % (t, tag, name))
EOF
	if awk '$3 > 0 { bad = 1 } END { exit !bad }' "$COUNTS"; then
		say "what failed (the logs are above, and under $RUN_TMP)"
		awk '$3 > 0 { printf "  stage %s: %d passed, %d failed\n", $1, $2, $3 }' "$COUNTS"
		sed 's/^/  /' "$FAILURES"
	fi
}

# ---------------------------------------------------------------- stage 0
say "packages"
if ! pkg_install "${PACKAGES[@]}"; then
	echo "test.sh: package installation failed; trying with what is there"
fi
pick_python
echo "python: $PY"
# scripts/rdma-vm.sh's own packages and its kernel, now, so the lanes do
# not run apt-get side by side
scripts/rdma-vm.sh setup || echo "test.sh: rdma-vm.sh setup failed (stage 4 will say why)"
printf 'packages %d 0\n' $(($(date +%s) - RUN_T0)) >"$STAGE_TIMES"

# ------------------------------------------------------------- the lanes
rm -f "$VB_READY"
lane_vm 2>&1 | sed -u 's/^/[vm] /' &
VM_LANE=$!
lane_host
wait $VM_LANE || true

cleanup
summary
read -r PASSED FAILED < <(awk '{ p += $2; f += $3 } END { print p + 0, f + 0 }' "$COUNTS")
if [ "$FAILED" -eq 0 ] && [ "${RPFS_TEST_KEEP:-0}" != 1 ] &&
	! grep -q " $RUN_TMP/" /proc/self/mounts; then
	rm -rf "$RUN_TMP"
else
	echo "logs and test state kept in $RUN_TMP"
fi
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
