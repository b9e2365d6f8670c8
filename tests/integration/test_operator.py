"""An operator's first hour (issue 22, item 5): the admin CLI, the mount
and the quickstart used the way the README says, and the papercuts a new
user met there. One cluster (4 iods, config file and key) and one mount
are shared by the module's small checks."""
import errno
import json
import os
import re

import pytest

import util


def rpfs(*args, timeout=60, env=None, **kw):
    return util.run([util.binary('admin/rpfs')] + list(args), check=False,
                    timeout=timeout, env=env, **kw)


@pytest.fixture(scope='module')
def oc(tmp_path_factory):
    c = util.conf_cluster(tmp_path_factory.mktemp('op'), niods=4, name='op')
    yield c
    util.cleanup(c)


@pytest.fixture(scope='module')
def om(oc, tmp_path_factory):
    path = str(tmp_path_factory.mktemp('opm'))
    m = oc.mount(path, 'key=%s' % oc.key)
    yield m
    util.cleanup(m)


@pytest.fixture
def odir(om, request):
    """A fresh directory on the module's mount, named after the test."""
    p = os.path.join(om.path, request.node.name.replace('[', '_').replace(']', '_'))
    os.mkdir(p)
    return p


def layout(path):
    """The layout xattr of path as a dict of ints."""
    text = os.getxattr(path, 'user.rpfs.layout').decode()
    return {k: int(v) for k, v in (f.split('=') for f in text.split(','))}


# ------------------------------------------------------------ layout strings

def test_setlayout_readme_example(odir):
    """README: `rpfs setlayout DIR unit=1M,count=2` works as written, and
    new files below the directory get that layout."""
    r = rpfs('setlayout', odir, 'unit=1M,count=2')
    assert r.returncode == 0, r.stderr
    open(os.path.join(odir, 'f'), 'w').close()
    lay = layout(os.path.join(odir, 'f'))
    assert lay['unit'] == 1 << 20 and lay['count'] == 2, lay


@pytest.mark.parametrize('spec,unit', [('unit=64K', 65536), ('unit=64k', 65536),
                                       ('unit=4M', 4 << 20), ('unit=8192', 8192)])
def test_setlayout_size_suffixes(odir, spec, unit):
    r = rpfs('setlayout', odir, spec + ',count=1')
    assert r.returncode == 0, r.stderr
    assert layout(odir)['unit'] == unit


def test_setlayout_partial_change(odir):
    """One field alone changes only that field of the directory's layout
    (its own, or the inherited default before it has one)."""
    before = layout(odir)
    assert rpfs('setlayout', odir, 'unit=256K').returncode == 0
    lay = layout(odir)
    assert lay['unit'] == 256 << 10 and lay['count'] == before['count'], (before, lay)
    assert rpfs('setlayout', odir, 'count=3').returncode == 0
    lay = layout(odir)
    assert lay['unit'] == 256 << 10 and lay['count'] == 3, lay
    # mirror=2 alone: 4 iods are 2 mirror groups, so count 3 becomes 2
    r = rpfs('setlayout', odir, 'mirror=2')
    assert r.returncode == 0, r.stderr
    lay = layout(odir)
    assert lay == dict(unit=256 << 10, count=2, first=0, mirror=2), lay
    assert rpfs('setlayout', odir, 'count=1').returncode == 0
    assert layout(odir) == dict(unit=256 << 10, count=1, first=0, mirror=2)


@pytest.mark.parametrize('spec,needle', [
    ('count=0', 'count: expected'),
    ('unit=1M,count=0', 'count: expected'),
    ('unit=3', 'unit: expected a power of two'),
    ('unit=100K', 'unit: expected a power of two'),
    ('unit=128M', 'unit: expected a power of two'),
    ('unit=1X', 'unit: expected'),
    ('mirror=3', 'mirror: expected 1 or 2, got "3"'),
    ('count=-1', 'count: expected'),
    ('colour=red', 'unknown field "colour"'),
    ('unit=1M,unit=2M', 'unit: given twice'),
    ('unit', '"unit": expected FIELD=VALUE'),
    ('', 'expected FIELD=VALUE'),
    ('unit=1M,', 'expected FIELD=VALUE'),
])
def test_setlayout_refusal_names_field(odir, spec, needle):
    before = layout(odir)
    r = rpfs('setlayout', odir, spec)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr, r.stderr
    assert layout(odir) == before


def test_setlayout_mgr_refusal_names_field(odir):
    r = rpfs('setlayout', odir, 'count=5')
    assert r.returncode == 1 and 'count=5' in r.stderr, r.stderr


# ------------------------------------------------- paths outside an rpfs mount

@pytest.mark.parametrize('args', [('setlayout', '{p}', 'unit=1M,count=2'),
                                  ('getlayout', '{p}'), ('stats', '{p}')])
def test_path_outside_rpfs_refused(tmp_path, args):
    """A local directory that even carries a user.rpfs.layout xattr (as the
    old setlayout wrote there) is refused, and left as it was."""
    p = str(tmp_path / 'local')
    os.mkdir(p)
    try:
        os.setxattr(p, 'user.rpfs.layout', b'unit=65536,count=1')
        xattr = True
    except OSError as e:
        # tmpfs has user xattrs only from Linux 6.6 (the VM's kernel is
        # older): the refusal is checked all the same
        assert e.errno == errno.EOPNOTSUPP, e
        xattr = False
    r = rpfs(*[a.format(p=p) for a in args])
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert 'not on an rpfs mount (its file system is not fuse.rpfs)' in r.stderr, r.stderr
    assert r.stdout == ''
    if xattr:
        assert os.getxattr(p, 'user.rpfs.layout') == b'unit=65536,count=1'
    else:
        assert 'user.rpfs.layout' not in os.listxattr(p)


def test_stats_any_path_in_mount(om, odir):
    f = os.path.join(odir, 'file')
    with open(f, 'w') as fh:
        fh.write('x')
    for p in (om.path, odir, f):
        r = rpfs('stats', p)
        assert r.returncode == 0, (p, r.stderr)
        assert 'msgs_tx' in json.loads(r.stdout) or '"msgs_tx"' in r.stdout


# --------------------------------------------------------------------- --help

SUBCOMMANDS = ['keygen', 'mkfs', 'status', 'getlayout', 'setlayout', 'stats', 'scrub']


@pytest.mark.parametrize('cmd', SUBCOMMANDS)
@pytest.mark.parametrize('flag', ['--help', '-h'])
def test_subcommand_help(tmp_path, cmd, flag):
    r = rpfs(cmd, flag, cwd=str(tmp_path))
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.startswith('usage: rpfs ' + cmd), r.stdout
    assert os.listdir(str(tmp_path)) == [], 'wrote a file'


def test_keygen_refuses_option_as_file(tmp_path):
    r = rpfs('keygen', '--bogus', cwd=str(tmp_path))
    assert r.returncode == 2 and '--bogus' in r.stderr, r.stderr
    assert os.listdir(str(tmp_path)) == []


# ------------------------------------------------------- messages on a terminal

def run_on_tty(argv, timeout=60):
    """Run argv with stderr on a pseudo-terminal; returns (rc, stderr text)."""
    import pty
    import subprocess
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=slave)
        os.close(slave)
        slave = -1
        out = b''
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        return p.wait(timeout=timeout), out.decode(errors='replace')
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)


@pytest.mark.expect_log(r'^<4>rpfs-mgr: net: \S+: client has no cluster key; refusing it$')
def test_terminal_messages_plain_with_own_advice(oc):
    """On a terminal a message has no syslog prefix, and the advice names
    the option of the program that was run (rpfs: --key, not -o key=)."""
    argv = [util.binary('admin/rpfs'), 'status', '--mgr', util.hostport(oc.mgr_port)]
    rc, err = run_on_tty(argv)
    assert rc == 1, err
    assert '<3>' not in err and '<' not in err.split(':')[0], err
    assert 'rpfs: net: ' in err and 'give --key FILE to rpfs' in err, err
    assert '-o key=FILE' not in err, err
    # not a terminal (journald, a pipe): the priority prefix stays
    r = rpfs('status', '--mgr', util.hostport(oc.mgr_port))
    assert r.returncode == 1
    assert '<3>rpfs: net: ' in r.stderr and 'give --key FILE to rpfs' in r.stderr, r.stderr


# -------------------------------------------------------- mounting, installing

def mounts_on(path):
    """How many mounts /proc/self/mountinfo lists on path."""
    real = os.path.realpath(path)
    with open('/proc/self/mountinfo') as f:
        return sum(1 for l in f if l.split()[4] == real)


def test_mount_twice_refused(oc, om):
    """A second rpfs-fuse, or mount.rpfs as `mount -t rpfs` runs it, on a
    directory that holds an rpfs mount is refused and stacks nothing."""
    assert mounts_on(om.path) == 1
    spec = util.hostport(oc.mgr_port)
    try:
        stacked_twice(oc, om, spec)
    finally:
        while mounts_on(om.path) > 1:  # only where the refusal is missing
            util.run(['umount', '-l', om.path], check=False)


def stacked_twice(oc, om, spec):
    """The two attempts of test_mount_twice_refused."""
    r = util.run([util.binary('fuse-client/rpfs-fuse'), spec, om.path, '-o',
                  'key=%s' % oc.key], check=False, timeout=60)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert 'already an rpfs mount point' in r.stderr, r.stderr
    assert mounts_on(om.path) == 1
    helper = os.path.join(util.build_dir(), 'systemd', 'mount.rpfs')
    env = dict(os.environ, RPFS_FUSE=util.binary('fuse-client/rpfs-fuse'))
    r = util.run(['/bin/sh', helper, spec + ':/', om.path, '-o', 'key=%s' % oc.key], check=False,
                 timeout=60, env=env)
    assert r.returncode == 32, (r.returncode, r.stderr)
    assert 'already an rpfs mount point' in r.stderr, r.stderr
    assert mounts_on(om.path) == 1
    assert os.listdir(om.path) is not None  # the first mount still answers


def test_install_puts_mount_helper_under_prefix(tmp_path):
    """meson install writes mount.rpfs under the prefix (PREFIX/sbin), not
    /sbin whatever the prefix; the README says how mount(8) finds it and
    what RPFS_FUSE does."""
    import subprocess
    dest = str(tmp_path / 'dest')
    util.run(['meson', 'install', '-C', util.build_dir(), '--no-rebuild', '--quiet',
              '--destdir', dest], timeout=120)
    opts = json.loads(subprocess.check_output(
        ['meson', 'introspect', util.build_dir(), '--buildoptions'], text=True))
    opt = {o['name']: o['value'] for o in opts}
    assert opt['prefix'] != '/usr'  # the test build's prefix (default /usr/local)
    want = os.path.join(dest + opt['prefix'], opt['sbindir'], 'mount.rpfs')
    assert os.access(want, os.X_OK), want
    assert not os.path.exists(os.path.join(dest, 'sbin', 'mount.rpfs'))
    text = open(want).read()
    assert 'fuse=${RPFS_FUSE:-%s/' % opt['prefix'] in text
    readme = open(os.path.join(util.REPO, 'README.md')).read()
    assert 'ln -s %s/sbin/mount.rpfs /sbin/mount.rpfs' % '/usr/local' in readme
    assert 'RPFS_FUSE' in readme


# ------------------------------------------- an iod that timed out (README)

def test_iod_held_down_after_timeout_as_readme_says(oc, tmp_path, expect_log):
    """README: after a request to an iod timed out, the client fails the
    calls to it with EIO for one more timeout= period, even if it answers
    again meanwhile, and the first request after that reconnects. Timed
    from the start of the read that timed out: its call gives up after a
    timeout, the iod is then held down for another, so no read works
    before 2 timeouts have passed; one works within 1.5 timeouts of the
    EIO (the hold-down's end, then a reconnect: not a second hold)."""
    import signal
    import time
    timeout = 3  # the mount's timeout= (test_faults' in both stages): waited for twice
    readme = open(os.path.join(util.REPO, 'README.md')).read()
    assert 'even if the iod answers again meanwhile' in readme
    expect_log(util.client_iod_fail_log(oc, 0, 'read', 'Connection timed out'))
    expect_log(util.mgr_iod_down_log(oc, 0, 'Connection timed out'))
    m = oc.mount(str(tmp_path / 'to'), 'key=%s,timeout=%d' % (oc.key, timeout))
    try:
        d = os.path.join(m.path, 'd')
        os.mkdir(d)
        os.setxattr(d, 'user.rpfs.layout', b'unit=65536,count=4')
        f = os.path.join(d, 'f')
        data = os.urandom(256 << 10)  # one stripe unit on each iod
        with open(f, 'wb') as fh:
            fh.write(data)
        assert util.read_direct(f) == data
        iod = oc.iods[0]
        iod.proc.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            with pytest.raises(OSError) as e:
                util.read_direct(f)
            assert e.value.errno == errno.EIO
            t_eio = time.monotonic()
        finally:
            iod.proc.send_signal(signal.SIGCONT)
        with pytest.raises(OSError) as e:  # held down: EIO though it answers
            util.read_direct(f)
        assert e.value.errno == errno.EIO

        def reads():
            try:
                return util.read_direct(f) == data
            except OSError as e:
                assert e.errno == errno.EIO, e
                return False
        # the hold-down ends a timeout after the EIO; half a timeout more
        # for the reconnect and the read
        util.wait_until(reads, 1.5 * timeout, 0.1, 'a read after the hold-down')
        t_ok = time.monotonic()
        assert t_ok - t0 >= 2 * timeout, \
            'a read worked %.2f s after the one that timed out began' % (t_ok - t0)
        print('\nEIO after %.2f s, reads again after %.2f s (timeout=%d)'
              % (t_eio - t0, t_ok - t0, timeout))
    finally:
        util.cleanup(m)


# ----------------------------------------------------------------- quickstart

QS = os.path.join(util.REPO, 'scripts', 'quickstart.sh')


def pid_of(qs, name):
    with open(os.path.join(qs['env']['RPFS_STATE'], 'pids', name + '.pid')) as f:
        return int(f.read())


def proc_state(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0]
    except FileNotFoundError:
        return None


def quickstart(qs, *args, prefix=(), timeout=300):
    return util.run(list(prefix) + [QS] + list(args), check=False, timeout=timeout,
                    env=qs['env'])


@pytest.fixture(scope='module')
def qs(tmp_path_factory):
    """The quickstart over tcp on a free run of ports, state and mount in
    a temporary directory, started at a soft RLIMIT_MEMLOCK of 4 MiB."""
    base = tmp_path_factory.mktemp('qs')
    env = dict(os.environ, RPFS_STATE=str(base / 'state'), RPFS_MOUNT=str(base / 'mnt'),
               RPFS_BUILD=util.build_dir(), RPFS_TRANSPORT='tcp', RPFS_HOST=util.HOST,
               RPFS_PORT=str(util.free_port_run(5)))
    q = {'env': env}
    r = quickstart(q, prefix=['prlimit', '--memlock=4194304:'])
    q['start'] = r
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        yield q
    finally:
        quickstart(q, 'stop')
        if util.is_mounted(env['RPFS_MOUNT']):
            util.umount(env['RPFS_MOUNT'])


def can_raise_hard_limits():
    """Whether this process has CAP_SYS_RESOURCE (bit 24), which raising a
    hard rlimit needs (some containers drop it)."""
    with open('/proc/self/status') as f:
        eff = [l for l in f if l.startswith('CapEff:')][0].split()[1]
    return bool(int(eff, 16) >> 24 & 1)


@pytest.mark.host_only
def test_quickstart_raises_memlock(qs):
    """Started at a soft RLIMIT_MEMLOCK of 4 MiB (below the default 8 MiB;
    a verbs iod pins about 38 MB), the daemons get an unlimited one where
    the quickstart may raise the hard limit (root with CAP_SYS_RESOURCE),
    else the soft limit raised to the hard one."""
    want = ['unlimited', 'unlimited'] if can_raise_hard_limits() else None
    for name in ('mgr', 'iod0', 'iod3'):
        with open('/proc/%d/limits' % pid_of(qs, name)) as f:
            line = [l for l in f if l.startswith('Max locked memory')][0]
        soft, hard = line.split()[3:5]
        assert [soft, hard] == (want or [hard, hard]), line
        assert soft != '4194304', line


@pytest.mark.host_only
def test_quickstart_prints_working_commands(qs):
    """The summary's admin command runs as printed (rpfs is not on PATH:
    it prints the build's binary)."""
    out = qs['start'].stdout
    cmds = [l.split(None, 1)[1] for l in out.splitlines() if l.startswith('  admin ')]
    assert len(cmds) == 1, out
    r = util.run(cmds[0], check=False, timeout=60)
    assert r.returncode == 0, (cmds[0], r.stdout, r.stderr)
    assert 'rpfs status --conf' not in out.replace(cmds[0], '')
    r = quickstart(qs, 'status')
    assert r.returncode == 0, r.stdout + r.stderr
    assert '%s: mounted (transport: tcp)' % qs['env']['RPFS_MOUNT'] in r.stdout, r.stdout


@pytest.mark.host_only
def test_quickstart_zombie_is_not_running(qs):
    """A daemon killed -9 and left a zombie (its parent does not reap it,
    as under a container init that doesn't) counts as stopped: status says
    so and exits 1, and start starts it again."""
    import signal
    import subprocess
    os.kill(pid_of(qs, 'iod3'), signal.SIGKILL)
    util.wait_until(lambda: proc_state(pid_of(qs, 'iod3')) in (None, 'Z'), 10,
                    what='iod3 gone')
    zombie = subprocess.Popen(['true'])  # not waited for: a zombie of ours
    try:
        util.wait_until(lambda: proc_state(zombie.pid) == 'Z', 10, what='a zombie')
        with open(os.path.join(qs['env']['RPFS_STATE'], 'pids', 'iod3.pid'), 'w') as f:
            f.write('%d\n' % zombie.pid)
        r = quickstart(qs, 'status')
        assert r.returncode == 1, r.stdout + r.stderr
        assert 'iod3: stopped' in r.stdout, r.stdout
        r = quickstart(qs)
        assert r.returncode == 0, r.stdout + r.stderr
        assert 'iod3 already running' not in r.stdout, r.stdout
        assert proc_state(pid_of(qs, 'iod3')) not in (None, 'Z')
    finally:
        zombie.wait()
    assert quickstart(qs, 'status').returncode == 0


@pytest.mark.host_only
def test_quickstart_status_mgr_down(qs):
    """With the mgr killed, status says the mgr is stopped, still sees the
    mount (it does not stat it), and exits 1; start brings the mgr back."""
    import signal
    os.kill(pid_of(qs, 'mgr'), signal.SIGKILL)
    util.wait_until(lambda: proc_state(pid_of(qs, 'mgr')) in (None, 'Z'), 10,
                    what='mgr gone')
    r = quickstart(qs, 'status')
    assert r.returncode == 1, r.stdout + r.stderr
    assert 'mgr: stopped' in r.stdout, r.stdout
    assert '%s: not mounted' % qs['env']['RPFS_MOUNT'] not in r.stdout, r.stdout
    assert 'not everything is up' in r.stderr, r.stderr
    r = quickstart(qs)
    assert r.returncode == 0, r.stdout + r.stderr
    assert quickstart(qs, 'status').returncode == 0


@pytest.mark.host_only
def test_quickstart_stop_busy_names_holders(qs):
    """stop with a process inside the mount says the mount was busy and
    which process held it (last: it stops the quickstart)."""
    import subprocess
    holder = subprocess.Popen(['sleep', '600'], cwd=qs['env']['RPFS_MOUNT'])
    try:
        r = quickstart(qs, 'stop')
    finally:
        holder.kill()
        holder.wait()
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'was busy (held by %d (sleep)' % holder.pid in r.stdout, r.stdout
    assert 'unmounted' not in r.stdout, r.stdout
    util.wait_until(lambda: not util.is_mounted(qs['env']['RPFS_MOUNT']), 20,
                    what='lazy unmount')
    r = quickstart(qs, 'status')
    assert r.returncode == 1 and 'mgr: stopped' in r.stdout, r.stdout


# ----------------------------------------------------------- the fio engine

def readme_block(lang, after):
    """The first ```lang block of README.md after the line holding after."""
    text = open(os.path.join(util.REPO, 'README.md')).read()
    text = text[text.index(after):]
    start = text.index('```%s\n' % lang) + len(lang) + 4
    return text[start:text.index('```', start)]


def test_readme_fio_job(oc, om, tmp_path):
    """README's fio job, as written but for the cluster's address, key and
    engine path: its files land in rpfs_dir (fio's directory= cannot name
    an rpfs directory: fio lstats it locally)."""
    import test_listio
    job = readme_block('ini', '## The fio engine')
    assert 'rpfs_dir=/fio' in job and 'ioengine=external:' in job
    job = (job.replace('build/fuse-client/librpfs_fio.so', test_listio.fio_engine())
              .replace('127.0.0.1:7400', util.hostport(oc.mgr_port))
              .replace('.rpfs/cluster.key', oc.key))
    os.mkdir(os.path.join(om.path, 'fio'))
    path = tmp_path / 'rpfs.fio'
    path.write_text(job)
    p = test_listio.run_fio(oc, [str(path)])
    assert re.search(r'WRITE: bw=.*, io=128MiB', p.stdout), p.stdout
    assert re.search(r'READ: bw=.*, io=128MiB', p.stdout), p.stdout
    files = sorted(os.listdir(os.path.join(om.path, 'fio')))
    assert files == ['file.0', 'file.1'], files
    for f in files:
        assert os.path.getsize(os.path.join(om.path, 'fio', f)) == 64 << 20


# ----------------------------------------------------- the README's examples

def small_tree(top):
    """A directory tree of a few files, subdirectories and a symlink, as
    /usr/share/doc holds them, in top/doc; its (path, kind, content) list."""
    doc = os.path.join(top, 'doc')
    for i in range(3):
        os.makedirs(os.path.join(doc, 'pkg%d' % i, 'examples'))
        for j in range(4):
            with open(os.path.join(doc, 'pkg%d' % i, 'f%d' % j), 'wb') as f:
                f.write(os.urandom(1000 * j + i))
    os.symlink('pkg0', os.path.join(doc, 'pkg-link'))
    return doc, tree(doc)


def tree(d):
    """(relative path, kind, content or link target) of everything below d."""
    out = []
    for root, dirs, files in os.walk(d):
        for n in sorted(dirs + files):
            p = os.path.join(root, n)
            rel = os.path.relpath(p, d)
            if os.path.islink(p):
                out.append((rel, 'l', os.readlink(p)))
            elif os.path.isdir(p):
                out.append((rel, 'd', None))
            else:
                out.append((rel, 'f', open(p, 'rb').read()))
    return sorted(out)


@pytest.mark.host_only
def test_readme_mount_examples(oc, om, tmp_path):
    """The README's commands on the module's mount (its first two sh blocks)
    run as written, with the
    mount point and the admin CLI's build path put in, and smaller data:
    a tree of a few files for /usr/share/doc (171 MB and 7000 files on a
    developer's host, minutes through the sanitizer build) and 16 MiB for
    dd's 256. The tree is copied whole, the setfattr line has its mkdir,
    and setlayout changes one field."""
    block = (readme_block('sh', 'Then use the mount with') + '\n' +
             readme_block('sh', 'Worth trying next'))
    assert 'mkdir /mnt/rpfs/dir' in block and '/mnt/rpfs' in block
    assert 'cp -r /usr/share/doc /mnt/rpfs/' in block and ' bs=1M count=256 ' in block
    assert 'setlayout /mnt/rpfs/dir mirror=2' in block
    src, want = small_tree(str(tmp_path))
    script = (block.replace('/mnt/rpfs', om.path)
                   .replace('build/admin/rpfs', util.binary('admin/rpfs'))
                   .replace('cp -r /usr/share/doc ', 'cp -r %s ' % src)
                   .replace(' bs=1M count=256 ', ' bs=1M count=16 '))
    r = util.run(['bash', '-e', '-c', script], check=False, timeout=600)
    assert r.returncode == 0, (script, r.stdout[-3000:], r.stderr[-3000:])
    assert tree(os.path.join(om.path, 'doc')) == want
    assert os.path.getsize(os.path.join(om.path, 'big')) == 16 << 20
    assert layout(os.path.join(om.path, 'dir')) == dict(unit=1 << 20, count=2, first=0,
                                                         mirror=2)
    assert json.loads(os.getxattr(om.path, 'rpfs.stats'))


def test_mgr_changed_iod_table_names_config(tmp_path):
    """An mgr started from a config file whose [iod.N] table differs from
    the recorded one names the file, not --iod or "the command line"."""
    c = util.conf_cluster(tmp_path / 'it', niods=2, name='it')
    try:
        c.mgr.stop()
        text = open(c.conf).read()
        p0, p1 = (util.hostport(p).rsplit(':', 1)[1] for p in c.iod_ports)
        swapped = (text.replace('port = %s\n' % p0, 'port = X\n')
                       .replace('port = %s\n' % p1, 'port = %s\n' % p0)
                       .replace('port = X\n', 'port = %s\n' % p1))
        conf2 = str(tmp_path / 'swapped.conf')
        with open(conf2, 'w') as f:
            f.write(swapped)
        r = util.run([util.binary('mgr/rpfs-mgr'), '--conf', conf2], check=False,
                     timeout=30)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert ('%s [iod.N]: the iod table differs from the one recorded in %s: iod 0 is '
                '%s in the database but %s in this table'
                % (conf2, c.store_where(), util.hostport(c.iod_ports[0]), util.hostport(c.iod_ports[1]))
                in r.stderr), r.stderr
        assert '--iod' not in r.stderr and 'command line' not in r.stderr, r.stderr
        c.mgr.start()  # the original table still works
    finally:
        util.cleanup(c)


def test_layout_xattr_takes_size_suffix(odir):
    """setfattr -n user.rpfs.layout -v unit=1M,... works too (the mgr's
    parser takes K and M as rpfs.conf does)."""
    os.setxattr(odir, 'user.rpfs.layout', b'unit=1M,count=2')
    assert layout(odir)['unit'] == 1 << 20
    os.setxattr(odir, 'user.rpfs.layout', b'unit=64K,count=1')
    assert layout(odir)['unit'] == 65536
    with pytest.raises(OSError) as e:
        os.setxattr(odir, 'user.rpfs.layout', b'unit=1G,count=1')
    assert e.value.errno == errno.EINVAL
