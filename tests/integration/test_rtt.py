"""Requests per metadata op (HACKING.md "Requests per op"), counted, not
timed: each check performs one op on a mount and reads, before and after,
the FUSE requests the kernel sent it (rpfs_client_fuse_requests_total),
the calls it made by op (rpfs_client_requests_total: the mgr's ops and the
iods' IO_* ops) and the requests the mgr answered by op
(rpfs_server_requests_total on the mgr's /metrics), and asserts the
counts.

One module cluster (2 iods) with one measured mount A and a helper mount
B, which makes the files A has never seen (a cold stat or listing is one
of a name A's kernel never looked up) and, with no attribute cache
(attr_timeout=0), shows what the mgr holds. A runs with 60 s attribute and
entry timeouts, so that nothing A's kernel cached runs out during a check
whatever the machine's speed; the ops themselves never depend on it. B is
idle while A is measured, so the mgr's counts are A's.

Each op is measured in the state a loop of such ops leaves: after a
create (or another change) in the same directory, which makes the kernel
drop the directory's attributes and ask for them (GETATTR) at the next
path walk, for its permission check. The mgr's counts are asserted
against the kernel's: e.g. a LOOKUP the kernel sends costs one at the mgr,
a GETATTR of a directory this mount just changed costs none.
"""
import os
import re
import urllib.request

import pytest

import util

# The counts follow the kernel's FUSE request pattern, which differs by
# kernel version: the RDMA VM runs Debian 12's 6.1, where READDIRPLUS and
# RELEASE come in another order and the empty-end READDIR cut does not
# apply (HACKING "Requests per op"). The host stage runs these on the
# host's kernel; over verbs the mgr's counts are the same requests.
pytestmark = pytest.mark.host_only

NIODS = 2


def scrape(addr):
    with urllib.request.urlopen('http://%s/metrics' % addr, timeout=10) as r:
        return r.read().decode()


def counters(text, family):
    """{op: count} of one per-op counter family."""
    out = {}
    for m in re.finditer(r'^%s\{op="([A-Z0-9_]+)"\} (\S+)$' % family, text, re.M):
        out[m.group(1)] = int(float(m.group(2)))
    return out


class Counts:
    """One reading of A's and the mgr's counters."""

    def __init__(self, rc):
        fuse = scrape(rc.fuse_metrics)
        self.fuse = counters(fuse, 'rpfs_client_fuse_requests_total')
        calls = counters(fuse, 'rpfs_client_requests_total')
        self.iod = {k: v for k, v in calls.items() if k.startswith('IO_')}
        self.calls = {k: v for k, v in calls.items() if not k.startswith('IO_')}
        self.mgr = counters(scrape(rc.mgr_metrics), 'rpfs_server_requests_total')


def diff(after, before):
    """The ops whose count grew, with the growth; FORGET and BATCH_FORGET
    (the kernel's, whenever it evicts: no reply, no mgr request) left out."""
    d = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    d.pop('FORGET', None)
    d.pop('BATCH_FORGET', None)
    return d


class Delta:
    """What one op cost: .fuse, .calls (the mount's to the mgr), .iod (the
    mount's to the iods), .mgr (what the mgr answered)."""

    def __init__(self, after, before):
        for k in ('fuse', 'calls', 'iod', 'mgr'):
            setattr(self, k, diff(getattr(after, k), getattr(before, k)))

    def __repr__(self):
        return 'fuse=%r mgr=%r iod=%r' % (self.fuse, self.mgr, self.iod)


@pytest.fixture(scope='module')
def rc(tmp_path_factory):
    """The cluster, mount A (measured, .a) and mount B (.b)."""
    c = util.Cluster(str(tmp_path_factory.mktemp('rtt')), niods=NIODS, name='rtt')
    c.mgr_metrics = util.hostport(util.free_port())
    c.mgr.argv += ['--metrics', c.mgr_metrics]
    util.clusters.append(c)
    a = b = None
    try:
        c.start()
        c.fuse_metrics = util.hostport(util.free_port())
        pa = str(tmp_path_factory.mktemp('rtta'))
        pb = str(tmp_path_factory.mktemp('rttb'))
        a = c.mount(pa, 'allow_other,attr_timeout=60,entry_timeout=60,metrics='
                    + c.fuse_metrics)
        b = c.mount(pb, 'allow_other,attr_timeout=0,entry_timeout=0')
        c.a, c.b = a.path, b.path
        yield c
    finally:
        util.cleanup(b, a, c)


@pytest.fixture
def d(rc, request):
    """A directory made by A for one test, with one file created in it
    already (the state of a create loop); returns its name relative to
    both mounts."""
    name = request.node.name
    os.mkdir(os.path.join(rc.a, name))
    create_a(rc, os.path.join(rc.a, name, 'first'))
    return name


def wait_released(rc, before, closes):
    """Wait until the kernel's RELEASE of each of the closes files closed
    since before has reached A. The kernel sends RELEASE in the
    background: close(2) returns before it, so without the wait it lands
    in this window or the next one."""
    want = before.fuse.get('RELEASE', 0) + closes
    util.wait_until(lambda: Counts(rc).fuse.get('RELEASE', 0) >= want, 30, 0.02,
                    "the kernel's RELEASE")


def measure(rc, fn, settle=None, closes=0):
    """Run fn() and return its Delta. settle(counts) -> bool, if given, is
    waited for after fn (background work such as the reaper's), and so is
    the RELEASE of each of the closes files fn opened and closed."""
    before = Counts(rc)
    fn()
    wait_released(rc, before, closes)
    if settle:
        util.wait_until(lambda: settle(Counts(rc)), 30, 0.05, 'background requests')
    d = Delta(Counts(rc), before)
    print(d)
    return d


def purged(before):
    """settle: the reaper purged (PURGE or PURGE_MANY) since before, as the
    mgr and the mount both count it."""
    def n(t):
        return t.get('PURGE', 0) + t.get('PURGE_MANY', 0)
    return lambda c: n(c.mgr) > n(before.mgr) and n(c.calls) > n(before.calls)


def create_empty(path, flags=os.O_EXCL):
    """open(O_CREAT|flags) + close, as touch or a metadata benchmark."""
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | flags, 0o644))


def create_a(rc, path):
    """create_empty through A before a measurement, and wait for its
    RELEASE, so that it does not land in the measured window."""
    before = Counts(rc)
    create_empty(path)
    wait_released(rc, before, 1)


def assert_mgr(d, want):
    """The mgr answered exactly want, plus one LOOKUP per LOOKUP the kernel
    sent, and nothing for its GETATTRs (of the directory just changed);
    the mount called the mgr for exactly that, and asked no iod."""
    want = dict(want)
    if d.fuse.get('LOOKUP'):
        want['LOOKUP'] = want.get('LOOKUP', 0) + d.fuse['LOOKUP']
    assert d.mgr == want, d
    assert d.calls == want, d


def test_create_empty(rc, d):
    """A create of an empty file in a loop: the kernel's LOOKUP of the new
    name (a miss), its GETATTR of the directory (answered by the mount:
    it folded its own last create in), CREATE, FLUSH and RELEASE: at the
    mgr a LOOKUP and a CREATE; nothing for the close of a file never
    written."""
    dl = measure(rc, lambda: create_empty(os.path.join(rc.a, d, 'f')), closes=1)
    assert dl.fuse['CREATE'] == 1 and dl.fuse['GETATTR'] == 1, dl
    assert dl.fuse['FLUSH'] == 1 and dl.fuse['RELEASE'] == 1, dl
    assert_mgr(dl, {'CREATE': 1})
    assert dl.iod == {}, dl


def test_create_in_root(rc):
    """The same in the mount's root directory, which the kernel never
    looks up: the mount holds an entry for it from the start."""
    os.stat(rc.a)
    create_a(rc, os.path.join(rc.a, 'root1'))
    dl = measure(rc, lambda: create_empty(os.path.join(rc.a, 'root2')), closes=1)
    assert dl.fuse['CREATE'] == 1 and dl.fuse['GETATTR'] == 1, dl
    assert_mgr(dl, {'CREATE': 1})


def test_create_no_excl(rc, d):
    """open(O_CREAT) without O_EXCL, as touch: the mount asks for an
    exclusive create all the same (the kernel sends CREATE only for a name
    it found missing), and it costs what an O_EXCL one does."""
    dl = measure(rc, lambda: create_empty(os.path.join(rc.a, d, 'f'), 0), closes=1)
    assert dl.fuse['CREATE'] == 1, dl
    assert_mgr(dl, {'CREATE': 1})


def test_create_write(rc, d):
    """Create, write 4 KiB, close: one IO_WRITE, the blocks counted on each
    iod of the layout, one SETBLOCKS at the close."""
    def op():
        fd = os.open(os.path.join(rc.a, d, 'f'), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.write(fd, b'w' * 4096)
        os.close(fd)
    dl = measure(rc, op, closes=1)
    assert_mgr(dl, {'CREATE': 1, 'SETBLOCKS': 1})
    assert dl.iod == {'IO_WRITE': 1, 'IO_BLOCKS': NIODS}, dl


def test_close_unwritten(rc, d):
    """Open for writing and close a file never written: OPEN only."""
    dl = measure(rc, lambda: os.close(os.open(os.path.join(rc.a, d, 'first'), os.O_RDWR)),
                 closes=1)
    assert dl.fuse['OPEN'] == 1 and dl.fuse['FLUSH'] == 1 and dl.fuse['RELEASE'] == 1, dl
    assert_mgr(dl, {'OPEN': 1})
    assert dl.iod == {}, dl


def test_stat_cold(rc, d):
    """stat of a name this mount never looked up (B made it): one LOOKUP,
    whose reply the kernel keeps as the attributes."""
    create_empty(os.path.join(rc.b, d, 'cold'))
    dl = measure(rc, lambda: os.stat(os.path.join(rc.a, d, 'cold')))
    assert dl.fuse.get('LOOKUP') == 1, dl
    assert_mgr(dl, {})


def test_unlink(rc, d):
    """unlink of a file this mount created: UNLINK, then in the background
    the objects removed on each iod and the inode purged. The kernel's
    GETATTR of the directory after an unlink still goes to the mgr (the
    UNLINK reply does not carry the directory's new times)."""
    p = os.path.join(rc.a, d, 'f')
    create_a(rc, p)
    before = Counts(rc)
    os.unlink(os.path.join(rc.a, d, 'first'))
    util.wait_until(lambda: purged(before)(Counts(rc)), 30, 0.05, 'first purged')
    before = Counts(rc)
    dl = measure(rc, lambda: os.unlink(p), purged(before))
    assert dl.fuse.get('UNLINK') == 1, dl
    want = {'UNLINK': 1, 'PURGE': 1}
    if dl.fuse.get('GETATTR'):
        want['GETATTR'] = dl.fuse['GETATTR']
    assert_mgr(dl, want)
    assert dl.iod == {'IO_REMOVE': NIODS}, dl


def test_rename_same_dir(rc, d):
    """rename within the directory after a create: the kernel's LOOKUP of
    the new name and RENAME; its GETATTR of the directory is answered by
    the mount."""
    p = os.path.join(rc.a, d, 'r1')
    create_a(rc, p)
    dl = measure(rc, lambda: os.rename(p, os.path.join(rc.a, d, 'r2')))
    assert dl.fuse.get('RENAME') == 1 and dl.fuse.get('GETATTR') == 1, dl
    assert_mgr(dl, {'RENAME': 1})


def test_rename_across(rc, d):
    """rename into another directory, after a rename: the kernel's GETATTR
    of the directory goes to the mgr (a rename changes attributes this
    mount does not follow), its LOOKUP of the new name, RENAME."""
    os.mkdir(os.path.join(rc.a, d, 'to'))
    p = os.path.join(rc.a, d, 'r1')
    create_a(rc, p)
    os.rename(p, os.path.join(rc.a, d, 'r2'))
    dl = measure(rc, lambda: os.rename(os.path.join(rc.a, d, 'r2'),
                                       os.path.join(rc.a, d, 'to', 'r3')))
    assert dl.fuse.get('RENAME') == 1, dl
    want = {'RENAME': 1}
    if dl.fuse.get('GETATTR'):
        want['GETATTR'] = dl.fuse['GETATTR']
    assert_mgr(dl, want)


def test_mkdir(rc, d):
    """mkdir after a create: LOOKUP and MKDIR at the mgr."""
    dl = measure(rc, lambda: os.mkdir(os.path.join(rc.a, d, 'sub')))
    assert dl.fuse.get('MKDIR') == 1 and dl.fuse.get('GETATTR') == 1, dl
    assert_mgr(dl, {'MKDIR': 1})


def test_readdir_100(rc, d):
    """A listing of 100 names this mount never saw: one READDIR at the mgr
    (they fit in one reply); the kernel's call that finds the end is
    answered by the mount."""
    os.mkdir(os.path.join(rc.b, d, 'big'))
    for i in range(100):
        create_empty(os.path.join(rc.b, d, 'big', 'f%03d' % i))
    dl = measure(rc, lambda: os.listdir(os.path.join(rc.a, d, 'big')))
    n = dl.fuse.get('READDIR', 0) + dl.fuse.get('READDIRPLUS', 0)
    assert n == 2, dl
    assert_mgr(dl, {'READDIR': 1})
    assert sorted(os.listdir(os.path.join(rc.a, d, 'big'))) == \
        ['f%03d' % i for i in range(100)]


def same_dir_attrs(rc, d):
    """A's view of directory d (served by the mount where it can) equals
    the mgr's (B, no cache): times, link count, mode."""
    sa = os.stat(os.path.join(rc.a, d))
    sb = os.stat(os.path.join(rc.b, d))
    for f in ('st_mtime_ns', 'st_ctime_ns', 'st_nlink', 'st_mode', 'st_uid', 'st_ino'):
        assert getattr(sa, f) == getattr(sb, f), (f, sa, sb)
    return sa


def test_dir_attrs_follow_creates(rc, d):
    """What the mount answers for a directory after its own creates, mkdirs,
    symlinks, mknods and after an unlink and a rename (which it does not
    follow) is what the mgr holds; each create moves the times."""
    s0 = same_dir_attrs(rc, d)
    create_empty(os.path.join(rc.a, d, 'f'))
    s1 = same_dir_attrs(rc, d)
    assert s1.st_mtime_ns > s0.st_mtime_ns or s1.st_ctime_ns > s0.st_ctime_ns
    os.mkdir(os.path.join(rc.a, d, 'sub'))
    s2 = same_dir_attrs(rc, d)
    assert s2.st_nlink == s1.st_nlink + 1
    os.symlink('f', os.path.join(rc.a, d, 'ln'))
    same_dir_attrs(rc, d)
    os.mkfifo(os.path.join(rc.a, d, 'fifo'))
    same_dir_attrs(rc, d)
    os.unlink(os.path.join(rc.a, d, 'f'))
    same_dir_attrs(rc, d)
    os.rename(os.path.join(rc.a, d, 'sub'), os.path.join(rc.a, d, 'sub2'))
    same_dir_attrs(rc, d)
    os.rmdir(os.path.join(rc.a, d, 'sub2'))
    s3 = same_dir_attrs(rc, d)
    assert s3.st_nlink == s1.st_nlink


def test_create_existing_race(rc, d):
    """open(O_CREAT) without O_EXCL of a name A's kernel holds as missing
    but B made since: the mount's exclusive CREATE gets EEXIST and it opens
    the existing file as open(2) would, its data intact; with O_EXCL the
    caller gets EEXIST."""
    pa = os.path.join(rc.a, d, 'race')
    with pytest.raises(FileNotFoundError):
        os.stat(pa)  # A's kernel keeps the miss for its entry timeout
    with open(os.path.join(rc.b, d, 'race'), 'wb') as f:
        f.write(b'from B')
    def op():
        fd = os.open(pa, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            assert os.read(fd, 100) == b'from B'
        finally:
            os.close(fd)
    dl = measure(rc, op, closes=1)
    assert dl.mgr.get('CREATE') == 2, dl
    with open(os.path.join(rc.b, d, 'race'), 'rb') as f:
        assert f.read() == b'from B'
    with pytest.raises(FileExistsError):
        create_empty(os.path.join(rc.a, d, 'race'))
