#!/usr/bin/env bash
# listio-bench.sh - the list I/O experiments (tests/bench/listio): tiled I/O
# as mpi-tile-io (4 processes, 2x2 tiles of 1024x768 elements, 24- and
# 64-byte elements, with and without list I/O) and the Optimistic Group
# Registration experiment (subarray and holes; Ideal, Indiv., OGR, OGR+Q),
# over verbs inside the RDMA VM (scripts/rdma-vm.sh, soft-RoCE under qemu
# TCG) and over tcp on the host. Prints one table per experiment and
# transport; over verbs, after each OGR table, the OGR cost model T =
# a * pages + b each process of the OGR row calibrated (a, b and b/a,
# comma-separated per process; OGR merges a hole of h pages when
# a * h < b). A benchmark, not a test: it asserts nothing about speed (the
# programs do check the data they read back). Every run's result line is
# parsed strictly (bench_run): a run that fails, prints no well-formed line,
# ran on another transport than asked, or did not read its data back right
# (ok=0) stops the script with status 1 and a line naming the experiment.
#
#   scripts/listio-bench.sh [--iters N] [--only tcp|verbs] [--quick] [--ogr-only]
#
# Each transport gets a fresh cluster (1 mgr + 4 iods on one address, state
# in a temporary directory); verbs runs the tiled list I/O a second time on
# a cluster whose iods use Multiple Message ($RPFS_LIST_MODE=multi).
# --quick skips the 64-byte memory-noncontiguous tile run; --ogr-only runs
# the OGR experiment alone (no tiled I/O, no transfer-scheme table).
# Environment: RPFS_BUILD (default build-ogr; built if missing).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
ITERS=3
ONLY=
QUICK=0
OGR_ONLY=0
while [ $# -gt 0 ]; do
	case "$1" in
	--iters) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "listio-bench: --iters: expected N, got \"${2:-}\"" >&2; exit 2; }
		ITERS=$2; shift ;;
	--only) [[ "${2:-}" =~ ^(tcp|verbs)$ ]] || { echo "listio-bench: --only: expected tcp or verbs, got \"${2:-}\"" >&2; exit 2; }
		ONLY=$2; shift ;;
	--quick) QUICK=1 ;;
	--ogr-only) OGR_ONLY=1 ;;
	*) echo "listio-bench: unknown argument \"$1\"" >&2; exit 2 ;;
	esac
	shift
done
export RPFS_BUILD=${RPFS_BUILD:-build-ogr}
case "$RPFS_BUILD" in /*) BUILD=$RPFS_BUILD ;; *) BUILD=$REPO/$RPFS_BUILD ;; esac
BENCH=$BUILD/tests/bench/listio/rpfs-bench-listio

TMP=$(mktemp -d /tmp/listio-bench.XXXXXX)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT

# start_cluster NAME TRANSPORT ADDR BASEPORT [ENV...]: 4 iods + mgr, wait ready.
# No cluster key, as the measured runs always had: --insecure, since ADDR may
# be the VM's soft-RoCE address, not loopback (on 127.0.0.1 it changes nothing).
start_cluster() {
	local name=$1 tr=$2 addr=$3 port=$4 i iods=()
	shift 4
	local dir=$TMP/$name
	mkdir -p "$dir"
	for i in 0 1 2 3; do
		env "$@" "$BUILD/iod/rpfs-iod" --listen "$addr:$((port + 1 + i))" \
			--data "$dir/iod$i" --transport "$tr" --insecure 2>"$dir/iod$i.log" &
		PIDS+=($!)
		iods+=(--iod "$addr:$((port + 1 + i))")
	done
	for i in 0 1 2 3; do wait_ready "$dir/iod$i.log"; done
	"$BUILD/mgr/rpfs-mgr" --listen "$addr:$port" --db "$dir/db" "${iods[@]}" \
		--transport "$tr" --insecure 2>"$dir/mgr.log" &
	PIDS+=($!)
	wait_ready "$dir/mgr.log"
}

wait_ready() {
	local i
	for i in $(seq 1 200); do
		grep -q "ready" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "listio-bench: no ready line in $1:" >&2
	cat "$1" >&2
	exit 1
}

# fail EXPERIMENT REASON: say which experiment failed and why; exit 1.
fail() {
	echo "listio-bench: FAILED: $1: $2" >&2
	exit 1
}

# The keys of the one line rpfs-bench-listio prints on stdout per run
# (tests/bench/listio/bench_listio.c, main), in its order. Numbers are %.1f,
# %.0f or %d; cost_a_ns, cost_b_ns and cal_us hold one unsigned number per
# process (4), comma-separated.
TILE_KEYS="transport elem list memnc write_MiBs read_MiBs wr_req_per_op rd_req_per_op wr_reg_per_op rd_reg_per_op reg_us_per_op ok"
OGR_KEYS="transport case reg write_MiBs req_per_op reg_per_op reg_us_per_op ogr_groups_per_op fallbacks_per_op cost_a_ns cost_b_ns cal_us ok"
NUM_RE='^[0-9]+(\.[0-9]+)?$'
PROC_RE='^[0-9]+(,[0-9]+){3}$'

# parse_line EXPERIMENT KIND OUT EXPECT...: check OUT, the stdout of one
# run of kind tile or ogr, and fill V (KEY -> value) from it. OUT must be
# exactly one line: KIND, then every key of its kind once, in order, as
# KEY=VALUE, each value of its form; EXPECT (KEY=VALUE words) are values the
# run must echo (what was asked: transport, element size, ...), and ok=1
# (the processes read back what they wrote). Any other line fails the
# experiment; nothing is guessed.
declare -A V
parse_line() {
	local name=$1 kind=$2 out=$3 keys w k v e i=0
	shift 3
	V=()
	[ -n "$out" ] || fail "$name" "no result line"
	[[ "$out" != *$'\n'* ]] || fail "$name" "more than one line of output: $out"
	case "$kind" in tile) keys=($TILE_KEYS) ;; ogr) keys=($OGR_KEYS) ;; esac
	read -ra w <<<"$out"
	[ "${w[0]-}" = "$kind" ] || fail "$name" "not a $kind result line: $out"
	[ $((${#w[@]} - 1)) -eq ${#keys[@]} ] ||
		fail "$name" "expected ${#keys[@]} KEY=VALUE fields, got $((${#w[@]} - 1)): $out"
	for k in "${keys[@]}"; do
		i=$((i + 1))
		[[ "${w[i]}" == "$k="* ]] || fail "$name" "field $i: expected $k=, got \"${w[i]}\": $out"
		v=${w[i]#"$k="}
		case "$k" in
		transport | list | case | reg) [[ "$v" =~ ^[a-z]+$ ]] ;;
		cost_a_ns | cost_b_ns | cal_us) [[ "$v" =~ $PROC_RE ]] ;;
		*) [[ "$v" =~ $NUM_RE ]] ;;
		esac || fail "$name" "$k: malformed value \"$v\": $out"
		V[$k]=$v
	done
	for e in "$@"; do
		[ "${V[${e%%=*}]-}" = "${e#*=}" ] ||
			fail "$name" "${e%%=*} is \"${V[${e%%=*}]-}\", expected \"${e#*=}\": $out"
	done
	[ "${V[ok]}" = 1 ] || fail "$name" "data check failed (ok=${V[ok]}): $out"
	[[ "${V[write_MiBs]}" =~ [1-9] ]] || fail "$name" "no write time measured: $out"
	[ "$kind" = ogr ] || [[ "${V[read_MiBs]}" =~ [1-9] ]] ||
		fail "$name" "no read time measured: $out"
}

# bench_run EXPERIMENT KIND TRANSPORT EXPECT... -- ARGS...: run
# rpfs-bench-listio KIND ARGS, which must exit 0, and parse its line into V
# (parse_line, expecting transport=TRANSPORT and EXPECT). Its stderr goes
# to ours.
bench_run() {
	local name=$1 kind=$2 tr=$3 out rc=0 expect=()
	shift 3
	while [ $# -gt 0 ] && [ "$1" != -- ]; do expect+=("$1"); shift; done
	shift
	out=$("$BENCH" "$kind" "$@") || rc=$?
	[ "$rc" -eq 0 ] || fail "$name" "rpfs-bench-listio exited with status $rc${out:+: $out}"
	parse_line "$name" "$kind" "$out" transport="$tr" "${expect[@]}"
}

# iod_stat ADDR BASEPORT FIELD...: STAT = the sum of these counters over
# the 4 iods; `rpfs stats --server` must answer and hold each of them.
iod_stat() {
	local i f v out
	STAT=0
	for i in 0 1 2 3; do
		out=$("$BUILD/admin/rpfs" stats --server "$1:$(($2 + 1 + i))") ||
			fail "iod counters" "rpfs stats --server $1:$(($2 + 1 + i)) failed"
		for f in "${@:3}"; do
			v=$(tr ',{}' '\n\n\n' <<<"$out" | sed -n "s/^ *\"$f\": *\([0-9]*\).*/\1/p" | head -1)
			[[ "$v" =~ ^[0-9]+$ ]] ||
				fail "iod counters" "no $f in rpfs stats --server $1:$(($2 + 1 + i))"
			STAT=$((STAT + v))
		done
	done
}

# tile_table TRANSPORT ADDR PORT [multi-ADDR multi-PORT]
tile_table() {
	local tr=$1 addr=$2 port=$3 line e l m
	echo
	echo "Tiled I/O over $tr: 4 processes, 2x2 tiles of 1024x768 elements, $ITERS iterations"
	printf '%-5s %-6s %-11s %10s %10s %8s %8s %8s %8s %10s %12s\n' elem memory "list I/O" \
		"write MiB/s" "read MiB/s" "wr req" "rd req" "wr reg" "rd reg" "reg us/op" "iod rdma ops"
	local runs=("24 0 list" "24 0 nolist" "64 0 list" "64 0 nolist" "64 1 list" "64 1 nolist")
	[ "$QUICK" = 1 ] && runs=("24 0 list" "24 0 nolist" "64 0 list" "64 0 nolist")
	for r in "${runs[@]}"; do
		read -r e m l <<<"$r"
		local args=(--elem "$e" --iters "$ITERS")
		[ "$l" = nolist ] && args+=(--nolist)
		[ "$m" = 1 ] && args+=(--memnc)
		local o0 name="tiled I/O over $tr, $e-byte elements, $([ "$m" = 1 ] &&
			echo memory-noncontiguous || echo contiguous), $([ "$l" = list ] &&
			echo list I/O || echo no list I/O)"
		iod_stat "$addr" "$port" rdma_read_ops rdma_write_ops
		o0=$STAT
		bench_run "$name" tile "$tr" elem="$e" list="$([ "$l" = list ] && echo yes || echo no)" \
			memnc="$m" -- "$addr:$port" "${args[@]}"
		iod_stat "$addr" "$port" rdma_read_ops rdma_write_ops
		printf '%-5s %-6s %-11s %10s %10s %8s %8s %8s %8s %10s %12s\n' "$e" \
			"$([ "$m" = 1 ] && echo noncont || echo contig)" "$([ "$l" = list ] && echo yes || echo no)" \
			"${V[write_MiBs]}" "${V[read_MiBs]}" "${V[wr_req_per_op]}" "${V[rd_req_per_op]}" \
			"${V[wr_reg_per_op]}" "${V[rd_reg_per_op]}" "${V[reg_us_per_op]}" "$((STAT - o0))"
	done
}

# multi_table ADDR PORT: list I/O with 64-byte elements in memory-noncontiguous
# tiles on a cluster whose iods use Multiple Message, beside gather/scatter.
mode_row() {
	local label=$1 addr=$2 port=$3 s0 s1 o0 o1
	iod_stat "$addr" "$port" rdma_signaled
	s0=$STAT
	iod_stat "$addr" "$port" rdma_read_ops rdma_write_ops
	o0=$STAT
	bench_run "transfer scheme $label over verbs, 64-byte elements, memory-noncontiguous, list I/O" \
		tile verbs elem=64 list=yes memnc=1 -- "$addr:$port" --elem 64 --memnc --iters "$ITERS"
	iod_stat "$addr" "$port" rdma_signaled
	s1=$STAT
	iod_stat "$addr" "$port" rdma_read_ops rdma_write_ops
	o1=$STAT
	printf '%-22s %10s %10s %12s %14s\n' "$label" "${V[write_MiBs]}" "${V[read_MiBs]}" \
		"$((o1 - o0))" "$((s1 - s0))"
}

# ogr_table TRANSPORT ADDR PORT
ogr_table() {
	local tr=$1 addr=$2 port=$3 c g a b t models=()
	for c in subarray holes; do
		echo
		if [ "$c" = subarray ]; then
			echo "OGR over $tr, subarray: 2048x2048 ints block-distributed over 4 processes, 1024 rows of 4 KiB each, $ITERS writes"
		else
			echo "OGR over $tr, holes: 1024 buffers of 2 KiB from 11 arrays, 10 unmapped holes, $ITERS writes"
		fi
		printf '%-7s %12s %10s %10s %14s %12s %10s\n' case "write MiB/s" "req/op" "reg/op" \
			"reg us/op" "groups/op" "fallb/op"
		for g in ideal indiv ogr ogrq; do
			bench_run "OGR over $tr, $c, registration $g" ogr "$tr" case="$c" reg="$g" -- \
				"$addr:$port" --case "$c" --reg "$g" --iters "$ITERS"
			printf '%-7s %12s %10s %10s %14s %12s %10s\n' \
				"$(case $g in ideal) echo Ideal;; indiv) echo Indiv.;; ogr) echo OGR;; ogrq) echo OGR+Q;; esac)" \
				"${V[write_MiBs]}" "${V[req_per_op]}" "${V[reg_per_op]}" "${V[reg_us_per_op]}" \
				"${V[ogr_groups_per_op]}" "${V[fallbacks_per_op]}"
			if [ "$g" = ogr ]; then
				models+=("${V[cost_a_ns]} ${V[cost_b_ns]} ${V[cal_us]}")
			fi
		done
		if [ "$tr" = verbs ] && [ ${#models[@]} -gt 0 ]; then
			read -r a b t <<<"${models[-1]}"
			echo "  OGR cost model of the OGR row's 4 processes: a = $a ns/page, b = $b ns/call (b/a = $(ratio "$a" "$b")), calibration $t us"
		fi
		models=()
	done
}

# ratio A_LIST B_LIST: b/a of each process ("x,y,..." lists), rounded.
ratio() {
	local IFS=, a b i out=
	read -ra a <<<"$1"
	read -ra b <<<"$2"
	for i in "${!a[@]}"; do
		if [[ "${a[$i]}" =~ ^[1-9][0-9]*$ && "${b[$i]:-}" =~ ^[0-9]+$ ]]; then
			out+="${out:+,}$(( (b[i] + a[i] / 2) / a[i] ))"
		else
			out+="${out:+,}?"
		fi
	done
	echo "$out"
}

if [ "${RPFS_IN_VM:-}" != 1 ]; then
	# The build's packages and what runs in the VM from the host's root
	# (nothing beyond them); rdma-vm.sh installs its own.
	. "$REPO/scripts/packages.sh"
	pkg_install "${RPFS_BUILD_PACKAGES[@]}" ||
		{ echo "listio-bench: cannot install packages" >&2; exit 1; }
	if [ ! -f "$BUILD/build.ninja" ]; then
		meson setup "$BUILD" -Dwerror=true >/dev/null
	fi
	ninja -C "$BUILD" >/dev/null
	if [ "$ONLY" != verbs ]; then
		echo "=== tcp on the host (127.0.0.1) ==="
		export RPFS_TRANSPORT=tcp
		start_cluster tcp tcp 127.0.0.1 7600
		[ "$OGR_ONLY" = 1 ] || tile_table tcp 127.0.0.1 7600
		ogr_table tcp 127.0.0.1 7600
		for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
		wait 2>/dev/null || true
		PIDS=()
	fi
	if [ "$ONLY" != tcp ]; then
		args=(--iters "$ITERS")
		[ "$QUICK" = 1 ] && args+=(--quick)
		[ "$OGR_ONLY" = 1 ] && args+=(--ogr-only)
		"$REPO/scripts/rdma-vm.sh" run --timeout 3000 -- \
			"$REPO/scripts/listio-bench.sh" --only verbs "${args[@]}"
	fi
	exit 0
fi

# ------------------------------------------------------------- inside the VM
ADDR=${RPFS_RDMA_ADDR:?not in the RDMA VM}
export RPFS_TRANSPORT=verbs # the benchmark's clients and rpfs stats
echo "=== verbs in the RDMA VM (soft-RoCE under TCG, $ADDR) ==="
start_cluster verbs verbs "$ADDR" 7600
[ "$OGR_ONLY" = 1 ] || tile_table verbs "$ADDR" 7600
ogr_table verbs "$ADDR" 7600
[ "$OGR_ONLY" = 1 ] && exit 0
start_cluster multi verbs "$ADDR" 7700 RPFS_LIST_MODE=multi
echo
echo "Transfer scheme, verbs: 64-byte elements, tiles noncontiguous in memory and file, list I/O"
printf '%-22s %10s %10s %12s %14s\n' scheme "write MiB/s" "read MiB/s" "iod RDMA ops" "iod signaled"
mode_row "gather/scatter" "$ADDR" 7600
mode_row "multiple message" "$ADDR" 7700
