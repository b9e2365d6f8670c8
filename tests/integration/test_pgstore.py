"""The PostgreSQL store's command lines: rpfs mkfs --store-uri (and
[mgr] store / store_uri of --conf) creates the schema in an empty
database (each test's own, on the session's PostgreSQL cluster: conftest
pg_server), each error at open is one line naming store_uri and never the
password, and rpfs-mgr checks --store, --store-uri and the [mgr] keys.
The store itself is checked by the C test tests/unit/mgr/test_mgr_kv.c."""
import os
import re

import pytest

import util

# No transport path of its own: the VM stage deselects it.
pytestmark = pytest.mark.host_only


@pytest.fixture(scope='module')
def pg(pg_server):
    """The session's PostgreSQL cluster: its URI (role rpfs, with a
    password and CREATEDB; database rpfs)."""
    assert re.fullmatch(r'postgresql://rpfs:[0-9a-f]+@127\.0\.0\.1:\d+/rpfs', pg_server), \
        pg_server
    return pg_server


def new_db(uri, tag):
    """A new empty database on uri's server, named for tag and this
    process (the LMDB and PostgreSQL passes may share the server); its
    URI."""
    name = 'rpfs_pgs_%s_%d' % (tag, os.getpid())
    psql(uri, 'CREATE DATABASE ' + name)
    return with_db(uri, name)


def psql(uri, sql):
    """Run sql on uri's database; its output (unaligned, tuples only)."""
    return util.run(['psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-d', uri,
                     '-c', sql], timeout=60).stdout.strip()


def with_db(uri, db, password=None):
    """uri naming database db (and password, if given)."""
    m = re.fullmatch(r'postgresql://(\w+):(\w+)@([^/]+)/\w+', uri)
    return 'postgresql://%s:%s@%s/%s' % (m.group(1), password or m.group(2),
                                        m.group(3), db)


def rpfs(*args):
    return util.run([util.binary('admin/rpfs')] + list(args), check=False,
                    timeout=120)


def test_mkfs_creates_schema(pg, tmp_path):
    """mkfs --store-uri creates the schema (version 2, the kv table, the
    lease row) and the data directories; a second run changes nothing."""
    uri = new_db(pg, 'mkfs1')
    data = str(tmp_path / 'iod0')
    r = rpfs('mkfs', '--store-uri', uri, '--data', data)
    assert r.returncode == 0, r.stderr
    assert 'schema ready' in r.stdout
    assert os.path.isdir(data)
    assert psql(uri, 'SELECT version FROM rpfs_schema') == '2'
    assert psql(uri, 'SELECT count(*) FROM rpfs_kv') == '0'
    assert psql(uri, 'SELECT id, token FROM rpfs_lease') == '1|0'
    psql(uri, "INSERT INTO rpfs_kv VALUES (5, '\\x01', '\\x02')")
    r = rpfs('mkfs', '--store-uri', uri)
    assert r.returncode == 0, r.stderr
    assert psql(uri, 'SELECT count(*) FROM rpfs_schema') == '1'
    assert psql(uri, 'SELECT count(*) FROM rpfs_kv') == '1'


def test_mkfs_bytea_order(pg):
    """The store's keys order as unsigned bytes, then length: bytea's order,
    which mgr_kv.h requires."""
    uri = new_db(pg, 'order1')
    assert rpfs('mkfs', '--store-uri', uri).returncode == 0
    psql(uri, "INSERT INTO rpfs_kv VALUES (0, '\\x01ff', ''), (0, '\\x01', ''), "
         "(0, '\\x0100', ''), (0, '\\x80', ''), (0, '\\x7f', ''), (0, '\\x00', ''), "
         "(0, '\\xff', '')")
    assert psql(uri, 'SELECT encode(k, \'hex\') FROM rpfs_kv ORDER BY tbl, k') \
        .split('\n') == ['00', '01', '0100', '01ff', '7f', '80', 'ff']


def test_mkfs_store_errors(pg, tmp_path):
    """Each error at open: one line naming store_uri and what is wrong, never
    the password; exit 2 for an unparseable URI, 1 for the rest."""
    secret = re.fullmatch(r'postgresql://\w+:(\w+)@.*', pg).group(1)
    port = util.free_port()
    cases = [
        ('postgresql://rpfs:sekrit@127.0.0.1/rpfs?nosuchparam=1', 2,
         r'store_uri postgresql://rpfs@127\.0\.0\.1/rpfs\?nosuchparam=1: not a '
         r'PostgreSQL URI or conninfo: invalid URI query parameter: "nosuchparam"'),
        ('postgresql://rpfs:sekrit@127.0.0.1:%d/rpfs' % port, 1,
         r'store_uri postgresql://rpfs@127\.0\.0\.1:%d/rpfs: cannot reach the '
         r'server: .*Connection refused' % port),
        (with_db(pg, 'rpfs', 'sekrit'), 1,
         r'store_uri postgresql://rpfs@127\.0\.0\.1:\d+/rpfs: authentication '
         r'failed: .*password authentication failed for user "rpfs"'),
        (with_db(pg, 'nosuchdb'), 1,
         r'store_uri postgresql://rpfs@127\.0\.0\.1:\d+/nosuchdb: the database '
         r'does not exist'),
    ]
    for uri, code, msg in cases:
        r = rpfs('mkfs', '--store-uri', uri)
        assert r.returncode == code, (uri, r.stderr)
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and re.match(r'rpfs mkfs: --store-uri: ' + msg,
                                            lines[0]), r.stderr
        assert 'sekrit' not in r.stderr and secret not in r.stderr
    # a schema of another version is refused, by mkfs too
    uri = new_db(pg, 'vers1')
    assert rpfs('mkfs', '--store-uri', uri).returncode == 0
    psql(uri, 'UPDATE rpfs_schema SET version = 7')
    r = rpfs('mkfs', '--store-uri', uri)
    assert r.returncode == 1
    assert re.fullmatch(r'rpfs mkfs: --store-uri: store_uri postgresql://rpfs@\S+/'
                        r'rpfs_pgs_vers1_\d+: schema version 7, this rpfs-mgr needs 2\n',
                        r.stderr), r.stderr
    # usage
    assert rpfs('mkfs', '--store-uri', '').returncode == 2
    r = rpfs('mkfs', '--store-uri', uri, '--db', str(tmp_path / 'db'))
    assert r.returncode == 2 and '--store-uri goes without --db' in r.stderr


def conf_file(tmp_path, name, mgr_lines, data=None):
    """A config file with one iod (data dir data) and [mgr] mgr_lines."""
    p = str(tmp_path / name)
    with open(p, 'w') as f:
        f.write('[mgr]\nlisten = 127.0.0.1:0\n%s\n[iod.0]\nhost = 127.0.0.1\n'
                'port = 1\n%s' % ('\n'.join(mgr_lines),
                                  'data = %s\n' % data if data else ''))
    return p


def test_mkfs_conf_store(pg, tmp_path):
    """mkfs --conf reads [mgr] store and store_uri: postgresql creates the
    schema (and the local data directories); the two must agree."""
    uri = new_db(pg, 'conf1')
    data = str(tmp_path / 'd0')
    good = conf_file(tmp_path, 'good.conf', ['store = postgresql', 'store_uri = ' + uri],
                     data)
    r = rpfs('mkfs', '--conf', good)
    assert r.returncode == 0, r.stderr
    assert os.path.isdir(data) and 'schema ready' in r.stdout
    assert psql(uri, 'SELECT version FROM rpfs_schema') == '2'
    nouri = conf_file(tmp_path, 'nouri.conf', ['store = postgresql'])
    r = rpfs('mkfs', '--conf', nouri)
    assert r.returncode == 3
    assert r.stderr == 'rpfs mkfs: %s: [mgr] store = postgresql needs [mgr] ' \
        'store_uri\n' % nouri
    nostore = conf_file(tmp_path, 'nostore.conf', ['db = /nonexistent',
                                                   'store_uri = ' + uri])
    r = rpfs('mkfs', '--conf', nostore)
    assert r.returncode == 3
    assert '[mgr] store_uri is set, but the store is lmdb (the default)' in r.stderr
    assert re.fullmatch(r'postgresql://\w+:(\w+)@.*', uri).group(1) not in r.stderr
    bad = conf_file(tmp_path, 'bad.conf', ['store = postgresql',
                                           'store_uri = postgresql://x:sekrit@h/d?bad=1'])
    r = rpfs('mkfs', '--conf', bad)
    assert r.returncode == 3 and 'store_uri postgresql://x@h/d?bad=1' in r.stderr
    assert 'sekrit' not in r.stderr


MGR_STORE_ERRORS = [
    (['--store', 'pg'], [], '--store: expected lmdb or postgresql, got "pg"'),
    (['--store', 'postgresql'], [], '--store postgresql needs a PostgreSQL URI '
     '(--store-uri URI, or [mgr] store_uri in the config file)'),
    (['--store-uri', 'postgresql://h/d'], ['db = /nonexistent'],
     '--store-uri is set, but the store is lmdb (the default): set --store '
     'postgresql or [mgr] store = postgresql, or drop --store-uri'),
    (['--store', 'lmdb', '--store-uri', 'postgresql://h/d'], [],
     '--store-uri is set, but the store is lmdb (--store)'),
    (['--store-uri', ''], [], '--store-uri: expected a PostgreSQL URI, got ""'),
    ([], ['store = postgresql'], '[mgr] store = postgresql needs a PostgreSQL URI'),
    ([], ['db = /nonexistent', 'store_uri = postgresql://h/d'],
     '[mgr] store_uri is set, but the store is lmdb (the default)'),
    (['--store', 'lmdb'], ['store = postgresql', 'store_uri = postgresql://h/d'],
     '[mgr] store_uri is set, but the store is lmdb (--store)'),
]


@pytest.mark.parametrize('args,lines,msg', MGR_STORE_ERRORS)
def test_mgr_store_args(tmp_path, args, lines, msg):
    """rpfs-mgr checks --store, --store-uri and [mgr] store / store_uri
    together: exit 2 with a message naming both."""
    conf = conf_file(tmp_path, 'm.conf', lines)
    r = util.run([util.binary('mgr/rpfs-mgr'), '--conf', conf] + args,
                 check=False, timeout=30)
    assert r.returncode == 2, r.stderr
    assert 'rpfs-mgr: ' + msg in r.stderr, r.stderr


@pytest.mark.parametrize('line,msg', [
    ('store = pg', '[mgr] store: expected lmdb or postgresql, got "pg"'),
    ('store_uri =', '[mgr] store_uri: expected a PostgreSQL URI, got ""'),
])
def test_store_config_lines(tmp_path, line, msg):
    """A bad [mgr] store or store_uri line: FILE:LINE: what was expected, for
    rpfs-mgr (exit 2) and the admin tool (exit 3)."""
    p = str(tmp_path / 'rpfs.conf')
    open(p, 'w').write('[mgr]\ndb = /x\n%s\n' % line)
    for argv, code in (([util.binary('mgr/rpfs-mgr'), '--conf', p], 2),
                       ([util.binary('admin/rpfs'), 'mkfs', '--conf', p], 3)):
        r = util.run(argv, check=False, timeout=30)
        assert r.returncode == code, (argv, r.stderr)
        assert '%s:3: %s' % (p, msg) in r.stderr, r.stderr
