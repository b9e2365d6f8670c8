"""A process that takes locks on command, for test_locks.py.

Reads one command per line on stdin and answers one line on stdout:
"ok", "ok TYPE START LEN PID" (getlk) or "err ERRNONAME". Blocking calls
go through libc directly (ctypes) so that a signal shows as EINTR instead
of being retried by Python (PEP 475). Commands:
  open PATH            open PATH read-write as the current file (fd N)
  open2 PATH           open a second descriptor, made current
  use N                make descriptor N (0-based, order opened) current
  close                close the current descriptor
  lock CMD TYPE START LEN   fcntl CMD (setlk, setlkw, ofd_setlk, ofd_setlkw)
                       TYPE rd/wr/un on the current descriptor
  getlk TYPE START LEN / ofd_getlk TYPE START LEN
  flock OP             sh, ex, un, sh_nb, ex_nb
  alarm SECONDS        SIGALRM (handler does nothing) after SECONDS
  pid                  print the pid
"""
import ctypes
import errno
import fcntl
import os
import signal
import struct
import sys

libc = ctypes.CDLL(None, use_errno=True)
F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38
CMDS = {'setlk': fcntl.F_SETLK, 'setlkw': fcntl.F_SETLKW, 'getlk': fcntl.F_GETLK,
        'ofd_setlk': F_OFD_SETLK, 'ofd_setlkw': F_OFD_SETLKW,
        'ofd_getlk': F_OFD_GETLK}
TYPES = {'rd': fcntl.F_RDLCK, 'wr': fcntl.F_WRLCK, 'un': fcntl.F_UNLCK}
NAMES = {v: k for k, v in TYPES.items()}
FLOCK = {'sh': fcntl.LOCK_SH, 'ex': fcntl.LOCK_EX, 'un': fcntl.LOCK_UN,
         'sh_nb': fcntl.LOCK_SH | fcntl.LOCK_NB, 'ex_nb': fcntl.LOCK_EX | fcntl.LOCK_NB}
FMT = 'hhqqi4x'  # struct flock on x86_64: type, whence, start, len, pid


def call(cmd, typ, start, length):
    """fcntl(fd, cmd, &flock) through libc; returns (rc, errno, flock)."""
    buf = ctypes.create_string_buffer(struct.pack(FMT, typ, os.SEEK_SET, start, length, 0))
    rc = libc.fcntl(ctypes.c_int(fds[cur]), ctypes.c_int(cmd), buf)
    return rc, ctypes.get_errno(), struct.unpack(FMT, buf.raw[:struct.calcsize(FMT)])


def ename(e):
    """errno name, with one spelling for the aliases."""
    return {errno.EAGAIN: 'EAGAIN', errno.EDEADLK: 'EDEADLK'}.get(e, errno.errorcode.get(e, str(e)))


fds = []
cur = -1
signal.signal(signal.SIGALRM, lambda s, f: None)
for line in sys.stdin:
    w = line.split()
    try:
        if w[0] in ('open', 'open2'):
            fds.append(os.open(w[1], os.O_RDWR | os.O_CREAT, 0o666))
            cur = len(fds) - 1
            out = 'ok'
        elif w[0] == 'use':
            cur = int(w[1])
            out = 'ok'
        elif w[0] == 'close':
            os.close(fds[cur])
            out = 'ok'
        elif w[0] == 'lock':
            rc, e, _ = call(CMDS[w[1]], TYPES[w[2]], int(w[3]), int(w[4]))
            out = 'ok' if rc == 0 else 'err ' + ename(e)
        elif w[0] in ('getlk', 'ofd_getlk'):
            rc, e, fl = call(CMDS[w[0]], TYPES[w[1]], int(w[2]), int(w[3]))
            out = ('ok %s %d %d %d' % (NAMES[fl[0]], fl[2], fl[3], fl[4]) if rc == 0
                   else 'err ' + ename(e))
        elif w[0] == 'flock':
            rc = libc.flock(ctypes.c_int(fds[cur]), ctypes.c_int(FLOCK[w[1]]))
            out = 'ok' if rc == 0 else 'err ' + ename(ctypes.get_errno())
        elif w[0] == 'alarm':
            signal.setitimer(signal.ITIMER_REAL, float(w[1]))
            out = 'ok'
        elif w[0] == 'pid':
            out = 'ok %d' % os.getpid()
        else:
            out = 'err EINVAL'
    except OSError as e:
        out = 'err ' + ename(e.errno)
    sys.stdout.write(out + '\n')
    sys.stdout.flush()
