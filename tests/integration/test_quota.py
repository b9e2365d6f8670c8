"""Namespace space (mgr/store/README.md "Namespace space"): with a small
[mgr] db_size an unprivileged user fills the namespace until creates, links and
xattrs get ENOSPC (never EIO); the mgr still serves stat, readdir and
getxattr, and deletes of every kind (unlink, rmdir, removexattr, rename
over a file, shrinking replaces, truncate) still work at full, after which
the space is used again. The per-inode xattr caps ([mgr] xattr_max_count,
xattr_max_bytes) refuse the xattr past them with ENOSPC, let same-size and
smaller replaces through, and let another in after a remove. The user is
uid 65534 (setpriv); every file operation of the user runs in a helper
process that reports each result (0, a value, or the errno name). The
helper starts in the user's directory on the mount and uses paths relative
to it: a pytest session starting meanwhile (another worktree's) sets
/tmp/pytest-of-root back to 0700, so a path from / may not be searchable
by 65534."""
import errno
import json
import os

import pytest

import util
from util import run

NOBODY = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']
MAP_PAGES = 1024          # db_size = 4M in 4 KiB pages
RESERVE_PAGES = 256       # the 1 MiB floor of the reserve

# Run the operations of argv[1] (JSON: [[op, args...], ...]) in order and
# print one result per operation: 0 or a value on success, else the errno
# name. "fill DIR PER SIZE" creates files with PER xattrs of SIZE bytes
# each until an operation fails and returns [files, xattrs, errno name].
AGENT = r'''
import errno, json, os, sys

def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))

def fill(d, per, size):
    n = x = 0
    try:
        while n < 100000:
            f = os.path.join(d, "f%05d" % n)
            os.close(os.open(f, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            n += 1
            for j in range(per):
                os.setxattr(f, "user.x%03d" % j, b"v" * size)
                x += 1
    except OSError as e:
        return [n, x, name(e)]
    return [n, x, None]

def one(op, a):
    if op == "create":
        os.close(os.open(a[0], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    elif op == "mkdir":
        os.mkdir(a[0])
    elif op == "symlink":
        os.symlink("target", a[0])
    elif op == "link":
        os.link(a[0], a[1])
    elif op == "setxattr":
        os.setxattr(a[0], a[1], b"v" * a[2])
    elif op == "getxattr":
        return len(os.getxattr(a[0], a[1]))
    elif op == "listxattr":
        return len(os.listxattr(a[0]))
    elif op == "removexattr":
        os.removexattr(a[0], a[1])
    elif op == "unlink":
        os.unlink(a[0])
    elif op == "rmdir":
        os.rmdir(a[0])
    elif op == "rename":
        os.rename(a[0], a[1])
    elif op == "truncate":
        os.truncate(a[0], a[1])
    elif op == "chmod":
        os.chmod(a[0], a[1])
    elif op == "stat":
        return os.stat(a[0]).st_size
    elif op == "listdir":
        return sorted(os.listdir(a[0]))
    elif op == "fill":
        return fill(*a)
    else:
        raise SystemExit("unknown op " + op)
    return 0

out = []
for op, *a in json.loads(sys.argv[1]):
    try:
        out.append(one(op, a))
    except OSError as e:
        out.append(name(e))
print(json.dumps(out))
'''


def nobody(cwd, *ops):
    """Run ops as uid 65534 in directory cwd (entered as root); their
    results, one per op."""
    r = run(NOBODY + ['/usr/bin/python3', '-c', AGENT, json.dumps(ops)],
            timeout=600, cwd=cwd)
    return json.loads(r.stdout)


def inodes_used(path):
    """Inodes in use as the mgr counts them (statfs: files - ffree)."""
    st = os.statvfs(path)
    return st.f_files - st.f_ffree


def start(tmp_path_factory, name, extra):
    """A 2-iod cluster run from an rpfs.conf with extra appended, and a
    mount other uids can use (allow_other; they start in 'u', nobody()); a
    directory 'u' on it owned by 65534."""
    tmp = tmp_path_factory.mktemp(name)
    c = util.conf_cluster(tmp, niods=2, key=False, name=name, extra=extra)
    try:
        path = str(tmp_path_factory.mktemp(name + 'm'))
        m = c.mount(path, 'allow_other')
    except BaseException:
        util.cleanup(c)
        raise
    d = os.path.join(path, 'u')
    os.mkdir(d)
    os.chown(d, 65534, 65534)
    return c, m, path, d


@pytest.mark.expect_log(r'^<4>rpfs-mgr: namespace full: \d+ of %d pages in use '
                        r'\(%d kept for deletes\); creates, links and xattrs get '
                        r'ENOSPC$' % (MAP_PAGES, RESERVE_PAGES))
@pytest.mark.lmdb_only
def test_full_namespace(tmp_path_factory):
    """Fill a 4 MiB namespace as 65534 until ENOSPC; growth is refused with
    ENOSPC for the user and for root, reads work, deletes work at full and
    are purged, and then the space takes new files and xattrs again."""
    c, m, path, d = start(tmp_path_factory, 'quota', '[mgr]\ndb_size = 4M\n')
    try:
        fd, empty, keep = 'fill', 'empty', 'keep'   # relative to d
        assert nobody(d, ['mkdir', fd], ['mkdir', empty], ['create', keep],
                      ['setxattr', keep, 'user.k', 3000]) == [0, 0, 0, 0]
        # 3000-byte values take an overflow page each: ~750 fill the map;
        # 100 per file stays under the per-inode caps (1024, 1 MiB)
        [[n, x, err]] = nobody(d, ['fill', fd, 100, 3000])
        assert err == 'ENOSPC', (n, x, err)
        assert n >= 5 and x >= 400, (n, x)
        print('filled: %d files, %d xattrs of 3000 bytes' % (n, x))
        f = [os.path.join(fd, 'f%05d' % i) for i in range(n)]

        # every op that grows the namespace: ENOSPC, for root as well
        assert nobody(d, ['create', 'new'], ['mkdir', 'newdir'],
                      ['symlink', 'sl'], ['link', f[0], 'ln'],
                      ['setxattr', keep, 'user.new', 1],
                      ['setxattr', keep, 'user.k', 3001]) == ['ENOSPC'] * 6
        with pytest.raises(OSError) as e:
            os.mkdir(os.path.join(path, 'rootdir'))
        assert e.value.errno == errno.ENOSPC

        # reads at full
        assert nobody(d, ['listdir', fd], ['stat', f[0]], ['getxattr', keep, 'user.k'],
                      ['listxattr', f[0]]) == [sorted(os.path.basename(p) for p in f),
                                                0, 3000, 100]

        # deletes and what does not grow: all fine at full
        used = inodes_used(path)
        assert nobody(d, ['setxattr', keep, 'user.k', 3000],
                      ['setxattr', keep, 'user.k', 100],
                      ['truncate', keep, 12345],
                      ['truncate', keep, 0],
                      ['chmod', keep, 0o600],
                      ['removexattr', f[0], 'user.x000'],
                      ['rmdir', empty],
                      ['rename', f[1], f[2]],
                      *[['unlink', p] for p in f[3:]]) == [0] * (8 + n - 3)
        assert nobody(d, ['getxattr', f[0], 'user.x000'], ['stat', f[1]],
                      ['stat', empty], ['getxattr', keep, 'user.k']) == \
            ['ENODATA', 'ENOENT', 'ENOENT', 100]
        # the files' inodes go once the client's reaper purged them (the
        # rename's victim too): wait for that, as the reaper is behind
        util.wait_until(lambda: inodes_used(path) == used - 1 - 1 - (n - 3),
                        60, 0.1, 'the deleted files purged')

        # room again: new files with xattrs, a directory, a link
        more = 'more'
        assert nobody(d, ['mkdir', more],
                      *[['create', os.path.join(more, 'g%d' % i)] for i in range(5)],
                      *[['setxattr', os.path.join(more, 'g0'), 'user.y%d' % i, 3000]
                        for i in range(20)],
                      ['link', f[0], os.path.join(more, 'ln')]) == [0] * 27
        assert 'namespace has room again' in open(c.mgr.log.path).read()
        assert not c.check_alive()
    finally:
        util.cleanup(m, c)


def test_xattr_caps(tmp_path_factory):
    """[mgr] xattr_max_count = 100, xattr_max_bytes = 200K: the 100th xattr
    of a file goes in, the 101st gets ENOSPC; at the cap a same-size or
    smaller replace works and a remove lets one more in; the bytes cap
    counts names and values and allows exactly the cap."""
    c, m, path, d = start(tmp_path_factory, 'xcap',
                          '[mgr]\nxattr_max_count = 100\nxattr_max_bytes = 200K\n')
    try:
        a, b = 'a', 'b'   # relative to d
        assert nobody(d, ['create', a], ['create', b]) == [0, 0]
        r = nobody(d, *[['setxattr', a, 'user.c%03d' % i, 10] for i in range(100)])
        assert r == [0] * 100
        assert nobody(d, ['setxattr', a, 'user.c100', 1],   # 101st
                      ['setxattr', a, 'user.c000', 10],  # same size
                      ['setxattr', a, 'user.c001', 5],   # smaller
                      ['setxattr', a, 'user.c002', 11],  # grows: the bytes are fine
                      ['removexattr', a, 'user.c050'],
                      ['setxattr', a, 'user.c100', 1],
                      ['setxattr', a, 'user.c101', 1],
                      ['listxattr', a]) == ['ENOSPC', 0, 0, 0, 0, 0, 'ENOSPC', 100]
        # bytes: 3 x (7 + 65536) = 196629; + 6 + 8165 = 204800 = 200K exactly
        assert nobody(d, *[['setxattr', b, 'user.b%d' % i, 65536] for i in range(3)],
                      ['setxattr', b, 'user.b3', 65536],
                      ['setxattr', b, 'user.s', 8166],
                      ['setxattr', b, 'user.s', 8165],
                      ['setxattr', b, 'user.t', 0],
                      ['setxattr', b, 'user.b0', 65536],
                      ['setxattr', b, 'user.b0', 1000],
                      ['setxattr', b, 'user.t', 0],
                      ['getxattr', b, 'user.b0']) == \
            [0, 0, 0, 'ENOSPC', 'ENOSPC', 0, 'ENOSPC', 0, 0, 0, 1000]
        assert not c.check_alive()
    finally:
        util.cleanup(m, c)


def test_space_config_errors(tmp_path):
    """Bad db_size / xattr caps: exit 2 with the file, the line and what
    was expected, or the flag and what was expected."""
    c = util.Cluster(str(tmp_path), niods=1, name='qbad')
    mgr = util.binary('mgr/rpfs-mgr')
    cases = [('db_size = 3M', '[mgr] db_size: expected a size from 4194304 to '
              '1099511627776 (suffix K, M or G allowed), got "3M"'),
             ('xattr_max_count = 0', '[mgr] xattr_max_count: expected a number '
              '1..65536 (xattrs per inode), got "0"'),
             ('xattr_max_bytes = 1T', '[mgr] xattr_max_bytes: expected a size from '
              '1024 to 67108864 (suffix K, M or G allowed), got "1T"')]
    for line, msg in cases:
        bad = util.write_conf(c, str(tmp_path / 'bad.conf'), extra='[mgr]\n%s\n' % line)
        r = run([mgr, '--conf', bad], check=False)
        n = open(bad).read().splitlines().index(line) + 1
        assert r.returncode == 2, r.stderr
        assert 'bad.conf:%d: %s' % (n, msg) in r.stderr, r.stderr
    good = util.write_conf(c, str(tmp_path / 'good.conf'))
    for flag, val, msg in [('--db-size', '5T', 'a size 4M..1024G (suffix K, M or G)'),
                           ('--xattr-max-count', '65537', '1..65536 xattrs per inode'),
                           ('--xattr-max-bytes', 'x', 'a size 1K..64M (suffix K or M)')]:
        r = run([mgr, '--conf', good, flag, val], check=False)
        assert r.returncode == 2, r.stderr
        assert '%s: expected %s, got "%s"' % (flag, msg, val) in r.stderr, r.stderr
