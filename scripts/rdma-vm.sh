#!/usr/bin/env bash
# rdma-vm.sh - run a command inside a qemu VM that has real kernel verbs
# (soft-RoCE, rdma_rxe), for testing the verbs transport on machines without
# RDMA hardware or an RDMA-enabled kernel.
#
#   scripts/rdma-vm.sh setup [--force]
#       Install the host packages if missing, download the stock Debian kernel
#       and build the initramfs, into the cache directory. Runs by itself the
#       first time `run` needs it.
#   scripts/rdma-vm.sh run [--mem MB] [--smp N] [--timeout S] [--mtu BYTES]
#                          [--share DIR]... [--ro] -- CMD...
#       Boot the VM, run CMD in it and exit with CMD's exit status (124 on
#       timeout, 125 if the VM failed to boot or to run CMD). One argument is
#       shell code (`run -- 'a && b'`); several are an argv (`run -- ls -l`).
#   scripts/rdma-vm.sh clean
#       Remove the cache directory.
#
# Inside the VM: the host root is mounted read-only (over 9p), with tmpfs on
# /tmp and /run; this checkout is mounted read-write at the same path, and
# every --share DIR too (use it for build directories under /tmp). CMD runs
# as root from the checkout, with RLIMIT_MEMLOCK unlimited, one soft-RoCE
# device rxe0 on veth rxe-a (10.55.0.1/24; connect to that address, the
# loopback case; veth MTU --mtu, default 9000, gives RoCE MTU 4096) and FUSE.
# --ro mounts the checkout read-only. The VM has no NIC: nothing leaves it.
# RPFS_* variables of the caller are passed in; RPFS_IN_VM=1,
# RPFS_RDMA_DEV=rxe0 and RPFS_RDMA_ADDR=10.55.0.1 are set. CMD's output is
# streamed to stdout; the kernel console goes to $CACHE/console.log.
#
# Environment:
#   RPFS_VM_CACHE    cache directory (default <checkout>/.rpfs-vm): kernel,
#                    modules, initramfs, last console log
#   RPFS_VM_MEM      default for --mem (4096)
#   RPFS_VM_TIMEOUT  default for --timeout (600)
#   RPFS_VM_MTU      default for --mtu (9000)
#   RPFS_VM_CPU      qemu's -cpu model (default
#                    qemu64,+ssse3,+sse4.1,+sse4.2,+pclmulqdq,+popcnt: the
#                    same tests cost qemu 15-25 % less CPU than under
#                    "max", in 5 A/B pairs; "max" shows the guest AVX and
#                    AVX2, which glibc's string functions then take, and
#                    TCG emulates them more slowly than SSE, the likely
#                    reason)
#   RPFS_VM_KARGS    extra kernel command line words (e.g.
#                    "clocksource=tsc tsc=reliable"); none by default
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${RPFS_VM_CACHE:-$REPO/.rpfs-vm}
case "$CACHE" in /*) ;; *) CACHE=$PWD/$CACHE ;; esac
. "$REPO/scripts/packages.sh"
# Host side: qemu, busybox-static + cpio + gzip (initramfs), kmod (depmod,
# modprobe), xz-utils/zstd (compressed modules), util-linux (flock),
# apt/dpkg (the kernel package). Guest side (it runs the host's root):
# iproute2 (ip, rdma), rdma-core and the verbs tools of the smoke test,
# fuse3, and bash for the commands.
PACKAGES=(qemu-system-x86 busybox-static cpio gzip kmod xz-utils zstd util-linux iproute2
	rdma-core ibverbs-providers ibverbs-utils perftest rdmacm-utils librdmacm-dev
	libibverbs-dev fuse3 bash)
# Modules the guest loads, with their dependencies, in this order. bridge
# and sch_netem are for the fault harness (tests/integration/netns.py:
# namespaces on a bridge, tc netem on every link).
MODULES=(virtio_pci virtio_console 9pnet_virtio 9p fuse veth crc32_generic
	crc32_pclmul ib_uverbs ib_umad rdma_rxe rdma_ucm overlay bridge sch_netem)
RXE_ADDR=10.55.0.1
GUEST_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { printf 'rdma-vm: %s\n' "$*" >&2; }
die() { printf 'rdma-vm: error: %s\n' "$1" >&2; exit "${2:-125}"; }

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

# install_packages: apt-get install whichever of PACKAGES is missing.
install_packages() {
	pkg_install "${PACKAGES[@]}" || die "cannot install ${PACKAGES[*]}"
}

# fetch_kernel: download the kernel image package that linux-image-amd64
# depends on, keep its vmlinuz and the modules the guest needs (decompressed,
# since busybox insmod takes only plain .ko files) in $CACHE/kernel.
fetch_kernel() {
	local pkg ver tmp deb root mod line ko n=0
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	if [ -z "$pkg" ]; then
		# no package lists yet (a fresh machine): fetch them once
		local sudo=
		[ "$(id -u)" -eq 0 ] || sudo=sudo
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq update >/dev/null 2>&1 || true
		pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
			awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	fi
	[ -n "$pkg" ] || die "cannot resolve linux-image-amd64 (apt-get update failed?)"
	ver=${pkg#linux-image-}
	tmp=$(mktemp -d "$CACHE/dl.XXXXXX")
	say "downloading $pkg"
	(cd "$tmp" && apt-get download -q "$pkg" >/dev/null 2>&1) ||
		(cd "$tmp" && apt-get download "$pkg") || { rm -rf "$tmp"; die "apt-get download $pkg failed"; }
	deb=$(ls "$tmp"/*.deb)
	root=$tmp/root
	dpkg-deb -x "$deb" "$root"
	[ -f "$root/boot/vmlinuz-$ver" ] || { rm -rf "$tmp"; die "$deb has no boot/vmlinuz-$ver"; }
	# The package ships no modules.dep (its postinst makes it): make it here.
	depmod -b "$root" "$ver"
	rm -rf "$CACHE/kernel"
	mkdir -p "$CACHE/kernel/modules"
	cp "$root/boot/vmlinuz-$ver" "$CACHE/kernel/vmlinuz"
	: >"$CACHE/kernel/modules.order"
	for mod in "${MODULES[@]}"; do
		modprobe -d "$root" -S "$ver" --show-depends "$mod" >"$tmp/deps" ||
			{ rm -rf "$tmp"; die "modprobe --show-depends $mod failed"; }
		while read -r line; do
			case "$line" in
			insmod\ *) ;;
			*) continue ;; # "builtin NAME": nothing to load
			esac
			ko=$(echo "$line" | awk '{ print $2 }')
			local base
			base=$(basename "$ko")
			base=${base%.xz}
			base=${base%.zst}
			base=${base%.gz}
			grep -qx "$base" "$CACHE/kernel/modules.order" && continue
			case "$ko" in
			*.xz) xz -dc "$ko" >"$CACHE/kernel/modules/$base" ;;
			*.zst) zstd -qdc "$ko" >"$CACHE/kernel/modules/$base" ;;
			*.gz) gzip -dc "$ko" >"$CACHE/kernel/modules/$base" ;;
			*) cp "$ko" "$CACHE/kernel/modules/$base" ;;
			esac
			echo "$base" >>"$CACHE/kernel/modules.order"
			n=$((n + 1))
		done <"$tmp/deps"
	done
	echo "$ver" >"$CACHE/kernel/version"
	echo "${MODULES[*]}" >"$CACHE/kernel/modules.want"
	rm -rf "$tmp"
	say "kernel $ver: $n modules"
}

# write_init FILE: the guest's /init (busybox sh, runs as pid 1).
# It mounts the shares, sets up rxe0, runs /run/rpfs-vm/cmd.sh in the chroot
# and writes its exit status to the results share, then powers off. Every
# failure ends in a power-off too, so qemu always exits.
write_init() {
	cat >"$1" <<'EOF'
#!/bin/busybox sh
# rpfs rdma-vm guest init (generated by scripts/rdma-vm.sh)
/bin/busybox mkdir -p /bin /sbin /usr/bin /usr/sbin /proc /sys /dev /newroot
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
R=/newroot
OPTS=trans=virtio,version=9p2000.L,msize=262144

fail() {
	echo "rdma-vm-init: $*" >/dev/console
	[ -d $R/run/rpfs-vm ] && echo "$*" >$R/run/rpfs-vm/init-error
	sync
	poweroff -f
	echo o >/proc/sysrq-trigger
	sleep 60
}

for m in $(cat /modules.order); do
	# crc32-pclmul only speeds up rxe's ICRC; it needs the CPU feature.
	insmod /modules/$m || [ $m = crc32-pclmul.ko ] || fail "insmod $m failed"
done

mount -t 9p -o $OPTS,ro,cache=loose hostroot $R || fail "cannot mount the host root"
mount -t tmpfs -o mode=1777 tmpfs $R/tmp || fail "cannot mount $R/tmp"
mount -t tmpfs -o mode=755 tmpfs $R/run || fail "cannot mount $R/run"
mkdir -p $R/run/rpfs-vm $R/run/lock $R/run/shm
mount -t 9p -o $OPTS results $R/run/rpfs-vm || fail "cannot mount the results share"
mount -t proc proc $R/proc
mount -t sysfs sys $R/sys
mount -t devtmpfs dev $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts $R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
# bash process substitution (<(...)) opens /dev/fd/N.
ln -s /proc/self/fd $R/dev/fd
# /usr/sbin (/sbin on Debian 12) writable, for tests that install helpers
# where mount(8) looks for them: an overlay with its upper layer in RAM.
mkdir -p /ovl
mount -t tmpfs -o mode=755 tmpfs /ovl && mkdir -p /ovl/upper /ovl/work &&
	mount -t overlay -o lowerdir=$R/usr/sbin,upperdir=/ovl/upper,workdir=/ovl/work \
		overlay $R/usr/sbin || fail "cannot overlay $R/usr/sbin"
[ -d /sys/kernel/debug ] && mount -t debugfs debugfs $R/sys/kernel/debug 2>/dev/null
[ -d /sys/fs/fuse/connections ] && mount -t fusectl fusectl $R/sys/fs/fuse/connections 2>/dev/null
echo booted >$R/run/rpfs-vm/booted

# vm.env sets SHARES ("tag path" per line), WORKDIR and the exported vars.
. $R/run/rpfs-vm/vm.env || fail "cannot read vm.env"
echo "$SHARES" | while read -r tag path; do
	[ -n "$tag" ] || continue
	mkdir -p "$R$path" 2>/dev/null
	mount -t 9p -o $OPTS "$tag" "$R$path" || fail "cannot mount share $tag at $path"
done
[ -f $R/run/rpfs-vm/init-error ] && fail "share mounts failed"

ulimit -l unlimited || fail "cannot raise RLIMIT_MEMLOCK"
ulimit -n 65536
hostname rdma-vm
chroot $R /bin/sh -ec "
	ip link set lo up
	ip link add rxe-a type veth peer name rxe-b
	ip addr add $RPFS_RDMA_ADDR/24 dev rxe-a
	ip link set rxe-a mtu $RXE_MTU
	ip link set rxe-b mtu $RXE_MTU
	ip link set rxe-a up
	ip link set rxe-b up
	rdma link add $RPFS_RDMA_DEV type rxe netdev rxe-a
" >/dev/console 2>&1 || fail "rxe setup failed"

echo started >$R/run/rpfs-vm/started
# CMD's output goes to the virtio console (hvc0), the host's stdout.
chroot $R /bin/sh -c 'cd "$WORKDIR" && exec /bin/sh /run/rpfs-vm/cmd.sh' \
	</dev/null >/dev/hvc0 2>&1
echo $? >$R/run/rpfs-vm/status.tmp
mv $R/run/rpfs-vm/status.tmp $R/run/rpfs-vm/status
sync
poweroff -f
echo o >/proc/sysrq-trigger
sleep 60
EOF
}

# build_initramfs: pack busybox, the modules and /init into
# $CACHE/initramfs.cpio.gz.
build_initramfs() {
	local bb=/bin/busybox tmp
	[ -x "$bb" ] || die "$bb missing (install busybox-static)"
	ldd "$bb" >/dev/null 2>&1 && die "$bb is not static (install busybox-static)"
	tmp=$(mktemp -d "$CACHE/initrd.XXXXXX")
	mkdir -p "$tmp/bin" "$tmp/modules"
	cp "$bb" "$tmp/bin/busybox"
	cp "$CACHE/kernel/modules/"*.ko "$tmp/modules/"
	cp "$CACHE/kernel/modules.order" "$tmp/modules.order"
	write_init "$tmp/init"
	chmod 755 "$tmp/init"
	(cd "$tmp" && find . | cpio -o -H newc --quiet | gzip -1) >"$CACHE/initramfs.tmp"
	mv "$CACHE/initramfs.tmp" "$CACHE/initramfs.cpio.gz"
	init_hash >"$CACHE/initramfs.hash"
	rm -rf "$tmp"
}

# init_hash: identifies this script's init and module list, so an edited
# script rebuilds the initramfs (cheap) without downloading again.
init_hash() {
	{ write_init /dev/stdout; printf '%s\n' "${MODULES[@]}"; } | sha256sum | cut -c1-16
}

# cache_ok: true if the kernel and an up-to-date initramfs are cached.
kernel_ok() {
	[ -s "$CACHE/kernel/vmlinuz" ] && [ -s "$CACHE/kernel/version" ] &&
		[ -s "$CACHE/kernel/modules.order" ] &&
		[ "$(cat "$CACHE/kernel/modules.want" 2>/dev/null)" = "${MODULES[*]}" ]
}
cache_ok() {
	kernel_ok && [ -s "$CACHE/initramfs.cpio.gz" ] &&
		[ "$(cat "$CACHE/initramfs.hash" 2>/dev/null)" = "$(init_hash)" ]
}

# setup [--force]: packages, kernel, initramfs; under a lock so concurrent
# runs do not build the cache twice.
setup() {
	local force=0
	while [ $# -gt 0 ]; do
		case "$1" in
		--force) force=1 ;;
		*) die "setup: unknown argument \"$1\"" 2 ;;
		esac
		shift
	done
	install_packages
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock"
	flock 9
	if [ $force -eq 1 ] || ! kernel_ok; then
		fetch_kernel
	fi
	if [ $force -eq 1 ] || ! cache_ok; then
		build_initramfs
		say "initramfs ready in $CACHE"
	fi
	exec 9>&-
}

# squote STR: STR as a single-quoted sh word (safe for busybox sh).
squote() {
	printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

# run ARGS: see the header.
run() {
	local mem=${RPFS_VM_MEM:-4096} smp=2 timeout=${RPFS_VM_TIMEOUT:-600} ro=0
	[[ "${RPFS_VM_KARGS:-}" =~ ^[A-Za-z0-9_.,:=/\ -]*$ ]] ||
		die "RPFS_VM_KARGS: expected kernel words (letters, digits, _.,:=/-), got \"$RPFS_VM_KARGS\"" 2
	local mtu=${RPFS_VM_MTU:-9000}
	local cpu=${RPFS_VM_CPU:-qemu64,+ssse3,+sse4.1,+sse4.2,+pclmulqdq,+popcnt}
	[[ "$cpu" =~ ^[A-Za-z0-9_.,+=-]+$ ]] ||
		die "RPFS_VM_CPU: expected a qemu -cpu model (letters, digits, _.,+=-), got \"$cpu\"" 2
	local shares=() d
	while [ $# -gt 0 ]; do
		case "$1" in
		--mem) [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--mem: expected MB, got \"${2:-}\"" 2
			mem=$2; shift ;;
		--smp) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--smp: expected N, got \"${2:-}\"" 2
			smp=$2; shift ;;
		--timeout) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--timeout: expected seconds, got \"${2:-}\"" 2
			timeout=$2; shift ;;
		--share) d=${2:-}
			[ -d "$d" ] || die "--share: expected a directory, got \"$d\"" 2
			shares+=("$(cd "$d" && pwd -P)"); shift ;;
		--mtu) if ! [[ "${2:-}" =~ ^[0-9]+$ ]] || [ "$2" -lt 1280 ]; then
				die "--mtu: expected bytes >= 1280, got \"${2:-}\"" 2
			fi
			mtu=$2; shift ;;
		--ro) ro=1 ;;
		--) shift; break ;;
		*) die "run: unknown argument \"$1\" (command goes after --)" 2 ;;
		esac
		shift
	done
	[ $# -gt 0 ] || die "run: no command (usage: run [options] -- CMD...)" 2
	# the guest runs the host's root: its tools must be there every time
	install_packages
	cache_ok || setup

	local rdir
	rdir=$(mktemp -d "${TMPDIR:-/tmp}/rpfs-vm.XXXXXX")
	# shellcheck disable=SC2064
	trap "rdma_vm_cleanup '$rdir'" EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	# The command: one argument is shell code, several are an argv.
	{
		echo "# generated by rdma-vm.sh"
		if [ $# -eq 1 ]; then
			printf '%s\n' "$1"
		else
			local a line=
			for a in "$@"; do line+="$(squote "$a") "; done
			printf '%s\n' "$line"
		fi
	} >"$rdir/cmd.sh"

	# vm.env: read by the guest's init (busybox sh) and inherited by CMD.
	local virtfs=() i=0 sharelist='' v
	local repo_ro=
	[ $ro -eq 1 ] && repo_ro=",readonly=on"
	virtfs+=(-virtfs "local,path=$REPO,mount_tag=s$i,security_model=none,multidevs=remap$repo_ro")
	sharelist+="s$i $REPO"$'\n'
	for d in "${shares[@]}"; do
		i=$((i + 1))
		virtfs+=(-virtfs "local,path=$d,mount_tag=s$i,security_model=none,multidevs=remap")
		sharelist+="s$i $d"$'\n'
	done
	{
		echo "SHARES=$(squote "$sharelist")"
		echo "RXE_MTU=$mtu"
		echo "export WORKDIR=$(squote "$REPO")"
		echo "export PATH=$GUEST_PATH HOME=/root LANG=C.UTF-8 TERM=dumb"
		echo "export RPFS_IN_VM=1 RPFS_RDMA_DEV=rxe0 RPFS_RDMA_ADDR=$RXE_ADDR"
		while read -r v; do
			case "$v" in RPFS_VM_*|RPFS_IN_VM|RPFS_RDMA_*) continue ;; esac
			echo "export $v=$(squote "${!v}")"
		done < <(compgen -e | grep '^RPFS_' || true)
	} >"$rdir/vm.env"

	local rc=0
	timeout -k 5 "$timeout" qemu-system-x86_64 \
		-accel tcg -cpu "$cpu" -m "$mem" -smp "$smp" \
		-nic none -no-reboot -nodefaults -display none \
		-kernel "$CACHE/kernel/vmlinuz" -initrd "$CACHE/initramfs.cpio.gz" \
		-append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init${RPFS_VM_KARGS:+ $RPFS_VM_KARGS}" \
		-serial "file:$rdir/console.log" \
		-device virtio-serial-pci \
		-chardev stdio,id=out,signal=off -device virtconsole,chardev=out \
		-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
		-virtfs "local,path=$rdir,mount_tag=results,security_model=none,multidevs=remap" \
		"${virtfs[@]}" </dev/null &
	QEMU_PID=$!
	wait "$QEMU_PID" || rc=$?
	QEMU_PID=
	cp "$rdir/console.log" "$CACHE/console.log" 2>/dev/null || true

	if [ -f "$rdir/status" ]; then
		exit "$(cat "$rdir/status")"
	fi
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		say "timeout after ${timeout}s (VM killed); console log: $CACHE/console.log"
		exit 124
	fi
	[ -f "$rdir/init-error" ] && say "guest init: $(cat "$rdir/init-error")"
	if [ -f "$rdir/started" ]; then
		say "VM stopped before the command finished (qemu exit $rc)"
	else
		say "VM failed to boot or to start the command (qemu exit $rc)"
	fi
	if [ -s "$CACHE/console.log" ]; then
		say "last console lines ($CACHE/console.log):"
		tail -n 20 "$CACHE/console.log" >&2
	else
		say "the kernel printed nothing (too little --mem?)"
	fi
	exit 125
}

# rdma_vm_cleanup RDIR: stop the VM if it still runs (we were interrupted;
# timeout passes the signal on to qemu) and remove the per-run directory.
QEMU_PID=
rdma_vm_cleanup() {
	if [ -n "$QEMU_PID" ]; then
		kill "$QEMU_PID" 2>/dev/null || true
		wait "$QEMU_PID" 2>/dev/null || true
	fi
	rm -rf "$1"
}

case "${1:-}" in
setup) shift; setup "$@" ;;
run) shift; run "$@" ;;
clean) rm -rf "$CACHE" ;;
-h|--help|help|"") usage ;;
*) die "unknown command \"$1\" (setup, run, clean)" 2 ;;
esac
