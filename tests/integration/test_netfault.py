"""The fault matrix (issue 12, item 4; issue 20, item 6): separate hosts
(tests/integration/netns.py: the mgr, 4 iods and 4 clients each in a
network namespace of its own, on a bridge, netem on every link when
$RPFS_NETEM is set), 4 clients writing their own files while one fault is
injected: kill -9 of an iod or of the mgr, SIGSTOP of an iod, the iod's link
taken down, a full disk on one iod. Each case runs unmirrored files and
mirrored ones (mirror=2: groups {0,1} and {2,3}, LAYOUTS_M) side by side
under the same fault, on one cluster: each client has a file of each kind
(a lane each, 8 in all), so wherever the case runs (the host; the VM,
whose kernel has netem) it covers both.

Each client k owns a directory cK with files whose layouts are pinned by
user.rpfs.layout, so that clients 0 and 1 need the victim iod (VICTIM) and
clients 2 and 3 do not; unmirrored:

    cli0  count=4 first=0   iods 0,1,2,3  buffered writes (write-behind)
    cli1  count=2 first=1   iods 1,2      O_DIRECT
    cli2  count=1 first=0   iod 0         buffered
    cli3  count=2 first=2   iods 2,3      O_DIRECT

Mirrored (the same names with a trailing m: `prem`, `runm`, ...), the
same split over the groups (VICTIM is in group 0, GOOD is its buddy):

    cli0  count=2 first=0   groups 0,1 (all iods)
    cli1  count=1 first=0   group 0 (iods 0,1)
    cli2  count=1 first=1   group 1 (iods 2,3)
    cli3  count=1 first=1   group 1, unit 128 KiB

Per case (per cycle; 1 cycle, or several with RPFS_SOAK=1):
 1. every lane writes `pre` with fio (crc32c headers, verified, fsynced);
 2. every lane runs a writer on `run` (WRITER: 64 KiB blocks in order,
    wrapping, fsync every 16; it logs each write and each fsync, so the
    test knows which writes were acknowledged: those an fsync returned 0
    for) and a prober reading `pre` around the page cache (O_DIRECT),
    which checks its sha256 on every pass and times every call;
 3. the fault; it is held until each lane that needs the victim has seen
    its error (EIO; ENOSPC from the writers for the full disk; mirrored,
    where an iod lost costs no error, until each of them has an
    acknowledged write issued during the fault, so the victim's replica
    of `run` missed it), and at least HOLD_S, then undone; the writers go
    on until each has an acknowledged write issued after the undo;
 4. checked: nothing read wrong data (probers); no call took longer than
    the client's retry logic allows (HANG_S for reads and unmirrored
    writes: one timeout TIMEOUT_S; HANG_M_S for mirrored writes: one
    timeout and the fencing of the lost iod; after a mgr kill -9 on the
    PostgreSQL store, MGR_TAKEOVER_S, the restarted mgr's wait for the
    killed one's lease; each plus half a timeout, so one more timeout
    fails it);
    clients needing the victim got EIO during the fault (kill, stop,
    link) and read `pre` correctly again after it; clients not needing it
    saw no error at all; a full disk gives ENOSPC to the writers needing
    it and nothing to the others; after a mgr kill -9 and restart everyone
    recovers without a remount. After recovery, read through a SECOND
    client (another mount, (k + 2) % 4, O_DIRECT, so no page cache of the
    writer can answer): every `pre` verifies (fio --verify_only, sha256
    unchanged) and every `run` holds every write acknowledged to its
    writer, before, during and after the fault (a block whose last write
    failed may hold that write's data or what it held before, page by
    page, never anything else). Mirrored, an iod that is killed, stopped
    or cut off costs nobody an error (reads and writes go on against its
    buddy, within the timeout); a full disk still gives ENOSPC to the
    writers whose group holds it. A degraded write's STALE_MARK waits
    until the victim is fenced, at worst until its lease (8 s) has run
    out: the client gives that call its timeout plus 12 s, and the
    longest-call bound (HANG_M_S) leaves room for it. Mirrored, the
    victim's replicas of the `run` files of clients 0 and 1 missed writes
    (the mgr resynced them, which its log must show); once the resync is
    done and the victim unfenced, GOOD is killed, so every read of group
    0 comes from the victim's replica, and the second clients read every
    `run` and `pre` again (then GOOD is restarted); a stale replica read
    there fails the case. Finally every lane writes and verifies a
    fresh file (`post`).
The matrix (data checked, errors seen, time to the first error, longest
call, longest write call, time to recover, the writer's acknowledged
writes) is printed at the end of the session and written to
netfault-matrix.txt in pytest's base temporary directory.
"""
import errno
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

import netns
import util


def _env_int(name, default, lo):
    """$name as an integer >= lo, default when unset."""
    v = os.environ.get(name) or str(default)
    if not v.isdigit() or int(v) < lo:
        raise ValueError('%s: expected an integer >= %d, got %r' % (name, lo, v))
    return int(v)


# -o timeout= of every client: $RPFS_NETFAULT_TIMEOUT, default 3 s. Under
# TCG with netem loss a healthy request can take longer than 3 s (see
# tests/integration/README.md "Fault harness"): the VM stage sets 10.
TIMEOUT_S = _env_int('RPFS_NETFAULT_TIMEOUT', 3, 1)
# The longest call a client may make during a fault, counted from its
# retry logic (fuse-client/): every request has one deadline, the mount's
# timeout T, for connect, send and reply alike (tcp_submit,
# net_call_timeout_ns), and is not sent again; one that times out holds its
# iod down for T, during which requests to it fail at once (cli_io.c
# iod_fail, sub_submit), so the rest of the call does not wait on it again;
# a refused or reset connection fails at once; there is one mgr, whose
# failure is the answer (cli_mgr_run). So an unmirrored call waits on the
# lost server for at most one T, and so does a mirrored read, which fails
# over to the buddy after that T. A mirrored write whose replica on the
# lost iod failed then
# records it stale at the mgr (STALE_MARK, cli_mirror_mark_stale), which
# answers once that iod is fenced: for an iod that does not answer, once
# the lease of the last fence message the mgr's poll sent it has run out
# (the mgr's default --lease-ms, 8 s; that message may go out up to a poll
# interval, 2 s, after the fault, and waits out the poll's timeout, 2 s):
# FENCE_S. Each bound adds half a T for the rest of the call (round trips
# to healthy servers, scheduling, TCG), so a client that waits one T more
# than this (a timed-out request sent again, a timeout ignored) fails it.
FENCE_S = 8 + 2 + 2
HANG_S = TIMEOUT_S + TIMEOUT_S / 2              # reads; unmirrored writes
HANG_M_S = TIMEOUT_S + FENCE_S + TIMEOUT_S / 2  # mirrored writes
# On the PostgreSQL store the mgr holds a lease in the database (--lease,
# default 10 s, renewed every third of it: mgr_lead.h); restarted after a
# kill -9, it stands by until the killed one's lease has run out, and a
# call meanwhile follows it (cli_mgr_run asks a standby again every 200 ms,
# for up to 30 s). A call in the mgr kill case may wait that long (plus the
# half T of the rest of the call), and none longer: no iod is lost there.
MGR_TAKEOVER_S = 10 + 10 / 3 if util.store() == 'postgresql' else 0
HOLD_S = TIMEOUT_S + 2        # every fault lasts at least this long
VICTIM = 1
GOOD = VICTIM ^ 1             # the victim's buddy in the mirrored cases
LAYOUTS = ['unit=65536,count=4,first=0', 'unit=65536,count=2,first=1',
           'unit=65536,count=1,first=0', 'unit=65536,count=2,first=2']
LAYOUTS_M = ['unit=65536,count=2,first=0,mirror=2', 'unit=65536,count=1,first=0,mirror=2',
             'unit=65536,count=1,first=1,mirror=2', 'unit=131072,count=1,first=1,mirror=2']
NEEDS_VICTIM = [0, 1]         # clients whose layouts include iod VICTIM
DIRECT = [False, True, False, True]
SOAK = os.environ.get('RPFS_SOAK', '0')
if SOAK not in ('0', '1'):
    raise ValueError('RPFS_SOAK: expected 0 or 1, got %r' % SOAK)
SOAK = SOAK == '1'
# per file: 2 MiB spans every iod of every layout (the widest, 4 units of
# 64 KiB, takes 256 KiB) 8 times over; 8 files per use (4 clients x 2
# kinds) keep the I/O of a case at what 4 files of 4 MiB were
SIZE_MIB = 64 if SOAK else 2
RUN_S = 60 if SOAK else 0          # the writers run at least this long
CYCLES = 5 if SOAK else 1          # faults per case
BLOCK = 64 << 10                   # the writers' write size

# Lines at <3>/<4> each fault makes the daemons print (anything else at
# <0>..<4> fails the test). A client warns about a failed request to the
# lost server, and about a write-behind write that failed (reported at the
# next call); the mgr about an iod its poll finds down; an iod resumed after
# SIGSTOP about clients that gave up on it meanwhile; an iod whose link was
# down longer than its request_timeout (10 s; the VM stage holds a fault
# 12 s) about a request whose data stopped with the link.
_IOD_LOST = [r'^<4>rpfs-fuse: iod %d \(\S+\): \w+ failed: ' % VICTIM,
             r'^<4>rpfs-fuse: inode \d+: a write of \d+ bytes at \d+ acknowledged earlier '
             r'failed: (Input/output error|Connection|Broken pipe)',
             r'^<4>rpfs-mgr: iod %d \(\S+\) went down: ' % VICTIM]
EXPECT = {
    'iod_kill9': _IOD_LOST,
    'iod_sigstop': _IOD_LOST + [r'^<4>rpfs-iod: '],
    'iod_link_down': _IOD_LOST + [r'^<4>rpfs-iod: net: \S+: request data did not arrive '
                                  r'within \d+ ms; closing connection$'],
    'mgr_kill9': [r'^<4>rpfs-fuse: mgr \(\S+\): \w+ failed: ',
                  r'^<4>rpfs-fuse: inode \d+: size update at \w+ failed: Input/output error',
                  r'^<4>rpfs-fuse: inode \d+: a write of \d+ bytes at \d+ acknowledged '
                  r'earlier failed: Input/output error'],
    'iod_disk_full': [r'^<4>rpfs-fuse: inode \d+: a write of \d+ bytes at \d+ acknowledged '
                      r'earlier failed: No space left on device',
                      r'^<4>rpfs-fuse: iod %d \(\S+\): \w+ failed: No space left' % VICTIM],
}
# Mirrored: the victim back, the mgr's resync copies its stale replicas
# while the clients' fio still writes them, which may take several tries.
EXPECT_M = [r'^<4>rpfs-mgr: iod %d: resync of inode \d+ from iod \d+ did not converge'
            % VICTIM]
# Mirrored, after recovery: GOOD killed (so the victim's replicas serve
# every read of group 0), its reads fail over; the mgr's poll may see it.
# Seen: Connection refused; a connection open when it died may also end
# in a reset, a broken pipe or EIO.
_KILLED = r'(Connection refused|Connection reset by peer|Broken pipe|Input/output error)$'
EXPECT_GOOD_DOWN = [r'^<4>rpfs-fuse: iod %d \(\S+\): read failed: ' % GOOD + _KILLED,
                    r'^<4>rpfs-mgr: iod %d \(\S+\) went down: ' % GOOD + _KILLED]

# Reads FILE over and over around the page cache; per pass one line
# "T STATUS MAXCALL": T = CLOCK_MONOTONIC at the end of the pass, STATUS ok,
# bad (wrong sha256) or errN (errno of the failing call), MAXCALL the
# longest single call (open or pread) of the pass in seconds.
PROBER = r'''
import hashlib, mmap, os, sys, time
path, want = sys.argv[1], sys.argv[2]
buf = mmap.mmap(-1, 1 << 20)
while True:
    maxc = 0.0
    c0 = time.monotonic()
    try:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        except OSError:
            c0 = time.monotonic()
            fd = os.open(path, os.O_RDONLY)
        maxc = time.monotonic() - c0
        try:
            h = hashlib.sha256()
            off = 0
            while True:
                c0 = time.monotonic()
                r = os.preadv(fd, [buf], off)
                maxc = max(maxc, time.monotonic() - c0)
                if r <= 0:
                    break
                h.update(buf[:r])
                off += r
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        status = 'ok' if h.hexdigest() == want else 'bad'
    except OSError as e:
        maxc = max(maxc, time.monotonic() - c0)
        status = 'err%d' % e.errno
    print('%f %s %f' % (time.monotonic(), status, maxc), flush=True)
    time.sleep(0.1)
'''


class Prober:
    """PROBER on one client's file, its lines collected by a thread."""

    def __init__(self, path, want):
        self.path = path
        self.p = subprocess.Popen([sys.executable, '-c', PROBER, path, want],
                                  stdout=subprocess.PIPE, text=True)
        util.register_pid(self.p.pid)
        self.passes = []          # (t, status, maxcall)
        self.t = threading.Thread(target=self._pump, daemon=True)
        self.t.start()

    def _pump(self):
        for line in self.p.stdout:
            t, status, maxc = line.split()
            self.passes.append((float(t), status, float(maxc)))

    def first(self, pred, since):
        """Time of the first pass after since whose status satisfies pred."""
        for t, s, _ in list(self.passes):
            if t >= since and pred(s):
                return t
        return None

    def maxcall(self):
        """The longest call of any pass so far, in seconds."""
        return max((m for _, _, m in list(self.passes)), default=0.0)

    def wait(self, pred, since, timeout, what):
        """Wait for first(pred, since); wrong data read meanwhile fails at once."""
        def cond():
            if self.first(lambda s: s == 'bad', 0) is not None:
                raise AssertionError('wrong data read (%s)' % self.path)
            return self.first(pred, since)
        return util.wait_until(cond, timeout, 0.05, what)

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=60)
        self.t.join(10)


# Writes FILE in 64 KiB blocks in order, wrapping at NBLOCKS, and fsyncs
# every 16 writes, until SIGTERM (then a last fsync and close). Block BLK's
# GENth write holds shake_128("SEED:BLK:GEN"), so every write's data is
# unique. One line per event, T = CLOCK_MONOTONIC, C = the longest call
# since the previous line in seconds:
#   W T BLK GEN   before the write of generation GEN of BLK
#   A T C         fsync returned 0: every W since the last A or E is acknowledged
#   E T C ERRNO   a call failed (ERRNO 0: a short write): the W since the
#                 last A or E are not; the file is opened again
WRITER = r'''
import hashlib, mmap, os, signal, sys, time
path, direct, seed, nblocks = sys.argv[1], sys.argv[2] == '1', sys.argv[3], int(sys.argv[4])
BS, BATCH = 65536, 16
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
buf = mmap.mmap(-1, BS)
maxc = [0.0]

def say(*words):
    print(' '.join(str(w) for w in words), flush=True)
    maxc[0] = 0.0

def call(fn, *args):
    c0 = time.monotonic()
    try:
        return fn(*args)
    finally:
        maxc[0] = max(maxc[0], time.monotonic() - c0)

fd, n, blk, gen = None, 0, 0, 0
while True:
    try:
        if fd is None:
            if stop:
                break
            fd = call(os.open, path, os.O_WRONLY | (os.O_DIRECT if direct else 0))
        if n and (stop or n == BATCH):
            call(os.fsync, fd)
            say('A', '%f' % time.monotonic(), '%f' % maxc[0])
            n = 0
        if stop:
            f, fd = fd, None
            call(os.close, f)
            break
        gen += 1
        buf[:] = hashlib.shake_128(b'%s:%d:%d' % (seed.encode(), blk, gen)).digest(BS)
        say('W', '%f' % time.monotonic(), blk, gen)
        n += 1
        if call(os.pwrite, fd, buf, blk * BS) != BS:
            raise OSError(0, 'short write')
        blk = (blk + 1) % nblocks
    except OSError as e:
        say('E', '%f' % time.monotonic(), '%f' % maxc[0], e.errno or 0)
        n = 0
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
            fd = None
        time.sleep(0.1)
'''


def block_data(seed, blk, gen):
    """What WRITER writes to block blk in its write number gen (gen 0: the
    hole the file starts as)."""
    if gen == 0:
        return bytes(BLOCK)
    return hashlib.shake_128(b'%s:%d:%d' % (seed.encode(), blk, gen)).digest(BLOCK)


class Writer:
    """WRITER on one client's file, its lines collected by a thread (and
    copied to logpath, for the post-mortem of a failed check); knows which
    writes were acknowledged and what each block may hold."""

    def __init__(self, path, direct, nblocks, logpath):
        self.path = path
        self.logpath = logpath
        self.nblocks = nblocks
        self.seed = os.urandom(8).hex()
        self.p = subprocess.Popen([sys.executable, '-c', WRITER, path, '1' if direct else '0',
                                   self.seed, str(nblocks)],
                                  stdout=subprocess.PIPE, text=True)
        util.register_pid(self.p.pid)
        self.t_start = time.monotonic()
        self.events = []          # ('W', t, blk, gen) / ('A', t, maxc) / ('E', t, maxc, errno)
        self.t = threading.Thread(target=self._pump, daemon=True)
        self.t.start()

    def _pump(self):
        with open(self.logpath, 'w') as log:
            log.write('# %s seed %s, CLOCK_MONOTONIC times\n' % (self.path, self.seed))
            for line in self.p.stdout:
                log.write(line)
                self._parse(line.split())

    def _parse(self, w):
        """One WRITER line, split into words, into self.events."""
        if w[0] == 'W':
            self.events.append(('W', float(w[1]), int(w[2]), int(w[3])))
        elif w[0] == 'A':
            self.events.append(('A', float(w[1]), float(w[2])))
        else:
            self.events.append(('E', float(w[1]), float(w[2]), int(w[3])))

    def acked(self):
        """[(t_write, t_ack, blk, gen)] of every acknowledged write."""
        out, pending = [], []
        for e in list(self.events):
            if e[0] == 'W':
                pending.append(e)
            elif e[0] == 'A':
                out += [(w[1], e[1], w[2], w[3]) for w in pending]
                pending = []
            else:
                pending = []
        return out

    def acked_since(self, since):
        """True once a write issued at or after since was acknowledged."""
        return any(tw >= since for tw, _ta, _b, _g in self.acked())

    def errors(self, since=0.0):
        """The sorted errnos the writer met at or after since."""
        return sorted({e[3] for e in list(self.events) if e[0] == 'E' and e[1] >= since})

    def maxcall(self):
        return max((e[2] for e in list(self.events) if e[0] != 'W'), default=0.0)

    def wait(self, cond, timeout, what):
        """Wait for cond(self); a writer that exited fails it."""
        def check():
            if self.p.poll() is not None:
                raise AssertionError('writer on %s exited with %s'
                                     % (self.path, self.p.returncode))
            return cond(self)
        return util.wait_until(check, timeout, 0.05, what)

    def stop(self, timeout):
        """SIGTERM: the writer fsyncs what it wrote, closes and exits."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(timeout=60)
            raise AssertionError('writer on %s did not stop within %d s' % (self.path, timeout))
        finally:
            self.t.join(10)
        assert self.p.returncode == 0, 'writer on %s: exit %d' % (self.path, self.p.returncode)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(timeout=60)
        self.t.join(10)

    def may_hold(self):
        """Per block, the generations it may hold: the last acknowledged
        one (0, the hole, if none) and every later write not acknowledged
        (it may have landed, wholly or in part)."""
        may = [{0} for _ in range(self.nblocks)]
        pending = []
        for e in list(self.events):
            if e[0] == 'W':
                pending.append(e)
                may[e[2]].add(e[3])
            elif e[0] == 'A':
                for w in pending:
                    may[w[2]] = {w[3]}
                pending = []
            else:
                pending = []
        return may


def read_whole(path, size):
    """size bytes of path read with O_DIRECT (util.read_direct); a failing
    call fails the test at once (no retry), and so does a short file."""
    out = util.read_direct(path, size)
    assert len(out) == size, '%s: %d bytes read, want %d' % (path, len(out), size)
    return out


def check_acked(w, path, who):
    """Read w's file through path (another client's mount) and check every
    block against what w may have left there (Writer.may_hold): a block
    with an acknowledged last write must hold exactly it; one whose later
    writes failed may hold, per 4 KiB page, the acknowledged data or any
    of the failed writes', nothing else. Returns the number of blocks whose
    content is an acknowledged write."""
    data = read_whole(path, w.nblocks * BLOCK)
    nacked = 0
    for blk, gens in enumerate(w.may_hold()):
        got = data[blk * BLOCK:(blk + 1) * BLOCK]
        cands = {g: block_data(w.seed, blk, g) for g in gens}
        if len(gens) == 1:
            g = next(iter(gens))
            nacked += g != 0
            if got != cands[g]:
                raise AssertionError('%s: block %d (at %d) read through %s is not its '
                                     'acknowledged write %d: %s (writer log: %s)' %
                                     (w.path, blk, blk * BLOCK, who, g,
                                      describe(w, blk, got), w.logpath))
            continue
        for pg in range(0, BLOCK, 4096):
            if not any(got[pg:pg + 4096] == c[pg:pg + 4096] for c in cands.values()):
                raise AssertionError('%s: block %d page %d read through %s holds none of '
                                     'writes %s: %s (writer log: %s)' %
                                     (w.path, blk, pg // 4096, who, sorted(gens),
                                      describe(w, blk, got), w.logpath))
    return nacked


def describe(w, blk, got):
    """What got (a block read back) is: which write of blk it equals, if
    any, so a stale replica shows as an older write."""
    last = max((e[3] for e in w.events if e[0] == 'W' and e[2] == blk), default=0)
    for g in range(last, -1, -1):
        if got == block_data(w.seed, blk, g):
            return 'it holds write %d%s' % (g, ' (the hole)' if g == 0 else '')
    return 'it matches no write of it'


class Fio:
    """One fio job on one client's file, run in the background.
    Its JSON result goes to a file; stderr is kept for verify reports."""

    def __init__(self, path, size_mib, direct, mode, outdir):
        self.out = os.path.join(outdir, '%s-%s.%s.json' % (
            os.path.basename(os.path.dirname(path)), os.path.basename(path), mode))
        argv = ['fio', '--name=%s' % mode, '--filename=%s' % path, '--bs=64k',
                '--size=%dM' % size_mib, '--ioengine=psync', '--direct=%d' % int(direct),
                '--verify=crc32c', '--verify_fatal=1', '--verify_state_save=0',
                '--output-format=json',
                '--output=%s' % self.out]
        if mode == 'verify':
            argv += ['--rw=write', '--verify_only']
        elif mode == 'write':
            argv += ['--rw=write', '--do_verify=1', '--end_fsync=1']
        else:
            raise ValueError(mode)
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True, cwd=outdir)
        util.register_pid(self.p.pid)
        self.t_end = None
        self.result = None

    def wait(self, timeout):
        """Wait for fio; returns {'error', 'stderr', 'secs', 'lat_max'}:
        error is fio's errno for the job (-1: no JSON), lat_max the longest
        completed I/O or sync in seconds."""
        try:
            _, err = self.p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            _, err = self.p.communicate()
            raise AssertionError('fio on %s did not finish within %d s' % (self.out, timeout))
        self.t_end = time.monotonic()
        error, lat = -1, 0.0
        try:
            with open(self.out) as f:
                text = f.read()
            job = json.loads(text[text.index('{'):])['jobs'][0]
            error = job['error']
            for k in ('read', 'write', 'sync'):
                if k in job:
                    lat = max(lat, job[k].get('lat_ns', job[k].get('clat_ns', {})).get('max', 0) / 1e9)
        except (OSError, ValueError, KeyError, IndexError):
            pass
        self.result = {'error': error, 'stderr': err, 'secs': self.t_end - self.t0,
                       'lat_max': lat, 'rc': self.p.returncode}
        return self.result


def sha256(path):
    return util.sha256_file(path)


def wrong_data(res):
    """True if fio reported a verification failure (wrong data read)."""
    return res['error'] == errno.EILSEQ or 'verify failed' in res['stderr'] or \
        'bad magic' in res['stderr'] or 'bad header' in res['stderr']


# ------------------------------------------------------------------ faults

class Fault:
    """inject() the fault, undo() it; needs: clients that must see an error.
    wait_s: what a call may wait beyond HANG_S / HANG_M_S on what the fault
    does to the mgr (0: nothing)."""
    errno_needing = errno.EIO
    wait_s = 0

    def __init__(self, c):
        self.c = c


class IodKill9(Fault):
    name = 'iod kill -9'

    def inject(self):
        self.c.kill9(self.c.iods[VICTIM])

    def undo(self):
        self.c.restart(self.c.iods[VICTIM])


class IodStop(Fault):
    name = 'iod SIGSTOP'

    def inject(self):
        self.c.pause(VICTIM)

    def undo(self):
        self.c.resume(VICTIM)


class IodLinkDown(Fault):
    name = 'iod link down'

    def inject(self):
        self.c.link(self.c.iod_nodes[VICTIM], False)

    def undo(self):
        self.c.link(self.c.iod_nodes[VICTIM], True)


class MgrKill9(Fault):
    name = 'mgr kill -9'
    errno_needing = None      # data path unaffected; metadata calls may fail
    wait_s = MGR_TAKEOVER_S

    def inject(self):
        self.c.kill9(self.c.mgr)

    def undo(self):
        self.c.restart(self.c.mgr)


class DiskFull(Fault):
    name = 'iod disk full'
    errno_needing = errno.ENOSPC

    def inject(self):
        self.filled = self.c.fill_disk(VICTIM)

    def undo(self):
        self.c.free_disk(VICTIM)


CASES = {'iod_kill9': IodKill9, 'iod_sigstop': IodStop, 'iod_link_down': IodLinkDown,
         'mgr_kill9': MgrKill9, 'iod_disk_full': DiskFull}

MATRIX = []


@pytest.fixture(scope='module')
def matrix(request, tmp_path_factory):
    """Collects one row per case and cycle; prints the matrix at the end and
    writes it to netfault-matrix.txt in pytest's base temporary directory."""
    yield MATRIX
    lines = ['fault matrix (m2: mirror=2; %d clients, %d MiB/file, timeout=%ds, netem %r, %s)'
             % (len(LAYOUTS), SIZE_MIB, TIMEOUT_S, netns.netem_spec() or 'off',
                'soak' if SOAK else 'bounded'),
             '%-17s %-5s %-4s %-34s %-8s %-8s %-8s %-8s %-8s %s' %
             ('case', 'cycle', 'cli', 'data checked (run: acked blocks)', 'errors', 'detect',
              'max call', 'wr call', 'recover', 'writes')]
    for r in MATRIX:
        lines.append('%-17s %-5d %-4s %-34s %-8s %-8s %-8s %-8s %-8s %s' % tuple(r))
    text = '\n'.join(lines) + '\n'
    path = os.path.join(str(tmp_path_factory.getbasetemp()), 'netfault-matrix.txt')
    with open(path, 'w') as f:
        f.write(text)
    tr = request.config.pluginmanager.get_plugin('terminalreporter')
    cm = request.config.pluginmanager.get_plugin('capturemanager')
    if tr is not None and cm is not None:
        with cm.global_and_fixture_disabled():
            tr.write_line('')
            for line in text.splitlines() + ['(written to %s)' % path]:
                tr.write_line(line)


@pytest.fixture
def ncluster(request, tmp_path_factory):
    """A fresh NetCluster (iod VICTIM on a tmpfs for the disk case: 32 MiB,
    room for one cycle's files when soaking)
    with one mount per client node; everything torn down afterwards. The
    daemons log at info at least: the checks read the mgr's notices."""
    full = (VICTIM,) if request.node.callspec.params.get('case') == 'iod_disk_full' else ()
    state = str(tmp_path_factory.mktemp('nf'))
    level = 'debug' if os.environ.get('RPFS_LOG_LEVEL') == 'debug' else 'info'
    c = netns.start_net_cluster(state, full_iods=full, tmpfs_mib=max(32, 6 * SIZE_MIB),
                                log_level=level)
    try:
        for k in range(len(c.cli_nodes)):
            c.mount_client(k, os.path.join(state, 'mnt%d' % k), 'timeout=%d' % TIMEOUT_S)
        yield c
    finally:
        netns.destroy(c)


def client_dir(c, k):
    return os.path.join(c.mounts[k].path, 'c%d' % k)


class Lane:
    """One client's files of one kind, in its directory cK: unmirrored
    (named as given, LAYOUTS[k]) or mirrored (named with a trailing 'm',
    LAYOUTS_M[k]). Every case runs the 8 lanes side by side under the same
    fault, on one cluster."""

    def __init__(self, k, mirrored):
        self.k, self.mirrored = k, mirrored
        self.layout = (LAYOUTS_M if mirrored else LAYOUTS)[k]
        self.direct = DIRECT[k]
        self.needs_victim = k in NEEDS_VICTIM
        self.write_hang_s = HANG_M_S if mirrored else HANG_S  # the writer's calls
        self.tag = 'client %d%s' % (k, ' (mirrored)' if mirrored else '')

    def name(self, base):
        """The lane's file named base."""
        return base + ('m' if self.mirrored else '')


LANES = [Lane(k, m) for m in (False, True) for k in range(len(LAYOUTS))]


def lane_path(c, lane, base):
    """The path of lane's file base through its own client."""
    return os.path.join(client_dir(c, lane.k), lane.name(base))


def pinned_file(c, lane, base):
    """A file of lane with its pinned layout, SIZE_MIB of holes (fio
    would unlink and recreate a shorter file, losing the layout)."""
    p = lane_path(c, lane, base)
    with open(p, 'wb'):
        pass
    os.setxattr(p, 'user.rpfs.layout', lane.layout.encode())
    os.truncate(p, SIZE_MIB << 20)
    return p


def second(c, k):
    """The client that reads client k's files back: another mount, whose
    page cache never held them."""
    return (k + 2) % len(c.mounts)


def via_second(c, lane, base):
    """The path of lane's file base through its second client."""
    return os.path.join(c.mounts[second(c, lane.k)].path, 'c%d' % lane.k, lane.name(base))


def fio_all(c, base, mode, timeout=None):
    """fio MODE on file base of every lane at once; the results by lane.
    verify reads through the second client, with O_DIRECT."""
    jobs = []
    for lane in LANES:
        if mode == 'verify':
            jobs.append(Fio(via_second(c, lane, base), SIZE_MIB, True, mode, c.logdir))
            continue
        p = lane_path(c, lane, base)
        if not os.path.exists(p):
            pinned_file(c, lane, base)
        jobs.append(Fio(p, SIZE_MIB, lane.direct, mode, c.logdir))
    return [j.wait(timeout or 600) for j in jobs]


def sha256_direct(path):
    """sha256 of path read with O_DIRECT (read_whole, its size from stat)."""
    return hashlib.sha256(read_whole(path, os.stat(path).st_size)).hexdigest()


def stale_counts(c):
    """iod -> stale objects, from `rpfs status` asked from a client host."""
    out = c.rpfs('status').stdout
    got = {int(i): int(n) for i, n in
           re.findall(r'^iod +(\d+) .*, stale objects: (\d+),', out, re.M)}
    assert len(got) == c.niods, 'rpfs status: %s' % out
    return got


def wait_resynced(c, log_off):
    """Wait until the mgr holds no stale record and the victim's fence set,
    if the mgr delivered one since log_off (mgr.log), is empty again (the
    victim serves mirrored reads). Returns the mgr's log since log_off."""
    def done():
        try:
            counts = stale_counts(c)
        except AssertionError as e:
            # one status call that did not reach the mgr (seen once in the
            # VM under load: a connect timeout, then "No route to host")
            # only says "not known yet"; a mgr that stays out of reach ends
            # the wait at its bound like a resync that never ends
            if 'cannot get the iod table from the mgr' not in str(e):
                raise
            return False
        if any(counts.values()):
            return False
        sets = re.findall(r'^<5>rpfs-mgr: iod %d: fence set delivered: (\d+) inodes$' % VICTIM,
                          c.mgr.log.read_from(log_off), re.M)
        return not sets or sets[-1] == '0'
    util.wait_until(done, 120, 0.2, 'resync of iod %d and its fence set emptied' % VICTIM)
    return c.mgr.log.read_from(log_off)


def check_layouts(c, base):
    """Each lane's file has objects exactly on the iods of its layout, so
    the 'needs the victim' split the assertions rely on is real."""
    for lane in LANES:
        ino = os.stat(lane_path(c, lane, base)).st_ino
        held = [i for i, o in enumerate(c.objects(ino)) if o is not None]
        assert (VICTIM in held) == lane.needs_victim, \
            '%s: objects on iods %s' % (lane.tag, held)
        if lane.mirrored:   # both iods of each group
            assert all((i ^ 1) in held for i in held), \
                '%s: mirrored objects on iods %s' % (lane.tag, held)


class Cycle:
    """One fault cycle over the 8 lanes (4 clients, each with an unmirrored
    and a mirrored file): what was written, watched and measured (t0:
    fault injected, t1: undone). Lists are indexed like LANES."""

    def __init__(self, c, fault, n):
        self.c, self.fault, self.n = c, fault, n
        self.pre = [lane_path(c, lane, 'pre%d' % n) for lane in LANES]
        self.want = []
        self.probers = []
        self.writers = []
        self.recover = []
        self.t0 = self.t1 = None
        self.mgr_log_off = 0

    def need(self, lane):
        """The error the fault gives lane if it needs the victim: the
        fault's (None: the mgr's, anyone may see EIO); mirrored, where an
        iod lost costs no error, 0 (only a full disk reaches its writers)."""
        e = self.fault.errno_needing
        return 0 if lane.mirrored and e == errno.EIO else e

    def write_pre(self):
        """Every lane writes, verifies and fsyncs its `pre` file."""
        for lane, r in zip(LANES, fio_all(self.c, 'pre%d' % self.n, 'write')):
            assert r['error'] == 0 and r['rc'] == 0, '%s: pre write: %s' % (lane.tag, r)
        check_layouts(self.c, 'pre%d' % self.n)
        self.want = [sha256(p) for p in self.pre]

    def start_load(self):
        """Probers on every `pre`, writers on every `run` (after the fault
        for the full disk: only new writes need space)."""
        t = time.monotonic()
        self.probers = [Prober(p, w) for p, w in zip(self.pre, self.want)]
        for lane, pr in zip(LANES, self.probers):
            pr.wait(lambda s: s == 'ok', t, 60, '%s prober' % lane.tag)
        if not isinstance(self.fault, DiskFull):
            self.start_writers()
            # each has written and fsynced before the fault
            for lane, w in zip(LANES, self.writers):
                w.wait(lambda w: w.acked(), 60, '%s: a write acknowledged' % lane.tag)

    def start_writers(self):
        for lane in LANES:
            log = os.path.join(self.c.logdir, 'writer-c%d-%s.log'
                               % (lane.k, lane.name('run%d' % self.n)))
            self.writers.append(Writer(pinned_file(self.c, lane, 'run%d' % self.n),
                                       lane.direct, (SIZE_MIB << 20) // BLOCK, log))

    def hold(self):
        """Hold the fault until every lane needing the victim met it: its
        prober got EIO; or its writer ENOSPC (full disk); or, mirrored with
        an iod lost, its writer has an acknowledged write issued since the
        fault began (the victim's replica missed it); and at least
        HOLD_S."""
        for lane, pr, w in zip(LANES, self.probers, self.writers):
            if not lane.needs_victim:
                continue
            what = '%s during %s' % (lane.tag, self.fault.name)
            need = self.need(lane)
            if need == errno.EIO:
                pr.wait(lambda s: s == 'err%d' % errno.EIO, self.t0, lane.write_hang_s + 30,
                        what + ': a read failing with EIO')
            elif need == errno.ENOSPC:
                w.wait(lambda w: errno.ENOSPC in w.errors(self.t0),
                       lane.write_hang_s + 30, what + ': a write failing with ENOSPC')
            elif need == 0:
                w.wait(lambda w: w.acked_since(self.t0), lane.write_hang_s + 30,
                       what + ': a degraded write acknowledged')
        time.sleep(max(0.0, self.t0 + HOLD_S - time.monotonic()))

    def fault_and_recover(self):
        """Inject the fault, hold it, undo it; wait for every lane to
        read its `pre` again and to have a write acknowledged that it issued
        after the undo; then stop the writers (a last fsync each)."""
        f = self.fault
        self.mgr_log_off = self.c.mgr.log.size()
        self.t0 = time.monotonic()
        f.inject()
        if isinstance(f, DiskFull):
            self.start_writers()
        self.hold()
        self.t1 = time.monotonic()
        f.undo()
        for lane, pr in zip(LANES, self.probers):
            t = pr.wait(lambda s: s == 'ok', self.t1, 120,
                        '%s to read its file again after %s' % (lane.tag, f.name))
            self.recover.append(t - self.t1)
        for lane, w in zip(LANES, self.writers):
            w.wait(lambda w: w.acked_since(self.t1) and
                   time.monotonic() >= w.t_start + RUN_S, RUN_S + 120,
                   '%s to have a write acknowledged after %s' % (lane.tag, f.name))
        for lane, w in zip(LANES, self.writers):
            w.stop(lane.write_hang_s + 30)
        # one more prober pass each
        t = time.monotonic()
        for lane, pr in zip(LANES, self.probers):
            pr.wait(lambda s: True, t, 60, '%s: a prober pass' % lane.tag)

    def stop_load(self):
        for p in self.probers:
            p.close()
        for w in self.writers:
            w.kill()

    def seen(self, i):
        """The sorted non-ok prober statuses of lane i."""
        return sorted({s for _, s, _ in self.probers[i].passes if s != 'ok'})

    def writes(self, i):
        """The writer column: writes acknowledged (those issued during the
        fault), and the errors the writer met."""
        w = self.writers[i]
        acked = w.acked()
        during = sum(1 for tw, _ta, _b, _g in acked if self.t0 <= tw <= self.t1)
        errs = ','.join(util.errno_name(e) for e in w.errors())
        return '%d acked (%d in fault)%s' % (len(acked), during, ' ' + errs if errs else '')

    def rows(self):
        """The matrix rows of this cycle (data column filled in later)."""
        rows = []
        for i, lane in enumerate(LANES):
            pr = self.probers[i]
            t_err = pr.first(lambda s: s != 'ok', self.t0)
            rows.append([self.fault.name + (' m2' if lane.mirrored else ''), self.n,
                         'c%d%s' % (lane.k, '*' if lane.needs_victim else ''),
                         'not verified',
                         ','.join(s if s == 'bad' else util.errno_name(int(s[3:]))
                                  for s in self.seen(i)) or '-',
                         '-' if t_err is None else '%.2fs' % (t_err - self.t0),
                         '%.2fs' % pr.maxcall(),
                         '%.2fs' % self.writers[i].maxcall(), '%.2fs' % self.recover[i],
                         self.writes(i)])
        return rows

    def check_lane(self, i):
        """The assertions on lane i's prober and writer (module doc)."""
        lane = LANES[i]
        seen, w, need = self.seen(i), self.writers[i], self.need(lane)
        errs = w.errors()
        maxcall = self.probers[i].maxcall()
        who = lane.tag
        assert 'bad' not in seen, '%s read wrong data of %s' % (who, self.pre[i])
        wait = self.fault.wait_s + TIMEOUT_S / 2
        read_bound, write_bound = max(HANG_S, wait), max(lane.write_hang_s, wait)
        assert maxcall < read_bound, '%s: a read call took %.1f s (bound %.1f s)' \
            % (who, maxcall, read_bound)
        assert w.maxcall() < write_bound, '%s: a write call took %.1f s (bound %.1f s)' \
            % (who, w.maxcall(), write_bound)
        if need is None:                     # the mgr: anyone may see EIO
            assert set(seen) <= {'err%d' % errno.EIO}, '%s: %s' % (who, seen)
            assert set(errs) <= {errno.EIO}, '%s: writer got %s' % (who, errs)
        elif not lane.needs_victim or need == 0:
            assert seen == [], '%s does not need iod %d, got %s' % (who, VICTIM, seen)
            assert errs == [], '%s does not need iod %d: writer got %s' % (who, VICTIM, errs)
        elif need == errno.EIO:
            assert seen == ['err%d' % errno.EIO], '%s: %s' % (who, seen)
            assert set(errs) <= {errno.EIO}, '%s: writer got %s' % (who, errs)
        else:
            assert seen == [], '%s: reads on a full disk: %s' % (who, seen)
            assert errs == [errno.ENOSPC], \
                '%s: writer on a full iod got %s, want ENOSPC' % (who, errs)

    def check_second(self, how, mirrored_only=False):
        """Through each lane's second client: `pre` has its sha256 and
        `run` holds every acknowledged write. Returns the blocks checked
        as acknowledged writes, per lane (None: not checked)."""
        nacked = []
        for i, lane in enumerate(LANES):
            if mirrored_only and not lane.mirrored:
                nacked.append(None)
                continue
            w = self.writers[i]
            who = 'client %d%s' % (second(self.c, lane.k), how)
            assert sha256_direct(via_second(self.c, lane, 'pre%d' % self.n)) == self.want[i], \
                '%s: %s read through %s changed' % (lane.tag, lane.name('pre%d' % self.n), who)
            nacked.append(check_acked(w, via_second(self.c, lane, 'run%d' % self.n), who))
        return nacked

    def check_stale_replicas(self):
        """The mirrored lanes: with the resync done and the victim
        unfenced, GOOD is killed, so the victim's replicas serve every read
        of group 0; the second clients read every mirrored `pre` and `run`
        again. When the fault lost the victim, its replicas of the `run`
        files of the lanes needing it must have missed writes (the mgr
        resynced them)."""
        log = wait_resynced(self.c, self.mgr_log_off)
        if self.fault.errno_needing == errno.EIO:
            for lane in LANES:
                if not (lane.mirrored and lane.needs_victim):
                    continue
                ino = os.stat(lane_path(self.c, lane, 'run%d' % self.n)).st_ino
                assert re.search(r'^<5>rpfs-mgr: iod %d: inode %d resynced from iod %d: '
                                 % (VICTIM, ino, GOOD), log, re.M), \
                    '%s: the replica of %s on iod %d missed no write' \
                    % (lane.tag, lane.name('run%d' % self.n), VICTIM)
        self.c.kill9(self.c.iods[GOOD])
        try:
            return self.check_second(', iod %d down' % GOOD, mirrored_only=True)
        finally:
            self.c.restart(self.c.iods[GOOD])

    def verify_after(self):
        """After recovery, through the second clients: every `pre` verifies
        (fio --verify_only, sha256 unchanged), every `run` holds its
        acknowledged writes (mirrored: again from the victim's replicas
        alone); every lane writes and verifies a new file. Returns the
        data column of each lane's row."""
        for lane, r in zip(LANES, fio_all(self.c, 'pre%d' % self.n, 'verify')):
            assert r['error'] == 0 and r['rc'] == 0, '%s: pre verify after %s: %s' \
                % (lane.tag, self.fault.name, r)
        nacked = self.check_second('')
        again = self.check_stale_replicas()
        for lane, r in zip(LANES, fio_all(self.c, 'post%d' % self.n, 'write')):
            assert r['error'] == 0 and r['rc'] == 0, '%s: write after %s: %s' \
                % (lane.tag, self.fault.name, r)
        return ['pre,post,run:%d ok%s' % (nacked[i], '' if again[i] is None else
                                          '; again, iod%d down' % GOOD)
                for i in range(len(LANES))]


def run_cycle(c, fault, n, matrix):
    """Cycle n of a case; its rows go to the matrix before any assertion,
    so a failing case shows in it too."""
    cy = Cycle(c, fault, n)
    cy.write_pre()
    try:
        cy.start_load()
        cy.fault_and_recover()
    finally:
        cy.stop_load()
    rows = cy.rows()
    matrix.extend(rows)
    for i in range(len(LANES)):
        cy.check_lane(i)
    for r, data in zip(rows, cy.verify_after()):
        r[3] = data
    for lane in LANES:      # room for the next cycle (soak)
        for name in ('pre', 'run', 'post'):
            os.unlink(lane_path(c, lane, '%s%d' % (name, n)))


@pytest.mark.parametrize('case', list(CASES))
def test_fault(case, ncluster, matrix, expect_log):
    """Two rows of the fault matrix, unmirrored and mirrored, on one
    cluster (see the module docstring)."""
    for r in EXPECT[case] + EXPECT_M + EXPECT_GOOD_DOWN:
        expect_log(r)
    c = ncluster
    for k in range(len(c.mounts)):
        os.mkdir(client_dir(c, k))
    fault = CASES[case](c)
    for n in range(CYCLES):
        run_cycle(c, fault, n, matrix)
    assert not c.check_alive(), c.check_alive()
