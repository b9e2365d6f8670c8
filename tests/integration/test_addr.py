"""Addresses: every program reads HOST:PORT the same way (IPv6 only in
brackets) and prints IPv6 back in brackets; a daemon with no cluster key
serves a non-loopback address only with --insecure.

The no-key checks run their daemons in a network namespace of their own
(unshare -n), so nothing listens on this machine's real interfaces even if
the rule were broken."""
import os
import re
import socket
import subprocess
import sys

import pytest

import util

BARE_V6 = 'fe80::1:7400'
BARE_V6_WHY = 'got "%s": an IPv6 address needs brackets, as in [fe80::1]:7400' % BARE_V6


def _librpfs_mount(addr):
    """rpfs_mount(addr) through librpfs in a child python: (return code,
    stderr)."""
    lib = util.binary('fuse-client/librpfs.so')
    env = dict(os.environ)
    p = subprocess.run(['ldd', lib], capture_output=True, text=True)
    pre = [path for name, path in
           re.findall(r'^\s*(lib(?:asan|ubsan)\.so\S*) => (\S+)', p.stdout, re.M)]
    pre.sort(key=lambda path: 'libasan' not in path)
    if pre:
        env['LD_PRELOAD'] = ':'.join(pre)
        env['ASAN_OPTIONS'] = 'detect_leaks=0'  # python's own, not ours
    script = ('import ctypes, sys\n'
              'lib = ctypes.CDLL(sys.argv[1])\n'
              'fs = ctypes.c_void_p()\n'
              'print(lib.rpfs_mount(sys.argv[2].encode(), None, ctypes.byref(fs)))\n')
    r = util.run([sys.executable, '-c', script, lib, addr], env=env, timeout=60)
    return int(r.stdout.strip()), r.stderr


def _commands(tmp_path, addr, conf_too=True):
    """(name, argv, exit code, prefix of the message) for every program
    reading addr: option, config key (unless not conf_too), mount argument,
    admin CLI."""
    conf = str(tmp_path / 'rpfs.conf')
    with open(conf, 'w') as f:
        f.write('[cluster]\nmgr = %s\n[iod.0]\nhost = 127.0.0.1\nport = 1\n'
                'data = %s\n' % (addr, tmp_path / 'd'))
    mnt = tmp_path / 'mnt'
    mnt.mkdir(exist_ok=True)
    mgr = util.binary('mgr/rpfs-mgr')
    iod = util.binary('iod/rpfs-iod')
    rpfs = util.binary('admin/rpfs')
    cmds = [
        ('iod --listen', [iod, '--listen', addr, '--data', str(tmp_path / 'd')], 2,
         'rpfs-iod: --listen: expected HOST:PORT, '),
        ('mgr --listen', [mgr, '--listen', addr, '--db', str(tmp_path / 'db'),
                          '--iod', '127.0.0.1:1'], 2,
         'rpfs-mgr: --listen: expected HOST:PORT, '),
        ('mgr --iod', [mgr, '--listen', '127.0.0.1:0', '--db', str(tmp_path / 'db'),
                       '--iod', addr], 2, 'rpfs-mgr: --iod: expected HOST:PORT, '),
        ('rpfs status --mgr', [rpfs, 'status', '--mgr', addr], 2,
         'rpfs: --mgr: expected HOST:PORT, '),
        ('rpfs mkfs --iod', [rpfs, 'mkfs', '--iod', addr, '--db', str(tmp_path / 'db')], 2,
         'rpfs mkfs: --iod: expected HOST:PORT, '),
        ('rpfs-fuse MGRHOST', [util.binary('fuse-client/rpfs-fuse'), addr, str(mnt), '-f'], 2,
         'rpfs-fuse: MGRHOST: expected HOST[:PORT], '),
    ]
    if conf_too:
        cmds += [
            ('mgr [cluster] mgr', [mgr, '--conf', conf], 2,
             'rpfs-mgr: %s:2: [cluster] mgr: expected HOST:PORT, ' % conf),
            ('iod [cluster] mgr', [iod, '--conf', conf, '--id', '0'], 2,
             'rpfs-iod: %s:2: [cluster] mgr: expected HOST:PORT, ' % conf),
        ]
    return cmds


def test_bare_ipv6_refused_alike(tmp_path):
    """fe80::1:7400 is refused by every program with the same reason (use
    brackets) and exit 2, and by librpfs with -EINVAL and the same reason."""
    for name, argv, code, prefix in _commands(tmp_path, BARE_V6):
        r = util.run(argv, check=False, timeout=30)
        assert r.returncode == code, (name, r.returncode, r.stderr)
        assert prefix + BARE_V6_WHY + '\n' in r.stderr, (name, r.stderr)
    rc, err = _librpfs_mount(BARE_V6)
    assert rc == -22, (rc, err)
    assert 'librpfs: mgr address: expected HOST[:PORT], ' + BARE_V6_WHY in err, err


# why is a regex: the port range is 0..65535 where port 0 is allowed
# (--listen), 1..65535 elsewhere.
@pytest.mark.parametrize('addr,why', [
    ('127.0.0.1:65536', r'PORT must be a number [01]\.\.65535'),
    ('127.0.0.1:abc', r'PORT must be a number [01]\.\.65535'),
    ('127.0.0.1:7400x', r'PORT must be a number [01]\.\.65535'),
    (':7400', 'empty HOST'),
    (r'[::1]x:7400', r'unexpected text after \]'),
    ('[::1:7400', r'no \] after \['),
    ('a' * 256 + ':7400', 'HOST longer than 255 bytes'),
])
def test_bad_address_same_reason(tmp_path, addr, why):
    """Each bad address: every program refuses it (exit 2) naming its option
    or key, the address and the same reason. (The over-long host is given
    on command lines only: its config line is over the file's line limit,
    which test_config_line_too_long checks.)"""
    for name, argv, code, prefix in _commands(tmp_path, addr, len(addr) < 100):
        r = util.run(argv, check=False, timeout=30)
        assert r.returncode == code, (name, r.returncode, r.stderr)
        want = re.escape('%sgot "%s": ' % (prefix, addr)) + why + '\n'
        assert re.search(want, r.stderr), (name, r.stderr)


def test_config_line_too_long(tmp_path):
    """A config line longer than the INI reader's buffer (here an over-long
    [cluster] mgr) is refused as such at its line, not cut into another
    address."""
    conf = str(tmp_path / 'rpfs.conf')
    with open(conf, 'w') as f:
        f.write('[cluster]\nmgr = %s:7400\n' % ('a' * 256))
    for argv in ([util.binary('mgr/rpfs-mgr'), '--conf', conf],
                 [util.binary('iod/rpfs-iod'), '--conf', conf, '--id', '0']):
        r = util.run(argv, check=False, timeout=30)
        assert r.returncode == 2, (argv, r.returncode, r.stderr)
        assert re.search(re.escape(conf) + r':2: line longer than \d+ bytes\n', r.stderr), \
            r.stderr


def _free_port6():
    """A TCP port on ::1 that was free a moment ago."""
    for _ in range(100):
        port = util.free_port()
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            try:
                s.bind(('::1', port))
            except OSError:
                continue
        return port
    raise RuntimeError('no free port on ::1')


def test_ipv6_loopback_end_to_end(tmp_path):
    """An iod and a mgr on [::1]: they start, log their address in brackets,
    the mgr reaches the iod, and rpfs status (given [::1]:PORT) shows both
    up at [::1]:PORT."""
    mport, iport = _free_port6(), _free_port6()
    logdir = tmp_path / 'logs'
    logdir.mkdir()
    env = dict(os.environ, RPFS_TRANSPORT='tcp')
    iod = util.Daemon('v6-iod', [util.binary('iod/rpfs-iod'), '--listen', '[::1]:%d' % iport,
                                 '--data', str(tmp_path / 'd')],
                      str(logdir / 'iod.log'), r'^<5>rpfs-iod: ready:', env)
    mgr = util.Daemon('v6-mgr', [util.binary('mgr/rpfs-mgr'), '--listen', '[::1]:%d' % mport,
                                 '--db', str(tmp_path / 'db'), '--iod', '[::1]:%d' % iport],
                      str(logdir / 'mgr.log'), r'^<5>rpfs-mgr: ready:', env)
    try:
        iod.start()
        mgr.start()
        assert ('<5>rpfs-iod: ready: listening on [::1]:%d, data ' % iport
                in iod.log.read_from(0)), iod.log.tail()
        assert ('<5>rpfs-mgr: ready: listening on [::1]:%d, 1 iods (tcp)' % mport
                in mgr.log.read_from(0)), mgr.log.tail()
        util.wait_until(lambda: 'rpfs-iod: fence: lease gained from the mgr'
                        in iod.log.read_from(0), 30, 0.1,
                        'the mgr to reach the iod over ::1')
        r = util.run([util.binary('admin/rpfs'), 'status', '--mgr', '[::1]:%d' % mport],
                     env=env, timeout=60)
        rows = {l.split()[0]: l.split() for l in r.stdout.splitlines()[1:]}
        assert rows['mgr'][2:4] == ['[::1]:%d' % mport, 'up'], r.stdout
        assert rows['iod'][1:4] == ['0', '[::1]:%d' % iport, 'up'], r.stdout
    finally:
        assert mgr.stop()
        assert iod.stop()


# A namespace of the test's own: lo up, also holding NS_ADDR, a non-loopback
# address nothing outside the namespace can reach.
NS_ADDR = '10.200.0.1'
NS_SETUP = 'ip link set lo up && ip addr add %s/32 dev lo && exec "$@"' % NS_ADDR


def _in_netns(argv):
    """argv run in a fresh network namespace (see NS_SETUP)."""
    return ['unshare', '-n', 'sh', '-c', NS_SETUP, 'sh'] + argv


def _refusal(prog, addr):
    return ('%s: refusing to listen on %s without a cluster key: it is not a '
            'loopback address, so anyone who can reach it would be served; give a '
            'key (--key FILE or [cluster] key) or allow it with --insecure '
            '([cluster] insecure = true)\n' % (prog, addr))


def _ns_conf(tmp_path, name, cluster_extra='', mgr_listen=None, iod_host='127.0.0.1',
             iod_port=1):
    """A config file NAME: [cluster] mgr at NS_ADDR:7400, one iod."""
    conf = str(tmp_path / name)
    with open(conf, 'w') as f:
        f.write('[cluster]\nmgr = %s:7400\n%s[mgr]\ndb = %s\n%s'
                '[iod.0]\nhost = %s\nport = %d\ndata = %s\n'
                % (NS_ADDR, cluster_extra, tmp_path / 'db',
                   'listen = %s\n' % mgr_listen if mgr_listen else '',
                   iod_host, iod_port, tmp_path / 'd'))
    return conf


@pytest.mark.parametrize('case', ['iod-any', 'iod-addr', 'mgr-any6', 'mgr-conf-listen',
                                  'mgr-conf-default', 'iod-conf'])
def test_no_key_non_loopback_refused(tmp_path, case):
    """No key, a non-loopback address (0.0.0.0, ::, 10.x; from a flag, a
    config key, or the mgr's default listen of [cluster] mgr): the daemon
    refuses to start (exit 2) with one line naming the address and the two
    ways out."""
    iod = [util.binary('iod/rpfs-iod'), '--data', str(tmp_path / 'd')]
    mgr = [util.binary('mgr/rpfs-mgr'), '--db', str(tmp_path / 'db'), '--iod', '127.0.0.1:1']
    argv, want = {
        'iod-any': (iod + ['--listen', '0.0.0.0:0'], _refusal('rpfs-iod', '0.0.0.0:0')),
        'iod-addr': (iod + ['--listen', NS_ADDR + ':7411'],
                     _refusal('rpfs-iod', NS_ADDR + ':7411')),
        'mgr-any6': (mgr + ['--listen', '[::]:0'], _refusal('rpfs-mgr', '[::]:0')),
        'mgr-conf-listen': ([util.binary('mgr/rpfs-mgr'), '--conf',
                             _ns_conf(tmp_path, 'l.conf', mgr_listen=NS_ADDR + ':7410')],
                            _refusal('rpfs-mgr', NS_ADDR + ':7410')),
        'mgr-conf-default': ([util.binary('mgr/rpfs-mgr'), '--conf', _ns_conf(tmp_path, 'd.conf')],
                             _refusal('rpfs-mgr', '0.0.0.0:7400')),
        'iod-conf': ([util.binary('iod/rpfs-iod'), '--id', '0', '--conf',
                      _ns_conf(tmp_path, 'i.conf', iod_host=NS_ADDR, iod_port=7411)],
                     _refusal('rpfs-iod', NS_ADDR + ':7411')),
    }[case]
    r = util.run(_in_netns(argv), check=False, timeout=30)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr == want, r.stderr


def _insecure_warning(prog, addr):
    return ('<4>%s: insecure: no cluster key and listening on %s, which is not a '
            'loopback address: anyone who can reach it is served' % (prog, addr))


@pytest.mark.expect_log(r'^<4>rpfs-(iod|mgr): insecure: no cluster key and listening on '
                        r'10\.200\.0\.1:741[01], which is not a loopback address: anyone '
                        r'who can reach it is served$')
@pytest.mark.parametrize('how', ['flag', 'conf'])
def test_insecure_serves_with_one_warning(tmp_path, how):
    """With --insecure (or [cluster] insecure = true) and no key, an iod and
    a mgr on a non-loopback address start, log the insecure warning once,
    and serve: rpfs stats from inside the namespace gets the iod's
    answer."""
    logdir = tmp_path / 'logs'
    logdir.mkdir()
    if how == 'flag':
        iod_argv = [util.binary('iod/rpfs-iod'), '--listen', NS_ADDR + ':7411',
                    '--data', str(tmp_path / 'd'), '--insecure']
        mgr_argv = [util.binary('mgr/rpfs-mgr'), '--listen', NS_ADDR + ':7410',
                    '--db', str(tmp_path / 'db'), '--iod', NS_ADDR + ':7411', '--insecure']
    else:
        conf = _ns_conf(tmp_path, 'rpfs.conf', cluster_extra='insecure = true\n',
                        mgr_listen=NS_ADDR + ':7410', iod_host=NS_ADDR, iod_port=7411)
        iod_argv = [util.binary('iod/rpfs-iod'), '--conf', conf, '--id', '0']
        mgr_argv = [util.binary('mgr/rpfs-mgr'), '--conf', conf]
    # tcp whatever the suite runs on: the rule is about addresses, and the
    # namespace has no RDMA device (the VM stage sets RPFS_TRANSPORT=verbs)
    env = dict(os.environ, RPFS_TRANSPORT='tcp')
    # both daemons in one namespace: the iod's sh sets it up, the mgr joins
    iod = util.Daemon('ins-iod', _in_netns(iod_argv), str(logdir / 'iod.log'),
                      r'^<5>rpfs-iod: ready:', env=env)
    mgr = None
    try:
        iod.start()
        mgr = util.Daemon('ins-mgr', ['nsenter', '-t', str(iod.proc.pid), '-n'] + mgr_argv,
                          str(logdir / 'mgr.log'), r'^<5>rpfs-mgr: ready:', env=env)
        mgr.start()
        for d, prog, port in ((iod, 'rpfs-iod', 7411), (mgr, 'rpfs-mgr', 7410)):
            lines = d.log.read_from(0).splitlines()
            warn = _insecure_warning(prog, '%s:%d' % (NS_ADDR, port))
            assert lines.count(warn) == 1, lines
            assert not any(l.startswith('<4>') and l != warn for l in lines), lines
        r = util.run(['nsenter', '-t', str(iod.proc.pid), '-n', util.binary('admin/rpfs'),
                      'status', '--mgr', '%s:7410' % NS_ADDR], timeout=60, env=env)
        rows = {l.split()[0]: l.split() for l in r.stdout.splitlines()[1:]}
        assert rows['mgr'][2:4] == ['%s:7410' % NS_ADDR, 'up'], r.stdout
        assert rows['iod'][1:4] == ['0', '%s:7411' % NS_ADDR, 'up'], r.stdout
    finally:
        if mgr is not None:
            assert mgr.stop()
        assert iod.stop()
