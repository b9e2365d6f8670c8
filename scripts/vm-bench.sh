#!/usr/bin/env bash
# vm-bench.sh - fio on an rpfs mount over verbs and over tcp, in one run of
# the RDMA VM (scripts/rdma-vm.sh: soft-RoCE under qemu TCG), and the client
# CPU it took. A benchmark, not a test: it asserts nothing about speed.
#
#   scripts/vm-bench.sh [--size MIB] [--runtime S] [--rounds N] [--perf]
#
# On the host it boots the VM and runs itself inside. Inside, it starts two
# clusters on $RPFS_RDMA_ADDR (1 mgr + 4 iods each, state on the VM's tmpfs),
# one with RPFS_TRANSPORT=verbs and one with tcp, mounts both, and runs, for
# each job, verbs then tcp (interleaved, --rounds times):
#   seqwrite  sequential 1 MiB writes of --size MiB (end_fsync)
#   seqread   sequential 1 MiB reads of that file, page cache dropped first
#   randread  random 4 KiB reads of it for --runtime s, cache dropped first
# then the same three through the fio engine (ioengine=external:
# librpfs_fio.so, its I/O buffers registered memory, no FUSE), rows
# e-seqwrite, e-seqread, e-randread, and prints MB/s, IOPS and the client
# CPU seconds per GiB moved: the rpfs-fuse process's (utime + stime from
# /proc/PID/stat, before and after), or the engine job process's (getrusage
# from its mount to its end, from its rpfs_stats line: fio's per-I/O work
# included, its start-up not). Beside
# them the transport counters of the run (HACKING.md "Client copies and
# registrations"): copies per byte moved ((client_copy_bytes +
# fuse_copy_bytes) / bytes fio moved; "-" when the mount has no
# fuse_copy_bytes counter), registrations per data operation (reg_count /
# data_ops) and pin-down cache misses per operation (an engine row counts
# its whole job process, so its mount's few connection registrations and
# the buffer's one cache fill are spread over the run's operations; a mount
# row counts only the delta over the job). Numbers under TCG say
# how the transports compare on one machine, not what hardware would do.
#
# --perf records every job system-wide with perf (cpu-clock, call graphs;
# the VM has no PMU) and prints, per job and transport, where the CPU went:
# the share of each command and, for the client (rpfs-fuse, or fio for an
# engine row), its top kernel and user symbols. It slows every job, so its
# table is for the profile, not for the figures.
#
# Environment: RPFS_BUILD (default build-vm; built if missing, with the fio
# engine), RPFS_VM_BENCH_TIMEOUT (default 1800 s, the VM's limit).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
SIZE=256
RUNTIME=20
ROUNDS=1
PERF=
while [ $# -gt 0 ]; do
	case "$1" in
	--size) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "vm-bench: --size: expected MiB, got \"${2:-}\"" >&2; exit 2; }
		SIZE=$2; shift ;;
	--runtime) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "vm-bench: --runtime: expected seconds, got \"${2:-}\"" >&2; exit 2; }
		RUNTIME=$2; shift ;;
	--rounds) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "vm-bench: --rounds: expected N, got \"${2:-}\"" >&2; exit 2; }
		ROUNDS=$2; shift ;;
	--perf) PERF=--perf ;;
	*) echo "vm-bench: unknown argument \"$1\"" >&2; exit 2 ;;
	esac
	shift
done
export RPFS_BUILD=${RPFS_BUILD:-build-vm}
case "$RPFS_BUILD" in /*) BUILD=$RPFS_BUILD ;; *) BUILD=$REPO/$RPFS_BUILD ;; esac

if [ "${RPFS_IN_VM:-}" != 1 ]; then
	# The build's packages and what runs in the VM from the host's root
	# (fio attr python3); rdma-vm.sh installs its own.
	. "$REPO/scripts/packages.sh"
	pkg_install "${RPFS_BUILD_PACKAGES[@]}" fio attr python3 ||
		{ echo "vm-bench: cannot install packages" >&2; exit 1; }
	pkg_install "${RPFS_FIO_SRC_PACKAGES[@]}" ||
		{ echo "vm-bench: cannot install the fio engine's packages" >&2; exit 1; }
	if [ ! -f "$BUILD/build.ninja" ]; then
		meson setup "$BUILD" --buildtype=release -Dwerror=true -Dverbs=enabled \
			-Dfio_engine=enabled
	fi
	ninja -C "$BUILD" >/dev/null
	if [ ! -f "$BUILD/fuse-client/librpfs_fio.so" ]; then
		# an existing build without the engine: enable it (fio-src.sh)
		meson configure "$BUILD" -Dfio_engine=enabled >/dev/null
		ninja -C "$BUILD" >/dev/null
	fi
	exec "$REPO/scripts/rdma-vm.sh" run --timeout "${RPFS_VM_BENCH_TIMEOUT:-1800}" -- \
		"$REPO/scripts/vm-bench.sh" --size "$SIZE" --runtime "$RUNTIME" --rounds "$ROUNDS" $PERF
fi

# ------------------------------------------------------------- inside the VM
ADDR=${RPFS_RDMA_ADDR:?not in the RDMA VM}
TMP=$(mktemp -d /tmp/vm-bench.XXXXXX)
TICK=$(getconf CLK_TCK)
PIDS=()
MNTS=()

cleanup() {
	local m p
	for m in "${MNTS[@]}"; do
		fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
}
trap cleanup EXIT

# wait_log FILE REGEX: wait (up to 60 s) for a line in a daemon's log.
wait_log() {
	local i
	for i in $(seq 600); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "vm-bench: no \"$2\" in $1:" >&2
	tail -n 20 "$1" >&2
	return 1
}

# start_cluster T BASEPORT: 4 iods and a mgr on ADDR with transport T,
# mounted at $TMP/mnt-T; sets FUSE_PID_T. No cluster key, as the measured
# runs always had: --insecure, since ADDR (the VM's soft-RoCE address) is
# not loopback.
start_cluster() {
	local t=$1 base=$2 i iods=() st=$TMP/$1 mnt=$TMP/mnt-$1
	mkdir -p "$st/logs" "$mnt"
	for i in 0 1 2 3; do
		RPFS_TRANSPORT=$t "$BUILD/iod/rpfs-iod" --listen "$ADDR:$((base + 1 + i))" \
			--data "$st/iod$i" --log-level notice --insecure \
			2>"$st/logs/iod$i.log" &
		PIDS+=($!)
		iods+=(--iod "$ADDR:$((base + 1 + i))")
	done
	for i in 0 1 2 3; do wait_log "$st/logs/iod$i.log" 'ready:'; done
	RPFS_TRANSPORT=$t "$BUILD/mgr/rpfs-mgr" --listen "$ADDR:$base" --db "$st/db" \
		"${iods[@]}" --log-level notice --insecure 2>"$st/logs/mgr.log" &
	PIDS+=($!)
	wait_log "$st/logs/mgr.log" 'ready:'
	RPFS_TRANSPORT=$t "$BUILD/fuse-client/rpfs-fuse" "$ADDR:$base" "$mnt" -f \
		2>"$st/logs/fuse.log" &
	PIDS+=($!)
	eval "FUSE_PID_$t=$!"
	MNTS+=("$mnt")
	for i in $(seq 300); do
		mountpoint -q "$mnt" && break
		sleep 0.1
	done
	mountpoint -q "$mnt" || { echo "vm-bench: $mnt not mounted" >&2; tail "$st/logs/fuse.log" >&2; exit 1; }
	local got
	got=$(getfattr --absolute-names --only-values -n rpfs.stats "$mnt" 2>/dev/null | sed -n 's/.*"transport":"\([a-z]*\)".*/\1/p')
	[ "$got" = "$t" ] || { echo "vm-bench: $mnt runs transport \"$got\", not $t" >&2; exit 1; }
}

# cpu_ticks PID: utime + stime of a process, in clock ticks.
cpu_ticks() {
	awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# stats T FILE: the rpfs.stats counters of T's mount into FILE.
stats() {
	getfattr --absolute-names --only-values -n rpfs.stats "$TMP/mnt-$1" >"$2"
}

# result OUT T JOB CPU_S NETWORDS...: append one result line to
# $TMP/results: T JOB bytes seconds iops cpu_s KEY=VALUE... (counters).
result() {
	python3 - "$@" >>"$TMP/results" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))['jobs'][0]
d = j['write'] if j['write']['io_bytes'] else j['read']
print(sys.argv[2], sys.argv[3], d['io_bytes'], d['runtime'] / 1000.0, d['iops'],
      sys.argv[4], *sys.argv[5:])
EOF
}

# profiled T JOB CMD...: run CMD, under a system-wide perf record into
# $TMP/perf-T-JOB.data when --perf was given.
profiled() {
	local t=$1 job=$2
	shift 2
	if [ -n "$PERF" ]; then
		perf record -q -e cpu-clock -a -g -o "$TMP/perf-$t-$job.data" -- "$@"
	else
		"$@"
	fi
}

# perf_summary T JOB CLIENT: where the CPU of T's JOB went (profiled()):
# the share of each command in all samples, then, as shares of CLIENT's own
# samples, its split over binaries, its top symbols and its top call chains
# (children: a kernel entry point with everything it called).
perf_summary() {
	local f=$TMP/perf-$1-$2.data
	[ -f "$f" ] || return 0
	echo "--- perf: $2 over $1: share per command (idle is swapper)"
	perf report -i "$f" --stdio --no-children --sort comm -g none 2>/dev/null |
		grep -E '^ +[0-9]' | head -n 8 || true
	echo "--- perf: $2 over $1: $3 by binary (share of $3's samples)"
	perf report -i "$f" --stdio --no-children --comm "$3" --percentage relative \
		--sort dso -g none --percent-limit 2 2>/dev/null | grep -E '^ +[0-9]' | head -n 8 || true
	echo "--- perf: $2 over $1: $3's top symbols"
	perf report -i "$f" --stdio --no-children --comm "$3" --percentage relative \
		--sort sym -g none --percent-limit 2 2>/dev/null | grep -E '^ +[0-9]' | head -n 15 || true
	echo "--- perf: $2 over $1: $3's samples by call chain"
	perf script -i "$f" --comm "$3" -F comm,ip,sym,dso 2>/dev/null |
		python3 "$REPO/tests/bench/report.py" perfsplit || true
	echo "--- perf: $2 over $1: $3's hottest symbols (>= 5 %) and their 3 main call chains"
	perf report -i "$f" --stdio --no-children --comm "$3" --percentage relative \
		--sort sym -g folded,0.05,caller,count --percent-limit 5 2>/dev/null |
		awk '/^ +[0-9.]+%/ { print; n = 0; next }
		     /^[0-9]+ / && n < 3 { k = split($2, f, ";"); s = f[k > 8 ? k - 7 : 1];
			for (i = (k > 8 ? k - 6 : 2); i <= k; i++) s = s ";" f[i];
			print "        " $1 " samples: " s; n++ }' || true
	echo "--- perf: $2 over $1: $3's top call chains (with callees)"
	perf report -i "$f" --stdio --children --comm "$3" --percentage relative \
		--sort sym -g none --percent-limit 8 2>/dev/null | grep -E '^ +[0-9]' |
		grep -v '\] 0x\|\] 0000' | head -n 25 || true
}

# job_args JOB FILE: fio arguments of a job on FILE (mount or engine).
job_args() {
	case "$1" in
	seqwrite) echo --filename="$2" --rw=write --bs=1M --size="${SIZE}m" --end_fsync=1 ;;
	seqread) echo --filename="$2" --rw=read --bs=1M --size="${SIZE}m" ;;
	randread) echo --filename="$2" --rw=randread --bs=4k --size="${SIZE}m" \
		--runtime="$RUNTIME" --time_based --randrepeat=0 ;;
	esac
}

# run_engine T BASEPORT JOB: one fio job through the engine on T's
# cluster (its own mount inside fio, registered buffers); CPU and counters
# from its rpfs_stats line.
run_engine() {
	local t=$1 base=$2 job=$3 out=$TMP/fio-$1-e-$3.json st=$TMP/fio-$1-e-$3.stats
	rm -f "$st"
	# shellcheck disable=SC2046 # job_args: words
	profiled "$t" "e-$job" fio --name="e-$job" --ioengine="external:$BUILD/fuse-client/librpfs_fio.so" \
		--rpfs_mgr="$ADDR:$base" --rpfs_transport="$t" --rpfs_stats="$st" \
		--output-format=json $(job_args "$job" ebench.dat) >"$out"
	local words cpu
	words=$(python3 "$REPO/tests/bench/report.py" netdelta - "$st")
	cpu=$(echo "$words" | sed -n 's/.*engine_cpu_s=\([0-9.]*\).*/\1/p')
	# shellcheck disable=SC2086 # words: KEY=VALUE
	result "$out" "$t" "e-$job" "$cpu" $words
}

# run_job T JOB: one fio job on T's mount; appends a result line (result)
# with the CPU of its rpfs-fuse and the counters its rpfs.stats moved.
run_job() {
	local t=$1 job=$2 mnt=$TMP/mnt-$1 pid args c0 c1 out
	pid=$(eval echo "\$FUSE_PID_$t")
	[ "$job" = seqwrite ] && rm -f "$mnt/bench.dat"
	read -ra args <<<"$(job_args "$job" "$mnt/bench.dat")"
	drop_caches
	stats "$t" "$TMP/net0"
	c0=$(cpu_ticks "$pid")
	out=$TMP/fio-$t-$job.json
	profiled "$t" "$job" fio --name="$job" --ioengine=psync --direct=0 --output-format=json "${args[@]}" >"$out"
	c1=$(cpu_ticks "$pid")
	stats "$t" "$TMP/net1"
	local words
	words=$(python3 "$REPO/tests/bench/report.py" netdelta "$TMP/net0" "$TMP/net1")
	# shellcheck disable=SC2086 # words: KEY=VALUE
	result "$out" "$t" "$job" "$(awk -v c=$((c1 - c0)) -v hz="$TICK" 'BEGIN { printf "%.3f", c / hz }')" \
		$words
}

echo "vm-bench: $(uname -r), $(nproc) vCPUs, rxe on $ADDR, size ${SIZE} MiB, randread ${RUNTIME} s, rounds $ROUNDS"
start_cluster verbs 7500
start_cluster tcp 7600
: >"$TMP/results"
for r in $(seq "$ROUNDS"); do
	for job in seqwrite seqread randread; do
		for t in verbs tcp; do
			run_job "$t" "$job"
		done
	done
	for job in seqwrite seqread randread; do
		run_engine verbs 7500 "$job"
		run_engine tcp 7600 "$job"
	done
done
for t in verbs tcp; do
	echo "--- rpfs.stats of the $t mount"
	getfattr --absolute-names --only-values -n rpfs.stats "$TMP/mnt-$t"; echo
done
python3 - "$TMP/results" "$REPO/tests/bench" <<'EOF'
import sys
from collections import defaultdict
sys.path.insert(0, sys.argv[2])
import report
acc = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0, {}])
for line in open(sys.argv[1]):
    t, job, b, s, iops, cpu, *words = line.split()
    a = acc[(job, t)]
    a[0] += int(b); a[1] += float(s); a[2] += float(iops); a[3] += float(cpu); a[4] += 1
    for k, v in report.record('none', '-', words).items():
        if isinstance(v, (int, float)):
            a[5][k] = a[5].get(k, 0) + v
print('| job | transport | MB/s | IOPS | client CPU s/GiB | copies/B | regs/op | misses/op |')
print('|---|---|---|---|---|---|---|---|')
for job in ('seqwrite', 'seqread', 'randread', 'e-seqwrite', 'e-seqread', 'e-randread'):
    for t in ('verbs', 'tcp'):
        if (job, t) not in acc:
            continue
        b, s, iops, cpu, n, net = acc[(job, t)]
        gib = b / float(1 << 30)
        cols = report.net_columns(net, b, job.startswith('e-'))
        print('| %s %s | %s | %.1f | %.0f | %.2f | %s |' % (
            job, '4k' if job.endswith('randread') else '1M', t, b / s / 1e6 if s else 0,
            iops / n, cpu / gib if gib else 0, ' | '.join(cols)))
EOF
if [ -n "$PERF" ]; then
	for job in seqwrite seqread randread; do
		for t in verbs tcp; do
			perf_summary "$t" "$job" rpfs-fuse
			perf_summary "$t" "e-$job" fio
		done
	done
fi
