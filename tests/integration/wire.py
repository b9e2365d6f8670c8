"""The TCP wire framing as raw peers speak it (layout in common/proto.h),
for the tests that send hand-made frames to the daemons: test_faults.py
(malformed messages) and test_stall.py (stalled and flooding peers)."""
import struct

MAGIC = 0x53465052
OP_NET_HELLO = 1
OP_LOOKUP = 11
OP_IO_READ = 40
OP_IO_WRITE = 41
OP_IO_STATFS = 45
F_CTRL = 0x4
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
