"""Command lines: every bad argument is an exit 2 naming the argument."""
import os

import pytest

import util
from util import run


def prog(name):
    return util.binary({'mgr': 'mgr/rpfs-mgr', 'iod': 'iod/rpfs-iod',
                        'fuse': 'fuse-client/rpfs-fuse', 'rpfs': 'admin/rpfs'}[name])


@pytest.mark.parametrize('name,args,needle', [
    ('iod', ['--listen', 'x', '--data', '/tmp/rpfs-never'], '--listen'),
    ('iod', ['--listen', util.HOST + ':99999', '--data', '/tmp/rpfs-never'], '--listen'),
    ('iod', ['--listen', util.HOST + ':7999'], '--data'),
    ('iod', ['--listen', util.HOST + ':7999', '--data', '/tmp/rpfs-never', '--credits', '-3'],
     '--credits'),
    ('iod', ['--listen', util.HOST + ':7999', '--data', '/tmp/rpfs-never', '--log-level', 'loud'],
     '--log-level'),
    ('iod', ['--bogus'], '--bogus'),
    ('mgr', ['--listen', util.HOST + ':7998', '--db', '/tmp/rpfs-never'], '--iod'),
    ('mgr', ['--listen', util.HOST + ':7998', '--db', '/tmp/rpfs-never', '--iod', 'nohost'],
     '--iod'),
    ('mgr', ['--listen', util.HOST + ':7998', '--db', '/tmp/rpfs-never', '--iod', util.HOST + ':1',
             '--stripe-unit', '1000'], '--stripe-unit'),
    ('mgr', ['--listen', util.HOST + ':7998', '--db', '/tmp/rpfs-never', '--iod', util.HOST + ':1',
             '--stripe-count', '2'], '--stripe-count'),
    ('fuse', [util.HOST + ':7400', '/tmp/rpfs-never', '-o', 'timeout=abc'], 'timeout'),
    ('rpfs', ['status', '--mgr', util.HOST + ':1', '--timeout', '0'], '--timeout'),
    ('rpfs', ['status', '--timeout', 'soon'], '--timeout'),
    ('rpfs', ['status', '--timeout', '3601'], '--timeout'),
    ('rpfs', ['status', '--timeout'], '--timeout'),
    ('rpfs', ['status', '--bogus'], '--bogus'),
    ('rpfs', ['stats', '--server', util.HOST + ':1', '--timeout', '-1'], '--timeout'),
    ('rpfs', ['scrub', '--namespace', '--bogus'], '--bogus'),
    ('rpfs', ['scrub', '--namespace', '--db', ''], '--db'),
    ('rpfs', ['scrub', '--namespace', '--json', 'extra'], 'extra'),
    ('rpfs', ['keygen', '-f'], '[-f] FILE'),
])
def test_bad_argument_exit_2(name, args, needle):
    r = run([prog(name)] + args, check=False, timeout=30)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr, r.stderr


def test_rpfs_status_timeout_refusal_names_the_range_help_prints():
    """rpfs status --timeout 0: exit 2, the uniform message of the option
    tables, before any config file is read; --help prints the same range."""
    rpfs = prog('rpfs')
    r = run([rpfs, 'status', '--timeout', '0'], check=False, timeout=30,
            env=dict(os.environ, RPFS_CONF='/tmp/rpfs-never/rpfs.conf'))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr == 'rpfs: --timeout: expected seconds above 0, at most 3600, ' \
        'got "0"\n', r.stderr
    assert r.stdout == ''
    h = run([rpfs, 'status', '--help'], timeout=30)
    assert h.stdout.startswith('usage: rpfs status '), h.stdout
    assert '\n  --timeout S ' in h.stdout and 'above 0, at most 3600, default 2' in h.stdout, \
        h.stdout


def test_rpfs_scrub_namespace_unknown_flag():
    """rpfs scrub --namespace refuses a flag it does not take (even one plain
    scrub takes), naming it, with exit 2 and nothing on stdout."""
    rpfs = prog('rpfs')
    for flag in ('--bogus', '--dry-run'):
        r = run([rpfs, 'scrub', '--namespace', flag, '--db', '/tmp/rpfs-never'],
                check=False, timeout=30)
        assert r.returncode == 2, (flag, r.returncode, r.stderr)
        assert r.stderr == 'rpfs scrub --namespace: unknown option "%s"\n' % flag, r.stderr
        assert r.stdout == ''
