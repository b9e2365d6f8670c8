"""READ leases on directories and the callback channel (HACKING.md "Leases
and callbacks"). Two mounts of one cluster, A and B, both with -o leases
and the default fixed timeouts (1 s): a name B looked up under a lease
stays in B's kernel past entry_timeout, and a change A makes to it is seen
by B as soon as A's call returns, because the mgr runs A's change only once
B has invalidated the name (its acknowledgement). A third mount without
leases shows the default (no session at the mgr). The kill and restart
checks bound a wait only to tell "served" from "blocked for good", from
the lease they depend on."""
import os
import re
import signal
import time
import urllib.request

import pytest

import util

WAIT = 60            # bound on waiting for a state; never asserted as timing


def scrape(addr):
    with urllib.request.urlopen('http://%s/metrics' % addr, timeout=10) as r:
        return r.read().decode()


def metric(text, name, labels=''):
    """A sample's value; 0 for a labelled one not written yet (a counter
    shows an op once it was counted)."""
    m = re.search(r'^%s%s (\S+)$' % (re.escape(name), re.escape(labels)), text, re.M)
    assert m or labels, '%s not in /metrics' % name
    return int(float(m.group(1))) if m else 0


class Leases:
    """The cluster, its mgr's /metrics, and mounts A and B (leases on, each
    with its own /metrics) and C (leases off)."""


@pytest.fixture(scope='module')
def lc(tmp_path_factory):
    lc = Leases()
    c = util.Cluster(str(tmp_path_factory.mktemp('lease')), niods=2, name='lease')
    lc.mgr_metrics = util.hostport(util.free_port())
    c.mgr.argv += ['--metrics', lc.mgr_metrics]
    util.clusters.append(c)
    lc.c = c
    mounts = []
    try:
        c.start()
        lc.metrics = {}
        for name in ('a', 'b'):
            lc.metrics[name] = util.hostport(util.free_port())
            m = c.mount(str(tmp_path_factory.mktemp('m' + name)),
                        'allow_other,leases,metrics=%s' % lc.metrics[name])
            mounts.append(m)
            setattr(lc, name, m)
        lc.nolease = c.mount(str(tmp_path_factory.mktemp('mc')), 'allow_other,no_leases')
        mounts.append(lc.nolease)
        util.wait_until(lambda: sessions(lc) == 2, WAIT, 0.1,
                        'both leased mounts known to the mgr')
        yield lc
    finally:
        util.cleanup(*mounts, c)


def sessions(lc):
    return metric(scrape(lc.mgr_metrics), 'rpfs_mgr_callback_sessions')


def lookups(lc, name):
    """LOOKUPs mount name's kernel sent so far."""
    return metric(scrape(lc.metrics[name]), 'rpfs_client_fuse_requests_total',
                  '{op="LOOKUP"}')


@pytest.fixture
def d(lc, request):
    """A fresh directory, as (its path on A, on B, on C)."""
    name = request.node.name.replace('[', '_').replace(']', '_')
    os.mkdir(os.path.join(lc.a.path, name))
    return tuple(os.path.join(m.path, name) for m in (lc.a, lc.b, lc.nolease))


def test_sessions_only_for_leased_mounts(lc):
    # A and B keep a CB_WAIT each at the mgr; C (no leases) none
    assert sessions(lc) == 2
    util.wait_until(lambda: metric(scrape(lc.mgr_metrics), 'rpfs_mgr_callback_waits') == 2,
                    WAIT, 0.1, 'both waits parked')


def resets(lc, name):
    """Times mount name dropped all it kept under leases (a callback wait
    that failed: on a loaded machine a mgr may answer one 3 s late)."""
    return metric(scrape(lc.metrics[name]), 'rpfs_client_lease_resets_total')


def kept(lc, name, check, tries=3):
    """Run check() -> (before, after) counts of what mount name asked the
    mgr, until one run had no lease reset in it (a reset voids the leases
    the run relies on: the run says nothing then); True if that run asked
    nothing more. Fails if every run saw a reset. Each run holds the
    machine-wide lock of the kernel's caches (util.global_lock): another
    test's drop_caches (bench.sh's) would evict the names it counts on."""
    for _ in range(tries):
        with util.global_lock('drop-caches'):
            r0 = resets(lc, name)
            before, after = check()
            again = resets(lc, name) != r0
        if not again:
            return before == after
    raise AssertionError('the callback channel reset in each of %d runs' % tries)


def test_name_cached_past_entry_timeout(lc, d):
    a, b, _ = d
    with open(os.path.join(a, 'f'), 'w') as f:
        f.write('x')
    # from a descriptor of the directory: no walk from the root (whose
    # lease every test's mkdir recalls)
    fd = os.open(b, os.O_RDONLY | os.O_DIRECTORY)

    def check():
        assert os.listdir(fd) == ['f']  # READDIRPLUS: entries under a lease
        os.stat('f', dir_fd=fd)
        n = lookups(lc, 'b')
        time.sleep(1.5)  # past the fixed entry_timeout (1 s)
        os.stat('f', dir_fd=fd)
        return n, lookups(lc, 'b')
    try:
        assert kept(lc, 'b', check), 'B asked again: the name was not kept'
    finally:
        os.close(fd)


def test_miss_cached_past_entry_timeout(lc, d):
    # a miss under a lease is kept too, and a create elsewhere ends it
    a, b, _ = d
    fd = os.open(b, os.O_RDONLY | os.O_DIRECTORY)

    def check():
        with pytest.raises(FileNotFoundError):
            os.stat('nope', dir_fd=fd)
        n = lookups(lc, 'b')
        time.sleep(1.5)  # past the fixed entry_timeout (1 s)
        with pytest.raises(FileNotFoundError):
            os.stat('nope', dir_fd=fd)
        return n, lookups(lc, 'b')
    try:
        assert kept(lc, 'b', check), 'B asked again: the miss was not kept'
        with open(os.path.join(a, 'nope'), 'w') as f:
            f.write('now')
        with open(os.path.join(b, 'nope')) as f:
            assert f.read() == 'now'
    finally:
        os.close(fd)


def mgr_calls(lc, name, op):
    """The calls mount name made to the mgr of op so far."""
    return metric(scrape(lc.metrics[name]), 'rpfs_client_requests_total', '{op="%s"}' % op)


def test_dir_attrs_kept_and_recalled(lc, d):
    """A directory's attributes, fetched after B took its lease, are
    answered by B itself; A's chmod of the directory recalls them."""
    a, b, _ = d
    open(os.path.join(a, 'f'), 'w').close()
    fd = os.open(b, os.O_RDONLY | os.O_DIRECTORY)
    mode = []

    def check():
        os.listdir(fd)  # the lease on the directory
        time.sleep(1.5)  # the kernel's attributes of it expire (1 s)
        os.fstat(fd)  # fetched from the mgr, after the lease began
        time.sleep(1.5)
        n = mgr_calls(lc, 'b', 'GETATTR')
        mode.append(os.fstat(fd).st_mode)
        return n, mgr_calls(lc, 'b', 'GETATTR')
    try:
        assert kept(lc, 'b', check), 'B asked the mgr again'
        mode = mode[-1]
        os.chmod(a, 0o700)
        assert os.fstat(fd).st_mode & 0o777 == 0o700 != mode & 0o777
    finally:
        os.close(fd)


def test_shared_directory_backs_off(lc, d):
    """A and B taking turns at changing one directory: each change recalls
    the other's lease at most once per back-off (1 s, doubling), not once
    per change."""
    a, b, _ = d
    text = scrape(lc.mgr_metrics)
    r0 = metric(text, 'rpfs_mgr_lease_recalls_total')
    for i in range(20):
        open(os.path.join(a if i % 2 else b, 'f%d' % i), 'w').close()
        os.stat(os.path.join(b if i % 2 else a, 'f%d' % i))
    util.wait_until(lambda: metric(scrape(lc.mgr_metrics), 'rpfs_mgr_lease_grants_total') > 0,
                    WAIT, 0.1, 'grants counted')
    recalls = metric(scrape(lc.mgr_metrics), 'rpfs_mgr_lease_recalls_total') - r0
    assert recalls <= 10, '%d recalls for 20 changes' % recalls
    assert sorted(os.listdir(b)) == sorted('f%d' % i for i in range(20))


def test_replaced_name_seen_at_once(lc, d):
    a, b, _ = d
    with open(os.path.join(a, 'f'), 'w') as f:
        f.write('old')
    old = os.stat(os.path.join(b, 'f')).st_ino  # B caches it under a lease
    os.rename(os.path.join(a, 'f'), os.path.join(a, 'g'))
    with open(os.path.join(a, 'f'), 'w') as f:
        f.write('new')
    new = os.stat(os.path.join(a, 'f')).st_ino
    assert new != old
    # A's rename and create returned only after B dropped the name
    assert os.stat(os.path.join(b, 'f')).st_ino == new
    assert os.stat(os.path.join(b, 'g')).st_ino == old
    with open(os.path.join(b, 'f')) as f:
        assert f.read() == 'new'


def test_unlink_seen_at_once(lc, d):
    a, b, _ = d
    open(os.path.join(a, 'f'), 'w').close()
    os.stat(os.path.join(b, 'f'))
    os.unlink(os.path.join(a, 'f'))
    assert not os.path.exists(os.path.join(b, 'f'))


def test_miss_invalidated_by_create(lc, d):
    a, b, _ = d
    open(os.path.join(a, 'known'), 'w').close()
    os.stat(os.path.join(b, 'known'))  # B holds a lease on the directory
    assert not os.path.exists(os.path.join(b, 'new'))  # a miss in B's kernel
    with open(os.path.join(a, 'new'), 'w') as f:
        f.write('here')
    with open(os.path.join(b, 'new')) as f:
        assert f.read() == 'here'


def test_change_on_leased_mount_reaches_others(lc, d):
    # B changes, A and C read: the lease holder's own change needs no
    # invalidation of itself, and the others see it as usual
    a, b, c = d
    open(os.path.join(b, 'f'), 'w').close()
    os.stat(os.path.join(a, 'f'))
    os.rename(os.path.join(b, 'f'), os.path.join(b, 'h'))
    assert not os.path.exists(os.path.join(a, 'f'))
    assert os.path.exists(os.path.join(a, 'h'))
    assert sorted(os.listdir(c)) == ['h']


def test_mount_without_leases_unchanged(lc, d):
    # C sends no session: it is no holder, and A's change does not wait
    # for it; its kernel's names follow the fixed timeouts, as before
    a, _, c = d
    open(os.path.join(a, 'f'), 'w').close()
    assert os.path.exists(os.path.join(c, 'f'))
    assert sessions(lc) == 2


def test_killed_holder_does_not_block_changes(lc, tmp_path_factory, d):
    """A holder killed with -9 stops acknowledging: a change it must
    acknowledge waits until the mgr forgets its session (its callback
    lease, 8 s, under the 10 s request timeout), then runs: it is served,
    not blocked for good."""
    a, _, _ = d
    name = os.path.basename(a)
    path = str(tmp_path_factory.mktemp('mk'))
    m = lc.c.mount(path, 'allow_other,leases')
    try:
        util.wait_until(lambda: sessions(lc) == 3, WAIT, 0.1, 'the third session')
        open(os.path.join(a, 'f'), 'w').close()
        os.stat(os.path.join(path, name, 'f'))  # it holds a lease now
        m.proc.send_signal(signal.SIGKILL)
        m.proc.wait(timeout=WAIT)
        t0 = time.monotonic()
        os.unlink(os.path.join(a, 'f'))  # waits for the dead holder's lease
        assert time.monotonic() - t0 < WAIT
        util.wait_until(lambda: sessions(lc) == 2, WAIT, 0.1,
                        'the dead session forgotten')
    finally:
        util.run(['umount', '-l', path], check=False)
        if m in lc.c.mounts:
            lc.c.mounts.remove(m)
        m.log.retired = True


@pytest.mark.expect_log(r'mgr .*(Connection refused|Connection reset|'
                        r'Input/output error|timed out)')
def test_mgr_restart_drops_leases(lc, d):
    """A restarted mgr knows no lease: the mounts drop every name they
    cached under one when their channel fails, before the new mgr can
    take changes, and the new mgr knows both again afterwards."""
    a, b, _ = d
    open(os.path.join(a, 'f'), 'w').close()
    old = os.stat(os.path.join(b, 'f')).st_ino
    off = lc.b.log.size()
    lc.c.mgr.stop()
    util.wait_until(lambda: 'dropping every name cached under a lease'
                    in lc.b.log.read_from(off), WAIT, 0.05, "B's reset")
    lc.c.mgr.start()
    os.rename(os.path.join(a, 'f'), os.path.join(a, 'g'))
    open(os.path.join(a, 'f'), 'w').close()
    new = os.stat(os.path.join(a, 'f')).st_ino
    assert new != old
    assert os.stat(os.path.join(b, 'f')).st_ino == new
    util.wait_until(lambda: sessions(lc) == 2, WAIT, 0.1, 'both sessions back')
