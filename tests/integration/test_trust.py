"""What a caller may do at the mgr (HACKING.md "Semantics", root squash):
with --root-squash neither uid 0 nor gid 0 keeps root's rights there,
whatever the kernel of the client let through."""
import os

import pytest

import util


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
    the squash)."""
    c = util.Cluster(str(tmp_path_factory.mktemp('sq')), niods=2, name='sq')
    util.clusters.append(c)
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
    c.mgr.stop()
    c.mgr.argv = c.mgr.argv + ['--root-squash']
    c.mgr.start()
    yield c, d
    util.cleanup(m, c)


def test_root_squash_root(squashed):
    _c, d = squashed
    f = os.path.join(d, 'by-root')
    open(f, 'w').close()
    st = os.stat(f)
    assert (st.st_uid, st.st_gid) == (65534, 65534)


def test_root_squash_gid0_creates_as_nogroup(squashed):
    _c, d = squashed
    r = as_user(1000, 0, None, 'touch', os.path.join(d, 'by-1000-g0'))
    assert r.returncode == 0, r.stderr
    st = os.stat(os.path.join(d, 'by-1000-g0'))
    assert (st.st_uid, st.st_gid) == (1000, 65534)


@pytest.mark.parametrize('gid,groups', [(0, None), (1000, [0])],
                         ids=['primary', 'supplementary'])
def test_root_squash_group0_rights_gone(squashed, gid, groups):
    """The kernel lets group 0 open the 0060 file; the mgr, which squashes
    group 0, refuses it."""
    _c, d = squashed
    r = as_user(1000, gid, groups, 'cat', os.path.join(d, 'g0'))
    assert r.returncode != 0 and 'Permission denied' in r.stderr, \
        (r.returncode, r.stdout, r.stderr)
