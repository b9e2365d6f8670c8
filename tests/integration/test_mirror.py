"""Mirrored layouts (mirror=2, mgr/repair/README.md "Mirroring").

4 iods form 2 mirror groups, {0,1} and {2,3} (or, with failure domains,
pairs across the domains). A mirror=2 file's stripe units go round-robin
over the groups and both iods of a group hold byte-identical objects.
These tests read the iods' object files directly, so they fail if only
one replica is written, and kill iods to check the degraded rules: reads
and writes go on against the surviving replica, the mgr durably records
the replica that missed writes, and a piece whose replicas are both gone
gives EIO.
"""
import errno
import json
import os
import re
import signal
import subprocess
import time

import pytest

import util

KiB = 1024
MiB = 1024 * KiB
UNIT = 64 * KiB


def rpfs(*args, check=False, timeout=60):
    return util.run([util.binary('admin/rpfs')] + [str(a) for a in args],
                    check=check, timeout=timeout)


def layout_of(path):
    """user.rpfs.layout of path as a dict of ints."""
    text = os.getxattr(path, 'user.rpfs.layout').decode()
    return {k: int(v) for k, v in (kv.split('=') for kv in text.split(','))}


def mirror_dir(parent, name='m', count=2):
    d = os.path.join(parent, name)
    os.mkdir(d)
    os.setxattr(d, 'user.rpfs.layout',
                ('unit=%d,count=%d,mirror=2' % (UNIT, count)).encode())
    return d


STATUS_ROW = re.compile(r'^iod +(\d+) .*, group (\d+), stale objects: (\d+), '
                        r'resynced: (\d+) \((\d+) bytes\)$', re.M)


def status_rows(c):
    """iod -> (group, stale objects) from the rows of rpfs status."""
    return {i: (g, n) for i, (g, n, _d, _b) in status_full(c).items()}


def status_full(c):
    """iod -> (group, stale objects, resynced, bytes resynced) from the
    rows of rpfs status."""
    r = rpfs('status', '--mgr', util.hostport(c.mgr_port))
    got = {int(m[0]): tuple(int(x) for x in m[1:])
           for m in STATUS_ROW.findall(r.stdout)}
    assert got, r.stdout
    return got


def groups_of(c):
    """The mirror groups rpfs status reports: {g: (a, b)}, a < b."""
    groups = {}
    for i, (g, _n) in sorted(status_rows(c).items()):
        groups[g] = groups.get(g, ()) + (i,)
    return groups


def stale_counts(c):
    """iod -> stale objects, from rpfs status."""
    return {i: n for i, (_g, n) in status_rows(c).items()}


# The errors a killed iod gives its peers, and a stopped one (SIGSTOP: the
# calls to it time out).
KILLED = util.GONE_ERRS
STOPPED = r'(Connection timed out|%s)' % util.GONE_ERRS[1:-1]


def expect_iods_gone(expect_log, c, iods, errs=KILLED):
    """Expect, for each iod of iods, the exact warnings of its loss: the
    clients' failed read, write or fsync to it and the mgr's poll finding
    it down, each with one of errs."""
    for i in iods:
        expect_log(util.client_iod_fail_log(c, i, 'read|write|fsync', errs))
        expect_log(util.mgr_iod_down_log(c, i, errs))


def read_obj(path):
    if path is None:
        return b''
    with open(path, 'rb') as f:
        return f.read()


def check_replicas(c, path, data):
    """Both replicas of every group the file uses are byte-identical and
    hold the stripe units the layout math puts there."""
    lay = layout_of(path)
    assert lay['mirror'] == 2
    groups = groups_of(c)
    objs = c.objects(os.stat(path).st_ino)
    unit, count, first = lay['unit'], lay['count'], lay['first']
    for g in range(count):
        a, b = groups[(first + g) % len(groups)]
        oa, ob = read_obj(objs[a]), read_obj(objs[b])
        assert oa == ob, 'group %d: iods %d and %d differ' % (g, a, b)
    nunits = (len(data) + unit - 1) // unit
    for u in range(nunits):
        a, b = groups[(first + u % count) % len(groups)]
        local = (u // count) * unit
        want = data[u * unit:(u + 1) * unit]
        for i in (a, b):
            got = read_obj(objs[i])[local:local + len(want)]
            got += bytes(len(want) - len(got))  # past the object: a hole
            assert got == want, 'unit %d on iod %d' % (u, i)


def iod_push_bytes(c):
    """Read bytes each iod pushed so far (its STATUS counters)."""
    out = []
    for p in c.iod_ports:
        r = rpfs('stats', '--server', util.hostport(p))
        assert r.returncode == 0, r.stderr
        out.append(json.loads(r.stdout)['bulk_push_bytes'])
    return out


@pytest.fixture(scope='module')
def mc(tmp_path_factory):
    """A 4-iod cluster (fs default mirror 1) and a mount."""
    c = util.Cluster(str(tmp_path_factory.mktemp('mir')), niods=4, name='mir')
    util.clusters.append(c)
    c.start()
    path = str(tmp_path_factory.mktemp('mirmnt'))
    util.make_traversable(path)
    m = c.mount(path, 'allow_other')
    yield c, m
    util.cleanup(m, c)


@pytest.fixture
def mdir(mc, request):
    c, m = mc
    name = re.sub(r'[^A-Za-z0-9_.-]', '_', request.node.name)[:200]
    p = os.path.join(m.path, name)
    os.mkdir(p)
    return p


def test_groups_plain(mc):
    c, _m = mc
    assert groups_of(c) == {0: (0, 1), 1: (2, 3)}


def test_setfattr_dir_mirror_inherited(mc, mdir):
    d = mirror_dir(mdir)
    assert layout_of(d)['mirror'] == 2
    f = os.path.join(d, 'f')
    open(f, 'w').close()
    lay = layout_of(f)
    assert lay['mirror'] == 2 and lay['count'] == 2 and lay['first'] < 2
    sub = os.path.join(d, 'sub')
    os.mkdir(sub)
    open(os.path.join(sub, 'g'), 'w').close()
    assert layout_of(os.path.join(sub, 'g'))['mirror'] == 2
    # mirror=1 formats without the key
    os.setxattr(f, 'user.rpfs.layout', b'unit=65536,count=4,mirror=1')
    assert 'mirror' not in os.getxattr(f, 'user.rpfs.layout').decode()


def test_setlayout_cli(mc, mdir):
    f = os.path.join(mdir, 'f')
    open(f, 'w').close()
    r = rpfs('setlayout', f, 'unit=131072,count=1,mirror=2')
    assert r.returncode == 0, r.stderr
    lay = layout_of(f)
    assert lay['mirror'] == 2 and lay['count'] == 1 and lay['unit'] == 131072
    r = rpfs('getlayout', f)
    assert r.returncode == 0 and r.stdout.strip().endswith(',mirror=2')


def test_bad_mirror_values(mc, mdir):
    f = os.path.join(mdir, 'f')
    open(f, 'w').close()
    for bad in (b'unit=65536,count=2,mirror=3', b'unit=65536,count=2,mirror=0',
                b'unit=65536,count=3,mirror=2'):
        with pytest.raises(OSError) as e:
            os.setxattr(f, 'user.rpfs.layout', bad)
        assert e.value.errno == errno.EINVAL, bad
    r = rpfs('setlayout', f, 'unit=65536,count=2,mirror=3')
    assert r.returncode == 2
    assert 'mirror: expected 1 or 2, got "3"' in r.stderr
    r = rpfs('setlayout', f, 'unit=65536,count=3,mirror=2')
    assert r.returncode == 1 and 'mirror groups' in r.stderr
    assert 'mirror' not in os.getxattr(f, 'user.rpfs.layout').decode()


def test_write_8m_both_replicas(mc, mdir):
    c, _m = mc
    f = os.path.join(mirror_dir(mdir), 'big')
    data = os.urandom(8 * MiB)
    with open(f, 'wb') as fh:
        fh.write(data)
    with open(f, 'rb') as fh:
        assert fh.read() == data
    check_replicas(c, f, data)
    # st_blocks counts one copy of the data, not both replicas
    blocks = os.stat(f).st_blocks * 512
    assert len(data) <= blocks < len(data) + MiB, blocks


def test_overwrite_truncate_replicas(mc, mdir):
    """Unaligned overwrites and a truncate reach both replicas."""
    c, _m = mc
    f = os.path.join(mirror_dir(mdir), 'ow')
    data = bytearray(os.urandom(3 * MiB + 1234))
    with open(f, 'wb') as fh:
        fh.write(data)
    with open(f, 'r+b') as fh:
        for off, n in ((1, 7), (UNIT - 3, 10), (5 * UNIT + 17, 3 * UNIT + 5)):
            b = os.urandom(n)
            fh.seek(off)
            fh.write(b)
            data[off:off + n] = b
        os.fsync(fh.fileno())
        fh.truncate(2 * MiB + 99)
    del data[2 * MiB + 99:]
    with open(f, 'rb') as fh:
        assert fh.read() == bytes(data)
    check_replicas(c, f, bytes(data))


def test_reads_spread_over_buddies(mc, mdir):
    c, _m = mc
    f = os.path.join(mirror_dir(mdir), 'spread')
    data = os.urandom(16 * MiB)
    with open(f, 'wb') as fh:
        fh.write(data)
    before = iod_push_bytes(c)
    r = util.run(['dd', 'if=' + f, 'of=/dev/null', 'bs=1M', 'iflag=direct'],
                 check=False)
    assert r.returncode == 0, r.stderr
    after = iod_push_bytes(c)
    served = [a - b for a, b in zip(after, before)]
    assert all(s > 0 for s in served), served
    assert sum(served) >= len(data)


def test_odirect_unaligned_interleaved(mc, mdir):
    import mmap
    f = os.path.join(mirror_dir(mdir), 'od')
    data = os.urandom(4 * MiB)
    buf = mmap.mmap(-1, len(data))
    buf.write(data)
    fd = os.open(f, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
    try:
        assert os.pwrite(fd, buf, 0) == len(data)
        rb = mmap.mmap(-1, len(data))
        assert os.preadv(fd, [rb], 0) == len(data)
        assert bytes(rb) == data
    finally:
        os.close(fd)
    # unaligned, across units and groups, through the page cache path
    with open(f, 'rb') as fh:
        for off, n in ((3, 5), (UNIT - 1, 2), (UNIT * 3 - 100, UNIT * 2 + 300),
                       (len(data) - 7, 7)):
            fh.seek(off)
            assert fh.read(n) == data[off:off + n]


def test_listio_librpfs(mc, mdir, tmp_path):
    c, m = mc
    d = mirror_dir(mdir)
    f = os.path.join(d, 'lw')
    ref = str(tmp_path / 'ref')
    argv = [util.binary('fuse-client/rpfs-listio-test'), 'write',
            util.hostport(c.mgr_port), os.path.relpath(f, m.path), 77, 'plain', ref]
    p = subprocess.run([str(a) for a in argv], env=c.env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    want = open(ref, 'rb').read()
    with open(f, 'rb') as fh:
        assert fh.read() == want
    assert layout_of(f)['mirror'] == 2
    check_replicas(c, f, want)


def test_fio_verify(mc, mdir):
    d = mirror_dir(mdir)
    f = os.path.join(d, 'fio.dat')
    p = subprocess.run(['fio', '--name=mir', '--verify_state_save=0', '--ioengine=psync', '--filename=' + f,
                        '--rw=randwrite', '--size=4m', '--bsrange=4k-256k',
                        '--randrepeat=1', '--randseed=7', '--verify=crc32c',
                        '--fsync=8', '--output-format=normal'],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert 'err= 0' in p.stdout
    assert layout_of(f)['mirror'] == 2


def test_default_mirror_flag(tmp_path_factory):
    """rpfs-mgr --mirror 2: new files are mirrored over all groups."""
    c = util.Cluster(str(tmp_path_factory.mktemp('mirf')), niods=4, name='mirf',
                     mgr_args=['--mirror', '2'])
    util.clusters.append(c)
    m = None
    try:
        c.start()
        path = str(tmp_path_factory.mktemp('mirfm'))
        m = c.mount(path, 'allow_other')
        f = os.path.join(path, 'f')
        data = os.urandom(MiB + 5)
        with open(f, 'wb') as fh:
            fh.write(data)
        lay = layout_of(f)
        assert lay['mirror'] == 2 and lay['count'] == 2
        check_replicas(c, f, data)
        r = util.run([util.binary('mgr/rpfs-mgr'), '--listen', '127.0.0.1:0',
                      '--db', str(tmp_path_factory.mktemp('x')), '--iod',
                      '127.0.0.1:1', '--mirror', '3'], check=False)
        assert r.returncode == 2 and '--mirror: expected 1 or 2, got "3"' in r.stderr
        # one iod forms no group: mirror=2 cannot be the default
        r = util.run([util.binary('mgr/rpfs-mgr'), '--listen', '127.0.0.1:0',
                      '--db', str(tmp_path_factory.mktemp('y')), '--iod',
                      '127.0.0.1:1', '--mirror', '2'], check=False, timeout=30)
        assert r.returncode == 1 and 'mirror=2 needs at least 2 iods' in r.stderr
    finally:
        util.cleanup(*(x for x in (m, c) if x))


def _domain_conf(c, path, domains, extra=''):
    util.write_conf(c, path, extra=extra)
    text = open(path).read()
    for i, d in enumerate(domains):
        text = text.replace('[iod.%d]\n' % i, '[iod.%d]\ndomain = %s\n' % (i, d))
    open(path, 'w').write(text)
    return path


def test_conf_domains_and_mirror(tmp_path_factory):
    """[iod.N] domain pairs across domains; [layout] mirror = 2 is the
    default; a domain set that cannot pair refuses to start."""
    tmp = str(tmp_path_factory.mktemp('mird'))
    c = util.Cluster(tmp, niods=4, name='mird')
    conf = _domain_conf(c, os.path.join(tmp, 'rpfs.conf'),
                        ['rackA', 'rackA', 'rackB', 'rackB'],
                        '[layout]\nmirror = 2\n')
    for i, d in enumerate(c.iods):
        d.argv = [util.binary('iod/rpfs-iod'), '--conf', conf, '--id', str(i)]
    c.mgr.argv = [util.binary('mgr/rpfs-mgr'), '--conf', conf]
    util.clusters.append(c)
    m = None
    try:
        c.start()
        assert groups_of(c) == {0: (0, 2), 1: (1, 3)}
        path = str(tmp_path_factory.mktemp('mirdm'))
        m = c.mount(path, 'allow_other')
        f = os.path.join(path, 'f')
        data = os.urandom(2 * MiB)
        with open(f, 'wb') as fh:
            fh.write(data)
        assert layout_of(f)['mirror'] == 2
        check_replicas(c, f, data)
    finally:
        util.cleanup(*(x for x in (m, c) if x))
    # three of four iods in one domain: no pairing across domains
    tmp2 = str(tmp_path_factory.mktemp('mird2'))
    c2 = util.Cluster(tmp2, niods=4, name='mird2')
    conf2 = _domain_conf(c2, os.path.join(tmp2, 'rpfs.conf'), ['a', 'b', 'b', 'b'])
    r = util.run([util.binary('mgr/rpfs-mgr'), '--conf', conf2], check=False,
                 timeout=30)
    assert r.returncode == 1, r.stderr
    assert 'domain "b" holds 3 of the 4 iods (domains: a=1 b=3)' in r.stderr
    # a bad name, and a table where only some iods name a domain
    conf3 = _domain_conf(c2, os.path.join(tmp2, 'bad.conf'), ['a', 'b/c', 'd', 'e'])
    r = util.run([util.binary('mgr/rpfs-mgr'), '--conf', conf3], check=False)
    assert r.returncode == 2 and 'domain: expected 1..63' in r.stderr
    assert '"b/c"' in r.stderr
    conf4 = _domain_conf(c2, os.path.join(tmp2, 'some.conf'), ['a', 'b'])
    r = util.run([util.binary('mgr/rpfs-mgr'), '--conf', conf4], check=False)
    assert r.returncode == 2 and 'every iod or none' in r.stderr
    conf5 = _domain_conf(c2, os.path.join(tmp2, 'm3.conf'), [], '[layout]\nmirror = 3\n')
    r = util.run([util.binary('mgr/rpfs-mgr'), '--conf', conf5], check=False)
    assert r.returncode == 2 and '[layout] mirror: expected 1 or 2, got "3"' in r.stderr


def test_degraded(tmp_path_factory, expect_log):
    """Kill one iod of a group: mirror=2 reads and writes go on, the stale
    record is durable; mirror=1 data there gives EIO; kill its buddy too:
    the mirrored pieces there give EIO."""
    c = util.Cluster(str(tmp_path_factory.mktemp('mirk')), niods=4, name='mirk')
    util.clusters.append(c)
    m = None
    try:
        c.start()
        expect_iods_gone(expect_log, c, (0, 1))
        path = str(tmp_path_factory.mktemp('mirkm'))
        # timeout above the mgr's 8 s lease: a STALE_MARK for a dead iod
        # is answered once the iod's lease has surely run out
        m = c.mount(path, 'allow_other,timeout=10')
        d = mirror_dir(path)
        f = os.path.join(d, 'f')
        data = bytearray(os.urandom(4 * MiB))
        with open(f, 'wb') as fh:
            fh.write(data)
        plain = os.path.join(path, 'plain')
        with open(plain, 'wb') as fh:
            fh.write(os.urandom(MiB))
        assert layout_of(plain).get('mirror', 1) == 1
        assert stale_counts(c)[1] == 0

        c.kill_iod(1)
        for _ in range(3):  # both replica choices get tried
            with open(f, 'rb') as fh:
                assert fh.read() == bytes(data)
        new = os.urandom(2 * MiB)
        with open(f, 'r+b') as fh:
            fh.seek(MiB)
            fh.write(new)
            os.fsync(fh.fileno())
        data[MiB:3 * MiB] = new
        with open(f, 'rb') as fh:
            assert fh.read() == bytes(data)
        assert stale_counts(c)[1] == 1
        with pytest.raises(OSError) as e:
            with open(plain, 'rb') as fh:
                fh.read()
        assert e.value.errno == errno.EIO

        # the record is durable: it survives a mgr restart
        c.mgr.stop()
        c.mgr.start()
        assert stale_counts(c)[1] == 1
        assert stale_counts(c)[0] == 0

        # iod 1 comes back with the old bytes of [1 MiB, 3 MiB): this
        # client recorded its replica stale and never reads it (reads
        # alternate replicas, so a few whole-file reads would hit it)
        c.start_iod(1)
        for _ in range(4):
            assert util.read_direct(f, len(data)) == bytes(data)

        # both replicas of group 0 gone: its pieces give EIO, group 1 reads
        c.kill_iod(1)
        c.kill_iod(0)
        lay = layout_of(f)
        g0_unit = (0 - lay['first']) % 2  # the first unit on group 0
        g1_unit = 1 - g0_unit
        import mmap
        buf = mmap.mmap(-1, UNIT)
        fd = os.open(f, os.O_RDONLY | os.O_DIRECT)  # no readahead over group 0
        try:
            assert os.preadv(fd, [buf], g1_unit * UNIT) == UNIT
            assert bytes(buf) == bytes(data[g1_unit * UNIT:(g1_unit + 1) * UNIT])
            with pytest.raises(OSError) as e:
                os.preadv(fd, [buf], g0_unit * UNIT)
            assert e.value.errno == errno.EIO
        finally:
            os.close(fd)
    finally:
        util.cleanup(*(x for x in (m, c) if x))


def _mirror_cluster(tmp_path_factory, name, mgr_args=()):
    c = util.Cluster(str(tmp_path_factory.mktemp(name)), niods=4, name=name,
                     mgr_args=mgr_args)
    util.clusters.append(c)
    c.start()
    return c


def _mount(c, tmp_path_factory, tag, opts='allow_other,timeout=3'):
    path = str(tmp_path_factory.mktemp(tag))
    util.make_traversable(path)
    return c.mount(path, opts)


def _degraded_overwrite(c, m, pause):
    """Write a 4 MiB mirrored file through m, take iod 1 away with pause()
    (its replica misses the overwrite of [1 MiB, 3 MiB)), and return (the
    file's name below the mount, the data it now holds)."""
    d = mirror_dir(m.path)
    f = os.path.join(d, 'f')
    data = bytearray(os.urandom(4 * MiB))
    with open(f, 'wb') as fh:
        fh.write(data)
        os.fsync(fh.fileno())
    pause()
    new = os.urandom(2 * MiB)
    with open(f, 'r+b') as fh:
        fh.seek(MiB)
        fh.write(new)
        os.fsync(fh.fileno())
    data[MiB:3 * MiB] = new
    assert stale_counts(c)[1] >= 1
    return os.path.relpath(f, m.path), bytes(data)


def test_fence_other_client_and_resync(tmp_path_factory, expect_log):
    """An iod back with a stale replica refuses its mirrored reads (the
    mgr fenced it), so a client that never saw the failure (a second
    mount) reads the new bytes on every try, with resync off; once the
    mgr resyncs, the record goes, the replicas are byte-identical and the
    iod serves reads again."""
    c = _mirror_cluster(tmp_path_factory, 'mirf', ('--resync-rate', '0'))
    expect_iods_gone(expect_log, c, (1,))
    ma = mb = None
    try:
        ma = _mount(c, tmp_path_factory, 'mirfa')
        rel, data = _degraded_overwrite(c, ma, lambda: c.kill_iod(1))
        c.start_iod(1)
        mb = _mount(c, tmp_path_factory, 'mirfb')
        fb = os.path.join(mb.path, rel)
        pushed = iod_push_bytes(c)[1]
        for _ in range(8):  # reads alternate replicas: iod 1 is asked too
            assert util.read_direct(fb, len(data)) == data
            assert util.read_direct(os.path.join(ma.path, rel), len(data)) == data
        assert iod_push_bytes(c)[1] == pushed, 'the stale replica served a read'
        time.sleep(3)  # resync is off: the record stays
        assert stale_counts(c)[1] >= 1

        c.mgr.stop()
        c.mgr.argv = [a for a in c.mgr.argv if a not in ('--resync-rate', '0')]
        c.mgr.start()
        util.wait_until(lambda: stale_counts(c)[1] == 0, 60, 0.2, 'resync of iod 1')
        rows = rpfs('status', '--mgr', util.hostport(c.mgr_port)).stdout
        m = re.search(r'^iod +1 .*resynced: (\d+) \((\d+) bytes\)$', rows, re.M)
        assert m and int(m.group(1)) >= 1 and int(m.group(2)) > 0, rows
        check_replicas(c, fb, data)
        # unfenced: iod 1 serves reads again (the next fence round); every
        # read meanwhile returns the data, whichever replica serves it
        def iod1_served():
            assert util.read_direct(fb, len(data)) == data
            return iod_push_bytes(c)[1] > pushed
        util.wait_until(iod1_served, 30, 0.2,
                        'iod 1 serving reads after the resync')
    finally:
        util.cleanup(*(x for x in (mb, ma, c) if x))


def test_fence_stopped_iod_lease(tmp_path_factory, expect_log):
    """A hung iod (SIGSTOP) that missed a write cannot serve the old bytes
    when it wakes up: the mgr answered the client's STALE_MARK only after
    the iod's lease had surely run out, and the iod gets a new lease only
    with its new fence set. A second client reads right after SIGCONT."""
    c = _mirror_cluster(tmp_path_factory, 'mirl', ('--resync-rate', '0'))
    expect_iods_gone(expect_log, c, (1,), STOPPED)
    if util.transport() == 'verbs':
        # the resumed iod refuses the connect requests that waited for it
        expect_log(r'^<4>rpfs-iod: net: \S+: cannot set up a verbs '
                   r'connection; refusing$')
    ma = mb = None
    try:
        ma = _mount(c, tmp_path_factory, 'mirla')
        mb = _mount(c, tmp_path_factory, 'mirlb')
        rel, data = _degraded_overwrite(
            c, ma, lambda: c.iods[1].proc.send_signal(signal.SIGSTOP))
        c.iods[1].proc.send_signal(signal.SIGCONT)
        fb = os.path.join(mb.path, rel)
        for _ in range(8):
            assert util.read_direct(fb, len(data)) == data
        assert stale_counts(c)[1] >= 1
    finally:
        c.iods[1].proc.send_signal(signal.SIGCONT)
        util.cleanup(*(x for x in (mb, ma, c) if x))


def _resync_cluster(tmp_path_factory, name, conf_extra, mgr_extra=()):
    """A 4-iod cluster run from an rpfs.conf (plus conf_extra), with
    mgr_extra on the mgr's command line, and a mount with a timeout above
    the mgr's lease (a STALE_MARK for a dead iod waits for it)."""
    tmp = str(tmp_path_factory.mktemp(name))
    c = util.Cluster(tmp, niods=4, name=name)
    conf = util.write_conf(c, os.path.join(tmp, 'rpfs.conf'), extra=conf_extra)
    for i, d in enumerate(c.iods):
        d.argv = [util.binary('iod/rpfs-iod'), '--conf', conf, '--id', str(i)]
    c.mgr.argv = [util.binary('mgr/rpfs-mgr'), '--conf', conf] + list(mgr_extra)
    util.clusters.append(c)
    c.start()
    path = str(tmp_path_factory.mktemp(name + 'm'))
    m = c.mount(path, 'allow_other,timeout=10')
    return c, m, path


def _degraded_write(c, path, size, count=2):
    """Write a mirrored file, kill iod 1, overwrite part of it and grow it
    (degraded: iod 1's replica is recorded stale), and return (file,
    data)."""
    f = os.path.join(mirror_dir(path, count=count), 'f')
    data = bytearray(os.urandom(size))
    with open(f, 'wb') as fh:
        fh.write(data)
    c.kill_iod(1)
    new = os.urandom(size // 2 + 3 * UNIT + 5)
    with open(f, 'r+b') as fh:
        fh.seek(size // 4)
        fh.write(new)
        os.fsync(fh.fileno())
    data[size // 4:size // 4 + len(new)] = new
    assert stale_counts(c)[1] == 1
    return f, bytes(data)


def test_resync(tmp_path_factory, expect_log):
    """An iod back from a degraded write is resynced by the mgr from its
    buddy: the record goes (stale objects 0), rpfs status counts what was
    done, both replicas are byte-identical and hold what was written; the
    copy keeps to --resync-rate (the command line wins over [mgr]
    resync_rate = 0 in the file)."""
    rate = 10  # MB/s
    c, m, path = _resync_cluster(tmp_path_factory, 'mirs',
                                 '[mgr]\nresync_rate = 0\n',
                                 ['--resync-rate', str(rate)])
    expect_iods_gone(expect_log, c, (1,))
    try:
        f, data = _degraded_write(c, path, 24 * MiB)
        obj1 = c.objects(os.stat(f).st_ino)[1]
        old = read_obj(obj1)
        t0 = time.monotonic()
        c.start_iod(1)
        util.wait_until(lambda: status_full(c)[1][1:3] == (0, 1), 60, 0.2,
                        'iod 1 resynced')
        elapsed = time.monotonic() - t0
        rows = status_full(c)
        assert all(r[1] == 0 for r in rows.values()), rows
        assert [r[2] for _i, r in sorted(rows.items())] == [0, 1, 0, 0]
        copied = rows[1][3]
        size1 = len(read_obj(obj1))
        assert copied >= size1 == 12 * MiB  # the whole object, at least
        assert read_obj(obj1) != old
        check_replicas(c, f, data)
        with open(f, 'rb') as fh:
            assert fh.read() == data
        # the first 1 MiB piece goes at once, the rest at the rate
        assert elapsed >= (copied - MiB) / (rate * 1e6), (copied, elapsed)
        log = open(c.mgr.log.path).read()
        assert re.search(r'<5>rpfs-mgr: iod 1: inode %d resynced from iod 0: '
                         r'%d bytes copied, \d compare passes'
                         % (os.stat(f).st_ino, copied), log), log[-3000:]
        print('resync: %d bytes in %.2f s from the iod restart (rate %d MB/s)'
              % (copied, elapsed, rate))
    finally:
        util.cleanup(m, c)


def test_resync_off(tmp_path_factory, expect_log):
    """[mgr] resync_rate = 0: the record of an iod back from a degraded
    write stays, and so does its stale replica; a bad value is refused
    with the file and line."""
    c, m, path = _resync_cluster(tmp_path_factory, 'miro',
                                 '[mgr]\nresync_rate = 0\n')
    expect_iods_gone(expect_log, c, (1,))
    try:
        f, data = _degraded_write(c, path, 4 * MiB, count=1)
        c.start_iod(1)
        util.wait_until(lambda: re.search(r'iod 1 \(\S+\) is up again',
                                          open(c.mgr.log.path).read()),
                        30, 0.2, 'the mgr sees iod 1 up')
        time.sleep(3)  # a few resync periods
        rows = status_full(c)
        assert rows[1][1:] == (1, 0, 0), rows
        objs = c.objects(os.stat(f).st_ino)
        g = [grp for grp in groups_of(c).values() if 1 in grp][0]
        assert read_obj(objs[g[0]]) != read_obj(objs[g[1]])
        assert 'resync is off' in open(c.mgr.log.path).read()
    finally:
        util.cleanup(m, c)
    bad = util.write_conf(c, os.path.join(c.state, 'bad.conf'),
                          extra='[mgr]\nresync_rate = 100001\n')
    r = util.run([util.binary('mgr/rpfs-mgr'), '--conf', bad], check=False)
    assert r.returncode == 2, r.stderr
    line = open(bad).read().splitlines().index('resync_rate = 100001') + 1
    assert ('bad.conf:%d: [mgr] resync_rate: expected MB/s 0..100000 '
            '(0 = resync off), got "100001"' % line) in r.stderr
    r = util.run([util.binary('mgr/rpfs-mgr'), '--conf', bad, '--resync-rate',
                  'x'], check=False)
    assert r.returncode == 2
    assert '--resync-rate: expected MB/s 0..100000 (0 = resync off), got "x"' \
        in r.stderr


def test_resynced_replica_read_after_buddy_lost(tmp_path_factory, expect_log):
    """For each iod X of each group in turn: X is killed, a mirrored file
    is written and synced (X's replica recorded stale), X comes back and
    the mgr resyncs it (rpfs status: 0 stale objects), then X's buddy Y is
    killed. The file must read intact from X alone, on the mount that
    wrote it (which recorded X stale itself) and on a second mount. Every
    earlier cycle's file is read again too, with its own survivor."""
    c = _mirror_cluster(tmp_path_factory, 'mirb')
    expect_iods_gone(expect_log, c, range(4))
    ma = mb = None
    try:
        ma = _mount(c, tmp_path_factory, 'mirba', 'allow_other,timeout=10')
        mb = _mount(c, tmp_path_factory, 'mirbb', 'allow_other,timeout=10')
        d = mirror_dir(ma.path)
        files = []
        for x, y in ((1, 0), (0, 1), (3, 2), (2, 3)):
            c.kill_iod(x)
            f = os.path.join(d, 'f%d' % x)
            data = os.urandom(8 * MiB)
            with open(f, 'wb') as fh:
                fh.write(data)
                os.fsync(fh.fileno())
            assert stale_counts(c)[x] == 1
            c.start_iod(x)
            util.wait_until(lambda: stale_counts(c)[x] == 0, 60, 0.2,
                            'resync of iod %d' % x)
            files.append((os.path.relpath(f, ma.path), data))
            c.kill_iod(y)
            for rel, want in files:
                for m in (ma, mb):
                    got = util.read_direct(os.path.join(m.path, rel), len(want))
                    assert got == want, '%s through %s, iod %d down' % (
                        rel, m.name, y)
            c.start_iod(y)
    finally:
        util.cleanup(*(x for x in (mb, ma, c) if x))
