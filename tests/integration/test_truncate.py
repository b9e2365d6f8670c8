"""Truncate cannot bring old bytes back (fuse-client/core/README.md
"Truncate").

A shrink truncates the iods' objects first and publishes the size at the
mgr only after: whatever point a truncate stops at (its client killed, an
iod down), no byte the file held past the new size reads back once the
file grows again. 4 iods, 64 KiB stripe unit. Every read is O_DIRECT
through a mount that did not write the bytes read, so no page cache
answers; a wrong read fails at once.

rpfs-fuse's test hook $RPFS_FUSE_TEST_TRUNCATE_EXIT=after-iods|after-mgr
makes it _exit() at that point of its next truncate (the kernel then fails
the truncate; the test unmounts the dead mount lazily).
"""
import errno
import os
import re

import pytest

import util

KiB = 1024
MiB = 1024 * KiB
UNIT = 64 * KiB
NEW = 100 * KiB
HOOK_STATUS = 86  # CLI_SIZE_EXIT_STATUS


def hook_log(point):
    """The warning a hooked rpfs-fuse logs once at start."""
    return (r'^<4>rpfs-fuse: test hook: the next truncate ends this process '
            r'%s \(RPFS_FUSE_TEST_TRUNCATE_EXIT\)$' % re.escape(point))


def rpfs(*args):
    return util.run([util.binary('admin/rpfs')] + [str(a) for a in args],
                    check=False, timeout=60)


def stale_total(c):
    """The stale objects of every iod, from rpfs status."""
    r = rpfs('status', '--mgr', util.hostport(c.mgr_port))
    rows = re.findall(r'^iod +\d+ .*, stale objects: (\d+),', r.stdout, re.M)
    assert len(rows) == c.niods, r.stdout
    return sum(int(n) for n in rows)


def cluster(tmp_path_factory, name):
    c = util.Cluster(str(tmp_path_factory.mktemp(name)), niods=4, name=name)
    util.clusters.append(c)
    c.start()
    return c


def mount(c, tmp_path_factory, tag, hook=None):
    """A mount of c (timeout above the mgr's 8 s lease: a STALE_MARK for a
    dead iod is answered once its lease ran out); with hook, the rpfs-fuse
    runs with $RPFS_FUSE_TEST_TRUNCATE_EXIT=hook."""
    path = str(tmp_path_factory.mktemp(tag))
    util.make_traversable(path)
    saved = c.env
    if hook:
        c.env = dict(os.environ if saved is None else saved,
                     RPFS_FUSE_TEST_TRUNCATE_EXIT=hook)
    try:
        return c.mount(path, 'allow_other,timeout=10')
    finally:
        c.env = saved


def make_dir(m, mirror):
    d = os.path.join(m.path, 'd')
    os.mkdir(d)
    os.setxattr(d, 'user.rpfs.layout',
                ('unit=%d,count=%d%s' % (UNIT, 2 if mirror else 4,
                                         ',mirror=2' if mirror else '')).encode())
    return d


def write_old(path):
    """1 MiB of nonzero bytes, synced; returns them."""
    data = bytes((i % 251) + 1 for i in range(MiB))
    with open(path, 'wb') as fh:
        fh.write(data)
        os.fsync(fh.fileno())
    return data


def same(got, want, what):
    """Fail, naming the first wrong byte, unless got == want (no pytest
    diff of a megabyte)."""
    if got == want:
        return
    n = min(len(got), len(want))
    first = next((i for i in range(n) if got[i] != want[i]), n)
    raise AssertionError('%s: %d bytes, want %d; first difference at %d: '
                         '%r, want %r' % (what, len(got), len(want), first,
                                          got[first:first + 1],
                                          want[first:first + 1]))


def grow_and_check(path, have, end):
    """Grow the file to end by writing one byte at end - 1 (have: what it
    holds now) and check it reads have, zeros up to end - 1, the byte."""
    assert len(have) < end
    fd = os.open(path, os.O_WRONLY)
    try:
        assert os.pwrite(fd, b'\xee', end - 1) == 1
        os.fsync(fd)
    finally:
        os.close(fd)
    want = have + bytes(end - 1 - len(have)) + b'\xee'
    same(util.read_direct(path), want, 'after growing to %d' % end)


def kill_hooked(m):
    """Unmount the mount whose rpfs-fuse the hook ended (lazily) and check
    that the hook, not something else, ended it."""
    m.umount()
    assert m.proc.returncode == HOOK_STATUS, m.log.tail()


def truncate_dies(m, rel):
    """Truncate m's file to NEW: the hook ends rpfs-fuse there, so the
    call fails (the kernel loses its server)."""
    with pytest.raises(OSError) as e:
        os.truncate(os.path.join(m.path, rel), NEW)
    assert e.value.errno in (errno.ENOTCONN, errno.ECONNABORTED), e.value
    kill_hooked(m)


def check_after_crash(path, old):
    """What a truncate to NEW that stopped at any point may leave: the size
    is published (NEW) and the file holds old[:NEW]; or it is not (the old
    size) and the file holds the old bytes or, past NEW, zeros (the iods
    went first). Then growing the file must show zeros from its size on:
    a truncate that reached the mgr can never be followed by old bytes.
    Returns what the file held."""
    size = os.stat(path).st_size
    got = util.read_direct(path)
    if size == NEW:
        same(got, old[:NEW], 'size published')
    else:
        assert size == len(old), size
        zeros = old[:NEW] + bytes(len(old) - NEW)
        if got != old:
            same(got, zeros, 'old size, neither the old bytes nor zeros')
    grow_and_check(path, got, MiB if size == NEW else 2 * MiB)
    return got


@pytest.mark.parametrize('point', ['after-iods', 'after-mgr'])
def test_client_killed_mid_truncate(tmp_path_factory, expect_log, point):
    """A client killed (its test hook) between the iods and the mgr, or
    after the mgr, during a shrink to 100 KiB of a 1 MiB file: a second,
    fresh mount finds either the old size (with the old bytes, or zeros
    past 100 KiB) or 100 KiB; growing the file then shows zeros past
    100 KiB whenever the 100 KiB size was published, and past the old size
    otherwise. With the iods first, after-iods must leave the old size and
    zeros; after-mgr must leave 100 KiB."""
    expect_log(hook_log(point))
    c = cluster(tmp_path_factory, 'trk')
    h = r = None
    try:
        h = mount(c, tmp_path_factory, 'trkh', hook=point)
        make_dir(h, mirror=False)
        old = write_old(os.path.join(h.path, 'd', 'f'))
        truncate_dies(h, 'd/f')
        r = mount(c, tmp_path_factory, 'trkr')
        f = os.path.join(r.path, 'd', 'f')
        got = check_after_crash(f, old)
        want = old[:NEW] if point == 'after-mgr' else \
            old[:NEW] + bytes(MiB - NEW)
        same(got, want, 'the state %s must leave' % point)
    finally:
        util.cleanup(*(x for x in (r, h, c) if x))


@pytest.mark.expect_log(r'^<4>rpfs-fuse: iod 1 \(\S+\): truncate failed: '
                        r'(Connection refused|Input/output error|'
                        r'Connection reset by peer)$',
                        r'^<4>rpfs-mgr: iod 1 \(\S+\) went down: '
                        + util.GONE_ERRS + '$')
def test_iod_down_mid_truncate(tmp_path_factory):
    """An unmirrored file's iod 1 is down during a shrink to 100 KiB: the
    truncate fails with EIO and publishes nothing (the size stays 1 MiB,
    the bytes below 100 KiB stay, every stripe unit piece past it holds its
    old bytes or zeros, never a half of each); with iod 1 back a second
    mount truncates again, which succeeds, and growing the file shows
    zeros past 100 KiB."""
    c = cluster(tmp_path_factory, 'tri')
    a = b = None
    try:
        a = mount(c, tmp_path_factory, 'tria')
        make_dir(a, mirror=False)
        old = write_old(os.path.join(a.path, 'd', 'f'))
        c.kill_iod(1)
        with pytest.raises(OSError) as e:
            os.truncate(os.path.join(a.path, 'd', 'f'), NEW)
        assert e.value.errno == errno.EIO
        c.start_iod(1)
        b = mount(c, tmp_path_factory, 'trib')
        f = os.path.join(b.path, 'd', 'f')
        assert os.stat(f).st_size == MiB, 'a failed truncate published'
        got = util.read_direct(f)
        same(got[:NEW], old[:NEW], 'below the new size')
        for off in range(NEW, MiB, UNIT):  # unit pieces: 100K..128K, ...
            end = min((off // UNIT + 1) * UNIT, MiB)
            if got[off:end] != old[off:end]:
                same(got[off:end], bytes(end - off), 'piece at %d' % off)
        os.truncate(f, NEW)
        assert os.stat(f).st_size == NEW
        same(util.read_direct(f), old[:NEW], 'truncated again')
        grow_and_check(f, old[:NEW], MiB)
    finally:
        util.cleanup(*(x for x in (b, a, c) if x))


def test_grow_cuts_bytes_past_the_share(tmp_path_factory):
    """Objects holding bytes past their share of the file's size (what a
    shrink of the older mgr-first client left when it stopped half way, or
    a writer that died before publishing its size; made here by writing
    the object files directly): a truncate that grows the file to 1 MiB
    must read zeros from the old size on, on a second mount."""
    c = cluster(tmp_path_factory, 'trg')
    a = b = None
    try:
        a = mount(c, tmp_path_factory, 'trga')
        make_dir(a, mirror=False)
        f = os.path.join(a.path, 'd', 'f')
        old = write_old(f)[:NEW]
        with open(f, 'r+b') as fh:
            fh.truncate(NEW)
        junk = 0
        for obj in c.objects(os.stat(f).st_ino):
            if obj is None:
                continue
            with open(obj, 'r+b') as fh:  # up to its share of 1 MiB
                fh.seek(0, os.SEEK_END)
                n = MiB // 4 - fh.tell()
                fh.write(b'\xa5' * n)
                junk += n
        assert junk > 0
        os.truncate(f, MiB)
        b = mount(c, tmp_path_factory, 'trgb')
        got = util.read_direct(os.path.join(b.path, 'd', 'f'))
        same(got, old + bytes(MiB - NEW), 'grown to 1 MiB')
    finally:
        util.cleanup(*(x for x in (b, a, c) if x))


@pytest.mark.parametrize('point', [None, 'after-iods', 'after-mgr'])
@pytest.mark.expect_log(r'^<4>rpfs-fuse: iod 1 \(\S+\): truncate failed: '
                        r'(Connection refused|Input/output error|'
                        r'Connection reset by peer)$',
                        r'^<4>rpfs-mgr: iod [01] \(\S+\) went down: '
                        + util.GONE_ERRS + '$',
                        r'^<4>rpfs-fuse: iod 0 \(\S+\): (read|write|fsync) '
                        r'failed: ' + util.GONE_ERRS + '$')
def test_mirror_replica_down_mid_truncate(tmp_path_factory, expect_log,
                                          point):
    """A mirrored file (mirror=2, groups {0,1} and {2,3}) with iod 1 down
    during a shrink to 100 KiB (point: its client also killed there):
    once iod 1 is back and resynced (rpfs status: no stale object), its
    buddy iod 0 is killed and a second mount grows the file: zeros past
    the size the truncate left, read from iod 1's replica alone (a
    replica the truncate missed must not bring old bytes back)."""
    if point:
        expect_log(hook_log(point))
    c = cluster(tmp_path_factory, 'trm')
    h = r = None
    try:
        h = mount(c, tmp_path_factory, 'trmh', hook=point)
        make_dir(h, mirror=True)
        old = write_old(os.path.join(h.path, 'd', 'f'))
        c.kill_iod(1)
        if point:
            truncate_dies(h, 'd/f')
        else:
            os.truncate(os.path.join(h.path, 'd', 'f'), NEW)
        c.start_iod(1)
        util.wait_until(lambda: stale_total(c) == 0, 60, 0.2,
                        'resync of iod 1')
        c.kill_iod(0)
        r = mount(c, tmp_path_factory, 'trmr')
        check_after_crash(os.path.join(r.path, 'd', 'f'), old)
        c.start_iod(0)
    finally:
        util.cleanup(*(x for x in (r, h, c) if x))


OWNER_FTRUNCATE = '''
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, bytes((i % 251) + 1 for i in range(1 << 20)))
os.fchmod(fd, 0o444)
os.ftruncate(fd, int(sys.argv[2]))
os.close(fd)
'''


def test_permission_checked_before_iods(tmp_path_factory):
    """The iods are cut only once the mgr has said the caller may
    truncate: root, squashed by the mgr (--root-squash) but let through by
    its kernel, gets EACCES for a file of uid 0 (mode 0644) and the file
    keeps every byte; the owner (uid 1000) may still ftruncate its file
    after taking the write bit away (mode 0444), as SETATTR allows."""
    c = cluster(tmp_path_factory, 'trp')
    a = b = None
    try:
        a = mount(c, tmp_path_factory, 'trpa')
        d = make_dir(a, mirror=False)
        os.chmod(d, 0o777)
        f = os.path.join(d, 'f')
        old = write_old(f)
        c.mgr.stop()
        c.mgr.argv = c.mgr.argv + ['--root-squash']
        c.mgr.start()
        with pytest.raises(OSError) as e:
            os.truncate(f, NEW)
        assert e.value.errno == errno.EACCES
        r = util.run(['setpriv', '--reuid', '1000', '--regid', '1000',
                      '--clear-groups', '/usr/bin/python3', '-c',
                      OWNER_FTRUNCATE, os.path.join(d, 'g'), str(NEW)],
                     check=False)
        assert r.returncode == 0, r.stderr
        b = mount(c, tmp_path_factory, 'trpb')
        same(util.read_direct(os.path.join(b.path, 'd', 'f')), old,
             'refused truncate')
        g = os.path.join(b.path, 'd', 'g')
        st = os.stat(g)
        assert (st.st_uid, st.st_mode & 0o777, st.st_size) == \
            (1000, 0o444, NEW)
        same(util.read_direct(g), old[:NEW], "the owner's ftruncate")
    finally:
        util.cleanup(*(x for x in (b, a, c) if x))


def test_hook_value_checked(tmp_path):
    """A value of $RPFS_FUSE_TEST_TRUNCATE_EXIT that names no point stops
    rpfs-fuse before it mounts, with exit status 2 and the value named."""
    env = dict(os.environ, RPFS_FUSE_TEST_TRUNCATE_EXIT='after-both')
    r = util.run([util.binary('fuse-client/rpfs-fuse'), '127.0.0.1:1',
                  str(tmp_path), '-f'], check=False, timeout=30, env=env)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert ('rpfs-fuse: RPFS_FUSE_TEST_TRUNCATE_EXIT=after-both: expected '
            'after-iods or after-mgr') in r.stderr, r.stderr
    assert not util.is_mounted(str(tmp_path))
