"""librpfs: list I/O against real daemons, cross-checked through a FUSE
mount of the same cluster, and the fio engine (librpfs_fio.so).

The C checker (tests/tools/listio_test.c, built as
fuse-client/rpfs-listio-test) does random list writes and reads, both
noncontiguous in memory and in the file (from a few bytes to > 1 MiB,
up to thousands of segments: more than max_sge and more than one round),
against a reference it keeps in memory, then a contiguous rpfs_pread.
Everything honours $RPFS_TEST_HOST and $RPFS_TRANSPORT like the rest of
the suite, so it runs unchanged in the RDMA VM.
"""
import os
import re
import subprocess

import pytest

import util

MODES = ['plain', 'ext', 'alloc', 'reg']
BAD = re.compile(r'^<[0-4]>|AddressSanitizer|LeakSanitizer|runtime error:', re.M)


def run_checker(cluster, *args, timeout=300):
    """Run rpfs-listio-test against the cluster; fail on exit != 0 or on a
    warning/error log line or sanitizer report from the library."""
    argv = [util.binary('fuse-client/rpfs-listio-test'), args[0],
            util.hostport(cluster.mgr_port)] + [str(a) for a in args[1:]]
    p = subprocess.run(argv, env=cluster.env, capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, 'checker failed (%d):\n%s%s' % (
        p.returncode, p.stdout, p.stderr)
    assert not BAD.search(p.stderr), p.stderr
    return p


def rel(mnt, path):
    """The rpfs path (relative to the root) of a path on the mount."""
    return os.path.relpath(path, mnt.path)


@pytest.mark.parametrize('mode', MODES)
def test_list_write_read_via_fuse(cluster, mnt, workdir, tmp_path, mode):
    """Random list writes through librpfs; the FUSE mount reads the same
    bytes the reference holds (and the checker's own list reads and
    contiguous pread agree with it)."""
    f = os.path.join(workdir, 'lw')
    ref = str(tmp_path / 'ref')
    run_checker(cluster, 'write', rel(mnt, f), 11 + MODES.index(mode),
                mode, ref)
    want = open(ref, 'rb').read()
    assert os.path.getsize(f) == len(want)
    with open(f, 'rb') as fh:
        got = fh.read()
    assert got == want


@pytest.mark.parametrize('mode', MODES)
def test_fuse_write_list_read(cluster, mnt, workdir, tmp_path, mode):
    """A file written through the mount reads back correctly through list
    reads (noncontiguous both ways) and a contiguous rpfs_pread."""
    f = os.path.join(workdir, 'fw')
    data = os.urandom(3 * 1024 * 1024 - 777)
    with open(f, 'wb') as fh:
        fh.write(data)
    ref = tmp_path / 'ref'
    ref.write_bytes(data)
    run_checker(cluster, 'verify', rel(mnt, f), 21 + MODES.index(mode),
                mode, str(ref))


def test_two_writers_same_file(cluster, mnt, workdir, tmp_path):
    """Two successive library clients rewrite the same file (O_TRUNC);
    the mount sees the last one."""
    f = os.path.join(workdir, 'twice')
    ref1, ref2 = str(tmp_path / 'r1'), str(tmp_path / 'r2')
    run_checker(cluster, 'write', rel(mnt, f), 31, 'plain', ref1)
    run_checker(cluster, 'write', rel(mnt, f), 32, 'ext', ref2)
    with open(f, 'rb') as fh:
        assert fh.read() == open(ref2, 'rb').read()


def fio_engine():
    p = os.path.join(util.build_dir(), 'fuse-client', 'librpfs_fio.so')
    if not os.path.exists(p):
        raise RuntimeError('%s not built: configure with -Dfio_engine=enabled '
                           '(see scripts/fio-src.sh)' % p)
    return p


def sanitizer_preload():
    """The sanitizer runtimes the engine links (an ASan build): fio itself
    is not instrumented, so they must be preloaded for dlopen to work."""
    p = subprocess.run(['ldd', fio_engine()], capture_output=True, text=True)
    libs = re.findall(r'^\s*(lib(?:asan|ubsan)\.so\S*) => (\S+)', p.stdout, re.M)
    libs.sort(key=lambda nl: not nl[0].startswith('libasan'))  # asan first
    return ':'.join(path for _name, path in libs)


def run_fio(cluster, args, env_extra=None, timeout=300):
    env = dict(cluster.env or os.environ)
    env.update(env_extra or {})
    pre = sanitizer_preload()
    if pre:
        env['LD_PRELOAD'] = pre
        # fio's own allocations at exit are not ours to judge
        env['ASAN_OPTIONS'] = 'detect_leaks=0'
    p = subprocess.run(['fio', '--output-format=normal', '--verify_state_save=0'] + args, env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, 'fio failed (%d):\n%s%s' % (
        p.returncode, p.stdout, p.stderr)
    assert 'err= 0' in p.stdout, p.stdout
    assert not re.search(r'verify|bad magic|crc32c', p.stderr, re.I), p.stderr
    return p


def test_fio_engine_verify(cluster, mnt, workdir, tmp_path):
    """fio through librpfs_fio.so: random writes with crc32c verification;
    then the same pattern verified through the FUSE mount (psync,
    verify_only) and again through the engine."""
    f = os.path.join(workdir, 'fio.dat')
    job = tmp_path / 'w.fio'
    job.write_text('[global]\n'
                   'ioengine=external:%s\n'
                   'rpfs_mgr=%s\n'
                   'filename=%s\n'
                   'size=6m\nbsrange=4k-256k\nrandrepeat=1\nrandseed=42\n'
                   'verify=crc32c\nfsync=16\n'
                   '[w]\nrw=randwrite\n'
                   % (fio_engine(), util.hostport(cluster.mgr_port),
                      rel(mnt, f)))
    run_fio(cluster, [str(job)])
    assert os.path.getsize(f) > 0
    pattern = ['--rw=randwrite', '--size=6m', '--bsrange=4k-256k',
               '--randrepeat=1', '--randseed=42', '--verify=crc32c',
               '--verify_only=1']
    run_fio(cluster, ['--name=viafuse', '--ioengine=psync',
                      '--filename=' + f] + pattern)
    # the engine again, the mgr from $RPFS_MGR this time
    run_fio(cluster, ['--name=viaengine',
                      '--ioengine=external:' + fio_engine(),
                      '--filename=' + rel(mnt, f)] + pattern,
            env_extra={'RPFS_MGR': util.hostport(cluster.mgr_port)})


def test_fio_engine_seq_write_read(cluster, mnt, workdir, tmp_path):
    """Sequential write then read with verification, unaligned block
    size, through the engine; the mount sees the size after close."""
    f = os.path.join(workdir, 'seq.dat')
    run_fio(cluster, ['--name=seq', '--ioengine=external:' + fio_engine(),
                      '--rpfs_mgr=' + util.hostport(cluster.mgr_port),
                      '--filename=' + rel(mnt, f), '--rw=write',
                      '--size=3m', '--bs=12k', '--verify=crc32c',
                      '--end_fsync=1'])
    assert os.path.getsize(f) == 3 * 1024 * 1024 // (12 * 1024) * 12 * 1024


def fio_stats(path):
    """The engine's counters file (rpfs_stats=): one JSON object per job."""
    import json
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def fio_engine_job(cluster, mnt, f, stats, loops, extra=()):
    """Random writes of 4 KiB to 1 MiB (inline, fast and server-based
    sizes) then their crc32c verification, through the engine, counters
    appended to stats."""
    run_fio(cluster, ['--name=j%d' % loops,
                      '--ioengine=external:' + fio_engine(),
                      '--rpfs_mgr=' + util.hostport(cluster.mgr_port),
                      '--rpfs_stats=' + str(stats),
                      '--filename=' + rel(mnt, f), '--rw=randwrite',
                      '--size=4m', '--bsrange=4k-1m', '--randrepeat=1',
                      '--loops=%d' % loops, '--verify=crc32c'] + list(extra))


def test_fio_engine_counters(cluster, mnt, workdir, tmp_path):
    """rpfs_stats= makes each job append its CPU time and transport
    counters (data_ops, client_copy_bytes, ...) as a JSON line; the data
    verifies. $RPFS_FIO_STATS does the same without the option."""
    f = os.path.join(workdir, 'fio-stats.dat')
    stats = tmp_path / 'stats.json'
    fio_engine_job(cluster, mnt, f, stats, 1)
    lines = fio_stats(stats)
    assert len(lines) == 1 and lines[0]['job'] == 'j1'
    net = lines[0]['net']
    assert net['transport'] == (cluster.env or os.environ).get(
        'RPFS_TRANSPORT', 'tcp')
    assert net['data_ops'] > 0 and 'client_copy_bytes' in net
    assert lines[0]['cpu_usr_s'] + lines[0]['cpu_sys_s'] > 0
    # moved at least the 4 MiB written and the 4 MiB verified
    assert net['bulk_pull_bytes'] >= 4 << 20 and net['bulk_push_bytes'] >= 4 << 20
    env_stats = tmp_path / 'env.json'
    run_fio(cluster, ['--name=viaenv', '--ioengine=external:' + fio_engine(),
                      '--rpfs_mgr=' + util.hostport(cluster.mgr_port),
                      '--filename=' + rel(mnt, f), '--rw=read', '--size=1m'],
            env_extra={'RPFS_FIO_STATS': str(env_stats)})
    lines = fio_stats(env_stats)
    assert len(lines) == 1 and lines[0]['job'] == 'viaenv'
    assert lines[0]['net']['bulk_push_bytes'] == 1 << 20


@pytest.mark.verbs
def test_fio_engine_zero_copy_verbs(cluster, mnt, workdir, tmp_path):
    """Over verbs the engine's I/O buffers are registered memory: no byte
    is copied on the client at any size, and registrations do not grow
    with the number of operations (4 loops register as much as 1)."""
    f = os.path.join(workdir, 'fio-zc.dat')
    stats = tmp_path / 'stats.json'
    fio_engine_job(cluster, mnt, f, stats, 1)
    fio_engine_job(cluster, mnt, f, stats, 4)
    one, four = [ln['net'] for ln in fio_stats(stats)]
    assert one['transport'] == four['transport'] == 'verbs'
    assert one['client_copy_bytes'] == 0 and four['client_copy_bytes'] == 0
    assert four['data_ops'] > one['data_ops']
    assert four['reg_count'] == one['reg_count'], (one, four)
    assert four['reg_cache_misses'] == one['reg_cache_misses'], (one, four)
