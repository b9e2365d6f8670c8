"""Command lines: every bad argument is an exit 2 naming the argument."""
import pytest

import util
from util import run


def prog(name):
    return util.binary({'mgr': 'mgr/rpfs-mgr', 'iod': 'iod/rpfs-iod',
                        'fuse': 'fuse-client/rpfs-fuse'}[name])


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
])
def test_bad_argument_exit_2(name, args, needle):
    r = run([prog(name)] + args, check=False, timeout=30)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr, r.stderr
