"""Set-user-ID and set-group-ID bits drop on write, truncate and chown as on
a local file system (mgr/ns/README.md "Set-id bits"). The expected modes are
what tmpfs did on this kernel (Linux 6.18) for the same operations by the
same uids: a write or truncate by a uid other than root drops S_ISUID, and
S_ISGID when S_IXGRP is set or the writer is outside the file's group; root
keeps both; chown drops S_ISUID (also for root and the same owner) and a
real S_ISGID. The second uid is 65534 (setpriv), in group 4242 for the
group cases. Through the FUSE mount (with and without the writeback cache)
and through librpfs (rpfs-listio-test setid)."""
import os
import subprocess

import pytest

import util
from util import run

NOBODY = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']
MEMBER = ['setpriv', '--reuid=65534', '--regid=65534', '--groups=4242']
ROOT = []

WRITE = ['sh', '-c', 'echo y >> "$0"']
TRUNCATE = ['truncate', '-s', '1']
# open(O_WRONLY|O_TRUNC) through the shell's redirection
OTRUNC = ['sh', '-c', ': > "$0"']


def make(path, mode, uid, gid):
    """A small file with the given owner and mode (set last, so chown does
    not drop the bits being tested)."""
    with open(path, 'w') as fh:
        fh.write('x\n')
    os.chown(path, uid, gid)
    os.chmod(path, mode)
    assert os.stat(path).st_mode & 0o7777 == mode


def mode_of(path):
    return os.stat(path).st_mode & 0o7777


# (name, mode, owner uid, owner gid, who, command, mode after)
CASES = [
    ('write_other_6777', 0o6777, 0, 0, NOBODY, WRITE, 0o777),
    ('write_other_6767', 0o6767, 0, 0, NOBODY, WRITE, 0o767),
    ('write_other_4777', 0o4777, 0, 0, NOBODY, WRITE, 0o777),
    ('write_member_6767', 0o6767, 0, 4242, MEMBER, WRITE, 0o2767),
    ('write_member_6777', 0o6777, 0, 4242, MEMBER, WRITE, 0o777),
    ('write_owner_6777', 0o6777, 65534, 65534, NOBODY, WRITE, 0o777),
    ('write_owner_6767', 0o6767, 65534, 65534, NOBODY, WRITE, 0o2767),
    ('write_root_6777', 0o6777, 65534, 65534, ROOT, WRITE, 0o6777),
    ('truncate_other_6777', 0o6777, 0, 0, NOBODY, TRUNCATE, 0o777),
    ('truncate_other_6767', 0o6767, 0, 0, NOBODY, TRUNCATE, 0o767),
    ('truncate_member_6767', 0o6767, 0, 4242, MEMBER, TRUNCATE, 0o2767),
    ('truncate_root_6777', 0o6777, 65534, 65534, ROOT, TRUNCATE, 0o6777),
    ('otrunc_other_6777', 0o6777, 0, 0, NOBODY, OTRUNC, 0o777),
    ('chown_root_6777', 0o6777, 0, 0, ROOT, ['chown', '1:1'], 0o777),
    ('chown_root_6767', 0o6767, 0, 0, ROOT, ['chown', '1:1'], 0o2767),
    ('chown_root_same_owner', 0o6777, 0, 0, ROOT, ['chown', '0:0'], 0o777),
    ('chgrp_root_6767', 0o6767, 0, 0, ROOT, ['chgrp', '1'], 0o2767),
    ('chgrp_owner_6777', 0o6777, 65534, 65534, MEMBER, ['chgrp', '4242'], 0o777),
    ('chgrp_owner_6767', 0o6767, 65534, 65534, MEMBER, ['chgrp', '4242'], 0o2767),
    ('chown_owner_outside_group', 0o6767, 65534, 4242, NOBODY, ['chown', '65534'], 0o767),
]


def check_cases(d):
    """Run every case in directory d; return the list of mismatches."""
    os.chmod(d, 0o777)
    bad = []
    for name, mode, uid, gid, who, cmd, want in CASES:
        f = os.path.join(d, name)
        make(f, mode, uid, gid)
        r = run(who + cmd + [f], check=False)
        got = mode_of(f)
        if r.returncode != 0 or got != want:
            bad.append('%s: %o -> %o, want %o (rc %d %s)' % (
                name, mode, got, want, r.returncode, r.stderr.strip()))
    return bad


def test_setid_dropped_like_local_fs(workdir):
    """Every write/truncate/chown case ends with the mode tmpfs gives."""
    bad = check_cases(workdir)
    assert not bad, '\n'.join(bad)


def test_setid_dropped_with_writeback_cache(cluster, tmp_mnt):
    """The same with the kernel's writeback cache, where WRITEs reach the
    client without the writer's credential."""
    util.make_traversable(tmp_mnt)
    m = cluster.mount(tmp_mnt, 'allow_other,writeback_cache')
    try:
        d = os.path.join(tmp_mnt, 'wbc')
        os.mkdir(d)
        bad = check_cases(d)
    finally:
        util.cleanup(m)
    assert not bad, '\n'.join(bad)


# As 65534: write one byte to an open file, then report the mode by fstat
# and by stat of the path while the file is still open.
WRITE_AND_STAT = '''
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.write(fd, b"y")
print("%o %o" % (os.fstat(fd).st_mode & 0o7777, os.stat(sys.argv[1]).st_mode & 0o7777))
sys.stdout.flush()
sys.stdin.read()
os.close(fd)
'''


def test_setid_dropped_before_close(workdir):
    """The first write drops the bits at once: the writer's fstat and stat,
    and a stat by another process, show them gone while the file is open
    (written behind, not yet closed); later writes keep the mode."""
    os.chmod(workdir, 0o777)
    f = os.path.join(workdir, 'open')
    make(f, 0o6777, 0, 0)
    # the other process has the old mode in its attribute cache
    assert mode_of(f) == 0o6777
    p = subprocess.Popen(NOBODY + ['/usr/bin/python3', '-c', WRITE_AND_STAT, f],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.split() == ['777', '777'], (line, p.stderr.read() if not line else '')
        assert mode_of(f) == 0o777
        # root puts the bits back; the open handle's next write drops them
        os.chmod(f, 0o6777)
    finally:
        out, err = p.communicate('', timeout=60)
    assert p.returncode == 0, err
    assert mode_of(f) == 0o6777  # no write after the chmod
    run(NOBODY + WRITE + [f])
    assert mode_of(f) == 0o777


@pytest.mark.parametrize('how', ['pwrite', 'list', 'truncate'])
def test_setid_dropped_by_librpfs(cluster, mnt, workdir, how):
    """librpfs run as 65534 drops the bits on its first write (pwrite and
    list I/O) and on ftruncate; its fstat before close and then the mount
    show the new mode. Run as root it keeps them."""
    os.chmod(workdir, 0o777)
    rel = os.path.relpath(workdir, mnt.path)
    checker = [util.binary('fuse-client/rpfs-listio-test'), 'setid',
               util.hostport(cluster.mgr_port)]
    for name, mode, who, want in [('other', 0o6777, NOBODY, 0o777),
                                  ('other_nogx', 0o6767, NOBODY, 0o767),
                                  ('member', 0o6767, MEMBER, 0o2767),
                                  ('root', 0o6777, ROOT, 0o6777)]:
        f = os.path.join(workdir, '%s_%s' % (how, name))
        make(f, mode, 0, 4242 if who is MEMBER else 0)
        r = subprocess.run(who + checker + ['/%s/%s_%s' % (rel, how, name), how],
                           env=cluster.env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (name, r.stdout, r.stderr)
        assert r.stdout.strip() == 'mode %04o' % want, (name, r.stdout, r.stderr)
        # the mount sees another client's change once its attribute cache
        # (attr_timeout) expires: until then it may see the old mode, and
        # no other
        def new_mode_seen():
            got = mode_of(f)
            assert got in (mode, want), '%s: mode %o, want %o (or %o before)' % (
                name, got, want, mode)
            return got == want
        util.wait_until(new_mode_seen, 30, what='%s: mode %o' % (name, want))
