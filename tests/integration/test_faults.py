"""Faults: an iod dying or hanging mid-read, and malformed messages."""
import errno
import hashlib
import mmap
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

import util

MAGIC = 0x53465052
OP_NET_HELLO = 1
OP_LOOKUP = 11
OP_IO_READ = 40
OP_IO_WRITE = 41
MAX_BODY = 128 * 1024

# Reads a file over and over, around the page cache, and reports on stdout:
# "ok N" after each pass, "err ERRNO T" (T = CLOCK_MONOTONIC) on the first error.
READER = r'''
import mmap, os, sys, time
path = sys.argv[1]
buf = mmap.mmap(-1, 1 << 20)
n = 0
while True:
    try:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        except OSError:
            fd = os.open(path, os.O_RDONLY)
        try:
            off = 0
            while True:
                r = os.preadv(fd, [buf], off)
                if r <= 0:
                    break
                off += r
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    except OSError as e:
        print('err %d %f' % (e.errno, time.monotonic()), flush=True)
        sys.exit(0)
    n += 1
    print('ok %d' % n, flush=True)
'''


def make_file(path, size):
    h = hashlib.sha256()
    with open(path, 'wb') as f:
        left = size
        while left:
            b = os.urandom(min(left, 1 << 20))
            h.update(b)
            f.write(b)
            left -= len(b)
    return h.hexdigest()


def read_sha(path):
    return util.sha256_file(path)


class Reader:
    """The READER script in a subprocess, its stdout lines collected by a thread."""

    def __init__(self, path):
        self.p = subprocess.Popen([sys.executable, '-c', READER, path], stdout=subprocess.PIPE,
                                  text=True)
        util.register_pid(self.p.pid)
        self.lines = []
        self.t = threading.Thread(target=self._pump, daemon=True)
        self.t.start()

    def _pump(self):
        for line in self.p.stdout:
            self.lines.append(line.strip())

    def wait_for(self, prefix, timeout):
        def got():
            for l in list(self.lines):
                if l.startswith(prefix):
                    return l
            if self.p.poll() is not None and not self.t.is_alive():
                raise AssertionError('reader exited %s: %s' % (self.p.returncode, self.lines[-5:]))
            return None
        return util.wait_until(got, timeout, 0.02, 'reader line %r' % prefix)

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=60)
        self.t.join(10)


def _iod_fault(dcluster, tmp_mnt, sig):
    m = dcluster.mount(tmp_mnt, 'allow_other,timeout=3')
    f = os.path.join(m.path, 'f')
    want = make_file(f, 32 << 20)
    reader = Reader(f)
    try:
        reader.wait_for('ok', 120)
        t0 = time.monotonic()
        dcluster.kill_iod(1, sig)
        line = reader.wait_for('err', 60)
        _, e, t = line.split()
        assert int(e) == errno.EIO, 'got %s, want EIO' % util.errno_name(int(e))
        assert float(t) - t0 < 15, 'EIO after %.1f s (timeout=3)' % (float(t) - t0)
    finally:
        reader.close()
        if sig == signal.SIGSTOP:
            dcluster.iods[1].proc.send_signal(signal.SIGCONT)
    if sig != signal.SIGSTOP:
        dcluster.start_iod(1)

    # the mount works again once the iod is back (reconnect on next request)
    def healthy():
        try:
            return read_sha(f) == want
        except OSError:
            return False
    util.wait_until(healthy, 60, 0.5, 'reads to work again after the iod is back')
    g = os.path.join(m.path, 'g')
    want_g = make_file(g, 5 << 20)
    assert read_sha(g) == want_g
    util.cleanup(m)


# The client may complain about the lost iod, the mgr about its statfs poll.
@pytest.mark.expect_log(r'^<[34]>rpfs-(fuse|mgr)')
def test_iod_killed_mid_read_eio(dcluster, tmp_mnt):
    _iod_fault(dcluster, tmp_mnt, signal.SIGKILL)


# A hung iod: the client times out. Once it runs again it finds the client
# gone mid-request, which it may log as a warning.
@pytest.mark.expect_log(r'^<[34]>rpfs-(fuse|mgr)', r'^<4>rpfs-iod')
def test_iod_hung_mid_read_eio(dcluster, tmp_mnt):
    _iod_fault(dcluster, tmp_mnt, signal.SIGSTOP)


# ---------------------------------------------------------------- malformed

def hdr(op, body_len, tag=1, flags=0, bulk_len=0, aux=0, magic=MAGIC, version=1, reserved=0):
    """A 48-byte frame header (layout in common/proto.h)."""
    return struct.pack('<IHHQiHHIIQQ', magic, version, op, tag, 0, 0, flags, body_len,
                       reserved, bulk_len, aux)


def lstr(b):
    return struct.pack('<H', len(b)) + b


CRED_ROOT = struct.pack('<IIH', 0, 0, 0)


def expect_closed(s, timeout=10):
    """The server closes the connection: recv returns b'' (or a reset)
    within timeout. Anything it sends first is read and ignored."""
    s.settimeout(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if s.recv(65536) == b'':
                return
        except (ConnectionResetError, BrokenPipeError):
            return
        except socket.timeout:
            break
    raise AssertionError('server kept the connection open')


F_CTRL = 0x4


def handshake(s):
    """The transport handshake: NET_HELLO with the control flag; the server
    answers with a 48-byte CTRL|REPLY header."""
    s.sendall(hdr(OP_NET_HELLO, 0, tag=0, flags=F_CTRL))
    got = b''
    while len(got) < 48:
        b = s.recv(48 - len(got))
        assert b, 'server closed during the handshake'
        got += b
    magic, _v, op = struct.unpack_from('<IHH', got)
    assert magic == MAGIC and op == OP_NET_HELLO, got


def send_case(port, data, shut=False, hello=True):
    """Connect, handshake (if hello), send data, (half-close if shut) and
    expect the server to close the connection."""
    s = socket.create_connection((util.HOST, port), timeout=10)
    try:
        if hello:
            handshake(s)
        try:
            s.sendall(data)
            if shut:
                s.shutdown(socket.SHUT_WR)
        except (ConnectionResetError, BrokenPipeError):
            return
        expect_closed(s)
    finally:
        s.close()


def common_cases():
    return {
        'garbage': b'GARBAGE!' + os.urandom(200),
        'bad magic': hdr(OP_LOOKUP, 0, magic=0x12345678),
        'bad version': hdr(OP_LOOKUP, 0, version=77),
        'reserved set': hdr(OP_LOOKUP, 0, reserved=5),
        'unknown flags': hdr(OP_LOOKUP, 0, flags=0x80),
        'body too long': hdr(OP_LOOKUP, MAX_BODY + 1),
        'huge body': hdr(OP_LOOKUP, 0xffffffff) + b'x' * 1000,
        'huge bulk': hdr(OP_IO_WRITE, 0, bulk_len=1 << 40),
        'second hello': hdr(OP_NET_HELLO, 0, flags=F_CTRL),
        'hello without ctrl flag': hdr(OP_NET_HELLO, 0),
        'reply flag on request': hdr(OP_LOOKUP, 0, flags=0x1),
    }


def mgr_cases():
    body_slash = CRED_ROOT + struct.pack('<Q', 1) + lstr(b'a/b')
    body_past = CRED_ROOT + struct.pack('<Q', 1) + struct.pack('<H', 200) + b'abc'
    body_trailing = CRED_ROOT + struct.pack('<Q', 1) + lstr(b'ok') + b'trailing junk'
    body_groups = struct.pack('<IIH', 0, 0, 5000) + struct.pack('<Q', 1) + lstr(b'x')
    c = common_cases()
    c.update({
        'name with slash': hdr(OP_LOOKUP, len(body_slash)) + body_slash,
        'length past end': hdr(OP_LOOKUP, len(body_past)) + body_past,
        'trailing bytes': hdr(OP_LOOKUP, len(body_trailing)) + body_trailing,
        'too many groups': hdr(OP_LOOKUP, len(body_groups)) + body_groups,
        'empty body': hdr(OP_LOOKUP, 0),
    })
    return c


def iod_cases():
    # ino, nsegs, segs: claims 1000 segments, carries one
    past = struct.pack('<QI', 5, 1000) + struct.pack('<QQ', 0, 4096)
    # segment lengths (8192) do not add up to the read memory offered (4096)
    mismatch = struct.pack('<QI', 5, 1) + struct.pack('<QQ', 0, 8192)
    nosegs = struct.pack('<QI', 5, 0)
    overflow = struct.pack('<QI', 5, 1) + struct.pack('<QQ', (1 << 64) - 10, 4096)
    c = common_cases()
    c.update({
        'segs past end': hdr(OP_IO_READ, len(past), aux=4096) + past,
        'seg sum mismatch': hdr(OP_IO_READ, len(mismatch), aux=4096) + mismatch,
        'zero segs': hdr(OP_IO_READ, len(nosegs), aux=4096) + nosegs,
        'offset overflow': hdr(OP_IO_READ, len(overflow), aux=4096) + overflow,
        'write seg sum mismatch': hdr(OP_IO_WRITE, len(mismatch), bulk_len=4096) + mismatch + b'x' * 100,
    })
    return c


def check_unknown_op(port):
    """An op the server does not know (after a good handshake) is either
    rejected (connection closed) or answered with -EOPNOTSUPP; either way
    the server stays up."""
    s = socket.create_connection((util.HOST, port), timeout=10)
    try:
        handshake(s)
        s.sendall(hdr(999, 4, tag=77) + b'abcd')
        s.settimeout(10)
        got = b''
        try:
            while len(got) < 48:
                b = s.recv(48 - len(got))
                if not b:
                    return  # closed: rejected
                got += b
        except (ConnectionResetError, BrokenPipeError):
            return
        _m, _v, _op, tag, status, _c, flags = struct.unpack_from('<IHHQiHH', got)
        assert flags & 0x1 and tag == 77 and status == -errno.EOPNOTSUPP, \
            (tag, status, flags)
    finally:
        s.close()


def check_mount_works(m, name):
    f = os.path.join(m.path, name)
    data = os.urandom(700000)
    with open(f, 'wb') as fh:
        fh.write(data)
    with open(f, 'rb') as fh:
        assert fh.read() == data
    assert name in os.listdir(m.path)


@pytest.mark.expect_log(r'^<4>rpfs-(mgr|iod)')
@pytest.mark.parametrize('target', ['mgr', 'iod'])
def test_malformed_messages_rejected(tcp_dcluster, tmp_mnt, target):
    m = tcp_dcluster.mount(tmp_mnt, 'allow_other,timeout=10')
    check_mount_works(m, 'before')
    if target == 'mgr':
        ports, cases = [tcp_dcluster.mgr_port], mgr_cases()
    else:
        ports, cases = tcp_dcluster.iod_ports, iod_cases()
    for port in ports:
        for name, data in cases.items():
            try:
                send_case(port, data)
                # the same before the handshake
                if name != 'second hello':
                    send_case(port, data, hello=False)
                # a truncated frame, then close
                send_case(port, data[:20], shut=True)
            except AssertionError as e:
                raise AssertionError('%s port %d, case %r: %s' % (target, port, name, e))
        check_unknown_op(port)
        # nothing at all, then close
        socket.create_connection((util.HOST, port), timeout=5).close()
    for d in tcp_dcluster.daemons():
        assert d.running(), '%s died' % d.name
    check_mount_works(m, 'after')
    util.cleanup(m)


@pytest.mark.expect_log(r'^<4>rpfs-(mgr|iod)')
def test_many_bad_connections_at_once(tcp_dcluster, tmp_mnt):
    """A burst of half-open and garbage connections does not starve the mount."""
    m = tcp_dcluster.mount(tmp_mnt, 'allow_other,timeout=10')
    socks = []
    try:
        for port in [tcp_dcluster.mgr_port] + tcp_dcluster.iod_ports:
            for i in range(20):
                s = socket.create_connection((util.HOST, port), timeout=5)
                s.sendall(hdr(OP_LOOKUP, 100)[:30 if i % 2 else 48])  # stalls mid-frame
                socks.append(s)
        check_mount_works(m, 'during')
    finally:
        for s in socks:
            s.close()
    check_mount_works(m, 'after')
    util.cleanup(m)


# ------------------------------------------------------------ write-behind

def _stopped(proc):
    """Whether proc is stopped (SIGSTOP): state T in /proc/PID/stat."""
    with open('/proc/%d/stat' % proc.pid) as f:
        return f.read().rsplit(')', 1)[1].split()[0] == 'T'


# The stopped iod makes the client time out (a warning) and, once running
# again, may find the client gone mid-request.
def _wb_setup(cluster, tmp_mnt, tmp_path):
    """Mount cluster (timeout 3 s, one lane: warm sockets only), write a
    file; return it, the iod holding its first stripe unit, and a function
    that stops that iod."""
    conf = tmp_path / 'one-lane.conf'
    conf.write_text('[client]\nconnections = 1\n')
    m = cluster.mount(tmp_mnt, 'allow_other,timeout=3,conf=%s' % conf)
    f = os.path.join(m.path, 'wb')
    with open(f, 'wb') as fh:
        fh.write(b'w' * 8192)
    layout = dict(kv.split('=') for kv in
                  os.getxattr(f, 'user.rpfs.layout').decode().split(','))
    iod = cluster.iods[int(layout['first'])]  # holds bytes 0..unit-1

    def stop():
        iod.proc.send_signal(signal.SIGSTOP)
        util.wait_until(lambda: _stopped(iod.proc), 10, what='iod stopped')
    return m, f, iod, stop


@pytest.mark.expect_log(r'^<[34]>rpfs-(fuse|mgr)', r'^<4>rpfs-iod')
def test_write_behind(tcp_dcluster, tmp_mnt, tmp_path):
    """Write-behind (tcp), with the iod that stores the written range
    stopped: an O_DIRECT write waits for it (EIO at the timeout); a buffered
    write is answered while the iod is still stopped, close waits for it and
    the data is there; a buffered write the iod never answers is answered
    too, and its failure is close's error."""
    m, f, iod, stop = _wb_setup(tcp_dcluster, tmp_mnt, tmp_path)
    try:
        _write_behind_checks(f, iod, stop)
    finally:
        iod.proc.send_signal(signal.SIGCONT)
    util.cleanup(m)


@pytest.mark.verbs
@pytest.mark.expect_log(r'^<[34]>rpfs-(fuse|mgr)', r'^<4>rpfs-iod')
def test_no_write_behind_over_verbs(dcluster, tmp_mnt, tmp_path):
    """Over verbs writes stay synchronous (the iod fetches the data after
    the request is sent): a buffered write to a stopped iod fails itself."""
    m, f, iod, stop = _wb_setup(dcluster, tmp_mnt, tmp_path)
    try:
        stop()
        _pwrite_fails_eio(f, os.O_WRONLY, b'v' * 4096)
    finally:
        iod.proc.send_signal(signal.SIGCONT)
    util.cleanup(m)


def _pwrite_fails_eio(f, flags, data):
    """Open f with flags; a write of data at 0 must itself fail with EIO
    (close may fail too: its error is not this check's)."""
    fd = os.open(f, flags)
    try:
        with pytest.raises(OSError) as ei:
            os.pwrite(fd, data, 0)
        assert ei.value.errno == errno.EIO, util.errno_name(ei.value.errno)
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def _write_behind_checks(f, iod, stop):
    """The three cases of test_write_behind."""
    def cont_and_heal():
        iod.proc.send_signal(signal.SIGCONT)

        def ok():
            try:
                with open(f, 'rb') as fh:
                    return len(fh.read()) >= 4096
            except OSError:
                return False
        util.wait_until(ok, 60, 0.5, 'the iod to serve again')

    # O_DIRECT: synchronous, so the stopped iod fails the write itself
    stop()
    buf = mmap.mmap(-1, 4096)
    buf.write(b'd' * 4096)
    _pwrite_fails_eio(f, os.O_WRONLY | os.O_DIRECT, buf)
    cont_and_heal()

    # buffered: answered while the iod is stopped; close waits for it
    stop()
    fd = os.open(f, os.O_WRONLY)
    assert os.pwrite(fd, b'b' * 4096, 0) == 4096
    assert _stopped(iod.proc)  # answered before the iod could store it
    iod.proc.send_signal(signal.SIGCONT)
    os.close(fd)
    with open(f, 'rb') as fh:
        assert fh.read(4096) == b'b' * 4096

    # buffered, the iod never answers in time: close reports the failure
    stop()
    fd = os.open(f, os.O_WRONLY)
    assert os.pwrite(fd, b'x' * 4096, 0) == 4096
    with pytest.raises(OSError) as ei:
        os.close(fd)
    assert ei.value.errno == errno.EIO, util.errno_name(ei.value.errno)
    cont_and_heal()
