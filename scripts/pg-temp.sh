#!/usr/bin/env bash
# pg-temp.sh - a throwaway PostgreSQL 15 cluster for tests and benchmarks.
#
#   pg-temp.sh start DIR   create (if DIR holds none yet) and start a cluster
#                          in DIR; print ONE line, its URI:
#                          postgresql://rpfs:PASS@127.0.0.1:PORT/rpfs
#   pg-temp.sh stop DIR    stop it (pg_ctl stop -m fast)
#   pg-temp.sh uri DIR     print the URI again
#
# The cluster listens on 127.0.0.1 and on a unix socket in DIR only, on a
# free port, with fsync on. Its role rpfs (a password, CREATEDB: the tests
# make scratch databases) owns the database rpfs. Run as root, the server
# runs as the system user rpfs-pg (created if missing) and DIR is chowned
# to it; else as the caller. Messages go to stderr; exit 0 on success, 1 on
# failure, 2 on a bad command line. DIR/log holds the server's log.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
. "$REPO/scripts/packages.sh"

PGBIN=/usr/lib/postgresql/15/bin
PGUSER_SYS=rpfs-pg

die() {
	printf 'pg-temp.sh: %s\n' "$*" >&2
	exit 1
}

usage() {
	printf 'usage: pg-temp.sh start|stop|uri DIR\n' >&2
	exit 2
}

# as_pg CMD...: run CMD as the server's user (rpfs-pg when we are root).
as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$PGUSER_SYS" -- "$@"
	else
		"$@"
	fi
}

# port_free PORT: nothing accepts connections on 127.0.0.1:PORT.
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# setup_user DIR: when root, make sure rpfs-pg exists and owns DIR (and
# can reach it).
setup_user() {
	[ "$(id -u)" -eq 0 ] || return 0
	if ! id -u "$PGUSER_SYS" >/dev/null 2>&1; then
		useradd --system --no-create-home --home-dir /nonexistent \
			--shell /usr/sbin/nologin "$PGUSER_SYS" ||
			die "cannot create the system user $PGUSER_SYS"
	fi
	chown "$PGUSER_SYS:" "$1"
	chmod 0700 "$1"
	as_pg test -x "$1" || die "$1: the user $PGUSER_SYS cannot reach it (a parent directory is closed)"
}

# init_cluster DIR: initdb in DIR/data, the config, the password.
init_cluster() {
	local dir=$1 pass
	pass=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
	printf '%s\n' "$pass" >"$dir/pass"
	chmod 0600 "$dir/pass"
	[ "$(id -u)" -ne 0 ] || chown "$PGUSER_SYS:" "$dir/pass"
	as_pg "$PGBIN/initdb" -D "$dir/data" -U postgres --auth-local=trust \
		--auth-host=scram-sha-256 --no-sync --locale=C -E UTF8 \
		>"$dir/initdb.log" 2>&1 || die "initdb failed (see $dir/initdb.log)"
	cat >>"$dir/data/postgresql.conf" <<EOF
# pg-temp.sh
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
fsync = on
synchronous_commit = on
max_connections = 100
lc_messages = 'C'
EOF
}

# start_server DIR: start on the port of the last start if it is free (the
# URI stays valid), else on a random free one; retry on a lost race.
start_server() {
	local dir=$1 port try
	for try in 1 2 3 4 5 6 7 8 9 10; do
		port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		if [ "$try" = 1 ] && [ -s "$dir/port" ]; then
			port=$(cat "$dir/port")
		fi
		port_free "$port" || continue
		sed -i '/^port = /d' "$dir/data/postgresql.conf"
		printf 'port = %s\n' "$port" >>"$dir/data/postgresql.conf"
		if as_pg "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
			start >/dev/null 2>&1; then
			printf '%s\n' "$port" >"$dir/port"
			return 0
		fi
	done
	die "the server does not start (see $dir/log)"
}

# make_role DIR: the role and the database (once).
make_role() {
	local dir=$1 port pass
	port=$(cat "$dir/port")
	pass=$(cat "$dir/pass")
	[ -e "$dir/role-made" ] && return 0
	as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres \
		-d postgres >/dev/null 2>"$dir/psql.log" <<EOF || die "cannot create the role (see $dir/psql.log)"
CREATE ROLE rpfs LOGIN CREATEDB PASSWORD '$pass';
CREATE DATABASE rpfs OWNER rpfs;
EOF
	: >"$dir/role-made"
}

# print_uri DIR
print_uri() {
	local dir=$1
	if [ ! -s "$dir/port" ] || [ ! -s "$dir/pass" ]; then
		die "$dir: no cluster started here"
	fi
	printf 'postgresql://rpfs:%s@127.0.0.1:%s/rpfs\n' "$(cat "$dir/pass")" "$(cat "$dir/port")"
}

[ $# -eq 2 ] || usage
cmd=$1
[ -n "$2" ] || usage
case $cmd in
start)
	pkg_install "${RPFS_PG_TEST_PACKAGES[@]}" coreutils sed >&2 ||
		die "cannot install PostgreSQL 15"
	mkdir -p "$2"
	DIR=$(cd "$2" && pwd)
	setup_user "$DIR"
	[ -s "$DIR/data/PG_VERSION" ] || init_cluster "$DIR"
	if as_pg "$PGBIN/pg_ctl" -D "$DIR/data" status >/dev/null 2>&1; then
		[ -s "$DIR/port" ] || die "$DIR: a server runs but its port is unknown"
	else
		start_server "$DIR"
	fi
	make_role "$DIR"
	print_uri "$DIR"
	;;
stop)
	DIR=$(cd "$2" 2>/dev/null && pwd) || die "$2: no such directory"
	[ -s "$DIR/data/PG_VERSION" ] || die "$DIR: no cluster here"
	if as_pg "$PGBIN/pg_ctl" -D "$DIR/data" status >/dev/null 2>&1; then
		as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null ||
			die "pg_ctl stop failed"
	fi
	;;
uri)
	DIR=$(cd "$2" 2>/dev/null && pwd) || die "$2: no such directory"
	print_uri "$DIR"
	;;
*)
	usage
	;;
esac
