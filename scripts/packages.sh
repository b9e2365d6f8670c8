# shellcheck shell=bash disable=SC2034
# packages.sh - sourced (bash) by the scripts that install what they need:
# one way to find the missing Debian packages and install them.
#
#   . "$REPO/scripts/packages.sh"
#   pkg_install PKG...     install whichever of PKG... is not installed
#
# Every script calls pkg_install before it picks or runs any tool of those
# packages, and lists every package whose tools it calls (a fresh machine
# has only Debian's required set; scripts/fresh-ci.sh checks this).
# Nothing is fetched when every package is there (the RDMA VM has no
# network). apt-get runs through sudo when not root.

# pkg_missing PKG...: print those of PKG... that dpkg does not list as
# installed.
pkg_missing() {
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			printf '%s\n' "$p"
	done
}

# pkg_install PKG...: apt-get install the missing ones of PKG...; first
# without `apt-get update` (quick, and enough when the lists are fresh),
# then after one. Returns 0, or 1 with a message naming the packages.
pkg_install() {
	local missing sudo=
	mapfile -t missing < <(pkg_missing "$@")
	[ ${#missing[@]} -eq 0 ] && return 0
	if ! command -v apt-get >/dev/null; then
		printf 'missing packages: %s (no apt-get here)\n' "${missing[*]}" >&2
		return 1
	fi
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	printf 'installing %s\n' "${missing[*]}" >&2
	if $sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq install -y \
		--no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
		return 0
	fi
	if $sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq update >/dev/null &&
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq install -y \
			--no-install-recommends "${missing[@]}" >/dev/null; then
		return 0
	fi
	printf 'apt-get install %s failed\n' "${missing[*]}" >&2
	return 1
}

# The build dependencies of rpfs (meson.build), verbs, metrics
# (libmicrohttpd) and the PostgreSQL store (libpq-dev) included; dpkg-dev,
# xz-utils and bzip2 fetch and unpack fio's source for the fio engine
# (scripts/fio-src.sh), fio's configure uses gcc.
RPFS_BUILD_PACKAGES=(meson ninja-build pkg-config gcc libc6-dev libfuse3-dev fuse3 liblmdb-dev
	libev-dev libsodium-dev libinih-dev libsystemd-dev libibverbs-dev librdmacm-dev
	libmicrohttpd-dev libpq-dev)
RPFS_FIO_SRC_PACKAGES=(fio dpkg-dev xz-utils bzip2)
# The metrics checks (scripts/test.sh, tests/integration/test_metrics.py):
# prometheus scrapes a test cluster, promtool checks the endpoints' text
# and scripts/monitoring's alerting rules.
RPFS_METRICS_TEST_PACKAGES=(prometheus)
# The PostgreSQL store's tests (scripts/pg-temp.sh: a throwaway cluster;
# tests/unit/mgr/test_mgr_kv.c): the server, psql, runuser and useradd.
RPFS_PG_TEST_PACKAGES=(postgresql-15 postgresql-client-15 util-linux passwd)
# scripts/ha-cluster.sh and tests/integration/test_ha.py: the database's
# own failover (pg_auto_failover: pg_autoctl and the monitor's extension),
# PostgreSQL 15, ip and nsenter (the network namespaces), fusermount3,
# runuser and useradd, python3.
RPFS_HA_PACKAGES=(postgresql-15 postgresql-client-15 postgresql-15-auto-failover
	pg-auto-failover-cli iproute2 util-linux fuse3 passwd python3)
