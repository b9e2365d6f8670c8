"""WRITE leases and delegated ops (HACKING.md "Leases and callbacks",
Delegated ops). Two mounts of one cluster, A and B, both with -o
leases,deleg: a directory A makes is A's alone; A answers creates, mkdirs
and symlinks in it itself and sends them to the mgr in BATCHes. Whatever
B does there recalls A's lease first, and A sends its queue before it
acknowledges, so B sees every name A made as soon as its own call
returns. Waits are bounded only to tell "served" from "blocked for good"."""
import os
import re
import signal
import urllib.request

import pytest

import util

WAIT = 60            # bound on waiting for a state; never asserted as timing


def scrape(addr):
    with urllib.request.urlopen('http://%s/metrics' % addr, timeout=10) as r:
        return r.read().decode()


def metric(text, name, labels=''):
    """A sample's value; 0 for a labelled one not written yet."""
    m = re.search(r'^%s%s (\S+)$' % (re.escape(name), re.escape(labels)), text, re.M)
    assert m or labels, '%s not in /metrics' % name
    return int(float(m.group(1))) if m else 0


class Deleg:
    """The cluster, its mgr's /metrics, and mounts A and B (leases and
    delegation on, each with its /metrics)."""


@pytest.fixture(scope='module')
def dc(tmp_path_factory):
    dc = Deleg()
    c = util.Cluster(str(tmp_path_factory.mktemp('deleg')), niods=2, name='deleg')
    dc.mgr_metrics = util.hostport(util.free_port())
    c.mgr.argv += ['--metrics', dc.mgr_metrics]
    util.clusters.append(c)
    dc.c = c
    mounts = []
    try:
        c.start()
        dc.metrics = {}
        for name in ('a', 'b'):
            dc.metrics[name] = util.hostport(util.free_port())
            m = c.mount(str(tmp_path_factory.mktemp('m' + name)),
                        'allow_other,leases,deleg,metrics=%s' % dc.metrics[name])
            mounts.append(m)
            setattr(dc, name, m)
        util.wait_until(lambda: metric(scrape(dc.mgr_metrics),
                                       'rpfs_mgr_callback_sessions') == 2,
                        WAIT, 0.1, 'both mounts known to the mgr')
        yield dc
    finally:
        util.cleanup(*mounts, c)


def calls(dc, name, op):
    """The calls mount name made to the mgr of op so far."""
    return metric(scrape(dc.metrics[name]), 'rpfs_client_requests_total',
                  '{op="%s"}' % op)


@pytest.fixture
def d(dc, request):
    """A fresh directory made on A (so A holds it alone), as (its path on
    A, on B)."""
    name = request.node.name.replace('[', '_').replace(']', '_')
    os.mkdir(os.path.join(dc.a.path, name))
    return tuple(os.path.join(m.path, name) for m in (dc.a, dc.b))


def inodes_used(path):
    """Inodes the file system holds (statfs): an unlinked file counts
    until its purge."""
    st = os.statvfs(path)
    return st.f_files - st.f_ffree


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_creates_answered_alone(dc, d):
    """200 files with data, a chmod and a utime each: no CREATE reaches
    the mgr, and BATCHes carry almost every SETATTR and SETBLOCKS; B then
    sees every name, byte, mode and time."""
    a, b = d
    ops = ('CREATE', 'SETATTR', 'SETBLOCKS')
    before = {op: calls(dc, 'a', op) for op in ops + ('BATCH',)}
    for i in range(200):
        p = os.path.join(a, 'f%03d' % i)
        with open(p, 'w') as f:
            f.write('data %d\n' % i)
        os.chmod(p, 0o640)
        os.utime(p, (1000 + i, 2000 + i))
    fsync_dir(a)
    after = {op: calls(dc, 'a', op) for op in ops + ('BATCH',)}
    # an op of a file whose create's batch was already answered takes
    # today's path (a few per batch at most); without delegation all 800
    # would reach the mgr
    alone = sum(after[op] - before[op] for op in ops)
    nbatch = after['BATCH'] - before['BATCH']
    assert after['CREATE'] == before['CREATE'], 'a CREATE reached the mgr'
    assert alone <= 4 * nbatch, '%d ops at the mgr, %d BATCHes' % (alone, nbatch)
    assert 1 <= nbatch <= 100, '%d BATCHes for 200 files' % nbatch
    names = sorted(os.listdir(b))
    assert names == ['f%03d' % i for i in range(200)]
    for i in (0, 77, 199):
        p = os.path.join(b, 'f%03d' % i)
        st = os.stat(p)
        assert (st.st_mode & 0o7777, st.st_mtime, st.st_size) == \
            (0o640, 2000 + i, len('data %d\n' % i))
        with open(p) as f:
            assert f.read() == 'data %d\n' % i


def test_other_mount_sees_at_once(dc, d):
    """No fsync on A: B's lookup recalls A's lease, and A sends its queue
    before it acknowledges, so B finds the file and its bytes."""
    a, b = d
    with open(os.path.join(a, 'f'), 'w') as f:
        f.write('hello')
    os.mkdir(os.path.join(a, 'sub'))
    os.symlink('f', os.path.join(a, 'ln'))
    with open(os.path.join(b, 'f')) as f:
        assert f.read() == 'hello'
    assert os.path.isdir(os.path.join(b, 'sub'))
    assert os.readlink(os.path.join(b, 'ln')) == 'f'


def test_subdirs_held_too(dc, d):
    """A directory A made alone is A's alone too: a tree of them goes in
    BATCHes, and B sees all of it."""
    a, b = d
    before = calls(dc, 'a', 'MKDIR')
    for i in range(5):
        sub = os.path.join(a, 's%d' % i, 't')
        os.makedirs(sub)
        with open(os.path.join(sub, 'x'), 'w') as f:
            f.write(str(i))
    assert calls(dc, 'a', 'MKDIR') == before
    for i in range(5):
        with open(os.path.join(b, 's%d' % i, 't', 'x')) as f:
            assert f.read() == str(i)
    st = os.stat(os.path.join(b, 's0'))
    assert st.st_nlink == 3


def test_recalled_dir_is_shared(dc, d):
    """After B's use, A no longer acts alone there: its next create is a
    CREATE at the mgr, and an O_EXCL create of a name B made fails."""
    a, b = d
    open(os.path.join(a, 'x'), 'w').close()
    assert os.path.exists(os.path.join(b, 'x'))  # recalls A
    open(os.path.join(b, 'y'), 'w').close()
    before = calls(dc, 'a', 'CREATE')
    open(os.path.join(a, 'z'), 'w').close()
    assert calls(dc, 'a', 'CREATE') == before + 1
    with pytest.raises(FileExistsError):
        os.open(os.path.join(a, 'y'), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    assert sorted(os.listdir(b)) == ['x', 'y', 'z']


def test_exclusive_create_race(dc, d):
    """B's O_EXCL create of a name A made alone and has not sent fails."""
    a, b = d
    open(os.path.join(a, 'n'), 'w').close()
    with pytest.raises(FileExistsError):
        os.open(os.path.join(b, 'n'), os.O_CREAT | os.O_EXCL | os.O_WRONLY)


def test_unlink_and_rename_after_creates(dc, d):
    """Today's ops in a held directory go after the queue: an unlink and
    a rename of files A made alone find them at the mgr."""
    a, b = d
    for n in ('u', 'v', 'w'):
        with open(os.path.join(a, n), 'w') as f:
            f.write(n)
    os.unlink(os.path.join(a, 'u'))
    os.rename(os.path.join(a, 'v'), os.path.join(a, 'v2'))
    assert sorted(os.listdir(b)) == ['v2', 'w']
    with open(os.path.join(b, 'v2')) as f:
        assert f.read() == 'v'


def test_readdir_on_b_during_creates(dc, d):
    """B lists the directory between A's creates: each listing holds every
    name A made before it."""
    a, b = d
    for i in range(20):
        open(os.path.join(a, 'e%02d' % i), 'w').close()
        assert len(os.listdir(b)) == i + 1


def test_unmount_sends_the_queue(dc, tmp_path):
    """A mount unmounted right after its creates sent them first."""
    m = dc.c.mount(str(tmp_path / 'mu'), 'allow_other,leases,deleg')
    try:
        top = os.path.join(m.path, 'um')
        os.mkdir(top)
        for i in range(50):
            with open(os.path.join(top, 'g%02d' % i), 'w') as f:
                f.write('g')
    finally:
        m.umount()
    assert len(os.listdir(os.path.join(dc.b.path, 'um'))) == 50


def test_fsynced_survive_a_killed_holder(dc, tmp_path):
    """A holder killed with ops queued: what fsync returned for is in the
    store (the rest may be lost, as on a local file system). B's look at
    the directory waits for the dead holder's lease (8 s), not for ever."""
    m = dc.c.mount(str(tmp_path / 'mk'), 'allow_other,leases,deleg')
    top = os.path.join(m.path, 'kill')
    os.mkdir(top)
    for i in range(25):
        with open(os.path.join(top, 'k%02d' % i), 'w') as f:
            f.write('k%d' % i)
            if i == 19:
                f.flush()
                os.fsync(f.fileno())
    try:
        m.proc.send_signal(signal.SIGKILL)
        m.proc.wait(timeout=WAIT)
    finally:
        util.run(['umount', '-l', m.path], check=False)
        if m in dc.c.mounts:
            dc.c.mounts.remove(m)
        m.log.retired = True
    names = set(os.listdir(os.path.join(dc.b.path, 'kill')))
    for i in range(20):
        assert 'k%02d' % i in names, 'k%02d was fsynced' % i
        with open(os.path.join(dc.b.path, 'kill', 'k%02d' % i)) as f:
            assert f.read() == 'k%d' % i


@pytest.mark.expect_log(r'mgr .*(Connection refused|Connection reset|'
                        r'Input/output error|timed out)|'
                        r'delegated ops: a batch of')
def test_queue_survives_a_mgr_restart(dc, d):
    """Ops queued when the mgr is killed are sent to the new one (a batch
    whose answer was lost is sent again, and its creates are recognised
    by their inode numbers): fsync returns once they are in, and B sees
    them."""
    a, b = d
    open(os.path.join(a, 'before'), 'w').close()
    for i in range(10):
        with open(os.path.join(a, 'r%d' % i), 'w') as f:
            f.write(str(i))
    dc.c.mgr.stop(sig=signal.SIGKILL)  # queued, in flight or committed
    dc.c.mgr.start()
    fsync_dir(a)
    util.wait_until(lambda: metric(scrape(dc.mgr_metrics),
                                   'rpfs_mgr_callback_sessions') == 2,
                    WAIT, 0.1, 'both sessions back')
    assert sorted(os.listdir(b)) == ['before'] + ['r%d' % i for i in range(10)]


def test_deleg_needs_leases(tmp_path):
    """-o deleg alone is refused, naming what it needs (the recall comes
    through the leases' callback channel)."""
    r = util.run([util.binary('fuse-client/rpfs-fuse'), '-o', 'deleg',
                  '127.0.0.1:1', str(tmp_path)], check=False)
    assert r.returncode == 2
    assert '-o deleg: delegated creates need -o leases' in r.stderr


def test_rm_rf_answered_alone(dc, d):
    """rm -rf of a tree A made alone: no UNLINK or RMDIR reaches the mgr
    (BATCHes carry them); B then finds nothing, and the mgr holds no
    orphan once A's reaper purged the files' data."""
    a, b = d
    used0 = inodes_used(b)
    for i in range(3):
        sub = os.path.join(a, 't%d' % i)
        os.mkdir(sub)
        for j in range(20):
            with open(os.path.join(sub, 'f%02d' % j), 'w') as f:
                f.write('x' * j)
        os.symlink('f00', os.path.join(sub, 'ln'))
    before = {op: calls(dc, 'a', op) for op in ('UNLINK', 'RMDIR')}
    util.run(['rm', '-rf'] + [os.path.join(a, 't%d' % i) for i in range(3)])
    fsync_dir(a)
    for op in ('UNLINK', 'RMDIR'):
        assert calls(dc, 'a', op) == before[op], '%s reached the mgr' % op
    assert os.listdir(b) == []
    util.wait_until(lambda: inodes_used(b) == used0, WAIT, 0.1,
                    'the removed files purged')


def test_unlinked_open_file_alone(dc, d):
    """A file A made alone, unlinked alone while open, still reads and
    writes through its descriptor, and is purged at its close."""
    a, b = d
    used0 = inodes_used(b)
    p = os.path.join(a, 'open')
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.write(fd, b'kept')
        os.unlink(p)
        assert not os.path.exists(os.path.join(b, 'open'))
        os.write(fd, b' too')
        assert os.pread(fd, 100, 0) == b'kept too'
        assert os.fstat(fd).st_nlink == 0
    finally:
        os.close(fd)
    util.wait_until(lambda: inodes_used(b) == used0, WAIT, 0.1,
                    'the file purged at its close')
