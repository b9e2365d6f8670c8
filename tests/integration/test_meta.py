"""Metadata operations through syscalls on the shared mount."""
import ctypes
import errno
import json
import os
import stat
import threading

import pytest

import util
from util import run

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


def renameat2(old, new, flags):
    """renameat2(2) through the raw syscall (316 on x86_64, 276 on arm64)."""
    import platform
    nr = {'x86_64': 316, 'aarch64': 276}[platform.machine()]
    r = libc.syscall(ctypes.c_long(nr), ctypes.c_int(AT_FDCWD), os.fsencode(old),
                     ctypes.c_int(AT_FDCWD), os.fsencode(new), ctypes.c_uint(flags))
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), old)


def write(path, data, mode='wb'):
    with open(path, mode) as f:
        f.write(data)


def read(path):
    with open(path, 'rb') as f:
        return f.read()


def test_rename_plain_and_over(workdir):
    a, b = os.path.join(workdir, 'a'), os.path.join(workdir, 'b')
    write(a, b'A')
    write(b, b'B')
    ino_a = os.stat(a).st_ino
    os.rename(a, b)
    assert not os.path.exists(a)
    assert read(b) == b'A' and os.stat(b).st_ino == ino_a
    d1, d2 = os.path.join(workdir, 'd1'), os.path.join(workdir, 'd2')
    os.mkdir(d1)
    os.mkdir(d2)
    write(os.path.join(d1, 'x'), b'x')
    with pytest.raises(OSError) as ei:
        os.rename(d2, b)  # dir over file
    assert ei.value.errno == errno.ENOTDIR
    with pytest.raises(OSError) as ei:
        os.rename(d2, d1)  # over non-empty dir
    assert ei.value.errno in (errno.ENOTEMPTY, errno.EEXIST)
    os.rename(d1, d2)  # over an empty dir
    assert read(os.path.join(d2, 'x')) == b'x'
    with pytest.raises(OSError) as ei:
        os.rename(workdir + '/d2', workdir + '/d2/sub')  # into itself
    assert ei.value.errno == errno.EINVAL


def test_rename_noreplace(workdir):
    a, b, c = (os.path.join(workdir, n) for n in 'abc')
    write(a, b'A')
    write(b, b'B')
    with pytest.raises(OSError) as ei:
        renameat2(a, b, RENAME_NOREPLACE)
    assert ei.value.errno == errno.EEXIST
    assert read(a) == b'A' and read(b) == b'B'
    renameat2(a, c, RENAME_NOREPLACE)
    assert not os.path.exists(a) and read(c) == b'A'


def test_rename_exchange(workdir):
    a, b = os.path.join(workdir, 'a'), os.path.join(workdir, 'b')
    write(a, b'A')
    os.mkdir(b)
    write(os.path.join(b, 'inner'), b'I')
    ia, ib = os.stat(a).st_ino, os.stat(b).st_ino
    renameat2(a, b, RENAME_EXCHANGE)
    assert os.path.isdir(a) and read(os.path.join(a, 'inner')) == b'I'
    assert read(b) == b'A'
    assert os.stat(a).st_ino == ib and os.stat(b).st_ino == ia
    with pytest.raises(OSError) as ei:
        renameat2(a, os.path.join(workdir, 'missing'), RENAME_EXCHANGE)
    assert ei.value.errno == errno.ENOENT
    # exchange across directories
    os.mkdir(os.path.join(workdir, 'd'))
    write(os.path.join(workdir, 'd', 'y'), b'Y')
    renameat2(b, os.path.join(workdir, 'd', 'y'), RENAME_EXCHANGE)
    assert read(b) == b'Y' and read(os.path.join(workdir, 'd', 'y')) == b'A'


def test_link_counts(workdir):
    f = os.path.join(workdir, 'f')
    write(f, b'data')
    assert os.stat(f).st_nlink == 1
    os.link(f, f + '2')
    os.link(f, f + '3')
    assert os.stat(f).st_nlink == 3
    assert os.stat(f + '2').st_ino == os.stat(f).st_ino
    os.unlink(f)
    assert os.stat(f + '2').st_nlink == 2
    assert read(f + '3') == b'data'
    os.rename(f + '2', f + '3')  # rename onto another link of the same inode: no-op
    assert os.path.exists(f + '2') and os.path.exists(f + '3')
    # directories: 2 + number of subdirectories
    d = os.path.join(workdir, 'd')
    os.mkdir(d)
    assert os.stat(d).st_nlink == 2
    os.mkdir(os.path.join(d, 's1'))
    os.mkdir(os.path.join(d, 's2'))
    write(os.path.join(d, 'file'), b'')
    assert os.stat(d).st_nlink == 4
    os.rmdir(os.path.join(d, 's1'))
    assert os.stat(d).st_nlink == 3
    with pytest.raises(OSError) as ei:
        os.link(d, os.path.join(workdir, 'dirlink'))
    assert ei.value.errno == errno.EPERM


def test_unlink_open_file(workdir):
    f = os.path.join(workdir, 'f')
    write(f, b'x' * 200000)
    fd = os.open(f, os.O_RDWR)
    try:
        os.unlink(f)
        assert not os.path.exists(f)
        assert os.pread(fd, 10, 199990) == b'x' * 10
        os.pwrite(fd, b'yy', 0)
        assert os.pread(fd, 3, 0) == b'yyx'
    finally:
        os.close(fd)


def test_symlink_readlink(workdir):
    s = os.path.join(workdir, 's')
    target = 'some/where/' + 'x' * 200
    os.symlink(target, s)
    assert os.readlink(s) == target
    st = os.lstat(s)
    assert stat.S_ISLNK(st.st_mode) and st.st_size == len(target)
    long_target = '/'.join(['y' * 200] * 20)[:4000]
    os.symlink(long_target, s + 'long')
    assert os.readlink(s + 'long') == long_target
    write(os.path.join(workdir, 'real'), b'R')
    os.symlink('real', s + 'rel')
    assert read(s + 'rel') == b'R'
    with pytest.raises(OSError) as ei:
        os.symlink('x', s)
    assert ei.value.errno == errno.EEXIST


def test_mkfifo(workdir):
    p = os.path.join(workdir, 'fifo')
    os.mkfifo(p, 0o600)
    assert stat.S_ISFIFO(os.stat(p).st_mode)
    got = []
    t = threading.Thread(target=lambda: got.append(read(p)))
    t.start()
    write(p, b'through the pipe')
    t.join(10)
    assert got == [b'through the pipe']
    os.unlink(p)


def test_xattrs(workdir):
    f = os.path.join(workdir, 'f')
    write(f, b'')
    os.setxattr(f, 'user.one', b'1')
    os.setxattr(f, 'user.two', b'\x00binary\xff')
    big = os.urandom(60000)
    os.setxattr(f, 'user.big', big)
    assert os.getxattr(f, 'user.one') == b'1'
    assert os.getxattr(f, 'user.two') == b'\x00binary\xff'
    assert os.getxattr(f, 'user.big') == big
    names = os.listxattr(f)
    assert {'user.one', 'user.two', 'user.big'} <= set(names)
    with pytest.raises(OSError) as ei:
        os.setxattr(f, 'user.one', b'x', os.XATTR_CREATE)
    assert ei.value.errno == errno.EEXIST
    with pytest.raises(OSError) as ei:
        os.setxattr(f, 'user.none', b'x', os.XATTR_REPLACE)
    assert ei.value.errno == errno.ENODATA
    os.setxattr(f, 'user.one', b'11', os.XATTR_REPLACE)
    assert os.getxattr(f, 'user.one') == b'11'
    os.removexattr(f, 'user.one')
    with pytest.raises(OSError) as ei:
        os.getxattr(f, 'user.one')
    assert ei.value.errno == errno.ENODATA
    with pytest.raises(OSError) as ei:
        os.removexattr(f, 'user.one')
    assert ei.value.errno == errno.ENODATA
    assert 'user.one' not in os.listxattr(f)
    # xattrs on a directory and (via the shell tools) getfattr/setfattr
    os.setxattr(workdir, 'user.dir', b'D')
    assert os.getxattr(workdir, 'user.dir') == b'D'
    run(['setfattr', '-n', 'user.shell', '-v', 'val', f])
    assert 'user.shell="val"' in run(['getfattr', '-d', f]).stdout
    # the values survive a rename
    os.rename(f, f + 'x')
    assert os.getxattr(f + 'x', 'user.big') == big


def test_readdir_big(workdir):
    d = os.path.join(workdir, 'big')
    os.mkdir(d)
    n = util.readdir_entries()
    names = {'file-%05d-%s' % (i, 'x' * (i % 60)) for i in range(n)}
    for name in names:
        os.close(os.open(os.path.join(d, name), os.O_CREAT | os.O_WRONLY, 0o644))
    listed = os.listdir(d)
    assert len(listed) == n, 'duplicates or missing entries'
    assert set(listed) == names
    with os.scandir(d) as it:
        ents = list(it)
    assert len(ents) == n and {e.name for e in ents} == names
    assert all(e.is_file() for e in ents)
    inos = {e.inode() for e in ents}
    assert len(inos) == n
    # ls sees . and .. too
    out = run(['ls', '-a', d]).stdout.split()
    assert len(out) == n + 2
    # readdir stays consistent while entries are removed
    for name in sorted(names)[::2]:
        os.unlink(os.path.join(d, name))
    assert set(os.listdir(d)) == set(sorted(names)[1::2])


def test_statfs(mnt, cluster):
    st = os.statvfs(mnt.path)
    assert st.f_bsize > 0 and st.f_frsize > 0
    assert st.f_blocks > 0 and 0 < st.f_bavail <= st.f_bfree <= st.f_blocks
    assert st.f_files > 0 and st.f_ffree <= st.f_files
    assert st.f_namemax == 255
    # the capacity is the sum over the iods (all four share one file system here)
    local = os.statvfs(cluster.iod_dirs[0])
    want = local.f_blocks * local.f_frsize * cluster.niods
    got = st.f_blocks * st.f_frsize
    assert abs(got - want) <= want * 0.05, (got, want)


def test_names(workdir):
    long = 'n' * 255
    write(os.path.join(workdir, long), b'L')
    assert os.listdir(workdir) == [long]
    with pytest.raises(OSError) as ei:
        open(os.path.join(workdir, 'n' * 256), 'wb')
    assert ei.value.errno == errno.ENAMETOOLONG
    odd = 'sp ace\ttab\u00e9\u4e2d'
    write(os.path.join(workdir, odd), b'O')
    assert read(os.path.join(workdir, odd)) == b'O'
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(workdir, 'missing'))
    with pytest.raises(OSError) as ei:
        os.rmdir(workdir + '/' + long)
    assert ei.value.errno == errno.ENOTDIR


def test_create_excl_and_dirs(workdir):
    f = os.path.join(workdir, 'f')
    os.close(os.open(f, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    with pytest.raises(FileExistsError):
        os.open(f, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    d = os.path.join(workdir, 'd')
    os.mkdir(d, 0o750)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o750 & ~_umask()
    os.mkdir(os.path.join(d, 'x'))
    with pytest.raises(OSError) as ei:
        os.rmdir(d)
    assert ei.value.errno == errno.ENOTEMPTY
    os.rmdir(os.path.join(d, 'x'))
    os.rmdir(d)
    with pytest.raises(FileExistsError):
        os.mkdir(f)


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


def test_utimens(workdir):
    f = os.path.join(workdir, 'f')
    write(f, b'')
    os.utime(f, ns=(1000000001, 2000000002))
    st = os.stat(f)
    assert st.st_atime_ns == 1000000001 and st.st_mtime_ns == 2000000002
    before = st.st_ctime_ns
    os.chmod(f, 0o600)
    assert os.stat(f).st_ctime_ns >= before


def _msgs_total(obj):
    """Sum of every numeric value whose key mentions msgs, anywhere in obj."""
    total = 0
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, (int, float)) and 'msgs' in k:
                total += v
            else:
                total += _msgs_total(v)
    elif isinstance(obj, list):
        for v in obj:
            total += _msgs_total(v)
    return total


def test_stats_xattr(mnt, workdir):
    raw = os.getxattr(mnt.path, 'user.rpfs.stats')
    before = json.loads(raw)
    m0 = _msgs_total(before)
    assert m0 > 0, raw
    f = os.path.join(workdir, 'f')
    write(f, os.urandom(1 << 20))
    os.sync()
    assert len(read(f)) == 1 << 20
    after = json.loads(os.getxattr(mnt.path, 'user.rpfs.stats'))
    assert _msgs_total(after) > m0, (before, after)
