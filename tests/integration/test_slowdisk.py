"""A slow disk call does not stall the iod (issue 20, item 3;
iod/README.md "iod threads").

iod 0 of a 2-iod cluster runs with its test hook on: every IO_FSYNC of one
object is held 2 s before the fsync (RPFS_IOD_TEST_FSYNC_DELAY_MS=2000,
RPFS_IOD_TEST_FSYNC_INO). While a client's fsync of that file is held,
4 KiB O_DIRECT reads of another object on iod 0 must each come back within
100 ms (the bound the task names), and reads of a mirrored file must keep
working. The reads go through a second mount, another client: over verbs
one client's requests to an iod share one connection, served in order
(common/transport/vb_server.c), so its own read would wait for its own fsync;
what must not wait is everybody else. Afterwards no iod has lost its lease: the mgr recorded nothing
stale, no iod log shows a lease regained, and the log watch finds no
warning but the hook's own.
"""
import json
import mmap
import os
import re
import threading
import time

import pytest

import util

KiB = 1024
MiB = 1024 * KiB
UNIT = 64 * KiB
DELAY_MS = 2000
READ_BOUND_S = 0.100  # the task's bound on a read while an fsync is held

# A fresh cluster numbers inodes from 2 (root is 1): the first file made
# is the slow one, which the hook must know before iod 0 starts.
SLOW_INO = 2

HOOK_WARNING = (r'^<4>rpfs-iod: test hook RPFS_IOD_TEST_FSYNC_DELAY_MS=2000: '
                r'IO_FSYNC of ino 2 is held 2000 ms \(never set this in '
                r'production\)$')
STATUS_ROW = re.compile(r'^iod +(\d+) .*, group (\d+), stale objects: (\d+), ', re.M)


def pattern(n, seed):
    """n bytes that differ at every offset and between seeds."""
    return bytes((i * 7 + seed + (i >> 12)) & 0xff for i in range(n))


def layout_of(path):
    text = os.getxattr(path, 'user.rpfs.layout').decode()
    return {k: int(v) for k, v in (kv.split('=') for kv in text.split(','))}


def stale_counts(c):
    """iod -> stale objects, from rpfs status."""
    r = util.run([util.binary('admin/rpfs'), 'status', '--mgr',
                  util.hostport(c.mgr_port)], timeout=60)
    got = {int(i): int(n) for i, _g, n in STATUS_ROW.findall(r.stdout)}
    assert got, r.stdout
    return got


def push_bytes(c, i):
    """Read bytes iod i has pushed so far (its STATUS counters)."""
    r = util.run([util.binary('admin/rpfs'), 'stats', '--server',
                  util.hostport(c.iod_ports[i])], timeout=60)
    return json.loads(r.stdout)['bulk_push_bytes']


def pread_direct(fd, buf, n, off):
    """n bytes at off through the page-aligned buffer buf (O_DIRECT)."""
    got = os.preadv(fd, [memoryview(buf)[:n]], off)
    assert got == n, 'short read at %d: %d of %d' % (off, got, n)
    return bytes(buf[:n])


@pytest.fixture
def slow_cluster(tmp_path_factory):
    """2 iods (one mirror group) with the fsync hook on iod 0, and two
    mounts (two clients)."""
    c = util.Cluster(str(tmp_path_factory.mktemp('slow')), niods=2, name='slow')
    env = dict(c.env if c.env is not None else os.environ)
    env.update(RPFS_IOD_TEST_FSYNC_DELAY_MS=str(DELAY_MS),
               RPFS_IOD_TEST_FSYNC_INO=str(SLOW_INO))
    c.iods[0].env = env
    util.clusters.append(c)
    c.start()
    m = m2 = None
    try:
        path = str(tmp_path_factory.mktemp('slowmnt'))
        util.make_traversable(path)
        m = c.mount(path, 'allow_other')
        path = str(tmp_path_factory.mktemp('slowmnt2'))
        util.make_traversable(path)
        m2 = c.mount(path, 'allow_other')
        yield c, m, m2
    finally:
        util.cleanup(m2, m, c)


@pytest.mark.expect_log(HOOK_WARNING)
def test_fsync_held_does_not_stall_reads(slow_cluster):
    c, m, m2 = slow_cluster
    slow = os.path.join(m.path, 'slow')
    fast = os.path.join(m.path, 'fast')
    with open(slow, 'wb') as f:
        f.write(pattern(2 * UNIT, 1))  # a unit on each iod
    assert os.stat(slow).st_ino == SLOW_INO, 'the hook waits for another inode'
    fast_data = pattern(MiB, 2)
    with open(fast, 'wb') as f:
        f.write(fast_data)
    mdir = os.path.join(m.path, 'm')
    os.mkdir(mdir)
    os.setxattr(mdir, 'user.rpfs.layout', ('unit=%d,count=1,mirror=2' % UNIT).encode())
    mirrored = os.path.join(mdir, 'f')
    mir_data = pattern(4 * UNIT, 3)
    with open(mirrored, 'wb') as f:
        f.write(mir_data)
    assert c.objects(os.stat(fast).st_ino)[0] is not None

    # 4 KiB reads of fast that iod 0 serves: units k with (first + k) % 2 == 0
    lay = layout_of(fast)
    assert lay['count'] == 2 and lay.get('mirror', 1) == 1, lay
    offs = [k * UNIT + (k % 8) * 4 * KiB for k in range(MiB // UNIT)
            if (lay['first'] + k) % 2 == 0]
    buf = mmap.mmap(-1, MiB)
    # the other client reads
    fd = os.open(os.path.join(m2.path, 'fast'), os.O_RDONLY | os.O_DIRECT)
    mfd = os.open(os.path.join(m2.path, 'm', 'f'), os.O_RDONLY | os.O_DIRECT)
    try:
        # warm: connections up, both iods leased (mirrored reads served)
        for off in offs:
            assert pread_direct(fd, buf, 4 * KiB, off) == fast_data[off:off + 4 * KiB]
        assert pread_direct(mfd, buf, len(mir_data), 0) == mir_data

        iod0 = c.iods[0].log
        mark = iod0.size()
        pushed = push_bytes(c, 0)
        result = {}

        def held_fsync():
            try:
                wfd = os.open(slow, os.O_WRONLY)
                try:
                    os.pwrite(wfd, pattern(4 * KiB, 4), 0)
                    os.fsync(wfd)
                    result['ok'] = True
                finally:
                    os.close(wfd)
            except OSError as e:
                result['err'] = e

        t = threading.Thread(target=held_fsync)
        t.start()
        try:
            util.wait_until(lambda: 'holding IO_FSYNC of ino %d' % SLOW_INO
                            in iod0.read_from(mark), 10, 0.01,
                            'iod 0 holding the fsync')
            lat = []
            for rnd in range(2):
                for off in offs:
                    t0 = time.monotonic()
                    got = pread_direct(fd, buf, 4 * KiB, off)
                    lat.append(time.monotonic() - t0)
                    assert got == fast_data[off:off + 4 * KiB], 'read at %d' % off
            # asked before anything else that takes time (a subprocess
            # under the VM's emulation takes a good part of a second)
            still_held = t.is_alive()
            pushed = push_bytes(c, 0) - pushed
            # mirrored reads work too (both iods keep their leases)
            for rnd in range(2):
                assert pread_direct(mfd, buf, len(mir_data), 0) == mir_data
        finally:
            t.join(30)
        assert not t.is_alive(), 'fsync did not return'
        assert result.get('ok'), result.get('err')
        # the timed reads were served by iod 0, not by a cache on the way
        assert pushed >= len(lat) * 4 * KiB, pushed
        print('4 KiB reads on iod 0 while its fsync was held: %d, max %.1f ms, '
              'median %.1f ms' % (len(lat), max(lat) * 1e3,
                                 sorted(lat)[len(lat) // 2] * 1e3))
        assert max(lat) < READ_BOUND_S, ['%.1f ms' % (x * 1e3) for x in lat]
        # and they ran while the fsync was held
        assert still_held, 'the reads outlasted the held fsync'
    finally:
        os.close(mfd)
        os.close(fd)
        buf.close()

    # no iod lost its lease, nothing was fenced or marked stale
    assert stale_counts(c) == {0: 0, 1: 0}
    for d in c.iods:
        assert 'lease regained' not in d.log.read_from(0), d.name
    with open(mirrored, 'rb') as f:
        assert f.read() == mir_data
