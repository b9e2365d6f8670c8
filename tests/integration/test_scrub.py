"""`rpfs scrub`: online orphan reclamation and replica compare at a bounded
rate (mgr/repair/README.md "Scrub"). Orphans are injected on purpose: stripe
objects of inodes that do not exist, written straight into the iods' data
directories with an old mtime, and mgr orphan inodes left by a client killed
between unlink and purge. Replicas of mirrored files are damaged on purpose
the same way: bytes overwritten or the object truncated inside one iod's
data directory. Real daemons, real FUSE mounts."""
import os
import re
import signal
import threading
import time

import pytest

import util
from test_mirror import groups_of, layout_of, stale_counts

MB = 1 << 20
GHOST = 0x7a000000  # inode numbers far above any this test allocates


def rpfs(*args, timeout=120):
    return util.run([util.binary('admin/rpfs')] + list(args), check=False,
                    timeout=timeout)


def scrub(c, *args):
    return rpfs('scrub', '--mgr', util.hostport(c.mgr_port), *args)


def report(r):
    """The numbers of a scrub report, by line."""
    assert r.returncode == 0, 'scrub failed (%d):\n%s\n%s' % (r.returncode, r.stdout,
                                                             r.stderr)
    out = r.stdout
    m = re.search(r'^objects checked: (\d+) on (\d+) iods, (\d+) orphan inodes at the mgr$',
                  out, re.M)
    assert m, out
    rec = re.search(r'^(orphans reclaimed|orphans found \(dry run, nothing removed\)): '
                    r'(\d+) iod objects, (\d+) mgr inodes$', out, re.M)
    assert rec, out
    freed = re.search(r'^(bytes freed|bytes that would be freed): (\d+)$', out, re.M)
    left = re.search(r'^left for a later scrub .*: (\d+) iod objects, (\d+) mgr inodes$',
                     out, re.M)
    assert freed and left, out
    comp = re.search(r'^replicas compared: (\d+) \((\d+) bytes\)$', out, re.M)
    mis = re.search(r'^mismatches found: (\d+), repaired: (\d+)( \(dry run\))?$',
                    out, re.M)
    resync = re.search(r'^replicas left to resync: (\d+)$', out, re.M)
    assert comp and mis and resync, out
    dry = rec.group(1) != 'orphans reclaimed'
    assert bool(mis.group(3)) == dry, out
    assert not dry or int(mis.group(2)) == 0, out
    return {'checked': int(m.group(1)), 'iods': int(m.group(2)),
            'orphans_checked': int(m.group(3)), 'dry': dry,
            'iod': int(rec.group(2)), 'mgr': int(rec.group(3)),
            'bytes': int(freed.group(2)), 'young_iod': int(left.group(1)),
            'young_mgr': int(left.group(2)), 'compared': int(comp.group(1)),
            'cbytes': int(comp.group(2)), 'mismatches': int(mis.group(1)),
            'repaired': int(mis.group(2)), 'resync': int(resync.group(1)),
            'lines': re.findall(r'^mismatch: .*$', out, re.M), 'out': out}


def object_files(c):
    """Every object file on every iod."""
    out = []
    for d in c.iod_dirs:
        for root, _dirs, files in os.walk(os.path.join(d, 'objects')):
            out += [os.path.join(root, f) for f in files]
    return out


def inject(c, iod, ino, size, age):
    """Write an object for inode ino (which the mgr does not know) into
    iod's data directory, as a crashed client would have left it, with an
    mtime age seconds ago. Returns (path, bytes it occupies)."""
    d = os.path.join(c.iod_dirs[iod], 'objects', '%02x' % (ino & 0xff),
                     '%02x' % ((ino >> 8) & 0xff))
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, '%016x' % ino)
    with open(p, 'wb') as f:
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())
    t = time.time() - age
    os.utime(p, (t, t))
    return p, os.stat(p).st_blocks * 512


def make_file(path, size):
    data = os.urandom(size)
    with open(path, 'wb') as f:
        f.write(data)
    return data


def read(path):
    with open(path, 'rb') as f:
        return f.read()


class Writer(threading.Thread):
    """Appends 64 KiB pieces to a file on the mount until stopped: a file
    being written while the scrub runs."""

    def __init__(self, path, pause=0.01):
        super().__init__(daemon=True)
        self.path = path
        self.pause = pause
        self.data = bytearray(os.urandom(MB))
        self.stop_ev = threading.Event()
        self.error = None
        with open(path, 'wb') as f:  # all four iods hold an object from here on
            f.write(self.data)

    def run(self):
        try:
            with open(self.path, 'ab') as f:
                while not self.stop_ev.is_set():
                    piece = os.urandom(64 << 10)
                    f.write(piece)
                    f.flush()
                    self.data += piece
                    time.sleep(self.pause)
        except Exception as e:  # reported by the test
            self.error = e

    def finish(self):
        self.stop_ev.set()
        self.join(60)
        assert not self.is_alive() and self.error is None, self.error


@pytest.mark.vm_spared
def test_scrub_reclaims_iod_orphans(dcluster, tmp_mnt):
    """Objects of inodes the mgr does not know, older than the grace, are
    removed; a young one stays; live files, one of them written during the
    scrub, stay intact byte for byte. A second scrub finds nothing."""
    m = dcluster.mount(tmp_mnt)
    live = {}
    for name, size in (('a', 3 * MB + 123), ('b', 4096), ('c', 0)):
        live[name] = make_file(os.path.join(m.path, name), size)
    os.mkdir(os.path.join(m.path, 'd'))
    live['d/e'] = make_file(os.path.join(m.path, 'd', 'e'), 700 << 10)
    old = [inject(dcluster, 0, GHOST + 1, 100000, 3600),
           inject(dcluster, 1, GHOST + 1, 5000, 3600),
           inject(dcluster, 3, GHOST + 0x10203, 1, 7200)]
    young = inject(dcluster, 2, GHOST + 2, 8192, 0)
    w = Writer(os.path.join(m.path, 'w'))
    w.start()
    try:
        nobj = len(object_files(dcluster))
        # 20 objects per second: the scrub takes about a second, while w grows
        r = report(scrub(dcluster, '--rate', '20', '--grace', '60'))
    finally:
        w.finish()
    assert r['checked'] == nobj
    assert r['iods'] == 4
    assert (r['iod'], r['mgr']) == (3, 0)
    assert r['bytes'] == sum(b for _p, b in old)
    assert r['young_iod'] == 1
    assert (r['compared'], r['mismatches'], r['resync']) == (0, 0, 0)  # mirror=1
    for p, _b in old:
        assert not os.path.exists(p)
    assert os.path.exists(young[0])
    for name, data in live.items():
        assert read(os.path.join(m.path, name)) == data, name
    assert read(w.path) == bytes(w.data)
    # through a fresh mount too (nothing cached)
    m2 = dcluster.mount(tmp_mnt + '-2')
    for name, data in live.items():
        assert read(os.path.join(m2.path, name)) == data, name
    again = report(scrub(dcluster, '--grace', '60'))
    assert (again['iod'], again['mgr'], again['bytes']) == (0, 0, 0)
    assert again['young_iod'] == 1
    # with no grace the young one goes too
    now = report(scrub(dcluster, '--grace', '0'))
    assert (now['iod'], now['young_iod']) == (1, 0)
    assert not os.path.exists(young[0])
    util.cleanup(m2, m)


@pytest.mark.vm_spared
def test_scrub_dry_run_changes_nothing(dcluster, tmp_mnt):
    """--dry-run reports the orphans it would reclaim and removes none."""
    m = dcluster.mount(tmp_mnt)
    data = make_file(os.path.join(m.path, 'f'), MB)
    inj = [inject(dcluster, i, GHOST + 7, 4096 * (i + 1), 600) for i in range(4)]
    before = sorted(object_files(dcluster))
    r = report(scrub(dcluster, '--dry-run', '--grace', '10'))
    assert r['dry']
    assert (r['iod'], r['mgr']) == (4, 0)
    assert r['bytes'] == sum(b for _p, b in inj)
    assert sorted(object_files(dcluster)) == before
    assert read(os.path.join(m.path, 'f')) == data
    r = report(scrub(dcluster, '--grace', '10'))
    assert not r['dry'] and r['iod'] == 4
    util.cleanup(m)


def _orphan_by_dead_client(c, path):
    """A mgr orphan with objects: a file unlinked while open, its client
    killed (SIGKILL) before it could purge it. Returns its inode number."""
    m = c.mount(path)
    p = os.path.join(m.path, 'gone')
    keep = os.path.join(m.path, 'keep')
    data = make_file(keep, 2 * MB)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, os.urandom(2 * MB))
    os.fsync(fd)
    ino = os.fstat(fd).st_ino
    os.unlink(p)
    m.proc.send_signal(signal.SIGKILL)
    m.proc.wait(timeout=20)
    try:
        os.close(fd)
    except OSError:
        pass  # ENOTCONN: the client is gone
    m.umount()
    assert any(c.objects(ino)), 'the orphan keeps its objects'
    return ino, data


@pytest.mark.vm_spared
def test_scrub_mgr_orphans(dcluster, tmp_mnt):
    """A mgr orphan left by a dead client: kept while the mgr that saw the
    unlink runs (the client may still hold it open), reclaimed with its
    objects after a mgr restart; the other file stays intact."""
    ino, data = _orphan_by_dead_client(dcluster, tmp_mnt)
    r = report(scrub(dcluster, '--grace', '0'))
    assert (r['iod'], r['mgr'], r['young_mgr'], r['orphans_checked']) == (0, 0, 1, 1)
    assert any(dcluster.objects(ino)), 'objects of a mgr orphan are not iod orphans'
    dcluster.mgr.stop()
    dcluster.mgr.start()
    # unlinked before this start, but within the grace: still kept
    r = report(scrub(dcluster, '--grace', '3600'))
    assert (r['mgr'], r['young_mgr']) == (0, 1)
    before = dcluster.objects(ino)
    r = report(scrub(dcluster, '--grace', '0', '--dry-run'))
    assert r['dry'] and (r['iod'], r['mgr'], r['young_mgr']) == (0, 1, 0)
    assert r['bytes'] >= 2 * MB
    assert dcluster.objects(ino) == before
    r = report(scrub(dcluster, '--grace', '0'))
    assert (r['iod'], r['mgr'], r['young_mgr']) == (0, 1, 0)
    assert r['bytes'] >= 2 * MB
    assert not any(dcluster.objects(ino))
    r = report(scrub(dcluster, '--grace', '0'))
    assert (r['orphans_checked'], r['mgr']) == (0, 0)
    m = dcluster.mount(tmp_mnt + '-2')
    assert read(os.path.join(m.path, 'keep')) == data
    assert not os.path.exists(os.path.join(m.path, 'gone'))
    util.cleanup(m)


@pytest.mark.parametrize('args,name', [
    (['--rate', '0'], '--rate'),
    (['--rate', 'fast'], '--rate'),
    (['--rate', '5GB/s'], '--rate'),
    (['--rate', '-3'], '--rate'),
    (['--grace', '-1'], '--grace'),
    (['--grace', '1.5'], '--grace'),
    (['--grace', ''], '--grace'),
    (['--timeout', '0'], '--timeout'),
    (['--mgr', 'nohostport'], '--mgr'),
    (['--bogus'], '--bogus'),
    (['--rate'], '--rate'),
    (['extra'], 'extra'),
])
def test_scrub_bad_arguments(args, name):
    """A bad command line exits 2 with a message naming the argument."""
    r = rpfs('scrub', *args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert name in r.stderr, r.stderr
    assert r.stdout == ''


def test_scrub_bad_key(tmp_path):
    """An unusable key file exits 3."""
    r = rpfs('scrub', '--mgr', '127.0.0.1:1', '--key', str(tmp_path / 'nokey'))
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)


@pytest.mark.vm_spared
def test_scrub_server_down(dcluster, tmp_mnt, expect_log):
    """A server down exits 1 naming it; orphans on the iods still up are
    reclaimed, mgr orphans wait (their objects may be on the missing iod).
    The mgr's statfs poll may warn that iod 2 went down, and nothing else
    may be logged."""
    expect_log(util.mgr_iod_down_log(dcluster, 2))
    ino, _data = _orphan_by_dead_client(dcluster, tmp_mnt)
    dcluster.mgr.stop()
    dcluster.mgr.start()
    p0, _b = inject(dcluster, 0, GHOST + 9, 4096, 600)
    p3, _b = inject(dcluster, 3, GHOST + 9, 4096, 600)
    before = dcluster.objects(ino)
    assert all(before), 'a 2 MiB file has an object on each of the 4 iods'
    dcluster.kill_iod(2)
    r = scrub(dcluster, '--grace', '0', '--timeout', '2')
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert 'iod 2 (%s)' % util.hostport(dcluster.iod_ports[2]) in r.stderr, r.stderr
    assert not os.path.exists(p0) and not os.path.exists(p3)
    assert dcluster.objects(ino) == before, 'mgr orphans wait for every iod'
    dcluster.start_iod(2)
    r = report(scrub(dcluster, '--grace', '0'))
    assert r['mgr'] == 1
    dcluster.mgr.stop()
    r = scrub(dcluster, '--timeout', '2')
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert 'mgr ' + util.hostport(dcluster.mgr_port) in r.stderr, r.stderr
    dcluster.mgr.start()


def test_scrub_config_and_key(tmp_path):
    """With the config file the scrub finds the mgr and the key there; a
    wrong key is refused (exit 1) and removes nothing."""
    c = util.conf_cluster(tmp_path / 'k')
    try:
        p, b = inject(c, 1, GHOST + 3, 10000, 600)
        other = str(tmp_path / 'other.key')
        rpfs('keygen', other)
        r = rpfs('scrub', '--mgr', util.hostport(c.mgr_port), '--key', other,
                 '--timeout', '2')
        assert r.returncode == 1 and 'mgr ' + util.hostport(c.mgr_port) in r.stderr, \
            (r.returncode, r.stdout, r.stderr)
        assert os.path.exists(p)
        r = report(rpfs('scrub', '--conf', c.conf))
        assert (r['iods'], r['iod'], r['bytes']) == (2, 1, b)
        assert not os.path.exists(p)
    finally:
        util.cleanup(c)


# ---------------------------------------------------------------- mirrors
#
# One cluster whose files are mirrored by default (rpfs-mgr --mirror 2),
# shared by the checks below. Without failure domains its groups are
# {0, 1} and {2, 3}, the lower iod first: the scrub takes a group's first
# iod as the source and records the SECOND one's replica stale. Every check
# leaves no unrepaired mismatch behind, and counts relative to a scrub at
# its start (the stale records of earlier checks stay, or a resync clears
# them meanwhile: either is fine).

GROUPS = ((0, 1), (2, 3))
KiB = 1 << 10


@pytest.fixture(scope='module')
def mirc(tmp_path_factory):
    """A 4-iod cluster with mirror=2 as the fs default, and a mount."""
    c = util.Cluster(str(tmp_path_factory.mktemp('scrm')), niods=4, name='scrm',
                     mgr_args=['--mirror', '2'])
    util.clusters.append(c)
    m = None
    try:
        c.start()
        path = str(tmp_path_factory.mktemp('scrmm'))
        m = c.mount(path)
        assert groups_of(c) == {0: (0, 1), 1: (2, 3)}
        yield c, m
    finally:
        util.cleanup(*(x for x in (m, c) if x))


@pytest.fixture
def mdir(mirc, request):
    """A fresh directory on the mirrored mount; count=1 in the param puts
    each file in one group only."""
    _c, m = mirc
    d = os.path.join(m.path, re.sub(r'[^A-Za-z0-9_.-]', '_', request.node.name))
    os.mkdir(d)
    if getattr(request, 'param', None):
        os.setxattr(d, 'user.rpfs.layout', request.param.encode())
    return d


def pairs_of(c, paths):
    """{(group, ino): (bytes on the first iod, on the second)} for every
    group that holds an object of the files at paths (None: no object)."""
    out = {}
    for p in paths:
        ino = os.stat(p).st_ino
        objs = c.objects(ino)
        for g, (a, b) in enumerate(GROUPS):
            if objs[a] or objs[b]:
                out[(g, ino)] = tuple(os.path.getsize(objs[i]) if objs[i] else None
                                      for i in (a, b))
    return out


def snapshot(c):
    """Every object file with its content hash."""
    return {p: util.sha256_file(p) for p in object_files(c)}


def stale_recorded(c, iod, ino, before):
    """Whether iod's replica of ino was recorded stale since before (the
    stale counts of rpfs status then): the count went up, or a resync
    already cleared the record and only the mgr's log tells it."""
    if stale_counts(c)[iod] > before[iod]:
        return True
    with open(c.mgr.log.path, errors='replace') as f:
        return re.search(r'iod %d: replica of inode %d marked stale' % (iod, ino),
                         f.read()) is not None


def seen(r):
    """The mirrored pairs a scrub report met: compared, or left to the
    resync because stale. An earlier check's stale replica may be resynced
    between two scrubs, which moves it from one count to the other."""
    return r['compared'] + r['resync']


def clean_scrub(c):
    """A scrub that finds no mismatch: where a check starts from."""
    r = report(scrub(c, '--grace', '60'))
    assert (r['mismatches'], r['repaired']) == (0, 0), r['out']
    return r


@pytest.mark.vm_spared
def test_scrub_mirror_compares_each_pair_once(mirc, mdir):
    """Each (group, inode) pair of a mirrored file is compared once, though
    both iods list it, with a whole read of both replicas (objects over 4
    MiB take two IO_CSUM ranges); mirror=1 objects are not compared; a file
    written during the scrub is no mismatch (a range caught between its
    two replicas is checked again)."""
    c, _m = mirc
    base = clean_scrub(c)
    assert base['resync'] == 0, base['out']  # the module's first check: exact counts
    paths = []
    for name, size in (('a', 3 * MB + 123), ('b', 4096), ('big', 9 * MB + 1),
                       ('e', 700 * KiB)):
        paths.append(os.path.join(mdir, name))
        make_file(paths[-1], size)
    open(os.path.join(mdir, 'empty'), 'wb').close()  # no object at all
    plain = os.path.join(mdir, 'plain')
    open(plain, 'wb').close()
    os.setxattr(plain, 'user.rpfs.layout', b'unit=65536,count=4,mirror=1')
    make_file(plain, 2 * MB)
    w = Writer(os.path.join(mdir, 'w'), pause=0.5)
    w.start()
    try:
        r = report(scrub(c, '--grace', '60'))
    finally:
        w.finish()
    pairs = pairs_of(c, paths)
    assert len(pairs) == 7  # b: one group; the others both
    assert all(sa == sb and sa for sa, sb in pairs.values()), pairs
    assert (r['mismatches'], r['repaired'], r['lines']) == (0, 0, []), r['out']
    assert r['compared'] == base['compared'] + len(pairs) + 2  # + w's two
    static = 2 * sum(sa for sa, _sb in pairs.values())
    assert r['cbytes'] >= base['cbytes'] + static + 2 * MB  # w: 1 MiB at least
    assert r['resync'] == base['resync']
    assert r['checked'] == len(object_files(c))
    again = report(scrub(c, '--grace', '60'))
    assert again['compared'] == r['compared']
    assert again['cbytes'] == base['cbytes'] + static + 2 * os.path.getsize(w.path)
    assert again['mismatches'] == 0 and again['resync'] == base['resync']


@pytest.mark.parametrize('mdir', ['unit=65536,count=1,mirror=2'], indirect=True)
def test_scrub_mirror_mismatch_dry_run_then_repair(mirc, mdir):
    """Bytes overwritten in one replica: --dry-run reports the mismatch
    and changes nothing (nor the orphan beside it); the scrub then records
    the group's second iod's replica stale and reclaims the orphan; the next
    scrub leaves that pair to the resync."""
    c, _m = mirc
    f = os.path.join(mdir, 'victim')
    make_file(f, 300 * KiB)
    ino = os.stat(f).st_ino
    g = layout_of(f)['first']
    first, second = GROUPS[g]
    objs = c.objects(ino)
    assert objs[first] and objs[second]
    base = clean_scrub(c)
    with open(objs[second], 'r+b') as fh:
        fh.seek(5000)
        old = fh.read(16)
        fh.seek(5000)
        fh.write(bytes(x ^ 0xff for x in old))
    orphan, _b = inject(c, 1, GHOST + 21, 5000, 3600)
    before, stale0 = snapshot(c), stale_counts(c)
    r = report(scrub(c, '--grace', '60', '--dry-run'))
    assert (r['mismatches'], r['repaired'], r['iod']) == (1, 0, 1), r['out']
    assert r['lines'] == ['mismatch: inode %d, group %d (iod %d, iod %d): data differs '
                          'in local bytes 0..%d; not repaired (dry run)'
                          % (ino, g, first, second, 300 * KiB)], r['out']
    assert seen(r) == seen(base)
    assert snapshot(c) == before and stale_counts(c) == stale0
    r = report(scrub(c, '--grace', '60'))
    assert (r['mismatches'], r['repaired'], r['iod']) == (1, 1, 1), r['out']
    assert r['lines'] == ['mismatch: inode %d, group %d (iod %d, iod %d): data differs '
                          'in local bytes 0..%d; iod %d\'s replica recorded stale (the '
                          'resync copies iod %d\'s over it)'
                          % (ino, g, first, second, 300 * KiB, second, first)], r['out']
    assert not os.path.exists(orphan)
    assert stale_recorded(c, second, ino, stale0)
    # not compared again while stale; compared (and equal) once resynced
    after = report(scrub(c, '--grace', '60'))
    assert after['mismatches'] == 0, after['out']
    assert seen(after) == seen(base)
    assert after['resync'] >= 1 or stale_counts(c)[second] == 0


@pytest.mark.parametrize('mdir', ['unit=65536,count=1,mirror=2'], indirect=True)
def test_scrub_mirror_truncated_replica(mirc, mdir):
    """A replica cut short is a mismatch by size (its bytes read as zeros
    past the end, the sizes tell it apart) and is repaired the same way."""
    c, _m = mirc
    f = os.path.join(mdir, 'short')
    make_file(f, 5 * MB)  # over 4 MiB: two compare ranges
    ino = os.stat(f).st_ino
    g = layout_of(f)['first']
    first, second = GROUPS[g]
    objs = c.objects(ino)
    base = clean_scrub(c)
    stale0 = stale_counts(c)
    os.truncate(objs[second], 4 * MB + 7)
    r = report(scrub(c, '--grace', '60'))
    assert (r['mismatches'], r['repaired']) == (1, 1), r['out']
    assert r['lines'] == ['mismatch: inode %d, group %d (iod %d, iod %d): object sizes '
                          'differ (%d bytes on iod %d, %d on iod %d); iod %d\'s replica '
                          'recorded stale (the resync copies iod %d\'s over it)'
                          % (ino, g, first, second, 5 * MB, first, 4 * MB + 7, second,
                             second, first)], r['out']
    assert stale_recorded(c, second, ino, stale0)
    assert seen(r) == seen(base)


def test_scrub_mirror_rate(mirc, mdir):
    """--rate NMB/s counts the bytes checksummed on both replicas."""
    c, _m = mirc
    make_file(os.path.join(mdir, 'f'), 6 * MB)
    t0 = time.monotonic()
    r = report(scrub(c, '--grace', '60', '--rate', '10MB/s'))
    took = time.monotonic() - t0
    assert r['cbytes'] >= 12 * MB, r['out']
    assert took >= 0.9 * r['cbytes'] / 10e6, (took, r['cbytes'])


@pytest.mark.vm_spared
def test_scrub_mirror_iod_down(mirc, mdir, expect_log):
    """With a group's second iod down the scrub exits 1 naming it, and
    still compares the other group's pairs. The mgr's statfs poll may warn
    that iod 3 went down, and nothing else may be logged."""
    c, _m = mirc
    expect_log(util.mgr_iod_down_log(c, 3))
    make_file(os.path.join(mdir, 'f'), MB)  # a pair in each group
    base = clean_scrub(c)
    c.kill_iod(3)
    try:
        r = scrub(c, '--grace', '60', '--timeout', '2')
    finally:
        c.start_iod(3)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert 'iod 3 (%s)' % util.hostport(c.iod_ports[3]) in r.stderr, r.stderr
    got = int(re.search(r'^replicas compared: (\d+) ', r.stdout, re.M).group(1))
    assert 0 < got < seen(base), r.stdout
    assert re.search(r'^mismatches found: 0, repaired: 0$', r.stdout, re.M), r.stdout
    assert seen(report(scrub(c, '--grace', '60'))) == seen(base)
