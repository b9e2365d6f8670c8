#!/bin/sh
# fio-src.sh - fetch the source of the installed fio (its headers are needed
# to build the librpfs fio engine; Debian ships no fio-dev package).
#
#   scripts/fio-src.sh [CACHEDIR]      default CACHEDIR: $XDG_CACHE_HOME/rpfs
#                                       (~/.cache/rpfs)
#
# Adds a deb-src entry for the same Debian mirror and suites as the
# configured binary sources (only if none is there), runs `apt-get source
# fio=<installed version>` into CACHEDIR, runs fio's ./configure there (for
# config-host.h, as Debian's build does), and prints the unpacked source
# directory, suitable for `meson setup -Dfio_engine=enabled -Dfio_src=DIR`.
# Needs root (or sudo) only for the deb-src entry and apt-get update;
# flock (util-linux) to run one at a time per CACHEDIR.
# Exit 0 ok, 1 failure.
set -eu

cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/rpfs}
ver=$(dpkg-query -W -f '${Version}' fio 2>/dev/null) || {
	echo "fio-src.sh: fio is not installed (apt-get install fio)" >&2
	exit 1
}
upver=${ver#*:}
upver=${upver%-*}
mkdir -p "$cache"
# One fetch at a time per cache: test.sh's two lanes configure their builds
# at once, and a second run that saw the first's new deb-src entry before
# its apt-get update ended failed ("You must put some 'deb-src' URIs").
exec 9>"$cache/.fio-src.lock"
flock 9

# Already fetched?
# Run fio's configure (as Debian's build does) for config-host.h, which
# the headers need.
configure_src() {
	if [ ! -f "$1/config-host.h" ]; then
		(cd "$1" && ./configure --disable-native --prefix=/usr) \
			>"$1/rpfs-configure.log" 2>&1 || {
			echo "fio-src.sh: fio configure failed, see" \
				"$1/rpfs-configure.log" >&2
			exit 1
		}
	fi
}

if [ -f "$cache/fio-$upver/fio.h" ]; then
	configure_src "$cache/fio-$upver"
	echo "$cache/fio-$upver"
	exit 0
fi

sudo=
[ "$(id -u)" = 0 ] || sudo=sudo

# A deb-src entry for the configured mirror and suites, once.
if ! grep -rqs '^[[:space:]]*\(deb-src\|Types:.*deb-src\)' \
	/etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null; then
	src=/etc/apt/sources.list.d/rpfs-deb-src.sources
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		# deb822: copy every stanza with Types: deb-src
		sed 's/^Types:.*/Types: deb-src/' \
			/etc/apt/sources.list.d/debian.sources |
			$sudo tee "$src" >/dev/null
	elif [ -f /etc/apt/sources.list ]; then
		grep '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list |
			sed 's/^\([[:space:]]*\)deb[[:space:]]/\1deb-src /' |
			$sudo tee /etc/apt/sources.list.d/rpfs-deb-src.list >/dev/null
	else
		echo "fio-src.sh: no apt sources found" >&2
		exit 1
	fi
	$sudo apt-get update -qq
fi

cd "$cache"
# Unpacking needs dpkg-source (dpkg-dev); no build dependencies are needed.
if ! command -v dpkg-source >/dev/null 2>&1; then
	$sudo apt-get install -y -qq dpkg-dev
fi
apt-get source -qq "fio=$ver" >&2 || apt-get source -qq fio >&2
if [ ! -f "$cache/fio-$upver/fio.h" ]; then
	echo "fio-src.sh: fio-$upver/fio.h missing after apt-get source" >&2
	exit 1
fi
configure_src "$cache/fio-$upver"
echo "$cache/fio-$upver"
