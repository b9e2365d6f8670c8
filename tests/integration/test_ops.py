"""Operations: config file, cluster key, systemd units and readiness,
mount.rpfs / fstab, and the admin CLI `rpfs`. Real daemons on util.HOST;
the transport is whatever $RPFS_TRANSPORT selects."""
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import time

import pytest

import util


def rpfs(*args, check=False, timeout=60, env=None):
    return util.run([util.binary('admin/rpfs')] + list(args), check=check,
                    timeout=timeout, env=env)


write_conf = util.write_conf
conf_cluster = util.conf_cluster


@pytest.fixture
def kcluster(tmp_path):
    c = conf_cluster(tmp_path / 'k')
    yield c
    util.cleanup(c)


# ------------------------------------------------------------------ units

def test_units_verify(tmp_path):
    """meson install puts the units in place; systemd-analyze verify accepts
    them with their ExecStart binaries (the installed tree under DESTDIR)."""
    dest = str(tmp_path / 'dest')
    util.run(['meson', 'install', '-C', util.build_dir(), '--no-rebuild', '--quiet',
              '--destdir', dest], timeout=120)
    units = {}
    for root, _d, files in os.walk(dest):
        for f in files:
            if f.startswith('rpfs') and f.endswith(('.service', '.target')):
                units[f] = os.path.join(root, f)
    assert set(units) == {'rpfs-mgr.service', 'rpfs-iod@.service', 'rpfs.target'}
    # the mount helper under the prefix (test_operator.py checks where)
    assert any(f == 'mount.rpfs' for _r, _d, fs in os.walk(dest) for f in fs)
    vdir = tmp_path / 'verify'
    vdir.mkdir()
    for name, p in units.items():
        text = open(p).read()
        if name.endswith('.service'):
            for want in ('Type=notify', 'Restart=on-failure', 'LimitMEMLOCK=infinity',
                         'WatchdogSec=', 'ProtectSystem=strict', 'ReadWritePaths=',
                         'NoNewPrivileges=yes', 'PrivateTmp=yes'):
                assert want in text, '%s lacks %s' % (name, want)
        # point ExecStart at the installed binary inside DESTDIR
        text = re.sub(r'^ExecStart=(\S+)', lambda m: 'ExecStart=' + dest + m.group(1),
                      text, flags=re.M)
        exe = re.search(r'^ExecStart=(\S+)', text, re.M)
        if exe:
            assert os.access(exe.group(1), os.X_OK), exe.group(1)
        out = name.replace('@.service', '@0.service')
        (vdir / out).write_text(text)
    r = util.run(['systemd-analyze', 'verify', 'rpfs-mgr.service', 'rpfs-iod@0.service',
                  'rpfs.target'], check=False, timeout=120, cwd=str(vdir))
    assert r.returncode == 0, r.stdout + r.stderr


def _notify_sock(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(0.5)
    return s


def _wait_msgs(sock, want, timeout=20):
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got.append(sock.recv(4096).decode())
        except socket.timeout:
            pass
        if all(any(w in m for m in got) for w in want):
            return got
    raise AssertionError('wanted %s, got %r' % (want, got))


def test_notify_ready_and_watchdog(tmp_path):
    """The daemons, started as the units start them with NOTIFY_SOCKET set,
    send READY=1 with a STATUS= line, and WATCHDOG=1 when asked for it."""
    c = util.Cluster(str(tmp_path / 'n'), niods=1, name='notify')
    keyf = str(tmp_path / 'n' / 'cluster.key')
    rpfs('keygen', keyf, check=True)
    conf = write_conf(c, str(tmp_path / 'n' / 'rpfs.conf'), keyf)
    procs = []
    try:
        for argv, log in (([util.binary('iod/rpfs-iod'), '--conf', conf, '--id', '0'],
                           c.iods[0].log),
                          ([util.binary('mgr/rpfs-mgr'), '--conf', conf], c.mgr.log)):
            sp = str(tmp_path / ('notify%d' % len(procs)))
            sock = _notify_sock(sp)
            env = dict(os.environ, NOTIFY_SOCKET=sp, WATCHDOG_USEC='400000')
            fh = open(log.path, 'ab')
            p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=fh,
                                 stderr=fh, start_new_session=True)
            fh.close()
            util.register_pid(p.pid)
            procs.append(p)
            msgs = _wait_msgs(sock, ['READY=1', 'STATUS=listening on', 'WATCHDOG=1'])
            sock.close()
            assert any('READY=1' in m and 'STATUS=' in m for m in msgs), msgs
    finally:
        for p in reversed(procs):
            assert util.stop_proc(p)
            assert p.returncode == 0


# ----------------------------------------------------------------- config

BAD_CONFS = [
    ('[iod.0]\nhost = h\nport = 70000\n', r':3: \[iod.0\] port: expected a number 1..65535, got "70000"'),
    ('[cluster]\nmgr = h:1\n[bogus]\nx = 1\n', r':4: unknown section \[bogus\]'),
    ('[mgr]\ndb = /x\ncolour = red\n', r':3: \[mgr\]: unknown key "colour"'),
    ('[iod.0]\nhost = a\nport = 1\n[mgr]\ndb = /x\n[iod.0]\nhost = b\n',
     r':7: \[iod.0\]: duplicate iod id 0'),
    ('[iod.0]\nhost = a\ndata = /x\n', r':2: \[iod.0\]: missing key "port"'),
    ('[cluster]\ntransport = carrier-pigeon\n', r':2: \[cluster\] transport: expected tcp, verbs or auto'),
    ('[layout]\nstripe_unit = 3000\n', r':2: \[layout\] stripe_unit: expected a size'),
    ('[iod.1]\nhost = a\nport = 1\n', r': \[iod.0\] missing'),
    ('this is not ini\n', r':1: expected \[section\] or key = value'),
    ('[client]\nconnections = 0\n', r':2: \[client\] connections: expected a number 1..16'),
]


@pytest.mark.parametrize('text,msg', BAD_CONFS)
def test_config_errors(tmp_path, text, msg):
    """A bad config file: the daemons and rpfs exit 2/3 with FILE:LINE: what."""
    p = str(tmp_path / 'rpfs.conf')
    open(p, 'w').write(text)
    for argv, code in (([util.binary('mgr/rpfs-mgr'), '--conf', p], 2),
                       ([util.binary('iod/rpfs-iod'), '--conf', p, '--id', '0'], 2),
                       ([util.binary('admin/rpfs'), 'status', '--conf', p], 3)):
        r = util.run(argv, check=False, timeout=30)
        assert r.returncode == code, (argv, r.returncode, r.stderr)
        assert re.search(re.escape(p) + msg, r.stderr), r.stderr


# -------------------------------------------------------------------- key

def test_keygen_mode(tmp_path):
    k = str(tmp_path / 'k')
    rpfs('keygen', k, check=True)
    assert stat.S_IMODE(os.stat(k).st_mode) == 0o600
    assert re.fullmatch(r'[0-9a-f]{64}\n', open(k).read())
    r = rpfs('keygen', k)
    assert r.returncode == 1 and 'exists' in r.stderr
    old = open(k).read()
    rpfs('keygen', '-f', k, check=True)
    assert open(k).read() != old
    assert rpfs('keygen').returncode == 2


def test_key_right(kcluster, tmp_path):
    """The right key mounts, and data goes through every iod: each one
    took its share of the write (the config's stripe_count = 0 spreads a
    file's 64 KiB units over all iods) and served at least its share of
    the second mount's read, and refused nobody."""
    m = kcluster.mount(str(tmp_path / 'm'), 'key=%s' % kcluster.key)
    data = os.urandom(1 << 20)
    with open(os.path.join(m.path, 'f'), 'wb') as f:
        f.write(data)
    with open(os.path.join(m.path, 'f'), 'rb') as f:
        assert f.read() == data
    # the config file alone carries the key too
    m2 = kcluster.mount(str(tmp_path / 'm2'), 'conf=%s' % kcluster.conf)
    with open(os.path.join(m2.path, 'f'), 'rb') as f:
        assert f.read() == data
    share = len(data) // kcluster.niods
    for port in kcluster.iod_ports:
        r = rpfs('stats', '--server', util.hostport(port), '--key', kcluster.key)
        assert r.returncode == 0, r.stderr
        st = json.loads(r.stdout)
        # (auth_ok alone would say nothing: the mgr's connections prove
        # the key to every iod before any mount)
        assert st['bulk_pull_bytes'] == share and st['bulk_push_bytes'] >= share, \
            (port, share, st)
        assert st['auth_fail'] == 0, st


def _mount_fails(c, mnt, opts):
    os.makedirs(mnt, exist_ok=True)
    r = util.run([util.binary('fuse-client/rpfs-fuse'), util.hostport(c.mgr_port), mnt,
                  '-o', opts], check=False, timeout=60)
    assert r.returncode != 0
    assert not util.is_mounted(mnt)
    return r.stderr


def test_key_wrong(kcluster, tmp_path):
    """A client with another key refuses the server, whose proof fails,
    and says why; it never sends its own proof to it, so the server counts
    no failed proof (a relay learns nothing from us)."""
    other = str(tmp_path / 'other.key')
    rpfs('keygen', other, check=True)
    stats = lambda: json.loads(rpfs('stats', '--server', util.hostport(kcluster.mgr_port),
                                    '--key', kcluster.key, check=True).stdout)
    before = stats()
    err = _mount_fails(kcluster, str(tmp_path / 'm'), 'key=' + other)
    assert "failed to prove the clients' key" in err and 'refus' in err, err
    r = rpfs('status', '--mgr', util.hostport(kcluster.mgr_port), '--key', other)
    assert r.returncode == 1 and 'down' in r.stdout
    after = stats()
    assert after['auth_fail'] == before['auth_fail'], (before, after)


@pytest.mark.expect_log(r'^<4>rpfs-mgr: net: %s:\d+: client has no cluster key; refusing it$'
                        % re.escape(util.HOST))
def test_key_missing(kcluster, tmp_path):
    """A client without a key is refused, with a log line on the server
    (the other way round, a client with a key refusing a server without
    one, is test_key_server_without_key)."""
    off = kcluster.mgr.log.size()
    err = _mount_fails(kcluster, str(tmp_path / 'm'), 'allow_other')
    assert 'requires a cluster key' in err, err
    util.wait_until(lambda: 'no cluster key' in kcluster.mgr.log.read_from(off), 10,
                    what='server log line')


def test_key_server_without_key(cluster, tmp_path):
    """A client with a key refuses a keyless server (it could be an impostor)."""
    k = str(tmp_path / 'k')
    rpfs('keygen', k, check=True)
    err = _mount_fails(cluster, str(tmp_path / 'm'), 'key=' + k)
    assert "failed to prove the clients' key (it has no key)" in err, err


# ------------------------------------------------------- mount.rpfs/fstab

@pytest.fixture
def mount_helper(tmp_path):
    """mount.rpfs from the build, where mount(8) looks for it (/sbin),
    under the machine-wide lock on that path (util.global_lock: the passes
    and workers of a test.sh run share /sbin)."""
    dst = '/sbin/mount.rpfs'
    with util.global_lock('sbin-mount.rpfs'):
        if os.path.exists(dst) and not os.path.islink(dst):
            pytest.fail('%s exists and is not ours' % dst)
        helper = str(tmp_path / 'mount.rpfs')
        shutil.copy(os.path.join(util.build_dir(), 'systemd', 'mount.rpfs'), helper)
        os.chmod(helper, 0o755)
        if os.path.islink(dst):
            os.unlink(dst)
        os.symlink(helper, dst)
        env = dict(os.environ, RPFS_FUSE=util.binary('fuse-client/rpfs-fuse'))
        yield env
        os.unlink(dst)


def test_mount_t_rpfs_and_fstab(kcluster, tmp_path, mount_helper):
    mnt = str(tmp_path / 'mt')
    os.makedirs(mnt)
    spec = '%s:/' % util.hostport(kcluster.mgr_port)
    try:
        util.run(['mount', '-t', 'rpfs', spec, mnt, '-o', 'allow_other,key=%s' % kcluster.key],
                 env=mount_helper, timeout=60)
        assert util.is_mounted(mnt)
        with open(os.path.join(mnt, 'hello'), 'w') as f:
            f.write('hi')
        util.run(['umount', mnt], timeout=60)
        util.wait_until(lambda: not util.is_mounted(mnt), 20, what='umount')
        fstab = str(tmp_path / 'fstab')
        with open(fstab, 'w') as f:
            f.write('%s %s rpfs _netdev,nofail,key=%s 0 0\n' % (spec, mnt, kcluster.key))
        util.run(['mount', '--fstab', fstab, mnt], env=mount_helper, timeout=60)
        assert util.is_mounted(mnt)
        assert open(os.path.join(mnt, 'hello')).read() == 'hi'
        util.run(['umount', mnt], timeout=60)
        util.wait_until(lambda: not util.is_mounted(mnt), 20, what='umount')
    finally:
        util.umount(mnt)


# -------------------------------------------------------------- admin CLI

def test_status_up_and_down(kcluster, expect_log):
    """rpfs status lists every daemon up, then the one stopped down. The
    mgr's statfs poll may warn that iod 1 went down; nothing else may be
    logged."""
    expect_log(util.mgr_iod_down_log(kcluster, 1))
    r = rpfs('status', '--conf', kcluster.conf)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [l for l in r.stdout.splitlines()[1:] if l.strip()]
    assert len(rows) == 1 + kcluster.niods
    for l in rows:
        assert ' up ' in l and '0.1.0' in l, l
    kcluster.kill_iod(1, __import__('signal').SIGTERM)
    r = rpfs('status', '--conf', kcluster.conf)
    assert r.returncode == 1, r.stdout + r.stderr
    down = [l for l in r.stdout.splitlines() if ' down ' in l]
    assert len(down) == 1 and down[0].startswith('iod  1 '), r.stdout
    assert rpfs('status', '--bogus').returncode == 2
    kcluster.start_iod(1)


def test_layout_cli(kcluster, tmp_path):
    m = kcluster.mount(str(tmp_path / 'm'), 'key=%s' % kcluster.key)
    d = os.path.join(m.path, 'd')
    os.mkdir(d)
    assert rpfs('setlayout', d, 'unit=1048576,count=1').returncode == 0
    open(os.path.join(d, 'f'), 'w').close()
    r = rpfs('getlayout', os.path.join(d, 'f'))
    assert r.returncode == 0 and r.stdout.startswith('unit=1048576,count=1,'), r.stdout
    assert rpfs('setlayout', d, 'unit=3').returncode == 2
    assert rpfs('getlayout', '/').returncode == 1
    r = rpfs('stats', m.path)
    assert r.returncode == 0 and '"msgs_tx"' in r.stdout, r.stdout + r.stderr


def test_stats_server(kcluster):
    for port in [kcluster.mgr_port] + kcluster.iod_ports:
        r = rpfs('stats', '--server', util.hostport(port), '--conf', kcluster.conf)
        assert r.returncode == 0, r.stderr
        st = json.loads(r.stdout)
        assert st['msgs_rx'] >= 1 and 'msgs_tx' in st and 'transport' in st


def test_mkfs(tmp_path):
    c = util.Cluster(str(tmp_path / 'mk'), niods=2, name='mkfs')
    conf = write_conf(c, str(tmp_path / 'mk' / 'rpfs.conf'))
    r = rpfs('mkfs', '--conf', conf)
    assert r.returncode == 0, r.stderr
    # the LMDB store's directory, or (PostgreSQL) the schema in c.store_uri
    assert (c.store_uri or os.path.isdir(c.db)) and all(os.path.isdir(d) for d in c.iod_dirs)
    # a second mkfs with the same table is harmless
    assert rpfs('mkfs', '--conf', conf).returncode == 0
