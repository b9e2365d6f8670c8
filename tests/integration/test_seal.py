"""Sealed streams (common/transport/net_seal.h): after the key handshake
every byte of a keyed TCP connection travels in records tagged with a key
derived from the cluster key, the mode and both nonces. A relay that
forwarded the handshake keeps a connection it cannot use: a frame it
injects, alters or replays, either way, ends the connection before
anything is served. With [net] encrypt = on on either side the records
are encrypted too, and a relay that strips that from the handshake gets
the connection closed. Two keyed TCP clusters of one iod serve every
check here: one that only authenticates (kc), one whose servers encrypt
(ec, with a mount)."""
import json
import os
import re
import socket
import struct
import threading

import pytest

import util
import wire

SERVER_BAD = r'^<4>rpfs-iod: net: \S+: a sealed record failed its check \(not from the ' \
             r'peer that proved the key\); closing connection$'
CLIENT_BAD = 'a sealed record failed its check (not from the server that proved the key)'

# TCP only, like the raw peers of test_keys: the VM stage has nothing more
# to run here than the host stage
pytestmark = pytest.mark.host_only


@pytest.fixture(scope='module')
def kc(tmp_path_factory):
    """A keyed cluster of one iod on TCP."""
    c = util.conf_cluster(tmp_path_factory.mktemp('seal'), niods=1, name='seal',
                          transport='tcp')
    yield c
    util.cleanup(c)


def logged(c, pattern, since):
    """Whether the iod logged a line matching pattern after offset since."""
    return re.search(pattern, c.iods[0].log.read_from(since), re.M) is not None


class Relay:
    """A man in the middle on a local port, forwarding one client connection
    to port. Each direction's two handshake frames (HELLO and AUTH, and
    their replies) go through hs(direction, index, frame), then its first
    record through rec(direction, record), then the rest as it comes.
    By mode: 'pass' changes nothing; 'tamper' flips a bit in the client's
    first record; 'replay' sends that record twice; 'tamper_reply' flips
    a bit in the server's first record; 'strip' drops the mode byte from
    the server's HELLO reply (a downgrade from encryption to a MAC).
    got[direction] keeps the bytes forwarded ('up' to the server, 'down'
    to the client)."""

    def __init__(self, port, mode):
        self.port, self.mode = port, mode
        self.got = {'up': bytearray(), 'down': bytearray()}
        self.ls = socket.socket()
        self.ls.bind((util.HOST, 0))
        self.ls.listen(1)
        self.ls.settimeout(30)
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def lport(self):
        return self.ls.getsockname()[1]

    def hs(self, way, i, frame):
        if self.mode == 'strip' and way == 'down' and i == 0 and len(frame) == 48 + 65:
            return frame[:24] + struct.pack('<I', 64) + frame[28:-1]
        return frame

    def rec(self, way, r):
        flip = r[:4] + bytes([r[4] ^ 1]) + r[5:]
        if way == 'up':
            return {'tamper': flip, 'replay': r + r}.get(self.mode, r)
        return flip if self.mode == 'tamper_reply' else r

    @staticmethod
    def whole(buf, seal):
        """Bytes of the first whole frame (or record when seal) in buf, or 0."""
        if seal:
            if len(buf) < 4:
                return 0
            n = 4 + struct.unpack_from('<I', buf)[0] + 16
        else:
            if len(buf) < wire.HDR_LEN:
                return 0
            n = wire.HDR_LEN + struct.unpack_from('<I', buf, 24)[0]
        return n if len(buf) >= n else 0

    def pump(self, src, dst, way):
        buf, step = b'', 0  # step: 0 and 1 handshake frames, 2 record, 3 rest
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                buf += b
                out = b''
                while buf:
                    if step == 3:
                        out, buf = out + buf, b''
                        break
                    n = self.whole(buf, step == 2)
                    if not n:
                        break
                    one, buf = buf[:n], buf[n:]
                    out += self.hs(way, step, one) if step < 2 else self.rec(way, one)
                    step += 1
                if out:
                    self.got[way] += out
                    dst.sendall(out)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def run(self):
        try:
            cs, _a = self.ls.accept()
        except OSError:
            return
        ss = socket.create_connection((util.HOST, self.port), timeout=30)
        t = threading.Thread(target=self.pump, args=(ss, cs, 'down'), daemon=True)
        t.start()
        self.pump(cs, ss, 'up')
        t.join(30)
        cs.close()
        ss.close()

    def close(self):
        self.ls.close()
        self.t.join(30)


def relayed_stats(c, port, mode='pass', conf=None):
    """rpfs stats of the server at port through a Relay; (result, relay)."""
    r = Relay(port, mode)
    try:
        args = ['--conf', conf] if conf else ['--key', c.key]
        p = util.run([util.binary('admin/rpfs'), 'stats', '--server',
                      util.hostport(r.lport())] + args, check=False, timeout=60)
    finally:
        r.close()
    return p, r


def test_peer_primitives_match_rfc8439():
    """The test peer's own ChaCha20 block and Poly1305 (wire.py), which
    every sealed exchange here checks the C side against, give RFC 8439's
    test vectors (sections 2.3.2 and 2.5.2)."""
    block = wire.chacha20_block(bytes(range(32)), 1,
                                bytes.fromhex('000000090000004a00000000'))
    assert block.hex() == (
        '10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e'
        'd2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e')
    otk = bytes.fromhex('85d6be7857556d337f4452fe42d506a8'
                        '0103808afb0db2fd4abff6af4149f51b')
    assert wire.poly1305(otk, b'Cryptographic Forum Research Group').hex() == \
        'a8061dc1305136c6c22b8baf0c0127a9'


def test_sealed_requests_served(kc):
    """A peer that seals as net_seal.h says (wire.Sealed, written apart from
    the C code) is served, and the server's records check out."""
    s = wire.sealed(socket.create_connection((util.HOST, kc.iod_ports[0]), timeout=20),
                    wire.read_key(kc.key))
    try:
        for tag in range(1, 4):
            status, _b = wire.request(s, wire.OP_IO_STATFS, tag=tag)
            assert status == 0
    finally:
        s.close()


@pytest.mark.expect_log(SERVER_BAD)
def test_unsealed_frame_after_auth_refused(kc):
    """What a relay that forwarded the handshake can send of its own, a
    plain frame, closes the connection unanswered."""
    since = kc.iods[0].log.size()
    s = socket.create_connection((util.HOST, kc.iod_ports[0]), timeout=20)
    try:
        assert wire.keyed_handshake(s, wire.read_key(kc.key)) == 0
        s.sendall(wire.hdr(wire.OP_IO_STATFS, 0, tag=9))
        try:
            got = s.recv(wire.HDR_LEN)
        except ConnectionResetError:
            got = b''
        assert got == b'', 'a plain frame after AUTH was answered: %r' % got
    finally:
        s.close()
    util.wait_until(lambda: logged(kc, SERVER_BAD, since), 10, what='the refusal logged')


def test_relay_passing_through_works(kc):
    """The relay itself is transparent: forwarding every byte, the admin
    tool's request through it is served (so the failures below are the
    seal's)."""
    p, _r = relayed_stats(kc, kc.iod_ports[0], 'pass')
    assert p.returncode == 0, p.stderr
    assert 'msgs_rx' in json.loads(p.stdout)


@pytest.mark.expect_log(SERVER_BAD)
@pytest.mark.parametrize('mode', ['tamper', 'replay'])
def test_relay_altering_requests_refused(kc, mode):
    """A bit flipped in the client's first record, or that record sent
    twice: the iod finds the record is not the key holder's and closes."""
    since = kc.iods[0].log.size()
    p, _r = relayed_stats(kc, kc.iod_ports[0], mode)
    if mode == 'tamper':
        assert p.returncode != 0, p.stdout
    util.wait_until(lambda: logged(kc, SERVER_BAD, since), 10, what='the refusal logged')


def test_relay_altering_replies_refused(kc):
    """A bit flipped in the iod's first record: the client refuses the
    reply, says why, and the command fails."""
    p, _r = relayed_stats(kc, kc.iod_ports[0], 'tamper_reply')
    assert p.returncode != 0, p.stdout
    assert CLIENT_BAD in p.stderr, p.stderr



# ------------------------------------------------------------ encryption

@pytest.fixture(scope='module')
def ec(tmp_path_factory):
    """A keyed cluster of one iod on TCP whose servers encrypt ([net]
    encrypt = on), and a mount of it."""
    tmp = tmp_path_factory.mktemp('sealenc')
    c = util.conf_cluster(tmp, niods=1, name='sealenc', transport='tcp',
                          extra='[net]\nencrypt = on\n')
    path = str(tmp_path_factory.mktemp('sealencm'))
    m = c.mount(path, 'key=%s' % c.key)
    yield c, m
    util.cleanup(m, c)


def test_encrypting_server_hides_replies(kc, ec):
    """Through a relay, the iod's counters (JSON naming msgs_rx) are in
    plain sight on a MAC-only connection and nowhere on an encrypted one;
    both are served."""
    p, r = relayed_stats(kc, kc.iod_ports[0])
    assert p.returncode == 0 and 'msgs_rx' in json.loads(p.stdout), p.stderr
    assert b'msgs_rx' in r.got['down']
    c, _m = ec
    p, r = relayed_stats(c, c.iod_ports[0])
    assert p.returncode == 0 and 'msgs_rx' in json.loads(p.stdout), p.stderr
    assert b'msgs_rx' not in r.got['down']
    assert len(r.got['down']) > len(p.stdout)  # it did pass through


def test_client_asks_to_encrypt(kc, tmp_path):
    """A client whose config says [net] encrypt = on gets an encrypted
    connection from a server that would not have encrypted."""
    conf = util.write_conf(kc, str(tmp_path / 'enc.conf'), key=kc.key,
                           transport='tcp', extra='[net]\nencrypt = on\n')
    p, r = relayed_stats(kc, kc.iod_ports[0], conf=conf)
    assert p.returncode == 0 and 'msgs_rx' in json.loads(p.stdout), p.stderr
    assert b'msgs_rx' not in r.got['down']


@pytest.mark.expect_log(SERVER_BAD)
def test_downgrade_refused(ec):
    """A relay that drops the mode byte from the server's HELLO reply (so
    the client would seal with a MAC only) gets the connection closed: the
    mode is bound into the stream keys."""
    c, _m = ec
    since = c.iods[0].log.size()
    p, _r = relayed_stats(c, c.iod_ports[0], 'strip')
    assert p.returncode != 0, p.stdout
    util.wait_until(lambda: logged(c, SERVER_BAD, since), 10, what='the refusal logged')


def test_encrypted_mount_moves_data(ec):
    """Files written and read back through the encrypting cluster's mount:
    frames of many records both ways (pulled write data, pushed reads)."""
    _c, m = ec
    data = os.urandom((3 << 20) + 12345)
    p = os.path.join(m.path, 'enc')
    with open(p, 'wb') as f:
        f.write(data)
    assert util.read_direct(p) == data
    with open(p, 'rb') as f:
        assert f.read() == data


def test_encrypt_value_checked(kc, tmp_path):
    """[net] encrypt takes on or off; anything else is refused, named."""
    conf = util.write_conf(kc, str(tmp_path / 'bad.conf'), key=kc.key,
                           extra='[net]\nencrypt = maybe\n')
    p = util.run([util.binary('iod/rpfs-iod'), '--conf', conf, '--id', '0'],
                 check=False, timeout=30)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert '[net] encrypt: expected on or off, got "maybe"' in p.stderr, p.stderr
