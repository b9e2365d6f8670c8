"""Two mounts of the same file system see each other's changes."""
import os

import pytest

import util


@pytest.fixture(scope='module')
def pair(cluster, tmp_path_factory):
    """Two more mounts of the shared cluster, without attribute caching, so
    each sees the other's changes as soon as they are made."""
    opts = 'allow_other,attr_timeout=0,entry_timeout=0'
    a = cluster.mount(str(tmp_path_factory.mktemp('pa')), opts)
    try:
        b = cluster.mount(str(tmp_path_factory.mktemp('pb')), opts)
    except BaseException:
        util.cleanup(a)
        raise
    yield a.path, b.path
    util.cleanup(a, b)


@pytest.fixture
def dirs(pair, request):
    name = request.node.name
    os.mkdir(os.path.join(pair[0], name))
    return os.path.join(pair[0], name), os.path.join(pair[1], name)


def test_create_visible(dirs):
    a, b = dirs
    with open(os.path.join(a, 'f'), 'wb') as fh:
        fh.write(b'from a')
    assert open(os.path.join(b, 'f'), 'rb').read() == b'from a'
    os.mkdir(os.path.join(b, 'dir'))
    assert os.path.isdir(os.path.join(a, 'dir'))
    assert sorted(os.listdir(a)) == sorted(os.listdir(b)) == ['dir', 'f']
    os.symlink('f', os.path.join(a, 'ln'))
    assert os.readlink(os.path.join(b, 'ln')) == 'f'


def test_rename_visible(dirs):
    a, b = dirs
    with open(os.path.join(a, 'old'), 'wb') as fh:
        fh.write(b'x')
    ino = os.stat(os.path.join(b, 'old')).st_ino
    os.rename(os.path.join(a, 'old'), os.path.join(a, 'new'))
    assert not os.path.exists(os.path.join(b, 'old'))
    assert os.stat(os.path.join(b, 'new')).st_ino == ino
    os.unlink(os.path.join(b, 'new'))
    assert not os.path.exists(os.path.join(a, 'new'))
    assert os.listdir(a) == []


def test_size_after_close(dirs):
    a, b = dirs
    fa, fb = os.path.join(a, 'f'), os.path.join(b, 'f')
    data = os.urandom(3 * 1024 * 1024 + 5)
    with open(fa, 'wb') as fh:
        fh.write(data)
    assert os.stat(fb).st_size == len(data)
    assert open(fb, 'rb').read() == data
    # b appends, a sees it
    with open(fb, 'ab') as fh:
        fh.write(b'appended by b')
    assert os.stat(fa).st_size == len(data) + 13
    assert open(fa, 'rb').read()[-13:] == b'appended by b'
    # a truncates, b sees it
    os.truncate(fa, 1000)
    assert os.stat(fb).st_size == 1000
    assert open(fb, 'rb').read() == data[:1000]


def test_size_after_fsync(dirs):
    a, b = dirs
    fd = os.open(os.path.join(a, 'f'), os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.pwrite(fd, b'q' * 200000, 0)
        os.fsync(fd)
        assert os.stat(os.path.join(b, 'f')).st_size == 200000
    finally:
        os.close(fd)


def test_attrs_visible(dirs):
    a, b = dirs
    f = os.path.join(a, 'f')
    open(f, 'wb').close()
    os.chmod(f, 0o604)
    os.chown(f, 123, 456)
    os.setxattr(f, 'user.k', b'v')
    st = os.stat(os.path.join(b, 'f'))
    assert st.st_mode & 0o777 == 0o604 and (st.st_uid, st.st_gid) == (123, 456)
    assert os.getxattr(os.path.join(b, 'f'), 'user.k') == b'v'
