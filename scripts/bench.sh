#!/usr/bin/env bash
# bench.sh - run the rpfs benchmark suite on this machine, in one command.
#
#   scripts/bench.sh [--quick] [--rounds N] [--scrape] [--out DIR]
#                    [--state-dir DIR] [--meta-matrix] [--stores lmdb[,postgresql]]
#                    [--only main|meta-matrix|workload] [--md-files N]
#                    [--wl-files N] [--targets LIST] [--jobs LIST] [--size SIZE]
#                    [--no-settle]
#                    [--scrape-cost PAIRS] [--seal-cost PAIRS]
#
# Starts a local rpfs cluster (and two small ones for the iod sweep), a
# minimal passthrough FUSE file system (tests/bench/), the same passthrough
# with one loopback TCP round trip per read and write (-o hop,
# tests/bench/bench_hop.c: each FUSE worker's connection has a server
# thread of its own, so no request waits behind another at the server;
# for small reads, the ceiling for any client with a server hop; no
# ceiling for writes that go behind, nor for 1 MiB requests, which a
# striped client spreads over its servers) and a 4-brick GlusterFS
# volume on loopback, all backed by one private tmpfs, then runs the same
# fio jobs (tests/bench/fio/) and the metadata job (tests/bench/mdbench.c)
# on each target: rpfs FUSE mount, rpfs fio engine (if built), tmpfs,
# passthrough, passthrough-hop (data jobs only), GlusterFS.
# Numbers on these machines drift 20-35 % within an hour, so the main jobs
# run in --rounds N rounds (default 3, --quick 1): each round runs every
# job on every target, the targets interleaved per job (job J on every
# target, then job J+1), their order rotating from job to job and from
# round to round, so that drift weighs on all targets alike. The main
# table shows per job and target the median of the rounds and, beside it,
# their spread: half their range, (max - min) / 2, in % of the median
# ("1234 ±5%"; none with 1 round); a ratio is the median of the per-round
# ratios (the two targets of a round ran minutes apart), with its spread
# likewise. Writes DIR/results.md, DIR/results.json, DIR/plot.png and
# prints the table and the ratios rpfs/passthrough, rpfs/passthrough-hop,
# passthrough-hop/passthrough (on 4 KiB random reads, the most a design
# with a server hop reached in this run) and rpfs/GlusterFS. The details
# table ("every run", one row per round) of rpfs rows
# adds the client's copies per byte moved ((client_copy_bytes +
# fuse_copy_bytes) / bytes; "-" without fuse_copy_bytes), registrations and
# pin-down cache misses per data operation, from the mount's rpfs.stats or
# the engine's rpfs_stats lines (common/transport/README.md "Client copies
# and registrations").
#
# --scrape turns on every rpfs daemon's and mount's /metrics (--metrics,
# -o metrics=) and fetches each once a second for the whole run, as a
# Prometheus would: compare with a run without it for the cost of metrics.
#
# --state-dir DIR puts the state of every rpfs cluster (the mgr's database,
# the iods' data; PostgreSQL's data directory) in a fresh directory under
# DIR, which must exist and be writable, instead of the bench tmpfs; the
# output names DIR's file system (stat -f), so a tmpfs figure is not read
# as a disk figure. The reference targets stay on the tmpfs.
#
# --only main runs the main table alone (no sweeps, no matrix); --targets
# LIST (comma-separated: rpfs, rpfs-fio, tmpfs, passthrough,
# passthrough-hop, glusterfs; default all) and --jobs LIST (seqwrite1,
# seqwrite4, seqread1, seqread4, randread4, randwrite4, md1, md100; default
# all) narrow it; --size SIZE sets the file size of the sequential jobs
# (fio's size=, e.g. 64m; default 512m, --quick 128m). --no-settle skips
# the wait for an idle machine before each run (its figures then carry
# whatever else runs: for checking the script itself, as
# tests/integration/test_bench.py does).
#
# --meta-matrix adds the metadata matrix: bench-md -x (creates, stats,
# renames, unlinks, mkdirs, rmdirs per second) by 1 client process, by 4
# in one directory and by 4 each in its own, on a cluster per store
# (--stores, default lmdb; --store postgresql = --stores lmdb,postgresql)
# with its state on the tmpfs and, with --state-dir, on DIR, beside the
# passthrough; each rpfs cell adds the mgr's requests per op and store
# commits per op, read from its /metrics before and after each phase, each
# time once the mount's reaper has purged every file the phase freed
# (rpfs.stats: reap_inodes reaches reap_queued; mdmatrix.py snap waits up
# to $RPFS_BENCH_REAP_WAIT seconds, default 60, and fails the run saying
# so), so that an unlink's PURGE_MANY is counted in the unlink phase.
# The postgresql store needs rpfs-mgr --store/--store-uri, rpfs mkfs
# --store-uri and scripts/pg-temp.sh. --only meta-matrix runs the matrix
# alone (no fio, no GlusterFS). --md-files N: files per metadata job
# (default 10000, --quick 2000).
#
# --only workload runs the small-file workload alone (a full run leaves
# it out: on its 50,000-file tree one round takes about 45 minutes on a
# 2-core machine with the rpfs state on disk, estimated from a 2,000-file
# round, about 1 minute of jobs per rpfs target). The tree is
# source-like: --wl-files N files (default 50000, at most 999999) in N/25
# directories (at least 1) nested up to 6 levels, sizes
# 0-64 KiB skewed small (median 2.5 KiB, about 85 % under 8 KiB), made by
# tests/bench/workload.py with a fixed seed, so every run makes the same
# tree; it is made once per run on the bench tmpfs, as a tarball and as a
# packed git repository. The jobs, each timed on its own on every target:
# untar (tar x into an empty directory), clone (git clone --no-hardlinks
# of the repository), cp -a (of the untarred tree to a sibling), rm -rf
# (of the untarred tree and its copy), then bench-md's create, stat and
# unlink of --md-files files (default 10000, --quick 2000) by 1 process,
# by 4 in one directory and by 4 each in its own. Caches are dropped before
# each job. In round 1 the untarred tree on every target is checked
# against the source (a manifest: paths, types, modes, sizes, mtimes,
# sha256; OUT/workload-manifest*.txt). Targets: the passthrough (the
# ceiling), rpfs on a 4-iod cluster per store (--stores, here default
# lmdb,postgresql: columns rpfs and rpfs-pg), GlusterFS when it starts.
# rpfs runs in three modes (WL_VARIANTS): as mounted by default, columns
# rpfs and rpfs-pg; with -o leases, rpfs-leases and rpfs-leases-pg; and
# with -o leases,deleg, rpfs-deleg and rpfs-deleg-pg. The rpfs state lies
# on --state-dir, in this mode by default
# /var/tmp (a disk; its file system is printed); the passthrough's source
# and the GlusterFS bricks stay on the tmpfs. --rounds N rounds (default
# 3, --quick 1), the targets interleaved per job as in the main table.
# Prints the table (per job: the median time on each target; beside each
# rpfs cell the mgr's requests and store commits per file-system entry,
# from its /metrics read before and after the job once the mount's reaper
# is done, as in the matrix, and the ratio to the passthrough) and writes
# OUT/workload.md and OUT/workload.jsonl.
#
# --scrape-cost PAIRS runs instead the main jobs on the rpfs mount only,
# each PAIRS times without scraping and PAIRS times with it, interleaved
# (off,on then on,off, ...) on one cluster whose daemons all serve /metrics,
# and prints per job the medians, their ratio and the spread of the runs
# without scraping (the noise).
#
# --seal-cost ROUNDS runs instead the main jobs on three rpfs clusters of
# 4 iods: one without a cluster key ("off"), one with a key, whose TCP
# streams are sealed after the handshake ("mac": a Poly1305 tag on every
# record, no sendfile or splice), and one whose mount also asks to
# encrypt ("enc": [net] encrypt = on, ChaCha20-Poly1305), each job ROUNDS
# times on each, the order rotating per round, and prints per job the
# medians of throughput and of the CPU seconds of all their processes
# (iods, mgr and mount), the ratios to "off" and the noise.
#
# Needs root (mounts, drop_caches, pipe-max-size, glusterd). Everything it
# starts is stopped and everything it mounts is unmounted at exit;
# /proc/sys/fs/pipe-max-size is restored.
#
# Environment:
#   RPFS_BUILD        build directory (default build; made as a release build)
#   RPFS_BENCH_PORT   first TCP port (default 7500; uses PORT..PORT+24,
#                     PORT+30..PORT+56 for /metrics with --scrape, and
#                     PORT+60..PORT+99 for the metadata matrix)
#   RPFS_FIO_ENGINE   path of the rpfs fio external engine (default: searched
#                     for as BUILD/**/*fio*.so)
#   RPFS_BENCH_REAP_WAIT  seconds the matrix waits at most for a mount's
#                     reaper before reading the mgr's counts (default 60)
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$PWD
BUILD=${RPFS_BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
PORT=${RPFS_BENCH_PORT:-7500}
PY=/usr/bin/python3
QUICK=0
SCRAPE=0
OUT=
STATE_DIR=
MATRIX=0
ONLY=
STORES=lmdb
MD_FILES_ARG=
WL_FILES_ARG=
STORES_SET=0
ROUNDS_ARG=
TARGETS_ARG=
JOBS_ARG=
SIZE_ARG=
SETTLE=1
SCRAPE_COST=0
SEAL_COST=0
KEYFILE=
FUSE_CONF=
FUSE_XOPTS=
T_START=$(date +%s)

say() { printf 'bench: %s\n' "$*" >&2; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }
# usage: the header comment above, up to its first non-comment line.
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit "$1"; }

while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--rounds) [ $# -ge 2 ] || die "--rounds: expected N"; ROUNDS_ARG=$2; shift ;;
	--rounds=*) ROUNDS_ARG=${1#--rounds=} ;;
	--targets) [ $# -ge 2 ] || die "--targets: expected LIST"; TARGETS_ARG=$2; shift ;;
	--targets=*) TARGETS_ARG=${1#--targets=} ;;
	--jobs) [ $# -ge 2 ] || die "--jobs: expected LIST"; JOBS_ARG=$2; shift ;;
	--jobs=*) JOBS_ARG=${1#--jobs=} ;;
	--size) [ $# -ge 2 ] || die "--size: expected SIZE"; SIZE_ARG=$2; shift ;;
	--size=*) SIZE_ARG=${1#--size=} ;;
	--no-settle) SETTLE=0 ;;
	--scrape) SCRAPE=1 ;;
	--out) [ $# -ge 2 ] || die "--out: expected DIR"; OUT=$2; shift ;;
	--out=*) OUT=${1#--out=} ;;
	--state-dir) [ $# -ge 2 ] || die "--state-dir: expected DIR"; STATE_DIR=$2; shift ;;
	--state-dir=*) STATE_DIR=${1#--state-dir=} ;;
	--meta-matrix) MATRIX=1 ;;
	--only) [ $# -ge 2 ] || die "--only: expected main, meta-matrix or workload"; ONLY=$2; shift ;;
	--only=*) ONLY=${1#--only=} ;;
	--stores) [ $# -ge 2 ] || die "--stores: expected lmdb[,postgresql]"; STORES=$2 STORES_SET=1; shift ;;
	--stores=*) STORES=${1#--stores=} STORES_SET=1 ;;
	--store) [ $# -ge 2 ] || die "--store: expected lmdb or postgresql"; STORES=lmdb,$2 STORES_SET=1; shift ;;
	--store=*) STORES=lmdb,${1#--store=} STORES_SET=1 ;;
	--md-files) [ $# -ge 2 ] || die "--md-files: expected N"; MD_FILES_ARG=$2; shift ;;
	--md-files=*) MD_FILES_ARG=${1#--md-files=} ;;
	--wl-files) [ $# -ge 2 ] || die "--wl-files: expected N"; WL_FILES_ARG=$2; shift ;;
	--wl-files=*) WL_FILES_ARG=${1#--wl-files=} ;;
	--scrape-cost) [ $# -ge 2 ] || die "--scrape-cost: expected PAIRS"; SCRAPE_COST=$2; shift ;;
	--scrape-cost=*) SCRAPE_COST=${1#--scrape-cost=} ;;
	--seal-cost) [ $# -ge 2 ] || die "--seal-cost: expected ROUNDS"; SEAL_COST=$2; shift ;;
	--seal-cost=*) SEAL_COST=${1#--seal-cost=} ;;
	-h|--help) usage 0 ;;
	*) printf 'bench: unknown argument "%s"\n' "$1" >&2; usage 2 ;;
	esac
	shift
done
case "$PORT" in ''|*[!0-9]*) die "RPFS_BENCH_PORT: expected a port number, got \"$PORT\"" ;; esac
if [ "$PORT" -lt 1 ] || [ "$PORT" -gt 65435 ]; then
	die "RPFS_BENCH_PORT: expected 1..65435 (it uses PORT..PORT+99), got $PORT"
fi
case "$ONLY" in
'') ;;
main) [ "$MATRIX" -eq 0 ] || die "--only main excludes --meta-matrix" ;;
meta-matrix) MATRIX=1 ;;
workload)
	[ "$MATRIX" -eq 0 ] || die "--only workload excludes --meta-matrix"
	[ "$SCRAPE" -eq 0 ] || die "--only workload excludes --scrape"
	# the workload's default stores: both
	[ "$STORES_SET" -eq 1 ] || STORES=lmdb,postgresql
	;;
*) die "--only: expected main, meta-matrix or workload, got \"$ONLY\"" ;;
esac
case "$MD_FILES_ARG" in
'') ;;
*[!0-9]*|0*) die "--md-files: expected a positive number of files, got \"$MD_FILES_ARG\"" ;;
esac
case "$WL_FILES_ARG" in
'') ;;
*[!0-9]*|0*|???????*) die "--wl-files: expected 1..999999 files, got \"$WL_FILES_ARG\"" ;;
*) [ "$ONLY" = workload ] || die "--wl-files shapes the workload, which only --only workload runs" ;;
esac
case "$ROUNDS_ARG" in
''|[1-9]|[1-9][0-9]) ;;
*) die "--rounds: expected 1..99 rounds, got \"$ROUNDS_ARG\"" ;;
esac
[ -z "$SIZE_ARG" ] || [[ "$SIZE_ARG" =~ ^[1-9][0-9]*[kmg]?$ ]] ||
	die "--size: expected a size such as 64m, got \"$SIZE_ARG\""
# MAIN_OPT: the first given of the options that shape the main table,
# which --only meta-matrix, --scrape-cost and --seal-cost do not run.
MAIN_OPT=
[ -z "$JOBS_ARG" ] || MAIN_OPT=--jobs
[ -z "$TARGETS_ARG" ] || MAIN_OPT=--targets
[ -z "$ROUNDS_ARG" ] || MAIN_OPT=--rounds
case "$SCRAPE_COST" in
[1-9]|[1-9][0-9]) ;;
0) ;;
*) die "--scrape-cost: expected 1..99 pairs, got \"$SCRAPE_COST\"" ;;
esac
[ "$SCRAPE_COST" -eq 0 ] || [ -z "$ONLY" ] || die "--scrape-cost and --only exclude each other"
[ "$SCRAPE_COST" -eq 0 ] || [ "$SCRAPE" -eq 0 ] ||
	die "--scrape-cost turns scraping on and off itself; leave --scrape out"
case "$SEAL_COST" in
[1-9]|[1-9][0-9]|0) ;;
*) die "--seal-cost: expected 1..99 rounds, got \"$SEAL_COST\"" ;;
esac
[ "$SEAL_COST" -eq 0 ] || { [ -z "$ONLY" ] && [ "$SCRAPE_COST" -eq 0 ]; } ||
	die "--seal-cost excludes --only and --scrape-cost"
# --rounds is the workload's too; --jobs, --targets and --size shape the
# main table alone
if [ "$ONLY" = workload ]; then
	for _o in "--jobs:$JOBS_ARG" "--targets:$TARGETS_ARG" "--size:$SIZE_ARG"; do
		[ -z "${_o#*:}" ] || die "${_o%%:*} shapes the main table, which --only workload does not run"
	done
fi
if [ -n "$MAIN_OPT" ] && { [ "$ONLY" = meta-matrix ] || [ "$SCRAPE_COST" -gt 0 ] ||
	[ "$SEAL_COST" -gt 0 ]; }; then
	die "$MAIN_OPT shapes the main table, which --only meta-matrix, --scrape-cost and --seal-cost do not run"
fi
# STORE_LIST: the stores of the matrix, each named once, lmdb first.
STORE_LIST=()
IFS=, read -r -a _stores <<<"$STORES"
for s in "${_stores[@]}"; do
	case "$s" in
	lmdb|postgresql) ;;
	*) die "--stores: expected lmdb or postgresql, got \"$s\"" ;;
	esac
	case " ${STORE_LIST[*]} " in *" $s "*) ;; *) STORE_LIST+=("$s") ;; esac
done
[ ${#STORE_LIST[@]} -gt 0 ] || die "--stores: expected lmdb[,postgresql], got nothing"
# pick_list OPT LIST KNOWN...: LIST (comma-separated) checked against
# KNOWN, into PICKED as " a b " (empty LIST: every KNOWN).
PICKED=
pick_list() {
	local opt=$1 list=$2 w
	shift 2
	if [ -z "$list" ]; then
		PICKED=" $* "
		return 0
	fi
	PICKED=" "
	IFS=, read -r -a _words <<<"$list"
	for w in "${_words[@]}"; do
		case " $* " in *" $w "*) ;; *) die "$opt: expected some of $(IFS=,; echo "$*"), got \"$w\"" ;; esac
		PICKED+="$w "
	done
	[ "$PICKED" != " " ] || die "$opt: expected some of $(IFS=,; echo "$*"), got nothing"
}
pick_list --targets "$TARGETS_ARG" rpfs rpfs-fio tmpfs passthrough passthrough-hop glusterfs
WANT_TARGETS=$PICKED
pick_list --jobs "$JOBS_ARG" seqwrite1 seqwrite4 seqread1 seqread4 randread4 randwrite4 md1 md100
WANT_JOBS=$PICKED
[ "$(id -u)" -eq 0 ] || die "must run as root (mounts, drop_caches, glusterd)"
# check_state_dir: --state-dir must be an existing, writable directory;
# sets STATE_FS to its file system type.
STATE_FS=
check_state_dir() {
	[ -n "$STATE_DIR" ] || return 0
	case "$STATE_DIR" in /*) ;; *) STATE_DIR=$PWD/$STATE_DIR ;; esac
	[ -e "$STATE_DIR" ] || die "--state-dir $STATE_DIR: no such directory"
	[ -d "$STATE_DIR" ] || die "--state-dir $STATE_DIR: not a directory"
	[ -w "$STATE_DIR" ] || die "--state-dir $STATE_DIR: not writable"
	STATE_FS=$(stat -f -c %T "$STATE_DIR") || die "--state-dir $STATE_DIR: cannot stat its file system"
	say "state on $STATE_DIR: file system $STATE_FS"
	[ "$STATE_FS" != tmpfs ] || say "warning: --state-dir $STATE_DIR is on tmpfs, not on a disk"
}
# the workload's rpfs state goes to a disk unless --state-dir says otherwise
[ "$ONLY" != workload ] || [ -n "$STATE_DIR" ] || STATE_DIR=/var/tmp
check_state_dir
[ -n "$OUT" ] || OUT=$REPO/bench-results/$(date +%Y%m%d-%H%M%S)
case "$OUT" in /*) ;; *) OUT=$PWD/$OUT ;; esac

if [ "$QUICK" -eq 1 ]; then
	MODE=quick SEQ_SIZE=128m RUNTIME=3 SEQ_CAP=20 MD_FILES=2000 TMPFS_SIZE=8g ROUNDS=1
else
	MODE=full SEQ_SIZE=512m RUNTIME=15 SEQ_CAP=40 MD_FILES=10000 TMPFS_SIZE=16g ROUNDS=3
fi
WL_FILES=${WL_FILES_ARG:-50000}
[ -z "$MD_FILES_ARG" ] || MD_FILES=$MD_FILES_ARG
[ -z "$ROUNDS_ARG" ] || ROUNDS=$ROUNDS_ARG
[ -z "$SIZE_ARG" ] || SEQ_SIZE=$SIZE_ARG
[ "$SETTLE" -eq 1 ] || MODE="$MODE, no settling"
[ -z "$STATE_DIR" ] || MODE="$MODE, state on $STATE_FS"
[ "$SCRAPE" -eq 1 ] && MODE=$MODE+scrape

. "$REPO/scripts/packages.sh"
# The build's and the fio engine's packages, then the tools called here:
# glusterfs-server/-client (glusterd, gluster, mount -t glusterfs),
# gnuplot-nox (report.py), python3, attr (setfattr), util-linux
# (mountpoint), mount (umount), procps (pgrep), git (the commit in the
# report), fuse3 (fusermount3; the passthrough builds on libfuse3-dev).
PACKAGES=("${RPFS_BUILD_PACKAGES[@]}" "${RPFS_FIO_SRC_PACKAGES[@]}" glusterfs-server
	glusterfs-client gnuplot-nox python3 attr util-linux mount procps git)

# install_packages: apt-get install whatever of PACKAGES is missing.
install_packages() {
	pkg_install "${PACKAGES[@]}" || die "cannot install the packages the benchmark needs"
}

# build_rpfs: a release build in BUILD unless one is configured already;
# an existing build without the fio engine gets it enabled.
build_rpfs() {
	if [ ! -f "$BUILD/build.ninja" ]; then
		say "configuring a release build in $BUILD"
		meson setup "$BUILD" --buildtype=release -Dfio_engine=enabled >/dev/null || die "meson setup $BUILD failed"
	elif [ -z "${RPFS_FIO_ENGINE:-}" ] && ! meson introspect --buildoptions "$BUILD" |
		$PY -c 'import json,sys
sys.exit(0 if any(o["name"] == "fio_engine" and o["value"] == "enabled"
                  for o in json.load(sys.stdin)) else 1)'; then
		say "enabling the fio engine in $BUILD"
		meson configure "$BUILD" -Dfio_engine=enabled >/dev/null ||
			die "meson configure $BUILD -Dfio_engine=enabled failed"
	fi
	ninja -C "$BUILD" >/dev/null || { ninja -C "$BUILD" | tail -n 30; die "build failed"; }
	BUILDTYPE=$($PY -c 'import json,sys
for o in json.load(open(sys.argv[1])):
    if o["name"] == "buildtype": print(o["value"])' "$BUILD/meson-info/intro-buildoptions.json" 2>/dev/null || echo unknown)
	[ "$BUILDTYPE" = release ] || say "warning: $BUILD is a $BUILDTYPE build, not release"
}

# ---- cleanup: everything we start or mount is recorded here -------------
WORK=
PIPE_ORIG=
MOUNTS=()      # FUSE mount points, unmounted in reverse order
PIDS=()        # processes we started
GL_VOL=
GL_STARTED_GLUSTERD=0
GL_PID=
STATE_WORK=    # our fresh directory under --state-dir
PG_DIRS=()     # PostgreSQL clusters started with scripts/pg-temp.sh

cleanup() {
	local i pid
	set +e
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
		if mountpoint -q "${MOUNTS[i]}" 2>/dev/null; then
			umount "${MOUNTS[i]}" 2>/dev/null || fusermount3 -u "${MOUNTS[i]}" 2>/dev/null ||
				umount -l "${MOUNTS[i]}"
		fi
	done
	if [ -n "$GL_VOL" ]; then
		gluster --mode=script volume stop "$GL_VOL" force >/dev/null 2>&1
		gluster --mode=script volume delete "$GL_VOL" >/dev/null 2>&1
	fi
	if [ "$GL_STARTED_GLUSTERD" -eq 1 ] && [ -n "$GL_PID" ]; then
		kill -TERM "$GL_PID" 2>/dev/null
	fi
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		kill -TERM "${PIDS[i]}" 2>/dev/null
	done
	for pid in "${PIDS[@]}" $GL_PID; do
		for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null
	done
	for ((i = ${#PG_DIRS[@]} - 1; i >= 0; i--)); do
		"$REPO/scripts/pg-temp.sh" stop "${PG_DIRS[i]}" >/dev/null 2>&1
	done
	wait 2>/dev/null
	# glusterd runs a hook script after volume delete; let it finish.
	for i in $(seq 1 50); do
		pgrep -f "S57glusterfind-delete-post --volname=$GL_VOL\$" >/dev/null 2>&1 || break
		sleep 0.1
	done
	if [ -n "$WORK" ]; then
		mountpoint -q "$WORK/fs" 2>/dev/null && { umount "$WORK/fs" || umount -l "$WORK/fs"; }
		rm -rf "$WORK"
	fi
	[ -z "$STATE_WORK" ] || rm -rf "$STATE_WORK"
	[ -n "$PIPE_ORIG" ] && echo "$PIPE_ORIG" >/proc/sys/fs/pipe-max-size
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_mount DIR: wait (bounded) until DIR is a mount point.
wait_mount() {
	local i
	for i in $(seq 1 100); do
		mountpoint -q "$1" && return 0
		sleep 0.1
	done
	return 1
}

# wait_log LOG PID: wait for an rpfs "ready:" line in LOG while PID lives.
wait_log() {
	local i
	for i in $(seq 1 300); do
		grep -q '^<5>rpfs-[a-z]*: ready:' "$1" 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || { tail -n 20 "$1" >&2; return 1; }
		sleep 0.1
	done
	tail -n 20 "$1" >&2
	return 1
}

# SCRAPE_URLS: the /metrics URLs of every rpfs process (--scrape).
SCRAPE_URLS=()

# metrics_opt OPT PORT: with --scrape, set MO to the arguments that serve
# /metrics on 127.0.0.1:PORT (OPT 127.0.0.1:PORT) and record its URL; else
# MO=().
MO=()
metrics_opt() {
	MO=()
	[ "$SCRAPE" -eq 1 ] || return 0
	SCRAPE_URLS+=("http://127.0.0.1:$2/metrics")
	MO=("$1" "127.0.0.1:$2")
}

# start_scraper: fetch every SCRAPE_URLS once a second until killed (a
# python3 loop, like a Prometheus with a 1 s scrape interval); its pid in
# SCRAPER_PID (stop_scraper).
SCRAPER_PID=
start_scraper() {
	[ "$SCRAPE" -eq 1 ] || return 0
	[ "$SCRAPE_COST" -gt 0 ] || say "scraping ${#SCRAPE_URLS[@]} /metrics endpoints every second"
	"$PY" - "${SCRAPE_URLS[@]}" >"$WORK/logs/scraper.log" 2>&1 <<'PYEOF' &
import sys, time, urllib.request
while True:
    t = time.monotonic()
    for u in sys.argv[1:]:
        try:
            urllib.request.urlopen(u, timeout=5).read()
        except OSError as e:
            print(u, e, flush=True)
    time.sleep(max(0.0, 1.0 - (time.monotonic() - t)))
PYEOF
	PIDS+=($!)
	SCRAPER_PID=$!
}

# stop_scraper: stop the scraper start_scraper started (--scrape-cost).
stop_scraper() {
	[ -n "$SCRAPER_PID" ] || return 0
	kill -TERM "$SCRAPER_PID" 2>/dev/null || true
	wait "$SCRAPER_PID" 2>/dev/null || true
	SCRAPER_PID=
}

# start_rpfs NAME NIODS BASEPORT [ROOT [STORE [MPORT]]]: a cluster of NIODS
# iods and a mgr on loopback, state in ROOT/rpfs-NAME (default: on
# --state-dir if given, else the bench tmpfs), namespace in STORE (lmdb,
# default, or postgresql: a temporary PostgreSQL cluster in ROOT/pg-NAME),
# mounted at WORK/mnt/NAME (rpfs-fuse -f in the background so its pid is
# known; FUSE_XOPTS, when set, are more -o mount options). Sets
# RPFS_PIDS_<NAME>. With --scrape each serves /metrics on BASEPORT+30
# (mgr), +31+i (iod i), +36 (the mount); MPORT, when given, is the mgr's
# /metrics port in any case (the matrix and the workload read its
# counters).
start_rpfs() {
	local name=$1 n=$2 base=$3 root=${4:-${STATE_WORK:-$WORK/fs}} store=${5:-lmdb} mport=${6:-}
	local st=$root/rpfs-$1 mnt=$WORK/mnt/$1 i iods=() pids=() mgr_store=()
	mkdir -p "$st/db" "$mnt"
	for ((i = 0; i < n; i++)); do
		metrics_opt --metrics $((base + 31 + i))
		"$BUILD/iod/rpfs-iod" --listen "127.0.0.1:$((base + 1 + i))" --data "$st/iod$i" \
			"${MO[@]}" ${KEYFILE:+--key "$KEYFILE"} </dev/null \
			>"$WORK/logs/$name-iod$i.log" 2>&1 &
		PIDS+=($!) pids+=($!)
		wait_log "$WORK/logs/$name-iod$i.log" $! || die "$name: rpfs-iod $i did not start"
		iods+=(--iod "127.0.0.1:$((base + 1 + i))")
	done
	if [ "$store" = postgresql ]; then
		start_pg "$root/pg-$name"
		mgr_store=(--store postgresql --store-uri "$PG_URI")
	else
		mgr_store=(--db "$st/db")
	fi
	metrics_opt --metrics $((base + 30))
	[ -z "$mport" ] || MO=(--metrics "127.0.0.1:$mport")
	"$BUILD/mgr/rpfs-mgr" --listen "127.0.0.1:$base" "${mgr_store[@]}" "${iods[@]}" \
		"${MO[@]}" ${KEYFILE:+--key "$KEYFILE"} </dev/null >"$WORK/logs/$name-mgr.log" 2>&1 &
	PIDS+=($!) pids+=($!)
	wait_log "$WORK/logs/$name-mgr.log" $! || die "$name: rpfs-mgr did not start"
	metrics_opt -o $((base + 36))
	[ ${#MO[@]} -eq 0 ] || MO=(-o "metrics=${MO[1]}")
	"$BUILD/fuse-client/rpfs-fuse" "127.0.0.1:$base" "$mnt" -f "${MO[@]}" \
		${KEYFILE:+-o "key=$KEYFILE"} ${FUSE_CONF:+-o "conf=$FUSE_CONF"} \
		${FUSE_XOPTS:+-o "$FUSE_XOPTS"} </dev/null \
		>"$WORK/logs/$name-fuse.log" 2>&1 &
	PIDS+=($!) pids+=($!)
	MOUNTS+=("$mnt")
	wait_mount "$mnt" || { tail -n 20 "$WORK/logs/$name-fuse.log" >&2; die "$name: mount failed"; }
	eval "RPFS_PIDS_$name=\"${pids[*]}\""
}

# check_pg: with postgresql among the stores, check that this build's
# rpfs-mgr knows --store and that scripts/pg-temp.sh exists; one clear
# line and exit otherwise (no figures are made up for a store that is not
# there).
check_pg() {
	case " ${STORE_LIST[*]} " in *" postgresql "*) ;; *) return 0 ;; esac
	"$BUILD/mgr/rpfs-mgr" --help 2>&1 | grep -q -- '--store' ||
		die "--stores postgresql: $BUILD/mgr/rpfs-mgr does not know --store (no PostgreSQL store in this build)"
	[ -x "$REPO/scripts/pg-temp.sh" ] ||
		die "--stores postgresql: scripts/pg-temp.sh is missing (no PostgreSQL store in this tree)"
}

# start_pg DIR: a throwaway PostgreSQL cluster in DIR (scripts/pg-temp.sh,
# stopped at exit) and the rpfs schema in it (rpfs mkfs --store-uri; the
# mgr records its iods at its first start); sets PG_URI. Run as root,
# pg-temp.sh runs the server as its own user, which must be able to reach
# DIR: our private directories above it get o+x.
PG_URI=
start_pg() {
	local dir=$1
	mkdir -p "$dir"
	chmod o+x "$WORK" ${STATE_WORK:+"$STATE_WORK"} "$(dirname "$dir")"
	PG_DIRS+=("$dir")
	PG_URI=$("$REPO/scripts/pg-temp.sh" start "$dir" 2>"$WORK/logs/pg-temp.log" | tail -n 1) ||
		{ tail -n 5 "$WORK/logs/pg-temp.log" >&2; die "scripts/pg-temp.sh start $dir failed"; }
	[ -n "$PG_URI" ] || die "scripts/pg-temp.sh start $dir printed no URI"
	"$BUILD/admin/rpfs" mkfs --store-uri "$PG_URI" >"$WORK/logs/pg-mkfs.log" 2>&1 ||
		{ tail -n 5 "$WORK/logs/pg-mkfs.log" >&2; die "rpfs mkfs --store-uri $PG_URI failed"; }
}

# start_passthrough: the passthrough FUSE file system over WORK/fs/pt-src.
start_passthrough() {
	mkdir -p "$WORK/fs/pt-src" "$WORK/mnt/pt"
	"$WORK/bin/bench-passthrough" "$WORK/fs/pt-src" "$WORK/mnt/pt" -f \
		</dev/null >"$WORK/logs/passthrough.log" 2>&1 &
	PIDS+=($!)
	PT_PID=$!
	MOUNTS+=("$WORK/mnt/pt")
	wait_mount "$WORK/mnt/pt" || { cat "$WORK/logs/passthrough.log" >&2; die "passthrough mount failed"; }
}

# start_passthrough_hop: the passthrough in hop mode (a server thread per
# FUSE worker connection) over WORK/fs/pth-src.
start_passthrough_hop() {
	mkdir -p "$WORK/fs/pth-src" "$WORK/mnt/pth"
	"$WORK/bin/bench-passthrough" "$WORK/fs/pth-src" "$WORK/mnt/pth" -f -o hop \
		</dev/null >"$WORK/logs/passthrough-hop.log" 2>&1 &
	PIDS+=($!)
	PTH_PID=$!
	MOUNTS+=("$WORK/mnt/pth")
	wait_mount "$WORK/mnt/pth" || { cat "$WORK/logs/passthrough-hop.log" >&2; die "passthrough-hop mount failed"; }
}

# start_gluster: glusterd (unless one runs), a 4-brick distributed volume on
# bricks in the bench tmpfs, its FUSE mount. Loopback only: the brick host is
# a name resolving to 127.0.0.1 (glusterd refuses 127.0.0.1 itself).
# Returns 1 (and GlusterFS is left out) when that is not possible.
start_gluster() {
	local host i bricks=()
	host=$(hostname)
	case "$(getent ahostsv4 "$host" | awk 'NR == 1 { print $1 }')" in
	127.*) ;;
	*) say "GlusterFS skipped: hostname $host does not resolve to loopback"; return 1 ;;
	esac
	if ! pgrep -x glusterd >/dev/null; then
		glusterd --log-file="$WORK/logs/glusterd.log" --pid-file="$WORK/glusterd.pid" ||
			{ say "GlusterFS skipped: glusterd did not start"; return 1; }
		GL_STARTED_GLUSTERD=1
		for i in $(seq 1 50); do [ -s "$WORK/glusterd.pid" ] && break; sleep 0.1; done
		GL_PID=$(cat "$WORK/glusterd.pid" 2>/dev/null || true)
	fi
	for i in $(seq 1 100); do
		gluster --mode=script volume list >/dev/null 2>&1 && break
		sleep 0.2
	done
	GL_VOL=rpfsbench$$
	for i in 0 1 2 3; do
		mkdir -p "$WORK/fs/gl-b$i"
		bricks+=("$host:$WORK/fs/gl-b$i")
	done
	gluster --mode=script volume create "$GL_VOL" "${bricks[@]}" force >/dev/null ||
		{ say "GlusterFS skipped: volume create failed"; GL_VOL=; return 1; }
	gluster --mode=script volume start "$GL_VOL" >/dev/null ||
		{ say "GlusterFS skipped: volume start failed"; return 1; }
	mkdir -p "$WORK/mnt/gl"
	MOUNTS+=("$WORK/mnt/gl")
	mount -t glusterfs "$host:/$GL_VOL" "$WORK/mnt/gl" ||
		{ say "GlusterFS skipped: mount failed"; return 1; }
	wait_mount "$WORK/mnt/gl" || return 1
	GL_HOST=$host
}

# gluster_pids: the bricks and the FUSE client of our volume.
gluster_pids() {
	pgrep -f "glusterfsd .*--volfile-id $GL_VOL\." || true
	pgrep -f "glusterfs .*--volfile-id=/$GL_VOL( |\$)" || true
}

# daemon_ticks PID...: user+system clock ticks used so far by these
# processes, all their threads included: utime+stime, fields 14 and 15 of
# /proc/PID/stat (counted after the "(comm) " field, which may hold
# spaces). Children are not added (cutime/cstime count only children
# waited for): every server process of a target is listed itself
# (target_pids). A process that is gone counts 0.
daemon_ticks() {
	local p sum=0 t
	for p in "$@"; do
		t=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{ print $12 + $13 }') || t=0
		sum=$((sum + ${t:-0}))
	done
	echo "$sum"
}

# daemon_cpu_word PIDS C0 C1: the record word daemon_cpu_s=SECONDS of the
# ticks from C0 to C1; nothing when PIDS is empty (tmpfs has no server
# process), so the report shows "-" rather than a 0 that was not measured.
daemon_cpu_word() {
	[ -n "${1// /}" ] || return 0
	awk -v a="$2" -v b="$3" -v hz="$HZ" 'BEGIN { printf "daemon_cpu_s=%.2f", (b - a) / hz }'
}

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# settle: wait (up to 15 s) until the CPUs are nearly idle, so that no
# target's leftover work (a daemon still flushing the previous run) is
# measured with the next one. Samples /proc/stat over 0.5 s. Nothing with
# --no-settle.
SETTLE_WAITS=0
# machine_busy_idle: "busy idle" jiffies of all CPUs of the machine so far
# (idle includes iowait), for settle only; never a daemon's CPU figure.
machine_busy_idle() {
	awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $5 + $6 }' /proc/stat
}
settle() {
	local i a b
	[ "$SETTLE" -eq 1 ] || return 0
	for ((i = 0; i < 30; i++)); do
		a=$(machine_busy_idle)
		sleep 0.5
		b=$(machine_busy_idle)
		# busy share of the interval below 10%: settled
		if awk -v a="$a" -v b="$b" 'BEGIN { split(a, x); split(b, y);
			busy = y[1] - x[1]; all = busy + y[2] - x[2];
			exit !(all > 0 && busy / all < 0.10) }'; then
			return 0
		fi
		SETTLE_WAITS=$((SETTLE_WAITS + 1))
	done
	say "warning: the machine did not settle within 15 s"
}

# target_dir T: directory of target T where the jobs run.
# target_pids T: its server processes (for daemon CPU seconds); none for
# tmpfs.
target_dir() {
	case "$1" in
	tmpfs) echo "$WORK/fs/tmpfs" ;;
	passthrough) echo "$WORK/mnt/pt/bench" ;;
	passthrough-hop) echo "$WORK/mnt/pth/bench" ;;
	rpfs) echo "$WORK/mnt/main/bench" ;;
	rpfs-fio) echo "bench-fio" ;; # relative to the rpfs root (see run_fio)
	glusterfs) echo "$WORK/mnt/gl/bench" ;;
	esac
}
target_pids() {
	case "$1" in
	passthrough) echo "$PT_PID" ;;
	passthrough-hop) echo "$PTH_PID" ;;
	rpfs) echo "$RPFS_PIDS_main" ;;
	rpfs-fio) echo "$RPFS_PIDS_main" ;;
	glusterfs) gluster_pids | tr '\n' ' ' ;;
	esac
}

# clear_seq DIR: remove the fio files of the sequential jobs.
clear_seq() {
	case "$1" in
	bench-fio) rm -f "$WORK/mnt/main/bench-fio"/seq.* ;;
	*) rm -f "$1"/seq.* ;;
	esac
}

# prewrite_fio TARGET FILE NJOBS DIR: the write job FILE once, unmeasured,
# on fresh files (clear_seq first), so that the measured run after it
# overwrites files written just before, with the same caches warm on every
# target. Without it a write row measures the first touch of fresh memory
# (page faults, zeroing) of whichever layer allocates it - tmpfs pages for
# the passthrough's source, page cache, iod buffers - which differs from
# target to target (one full run: passthrough 438 MB/s, rpfs 1377 MB/s).
prewrite_fio() {
	local target=$1 file=$2 nj=$3 dir=$4 engine=psync
	[ "$target" = rpfs-fio ] && engine="external:$FIO_ENGINE"
	clear_seq "$dir"
	(cd "$WORK/fio-cwd" && BENCH_DIR=$dir BENCH_ENGINE=$engine BENCH_SIZE=$SEQ_SIZE \
		BENCH_NJOBS=$nj BENCH_RUNTIME=$((SEQ_CAP * 4)) RPFS_MGR=127.0.0.1:$PORT \
		timeout -k 5 $((SEQ_CAP * 4 + 60)) fio --output-format=json \
		--output="$WORK/out/prewrite.json" "$REPO/tests/bench/fio/$file" \
		>"$WORK/out/prewrite.log" 2>&1) ||
		say "warning: the unmeasured pre-write of $file on $target failed"
}

# net_snap TARGET FILE DIR: the client's transport counters (rpfs.stats)
# of the rpfs mount the run's directory DIR lies in (WORK/mnt/NAME/...: the
# main cluster's, or iod1's or iod2's in the iod sweep) into FILE, for
# net_words; nothing for other targets.
net_snap() {
	[ "$1" = rpfs ] || return 0
	local rel=${3#"$WORK/mnt/"}
	getfattr --absolute-names --only-values -n rpfs.stats "$WORK/mnt/${rel%%/*}" \
		>"$2" 2>/dev/null || rm -f "$2"
}

# net_words TARGET OUT: KEY=VALUE words of the counters one run moved, for
# the record (copies per byte, registrations and cache misses per op): the
# mount's rpfs.stats before/after, or the engine's rpfs_stats lines.
net_words() {
	case "$1" in
	rpfs) [ -s "$2.net0" ] && [ -s "$2.net1" ] &&
		$PY "$REPO/tests/bench/report.py" netdelta "$2.net0" "$2.net1" 2>/dev/null ;;
	rpfs-fio) [ -s "$2.netl" ] &&
		$PY "$REPO/tests/bench/report.py" netdelta - "$2.netl" 2>/dev/null ;;
	esac
	return 0
}

NRUN=0
# ROUND: the round of the main table being run (1..ROUNDS), else empty;
# run_fio and run_md add it to their records (round=N) and progress lines.
ROUND=
# round_word: the record word round=ROUND, or nothing outside the rounds.
round_word() {
	[ -z "$ROUND" ] || echo "round=$ROUND"
}
# progress_param PARAM: what a progress line shows as the run's parameter:
# rROUND/ROUNDS within the rounds, else PARAM.
progress_param() {
	if [ -n "$ROUND" ]; then echo "r$ROUND/$ROUNDS"; else echo "$1"; fi
}

# run_fio SECTION PARAM TARGET JOB FILE NJOBS DIR PIDS: one fio run, one
# record line in RECORDS. A failed or hung run (bounded by timeout) is
# recorded as failed and the suite goes on. rpfs runs also record their
# transport counters (net_words); the engine writes its own through
# $RPFS_FIO_STATS.
run_fio() {
	local section=$1 param=$2 target=$3 job=$4 file=$5 nj=$6 dir=$7 pids=$8
	local out=$WORK/out/$section-$param-$target-$job.json engine=psync
	local c0 c1 t0 t1 limit rw err=
	[ "$target" = rpfs-fio ] && engine="external:$FIO_ENGINE"
	limit=$((SEQ_CAP + RUNTIME + 60))
	rw=$(round_word)
	NRUN=$((NRUN + 1))
	printf 'bench: [%3d] %-6s %-8s %-11s %-10s ' "$NRUN" "$section" "$(progress_param "$param")" \
		"$target" "$job" >&2
	rm -f "$out.net0" "$out.net1" "$out.netl"
	net_snap "$target" "$out.net0" "$dir"
	c0=$(daemon_ticks $pids)
	t0=$(date +%s.%N)
	# fio runs from WORK/fio-cwd: fio insists that directory= exists
	# locally, and the engine takes the same relative name (bench-fio,
	# an empty directory there) from the rpfs root.
	if ! (cd "$WORK/fio-cwd" && BENCH_DIR=$dir BENCH_ENGINE=$engine BENCH_SIZE=$SEQ_SIZE \
		BENCH_NJOBS=$nj BENCH_RUNTIME=$([ "${file#seq}" != "$file" ] && echo "$SEQ_CAP" || echo "$RUNTIME") \
		RPFS_MGR=127.0.0.1:$PORT RPFS_FIO_STATS=$out.netl \
		timeout -k 5 "$limit" fio --output-format=json --output="$out" \
		"$REPO/tests/bench/fio/$file" >"$out.log" 2>&1); then
		err="fio failed: $(tail -n 3 "$out.log" "$out" 2>/dev/null | tr '\n"' ' ' | cut -c1-200)"
	fi
	t1=$(date +%s.%N)
	c1=$(daemon_ticks $pids)
	net_snap "$target" "$out.net1" "$dir"
	local cpu wall net
	cpu=$(daemon_cpu_word "$pids" "$c0" "$c1")
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	net=$(net_words "$target" "$out")
	# shellcheck disable=SC2086 # cpu, net, rw: KEY=VALUE words
	if [ -z "$err" ] && $PY "$REPO/tests/bench/report.py" record fio "$out" section="$section" \
		param="$param" target="$target" job="$job" $rw $cpu wall_s="$wall" \
		$net >>"$RECORDS" 2>"$out.err"; then
		tail -n 1 "$RECORDS" | $PY -c 'import json,sys; sys.path.insert(0, sys.argv[1])
import report; r=json.load(sys.stdin)
c = report.net_columns(r, r["io_mb"] * 1e6, r["target"] == "rpfs-fio") if "data_ops" in r else ["-"] * 3
print("%9.1f MB/s %9.0f IOPS  cpu %s s  copies/B %s regs/op %s misses/op %s" % ((r["mbs"], r["iops"], r.get("daemon_cpu_s", "-")) + tuple(c)))' \
			"$REPO/tests/bench" >&2
	else
		[ -n "$err" ] || err="bad fio output: $(head -c 200 "$out.err")"
		echo "failed" >&2
		# shellcheck disable=SC2086 # rw: a KEY=VALUE word or nothing
		$PY "$REPO/tests/bench/report.py" record none - section="$section" param="$param" \
			target="$target" job="$job" $rw kind=fio error="$err" >>"$RECORDS"
	fi
}

# run_md TARGET JOB NDIRS [PARAM]: the metadata job in a fresh directory
# (PARAM: the record's param, default "-").
run_md() {
	local target=$1 job=$2 nd=$3 param=${4:--} dir pids out c0 c1 t0 t1 rw err=
	dir=$(target_dir "$target")/md
	pids=$(target_pids "$target")
	out=$WORK/out/main-$target-$job.json
	rw=$(round_word)
	NRUN=$((NRUN + 1))
	printf 'bench: [%3d] %-6s %-8s %-11s %-10s ' "$NRUN" main "$(progress_param "$param")" \
		"$target" "$job" >&2
	mkdir -p "$dir"
	c0=$(daemon_ticks $pids)
	t0=$(date +%s.%N)
	timeout -k 5 600 "$WORK/bin/bench-md" -D "$dir" "$MD_FILES" "$nd" >"$out" 2>"$out.err" ||
		err="bench-md failed: $(head -c 200 "$out.err" | tr '\n"' '  ')"
	t1=$(date +%s.%N)
	c1=$(daemon_ticks $pids)
	rmdir "$dir" 2>/dev/null || rm -rf "$dir"
	local cpu wall
	cpu=$(daemon_cpu_word "$pids" "$c0" "$c1")
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	if [ -z "$err" ]; then
		# shellcheck disable=SC2086 # cpu, rw: a KEY=VALUE word or nothing
		$PY "$REPO/tests/bench/report.py" record md "$out" section=main param="$param" target="$target" \
			job="$job" $rw $cpu wall_s="$wall" >>"$RECORDS"
		tail -n 1 "$RECORDS" | $PY -c 'import json,sys; r=json.load(sys.stdin)
print("create %.0f stat %.0f unlink %.0f /s  cpu %s s" % (r["create"], r["stat"], r["unlink"], r.get("daemon_cpu_s", "-")))' >&2
	else
		echo "failed" >&2
		# shellcheck disable=SC2086 # rw: a KEY=VALUE word or nothing
		$PY "$REPO/tests/bench/report.py" record none - section=main param="$param" target="$target" \
			job="$job" $rw kind=md error="$err" >>"$RECORDS"
	fi
}

# The main jobs: job name, fio file, numjobs, action before (prewrite =
# write the same files once, unmeasured, so that the job overwrites them;
# drop = drop caches)
# job name, fio file, numjobs, action before (prewrite = write the same
# files once, unmeasured, so that the job overwrites them; drop = drop caches)
MAIN_JOBS=(
	"seqwrite1 seqwrite.fio 1 prewrite"
	"seqwrite4 seqwrite.fio 4 prewrite"
	"seqread1 seqread.fio 1 drop"
	"seqread4 seqread.fio 4 drop"
	"randread4 randread.fio 4 drop"
	"randwrite4 randwrite.fio 4 none"
)

# ---- the metadata matrix (--meta-matrix) ----------------------------------
# MX_TARGETS: the matrix's targets (passthrough, STORE@FSTYPE); per
# target its directory (MX_DIR), its mgr's /metrics port (MX_MPORT, none
# for the passthrough) and where its state lies (MX_STATE).
MX_TARGETS=()
declare -A MX_DIR MX_MPORT MX_STATE
MX_RECORDS=

# start_matrix: one 4-iod cluster per store and state location (the bench
# tmpfs; --state-dir), each with its mgr's /metrics on, ports from
# PORT+60 (10 per cluster). --scrape does not apply to them (their ports
# would overlap).
start_matrix() {
	local SCRAPE=0 j=0 store loc root name t
	MX_TARGETS=(passthrough)
	MX_DIR[passthrough]=$WORK/mnt/pt/mx
	MX_STATE[passthrough]="the bench tmpfs (reference)"
	for store in "${STORE_LIST[@]}"; do
		for loc in tmpfs ${STATE_WORK:+state-dir}; do
			if [ "$loc" = tmpfs ]; then
				root=$WORK/fs/mx t=$store@tmpfs
				MX_STATE[$t]="the bench tmpfs"
			else
				root=$STATE_WORK/mx t=$store@$STATE_FS
				# a --state-dir on tmpfs gets a name of its own
				[ "$STATE_FS" != tmpfs ] || t=$store@state-dir-tmpfs
				MX_STATE[$t]="$STATE_DIR ($STATE_FS)"
			fi
			name=mx$j
			say "starting the matrix cluster $t"
			start_rpfs "$name" 4 $((PORT + 60 + 10 * j)) "$root" "$store" $((PORT + 65 + 10 * j))
			MX_TARGETS+=("$t")
			MX_DIR[$t]=$WORK/mnt/$name/mx
			MX_MPORT[$t]=$((PORT + 65 + 10 * j))
			j=$((j + 1))
		done
	done
	for t in "${MX_TARGETS[@]}"; do mkdir -p "${MX_DIR[$t]}"; done
}

# run_mx TARGET PROCS OWN: bench-md -x with PROCS processes (OWN 1: each in
# its own directory) in a fresh directory of TARGET; its rpfs targets
# snapshot the mgr's counters around each phase (the -H hook), each time
# once the mount (the root above MX_DIR) has no purge left to send. One
# record line in MX_RECORDS.
run_mx() {
	local t=$1 procs=$2 own=$3 dir out hook=() sflag=() err=
	dir=${MX_DIR[$t]}/run
	out=$WORK/out/mx-${t//\//-}-$procs-$own
	NRUN=$((NRUN + 1))
	printf 'bench: [%3d] matrix %-22s %d client(s), %-8s ' "$NRUN" "$t" "$procs" \
		"$([ "$own" -eq 1 ] && echo own-dirs || echo one-dir)" >&2
	mkdir -p "$dir"
	rm -f "$out".*.json
	[ -z "${MX_MPORT[$t]:-}" ] ||
		hook=(-H "$PY $REPO/tests/bench/mdmatrix.py snap http://127.0.0.1:${MX_MPORT[$t]}/metrics ${MX_DIR[$t]%/mx} $out")
	[ "$own" -eq 0 ] || sflag=(-s)
	timeout -k 5 900 "$WORK/bin/bench-md" -D -x -p "$procs" "${sflag[@]}" "${hook[@]}" \
		"$dir" "$MD_FILES" 1 >"$out.json" 2>"$out.err" ||
		err="bench-md failed: $(head -c 200 "$out.err" | tr '\n"' '  ')"
	rmdir "$dir" 2>/dev/null || rm -rf "$dir"
	if [ -z "$err" ] && $PY "$REPO/tests/bench/mdmatrix.py" record "$out.json" "$out" \
		target="$t" state="${MX_STATE[$t]}" >>"$MX_RECORDS" 2>"$out.rerr"; then
		tail -n 1 "$MX_RECORDS" | $PY -c 'import json,sys; r=json.load(sys.stdin)
print(" ".join("%s %.0f%s" % (p, r[p], " (%.1f req)" % r[p + "_mgr"]["req_per_op"] if p + "_mgr" in r else "")
               for p in ("create", "stat", "rename", "unlink", "mkdir", "rmdir") if p in r))' >&2
	else
		[ -n "$err" ] || err="bad bench-md output: $(head -c 200 "$out.rerr")"
		echo "failed: $err" >&2
		printf '{"target": "%s", "procs": %d, "own_dir": %d, "error": "%s"}\n' "$t" "$procs" \
			"$own" "${err//\"/ }" >>"$MX_RECORDS"
	fi
}

# run_matrix: warm every matrix target up (unmeasured), then each job on
# every target, the targets' order rotating from job to job; prints the
# table and writes OUT/meta-matrix.md and OUT/meta-matrix.jsonl.
run_matrix() {
	local spec procs own i t nt k=0 warm
	MX_RECORDS=$WORK/matrix.jsonl
	: >"$MX_RECORDS"
	start_matrix
	nt=${#MX_TARGETS[@]}
	warm=$((MD_FILES < 1000 ? MD_FILES : 1000))
	for t in "${MX_TARGETS[@]}"; do
		mkdir -p "${MX_DIR[$t]}/warm"
		"$WORK/bin/bench-md" "${MX_DIR[$t]}/warm" "$warm" 10 >/dev/null ||
			say "warning: metadata warm-up failed on $t"
		rmdir "${MX_DIR[$t]}/warm" 2>/dev/null || true
	done
	say "metadata matrix: ${MX_TARGETS[*]}; $MD_FILES files per job"
	for spec in "1 0" "4 0" "4 1"; do
		read -r procs own <<<"$spec"
		for ((i = 0; i < nt; i++)); do
			t=${MX_TARGETS[(i + k) % nt]}
			drop_caches
			settle
			run_mx "$t" "$procs" "$own"
		done
		k=$((k + 1))
	done
	mkdir -p "$OUT"
	cp "$MX_RECORDS" "$OUT/meta-matrix.jsonl"
	$PY "$REPO/tests/bench/mdmatrix.py" table "$MX_RECORDS" "$OUT/meta-matrix.md" ||
		die "cannot write the metadata matrix table"
}

# ---- the small-file workload (--only workload) -----------------------------
# WL_VARIANTS: the rpfs modes of the workload, NAME:MOUNT-OPTIONS (more -o
# options of rpfs-fuse; empty: none), each on a cluster per store (NAME for
# lmdb, NAME-pg for postgresql): "rpfs" as mounted by default (leases
# off), "rpfs-leases" with -o leases, and "rpfs-deleg" with -o
# leases,deleg (delegated creates).
WL_VARIANTS=("rpfs:" "rpfs-leases:leases" "rpfs-deleg:leases,deleg")
WL_SEED=1
WL_JOBS=(untar clone cp-a rm-rf md-1 md-4 md-4own)
WL_TARGETS=()
declare -A WL_DIR WL_MNT WL_MPORT
WL_RECORDS=
WL_TAR=
WL_REPO=
WL_ENTRIES=
WL_CLONE_ENTRIES=
WL_NOTES=()
# git with no user or system configuration, and a fixed identity and date
# for the commit, so every run makes the same repository
WL_GIT=(env GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
	GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost
	GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@localhost
	GIT_AUTHOR_DATE=2023-11-14T22:13:20Z GIT_COMMITTER_DATE=2023-11-14T22:13:20Z git)

# wl_make_tree: the workload's tree (tests/bench/workload.py tree: WL_FILES
# files, seed WL_SEED) on the bench tmpfs, its manifest (OUT/
# workload-manifest.txt), a tarball of it (WL_TAR, sorted, numeric owners)
# and a bare git repository of it, one commit, packed (WL_REPO: a clone
# copies a pack and checks out, as one from a server does); then the tree
# itself is removed. WL_ENTRIES: the tree's entries (files and directories,
# its top included); WL_CLONE_ENTRIES: those of a clone (.git included),
# counted on a clone made here on the tmpfs.
wl_make_tree() {
	local src=$WORK/fs/wl-src info t0
	t0=$(date +%s)
	mkdir -p "$src"
	info=$($PY "$REPO/tests/bench/workload.py" tree "$src/tree" "$WL_FILES" "$WL_SEED") ||
		die "tests/bench/workload.py tree failed"
	WL_ENTRIES=$(echo "$info" | $PY -c 'import json,sys; print(json.load(sys.stdin)["entries"])')
	$PY "$REPO/tests/bench/workload.py" manifest "$src/tree" "$OUT/workload-manifest.txt" ||
		die "tests/bench/workload.py manifest failed"
	WL_TAR=$src/tree.tar
	tar --sort=name --numeric-owner --owner=0 --group=0 -C "$src" -cf "$WL_TAR" tree ||
		die "cannot make the workload tarball"
	WL_REPO=$src/repo.git
	{ "${WL_GIT[@]}" init -q --bare "$WL_REPO" &&
		"${WL_GIT[@]}" --git-dir="$WL_REPO" --work-tree="$src/tree" add -A &&
		"${WL_GIT[@]}" --git-dir="$WL_REPO" --work-tree="$src/tree" commit -q -m tree &&
		"${WL_GIT[@]}" --git-dir="$WL_REPO" repack -adq; } >"$WORK/logs/wl-git.log" 2>&1 ||
		{ tail -n 5 "$WORK/logs/wl-git.log" >&2; die "cannot make the workload git repository"; }
	"${WL_GIT[@]}" clone -q --no-hardlinks "$WL_REPO" "$src/probe" >>"$WORK/logs/wl-git.log" 2>&1 ||
		die "cannot clone the workload git repository on the tmpfs"
	WL_CLONE_ENTRIES=$(find "$src/probe" | wc -l)
	rm -rf "$src/probe" "$src/tree"
	WL_NOTES+=("tree: $(echo "$info" | $PY -c 'import json,sys; d=json.load(sys.stdin)
print("%d files in %d directories, %.1f MB, seed '"$WL_SEED"'" % (d["files"], d["dirs"], d["bytes"] / 1e6))'), $WL_ENTRIES entries; tarball $(($(stat -c %s "$WL_TAR") / 1000000)) MB; a clone: $WL_CLONE_ENTRIES entries, .git included; made in $(($(date +%s) - t0)) s")
	say "workload tree: ${WL_NOTES[-1]#tree: }"
}

# wl_start: the workload's targets: the passthrough, an rpfs cluster of 4
# iods per WL_VARIANTS mode and store, its state on STATE_WORK (the mgr's
# /metrics on, ports from PORT+60, 10 per cluster), GlusterFS when it
# starts. --scrape does not apply (refused with --only workload).
wl_start() {
	local SCRAPE=0 j=0 v store t name
	say "starting the passthrough file system"
	start_passthrough
	WL_TARGETS=(passthrough)
	WL_DIR[passthrough]=$WORK/mnt/pt/wl
	for v in "${WL_VARIANTS[@]}"; do
		for store in "${STORE_LIST[@]}"; do
			t=${v%%:*}
			[ "$store" = lmdb ] || t=$t-pg
			name=wl$j
			say "starting the rpfs cluster $t (4 iods, $store store, mount options: ${v#*:})"
			FUSE_XOPTS=${v#*:} start_rpfs "$name" 4 $((PORT + 60 + 10 * j)) "$STATE_WORK/wl" \
				"$store" $((PORT + 65 + 10 * j))
			WL_TARGETS+=("$t")
			WL_MNT[$t]=$WORK/mnt/$name
			WL_DIR[$t]=$WORK/mnt/$name/wl
			WL_MPORT[$t]=$((PORT + 65 + 10 * j))
			j=$((j + 1))
		done
	done
	say "starting GlusterFS (4 bricks on loopback)"
	if start_gluster; then
		WL_TARGETS+=(glusterfs)
		WL_DIR[glusterfs]=$WORK/mnt/gl/wl
	else
		WL_NOTES+=("GlusterFS: skipped (it did not start; see the log above)")
	fi
	for t in "${WL_TARGETS[@]}"; do mkdir -p "${WL_DIR[$t]}"; done
}

# wl_snap TARGET WHAT JOB PREFIX: for an rpfs TARGET, the mgr's counters
# into PREFIX.WHAT.JOB.json once the mount's reaper is done
# (tests/bench/mdmatrix.py snap); nothing for the others.
wl_snap() {
	[ -n "${WL_MPORT[$1]:-}" ] || return 0
	$PY "$REPO/tests/bench/mdmatrix.py" snap "http://127.0.0.1:${WL_MPORT[$1]}/metrics" \
		"${WL_MNT[$1]}" "$4" "$2" "$3"
}

# wl_job TARGET JOB: one timed job (untar, clone, cp-a, rm-rf) in TARGET's
# workload directory, after dropping the caches, the mgr's counters read
# around it; one record line in WL_RECORDS. A failed job is recorded as
# failed and the run goes on.
wl_job() {
	local t=$1 job=$2 d=${WL_DIR[$1]} out entries t0 t1 secs err=
	out=$WORK/out/wl-$t-$job-r$ROUND
	case "$job" in
	untar) entries=$WL_ENTRIES; rm -rf "$d/untar"; mkdir -p "$d/untar" ;;
	clone) entries=$WL_CLONE_ENTRIES; rm -rf "$d/clone" ;;
	cp-a) entries=$WL_ENTRIES; rm -rf "$d/copy" ;;
	rm-rf) entries=$((2 * WL_ENTRIES)) ;;
	esac
	drop_caches
	settle
	NRUN=$((NRUN + 1))
	printf 'bench: [%3d] workload r%d/%d %-12s %-8s ' "$NRUN" "$ROUND" "$ROUNDS" "$t" "$job" >&2
	rm -f "$out".*.json
	wl_snap "$t" start "$job" "$out" 2>"$out.snap" || err="mgr counters: $(head -c 200 "$out.snap")"
	t0=$(date +%s.%N)
	case "$job" in
	untar) timeout -k 5 3600 tar -xf "$WL_TAR" -C "$d/untar" ;;
	clone) timeout -k 5 3600 "${WL_GIT[@]}" clone -q --no-hardlinks "$WL_REPO" "$d/clone" ;;
	cp-a) timeout -k 5 3600 cp -a "$d/untar" "$d/copy" ;;
	rm-rf) timeout -k 5 3600 rm -rf "$d/untar" "$d/copy" ;;
	esac >"$out.log" 2>&1 || err="$job failed: $(tail -n 3 "$out.log" | tr '\n"' '  ' | cut -c1-200)"
	t1=$(date +%s.%N)
	[ -n "$err" ] || wl_snap "$t" end "$job" "$out" 2>"$out.snap" ||
		err="mgr counters: $(head -c 200 "$out.snap")"
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	if [ -z "$err" ]; then
		$PY "$REPO/tests/bench/workload.py" record "$out" "$job" "$entries" "$secs" \
			target="$t" round="$ROUND" >>"$WL_RECORDS"
		tail -n 1 "$WL_RECORDS" | $PY -c 'import json,sys; r=json.load(sys.stdin); m=r.get("mgr")
print("%8.2f s  %6d entries%s" % (r["seconds"], r["entries"], "  %.2f req/entry %.3f cmt/entry" %
      (m["req_per_op"], m.get("commits_per_op", float("nan"))) if m else ""))' >&2
	else
		echo "failed: $err" >&2
		$PY "$REPO/tests/bench/workload.py" record - "$job" "$entries" 0 target="$t" \
			round="$ROUND" error="$err" >>"$WL_RECORDS"
	fi
}

# wl_md TARGET SPEC: bench-md (create, stat, unlink of MD_FILES files,
# caches dropped before each phase) in a fresh directory of TARGET; SPEC 1:
# 1 process, 4: 4 in one directory, 4own: 4 each in its own; the mgr's
# counters read around each phase (bench-md's hook). Three record lines
# (create-SPEC, stat-SPEC, unlink-SPEC) in WL_RECORDS.
wl_md() {
	local t=$1 spec=$2 dir=${WL_DIR[$1]}/md out hook=() flags=() ph err=
	out=$WORK/out/wl-$t-md-$spec-r$ROUND
	case "$spec" in
	1) flags=(-p 1) ;;
	4) flags=(-p 4) ;;
	4own) flags=(-p 4 -s) ;;
	esac
	mkdir -p "$dir"
	rm -f "$out".*.json
	[ -z "${WL_MPORT[$t]:-}" ] ||
		hook=(-H "$PY $REPO/tests/bench/mdmatrix.py snap http://127.0.0.1:${WL_MPORT[$t]}/metrics ${WL_MNT[$t]} $out")
	drop_caches
	settle
	NRUN=$((NRUN + 1))
	printf 'bench: [%3d] workload r%d/%d %-12s md-%-5s ' "$NRUN" "$ROUND" "$ROUNDS" "$t" "$spec" >&2
	timeout -k 5 1800 "$WORK/bin/bench-md" -D "${flags[@]}" "${hook[@]}" "$dir" "$MD_FILES" 1 \
		>"$out.json" 2>"$out.err" || err="bench-md failed: $(head -c 200 "$out.err" | tr '\n"' '  ')"
	rmdir "$dir" 2>/dev/null || rm -rf "$dir"
	if [ -z "$err" ] && $PY "$REPO/tests/bench/workload.py" mdrecords "$out.json" "$out" "$spec" \
		target="$t" round="$ROUND" >>"$WL_RECORDS" 2>"$out.rerr"; then
		tail -n 3 "$WL_RECORDS" | $PY -c 'import json,sys
print("  ".join("%s %.2f s%s" % (r["job"].split("-")[0], r["seconds"], " (%.2f req)" % r["mgr"]["req_per_op"]
                if "mgr" in r else "") for r in map(json.loads, sys.stdin)))' >&2
	else
		[ -n "$err" ] || err="bad bench-md output: $(head -c 200 "$out.rerr")"
		echo "failed: $err" >&2
		for ph in create stat unlink; do
			$PY "$REPO/tests/bench/workload.py" record - "$ph-$spec" "$MD_FILES" 0 target="$t" \
				round="$ROUND" error="$err" >>"$WL_RECORDS"
		done
	fi
}

# wl_verify: the manifest of the untarred tree on every target (OUT/
# workload-manifest-TARGET.txt) against the source's, unmeasured; a note
# for the table either way, and a warning per target whose tree differs.
wl_verify() {
	local t m same=() diff=()
	for t in "${WL_TARGETS[@]}"; do
		m=$OUT/workload-manifest-$t.txt
		if [ -d "${WL_DIR[$t]}/untar/tree" ] &&
			$PY "$REPO/tests/bench/workload.py" manifest "${WL_DIR[$t]}/untar/tree" "$m" &&
			cmp -s "$m" "$OUT/workload-manifest.txt"; then
			same+=("$t")
		else
			diff+=("$t")
			say "warning: the untarred tree on $t differs from the source (see $m)"
		fi
	done
	[ ${#same[@]} -eq 0 ] || WL_NOTES+=("check: the untarred tree (round 1) equals the source on ${same[*]}")
	[ ${#diff[@]} -eq 0 ] || WL_NOTES+=("check: the untarred tree (round 1) DIFFERS from the source on ${diff[*]}")
}

# run_workload: the tree, the targets, a warm-up of each (bench-md, 1,000
# files, unmeasured), then ROUNDS rounds of every job on every target, the
# targets interleaved per job, their order rotating from job to job and
# from round to round; prints the table and writes OUT/workload.md and
# OUT/workload.jsonl.
run_workload() {
	local t job i k nt warm
	WL_RECORDS=$WORK/workload.jsonl
	: >"$WL_RECORDS"
	wl_make_tree
	wl_start
	nt=${#WL_TARGETS[@]}
	warm=$((MD_FILES < 1000 ? MD_FILES : 1000))
	for t in "${WL_TARGETS[@]}"; do
		mkdir -p "${WL_DIR[$t]}/warm"
		"$WORK/bin/bench-md" "${WL_DIR[$t]}/warm" "$warm" 10 >/dev/null ||
			say "warning: metadata warm-up failed on $t"
		rmdir "${WL_DIR[$t]}/warm" 2>/dev/null || true
	done
	say "workload: ${WL_TARGETS[*]} ($MODE mode: $ROUNDS round(s), $WL_FILES files, $MD_FILES files per bench-md job)"
	for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
		k=$((ROUND - 1))
		for job in "${WL_JOBS[@]}"; do
			for ((i = 0; i < nt; i++)); do
				t=${WL_TARGETS[(i + k) % nt]}
				case "$job" in
				md-*) wl_md "$t" "${job#md-}" ;;
				*) wl_job "$t" "$job" ;;
				esac
			done
			k=$((k + 1))
			[ "$job" != untar ] || [ "$ROUND" -ne 1 ] || wl_verify
			# the clones go with the trees, unmeasured
			[ "$job" != rm-rf ] || for t in "${WL_TARGETS[@]}"; do
				rm -rf "${WL_DIR[$t]:?}"/*
			done
		done
	done
	ROUND=
	WL_NOTES=("rpfs state (mgr database, iod data, PostgreSQL data): $STATE_DIR, file system $STATE_FS"
		"passthrough source, GlusterFS bricks, tarball and git repository: the bench tmpfs"
		"rpfs modes: $(printf '%s ' "${WL_VARIANTS[@]}" | sed 's/:\([^ ]*\)/ (-o \1)/g; s/ (-o )//g')(columns NAME for lmdb, NAME-pg for postgresql)"
		"$MODE mode, $(nproc) CPUs, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
		"${WL_NOTES[@]}")
	cp "$WL_RECORDS" "$OUT/workload.jsonl"
	$PY "$REPO/tests/bench/workload.py" table "$WL_RECORDS" "$OUT/workload.md" "${WL_NOTES[@]}" ||
		die "cannot write the workload table"
}

# ---- the cost of scraping (--scrape-cost PAIRS) -----------------------------
# scrape_cpu: the CPU time one scrape costs each process of the main
# cluster (SCRAPE_URLS and RPFS_PIDS_main list them in the same order:
# iods, mgr, mount): 200 scrapes back to back, the process's utime+stime
# (/proc/PID/stat) before and after; and the page's size.
scrape_cpu() {
	local spids
	read -r -a spids <<<"$RPFS_PIDS_main"
	"$PY" - "$HZ" "${#spids[@]}" "${spids[@]}" "${SCRAPE_URLS[@]}" <<'PYEOF'
import sys, time, urllib.request
hz, n = int(sys.argv[1]), int(sys.argv[2])
pids, urls = sys.argv[3:3 + n], sys.argv[3 + n:]
def ticks(pid):
    with open("/proc/%s/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return int(v[11]) + int(v[12])
print("one scrape, 200 back to back: process CPU ms per scrape, wall ms, page bytes")
total = 0.0
for pid, url in zip(pids, urls):
    size = len(urllib.request.urlopen(url, timeout=5).read())
    c0, t0 = ticks(pid), time.monotonic()
    for _ in range(200):
        urllib.request.urlopen(url, timeout=5).read()
    c1, t1 = ticks(pid), time.monotonic()
    total += (c1 - c0) * 1000.0 / hz / 200
    print("%-40s pid %-7s %6.2f ms cpu %6.2f ms wall %7d bytes" %
          (url, pid, (c1 - c0) * 1000.0 / hz / 200, (t1 - t0) * 1000 / 200, size))
print("all %d endpoints once a second: %.2f ms CPU per second, %.3f %% of one CPU" %
      (len(urls), total, total / 10))
PYEOF
}

# run_scrape_cost: the main cluster with every daemon's and the mount's
# /metrics on; each main job and the 1-directory metadata job on the rpfs
# mount, PAIRS times unscraped ("off") and PAIRS times with the scraper
# running ("on"), in pairs off,on then on,off (so drift over the run and
# the order within a pair weigh on both alike); the scraper runs only
# during its runs. Prints the table and writes OUT/scrape-cost.md.
run_scrape_cost() {
	local spec job file nj pre p mode order d
	SCRAPE=1
	say "starting the rpfs cluster (4 iods), every /metrics on"
	start_rpfs main 4 "$PORT"
	d=$(target_dir rpfs)
	mkdir -p "$d" "$WORK/fio-cwd/bench-fio"
	say "scrape cost: $SCRAPE_COST pairs per job ($MODE mode), ${#SCRAPE_URLS[@]} endpoints"
	for spec in "${MAIN_JOBS[@]}" "md1 - 1 md"; do
		read -r job file nj pre <<<"$spec"
		for ((p = 0; p < SCRAPE_COST; p++)); do
			order="off on"
			[ $((p % 2)) -eq 0 ] || order="on off"
			for mode in $order; do
				case "$pre" in
				prewrite) prewrite_fio rpfs "$file" "$nj" "$d" ;;
				drop|md) drop_caches ;;
				esac
				[ "$mode" = off ] || start_scraper
				settle
				if [ "$pre" = md ]; then
					run_md rpfs md1 1 "$mode"
				else
					run_fio main "$mode" rpfs "$job" "$file" "$nj" "$d" "$RPFS_PIDS_main"
				fi
				stop_scraper
			done
		done
	done
	scrape_cpu | tee "$OUT/scrape-cpu.txt" >&2
	mkdir -p "$OUT"
	cp "$RECORDS" "$OUT/scrape-cost.jsonl"
	$PY "$REPO/tests/bench/mdmatrix.py" scrape-table "$RECORDS" "$OUT/scrape-cost.md" ||
		die "cannot write the scrape cost table"
}

# ---- the cost of sealing (--seal-cost ROUNDS) -----------------------------
# run_seal_cost: three clusters of 4 iods, "main" without a key, "seal"
# with one (every TCP stream sealed after the handshake: common/transport/
# net_seal.h) and "enc" whose mount asks to encrypt too (-o conf= a file
# with [net] encrypt = on; the mount's connections to the mgr and the
# iods are encrypted, the mgr's to the iods only sealed); each main job on
# the three mounts, ROUNDS times, the order rotating per round; the CPU
# seconds are those of each cluster's processes (iods, mgr and mount).
# Prints the table and writes OUT/seal-cost.md.
run_seal_cost() {
	local spec job file nj pre p mode order d pids orders
	say "starting three rpfs clusters (4 iods): no key, a key, a key and encryption"
	start_rpfs main 4 "$PORT"
	KEYFILE=$WORK/cluster.key
	"$BUILD/admin/rpfs" keygen "$KEYFILE" >/dev/null || die "rpfs keygen failed"
	start_rpfs seal 4 $((PORT + 10))
	FUSE_CONF=$WORK/encrypt.conf
	printf '[net]\nencrypt = on\n' >"$FUSE_CONF"
	start_rpfs enc 4 $((PORT + 20))
	KEYFILE= FUSE_CONF=
	mkdir -p "$WORK/mnt/main/bench" "$WORK/mnt/seal/bench" "$WORK/mnt/enc/bench" \
		"$WORK/fio-cwd/bench-fio"
	say "seal cost: $SEAL_COST rounds per job ($MODE mode)"
	orders=("off mac enc" "mac enc off" "enc off mac")
	for spec in "${MAIN_JOBS[@]}"; do
		read -r job file nj pre <<<"$spec"
		for ((p = 0; p < SEAL_COST; p++)); do
			order=${orders[p % 3]}
			for mode in $order; do
				case "$mode" in
				off) d=$WORK/mnt/main/bench pids=$RPFS_PIDS_main ;;
				mac) d=$WORK/mnt/seal/bench pids=$RPFS_PIDS_seal ;;
				enc) d=$WORK/mnt/enc/bench pids=$RPFS_PIDS_enc ;;
				esac
				case "$pre" in
				prewrite) prewrite_fio rpfs "$file" "$nj" "$d" ;;
				drop) drop_caches ;;
				esac
				settle
				run_fio main "$mode" rpfs "$job" "$file" "$nj" "$d" "$pids"
			done
		done
	done
	mkdir -p "$OUT"
	cp "$RECORDS" "$OUT/seal-cost.jsonl"
	$PY "$REPO/tests/bench/mdmatrix.py" seal-table "$RECORDS" "$OUT/seal-cost.md" ||
		die "cannot write the seal cost table"
}

# ---- set up ---------------------------------------------------------------
install_packages
build_rpfs
check_pg
HZ=$(getconf CLK_TCK)
WORK=$(mktemp -d /tmp/rpfs-bench.XXXXXX)
if [ -n "$STATE_DIR" ]; then
	STATE_WORK=$(mktemp -d "$STATE_DIR/rpfs-bench.XXXXXX") ||
		die "--state-dir $STATE_DIR: cannot make a directory in it"
fi
RECORDS=$WORK/records.jsonl
mkdir -p "$WORK/bin" "$WORK/logs" "$WORK/out" "$WORK/mnt" "$WORK/fs" "$OUT"
: >"$RECORDS"

say "compiling the passthrough file system and the metadata benchmark"
cc -std=gnu11 -O2 -Wall -Wextra -o "$WORK/bin/bench-passthrough" \
	"$REPO/tests/bench/bench_passthrough.c" "$REPO/tests/bench/bench_hop.c" \
	$(pkg-config --cflags --libs fuse3) -lpthread ||
	die "cannot compile tests/bench/bench_passthrough.c"
cc -std=gnu11 -O2 -Wall -Wextra -o "$WORK/bin/bench-md" "$REPO/tests/bench/mdbench.c" ||
	die "cannot compile tests/bench/mdbench.c"

# libfuse 3.14 splices only when its pipe can grow past max_write + header
# (1 MiB + 4 KiB, rounded up to 2 MiB); the default limit is 1 MiB.
PIPE_ORIG=$(cat /proc/sys/fs/pipe-max-size)
[ "$PIPE_ORIG" -ge 4194304 ] || echo 4194304 >/proc/sys/fs/pipe-max-size

mount -t tmpfs -o "size=$TMPFS_SIZE" rpfs-bench "$WORK/fs"
mkdir -p "$WORK/fs/tmpfs"

if [ "$ONLY" = meta-matrix ]; then
	say "starting the passthrough file system"
	start_passthrough
	run_matrix
	say "done in $(($(date +%s) - T_START)) s; $OUT/meta-matrix.md"
	exit 0
fi
if [ "$ONLY" = workload ]; then
	run_workload
	say "done in $(($(date +%s) - T_START)) s; $OUT/workload.md"
	exit 0
fi
if [ "$SCRAPE_COST" -gt 0 ]; then
	run_scrape_cost
	say "done in $(($(date +%s) - T_START)) s; $OUT/scrape-cost.md"
	exit 0
fi
if [ "$SEAL_COST" -gt 0 ]; then
	run_seal_cost
	say "done in $(($(date +%s) - T_START)) s; $OUT/seal-cost.md"
	exit 0
fi

FIO_ENGINE=${RPFS_FIO_ENGINE:-$(find "$BUILD" -name '*fio*.so' -type f 2>/dev/null | head -n 1)}
[ -n "$FIO_ENGINE" ] && [ -f "$FIO_ENGINE" ] || FIO_ENGINE=
# wanted T: whether --targets (default all) names target T.
wanted() { case "$WANT_TARGETS" in *" $1 "*) return 0 ;; esac; return 1; }
TARGETS=()
wanted rpfs && TARGETS+=(rpfs)
if wanted rpfs-fio; then
	if [ -n "$FIO_ENGINE" ]; then TARGETS+=(rpfs-fio); else say "rpfs fio engine: not built yet"; fi
fi
for t in tmpfs passthrough passthrough-hop; do wanted "$t" && TARGETS+=("$t"); done
# MAIN_SPECS: the main jobs --jobs names (MAIN_JOBS, then the metadata
# jobs "md1 - 1 md" and "md100 - 100 md": name, -, directories, md).
MAIN_SPECS=()
for spec in "${MAIN_JOBS[@]}" "md1 - 1 md" "md100 - 100 md"; do
	case "$WANT_JOBS" in *" ${spec%% *} "*) MAIN_SPECS+=("$spec") ;; esac
done

if [ "$ONLY" = main ]; then
	say "starting the rpfs cluster (4 iods)"
else
	say "starting rpfs clusters (4 iods; 1 and 2 iods for the sweep)"
fi
start_rpfs main 4 "$PORT"
if [ "$ONLY" != main ]; then
	start_rpfs iod1 1 $((PORT + 10))
	start_rpfs iod2 2 $((PORT + 20))
fi
start_scraper
if wanted passthrough || [ "$MATRIX" -eq 1 ]; then
	say "starting the passthrough file system"
	start_passthrough
fi
wanted passthrough-hop && start_passthrough_hop
if wanted glusterfs; then
	say "starting GlusterFS (4 bricks on loopback)"
	if start_gluster; then TARGETS+=(glusterfs); fi
fi
[ ${#TARGETS[@]} -gt 0 ] || die "--targets: none of them can run here"
mkdir -p "$WORK/fio-cwd/bench-fio"
for t in "${TARGETS[@]}"; do
	[ "$t" = rpfs-fio ] && { mkdir -p "$WORK/mnt/main/bench-fio"; continue; }
	mkdir -p "$(target_dir "$t")"
done
say "targets: ${TARGETS[*]} ($MODE mode: $ROUNDS round(s), $SEQ_SIZE per seq job, ${RUNTIME}s random jobs, $MD_FILES files)"

# ---- main jobs: ROUNDS rounds, each interleaved over the targets ----------
# Each round runs every job on every target before the next job, in the
# order of MAIN_SPECS (the random jobs use the files the 4-job sequential
# write of the same round left). The order of the targets rotates from job
# to job and from round to round, so no target is always the first (cold)
# or the last one, and a drift of the machine weighs on all alike; the
# report takes the median of the rounds.
NT=${#TARGETS[@]}
for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
	K=$((ROUND - 1))
	seq_done=0
	for spec in "${MAIN_SPECS[@]}"; do
		read -r job file nj pre <<<"$spec"
		if [ "$pre" = md ] && [ "$seq_done" -eq 0 ]; then
			# the data jobs' files go before the metadata jobs
			for t in "${TARGETS[@]}"; do clear_seq "$(target_dir "$t")"; done
			seq_done=1
			# Warm-up in the first round, not measured: the first
			# metadata run on a file system is slower (fresh memory for
			# inodes and dentries on every layer).
			[ "$ROUND" -ne 1 ] || for t in "${TARGETS[@]}"; do
				case "$t" in rpfs-fio|passthrough-hop) continue ;; esac
				mkdir -p "$(target_dir "$t")/warm"
				"$WORK/bin/bench-md" "$(target_dir "$t")/warm" \
					$((MD_FILES < 1000 ? MD_FILES : 1000)) 10 >/dev/null ||
					say "warning: metadata warm-up failed on $t"
				rmdir "$(target_dir "$t")/warm" 2>/dev/null || true
			done
		fi
		for ((i = 0; i < NT; i++)); do
			t=${TARGETS[(i + K) % NT]}
			if [ "$pre" = md ]; then
				# the engine has no metadata path; the hop carries data only
				case "$t" in rpfs-fio|passthrough-hop) continue ;; esac
				drop_caches
				settle
				run_md "$t" "$job" "$nj"
				continue
			fi
			d=$(target_dir "$t")
			case "$pre" in
			prewrite) prewrite_fio "$t" "$file" "$nj" "$d" ;;
			drop) drop_caches ;;
			esac
			settle
			run_fio main - "$t" "$job" "$file" "$nj" "$d" "$(target_pids "$t")"
		done
		K=$((K + 1))
	done
	[ "$seq_done" -eq 1 ] || for t in "${TARGETS[@]}"; do clear_seq "$(target_dir "$t")"; done
done
ROUND=

[ "$MATRIX" -eq 0 ] || run_matrix

# ---- sweeps (rpfs only): stripe unit, then number of iods ------------------
# run_sweeps: sequential 1 MiB jobs on the main cluster with stripe units
# of 64 KiB, 256 KiB and 1 MiB, then on clusters of 1, 2 and 4 iods.
run_sweeps() {
	local u job d n c pids
	local -a UNITS=(65536 262144 1048576)
	for u in "${UNITS[@]}"; do
		mkdir -p "$WORK/mnt/main/unit$u"
		setfattr -n user.rpfs.layout -v "unit=$u,count=4" "$WORK/mnt/main/unit$u" ||
			say "warning: cannot set the layout of unit$u"
	done
	for job in seqwrite1 seqread1; do
		for u in "${UNITS[@]}"; do
			d=$WORK/mnt/main/unit$u
			if [ "$job" = seqwrite1 ]; then
				prewrite_fio rpfs seqwrite.fio 1 "$d"
			else
				drop_caches
			fi
			settle
			run_fio unit "$u" rpfs "$job" "${job%1}.fio" 1 "$d" "$RPFS_PIDS_main"
		done
	done
	for u in "${UNITS[@]}"; do clear_seq "$WORK/mnt/main/unit$u"; done
	for job in seqwrite1 seqread1; do
		for n in 1 2 4; do
			case $n in 1) c=iod1 ;; 2) c=iod2 ;; 4) c=main ;; esac
			d=$WORK/mnt/$c/sweep
			mkdir -p "$d"
			if [ "$job" = seqwrite1 ]; then
				prewrite_fio rpfs seqwrite.fio 1 "$d"
			else
				drop_caches
			fi
			eval "pids=\$RPFS_PIDS_$c"
			settle
			run_fio iods "$n" rpfs "$job" "${job%1}.fio" 1 "$d" "$pids"
		done
	done
}
[ "$ONLY" = main ] || run_sweeps

# ---- report ---------------------------------------------------------------
mkdir -p "$OUT/logs"
cp "$WORK"/logs/*.log "$OUT/logs/" 2>/dev/null || true
WARN=$(cat "$WORK"/logs/main-*.log "$WORK"/logs/iod*-*.log 2>/dev/null | grep -c '^<[0-4]>' || true)
[ "$WARN" -eq 0 ] || say "warning: rpfs daemons logged $WARN error/warning lines (see $OUT/logs)"
SPLICE=$(grep -o 'splice .*' "$WORK/logs/passthrough.log" | head -n 1 || true)
GIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$REPO" diff --quiet HEAD 2>/dev/null || GIT="$GIT+dirty"
export B_MODE=$MODE B_CMD="scripts/bench.sh $*" B_GIT=$GIT B_BUILDTYPE=${BUILDTYPE:-unknown}
export B_PIPE="$PIPE_ORIG raised to $(cat /proc/sys/fs/pipe-max-size) during the run"
export B_SPLICE="${SPLICE:-unknown}" B_ENGINE=$FIO_ENGINE B_WARN=$WARN
export B_ELAPSED=$(($(date +%s) - T_START)) B_SEQ=$SEQ_SIZE B_RT=$RUNTIME B_MD=$MD_FILES
export B_GLHOST=${GL_HOST:-} B_CAP=$SEQ_CAP B_ROUNDS=$ROUNDS B_TARGETS=$WANT_TARGETS
B_STATE=
[ -z "$STATE_DIR" ] || B_STATE="Exception: with --state-dir, the state of the rpfs clusters (mgr database, iod data) lies in $STATE_DIR, on $STATE_FS. "
export B_STATE
export B_VERSION=$(meson introspect --projectinfo "$BUILD" 2>/dev/null |
	$PY -c 'import json,sys; print(json.load(sys.stdin)["version"])' 2>/dev/null || echo unknown)
$PY - "$WORK/meta.json" <<'EOF'
import json, os, platform, subprocess, sys, time
def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception:
        return ""
e = os.environ
model = sh("sed -n 's/^model name\\s*: //p' /proc/cpuinfo | head -n 1")
mem = sh("awk '/MemTotal/ { printf \"%.1f GiB\", $2 / 1048576 }' /proc/meminfo")
ncpu = os.cpu_count()
meta = {
    "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    "mode": e["B_MODE"], "command": e["B_CMD"], "elapsed_s": int(e["B_ELAPSED"]),
    "machine": "%s, %d CPUs, %s RAM, host %s" % (model, ncpu, mem, platform.node()),
    "machine_short": "%d CPUs, %s" % (ncpu, platform.release()),
    "kernel": platform.release(),
    "rpfs": "%s (git %s), %s build" % (e["B_VERSION"], e["B_GIT"], e["B_BUILDTYPE"]),
    "fio": sh("fio --version"),
    "glusterfs": sh("glusterfs --version | head -n 1"),
    "libfuse": sh("pkg-config --modversion fuse3"),
    "compiler": sh("cc --version | head -n 1"),
    "pipe_max_size": e["B_PIPE"],
    "passthrough_splice": e["B_SPLICE"],
    "fio_engine": e["B_ENGINE"],
    "rpfs_log_warnings": int(e["B_WARN"]),
    "md_files": int(e["B_MD"]),
    "rounds": int(e["B_ROUNDS"]),
    "targets": e["B_TARGETS"].split(),
    "loadavg_at_end": open("/proc/loadavg").read().split()[:3],
    "method": (
        "All data lives in one private tmpfs: the tmpfs target, the passthrough's "
        "source directory, the rpfs mgr database and iod data, the GlusterFS bricks "
        "(brick host %s, resolving to 127.0.0.1; all traffic on loopback). "
        "The main jobs run in %d round(s); each round runs every job on every target, "
        "interleaved per job (each job runs on every target before the next job), the "
        "targets' order rotating from job to job and from round to round. The summary shows "
        "per job and target the median of the rounds and beside it their spread, half "
        "their range ((max - min) / 2) in %% of the median; a ratio is the median of the "
        "per-round ratios (both targets of a ratio ran in the same round), its spread "
        "likewise. "
        "fio %s, ioengine psync, one file per job. Writes: buffered (direct=0), "
        "end_fsync=1 (inside the measured time), and every write is an overwrite: "
        "before each sequential write job its files are removed and written once by "
        "the same job, unmeasured, and the measured run rewrites them right after, "
        "caches not dropped, so every target has its memory (tmpfs pages, page cache, "
        "buffers) in place and none pays first-touch page faults in the measured time; "
        "the random writes rewrite the files of the 4-job sequential write. Reads: O_DIRECT (direct=1) on every target, after "
        "dropping the page cache, so no target is served from the kernel page cache "
        "(FUSE sends O_DIRECT reads to the daemon). Sequential jobs: %s per job, "
        "stopped after %s s at most; random jobs: time based, %s s, on the four "
        "files the 4-job sequential write left. Metadata: tests/bench/mdbench.c, "
        "%s files created (open O_CREAT|O_EXCL + close), stat'ed, unlinked, in one "
        "directory or round-robin over 100, caches dropped before the stat and "
        "unlink phases, after an unmeasured warm-up of 1,000 files on every target. "
        "passthrough-hop is the passthrough with each read and write carried out across a "
        "loopback TCP round trip by a server thread that serves that FUSE worker's connection "
        "alone, so no request waits at the server behind another (tests/bench/bench_hop.c): on "
        "4 KiB random reads the ceiling for any client whose data lives behind a server; its writes "
        "wait for the server, so it is no ceiling for writes that go behind (rpfs over tcp), "
        "and it sends a 1 MiB request whole to one server, so it is no ceiling for the "
        "sequential rows. "
        "The rpfs iod sweep uses a separate 1- and 2-iod cluster (idle during the other runs). "
        "%s"
        "Other load on the machine is not controlled: check the load average. Numbers drift 20-35 %% within an hour on these machines: "
        "compare only within one run."
        % (e["B_GLHOST"] or "-", int(e["B_ROUNDS"]), sh("fio --version"), e["B_SEQ"], e["B_CAP"],
           e["B_RT"], e["B_MD"], e["B_STATE"])),
}
json.dump(meta, open(sys.argv[1], "w"), indent=1)
EOF
$PY "$REPO/tests/bench/report.py" render "$RECORDS" "$WORK/meta.json" "$OUT"
[ "$MATRIX" -eq 0 ] || cat "$OUT/meta-matrix.md" >>"$OUT/results.md"
say "done in $(($(date +%s) - T_START)) s (waited $((SETTLE_WAITS / 2)) s in all for the machine to settle between runs)"
