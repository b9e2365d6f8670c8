#!/usr/bin/env python3
"""mirror_bench.py - what mirroring costs and how fast resync is, on a
cluster of separate hosts (tests/integration/netns.py: the mgr, 4 iods and
a client each in a network namespace of its own, joined by a bridge, with
$RPFS_NETEM on every link when it is set).

Run as root, from scripts/mirror-bench.sh (which installs what it needs):

    RPFS_BUILD=build-rel python3 tests/bench/mirror_bench.py \
        [--size MIB] [--runtime S] [--reps N] [--resync-mib MIB] [--out DIR]

The client mounts once; two directories share that mount: `m1` (mirror=1,
the file system default: count 4 over the 4 iods) and `m2` (mirror=2:
count 2 over the 2 groups, the same 4 iods). Every fio job runs on both,
alternating m1, m2, m1, m2 ... (--reps rounds), so drift hits both alike;
the table gives the median of each and the ratio m2/m1. Jobs: sequential
1 MiB write and read (O_DIRECT, --size MiB), random 4 KiB read and write
(O_DIRECT, --runtime s over a --size MiB file).

Then the resync: iod 1 is killed, a --resync-mib MiB file is written to m2
(degraded: iod 1's replica is recorded stale), iod 1 is restarted, and the
time until `rpfs status` shows no stale object is measured, with the bytes
the mgr's resync copied (its `resynced: D (B bytes)`): rate = B / time.

A benchmark, not a test: it asserts nothing about speed, but it does stop
with an error when fio fails or the resync never finishes (10 minutes).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))

import netns  # noqa: E402
import util   # noqa: E402

MiB = 1 << 20


def fio(path, rw, bs, size_mib, runtime, outdir, tag):
    """One fio job; returns (MB/s, IOPS) of its direction."""
    out = os.path.join(outdir, '%s.json' % tag)
    argv = ['fio', '--name=' + tag, '--filename=' + path, '--rw=' + rw,
            '--bs=' + bs, '--size=%dM' % size_mib, '--direct=1',
            '--ioengine=psync', '--output-format=json', '--output=' + out,
            '--verify_state_save=0']
    if runtime:
        argv += ['--time_based', '--runtime=%d' % runtime]
    if rw in ('write', 'randwrite'):
        argv += ['--end_fsync=1']
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, cwd=outdir, timeout=1800)
    if r.returncode:
        raise RuntimeError('fio %s on %s failed: %s' % (tag, path, r.stderr[-2000:]))
    with open(out) as f:
        text = f.read()
    job = json.loads(text[text.index('{'):])['jobs'][0]
    d = job['write'] if 'write' in rw else job['read']
    return d['bw_bytes'] / 1e6, d['iops']


def status(c):
    """iod -> (stale objects, resynced objects, resynced bytes)."""
    argv = c.cli_nodes[0].argv([util.binary('admin/rpfs'), 'status', '--mgr',
                                '%s:%d' % (c.mgr_node.addr, netns.MGR_PORT)])
    r = util.run(argv, check=False, timeout=60)
    rows = re.findall(r'^iod +(\d+) .*stale objects: (\d+), resynced: (\d+) \((\d+) bytes\)',
                      r.stdout, re.M)
    if not rows:
        raise RuntimeError('rpfs status: no stale/resynced columns:\n' + r.stdout + r.stderr)
    return {int(i): (int(s), int(d), int(b)) for i, s, d, b in rows}


def run_jobs(m1, m2, a, outdir):
    """The fio table: {job: {'m1': [..], 'm2': [..]}} of MB/s or IOPS."""
    jobs = [('seq write 1M MB/s', 'write', '1M', None, 0),
            ('seq read 1M MB/s', 'read', '1M', None, 0),
            ('rand read 4k IOPS', 'randread', '4k', a.runtime, 1),
            ('rand write 4k IOPS', 'randwrite', '4k', a.runtime, 1)]
    res = {name: {'m1': [], 'm2': []} for name, *_ in jobs}
    for rep in range(a.reps):
        for name, rw, bs, rt, which in jobs:
            for lab, d in (('m1', m1), ('m2', m2)):
                f = os.path.join(d, 'f')
                v = fio(f, rw, bs, a.size, rt, outdir, '%s-%s-%d' % (lab, rw, rep))
                res[name][lab].append(v[which])
    return res


def resync(c, m2, a):
    """Kill iod 1, write a file degraded, restart iod 1; returns (seconds
    to no stale object, bytes resync copied)."""
    before = status(c)
    c.kill9(c.iods[1])
    f = os.path.join(m2, 'resync')
    with open(f, 'wb') as fh:
        chunk = os.urandom(MiB)
        for _ in range(a.resync_mib):
            fh.write(chunk)
        fh.flush()
        os.fsync(fh.fileno())
    stale = status(c)[1][0]
    if stale < 1:
        raise RuntimeError('no stale record for iod 1 after a degraded write')
    c.restart(c.iods[1])
    t0 = time.monotonic()
    while True:
        st = status(c)
        if st[1][0] == 0:
            break
        if time.monotonic() - t0 > 600:
            raise RuntimeError('resync did not finish in 600 s: %r' % st)
        time.sleep(0.2)
    secs = time.monotonic() - t0
    # the mgr's own account of each record: bytes, passes, time copying
    with open(c.mgr.log.path, errors='replace') as f:
        recs = re.findall(r'resynced from iod \d+: (\d+) bytes copied, (\d+) compare '
                          r'passes, ([0-9.]+) s \(([0-9.]+) s copying\)', f.read())
    return secs, st[1][2] - before[1][2], stale, recs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--size', type=int, default=256, help='MiB per file (default 256)')
    ap.add_argument('--runtime', type=int, default=10, help='s per random job (default 10)')
    ap.add_argument('--reps', type=int, default=2, help='rounds m1, m2 (default 2)')
    ap.add_argument('--resync-mib', type=int, default=128, help='degraded file MiB (default 128)')
    ap.add_argument('--resync-rate', type=int, default=50,
                    help="the mgr's --resync-rate, MB/s (default 50, its default)")
    ap.add_argument('--out', default=None, help='keep fio output here')
    a = ap.parse_args()
    for k in ('size', 'runtime', 'reps', 'resync_mib', 'resync_rate'):
        if getattr(a, k) < 1:
            ap.error('--%s: expected a positive number, got %d' % (k.replace('_', '-'), getattr(a, k)))
    state = tempfile.mkdtemp(prefix='rpfs-mirbench.')
    outdir = a.out or os.path.join(state, 'fio')
    os.makedirs(outdir, exist_ok=True)
    c = netns.NetCluster(state, niods=4, nclients=1, name='mb', log_level='notice')
    c.mgr.argv += ['--resync-rate', str(a.resync_rate)]
    util.clusters.append(c)
    try:
        c.start()
        mnt = os.path.join(state, 'mnt')
        c.mount_client(0, mnt, 'allow_other')
        m1 = os.path.join(mnt, 'm1')
        m2 = os.path.join(mnt, 'm2')
        os.mkdir(m1)
        os.mkdir(m2)
        os.setxattr(m2, 'user.rpfs.layout', b'unit=65536,count=2,mirror=2')
        res = run_jobs(m1, m2, a, outdir)
        secs, copied, nstale, recs = resync(c, m2, a)
    finally:
        netns.destroy(c)
    net = c.netem or 'none'
    print('mirror bench: 4 iods, 1 client, separate namespaces, netem: %s, '
          'file %d MiB, %d rounds (medians)' % (net, a.size, a.reps))
    print('| job | mirror=1 | mirror=2 | m2/m1 |')
    print('|---|---|---|---|')
    for name, v in res.items():
        x, y = statistics.median(v['m1']), statistics.median(v['m2'])
        print('| %s | %.1f | %.1f | %.2f |' % (name, x, y, y / x if x else 0))
    print('resync (--resync-rate %d MB/s): %d stale object(s), %.1f MB copied '
          'in %.1f s: %.1f MB/s (from iod 1 restart to no stale record; '
          'includes the poll that sees it up)'
          % (a.resync_rate, nstale, copied / 1e6, secs, copied / 1e6 / secs))
    for b, passes, whole, cp in recs:
        b, whole, cp = int(b), float(whole), float(cp)
        print('  mgr: %.1f MB copied in %.2f s copying (%.1f MB/s), %.2f s with '
              '%s compare pass(es) and fsync (%.1f MB/s)'
              % (b / 1e6, cp, b / 1e6 / cp if cp else 0, whole, passes,
                 b / 1e6 / whole if whole else 0))
    return 0


if __name__ == '__main__':
    sys.exit(main())
