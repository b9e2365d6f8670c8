"""What a caller may do at the mgr (mgr/ns/README.md "Semantics", root
squash): with --root-squash neither uid 0 nor gid 0 keeps root's rights
there, whatever the kernel of the client let through."""
import os

import pytest

import util

# The callers of test_root_squash_group0_rights_gone: (gid, supplementary
# groups) of uid 1000, group 0 as the primary group or a supplementary one.
GROUP0_CALLERS = {'primary': (0, None), 'supplementary': (1000, [0])}


def as_user(uid, gid, groups, *argv):
    """Run argv as uid/gid with these supplementary groups (setpriv)."""
    grp = ['--groups', ','.join(str(g) for g in groups)] if groups else \
        ['--clear-groups']
    return util.run(['setpriv', '--reuid', str(uid), '--regid', str(gid)] +
                    grp + list(argv), check=False)


@pytest.fixture(scope='module')
def squashed(tmp_path_factory):
    """A cluster whose mgr squashes root, a mount, and a world-writable
    directory holding a file of root's group only (mode 0060, made before
    the squash). Before the mgr is restarted with --root-squash, the
    positive controls of the squash: each caller of GROUP0_CALLERS reads
    that file (cat; the results by caller name in c.unsquashed), and root
    and uid 1000 with gid 0 create a file (its (uid, gid) by creator in
    c.unsquashed_owner)."""
    c = util.Cluster(str(tmp_path_factory.mktemp('sq')), niods=2, name='sq')
    util.clusters.append(c)
    m = None
    try:
        c.start()
        path = str(tmp_path_factory.mktemp('sqm'))
        util.make_traversable(path)
        m = c.mount(path, 'allow_other')
        d = os.path.join(path, 'pub')
        os.mkdir(d)
        os.chmod(d, 0o777)
        g0 = os.path.join(d, 'g0')
        with open(g0, 'w') as f:
            f.write('root group only\n')
        os.chmod(g0, 0o060)
        c.unsquashed = {k: as_user(1000, gid, groups, 'cat', g0)
                        for k, (gid, groups) in GROUP0_CALLERS.items()}
        open(os.path.join(d, 'by-root-unsquashed'), 'w').close()
        r = as_user(1000, 0, None, 'touch', os.path.join(d, 'by-1000-g0-unsquashed'))
        assert r.returncode == 0, r.stderr
        c.unsquashed_owner = {}
        for who in ('root', '1000-g0'):
            st = os.stat(os.path.join(d, 'by-%s-unsquashed' % who))
            c.unsquashed_owner[who] = (st.st_uid, st.st_gid)
        c.mgr.stop()
        c.mgr.argv = c.mgr.argv + ['--root-squash']
        c.mgr.start()
        yield c, d
    finally:
        util.cleanup(m, c)


def test_root_squash_root(squashed):
    """A file root creates is owned by nobody:nogroup (the control: 0:0
    before the squash)."""
    c, d = squashed
    assert c.unsquashed_owner['root'] == (0, 0)
    f = os.path.join(d, 'by-root')
    open(f, 'w').close()
    st = os.stat(f)
    assert (st.st_uid, st.st_gid) == (65534, 65534)


def test_root_squash_gid0_creates_as_nogroup(squashed):
    """A file uid 1000 creates with gid 0 is owned by 1000:nogroup (the
    control: 1000:0 before the squash)."""
    c, d = squashed
    assert c.unsquashed_owner['1000-g0'] == (1000, 0)
    r = as_user(1000, 0, None, 'touch', os.path.join(d, 'by-1000-g0'))
    assert r.returncode == 0, r.stderr
    st = os.stat(os.path.join(d, 'by-1000-g0'))
    assert (st.st_uid, st.st_gid) == (1000, 65534)


@pytest.mark.parametrize('caller', sorted(GROUP0_CALLERS))
def test_root_squash_group0_rights_gone(squashed, caller):
    """The kernel lets group 0 open the 0060 file; the mgr, which squashes
    group 0, refuses it. The control: the same caller read the same file
    before the mgr squashed (the fixture), so the squash is what refuses
    it, not the file's mode, the kernel or the mgr's group check."""
    c, d = squashed
    ctl = c.unsquashed[caller]
    assert (ctl.returncode, ctl.stdout) == (0, 'root group only\n'), \
        ('control, without squash', ctl.returncode, ctl.stdout, ctl.stderr)
    gid, groups = GROUP0_CALLERS[caller]
    r = as_user(1000, gid, groups, 'cat', os.path.join(d, 'g0'))
    assert r.returncode != 0 and 'Permission denied' in r.stderr, \
        (r.returncode, r.stdout, r.stderr)
