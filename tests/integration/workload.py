"""Workloads that run through a fault and log what was acknowledged, so a
test can check afterwards that nothing acknowledged was lost:

- MetaWorkload: creates, renames, unlinks and mkdirs in one directory,
  each logged once its call returned; the model (present, gone) is what
  must be there;
- FioLoop: fio write-then-verify runs, one new file each, one after
  another; a run that exits 0 wrote its file and read every block back
  intact; verify_again() checks a finished file again later (fio
  --verify_only), through any mount.

Both stop at the first error and keep it (a failed call is never retried:
the test fails on it).
"""
import os
import subprocess
import threading
import time

import util

FIO_SIZE = '2m'


class MetaWorkload(threading.Thread):
    """Creates, renames and unlinks in directory d (made here), and a mkdir
    every 5th round, each logged once acknowledged."""

    def __init__(self, d):
        super().__init__(daemon=True)
        self.d = d
        os.mkdir(d)
        self.present = set()   # names (relative to d) that must exist
        self.gone = set()      # names that must not (unless present)
        self.acks = []         # (time acknowledged, op) in order
        self.error = None
        self.stop = threading.Event()

    def op(self, what, fn, *args):
        fn(*args)
        self.acks.append((time.monotonic(), what))

    @staticmethod
    def _create(p):
        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))

    def run(self):
        i = 0
        try:
            while not self.stop.is_set():
                a, b = 'a%d' % i, 'b%d' % i
                self.op('create', self._create, os.path.join(self.d, a))
                self.present.add(a)
                self.op('rename', os.rename, os.path.join(self.d, a), os.path.join(self.d, b))
                self.present.discard(a)
                self.gone.add(a)
                self.present.add(b)
                if i % 3 == 0:
                    self.op('unlink', os.unlink, os.path.join(self.d, b))
                    self.present.discard(b)
                    self.gone.add(b)
                if i % 5 == 0:
                    self.op('mkdir', os.mkdir, os.path.join(self.d, 'd%d' % i))
                    self.present.add('d%d' % i)
                i += 1
        except OSError as e:
            self.error = e

    def acked_after(self, t):
        return sum(1 for at, _ in list(self.acks) if at > t)

    def longest_stall(self, t):
        """The longest time without an acknowledgement from t on (the
        service's resume time when a fault began at t)."""
        after = [at for at, _ in list(self.acks) if at > t]
        return max([b - a for a, b in zip([t] + after, after)] or [0])

    def check(self, d=None):
        """Every acknowledged change is there, seen in d (the same
        directory through another mount; default: self.d)."""
        d = d or self.d
        names = set(os.listdir(d))
        missing = sorted(self.present - names)
        assert not missing, 'acknowledged but missing in %s: %s' % (d, missing[:20])
        back = sorted((self.gone - self.present) & names)
        assert not back, 'removed (acknowledged) but there in %s: %s' % (d, back[:20])


def fio_argv(path, verify_only=False):
    """fio writing path in 64 KiB blocks at random offsets, then reading
    every block back and checking its crc32c."""
    argv = ['fio', '--name=' + os.path.basename(path), '--filename=' + path,
            '--rw=randwrite', '--bs=64k', '--size=' + FIO_SIZE, '--verify=crc32c',
            '--ioengine=psync', '--fsync_on_close=1', '--output-format=terse']
    return argv + (['--verify_only'] if verify_only else ['--do_verify=1'])


class FioLoop(threading.Thread):
    """fio write-then-verify runs in directory d (made here), file f0, f1,
    ...; done lists (start, end, path) of the runs that passed."""

    def __init__(self, d):
        super().__init__(daemon=True)
        self.d = d
        os.mkdir(d)
        self.done = []
        self.error = None
        self.stop = threading.Event()

    def run(self):
        i = 0
        while not self.stop.is_set():
            path = os.path.join(self.d, 'f%d' % i)
            t0 = time.monotonic()
            r = subprocess.run(fio_argv(path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=300, check=False)
            if r.returncode != 0:
                self.error = 'fio on %s: exit %d\n%s' % (path, r.returncode, r.stdout[-2000:])
                return
            self.done.append((t0, time.monotonic(), path))
            i += 1
            time.sleep(0.1)

    def runs_started_after(self, t):
        return sum(1 for t0, _t1, _p in list(self.done) if t0 > t)

    def verify_again(self, d=None):
        """Check every finished file again (fio --verify_only), read in d
        (the same directory through another mount; default: self.d)."""
        for _t0, _t1, path in list(self.done):
            p = os.path.join(d or self.d, os.path.basename(path))
            r = util.run(fio_argv(p, verify_only=True), check=False, timeout=300)
            assert r.returncode == 0, 'fio --verify_only %s: exit %d\n%s' % (
                p, r.returncode, (r.stdout + r.stderr)[-2000:])
