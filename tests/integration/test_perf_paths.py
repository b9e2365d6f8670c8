"""The fast paths: the kernel writeback cache (small writes absorbed, size
and mtime kept by the kernel while pages are dirty) and iod reads sent by
sendfile (large reads, with holes and files growing while read)."""
import os
import re
import threading

import pytest

import util

MiB = 1024 * 1024


# Every check runs once per write mode: the default (each write(2) goes to
# the iods) and the opt-in kernel writeback cache.
MODES = ['no_writeback_cache', 'writeback_cache']


@pytest.fixture(scope='module', params=MODES)
def pair(cluster, tmp_path_factory, request):
    """Two more mounts in one write mode, with the default (1 s) attribute
    and entry caches."""
    opts = 'allow_other,' + request.param
    a = cluster.mount(str(tmp_path_factory.mktemp('wa')), opts)
    try:
        b = cluster.mount(str(tmp_path_factory.mktemp('wb')), opts)
    except BaseException:
        util.cleanup(a)
        raise
    yield a.path, b.path
    util.cleanup(a, b)


@pytest.fixture
def dirs(pair, request):
    name = re.sub(r'[^A-Za-z0-9_.-]', '_', request.node.name)
    os.mkdir(os.path.join(pair[0], name))
    return os.path.join(pair[0], name), os.path.join(pair[1], name)


@pytest.fixture
def workdir(dirs):
    """A fresh directory on the first mount of the pair (shadows the shared
    mount's workdir so that every check here runs in both write modes)."""
    return dirs[0]


def _wait_caches():
    """Let both mounts' attribute and name caches (1 s) expire."""
    import time
    time.sleep(1.2)


def test_size_after_close_cached_inode(dirs):
    """Both mounts hold the inode; a grows it, then b truncates it: each
    sees the other's size after close, though the kernel keeps sizes of
    cached inodes itself with the writeback cache."""
    a, b = dirs
    fa, fb = os.path.join(a, 'f'), os.path.join(b, 'f')
    with open(fa, 'wb') as fh:
        fh.write(b'x' * 5000)
    _wait_caches()
    assert os.stat(fb).st_size == 5000
    with open(fa, 'ab') as fh:
        fh.write(b'y' * 100000)
    _wait_caches()
    assert os.stat(fb).st_size == 105000
    assert open(fb, 'rb').read() == b'x' * 5000 + b'y' * 100000
    os.truncate(fb, 7)
    _wait_caches()
    assert os.stat(fa).st_size == 7
    assert open(fa, 'rb').read() == b'xxxxxxx'


def test_small_writes_and_partial_pages_wronly(workdir):
    """Unaligned small writes through an O_WRONLY descriptor: the kernel
    reads the partial pages first (the client must serve reads on a
    write-only handle); the result is byte exact."""
    f = os.path.join(workdir, 'f')
    base = os.urandom(300000)
    with open(f, 'wb') as fh:
        fh.write(base)
    want = bytearray(base)
    fd = os.open(f, os.O_WRONLY)
    try:
        for off in (1, 4095, 4097, 65535, 131073, 299990):
            piece = os.urandom(17)
            os.pwrite(fd, piece, off)
            want[off:off + len(piece)] = piece
        os.pwrite(fd, b'tail', 300010)  # past the end: a small hole
        want += b'\0' * (300010 - len(want)) + b'tail'
    finally:
        os.close(fd)
    assert os.stat(f).st_size == len(want)
    assert open(f, 'rb').read() == bytes(want)


def test_mode_0200_write_only_file(workdir):
    """A file the writer may not read: partial-page writes still work."""
    f = os.path.join(workdir, 'f')
    with open(f, 'wb') as fh:
        fh.write(b'a' * 10000)
    os.chmod(f, 0o200)
    fd = os.open(f, os.O_WRONLY)
    try:
        os.pwrite(fd, b'B', 5000)
    finally:
        os.close(fd)
    os.chmod(f, 0o600)
    assert open(f, 'rb').read() == b'a' * 5000 + b'B' + b'a' * 4999


def test_explicit_mtime_survives_close(workdir):
    f = os.path.join(workdir, 'f')
    fd = os.open(f, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, b'z' * 12345)
        os.utime(f, ns=(1_000_000_000_123, 2_000_000_000_456))
    finally:
        os.close(fd)
    st = os.stat(f)
    assert st.st_size == 12345
    assert st.st_mtime_ns == 2_000_000_000_456


def test_sparse_reads_large(workdir):
    """Large reads (the sendfile path) across data, holes and the end."""
    f = os.path.join(workdir, 'sparse')
    chunk = os.urandom(100000)
    fd = os.open(f, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.pwrite(fd, chunk, 0)
        os.pwrite(fd, chunk, 5 * MiB + 3)
        os.pwrite(fd, chunk, 9 * MiB)
    finally:
        os.close(fd)
    size = 9 * MiB + len(chunk)
    assert os.stat(f).st_size == size
    want = bytearray(size)
    for off in (0, 5 * MiB + 3, 9 * MiB):
        want[off:off + len(chunk)] = chunk
    fd = os.open(f, os.O_RDONLY | os.O_DIRECT)
    try:
        import mmap
        buf = mmap.mmap(-1, 2 * MiB)
        got = bytearray()
        off = 0
        while off < size:
            n = os.preadv(fd, [buf], off)
            assert n > 0
            got += buf[:n]
            off += n
    finally:
        os.close(fd)
    assert bytes(got) == bytes(want)
    assert open(f, 'rb').read() == bytes(want)


def test_read_while_extended(workdir):
    """Reads of a file another process keeps extending see whole, correct
    prefixes (never garbage past the size known at the read)."""
    f = os.path.join(workdir, 'grow')
    block = bytes(range(256)) * 4096  # 1 MiB, position-dependent pattern
    total = 16
    open(f, 'wb').close()
    done = threading.Event()

    def writer():
        with open(f, 'ab') as fh:
            for _ in range(total):
                fh.write(block)
                fh.flush()
                os.fsync(fh.fileno())
        done.set()

    t = threading.Thread(target=writer)
    t.start()
    try:
        while not done.is_set():
            with open(f, 'rb') as fh:
                data = fh.read()
            n = len(data) // len(block) * len(block)
            assert data[:n] == block * (n // len(block))
            rest = data[n:]
            assert rest == block[:len(rest)]
    finally:
        t.join()
    assert open(f, 'rb').read() == block * total


@pytest.mark.parametrize('opt', ['no_writeback_cache', 'writeback_cache'])
def test_mount_option(cluster, tmp_path_factory, opt):
    m = cluster.mount(str(tmp_path_factory.mktemp('o')), 'allow_other,' + opt)
    try:
        d = os.path.join(m.path, 'opt-' + opt)
        os.mkdir(d)
        f = os.path.join(d, 'f')
        with open(f, 'wb') as fh:
            for i in range(100):
                fh.write(b'%05d' % i)
        assert open(f, 'rb').read() == b''.join(b'%05d' % i for i in range(100))
    finally:
        util.cleanup(m)
