"""Sealed streams (common/transport/net_seal.h): after the key handshake
every byte of a keyed TCP connection travels in records tagged with a key
derived from the cluster key and both nonces. A relay that forwarded the
handshake keeps a connection it cannot use: a frame it injects, alters or
replays, either way, ends the connection before anything is served. One
keyed TCP cluster (one iod) serves every check here."""
import json
import re
import socket
import struct
import threading

import pytest

import util
import wire

HS_CLIENT = wire.HDR_LEN + 33 + wire.HDR_LEN + 32  # HELLO, then AUTH
HS_SERVER = wire.HDR_LEN + 64 + wire.HDR_LEN       # their two replies
REC_OVER = 4 + 16
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


def rpfs_stats(c, port):
    return util.run([util.binary('admin/rpfs'), 'stats', '--server', util.hostport(port),
                     '--key', c.key], check=False, timeout=60)


def logged(c, pattern, since):
    """Whether the iod logged a line matching pattern after offset since."""
    return re.search(pattern, c.iods[0].log.read_from(since), re.M) is not None


class Relay:
    """A man in the middle on a local port: forwards a client's connection
    to port, the handshake untouched; then, by mode, 'pass' forwards all,
    'tamper' flips a bit in the client's first record, 'replay' sends that
    record twice, 'tamper_reply' flips a bit in the server's first
    record."""

    def __init__(self, port, mode):
        self.port, self.mode = port, mode
        self.ls = socket.socket()
        self.ls.bind((util.HOST, 0))
        self.ls.listen(1)
        self.ls.settimeout(30)
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def lport(self):
        return self.ls.getsockname()[1]

    def pump(self, src, dst, hs, change):
        """Forward src to dst: the first hs bytes (the handshake) as they
        come, then the first record through change once it is whole, then
        the rest as it comes."""
        seen, rec, done = 0, b'', False
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if seen < hs:
                    k = min(hs - seen, len(b))
                    dst.sendall(b[:k])
                    seen, b = seen + k, b[k:]
                if done or not b:
                    if b:
                        dst.sendall(b)
                    continue
                rec += b
                if len(rec) < 4:
                    continue
                ln = struct.unpack_from('<I', rec)[0]
                if ln > wire.SEAL_MAX:  # not a record: the stream is plain
                    dst.sendall(rec)
                    done = True
                elif len(rec) >= 4 + ln + 16:
                    end = 4 + ln + 16
                    dst.sendall(change(rec[:end]) + rec[end:])
                    done = True
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
        same = lambda r: r
        flip = lambda r: r[:4] + bytes([r[4] ^ 1]) + r[5:]
        up = {'tamper': flip, 'replay': lambda r: r + r}.get(self.mode, same)
        down = flip if self.mode == 'tamper_reply' else same
        t = threading.Thread(target=self.pump, args=(ss, cs, HS_SERVER, down), daemon=True)
        t.start()
        self.pump(cs, ss, HS_CLIENT, up)
        t.join(30)
        cs.close()
        ss.close()

    def close(self):
        self.ls.close()
        self.t.join(30)


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
    r = Relay(kc.iod_ports[0], 'pass')
    try:
        p = rpfs_stats(kc, r.lport())
    finally:
        r.close()
    assert p.returncode == 0, p.stderr
    assert 'msgs_rx' in json.loads(p.stdout)


@pytest.mark.expect_log(SERVER_BAD)
@pytest.mark.parametrize('mode', ['tamper', 'replay'])
def test_relay_altering_requests_refused(kc, mode):
    """A bit flipped in the client's first record, or that record sent
    twice: the iod finds the record is not the key holder's and closes."""
    since = kc.iods[0].log.size()
    r = Relay(kc.iod_ports[0], mode)
    try:
        p = rpfs_stats(kc, r.lport())
    finally:
        r.close()
    if mode == 'tamper':
        assert p.returncode != 0, p.stdout
    util.wait_until(lambda: logged(kc, SERVER_BAD, since), 10, what='the refusal logged')


def test_relay_altering_replies_refused(kc):
    """A bit flipped in the iod's first record: the client refuses the
    reply, says why, and the command fails."""
    r = Relay(kc.iod_ports[0], 'tamper_reply')
    try:
        p = rpfs_stats(kc, r.lport())
    finally:
        r.close()
    assert p.returncode != 0, p.stdout
    assert CLIENT_BAD in p.stderr, p.stderr

