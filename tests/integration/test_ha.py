"""The database's own failover (issue 21, item 4): scripts/ha-cluster.sh
brings up a pg_auto_failover monitor, a PostgreSQL primary with a
synchronous standby, the mgr on a multi-host store_uri, 4 iods and 2
client mounts, each host in a network namespace of its own
(tests/integration/hacluster.py on netns.py). Then:

- the primary's commits wait for the standby (status says so, from a query
  on the primary);
- a writer creates files through client 0 and logs each one acknowledged
  (create, write, fsync, close all returned 0); the database primary's
  host is killed (kill -9 of every process in its namespace: postgres and
  its pg_autoctl); ops may fail while the standby is promoted; the time
  until a create succeeds again is printed (not asserted); no remount;
- every acknowledged file is there, read through client 1;
- `down` leaves no namespace, no process and no mount behind, and so it
  does after an `up` killed half-way.

Root and network namespaces: host_only (the host stage of scripts/test.sh
runs it; the RDMA VM stage deselects it).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

import hacluster
import util

pytestmark = pytest.mark.host_only

SCRIPT = os.path.join(util.REPO, 'scripts', 'ha-cluster.sh')
PRE_FILES = 50
RESUME_LIMIT_S = 90        # a bound on the wait, not the target (15 s)

# What the mgr and the clients log while the database has no primary: the
# mgr's call that found its connection gone and could not reconnect (no
# read-write server yet), and the requests that failed with EIO.
STORE_RE = (r'^<3>rpfs-mgr: store_uri postgresql://rpfs@10\.77\.0\.61:5432,'
            r'10\.77\.0\.62:5433/rpfs\?target_session_attrs=read-write: ')
# libpq's words for the killed primary (db1) vary with the moment of the
# call: refused, or closed under a call started just before the kill
NO_PRIMARY_RE = (r'connection to server at "10\.77\.0\.61", port 5432 failed: (Connection '
                 r'refused|server closed the connection unexpectedly); ')
# With several mgrs (a build with --lease), the active one may also lose
# its lease while the database has no primary (its default lease, 10 s, is
# about the failover's time) and restart as a standby; the other one takes
# over.
FAILOVER_LOG = (
    STORE_RE + 'connection lost and reconnecting failed: ' + NO_PRIMARY_RE,
    STORE_RE + 'cannot reach the server: ' + NO_PRIMARY_RE,
    r'^<4>rpfs-mgr: lease: cannot reach the database: server closed the connection '
    r'unexpectedly$',
    r'^<4>rpfs-mgr: lease: this mgr is no longer the active one \(token \d+\): it stops '
    r'serving and restarts as a standby$',
)


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
    """An ha-cluster.sh cluster with 2 clients: (dir, state); down after
    (its logs copied to pytest's base directory first, since down removes
    them)."""
    d = ha_dir()
    keep = str(tmp_path_factory.mktemp('ha-logs'))
    try:
        r = script('up', '--dir', d, '--clients', 2, check=False)
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


class Writer(threading.Thread):
    """Creates w0, w1, ... in path, each with its own content, fsynced;
    logs every attempt as (i, start, end, errno name or None): acknowledged
    when every call returned 0."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.log = []
        self.stop = threading.Event()

    def run(self):
        i = 0
        while not self.stop.is_set():
            name = os.path.join(self.path, 'w%d' % i)
            t0 = time.monotonic()
            err = None
            try:
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    os.write(fd, b'file %d\n' % i)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as e:
                err = util.errno_name(e.errno)
            self.log.append((i, t0, time.monotonic(), err))
            i += 1
            time.sleep(0.1 if err else 0.02)

    def acked(self):
        return [i for i, _t0, _t1, err in list(self.log) if err is None]

    def failed(self):
        return [(i, err) for i, _t0, _t1, err in list(self.log) if err is not None]

    def resumed(self, since, n):
        """When creates went on again after since: the end of the first
        acknowledged create started after since and after the last failed
        one, once n of them are acknowledged; else None."""
        log = list(self.log)
        last_fail = max([t0 for _i, t0, _t1, err in log if err] + [since])
        ok = [t1 for _i, t0, t1, err in log if err is None and t0 > last_fail]
        return ok[0] if len(ok) >= n else None


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


@pytest.mark.expect_log(*FAILOVER_LOG)
def test_primary_killed(ha, expect_log):
    """kill -9 of the database primary's host under a writer: the mount
    keeps working without a remount once the standby is promoted, and
    every acknowledged file is there."""
    d, state, _out = ha
    cli0, cli1 = state['mounts'][0], state['mounts'][1]
    top = os.path.join(cli0, 'prim')
    os.mkdir(top)
    for i in range(PRE_FILES):
        with open(os.path.join(top, 'p%d' % i), 'wb') as f:
            f.write(b'pre %d\n' % i)
            f.flush()
            os.fsync(f.fileno())
    w = Writer(top)
    w.start()
    util.wait_until(lambda: len(w.acked()) >= 20, 60, what='20 creates before the kill')
    h = hacluster.Ha(d)
    victim = h.primary()
    assert victim == 'db1'
    pids = [int(x) for x in util.run(['ip', 'netns', 'pids',
                                      state['nodes'][victim]['ns']]).stdout.split()]
    assert len(pids) >= 3, 'expected postgres and pg_autoctl in %s: %s' % (victim, pids)
    t_kill = time.monotonic()
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass        # a short-lived backend that ended meanwhile
    # creates may fail (EIO) or wait until the standby is promoted; then
    # they go on
    try:
        util.wait_until(lambda: w.resumed(t_kill, 10) is not None, RESUME_LIMIT_S, 0.1,
                        '10 creates in a row acknowledged after the kill')
    finally:
        w.stop.set()
        w.join(30)
    failed = w.failed()
    print('\nprimary %s killed: service resumed %.1f s after the kill (the first '
          'create acknowledged after the last failed one); %d creates acknowledged, '
          '%d failed %s' % (victim, w.resumed(t_kill, 10) - t_kill, len(w.acked()),
                            len(failed), sorted(set(e for _i, e in failed))))
    new = h.primary()
    assert new == 'db2', 'the monitor has %s as primary' % new
    # every acknowledged file, through the other client (no page cache of
    # the writer's)
    other = os.path.join(cli1, 'prim')
    names = set(os.listdir(other))
    missing = [i for i in range(PRE_FILES) if 'p%d' % i not in names]
    missing += ['w%d' % i for i in w.acked() if 'w%d' % i not in names]
    assert not missing, 'acknowledged files missing after the failover: %s' % missing
    for i in range(PRE_FILES):
        with open(os.path.join(other, 'p%d' % i), 'rb') as f:
            assert f.read() == b'pre %d\n' % i
    for i in w.acked():
        with open(os.path.join(other, 'w%d' % i), 'rb') as f:
            assert f.read() == b'file %d\n' % i
    # the mgr, the iods and the clients still run (same processes: no remount)
    names = ['mgr', 'cli0', 'cli1'] + ['iod%d' % i for i in range(4)]
    names += ['mgr2'] if 'mgr2' in state['nodes'] else []
    for name in names:
        assert util.run(['ip', 'netns', 'pids', state['nodes'][name]['ns']]).stdout.split(), \
            '%s has no process left' % name
    for m in state['mounts']:
        assert util.is_mounted(m)


def test_down(ha):
    """down: no namespace, process, mount or directory is left."""
    d, state, _out = ha
    pids = ns_pids(state)
    assert pids
    r = script('down', '--dir', d, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    check_gone(d, state, pids)


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
        os.killpg(p.pid, signal.SIGKILL)
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
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(30)
        if os.path.exists(state_path):
            script('down', '--dir', d, check=False)
        shutil.rmtree(d, ignore_errors=True)
