"""Fixtures for the rpfs integration tests.

- cluster / mnt: one shared 4-iod cluster and one allow_other mount for the
  whole session, used by the many small non-destructive checks.
- workdir: a fresh directory on the shared mount for each test.
- dcluster: a fresh 4-iod cluster per test, for tests that kill, restart or
  otherwise disturb daemons (torn down after the test).
- pg_store: with RPFS_STORE=postgresql, a temporary PostgreSQL cluster for
  the session (see util.store()).
- Log watch: after each test phase the new part of every daemon's and
  client's log is scanned. A line starting with <0>..<4> fails the test
  unless the test declared it expected (marker expect_log(regex...) or the
  expect_log fixture); a sanitizer report always fails it, and so does a
  daemon or client that died.
"""
import os
import re
import shutil
import tempfile

import pytest

import util


def pytest_configure(config):
    config.addinivalue_line('markers', 'expect_log(*regex): log lines at priority <0>..<4> '
                            'matching one of these regexes do not fail the test')


# The modules that take longest, longest first (HACKING.md "Time budget").
# Under pytest-xdist with --dist loadfile each worker takes whole modules in
# collection order, so the long ones start first and the short ones fill
# in behind them (a long module that started last would finish last, alone).
SLOW_FIRST = ('test_ha', 'test_data', 'test_netfault', 'test_mirror', 'test_meta',
              'test_bench', 'test_metrics', 'test_scrub', 'test_operator', 'test_faults',
              'test_locks', 'test_restart', 'test_lead', 'test_truncate', 'test_groupcommit',
              'test_stall', 'test_listio', 'test_keys', 'test_ops', 'test_pgstore')


def _slow_rank(item):
    """item's module's place in SLOW_FIRST (the rest after, as collected)."""
    mod = item.nodeid.split('::', 1)[0].rsplit('/', 1)[-1][:-3]
    return SLOW_FIRST.index(mod) if mod in SLOW_FIRST else len(SLOW_FIRST)


def pytest_collection_modifyitems(config, items):
    """The slow modules first (SLOW_FIRST; a stable sort keeps each
    module's own order). Then, on the PostgreSQL store (RPFS_STORE=postgresql), deselect the tests
    marked lmdb_only (they test the LMDB map itself: its size and headroom
    rule, which that store does not have) and own_store (they bring their
    own PostgreSQL whatever RPFS_STORE says, so the LMDB pass ran them
    already). Deselected, not skipped: they are not this run's to pass or
    fail, and pytest reports the count."""
    items.sort(key=_slow_rank)
    if util.store() != 'postgresql':
        return
    marks = ('lmdb_only', 'own_store')
    keep = [i for i in items if not any(i.get_closest_marker(m) for m in marks)]
    gone = [i for i in items if any(i.get_closest_marker(m) for m in marks)]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = keep


@pytest.fixture(scope='session', autouse=True)
def pg_store(request):
    """With RPFS_STORE=postgresql: the session's PostgreSQL cluster
    (pg_server), on which every Cluster makes a database of its own."""
    if util.store() != 'postgresql':
        yield None
        return
    yield request.getfixturevalue('pg_server')


@pytest.fixture(scope='session')
def pg_server():
    """A temporary PostgreSQL cluster for the whole session
    (scripts/pg-temp.sh) unless $RPFS_PG_URI names one, named to util by
    $RPFS_PG_URI (util.pg_new_db). Also asked for by tests that need
    PostgreSQL whatever RPFS_STORE is (test_lead.py)."""
    if os.environ.get('RPFS_PG_URI'):
        yield os.environ['RPFS_PG_URI']
        return
    # not under the basetemp: the server's user (rpfs-pg when we are root)
    # must reach the directory, and pytest's are closed to others
    d = tempfile.mkdtemp(prefix='rpfs-pg-', dir='/tmp')
    os.chmod(d, 0o755)
    script = os.path.join(util.REPO, 'scripts', 'pg-temp.sh')
    out = util.run([script, 'start', d], timeout=180).stdout.split()
    os.environ['RPFS_PG_URI'] = out[-1]
    os.environ['RPFS_PG_SOCKDIR'] = d
    try:
        yield out[-1]
    finally:
        del os.environ['RPFS_PG_URI']
        del os.environ['RPFS_PG_SOCKDIR']
        util.run([script, 'stop', d], check=False, timeout=120)
        shutil.rmtree(d, ignore_errors=True)


def _check_logs(item, when):
    """Scan the logs written since the last check of this test; fail the
    phase (or annotate an already failed one) on bad lines or dead processes."""
    watch = getattr(item, '_rpfs_watch', None)
    if watch is None:
        return []
    bad = watch.collect()
    for c in util.clusters:
        bad += ['%s died' % d for d in c.check_alive()]
    return bad


def _report(item, when, outcome, bad):
    if not bad:
        return
    text = 'unexpected log lines / process deaths during %s:\n  %s' % (when, '\n  '.join(bad[:50]))
    if outcome.excinfo is None:
        pytest.fail(text, pytrace=False)
    item.add_report_section(when, 'rpfs logs', text)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    item._rpfs_watch = util.LogWatch()
    for m in item.iter_markers('expect_log'):
        for r in m.args:
            item._rpfs_watch.expect(r)
    outcome = yield
    _report(item, 'setup', outcome, _check_logs(item, 'setup'))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    outcome = yield
    _report(item, 'call', outcome, _check_logs(item, 'call'))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    outcome = yield
    _report(item, 'teardown', outcome, _check_logs(item, 'teardown'))
    # the logs of processes that exited were read to their end just now
    util.LogFile.prune()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure, attach the tail of every log of the live clusters."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        seen = set()
        for c in util.clusters:
            for d in c.daemons() + c.mounts:
                if d.log.path in seen:
                    continue
                seen.add(d.log.path)
                rep.sections.append(('log %s' % d.log.name, d.log.tail(30)))


@pytest.fixture
def expect_log(request):
    """expect_log(regex): lines at <0>..<4> matching regex are expected."""
    def add(regex):
        request.node._rpfs_watch.expect(regex)
    return add


def _start_cluster(path, **kw):
    c = util.Cluster(path, **kw)
    util.clusters.append(c)
    try:
        c.start()
    except BaseException:
        try:
            util.cleanup(c)
        finally:
            pass
        raise
    return c


@pytest.fixture(scope='session')
def cluster(tmp_path_factory):
    """The shared cluster: 1 mgr + 4 iods on loopback."""
    c = _start_cluster(str(tmp_path_factory.mktemp('shared')), niods=4, name='shared')
    yield c
    util.cleanup(c)


@pytest.fixture(scope='session')
def mnt(cluster, tmp_path_factory):
    """The shared mount (allow_other, so other uids can be tested)."""
    path = str(tmp_path_factory.mktemp('mnt'))
    util.make_traversable(path)
    m = cluster.mount(path, 'allow_other')
    yield m
    util.cleanup(m)


@pytest.fixture
def workdir(mnt, request):
    """A fresh directory on the shared mount, named after the test."""
    name = re.sub(r'[^A-Za-z0-9_.-]', '_', request.node.name)[:200]
    p = os.path.join(mnt.path, name)
    os.mkdir(p)
    return p


@pytest.fixture
def dcluster(tmp_path_factory):
    """A private cluster for one destructive test; stopped afterwards."""
    c = _start_cluster(str(tmp_path_factory.mktemp('dc')), niods=4, name='dc')
    yield c
    util.cleanup(c)


@pytest.fixture
def tmp_mnt(tmp_path_factory):
    """A fresh empty directory to mount on."""
    return str(tmp_path_factory.mktemp('m'))


@pytest.fixture
def tcp_dcluster(tmp_path_factory):
    """A private cluster forced onto the tcp transport, for the tests that
    speak the TCP wire framing to the daemons through raw sockets (they run
    unchanged inside the RDMA VM, where everything else uses verbs)."""
    c = _start_cluster(str(tmp_path_factory.mktemp('tc')), niods=4, name='tc',
                       transport='tcp')
    yield c
    util.cleanup(c)
