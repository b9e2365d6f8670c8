"""Reads answered by splice on TCP (fuse-client/frontend/fe_splice.c): the iods'
data goes from the sockets into pipes and on to /dev/fuse. Every read is
checked byte for byte against the data written; the transport counters
(user.rpfs.stats pipe_bytes) show that the spliced path served it (on
verbs nothing is spliced, and the same reads must still be right).

rpfs-fuse splices only when a pipe can grow to 2 MiB (libfuse needs that
for a 1 MiB reply): the tests mount with /proc/sys/fs/pipe-max-size raised
to 4 MiB, as scripts/bench.sh does, and restore it afterwards; one test
mounts with the 1 MiB default and checks the buffer path is taken."""
import contextlib
import hashlib
import json
import mmap
import os
import random
import re
import signal
import threading

import pytest

import util

MIB = 1 << 20
PIPE_MAX = '/proc/sys/fs/pipe-max-size'
SPL_MIN = 64 << 10  # fuse-client/frontend/fe_splice.c: smaller READs take the buffer path


@pytest.fixture(scope='module', autouse=True)
def pipe_max_lock():
    """The machine-wide lock on pipe-max-size for the whole module: its
    mounts size their pipes at first use, and its counters assume no other
    test of the run changes the setting meanwhile (util.global_lock)."""
    with util.global_lock('pipe-max-size'):
        yield


@contextlib.contextmanager
def _pipe_max(size):
    """/proc/sys/fs/pipe-max-size set to size while inside (under the
    module's lock on it)."""
    with open(PIPE_MAX) as f:
        orig = f.read().strip()
    with open(PIPE_MAX, 'w') as f:
        f.write(str(size))
    try:
        yield
    finally:
        with open(PIPE_MAX, 'w') as f:
            f.write(orig)


@pytest.fixture(scope='module')
def zmnt(cluster, tmp_path_factory):
    """A mount of the shared cluster made while pipes may grow to 4 MiB
    (rpfs-fuse decides at INIT, and sizes its pipes on first use)."""
    path = str(tmp_path_factory.mktemp('zmnt'))
    with _pipe_max(4 * MIB):
        m = cluster.mount(path, 'allow_other')
        yield m
        util.cleanup(m)


@pytest.fixture
def zdir(zmnt, request):
    """A fresh directory on zmnt, named after the test."""
    p = os.path.join(zmnt.path, re.sub(r'[^A-Za-z0-9_.-]', '_', request.node.name)[:200])
    os.mkdir(p)
    return p


def _stats(m):
    return json.loads(os.getxattr(m.path, 'user.rpfs.stats'))


def _spliced(m, before):
    """Bytes put into pipes on mount m since the counters `before`."""
    return _stats(m)['pipe_bytes'] - before['pipe_bytes']


def _expect_spliced(m, before, lens):
    """Mount m spliced, since the counters `before`, exactly the bytes of
    the O_DIRECT reads that returned lens bytes each, but for those under
    SPL_MIN (the kernel asks rpfs-fuse for no more than EOF leaves, so a
    read's size is what it returned): every one of those on tcp, none on
    verbs."""
    st = _stats(m)
    got = st['pipe_bytes'] - before['pipe_bytes']
    if st['transport'] == 'tcp':
        want = sum(n for n in lens if n >= SPL_MIN)
        assert got == want, '%d bytes spliced, want %d' % (got, want)
    else:
        assert got == 0, '%d bytes spliced on %s' % (got, st['transport'])


def _make(path, data, layout=None):
    """Create path (with layout, e.g. 'unit=4096,count=4') holding data."""
    if layout:
        with open(path, 'wb'):
            pass
        os.setxattr(path, 'user.rpfs.layout', layout.encode())
    with open(path, 'wb') as f:
        f.write(data)


def _dread(path, off, n):
    """pread n bytes at off with O_DIRECT (no page cache: every byte is a
    READ to rpfs-fuse) into a page-aligned buffer; returns what was read."""
    buf = mmap.mmap(-1, max(n, 1))
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        got = os.preadv(fd, [memoryview(buf)[:n]], off)
        return bytes(buf[:got])
    finally:
        os.close(fd)
        buf.close()


def test_splice_1mib_reads_across_units(zdir, zmnt):
    """1 MiB O_DIRECT reads of files striped over 4 iods at units of 64 KiB,
    4 KiB (257 pieces per read) and 1 MiB, and over 1 iod."""
    rng = random.Random(11)
    for layout in ('unit=65536,count=4', 'unit=4096,count=4', 'unit=1048576,count=4',
                   'unit=65536,count=1', None):
        f = os.path.join(zdir, 'big-%s' % (layout or 'default').replace(',', '-').replace('=', ''))
        data = rng.randbytes(6 * MIB + 4321)
        _make(f, data, layout)
        before = _stats(zmnt)
        lens = []
        for off in range(0, len(data), MIB):
            want = data[off:off + MIB]
            got = _dread(f, off, MIB)
            assert got == want, '%s at %d' % (layout, off)
            lens.append(len(got))
        _expect_spliced(zmnt, before, lens)


def test_splice_unaligned_and_eof(zdir, zmnt):
    """Unaligned offsets and lengths, pieces smaller than a page, reads
    crossing stripe units, short reads at EOF and past it."""
    rng = random.Random(12)
    f = os.path.join(zdir, 'odd')
    data = rng.randbytes(3 * MIB + 777)
    _make(f, data, 'unit=65536,count=4')
    before = _stats(zmnt)
    lens = []
    for off, n in ((1, MIB - 3), (65535, 65538), (12345, 1000000), (4095, 200001),
                   (3 * MIB - 100000, MIB), (len(data) - 70000, MIB),
                   (len(data) - 1, 65536), (len(data), MIB), (len(data) + 5, MIB)):
        got = _dread(f, off, n)
        assert got == data[off:off + n], 'off %d len %d' % (off, n)
        lens.append(len(got))
    _expect_spliced(zmnt, before, lens)
    # through the page cache: readahead READs of up to 1 MiB
    with open(f, 'rb') as fh:
        assert fh.read() == data


def test_splice_holes(zdir, zmnt):
    """Holes inside the file and a size extended past every object: the
    iods send zeros for what they do not have."""
    f = os.path.join(zdir, 'holes')
    with open(f, 'wb'):
        pass
    os.setxattr(f, 'user.rpfs.layout', b'unit=65536,count=4')
    a = os.urandom(100000)
    b = os.urandom(5000)
    with open(f, 'r+b') as fh:
        fh.write(a)
        fh.seek(2 * MIB + 3)
        fh.write(b)
        fh.truncate(5 * MIB)
    want = a + bytes(2 * MIB + 3 - len(a)) + b
    want += bytes(5 * MIB - len(want))
    before = _stats(zmnt)
    for off in range(0, 5 * MIB, MIB):
        assert _dread(f, off, MIB) == want[off:off + MIB], 'at %d' % off
    assert _dread(f, 70000, MIB) == want[70000:70000 + MIB]
    _expect_spliced(zmnt, before, [MIB] * 6)


def test_splice_concurrent_readers(zdir, zmnt):
    """Eight threads read different files and the same file at once, in
    random 1 MiB-ish O_DIRECT pieces: each worker thread of rpfs-fuse has
    its own pipes, and no reply may carry another read's bytes."""
    rng = random.Random(13)
    files = []
    for i in range(4):
        f = os.path.join(zdir, 'c%d' % i)
        data = rng.randbytes(8 * MIB + i * 1000)
        _make(f, data, 'unit=65536,count=4' if i % 2 else 'unit=16384,count=3')
        files.append((f, data))
    errors = []
    lens = []
    before = _stats(zmnt)

    def reader(seed):
        r = random.Random(seed)
        try:
            for _ in range(40):
                f, data = files[r.randrange(len(files))]
                off = r.randrange(len(data))
                n = r.choice((MIB, MIB - 1, 300000, 65536))
                got = _dread(f, off, n)
                lens.append(len(got))
                if got != data[off:off + n]:
                    errors.append('%s off %d len %d' % (f, off, n))
        except OSError as e:
            errors.append(repr(e))
    ts = [threading.Thread(target=reader, args=(s,)) for s in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    assert not errors, errors[:5]
    _expect_spliced(zmnt, before, lens)


def test_splice_dd(zdir, zmnt, tmp_path):
    """A larger file read back by dd in 1 MiB O_DIRECT blocks, compared by
    sha256 with what was written."""
    f = os.path.join(zdir, 'dd')
    out = tmp_path / 'dd.out'
    data = random.Random(14).randbytes(32 * MIB + 1)
    _make(f, data)
    before = _stats(zmnt)
    util.run(['dd', 'if=' + f, 'of=%s' % out, 'bs=1M', 'iflag=direct', 'status=none'])
    assert util.sha256_file(str(out)) == hashlib.sha256(data).hexdigest()
    _expect_spliced(zmnt, before, [min(MIB, len(data) - o) for o in range(0, len(data), MIB)])


def test_no_splice_when_pipes_cannot_grow(cluster, tmp_path_factory):
    """With pipes limited to 1 MiB (the default, without CAP_SYS_RESOURCE)
    libfuse could not splice a 1 MiB reply: rpfs-fuse reads through its
    buffer, and the data is the same."""
    path = str(tmp_path_factory.mktemp('nozmnt'))
    with _pipe_max(MIB):
        m = cluster.mount(path, 'allow_other')
        try:
            f = os.path.join(m.path, 'nosplice')
            data = random.Random(15).randbytes(4 * MIB + 3)
            _make(f, data)
            before = _stats(m)
            for off in range(0, len(data), MIB):
                assert _dread(f, off, MIB) == data[off:off + MIB]
            assert _spliced(m, before) == 0
        finally:
            util.cleanup(m)


def test_splice_iod_killed_mid_read_eio(dcluster, tmp_mnt, expect_log):
    """An iod killed while 1 MiB O_DIRECT reads are spliced (on tcp the
    reader's whole pass before the kill, 32 reads of 1 MiB, went through
    the pipes): EIO within the timeout, no hang and no wrong bytes (every
    read that returns data is compared with the file); reads work again
    once it is back (the thread's pipes, left half full, are made anew).
    It logs only what the same fault logs without splice
    (test_faults.iod_fault_logs)."""
    import test_faults

    def spliced(m):
        """The reader's first pass (32 MiB in 1 MiB reads) was spliced."""
        st = _stats(m)
        if st['transport'] == 'tcp':
            assert st['pipe_bytes'] >= 32 * MIB, st
        else:
            assert st['pipe_bytes'] == 0, st
    with _pipe_max(4 * MIB):
        test_faults._iod_fault(dcluster, tmp_mnt, signal.SIGKILL, expect_log,
                               before_fault=spliced)
