#!/usr/bin/env bash
# vm-bench.sh - fio on an rpfs mount over verbs and over tcp, in one run of
# the RDMA VM (scripts/rdma-vm.sh: soft-RoCE under qemu TCG), and the client
# CPU it took. A benchmark, not a test: it asserts nothing about speed.
#
#   scripts/vm-bench.sh [--size MIB] [--runtime S] [--rounds N] [--perf] [--seal]
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
# them the transport counters of the run (common/transport/README.md
# "Client copies and registrations"): copies per byte moved
# ((client_copy_bytes + fuse_copy_bytes) / bytes fio moved; "-" when the
# mount has no fuse_copy_bytes counter), registrations per data operation (reg_count /
# data_ops) and pin-down cache misses per operation (an engine row counts
# its whole job process, so its mount's few connection registrations and
# the buffer's one cache fill are spread over the run's operations; a mount
# row counts only the delta over the job). Numbers under TCG say
# how the transports compare on one machine, not what hardware would do.
#
# --seal adds a third cluster, "sealed": verbs with a cluster key, so every
# message carries a MAC and the bulk data a data tag
# (common/transport/README.md "Keys and the handshake"), run in the same
# rounds, and prints per job its throughput, client CPU and iod CPU as
# ratios to the keyless verbs cluster's (the cost of the seal). Each row also has the CPU seconds per
# GiB of the cluster's 4 iods over the job.
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
SEAL=
while [ $# -gt 0 ]; do
	case "$1" in
	--size) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "vm-bench: --size: expected MiB, got \"${2:-}\"" >&2; exit 2; }
		SIZE=$2; shift ;;
	--runtime) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "vm-bench: --runtime: expected seconds, got \"${2:-}\"" >&2; exit 2; }
		RUNTIME=$2; shift ;;
	--rounds) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "vm-bench: --rounds: expected N, got \"${2:-}\"" >&2; exit 2; }
		ROUNDS=$2; shift ;;
	--perf) PERF=--perf ;;
	--seal) SEAL=--seal ;;
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
		"$REPO/scripts/vm-bench.sh" --size "$SIZE" --runtime "$RUNTIME" --rounds "$ROUNDS" $PERF $SEAL
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

# transport_of NAME: the transport of cluster NAME (sealed runs verbs).
transport_of() {
	if [ "$1" = sealed ]; then echo verbs; else echo "$1"; fi
}

# start_cluster NAME BASEPORT: 4 iods and a mgr on ADDR with NAME's
# transport, mounted at $TMP/mnt-NAME; sets FUSE_PID_NAME and IOD_PIDS_NAME.
# No cluster key, as the measured runs always had (--insecure, since ADDR,
# the VM's soft-RoCE address, is not loopback), except for "sealed", which
# has a fresh one ($TMP/sealed.key).
start_cluster() {
	local t i iods=() st=$TMP/$1 mnt=$TMP/mnt-$1 base=$2 sec=(--insecure) mopt=()
	local ipids=""
	t=$(transport_of "$1")
	mkdir -p "$st/logs" "$mnt"
	if [ "$1" = sealed ]; then
		"$BUILD/admin/rpfs" keygen "$TMP/sealed.key" >/dev/null
		sec=(--key "$TMP/sealed.key")
		mopt=(-o "key=$TMP/sealed.key")
	fi
	for i in 0 1 2 3; do
		RPFS_TRANSPORT=$t "$BUILD/iod/rpfs-iod" --listen "$ADDR:$((base + 1 + i))" \
			--data "$st/iod$i" --log-level notice "${sec[@]}" \
			2>"$st/logs/iod$i.log" &
		PIDS+=($!)
		ipids+=" $!"
		iods+=(--iod "$ADDR:$((base + 1 + i))")
	done
	eval "IOD_PIDS_$1=\"$ipids\""
	for i in 0 1 2 3; do wait_log "$st/logs/iod$i.log" 'ready:'; done
	RPFS_TRANSPORT=$t "$BUILD/mgr/rpfs-mgr" --listen "$ADDR:$base" --db "$st/db" \
		"${iods[@]}" --log-level notice "${sec[@]}" 2>"$st/logs/mgr.log" &
	PIDS+=($!)
	wait_log "$st/logs/mgr.log" 'ready:'
	RPFS_TRANSPORT=$t "$BUILD/fuse-client/rpfs-fuse" "$ADDR:$base" "$mnt" -f "${mopt[@]}" \
		2>"$st/logs/fuse.log" &
	PIDS+=($!)
	eval "FUSE_PID_$1=$!"
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

# iod_ticks NAME: utime + stime of cluster NAME's iods together, in ticks.
iod_ticks() {
	local p sum=0
	for p in $(eval echo "\$IOD_PIDS_$1"); do
		sum=$((sum + $(cpu_ticks "$p")))
	done
	echo "$sum"
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
# $TMP/results: T JOB bytes seconds iops cpu_s KEY=VALUE... (counters; the
# iods' CPU seconds as iod_cpu_s=).
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

# ticks_s TICKS: clock ticks as seconds.
ticks_s() {
	awk -v c="$1" -v hz="$TICK" 'BEGIN { printf "%.3f", c / hz }'
}

# run_engine NAME BASEPORT JOB: one fio job through the engine on NAME's
# cluster (its own mount inside fio, registered buffers); CPU and counters
# from its rpfs_stats line.
run_engine() {
	local t=$1 base=$2 job=$3 out=$TMP/fio-$1-e-$3.json st=$TMP/fio-$1-e-$3.stats
	local key=() i0 i1
	[ "$t" = sealed ] && key=(--rpfs_key="$TMP/sealed.key")
	rm -f "$st"
	i0=$(iod_ticks "$t")
	# shellcheck disable=SC2046 # job_args: words
	profiled "$t" "e-$job" fio --name="e-$job" --ioengine="external:$BUILD/fuse-client/librpfs_fio.so" \
		--rpfs_mgr="$ADDR:$base" --rpfs_transport="$(transport_of "$t")" --rpfs_stats="$st" \
		"${key[@]}" --output-format=json $(job_args "$job" ebench.dat) >"$out"
	i1=$(iod_ticks "$t")
	local words cpu
	words=$(python3 "$REPO/tests/bench/report.py" netdelta - "$st")
	cpu=$(echo "$words" | sed -n 's/.*engine_cpu_s=\([0-9.]*\).*/\1/p')
	# shellcheck disable=SC2086 # words: KEY=VALUE
	result "$out" "$t" "e-$job" "$cpu" $words "iod_cpu_s=$(ticks_s $((i1 - i0)))"
}

# run_job T JOB: one fio job on T's mount; appends a result line (result)
# with the CPU of its rpfs-fuse and the counters its rpfs.stats moved.
run_job() {
	local t=$1 job=$2 mnt=$TMP/mnt-$1 pid args c0 c1 i0 i1 out
	pid=$(eval echo "\$FUSE_PID_$t")
	[ "$job" = seqwrite ] && rm -f "$mnt/bench.dat"
	read -ra args <<<"$(job_args "$job" "$mnt/bench.dat")"
	drop_caches
	stats "$t" "$TMP/net0"
	c0=$(cpu_ticks "$pid")
	i0=$(iod_ticks "$t")
	out=$TMP/fio-$t-$job.json
	profiled "$t" "$job" fio --name="$job" --ioengine=psync --direct=0 --output-format=json "${args[@]}" >"$out"
	c1=$(cpu_ticks "$pid")
	i1=$(iod_ticks "$t")
	stats "$t" "$TMP/net1"
	local words
	words=$(python3 "$REPO/tests/bench/report.py" netdelta "$TMP/net0" "$TMP/net1")
	# shellcheck disable=SC2086 # words: KEY=VALUE
	result "$out" "$t" "$job" "$(ticks_s $((c1 - c0)))" $words "iod_cpu_s=$(ticks_s $((i1 - i0)))"
}

echo "vm-bench: $(uname -r), $(nproc) vCPUs, rxe on $ADDR, size ${SIZE} MiB, randread ${RUNTIME} s, rounds $ROUNDS${SEAL:+, with the sealed cluster}"
NAMES=(verbs tcp)
[ -n "$SEAL" ] && NAMES=(verbs sealed tcp)
declare -A BASE=([verbs]=7500 [tcp]=7600 [sealed]=7700)
for t in "${NAMES[@]}"; do
	start_cluster "$t" "${BASE[$t]}"
done
: >"$TMP/results"
for r in $(seq "$ROUNDS"); do
	for job in seqwrite seqread randread; do
		for t in "${NAMES[@]}"; do
			run_job "$t" "$job"
		done
	done
	for job in seqwrite seqread randread; do
		for t in "${NAMES[@]}"; do
			run_engine "$t" "${BASE[$t]}" "$job"
		done
	done
done
for t in "${NAMES[@]}"; do
	echo "--- rpfs.stats of the $t mount"
	getfattr --absolute-names --only-values -n rpfs.stats "$TMP/mnt-$t"; echo
done
python3 - "$TMP/results" "$REPO/tests/bench" <<'EOF'
import sys
from collections import defaultdict
sys.path.insert(0, sys.argv[2])
import report
acc = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0, {}, 0.0])
for line in open(sys.argv[1]):
    t, job, b, s, iops, cpu, *words = line.split()
    iod = [float(w.split('=', 1)[1]) for w in words if w.startswith('iod_cpu_s=')]
    words = [w for w in words if not w.startswith('iod_cpu_s=')]
    a = acc[(job, t)]
    a[0] += int(b); a[1] += float(s); a[2] += float(iops); a[3] += float(cpu); a[4] += 1
    a[6] += iod[0] if iod else 0.0
    for k, v in report.record('none', '-', words).items():
        if isinstance(v, (int, float)):
            a[5][k] = a[5].get(k, 0) + v
JOBS = ('seqwrite', 'seqread', 'randread', 'e-seqwrite', 'e-seqread', 'e-randread')
NAMES = ('verbs', 'sealed', 'tcp')
def figures(job, t):
    """MB/s, IOPS, client and iod CPU s/GiB of (job, t), summed over rounds."""
    b, s, iops, cpu, n, net, iod = acc[(job, t)]
    gib = b / float(1 << 30)
    return (b / s / 1e6 if s else 0, iops / n, cpu / gib if gib else 0,
            iod / gib if gib else 0)
print('| job | transport | MB/s | IOPS | client CPU s/GiB | iod CPU s/GiB | copies/B | regs/op | misses/op |')
print('|---|---|---|---|---|---|---|---|---|')
for job in JOBS:
    for t in NAMES:
        if (job, t) not in acc:
            continue
        mbs, iops, cpu, iod = figures(job, t)
        cols = report.net_columns(acc[(job, t)][5], acc[(job, t)][0], job.startswith('e-'))
        print('| %s %s | %s | %.1f | %.0f | %.2f | %.2f | %s |' % (
            job, '4k' if job.endswith('randread') else '1M', t, mbs, iops, cpu, iod,
            ' | '.join(cols)))
if any(t == 'sealed' for _j, t in acc):
    print()
    print('sealed / verbs (the cost of the seal; 1.00 = none)')
    print('| job | throughput | client CPU per GiB | iod CPU per GiB |')
    print('|---|---|---|---|')
    r = lambda a, b: '%.2f' % (a / b) if b else '-'
    for job in JOBS:
        if (job, 'sealed') not in acc or (job, 'verbs') not in acc:
            continue
        s, v = figures(job, 'sealed'), figures(job, 'verbs')
        print('| %s | %s | %s | %s |' % (job, r(s[0], v[0]), r(s[2], v[2]), r(s[3], v[3])))
EOF
if [ -n "$PERF" ]; then
	for job in seqwrite seqread randread; do
		for t in "${NAMES[@]}"; do
			perf_summary "$t" "$job" rpfs-fuse
			perf_summary "$t" "e-$job" fio
		done
	done
fi
