"""The database's own failover and the fault matrix (issue 21, items 4
and 5): scripts/ha-cluster.sh brings up a pg_auto_failover monitor, a
PostgreSQL primary with a synchronous standby, two mgrs on the multi-host
store_uri (one active, --lease), 4 iods and 4 client mounts, each host in
a network namespace of its own (tests/integration/hacluster.py on
netns.py). Then:

- the primary's commits wait for the standby (status says so, from a query
  on the primary);
- the fault matrix, one case after another on the same cluster: kill -9
  of the active mgr, its SIGSTOP past its lease, its link cut past its
  lease; kill -9 of the database primary's host (postgres and its
  pg_autoctl), its link cut; the active mgr and the primary killed at
  once. During each, every client runs fio write-then-verify runs and a
  metadata workload (creates, renames, unlinks, mkdirs, each logged once
  acknowledged; workload.py). Each case checks that no call failed (the
  clients wait out a takeover or a database failover), that every
  acknowledged change and every verified fio file is there afterwards,
  read through another client, that `rpfs scrub --namespace` finds the
  namespace consistent, and that no client was remounted; it prints the
  time until service resumed (the longest stall of any workload; not
  asserted: the target is 15 s with default settings). The faulted host is
  brought back before the next case (the mgr restarted, the database node
  rejoined as a standby, the link up);
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
import time

import pytest

import hacluster
import netns
import util
import workload

pytestmark = [pytest.mark.host_only, pytest.mark.own_store]

SCRIPT = os.path.join(util.REPO, 'scripts', 'ha-cluster.sh')

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
        r = script('up', '--dir', d, '--clients', 4, check=False)
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
        the next client's mount."""
        for k, (w, f) in enumerate(zip(self.meta, self.fio)):
            other = os.path.join(other_mount(state, k), case, 'c%d' % k)
            w.check(os.path.join(other, 'meta'))
            f.verify_again(os.path.join(other, 'fio'))


# The cases, in this order (each starts from the cluster the last one left
# whole again: the active mgr and the primary move); run_fault does the
# fault, heal_fault brings the host back.
CASES = tuple(EXPECT)
HOLD_S = 15          # SIGSTOP and link cuts last past the mgrs' lease (10 s)


def run_fault(h, case, mgr, prim):
    """Do the fault of case to the active mgr (host mgr) or the primary
    (host prim); a SIGSTOP or a cut lasts HOLD_S and is undone here."""
    if case in ('mgr_kill9', 'mgr_db_kill9'):
        assert h.signal_node(mgr, signal.SIGKILL), '%s runs no process' % mgr
    if case in ('db_kill9', 'mgr_db_kill9'):
        pids = h.signal_node(prim, signal.SIGKILL)
        assert len(pids) >= 3, 'expected postgres and pg_autoctl in %s: %s' % (prim, pids)
    if case == 'mgr_sigstop':
        h.signal_node(mgr, signal.SIGSTOP)
        time.sleep(HOLD_S)
        h.signal_node(mgr, signal.SIGCONT)
    if case in ('mgr_link', 'db_link'):
        host = mgr if case == 'mgr_link' else prim
        h.link(host, False)
        try:
            time.sleep(HOLD_S)
        finally:
            h.link(host, True)


def heal_fault(h, case, mgr, prim):
    """Bring a killed host back (a SIGSTOPped or cut one comes back by
    itself: the old mgr restarts as a standby, the old primary rejoins as
    a standby) and wait until the cluster is whole again."""
    if case in ('db_kill9', 'mgr_db_kill9'):
        h.start_db(prim)
    if case in ('mgr_kill9', 'mgr_db_kill9'):
        h.start_mgr(mgr)
    h.wait(h.healthy, 240, 'the cluster is whole again after %s' % case)


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


@pytest.mark.parametrize('case', CASES)
def test_fault(ha, case, expect_log):
    """One fault under 4 clients' fio and metadata load: no call fails,
    nothing acknowledged is lost, the namespace is consistent, no client
    was remounted; the time until service resumed is printed."""
    for r in EXPECT[case]:
        expect_log(r)
    d, state, _out = ha
    h = hacluster.Ha(d)
    h.wait(h.healthy, 240, 'the cluster is whole before %s' % case)
    mgr, prim = h.active_mgr(), h.primary()
    clients = client_pids(state)
    load = Load(state, case)
    try:
        util.wait_until(lambda: load.going(0, 20), 120, 0.2, 'the load is going')
        assert not load.errors(), load.errors()
        t0 = time.monotonic()
        run_fault(h, case, mgr, prim)
        t1 = time.monotonic()
        util.wait_until(lambda: load.going(t1, 30), 180, 0.2,
                        'the load goes on after the fault')
    finally:
        load.stop()
    assert not load.errors(), 'calls failed during %s: %s' % (case, load.errors())
    stall = max(w.longest_stall(t0) for w in load.meta)
    runs = sorted(b - a for f in load.fio for a, b, _p in f.done)
    fio_long = max(b - a for f in load.fio for a, b, _p in f.done if b > t0)
    heal_fault(h, case, mgr, prim)
    load.check(state, case)
    out = scrub_namespace(h, state)
    assert client_pids(state) == clients, 'a client was restarted (remounted)'
    for m in state['mounts']:
        assert util.is_mounted(m)
    print('\n%s (active mgr %s, primary %s): service resumed after %.1f s (longest '
          'stall of a metadata workload; fault held %.1f s); longest fio run through '
          'the fault %.1f s (median run %.1f s); %d metadata ops and %d fio runs '
          'acknowledged, all there afterwards; now active %s, primary %s; scrub: %s' % (
              case, mgr, prim, stall, t1 - t0, fio_long, runs[len(runs) // 2],
              sum(len(w.acks) for w in load.meta), sum(len(f.done) for f in load.fio),
              h.active_mgr(), h.primary(), ' '.join(out.split())[:200]))


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
