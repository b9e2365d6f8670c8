"""Several mgrs on one PostgreSQL store, one active (mgr/ha/README.md
"Several mgrs, one active"): two rpfs-mgr processes share a database, 4
iods, and a mount names both ("h1:p1,h2:p2"). Whatever RPFS_STORE is, these
tests use a database of their own on the session's PostgreSQL cluster
(conftest pg_server).

- the active one answers, the other gives the standby answer with the
  active one's address (raw frames);
- kill -9 of the active: the mount keeps going (creates, renames, unlinks,
  each logged once acknowledged), every acknowledged change is there after
  the takeover, and service resumed within the lease's rest and the
  standby's try (printed);
- SIGSTOP of the active past its lease, takeover, SIGCONT: the old one
  answers nothing as the active one and restarts as a standby.
"""
import os
import re
import signal
import socket
import struct
import time

import pytest

import util
import workload
from wire import F_CTRL, HDR_LEN, OP_LOOKUP, OP_NET_HELLO, handshake, hdr, request

# the host stage runs these (raw TCP peers, PostgreSQL on the host); the
# transport under the mgrs is the same as everywhere else
pytestmark = [pytest.mark.host_only, pytest.mark.own_store]

LEASE_S = 3          # --lease of both mgrs: short, so the tests are short
TIMEOUT_S = 2        # the mount's timeout=
EREMCHG = 78         # PROTO_STANDBY = -EREMCHG
ENOENT = 2
CRED_ROOT = struct.pack('<IIH', 0, 0, 0)
STANDBY_RE = r'^<5>rpfs-mgr: standby on '
READY_RE = r'^<5>rpfs-mgr: ready:'
# the old active mgr, once it finds it lost the lease (SIGSTOP test)
LOST_RE = (r'^<4>rpfs-mgr: lease: this mgr is no longer the active one '
           r'\(token \d+\): it stops serving and restarts as a standby$')
# ... and if it held a batch of writes then: nothing of it commits
REFUSED_RE = (r'^<4>rpfs-mgr: group commit of \d+ ops refused \(-ESTALE\): this '
              r'mgr is no longer the active one; each is answered as by a standby$')


class LeadCluster(util.Cluster):
    """util.Cluster with two mgrs on one PostgreSQL database: mgrs[0] is
    started first (it takes the lease), mgrs[1] stands by."""

    def __init__(self, state_dir, **kw):
        super().__init__(state_dir, **kw)
        if not self.store_uri:
            self.store_uri = util.pg_new_db()
        self.mgr_ports = [self.mgr_port, util.free_port()]
        self.mgrs = []
        for i, port in enumerate(self.mgr_ports):
            argv = [util.binary('mgr/rpfs-mgr'), '--listen', util.hostport(port),
                    '--log-level', 'info', '--lease', str(LEASE_S)]
            argv += self.store_args() + util.insecure_args()
            for p in self.iod_ports:
                argv += ['--iod', util.hostport(p)]
            self.mgrs.append(util.Daemon('%s-mgr%d' % (self.name, i), argv,
                                         os.path.join(self.logdir, 'mgr%d.log' % i),
                                         READY_RE, self.env))
        self.mgr = self.mgrs[0]

    def daemons(self):
        return self.mgrs + self.iods

    def mgr_spec(self):
        return ','.join(util.hostport(p) for p in self.mgr_ports)

    def start_mgr(self, i, ready_re):
        """Start mgr i and wait for ready_re (READY_RE or STANDBY_RE)."""
        d = self.mgrs[i]
        d.ready_re = re.compile(ready_re, re.M)
        d.start()

    def start(self):
        for d in self.iods:
            d.start()
        self.start_mgr(0, READY_RE)
        self.start_mgr(1, STANDBY_RE)

    def stop_daemons(self):
        stuck = []
        for d in self.mgrs + self.iods:
            if not d.stop():
                stuck.append(d.name)
        return stuck

    def lease(self):
        """(token, holder) of the lease row."""
        out = util.run(['psql', self.store_uri, '-Atc',
                        'SELECT token, holder FROM rpfs_lease WHERE id = 1']).stdout
        tok, holder = out.strip().split('|')
        return int(tok), holder

    def lease_left(self):
        """Seconds until the lease row expires, on the database's clock."""
        out = util.run(['psql', self.store_uri, '-Atc',
                        'SELECT extract(epoch FROM expires - now()) FROM rpfs_lease '
                        'WHERE id = 1']).stdout
        return float(out.strip())

    def active(self):
        """Index of the mgr whose address holds the lease."""
        _tok, holder = self.lease()
        addr = holder.rsplit('#', 1)[0]
        return [util.hostport(p) for p in self.mgr_ports].index(addr)


def lookup_body(name=b'no-such-name'):
    """The body of a LOOKUP of name in the root, as root."""
    return CRED_ROOT + struct.pack('<Q', 1) + struct.pack('<H', len(name)) + name


def lookup(port, timeout=10):
    """A raw LOOKUP of a missing name on the mgr at port: (status, body);
    the active mgr answers -ENOENT, a standby -EREMCHG."""
    with socket.create_connection((util.HOST, port), timeout=timeout) as s:
        handshake(s)
        return request(s, OP_LOOKUP, lookup_body())


def standby_hint(body):
    """Decode a standby answer's body: (host, port, token) or None."""
    if not body:
        return None
    n, = struct.unpack_from('<H', body)
    host = body[2:2 + n].decode()
    port, token = struct.unpack_from('<HQ', body, 2 + n)
    assert len(body) == 2 + n + 10, body
    return host, port, token


@pytest.fixture(scope='module')
def ha(tmp_path_factory, pg_server):
    c = LeadCluster(str(tmp_path_factory.mktemp('lead')), niods=4, name='lead')
    util.clusters.append(c)
    try:
        c.start()
        m = c.mount(str(tmp_path_factory.mktemp('lead-mnt')),
                    'allow_other,timeout=%d' % TIMEOUT_S)
        yield c, m.path
    finally:
        util.cleanup(c)


def test_one_active_one_standby(ha):
    """Exactly one mgr answers; the other gives the standby answer naming
    it, with the token the database holds."""
    c, _mnt = ha
    a = c.active()
    tok, _holder = c.lease()
    st, _ = lookup(c.mgr_ports[a])
    assert st == -ENOENT, st
    st, body = lookup(c.mgr_ports[1 - a])
    assert st == -EREMCHG, st
    assert standby_hint(body) == (util.HOST, c.mgr_ports[a], tok)


def test_status_shows_active_and_standby(ha):
    """rpfs status --mgr A,B: one row per mgr, the active one up, the other
    standing by; the iods listed from the active one; nothing down."""
    c, _mnt = ha
    a = c.active()
    r = util.run([util.binary('admin/rpfs'), 'status', '--mgr', c.mgr_spec()],
                 check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {}
    for line in r.stdout.splitlines()[1:]:
        f = line.split()
        rows[(f[0], f[1])] = f[3]
    assert rows[('mgr', str(a))] == 'up', r.stdout
    assert rows[('mgr', str(1 - a))] == 'standby', r.stdout
    assert [rows[('iod', str(i))] for i in range(4)] == ['up'] * 4, r.stdout


def run_through(c, mnt, name, fault, hung=False, timeout=60):
    """Run a metadata workload in mnt/name, call fault() once it is going,
    and keep it going until 50 ops were acknowledged after fault returned.
    Returns (workload, the longest stall from the fault on, the bound it
    must keep). The bound: the faulted mgr renews no more, so its lease
    runs out when the row says (read just after the fault); the standby
    tries every LEASE_S/3; another LEASE_S/3 for the new active mgr's start
    and the client's 200 ms pause between rounds over the list; and when
    the faulted mgr is hung (not dead), one TIMEOUT_S more: until the
    takeover the standby's hint names the hung one, so the client's last
    call there may start just before it and end at its timeout. A standby
    that waited out a second lease (LEASE_S more), or a client stuck on
    the faulted mgr, exceeds it."""
    w = workload.MetaWorkload(os.path.join(mnt, name))
    w.start()
    util.wait_until(lambda: len(w.acks) >= 30 or w.error, 30, what='workload going')
    t0 = time.monotonic()
    fault()
    bound = c.lease_left() + time.monotonic() - t0 + 2 * LEASE_S / 3 + \
        (TIMEOUT_S if hung else 0)
    try:
        util.wait_until(lambda: w.acked_after(t0) >= 50 or w.error or not w.is_alive(),
                        timeout, what='ops acknowledged after the fault')
    finally:
        w.stop.set()
        w.join(30)
    assert w.error is None, 'the workload failed: %r' % w.error
    return w, w.longest_stall(t0), bound


def test_kill9_active_mount_continues(ha):
    """kill -9 of the active mgr: the standby takes over, the mount goes on
    without a remount, and no acknowledged change is lost."""
    c, mnt = ha
    a = c.active()
    tok0, _ = c.lease()
    w, gap, bound = run_through(c, mnt, 'kill9',
                                lambda: c.mgrs[a].stop(signal.SIGKILL))
    print('\nkill -9 of the active mgr: service resumed after %.2f s '
          '(lease %d s, bound %.2f s), %d ops acknowledged'
          % (gap, LEASE_S, bound, len(w.acks)))
    assert gap <= bound, 'service resumed after %.2f s, want <= %.2f s' % (gap, bound)
    assert c.active() == 1 - a
    assert c.lease()[0] > tok0
    w.check()
    # the killed one comes back as a standby
    c.start_mgr(a, STANDBY_RE)
    st, body = lookup(c.mgr_ports[a])
    assert st == -EREMCHG and standby_hint(body)[1] == c.mgr_ports[1 - a]


@pytest.mark.expect_log(LOST_RE, REFUSED_RE)
def test_sigstop_active_never_answers_as_active(ha):
    """SIGSTOP of the active mgr past its lease: the standby takes over; a
    request sent to the stopped one while it was stopped gets the standby
    answer (or a closed connection) once it resumes, never an answer as
    the active mgr; it then restarts as a standby."""
    c, mnt = ha
    a = c.active()
    old = c.mgrs[a]
    tok0, _ = c.lease()
    pending = []

    def fault():
        old.proc.send_signal(signal.SIGSTOP)
        # a request the stopped mgr finds when it resumes
        s = socket.create_connection((util.HOST, c.mgr_ports[a]), timeout=30)
        pending.append(s)

    try:
        w, gap, bound = run_through(c, mnt, 'sigstop', fault, hung=True)
        util.wait_until(lambda: c.lease()[0] > tok0, 30, what='takeover')
        body = lookup_body()
        pending[0].sendall(hdr(OP_NET_HELLO, 0, tag=0, flags=F_CTRL) +
                           hdr(OP_LOOKUP, len(body)) + body)
    finally:
        old.proc.send_signal(signal.SIGCONT)
    print('\nSIGSTOP of the active mgr: service resumed after %.2f s (lease %d s, '
          'bound %.2f s)' % (gap, LEASE_S, bound))
    assert gap <= bound, 'service resumed after %.2f s, want <= %.2f s' % (gap, bound)
    w.check()
    assert c.active() == 1 - a
    # its answer to the request it found: the standby answer, or the
    # connection closed by its restart; never -ENOENT (an active mgr's)
    assert pending_status(pending[0]) in (-EREMCHG, None)
    util.wait_until(lambda: old.log.read_from(0).rstrip().splitlines()[-1]
                    .startswith('<5>rpfs-mgr: standby on'), 30,
                    what='the old mgr restarts as a standby')
    assert re.search(LOST_RE, old.log.read_from(0), re.M)
    st, body = lookup(c.mgr_ports[a])
    assert st == -EREMCHG and standby_hint(body)[1] == c.mgr_ports[1 - a]


def pending_status(s):
    """The status of the LOOKUP sent on s after its handshake: None if the
    connection closed before answering it."""
    got = b''
    try:
        while len(got) < 2 * HDR_LEN:
            b = s.recv(4096)
            if not b:
                return None
            got += b
    except (ConnectionResetError, socket.timeout):
        return None
    finally:
        s.close()
    status, = struct.unpack_from('<i', got, HDR_LEN + 16)
    return status


@pytest.mark.parametrize('how,arg,want', [
    ('flag', '1', r'--lease: expected SECONDS 2\.\.600, got "1"'),
    ('flag', '10s', r'--lease: expected SECONDS 2\.\.600, got "10s"'),
    ('conf', '601', r'\[mgr\] lease: expected seconds 2\.\.600, got "601"'),
])
def test_lease_validated(tmp_path, how, arg, want):
    """A bad --lease or [mgr] lease is refused at start with one line
    naming it (exit 2), before anything is opened."""
    argv = [util.binary('mgr/rpfs-mgr')]
    if how == 'flag':
        argv += ['--listen', util.hostport(1), '--db', str(tmp_path / 'db'),
                 '--iod', util.hostport(2), '--lease', arg]
    else:
        conf = tmp_path / 'rpfs.conf'
        conf.write_text('[mgr]\nlisten = %s\ndb = %s\nlease = %s\n[iod.0]\nhost = %s\nport = 2\n'
                        % (util.hostport(1), tmp_path / 'db', arg, util.HOST))
        argv += ['--conf', str(conf)]
    r = util.run(argv, check=False, timeout=30)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert re.search(want, r.stderr), r.stderr


def test_help_names_the_ranges_it_enforces():
    """rpfs-mgr --help gives --lease and --resync-rate the ranges the
    argument checks enforce (its printf arguments once came in another
    order than its text, so --lease read "10..100000, default 50"; both
    now come from the option table, each flag's line "--FLAG ARG
    LO..HI, default D, KEY")."""
    mgr = util.binary('mgr/rpfs-mgr')
    text = ' '.join(util.run([mgr, '--help'], timeout=30).stdout.split())
    refused = {}
    for opt in ('--lease', '--resync-rate'):
        r = util.run([mgr, '--listen', util.hostport(1), '--db', '/nonexistent',
                      '--iod', util.hostport(2), opt, 'x'], check=False, timeout=30)
        m = re.search(r'%s: expected \S+ (\d+)\.\.(\d+)' % opt, r.stderr)
        assert r.returncode == 2 and m, (r.returncode, r.stderr)
        refused[opt] = m.groups()
    lo, hi = refused['--lease']
    assert re.search(r'--lease SECONDS %s\.\.%s, default \d+, \[mgr\] lease ' % (lo, hi),
                     text), text
    lo, hi = refused['--resync-rate']
    assert re.search(r'--resync-rate MB/s %s\.\.%s, default \d+, \[mgr\] resync_rate '
                     % (lo, hi), text), text
