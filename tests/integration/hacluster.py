#!/usr/bin/python3
"""The driver of scripts/ha-cluster.sh: a whole rpfs cluster with its
metadata in a replicated PostgreSQL, in network namespaces on one machine
(tests/integration/netns.py's NetCluster, plus three hosts without rpfs
daemons for the database):

    mon    10.77.0.60  the pg_auto_failover monitor (pg_autoctl + postgres)
    db1    10.77.0.61  a PostgreSQL node (pg_autoctl + postgres)
    db2    10.77.0.62  another; one primary, one synchronous standby
    mgr    10.77.0.10  rpfs-mgr, store postgresql, the multi-host store_uri
    mgr2   10.77.0.63  a standby rpfs-mgr, when the build has --lease
    iodI   10.77.0.2I  rpfs-iod, 4 of them
    cliK   10.77.0.4K  rpfs-fuse, mounted on DIR/mnt/cliK (host paths)

    hacluster.py up|down|status --dir DIR [--clients N] [--lease SECONDS]
                                [--client-timeout SECONDS]

Everything lives under DIR (state.json says what was made, written after
each step, so `down` undoes a partial `up` too; logs/; pg/NODE/ the
database nodes, owned by the system user rpfs-pg). The daemons outlive this
process: `up` starts them in sessions of their own and exits. `down`
unmounts the clients, kills every process left in each namespace (`ip
netns pids`, each pid checked to run there: netns.signal_in_ns), deletes
the namespaces and DIR. The tests import it
(tests/integration/test_ha.py) for the state and the primary's location.
"""
import argparse
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402
import util  # noqa: E402

PGBIN = '/usr/lib/postgresql/15/bin'
PG_USER = 'rpfs-pg'
# Each node its own port: the nodes share one unix socket directory
# (DIR/pg/sock), since a standby's postgresql.conf is its primary's copy
# (pg_basebackup) and names the same one.
PG_PORTS = {'mon': 5431, 'db1': 5432, 'db2': 5433}
PG_NODES = ('mon', 'db1', 'db2')
DBNAME = 'rpfs'
# The failover timing (pg_auto_failover's defaults in brackets). The
# monitor checks each node every second [5 s]; a check gives up after 1 s
# [5 s] and is retried once [2] after 0.5 s [2 s]; a node whose checks fail
# and whose keeper has not reported for 3 s [20 s] is unhealthy; a primary
# that is unhealthy gets 5 s [30 s] to demote itself before its standby is
# made the new primary (primary_demote_timeout); the monitor's own start
# grace is 5 s [10 s]. On the keepers (their config files): a primary that
# reaches neither the monitor nor its standby demotes itself after 3 s
# [20 s] (network_partition_timeout, which must stay below
# primary_demote_timeout, or a cut-off old primary could still take writes
# when the new one starts), and a standby being promoted waits 2 s [5 s]
# for its WAL receiver to stop. Measured here: a primary killed with -9 is
# replaced (the new one accepts writes) about 9 s later. (test_ha.py
# derives its bound on a failover from these.)
MONITOR_GUCS = {
    'pgautofailover.health_check_period': '1000',
    'pgautofailover.health_check_timeout': '1000',
    'pgautofailover.health_check_max_retries': '1',
    'pgautofailover.health_check_retry_delay': '500',
    'pgautofailover.node_considered_unhealthy_timeout': '3000',
    'pgautofailover.primary_demote_timeout': '5000',
    'pgautofailover.startup_grace_period': '5000',
}
KEEPER_CONF = {
    'timeout.network_partition_timeout': '3',
    'timeout.prepare_promotion_walreceiver': '2',
}
# What up gives the mgrs and the clients unless told otherwise: the mgrs'
# own defaults (--lease: mgr_lead.h MGR_LEAD_DEFAULT_MS; the clients' -o
# timeout: net.h NET_DEFAULT_TIMEOUT_MS), passed explicitly so that the
# state says what runs.
DEFAULT_LEASE_S = 10
DEFAULT_CLIENT_TIMEOUT_S = 10


class Ha:
    """The cluster described by DIR/state.json; net is the NetCluster while
    `up` runs (None in `down` and `status`, which work from the state)."""

    def __init__(self, d):
        self.dir = os.path.abspath(d)
        self.state_path = os.path.join(self.dir, 'state.json')
        self.state = {}
        self.net = None
        if os.path.exists(self.state_path):
            with open(self.state_path) as f:
                self.state = json.load(f)

    def save(self):
        """Write the state (atomically: a killed `up` leaves a whole file)."""
        tmp = self.state_path + '.tmp'
        with open(tmp, 'w') as f:
            json.dump(self.state, f, indent=1, sort_keys=True)
        os.rename(tmp, self.state_path)

    # ------------------------------------------------------------ pg nodes

    def pg_env(self, node):
        """The environment of node's pg_autoctl: its config and state files
        under its own directory (rpfs-pg has no home)."""
        home = os.path.join(self.dir, 'pg', node)
        return dict(os.environ, HOME=home, XDG_CONFIG_HOME=home + '/config',
                    XDG_DATA_HOME=home + '/share', XDG_RUNTIME_DIR=home + '/run',
                    PGHOST=self.sockdir(), PGPORT=str(PG_PORTS[node]),
                    PATH=PGBIN + ':' + os.environ.get('PATH', '/usr/bin:/bin'))

    def sockdir(self):
        """The unix socket directory of every database node."""
        return os.path.join(self.dir, 'pg', 'sock')

    def pg_argv(self, node, argv):
        """argv as rpfs-pg in node's namespace."""
        ns = self.state['nodes'][node]['ns']
        return ['nsenter', '--net=/run/netns/' + ns, '--', 'runuser', '-u', PG_USER,
                '--'] + list(argv)

    def pg_run(self, node, argv, check=True, timeout=60):
        """Run argv as rpfs-pg in node's namespace; its output."""
        return util.run(self.pg_argv(node, argv), check=check, timeout=timeout,
                        env=self.pg_env(node))

    def psql(self, node, sql, db='postgres', check=True):
        """sql through node's unix socket as the superuser; rows as lists."""
        r = self.pg_run(node, ['psql', '-X', '-qAt', '-F', '\t', '-v', 'ON_ERROR_STOP=1',
                               '-h', self.sockdir(), '-p', str(PG_PORTS[node]),
                               '-d', db, '-c', sql], check=check, timeout=20)
        return [line.split('\t') for line in r.stdout.splitlines() if line]

    def pg_start(self, node, create_argv, initdb):
        """Start `pg_autoctl create ... --run` for node in the background
        (its log in logs/NODE.log), remembering its pid. initdb: make the
        data directory first (pg_autoctl then adopts it), with the unix
        socket directory in its config (pg_autoctl has no setting for it,
        and Debian's default, /var/run/postgresql, is postgres's)."""
        home = os.path.join(self.dir, 'pg', node)
        for sub in ('config', 'share', 'run'):
            os.makedirs(os.path.join(home, sub), exist_ok=True)
        os.makedirs(self.sockdir(), exist_ok=True)
        uid = pwd.getpwnam(PG_USER).pw_uid
        for x in [os.path.dirname(home), self.sockdir()]:
            os.chown(x, uid, -1)
            os.chmod(x, 0o755)
        for root, dirs, _files in os.walk(home):
            for x in [root] + [os.path.join(root, d) for d in dirs]:
                os.chown(x, uid, -1)
                os.chmod(x, 0o700)
        if initdb:
            self.initdb(node, home + '/data')
        return self.keeper(node, ['pg_autoctl'] + create_argv + [
            '--pgdata', home + '/data', '--pgport', str(PG_PORTS[node]),
            '--pgctl', PGBIN + '/pg_ctl', '--hostname', self.state['nodes'][node]['addr'],
            '--auth', 'trust', '--no-ssl', '--run'])

    def keeper(self, node, argv):
        """Start pg_autoctl argv for node in the background, its output
        appended to logs/NODE.log; remember its pid (state autoctl_pid)."""
        fh = open(os.path.join(self.dir, 'logs', node + '.log'), 'ab')
        p = subprocess.Popen(self.pg_argv(node, argv), stdin=subprocess.DEVNULL, stdout=fh,
                             stderr=fh, start_new_session=True, env=self.pg_env(node))
        fh.close()
        util.register_pid(p.pid)
        self.state['nodes'][node]['autoctl_pid'] = p.pid
        self.save()
        return p

    def initdb(self, node, pgdata):
        """initdb pgdata as rpfs-pg (superuser rpfs-pg, local connections
        trusted), the socket directory and synchronous_commit in its
        config."""
        self.pg_run(node, [PGBIN + '/initdb', '-D', pgdata, '--auth-local=trust',
                           '--auth-host=reject', '--locale=C', '-E', 'UTF8'], timeout=120)
        with open(os.path.join(pgdata, 'postgresql.conf'), 'a') as f:
            # checkpoint_completion_target 0: a checkpoint writes at full
            # speed, not spread over minutes (pg_basebackup, which a
            # standby's creation and rejoin run, waits for one, and
            # pg_autoctl does not ask it for a fast one: ~95 s per standby)
            f.write("# scripts/ha-cluster.sh\nunix_socket_directories = '%s'\n"
                    "synchronous_commit = on\nlc_messages = 'C'\n"
                    "checkpoint_completion_target = 0\n" % self.sockdir())
        # the mgrs, with a password, from the bridge's subnet (a standby
        # gets this file with its copy of the data)
        with open(os.path.join(pgdata, 'pg_hba.conf'), 'a') as f:
            f.write('# scripts/ha-cluster.sh: the mgrs\nhost %s rpfs %s.0/24 scram-sha-256\n'
                    % (DBNAME, netns.SUBNET))

    def monitor_uri(self):
        return 'postgres://autoctl_node@%s:%d/pg_auto_failover?sslmode=disable' % (
            self.state['nodes']['mon']['addr'], PG_PORTS['mon'])

    def node_states(self):
        """{name: (reported state, goal state)} from the monitor."""
        rows = self.psql('mon', 'SELECT nodename, reportedstate, goalstate '
                         'FROM pgautofailover.node', db='pg_auto_failover')
        return {r[0]: (r[1], r[2]) for r in rows}

    def primary(self):
        """The name of the node the monitor has as the writable primary
        (reported and goal state primary, or wait_primary: a primary whose
        standby is gone, which commits alone), or None."""
        for name, (rep, goal) in self.node_states().items():
            if rep == goal and rep in ('primary', 'wait_primary'):
                return name
        return None

    def wait(self, cond, timeout, what, proc=None, log=None):
        """util.wait_until, failing early with the log if proc exited."""
        def check():
            if proc is not None and proc.poll() is not None:
                raise RuntimeError('%s: exited with %s before %s\n%s' % (
                    log, proc.returncode, what, util.LogFile(log, log).tail(30)))
            try:
                return cond()
            except AssertionError:
                return False
        util.wait_until(check, timeout, 0.5, what)

    def up_monitor(self):
        """The monitor, then its failover timing (MONITOR_GUCS)."""
        log = os.path.join(self.dir, 'logs', 'mon.log')
        p = self.pg_start('mon', ['create', 'monitor'], initdb=True)
        self.wait(lambda: self.psql('mon', 'SELECT 1 FROM pg_extension WHERE '
                                    "extname = 'pgautofailover'", db='pg_auto_failover'),
                  120, 'the monitor is up', p, log)
        for k, v in MONITOR_GUCS.items():
            self.psql('mon', 'ALTER SYSTEM SET %s = %s' % (k, v))
        self.psql('mon', 'SELECT pg_reload_conf()')

    def up_db(self, node, want):
        """Database node node, until the monitor reports it in state want;
        then its keeper's timeouts (KEEPER_CONF)."""
        log = os.path.join(self.dir, 'logs', node + '.log')
        p = self.pg_start(node, ['create', 'postgres', '--name', node, '--dbname', DBNAME,
                                 '--monitor', self.monitor_uri()],
                          initdb=(want == 'single'))

        def reached():
            st = self.node_states().get(node)
            return st is not None and st[0] == want and st[1] == want
        self.wait(reached, 180, '%s is %s' % (node, want), p, log)
        pgdata = os.path.join(self.dir, 'pg', node, 'data')
        for k, v in KEEPER_CONF.items():
            self.keeper_set(node, pgdata, k, v)
        self.pg_run(node, ['pg_autoctl', 'reload', '--pgdata', pgdata])

    def keeper_set(self, node, pgdata, key, value):
        """pg_autoctl config set, until config get reads the value back.
        Each set SIGHUPs the running keeper, which reloads and writes its
        config file again; a `config set` that reads the file while it is
        being written fails with "Failed to find section" (seen in CI),
        so a failed one is tried again, for up to 30 s."""
        deadline = time.monotonic() + 30
        while True:
            r = self.pg_run(node, ['pg_autoctl', 'config', 'set', '--pgdata', pgdata,
                                   key, value], check=False)
            g = self.pg_run(node, ['pg_autoctl', 'config', 'get', '--pgdata', pgdata, key],
                            check=False)
            if r.returncode == 0 and g.returncode == 0 and g.stdout.strip() == value:
                return
            if time.monotonic() > deadline:
                raise RuntimeError('%s: pg_autoctl config set %s %s failed (%d): %s%s' % (
                    node, key, value, r.returncode, r.stderr, g.stderr))
            time.sleep(0.5)

    @staticmethod
    def lease_supported():
        """Whether this build's rpfs-mgr runs as one of several mgrs on one
        store (--lease: one active, the others standing by)."""
        r = util.run([util.binary('mgr/rpfs-mgr'), '--help'], check=False, timeout=30)
        # --lease SECONDS, not --lease-ms (the iods' fence lease)
        return re.search(r'--lease(?![-\w])', r.stdout + r.stderr) is not None

    def second_mgr(self, lease):
        """The standby mgr (on host mgr2): the first one's arguments on
        its own address; both get --lease lease (seconds)."""
        net = self.net
        node = [n for n in net.extra_nodes if n.name == 'mgr2'][0]
        net.mgr.argv += ['--lease', str(lease)]
        first = net.mgr.argv
        cmd = first[first.index('--') + 1:]
        cmd[cmd.index('--listen') + 1] = '%s:%d' % (node.addr, netns.MGR_PORT)
        net.mgr_specs = ['%s:%d' % (net.mgr_node.addr, netns.MGR_PORT),
                         '%s:%d' % (node.addr, netns.MGR_PORT)]
        return util.Daemon('ha-mgr2', node.argv(cmd), os.path.join(self.dir, 'logs', 'mgr2.log'),
                           r'^<5>rpfs-mgr: standby on ', net.env)

    def store_uri(self):
        """The mgr's multi-host store URI: both database nodes, the
        read-write one wins (a failover moves it)."""
        hosts = ','.join('%s:%d' % (self.state['nodes'][n]['addr'], PG_PORTS[n])
                         for n in ('db1', 'db2'))
        return 'postgresql://rpfs:%s@%s/%s?target_session_attrs=read-write' % (
            self.state['password'], hosts, DBNAME)

    # ------------------------------------------------------------ up

    def up(self, nclients, lease=None, client_timeout=None):
        """Bring everything up in order: the namespaces, the monitor, db1
        (primary), db2 (synchronous standby), the role and schema, the
        iods, the mgr (and a standby mgr when this build has several mgrs
        with one active; lease: their --lease, seconds), the mounts
        (client_timeout: their -o timeout, seconds). The state records
        both (lease_s, client_timeout_s), defaults included."""
        lease = DEFAULT_LEASE_S if lease is None else lease
        client_timeout = (DEFAULT_CLIENT_TIMEOUT_S if client_timeout is None
                          else client_timeout)
        for x in ('pg', 'mnt', 'logs'):
            shutil.rmtree(os.path.join(self.dir, x), ignore_errors=True)
        os.makedirs(os.path.join(self.dir, 'logs'), exist_ok=True)
        os.chmod(self.dir, 0o755)
        two = self.lease_supported()
        self.state = {'nodes': {}, 'ns': [], 'mounts': [], 'logs': [], 'mgrs': 2 if two else 1,
                      'lease_s': lease if two else None, 'client_timeout_s': client_timeout}
        self.save()
        ha = self

        class Net(netns.NetCluster):
            def _add_ns(self, ns):
                # into the state before it exists: down deletes it even if
                # up dies right after
                ha.state['ns'].append(ns)
                ha.save()
                super()._add_ns(ns)

        store = None
        self.net = Net(self.dir, niods=4, nclients=nclients, name='ha',
                       extra_nodes=PG_NODES + (('mgr2',) if two else ()),
                       store_uri='postgresql://placeholder/')
        for node in self.net.nodes():
            self.state['nodes'][node.name] = {'ns': node.ns, 'addr': node.addr,
                                              'port': node.port}
        self.state['run'] = self.net.run_id
        self.state['bridge_ns'] = self.net.bridge_ns
        self.save()
        self.net.setup_network()
        self.up_monitor()
        self.up_db('db1', 'single')
        self.up_db('db2', 'secondary')
        self.wait(lambda: self.primary() == 'db1', 60, 'db1 is primary')
        self.state['password'] = os.urandom(16).hex()
        self.save()
        self.psql('db1', "CREATE ROLE rpfs LOGIN PASSWORD '%s'" % self.state['password'])
        self.psql('db1', 'ALTER DATABASE %s OWNER TO rpfs' % DBNAME)
        store = self.store_uri()
        self.state['store_uri'] = store
        self.save()
        util.run(self.net.mgr_node.argv([util.binary('admin/rpfs'), 'mkfs',
                                         '--store-uri', store]), timeout=60)
        self.net.store_uri = store
        argv = self.net.mgr.argv
        argv[argv.index('postgresql://placeholder/')] = store
        daemons = self.net.iods + [self.net.mgr]
        if two:
            daemons.append(self.second_mgr(lease))
        for name, dmn in (('mgr', self.net.mgr), ('mgr2', daemons[-1] if two else None)):
            if dmn is not None:
                self.state['nodes'][name]['argv'] = dmn.argv
        self.state['mgr_spec'] = self.net.mgr_spec()
        for d in daemons:
            self.state['logs'].append(d.log.path)
            self.save()
            d.start()
        for k in range(nclients):
            path = os.path.join(self.dir, 'mnt', 'cli%d' % k)
            self.state['mounts'].append(path)
            self.save()
            m = self.net.mount_client(k, path, 'allow_other,timeout=%g' % client_timeout)
            self.state['logs'].append(m.log.path)
        self.state['up'] = True
        self.save()

    # ------------------------------------------------------------ faults

    def signal_node(self, name, sig):
        """Send sig to every process in node name's namespace (kill -9 of
        a host: its mgr, or its postgres and pg_autoctl); the pids
        signalled. Every pid listed must run in that namespace, and it
        must not be ours: else nothing is signalled and
        netns.NotInNamespace says which pid (netns.signal_in_ns)."""
        ns = self.state['nodes'][name]['ns']
        return netns.signal_in_ns(self.ns_pids([ns]), ns, sig)

    def link(self, name, up):
        """Cut node name off the bridge (it keeps its address and sockets;
        nothing reaches it) or connect it again."""
        util.run(['ip', '-n', self.state['bridge_ns'], 'link', 'set',
                  self.state['nodes'][name]['port'], 'up' if up else 'down'])

    def start_mgr(self, name, timeout=60):
        """Start the mgr of host name again (after a kill), with the
        arguments up gave it, appending to its log; wait until it serves
        or stands by."""
        log = os.path.join(self.dir, 'logs', name + '.log')
        off = os.path.getsize(log) if os.path.exists(log) else 0
        fh = open(log, 'ab')
        p = subprocess.Popen(self.state['nodes'][name]['argv'], stdin=subprocess.DEVNULL,
                             stdout=fh, stderr=fh, start_new_session=True,
                             env=dict(os.environ, RPFS_TRANSPORT='tcp'))
        fh.close()
        util.register_pid(p.pid)

        def started():
            with open(log, 'rb') as f:
                f.seek(off)
                text = f.read().decode('utf-8', 'replace')
            return re.search(r'^<5>rpfs-mgr: (ready:|standby on )', text, re.M)
        self.wait(started, timeout, '%s serves or stands by' % name, p, log)

    def start_db(self, name):
        """Start database node name's keeper again (after a kill): it
        starts postgres and, told by the monitor, rejoins as a standby."""
        self.keeper(name, ['pg_autoctl', 'run', '--pgdata',
                           os.path.join(self.dir, 'pg', name, 'data')])

    def lease(self):
        """(host name of the mgr holding an unexpired lease, its token),
        read on the primary; (None, None) if there is no primary or no
        live lease."""
        prim = self.primary()
        if prim is None:
            return None, None
        rows = self.psql(prim, 'SELECT holder, token FROM rpfs_lease WHERE expires >= now()',
                         db=DBNAME, check=False)
        for r in rows:
            for name in ('mgr', 'mgr2'):
                node = self.state['nodes'].get(name)
                if node and r[0].startswith('%s:' % node['addr']):
                    return name, int(r[1])
        return None, None

    def active_mgr(self):
        """The host name of the mgr holding an unexpired lease, or None."""
        return self.lease()[0]

    def healthy(self):
        """Everything is back: a primary with a standby in sync, both
        mgrs running and one of them active."""
        st = self.node_states()
        if sorted(v for v in st.values()) != [('primary', 'primary'),
                                              ('secondary', 'secondary')]:
            return False
        mgrs = [n for n in ('mgr', 'mgr2') if n in self.state['nodes']]
        if not all(self.ns_pids([self.state['nodes'][n]['ns']]) for n in mgrs):
            return False
        return self.active_mgr() is not None

    # ------------------------------------------------------------ down

    def down(self, keep_logs=False):
        """Undo whatever up made, in reverse: the mounts, every process in
        each namespace (SIGTERM, then SIGKILL after 10 s), the namespaces,
        DIR (all of it but DIR/logs when keep_logs). Returns the problems
        it could not fix (empty: all gone)."""
        problems = []
        for path in reversed(self.state.get('mounts', [])):
            if util.is_mounted(path):
                r = util.run(['fusermount3', '-u', path], check=False, timeout=30)
                if r.returncode != 0:
                    util.run(['umount', '-l', path], check=False, timeout=30)
            if util.is_mounted(path):
                problems.append('%s: still mounted' % path)
        namespaces = [ns for ns in self.state.get('ns', [])
                      if os.path.exists('/run/netns/' + ns)]
        refused = {}
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for ns in namespaces:
                if ns in refused:
                    continue
                try:
                    netns.signal_in_ns(self.ns_pids([ns]), ns, sig)
                except netns.NotInNamespace as e:
                    refused[ns] = str(e)
                    problems.append(str(e))
            deadline = time.monotonic() + 10
            while self.ns_pids(namespaces) and time.monotonic() < deadline:
                time.sleep(0.2)
        left = self.ns_pids(namespaces)
        if left:
            problems.append('processes that did not exit: %s' % left)
        for ns in reversed(namespaces):
            r = util.run(['ip', 'netns', 'del', ns], check=False, timeout=30)
            if r.returncode != 0:
                problems.append('ip netns del %s: %s' % (ns, r.stderr.strip()))
        if problems:
            return problems
        if not keep_logs:
            shutil.rmtree(self.dir, ignore_errors=True)
            return problems
        for x in os.listdir(self.dir):
            if x != 'logs':
                p = os.path.join(self.dir, x)
                if os.path.isdir(p):
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    os.unlink(p)
        return problems

    @staticmethod
    def ns_pids(namespaces):
        """The pids `ip netns pids` lists for these network namespaces
        (what is signalled is checked again: netns.signal_in_ns)."""
        pids = []
        for ns in namespaces:
            pids += netns.netns_pids(ns)
        return pids

    # ------------------------------------------------------------ status

    def status(self):
        """Print where everything is and whether it runs, the monitor's
        view of the database nodes and, from the primary, that commits
        wait for the synchronous standby. Returns 0 when all is up."""
        st = self.state
        nodes = st.get('nodes', {})
        ok = bool(st.get('up'))
        print('dir:        %s%s' % (self.dir, '' if ok else '  (up did not finish)'))
        print('logs:       %s/logs/' % self.dir)
        for name in sorted(nodes):
            n = nodes[name]
            alive = os.path.exists('/run/netns/' + n['ns']) and self.ns_pids([n['ns']])
            what = 'pg_auto_failover monitor :%d' % PG_PORTS['mon']
            if name.startswith('mgr'):
                what = 'rpfs-mgr :%d' % netns.MGR_PORT
            elif name.startswith('db'):
                what = 'PostgreSQL node :%d' % PG_PORTS[name]
            elif name.startswith('iod'):
                what = 'rpfs-iod :%d' % netns.IOD_PORT
            elif name.startswith('cli'):
                what = 'rpfs-fuse on %s' % os.path.join(self.dir, 'mnt', name)
            if not alive:
                ok = False
            print('%-6s %-12s netns %-20s %-45s %s' % (name, n['addr'], n['ns'], what,
                                                       'running' if alive else 'DOWN'))
        if st.get('mgrs', 1) == 1:
            print('mgrs:       1 (this build of rpfs-mgr has no --lease: several mgrs '
                  'with one active are not in it)')
        else:
            print('mgrs:       %d, one active (--lease %s)' % (st['mgrs'], st.get('lease_s')))
        print('clients:    -o timeout=%s' % st.get('client_timeout_s'))
        print('store_uri:  %s' % st.get('store_uri', '-'))
        print('mount arg:  %s' % st.get('mgr_spec', '-'))
        for m in st.get('mounts', []):
            print('mount:      %s %s' % (m, 'mounted' if util.is_mounted(m) else 'NOT MOUNTED'))
        if 'mon' not in nodes:
            return 1
        try:
            for name, (rep, goal) in sorted(self.node_states().items()):
                print('database:   %s reported %s, goal %s' % (name, rep, goal))
            prim = self.primary()
            print('primary:    %s' % prim)
            if prim:
                sc = self.psql(prim, 'SHOW synchronous_commit')[0][0]
                names = self.psql(prim, 'SHOW synchronous_standby_names')
                rep = self.psql(prim, 'SELECT application_name, state, sync_state '
                                'FROM pg_stat_replication')
                print('sync:       synchronous_commit = %s, synchronous_standby_names '
                      "= '%s'" % (sc, names[0][0] if names else ''))
                for r in rep:
                    print('standby:    %s %s %s' % tuple(r))
                if st.get('mgrs', 1) > 1:
                    lease = self.psql(prim, 'SELECT token, holder FROM rpfs_lease', db=DBNAME,
                                      check=False)
                    for r in lease:
                        print('active mgr: %s (lease token %s)' % (r[1], r[0]))
                if sc != 'on' or not any(r[2] in ('sync', 'quorum') for r in rep):
                    print('sync:       NOT SYNCHRONOUS: an acknowledged commit may be '
                          'lost with the primary')
                    ok = False
            else:
                ok = False
        except (AssertionError, subprocess.TimeoutExpired) as e:
            print('database:   the monitor does not answer: %s' % str(e).splitlines()[0])
            ok = False
        return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(prog='ha-cluster.sh')
    ap.add_argument('cmd', choices=('up', 'down', 'status'))
    ap.add_argument('--dir', default='/tmp/rpfs-ha')
    ap.add_argument('--clients', type=int, default=2)
    ap.add_argument('--lease', type=int, default=None,
                    help="the mgrs' --lease in seconds (when this build has it; "
                    "default %d)" % DEFAULT_LEASE_S)
    ap.add_argument('--client-timeout', type=float, default=None,
                    help="the clients' -o timeout in seconds (default %d)"
                    % DEFAULT_CLIENT_TIMEOUT_S)
    a = ap.parse_args()
    if a.lease is not None and not 2 <= a.lease <= 600:
        ap.error('--lease: expected seconds 2..600, got %d' % a.lease)
    if a.client_timeout is not None and not 1 <= a.client_timeout <= 600:
        ap.error('--client-timeout: expected seconds 1..600, got %g' % a.client_timeout)
    if not 1 <= a.clients <= 16:
        ap.error('--clients: expected 1..16, got %d' % a.clients)
    if os.geteuid() != 0:
        print('ha-cluster.sh: needs root (network namespaces, mounts, the rpfs-pg user)',
              file=sys.stderr)
        return 1
    ha = Ha(a.dir)
    if a.cmd == 'up':
        if ha.state:
            print('ha-cluster.sh up: %s: a cluster is already here (state.json); run down '
                  'first' % ha.dir, file=sys.stderr)
            return 1
        try:
            ha.up(a.clients, a.lease, a.client_timeout)
        except BaseException as e:
            print('ha-cluster.sh up: %s\nundoing it (the logs stay in %s/logs)'
                  % (e, ha.dir), file=sys.stderr)
            for p in ha.down(keep_logs=True):
                print('ha-cluster.sh down: %s' % p, file=sys.stderr)
            return 1
        return ha.status()
    if a.cmd == 'down':
        if not ha.state:
            print('ha-cluster.sh down: %s: no cluster here (no state.json)' % ha.dir,
                  file=sys.stderr)
            return 0
        problems = ha.down()
        for p in problems:
            print('ha-cluster.sh down: %s' % p, file=sys.stderr)
        return 1 if problems else 0
    if not ha.state:
        print('ha-cluster.sh status: %s: no cluster here (no state.json)' % ha.dir,
              file=sys.stderr)
        return 1
    return ha.status()


if __name__ == '__main__':
    sys.exit(main())
