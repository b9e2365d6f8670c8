"""Space: fallocate modes, st_blocks of sparse files, SEEK_DATA/SEEK_HOLE,
through the FUSE mount and librpfs (rpfs-space-test). The shared cluster
has 4 iods and the default layout (64 KiB units over all 4), so the ranges
below cross stripe units and iods; the iods' data directories are on the
host's file system (ext4 here, tmpfs in the RDMA VM), which both punch
holes and answer SEEK_HOLE at 4 KiB granularity."""
import ctypes
import errno
import os
import random
import subprocess

import pytest

import util
from util import run

UNIT = 65536
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_COLLAPSE_RANGE = 0x08
FALLOC_FL_ZERO_RANGE = 0x10

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


def fallocate(fd, mode, off, length):
    """fallocate(2) through ctypes; raises OSError."""
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def write_file(path, data):
    with open(path, 'wb') as f:
        f.write(data)


def read_file(path):
    with open(path, 'rb') as f:
        return f.read()


def blocks(path):
    """st_blocks after a fresh stat (the shared mount caches attrs for 1 s,
    so go through a new open, which revalidates)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.fstat(fd).st_blocks
    finally:
        os.close(fd)


def test_fallocate_allocates_and_grows(workdir):
    """fallocate -l allocates across all 4 iods and grows the size;
    fallocate -n (keep size) allocates without growing it; both read back zeros."""
    a = os.path.join(workdir, 'a')
    n = 3 * UNIT * 4 + 12345          # three rows and a bit: every iod
    run(['fallocate', '-l', str(n), a])
    st = os.stat(a)
    assert st.st_size == n
    assert blocks(a) * 512 >= n       # really allocated, not a hole
    assert read_file(a) == bytes(n)

    k = os.path.join(workdir, 'k')
    write_file(k, b'x' * 1000)
    run(['fallocate', '-n', '-o', '1000', '-l', str(8 * UNIT), k])
    assert os.stat(k).st_size == 1000
    assert blocks(k) * 512 >= 8 * UNIT
    assert read_file(k) == b'x' * 1000

    p = os.path.join(workdir, 'p')
    with open(p, 'wb') as f:
        os.posix_fallocate(f.fileno(), 0, 5 * UNIT + 7)
    assert os.stat(p).st_size == 5 * UNIT + 7
    assert blocks(p) * 512 >= 5 * UNIT + 7
    assert read_file(p) == bytes(5 * UNIT + 7)


def test_punch_hole_reads_zeros(workdir):
    """fallocate -p over partial stripe units on several iods: the range
    reads as zeros, the rest is untouched, the size stays, blocks drop."""
    rng = random.Random(10)
    n = 16 * UNIT + 321
    data = bytearray(rng.randbytes(n))
    f = os.path.join(workdir, 'f')
    write_file(f, data)
    before = blocks(f)
    assert before * 512 >= n
    off, length = UNIT - 5000, 6 * UNIT + 9000   # partial units at both ends
    run(['fallocate', '-p', '-o', str(off), '-l', str(length), f])
    data[off:off + length] = bytes(length)
    assert os.stat(f).st_size == n
    assert read_file(f) == data
    # whole 4 KiB blocks of 5 units were freed, on every iod
    assert blocks(f) * 512 <= before * 512 - 5 * UNIT


def test_zero_range(workdir):
    """fallocate -z zeroes a range inside the file, grows the size when it
    runs past the end, and with -n keeps the size."""
    rng = random.Random(11)
    n = 6 * UNIT + 100
    data = bytearray(rng.randbytes(n))
    f = os.path.join(workdir, 'z')
    write_file(f, data)
    run(['fallocate', '-z', '-o', '70000', '-l', str(2 * UNIT), f])
    data[70000:70000 + 2 * UNIT] = bytes(2 * UNIT)
    assert os.stat(f).st_size == n
    assert read_file(f) == data

    run(['fallocate', '-z', '-o', str(n - 10), '-l', str(3 * UNIT), f])
    data[n - 10:] = bytes(10)
    data += bytes(3 * UNIT - 10)
    assert os.stat(f).st_size == n - 10 + 3 * UNIT
    assert read_file(f) == data

    m = len(data)
    run(['fallocate', '-z', '-n', '-o', str(m - UNIT), '-l', str(4 * UNIT), f])
    data[m - UNIT:] = bytes(UNIT)
    assert os.stat(f).st_size == m
    assert read_file(f) == data


def test_fallocate_times(workdir):
    """Times as ext4: a punch sets mtime, a keep-size allocation only ctime."""
    f = os.path.join(workdir, 't')
    write_file(f, os.urandom(4 * UNIT))
    os.utime(f, (1000000000, 1000000000))
    run(['fallocate', '-n', '-o', '0', '-l', str(8 * UNIT), f])
    st = os.stat(f)
    assert st.st_mtime == 1000000000
    assert st.st_ctime > 1000000000
    run(['fallocate', '-p', '-o', '0', '-l', str(UNIT), f])
    assert os.stat(f).st_mtime > 1000000000


def test_fallocate_unsupported_mode(workdir):
    """A mode outside the five gets EOPNOTSUPP and changes nothing."""
    f = os.path.join(workdir, 'u')
    write_file(f, b'y' * (4 * UNIT))
    fd = os.open(f, os.O_RDWR)
    try:
        with pytest.raises(OSError) as ei:
            fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, UNIT)
        assert ei.value.errno == errno.EOPNOTSUPP
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096)
    finally:
        os.close(fd)
    assert read_file(f) == bytes(4096) + b'y' * (4 * UNIT - 4096)


def test_sparse_10g_du_and_cp(workdir):
    """A 10 GiB file with a few written bytes reports the blocks the iods
    hold (du is small after close), and cp --sparse=always keeps the copy
    sparse and the bytes where they were."""
    f = os.path.join(workdir, 'sparse')
    size = 10 << 30
    marks = {0: b'first', 5 << 30: b'middle', size - 4: b'last'}
    run(['truncate', '-s', '10G', f])
    with open(f, 'r+b') as fh:
        for off, b in marks.items():
            fh.seek(off)
            fh.write(b)
    assert os.stat(f).st_size == size
    assert blocks(f) * 512 < (1 << 20)
    du = int(run(['du', '-k', f]).stdout.split()[0])
    assert du < 1024
    g = os.path.join(workdir, 'copy')
    run(['cp', '--sparse=always', f, g], timeout=600)
    assert os.stat(g).st_size == size
    assert blocks(g) * 512 < (1 << 20)
    with open(g, 'rb') as fh:
        for off, b in marks.items():
            fh.seek(off)
            assert fh.read(len(b)) == b


def test_truncate_updates_blocks(workdir):
    """A shrinking truncate frees blocks and st_blocks follows; a growing
    one adds none (a hole); truncating to 0 leaves none."""
    f = os.path.join(workdir, 'tr')
    write_file(f, os.urandom(16 * UNIT))
    assert blocks(f) * 512 >= 16 * UNIT
    os.truncate(f, 3 * UNIT + 100)
    b = blocks(f)
    assert 3 * UNIT <= b * 512 <= 4 * UNIT
    os.truncate(f, 1 << 30)
    assert blocks(f) == b
    os.truncate(f, 0)
    assert blocks(f) == 0


def test_blocks_seen_by_other_client(dcluster, tmp_path):
    """After the writer closes, another mount sees the true st_blocks and
    size of a sparse file, and of a fallocated one."""
    a = dcluster.mount(str(tmp_path / 'a'))
    b = dcluster.mount(str(tmp_path / 'b'))
    fa = os.path.join(a.path, 's')
    with open(fa, 'wb') as fh:
        fh.seek(1 << 30)
        fh.write(b'z' * 8192)
    fb = os.path.join(b.path, 's')
    st = os.stat(fb)
    assert st.st_size == (1 << 30) + 8192
    assert 8192 <= st.st_blocks * 512 < (1 << 20)
    run(['fallocate', '-l', str(8 * UNIT), os.path.join(a.path, 'fa')])
    st = os.stat(os.path.join(b.path, 'fa'))
    assert st.st_size == 8 * UNIT and st.st_blocks * 512 >= 8 * UNIT


def extents(n):
    """Data written at 4 KiB-aligned offsets across units and iods, with
    the SEEK_DATA / SEEK_HOLE answers they imply for a file of n bytes."""
    return [(69632, 8192),            # inside unit 1 (iod 1)
            (126976, 8192),           # end of unit 1 into unit 2 (iods 1, 2)
            (5 * UNIT * 4 + 4096, 4096),  # a later row (iod 0)
            (n - 4096, 4096)]         # the last block: hole only at EOF


def test_seek_data_hole(workdir):
    """SEEK_DATA / SEEK_HOLE on a file with data at several offsets across
    iods match the written extents; the end is a hole; past it ENXIO."""
    f = os.path.join(workdir, 'seek')
    n = 64 * UNIT
    run(['truncate', '-s', str(n), f])
    ext = extents(n)
    with open(f, 'r+b') as fh:
        for off, length in ext:
            fh.seek(off)
            fh.write(b'd' * length)
    fd = os.open(f, os.O_RDONLY)
    try:
        pos = 0
        for off, length in ext:
            assert os.lseek(fd, pos, os.SEEK_DATA) == off
            assert os.lseek(fd, off, os.SEEK_HOLE) == (off + length if off + length < n else n)
            assert os.lseek(fd, off + 100, os.SEEK_DATA) == off + 100
            pos = off + length
        assert os.lseek(fd, 0, os.SEEK_HOLE) == 0
        with pytest.raises(OSError) as ei:
            os.lseek(fd, n, os.SEEK_DATA)
        assert ei.value.errno == errno.ENXIO
        with pytest.raises(OSError) as ei:
            os.lseek(fd, n, os.SEEK_HOLE)
        assert ei.value.errno == errno.ENXIO
    finally:
        os.close(fd)


def test_librpfs_space(cluster, mnt, workdir):
    """rpfs_fallocate and rpfs_seek through librpfs (rpfs-space-test); the
    result reads back the same through the mount."""
    f = os.path.join(workdir, 'lib')
    argv = [util.binary('fuse-client/rpfs-space-test'),
            util.hostport(cluster.mgr_port), os.path.relpath(f, mnt.path)]
    p = subprocess.run(argv, env=cluster.env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, 'checker failed (%d):\n%s%s' % (
        p.returncode, p.stdout, p.stderr)
    # the checker leaves: 'a' * 8 units, a hole punched in units 2..4 (from
    # 100 bytes into unit 2 to 100 bytes into unit 5), 100 bytes zeroed
    # around the end of unit 0, then zeros allocated up to 12 units and 10
    # bytes past them
    want = bytearray(b'a' * (8 * UNIT))
    want[2 * UNIT + 100:5 * UNIT + 100] = bytes(3 * UNIT)
    want[UNIT - 50:UNIT + 50] = bytes(100)
    want += bytes(4 * UNIT + 10)
    assert read_file(f) == want
