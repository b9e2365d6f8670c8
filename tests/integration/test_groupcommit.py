"""Group commit in the mgr (mgr/README.md "Group commit"): write ops queued
together share one commit, and each is answered only after the sync that
made it durable.

The mgrs here run with --commit-delay-ms (testing only): the writer sleeps
before each batch commit, so requests of concurrent clients pile up into
one batch, and a kill -9 lands while a batch holds ops that are not yet
committed. An implementation that answered an op before its commit would
lose acknowledged ops in the kill test.
"""
import errno
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.request

import pytest

import util

# One worker: creates, renames and unlinks files in DIR named PREFIX-N,
# printing each op before it starts ("T") and once acknowledged ("A"), and
# stops at the first error ("E errno").
WORKER = r'''
import os, sys
d, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def say(*a):
    sys.stdout.write(' '.join(a) + '\n')
    sys.stdout.flush()
try:
    for i in range(n):
        p = os.path.join(d, '%s-%d' % (prefix, i))
        say('T', 'create', p)
        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        say('A', 'create', p)
        if i % 3 == 1:
            say('T', 'rename', p)
            os.rename(p, p + '.r')
            say('A', 'rename', p)
        elif i % 5 == 2:
            say('T', 'unlink', p)
            os.unlink(p)
            say('A', 'unlink', p)
except OSError as e:
    say('E', str(e.errno))
'''


def start_worker(d, prefix, n):
    """A worker in a directory of its own, d/prefix: the kernel serialises
    the creates of one directory (its inode lock), so workers in one
    directory would reach the mgr one at a time."""
    wd = os.path.join(d, prefix)
    os.mkdir(wd)
    return subprocess.Popen([sys.executable, '-c', WORKER, wd, prefix, str(n)],
                            stdout=subprocess.PIPE, text=True)


def expected_paths(lines):
    """From one worker's output: {path: set of allowed states}, a state
    being the name that exists ('p', 'p.r') or None (neither). An
    acknowledged op fixes its state; the one op in flight when the worker
    stopped may or may not have been applied."""
    want = {}
    pending = None
    for ln in lines:
        parts = ln.split(' ', 2)
        if parts[0] == 'T':
            pending = (parts[1], parts[2])
        elif parts[0] == 'A':
            op, p = parts[1], parts[2]
            want[p] = {{'create': p, 'rename': p + '.r', 'unlink': None}[op]}
            pending = None
    if pending:
        op, p = pending
        after = {'create': p, 'rename': p + '.r', 'unlink': None}[op]
        want[p] = want.get(p, {None}) | {after}
    return want


def state_of(p):
    """Which of p, p.r exists (None: neither)."""
    here = os.path.lexists(p)
    renamed = os.path.lexists(p + '.r')
    assert not (here and renamed), 'both %s and its rename exist' % p
    return p if here else (p + '.r' if renamed else None)


def http_get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def batch_counts(addr):
    """(batches, ops) of the mgr's group commit counters."""
    text = http_get('http://%s/metrics' % addr)
    b = re.search(r'^rpfs_mgr_group_commit_batches_total (\d+)$', text, re.M)
    o = re.search(r'^rpfs_mgr_group_commit_ops_total (\d+)$', text, re.M)
    assert b and o, 'no group commit counters on /metrics'
    return int(b.group(1)), int(o.group(1))


def make_cluster(tmp_path_factory, name, extra_mgr_args=()):
    c = util.Cluster(str(tmp_path_factory.mktemp(name)), niods=2, name=name)
    c.metrics_addr = util.hostport(util.free_port())
    c.mgr.argv += ['--metrics', c.metrics_addr] + list(extra_mgr_args)
    util.clusters.append(c)
    try:
        c.start()
    except BaseException:
        util.cleanup(c)
        raise
    return c


@pytest.fixture(scope='module')
def gc(tmp_path_factory):
    """A cluster whose mgr sleeps 20 ms before each batch commit, with
    per-inode xattrs capped at 1 KiB, and one mount."""
    c = make_cluster(tmp_path_factory, 'gc', ['--commit-delay-ms', '20',
                                              '--xattr-max-bytes', '1K'])
    path = str(tmp_path_factory.mktemp('gcm'))
    util.make_traversable(path)
    c.gc_mount = c.mount(path, 'allow_other')
    yield c
    util.cleanup(c)


def run_workers(d, nworkers, n):
    procs = [start_worker(d, 'w%d' % i, n) for i in range(nworkers)]
    outs = [p.communicate(timeout=300)[0].splitlines() for p in procs]
    return outs


# Over verbs a mount's requests to the mgr are served one at a time (one
# connection, served in order: mgr/README.md "Group commit"), so one mount's
# 4 writers never share a batch (388 ops, 388 batches in the RDMA VM); this
# check runs on tcp, whose 4 lanes are served each on its own. The rest of
# the module (durability, failing ops) runs in both stages.
@pytest.mark.host_only
def test_concurrent_writes_share_commits(gc):
    """Under 4 concurrent writers the mgr commits more than one op per
    batch (its /metrics counters), and every op is applied."""
    d = os.path.join(gc.gc_mount.path, 'share')
    os.mkdir(d)
    b0, o0 = batch_counts(gc.metrics_addr)
    outs = run_workers(d, 4, 60)
    b1, o1 = batch_counts(gc.metrics_addr)
    for lines in outs:
        assert not any(ln.startswith('E ') for ln in lines), lines[-3:]
        for p, allowed in expected_paths(lines).items():
            assert state_of(p) in allowed, p
    batches, ops = b1 - b0, o1 - o0
    assert batches > 0 and ops >= 4 * 60, (batches, ops)
    assert ops > batches, 'no batch held more than one op: %d ops in %d batches' % (ops, batches)


def test_failing_op_leaves_its_batch_applied(gc, tmp_path):
    """A write op that fails in the mgr (a setxattr past the per-inode cap:
    ENOSPC) between successful creates of other clients, in the same
    batches: it fails alone, the creates are all applied and answered.
    Over verbs one mount's ops never share a batch (its connection is
    served in order), so the creates come through two mounts (two workers
    through the first, one through the second, which also sends the
    setxattrs); some batch held more than one op (the mgr's counters)."""
    d = os.path.join(gc.gc_mount.path, 'fail')
    os.mkdir(d)
    open(os.path.join(d, 'victim'), 'w').close()
    m2 = gc.mount(str(tmp_path / 'm2'), 'allow_other')
    victim = os.path.join(m2.path, 'fail', 'victim')
    stop = threading.Event()
    seen = []

    def fail_loop():
        while not stop.is_set():
            try:
                os.setxattr(victim, 'user.big', b'x' * 2000)
                seen.append(0)
            except OSError as e:
                seen.append(e.errno)

    b0, o0 = batch_counts(gc.metrics_addr)
    t = threading.Thread(target=fail_loop)
    t.start()
    try:
        procs = [start_worker(d, 'w0', 60), start_worker(d, 'w1', 60),
                 start_worker(os.path.join(m2.path, 'fail'), 'w2', 60)]
        outs = [p.communicate(timeout=300)[0].splitlines() for p in procs]
    finally:
        stop.set()
        t.join(60)
    b1, o1 = batch_counts(gc.metrics_addr)
    assert seen and set(seen) == {errno.ENOSPC}, set(seen)
    assert 'user.big' not in os.listxattr(victim)
    for lines in outs:
        assert not any(ln.startswith('E ') for ln in lines), lines[-3:]
        acked = [ln for ln in lines if ln.startswith('A create')]
        assert len(acked) == 60
        for p, allowed in expected_paths(lines).items():
            assert state_of(p) in allowed, p
    assert o1 - o0 > b1 - b0, 'no batch held more than one op: %d ops in %d batches' % (
        o1 - o0, b1 - b0)
    assert m2.umount()


def test_group_commit_off(tmp_path_factory):
    """--group-commit off: every write op commits on its own (no batch is
    counted) and still works."""
    c = make_cluster(tmp_path_factory, 'gcoff', ['--group-commit', 'off'])
    try:
        path = str(tmp_path_factory.mktemp('gcoffm'))
        m = c.mount(path, 'allow_other')
        outs = run_workers(path, 2, 20)
        for lines in outs:
            assert not any(ln.startswith('E ') for ln in lines), lines[-3:]
            for p, allowed in expected_paths(lines).items():
                assert state_of(p) in allowed, p
        assert batch_counts(c.metrics_addr) == (0, 0)
        assert m.umount()
    finally:
        util.cleanup(c)


def test_acknowledged_ops_survive_kill9(tmp_path_factory, expect_log):
    """4 clients create, rename and unlink files; the mgr is killed (-9)
    once they have 80 acknowledgements, while a batch sleeps before its
    commit; after a restart every acknowledged op is there (the op in
    flight in each client may or may not be)."""
    # --lease 3: on PostgreSQL the mgr holds a lease (default 10 s) that
    # its restart after kill -9 must wait out (another holder); LMDB has none
    c = make_cluster(tmp_path_factory, 'gckill', ['--commit-delay-ms', '200',
                                                  '--lease', '3'])
    expect_log(util.client_mgr_fail_log(c))
    # an unlink answered just before the kill: its purge meets the mgr gone
    expect_log(r'^<4>rpfs-fuse: inode \d+: purge failed \(%s\), left as orphan$'
               % util.GONE_ERRS)
    expect_log(r'^<4>rpfs-fuse: purge of \d+ freed inodes from \d+ on: %s; any not '
               r'purged is left as orphan$' % util.GONE_ERRS)
    try:
        path = str(tmp_path_factory.mktemp('gckillm'))
        m = c.mount(path, 'allow_other,timeout=5')
        procs = [start_worker(path, 'k%d' % i, 100000) for i in range(4)]
        outs = [[] for _ in procs]
        acks = [0]
        lock = threading.Lock()
        enough = threading.Event()

        def reader(i):
            for ln in procs[i].stdout:
                ln = ln.rstrip('\n')
                with lock:
                    outs[i].append(ln)
                    if ln.startswith('A '):
                        acks[0] += 1
                        if acks[0] >= 80:
                            enough.set()

        threads = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        assert enough.wait(120), 'the clients got fewer than 80 acknowledgements'
        c.mgr.stop(signal.SIGKILL)
        for p in procs:
            p.wait(120)
        for t in threads:
            t.join(60)
        assert all(any(ln.startswith('E ') for ln in o) for o in outs), \
            'a client did not stop at the killed mgr'
        c.mgr.start()
        # check through a fresh mount: the first one's kernel caches what
        # it was told, also about the op in flight
        path2 = str(tmp_path_factory.mktemp('gckillm2'))
        m2 = c.mount(path2, 'allow_other')
        checked = 0
        for o in outs:
            for p, allowed in expected_paths(o).items():
                p2 = os.path.join(path2, os.path.relpath(p, path))
                a2 = {None if a is None else os.path.join(path2, os.path.relpath(a, path))
                      for a in allowed}
                got = state_of(p2)
                assert got in a2, '%s: %s, want one of %s' % (p2, got, a2)
                checked += 1
        assert sum(ln.startswith('A ') for o in outs for ln in o) >= 80
        assert checked > 0
        assert m2.umount()
        util.wait_until(lambda: _state_retry(path), 30, 0.5,
                        'the first mount to work again')
        assert m.umount()
    finally:
        util.cleanup(c)


def _state_retry(p):
    """os.listdir(p) in a 1-tuple, or None while the mount still says EIO."""
    try:
        return (os.listdir(p),)
    except OSError as e:
        if e.errno != errno.EIO:
            raise
        return None


def test_group_commit_bad_values(tmp_path):
    """A bad --group-commit or [mgr] group_commit is refused (exit 2) with a
    message naming it."""
    mgr = util.binary('mgr/rpfs-mgr')
    r = util.run([mgr, '--group-commit', 'maybe'], check=False, timeout=30)
    assert r.returncode == 2
    assert 'rpfs-mgr: --group-commit: expected on or off, got "maybe"' in r.stderr, r.stderr
    r = util.run([mgr, '--commit-delay-ms', '9999'], check=False, timeout=30)
    assert r.returncode == 2
    assert 'rpfs-mgr: --commit-delay-ms: expected milliseconds 0..5000, got "9999"' \
        in r.stderr, r.stderr
    conf = tmp_path / 'rpfs.conf'
    conf.write_text('[mgr]\ngroup_commit = maybe\n')
    r = util.run([mgr, '--conf', str(conf)], check=False, timeout=30)
    assert r.returncode == 2
    assert '%s:2: [mgr] group_commit: expected on or off, got "maybe"' % conf in r.stderr, \
        r.stderr
