"""The layout xattr and where the data really lands."""
import errno
import os

import pytest

import util

XL = 'user.rpfs.layout'


def parse(v):
    d = dict(kv.split('=') for kv in v.decode().strip('\0').split(','))
    return {k: int(x) for k, x in d.items()}


def test_root_is_inode_1(mnt):
    assert os.stat(mnt.path).st_ino == 1


def test_default_layout(workdir, cluster):
    f = os.path.join(workdir, 'f')
    open(f, 'wb').close()
    lay = parse(os.getxattr(f, XL))
    assert lay['unit'] == 65536 and lay['count'] == cluster.niods
    assert 0 <= lay['first'] < cluster.niods


def test_dir_layout_inherited_first_rotates(workdir, cluster):
    d = os.path.join(workdir, 'd')
    os.mkdir(d)
    os.setxattr(d, XL, b'unit=131072,count=2')
    lay = parse(os.getxattr(d, XL))
    assert lay['unit'] == 131072 and lay['count'] == 2
    firsts = []
    for i in range(8):
        f = os.path.join(d, 'f%d' % i)
        open(f, 'wb').close()
        lf = parse(os.getxattr(f, XL))
        assert lf['unit'] == 131072 and lf['count'] == 2, lf
        assert 0 <= lf['first'] < cluster.niods
        firsts.append(lf['first'])
    assert len(set(firsts)) >= 2, firsts
    # subdirectories inherit it too
    os.mkdir(os.path.join(d, 'sub'))
    f = os.path.join(d, 'sub', 'g')
    open(f, 'wb').close()
    lf = parse(os.getxattr(f, XL))
    assert lf['unit'] == 131072 and lf['count'] == 2
    # a file elsewhere keeps the default
    g = os.path.join(workdir, 'g')
    open(g, 'wb').close()
    assert parse(os.getxattr(g, XL))['unit'] == 65536


def test_file_layout_set_empty_busy_nonempty(workdir):
    f = os.path.join(workdir, 'f')
    open(f, 'wb').close()
    os.setxattr(f, XL, b'unit=4096,count=3')
    lf = parse(os.getxattr(f, XL))
    assert lf['unit'] == 4096 and lf['count'] == 3
    data = os.urandom(100000)
    with open(f, 'wb') as fh:
        fh.write(data)
    with pytest.raises(OSError) as ei:
        os.setxattr(f, XL, b'unit=65536,count=1')
    assert ei.value.errno == errno.EBUSY
    assert open(f, 'rb').read() == data
    g = os.path.join(workdir, 'g')
    open(g, 'wb').close()
    for bad in (b'unit=1000', b'unit=65536,count=0', b'unit=65536,count=999', b'bogus=1',
                b'unit=abc'):
        with pytest.raises(OSError) as ei:
            os.setxattr(g, XL, bad)
        assert ei.value.errno == errno.EINVAL, bad


def test_data_striped_on_iods(workdir, cluster):
    """1 MiB with unit 64 KiB over 4 iods: each iod holds a 256 KiB object,
    and the k-th unit sits where common/proto/stripe.h says."""
    assert cluster.niods == 4
    d = os.path.join(workdir, 'd')
    os.mkdir(d)
    os.setxattr(d, XL, b'unit=65536,count=4')
    unit = 65536
    for n in range(2):
        f = os.path.join(d, 'f%d' % n)
        data = os.urandom(1 << 20)
        with open(f, 'wb') as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        ino = os.stat(f).st_ino
        first = parse(os.getxattr(f, XL))['first']
        objs = cluster.objects(ino)
        assert all(objs), 'inode %d (%016x): objects %s' % (ino, ino, objs)
        for o in objs:
            assert os.path.getsize(o) == 256 * 1024, o
        local = [open(o, 'rb').read() for o in objs]
        for u in range(16):
            iod = (first + u % 4) % 4
            off = (u // 4) * unit
            assert local[iod][off:off + unit] == data[u * unit:(u + 1) * unit], (u, iod)


def test_striped_count_2_and_truncate(workdir, cluster):
    d = os.path.join(workdir, 'd')
    os.mkdir(d)
    os.setxattr(d, XL, b'unit=65536,count=2')
    f = os.path.join(d, 'f')
    with open(f, 'wb') as fh:
        fh.write(os.urandom(300000))
    ino = os.stat(f).st_ino
    first = parse(os.getxattr(f, XL))['first']
    objs = cluster.objects(ino)
    holders = [i for i, o in enumerate(objs) if o]
    assert sorted(holders) == sorted({first, (first + 1) % 4}), (first, objs)
    # 300000 = 4 full units + 37856: iod k=0 gets units 0,2,4 -> 2*65536+37856
    sizes = {i: os.path.getsize(objs[i]) for i in holders}
    assert sizes[first] == 2 * 65536 + 37856
    assert sizes[(first + 1) % 4] == 2 * 65536
    # truncate shrinks the objects to stripe_local_size()
    os.truncate(f, 70000)
    util.wait_until(lambda: os.path.getsize(objs[first]) == 65536, 10, 0.1, 'truncate')
    assert os.path.getsize(objs[(first + 1) % 4]) == 70000 - 65536
