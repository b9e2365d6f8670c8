#!/usr/bin/env bash
# test.sh - everything, as CI runs it:
#   1. an ASan+UBSan build with -Werror, and its C unit tests (meson test);
#   2. the libFuzzer targets (clang), each for a bounded time;
#   3. the pytest integration suite against real daemons and FUSE mounts,
#      using the ASan build, on tcp (tests marked `verbs` deselected): once
#      with the mgr on LMDB, once on a temporary PostgreSQL cluster (there
#      without the tests marked own_store, which bring their own
#      PostgreSQL and ran in the first pass: the several-mgr tests and the
#      database failover matrix);
#   4. the verbs transport in the RDMA VM (scripts/rdma-vm.sh: the Debian
#      kernel under qemu TCG, rdma_rxe on a veth pair): a release build with
#      -Werror, tests/rdma/smoke.sh, tests/rdma/quickstart.sh (the quickstart
#      over verbs), the C tests of meson suite "verbs" if
#      any, test_vb_live from the ASan build, and the pytest suite
#      (test_verbs.py's mechanism tests included) with RPFS_TRANSPORT=verbs
#      on the soft-RoCE address, but for the tests marked host_only and
#      vm_spared (CI's time limit: their transport calls are ones the VM's
#      other tests make; stage 3 runs them). The fault harness,
#      test_netfault.py, runs its own namespaces over tcp, with netem on
#      every link.
# Prints, as its last line, "N passed, N failed" over all four stages (a
# skipped test counts as failed) and exits non-zero if anything failed.
#
# Environment: RPFS_FUZZ_SECONDS (default 60) per fuzz target;
# RPFS_PYTEST_ARGS extra pytest arguments, shell words (e.g. "-k 'shell or
# quickstart'"), both stages;
# RPFS_VM_TRANSPORT (default verbs) the transport of stage 4;
# RPFS_VM_BIG_MIB (default 256) the big-file test's size, RPFS_VM_TAR_FILES
# (default 600) the tar test's files and RPFS_VM_READDIR_N (default 2000) the
# big directory's entries in the VM (the host stage keeps 1024, 3000 and
# 5000: under TCG those three alone would take over 15 minutes);
# RPFS_VM_PYTEST_TIMEOUT (default 3900) seconds for stage 4's pytest VM;
# RPFS_VM_NETEM (default "delay 1ms loss 0.5%") the tc netem of every link
# of the fault harness in the VM (tests/integration/test_netfault.py; the
# host's kernel has no sch_netem, so stage 3 runs it without) and
# RPFS_VM_NETFAULT_TIMEOUT (default 10) its clients' timeout= in seconds;
# RPFS_TEST_KEEP=1 keeps the temporary directory even when all passed.
set -euo pipefail

cd "$(dirname "$0")/.."
FUZZ_SECONDS=${RPFS_FUZZ_SECONDS:-60}
. scripts/packages.sh
# Every tool this script, the scripts it runs and the tests call comes from
# these (or from Debian's required set): the build's and fio-src.sh's,
# clang and its runtime (fuzzing), python3-pytest, fio, attr (getfattr,
# setfattr), util-linux (setpriv, prlimit, mountpoint), mount (umount),
# fuse3 (fusermount3), diffutils (cmp, diff), systemd (systemd-analyze),
# iproute2 (ip, tc: the fault harness; nsenter is util-linux's),
# prometheus (prometheus, promtool: test_metrics.py), PostgreSQL 15
# (scripts/pg-temp.sh: initdb, pg_ctl, psql; runuser, useradd),
# pg_auto_failover (scripts/ha-cluster.sh, tests/integration/test_ha.py);
# scripts/rdma-vm.sh installs the VM's own (qemu, busybox, kmod, ...).
PACKAGES=("${RPFS_BUILD_PACKAGES[@]}" "${RPFS_FIO_SRC_PACKAGES[@]}" "${RPFS_METRICS_TEST_PACKAGES[@]}"
	"${RPFS_PG_TEST_PACKAGES[@]}" "${RPFS_HA_PACKAGES[@]}"
	clang libclang-rt-14-dev
	python3 python3-pytest attr util-linux mount tar diffutils coreutils systemd iproute2)

PASSED=0
FAILED=0
PY= # chosen after stage 0 installed python3-pytest (see pick_python)
RUN_TMP=$(mktemp -d /tmp/rpfs-test.XXXXXX)
export RPFS_TEST_PIDS=$RUN_TMP/pids
: >"$RPFS_TEST_PIDS"
# network namespaces of the fault harness (tests/integration/netns.py)
export RPFS_TEST_NETNS=$RUN_TMP/netns
: >"$RPFS_TEST_NETNS"

# C tests that need real kernel verbs: meson suite "verbs", and vb_live.
VERBS_TESTS_RE=':verbs / \| / vb_live$'

say() { printf '\n=== %s\n' "$*"; }
pass() { PASSED=$((PASSED + ${1:-1})); }
fail() { FAILED=$((FAILED + ${1:-1})); }

# cleanup: unmount whatever the tests left mounted under RUN_TMP, stop
# any process they started that is still running and delete the network
# namespaces they left.
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
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

# install_packages: apt-get install whatever of PACKAGES is missing.
install_packages() {
	pkg_install "${PACKAGES[@]}"
}

# pick_python: set PY to an interpreter that can import pytest, as an
# absolute path (stage 4 runs it inside the VM, whose PATH differs). Called
# only after install_packages: Debian's /usr/bin/python3 has python3-pytest
# then, while a `python3` earlier on PATH (pyenv, a CI image's own build)
# does not see Debian's modules. Falls back to /usr/bin/python3, so a
# missing pytest shows up as a failed stage, never as a silent skip.
pick_python() {
	local p
	for p in /usr/bin/python3 "$(command -v python3 || true)"; do
		if [ -n "$p" ] && "$p" -c 'import pytest' 2>/dev/null; then
			PY=$p
			return 0
		fi
	done
	PY=/usr/bin/python3
	echo "test.sh: no python3 with pytest (python3-pytest not installed?)"
}

# meson_counts LOG: add the "Ok:/Fail:/..." summary of a meson test log.
meson_counts() {
	local log=$1 ok xfail fail xpass skip tmo
	ok=$(sed -n 's/^Ok: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	xfail=$(sed -n 's/^Expected Fail: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	fail=$(sed -n 's/^Fail: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	xpass=$(sed -n 's/^Unexpected Pass: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	skip=$(sed -n 's/^Skipped: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	tmo=$(sed -n 's/^Timeout: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
	if [ -z "$ok" ] && [ -z "$fail" ]; then
		echo "test.sh: no meson test summary found"
		fail 1
		return
	fi
	pass $((${ok:-0} + ${xfail:-0}))
	fail $((${fail:-0} + ${xpass:-0} + ${skip:-0} + ${tmo:-0}))
}

# junit_counts XML: add the test cases of a pytest junit file (failure,
# error and skipped all count as failed; so do collection errors, and a file
# that is missing or holds no test at all).
junit_counts() {
	local junit=$1 p f
	if [ ! -s "$junit" ]; then
		echo "test.sh: pytest produced no results ($junit)"
		fail 1
		return
	fi
	read -r p f < <("$PY" - "$junit" <<'EOF'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
p = f = 0
for tc in root.iter('testcase'):
    if any(c.tag in ('failure', 'error', 'skipped') for c in tc):
        f += 1
    else:
        p += 1
# errors outside any test case (collection) count too
for ts in root.iter('testsuite'):
    if int(ts.get('tests', 0)) == 0 and int(ts.get('errors', 0)):
        f += int(ts.get('errors'))
print(p, f)
EOF
	) || { p=0; f=1; }
	pass "$p"
	fail "$f"
	if [ "$p" = 0 ] && [ "$f" = 0 ]; then
		echo "test.sh: pytest ran no tests ($junit)"
		fail 1
	fi
}

# ---------------------------------------------------------------- stage 0
say "packages"
if ! install_packages; then
	echo "test.sh: package installation failed; trying with what is there"
fi
pick_python
echo "python: $PY"

# ---------------------------------------------------------------- stage 1
say "ASan+UBSan build (-Werror) and unit tests"
ASAN_BUILD=build-asan
asan_ok=1
if [ ! -f "$ASAN_BUILD/build.ninja" ]; then
	meson setup "$ASAN_BUILD" -Db_sanitize=address,undefined -Dwerror=true -Dfio_engine=enabled \
		-Dverbs=enabled -Dpostgresql=enabled --buildtype=debug || asan_ok=0
fi
if [ $asan_ok = 1 ]; then
	ninja -C "$ASAN_BUILD" || asan_ok=0
fi
if [ $asan_ok = 1 ]; then
	# meson test runs every test under its own sanitizer defaults
	# (halt_on_error=1, abort_on_error=1, print stack traces).
	# Tests that need real verbs run in stage 4, inside the VM.
	mapfile -t host_tests < <(meson test -C "$ASAN_BUILD" --list --no-rebuild 2>/dev/null |
		grep -v -e "$VERBS_TESTS_RE" | sed 's|.* / ||')
	set +e
	meson test -C "$ASAN_BUILD" --print-errorlogs "${host_tests[@]}" 2>&1 |
		tee "$RUN_TMP/meson-test.log"
	set -e
	meson_counts "$RUN_TMP/meson-test.log"
else
	echo "test.sh: the ASan build failed"
	fail 1
fi

# ---------------------------------------------------------------- stage 2
say "fuzzing (${FUZZ_SECONDS}s per target)"
FUZZ_BUILD=build-fuzz
fuzz_ok=1
if [ ! -f "$FUZZ_BUILD/build.ninja" ]; then
	CC=clang meson setup "$FUZZ_BUILD" -Dfuzz=true -Db_sanitize=address,undefined \
		-Db_lundef=false --buildtype=debug || fuzz_ok=0
fi
if [ $fuzz_ok = 1 ]; then
	ninja -C "$FUZZ_BUILD" || fuzz_ok=0
fi
targets=()
if [ $fuzz_ok = 1 ]; then
	for t in "$FUZZ_BUILD"/tests/fuzz/fuzz_*; do
		[ -x "$t" ] && [ -f "$t" ] && targets+=("$t")
	done
fi
if [ ${#targets[@]} -eq 0 ]; then
	echo "test.sh: no fuzz target built"
	fail 1
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
		tail -n 15 "$RUN_TMP/$name.log"
		echo "fuzz $name: ok"
		pass 1
	else
		tail -n 60 "$RUN_TMP/$name.log"
		echo "fuzz $name: FAILED (artifacts in $RUN_TMP)"
		fail 1
	fi
done

# ---------------------------------------------------------------- stage 3
# host_pytest STORE NAME: the integration suite with the mgr on STORE
# (lmdb, or postgresql: tests/integration/conftest.py starts a temporary
# PostgreSQL cluster with scripts/pg-temp.sh and every cluster gets a
# database of its own), results in $RUN_TMP/NAME.xml.
host_pytest() {
	local store=$1 name=$2 junit=$RUN_TMP/$2.xml
	# RPFS_PYTEST_ARGS as shell words (quotes work, as in stage 4, where the
	# string is part of the VM's command): split by shlex, never eval'ed.
	local pytest_args=()
	if ! "$PY" -c 'import shlex, sys
sys.stdout.write("".join(a + "\0" for a in shlex.split(sys.argv[1])))' \
		"${RPFS_PYTEST_ARGS:-}" >"$RUN_TMP/pytest-args" 2>/dev/null; then
		echo "test.sh: RPFS_PYTEST_ARGS: expected shell words, got \"${RPFS_PYTEST_ARGS:-}\" (unbalanced quotes?); pytest not run"
		fail 1
		return
	fi
	mapfile -d '' -t pytest_args <"$RUN_TMP/pytest-args"
	set +e
	RPFS_STORE=$store RPFS_BUILD=$ASAN_BUILD timeout -k 60 3600 "$PY" -m pytest \
		tests/integration -v -m "not verbs" --basetemp="$RUN_TMP/$name" \
		--junitxml="$junit" "${pytest_args[@]}" </dev/null
	set -e
	junit_counts "$junit"
}

if [ $asan_ok = 1 ]; then
	# Daemons run with leak detection on; a sanitizer report in any daemon or
	# client log fails the test that was running.
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=0}
	say "integration tests (pytest, $ASAN_BUILD, the lmdb store)"
	host_pytest lmdb pytest
	say "integration tests (pytest, $ASAN_BUILD, the postgresql store)"
	host_pytest postgresql pytest-pg
else
	echo "test.sh: no ASan build, integration tests not run"
	fail 1
fi

# ---------------------------------------------------------------- stage 4
say "verbs in the RDMA VM (qemu TCG, soft-RoCE; transport ${RPFS_VM_TRANSPORT:-verbs})"
# A release build (TCG runs every instruction in software: the ASan build
# would be several times slower), under the checkout so the VM sees it.
VM_BUILD=build-vm
VM_TRANSPORT=${RPFS_VM_TRANSPORT:-verbs}
vm_ok=1
if [ ! -f "$VM_BUILD/build.ninja" ]; then
	meson setup "$VM_BUILD" --buildtype=release -Dwerror=true -Dverbs=enabled \
		-Dfio_engine=enabled -Dpostgresql=enabled ||
		vm_ok=0
fi
if [ $vm_ok = 1 ]; then
	ninja -C "$VM_BUILD" || vm_ok=0
fi
if [ $vm_ok = 0 ]; then
	echo "test.sh: the VM build failed, stage 4 not run"
	fail 1
else
	vm_t0=$(date +%s)
	if tests/rdma/smoke.sh </dev/null; then
		pass 1
	else
		echo "test.sh: tests/rdma/smoke.sh FAILED"
		fail 1
	fi
	# scripts/quickstart.sh over verbs: RPFS_TRANSPORT=verbs and auto on the
	# soft-RoCE address, cp + cmp of 1 KiB..32 MiB, the inline, fast and RDMA
	# counters of rpfs.stats, quickstart.sh stop.
	if RPFS_BUILD=$VM_BUILD tests/rdma/quickstart.sh </dev/null; then
		echo "tests/rdma/quickstart.sh: ok"
		pass 1
	else
		echo "test.sh: tests/rdma/quickstart.sh FAILED"
		fail 1
	fi
	# C tests that need real verbs (suite "verbs", vb_live), if there are any.
	mapfile -t vm_tests < <(meson test -C "$VM_BUILD" --list --no-rebuild 2>/dev/null |
		grep -e "$VERBS_TESTS_RE" | sed 's|.* / ||')
	if [ ${#vm_tests[@]} -gt 0 ]; then
		vm_log=$VM_BUILD/meson-logs/vm-verbs-test.log
		rm -f "$vm_log"
		set +e
		scripts/rdma-vm.sh run --timeout 1200 -- "RPFS_TRANSPORT=$VM_TRANSPORT \
			RPFS_TEST_HOST=\$RPFS_RDMA_ADDR meson test -C $VM_BUILD --no-rebuild \
			--print-errorlogs ${vm_tests[*]} >$vm_log 2>&1; rc=\$?; cat $vm_log; \
			exit \$rc" </dev/null
		set -e
		meson_counts "$vm_log"
	fi
	# The verbs end-to-end C test: not a meson test (it needs real verbs).
	# It runs from the sanitizer build, so a use-after-free or undefined
	# behaviour in the transport fails it even when nothing crashes.
	vb_live=$ASAN_BUILD/tests/unit/test_vb_live
	[ -x "$vb_live" ] || vb_live=$VM_BUILD/tests/unit/test_vb_live
	if [ -x "$vb_live" ]; then
		if scripts/rdma-vm.sh run --timeout 900 -- "RPFS_TRANSPORT=$VM_TRANSPORT \
			UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 $vb_live" </dev/null; then
			echo "test_vb_live: ok"
			pass 1
		else
			echo "test_vb_live: FAILED"
			fail 1
		fi
	elif [ "$VM_TRANSPORT" = verbs ]; then
		echo "test.sh: test_vb_live not built"
		fail 1
	fi
	# The whole integration suite, mechanism tests included. Inside the VM the
	# daemons listen on the rxe address (rxe0 sits on rxe-a, not on lo), the
	# pid list of this host run does not exist, and /tmp is the VM's tmpfs.
	vm_junit=$VM_BUILD/junit-vm.xml
	rm -f "$vm_junit"
	set +e
	scripts/rdma-vm.sh run --timeout "${RPFS_VM_PYTEST_TIMEOUT:-3900}" -- \
		"RPFS_BUILD=$VM_BUILD RPFS_TRANSPORT=$VM_TRANSPORT RPFS_TEST_PIDS= RPFS_TEST_NETNS= \
		RPFS_TEST_HOST=\$RPFS_RDMA_ADDR RPFS_TEST_BIG_MIB=${RPFS_VM_BIG_MIB:-256} \
		RPFS_TEST_TAR_FILES=${RPFS_VM_TAR_FILES:-600} \
		RPFS_TEST_READDIR_N=${RPFS_VM_READDIR_N:-2000} \
		RPFS_NETEM='${RPFS_VM_NETEM:-delay 1ms loss 0.5%}' \
		RPFS_NETFAULT_TIMEOUT=${RPFS_VM_NETFAULT_TIMEOUT:-10} \
		$PY -m pytest tests/integration -v --durations=15 -m 'not host_only and not vm_spared' \
		--junitxml=$vm_junit ${RPFS_PYTEST_ARGS:-}" </dev/null
	vm_rc=$?
	set -e
	[ $vm_rc -eq 124 ] && echo "test.sh: the VM timed out"
	junit_counts "$vm_junit"
	echo "stage 4 took $(($(date +%s) - vm_t0)) s"
fi

cleanup
if [ "$FAILED" -eq 0 ] && [ "${RPFS_TEST_KEEP:-0}" != 1 ] &&
	! grep -q " $RUN_TMP/" /proc/self/mounts; then
	rm -rf "$RUN_TMP"
else
	echo "logs and test state kept in $RUN_TMP"
fi
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
