"""Two keys (README "What the key holder can do"): the clients' key mounts
and runs librpfs; only the servers' key may fence, list or checksum an
iod's objects, scrub, or purge an orphan that is not the caller's. A
client never sends its proof to a server that failed to prove its own.
One two-key cluster serves every check here."""
import errno
import json
import os
import socket
import subprocess
import tempfile

import pytest

import util
import wire

OP_SCRUB_INOS = 60
OP_SCRUB_ORPHANS = 61
OP_IO_LIST = 50
OP_IO_CSUM = 51
OP_IO_FENCE = 52

# what the iod and the mgr say when a client's key asks for servers' work
REFUSED = r'^<5>rpfs-(iod|mgr): (IO_FENCE|IO_LIST|IO_CSUM|SCRUB_ORPHANS|SCRUB_INOS) ' \
          r'from \S+ refused: it needs the servers\' key$'


def rpfs(*args, env=None):
    return util.run([util.binary('admin/rpfs')] + list(args), check=False,
                    timeout=120, env=env)


@pytest.fixture(scope='module')
def two(tmp_path_factory):
    """A cluster of 2 iods with a clients' key and a servers' key, and a
    mount with the clients' key."""
    tmp = tmp_path_factory.mktemp('two')
    c = util.conf_cluster(tmp, niods=2, name='two', server_key=True)
    path = str(tmp_path_factory.mktemp('twom'))
    util.make_traversable(path)
    m = c.mount(path, 'allow_other,key=%s' % c.key)
    yield c, m
    util.cleanup(m, c)


@pytest.fixture(scope='module')
def two_tcp(two, tmp_path_factory):
    """A two-key cluster over tcp, for the raw frames of wire.py: two's
    own, unless the VM stage runs it over verbs."""
    if util.transport() == 'tcp':
        yield two[0]
        return
    c = util.conf_cluster(tmp_path_factory.mktemp('twotcp'), niods=2, name='twotcp',
                          server_key=True, transport='tcp')
    yield c
    util.cleanup(c)


def connect(port, key, cls):
    """A raw TCP connection to port, in with key of class cls: the sealed
    stream (wire.Sealed)."""
    s = socket.create_connection((util.HOST, port), timeout=20)
    return wire.sealed(s, wire.read_key(key), cls)


def test_clients_key_mounts_and_moves_data(two):
    """The clients' key mounts; data goes through both iods; a file
    another user unlinks is reaped by that user's purge (no orphan left,
    so no warning)."""
    c, m = two
    data = os.urandom(3 << 20)
    p = os.path.join(m.path, 'data')
    with open(p, 'wb') as f:
        f.write(data)
    assert util.read_direct(p) == data
    d = os.path.join(m.path, 'pub')
    os.mkdir(d)
    os.chmod(d, 0o777)
    with open(os.path.join(d, 'roots'), 'wb') as f:
        f.write(b'x' * 200000)
    ino = os.stat(os.path.join(d, 'roots')).st_ino
    assert any(c.objects(ino))
    r = util.run(['setpriv', '--reuid', '1000', '--regid', '1000', '--clear-groups',
                  'rm', os.path.join(d, 'roots')], check=False)
    assert r.returncode == 0, r.stderr
    util.wait_until(lambda: not any(c.objects(ino)), 20, what='the freed file reaped')
    # purged too: the mgr holds no orphan (a purge refused would leave one)
    def no_orphan():
        r = rpfs('scrub', '--conf', c.conf, '--dry-run')
        assert r.returncode == 0, r.stdout + r.stderr
        return ', 0 orphan inodes at the mgr' in r.stdout
    util.wait_until(no_orphan, 20, what='no orphan at the mgr')


@pytest.mark.expect_log(REFUSED)
@pytest.mark.parametrize('op', [OP_IO_FENCE, OP_IO_LIST, OP_IO_CSUM])
def test_clients_key_cannot_do_iod_servers_work(two_tcp, op):
    """IO_FENCE, IO_LIST and IO_CSUM with the clients' key: -EPERM, and the
    connection stays usable."""
    c = two_tcp
    s = connect(c.iod_ports[0], c.key, wire.KEY_CLIENTS)
    try:
        status, body = wire.request(s, op, b'\0' * 64)
        assert status == -errno.EPERM and body == b''
        status, _b = wire.request(s, wire.OP_IO_STATFS, tag=8)
        assert status == 0
    finally:
        s.close()


@pytest.mark.expect_log(REFUSED)
@pytest.mark.parametrize('op', [OP_SCRUB_ORPHANS, OP_SCRUB_INOS])
def test_clients_key_cannot_scrub_at_mgr(two_tcp, op):
    """The mgr's scrub service answers the clients' key -EPERM."""
    c = two_tcp
    s = connect(c.mgr_port, c.key, wire.KEY_CLIENTS)
    try:
        status, body = wire.request(s, op, b'\0' * 16)
        assert status == -errno.EPERM and body == b''
    finally:
        s.close()


def test_servers_key_lists(two_tcp):
    """The same IO_LIST with the servers' key is served (the refusal above
    is the key's, not the request's)."""
    c = two_tcp
    s = connect(c.iod_ports[0], c.server_key, wire.KEY_SERVERS)
    try:
        # proto_ioreq of IO_LIST: cursor (u32 bucket, u64 after), u32 max
        body = (0).to_bytes(4, 'little') + (0).to_bytes(8, 'little') + \
            (16).to_bytes(4, 'little')
        status, _b = wire.request(s, OP_IO_LIST, body)
        assert status == 0
    finally:
        s.close()


@pytest.mark.expect_log(REFUSED)
def test_scrub_needs_servers_key(two):
    """rpfs scrub with only the clients' key fails and says why; with the
    config file's servers' key it runs."""
    c, _m = two
    r = rpfs('scrub', '--mgr', util.hostport(c.mgr_port), '--key', c.key)
    assert r.returncode != 0
    assert "servers' key" in r.stderr, r.stderr
    r = rpfs('scrub', '--conf', c.conf)
    assert r.returncode == 0, r.stdout + r.stderr


def auth_fail(c, port):
    """The auth_fail counter of c's server at port (rpfs stats): the
    proofs of key it found wrong (and the clients it refused for the key
    they named, or for naming none)."""
    r = rpfs('stats', '--server', util.hostport(port), '--key', c.key, env=c.env)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)['auth_fail']


def send_wrong_proof(port, key, cls):
    """A raw TCP client naming key class cls that takes the server's proof
    without checking it and answers with its own, made with key (not the
    server's): what a client with a wrong key would send if it did not
    refuse the server first. The server answers -EACCES."""
    s = socket.create_connection((util.HOST, port), timeout=20)
    try:
        cn = os.urandom(32)
        s.sendall(wire.hdr(wire.OP_NET_HELLO, 33, tag=0, flags=wire.F_CTRL) + cn +
                  bytes([cls]))
        op, status, _f, body = wire.recv_frame(s)
        assert op == wire.OP_NET_HELLO and status == 0 and len(body) == 64, (op, status)
        s.sendall(wire.hdr(wire.OP_NET_AUTH, 32, tag=0, flags=wire.F_CTRL) +
                  wire.auth_mac(wire.read_key(key), b'C', cn, body[:32]))
        op, status, _f, _b = wire.recv_frame(s)
        assert op == wire.OP_NET_AUTH and status == -errno.EACCES, (op, status)
    finally:
        s.close()


@pytest.mark.expect_log(r"^<4>rpfs-mgr: net: \S+: client offers the servers' key, "
                        r"which this server does not hold; refusing it$")
@pytest.mark.expect_log(r'^<4>rpfs-(mgr|iod): net: \S+: wrong cluster key; '
                        r'refusing the client$')
def test_wrong_servers_key_refused(two, two_tcp, tmp_path):
    """A wrong servers' key is refused by the servers' proof, before the
    client sends its own: rpfs scrub refuses the mgr, and (pointed at it
    as its mgr) iod 0, and neither server counts a failed proof. The
    control: a proof made with that key, sent anyway, is counted by each.
    A servers' key is refused by a one-key cluster's mgr."""
    c, _m = two
    other = str(tmp_path / 'other.key')
    assert rpfs('keygen', other).returncode == 0
    ports = (c.mgr_port, c.iod_ports[0])
    before = {p: auth_fail(c, p) for p in ports}
    r = rpfs('scrub', '--conf', c.conf, '--server-key', other)
    assert r.returncode != 0
    assert "failed to prove the servers' key" in r.stderr, r.stderr
    # the same handshake with an iod: scrub takes it for a mgr
    r = rpfs('scrub', '--mgr', util.hostport(c.iod_ports[0]), '--key', c.key,
             '--server-key', other)
    assert r.returncode != 0
    assert "failed to prove the servers' key" in r.stderr, r.stderr
    # we never sent our proof: neither server saw a failed one
    after = {p: auth_fail(c, p) for p in ports}
    assert after == before, 'auth_fail by port'
    # the control, on the tcp cluster (two itself on tcp): a wrong proof
    # is counted, once, by the server it is sent to
    t = two_tcp
    for port in (t.mgr_port, t.iod_ports[0]):
        n = after[port] if t is c else auth_fail(t, port)
        send_wrong_proof(port, other, wire.KEY_SERVERS)
        assert auth_fail(t, port) == n + 1
    one = util.conf_cluster(tmp_path / 'one', niods=1, name='one')
    try:
        r = rpfs('scrub', '--mgr', util.hostport(one.mgr_port), '--key', one.key,
                 '--server-key', c.server_key)
        assert r.returncode != 0
        assert "does not accept the servers' key" in r.stderr, r.stderr
    finally:
        util.cleanup(one)


def test_daemon_refuses_one_key_twice(two, tmp_path):
    """A servers' key equal to the clients' key, or without one, is a
    configuration error naming both."""
    c, _m = two
    r = util.run([util.binary('mgr/rpfs-mgr'), '--conf', c.conf, '--server-key', c.key,
                  '--listen', '127.0.0.1:1'], check=False, timeout=30)
    assert r.returncode == 2 and 'are the same key' in r.stderr, r.stderr
    r = util.run([util.binary('iod/rpfs-iod'), '--listen', '127.0.0.1:1', '--data',
                  str(tmp_path), '--server-key', c.server_key], check=False, timeout=30)
    assert r.returncode == 2 and "needs the clients' key" in r.stderr, r.stderr


def test_librpfs_user_with_group_key(two):
    """A non-root user in the group of a root-owned 0640 copy of the
    clients' key runs the fio engine (librpfs) and writes and verifies a
    file; the servers' key (0600 root) stays closed to that user."""
    c, m = two
    from test_listio import fio_engine, sanitizer_preload
    d = tempfile.mkdtemp(prefix='rpfs-keys-')
    try:
        os.chmod(d, 0o755)
        key = os.path.join(d, 'clients.key')
        with open(c.key) as src, open(key, 'w') as dst:
            dst.write(src.read())
        os.chown(key, 0, 4242)
        os.chmod(key, 0o640)
        os.chmod(os.path.join(m.path), 0o777)
        job = os.path.join(d, 'u.fio')
        with open(job, 'w') as f:
            f.write('[global]\nioengine=external:%s\nrpfs_mgr=%s\nrpfs_key=%s\n'
                    'filename=userfile\nsize=2m\nbs=64k\nverify=crc32c\n'
                    '[w]\nrw=write\n' % (fio_engine(), util.hostport(c.mgr_port), key))
        env = dict(c.env or os.environ)
        pre = sanitizer_preload()
        if pre:
            env['LD_PRELOAD'] = pre
            env['ASAN_OPTIONS'] = 'detect_leaks=0'
        base = ['setpriv', '--reuid', '1000', '--regid', '1000', '--groups', '4242']
        p = subprocess.run(base + ['fio', '--output-format=normal', job], env=env, cwd=d,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0 and 'err= 0' in p.stdout, p.stdout + p.stderr
        st = os.stat(os.path.join(m.path, 'userfile'))
        assert st.st_uid == 1000 and st.st_size == 2 << 20
        # outside the group the same copy is closed, and said so
        p = subprocess.run(['setpriv', '--reuid', '1000', '--regid', '1000',
                            '--clear-groups', util.binary('admin/rpfs'), 'status',
                            '--mgr', util.hostport(c.mgr_port), '--key', key],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and 'cannot open it' in p.stderr, p.stderr
        # and the servers' key, installed 0600 for root, is root's alone
        srv = os.path.join(d, 'server.key')
        with open(c.server_key) as src, open(srv, 'w') as dst:
            dst.write(src.read())
        os.chmod(srv, 0o600)
        p = subprocess.run(base + [util.binary('admin/rpfs'), 'scrub', '--dry-run',
                                   '--mgr', util.hostport(c.mgr_port), '--key', key,
                                   '--server-key', srv], capture_output=True, text=True,
                           timeout=60, env=env)
        assert p.returncode != 0, p.stdout + p.stderr
        assert "server.key: cannot open it (this needs the servers' key" in p.stderr, p.stderr
    finally:
        os.unlink(os.path.join(m.path, 'userfile')) if os.path.exists(
            os.path.join(m.path, 'userfile')) else None
        subprocess.run(['rm', '-rf', d])
