#!/usr/bin/env bash
# ha-cluster.sh - the whole rpfs cluster with its namespace in a replicated
# PostgreSQL, in network namespaces on this machine (issue 21, item 4):
# a pg_auto_failover monitor, 2 PostgreSQL nodes (a primary and its
# synchronous standby), the mgr on the PostgreSQL store with a multi-host
# store_uri, 4 iods and N clients (default 2) mounted on host paths. When
# this build's rpfs-mgr has --lease (several mgrs on one store, one
# active), a second mgr stands by and the clients get the list of both
# (their --lease: SECONDS, default the mgr's, 10); else one mgr, and
# status says so. --client-timeout: the clients' -o timeout (SECONDS,
# default theirs, 10).
#
#   ha-cluster.sh up [--dir DIR] [--clients N] [--lease SECONDS]
#                    [--client-timeout SECONDS]  start it all; print where
#                                                everything is (as status)
#   ha-cluster.sh status [--dir DIR]             addresses, store_uri, mounts,
#                                                logs, the database nodes'
#                                                states and the primary's
#                                                synchronous replication
#   ha-cluster.sh down [--dir DIR]               stop and delete all of it,
#                                                a partial up included
#
# DIR (default /tmp/rpfs-ha) holds everything: state.json (what was made),
# logs/, pg/NODE (the database nodes, run by the system user rpfs-pg, which
# is created if missing: pg_autoctl refuses root), mnt/cliK. Binaries come
# from $RPFS_BUILD (default build). The work is done by
# tests/integration/hacluster.py, on the netns harness of the fault tests
# (tests/integration/netns.py). Root only. Exit 0 when all is up (status,
# up) or gone (down); 1 otherwise; 2 on a bad command line.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
. "$REPO/scripts/packages.sh"

PGUSER_SYS=rpfs-pg

die() {
	printf 'ha-cluster.sh: %s\n' "$*" >&2
	exit 1
}

usage() {
	printf 'usage: ha-cluster.sh up|down|status [--dir DIR] [--clients N] [--lease SECONDS]\n' >&2
	printf '                                    [--client-timeout SECONDS]\n' >&2
	exit 2
}

# setup_user: the system user of the database nodes (as pg-temp.sh makes it).
setup_user() {
	id -u "$PGUSER_SYS" >/dev/null 2>&1 && return 0
	useradd --system --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin "$PGUSER_SYS" ||
		die "cannot create the system user $PGUSER_SYS"
}

[ $# -ge 1 ] || usage
case $1 in
up | down | status) ;;
*) usage ;;
esac
dir=/tmp/rpfs-ha
args=("$@")
i=1
while [ $i -lt ${#args[@]} ]; do
	case ${args[$i]} in
	--dir)
		[ $((i + 1)) -lt ${#args[@]} ] || usage
		dir=${args[$((i + 1))]}
		i=$((i + 2))
		;;
	--clients | --lease | --client-timeout)
		[ $((i + 1)) -lt ${#args[@]} ] || usage
		i=$((i + 2))
		;;
	*)
		printf 'ha-cluster.sh: unexpected argument "%s"\n' "${args[$i]}" >&2
		usage
		;;
	esac
done
[ -n "$dir" ] || usage
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, FUSE mounts on host paths, the $PGUSER_SYS user)"
pkg_install "${RPFS_HA_PACKAGES[@]}" >&2 || die "cannot install the packages it needs"
if [ "$1" = up ]; then
	setup_user
	mkdir -p "$dir"
	# the database nodes run as $PGUSER_SYS: every parent must let it through
	runuser -u "$PGUSER_SYS" -- test -x "$dir" ||
		die "$dir: the user $PGUSER_SYS cannot reach it (a parent directory is closed)"
fi
exec /usr/bin/python3 "$REPO/tests/integration/hacluster.py" "$@"
