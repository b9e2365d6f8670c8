"""The verbs transport takes each mechanism where it should, proven by the
transport counters (common/transport/README.md "Messages, credits and
mechanisms").

These tests are marked `verbs`: scripts/test.sh runs them inside the RDMA VM
(scripts/rdma-vm.sh, soft-RoCE) with RPFS_TRANSPORT=verbs, together with the
rest of the suite, and deselects them on the host (-m "not verbs"), where
the transport is tcp. Nothing is skipped.

The transport-level cases use rpfs-vb-mech (tests/verbs/vb_mech.c): a real
iod request handler in-process with a real transport client, printing the
counter deltas of both ends as JSON, so each case is deterministic. The
mount-level cases read the client counters from the rpfs.stats xattr of the
mount root.
"""
import json
import os
import threading

import pytest

import util

KiB = 1024
MiB = 1024 * KiB

# Counters of one mechanism each.
MECH = ('inline_bytes', 'fast_bytes', 'rdma_read_bytes', 'rdma_write_bytes')


def mech_tool(tmp_path, *args, timeout=900):
    """Run rpfs-vb-mech on the test address with a fresh data dir; return
    its JSON. Fails with its output if it failed."""
    exe = util.binary('tests/verbs/rpfs-vb-mech')
    r = util.run([exe, util.HOST, str(tmp_path / 'iod')] + [str(a) for a in args],
                 check=False, timeout=timeout)
    assert not util.SANITIZER_BAD.search(r.stderr), r.stderr[-3000:]
    assert r.returncode == 0, 'rpfs-vb-mech %s: exit %d\n%s\n%s' % (
        args, r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    out = json.loads(r.stdout.strip().splitlines()[-1])
    print(json.dumps(nonzero(out), sort_keys=True))
    return out


def nonzero(o):
    """o without its zero counters (for the test's output)."""
    if isinstance(o, dict):
        return {k: nonzero(v) for k, v in o.items() if v != 0}
    return o


def both(win, key):
    """A counter summed over client and server (each mechanism is counted
    where it happens: the client for what it sends, the server for the
    RDMA it issues)."""
    return win['client'][key] + win['server'][key]


def rw(tmp_path, size):
    out = mech_tool(tmp_path, 'rw', size)
    assert out['transport'] == 'verbs', out['transport']
    assert out['write_rc'] == 0 and out['read_rc'] == 0 and out['verified'], out
    return out['write'], out['read']


@pytest.mark.verbs
def test_inline_1k_write(tmp_path):
    """A 1 KiB write rides inside the request message; so does the 1 KiB
    read's data inside the reply. No RDMA moves any of it."""
    w, r = rw(tmp_path, 1 * KiB)
    assert both(w, 'inline_msgs') >= 1, w
    assert both(w, 'inline_bytes') >= 1 * KiB, w
    for k in ('fast_bytes', 'rdma_read_bytes', 'rdma_write_bytes'):
        assert both(w, k) == 0, (k, w)
    assert both(r, 'inline_bytes') >= 1 * KiB, r
    for k in ('fast_bytes', 'rdma_read_bytes', 'rdma_write_bytes'):
        assert both(r, k) == 0, (k, r)


@pytest.mark.verbs
def test_fast_rdma_32k_write(tmp_path):
    """A 32 KiB write goes by fast RDMA (RDMA Write with Immediate into the
    server's pre-registered buffers), not inline and not by RDMA Read."""
    w, r = rw(tmp_path, 32 * KiB)
    assert both(w, 'fast_msgs') >= 1, w
    assert both(w, 'fast_bytes') >= 32 * KiB, w
    assert both(w, 'rdma_read_bytes') == 0, w
    assert both(w, 'inline_bytes') < 32 * KiB, w
    # the read back moves its 32 KiB by RDMA too, never inline
    assert both(r, 'inline_bytes') < 32 * KiB, r
    assert both(r, 'fast_bytes') + both(r, 'rdma_write_bytes') >= 32 * KiB, r


@pytest.mark.verbs
def test_rdma_read_for_1m_write_rdma_write_for_1m_read(tmp_path):
    """Above 64 KiB the server moves the data: RDMA Read pulls a 1 MiB
    write, RDMA Write pushes a 1 MiB read."""
    w, r = rw(tmp_path, 1 * MiB)
    assert w['server']['rdma_read_ops'] >= 1, w
    assert w['server']['rdma_read_bytes'] >= 1 * MiB, w
    assert both(w, 'fast_bytes') == 0 and both(w, 'rdma_write_bytes') == 0, w
    assert both(w, 'inline_bytes') < 64 * KiB, w
    assert r['server']['rdma_write_ops'] >= 1, r
    assert r['server']['rdma_write_bytes'] >= 1 * MiB, r
    assert both(r, 'fast_bytes') == 0 and both(r, 'rdma_read_bytes') == 0, r


@pytest.mark.verbs
def test_pipelining_splits_32m(tmp_path):
    """One 32 MiB request is moved in units of at most 2 MiB (so at least
    16), each direction, and no unit is ever larger than the server's
    biggest buffer."""
    w, r = rw(tmp_path, 32 * MiB)
    assert w['server']['pipeline_units'] >= 16, w
    assert w['server']['rdma_read_bytes'] >= 32 * MiB, w
    assert r['server']['pipeline_units'] >= 16, r
    assert r['server']['rdma_write_bytes'] >= 32 * MiB, r


@pytest.mark.verbs
def test_credit_exhaustion_no_deadlock(tmp_path):
    """64 threads x 50 small writes on one connection to a server granting
    4 credits: callers wait for credits (counted) and every call completes;
    a hang trips the tool's watchdog (exit 3)."""
    out = mech_tool(tmp_path, 'credits', 64, 50)
    assert out['transport'] == 'verbs'
    assert out['errors'] == 0, out
    assert out['client']['msgs_tx'] >= 64 * 50, out
    assert out['client']['credit_waits'] > 0, out
    assert out['server']['msgs_rx'] >= 64 * 50, out


@pytest.mark.verbs
def test_srq_limit_respected(tmp_path):
    """A server sized for 2 clients refuses the third cleanly (an error, not
    a hang or a crash); the first two keep working; the SRQ never holds more
    receives than clients x (credits + 1) (one spare per client for its
    control messages, vb_server.c)."""
    out = mech_tool(tmp_path, 'srq', 2)
    assert out['transport'] == 'verbs'
    assert out['first'][:2] == [0, 0], out
    assert out['first'][2] < 0, out
    assert out['again'][:2] == [0, 0], out
    assert out['again'][2] < 0, out
    assert 0 < out['srq_posted'] <= out['max_clients'] * (out['credits'] + 1), out


def stats(mnt):
    return json.loads(os.getxattr(mnt.path, 'rpfs.stats'))


def delta(a, b):
    return {k: b[k] - a[k] for k in b if isinstance(b[k], int)}


def drop_caches():
    os.sync()
    with open('/proc/sys/vm/drop_caches', 'w') as f:
        f.write('3\n')


@pytest.mark.verbs
def test_mount_uses_verbs_mechanisms(workdir, mnt):
    """Through the FUSE mount (client counters, rpfs.stats): a small write
    lies in the loop's declared buffers, so it goes by fast RDMA straight
    from there, not inline (no copy); a 1 MiB write and a cold 1 MiB read
    move by RDMA."""
    s0 = stats(mnt)
    assert s0['transport'] == 'verbs', s0
    f = os.path.join(workdir, 'small')
    with open(f, 'wb') as fh:
        fh.write(b's' * KiB)
        fh.flush()
        os.fsync(fh.fileno())
    s1 = stats(mnt)
    d = delta(s0, s1)
    assert d['fast_msgs'] >= 1 and d['inline_msgs'] == 0, d
    assert d['client_copy_bytes'] == 0, d
    data = os.urandom(MiB)
    f = os.path.join(workdir, 'big')
    with open(f, 'wb') as fh:
        fh.write(data)
        os.fsync(fh.fileno())
    drop_caches()
    s2 = stats(mnt)
    with open(f, 'rb') as fh:
        assert fh.read() == data
    s3 = stats(mnt)
    dw, dr = delta(s1, s2), delta(s2, s3)
    print('small write', d, '\n1 MiB write', dw, '\n1 MiB cold read', dr)
    # The client counts the mechanism it chose for each request. FUSE and
    # the 64 KiB stripe unit cut 1 MiB into per-iod requests: those above
    # 64 KiB go by RDMA Read (writes) / RDMA Write (reads), smaller ones by
    # fast RDMA; none of the data goes inline.
    assert dw['rdma_read_bytes'] + dw['fast_bytes'] >= MiB, dw
    assert dw['rdma_read_ops'] + dw['fast_msgs'] >= 1, dw
    assert dw['inline_bytes'] < 64 * KiB, dw
    assert dr['rdma_write_bytes'] + dr['fast_bytes'] >= MiB, dr
    assert dr['inline_bytes'] < 64 * KiB, dr


def test_many_concurrent_small_requests_through_mount(workdir, mnt):
    """64 threads of small writes and stats through the mount complete (no
    credit deadlock) and the data is right. (Not marked: tcp runs it too.)"""
    errors = []

    def work(i):
        try:
            p = os.path.join(workdir, 'f%02d' % i)
            for j in range(20):
                with open(p, 'ab') as fh:
                    fh.write(b'%02d:%03d\n' % (i, j))
                os.stat(p)
        except Exception as e:  # reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(64)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(600)
    assert not any(t.is_alive() for t in ts), 'threads hung'
    assert not errors, errors[:3]
    for i in range(64):
        with open(os.path.join(workdir, 'f%02d' % i), 'rb') as fh:
            assert fh.read() == b''.join(b'%02d:%03d\n' % (i, j) for j in range(20))


def server_stats(port, conf=None):
    """`rpfs stats --server` of one daemon, as a dict."""
    argv = [util.binary('admin/rpfs'), 'stats', '--server', util.hostport(port)]
    if conf:
        argv += ['--conf', conf]
    r = util.run(argv, check=False, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def write_read_check(path):
    """Write files that take each mechanism (1 KiB inline, 32 KiB fast,
    4 MiB server-based), read them back cold and compare."""
    datas = {'i': os.urandom(KiB), 'f': os.urandom(32 * KiB), 'b': os.urandom(4 * MiB)}
    for name, data in datas.items():
        with open(os.path.join(path, name), 'wb') as fh:
            fh.write(data)
    drop_caches()
    for name, data in datas.items():
        with open(os.path.join(path, name), 'rb') as fh:
            assert fh.read() == data, name


@pytest.mark.verbs
def test_busy_poll_mode(tmp_path, cluster, mnt):
    """[verbs] poll_mode = busy: the iods never go back to sleep on the
    completion channel (poll_sleeps stays 0) and serve every mechanism;
    the default (adaptive, the shared cluster) does sleep once idle."""
    c = util.conf_cluster(tmp_path / 'busy', niods=2, key=False, name='busy',
                          extra="[verbs]\npoll_mode = busy\n")
    try:
        m = c.mount(str(tmp_path / 'm'))
        write_read_check(m.path)
        for port in c.iod_ports:
            st = server_stats(port, c.conf)
            assert st['transport'] == 'verbs', st
            assert st['msgs_rx'] > 0, st
            assert st['poll_sleeps'] == 0, st
    finally:
        util.cleanup(c)
    # adaptive: after traffic and a quiet moment, the loop sleeps
    d = os.path.join(mnt.path, 'adaptive')
    os.makedirs(d, exist_ok=True)
    write_read_check(d)
    util.wait_until(lambda: server_stats(cluster.iod_ports[0])['poll_sleeps'] > 0, 30,
                    interval=0.5, what='the adaptive iod to sleep on its channel')


@pytest.mark.verbs
def test_memlock_limit_named(tmp_path, cluster):
    """An RLIMIT_MEMLOCK too small for the verbs buffers fails start-up with
    an error that names the limit: for a daemon and for the client."""
    small = ['prlimit', '--memlock=65536:65536']
    iod = small + [util.binary('iod/rpfs-iod'), '--listen', util.hostport(util.free_port()),
                   '--data', str(tmp_path / 'd'), '--transport', 'verbs'] + util.insecure_args()
    r = util.run(iod, check=False, timeout=60)
    assert r.returncode != 0, r.stdout + r.stderr
    assert 'RLIMIT_MEMLOCK' in r.stderr, r.stderr
    mp = tmp_path / 'm'
    mp.mkdir()
    fuse = small + [util.binary('fuse-client/rpfs-fuse'), util.hostport(cluster.mgr_port),
                    str(mp), '-f', '-o', 'transport=verbs']
    r = util.run(fuse, check=False, timeout=60)
    assert r.returncode != 0, r.stdout + r.stderr
    assert 'RLIMIT_MEMLOCK' in r.stderr, r.stderr
    assert not util.is_mounted(str(mp))


@pytest.mark.verbs
def test_keyed_cluster_seals_every_mechanism(tmp_path):
    """A keyed cluster over verbs, whose messages after the key proof are
    sealed and bulk data MACed (vb_seal.h), serves the mechanisms a
    mount's writes and cold reads take: files written and read back cold
    and compared, with write data by fast slot and by RDMA Read and read
    data by RDMA Write or fast (the client's counters); the connections
    proved the key (auth_ok), no server rejected anything, and the daemons
    logged no warning (a message or data failing its MAC closes its
    connection with one). No counter shows that anything was sealed (a
    cluster that sealed nothing would pass this): test_vb_live's tamper
    case shows a flipped byte of MACed write data refused, and its
    mechanisms+key cases the inline and big-message paths keyed."""
    c = util.conf_cluster(tmp_path / 'sealed', niods=2, key=True, name='sealed')
    try:
        m = c.mount(str(tmp_path / 'm'), 'allow_other,key=%s' % c.key)
        s0 = stats(m)
        write_read_check(m.path)
        big = os.urandom(3 * MiB + 12345)
        with open(os.path.join(m.path, 'odd'), 'wb') as fh:
            fh.write(big)
        drop_caches()
        with open(os.path.join(m.path, 'odd'), 'rb') as fh:
            assert fh.read() == big
        d = delta(s0, stats(m))
        print('sealed', nonzero(d))
        assert stats(m)['auth_ok'] >= 1
        assert d['fast_bytes'] > 0 and d['rdma_read_bytes'] > 0, d
        assert d['rdma_write_bytes'] + d['fast_bytes'] > 0, d
        for port in c.iod_ports:
            st = server_stats(port, c.conf)
            assert st['transport'] == 'verbs', st
            assert st['auth_ok'] >= 1 and st['rejects'] == 0, st
    finally:
        util.cleanup(c)
