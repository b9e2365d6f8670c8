"""Requests per metadata op (fuse-client/README.md "Requests per op"),
counted, not timed: each check performs one op on a mount and reads, before
and after, the FUSE requests the kernel sent it
(rpfs_client_fuse_requests_total), the calls it made by op
(rpfs_client_requests_total: the mgr's ops and the iods' IO_* ops) and the
requests the mgr answered by op (rpfs_server_requests_total on the mgr's
/metrics), and asserts the counts.

One module cluster (2 iods) with one measured mount A and a helper mount
B, which makes the files A has never seen (a cold stat or listing is one
of a name A's kernel never looked up) and, with no attribute cache
(attr_timeout=0), shows what the mgr holds. A runs with 60 s attribute and
entry timeouts (TIMEOUT), so that nothing A's kernel cached runs out
during a check whatever the machine's speed. B is idle while A is
measured, so the mgr's counts are A's.

Each op is measured in the state a loop of such ops leaves: after a
create (or another change) in the same directory, which makes the kernel
drop the directory's attributes and ask for them (GETATTR) at the next
path walk, for its permission check.

Every count asserted is a fixed number, the claim of the table in
fuse-client/README.md "Requests per op" for a mount whose replies carry its
entry and attribute timeouts: the kernel looks up only the names it holds no
entry for (the new name of a create, mkdir or rename, a name B made), never
a directory A made or walked within TIMEOUT; a GETATTR of a directory A
itself just changed by a create or mkdir is answered by the mount, one after
an unlink or a rename goes to the mgr. None is taken from what the kernel
sent in the check: a mount that replied with a zero entry timeout would make
the kernel look up the directory again at every walk, and the mgr would
answer each of those LOOKUPs too; both counts rising together must fail.

The kernel may drop an unused entry whenever it likes (a drop_caches by
any process on the machine, e.g. a benchmark's, or memory pressure), and
then looks the name up again. So each name a check relies on being held
is pinned by an O_PATH descriptor (rc.pins, closed after each test),
which keeps its dentry and inode in the kernel's cache; taken without a
path walk through a directory just changed (pin, pin_fd), so that
pinning sends A nothing that the state of the loop would not.
"""
import os
import re
import urllib.request

import pytest

import util

# The counts follow the kernel's FUSE request pattern, which differs by
# kernel version: the RDMA VM runs Debian 12's 6.1, where READDIRPLUS and
# RELEASE come in another order and the empty-end READDIR cut does not apply
# (fuse-client/README.md "Requests per op"). The host stage runs these on
# the host's kernel; over verbs the mgr's counts are the same requests.
pytestmark = pytest.mark.host_only

NIODS = 2
# A's attribute and entry timeouts (s): longer than any check, so that
# what A's kernel cached within a check is still valid at its end.
TIMEOUT = 60
# Set-ups of test_create_existing_race's race at most (see there).
RACE_TRIES = 3


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
        a = c.mount(pa, 'allow_other,attr_timeout=%d,entry_timeout=%d,metrics=%s'
                    % (TIMEOUT, TIMEOUT, c.fuse_metrics))
        b = c.mount(pb, 'allow_other,attr_timeout=0,entry_timeout=0')
        c.a, c.b = a.path, b.path
        c.pins = []
        yield c
    finally:
        util.cleanup(b, a, c)


@pytest.fixture(autouse=True)
def unpin(rc):
    """Close the pins (see pin) a test took, after it."""
    yield
    while rc.pins:
        os.close(rc.pins.pop())


def pin(rc, path):
    """Hold path's dentry and inode in A's kernel for the rest of the test
    (module docstring), by an O_PATH descriptor kept in rc.pins. It sends
    nothing for a name the kernel holds, but its walk checks search
    permission on each directory on the way, which asks for the
    attributes of one changed since they were fetched: call it before a
    change there, or use pin_fd."""
    rc.pins.append(os.open(path, os.O_PATH | os.O_NOFOLLOW))


def pin_fd(rc, fd):
    """pin the file open on fd, through /proc/self/fd/FD: the magic link
    leads to its dentry with no walk at all (no request to A)."""
    rc.pins.append(os.open('/proc/self/fd/%d' % fd, os.O_PATH))


@pytest.fixture
def d(rc, request):
    """A directory made by A for one test, with one file created in it
    already (the state of a create loop), both pinned; returns its name
    relative to both mounts."""
    name = request.node.name
    os.mkdir(os.path.join(rc.a, name))
    pin(rc, os.path.join(rc.a, name))
    create_a(rc, os.path.join(rc.a, name, 'first'))
    return name


def wait_released(rc, before, closes, op='RELEASE'):
    """Wait until the kernel's RELEASE (RELEASEDIR: op) of each of the
    closes files (directories) closed since before has reached A. The
    kernel sends them in the background: close(2) returns before, so
    without the wait one lands in this window or the next one."""
    want = before.fuse.get(op, 0) + closes
    util.wait_until(lambda: Counts(rc).fuse.get(op, 0) >= want, 30, 0.02,
                    "the kernel's " + op)


def measure(rc, fn, settle=None, closes=0, dircloses=0):
    """Run fn() and return its Delta. settle(counts) -> bool, if given, is
    waited for after fn (background work such as the reaper's), and so is
    the RELEASE of each of the closes files and the RELEASEDIR of each of
    the dircloses directories fn opened and closed."""
    before = Counts(rc)
    fn()
    wait_released(rc, before, closes)
    wait_released(rc, before, dircloses, 'RELEASEDIR')
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
    RELEASE, so that it does not land in the measured window. The new
    file is pinned through its open descriptor (no walk through the
    directory the create just changed, which would ask for its
    attributes before the measured op does)."""
    before = Counts(rc)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
    try:
        pin_fd(rc, fd)
    finally:
        os.close(fd)
    wait_released(rc, before, 1)


def assert_cost(d, fuse, mgr, iod=None):
    """The op cost exactly this, each a fixed number from the claim (module
    docstring): the kernel sent A the FUSE requests fuse, the mgr answered
    mgr and the mount called the mgr for exactly mgr, and the iods for
    iod (none when not given)."""
    assert d.fuse == fuse, d
    assert d.mgr == mgr, d
    assert d.calls == mgr, d
    assert d.iod == (iod or {}), d


# What a create of an empty file costs in a loop: the kernel's LOOKUP of
# the new name (a miss; the directory's entry is held for TIMEOUT), its
# GETATTR of the directory its last create changed (answered by the
# mount), CREATE, and the close's FLUSH and RELEASE (nothing at the mgr
# for a file never written).
CREATE_FUSE = {'LOOKUP': 1, 'GETATTR': 1, 'CREATE': 1, 'FLUSH': 1, 'RELEASE': 1}
CREATE_MGR = {'LOOKUP': 1, 'CREATE': 1}


def test_create_empty(rc, d):
    """A create of an empty file in a loop: the kernel's LOOKUP of the new
    name (a miss), its GETATTR of the directory (answered by the mount:
    it folded its own last create in), CREATE, FLUSH and RELEASE: at the
    mgr a LOOKUP and a CREATE; nothing for the close of a file never
    written."""
    dl = measure(rc, lambda: create_empty(os.path.join(rc.a, d, 'f')), closes=1)
    assert_cost(dl, CREATE_FUSE, CREATE_MGR)


def test_create_in_root(rc):
    """The same in the mount's root directory, which the kernel never
    looks up: the mount holds an entry for it from the start."""
    os.stat(rc.a)
    create_a(rc, os.path.join(rc.a, 'root1'))
    dl = measure(rc, lambda: create_empty(os.path.join(rc.a, 'root2')), closes=1)
    assert_cost(dl, CREATE_FUSE, CREATE_MGR)


def test_create_no_excl(rc, d):
    """open(O_CREAT) without O_EXCL, as touch: the mount asks for an
    exclusive create all the same (the kernel sends CREATE only for a name
    it found missing), and it costs what an O_EXCL one does."""
    dl = measure(rc, lambda: create_empty(os.path.join(rc.a, d, 'f'), 0), closes=1)
    assert_cost(dl, CREATE_FUSE, CREATE_MGR)


def test_create_write(rc, d):
    """Create, write 4 KiB, close: as a create, and the kernel's GETXATTR
    (security.capability, answered by the mount) and WRITE; one IO_WRITE,
    the blocks counted on each iod of the layout, one SETBLOCKS at the
    close."""
    def op():
        fd = os.open(os.path.join(rc.a, d, 'f'), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.write(fd, b'w' * 4096)
        os.close(fd)
    dl = measure(rc, op, closes=1)
    assert_cost(dl, dict(CREATE_FUSE, GETXATTR=1, WRITE=1),
                dict(CREATE_MGR, SETBLOCKS=1), {'IO_WRITE': 1, 'IO_BLOCKS': NIODS})


def test_close_unwritten(rc, d):
    """Open for writing and close a file never written, its name held by
    the kernel from its create: OPEN only at the mgr (the GETATTR of the
    directory after the create answered by the mount)."""
    dl = measure(rc, lambda: os.close(os.open(os.path.join(rc.a, d, 'first'), os.O_RDWR)),
                 closes=1)
    assert_cost(dl, {'GETATTR': 1, 'OPEN': 1, 'FLUSH': 1, 'RELEASE': 1}, {'OPEN': 1})


def test_stat_cold(rc, d):
    """stat of a name this mount never looked up (B made it): one LOOKUP,
    whose reply the kernel keeps as the attributes (the GETATTR of the
    directory after A's create answered by the mount)."""
    create_empty(os.path.join(rc.b, d, 'cold'))
    dl = measure(rc, lambda: os.stat(os.path.join(rc.a, d, 'cold')))
    assert_cost(dl, {'LOOKUP': 1, 'GETATTR': 1}, {'LOOKUP': 1})


def test_unlink(rc, d):
    """unlink of a file this mount created, after an unlink: UNLINK, then in
    the background the objects removed on each iod and the inode purged.
    The kernel's one GETATTR of the directory after the last unlink still
    goes to the mgr (the UNLINK reply does not carry the directory's new
    times); no LOOKUP (the name is held from its create)."""
    p = os.path.join(rc.a, d, 'f')
    create_a(rc, p)
    before = Counts(rc)
    os.unlink(os.path.join(rc.a, d, 'first'))
    util.wait_until(lambda: purged(before)(Counts(rc)), 30, 0.05, 'first purged')
    before = Counts(rc)
    dl = measure(rc, lambda: os.unlink(p), purged(before))
    assert_cost(dl, {'GETATTR': 1, 'UNLINK': 1}, {'GETATTR': 1, 'UNLINK': 1, 'PURGE': 1},
                {'IO_REMOVE': NIODS})


def test_rename_same_dir(rc, d):
    """rename within the directory after a create: the kernel's LOOKUP of
    the new name and RENAME; its GETATTR of the directory is answered by
    the mount."""
    p = os.path.join(rc.a, d, 'r1')
    create_a(rc, p)
    dl = measure(rc, lambda: os.rename(p, os.path.join(rc.a, d, 'r2')))
    assert_cost(dl, {'LOOKUP': 1, 'GETATTR': 1, 'RENAME': 1}, {'LOOKUP': 1, 'RENAME': 1})


def test_rename_across(rc, d):
    """rename into another directory, after a rename: the kernel's one
    GETATTR of the directory goes to the mgr (a rename changes attributes
    this mount does not follow), its LOOKUP of the new name, RENAME; the
    target directory (A's mkdir) and the old name (A's rename) are held."""
    os.mkdir(os.path.join(rc.a, d, 'to'))
    pin(rc, os.path.join(rc.a, d, 'to'))
    p = os.path.join(rc.a, d, 'r1')
    create_a(rc, p)
    os.rename(p, os.path.join(rc.a, d, 'r2'))
    dl = measure(rc, lambda: os.rename(os.path.join(rc.a, d, 'r2'),
                                       os.path.join(rc.a, d, 'to', 'r3')))
    assert_cost(dl, {'LOOKUP': 1, 'GETATTR': 1, 'RENAME': 1},
                {'LOOKUP': 1, 'GETATTR': 1, 'RENAME': 1})


def test_mkdir(rc, d):
    """mkdir after a create: LOOKUP and MKDIR at the mgr (the GETATTR of
    the directory answered by the mount)."""
    dl = measure(rc, lambda: os.mkdir(os.path.join(rc.a, d, 'sub')))
    assert_cost(dl, {'LOOKUP': 1, 'GETATTR': 1, 'MKDIR': 1}, {'LOOKUP': 1, 'MKDIR': 1})


def test_readdir_100(rc, d):
    """A listing of 100 names this mount never saw, in a directory it never
    looked up: its LOOKUP and one READDIR at the mgr (they fit in one
    reply); the kernel's call that finds the end (READDIR after its
    READDIRPLUS) and its GETATTR of the parent after A's create are
    answered by the mount."""
    os.mkdir(os.path.join(rc.b, d, 'big'))
    for i in range(100):
        create_empty(os.path.join(rc.b, d, 'big', 'f%03d' % i))
    dl = measure(rc, lambda: os.listdir(os.path.join(rc.a, d, 'big')), dircloses=1)
    assert_cost(dl, {'LOOKUP': 1, 'GETATTR': 1, 'OPENDIR': 1, 'READDIRPLUS': 1,
                     'READDIR': 1, 'RELEASEDIR': 1}, {'LOOKUP': 1, 'READDIR': 1})
    assert sorted(os.listdir(os.path.join(rc.a, d, 'big'))) == \
        ['f%03d' % i for i in range(100)]


def same_dir_attrs(rc, d, by):
    """A's view of directory d equals the mgr's (B, no cache): times, link
    count, mode. A's stat, after a change in d, is one GETATTR from its
    kernel, answered by the mount when by is 'mount' (and the comparison
    is of what the mount made of its own change), by the mgr when by is
    'mgr'."""
    sa = []
    dl = measure(rc, lambda: sa.append(os.stat(os.path.join(rc.a, d))))
    assert_cost(dl, {'GETATTR': 1}, {} if by == 'mount' else {'GETATTR': 1})
    sa = sa[0]
    sb = os.stat(os.path.join(rc.b, d))
    for f in ('st_mtime_ns', 'st_ctime_ns', 'st_nlink', 'st_mode', 'st_uid', 'st_ino'):
        assert getattr(sa, f) == getattr(sb, f), (f, sa, sb)
    return sa


def test_dir_attrs_follow_creates(rc, d):
    """What the mount answers for a directory after its own creates, mkdirs,
    symlinks and mknods is what the mgr holds (and is the mount's answer:
    no GETATTR reaches the mgr); after an unlink, a rename and an rmdir
    (which it does not follow) the mgr answers. Each create moves the
    times, a mkdir and an rmdir the link count."""
    s0 = same_dir_attrs(rc, d, 'mount')
    create_a(rc, os.path.join(rc.a, d, 'f'))
    s1 = same_dir_attrs(rc, d, 'mount')
    assert s1.st_mtime_ns > s0.st_mtime_ns or s1.st_ctime_ns > s0.st_ctime_ns
    os.mkdir(os.path.join(rc.a, d, 'sub'))
    s2 = same_dir_attrs(rc, d, 'mount')
    assert s2.st_nlink == s1.st_nlink + 1
    os.symlink('f', os.path.join(rc.a, d, 'ln'))
    same_dir_attrs(rc, d, 'mount')
    os.mkfifo(os.path.join(rc.a, d, 'fifo'))
    same_dir_attrs(rc, d, 'mount')
    before = Counts(rc)
    os.unlink(os.path.join(rc.a, d, 'f'))
    util.wait_until(lambda: purged(before)(Counts(rc)), 30, 0.05, 'f purged')
    same_dir_attrs(rc, d, 'mgr')
    os.rename(os.path.join(rc.a, d, 'sub'), os.path.join(rc.a, d, 'sub2'))
    same_dir_attrs(rc, d, 'mgr')
    os.rmdir(os.path.join(rc.a, d, 'sub2'))
    s3 = same_dir_attrs(rc, d, 'mgr')
    assert s3.st_nlink == s1.st_nlink


def test_create_existing_race(rc, d):
    """open(O_CREAT) without O_EXCL of a name A's kernel holds as missing
    but B made since: the mount's exclusive CREATE gets EEXIST and it opens
    the existing file as open(2) would, its data intact; with O_EXCL the
    caller gets EEXIST. The kernel sends CREATE (its entry is the miss),
    the mount two CREATEs to the mgr (the second without O_EXCL, which
    opens the existing file) and nothing else, and the read one IO_READ.

    A miss cannot be pinned (module docstring): if the kernel dropped it
    between the stat and the open (it then looks the name up, finds B's
    file and sends OPEN), the race did not happen, and it is set up again
    with a new name, at most RACE_TRIES times. A mount that did not let
    the kernel keep misses fails each try, and the test."""
    for i in range(RACE_TRIES):
        name = 'race%d' % i
        pa = os.path.join(rc.a, d, name)
        with pytest.raises(FileNotFoundError):
            os.stat(pa)  # A's kernel keeps the miss for its entry timeout
        with open(os.path.join(rc.b, d, name), 'wb') as f:
            f.write(b'from B')

        def op():
            fd = os.open(pa, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                assert os.read(fd, 100) == b'from B'
            finally:
                os.close(fd)
        dl = measure(rc, op, closes=1)
        if 'LOOKUP' not in dl.fuse:
            break
    assert_cost(dl, {'CREATE': 1, 'READ': 1, 'FLUSH': 1, 'RELEASE': 1}, {'CREATE': 2},
                {'IO_READ': 1})
    with open(os.path.join(rc.b, d, name), 'rb') as f:
        assert f.read() == b'from B'
    with pytest.raises(FileExistsError):
        create_empty(pa)
