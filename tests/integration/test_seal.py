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


def aead(key, nonce, aad, plain):
    """ChaCha20-Poly1305 (RFC 8439 section 2.8) of plain under key and the
    12-byte nonce, with additional data aad: (ciphertext, tag). Built on
    wire.py's ChaCha20 block and Poly1305, apart from libsodium."""
    ct = bytearray()
    for i in range(0, len(plain), 64):
        ks = wire.chacha20_block(key, 1 + i // 64, nonce)
        ct += bytes(a ^ b for a, b in zip(plain[i:i + 64], ks))
    otk = wire.chacha20_block(key, 0, nonce)[:32]
    pad = lambda b: b'\0' * (-len(b) % 16)
    mac = bytes(aad) + pad(aad) + bytes(ct) + pad(ct) + struct.pack('<QQ', len(aad), len(ct))
    return bytes(ct), wire.poly1305(otk, mac)


def aead_record(k, seq, payload):
    """One sealed record in NET_SEAL_AEAD mode (net_seal.h): u32 length,
    the payload encrypted, the tag; nonce 0^4 || seq, the length bytes as
    additional data."""
    ln = struct.pack('<I', len(payload))
    ct, tag = aead(k, b'\0' * 4 + struct.pack('<Q', seq), ln, payload)
    return ln + ct + tag


class Encrypted(wire.Sealed):
    """wire.Sealed in NET_SEAL_AEAD mode: the stream keys bound to mode 1,
    records encrypted; a record of the server's whose tag or ciphertext is
    not what this peer computes fails the test."""

    def __init__(self, s, key, cn, sn):
        super().__init__(s, key, cn, sn)
        self.tx = wire.seal_key(key, b'C', cn, sn, 1)
        self.rx = wire.seal_key(key, b'S', cn, sn, 1)

    def sendall(self, data):
        out = b''
        for i in range(0, len(data), wire.SEAL_MAX):
            out += aead_record(self.tx, self.tx_seq, data[i:i + wire.SEAL_MAX])
            self.tx_seq += 1
        self.s.sendall(out)

    def recv(self, n):
        """Up to n decrypted bytes; b'' once the peer closed."""
        while not self.plain:
            while len(self.raw) < 4 or \
                    len(self.raw) < 4 + struct.unpack_from('<I', self.raw)[0] + 16:
                b = self.s.recv(65536)
                if not b:
                    return b''
                self.raw += b
            ln = struct.unpack_from('<I', self.raw)[0]
            rec, self.raw = self.raw[:4 + ln + 16], self.raw[4 + ln + 16:]
            nonce = b'\0' * 4 + struct.pack('<Q', self.rx_seq)
            # the keystream is its own inverse: encrypting the ciphertext
            # gives the plain bytes, and the tag is over the ciphertext
            plain, _t = aead(self.rx, nonce, rec[:4], rec[4:4 + ln])
            assert aead_record(self.rx, self.rx_seq, plain) == rec, \
                'a record from the server failed its tag'
            self.rx_seq += 1
            self.plain = plain
        out, self.plain = self.plain[:n], self.plain[n:]
        return out


def mode_handshake(s, key, flags):
    """The keyed handshake with a HELLO flags byte (net_auth.h: 1 asks to
    encrypt): check the server's proof, send ours. Returns (cn, sn, mode),
    mode being the byte the server's HELLO reply ends in (NET_SEAL_MAC when
    it sends none)."""
    cn = os.urandom(32)
    s.sendall(wire.hdr(wire.OP_NET_HELLO, 34, tag=0, flags=wire.F_CTRL) + cn +
              bytes([wire.KEY_CLIENTS, flags]))
    op, status, _f, body = wire.recv_frame(s)
    assert op == wire.OP_NET_HELLO and status == 0 and len(body) in (64, 65), \
        (op, status, body)
    sn, mac = body[:32], body[32:64]
    assert mac == wire.auth_mac(key, b'S', cn, sn), 'server proof'
    s.sendall(wire.hdr(wire.OP_NET_AUTH, 32, tag=0, flags=wire.F_CTRL) +
              wire.auth_mac(key, b'C', cn, sn))
    op, status, _f, _b = wire.recv_frame(s)
    assert op == wire.OP_NET_AUTH and status == 0, (op, status)
    return cn, sn, body[64] if len(body) == 65 else 0


def test_peer_primitives_match_rfc8439():
    """The test peer's own ChaCha20 block and Poly1305 (wire.py) and its
    AEAD (aead, here), which every sealed exchange here checks the C side
    against, give RFC 8439's test vectors (sections 2.3.2, 2.5.2, 2.8.2)."""
    block = wire.chacha20_block(bytes(range(32)), 1,
                                bytes.fromhex('000000090000004a00000000'))
    assert block.hex() == (
        '10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e'
        'd2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e')
    otk = bytes.fromhex('85d6be7857556d337f4452fe42d506a8'
                        '0103808afb0db2fd4abff6af4149f51b')
    assert wire.poly1305(otk, b'Cryptographic Forum Research Group').hex() == \
        'a8061dc1305136c6c22b8baf0c0127a9'
    ct, tag = aead(bytes(range(0x80, 0xa0)), bytes.fromhex('070000004041424344454647'),
                   bytes.fromhex('50515253c0c1c2c3c4c5c6c7'),
                   b"Ladies and Gentlemen of the class of '99: If I could offer you "
                   b"only one tip for the future, sunscreen would be it.")
    assert ct.hex() == (
        'd31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d6'
        '3dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b36'
        '92ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc'
        '3ff4def08e4b7a9de576d26586cec64b6116')
    assert tag.hex() == '1ae10b594f09e26a7e902ecbd0600691'


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


@pytest.mark.parametrize('which', ['server', 'client'])
def test_encrypted_requests_served(kc, ec, which):
    """A peer that encrypts as net_seal.h says (Encrypted: its AEAD written
    apart from libsodium, keys bound to mode 1) is served, and each of the
    server's records decrypts and checks out (one per reply, so the nonce
    counts): with a server that encrypts ([net] encrypt = on) for a peer
    that did not ask, and with one that does not for a peer that asks
    (the HELLO flag). Both ends of libsodium agreeing on another nonce,
    other additional data or another key would pass every other test."""
    c, flags = (ec[0], 0) if which == 'server' else (kc, 1)
    key = wire.read_key(c.key)
    sock = socket.create_connection((util.HOST, c.iod_ports[0]), timeout=20)
    try:
        cn, sn, mode = mode_handshake(sock, key, flags)
        assert mode == 1, 'the server chose seal mode %d' % mode
        s = Encrypted(sock, key, cn, sn)
        for tag in range(1, 4):
            status, _b = wire.request(s, wire.OP_IO_STATFS, tag=tag)
            assert status == 0
        assert s.rx_seq == 3
    finally:
        sock.close()


def test_client_refuses_server_not_encrypting(kc, tmp_path):
    """A client whose config says [net] encrypt = on, through a relay that
    drops the mode byte from the server's HELLO reply (the reply of a
    server that would not encrypt): the client refuses the server, says
    why, and sends nothing after its HELLO (no proof, no record)."""
    conf = util.write_conf(kc, str(tmp_path / 'enc.conf'), key=kc.key,
                           transport='tcp', extra='[net]\nencrypt = on\n')
    p, r = relayed_stats(kc, kc.iod_ports[0], 'strip', conf=conf)
    assert p.returncode != 0, p.stdout
    assert 'the server did not agree to encrypt ([net] encrypt); refusing it' in p.stderr, \
        p.stderr
    assert len(r.got['up']) == wire.HDR_LEN + 34, bytes(r.got['up'])


@pytest.mark.expect_log(SERVER_BAD)
def test_downgrade_refused(ec):
    """A relay that drops the mode byte from the server's HELLO reply (so
    the client seals with a MAC only) gets the connection closed at the
    client's first record, which the encrypting server cannot open. (That
    the mode is also bound into the stream keys is pinned by test_seal.c's
    known answers: here the records' formats already differ.)"""
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
    """[net] encrypt takes on or off (off: a client that does not ask,
    its replies in plain sight through a relay); anything else is
    refused, named."""
    conf = util.write_conf(kc, str(tmp_path / 'off.conf'), key=kc.key,
                           transport='tcp', extra='[net]\nencrypt = off\n')
    p, r = relayed_stats(kc, kc.iod_ports[0], conf=conf)
    assert p.returncode == 0 and 'msgs_rx' in json.loads(p.stdout), p.stderr
    assert b'msgs_rx' in r.got['down']
    conf = util.write_conf(kc, str(tmp_path / 'bad.conf'), key=kc.key,
                           extra='[net]\nencrypt = maybe\n')
    p = util.run([util.binary('iod/rpfs-iod'), '--conf', conf, '--id', '0'],
                 check=False, timeout=30)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert '[net] encrypt: expected on or off, got "maybe"' in p.stderr, p.stderr
