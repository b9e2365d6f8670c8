"""scripts/bench.sh's metadata matrix and --state-dir (issue 21, item 7):
its arguments are checked before anything starts, and a tiny matrix run
prints the side-by-side table with the mgr's requests per op. A benchmark
is not a test: nothing here looks at a rate, only at what is printed."""
import json
import os
import re
import socket
import subprocess

import pytest

import util

BENCH = os.path.join(util.REPO, 'scripts', 'bench.sh')

pytestmark = pytest.mark.host_only


def port_run(n):
    """A port p with p..p+n-1 all free on loopback (bench.sh uses 100)."""
    for _ in range(50):
        p = util.free_port()
        if p + n > 65535:
            continue
        socks = []
        try:
            for q in range(p, p + n):
                s = socket.socket()
                socks.append(s)
                s.bind(('127.0.0.1', q))
            return p
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError('no run of %d free ports' % n)


def bench(*args, timeout=900):
    """Run bench.sh with ARGS on the test build; the CompletedProcess."""
    env = dict(os.environ, RPFS_BUILD=util.build_dir(), RPFS_BENCH_PORT=str(port_run(100)))
    return util.run([BENCH] + list(args), check=False, timeout=timeout, env=env)


@pytest.mark.parametrize('args,msg', [
    (['--state-dir', '/nonexistent/rpfs-bench-state'],
     'bench: error: --state-dir /nonexistent/rpfs-bench-state: no such directory'),
    (['--state-dir', '/etc/hostname'], 'bench: error: --state-dir /etc/hostname: not a directory'),
    (['--state-dir'], 'bench: error: --state-dir: expected DIR'),
    (['--stores', 'lmdb,sqlite'], 'bench: error: --stores: expected lmdb or postgresql, got "sqlite"'),
    (['--md-files', '0'], 'bench: error: --md-files: expected a positive number of files, got "0"'),
    (['--only', 'fio'], 'bench: error: --only: expected meta-matrix, got "fio"'),
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
              '--out', str(out))
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


def test_postgresql_store(tmp_path):
    """--stores lmdb,postgresql: on a build whose mgr knows --store, the
    table gets postgresql columns; on one without, one clear line and exit
    status 1, and no figures."""
    h = subprocess.run([util.binary('mgr/rpfs-mgr'), '--help'], capture_output=True, text=True)
    r = bench('--only', 'meta-matrix', '--md-files', '40', '--stores', 'lmdb,postgresql',
              '--out', str(tmp_path))
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
