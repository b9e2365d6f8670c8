"""`rpfs scrub --namespace`: the namespace consistency check
(mgr/repair/README.md "Namespace check"). A metadata workload on a real
mount (creates, hard links, renames across directories, an unlink of an open
file, rmdirs, symlinks, xattrs), then the check beside the running mgr, also
while a writer keeps changing the namespace: clean, exit 0. Then the mgr is
stopped, one directory entry is deleted from the store behind its back
(tests/tools/nscheck_damage.c), and the check reports it: exit 1. On the
store of the run (RPFS_STORE: lmdb or postgresql)."""
import json
import os
import re
import threading

import pytest

import util

# the check reads the store itself: no transport path of its own
pytestmark = pytest.mark.host_only

SUMMARY = re.compile(r'^namespace: (\d+) inodes, (\d+) entries, (\d+) problems$', re.M)


def rpfs(*args, timeout=120):
    return util.run([util.binary('admin/rpfs')] + list(args), check=False,
                    timeout=timeout)


def nscheck(c, *args):
    """rpfs scrub --namespace on cluster c's config file."""
    return rpfs('scrub', '--namespace', '--conf', c.conf, *args)


def summary(r):
    m = SUMMARY.search(r.stdout)
    assert m, (r.returncode, r.stdout, r.stderr)
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


@pytest.fixture(scope='module')
def nc(tmp_path_factory):
    c = util.conf_cluster(tmp_path_factory.mktemp('nsck'), niods=2, name='nsck')
    yield c
    util.cleanup(c)


@pytest.fixture(scope='module')
def nm(nc, tmp_path_factory):
    path = str(tmp_path_factory.mktemp('nsckm'))
    m = nc.mount(path, 'key=%s' % nc.key)
    yield m
    util.cleanup(m)


def workload(root):
    """Creates, hard links, renames across directories (files and a
    directory), an unlink of a file held open, rmdirs, a symlink, an xattr.
    Returns the open file (the caller closes it)."""
    for d in ('a', 'b', 'a/deep', 'gone'):
        os.mkdir(os.path.join(root, d))
    for i in range(20):
        with open(os.path.join(root, 'a', 'f%d' % i), 'w') as f:
            f.write('x' * i)
    for i in range(0, 20, 3):
        os.link(os.path.join(root, 'a', 'f%d' % i), os.path.join(root, 'b', 'h%d' % i))
    for i in range(0, 20, 4):
        os.rename(os.path.join(root, 'a', 'f%d' % i), os.path.join(root, 'b', 'r%d' % i))
    os.rename(os.path.join(root, 'a', 'deep'), os.path.join(root, 'b', 'deep'))
    with open(os.path.join(root, 'b', 'deep', 'inner'), 'w') as f:
        f.write('inner')
    os.rename(os.path.join(root, 'a', 'f1'), os.path.join(root, 'b', 'h3'))  # replaces a link
    for i in (2, 5):
        os.unlink(os.path.join(root, 'a', 'f%d' % i))
    held = open(os.path.join(root, 'a', 'f7'), 'r+')
    os.unlink(os.path.join(root, 'a', 'f7'))  # an orphan while held open
    held.write('still here')
    held.flush()
    os.rmdir(os.path.join(root, 'gone'))
    os.symlink('a/f8', os.path.join(root, 'ln'))
    os.setxattr(os.path.join(root, 'a', 'f9'), 'user.k', b'v')
    return held


def test_clean_after_workload(nc, nm):
    """The workload's namespace is consistent, checked beside the running
    mgr (a file unlinked while open is an orphan with its mark); --json
    says the same."""
    held = workload(nm.path)
    try:
        r = nscheck(nc)
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
        inodes, entries, problems = summary(r)
        assert problems == 0 and r.stdout.count('\n') == 1, r.stdout
        # root a b deep, 20 files, inner, ln; f2 and f5 lost their last
        # link and go when the client's reaper purges them (f7 at close)
        assert inodes in (24, 25, 26), r.stdout
        # root: a b ln; a: 20 - 5 renamed - f1 - 3 unlinked; b: 7 links,
        # 5 renamed, deep; deep: inner
        assert entries == 3 + 11 + 13 + 1, r.stdout
        j = rpfs('scrub', '--namespace', '--conf', nc.conf, '--json')
        assert j.returncode == 0, (j.returncode, j.stdout, j.stderr)
        doc = json.loads(j.stdout)
        assert (doc['problems'], doc['count'], doc['entries']) == ([], 0, entries), \
            j.stdout
        # the store named directly, as without a config file
        where = ['--store-uri', nc.store_uri] if nc.store_uri else ['--db', nc.db]
        d = rpfs('scrub', '--namespace', *where)
        assert d.returncode == 0 and summary(d)[1:] == (entries, 0), \
            (d.returncode, d.stdout, d.stderr)
    finally:
        held.close()


def test_clean_while_writing(nc, nm):
    """Each check reads one snapshot, so a writer creating, linking,
    renaming and unlinking meanwhile never makes it report a problem."""
    root = os.path.join(nm.path, 'busy')
    os.mkdir(root)
    os.mkdir(os.path.join(root, 'x'))
    os.mkdir(os.path.join(root, 'y'))
    stop = threading.Event()
    errors = []
    done = [0]  # the writer's rounds

    def writer():
        i = 0
        try:
            while not stop.is_set():
                p = os.path.join(root, 'x', 'n%d' % i)
                with open(p, 'w') as f:
                    f.write('n')
                os.link(p, os.path.join(root, 'y', 'l%d' % i))
                os.rename(p, os.path.join(root, 'y', 'm%d' % i))
                os.mkdir(os.path.join(root, 'x', 'd%d' % i))
                os.rename(os.path.join(root, 'x', 'd%d' % i),
                          os.path.join(root, 'y', 'd%d' % i))
                if i >= 2:
                    os.unlink(os.path.join(root, 'y', 'l%d' % (i - 2)))
                    os.unlink(os.path.join(root, 'y', 'm%d' % (i - 2)))
                    os.rmdir(os.path.join(root, 'y', 'd%d' % (i - 2)))
                i += 1
                done[0] = i
        except Exception as e:  # reported by the test
            errors.append(e)

    t = threading.Thread(target=writer)
    t.start()
    try:
        util.wait_until(lambda: done[0] >= 3 or errors, 60, what='the writer')
        # check until the writer did 20 more rounds meanwhile (at least 4
        # checks), so checks and writes overlap
        start, checks = done[0], 0
        while (done[0] - start < 20 or checks < 4) and not errors and checks < 200:
            r = nscheck(nc)
            assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
            assert summary(r)[2] == 0
            checks += 1
        assert done[0] - start >= 20, (done[0], start, checks)
    finally:
        stop.set()
        t.join(60)
    assert not errors, errors


def test_bad_arguments(nc):
    """Two sources are a usage error (exit 2); a --db without a database is
    exit 3 with one line, and creates nothing."""
    r = rpfs('scrub', '--namespace', '--db', '/tmp', '--conf', nc.conf)
    assert r.returncode == 2 and 'one of --conf, --db and --store-uri' in r.stderr, \
        (r.returncode, r.stderr)
    missing = os.path.join(nc.state, 'no-such-db')
    r = rpfs('scrub', '--namespace', '--db', missing)
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.count('\n') == 1 and missing in r.stderr, r.stderr
    assert not os.path.exists(missing)
    r = rpfs('scrub', '--namespace', '--rate', '5')
    assert r.returncode == 2 and '--rate' in r.stderr, (r.returncode, r.stderr)


def test_damage_reported(nc, nm):
    """With the mgr stopped, one entry deleted from the store (its dirseq
    record left): the check names the entry's leftovers and the inode it
    leaked, and exits 1. Runs last: it leaves the namespace damaged."""
    d = os.path.join(nm.path, 'dmg')
    os.mkdir(d)
    with open(os.path.join(d, 'victim'), 'w') as f:
        f.write('v')
    parent = os.stat(d).st_ino
    victim = os.stat(os.path.join(d, 'victim')).st_ino
    assert nscheck(nc).returncode == 0
    nm.umount()
    nc.mgr.stop()
    try:
        kind, where = ('postgresql', nc.store_uri) if nc.store_uri else ('lmdb', nc.db)
        util.run([util.binary('mgr/test_nscheck_damage'), kind, where, str(parent),
                  'victim'])
        r = nscheck(nc)
        assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
        lines = r.stdout.splitlines()
        assert 'stray dirseq: dirseq %d/seq 3 -> "victim" (inode %d): no entry has ' \
            'that seq' % (parent, victim) in lines, r.stdout
        assert 'nlink: inode %d: expected nlink 0 (its entries), found 1' % victim \
            in lines, r.stdout
        assert 'leaked inode: inode %d: not reachable from the root and no orphan ' \
            'mark' % victim in lines, r.stdout
        assert summary(r)[2] == 3 and len(lines) == 4, r.stdout
        j = json.loads(rpfs('scrub', '--namespace', '--conf', nc.conf, '--json').stdout)
        assert sorted(p['kind'] for p in j['problems']) == \
            ['leaked_inode', 'nlink', 'stray_dirseq'], j
    finally:
        nc.mgr.start()
