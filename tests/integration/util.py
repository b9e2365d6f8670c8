"""Helpers for the rpfs integration tests: start real daemons on loopback,
mount with real FUSE, watch their logs.

Every wait here is bounded; every process started here is registered so a
finalizer (or scripts/test.sh, through $RPFS_TEST_PIDS) can stop it.
"""
import errno
import os
import random
import re
import signal
import socket
import itertools
import subprocess
import time
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The address every daemon listens on and every client connects to. Loopback
# on the host; inside the RDMA VM it must be the soft-RoCE device's address
# ($RPFS_RDMA_ADDR), since rxe0 is bound to the veth rxe-a, not to lo.
HOST = os.environ.get('RPFS_TEST_HOST') or '127.0.0.1'


def transport():
    """The transport the daemons and clients started here use: they inherit
    $RPFS_TRANSPORT (tcp when unset), which this module never scrubs."""
    return os.environ.get('RPFS_TRANSPORT') or 'tcp'


def big_mib():
    """Size in MiB of the big-file test: $RPFS_TEST_BIG_MIB, default 1024."""
    v = os.environ.get('RPFS_TEST_BIG_MIB') or '1024'
    if not v.isdigit() or int(v) < 1:
        raise ValueError('RPFS_TEST_BIG_MIB: expected MiB >= 1, got %r' % v)
    return int(v)


def tar_files():
    """Files in the tar round-trip test: $RPFS_TEST_TAR_FILES, default 3000
    (rounded down to whole directories of 100, at least 300)."""
    v = os.environ.get('RPFS_TEST_TAR_FILES') or '3000'
    if not v.isdigit() or int(v) < 300:
        raise ValueError('RPFS_TEST_TAR_FILES: expected a number >= 300, got %r' % v)
    return int(v) // 100 * 100


def readdir_entries():
    """Entries in the big-directory test: $RPFS_TEST_READDIR_N, default 5000
    (at least 1000: more than one READDIR reply)."""
    v = os.environ.get('RPFS_TEST_READDIR_N') or '5000'
    if not v.isdigit() or int(v) < 1000:
        raise ValueError('RPFS_TEST_READDIR_N: expected a number >= 1000, got %r' % v)
    return int(v)


def store():
    """The namespace store of the clusters started here: $RPFS_STORE,
    'lmdb' (the default) or 'postgresql'. With postgresql, $RPFS_PG_URI
    names a temporary PostgreSQL cluster (scripts/pg-temp.sh; conftest
    starts one when it is unset) whose user may create databases: every
    Cluster gets a database of its own (pg_new_db)."""
    s = os.environ.get('RPFS_STORE') or 'lmdb'
    if s not in ('lmdb', 'postgresql'):
        raise ValueError('RPFS_STORE: expected lmdb or postgresql, got %r' % s)
    return s


_pg_seq = itertools.count()


def pg_new_db(socket=False):
    """A new empty database on $RPFS_PG_URI's server with the rpfs schema in
    it (rpfs mkfs --store-uri); returns its URI, over the server's unix
    socket in $RPFS_PG_SOCKDIR when socket (for a mgr in a network
    namespace)."""
    admin = os.environ.get('RPFS_PG_URI')
    if not admin:
        raise RuntimeError('RPFS_STORE=postgresql needs RPFS_PG_URI (conftest sets it)')
    name = 'rpfs_t%d_%d' % (os.getpid(), next(_pg_seq))
    run(['psql', admin, '-v', 'ON_ERROR_STOP=1', '-qc', 'CREATE DATABASE %s' % name])
    u = urllib.parse.urlsplit(admin)
    uri = urllib.parse.urlunsplit((u.scheme, u.netloc, '/' + name, u.query, ''))
    run([binary('admin/rpfs'), 'mkfs', '--store-uri', uri])
    if socket:
        q = urllib.parse.urlencode({'host': os.environ['RPFS_PG_SOCKDIR'], 'port': u.port,
                                    'user': u.username, 'password': u.password})
        uri = 'postgresql:///%s?%s' % (name, q)
    return uri


def hostport(port):
    """'HOST:PORT' for the test address."""
    return '%s:%d' % (HOST, port)


def host_is_loopback(host=None):
    """Whether host (default HOST) is a loopback address (127.0.0.0/8, ::1),
    the only addresses a daemon serves without a cluster key."""
    h = host or HOST
    return h == '::1' or h.startswith('127.')


def insecure_args():
    """['--insecure'] when HOST is not a loopback address (in the RDMA VM,
    the soft-RoCE address): the daemons started here have no key there and
    refuse such an address without the flag. [] on loopback."""
    return [] if host_is_loopback() else ['--insecure']

# Lines that fail a test unless it declared them expected (priority <0>..<4>).
PRIO_BAD = re.compile(r'^<[0-4]>')
# Lines that always fail a test.
SANITIZER_BAD = re.compile(r'ERROR: AddressSanitizer|runtime error:|LeakSanitizer|'
                           r'ThreadSanitizer|ERROR: libFuzzer')


# The one warning a daemon started with --insecure (or [cluster] insecure =
# true) prints at start; expected in the log of a daemon this harness
# started that way (LogFile.insecure_ok), a failure anywhere else.
INSECURE_WARN = re.compile(r'^<4>rpfs-(mgr|iod): insecure: no cluster key and listening on '
                           r'\S+, which is not a loopback address: anyone who can reach it '
                           r'is served$')


def build_dir():
    """The build directory holding the binaries: $RPFS_BUILD (relative paths
    are taken from the repository root), default <repo>/build."""
    b = os.environ.get('RPFS_BUILD', 'build')
    if not os.path.isabs(b):
        b = os.path.join(REPO, b)
    return b


def binary(rel):
    """Absolute path of a built program, e.g. binary('mgr/rpfs-mgr')."""
    p = os.path.join(build_dir(), rel)
    if not os.access(p, os.X_OK):
        raise RuntimeError('%s not built (RPFS_BUILD=%s)' % (p, build_dir()))
    return p


def wait_until(cond, timeout, interval=0.05, what='condition'):
    """Poll cond() until it returns a true value; return that value.
    Raises TimeoutError after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise TimeoutError('timed out after %.1fs waiting for %s' % (timeout, what))
        time.sleep(interval)


def _ephemeral_range():
    """The kernel's range for local ports of outgoing connections."""
    try:
        with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


# the next port free_port_run tries, per slot (None: not yet chosen)
_port_cursor = None


def _port_slot():
    """The ports this process may hand out, [first, end): the range below
    the kernel's ephemeral range (from 10000 where it allows), narrowed to
    $RPFS_PORT_RANGE ("LO-HI", set by scripts/test.sh per pass, so the
    passes it runs side by side never pick the same port) and split again
    between the workers of a pytest-xdist run (PYTEST_XDIST_WORKER gwN of
    PYTEST_XDIST_WORKER_COUNT), so no two processes race for one port
    between the check here and a daemon's bind."""
    lo, _hi = _ephemeral_range()
    first, end = (10000 if lo > 12000 else 1024), lo
    spec = os.environ.get('RPFS_PORT_RANGE')
    if spec:
        m = re.fullmatch(r'([0-9]+)-([0-9]+)', spec)
        if not m or not first <= int(m.group(1)) < int(m.group(2)) <= end:
            raise ValueError('RPFS_PORT_RANGE: expected LO-HI within %d-%d, got %r'
                             % (first, end, spec))
        first, end = int(m.group(1)), int(m.group(2))
    worker = os.environ.get('PYTEST_XDIST_WORKER', '')
    count = os.environ.get('PYTEST_XDIST_WORKER_COUNT', '')
    if re.fullmatch(r'gw[0-9]+', worker) and count.isdigit() and int(count) > 1:
        i, n = int(worker[2:]), int(count)
        size = (end - first) // n
        first, end = first + i * size, first + (i + 1) * size
    return first, end


def free_port_run(n=1, host=None):
    """The first of n consecutive TCP ports on host (default HOST) that were
    all free a moment ago, for daemons to listen on. They lie in this
    process's slot (_port_slot: below the kernel's ephemeral range, so no
    outgoing connection, a TCP socket or an rdma_cm id, can take them
    between now and the daemon's bind, and apart from every other pass and
    worker of the run). Ports are handed out in turn from a random start,
    so none is handed out again before the whole slot went round once."""
    global _port_cursor
    first, end = _port_slot()
    if end - first < n:
        raise RuntimeError('port slot %d-%d holds fewer than %d ports' % (first, end, n))
    if _port_cursor is None or not first <= _port_cursor < end:
        _port_cursor = random.Random(os.getpid() ^ time.monotonic_ns()).randrange(first, end)
    port, tried = _port_cursor, 0
    while tried < 2 * (end - first):
        if port + n > end:
            port = first
        bad = None
        socks = []
        try:
            for p in range(port, port + n):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                try:
                    s.bind((host or HOST, p))
                except OSError:
                    bad = p
                    break
        finally:
            for s in socks:
                s.close()
        if bad is None:
            _port_cursor = port + n
            return port
        tried += bad + 1 - port
        port = bad + 1
    raise RuntimeError('no run of %d free ports in %d-%d on %s' % (n, first, end, host or HOST))


def free_port():
    """A TCP port on HOST that was free a moment ago (free_port_run)."""
    return free_port_run(1)


_locks_held = {}


def global_lock(name):
    """A context manager holding the machine-wide lock NAME (an flock on a
    file under /run/lock/rpfs-test, or /tmp without /run/lock) for tests
    that change or depend on state every process shares, such as
    /proc/sys/fs/pipe-max-size or /sbin/mount.rpfs: scripts/test.sh runs
    its passes and pytest-xdist workers side by side, and the lock keeps
    two such tests from overlapping in any of them. Re-entrant within a
    process (a module fixture and a test of it may both take it)."""
    import contextlib
    import fcntl

    @contextlib.contextmanager
    def held():
        if name in _locks_held:
            fd, depth = _locks_held[name]
            _locks_held[name] = (fd, depth + 1)
        else:
            d = '/run/lock/rpfs-test' if os.path.isdir('/run/lock') else '/tmp/rpfs-test-locks'
            os.makedirs(d, exist_ok=True)
            fd = os.open(os.path.join(d, name), os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            _locks_held[name] = (fd, 1)
        try:
            yield
        finally:
            fd, depth = _locks_held[name]
            if depth > 1:
                _locks_held[name] = (fd, depth - 1)
            else:
                del _locks_held[name]
                os.close(fd)
    return held()


def wait_for_port(host, port, timeout=10):
    """Wait until something accepts TCP connections on host:port."""
    def probe():
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            return False
    wait_until(probe, timeout, 0.1, 'port %s:%d' % (host, port))


def is_mounted(path):
    """True if path is a mount point listed in /proc/self/mountinfo.
    (Never stat()s the path, so a hung FUSE mount cannot block us.)"""
    path = os.path.realpath(path)
    with open('/proc/self/mountinfo') as f:
        for line in f:
            mp = line.split()[4].encode().decode('unicode_escape')
            if mp == path:
                return True
    return False


def wait_for_mount(path, timeout=20, proc=None):
    """Wait until path is a mount point. If proc (the FUSE process) exits
    first, fail at once with its exit status."""
    def ready():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError('mount process exited with %s before %s was mounted'
                               % (proc.returncode, path))
        return is_mounted(path)
    wait_until(ready, timeout, 0.05, 'mount at %s' % path)


def umount(path, timeout=20):
    """Unmount a FUSE mount: fusermount3 -u, falling back to umount -l.
    Waits until it is no longer mounted."""
    if not is_mounted(path):
        return
    r = subprocess.run(['fusermount3', '-u', path], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    if r.returncode != 0 and is_mounted(path):
        subprocess.run(['umount', '-l', path], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=timeout)
    wait_until(lambda: not is_mounted(path), timeout, 0.05, 'unmount of %s' % path)


def make_traversable(path):
    """Give o+x to every directory from / down to path that lacks it (pytest's
    temporary directories are 0700), so other uids can reach a mount there."""
    path = os.path.realpath(path)
    parts = path.split('/')
    for i in range(2, len(parts) + 1):
        d = '/'.join(parts[:i])
        st = os.stat(d)
        if not st.st_mode & 0o001:
            os.chmod(d, (st.st_mode & 0o7777) | 0o011)


def register_pid(pid):
    """Record a pid in $RPFS_TEST_PIDS so scripts/test.sh can reap leftovers."""
    f = os.environ.get('RPFS_TEST_PIDS')
    if f:
        with open(f, 'a') as fh:
            fh.write('%d\n' % pid)


def stop_proc(proc, sig=signal.SIGTERM, timeout=15):
    """Send sig and wait for the process to exit; SIGKILL after timeout.
    Returns True if it exited on sig, False if it had to be killed."""
    if proc.poll() is not None:
        return True
    try:
        proc.send_signal(sig)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)
        return False


class LogFile:
    """A log file that a watcher reads incrementally. The registry holds
    the logs every test's watch reads; the log of a process that exited
    leaves it after the next full check (prune), so a long session does
    not reread hundreds of finished logs at every test phase (in the RDMA
    VM, under TCG, that cost seconds a test), and comes back when its
    process starts again (register)."""
    registry = []

    def __init__(self, path, name):
        self.path = path
        self.name = name
        self.insecure_ok = False  # INSECURE_WARN is expected here
        self.base = 0  # where a watch that did not see it at setup starts
        self.retired = False  # its process exited: prune drops it
        LogFile.registry.append(self)

    def register(self):
        """Watch this log (again) as its process starts: back in the
        registry if prune dropped it, read from its present end on (what
        came before was checked)."""
        self.retired = False
        if self not in LogFile.registry:
            self.base = self.size()
            LogFile.registry.append(self)

    @classmethod
    def prune(cls):
        """Drop the logs of processes that exited (retired) from the
        registry. Called after a test's last check, which read them to
        their end."""
        cls.registry[:] = [l for l in cls.registry if not l.retired]

    def size(self):
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    def read_from(self, off):
        try:
            with open(self.path, 'rb') as f:
                f.seek(off)
                return f.read().decode('utf-8', 'replace')
        except OSError:
            return ''

    def tail(self, n=40):
        return '\n'.join(self.read_from(0).splitlines()[-n:])


class LogWatch:
    """Remembers where every known log ended, and later reports the bad lines
    written since (<0>..<4> unless expected, sanitizer reports always)."""

    def __init__(self):
        self.offsets = {id(l): l.size() for l in LogFile.registry}
        self.expected = []

    def expect(self, regex):
        self.expected.append(re.compile(regex))

    def collect(self, advance=True):
        bad = []
        for l in list(LogFile.registry):
            off = self.offsets.get(id(l), l.base)
            text = l.read_from(off)
            if advance:
                self.offsets[id(l)] = off + len(text.encode('utf-8', 'replace'))
            for line in text.splitlines():
                if SANITIZER_BAD.search(line):
                    bad.append('%s: %s' % (l.name, line))
                elif l.insecure_ok and INSECURE_WARN.match(line):
                    continue
                elif PRIO_BAD.match(line) and not any(r.search(line) for r in self.expected):
                    bad.append('%s: %s' % (l.name, line))
        return bad


class Daemon:
    """One server process (mgr or iod) with its stderr in a log file."""

    def __init__(self, name, argv, logpath, ready_re, env=None):
        self.name = name
        self.argv = argv
        self.env = env
        self.log = LogFile(logpath, name)
        self.ready_re = re.compile(ready_re, re.M)
        self.proc = None

    def start(self, timeout=30):
        """Start the process and wait for its ready line. Started with
        --insecure (or, off loopback, from a config file that write_conf gave
        insecure = true) its insecure warning is expected."""
        self.log.register()
        off = self.log.size()
        if '--insecure' in self.argv or not host_is_loopback():
            self.log.insecure_ok = True
        fh = open(self.log.path, 'ab')
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=fh, stderr=fh, start_new_session=True,
                                     env=self.env)
        fh.close()
        register_pid(self.proc.pid)

        def ready():
            if self.ready_re.search(self.log.read_from(off)):
                return True
            if self.proc.poll() is not None:
                raise RuntimeError('%s exited with %s before it was ready:\n%s'
                                   % (self.name, self.proc.returncode, self.log.tail()))
            return False
        wait_until(ready, timeout, 0.05, '%s ready line' % self.name)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=15):
        """Stop the process; True if it exited on its own after sig."""
        if self.proc is None:
            return True
        ok = stop_proc(self.proc, sig, timeout)
        self.log.retired = True
        return ok


def mount_opts(opts):
    """A mount's -o options, with $RPFS_MOUNT_OPTS appended (the test
    command's leases pass sets it to "leases,deleg"); a test that says
    leases or no_leases, deleg or no_deleg itself keeps its choice (the
    extra one is left out), and one that says no_leases gets no deleg
    (which needs leases)."""
    extra = os.environ.get('RPFS_MOUNT_OPTS', '')
    own = (opts or '').split(',')

    def kept(o):
        if o in ('leases', 'no_leases'):
            return 'leases' not in own and 'no_leases' not in own
        if o in ('deleg', 'no_deleg'):
            return ('deleg' not in own and 'no_deleg' not in own and
                    'no_leases' not in own)
        return True
    extra = [o for o in extra.split(',') if o and kept(o)]
    return ','.join([o for o in own if o] + extra)


class Mount:
    """A running rpfs-fuse -f process and its mount point."""

    def __init__(self, cluster, path, opts, name):
        self.cluster = cluster
        self.path = path
        self.opts = opts
        self.name = name
        self.log = LogFile(os.path.join(cluster.logdir, name + '.log'), name)
        self.proc = None

    def start(self, timeout=30):
        os.makedirs(self.path, exist_ok=True)
        self.log.register()
        argv = [binary('fuse-client/rpfs-fuse'), self.cluster.mgr_spec(),
                self.path, '-f']
        opts = mount_opts(self.opts)
        if opts:
            argv += ['-o', opts]
        fh = open(self.log.path, 'ab')
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=fh,
                                     start_new_session=True, env=self.cluster.env)
        fh.close()
        register_pid(self.proc.pid)
        try:
            wait_for_mount(self.path, timeout, self.proc)
        except Exception as e:
            self.umount()
            raise RuntimeError('%s: %s\n%s' % (self.name, e, self.log.tail())) from e

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def umount(self, timeout=20):
        """Unmount and wait for the client process to exit. Returns True if
        it exited by itself after the unmount."""
        try:
            umount(self.path, timeout)
        finally:
            ok = True
            if self.proc is not None and self.proc.poll() is None:
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    stop_proc(self.proc, signal.SIGTERM, 5)
                    ok = False
            if self.proc is not None and self.proc.returncode != 0:
                ok = False
            if self.proc is not None and self.proc.poll() is not None:
                self.log.retired = True
            if self in self.cluster.mounts:
                self.cluster.mounts.remove(self)
        return ok


class Cluster:
    """1 mgr + N iods on HOST with free ports, state under state_dir."""

    def __init__(self, state_dir, niods=4, mgr_args=(), log_level=None, name='c',
                 transport=None):
        log_level = log_level or os.environ.get('RPFS_LOG_LEVEL', 'info')
        # transport: force RPFS_TRANSPORT for this cluster's daemons and
        # mounts (None: inherit the environment, like everything else).
        self.env = None
        if transport:
            self.env = dict(os.environ, RPFS_TRANSPORT=transport)
        self.state = state_dir
        self.niods = niods
        self.name = name
        self.logdir = os.path.join(state_dir, 'logs')
        os.makedirs(self.logdir, exist_ok=True)
        self.mgr_port = free_port()
        self.iod_ports = [free_port() for _ in range(niods)]
        self.iod_dirs = [os.path.join(state_dir, 'iod%d' % i) for i in range(niods)]
        self.db = os.path.join(state_dir, 'db')
        # PostgreSQL store: a database of this cluster's own (self.db unused)
        self.store_uri = pg_new_db() if store() == 'postgresql' else None
        self.mounts = []
        self.nmounts = 0
        self.iods = []
        for i in range(niods):
            argv = [binary('iod/rpfs-iod'), '--listen', hostport(self.iod_ports[i]),
                    '--data', self.iod_dirs[i], '--log-level', log_level] + insecure_args()
            self.iods.append(Daemon('%s-iod%d' % (name, i), argv,
                                    os.path.join(self.logdir, 'iod%d.log' % i),
                                    r'^<5>rpfs-iod: ready:', self.env))
        argv = [binary('mgr/rpfs-mgr'), '--listen', hostport(self.mgr_port),
                '--log-level', log_level] + self.store_args() + insecure_args()
        for p in self.iod_ports:
            argv += ['--iod', hostport(p)]
        argv += list(mgr_args)
        self.mgr = Daemon('%s-mgr' % name, argv, os.path.join(self.logdir, 'mgr.log'),
                          r'^<5>rpfs-mgr: ready:', self.env)

    def daemons(self):
        return [self.mgr] + self.iods

    def mgr_spec(self):
        """The mount's first argument: the mgr's HOST:PORT (a list of them
        for several mgrs on one store: test_lead.py)."""
        return hostport(self.mgr_port)

    def store_args(self):
        """The mgr's arguments naming its store: --db DIR (LMDB) or the
        PostgreSQL database of this cluster."""
        if self.store_uri:
            return ['--store', 'postgresql', '--store-uri', self.store_uri]
        return ['--db', self.db]

    def store_where(self):
        """How the mgr's messages name its store: the --db directory, or
        'store_uri' (whose value may hold a password)."""
        return 'store_uri' if self.store_uri else self.db

    def store_conf(self):
        """The [mgr] lines naming the store, as store_args."""
        if self.store_uri:
            return ['store = postgresql', 'store_uri = %s' % self.store_uri]
        return ['db = %s' % self.db]

    def start(self):
        """Start the iods, then the mgr; each waits for its ready line."""
        for d in self.iods:
            d.start()
        self.mgr.start()

    def start_iod(self, i):
        self.iods[i].start()

    def kill_iod(self, i, sig=signal.SIGKILL):
        """Send sig to iod i. For SIGKILL/SIGTERM wait until it is gone."""
        d = self.iods[i]
        if sig in (signal.SIGKILL, signal.SIGTERM):
            d.stop(sig)
        else:
            d.proc.send_signal(sig)

    def stop_daemons(self):
        """SIGTERM every daemon; returns the names of those that needed SIGKILL."""
        stuck = []
        for d in [self.mgr] + self.iods:
            if not d.stop():
                stuck.append(d.name)
        return stuck

    def stop(self):
        """Unmount every mount and stop every daemon. Raises if a process
        did not exit by itself (after its unmount or SIGTERM)."""
        stuck = []
        for m in list(self.mounts):
            try:
                if not m.umount():
                    stuck.append(m.name)
            except Exception as e:
                stuck.append('%s (%s)' % (m.name, e))
        stuck += self.stop_daemons()
        if stuck:
            raise RuntimeError('did not exit cleanly: %s' % ', '.join(stuck))

    def restart_all(self):
        """Stop every daemon (SIGTERM) and start them again on the same ports
        and state. Mounts are left alone."""
        stuck = self.stop_daemons()
        if stuck:
            raise RuntimeError('did not exit on SIGTERM: %s' % ', '.join(stuck))
        self.start()

    def mount(self, mnt, opts='allow_other'):
        """Mount the file system at mnt (rpfs-fuse -f in the background)."""
        self.nmounts += 1
        m = Mount(self, mnt, opts, '%s-fuse%d' % (self.name, self.nmounts))
        m.start()
        self.mounts.append(m)
        return m

    def check_alive(self):
        """Names of processes that should run but died."""
        dead = []
        for d in self.daemons():
            if d.proc is not None and d.proc.returncode is None and d.proc.poll() is not None:
                dead.append('%s (exit %s)' % (d.name, d.proc.returncode))
        for m in self.mounts:
            if m.proc is not None and m.proc.poll() is not None:
                dead.append('%s (exit %s)' % (m.name, m.proc.returncode))
        return dead

    def objects(self, ino):
        """Paths of the stripe objects of inode ino on each iod: a list with
        one entry per iod, None where the iod holds no object."""
        want = '%016x' % ino
        out = []
        for d in self.iod_dirs:
            found = None
            for root, _dirs, files in os.walk(d):
                for f in files:
                    if f.lower() == want:
                        found = os.path.join(root, f)
            out.append(found)
        return out


# Live clusters, so the log watcher can notice a process that died.
clusters = []


def write_conf(c, path, key=None, extra='', server_key=None, transport=None):
    """A config file describing cluster c (a Cluster); extra is appended;
    transport None: $RPFS_TRANSPORT's."""
    lines = ['[cluster]', 'mgr = %s' % hostport(c.mgr_port)]
    if key:
        lines.append('key = %s' % key)
    if server_key:
        lines.append('server_key = %s' % server_key)
    elif not host_is_loopback():
        lines.append('insecure = true')  # see insecure_args()
    lines += ['transport = %s' % (transport or os.environ.get('RPFS_TRANSPORT', 'tcp')),
              '[layout]', 'stripe_unit = 64K', 'stripe_count = 0',
              '[client]', 'timeout = 10',
              '[mgr]'] + c.store_conf() + ['listen = %s' % hostport(c.mgr_port),
              '[log]', 'level = info']
    for i, p in enumerate(c.iod_ports):
        lines += ['[iod.%d]' % i, 'host = %s' % HOST, 'port = %d' % p,
                  'data = %s' % c.iod_dirs[i]]
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n' + extra)
    return path


def conf_cluster(tmp, niods=2, key=True, name='ops', extra='', server_key=False,
                 transport=None):
    """A started cluster whose daemons run the way the units run them:
    rpfs-mgr --conf FILE, rpfs-iod --conf FILE --id N (a fresh cluster key
    when key, and a fresh servers' key beside it when server_key; extra is
    appended to the file; transport forces one, as Cluster's does). Sets
    c.conf, c.key and c.server_key."""
    c = Cluster(str(tmp), niods=niods, name=name, transport=transport)
    keyf = srvf = None
    if key:
        keyf = os.path.join(str(tmp), 'cluster.key')
        run([binary('admin/rpfs'), 'keygen', keyf])
    if server_key:
        srvf = os.path.join(str(tmp), 'server.key')
        run([binary('admin/rpfs'), 'keygen', srvf])
    conf = write_conf(c, os.path.join(str(tmp), 'rpfs.conf'), keyf, extra, srvf,
                      transport)
    for i, d in enumerate(c.iods):
        d.argv = [binary('iod/rpfs-iod'), '--conf', conf, '--id', str(i)]
    c.mgr.argv = [binary('mgr/rpfs-mgr'), '--conf', conf]
    c.conf, c.key, c.server_key = conf, keyf, srvf
    clusters.append(c)
    try:
        c.start()
    except BaseException:
        cleanup(c)
        raise
    return c


def cleanup(*things):
    """Best-effort teardown of mounts and clusters, in the order given;
    collects errors and raises the first one at the end."""
    first = None
    for t in things:
        try:
            if t is None:
                continue
            if isinstance(t, Mount):
                t.umount()
            elif isinstance(t, Cluster):
                t.stop()
                if t in clusters:
                    clusters.remove(t)
            elif isinstance(t, str):
                umount(t)
        except Exception as e:  # keep tearing down the rest
            if first is None:
                first = e
    if first is not None:
        raise first


def run(cmd, check=True, timeout=300, **kw):
    """subprocess.run with output captured as text, failing with the output."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout, shell=isinstance(cmd, str),
                       executable='/bin/bash' if isinstance(cmd, str) else None, **kw)
    if check and r.returncode != 0:
        raise AssertionError('command %r failed with %d\nstdout: %s\nstderr: %s'
                             % (cmd, r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return r


def read_direct(path, n=None):
    """The bytes of path, its first n or up to its end, read with O_DIRECT
    in 1 MiB calls, so no page cache of this host answers. A failing call
    raises at once (no retry)."""
    import mmap
    buf = mmap.mmap(-1, 1 << 20)
    out = bytearray()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        while n is None or len(out) < n:
            r = os.preadv(fd, [buf], len(out))
            if r <= 0:
                break
            out += buf[:r]
    finally:
        os.close(fd)
        buf.close()
    return bytes(out if n is None else out[:n])


def sha256_file(path, bs=1 << 20):
    import hashlib
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        while True:
            b = f.read(bs)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def errno_name(e):
    return errno.errorcode.get(e, str(e))


def read_checked(path, want, bs=1 << 20):
    """Read path whole, with O_DIRECT where the file system takes it (so the
    bytes come from the servers, not the page cache), and compare each piece
    a read returns with want at its offset: AssertionError at the first
    wrong piece, and if the file ends short or runs long. want is the
    file's bytes, or a list of the contents it may rightly have (e.g. with
    and without a write that failed and may or may not have landed); the
    read must match one of them throughout. A read error (OSError) is left
    to the caller."""
    import mmap
    cands = list(want) if isinstance(want, list) else [want]
    buf = mmap.mmap(-1, bs)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
        fd = os.open(path, os.O_RDONLY)
    try:
        off = 0
        while True:
            n = os.preadv(fd, [buf], off)
            if n <= 0:
                break
            cands = [w for w in cands if buf[:n] == w[off:off + n]]
            if not cands:
                raise AssertionError('%s: wrong bytes in the %d read at offset %d'
                                     % (path, n, off))
            off += n
        cands = [w for w in cands if len(w) == off]
        assert cands, '%s: read %d bytes, want %s' % (
            path, off, ' or '.join(str(len(w)) for w in (want if isinstance(want, list)
                                                        else [want])))
    finally:
        os.close(fd)
        buf.close()


def wait_reads_again(path, want, timeout, errnos=(errno.EIO,)):
    """After a fault, wait for path to be readable again: read_checked over
    and over until one whole pass gets no error. Only a read error in
    errnos means "not yet"; any other error, and any read that returns
    wrong bytes, fails at once (a wrong read is never retried). Returns the
    errors seen while waiting."""
    seen = []

    def clean_pass():
        try:
            read_checked(path, want)
            return True
        except OSError as e:
            if e.errno not in errnos:
                raise
            seen.append(errno_name(e.errno))
            return False
    wait_until(clean_pass, timeout, 0.5, 'an error-free read of %s' % path)
    return seen


# How a connection to a daemon that was killed or restarted ends for its
# peers, as strerror texts in their logs: a call in flight fails with EIO or
# ECONNRESET when the socket closes; a connect while it is down fails with
# ECONNREFUSED, or ENOTCONN when the handshake is cut short.
GONE_ERRS = (r'(Input/output error|Connection reset by peer|Connection refused|'
             r'Transport endpoint is not connected)')


def iod_re(c, i):
    """A regex piece naming iod i of cluster c as the logs do:
    'iod I (HOST:PORT)'."""
    return re.escape('iod %d (%s)' % (i, hostport(c.iod_ports[i])))


def mgr_iod_down_log(c, i, errs=GONE_ERRS):
    """The anchored regex of the mgr's statfs-poll warning that iod i of
    cluster c, up before, went down with one of errs (a regex piece)."""
    return r'^<4>rpfs-mgr: %s went down: %s$' % (iod_re(c, i), errs)


def client_iod_fail_log(c, i, ops, errs=GONE_ERRS):
    """The anchored regex of a client's warning (once per failure burst)
    that a call of one of ops ('read|write') to iod i of c failed."""
    return r'^<4>rpfs-fuse: %s: (%s) failed: %s$' % (iod_re(c, i), ops, errs)


def client_mgr_fail_log(c, errs=GONE_ERRS):
    """The anchored regex of a client's warning (once per failure burst)
    that a call to the mgr of c failed (any op: LOOKUP, GETATTR, ...)."""
    return r'^<4>rpfs-fuse: mgr \(%s\): [A-Z_]+ failed: %s$' % (
        re.escape(hostport(c.mgr_port)), errs)
