"""The TCP wire framing as raw peers speak it (layout in common/proto/proto.h),
for the tests that send hand-made frames to the daemons: test_faults.py
(malformed messages), test_stall.py (stalled and flooding peers) and
test_keys.py (what each key may ask)."""
import hashlib
import hmac
import os
import struct

MAGIC = 0x53465052
OP_NET_HELLO = 1
OP_NET_AUTH = 3
OP_LOOKUP = 11
OP_IO_READ = 40
OP_IO_WRITE = 41
OP_IO_STATFS = 45
F_REPLY = 0x1
F_CTRL = 0x4
KEY_CLIENTS = 1  # the key classes of common/transport/net_auth.h
KEY_SERVERS = 2
MAX_BODY = 128 * 1024
HDR_LEN = 48


def hdr(op, body_len, tag=1, flags=0, bulk_len=0, aux=0, magic=MAGIC,
        version=1, reserved=0):
    """A 48-byte frame header."""
    return struct.pack('<IHHQiHHIIQQ', magic, version, op, tag, 0, 0, flags,
                       body_len, reserved, bulk_len, aux)


def handshake(s):
    """The transport handshake on socket s: NET_HELLO with the control
    flag; the server answers with one 48-byte CTRL|REPLY header."""
    s.sendall(hdr(OP_NET_HELLO, 0, tag=0, flags=F_CTRL))
    got = b''
    while len(got) < HDR_LEN:
        b = s.recv(HDR_LEN - len(got))
        assert b, 'server closed during the handshake'
        got += b
    magic, _v, op = struct.unpack_from('<IHH', got)
    assert magic == MAGIC and op == OP_NET_HELLO, got


def recv_exact(s, n):
    """n bytes from socket s; fails the test if the peer closes first."""
    got = b''
    while len(got) < n:
        b = s.recv(n - len(got))
        assert b, 'peer closed after %d of %d bytes' % (len(got), n)
        got += b
    return got


def recv_frame(s):
    """One frame: (op, status, flags, body)."""
    h = recv_exact(s, HDR_LEN)
    magic, _v, op, _tag, status, _cr, flags, blen = struct.unpack_from('<IHHQiHHI', h)
    assert magic == MAGIC, h
    return op, status, flags, recv_exact(s, blen) if blen else b''


def read_key(path):
    """The 32 bytes of a key file (64 hex digits)."""
    with open(path) as f:
        return bytes.fromhex(f.read().strip())


def auth_mac(key, role, cn, sn):
    """HMAC-SHA256 over "rpfs-auth-v1" || role || cn || sn (net_auth.h)."""
    return hmac.new(key, b'rpfs-auth-v1' + role + cn + sn, hashlib.sha256).digest()


def keyed_handshake(s, key, cls=KEY_CLIENTS, nonces=None):
    """The handshake with a key of class cls: HELLO with our nonce and the
    class, check the server's proof, send ours. Returns the status of the
    server's answer to our proof (0 = in); appends (cn, sn) to nonces when
    given. After it, the stream is sealed both ways (Sealed)."""
    cn = os.urandom(32)
    s.sendall(hdr(OP_NET_HELLO, 33, tag=0, flags=F_CTRL) + cn + bytes([cls]))
    op, status, _f, body = recv_frame(s)
    assert op == OP_NET_HELLO and status == 0 and len(body) == 64, (op, status, body)
    sn, mac = body[:32], body[32:]
    assert hmac.compare_digest(mac, auth_mac(key, b'S', cn, sn)), 'server proof'
    s.sendall(hdr(OP_NET_AUTH, 32, tag=0, flags=F_CTRL) + auth_mac(key, b'C', cn, sn))
    op, status, _f, _b = recv_frame(s)
    assert op == OP_NET_AUTH, op
    if nonces is not None:
        nonces.append((cn, sn))
    return status


SEAL_MAX = 8192  # common/transport/net_seal.h


def seal_key(key, role, cn, sn, mode=0):
    """One direction's key: BLAKE2b-256 keyed with the cluster key over
    "rpfs-seal-v1" || role || mode || cn || sn (net_seal.h; mode 0 is
    NET_SEAL_MAC, the only one spoken here: the records of NET_SEAL_AEAD
    would need ChaCha20 over every byte, too slow in Python)."""
    return hashlib.blake2b(b'rpfs-seal-v1' + role + bytes([mode]) + cn + sn, key=key,
                           digest_size=32).digest()


def _rotl32(v, n):
    return ((v << n) & 0xffffffff) | (v >> (32 - n))


def chacha20_block(key, counter, nonce):
    """The 64-byte ChaCha20 block (RFC 8439 section 2.3) of a 32-byte key,
    a 32-bit block counter and a 12-byte nonce."""
    st = [0x61707865, 0x3320646e, 0x79622d32, 0x6b206574] + \
        list(struct.unpack('<8I', key)) + [counter] + list(struct.unpack('<3I', nonce))
    x = list(st)

    def qr(a, b, c, d):
        x[a] = (x[a] + x[b]) & 0xffffffff
        x[d] = _rotl32(x[d] ^ x[a], 16)
        x[c] = (x[c] + x[d]) & 0xffffffff
        x[b] = _rotl32(x[b] ^ x[c], 12)
        x[a] = (x[a] + x[b]) & 0xffffffff
        x[d] = _rotl32(x[d] ^ x[a], 8)
        x[c] = (x[c] + x[d]) & 0xffffffff
        x[b] = _rotl32(x[b] ^ x[c], 7)
    for _ in range(10):
        qr(0, 4, 8, 12), qr(1, 5, 9, 13), qr(2, 6, 10, 14), qr(3, 7, 11, 15)
        qr(0, 5, 10, 15), qr(1, 6, 11, 12), qr(2, 7, 8, 13), qr(3, 4, 9, 14)
    return struct.pack('<16I', *((a + b) & 0xffffffff for a, b in zip(x, st)))


def poly1305(otk, msg):
    """The 16-byte Poly1305 tag (RFC 8439 section 2.5) of msg under the
    32-byte one-time key otk."""
    r = int.from_bytes(otk[:16], 'little') & 0x0ffffffc0ffffffc0ffffffc0fffffff
    s = int.from_bytes(otk[16:], 'little')
    p, acc = (1 << 130) - 5, 0
    for i in range(0, len(msg), 16):
        block = msg[i:i + 16] + b'\x01'
        acc = (acc + int.from_bytes(block, 'little')) * r % p
    return ((acc + s) & ((1 << 128) - 1)).to_bytes(16, 'little')


def seal_record(k, seq, payload):
    """One sealed record in NET_SEAL_MAC mode: u32 length, payload, and
    the Poly1305 tag of length || payload whose one-time key is the first
    32 bytes of the ChaCha20 block of k, counter 0, nonce 0^4 || seq."""
    ln = struct.pack('<I', len(payload))
    otk = chacha20_block(k, 0, b'\0' * 4 + struct.pack('<Q', seq))[:32]
    return ln + payload + poly1305(otk, ln + payload)


class Sealed:
    """A keyed connection after AUTH, as the C client speaks it: sendall
    and recv take and give plain bytes, the socket carries records."""

    def __init__(self, s, key, cn, sn):
        self.s = s
        self.tx, self.rx = seal_key(key, b'C', cn, sn), seal_key(key, b'S', cn, sn)
        self.tx_seq = self.rx_seq = 0
        self.raw = self.plain = b''

    def sendall(self, data):
        out = b''
        for i in range(0, len(data), SEAL_MAX):
            out += seal_record(self.tx, self.tx_seq, data[i:i + SEAL_MAX])
            self.tx_seq += 1
        self.s.sendall(out)

    def recv(self, n):
        """Up to n opened bytes; b'' once the peer closed. A record whose
        tag is wrong fails the test."""
        while not self.plain:
            while len(self.raw) < 4 or \
                    len(self.raw) < 4 + struct.unpack_from('<I', self.raw)[0] + 16:
                b = self.s.recv(65536)
                if not b:
                    return b''
                self.raw += b
            ln = struct.unpack_from('<I', self.raw)[0]
            rec, self.raw = self.raw[:4 + ln + 16], self.raw[4 + ln + 16:]
            assert rec == seal_record(self.rx, self.rx_seq, rec[4:4 + ln]), \
                'a record from the server failed its tag'
            self.rx_seq += 1
            self.plain = rec[4:4 + ln]
        out, self.plain = self.plain[:n], self.plain[n:]
        return out

    def close(self):
        self.s.close()


def sealed(s, key, cls=KEY_CLIENTS):
    """Handshake on socket s with key of class cls; the sealed stream."""
    nonces = []
    assert keyed_handshake(s, key, cls, nonces) == 0
    return Sealed(s, key, *nonces[0])


def request(s, op, body=b'', tag=7):
    """Send one request and return its reply's (status, body)."""
    s.sendall(hdr(op, len(body), tag=tag) + body)
    rop, status, flags, rbody = recv_frame(s)
    assert rop == op and flags & F_REPLY, (rop, flags)
    return status, rbody
