"""The database's own failover and the fault matrix (issue 21, items 4
and 5): scripts/ha-cluster.sh brings up a pg_auto_failover monitor, a
PostgreSQL primary with a synchronous standby, two mgrs on the multi-host
store_uri (one active, --lease), 4 iods and 4 client mounts, each host in
a network namespace of its own (tests/integration/hacluster.py on
netns.py). Then:

- the primary's commits wait for the standby (status says so, from a query
  on the primary);
- the fault matrix, one case after another on the same cluster: kill -9
  of the active mgr, its SIGSTOP, its link cut; kill -9 of the database
  primary's host (postgres and its pg_autoctl), its link cut; the active
  mgr and the primary killed at once. During each, every client runs fio
  write-then-verify runs and a metadata workload (creates, renames,
  unlinks, mkdirs, each logged once acknowledged; workload.py). A SIGSTOP
  or a cut is held until the service has resumed without the faulted host
  (every metadata workload acknowledged ops issued after the fault), so
  the other mgr or the standby database node must have taken over. Each
  case checks which mgr holds the lease and which database node is the
  primary once the service resumed (the other mgr after a mgr fault, the
  other node after a database fault), that the lease token advanced,
  that the service resumed within a bound derived from the cluster's
  timeouts (resume_bounds: the mgrs' lease, the clients' timeout,
  pg_auto_failover's timing), that no call failed (the clients wait out a
  takeover or a database failover), that every acknowledged change and
  every verified fio file is there afterwards, read through another
  client, that `rpfs scrub --namespace` finds the namespace consistent,
  and that no client was remounted. The faulted host is brought back
  before the next case (the mgr restarted, the database node rejoined as
  a standby, the link up); a mgr that comes back does not take the lease
  back;
- signal_node refuses a pid that does not run in the node's namespace
  (a kill -9 of a host must never reach the test itself);
- `down` leaves no namespace, no process and no mount behind, and so it
  does after an `up` killed half-way.

Root and network namespaces: host_only (the host stage of scripts/test.sh
runs it; the RDMA VM stage deselects it). The cluster brings its own
PostgreSQL: marked own_store (run once, not again per RPFS_STORE).
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

import hacluster
import netns
import util
import workload

pytestmark = [pytest.mark.host_only, pytest.mark.own_store]

SCRIPT = os.path.join(util.REPO, 'scripts', 'ha-cluster.sh')

# This cluster's timeouts, lowered from the defaults (a 10 s lease, a 10 s
# client timeout) so that a takeover takes seconds, not tens of them. A
# renew every lease/3 with a deadline of 0.9 lease still leaves a renew
# ~2 s of slack under ASan on a loaded machine; a data call to an iod
# takes milliseconds.
LEASE_S = 4              # the mgrs' --lease
CLIENT_TIMEOUT_S = 4     # the clients' -o timeout

# What the faults make the daemons log (allowed, not required: which of
# them appear depends on the moment). A mgr whose database has no primary
# (or that is cut off) says once that its store is out of reach, with
# libpq's words (refused, closed, no route, a postmaster exit); requests
# are answered "retry later" meanwhile and the clients wait.
STORE_OUT = (r'^<4>rpfs-mgr: store_uri postgresql://rpfs@10\.77\.0\.61:5432,'
             r'10\.77\.0\.62:5433/rpfs\?target_session_attrs=read-write: the server is '
             r'out of reach: .+; requests are answered "retry later" until it is back$')
# A mgr that cannot renew its lease (no primary, or cut off) may lose it
# (its default lease, 10 s, is about the failover's time) and restart as a
# standby, and a batch it held then is refused by the fencing token.
LEASE_LOST = (
    r'^<4>rpfs-mgr: lease: cannot reach the database: .+$',
    r'^<4>rpfs-mgr: lease: this mgr is no longer the active one \(token \d+\): it stops '
    r'serving and restarts as a standby$',
    r'^<4>rpfs-mgr: group commit of \d+ ops refused \(-ESTALE\): this mgr is no longer '
    r'the active one; each is answered as by a standby$',
    # the lease lost again (or the store gone) between taking the lease and
    # recording the configuration (seen once: two mgrs flapping after db_link)
    r'^<4>rpfs-mgr: lease: lost before this mgr recorded the configuration \(token \d+: '
    r'(another mgr holds the lease|the store is out of reach)\): it restarts as a standby$',
)
# A cut-off mgr also loses its iods.
IOD_LOST = r'^<4>rpfs-mgr: iod \d \(10\.77\.0\.2\d:7401\) went down: Connection timed out$'
# A SIGSTOPped mgr, continued past its lease, connects to its store again
# as it restarts as a standby; under the load that connect may outlast
# libpq's connect timeout (5 s, mgr_kv_pg.c), and the batch it held is
# then answered "retry later" rather than "as by a standby" (seen once in
# CI). Either answer sends the clients on to the new active mgr.
EXPECT = {
    'mgr_kill9': (),
    'mgr_sigstop': (STORE_OUT,) + LEASE_LOST,
    'mgr_link': (STORE_OUT, IOD_LOST) + LEASE_LOST,
    'db_kill9': (STORE_OUT,) + LEASE_LOST,
    'db_link': (STORE_OUT,) + LEASE_LOST,
    'mgr_db_kill9': (STORE_OUT,) + LEASE_LOST,
}


def ha_dir():
    """A directory for one cluster, under /tmp (the database nodes' user,
    rpfs-pg, must reach it; pytest's base directory is closed to others)."""
    d = tempfile.mkdtemp(prefix='rpfs-ha-', dir='/tmp')
    os.chmod(d, 0o755)
    return d


def script(*args, timeout=300, check=True):
    """scripts/ha-cluster.sh ARGS, its output; fails with it when check."""
    return util.run([SCRIPT] + [str(a) for a in args], timeout=timeout, check=check)


def ns_pids(state):
    """{pid: cmdline} of every process in the cluster's namespaces."""
    pids = {}
    for ns in state['ns']:
        if not os.path.exists('/run/netns/' + ns):
            continue
        r = util.run(['ip', 'netns', 'pids', ns], check=False)
        for p in r.stdout.split():
            try:
                with open('/proc/%s/cmdline' % p, 'rb') as f:
                    pids[int(p)] = f.read().replace(b'\0', b' ').decode()
            except OSError:
                pass
    return pids


def check_gone(d, state, pids):
    """Nothing of the cluster in DIR d is left: no namespace, none of the
    processes pids, no mount under d, no d."""
    left_ns = [ns for ns in state['ns'] if os.path.exists('/run/netns/' + ns)]
    assert not left_ns, 'namespaces left: %s' % left_ns
    alive = []
    for pid, cmd in pids.items():
        try:
            with open('/proc/%d/cmdline' % pid, 'rb') as f:
                now = f.read().replace(b'\0', b' ').decode()
        except OSError:
            continue
        if now == cmd:
            alive.append('%d %s' % (pid, cmd))
    assert not alive, 'processes left: %s' % alive
    with open('/proc/self/mounts') as f:
        mounts = [line.split()[1] for line in f if line.split()[1].startswith(d + '/')]
    assert not mounts, 'mounts left: %s' % mounts
    assert not os.path.exists(d), '%s left' % d


def watch_logs(state):
    """Let the conftest log watch read the rpfs daemons' and clients' logs
    (the script started them, util did not); their --insecure warning is
    expected."""
    for path in state['logs']:
        log = util.LogFile(path, 'ha-' + os.path.basename(path))
        log.insecure_ok = True


@pytest.fixture(scope='module')
def ha(tmp_path_factory):
    """An ha-cluster.sh cluster with 4 clients: (dir, state); down after
    (its logs copied to pytest's base directory first, since down removes
    them)."""
    d = ha_dir()
    keep = str(tmp_path_factory.mktemp('ha-logs'))
    try:
        r = script('up', '--dir', d, '--clients', 4, '--lease', LEASE_S,
                   '--client-timeout', CLIENT_TIMEOUT_S, check=False)
        assert r.returncode == 0, 'up failed:\n%s\n%s' % (r.stdout, r.stderr)
        print(r.stdout)
        with open(os.path.join(d, 'state.json')) as f:
            state = json.load(f)
        watch_logs(state)
        yield d, state, r.stdout
    finally:
        if os.path.isdir(os.path.join(d, 'logs')):
            shutil.copytree(os.path.join(d, 'logs'), keep, dirs_exist_ok=True)
        if os.path.exists(os.path.join(d, 'state.json')):
            script('down', '--dir', d, check=False)
        shutil.rmtree(d, ignore_errors=True)


def test_up_sync(ha):
    """Status after up: every host running, the primary's commits wait
    for the standby (synchronous_commit on, the standby sync or quorum)."""
    d, state, out = ha
    r = script('status', '--dir', d, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r'^sync: +synchronous_commit = on, synchronous_standby_names = '
                     r"'ANY 1 \(pgautofailover_standby_\d+\)'$", r.stdout, re.M), r.stdout
    assert re.search(r'^standby: +pgautofailover_standby_\d+ streaming (sync|quorum)$',
                     r.stdout, re.M), r.stdout
    assert 'DOWN' not in r.stdout
    assert re.search(r'^primary: +db1$', r.stdout, re.M), r.stdout


def other_mount(state, k):
    """The mount of the client after client k: a change acknowledged
    through one client is read through another (no page or dentry cache
    of the writer's)."""
    mounts = state['mounts']
    return mounts[(k + 1) % len(mounts)]


class Load:
    """A MetaWorkload and a FioLoop on every client, client k's in
    CASE/cK (one namespace: every mount shows them all)."""

    def __init__(self, state, case):
        self.meta, self.fio = [], []
        os.mkdir(os.path.join(state['mounts'][0], case))
        for k, m in enumerate(state['mounts']):
            top = os.path.join(m, case, 'c%d' % k)
            os.mkdir(top)
            self.meta.append(workload.MetaWorkload(os.path.join(top, 'meta')))
            self.fio.append(workload.FioLoop(os.path.join(top, 'fio')))
        for t in self.meta + self.fio:
            t.start()

    def errors(self):
        return ['%s: %r' % (t.d, t.error) for t in self.meta + self.fio if t.error]

    def going(self, since, nmeta):
        """Every metadata workload has nmeta ops acknowledged after since
        and every fio loop a run started after since and passed (or a
        workload failed: the caller looks at errors())."""
        if self.errors():
            return True
        return (all(w.acked_after(since) >= nmeta for w in self.meta) and
                all(f.runs_started_after(since) >= 1 for f in self.fio))

    def stop(self):
        for t in self.meta + self.fio:
            t.stop.set()
        for t in self.meta + self.fio:
            t.join(360)
            assert not t.is_alive(), '%s did not stop' % t.d

    def check(self, state, case):
        """Every acknowledged change and every verified fio file, through
        the next client's mount; the clients' checks side by side (one
        thread each: the fio re-verifications are most of a case's time
        otherwise). Fails with every client's failure."""
        failed = []

        def one(k, w, f):
            other = os.path.join(other_mount(state, k), case, 'c%d' % k)
            try:
                w.check(os.path.join(other, 'meta'))
                f.verify_again(os.path.join(other, 'fio'))
            except Exception as e:        # noqa: BLE001 (reported below)
                failed.append('client %d: %s' % (k, e))
        threads = [threading.Thread(target=one, args=(k, w, f))
                   for k, (w, f) in enumerate(zip(self.meta, self.fio))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failed, '\n'.join(failed)


# The cases, in this order (each starts from the cluster the last one left
# whole again: the active mgr and the primary move); start_fault does the
# fault, heal_fault brings the host back.
CASES = tuple(EXPECT)
MGR_CASES = ('mgr_kill9', 'mgr_sigstop', 'mgr_link', 'mgr_db_kill9')  # the active mgr moves
DB_CASES = ('db_kill9', 'db_link', 'mgr_db_kill9')                     # the primary moves

# The constants of the bounds below, besides the cluster's settings:
# the client's pause between two rounds over its list of mgrs
# (fuse-client/core/cli_mgr.c CLI_MGR_ROUND_PAUSE_MS);
ROUND_PAUSE_S = 0.2
# pg_autoctl's keeper reports to the monitor once a second (the monitor's
# nodeActiveCallsFrequencyMs), and each step of a failover waits for the
# next report of the node it concerns;
KEEPER_LOOP_S = 1.0
# a mgr's store connection tries the store_uri's hosts in order, each for
# up to its connect timeout (mgr_kv_pg.c pg_connect: connect_timeout 5);
KV_CONNECT_S = 5.0
# work, not a timeout: the round trips of a takeover (the lease's
# UPDATE, a synchronous commit), the new active mgr's start (it records
# the configuration, starts its iod poller, listens), a client's
# reconnection and its next op, a promoted postgres' end of recovery;
# each well under a second when the machine is idle; all of them together
# allowed 5 s, for ASan builds on 2 cores shared with other tests (a
# takeover that does not happen, or waits for the faulted host, is
# still far outside).
WORK_S = 5.0


def failover_s():
    """(shortest, longest) time in seconds from a primary's loss (killed or
    cut off) until its standby accepts writes, from pg_auto_failover's
    timing as hacluster.py configures it (MONITOR_GUCS, KEEPER_CONF):

    - detection: the monitor finds the primary unhealthy once its health
      check has failed (checked every health_check_period; a check gives
      up after health_check_timeout and is tried max_retries more times,
      retry_delay apart) and its keeper has not reported for
      node_considered_unhealthy_timeout: by the larger of the two;
    - at the standby's next report (a keeper loop) the monitor assigns it
      prepare_promotion (and the primary draining); the standby waits up
      to prepare_promotion_walreceiver for its WAL receiver, and reports
      (a keeper loop): the monitor assigns it stop_replication and the
      primary demote_timeout;
    - the standby is given wait_primary (writes allowed) at its first
      report after primary_demote_timeout has passed (the old primary
      cannot report having demoted: it is dead or cut off), and reaches
      it at the report after (a keeper loop each).

    The shortest: the primary's last report may precede its loss by a
    keeper loop, so it is found unhealthy at least the unhealthy timeout
    less a loop after, and the demote timeout then runs in full."""
    g = {k.split('.', 1)[1]: float(v) for k, v in hacluster.MONITOR_GUCS.items()}
    k = {k.split('.', 1)[1]: float(v) for k, v in hacluster.KEEPER_CONF.items()}
    retries = g['health_check_max_retries']
    check_s = (g['health_check_period'] + (retries + 1) * g['health_check_timeout'] +
               retries * g['health_check_retry_delay']) / 1000
    detect = max(check_s, g['node_considered_unhealthy_timeout'] / 1000)
    demote = g['primary_demote_timeout'] / 1000
    longest = (detect + KEEPER_LOOP_S + k['prepare_promotion_walreceiver'] + KEEPER_LOOP_S +
               demote + 2 * KEEPER_LOOP_S)
    shortest = g['node_considered_unhealthy_timeout'] / 1000 - KEEPER_LOOP_S + demote
    return shortest, longest


def resume_bounds(state):
    """{case: the longest the service may stall in it (seconds, from the
    fault on)}, from the cluster's settings: the mgrs' lease L
    (state lease_s), the clients' timeout T (client_timeout_s), the
    failover's longest F (failover_s) and the constants above.

    A mgr's lease row expires at most L after its last renew (each renew
    sets it to now + L), and a standby tries to take it every L/3: a mgr
    that stops renewing is replaced within L + L/3 (mgr/ha/mgr_lead.c).

    - mgr_kill9: L + L/3, then the clients, whose connections to the
      killed mgr fail at once, find the new active mgr at their next round
      (ROUND_PAUSE_S);
    - mgr_sigstop, mgr_link: L + L/3, and a client's call to the stopped
      or cut-off mgr is given up only after T; until the takeover the
      standby's answer sends it back there, so it reaches the new active
      mgr at most T + ROUND_PAUSE_S after the takeover;
    - db_kill9: F; the active mgr cannot renew without a primary for
      longer than its lease (failover_s's shortest > L, checked by the
      test), so it loses the lease, and after F a mgr takes it anew within
      L/3 (the standby's next try, or the old active restarted as a
      standby, which opens the store every L/3 and tries at once); then a
      client round;
    - mgr_db_kill9: the same from max(F, L) (the killed mgr's lease
      expires meanwhile);
    - db_link: as db_kill9, plus what the cut adds: a mgr's new store
      connection tries the cut-off host first, for KV_CONNECT_S, and a
      call held by a mgr whose commit hangs on the cut-off host is given
      up by its client after T.

    WORK_S is added to each."""
    lease, t = state['lease_s'], state['client_timeout_s']
    takeover = lease + lease / 3
    fail = failover_s()[1]
    after_failover = lease / 3 + ROUND_PAUSE_S + WORK_S
    return {
        'mgr_kill9': takeover + ROUND_PAUSE_S + WORK_S,
        'mgr_sigstop': takeover + t + ROUND_PAUSE_S + WORK_S,
        'mgr_link': takeover + t + ROUND_PAUSE_S + WORK_S,
        'db_kill9': fail + after_failover,
        'db_link': fail + KV_CONNECT_S + t + after_failover,
        'mgr_db_kill9': max(fail, lease) + after_failover,
    }


def start_fault(h, case, mgr, prim):
    """Do the fault of case to the active mgr (host mgr) or the primary
    (host prim). Returns what undoes it: for a SIGSTOP a SIGCONT, for a
    cut the link up, for a kill nothing (heal_fault restarts the host)."""
    if case in ('mgr_kill9', 'mgr_db_kill9'):
        assert h.signal_node(mgr, signal.SIGKILL), '%s runs no process' % mgr
    if case in ('db_kill9', 'mgr_db_kill9'):
        pids = h.signal_node(prim, signal.SIGKILL)
        assert len(pids) >= 3, 'expected postgres and pg_autoctl in %s: %s' % (prim, pids)
    if case == 'mgr_sigstop':
        assert h.signal_node(mgr, signal.SIGSTOP), '%s runs no process' % mgr
        return lambda: h.signal_node(mgr, signal.SIGCONT)
    if case in ('mgr_link', 'db_link'):
        host = mgr if case == 'mgr_link' else prim
        h.link(host, False)
        return lambda: h.link(host, True)
    return lambda: None


def other(name):
    """The other mgr host, or the other database node."""
    return {'mgr': 'mgr2', 'mgr2': 'mgr', 'db1': 'db2', 'db2': 'db1'}[name]


def settled_primary(h):
    """The database node the monitor has as primary, waiting out a
    transition (a node whose goal is set and not yet reported: each step
    is one keeper report, KEEPER_LOOP_S; a few allowed)."""
    return util.wait_until(h.primary, 5 * KEEPER_LOOP_S, 0.2,
                           'the monitor names a primary')


def heal_fault(h, case, mgr, prim):
    """Bring a killed host back (a SIGSTOPped or cut one was brought back
    by start_fault's undo: the old mgr restarts as a standby, the old
    primary rejoins as a standby) and wait until the cluster is whole
    again."""
    if case in ('db_kill9', 'mgr_db_kill9'):
        h.start_db(prim)
    if case in ('mgr_kill9', 'mgr_db_kill9'):
        h.start_mgr(mgr)
    h.wait(h.healthy, 240, 'the cluster is whole again after %s' % case)


def heal_after_failure(h, case, mgr, prim, healed):
    """heal_fault for a case that failed after its fault began (unless
    healed holds something: the case got to its own heal_fault), so that the next case finds
    the cluster whole rather than waiting out its 240 s for it. Best
    effort: a failure here is printed, the case's own is the one shown."""
    if healed:
        return
    try:
        heal_fault(h, case, mgr, prim)
    except Exception as e:        # noqa: BLE001 (the case failed already)
        print('\n%s: healing after the failure failed too: %s' % (case, e))


def scrub_namespace(h, state):
    """rpfs scrub --namespace on the store, from the mgr's host: its
    output; fails unless it found the namespace consistent (exit 0)."""
    argv = ['nsenter', '--net=/run/netns/' + state['nodes']['mgr2']['ns'], '--',
            util.binary('admin/rpfs'), 'scrub', '--namespace', '--store-uri',
            h.store_uri()]
    r = util.run(argv, check=False, timeout=300)
    assert r.returncode == 0, 'scrub --namespace: exit %d\n%s%s' % (
        r.returncode, r.stdout, r.stderr)
    return r.stdout


def client_pids(state):
    """{client host: the pids in its namespace} (a remount would change them)."""
    return {n: sorted(hacluster.Ha.ns_pids([state['nodes'][n]['ns']]))
            for n in state['nodes'] if n.startswith('cli')}


def test_bounds_premise(ha):
    """What resume_bounds and test_fault's lease token check rely on: the
    shortest failover outlasts the mgrs' lease, so the active mgr loses
    its lease in a database fault (only a primary can renew it) and a mgr
    takes it anew (the token advances)."""
    _d, state, _out = ha
    assert failover_s()[0] > state['lease_s'], (failover_s(), state['lease_s'])


@pytest.mark.parametrize('case', CASES)
def test_fault(ha, case, expect_log, request):
    """One fault under 4 clients' fio and metadata load. A SIGSTOP or a
    cut is held until the service resumed without the faulted host. Once
    it has: the other mgr holds the lease after a mgr fault (either after
    a database fault, in which the active mgr loses it and either may take
    it anew), with a token above the one before; the other database node
    is the primary after a database fault (the same one after a mgr
    fault); the service resumed within resume_bounds. Then no call
    failed, nothing acknowledged is lost, the namespace is consistent, no
    client was remounted, and a mgr that came back did not take the lease
    back. A case that fails after its fault began still heals it."""
    for r in EXPECT[case]:
        expect_log(r)
    d, state, _out = ha
    bound = resume_bounds(state)[case]
    h = hacluster.Ha(d)
    h.wait(h.healthy, 240, 'the cluster is whole before %s' % case)
    mgr, token0 = h.lease()
    prim = settled_primary(h)
    assert mgr is not None and token0 is not None
    clients = client_pids(state)
    load = Load(state, case)
    try:
        util.wait_until(lambda: load.going(0, 20), 120, 0.2, 'the load is going')
        assert not load.errors(), load.errors()
        t0 = time.monotonic()
        healed = []
        request.addfinalizer(lambda: heal_after_failure(h, case, mgr, prim, healed))
        undo = start_fault(h, case, mgr, prim)
        try:
            # resumed: every metadata workload had two ops acknowledged
            # since the fault took effect (one could be an op answered just
            # before it), or one failed; by the bound, counted from t0
            t_in = time.monotonic()
            util.wait_until(lambda: load.errors() or all(w.acked_after(t_in) >= 2
                                                         for w in load.meta),
                            max(0.0, t0 + bound - time.monotonic()), 0.1,
                            'the service to resume within %.1f s of %s (resume_bounds), '
                            'the fault still held' % (bound, case))
            assert not load.errors(), 'calls failed during %s: %s' % (case, load.errors())
            active, token = h.lease()
            now_prim = settled_primary(h)
        finally:
            undo()
        t1 = time.monotonic()
        if case in MGR_CASES:
            assert active == other(mgr), (
                '%s: the lease is held by %s (token %s), expected %s: the standby did not '
                'take over' % (case, active, token, other(mgr)))
        else:
            assert active in ('mgr', 'mgr2'), '%s: no mgr holds the lease' % case
        assert token is not None and token > token0, (
            '%s: lease token %s, was %s: it should have advanced (the lease was taken '
            'anew)' % (case, token, token0))
        expect_prim = other(prim) if case in DB_CASES else prim
        assert now_prim == expect_prim, '%s: the primary is %s, expected %s' % (
            case, now_prim, expect_prim)
        util.wait_until(lambda: load.going(t1, 30), 120, 0.2,
                        'the load goes on after the fault')
    finally:
        load.stop()
    assert not load.errors(), 'calls failed during %s: %s' % (case, load.errors())
    stall = max(w.longest_stall(t0) for w in load.meta)
    assert stall <= bound, ('%s: the service stalled %.1f s, more than the %.1f s that '
                            'resume_bounds allows' % (case, stall, bound))
    runs = sorted(b - a for f in load.fio for a, b, _p in f.done)
    fio_long = max(b - a for f in load.fio for a, b, _p in f.done if b > t0)
    healed.append(True)         # tried once: a failed heal is not tried again
    heal_fault(h, case, mgr, prim)
    if case in MGR_CASES:
        # the faulted mgr, back, stands by: the lease stayed where it went
        assert h.lease() == (active, token), (
            '%s: the lease moved after the fault: %s, was %s' % (case, h.lease(), (active, token)))
    load.check(state, case)
    out = scrub_namespace(h, state)
    assert client_pids(state) == clients, 'a client was restarted (remounted)'
    for m in state['mounts']:
        assert util.is_mounted(m)
    print('\n%s (active mgr %s, primary %s, lease token %d): service resumed after %.1f s '
          '(longest stall of a metadata workload; bound %.1f s); fault held %.1f s; longest '
          'fio run through the fault %.1f s (median run %.1f s); %d metadata ops and %d fio '
          'runs acknowledged, all there afterwards; then active %s (token %d), primary %s; '
          'scrub: %s' % (
              case, mgr, prim, token0, stall, bound, t1 - t0, fio_long, runs[len(runs) // 2],
              sum(len(w.acks) for w in load.meta), sum(len(f.done) for f in load.fio),
              active, token, now_prim, ' '.join(out.split())[:200]))


def test_down(ha, tmp_path):
    """down: no namespace, process, mount or directory is left (the logs
    are kept in this test's directory first)."""
    d, state, _out = ha
    shutil.copytree(os.path.join(d, 'logs'), str(tmp_path / 'logs'))
    pids = ns_pids(state)
    assert pids
    r = script('down', '--dir', d, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    check_gone(d, state, pids)


def kill_session(p):
    """SIGKILL the process group of p, a Popen started in a session of its
    own (start_new_session), never ours: refused (failing) unless p leads
    its own group."""
    pg = os.getpgid(p.pid)
    assert pg == p.pid and pg != os.getpgrp(), (
        'refusing to kill process group %d: it is not the own session of %d (ours is %d)'
        % (pg, p.pid, os.getpgrp()))
    os.killpg(pg, signal.SIGKILL)


def test_down_after_partial_up():
    """An up killed half-way (namespaces made, the database being set up)
    is undone by down all the same."""
    d = ha_dir()
    p = None
    state_path = os.path.join(d, 'state.json')

    def halfway():
        try:
            with open(state_path) as f:
                st = json.load(f)
        except (OSError, ValueError):
            return False
        mon = st.get('nodes', {}).get('mon', {})
        return bool(mon.get('autoctl_pid'))
    try:
        p = subprocess.Popen([SCRIPT, 'up', '--dir', d, '--clients', '1'],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        util.wait_until(halfway, 120, 0.1, 'up started the monitor')
        kill_session(p)
        p.wait(30)
        with open(state_path) as f:
            state = json.load(f)
        pids = ns_pids(state)
        assert pids, 'nothing ran in the namespaces'
        r = script('down', '--dir', d, check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        check_gone(d, state, pids)
    finally:
        if p is not None and p.poll() is None:
            kill_session(p)
            p.wait(30)
        if os.path.exists(state_path):
            script('down', '--dir', d, check=False)
        shutil.rmtree(d, ignore_errors=True)


def test_signal_node_refuses_outside_pids(tmp_path):
    """signal_node refuses, and signals nothing, when the node's pid list
    (a seam: ns_pids) holds a pid that does not run in the node's
    namespace (here our own pid, as when a kill -9 of a host once killed
    pytest), saying which; it refuses a node whose namespace is our own;
    it signals a process that does run in the node's namespace."""
    run = '%x%04x' % (os.getpid() & 0xffff, random.randrange(1 << 16))
    ns, own = 'rpfs-%s-sig' % run, 'rpfs-%s-own' % run
    got = []
    old = signal.signal(signal.SIGUSR1, lambda *_a: got.append(1))
    victim = None
    h = hacluster.Ha(str(tmp_path))
    h.state = {'nodes': {'x': {'ns': ns}, 'me': {'ns': own}}}
    try:
        for n in (ns, own):
            if os.environ.get('RPFS_TEST_NETNS'):      # scripts/test.sh deletes leftovers
                with open(os.environ['RPFS_TEST_NETNS'], 'a') as f:
                    f.write(n + '\n')
        util.run(['ip', 'netns', 'add', ns])
        util.run(['ip', 'netns', 'attach', own, str(os.getpid())])   # our namespace
        victim = subprocess.Popen(['nsenter', '--net=/run/netns/' + ns, '--', 'sleep', '60'])
        util.register_pid(victim.pid)
        inside = os.stat('/run/netns/' + ns).st_ino

        def entered():
            try:
                return os.stat('/proc/%d/ns/net' % victim.pid).st_ino == inside
            except OSError:
                return False
        util.wait_until(entered, 10, 0.05, 'sleep runs in %s' % ns)
        me = os.getpid()
        h.ns_pids = lambda _nss: [victim.pid, me]
        with pytest.raises(netns.NotInNamespace,
                           match=r'refusing signal %d to pid %d \(.*\): its network namespace '
                           r'\(.*, ours\) is not %s' % (signal.SIGUSR1, me, ns)):
            h.signal_node('x', signal.SIGUSR1)
        with pytest.raises(netns.NotInNamespace,
                           match=r'/run/netns/%s is our own network namespace' % own):
            h.signal_node('me', signal.SIGUSR1)
        time.sleep(0.2)
        assert not got, 'the test itself was signalled'
        assert victim.poll() is None, 'a pid of a refused list was signalled'
        h.ns_pids = lambda _nss: [victim.pid]
        assert h.signal_node('x', signal.SIGUSR1) == [victim.pid]
        assert victim.wait(10) == -signal.SIGUSR1
    finally:
        signal.signal(signal.SIGUSR1, old)
        if victim is not None and victim.poll() is None:
            victim.kill()
            victim.wait(10)
        for n in (ns, own):
            util.run(['ip', 'netns', 'del', n], check=False)
