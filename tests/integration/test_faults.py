"""Faults: an iod dying or hanging mid-read, and malformed messages."""
import errno
import mmap
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

import util
from wire import (F_CTRL, MAX_BODY, OP_IO_READ, OP_IO_WRITE, OP_LOOKUP,
                  OP_NET_HELLO, hdr, handshake)

# Reads a file over and over, around the page cache, and compares every
# piece a read returns with the file's bytes (random.Random(SEED).randbytes
# (SIZE), as make_file wrote them). Reports on stdout: "ok N" after each
# whole pass, "bad OFF LEN" on a wrong piece or "short OFF" on a pass that
# ends early (and exits), "err ERRNO T" (T = CLOCK_MONOTONIC) on the first
# read error (and exits).
READER = r'''
import mmap, os, random, sys, time
path, seed, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
want = random.Random(seed).randbytes(size)
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
                if buf[:r] != want[off:off + r]:
                    print('bad %d %d' % (off, r), flush=True)
                    sys.exit(0)
                off += r
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    except OSError as e:
        print('err %d %f' % (e.errno, time.monotonic()), flush=True)
        sys.exit(0)
    if off != size:
        print('short %d' % off, flush=True)
        sys.exit(0)
    n += 1
    print('ok %d' % n, flush=True)
'''


def make_file(path, size, seed):
    """Write size bytes of random.Random(seed) to path; return them."""
    data = random.Random(seed).randbytes(size)
    with open(path, 'wb') as f:
        for off in range(0, size, 1 << 20):
            f.write(data[off:off + (1 << 20)])
    return data


class Reader:
    """The READER script in a subprocess, its stdout lines collected by a thread."""

    def __init__(self, path, seed, size):
        self.p = subprocess.Popen([sys.executable, '-c', READER, path, str(seed), str(size)],
                                  stdout=subprocess.PIPE, text=True)
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
                if l.startswith(('bad ', 'short ')):
                    raise AssertionError('reader: %s (a read returned wrong data)' % l)
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


def iod_fault_logs(c, i, killed, op='read'):
    """The exact warnings an iod i of cluster c killed (killed) or hung
    (SIGSTOP) under a mount's `op` causes: the client's one warning per
    failure burst, and the mgr's statfs poll noting the iod went down (if
    a poll falls in the outage). Nothing else: the iod logs no warning
    over a client that went away."""
    err = util.GONE_ERRS if killed else 'Connection timed out'
    return [util.client_iod_fail_log(c, i, op, err), util.mgr_iod_down_log(c, i, err)]


def _iod_fault(dcluster, tmp_mnt, sig, expect_log, before_fault=None):
    """Kill (SIGKILL) or hang (SIGSTOP) iod 1 under a reader of a 32 MiB
    file that checks every byte it reads: the reader gets EIO within the
    timeout; once the iod is back reads work again, and every read that
    returns data returns the right data. before_fault(mount), if given, is
    called once the reader read the file whole, before the fault."""
    for r in iod_fault_logs(dcluster, 1, sig == signal.SIGKILL):
        expect_log(r)
    m = dcluster.mount(tmp_mnt, 'allow_other,timeout=3')
    f = os.path.join(m.path, 'f')
    want = make_file(f, 32 << 20, 20)
    reader = Reader(f, 20, len(want))
    try:
        reader.wait_for('ok', 120)
        if before_fault:
            before_fault(m)
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

    # the mount works again once the iod is back (reconnect on next
    # request): EIO until then, and no read may return wrong bytes
    util.wait_reads_again(f, want, 60)
    g = os.path.join(m.path, 'g')
    util.read_checked(g, make_file(g, 5 << 20, 21))
    util.cleanup(m)


def test_iod_killed_mid_read_eio(dcluster, tmp_mnt, expect_log):
    _iod_fault(dcluster, tmp_mnt, signal.SIGKILL, expect_log)


# A hung iod: the client times out, and so may the mgr's poll.
def test_iod_hung_mid_read_eio(dcluster, tmp_mnt, expect_log):
    _iod_fault(dcluster, tmp_mnt, signal.SIGSTOP, expect_log)


# ---------------------------------------------------------------- malformed

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


# Why a server closes a connection that sent one of the cases above, as it
# logs it: 'net: PEER: WHY; closing connection' (common/transport/tcp_server.c); the
# header checks are the same for both, the body checks are each op's.
REJECT_HDR = ('bad header: (magic|version|reserved|flags|body_len|bulk_len)',
              'request before handshake', 'unexpected control frame',
              'control op without control flag', 'reply or data flag on a request')
REJECT_BODY = {'mgr': ('name', 'cred', 'cred.ngroups', 'trailing bytes'),
               'iod': ('nsegs', 'segs', 'seg', 'segs sum')}


def reject_log(prog, whys):
    """The anchored regex of prog's warning on closing a connection from a
    test client for one of the reasons whys (regex pieces)."""
    return r'^<4>rpfs-%s: net: %s:\d+: (%s); closing connection$' % (
        prog, re.escape(util.HOST), '|'.join(whys))


@pytest.mark.parametrize('target', ['mgr', 'iod'])
def test_malformed_messages_rejected(tcp_dcluster, tmp_mnt, target, expect_log):
    expect_log(reject_log(target, REJECT_HDR + REJECT_BODY[target]))
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


@pytest.mark.expect_log(reject_log('(mgr|iod)', ['request before handshake']))
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


def _wb_setup(cluster, tmp_mnt, tmp_path, expect_log):
    """Mount cluster (timeout 3 s, one lane: warm sockets only), write a
    file; return it, the iod holding its first stripe unit, and a function
    that stops that iod. Expects the warnings of that iod's hanging under
    writes (iod_fault_logs), and that of a write acknowledged early that
    failed later (fe_wback.c)."""
    conf = tmp_path / 'one-lane.conf'
    conf.write_text('[client]\nconnections = 1\n')
    m = cluster.mount(tmp_mnt, 'allow_other,timeout=3,conf=%s' % conf)
    f = os.path.join(m.path, 'wb')
    with open(f, 'wb') as fh:
        fh.write(b'w' * 8192)
    layout = dict(kv.split('=') for kv in
                  os.getxattr(f, 'user.rpfs.layout').decode().split(','))
    i = int(layout['first'])
    iod = cluster.iods[i]  # holds bytes 0..unit-1
    for r in iod_fault_logs(cluster, i, False, 'write'):
        expect_log(r)
    expect_log(r'^<4>rpfs-fuse: inode %d: a write of 4096 bytes at 0 acknowledged '
               r'earlier failed: Input/output error \(reported at the next write, '
               r'close or fsync\)$' % os.stat(f).st_ino)

    def stop():
        iod.proc.send_signal(signal.SIGSTOP)
        util.wait_until(lambda: _stopped(iod.proc), 10, what='iod stopped')
    return m, f, iod, stop


def test_write_behind(tcp_dcluster, tmp_mnt, tmp_path, expect_log):
    """Write-behind (tcp), with the iod that stores the written range
    stopped: an O_DIRECT write waits for it (EIO at the timeout); a buffered
    write is answered while the iod is still stopped, close waits for it and
    the data is there; a buffered write the iod never answers is answered
    too, and its failure is close's error."""
    m, f, iod, stop = _wb_setup(tcp_dcluster, tmp_mnt, tmp_path, expect_log)
    try:
        _write_behind_checks(f, iod, stop)
    finally:
        iod.proc.send_signal(signal.SIGCONT)
    util.cleanup(m)


@pytest.mark.verbs
def test_no_write_behind_over_verbs(dcluster, tmp_mnt, tmp_path, expect_log):
    """Over verbs writes stay synchronous (the iod fetches the data after
    the request is sent): a buffered write to a stopped iod fails itself."""
    m, f, iod, stop = _wb_setup(dcluster, tmp_mnt, tmp_path, expect_log)
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
    """The three cases of test_write_behind. The file holds 8192 bytes
    'w' at the start, all on the iod that stop() stops."""
    def cont_and_heal(old, new):
        """Let the iod run, and wait for an error-free read of f: the
        write of new over old at 0 failed, so the first 4096 bytes are
        either (the iod may store it when it runs again); any other bytes
        fail the test at once."""
        iod.proc.send_signal(signal.SIGCONT)
        util.wait_reads_again(f, [old * 4096 + b'w' * 4096, new * 4096 + b'w' * 4096], 60)

    # O_DIRECT: synchronous, so the stopped iod fails the write itself
    stop()
    buf = mmap.mmap(-1, 4096)
    buf.write(b'd' * 4096)
    _pwrite_fails_eio(f, os.O_WRONLY | os.O_DIRECT, buf)
    cont_and_heal(b'w', b'd')

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
    cont_and_heal(b'b', b'x')
