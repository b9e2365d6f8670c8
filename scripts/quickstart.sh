#!/usr/bin/env bash
# quickstart.sh - build rpfs and run a local cluster: 1 mgr + 4 iods on one
# address (127.0.0.1 over TCP, or the RDMA device's address over verbs),
# mounted at ${RPFS_MOUNT:-/mnt/rpfs}.
#
#   scripts/quickstart.sh          install packages if missing, build, start, mount
#   scripts/quickstart.sh stop     unmount and stop every daemon
#   scripts/quickstart.sh status   show what is running
#
# Environment:
#   RPFS_STATE      state directory (default ./.rpfs): rpfs.conf, cluster.key,
#                   db/, iod0..3/, logs/, pids/
#   RPFS_MOUNT      mount point (default /mnt/rpfs)
#   RPFS_BUILD      build directory (default build)
#   RPFS_TRANSPORT  tcp, verbs or auto (default auto): auto is verbs when an
#                   RDMA device (`rdma link show`) has a netdev with an IPv4
#                   address, else tcp
#   RPFS_HOST       address every daemon listens on and the client connects
#                   to (default: tcp 127.0.0.1; verbs the IPv4 address of the
#                   first RDMA device's netdev - rdma_cm cannot use loopback)
#   RPFS_PORT       the mgr's port (default 7400); the iods take the next four
# It raises RLIMIT_MEMLOCK to unlimited for the daemons it starts (as root;
# each iod pins about 38 MB for verbs, the default limit is 8 MiB).
# `status` exits 1 when a daemon is stopped or the mount is missing or not
# answering; `stop` names the processes that kept a busy mount.
#   RPFS_METRICS_PORT  first port of the Prometheus /metrics endpoints on
#                   127.0.0.1 (default 9400): the mgr, iod N on +1+N, the
#                   mount on +10 (scripts/monitoring/prometheus.yml)
# Packages are installed only when missing (nothing is fetched when all are
# there). It prints the transport really in use, as the mount's rpfs.stats
# reports it. Running either command twice is harmless.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$PWD
STATE=${RPFS_STATE:-$REPO/.rpfs}
MNT=${RPFS_MOUNT:-/mnt/rpfs}
BUILD=${RPFS_BUILD:-build}
TRANSPORT=${RPFS_TRANSPORT:-auto}
HOST=${RPFS_HOST:-}
MGR_PORT=${RPFS_PORT:-7400}
[[ "$MGR_PORT" =~ ^[0-9]+$ ]] && [ "$MGR_PORT" -ge 1 ] && [ "$MGR_PORT" -le 65531 ] || {
	printf 'quickstart: error: RPFS_PORT: expected 1..65531, got "%s"\n' "$MGR_PORT" >&2
	exit 2
}
IOD_PORTS=($((MGR_PORT + 1)) $((MGR_PORT + 2)) $((MGR_PORT + 3)) $((MGR_PORT + 4)))
METRICS_PORT=${RPFS_METRICS_PORT:-9400}
. "$REPO/scripts/packages.sh"
# The build's packages, then the tools called here: fuse3 (fusermount3),
# util-linux (setsid, mountpoint), attr (getfattr), iproute2 (rdma, ip).
PACKAGES=("${RPFS_BUILD_PACKAGES[@]}" util-linux attr iproute2)

say() { printf 'quickstart: %s\n' "$*"; }
die() { printf 'quickstart: error: %s\n' "$*" >&2; exit 1; }

case "$TRANSPORT" in
tcp|verbs|auto) ;;
*) die "RPFS_TRANSPORT: expected tcp, verbs or auto, got \"$TRANSPORT\"" ;;
esac
if [ -n "$HOST" ] && ! [[ "$HOST" =~ ^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$ ]]; then
	die "RPFS_HOST: expected an IPv4 address or a host name, got \"$HOST\""
fi
case "$STATE" in /*) ;; *) STATE=$REPO/$STATE ;; esac
case "$BUILD" in /*) ;; *) BUILD=$REPO/$BUILD ;; esac

# install_packages: apt-get install whatever of PACKAGES is missing
# (nothing at all when every one is there).
install_packages() {
	pkg_install "${PACKAGES[@]}" || die "cannot install the packages rpfs needs"
}

# rdma_addr: print "DEV ADDR" for the first RDMA device whose netdev has an
# IPv4 address (`rdma link show` names the netdev, `ip -4 addr` its
# address); print nothing when there is none (no device, no rdma tool, no
# kernel support).
rdma_addr() {
	local dev netdev addr
	command -v rdma >/dev/null 2>&1 || return 0
	while read -r dev netdev; do
		[ -n "$netdev" ] || continue
		addr=$(ip -4 -o addr show dev "$netdev" 2>/dev/null |
			awk '{ sub(/\/.*/, "", $4); print $4; exit }')
		if [ -n "$addr" ]; then
			echo "$dev $addr"
			return 0
		fi
	done < <(rdma link show 2>/dev/null |
		sed -n 's/^link \([^ ]*\) .* netdev \([^ ]*\).*/\1 \2/p')
}

# pick_transport: resolve TRANSPORT (auto -> verbs or tcp) and HOST (from
# RPFS_HOST, else the RDMA device's address for verbs, else 127.0.0.1).
# Runs after install_packages, so rdma(8) and ip(8) are there.
pick_transport() {
	local found dev=
	found=$(rdma_addr)
	if [ "$TRANSPORT" = auto ]; then
		if [ -n "$found" ]; then TRANSPORT=verbs; else TRANSPORT=tcp; fi
	fi
	if [ "$TRANSPORT" = verbs ]; then
		[ -n "$found" ] || [ -n "$HOST" ] ||
			die "RPFS_TRANSPORT=verbs: no RDMA device with an IPv4 address (rdma link show); set RPFS_HOST"
		dev=${found%% *}
		[ -n "$HOST" ] || HOST=${found#* }
		say "verbs on ${dev:-the RDMA device} at $HOST"
	fi
	[ -n "$HOST" ] || HOST=127.0.0.1
}

# stats_transport: the transport the mount really uses, from its rpfs.stats
# xattr (JSON); empty if it cannot be read.
stats_transport() {
	getfattr --absolute-names --only-values -n rpfs.stats "$MNT" 2>/dev/null |
		sed -n 's/.*"transport": *"\([a-z]*\)".*/\1/p'
}

# build: configure once (release), then ninja.
build() {
	if [ ! -f "$BUILD/build.ninja" ]; then
		meson setup "$BUILD" --buildtype=release >/dev/null ||
			die "meson setup $BUILD failed"
	fi
	ninja -C "$BUILD" >/dev/null || { ninja -C "$BUILD"; die "build failed"; }
}

# alive PID: true if PID is a process that runs: not gone, and not a
# zombie (a daemon killed -9 whose parent, e.g. a container's init, has not
# reaped it: kill -0 still succeeds on it).
alive() {
	local st
	[[ "$1" =~ ^[0-9]+$ ]] || return 1
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
	case ${st%% *} in Z|X|x|'') return 1 ;; esac
	return 0
}

# running NAME: true if NAME's pid file names a live process.
running() {
	local f="$STATE/pids/$1.pid"
	[ -f "$f" ] && alive "$(cat "$f")"
}

# mounted: true if MNT is a mount point in /proc/self/mountinfo, read by
# name, so a mount whose mgr is down counts (mountpoint(1) stats it).
mounted() {
	local real
	real=$(realpath -m "$MNT")
	awk -v m="$real" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo
}

# raise_memlock: RLIMIT_MEMLOCK unlimited for the daemons started here (the
# verbs iods pin their buffers; the systemd units say LimitMEMLOCK=): root
# may raise the hard limit too; else the soft one goes up to the hard one.
raise_memlock() {
	ulimit -l unlimited 2>/dev/null && return 0
	ulimit -S -l "$(ulimit -H -l)" 2>/dev/null || true
	[ "$TRANSPORT" != verbs ] ||
		say "RLIMIT_MEMLOCK stays at $(ulimit -l) KiB (not root, or no CAP_SYS_RESOURCE):" \
			"a verbs iod pins about 38 MB"
}

# wait_ready NAME LOG: wait (bounded) for the ready line in LOG.
wait_ready() {
	local name=$1 log=$2 i
	for i in $(seq 1 300); do
		grep -q '^<5>rpfs-[a-z]*: ready:' "$log" 2>/dev/null && return 0
		running "$name" || { tail -n 20 "$log" >&2; die "$name exited; log: $log"; }
		sleep 0.1
	done
	tail -n 20 "$log" >&2
	die "$name not ready after 30 s; log: $log"
}

# start_daemon NAME LOG CMD...: start CMD in the background unless running.
start_daemon() {
	local name=$1 log=$2
	shift 2
	if running "$name"; then
		say "$name already running (pid $(cat "$STATE/pids/$name.pid"))"
		return 0
	fi
	: >"$log"
	setsid "$@" </dev/null >>"$log" 2>&1 &
	echo $! >"$STATE/pids/$name.pid"
	wait_ready "$name" "$log"
}

start() {
	install_packages
	pick_transport
	build
	mkdir -p "$STATE/db" "$STATE/logs" "$STATE/pids"
	raise_memlock
	# The two keys (README "The keys") and the config file the daemons and
	# the client read; the mount reads only the clients' key.
	local k i
	for k in cluster server; do
		[ -f "$STATE/$k.key" ] || "$BUILD/admin/rpfs" keygen "$STATE/$k.key" >/dev/null ||
			die "cannot create $STATE/$k.key"
	done
	{
		printf '[cluster]\nmgr = %s:%s\nkey = %s\nserver_key = %s\ntransport = %s\n' \
			"$HOST" "$MGR_PORT" "$STATE/cluster.key" "$STATE/server.key" "$TRANSPORT"
		printf '[mgr]\ndb = %s\nlisten = %s:%s\n' "$STATE/db" "$HOST" "$MGR_PORT"
		for i in 0 1 2 3; do
			printf '[iod.%d]\nhost = %s\nport = %s\ndata = %s\n' \
				"$i" "$HOST" "${IOD_PORTS[$i]}" "$STATE/iod$i"
		done
		printf '[metrics]\nlisten = 127.0.0.1:%s\n' "$METRICS_PORT"
	} >"$STATE/rpfs.conf"
	for i in 0 1 2 3; do
		mkdir -p "$STATE/iod$i"
		start_daemon "iod$i" "$STATE/logs/iod$i.log" "$BUILD/iod/rpfs-iod" \
			--conf "$STATE/rpfs.conf" --id "$i"
	done
	start_daemon mgr "$STATE/logs/mgr.log" "$BUILD/mgr/rpfs-mgr" \
		--conf "$STATE/rpfs.conf"
	mkdir -p "$MNT"
	if mounted; then
		say "$MNT already mounted"
	else
		"$BUILD/fuse-client/rpfs-fuse" "$HOST:$MGR_PORT" "$MNT" \
			-o allow_other,conf="$STATE/rpfs.conf",metrics=127.0.0.1:$((METRICS_PORT + 10)) \
			2>>"$STATE/logs/fuse.log" ||
			{ tail -n 20 "$STATE/logs/fuse.log" >&2; die "mount failed"; }
		for i in $(seq 1 100); do
			mountpoint -q "$MNT" && break
			sleep 0.1
		done
		mountpoint -q "$MNT" || die "$MNT not mounted after 10 s"
	fi
	local inuse
	inuse=$(stats_transport)
	[ -n "$inuse" ] || die "cannot read the transport from getfattr -n rpfs.stats $MNT"
	[ "$inuse" = "$TRANSPORT" ] ||
		die "$MNT uses transport $inuse, not $TRANSPORT (a cluster from an earlier start? $0 stop first)"
	cat <<EOF
quickstart: rpfs is up (transport: $inuse, from rpfs.stats; RPFS_TRANSPORT=${RPFS_TRANSPORT:-auto})
  mgr          $HOST:$MGR_PORT   db $STATE/db
  iods         $HOST:${IOD_PORTS[0]}..${IOD_PORTS[3]}   data $STATE/iod0..3
  mount        $MNT
  config, key  $STATE/rpfs.conf, $STATE/cluster.key
  admin        $BUILD/admin/rpfs status --conf $STATE/rpfs.conf
  logs         $STATE/logs/{mgr,iod0..3,fuse}.log
  metrics      mgr   http://127.0.0.1:$METRICS_PORT/metrics
               iods  http://127.0.0.1:$((METRICS_PORT + 1))/metrics .. http://127.0.0.1:$((METRICS_PORT + 4))/metrics
               mount http://127.0.0.1:$((METRICS_PORT + 10))/metrics
               (Prometheus: scripts/monitoring/prometheus.yml, README "Observability")
  try          df -h $MNT; cp -r /etc $MNT/; getfattr -n user.rpfs.layout $MNT/etc/passwd
  stop         $0 stop
EOF
}

# stop_daemon NAME: SIGTERM, wait up to 10 s, then SIGKILL.
stop_daemon() {
	local name=$1 f="$STATE/pids/$1.pid" pid i
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	if alive "$pid"; then
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 100); do
			alive "$pid" || break
			sleep 0.1
		done
		if alive "$pid"; then
			say "$name (pid $pid) ignored SIGTERM; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		say "stopped $name"
	fi
	rm -f "$f"
}

# holders: "PID (COMM)" of each process whose cwd, root or an open file
# is in MNT (the /proc links' text, read by one find; nothing calls into
# the mount).
holders() {
	local real pid out=
	real=$(realpath -m "$MNT")
	for pid in $(find /proc/[0-9]*/cwd /proc/[0-9]*/root /proc/[0-9]*/fd -maxdepth 1 \
			\( -lname "$real" -o -lname "$real/*" \) 2>/dev/null |
			cut -d/ -f3 | sort -un); do
		out="$out${out:+, }$pid ($(cat "/proc/$pid/comm" 2>/dev/null))"
	done
	echo "$out"
}

stop() {
	local busy
	if mounted; then
		if fusermount3 -u "$MNT" 2>/dev/null || umount "$MNT" 2>/dev/null; then
			say "unmounted $MNT"
		else
			busy=$(holders)
			umount -l "$MNT"
			say "$MNT was busy (held by ${busy:-processes not found in /proc}):" \
				"detached it lazily; it goes once they let go"
		fi
	fi
	stop_daemon mgr
	local i
	for i in 0 1 2 3; do
		stop_daemon "iod$i"
	done
	say "stopped (state kept in $STATE; remove it to start afresh)"
}

# status: each daemon and the mount; exit 1 unless all run and the mount
# answers.
status() {
	local n t rc=0
	for n in mgr iod0 iod1 iod2 iod3; do
		if running "$n"; then
			echo "$n: running (pid $(cat "$STATE/pids/$n.pid"))"
		else
			echo "$n: stopped"
			rc=1
		fi
	done
	if ! mounted; then
		echo "$MNT: not mounted"
		rc=1
	elif t=$(timeout 15 getfattr --absolute-names --only-values -n rpfs.stats "$MNT" \
			2>/dev/null | sed -n 's/.*"transport": *"\([a-z]*\)".*/\1/p') && [ -n "$t" ]; then
		echo "$MNT: mounted (transport: $t)"
	else
		echo "$MNT: mounted, but not answering (is the mgr down?)"
		rc=1
	fi
	[ $rc -eq 0 ] || echo "quickstart: not everything is up (see above)" >&2
	return $rc
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
status) status ;;
*) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac
