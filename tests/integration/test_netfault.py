"""The fault matrix (issue 12, item 4): separate hosts (tests/integration/
netns.py: the mgr, 4 iods and 4 clients each in a network namespace of its
own, on a bridge, netem on every link when $RPFS_NETEM is set), 4 clients
running fio with verification on their own files while one fault is
injected: kill -9 of an iod or of the mgr, SIGSTOP of an iod, the iod's link
taken down, a full disk on one iod. Each case runs with unmirrored files
and with mirrored ones (mirror=2: groups {0,1} and {2,3}, LAYOUTS_M).

Each client k owns a directory cK with a file layout pinned by
user.rpfs.layout, so that clients 0 and 1 need the victim iod (VICTIM) and
clients 2 and 3 do not:

    cli0  count=4 first=0   iods 0,1,2,3  buffered writes (write-behind)
    cli1  count=2 first=1   iods 1,2      O_DIRECT
    cli2  count=1 first=0   iod 0         buffered
    cli3  count=2 first=2   iods 2,3      O_DIRECT

Mirrored, the same split over the groups (VICTIM is in group 0):

    cli0  count=2 first=0   groups 0,1 (all iods)
    cli1  count=1 first=0   group 0 (iods 0,1)
    cli2  count=1 first=1   group 1 (iods 2,3)
    cli3  count=1 first=1   group 1, unit 128 KiB

Per case (per cycle; 1 cycle, or several with RPFS_SOAK=1):
 1. every client writes `pre` with fio (crc32c headers, verified, fsynced);
 2. every client runs fio on `run` (time based, verify_backlog, fsync every
    16 writes) and a prober reading `pre` around the page cache (O_DIRECT),
    which checks its sha256 on every pass and times every call;
 3. the fault; it is held until each client that needs the victim has seen
    its error (EIO; ENOSPC from the writers for the full disk), and at
    least HOLD_S, then undone;
 4. checked: nothing read wrong data (probers, fio verify); no call took
    longer than HANG_S (the mount's timeout is TIMEOUT_S: a hang would be
    far above); clients needing the victim got EIO during the fault (kill,
    stop, link; their fio got EIO too, or wrote nothing to the victim
    meanwhile) and read `pre` correctly again after it; clients not needing
    it saw no error at all; a full disk gives ENOSPC to the writers needing
    it and nothing to the others; after a mgr kill -9 and restart everyone
    recovers without a remount; every `pre` verifies with fio --verify_only
    after recovery; every client writes and verifies a fresh file
    afterwards (`post`). Mirrored, an iod that is killed, stopped or cut
    off costs nobody an error (reads and writes go on against its buddy,
    within the timeout); a full disk still gives ENOSPC to the writers
    whose group holds it. A degraded write's STALE_MARK waits until the
    victim is fenced, at worst until its lease (8 s) has run out: the
    client gives that call its timeout plus 12 s, and the longest-call
    bound (HANG_S) leaves room for it.
The matrix (data checked, errors seen, time to the first error, longest
call, longest fio I/O, time to recover, fio's result) is printed at the end
of the session and written to netfault-matrix.txt in pytest's base
temporary directory.
"""
import errno
import json
import os
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
# HACKING.md "Fault harness"): the VM stage sets 10.
TIMEOUT_S = _env_int('RPFS_NETFAULT_TIMEOUT', 3, 1)
HANG_S = 4 * TIMEOUT_S + 10   # a call longer than this is a hang (generous: TCG VM)
HOLD_S = TIMEOUT_S + 2        # every fault lasts at least this long
VICTIM = 1
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
SIZE_MIB = 64 if SOAK else 4       # per file
RUN_S = 60 if SOAK else HOLD_S + 4  # fio `run` runtime (covers the fault)
CYCLES = 5 if SOAK else 1          # faults per case

# Lines at <3>/<4> each fault makes the daemons print (anything else at
# <0>..<4> fails the test). A client warns about a failed request to the
# lost server, and about a write-behind write that failed (reported at the
# next call); the mgr about an iod its poll finds down; an iod resumed after
# SIGSTOP about clients that gave up on it meanwhile.
_IOD_LOST = [r'^<4>rpfs-fuse: iod %d \(\S+\): \w+ failed: ' % VICTIM,
             r'^<4>rpfs-fuse: inode \d+: a write of \d+ bytes at \d+ acknowledged earlier '
             r'failed: (Input/output error|Connection|Broken pipe)',
             r'^<4>rpfs-mgr: iod %d \(\S+\) went down: ' % VICTIM]
EXPECT = {
    'iod_kill9': _IOD_LOST,
    'iod_sigstop': _IOD_LOST + [r'^<4>rpfs-iod: '],
    'iod_link_down': _IOD_LOST,
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


class Fio:
    """One fio job on one client's file, run in the background.
    Its JSON result goes to a file; stderr is kept for verify reports."""

    def __init__(self, path, size_mib, direct, mode, outdir, runtime=None):
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
        elif mode == 'run':
            argv += ['--rw=write', '--time_based', '--runtime=%d' % runtime,
                     '--verify_backlog=16', '--fsync=16']
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
    """inject() the fault, undo() it; needs: clients that must see an error."""
    errno_needing = errno.EIO

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
             '%-17s %-5s %-4s %-18s %-8s %-8s %-8s %-8s %-8s %s' %
             ('case', 'cycle', 'cli', 'data checked', 'errors', 'detect', 'max call',
              'fio lat', 'recover', 'fio run')]
    for r in MATRIX:
        lines.append('%-17s %-5d %-4s %-18s %-8s %-8s %-8s %-8s %-8s %s' % tuple(r))
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
    with one mount per client node; everything torn down afterwards."""
    full = (VICTIM,) if request.node.callspec.params.get('case') == 'iod_disk_full' else ()
    state = str(tmp_path_factory.mktemp('nf'))
    c = netns.start_net_cluster(state, full_iods=full, tmpfs_mib=max(32, 3 * SIZE_MIB))
    try:
        for k in range(len(c.cli_nodes)):
            c.mount_client(k, os.path.join(state, 'mnt%d' % k), 'timeout=%d' % TIMEOUT_S)
        yield c
    finally:
        netns.destroy(c)


def client_dir(c, k):
    return os.path.join(c.mounts[k].path, 'c%d' % k)


def pinned_file(c, k, name):
    """A file of client k with its pinned layout, SIZE_MIB of holes (fio
    would unlink and recreate a shorter file, losing the layout)."""
    p = os.path.join(client_dir(c, k), name)
    with open(p, 'wb'):
        pass
    os.setxattr(p, 'user.rpfs.layout',
                (LAYOUTS_M if getattr(c, 'mirrored', False) else LAYOUTS)[k].encode())
    os.truncate(p, SIZE_MIB << 20)
    return p


def fio_all(c, name, mode, timeout=None, **kw):
    """fio MODE on file NAME of every client at once; the results by client."""
    jobs = []
    for k in range(len(c.mounts)):
        p = os.path.join(client_dir(c, k), name)
        if mode != 'verify' and not os.path.exists(p):
            pinned_file(c, k, name)
        jobs.append(Fio(p, SIZE_MIB, DIRECT[k], mode, c.logdir, **kw))
    return [j.wait(timeout or 600) for j in jobs]


def check_layouts(c, name):
    """Each client's file has objects exactly on the iods of its layout, so
    the 'needs the victim' split the assertions rely on is real."""
    for k in range(len(c.mounts)):
        ino = os.stat(os.path.join(client_dir(c, k), name)).st_ino
        held = [i for i, o in enumerate(c.objects(ino)) if o is not None]
        assert (VICTIM in held) == (k in NEEDS_VICTIM), \
            'client %d: objects on iods %s' % (k, held)
        if getattr(c, 'mirrored', False):   # both iods of each group
            assert all((i ^ 1) in held for i in held), \
                'client %d: mirrored objects on iods %s' % (k, held)


class Cycle:
    """One fault cycle over the 4 clients: what was written, watched and
    measured (t0: fault injected, t1: undone)."""

    def __init__(self, c, fault, n):
        self.c, self.fault, self.n = c, fault, n
        self.mirrored = getattr(c, 'mirrored', False)
        # mirrored, only a full disk reaches the clients of the victim
        self.errno_needing = fault.errno_needing
        if self.mirrored and self.errno_needing == errno.EIO:
            self.errno_needing = 0
        self.pre = [os.path.join(client_dir(c, k), 'pre%d' % n) for k in range(len(c.mounts))]
        self.want = []
        self.probers = []
        self.runs = []
        self.fres = []
        self.recover = []
        self.t0 = self.t1 = None

    def write_pre(self):
        """Every client writes, verifies and fsyncs its `pre` file."""
        for k, r in enumerate(fio_all(self.c, 'pre%d' % self.n, 'write')):
            assert r['error'] == 0 and r['rc'] == 0, 'client %d: pre write: %s' % (k, r)
        check_layouts(self.c, 'pre%d' % self.n)
        self.want = [sha256(p) for p in self.pre]

    def start_load(self):
        """Probers on every `pre`, fio on every `run` (after the fault for
        the full disk: only new writes need space)."""
        t = time.monotonic()
        self.probers = [Prober(p, w) for p, w in zip(self.pre, self.want)]
        for k, pr in enumerate(self.probers):
            pr.wait(lambda s: s == 'ok', t, 60, 'client %d prober' % k)
        if not isinstance(self.fault, DiskFull):
            self.start_fio()
            time.sleep(1)      # let them write before the fault

    def start_fio(self):
        for k in range(len(self.pre)):
            self.runs.append(Fio(pinned_file(self.c, k, 'run%d' % self.n), SIZE_MIB, DIRECT[k],
                                 'run', self.c.logdir, runtime=RUN_S))

    def fault_and_recover(self):
        """Inject the fault; hold it until every client needing the victim
        saw its error, and at least HOLD_S; undo it; wait for every client
        to read its `pre` again and for the fio runs to end."""
        f = self.fault
        self.t0 = time.monotonic()
        f.inject()
        if isinstance(f, DiskFull):
            self.start_fio()
        for k in NEEDS_VICTIM:
            if self.errno_needing == errno.EIO:
                self.probers[k].wait(lambda s: s == 'err%d' % errno.EIO, self.t0, HANG_S + 30,
                                     'client %d to get EIO during %s' % (k, f.name))
            elif self.errno_needing == errno.ENOSPC:
                self.runs[k].wait(RUN_S + HANG_S + 30)
        time.sleep(max(0.0, self.t0 + HOLD_S - time.monotonic()))
        self.t1 = time.monotonic()
        f.undo()
        for k, pr in enumerate(self.probers):
            t = pr.wait(lambda s: s == 'ok', self.t1, 120,
                        'client %d to read its file again after %s' % (k, f.name))
            self.recover.append(t - self.t1)
        self.fres = [r.result or r.wait(RUN_S + HANG_S + 60) for r in self.runs]
        time.sleep(0.3)   # one more prober pass each

    def stop_load(self):
        for p in self.probers:
            p.close()
        for r in self.runs:
            if r.p.poll() is None:
                r.p.kill()
                r.p.wait()

    def seen(self, k):
        """The sorted non-ok prober statuses of client k."""
        return sorted({s for _, s, _ in self.probers[k].passes if s != 'ok'})

    def rows(self):
        """The matrix rows of this cycle (data column filled in later)."""
        rows = []
        for k in range(len(self.pre)):
            pr, fr = self.probers[k], self.fres[k]
            t_err = pr.first(lambda s: s != 'ok', self.t0)
            fio = util.errno_name(fr['error']) if fr['error'] > 0 else \
                ('ok' if fr['error'] == 0 else 'no result')
            rows.append([self.fault.name + (' m2' if self.mirrored else ''), self.n,
                         'c%d%s' % (k, '*' if k in NEEDS_VICTIM else ''),
                         'not verified',
                         ','.join(s if s == 'bad' else util.errno_name(int(s[3:]))
                                  for s in self.seen(k)) or '-',
                         '-' if t_err is None else '%.2fs' % (t_err - self.t0),
                         '%.2fs' % max((m for _, _, m in pr.passes), default=0.0),
                         '%.2fs' % fr['lat_max'], '%.2fs' % self.recover[k], fio])
        return rows

    def check_client(self, k):
        """The assertions on client k's prober and fio run (module doc)."""
        seen, fr, need = self.seen(k), self.fres[k], self.errno_needing
        maxcall = max((m for _, _, m in self.probers[k].passes), default=0.0)
        assert 'bad' not in seen, 'client %d read wrong data of %s' % (k, self.pre[k])
        assert not wrong_data(fr), 'client %d: fio verify failed: %s' % (k, fr)
        assert maxcall < HANG_S, 'client %d: a call took %.1f s' % (k, maxcall)
        assert fr['lat_max'] < HANG_S, 'client %d: fio I/O took %.1f s' % (k, fr['lat_max'])
        if need is None:                     # the mgr: anyone may see EIO
            assert set(seen) <= {'err%d' % errno.EIO}, 'client %d: %s' % (k, seen)
            assert fr['error'] in (0, errno.EIO), 'client %d: fio %s' % (k, fr)
        elif k not in NEEDS_VICTIM or need == 0:
            assert seen == [], 'client %d does not need iod %d, got %s' % (k, VICTIM, seen)
            assert fr['error'] == 0, 'client %d does not need iod %d: fio %s' % (k, VICTIM, fr)
        elif need == errno.EIO:
            # fio meets the fault only if it wrote to the victim meanwhile
            assert seen == ['err%d' % errno.EIO], 'client %d: %s' % (k, seen)
            assert fr['error'] in (0, errno.EIO), 'client %d: fio %s' % (k, fr)
        else:
            assert seen == [], 'client %d: reads on a full disk: %s' % (k, seen)
            assert fr['error'] == errno.ENOSPC, \
                'client %d: writer on a full iod got %s, want ENOSPC' % (k, fr)

    def verify_after(self):
        """After recovery: every `pre` verifies (fio --verify_only, sha256
        unchanged) and every client writes and verifies a new file."""
        for k, r in enumerate(fio_all(self.c, 'pre%d' % self.n, 'verify')):
            assert r['error'] == 0 and r['rc'] == 0, 'client %d: pre verify after %s: %s' \
                % (k, self.fault.name, r)
            assert sha256(self.pre[k]) == self.want[k], 'client %d: pre changed' % k
        for k, r in enumerate(fio_all(self.c, 'post%d' % self.n, 'write')):
            assert r['error'] == 0 and r['rc'] == 0, 'client %d: write after %s: %s' \
                % (k, self.fault.name, r)


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
    for k in range(len(c.mounts)):
        cy.check_client(k)
    cy.verify_after()
    for r in rows:
        r[3] = '%dMiB pre,post ok' % SIZE_MIB
    for k in range(len(c.mounts)):      # room for the next cycle (soak)
        for name in ('pre', 'run', 'post'):
            os.unlink(os.path.join(client_dir(c, k), '%s%d' % (name, n)))


@pytest.mark.parametrize('mirrored', [False, True], ids=['unmirrored', 'mirrored'])
@pytest.mark.parametrize('case', list(CASES))
def test_fault(case, mirrored, ncluster, matrix, expect_log):
    """One row of the fault matrix (see the module docstring)."""
    for r in EXPECT[case] + (EXPECT_M if mirrored else []):
        expect_log(r)
    c = ncluster
    c.mirrored = mirrored
    for k in range(len(c.mounts)):
        os.mkdir(client_dir(c, k))
    fault = CASES[case](c)
    for n in range(CYCLES):
        run_cycle(c, fault, n, matrix)
    assert not c.check_alive(), c.check_alive()
