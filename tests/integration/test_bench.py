"""scripts/bench.sh's metadata matrix and --state-dir (issue 21, item 7)
and its main table's rounds (issue 34): its arguments are checked before
anything starts; a tiny matrix run prints the side-by-side table with the
mgr's requests per op, each phase's counts read once the mount's reaper
has purged what the phase freed; a tiny main run in 2 rounds prints per
cell the median of the rounds and their spread, and ratios as the median
of the per-round ratios; a tiny workload run (--only workload) prints a
time per job and target, the mgr's requests per entry beside each rpfs
cell, and leaves the manifests of the trees it untarred. A benchmark is not a test: nothing here looks at
a rate, only at what is printed and how it was computed. The runs pass
--no-settle: waiting for an idle machine only matters for the figures."""
import http.server
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

import pytest

import util

BENCH = os.path.join(util.REPO, 'scripts', 'bench.sh')
MDMATRIX = os.path.join(util.REPO, 'tests', 'bench', 'mdmatrix.py')

pytestmark = pytest.mark.host_only


def bench(*args, timeout=900):
    """Run bench.sh with ARGS on the test build; the CompletedProcess."""
    env = dict(os.environ, RPFS_BUILD=util.build_dir(),
               RPFS_BENCH_PORT=str(util.free_port_run(100, '127.0.0.1')))
    # bench.sh raises /proc/sys/fs/pipe-max-size while it runs, which
    # test_tcp_zc.py and test_zerocopy.py count on, and drops the kernel's
    # caches, whose names test_leases.py counts on (util.global_lock)
    with util.global_lock('pipe-max-size'), util.global_lock('drop-caches'):
        return util.run([BENCH] + list(args), check=False, timeout=timeout, env=env)


@pytest.mark.parametrize('args,msg', [
    (['--state-dir', '/nonexistent/rpfs-bench-state'],
     'bench: error: --state-dir /nonexistent/rpfs-bench-state: no such directory'),
    (['--state-dir', '/etc/hostname'], 'bench: error: --state-dir /etc/hostname: not a directory'),
    (['--state-dir'], 'bench: error: --state-dir: expected DIR'),
    (['--stores', 'lmdb,sqlite'], 'bench: error: --stores: expected lmdb or postgresql, got "sqlite"'),
    (['--md-files', '0'], 'bench: error: --md-files: expected a positive number of files, got "0"'),
    (['--only', 'fio'], 'bench: error: --only: expected main, meta-matrix or workload, got "fio"'),
    (['--only', 'main', '--meta-matrix'], 'bench: error: --only main excludes --meta-matrix'),
    (['--rounds', '0'], 'bench: error: --rounds: expected 1..99 rounds, got "0"'),
    (['--rounds'], 'bench: error: --rounds: expected N'),
    (['--rounds', '2', '--only', 'meta-matrix'],
     'bench: error: --rounds shapes the main table, which --only meta-matrix, --scrape-cost '
     'and --seal-cost do not run'),
    (['--targets', 'rpfs,nfs'],
     'bench: error: --targets: expected some of rpfs,rpfs-fio,tmpfs,passthrough,'
     'passthrough-hop,glusterfs, got "nfs"'),
    (['--jobs', 'seqwrite2'],
     'bench: error: --jobs: expected some of seqwrite1,seqwrite4,seqread1,seqread4,'
     'randread4,randwrite4,md1,md100, got "seqwrite2"'),
    (['--size', '12q'], 'bench: error: --size: expected a size such as 64m, got "12q"'),
    (['--scrape-cost', '3x'], 'bench: error: --scrape-cost: expected 1..99 pairs, got "3x"'),
    (['--scrape-cost', '3', '--scrape'],
     'bench: error: --scrape-cost turns scraping on and off itself; leave --scrape out'),
    (['--seal-cost', '100'], 'bench: error: --seal-cost: expected 1..99 rounds, got "100"'),
    (['--seal-cost'], 'bench: error: --seal-cost: expected ROUNDS'),
    (['--seal-cost', '2', '--scrape-cost', '2'],
     'bench: error: --seal-cost excludes --only and --scrape-cost'),
])
def test_bad_arguments(args, msg):
    """A bad argument gets one line naming it and exit status 1, before
    anything is built, started or mounted."""
    r = bench(*args, timeout=60)
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines() == [msg]


@pytest.fixture(scope='module')
def matrix(tmp_path_factory):
    """One tiny matrix run (--only meta-matrix, 40 files per job) with the
    state of a second cluster in a --state-dir; its result, the state dir
    and the output dir."""
    state = tmp_path_factory.mktemp('bench-state')
    out = tmp_path_factory.mktemp('bench-out')
    r = bench('--only', 'meta-matrix', '--md-files', '40', '--state-dir', str(state),
              '--out', str(out), '--no-settle')
    return r, str(state), str(out)


def test_matrix_runs(matrix):
    r, state, _ = matrix
    assert r.returncode == 0, r.stderr[-3000:]
    fs = subprocess.run(['stat', '-f', '-c', '%T', state], capture_output=True,
                        text=True, check=True).stdout.strip()
    # the output names the state dir's file system
    assert 'bench: state on %s: file system %s' % (state, fs) in r.stderr
    # and everything bench.sh made there is gone
    assert os.listdir(state) == []


def test_matrix_table(matrix):
    """The table has a column per target (passthrough, lmdb on the tmpfs and
    on the state dir) and a row per phase and job, and every rpfs cell
    carries its requests per op and ratio to the passthrough."""
    r, state, _ = matrix
    lines = r.stdout.splitlines()
    head = [i for i, l in enumerate(lines) if l.startswith('op ')]
    assert len(head) == 1, r.stdout[-3000:]
    cols = lines[head[0]].split()
    assert cols[:3] == ['op', 'clients', 'passthrough']
    assert cols[3] == 'lmdb@tmpfs'
    assert cols[4].startswith('lmdb@') and len(cols) == 5
    rows = lines[head[0] + 1:]
    seen = set()
    for l in rows:
        m = re.match(r'(create|stat|rename|unlink|mkdir|rmdir)\s+(1 client|4 clients, one dir|'
                     r'4 clients, own dirs)\s+(.*)$', l)
        if not m:
            break
        seen.add((m.group(1), m.group(2)))
        cells = re.split(r'\s{2,}', m.group(3).strip())
        assert len(cells) == 3, l
        assert re.fullmatch(r'\d+/s', cells[0]), l
        for c in cells[1:]:
            assert re.fullmatch(r'\d+/s \d+\.\d req \d+\.\d\d cmt \(\d+\.\d\dx\)', c), l
    assert seen == {(p, j) for p in ('create', 'stat', 'rename', 'unlink', 'mkdir', 'rmdir')
                    for j in ('1 client', '4 clients, one dir', '4 clients, own dirs')}


def test_matrix_records(matrix):
    """meta-matrix.jsonl: per rpfs record and phase, the mgr's requests by
    op; a create costs at least one create request, a stat at least one
    request; meta-matrix.md holds the same table."""
    _, _, out = matrix
    with open(os.path.join(out, 'meta-matrix.jsonl')) as f:
        recs = [json.loads(l) for l in f]
    assert len(recs) == 9
    rp = [x for x in recs if x['target'] != 'passthrough']
    assert len(rp) == 6
    for x in rp:
        assert 'error' not in x, x
        assert x['create_mgr']['req_ops'].get('CREATE', 0) >= 1, x
        assert x['stat_mgr']['req_per_op'] >= 1, x
        assert x['unlink_mgr']['req_ops'].get('UNLINK', 0) >= 1, x
        assert x['rename_mgr']['req_ops'].get('RENAME', 0) >= 1, x
    with open(os.path.join(out, 'meta-matrix.md')) as f:
        md = f.read()
    assert '| op | clients | passthrough | lmdb@tmpfs |' in md


PURGES = ('PURGE', 'PURGE_MANY')


def test_matrix_purges_in_unlink_phase(matrix):
    """Each phase's counts are read once the mount's reaper is done: every
    file the unlink phase freed is reaped within it (1.00 per op, counted
    from the mount's rpfs.stats), its PURGE/PURGE_MANY are in its counts,
    and no other phase reaps or purges anything."""
    _, _, out = matrix
    with open(os.path.join(out, 'meta-matrix.jsonl')) as f:
        recs = [json.loads(l) for l in f]
    for x in (x for x in recs if x['target'] != 'passthrough'):
        assert x['unlink_mgr']['reaped_per_op'] == 1.0, x
        assert sum(x['unlink_mgr']['req_ops'].get(op, 0) for op in PURGES) > 0, x
        for ph in ('create', 'stat', 'rename', 'mkdir', 'rmdir'):
            assert x[ph + '_mgr']['reaped_per_op'] == 0, (ph, x)
            assert not any(op in x[ph + '_mgr']['req_ops'] for op in PURGES), (ph, x)


class _Metrics(http.server.BaseHTTPRequestHandler):
    """A mgr's /metrics page with PURGE_MANY count server.purges."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = ('rpfs_server_requests_total{op="UNLINK"} 8\n'
                'rpfs_server_requests_total{op="PURGE_MANY"} %d\n' % self.server.purges).encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_mgr():
    """An HTTP server on a free loopback port serving _Metrics."""
    srv = http.server.HTTPServer(('127.0.0.1', util.free_port()), _Metrics)
    srv.purges = 1
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def set_reap(path, queued, reaped):
    """Give path the user.rpfs.stats of a mount whose reaper was handed
    queued freed inodes and has reaped reaped of them."""
    os.setxattr(path, 'user.rpfs.stats',
                json.dumps({'reap_queued': queued, 'reap_inodes': reaped}).encode())


def snap(srv, mount, prefix, env=None):
    """mdmatrix.py snap (bench-md's hook) at the end of an unlink phase."""
    return subprocess.run([sys.executable, MDMATRIX, 'snap',
                           'http://127.0.0.1:%d/metrics' % srv.server_port, mount, prefix,
                           'end', 'unlink'], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **(env or {})))


def test_snap_waits_for_purges(tmp_path, fake_mgr):
    """The snapshot at the end of a phase waits until the mount's reaper
    has reaped every inode queued to it, and only then reads the mgr's
    counts: a reaper 2 inodes behind sends its last PURGE_MANY 0.3 s
    later, and the snapshot holds it. (A file stands in for the mount:
    mdmatrix.py reads its user.rpfs.stats; a page server for the mgr.)"""
    mount = tmp_path / 'mount'
    mount.write_text('')
    set_reap(str(mount), 42, 40)

    def reaper():
        time.sleep(0.3)
        fake_mgr.purges = 2  # the mgr counts the purge before answering it
        set_reap(str(mount), 42, 42)
    t = threading.Thread(target=reaper)
    t.start()
    r = snap(fake_mgr, str(mount), str(tmp_path / 'mx'))
    t.join()
    assert r.returncode == 0, r.stderr
    with open(str(tmp_path / 'mx.end.unlink.json')) as f:
        got = json.load(f)
    assert got['requests'] == {'UNLINK': 8, 'PURGE_MANY': 2}
    assert (got['reap_queued'], got['reap_inodes']) == (42, 42)


def test_snap_wait_bounded(tmp_path, fake_mgr):
    """A reaper that never catches up fails the snapshot after
    $RPFS_BENCH_REAP_WAIT seconds, saying how many inodes it still has,
    and writes no snapshot (bench-md then fails the run)."""
    mount = tmp_path / 'mount'
    mount.write_text('')
    set_reap(str(mount), 42, 40)
    r = snap(fake_mgr, str(mount), str(tmp_path / 'mx'), {'RPFS_BENCH_REAP_WAIT': '0.2'})
    assert r.returncode == 1
    assert r.stderr.strip() == (
        'mdmatrix.py snap: end unlink: after 0.2 s the reaper of %s still has 2 freed inodes '
        'to remove and purge (reap_queued 42, reap_inodes 40); the mgr\'s counts would miss '
        'their purges' % mount)
    assert not os.path.exists(str(tmp_path / 'mx.end.unlink.json'))


@pytest.fixture(scope='module')
def main_table(tmp_path_factory):
    """One tiny run of the main table: 2 rounds of a 1 MiB sequential
    overwrite and 40 files' metadata job on the rpfs mount and the
    passthrough; its result and its results.json."""
    out = tmp_path_factory.mktemp('bench-main')
    r = bench('--only', 'main', '--rounds', '2', '--jobs', 'seqwrite1,md1', '--targets',
              'rpfs,passthrough', '--size', '1m', '--md-files', '40', '--no-settle',
              '--out', str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    with open(os.path.join(str(out), 'results.json')) as f:
        return r, json.load(f)


def test_main_rounds_interleaved(main_table):
    """Every job ran once per round on every target, each round running a
    job on all targets before the next job, the targets' order rotating
    from round to round."""
    _, res = main_table
    runs = [(x['round'], x['job'], x['target']) for x in res['records']
            if x.get('section') == 'main']
    assert not [x for x in res['records'] if x.get('error')], res['records']
    assert runs == [(1, 'seqwrite1', 'rpfs'), (1, 'seqwrite1', 'passthrough'),
                    (1, 'md1', 'passthrough'), (1, 'md1', 'rpfs'),
                    (2, 'seqwrite1', 'passthrough'), (2, 'seqwrite1', 'rpfs'),
                    (2, 'md1', 'rpfs'), (2, 'md1', 'passthrough')]


def fmt(v, ratio=False):
    """report.py's rounding of a figure (ratios: 2 decimals)."""
    if ratio:
        return '%.2f' % v
    return '%.0f' % v if v >= 100 else '%.1f' % v if v >= 10 else '%.2f' % v


def test_main_table_medians(main_table):
    """The printed table says what its cells are; each target's cell is the
    median of its 2 rounds with their half range in % of the median, and
    rpfs/passthrough is the median of the 2 per-round ratios, with its
    spread."""
    r, res = main_table
    lines = r.stdout.splitlines()
    i = lines.index('Summary: median of 2 rounds per job and target, ±spread = half the '
                    'range of the rounds, (max - min) / 2, in % of the median; ratios: '
                    'median of the 2 per-round ratios, ± likewise:')
    head = re.split(r'\s{2,}', lines[i + 1].strip())
    assert head == ['job', 'unit', 'rpfs FUSE', 'passthrough FUSE', 'rpfs/passthrough',
                    'rpfs/GlusterFS', 'rpfs/hop', 'hop/passthrough']
    rows = {}
    for l in lines[i + 3:i + 7]:
        cells = re.split(r'\s{2,}', l.strip())
        assert len(cells) == len(head), l
        rows[cells[0]] = dict(zip(head, cells))
    by = {}
    for x in res['records']:
        by.setdefault((x['job'], x['target']), {})[x['round']] = x
    for title, job, met in (('seq overwrite 1 MiB, 1 job', 'seqwrite1', 'mbs'),
                            ('metadata, 1 dir: create', 'md1', 'create'),
                            ('metadata, 1 dir: stat', 'md1', 'stat'),
                            ('metadata, 1 dir: unlink', 'md1', 'unlink')):
        row = rows[title]
        for t, col in (('rpfs', 'rpfs FUSE'), ('passthrough', 'passthrough FUSE')):
            v = [by[(job, t)][k][met] for k in (1, 2)]
            med = statistics.median(v)
            assert row[col] == '%s ±%.0f%%' % (fmt(med), 100 * (max(v) - min(v)) / 2 / med), \
                (title, t, v, row)
        q = [by[(job, 'rpfs')][k][met] / by[(job, 'passthrough')][k][met] for k in (1, 2)]
        med = statistics.median(q)
        assert row['rpfs/passthrough'] == '%s ±%.0f%%' % (
            fmt(med, True), 100 * (max(q) - min(q)) / 2 / med), (title, q, row)
        assert [row[c] for c in head[5:]] == ['-', '-', '-'], row


def test_postgresql_store(tmp_path):
    """--stores lmdb,postgresql: on a build whose mgr knows --store, the
    table gets postgresql columns; on one without, one clear line and exit
    status 1, and no figures."""
    h = subprocess.run([util.binary('mgr/rpfs-mgr'), '--help'], capture_output=True, text=True)
    r = bench('--only', 'meta-matrix', '--md-files', '40', '--stores', 'lmdb,postgresql',
              '--out', str(tmp_path), '--no-settle')
    if '--store' in h.stdout + h.stderr:
        assert r.returncode == 0, r.stderr[-3000:]
        assert re.search(r'^op\s+clients\s+passthrough\s+lmdb@tmpfs\s+postgresql@tmpfs\s*$',
                         r.stdout, re.M), r.stdout[-3000:]
    else:
        assert r.returncode == 1
        assert r.stderr.strip().splitlines()[-1] == (
            'bench: error: --stores postgresql: %s/mgr/rpfs-mgr does not know --store '
            '(no PostgreSQL store in this build)' % util.build_dir())
        assert not os.path.exists(os.path.join(str(tmp_path), 'meta-matrix.md'))


WORKLOAD = os.path.join(util.REPO, 'tests', 'bench', 'workload.py')
WL_JOBS = ['tar x', 'git clone', 'cp -a', 'rm -rf (both trees)'] + [
    '%s, %s' % (ph, who) for who in ('1 proc', '4 procs, one dir', '4 procs, own dirs')
    for ph in ('create', 'stat', 'unlink')]


@pytest.mark.parametrize('args,msg', [
    (['--wl-files', '0'], 'bench: error: --wl-files: expected 1..999999 files, got "0"'),
    (['--wl-files', '2k'], 'bench: error: --wl-files: expected 1..999999 files, got "2k"'),
    (['--wl-files', '1000000', '--only', 'workload'],
     'bench: error: --wl-files: expected 1..999999 files, got "1000000"'),
    (['--wl-files'], 'bench: error: --wl-files: expected N'),
    (['--wl-files', '200'],
     'bench: error: --wl-files shapes the workload, which only --only workload runs'),
    (['--only', 'workload', '--meta-matrix'], 'bench: error: --only workload excludes --meta-matrix'),
    (['--only', 'workload', '--scrape'], 'bench: error: --only workload excludes --scrape'),
    (['--only', 'workload', '--rounds', '2', '--jobs', 'md1'],
     'bench: error: --jobs shapes the main table, which --only workload does not run'),
    (['--only', 'workload', '--targets', 'rpfs'],
     'bench: error: --targets shapes the main table, which --only workload does not run'),
    (['--only', 'workload', '--size', '1m'],
     'bench: error: --size shapes the main table, which --only workload does not run'),
    (['--only', 'workload', '--stores', 'lmdb,nfs'],
     'bench: error: --stores: expected lmdb or postgresql, got "nfs"'),
])
def test_workload_bad_arguments(args, msg):
    """A bad workload argument gets one line naming it and exit status 1,
    before anything is built, started or mounted."""
    r = bench(*args, timeout=60)
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines() == [msg]


def make_tree(tmp_path, name, nfiles, seed):
    """workload.py tree into tmp_path/name; its manifest's lines."""
    top = str(tmp_path / name)
    r = util.run(['/usr/bin/python3', WORKLOAD, 'tree', top, str(nfiles), str(seed)])
    info = json.loads(r.stdout)
    util.run(['/usr/bin/python3', WORKLOAD, 'manifest', top, top + '.manifest'])
    with open(top + '.manifest') as f:
        return info, f.read().splitlines()


def test_workload_tree_deterministic(tmp_path):
    """The same size and seed make the same tree (names, types, modes,
    sizes, mtimes, contents), another seed another one; the tree has
    nfiles files in nfiles/25 nested directories, sizes 0..64 KiB, most
    under 8 KiB."""
    info, a = make_tree(tmp_path, 'a', 500, 1)
    _, b = make_tree(tmp_path, 'b', 500, 1)
    _, c = make_tree(tmp_path, 'c', 500, 2)
    assert a == b
    assert a != c
    files = [l.split() for l in a if l.split()[1] == 'f']
    dirs = [l.split() for l in a if l.split()[1] == 'd']
    assert (len(files), len(dirs)) == (500, 500 // 25 + 1)
    assert info == {'files': 500, 'dirs': 20, 'bytes': sum(int(f[3]) for f in files),
                    'entries': 521}
    sizes = [int(f[3]) for f in files]
    assert max(sizes) <= 65536 and min(sizes) == 0
    assert sum(s < 8192 for s in sizes) > 0.7 * len(sizes)
    assert max(d[0].count('/') for d in dirs) >= 2  # nested


# the workload's rpfs columns: each mode (bench.sh WL_VARIANTS) on each store
WL_RPFS = ['rpfs', 'rpfs-pg', 'rpfs-leases', 'rpfs-leases-pg', 'rpfs-deleg',
           'rpfs-deleg-pg']


@pytest.fixture(scope='module')
def workload(tmp_path_factory):
    """One tiny workload run: 200 files, 40 per bench-md job, 1 round,
    the rpfs state in the mode's default place (under /var/tmp, which
    pg-temp.sh's server user can reach: pytest's tmp_path is private to
    root); its result and its output directory."""
    out = tmp_path_factory.mktemp('bench-wl')
    r = bench('--only', 'workload', '--wl-files', '200', '--md-files', '40', '--rounds', '1',
              '--no-settle', '--quick', '--out', str(out), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r, str(out)


# the run brings its own stores (lmdb and a PostgreSQL of its own) whatever
# RPFS_STORE says: the PostgreSQL pass need not run it again
@pytest.mark.own_store
def test_workload_table(workload):
    """The table has a row per job and a column per target (passthrough,
    rpfs and rpfs-pg, the same with -o leases and with -o leases,deleg,
    GlusterFS unless it did not start), each with a time;
    beside each rpfs cell its requests and commits per entry and its
    ratio to the passthrough."""
    r, out = workload
    lines = r.stdout.splitlines()
    head = [i for i, l in enumerate(lines) if l.startswith('job ')]
    assert len(head) == 1, r.stdout[-3000:]
    cols = re.split(r'\s{2,}', lines[head[0]].strip())
    gluster = 'bench: GlusterFS skipped' not in r.stderr
    want = ['job', 'entries', 'passthrough']
    for t in WL_RPFS:
        want += [t, t + ' req/e', t + ' cmt/e', t + '/pt']
    assert cols == want + (['glusterfs'] if gluster else []), cols
    if not gluster:
        assert 'GlusterFS: skipped' in r.stdout
    rows = [re.split(r'\s{2,}', l.strip()) for l in lines[head[0] + 1:head[0] + 1 + len(WL_JOBS)]]
    assert [x[0] for x in rows] == WL_JOBS, r.stdout[-3000:]
    entries = {'tar x': 209, 'cp -a': 209, 'rm -rf (both trees)': 418}
    for row in rows:
        assert len(row) == len(cols), row
        cell = dict(zip(cols, row))
        if row[0] in entries:
            assert cell['entries'] == str(entries[row[0]]), row
        elif row[0] != 'git clone':
            assert cell['entries'] == '40', row  # --md-files
        for t in ['passthrough'] + WL_RPFS + (['glusterfs'] if gluster else []):
            assert re.fullmatch(r'\d+(\.\d+)? s', cell[t]), (t, row)
        for t in WL_RPFS:
            assert re.fullmatch(r'\d+\.\d\d', cell[t + ' req/e']), (t, row)
            assert re.fullmatch(r'\d+\.\d{3}', cell[t + ' cmt/e']), (t, row)
            assert re.fullmatch(r'\d+\.\d\d', cell[t + '/pt']), (t, row)
    # the state was under /var/tmp, and its file system is named
    fs = subprocess.run(['stat', '-f', '-c', '%T', '/var/tmp'], capture_output=True,
                        text=True, check=True).stdout.strip()
    assert 'bench: state on /var/tmp: file system %s' % fs in r.stderr
    assert 'rpfs state (mgr database, iod data, PostgreSQL data): /var/tmp, file system %s' % fs \
        in r.stdout
    with open(os.path.join(out, 'workload.md')) as f:
        assert '| job | entries | passthrough | rpfs |' in f.read()


# the run brings its own stores (lmdb and a PostgreSQL of its own) whatever
# RPFS_STORE says: the PostgreSQL pass need not run it again
@pytest.mark.own_store
def test_workload_counts(workload):
    """The mgr's counts are those of each job: an untarred entry costs a
    create or mkdir, an rm -rf'd one an unlink or rmdir, a bench-md create
    a CREATE; with -o leases,deleg the mount answers those itself and
    sends them in BATCHes."""
    _, out = workload
    with open(os.path.join(out, 'workload.jsonl')) as f:
        recs = [json.loads(l) for l in f]
    assert not [x for x in recs if 'error' in x], recs
    for x in (x for x in recs if x['target'].startswith('rpfs')):
        ops = x['mgr']['req_ops']
        # with deleg (nearly) none of them reaches the mgr alone: the
        # mount sends them in BATCHes (which may land in the next snapshot:
        # they leave within 50 ms; the untarred tree is checked by
        # test_workload_untarred_tree); counts are per entry
        deleg = x['target'].startswith('rpfs-deleg')
        if x['job'] == 'untar':
            # 200 files, 9 directories below the untar directory, of 209
            made = ops.get('CREATE', 0) + ops.get('MKDIR', 0)
            assert made < 0.5 if deleg else made >= 1, x
        elif x['job'] == 'rm-rf':
            gone = ops.get('UNLINK', 0) + ops.get('RMDIR', 0)
            assert gone < 0.5 if deleg else gone >= 1, x
        elif x['job'].startswith('create-'):
            made = ops.get('CREATE', 0)
            assert made < 0.5 if deleg else made >= 1, x


# the run brings its own stores (lmdb and a PostgreSQL of its own) whatever
# RPFS_STORE says: the PostgreSQL pass need not run it again
@pytest.mark.own_store
def test_workload_untarred_tree(workload, tmp_path):
    """The tree untarred on each target equals the source: the manifest
    bench.sh took of it there (read back through that file system) equals
    the manifest of the same tree made here from the seed it printed."""
    r, out = workload
    seed = re.search(r'tree: 200 files in 8 directories, [0-9.]+ MB, seed (\d+)', r.stdout)
    assert seed, r.stdout[-3000:]
    _, want = make_tree(tmp_path, 'tree', 200, int(seed.group(1)))
    targets = ['passthrough'] + WL_RPFS
    if 'bench: GlusterFS skipped' not in r.stderr:
        targets.append('glusterfs')
    for t in [None] + targets:
        p = os.path.join(out, 'workload-manifest%s.txt' % ('-' + t if t else ''))
        with open(p) as f:
            got = f.read().splitlines()
        assert got == want, (t, set(got) ^ set(want))
    assert 'check: the untarred tree (round 1) equals the source on %s' % ' '.join(
        targets) in r.stdout
