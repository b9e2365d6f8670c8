"""Cluster-wide locks: POSIX (fcntl), OFD and flock locks taken on one mount
are seen by another mount of the same file system (mgr/lock/README.md
"Locks"). Lock holders are lock_agent.py processes driven line by line.
A test of a blocked waiter waits until the mgr counts it queued
(lock_waiters in its STATUS) before it lets the lock go, and where no
wait slice can end in between (timeout= of 10 s: 5 s slices) checks that
the grant came from the mgr's wake-up (lock_woken), not from the client
asking again after a slice."""
import errno
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading

import pytest

import util

AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lock_agent.py')
WAIT = 60  # bound on any wait for an answer; never asserted as a timing


class Agent:
    """One lock_agent.py process."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, AGENT], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        util.register_pid(self.proc.pid)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.pid = self.proc.pid

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def send(self, cmd):
        """Send a command without waiting for its answer (blocking calls)."""
        self.proc.stdin.write(cmd + '\n')
        self.proc.stdin.flush()

    def answer(self, timeout=WAIT):
        return self.lines.get(timeout=timeout)

    def pending(self):
        """True while no answer is waiting (the last command still blocks)."""
        return self.lines.empty()

    def do(self, cmd):
        self.send(cmd)
        return self.answer()

    def kill(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(timeout=WAIT)

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.kill()


def mgr_stats(cluster):
    """cluster's mgr counters (`rpfs stats --server`), as a dict."""
    r = util.run([util.binary('admin/rpfs'), 'stats', '--server',
                  util.hostport(cluster.mgr_port)], check=False, timeout=WAIT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def lock_waiters(cluster):
    """The WAITs queued at cluster's mgr."""
    return mgr_stats(cluster)['lock_waiters']


def lock_woken(cluster):
    """The WAITs cluster's mgr granted by a wake-up since it started."""
    return mgr_stats(cluster)['lock_woken']


def wait_queued(cluster, n):
    """Wait until the mgr holds exactly n WAITs (bounded by WAIT)."""
    util.wait_until(lambda: lock_waiters(cluster) == n, WAIT, 0.05,
                    '%d lock waiter(s) queued at the mgr' % n)


@pytest.fixture
def agents():
    made = []

    def make():
        a = Agent()
        made.append(a)
        return a
    yield make
    for a in made:
        a.kill()


def _cluster(tmp_path_factory, name, grace):
    c = util.Cluster(str(tmp_path_factory.mktemp(name)), niods=2, name=name,
                     mgr_args=('--lock-grace', str(grace)))
    util.clusters.append(c)
    try:
        c.start()
    except BaseException:
        util.cleanup(c)
        raise
    return c


@pytest.fixture(scope='module')
def lkcluster(tmp_path_factory):
    """One cluster (no grace period) for the tests that share it."""
    c = _cluster(tmp_path_factory, 'lk', 0)
    yield c
    util.cleanup(c)


@pytest.fixture(scope='module')
def pair(lkcluster, tmp_path_factory):
    """Two mounts of lkcluster: two client nodes."""
    opts = 'allow_other,attr_timeout=0,entry_timeout=0'
    a = b = None
    try:
        a = lkcluster.mount(str(tmp_path_factory.mktemp('la')), opts)
        b = lkcluster.mount(str(tmp_path_factory.mktemp('lb')), opts)
        yield a.path, b.path
    finally:
        util.cleanup(a, b)


@pytest.fixture
def files(pair, request):
    """The same new file through each mount."""
    name = request.node.name.replace('[', '_').replace(']', '_')
    pa = os.path.join(pair[0], name)
    with open(pa, 'wb') as f:
        f.write(b'x' * 4096)
    return pa, os.path.join(pair[1], name)


def test_posix_exclusion_across_mounts(files, agents):
    a, b = agents(), agents()
    assert a.do('open ' + files[0]) == 'ok'
    assert b.do('open ' + files[1]) == 'ok'
    assert a.do('lock setlk wr 0 0') == 'ok'
    assert b.do('lock setlk wr 0 0') == 'err EAGAIN'
    assert b.do('lock setlk rd 10 5') == 'err EAGAIN'
    assert a.do('lock setlk un 0 0') == 'ok'
    assert b.do('lock setlk wr 0 0') == 'ok'
    assert a.do('lock setlk rd 0 1') == 'err EAGAIN'


def test_read_locks_share_write_lock_excludes(files, agents):
    a, b = agents(), agents()
    a.do('open ' + files[0])
    b.do('open ' + files[1])
    assert a.do('lock setlk rd 0 100') == 'ok'
    assert b.do('lock setlk rd 50 100') == 'ok'
    assert b.do('lock setlk wr 100 10') == 'ok'  # beyond a's range
    assert b.do('lock setlk wr 50 10') == 'err EAGAIN'
    assert a.do('lock setlk wr 120 1') == 'err EAGAIN'


def test_flock_exclusion_across_mounts(files, agents):
    a, b = agents(), agents()
    a.do('open ' + files[0])
    b.do('open ' + files[1])
    assert a.do('flock ex_nb') == 'ok'
    assert b.do('flock ex_nb') == 'err EAGAIN'
    assert b.do('flock sh_nb') == 'err EAGAIN'
    # flock and fcntl locks do not interact (as on a local file system)
    assert b.do('lock setlk wr 0 0') == 'ok'
    assert a.do('flock sh_nb') == 'ok'  # downgrade
    assert b.do('flock sh_nb') == 'ok'
    assert b.do('flock ex_nb') == 'err EAGAIN'
    assert a.do('flock un') == 'ok'
    assert b.do('flock ex_nb') == 'ok'


def test_flock_released_on_close(files, agents):
    a, b = agents(), agents()
    a.do('open ' + files[0])
    b.do('open ' + files[1])
    assert a.do('flock ex_nb') == 'ok'
    assert b.do('flock ex_nb') == 'err EAGAIN'
    assert a.do('close') == 'ok'
    util.wait_until(lambda: b.do('flock ex_nb') == 'ok', WAIT, 0.1,
                    'flock free after the holder closed')


def test_getlk_reports_conflict(files, agents):
    a, b = agents(), agents()
    a.do('open ' + files[0])
    b.do('open ' + files[1])
    assert a.do('lock setlk wr 100 100') == 'ok'
    assert b.do('getlk wr 0 0') == 'ok wr 100 100 %d' % a.pid
    assert b.do('getlk rd 0 100') == 'ok un 0 100 0'
    assert a.do('lock setlk rd 300 0') == 'ok'
    assert b.do('getlk wr 250 100') == 'ok rd 300 0 %d' % a.pid
    assert b.do('getlk rd 250 100') == 'ok un 250 100 0'


def test_range_split_and_merge(files, agents):
    a, b = agents(), agents()
    a.do('open ' + files[0])
    b.do('open ' + files[1])
    assert a.do('lock setlk wr 0 100') == 'ok'
    assert a.do('lock setlk un 40 20') == 'ok'       # split: [0,39] [60,99]
    assert b.do('getlk wr 40 20') == 'ok un 40 20 0'
    assert b.do('getlk wr 0 1') == 'ok wr 0 40 %d' % a.pid
    assert b.do('getlk wr 99 1') == 'ok wr 60 40 %d' % a.pid
    assert a.do('lock setlk rd 20 60') == 'ok'       # downgrade the middle
    assert b.do('getlk rd 0 100') == 'ok wr 0 20 %d' % a.pid
    assert b.do('lock setlk rd 20 60') == 'ok'
    assert b.do('lock setlk un 20 60') == 'ok'
    assert a.do('lock setlk wr 20 60') == 'ok'       # merge back to [0,99]
    assert b.do('getlk wr 50 1') == 'ok wr 0 100 %d' % a.pid


def test_waiter_woken_on_unlock(lkcluster, files, agents):
    a, b = agents(), agents()
    a.do('open ' + files[0])
    b.do('open ' + files[1])
    wait_queued(lkcluster, 0)  # no wait of an earlier test left
    assert a.do('lock setlk wr 0 0') == 'ok'
    b.send('lock setlkw wr 0 10')
    wait_queued(lkcluster, 1)
    assert b.pending()
    woken = lock_woken(lkcluster)
    assert a.do('lock setlk un 0 0') == 'ok'
    assert b.answer() == 'ok'
    assert lock_woken(lkcluster) == woken + 1
    assert a.do('lock setlk rd 0 1') == 'err EAGAIN'


def test_waiter_woken_on_close(lkcluster, files, agents):
    a, b = agents(), agents()
    a.do('open ' + files[0])
    b.do('open ' + files[1])
    wait_queued(lkcluster, 0)
    assert a.do('lock setlk wr 0 0') == 'ok'
    b.send('lock setlkw rd 5 5')
    assert a.do('open2 ' + files[0]) == 'ok'
    wait_queued(lkcluster, 1)
    assert b.pending()
    woken = lock_woken(lkcluster)
    assert a.do('close') == 'ok'  # closing ANY descriptor drops a's locks
    assert b.answer() == 'ok'
    assert lock_woken(lkcluster) == woken + 1


def test_flock_waiter_woken(lkcluster, files, agents):
    a, b, c = agents(), agents(), agents()
    a.do('open ' + files[0])
    b.do('open ' + files[1])
    c.do('open ' + files[0])
    wait_queued(lkcluster, 0)
    assert a.do('flock ex') == 'ok'
    b.send('flock sh')
    assert c.do('flock sh_nb') == 'err EAGAIN'
    wait_queued(lkcluster, 1)
    assert b.pending()
    woken = lock_woken(lkcluster)
    assert a.do('flock un') == 'ok'
    assert b.answer() == 'ok'
    assert lock_woken(lkcluster) == woken + 1
    assert c.do('flock sh_nb') == 'ok'
    assert c.do('flock ex_nb') == 'err EAGAIN'  # b's shared lock, other mount


def test_wait_longer_than_timeout(tmp_path_factory, agents):
    """A wait outlasting the client's request timeout (1 s here) goes on in
    slices instead of failing with EIO."""
    c = _cluster(tmp_path_factory, 'lkt', 0)
    ma = mb = None
    try:
        ma = c.mount(str(tmp_path_factory.mktemp('ta')), 'timeout=1')
        mb = c.mount(str(tmp_path_factory.mktemp('tb')), 'timeout=1')
        a, b = agents(), agents()
        assert a.do('open ' + os.path.join(ma.path, 'f')) == 'ok'
        assert b.do('open ' + os.path.join(mb.path, 'f')) == 'ok'
        assert a.do('lock setlk wr 0 0') == 'ok'
        b.send('lock setlkw wr 0 0')
        # the mgr answers each 500 ms slice "ask again": wait for several
        with pytest.raises(queue.Empty):
            b.answer(timeout=3)
        wait_queued(c, 1)  # queued again after a slice
        assert a.do('lock setlk un 0 0') == 'ok'
        assert b.answer() == 'ok'
        a.stop()
        b.stop()
    finally:
        util.cleanup(ma, mb, c)


def test_setlkw_interrupted_by_signal(lkcluster, files, agents):
    a, b, c = agents(), agents(), agents()
    a.do('open ' + files[0])
    b.do('open ' + files[1])
    c.do('open ' + files[1])
    wait_queued(lkcluster, 0)
    assert a.do('lock setlk wr 0 0') == 'ok'
    assert b.do('alarm 0.5') == 'ok'
    assert b.do('lock setlkw wr 0 0') == 'err EINTR'
    # the cancelled wait is gone at the mgr: c, not b, gets the lock
    wait_queued(lkcluster, 0)
    c.send('lock setlkw wr 0 0')
    wait_queued(lkcluster, 1)
    woken = lock_woken(lkcluster)
    assert a.do('lock setlk un 0 0') == 'ok'
    assert c.answer() == 'ok'
    assert lock_woken(lkcluster) == woken + 1
    assert b.do('lock setlk rd 0 1') == 'err EAGAIN'


def test_holder_killed_waiter_gets_lock(lkcluster, files, agents):
    a, b, c = agents(), agents(), agents()
    a.do('open ' + files[0])
    b.do('open ' + files[1])
    c.do('open ' + files[0])
    wait_queued(lkcluster, 0)
    assert a.do('lock setlk wr 0 0') == 'ok'
    b.send('lock setlkw wr 0 0')
    assert c.do('lock setlk rd 0 1') == 'err EAGAIN'
    wait_queued(lkcluster, 1)
    assert b.pending()
    woken = lock_woken(lkcluster)
    a.kill(signal.SIGKILL)
    assert b.answer() == 'ok'
    assert lock_woken(lkcluster) == woken + 1
    assert c.do('lock setlk rd 0 1') == 'err EAGAIN'  # b holds it now


def test_deadlock_detected(lkcluster, files, agents):
    """Two processes on two mounts each wait for the other's lock: the wait
    that would close the cycle fails with EDEADLK (which one depends on
    which request reaches the mgr last), the other is granted once the
    loser gives its lock up."""
    a, b = agents(), agents()
    a.do('open ' + files[0])
    b.do('open ' + files[1])
    wait_queued(lkcluster, 0)
    assert a.do('lock setlk wr 0 1') == 'ok'
    assert b.do('lock setlk wr 1 1') == 'ok'
    a.send('lock setlkw wr 1 1')        # a waits for b
    b.send('lock setlkw wr 0 1')        # b waits for a: a cycle
    util.wait_until(lambda: not a.pending() or not b.pending(), WAIT, 0.05,
                    'an answer to one of the waits')
    first = (a, b, '0 1') if not a.pending() else (b, a, '1 1')
    loser, winner, mine = first
    assert loser.answer() == 'err EDEADLK'
    wait_queued(lkcluster, 1)           # the winner's wait
    assert winner.pending()
    woken = lock_woken(lkcluster)
    assert loser.do('lock setlk un ' + mine) == 'ok'
    assert winner.answer() == 'ok'
    assert lock_woken(lkcluster) == woken + 1


def test_ofd_locks(files, agents):
    """OFD locks reach the mgr as POSIX locks whose owner is the open file:
    two descriptions in one process conflict, and the lock goes with the
    last close of its description."""
    a, b = agents(), agents()
    a.do('open ' + files[0])
    b.do('open ' + files[1])
    assert a.do('lock ofd_setlk wr 0 10') == 'ok'
    assert b.do('lock ofd_setlk rd 0 1') == 'err EAGAIN'
    assert b.do('lock setlk rd 5 1') == 'err EAGAIN'
    assert b.do('ofd_getlk rd 0 0') == 'ok wr 0 10 -1'  # the kernel hides the pid
    assert a.do('open2 ' + files[0]) == 'ok'
    assert a.do('lock ofd_setlk rd 0 1') == 'err EAGAIN'  # same process, other file
    assert a.do('use 0') == 'ok'
    assert a.do('close') == 'ok'
    util.wait_until(lambda: b.do('lock ofd_setlk wr 0 10') == 'ok', WAIT, 0.1,
                    'OFD lock free after its file was closed')


def test_client_killed_locks_expire(tmp_path_factory, agents):
    """A client node that dies (rpfs-fuse SIGKILLed) loses its locks once
    its lease (its timeout, 2 s here) runs out."""
    c = _cluster(tmp_path_factory, 'lkk', 0)
    ma = mb = None
    try:
        ma = c.mount(str(tmp_path_factory.mktemp('ka')), 'timeout=2')
        mb = c.mount(str(tmp_path_factory.mktemp('kb')), 'timeout=2')
        a, b = agents(), agents()
        assert a.do('open ' + os.path.join(ma.path, 'f')) == 'ok'
        assert b.do('open ' + os.path.join(mb.path, 'f')) == 'ok'
        assert a.do('lock setlk wr 0 0') == 'ok'
        assert a.do('flock ex_nb') == 'ok'
        assert b.do('lock setlk wr 0 0') == 'err EAGAIN'
        b.send('lock setlkw wr 0 0')
        wait_queued(c, 1)
        ma.proc.kill()
        ma.proc.wait(timeout=WAIT)
        assert b.answer() == 'ok'
        assert b.do('flock ex') == 'ok'
        a.kill()
        ma.umount()
        ma = None
        b.stop()
    finally:
        util.cleanup(ma, mb, c)


def test_mgr_restart_locks_reclaimed(tmp_path_factory, agents):
    """After a mgr restart the clients reclaim their locks within the grace
    period (3 s here); new locks wait for it to end, and then still see
    the reclaimed ones."""
    c = _cluster(tmp_path_factory, 'lkr', 3)
    ma = mb = None
    try:
        ma = c.mount(str(tmp_path_factory.mktemp('ra')), 'timeout=2')
        mb = c.mount(str(tmp_path_factory.mktemp('rb')), 'timeout=2')
        a, b = agents(), agents()
        assert a.do('open ' + os.path.join(ma.path, 'f')) == 'ok'  # waits out the grace
        assert b.do('open ' + os.path.join(mb.path, 'f')) == 'ok'
        assert a.do('lock setlk wr 0 100') == 'ok'
        assert a.do('flock sh_nb') == 'ok'
        c.mgr.stop(signal.SIGKILL)
        c.mgr.start()
        assert b.do('lock setlk rd 50 1') == 'err EAGAIN'
        assert b.do('flock ex_nb') == 'err EAGAIN'
        assert b.do('getlk rd 0 0') == 'ok wr 0 100 %d' % a.pid
        assert a.do('lock setlk un 0 0') == 'ok'
        assert b.do('lock setlk rd 50 1') == 'ok'
        a.stop()
        b.stop()
    finally:
        util.cleanup(ma, mb, c)


def test_grace_only_when_locks_may_be_held(tmp_path_factory, agents):
    """The grace period is for reclaims: a new file system, and one whose
    mgr stopped cleanly with no lock held, start without one (locks at
    once, even with --lock-grace 3600); a mgr killed while a lock is held
    starts with one: the holder reclaims, a new lock waits, and a signal
    ends that wait (F_SETLK retries through a grace, interruptibly)."""
    c = _cluster(tmp_path_factory, 'lkg', 3600)
    m = None
    try:
        m = c.mount(str(tmp_path_factory.mktemp('ga')), 'timeout=2')
        a, b = agents(), agents()
        f = os.path.join(m.path, 'f')
        assert a.do('open ' + f) == 'ok'
        assert b.do('open ' + f) == 'ok'
        assert a.do('lock setlk wr 0 10') == 'ok'      # new file system
        assert a.do('lock setlk un 0 0') == 'ok'
        c.mgr.stop(signal.SIGTERM)                     # clean, nothing held
        c.mgr.start()
        assert a.do('lock setlk wr 0 10') == 'ok'      # no grace
        c.mgr.stop(signal.SIGKILL)                     # crash, a lock held
        c.mgr.start()
        assert b.do('alarm 3') == 'ok'
        assert b.do('lock setlk wr 100 10') == 'err EINTR'  # waited in grace
        a.stop()
        b.stop()
    finally:
        util.cleanup(m, c)


@pytest.mark.parametrize('value', ['x', '-1', '3601', '', '5s'])
def test_lock_grace_argument_checked(value):
    r = util.run([util.binary('mgr/rpfs-mgr'), '--lock-grace', value, '--listen',
                  util.HOST + ':7998', '--db', '/tmp/rpfs-never', '--iod',
                  util.HOST + ':1'], check=False, timeout=30)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert '--lock-grace: expected SECONDS 0..3600' in r.stderr, r.stderr


LIBRPFS_SCRIPT = r"""
import ctypes, fcntl, os, sys
lib = ctypes.CDLL(sys.argv[1])
fs = ctypes.c_void_p()
assert lib.rpfs_mount(sys.argv[2].encode(), None, ctypes.byref(fs)) == 0
files = []
for line in sys.stdin:
    w = line.split()
    if w[0] == 'open':
        f = ctypes.c_void_p()
        rc = lib.rpfs_open(fs, w[1].encode(), os.O_RDWR, 0o644, ctypes.byref(f))
        files.append(f)
    elif w[0] == 'lock':
        t = {'rd': fcntl.F_RDLCK, 'wr': fcntl.F_WRLCK, 'un': fcntl.F_UNLCK}[w[2]]
        rc = lib.rpfs_lock(files[int(w[1])], t, ctypes.c_uint64(int(w[3])),
                           ctypes.c_uint64(int(w[4])), int(w[5]))
    elif w[0] == 'close':
        rc = lib.rpfs_close(files[int(w[1])])
    print(rc, flush=True)
assert lib.rpfs_unmount(fs) == 0
"""


def _sanitizer_preload(lib):
    """The sanitizer runtimes lib links (an ASan build), for LD_PRELOAD:
    python itself is not instrumented."""
    p = subprocess.run(['ldd', lib], capture_output=True, text=True)
    libs = re.findall(r'^\s*(lib(?:asan|ubsan)\.so\S*) => (\S+)', p.stdout, re.M)
    libs.sort(key=lambda nl: not nl[0].startswith('libasan'))
    return ':'.join(path for _name, path in libs)


def test_librpfs_lock(lkcluster, files, agents):
    """rpfs_lock: cluster-wide, owned by the handle (two handles conflict),
    released by rpfs_close."""
    lib = util.binary('fuse-client/librpfs.so')
    env = dict(os.environ)
    pre = _sanitizer_preload(lib)
    if pre:
        env['LD_PRELOAD'] = pre
        env['ASAN_OPTIONS'] = 'detect_leaks=0'  # python's own, not ours
    p = subprocess.Popen([sys.executable, '-c', LIBRPFS_SCRIPT, lib,
                          util.hostport(lkcluster.mgr_port)], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    util.register_pid(p.pid)

    def do(cmd):
        p.stdin.write(cmd + '\n')
        p.stdin.flush()
        return int(p.stdout.readline())
    try:
        b = agents()
        b.do('open ' + files[1])
        name = '/' + os.path.basename(files[0])
        assert do('open ' + name) == 0
        assert do('open ' + name) == 0
        assert do('lock 0 wr 0 10 0') == 0
        assert b.do('lock setlk rd 5 1') == 'err EAGAIN'
        assert do('lock 1 rd 9 1 0') == -errno.EAGAIN   # another handle
        assert do('lock 1 rd 10 0 0') == 0               # beyond the range
        assert do('lock 0 wr 0 0 9') == -errno.EINVAL
        assert b.do('lock setlk wr 20 1') == 'err EAGAIN'
        assert do('close 0') == 0
        assert b.do('lock setlk wr 0 10') == 'ok'
        assert do('close 1') == 0
        assert b.do('lock setlk wr 0 0') == 'ok'
        p.stdin.close()
        assert p.wait(timeout=WAIT) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
