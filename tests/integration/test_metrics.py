"""Prometheus /metrics on the mgr, each iod and a mount (README
"Observability", common/service/README.md "Metrics"), checked by a real
Prometheus.

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
import time
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
    """The /metrics text of the endpoint at addr (HOST:PORT)."""
    return http_get('http://%s/metrics' % addr)


_SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: -?\d+)?')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def parse(text):
    """Every sample of a Prometheus text exposition, as (name, {label:
    value}, value as a float), in order. Comment and blank lines are
    skipped; a line that is not a whole sample (name, labels each
    NAME="VALUE", a number) fails the test, so that nothing is compared
    as text: a value is matched by its number, never by a prefix of its
    digits."""
    out = []
    for ln in text.splitlines():
        if not ln or ln.startswith('#'):
            continue
        m = _SAMPLE.fullmatch(ln)
        assert m, 'not a sample line: %r' % ln
        labels = {}
        rest = m.group(2) or ''
        while rest:
            lm = _LABEL.match(rest)
            assert lm and lm.group(1) not in labels, 'bad labels in %r' % ln
            labels[lm.group(1)] = re.sub(r'\\(.)', lambda e: {'n': '\n'}.get(
                e.group(1), e.group(1)), lm.group(2))
            rest = rest[lm.end():]
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def value(text, name, **labels):
    """The value of the one sample of family name whose labels are exactly
    labels (no more, no fewer); the test fails if there is none or more
    than one."""
    vals = [v for n, l, v in parse(text) if n == name and l == labels]
    assert len(vals) == 1, (name, labels, vals)
    return vals[0]


def count(text, name, **labels):
    """value() of a counter series, 0 while it has no sample (the per-op
    families print an op from its first request on)."""
    vals = [v for n, l, v in parse(text) if n == name and l == labels]
    assert len(vals) <= 1, (name, labels, vals)
    return vals[0] if vals else 0


def one(text, name):
    """The value of the single sample of family name (any labels)."""
    vals = [v for n, _l, v in parse(text) if n == name]
    assert len(vals) == 1, (name, vals)
    return vals[0]


def names(text):
    """The names of the samples in text."""
    return {n for n, _l, _v in parse(text)}


def test_parse():
    """parse() takes a value as its number and labels whole: the helper the
    checks below compare numbers with (no substring of the text)."""
    t = ('# HELP x_total X.\n# TYPE x_total counter\nx_total{op="CREATE"} 10\n'
         'x_total{op="CREATE",errno="E\\"1"} 1\nup 1 1700000000000\ng -2.5e-3\n'
         'h_bucket{le="+Inf"} 3\n')
    assert parse(t) == [('x_total', {'op': 'CREATE'}, 10.0),
                        ('x_total', {'op': 'CREATE', 'errno': 'E"1'}, 1.0),
                        ('up', {}, 1.0), ('g', {}, -0.0025),
                        ('h_bucket', {'le': '+Inf'}, 3.0)]
    assert value(t, 'x_total', op='CREATE') == 10
    assert count(t, 'x_total', op='MKDIR') == 0
    for bad in ('x_total{op="CREATE"}1', 'x_total{op=CREATE} 1', 'x_total 1 2 3'):
        with pytest.raises(AssertionError):
            parse(bad)


def test_promtool_check_metrics(mc):
    """Every endpoint's text passes promtool's parser and linter, after
    some I/O so that the per-op families have samples. The I/O, a create
    and 1 MiB written, is counted exactly, as numbers from before and
    after it: one CREATE by the kernel, the mount and the mgr, and each
    IO_WRITE the mount made counted by one iod (with its latency, in the
    +Inf bucket); nothing is left in flight at the mount."""
    iods = ['iod%d' % i for i in range(NIODS)]

    def counts():
        fuse, mgr = scrape(mc.metrics['fuse']), scrape(mc.metrics['mgr'])
        return {
            'fuse CREATE': count(fuse, 'rpfs_client_fuse_requests_total', op='CREATE'),
            'mount CREATE': count(fuse, 'rpfs_client_requests_total', op='CREATE'),
            'mgr CREATE': count(mgr, 'rpfs_server_requests_total', op='CREATE'),
            'mount IO_WRITE': count(fuse, 'rpfs_client_requests_total', op='IO_WRITE'),
            'mount IO_WRITE latencies': count(fuse, 'rpfs_client_latency_seconds_bucket',
                                              op='IO_WRITE', le='+Inf'),
            'iods IO_WRITE': sum(count(scrape(mc.metrics[i]), 'rpfs_server_requests_total',
                                       op='IO_WRITE') for i in iods)}
    c0 = counts()
    with open(os.path.join(mc.mnt.path, 'lint'), 'wb') as f:
        f.write(os.urandom(MiB))
        os.fsync(f.fileno())
    c1 = counts()
    d = {k: c1[k] - c0[k] for k in c0}
    assert d['fuse CREATE'] == d['mount CREATE'] == d['mgr CREATE'] == 1, d
    assert d['mount IO_WRITE'] >= 1, d
    assert d['iods IO_WRITE'] == d['mount IO_WRITE latencies'] == d['mount IO_WRITE'], d
    for name, addr in sorted(mc.metrics.items()):
        text = scrape(addr)
        r = subprocess.run(['promtool', 'check', 'metrics'], input=text, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        assert r.returncode == 0, '%s: %s' % (name, r.stdout)
        assert value(text, 'process_resident_memory_bytes') > 0, name
    util.wait_until(lambda: value(scrape(mc.metrics['fuse']), 'rpfs_client_calls_in_flight')
                    == 0, 60, 0.2, 'no call in flight from the mount')
    assert value(scrape(mc.metrics['mgr']), 'rpfs_mgr_store_commit_seconds_count') >= 1
    iod_texts = [scrape(mc.metrics[i]) for i in iods]
    assert sum(value(t, 'rpfs_iod_disk_seconds_count', call='write') for t in iod_texts) >= 1
    assert all(value(t, 'rpfs_iod_slow_jobs', state='waiting') == 0 for t in iod_texts)


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
    assert 'rpfs_mgr_iod_up' in names(scrape(mc.metrics['mgr']))


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


def test_server_credits_in_use(mc):
    """Each server shows the credit limit it grants a connection and its
    requests in progress; a lock WAIT the mgr holds counts there until it
    is granted, then the gauge is back to 0."""
    for name in ['mgr'] + ['iod%d' % i for i in range(NIODS)]:
        text = scrape(mc.metrics[name])
        assert one(text, 'rpfs_net_credit_limit') == 32, name  # NET_DEFAULT_CREDITS
        one(text, 'rpfs_net_requests_in_progress')  # shown: its one sample
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
    assert value(fuse, 'rpfs_client_connected', role='mgr') == 1
    for i in range(NIODS):
        assert value(fuse, 'rpfs_client_connected', role='iod', iod=str(i)) == 1

    def idle():
        t = scrape(mc.metrics['fuse'])
        return all(value(t, 'rpfs_client_server_calls_in_flight', role='iod', iod=str(i))
                   == 0 for i in range(NIODS)) and \
            value(t, 'rpfs_client_server_calls_in_flight', role='mgr') == 0
    util.wait_until(idle, 60, 0.2, 'no call in flight from the mount')


def test_server_connection_gauges(mc, tmp_path):
    """The mgr's connections open: a second mount whose config file asks
    one connection per server ([client] connections = 1) adds that one to
    the mgr's gauge (authenticated) while mounted, and the gauge is back
    where it was once it is unmounted; on both transports. Over tcp also
    a connection that never does the handshake: open and unauthenticated
    until it closes, then neither (the verbs server has no raw socket to
    open)."""
    mgr = mc.metrics['mgr']

    def gauges():
        t = scrape(mgr)
        return (one(t, 'rpfs_net_connections_open'),
                one(t, 'rpfs_net_connections_unauthenticated'))
    util.wait_until(lambda: gauges()[1] == 0, 60, 0.2, 'no handshake in progress')
    before, _ = gauges()
    assert before >= 1  # the mount's
    conf = util.write_conf(mc, str(tmp_path / 'rpfs.conf'),
                           extra='[client]\nconnections = 1\n')
    m2 = mc.mount(str(tmp_path / 'm2'), 'conf=' + conf)
    try:
        os.listdir(m2.path)  # a call from a FUSE worker thread
        util.wait_until(lambda: gauges() == (before + 1, 0), 60, 0.2,
                        "the second mount's connection")
    finally:
        assert m2.umount()
    util.wait_until(lambda: gauges() == (before, 0), 60, 0.2,
                    "the second mount's connection closed")
    if util.transport() != 'tcp':
        return
    with socket.create_connection((util.HOST, mc.mgr_port)):
        util.wait_until(lambda: gauges() == (before + 1, 1), 60, 0.2,
                        'the handshake in progress')
    util.wait_until(lambda: gauges() == (before, 0), 60, 0.2, 'the connection gone')


def test_scrub_counters(mc, tmp_path):
    """`rpfs scrub --conf FILE --dry-run` against the cluster: the mgr's
    scrub counters move by what the scrub reports (each iod object it
    checked is one inode asked of the mgr, each orphan inode it lists one
    orphan reported), requests of both kinds are counted, and the
    last-request timestamp is set to a time during the scrub."""
    mgr = mc.metrics['mgr']
    t0 = scrape(mgr)
    inos0 = value(t0, 'rpfs_mgr_scrub_inodes_checked_total')
    orph0 = value(t0, 'rpfs_mgr_scrub_orphans_reported_total')
    req0 = value(t0, 'rpfs_mgr_scrub_requests_total', kind='inodes')
    orq0 = value(t0, 'rpfs_mgr_scrub_requests_total', kind='orphans')
    assert value(t0, 'rpfs_mgr_scrub_last_request_timestamp_seconds') == 0
    with open(os.path.join(mc.mnt.path, 'scrubbed'), 'wb') as f:
        f.write(os.urandom(MiB))
    conf = util.write_conf(mc, str(tmp_path / 'rpfs.conf'))
    start = time.time()
    r = util.run([util.binary('admin/rpfs'), 'scrub', '--conf', conf, '--dry-run',
                  '--grace', '0'], check=False, timeout=300)
    end = time.time()
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r'^objects checked: (\d+) on %d iods, (\d+) orphan inodes at the mgr$'
                  % NIODS, r.stdout, re.M)
    assert m, r.stdout
    objects, orphans = int(m.group(1)), int(m.group(2))
    assert objects >= 1  # the file just written
    t1 = scrape(mgr)
    assert value(t1, 'rpfs_mgr_scrub_inodes_checked_total') - inos0 == objects
    assert value(t1, 'rpfs_mgr_scrub_orphans_reported_total') - orph0 == orphans
    assert value(t1, 'rpfs_mgr_scrub_requests_total', kind='inodes') > req0
    assert value(t1, 'rpfs_mgr_scrub_requests_total', kind='orphans') > orq0
    assert start <= value(t1, 'rpfs_mgr_scrub_last_request_timestamp_seconds') <= end


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
    r0 = value(scrape(fuse), 'rpfs_client_server_reconnects_total', role='iod', iod='1')
    assert value(scrape(fuse), 'rpfs_client_server_reconnects_total', role='iod', iod='0') == 0
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
    assert value(t, 'rpfs_client_server_reconnects_total', role='iod', iod='1') > r0
    assert value(t, 'rpfs_client_connected', role='iod', iod='1') == 1
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
        assert out.count('<3>') == 1, out
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
            assert out.count('<3>') == 1, (fg, out)
            assert '<3>rpfs-fuse: -o metrics %s: Address already in use' % busy in out, \
                (fg, out)
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
    and iod N on PORT + 1 + N (iod 1 here: PORT + 2), each its own
    families; an unknown key is refused with the line."""
    base = util.free_port()
    conf = tmp_path / 'rpfs.conf'
    conf.write_text('[cluster]\nmgr = %s\ninsecure = true\n[mgr]\ndb = %s\n'
                    '[iod.0]\nhost = %s\nport = %d\n'
                    'data = %s\n[iod.1]\nhost = %s\nport = %d\ndata = %s\n'
                    '[metrics]\nlisten = %s\n'
                    % (util.hostport(util.free_port()), tmp_path / 'db', util.HOST,
                       util.free_port(), tmp_path / 'i0', util.HOST, util.free_port(),
                       tmp_path / 'i1', util.hostport(base)))
    procs = []
    try:
        for argv in (['iod/rpfs-iod', '--conf', str(conf), '--id', '1'],
                     ['mgr/rpfs-mgr', '--conf', str(conf)]):
            p = subprocess.Popen([util.binary(argv[0])] + argv[1:],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
            util.register_pid(p.pid)
            procs.append(p)
        util.wait_for_port(util.HOST, base + 2, 30)
        iod1 = names(scrape(util.hostport(base + 2)))
        assert 'rpfs_iod_slow_jobs' in iod1 and 'rpfs_mgr_iod_up' not in iod1
        util.wait_for_port(util.HOST, base, 30)
        mgr = names(scrape(util.hostport(base)))
        assert 'rpfs_mgr_iod_up' in mgr and 'rpfs_iod_slow_jobs' not in mgr
    finally:
        for p in procs:
            util.stop_proc(p, signal.SIGTERM, 15)
    bad = tmp_path / 'bad.conf'
    bad.write_text('[metrics]\nport = 1\n')
    rc, out = _start_fails([util.binary('mgr/rpfs-mgr'), '--conf', str(bad)])
    assert rc == 2 and 'bad.conf:2: [metrics]: unknown key "port" (expected listen)' in out, out
