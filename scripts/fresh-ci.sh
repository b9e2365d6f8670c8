#!/usr/bin/env bash
# fresh-ci.sh - run CI (`bash .ci/run`) the way a fresh machine would: in a
# minimal Debian 12 chroot that has none of the packages the scripts install,
# with a `python3` first on PATH that is not Debian's (it cannot import
# Debian's modules, as on CI machines whose python3 is pyenv or an image's
# own build), from a fresh git clone of one commit.
#
#   scripts/fresh-ci.sh [--cache DIR] [--ref REF] [--env NAME=VALUE]...
#                       [--shared DIR] [--rebuild] [--keep] [-- CMD...]
#
#   --cache DIR   where the base chroot is kept (default $RPFS_FRESH_CACHE or
#                 /var/cache/rpfs-fresh): DIR/base is made once with
#                 debootstrap --variant=minbase (Debian 12, the Debian mirror
#                 of this host's apt sources) and never written again; every
#                 run gets a fresh overlay on it in DIR/runs/ (removed after
#                 the run unless --keep)
#   --ref REF     commit or branch to test (default HEAD of this checkout)
#   --env N=V     extra variable for the run (repeatable); RPFS_FUZZ_SECONDS,
#                 RPFS_PYTEST_ARGS, RPFS_TEST_KEEP and RPFS_VM_* are passed
#                 through from the environment as they are
#   --shared DIR  a directory copied beside the clone as ../shared (default
#                 the shared/ beside the main checkout, if there is one)
#   --rebuild     make the base chroot again
#   --keep        keep the run's overlay (DIR/runs/ID) for a look afterwards
#   -- CMD...     run CMD (in the clone) instead of `bash .ci/run`
#
# Inside: /proc, /sys, /dev (with /dev/fuse), /dev/pts and /dev/shm are
# bind-mounted (/tmp is the overlay's, on disk); /usr/local/bin/python3 is `/usr/bin/python3 -S` (no
# site-packages, no dist-packages: `import pytest` fails even once
# python3-pytest is installed); the clone is /build/rpfs; the command runs
# as root with CI=true and stdin from /dev/null. Everything is mounted in a
# private mount namespace (unshare -m), so the mounts - the tests' FUSE
# mounts included - go away with the run; at exit every process still in
# the chroot is killed and the overlay is unmounted.
# Needs root, debootstrap (installed if missing), git, network to the mirror.
# Exit status: the command's (CI: non-zero if anything failed).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${RPFS_FRESH_CACHE:-/var/cache/rpfs-fresh}
REF=HEAD
SHARED=
REBUILD=0
KEEP=0
EXTRA_ENV=()
CMD=()
SUITE=bookworm
PASS_ENV_RE='^RPFS_(FUZZ_SECONDS|PYTEST_ARGS|TEST_KEEP|VM_[A-Z_]+)$'

say() { printf 'fresh-ci: %s\n' "$*" >&2; }
die() { printf 'fresh-ci: error: %s\n' "$*" >&2; exit "${2:-1}"; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2; exit "$1"; }

while [ $# -gt 0 ]; do
	case "$1" in
	--cache) [ -n "${2:-}" ] || die "--cache: expected a directory" 2
		CACHE=$2; shift ;;
	--ref) [ -n "${2:-}" ] || die "--ref: expected a commit or branch" 2
		REF=$2; shift ;;
	--env) [[ "${2:-}" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] ||
			die "--env: expected NAME=VALUE, got \"${2:-}\"" 2
		EXTRA_ENV+=("$2"); shift ;;
	--shared) [ -d "${2:-}" ] || die "--shared: expected a directory, got \"${2:-}\"" 2
		SHARED=$(cd "$2" && pwd); shift ;;
	--rebuild) REBUILD=1 ;;
	--keep) KEEP=1 ;;
	-h|--help) usage 0 ;;
	--) shift; CMD=("$@"); break ;;
	*) say "unknown argument \"$1\""; usage 2 ;;
	esac
	shift
done
[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot, mounts)"
case "$CACHE" in /*) ;; *) CACHE=$PWD/$CACHE ;; esac
command -v git >/dev/null || die "git is needed on the host (apt-get install git)"
SHA=$(git -C "$REPO" rev-parse --verify --quiet "$REF^{commit}") ||
	die "--ref: \"$REF\" is not a commit of $REPO"
if [ -z "$SHARED" ]; then
	common=$(cd "$REPO" && cd "$(git rev-parse --git-common-dir)" && pwd)
	for d in "$REPO/../shared" "$(dirname "$common")/../shared"; do
		[ -d "$d" ] && { SHARED=$(cd "$d" && pwd); break; }
	done
fi

# host_mirror: the Debian mirror of this host's apt sources (the URI of the
# entry for $SUITE), else deb.debian.org.
host_mirror() {
	local m=
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		m=$(awk -v s="$SUITE" '
			/^[[:space:]]*$/ { if (ok && uri != "") { print uri; exit } ok = 0; uri = ""; next }
			/^URIs:/ { uri = $2 }
			/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) ok = 1 }
			END { if (ok && uri != "") print uri }' /etc/apt/sources.list.d/debian.sources |
			head -n 1)
	fi
	if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
		m=$(sed -n "s/^[[:space:]]*deb[[:space:]]\\+\\(\\[[^]]*\\][[:space:]]\\+\\)\\{0,1\\}\\([^[:space:]]*\\)[[:space:]]\\+${SUITE}[[:space:]].*/\\2/p" \
			/etc/apt/sources.list | head -n 1)
	fi
	echo "${m:-http://deb.debian.org/debian}"
}

# make_base: debootstrap a minbase Debian 12 into CACHE/base (under a lock;
# built in base.tmp and renamed, so a failed build leaves no half base).
# Costs a few minutes and ~250 MB the first time.
make_base() {
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock"
	flock 9
	if [ $REBUILD -eq 0 ] && [ -f "$CACHE/base/.rpfs-fresh-ok" ]; then
		exec 9>&-
		return 0
	fi
	if ! command -v debootstrap >/dev/null; then
		say "installing debootstrap"
		DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends debootstrap \
			>/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get -qq update >/dev/null &&
			DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends \
			debootstrap >/dev/null; } || die "cannot install debootstrap"
	fi
	local mirror
	mirror=$(host_mirror)
	say "debootstrap --variant=minbase $SUITE from $mirror into $CACHE/base"
	rm -rf "$CACHE/base.tmp"
	debootstrap --variant=minbase "$SUITE" "$CACHE/base.tmp" "$mirror" \
		>"$CACHE/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$CACHE/debootstrap.log" >&2; die "debootstrap failed (log: $CACHE/debootstrap.log)"; }
	# The host's Debian sources (mirror, updates, security), as a machine
	# of this kind has them; no third-party lists.
	rm -f "$CACHE/base.tmp/etc/apt/sources.list"
	[ -f /etc/apt/sources.list.d/debian.sources ] &&
		cp /etc/apt/sources.list.d/debian.sources "$CACHE/base.tmp/etc/apt/sources.list.d/"
	[ -f /etc/apt/sources.list ] && grep -q '^[[:space:]]*deb' /etc/apt/sources.list &&
		cp /etc/apt/sources.list "$CACHE/base.tmp/etc/apt/sources.list"
	[ -n "$(ls "$CACHE/base.tmp/etc/apt/sources.list.d/" 2>/dev/null)" ] ||
		[ -f "$CACHE/base.tmp/etc/apt/sources.list" ] ||
		echo "deb $mirror $SUITE main" >"$CACHE/base.tmp/etc/apt/sources.list"
	# No package's maintainer script may start a daemon from the chroot.
	printf '#!/bin/sh\nexit 101\n' >"$CACHE/base.tmp/usr/sbin/policy-rc.d"
	chmod 755 "$CACHE/base.tmp/usr/sbin/policy-rc.d"
	# The non-Debian python3 first on PATH (see the header).
	mkdir -p "$CACHE/base.tmp/usr/local/bin"
	cat >"$CACHE/base.tmp/usr/local/bin/python3" <<'EOF'
#!/bin/sh
# fresh-ci.sh: a python3 without Debian's site/dist-packages, like a CI
# machine's pyenv or image-built interpreter ahead of /usr/bin on PATH.
exec /usr/bin/python3 -S "$@"
EOF
	chmod 755 "$CACHE/base.tmp/usr/local/bin/python3"
	rm -rf "$CACHE/base.tmp/var/cache/apt/archives/"*.deb "$CACHE/base"
	touch "$CACHE/base.tmp/.rpfs-fresh-ok"
	mv "$CACHE/base.tmp" "$CACHE/base"
	exec 9>&-
}

RUN=
# cleanup: kill whatever still runs inside the chroot (by pid: only
# processes whose root is our overlay), unmount what is left of the run's
# mounts and remove the run directory unless --keep.
cleanup() {
	local rc=$? pid root mp left
	set +e
	[ -n "$RUN" ] || exit $rc
	for _ in 1 2 3 4 5; do
		left=0
		for pid in /proc/[0-9]*; do
			root=$(readlink "$pid/root" 2>/dev/null) || continue
			case "$root" in
			"$RUN/root"|"$RUN/root/"*) kill -KILL "${pid#/proc/}" 2>/dev/null; left=1 ;;
			esac
		done
		[ $left -eq 0 ] && break
		sleep 0.5
	done
	# The namespace took its mounts along; this is for a mount that leaked.
	grep -o " $RUN/[^ ]*" /proc/self/mounts 2>/dev/null | sort -r | while read -r mp; do
		umount -l "$mp" 2>/dev/null
	done
	if [ $KEEP -eq 1 ]; then
		say "run kept in $RUN (remove it with rm -rf)"
	else
		rm -rf "$RUN"
	fi
	exit $rc
}

make_base
mkdir -p "$CACHE/runs"
RUN=$(mktemp -d "$CACHE/runs/run.XXXXXX")
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$RUN/upper" "$RUN/work" "$RUN/root" "$RUN/clone"

# The fresh clone, made with the host's git (git is none of the packages the
# scripts install, so the chroot does not get it) into the overlay's upper
# layer: /build/rpfs in the chroot.
mkdir -p "$RUN/upper/build"
git clone -q --no-local --no-checkout "$REPO" "$RUN/upper/build/rpfs"
git -C "$RUN/upper/build/rpfs" checkout -q --detach "$SHA" ||
	die "cannot check out $SHA in the clone (is it on a branch of $REPO?)"
[ -n "$SHARED" ] && cp -a "$SHARED" "$RUN/upper/build/shared"
mkdir -p "$RUN/upper/etc"
cp /etc/resolv.conf /etc/hosts "$RUN/upper/etc/" 2>/dev/null || true

run_env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
	LANG=C.UTF-8 TERM=dumb CI=true)
while read -r v; do
	[[ "$v" =~ $PASS_ENV_RE ]] && run_env+=("$v=${!v}")
done < <(compgen -e)
run_env+=("${EXTRA_ENV[@]}")
[ ${#CMD[@]} -gt 0 ] || CMD=(bash .ci/run)

say "commit $SHA ($REF) in $RUN; ${CMD[*]}"
say "env: ${run_env[*]}"
t0=$(date +%s)
set +e
# In a private mount namespace: the overlay, the binds, then the chroot.
# shellcheck disable=SC2016
BASE=$CACHE/base unshare --mount --propagation private -- /bin/bash -euc '
	run=$1; shift
	mount -t overlay -o "lowerdir=$BASE,upperdir=$run/upper,workdir=$run/work" \
		rpfs-fresh "$run/root"
	r=$run/root
	mount --bind /proc "$r/proc"
	mount --bind /sys "$r/sys"
	mount --bind /dev "$r/dev"
	mount --bind /dev/pts "$r/dev/pts"
	[ -d /dev/shm ] && mount --bind /dev/shm "$r/dev/shm"
	[ -c "$r/dev/fuse" ] || { echo "fresh-ci: no /dev/fuse" >&2; exit 125; }
	exec chroot "$r" /usr/bin/env -i "$@"
' fresh-ci "$RUN" "${run_env[@]}" /bin/bash -c 'cd /build/rpfs && exec "$@" </dev/null' \
	fresh-ci-cmd "${CMD[@]}" </dev/null &
# wait (not a foreground command) so that INT/TERM run the traps at once
wait $!
rc=$?
set -e
say "exit status $rc after $(($(date +%s) - t0)) s"
exit $rc
