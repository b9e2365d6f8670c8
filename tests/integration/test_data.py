"""Data path: big files, holes, appends, trees, compilers, fio, permissions."""
import os
import random
import subprocess
import sys
import textwrap


import util
from util import run


def test_tar_roundtrip(workdir, tmp_path):
    """tar -x a tree of thousands of files into the mount, tar -c it back
    out: the two archives are byte-identical. ($RPFS_TEST_TAR_FILES files,
    3000 by default; the RDMA VM stage, under qemu TCG, uses fewer.)"""
    want = util.tar_files()
    rng = random.Random(1234)
    src = tmp_path / 'src'
    n = 0
    for i in range(max(3, want // 100)):
        d = src / ('dir%02d' % i) / ('sub%d' % (i % 3))
        d.mkdir(parents=True)
        for j in range(100):
            size = rng.choice([0, 1, 100, 4095, 4096, 5000, 65536, 70000, 200000]) \
                if j % 10 == 0 else rng.randrange(0, 3000)
            p = d / ('f%03d' % j)
            p.write_bytes(rng.randbytes(size))
            os.chmod(p, rng.choice([0o644, 0o600, 0o755, 0o444]))
            n += 1
    (src / 'dir00' / 'link').symlink_to('sub0/f000')
    os.link(src / 'dir01' / 'sub1' / 'f001', src / 'dir01' / 'hard')
    os.utime(src / 'dir02' / 'sub2' / 'f002', (1e9, 1e9))
    assert n >= want
    a = tmp_path / 'a.tar'
    b = tmp_path / 'b.tar'
    tar = ['tar', '--sort=name', '--format=gnu', '--numeric-owner']
    run(tar + ['-cf', str(a), '-C', str(src), '.'])
    run(['tar', '-xf', str(a), '-C', workdir], timeout=600)
    run(['diff', '-r', '--no-dereference', str(src), workdir])
    run(tar + ['-cf', str(b), '-C', workdir, '.'], timeout=600)
    run(['cmp', str(a), str(b)])


def test_compile_and_run(workdir):
    src = os.path.join(workdir, 'hello.c')
    with open(src, 'w') as f:
        f.write(textwrap.dedent('''\
            #include <stdio.h>
            #include <stdlib.h>
            #include "sum.h"
            int main(int argc, char **argv)
            {
                long n = argc > 1 ? atol(argv[1]) : 10;
                printf("hello from rpfs: %ld\\n", sum(n));
                return 0;
            }
            '''))
    with open(os.path.join(workdir, 'sum.h'), 'w') as f:
        f.write('long sum(long n);\n')
    with open(os.path.join(workdir, 'sum.c'), 'w') as f:
        f.write('#include "sum.h"\nlong sum(long n) { long s = 0; '
                'for (long i = 1; i <= n; i++) s += i; return s; }\n')
    run('cc -O2 -c sum.c -o sum.o && cc -O2 -c hello.c -o hello.o && '
        'ar rcs libsum.a sum.o && cc -o hello hello.o -L. -lsum', cwd=workdir)
    out = run(['./hello', '100'], cwd=workdir).stdout
    assert out == 'hello from rpfs: 5050\n'
    assert os.access(os.path.join(workdir, 'hello'), os.X_OK)


def test_1gib_dd_sha256(workdir, cluster, tmp_path):
    """A 1 GiB file written with dd reads back with the same sha256; its
    stripe objects go away with its last link. (The size is
    $RPFS_TEST_BIG_MIB MiB, 1024 by default; the RDMA VM stage, under qemu
    TCG, uses less.)"""
    mib = util.big_mib()
    size = mib << 20
    f = os.path.join(workdir, 'big')
    shafile = str(tmp_path / 'src.sha')
    # A named pipe, not >(...): process substitution needs /dev/fd, which
    # the RDMA VM's devtmpfs /dev does not have.
    fifo = str(tmp_path / 'src.fifo')
    os.mkfifo(fifo)
    run('set -o pipefail; sha256sum < %s > %s & '
        'head -c %dM /dev/urandom | tee %s | dd of=%s bs=1M iflag=fullblock status=none; '
        'rc=$?; wait $! || exit 1; exit $rc' % (fifo, shafile, mib, fifo, f), timeout=900)
    util.wait_until(lambda: os.path.exists(shafile) and os.path.getsize(shafile) > 64,
                    30, 0.1, 'sha256sum of the source')
    want = open(shafile).read().split()[0]
    assert os.stat(f).st_size == size
    got = run('set -o pipefail; dd if=%s bs=1M status=none | sha256sum' % f,
              timeout=900).stdout.split()[0]
    assert got == want
    ino = os.stat(f).st_ino
    objs = cluster.objects(ino)
    assert all(objs), objs
    assert sum(os.path.getsize(o) for o in objs) == size
    os.unlink(f)
    util.wait_until(lambda: not any(cluster.objects(ino)), 30, 0.2,
                    'stripe objects of inode %d removed' % ino)


def _used_inodes(path):
    st = os.statvfs(path)
    return st.f_files - st.f_ffree


def test_unlink_burst_batched_removal(workdir, cluster, mnt):
    """A burst of unlinks: every file's stripe objects leave every iod and
    every inode leaves the mgr (statfs counts it no more), and the client
    took them in batches (IO_REMOVE_MANY / PURGE_MANY), fewer batches than
    inodes (rpfs.stats reap_*)."""
    import json
    n = 200
    names, inos = [], []
    for i in range(n):
        f = os.path.join(workdir, 'f%03d' % i)
        with open(f, 'wb') as fh:
            layout = dict(kv.split('=') for kv in
                          os.getxattr(f, 'user.rpfs.layout').decode().split(','))
            unit = int(layout['unit'])
            for k in range(int(layout['count'])):  # an object on every iod
                fh.seek(k * unit)
                fh.write(b'%d' % i)
        names.append(f)
        inos.append(os.stat(f).st_ino)
    assert all(all(cluster.objects(ino)) for ino in inos[:5])
    base = json.loads(os.getxattr(mnt.path, 'user.rpfs.stats'))
    used = _used_inodes(mnt.path)
    for f in names:
        os.unlink(f)
    want = {'%016x' % ino for ino in inos}

    def objects_left():  # one walk of the iods for all the inodes
        return any(f.lower() in want for d in cluster.iod_dirs
                   for _root, _dirs, files in os.walk(d) for f in files)
    util.wait_until(lambda: not objects_left(), 60, 0.2,
                    'stripe objects of %d unlinked files removed' % n)
    util.wait_until(lambda: _used_inodes(mnt.path) <= used - n, 30, 0.2,
                    'the %d freed inodes purged at the mgr' % n)
    after = json.loads(os.getxattr(mnt.path, 'user.rpfs.stats'))
    reaped = after['reap_inodes'] - base['reap_inodes']
    batches = after['reap_batches'] - base['reap_batches']
    assert reaped >= n, (reaped, batches)
    assert 0 < batches < reaped, (reaped, batches)


def test_sparse_and_holes(workdir, cluster):
    f = os.path.join(workdir, 'sparse')
    fd = os.open(f, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.pwrite(fd, b'tail', 10 * 1024 * 1024)
        os.pwrite(fd, b'mid', 3 * 65536 + 17)
        assert os.fstat(fd).st_size == 10 * 1024 * 1024 + 4
    finally:
        os.close(fd)
    assert os.stat(f).st_size == 10 * 1024 * 1024 + 4
    data = open(f, 'rb').read()
    assert len(data) == 10 * 1024 * 1024 + 4
    want = bytearray(len(data))
    want[3 * 65536 + 17:3 * 65536 + 20] = b'mid'
    want[-4:] = b'tail'
    assert data == bytes(want)
    # the holes stay holes on the iods: the objects hold little real data
    objs = [o for o in cluster.objects(os.stat(f).st_ino) if o]
    assert objs
    used = sum(os.stat(o).st_blocks * 512 for o in objs)
    assert used < 1024 * 1024, (used, objs)
    # truncate down, then up: the cut bytes must not come back
    g = os.path.join(workdir, 'g')
    with open(g, 'wb') as fh:
        fh.write(b'\xaa' * 1000000)
    os.truncate(g, 100)
    os.truncate(g, 1000000)
    data = open(g, 'rb').read()
    assert data == b'\xaa' * 100 + bytes(999900)
    # seek past the end and write through a stream
    h = os.path.join(workdir, 'h')
    with open(h, 'wb') as fh:
        fh.seek(5 * 65536 - 1)
        fh.write(b'z')
    assert open(h, 'rb').read() == bytes(5 * 65536 - 1) + b'z'
    run(['dd', 'if=/dev/zero', 'of=' + os.path.join(workdir, 'holey'), 'bs=1M', 'seek=50',
         'count=0', 'status=none'])
    assert os.stat(os.path.join(workdir, 'holey')).st_size == 50 << 20
    assert run('cmp -n 52428800 %s/holey /dev/zero' % workdir).returncode == 0


APPENDER = r'''
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
tag = sys.argv[2]
for i in range(int(sys.argv[3])):
    rec = ('%s %06d ' % (tag, i)).encode() + tag.encode() * 50 + b'\n'
    assert os.write(fd, rec) == len(rec)
os.close(fd)
'''


def test_append_two_processes(workdir):
    f = os.path.join(workdir, 'log')
    n = 2000
    procs = [subprocess.Popen([sys.executable, '-c', APPENDER, f, tag, str(n)])
             for tag in ('A', 'B')]
    for p in procs:
        assert p.wait(timeout=300) == 0
    lines = open(f, 'rb').read().split(b'\n')
    assert lines[-1] == b''
    lines = lines[:-1]
    assert len(lines) == 2 * n
    for tag in (b'A', b'B'):
        mine = [l for l in lines if l.startswith(tag + b' ')]
        assert len(mine) == n
        for i, l in enumerate(mine):
            assert l == tag + b' %06d ' % i + tag * 50
    assert os.stat(f).st_size == 2 * n * 60


def _fio(args, workdir):
    r = run(['fio', '--output-format=normal', '--verify_state_save=0'] + args + ['--directory=' + workdir],
            check=False, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert 'verify:' not in r.stderr and 'bad magic' not in r.stdout + r.stderr
    assert 'err= 0' in r.stdout, r.stdout[-3000:]


def test_fio_randwrite_verify(workdir):
    _fio(['--name=v', '--rw=randwrite', '--bs=4k', '--size=32m', '--verify=crc32c',
          '--do_verify=1', '--direct=0', '--ioengine=psync'], workdir)


def test_fio_seqwrite_verify(workdir):
    _fio(['--name=s', '--rw=write', '--bs=1M', '--size=64m', '--verify=crc32c',
          '--do_verify=1', '--direct=0', '--ioengine=psync', '--numjobs=2'], workdir)


def test_permission_denied_other_uid(workdir):
    f = os.path.join(workdir, 'secret')
    with open(f, 'w') as fh:
        fh.write('root only\n')
    os.chmod(f, 0o600)
    os.chmod(workdir, 0o755)
    nobody = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']
    # positive control: the other uid reaches the directory and public files
    with open(os.path.join(workdir, 'public'), 'w') as fh:
        fh.write('everyone\n')
    os.chmod(os.path.join(workdir, 'public'), 0o644)
    r = run(nobody + ['cat', os.path.join(workdir, 'public')], check=False)
    assert r.returncode == 0 and r.stdout == 'everyone\n', r
    assert 'secret' in run(nobody + ['ls', workdir]).stdout
    r = run(nobody + ['cat', f], check=False)
    assert r.returncode != 0 and 'Permission denied' in r.stderr, r
    r = run(nobody + ['touch', os.path.join(workdir, 'new')], check=False)
    assert r.returncode != 0 and 'Permission denied' in r.stderr, r
    r = run(nobody + ['rm', '-f', f], check=False)
    assert r.returncode != 0 and 'Permission denied' in r.stderr, r
    # readable when the mode allows it, and a group member gets group access
    os.chmod(f, 0o640)
    os.chown(f, 0, 4242)
    r = run(['setpriv', '--reuid=65534', '--regid=65534', '--groups=4242', 'cat', f],
            check=False)
    assert r.returncode == 0 and r.stdout == 'root only\n', r
    r = run(nobody + ['cat', f], check=False)
    assert r.returncode != 0 and 'Permission denied' in r.stderr, r
    # a directory the other uid owns is writable by it
    d = os.path.join(workdir, 'nobody')
    os.mkdir(d)
    os.chown(d, 65534, 65534)
    run(nobody + ['sh', '-c', 'echo mine > %s/f && cat %s/f' % (d, d)])
    st = os.stat(os.path.join(d, 'f'))
    assert (st.st_uid, st.st_gid) == (65534, 65534)
    # chown to another user is root's business
    r = run(nobody + ['chown', '0', os.path.join(d, 'f')], check=False)
    assert r.returncode != 0 and 'not permitted' in r.stderr, r


def test_overlapping_writes_keep_order(workdir):
    """Writes answered before the iods stored them (write-behind) still land
    in the writer's order: the same and partly overlapping ranges written
    over and over through one handle read back as the last writes, from
    the same handle and from another before close, and after close."""
    p = os.path.join(workdir, 'overlap')
    ref = bytearray(256 * 1024)
    rnd = random.Random(7)
    with open(p, 'wb', buffering=0) as w, open(p, 'rb', buffering=0) as r:
        for i in range(300):
            off = rnd.choice([0, 4096, 60000, 65536, 130000])
            n = rnd.choice([1, 4096, 70000])
            b = bytes([i % 251 + 1]) * n
            assert w.write(b) if w.seek(off) == off else False
            ref[off:off + n] = b
            if i % 50 == 49:
                r.seek(0)
                assert r.read(len(ref)) == bytes(ref[:max(os.path.getsize(p), 0)])
    with open(p, 'rb') as fh:
        assert fh.read() == bytes(ref[:os.path.getsize(p)])
