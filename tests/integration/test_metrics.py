"""Prometheus /metrics on the mgr, each iod and a mount (README
"Observability", HACKING.md "Metrics"), checked by a real Prometheus.

One module-scoped cluster (1 mgr, 4 iods, each with --metrics) and one
mount with -o metrics= are scraped every second by Debian's prometheus,
started here on a free loopback port with its data under the test's tmp.
The checks go through Prometheus's HTTP API (urllib): every target up,
the byte counters grown by what was written, and, last, an iod killed -9
shown as down with the mgr's stale gauge risen, its lease run out and
the mount's connected gauge for it 0. The gauges of item 2 (lease, scrub,
credits in use, connection states) have their own checks before that. Each endpoint's text also
passes `promtool check metrics`. The address errors (busy, bad) are
checked on the binaries directly.
"""
import fcntl
import json
import os
import re
import signal
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request

import pytest

import util

MiB = 1 << 20
UNIT = 64 * 1024
NIODS = 4


def http_get(url, timeout=10):
    """The body of a GET as text."""
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


class Prometheus:
    """Debian's prometheus scraping the given jobs every second."""

    def __init__(self, tmp, jobs):
        self.port = util.free_port()
        self.dir = tmp
        conf = os.path.join(tmp, 'prometheus.yml')
        lines = ['global:', '  scrape_interval: 1s', '  scrape_timeout: 1s',
                 'scrape_configs:']
        for job, targets in jobs.items():
            lines += ['  - job_name: %s' % job, '    static_configs:']
            for addr, labels in targets:
                lines.append('      - targets: ["%s"]' % addr)
                if labels:
                    lines.append('        labels: %s' % json.dumps(labels))
        with open(conf, 'w') as f:
            f.write('\n'.join(lines) + '\n')
        self.log = os.path.join(tmp, 'prometheus.log')
        argv = ['prometheus', '--config.file=' + conf,
                '--storage.tsdb.path=' + os.path.join(tmp, 'data'),
                '--web.listen-address=' + util.hostport(self.port)]
        with open(self.log, 'ab') as fh:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh,
                                         stderr=fh, start_new_session=True)
        util.register_pid(self.proc.pid)
        self.url = 'http://%s' % util.hostport(self.port)

        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError('prometheus exited with %s:\n%s'
                                   % (self.proc.returncode, open(self.log).read()[-3000:]))
            try:
                return http_get(self.url + '/-/ready', 2) is not None
            except OSError:
                return False
        util.wait_until(ready, 60, 0.2, 'prometheus ready')

    def query(self, expr):
        """An instant query's vector as {frozenset(labels): value}."""
        url = '%s/api/v1/query?%s' % (self.url, urllib.parse.urlencode({'query': expr}))
        r = json.loads(http_get(url))
        assert r['status'] == 'success', r
        return {frozenset(s['metric'].items()): float(s['value'][1])
                for s in r['data']['result']}

    def value(self, expr):
        """The single value of expr, None while it has no sample."""
        v = self.query(expr)
        assert len(v) <= 1, (expr, v)
        return next(iter(v.values())) if v else None

    def wait_value(self, expr, ok, what, timeout=60):
        """Wait until expr has a value for which ok(value) holds."""
        def cond():
            v = self.value(expr)
            return v is not None and ok(v)
        util.wait_until(cond, timeout, 0.5, '%s (%s)' % (what, expr))
        return self.value(expr)

    def stop(self):
        util.stop_proc(self.proc, signal.SIGTERM, 30)


@pytest.fixture(scope='module')
def mc(tmp_path_factory):
    """A 4-iod cluster and a mount, every one with a metrics endpoint;
    .metrics maps a name (mgr, iod0.., fuse) to its HOST:PORT."""
    c = util.Cluster(str(tmp_path_factory.mktemp('met')), niods=NIODS, name='met')
    c.metrics = {}
    for i, d in enumerate(c.iods):
        c.metrics['iod%d' % i] = util.hostport(util.free_port())
        d.argv += ['--metrics', c.metrics['iod%d' % i]]
    c.metrics['mgr'] = util.hostport(util.free_port())
    c.mgr.argv += ['--metrics', c.metrics['mgr']]
    util.clusters.append(c)
    m = None
    try:
        c.start()
        c.metrics['fuse'] = util.hostport(util.free_port())
        path = str(tmp_path_factory.mktemp('metm'))
        # timeout above the mgr's 8 s lease: the STALE_MARK for the killed
        # iod is answered once its lease has surely run out (test_mirror)
        m = c.mount(path, 'allow_other,timeout=10,metrics=' + c.metrics['fuse'])
        c.mnt = m
        yield c
    finally:
        util.cleanup(m, c)


@pytest.fixture(scope='module')
def prom(mc, tmp_path_factory):
    """Prometheus scraping mc: jobs rpfs-mgr, rpfs-iod (label iod) and
    rpfs-fuse."""
    jobs = {'rpfs-mgr': [(mc.metrics['mgr'], None)],
            'rpfs-iod': [(mc.metrics['iod%d' % i], {'iod': str(i)}) for i in range(NIODS)],
            'rpfs-fuse': [(mc.metrics['fuse'], None)]}
    p = Prometheus(str(tmp_path_factory.mktemp('prom')), jobs)
    yield p
    p.stop()


def scrape(addr):
    return http_get('http://%s/metrics' % addr)


def sample(text, series):
    """The value of one series (name and labels as printed) in text."""
    m = re.search(r'^%s (\S+)$' % re.escape(series), text, re.M)
    assert m, series
    return float(m.group(1))


def test_promtool_check_metrics(mc):
    """Every endpoint's text passes promtool's parser and linter, after
    some I/O so that the per-op families have samples."""
    with open(os.path.join(mc.mnt.path, 'lint'), 'wb') as f:
        f.write(os.urandom(MiB))
        os.fsync(f.fileno())
    for name, addr in sorted(mc.metrics.items()):
        text = scrape(addr)
        r = subprocess.run(['promtool', 'check', 'metrics'], input=text, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        assert r.returncode == 0, '%s: %s' % (name, r.stdout)
        assert 'process_resident_memory_bytes ' in text, name
    # the per-op families have samples where requests went
    assert 'rpfs_server_requests_total{op="IO_WRITE"}' in scrape(mc.metrics['iod0']) or \
        'rpfs_server_requests_total{op="IO_WRITE"}' in scrape(mc.metrics['iod1'])
    fuse = scrape(mc.metrics['fuse'])
    assert 'rpfs_client_latency_seconds_bucket{op="IO_WRITE",le="+Inf"}' in fuse
    assert 'rpfs_client_requests_total{op="CREATE"} 1' in fuse
    assert sample(fuse, 'rpfs_client_calls_in_flight') >= 0
    mgr = scrape(mc.metrics['mgr'])
    assert 'rpfs_server_requests_total{op="CREATE"} 1' in mgr
    assert sample(mgr, 'rpfs_mgr_store_commit_seconds_count') >= 1
    iods = [scrape(mc.metrics['iod%d' % i]) for i in range(NIODS)]
    assert sum(sample(t, 'rpfs_iod_disk_seconds_count{call="write"}') for t in iods) >= 1
    assert all(sample(t, 'rpfs_iod_slow_jobs{state="waiting"}') == 0 for t in iods)


def test_only_metrics_path(mc):
    """Another path is 404, another method 405; the endpoint still serves."""
    with pytest.raises(urllib.error.HTTPError) as e:
        http_get('http://%s/other' % mc.metrics['mgr'])
    assert e.value.code == 404
    req = urllib.request.Request('http://%s/metrics' % mc.metrics['mgr'], data=b'x',
                                 method='POST')
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 405
    assert 'rpfs_mgr_iod_up' in scrape(mc.metrics['mgr'])


def test_all_targets_up(prom):
    """Prometheus scrapes all six targets: up == 1 for each."""
    def all_up():
        v = prom.query('up')
        return len(v) == NIODS + 2 and all(x == 1 for x in v.values()) and v
    v = util.wait_until(all_up, 60, 0.5, 'every target up')
    jobs = sorted(dict(k)['job'] for k in v)
    assert jobs == ['rpfs-fuse', 'rpfs-iod', 'rpfs-iod', 'rpfs-iod', 'rpfs-iod',
                    'rpfs-mgr']
    assert prom.value('sum(rpfs_mgr_iod_up)') == NIODS


def test_bytes_grow_by_written(mc, prom):
    """After writing N bytes through the mount, Prometheus sees the iods'
    write data received and the client's write data and wire bytes grow by
    at least N, and the write requests counted at both ends. An iod counts
    write data as pulled bulk bytes on tcp, by mechanism (inline, fast,
    RDMA Read) on verbs."""
    srv = ('sum(rpfs_net_bulk_bytes_total{job="rpfs-iod",direction="pull"}) + '
           'sum(rpfs_net_mechanism_bytes_total{job="rpfs-iod",'
           'mechanism=~"inline|fast|rdma_read"})')
    cli = 'sum(rpfs_net_bulk_bytes_total{job="rpfs-fuse",direction="pull"})'
    wire = 'sum(rpfs_net_wire_bytes_total{job="rpfs-fuse",direction="tx"})'
    ops = 'sum(rpfs_server_requests_total{job="rpfs-iod",op="IO_WRITE"}) or vector(0)'
    prom.wait_value('up{job="rpfs-fuse"}', lambda v: v == 1, 'fuse target up')
    s0 = prom.wait_value(srv, lambda v: True, 'server bytes')
    c0 = prom.wait_value(cli, lambda v: True, 'client bytes')
    w0 = prom.wait_value(wire, lambda v: True, 'client wire bytes')
    o0 = prom.wait_value(ops, lambda v: True, 'server writes')
    n = 8 * MiB
    with open(os.path.join(mc.mnt.path, 'grow'), 'wb') as f:
        for _ in range(n // MiB):
            f.write(os.urandom(MiB))
        os.fsync(f.fileno())
    prom.wait_value(srv, lambda v: v >= s0 + n, 'iods pulled %d more bytes' % n)
    prom.wait_value(cli, lambda v: v >= c0 + n, 'client wrote %d more bytes' % n)
    if util.transport() == 'tcp':  # verbs: the iods read the data by RDMA
        prom.wait_value(wire, lambda v: v >= w0 + n, 'client sent %d more bytes' % n)
    prom.wait_value(ops, lambda v: v >= o0 + n // MiB, 'IO_WRITEs counted')
    prom.wait_value('sum(rpfs_client_latency_seconds_count{op="IO_WRITE"})',
                    lambda v: v >= n // MiB, 'client IO_WRITE latencies')


MONITORING = os.path.join(util.REPO, 'scripts', 'monitoring')


def test_rules_and_dashboard(mc):
    """scripts/monitoring: promtool checks the example scrape config and
    the alerting rules and runs the rules' unit tests; every series the
    rules and the dashboard name is one the endpoints serve."""
    for args in (['check', 'config', 'prometheus.yml'],
                 ['check', 'rules', 'rpfs-rules.yml'],
                 ['test', 'rules', 'rpfs-rules.test.yml']):
        r = subprocess.run(['promtool'] + args, cwd=MONITORING, text=True, timeout=120,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert r.returncode == 0, '%s: %s' % (args, r.stdout)
    served = set()
    for addr in mc.metrics.values():
        served |= set(re.findall(r'^# TYPE (\S+) ', scrape(addr), re.M))
    with open(os.path.join(MONITORING, 'rpfs-dashboard.json')) as f:
        dash = json.load(f)
    exprs = [t['expr'] for p in dash['panels'] for t in p['targets']]
    with open(os.path.join(MONITORING, 'rpfs-rules.yml')) as f:
        exprs.append(f.read())
    used = set()
    for e in exprs:
        used |= set(re.findall(r'\b((?:rpfs|process)_[a-z0-9_]+)', e))
    assert used
    missing = sorted(n for n in used
                     if n not in served and re.sub(r'_(bucket|sum|count)$', '', n) not in served)
    assert not missing, missing


def one(text, name):
    """The value of the single series of family name (any labels) in text."""
    vals = re.findall(r'^%s(?:\{[^}]*\})? (\S+)$' % re.escape(name), text, re.M)
    assert len(vals) == 1, (name, vals)
    return float(vals[0])


def test_server_credits_in_use(mc):
    """Each server shows the credit limit it grants a connection and its
    requests in progress; a lock WAIT the mgr holds counts there until it
    is granted, then the gauge is back to 0."""
    for name in ['mgr'] + ['iod%d' % i for i in range(NIODS)]:
        text = scrape(mc.metrics[name])
        assert one(text, 'rpfs_net_credit_limit') == 32, name  # NET_DEFAULT_CREDITS
        assert one(text, 'rpfs_net_requests_in_progress') >= 0, name
    path = os.path.join(mc.mnt.path, 'credits')
    with open(path, 'wb') as f:
        f.write(b'x')
    holder = open(path, 'r+b')
    fcntl.lockf(holder, fcntl.LOCK_EX)
    waiter = subprocess.Popen(
        ['/usr/bin/python3', '-c', 'import fcntl, sys\nf = open(sys.argv[1], "r+b")\n'
         'fcntl.lockf(f, fcntl.LOCK_EX)\nprint("locked", flush=True)', path],
        stdout=subprocess.PIPE, text=True)
    util.register_pid(waiter.pid)
    try:
        mgr = mc.metrics['mgr']
        util.wait_until(lambda: one(scrape(mgr), 'rpfs_mgr_lock_waiters') >= 1, 60, 0.2,
                        'the WAIT queued at the mgr')
        assert one(scrape(mgr), 'rpfs_net_requests_in_progress') >= 1
    finally:
        fcntl.lockf(holder, fcntl.LOCK_UN)
        holder.close()
        out, _ = waiter.communicate(timeout=60)
    assert out.strip() == 'locked'
    util.wait_until(lambda: one(scrape(mgr), 'rpfs_net_requests_in_progress') == 0, 60,
                    0.2, 'no request in progress at the mgr')


def test_mount_server_gauges(mc):
    """The mount shows each server connected, and its calls in flight per
    server back to 0 once the I/O is done."""
    with open(os.path.join(mc.mnt.path, 'spread'), 'wb') as f:
        f.write(os.urandom(4 * MiB))
        os.fsync(f.fileno())
    fuse = scrape(mc.metrics['fuse'])
    assert sample(fuse, 'rpfs_client_connected{role="mgr"}') == 1
    for i in range(NIODS):
        assert sample(fuse, 'rpfs_client_connected{role="iod",iod="%d"}' % i) == 1

    def idle():
        t = scrape(mc.metrics['fuse'])
        return all(sample(t, 'rpfs_client_server_calls_in_flight{role="iod",iod="%d"}' % i)
                   == 0 for i in range(NIODS)) and \
            sample(t, 'rpfs_client_server_calls_in_flight{role="mgr"}') == 0
    util.wait_until(idle, 60, 0.2, 'no call in flight from the mount')


def test_server_connection_gauges(mc):
    """A connection that never does the handshake shows on the mgr as open
    and unauthenticated until it closes (tcp: the verbs server has no raw
    socket to open)."""
    mgr = mc.metrics['mgr']

    def unauth():
        return one(scrape(mgr), 'rpfs_net_connections_unauthenticated')
    util.wait_until(lambda: unauth() == 0, 60, 0.2, 'no handshake in progress')
    if util.transport() != 'tcp':
        return
    before = one(scrape(mgr), 'rpfs_net_connections_open')
    assert before >= 1  # the mount's
    with socket.create_connection((util.HOST, mc.mgr_port)):
        util.wait_until(lambda: unauth() == 1, 60, 0.2, 'the handshake in progress')
        assert one(scrape(mgr), 'rpfs_net_connections_open') >= before + 1
    util.wait_until(lambda: unauth() == 0, 60, 0.2, 'the connection gone')


def test_scrub_counters(mc, tmp_path):
    """`rpfs scrub --conf FILE --dry-run` against the cluster: the mgr's
    scrub counters move (requests of both kinds, inodes checked) and the
    last-request timestamp is set."""
    mgr = mc.metrics['mgr']
    t0 = scrape(mgr)
    inos0 = sample(t0, 'rpfs_mgr_scrub_inodes_checked_total')
    req0 = sample(t0, 'rpfs_mgr_scrub_requests_total{kind="inodes"}')
    orq0 = sample(t0, 'rpfs_mgr_scrub_requests_total{kind="orphans"}')
    assert sample(t0, 'rpfs_mgr_scrub_last_request_timestamp_seconds') == 0
    with open(os.path.join(mc.mnt.path, 'scrubbed'), 'wb') as f:
        f.write(os.urandom(MiB))
    conf = util.write_conf(mc, str(tmp_path / 'rpfs.conf'))
    r = util.run([util.binary('admin/rpfs'), 'scrub', '--conf', conf, '--dry-run',
                  '--grace', '0'], check=False, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    t1 = scrape(mgr)
    assert sample(t1, 'rpfs_mgr_scrub_requests_total{kind="inodes"}') > req0
    assert sample(t1, 'rpfs_mgr_scrub_requests_total{kind="orphans"}') > orq0
    assert sample(t1, 'rpfs_mgr_scrub_inodes_checked_total') > inos0
    assert sample(t1, 'rpfs_mgr_scrub_orphans_reported_total') >= 0
    assert sample(t1, 'rpfs_mgr_scrub_last_request_timestamp_seconds') > 0


def test_iod_killed_shows_down(mc, prom, expect_log):
    """Kill -9 iod 1 and overwrite a mirrored file: Prometheus shows iod
    1's target down, the mgr's iod-up gauge for it 0, its stale gauge
    risen, its lease run out, and the mount's connected gauge for it 0.
    test_iod_restarted_reconnects starts it again."""
    c = mc
    for err in (util.client_iod_fail_log(c, 1, 'read|write|fsync'),
                util.mgr_iod_down_log(c, 1)):
        expect_log(err)
    d = os.path.join(c.mnt.path, 'mirrored')
    os.mkdir(d)
    os.setxattr(d, 'user.rpfs.layout', ('unit=%d,count=2,mirror=2' % UNIT).encode())
    f = os.path.join(d, 'f')
    with open(f, 'wb') as fh:
        fh.write(os.urandom(4 * MiB))
        os.fsync(fh.fileno())
    stale = 'rpfs_mgr_stale_objects{iod="1"}'
    lease = 'rpfs_mgr_iod_lease_expiry_timestamp_seconds{iod="%d"} - time()'
    before = prom.wait_value(stale, lambda v: True, 'stale gauge of iod 1')
    prom.wait_value('up{job="rpfs-iod",iod="1"}', lambda v: v == 1, 'iod 1 up')
    prom.wait_value(lease % 1, lambda v: v > 0, 'iod 1 holds a lease')
    c.kill_iod(1)
    with open(f, 'r+b') as fh:
        fh.write(os.urandom(4 * MiB))
        os.fsync(fh.fileno())
    prom.wait_value('up{job="rpfs-iod",iod="1"}', lambda v: v == 0, 'iod 1 target down')
    prom.wait_value('rpfs_mgr_iod_up{iod="1"}', lambda v: v == 0, 'mgr: iod 1 down')
    prom.wait_value(stale, lambda v: v > before, 'stale gauge of iod 1 risen')
    prom.wait_value(lease % 1, lambda v: v <= 0, "iod 1's lease run out, not renewed")
    prom.wait_value('rpfs_client_connected{role="iod",iod="1"}', lambda v: v == 0,
                    'mount: iod 1 not connected')
    assert prom.value('up{job="rpfs-iod",iod="0"}') == 1
    assert prom.value('rpfs_mgr_iod_up{iod="0"}') == 1
    prom.wait_value(lease % 0, lambda v: v > 0, 'iod 0 still holds a lease')
    assert prom.value('rpfs_client_connected{role="iod",iod="0"}') == 1
    assert prom.value('rpfs_client_connected{role="mgr"}') == 1


def test_iod_restarted_reconnects(mc, prom):
    """Start the killed iod 1 again and write across every iod: the mount
    reconnects to it (its reconnect counter moves, it shows connected
    again) and the mgr renews its lease. Runs after the kill."""
    c = mc
    fuse = mc.metrics['fuse']
    r0 = sample(scrape(fuse), 'rpfs_client_server_reconnects_total{role="iod",iod="1"}')
    assert sample(scrape(fuse), 'rpfs_client_server_reconnects_total{role="iod",iod="0"}') == 0
    c.start_iod(1)
    d = os.path.join(c.mnt.path, 'wide')
    os.mkdir(d)
    os.setxattr(d, 'user.rpfs.layout', ('unit=%d,count=%d' % (UNIT, NIODS)).encode())

    def written():
        try:
            with open(os.path.join(d, 'f'), 'wb') as fh:
                fh.write(os.urandom(NIODS * UNIT))
                os.fsync(fh.fileno())
            return True
        except OSError:
            return False  # iod 1 still held down after its failure
    util.wait_until(written, 60, 0.5, 'a write across every iod')
    t = scrape(fuse)
    assert sample(t, 'rpfs_client_server_reconnects_total{role="iod",iod="1"}') > r0
    assert sample(t, 'rpfs_client_connected{role="iod",iod="1"}') == 1
    prom.wait_value('rpfs_mgr_iod_lease_expiry_timestamp_seconds{iod="1"} - time()',
                    lambda v: v > 0, "iod 1's lease renewed")


def _start_fails(argv, timeout=30):
    """Run a program expected to refuse to start: (exit code, output)."""
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return r.returncode, r.stdout


def test_busy_address_is_one_error(tmp_path):
    """A metrics address in use: the iod and the mgr exit non-zero at
    start with one error line naming the option and the address."""
    with socket.socket() as s:
        s.bind((util.HOST, 0))
        s.listen(1)
        busy = util.hostport(s.getsockname()[1])
        rc, out = _start_fails([util.binary('iod/rpfs-iod'), '--listen',
                                util.hostport(0), '--data', str(tmp_path / 'd'),
                                '--metrics', busy] + util.insecure_args())
        assert rc == 1, out
        assert out.count('<3>') == 1, out
        assert '<3>rpfs-iod: --metrics %s: Address already in use' % busy in out
        rc, out = _start_fails([util.binary('mgr/rpfs-mgr'), '--listen',
                                util.hostport(0), '--db', str(tmp_path / 'db'),
                                '--iod', util.hostport(util.free_port()),
                                '--metrics', busy] + util.insecure_args())
        assert rc == 1, out
        assert '<3>rpfs-mgr: --metrics %s: Address already in use' % busy in out


def test_mount_busy_address(mc, tmp_mnt):
    """A mount whose metrics address is in use fails with one error and a
    non-zero exit, in the foreground and as a daemon, and mounts nothing."""
    with socket.socket() as s:
        s.bind((util.HOST, 0))
        s.listen(1)
        busy = util.hostport(s.getsockname()[1])
        for fg in (['-f'], []):
            rc, out = _start_fails([util.binary('fuse-client/rpfs-fuse'),
                                    util.hostport(mc.mgr_port), tmp_mnt] + fg +
                                   ['-o', 'metrics=' + busy])
            assert rc == 1, (fg, out)
            assert '-o metrics %s: Address already in use' % busy in out, (fg, out)
            assert not util.is_mounted(tmp_mnt)


def test_bad_address_is_one_error(tmp_path, tmp_mnt):
    """A malformed address is refused at parsing (exit 2) by the daemons
    and by the mount, naming the option."""
    rc, out = _start_fails([util.binary('iod/rpfs-iod'), '--listen', util.hostport(0),
                            '--data', str(tmp_path / 'd'), '--metrics', 'nowhere'])
    assert rc == 2 and 'rpfs-iod: --metrics: expected HOST:PORT, got "nowhere"' in out, out
    rc, out = _start_fails([util.binary('fuse-client/rpfs-fuse'), util.hostport(1),
                            tmp_mnt, '-f', '-o', 'metrics=127.0.0.1:99999'])
    assert rc == 2 and '-o metrics: expected HOST:PORT, got "127.0.0.1:99999"' in out, out


def test_config_file_ports(tmp_path):
    """[metrics] listen = HOST:PORT in rpfs.conf: the mgr serves on PORT
    and iod N on PORT + 1 + N; an unknown key is refused with the line."""
    base = util.free_port()
    conf = tmp_path / 'rpfs.conf'
    conf.write_text('[cluster]\nmgr = %s\ninsecure = true\n[iod.0]\nhost = %s\nport = %d\n'
                    'data = %s\n[iod.1]\nhost = %s\nport = %d\ndata = %s\n'
                    '[metrics]\nlisten = %s\n'
                    % (util.hostport(util.free_port()), util.HOST, util.free_port(),
                       tmp_path / 'i0', util.HOST, util.free_port(), tmp_path / 'i1',
                       util.hostport(base)))
    p = subprocess.Popen([util.binary('iod/rpfs-iod'), '--conf', str(conf), '--id', '1'],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    util.register_pid(p.pid)
    try:
        util.wait_for_port(util.HOST, base + 2, 30)
        assert 'rpfs_net_messages_total' in scrape(util.hostport(base + 2))
    finally:
        util.stop_proc(p, signal.SIGTERM, 15)
    bad = tmp_path / 'bad.conf'
    bad.write_text('[metrics]\nport = 1\n')
    rc, out = _start_fails([util.binary('mgr/rpfs-mgr'), '--conf', str(bad)])
    assert rc == 2 and 'bad.conf:2: [metrics]: unknown key "port" (expected listen)' in out, out
