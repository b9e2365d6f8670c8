"""The fast paths: the kernel writeback cache (small writes absorbed, size
and mtime kept by the kernel while pages are dirty) and iod reads sent by
sendfile (large reads, with holes and files growing while read); and a
mount's end with handles the kernel never released."""
import ctypes
import mmap
import os
import re
import signal
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


def _all_threads_stopped(pid):
    """Whether every thread of process pid is stopped (SIGSTOP: state T or
    t in /proc/PID/task/TID/stat). A group stop reaches the threads one by
    one, so a worker could still read a request just after kill()."""
    for tid in os.listdir('/proc/%d/task' % pid):
        try:
            with open('/proc/%d/task/%s/stat' % (pid, tid)) as f:
                state = f.read().rsplit(')', 1)[1].split()[0]
        except FileNotFoundError:
            continue  # the thread exited
        if state not in ('T', 't'):
            return False
    return True


def test_unreleased_handles_at_unmount(cluster, tmp_path_factory):
    """The kernel sends RELEASE and RELEASEDIR in the background, and ends
    the connection when the last user of a (lazily) unmounted file system
    goes, dropping those not yet read: the client frees the handles the
    kernel never released when its session ends, as RELEASE would. Here a
    directory is held open and a file, unlinked, held by a mapping across
    `umount -l`; with the client stopped, the mapping and the directory go,
    so their releases cannot be read before the connection ends. The client
    must still remove the unlinked file's data at that last close, as it
    does when RELEASE comes (else the file stays an orphan, objects and
    all), and exit 0 (the sanitizer build reports a leaked handle and exits
    1)."""
    m = cluster.mount(str(tmp_path_factory.mktemp('rel')), 'allow_other')
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                          ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    addr = dfd = None
    stopped = False
    try:
        d = os.path.join(m.path, 'held')
        os.mkdir(d)
        f = os.path.join(d, 'f')
        with open(f, 'wb') as fh:
            fh.write(os.urandom(MiB))
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        fd = os.open(f, os.O_RDONLY)
        ino = os.fstat(fd).st_ino
        # libc's mmap, not Python's: that one keeps a dup of the fd, whose
        # close would send a FLUSH the stopped client cannot answer
        addr = libc.mmap(None, MiB, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), \
            os.strerror(ctypes.get_errno())
        os.close(fd)
        os.unlink(f)
        assert any(cluster.objects(ino)), 'held open, the data stays'
        util.run(['umount', '-l', m.path])
        m.proc.send_signal(signal.SIGSTOP)
        stopped = True
        util.wait_until(lambda: _all_threads_stopped(m.proc.pid), 30,
                        what='rpfs-fuse stopped')
        # the last users go (the kernel then ends the connection), on a
        # thread: a kernel that waited for a release would block until
        # SIGCONT, and the test must then fail, not hang. 30 s only tells
        # "returned" from "blocked" (the calls take microseconds), with
        # room for a loaded machine.
        res = []
        drop = threading.Thread(target=lambda: res.extend(
            (libc.munmap(addr, MiB), os.close(dfd))))
        drop.start()
        drop.join(30)
        blocked = drop.is_alive()
        m.proc.send_signal(signal.SIGCONT)
        stopped = False
        drop.join()
        addr = dfd = None
        assert not blocked, 'munmap or close waited for the stopped client'
        assert res == [0, None], res
        rc = m.proc.wait(timeout=20)  # a hang guard only
        left = [p for p in cluster.objects(ino) if p]
        assert not left, 'the unlinked file kept its objects: %s' % left
        assert rc == 0, m.log.tail()
    finally:
        if stopped:
            m.proc.send_signal(signal.SIGCONT)
        if addr is not None:
            libc.munmap(addr, MiB)
        if dfd is not None:
            os.close(dfd)
        util.cleanup(m)
