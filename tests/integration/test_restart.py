"""Everything survives daemons being stopped and started again."""
import errno
import os
import re
import signal
import stat

import pytest

import util
from util import run

XL = 'user.rpfs.layout'


def populate(root):
    """A small tree of everything the file system stores."""
    os.makedirs(os.path.join(root, 'a/b/c'))
    sizes = [0, 1, 4095, 65535, 65536, 65537, 1 << 20, (1 << 20) + 1, 20 << 20]
    for s in sizes:
        with open(os.path.join(root, 'a', 'f%d' % s), 'wb') as f:
            f.write(os.urandom(s))
    d = os.path.join(root, 'striped')
    os.mkdir(d)
    os.setxattr(d, XL, b'unit=4096,count=3')
    with open(os.path.join(d, 'small-units'), 'wb') as f:
        f.write(os.urandom(300000))
    with open(os.path.join(root, 'sparse'), 'wb') as f:
        f.seek(30 << 20)
        f.write(b'end')
    os.symlink('a/f1', os.path.join(root, 'sym'))
    os.link(os.path.join(root, 'a', 'f65536'), os.path.join(root, 'hard'))
    os.mkfifo(os.path.join(root, 'fifo'))
    os.setxattr(os.path.join(root, 'a', 'f1'), 'user.color', b'blue')
    os.chmod(os.path.join(root, 'a', 'f4095'), 0o600)
    os.chown(os.path.join(root, 'a', 'f4095'), 1000, 2000)
    os.utime(os.path.join(root, 'a', 'f0'), ns=(123456789, 987654321))
    os.rename(os.path.join(root, 'a', 'f65537'), os.path.join(root, 'a', 'b', 'moved'))
    os.unlink(os.path.join(root, 'a', 'f65535'))


def manifest(root):
    """Everything observable about the tree, by relative path."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            e = {'mode': st.st_mode, 'uid': st.st_uid, 'gid': st.st_gid, 'ino': st.st_ino,
                 'nlink': st.st_nlink, 'mtime': st.st_mtime_ns}
            if stat.S_ISREG(st.st_mode):
                e['size'] = st.st_size
                e['blocks'] = st.st_blocks
                e['sha'] = util.sha256_file(p)
                e['xattrs'] = {x: os.getxattr(p, x) for x in os.listxattr(p)}
                e['layout'] = os.getxattr(p, XL)
            elif stat.S_ISLNK(st.st_mode):
                e['target'] = os.readlink(p)
            out[os.path.relpath(p, root)] = e
    return out


def check_new_files_work(root, old):
    f = os.path.join(root, 'new-after-restart')
    data = os.urandom(3 << 20)
    with open(f, 'wb') as fh:
        fh.write(data)
    assert open(f, 'rb').read() == data
    ino = os.stat(f).st_ino
    assert ino > max(e['ino'] for e in old.values()), 'inode number reused'
    os.rename(f, f + '.renamed')
    os.unlink(f + '.renamed')


def test_all_daemons_restarted_data_intact(dcluster, tmp_mnt):
    """Unmount, stop every daemon, start them again, mount: all data intact."""
    m = dcluster.mount(tmp_mnt)
    populate(m.path)
    before = manifest(m.path)
    assert m.umount(), 'rpfs-fuse did not exit cleanly (status 0) after its unmount'
    stuck = dcluster.stop_daemons()
    assert not stuck, 'did not exit on SIGTERM: %s' % stuck
    dcluster.start()
    m = dcluster.mount(tmp_mnt)
    after = manifest(m.path)
    assert after == before
    check_new_files_work(m.path, before)


def test_file_data_intact_after_restart_twice(dcluster, tmp_mnt):
    m = dcluster.mount(tmp_mnt)
    f = os.path.join(m.path, 'f')
    want = run('head -c 50M /dev/urandom | tee %s | sha256sum' % f).stdout.split()[0]
    m.umount()
    for _ in range(2):
        dcluster.restart_all()
    m = dcluster.mount(tmp_mnt)
    assert util.sha256_file(f) == want
    assert os.stat(f).st_size == 50 << 20


# The calls a mount makes to the iods here, as its warnings name them.
IOD_OPS = 'read|write|remove|blocks|truncate|fsync'


def test_restart_all_under_live_mount(dcluster, tmp_mnt, expect_log):
    """The mount keeps working across a restart of every daemon. A call
    that meets a daemon gone may fail, and the client warns once per burst
    about that server; nothing else may be logged."""
    expect_log(util.client_mgr_fail_log(dcluster))
    for i in range(dcluster.niods):
        expect_log(util.client_iod_fail_log(dcluster, i, IOD_OPS))
    m = dcluster.mount(tmp_mnt)
    populate(m.path)
    before = manifest(m.path)
    dcluster.restart_all()
    after = util.wait_until(lambda: _try_manifest(m.path), 30, 0.5, 'mount to work again')
    assert after == before
    check_new_files_work(m.path, before)


def _try_manifest(root):
    """The manifest of root, or None on EIO (a server not reachable yet);
    any other error fails the test. The caller compares what it returns:
    a wrong manifest is never retried."""
    try:
        return manifest(root)
    except OSError as e:
        if e.errno != errno.EIO:
            raise
        return None


@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGKILL], ids=['term', 'kill'])
def test_mgr_restart_under_live_mount(dcluster, tmp_mnt, sig, expect_log):
    """Everything survives a mgr restart, even a crash: the namespace is in
    LMDB and every acknowledged operation is durable. A call that meets
    the mgr gone may fail (the client's one warning per burst)."""
    expect_log(util.client_mgr_fail_log(dcluster))
    m = dcluster.mount(tmp_mnt)
    populate(m.path)
    before = manifest(m.path)
    dcluster.mgr.stop(sig)
    dcluster.mgr.start()
    after = util.wait_until(lambda: _try_manifest(m.path), 30, 0.5, 'mount to work again')
    assert after == before
    check_new_files_work(m.path, before)
    # and a second mount sees the same thing
    m2 = dcluster.mount(tmp_mnt + '-2')
    assert manifest(m2.path) == manifest(m.path)


def test_mgr_refuses_changed_iod_table(dcluster):
    """A later start with a different iod table refuses to run (exit 1),
    saying on stderr what differs. The logs watched see nothing: the
    refused mgr's stderr is this test's, and its running one logs no
    warning over a restart."""
    dcluster.mgr.stop()
    argv = list(dcluster.mgr.argv)
    i = argv.index('--iod')
    del argv[i:i + 2]  # drop the first iod
    r = run(argv, check=False, timeout=30)
    assert r.returncode == 1, (r.returncode, r.stderr)
    hp = [util.hostport(p) for p in dcluster.iod_ports]
    assert re.search(r'^<3>rpfs-mgr: --iod: the iod table differs from the one recorded '
                     r'in %s: iod 0 is %s in the database but %s in this table$'
                     % (re.escape(dcluster.store_where()), re.escape(hp[0]), re.escape(hp[1])),
                     r.stderr, re.M), r.stderr
    dcluster.mgr.start()  # the original table still works
