"""A cluster of separate hosts on one machine: the mgr, each iod and each
client in a network namespace of its own, with its own address, joined by a
bridge in one more namespace; optional tc netem on every link; and the
faults of the fault matrix (tests/integration/test_netfault.py).

Topology of a run named R (unique per NetCluster, so runs never collide):

    rpfs-R-br     bridge br0, one port v-NODE per node, no address
    rpfs-R-mgr    eth0 10.77.0.10/24          rpfs-mgr  :7400
    rpfs-R-iodI   eth0 10.77.0.(20+I)/24      rpfs-iod  :7401
    rpfs-R-cliK   eth0 10.77.0.(40+K)/24      rpfs-fuse (mount on the host fs)
    rpfs-R-X      eth0 10.77.0.(60+J)/24      extra_nodes[J], no rpfs daemon (the
                                              database hosts of scripts/ha-cluster.sh)

Nothing is added to the root namespace's network and nothing is routed
outside the bridge. Processes enter a node's namespace with `nsenter --net`
(not `ip netns exec`, which also makes a private mount namespace and would
hide the FUSE mounts from the test). Everything made here is undone by
NetCluster.destroy(), which also runs on a failed start.
"""
import errno
import os
import random
import re
import signal
import subprocess

import util

SUBNET = '10.77.0'
MGR_PORT = 7400
IOD_PORT = 7401


def _ip(*args, check=True):
    """Run `ip ARGS`; raise with its stderr when check and it fails."""
    return util.run(['ip'] + list(args), check=check, timeout=30)


class NotInNamespace(RuntimeError):
    """A signal was refused: the process does not run in the namespace of
    the node it was meant for (or that namespace is our own)."""


def _ns_id(path):
    """(st_dev, st_ino) of a network namespace file (/run/netns/NAME or
    /proc/PID/ns/net): equal for two files of the same namespace."""
    st = os.stat(path)
    return st.st_dev, st.st_ino


def netns_pids(ns):
    """The pids `ip netns pids ns` lists (nothing if ns is gone). Not
    proof that they run there: signal_in_ns checks each."""
    if not os.path.exists('/run/netns/' + ns):
        return []
    r = _ip('netns', 'pids', ns, check=False)
    return [int(x) for x in r.stdout.split()]


def signal_in_ns(pids, ns, sig):
    """Send sig to each of pids, every one of which must run in network
    namespace ns (/proc/PID/ns/net and /run/netns/ns the same st_dev and
    st_ino), and ns must not be this process's own namespace: a pid list
    (`ip netns pids`, a Popen's pid) can name a process outside the node
    (ns deleted or not a namespace mount, a pid reused), and a kill -9 of
    the node must not kill the test itself. All pids are checked before
    any is signalled (through pidfds, so a pid reused between the check
    and the signal cannot be hit); any outside ns raises NotInNamespace
    and none is signalled. A process that exited meanwhile (or a zombie,
    whose namespace cannot be read) is skipped. Returns the pids
    signalled."""
    try:
        want = _ns_id('/run/netns/' + ns)
    except OSError as e:
        raise NotInNamespace('refusing signal %d to %s: namespace %s: %s'
                             % (sig, list(pids), ns, e)) from e
    own = _ns_id('/proc/self/ns/net')
    if want == own or want[0] != own[0]:
        raise NotInNamespace(
            'refusing signal %d to %s: /run/netns/%s is %s (device %d, inode %d)'
            % (sig, list(pids), ns, 'our own network namespace' if want == own
               else 'not a network namespace', want[0], want[1]))
    fds = []
    try:
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue        # a short-lived process that ended meanwhile
            fds.append((pid, fd))
            try:
                got = _ns_id('/proc/%d/ns/net' % pid)
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                # exited since pidfd_open (a zombie's ns cannot be read)
                fds.pop()
                os.close(fd)
                continue
            if got != want:
                raise NotInNamespace(
                    'refusing signal %d to pid %d (%s): its network namespace '
                    '(device %d, inode %d%s) is not %s\'s (inode %d)'
                    % (sig, pid, _cmdline(pid), got[0], got[1],
                       ', ours' if got == own else '', ns, want[1]))
        done = []
        for pid, fd in fds:
            try:
                signal.pidfd_send_signal(fd, sig)
                done.append(pid)
            except ProcessLookupError:
                pass
        return done
    finally:
        for _pid, fd in fds:
            os.close(fd)


def _cmdline(pid):
    """pid's command line, for messages ('?' if it is gone)."""
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return f.read().replace(b'\0', b' ').decode(errors='replace').strip()
    except OSError:
        return '?'


def netem_spec():
    """The netem parameters every link gets: $RPFS_NETEM (e.g.
    'delay 1ms loss 0.5%'), empty (no netem) when unset. Each word must be a
    netem keyword or a number with an optional unit, so a typo fails the run
    with a message instead of silently testing without the fault."""
    spec = (os.environ.get('RPFS_NETEM') or '').strip()
    ok_words = {'delay', 'loss', 'duplicate', 'reorder', 'corrupt', 'rate', 'limit',
                'distribution', 'normal', 'pareto', 'paretonormal', 'random'}
    for w in spec.split():
        if w not in ok_words and not re.fullmatch(r'[0-9]+(\.[0-9]+)?(%|[a-zA-Z]+)?', w):
            raise ValueError('RPFS_NETEM: unexpected word %r in %r '
                             '(expected e.g. "delay 1ms loss 0.5%%")' % (w, spec))
    return spec


class Node:
    """One host: its namespace, its address and the bridge port it hangs on."""

    def __init__(self, run, name, addr):
        self.name = name
        self.ns = 'rpfs-%s-%s' % (run, name)
        self.addr = addr
        self.port = 'v-' + name          # its veth end in the bridge namespace

    def argv(self, argv):
        """argv run inside this node's network namespace."""
        return ['nsenter', '--net=/run/netns/' + self.ns, '--'] + list(argv)


class NetMount(util.Mount):
    """rpfs-fuse -f started in a client node's namespace."""

    def __init__(self, cluster, node, path, opts):
        super().__init__(cluster, path, opts, '%s-%s' % (cluster.name, node.name))
        self.node = node

    def start(self, timeout=30):
        """Mount and wait for the mount point (fails with the client's log)."""
        os.makedirs(self.path, exist_ok=True)
        self.log.register()
        argv = [util.binary('fuse-client/rpfs-fuse'), self.cluster.mgr_spec(), self.path,
                '-f']
        if self.opts:
            argv += ['-o', self.opts]
        fh = open(self.log.path, 'ab')
        self.proc = subprocess.Popen(self.node.argv(argv), stdin=subprocess.DEVNULL,
                                     stdout=fh, stderr=fh, start_new_session=True,
                                     env=self.cluster.env)
        fh.close()
        util.register_pid(self.proc.pid)
        try:
            util.wait_for_mount(self.path, timeout, self.proc)
        except Exception as e:
            self.umount()
            raise RuntimeError('%s: %s\n%s' % (self.name, e, self.log.tail())) from e


class NetCluster(util.Cluster):
    """1 mgr + niods iods + nclients client nodes, each in its own network
    namespace. util.Cluster's stop/check_alive/objects work unchanged; the
    network, the tmpfs data dirs and the namespaces go in destroy().

    full_iods: indexes of iods whose --data lies on a tmpfs of tmpfs_mib
    (for the full-disk fault). mgr_args go on the mgr's command line. Daemons use tcp (the bridge carries no RDMA
    device) whatever $RPFS_TRANSPORT says. extra_nodes: names of more
    hosts on the bridge that run no rpfs daemon (self.extra_nodes, in that
    order). store_uri: the mgr's PostgreSQL store (default: a database of
    its own when $RPFS_STORE is postgresql, else LMDB)."""

    def __init__(self, state_dir, niods=4, nclients=4, name='nf', full_iods=(),
                 tmpfs_mib=32, log_level=None, mgr_args=(), extra_nodes=(), store_uri=None):
        log_level = log_level or os.environ.get('RPFS_LOG_LEVEL', 'info')
        self.run_id = '%x%04x' % (os.getpid() & 0xffff, random.randrange(1 << 16))
        self.env = dict(os.environ, RPFS_TRANSPORT='tcp')
        self.state = state_dir
        self.niods = niods
        self.name = name
        self.logdir = os.path.join(state_dir, 'logs')
        os.makedirs(self.logdir, exist_ok=True)
        self.db = os.path.join(state_dir, 'db')
        # PostgreSQL store: reached over its unix socket, which a network
        # namespace does not hide
        self.store_uri = store_uri
        if store_uri is None and util.store() == 'postgresql':
            self.store_uri = util.pg_new_db(socket=True)
        self.mounts = []
        self.nmounts = 0
        self.netem = netem_spec()
        self.bridge_ns = 'rpfs-%s-br' % self.run_id
        self.mgr_node = Node(self.run_id, 'mgr', '%s.10' % SUBNET)
        self.iod_nodes = [Node(self.run_id, 'iod%d' % i, '%s.%d' % (SUBNET, 20 + i))
                          for i in range(niods)]
        self.cli_nodes = [Node(self.run_id, 'cli%d' % k, '%s.%d' % (SUBNET, 40 + k))
                          for k in range(nclients)]
        self.extra_nodes = [Node(self.run_id, x, '%s.%d' % (SUBNET, 60 + j))
                            for j, x in enumerate(extra_nodes)]
        self.tmpfs = {}       # iod index -> tmpfs mount point holding its data dir
        self.iod_dirs = []
        for i in range(niods):
            if i in full_iods:
                top = os.path.join(state_dir, 'iod%d-disk' % i)
                self.tmpfs[i] = (top, tmpfs_mib)
                self.iod_dirs.append(os.path.join(top, 'data'))
            else:
                self.iod_dirs.append(os.path.join(state_dir, 'iod%d' % i))
        self.iods = []
        for i, node in enumerate(self.iod_nodes):
            # --insecure: no key, on the bridge's 10.x addresses, which only
            # these namespaces can reach
            argv = [util.binary('iod/rpfs-iod'), '--listen', '%s:%d' % (node.addr, IOD_PORT),
                    '--data', self.iod_dirs[i], '--log-level', log_level, '--insecure']
            self.iods.append(util.Daemon('%s-iod%d' % (name, i), node.argv(argv),
                                         os.path.join(self.logdir, 'iod%d.log' % i),
                                         r'^<5>rpfs-iod: ready:', self.env))
        argv = [util.binary('mgr/rpfs-mgr'), '--listen', '%s:%d' % (self.mgr_node.addr, MGR_PORT),
                '--log-level', log_level, '--insecure'] + self.store_args()
        for node in self.iod_nodes:
            argv += ['--iod', '%s:%d' % (node.addr, IOD_PORT)]
        argv += list(mgr_args)
        self.mgr = util.Daemon('%s-mgr' % name, self.mgr_node.argv(argv),
                               os.path.join(self.logdir, 'mgr.log'),
                               r'^<5>rpfs-mgr: ready:', self.env)
        self.made_ns = []
        self.made_tmpfs = []
        self.mgr_specs = None   # [HOST:PORT, ...] when several mgrs serve

    def mgr_spec(self):
        """The mgr address(es) the clients are given: HOST:PORT, or a list
        HOST:PORT,HOST:PORT when self.mgr_specs is set (several mgrs)."""
        specs = self.mgr_specs
        return ','.join(specs) if specs else '%s:%d' % (self.mgr_node.addr, MGR_PORT)

    def nodes(self):
        return [self.mgr_node] + self.iod_nodes + self.cli_nodes + self.extra_nodes

    # ------------------------------------------------------------ setup

    def setup_network(self):
        """Create the bridge namespace, one namespace per node with a veth
        pair into the bridge, the addresses, and netem on both ends of every
        link when $RPFS_NETEM is set (so a packet crossing the bridge from
        node A to node B is delayed on A's egress and B's port egress)."""
        self._add_ns(self.bridge_ns)
        _ip('-n', self.bridge_ns, 'link', 'set', 'lo', 'up')
        _ip('-n', self.bridge_ns, 'link', 'add', 'br0', 'type', 'bridge')
        _ip('-n', self.bridge_ns, 'link', 'set', 'br0', 'up')
        for node in self.nodes():
            self._add_ns(node.ns)
            _ip('-n', node.ns, 'link', 'set', 'lo', 'up')
            _ip('-n', self.bridge_ns, 'link', 'add', node.port, 'type', 'veth',
                'peer', 'name', 'eth0', 'netns', node.ns)
            _ip('-n', self.bridge_ns, 'link', 'set', node.port, 'master', 'br0')
            _ip('-n', self.bridge_ns, 'link', 'set', node.port, 'up')
            _ip('-n', node.ns, 'addr', 'add', node.addr + '/24', 'dev', 'eth0')
            _ip('-n', node.ns, 'link', 'set', 'eth0', 'up')
            if self.netem:
                self.set_netem(node, self.netem)

    def _add_ns(self, ns):
        """ip netns add, remembered for destroy() and listed in
        $RPFS_TEST_NETNS (if set) so scripts/test.sh can delete what a
        killed run left behind."""
        _ip('netns', 'add', ns)
        self.made_ns.append(ns)
        f = os.environ.get('RPFS_TEST_NETNS')
        if f:
            with open(f, 'a') as fh:
                fh.write(ns + '\n')

    def set_netem(self, node, spec):
        """netem SPEC (tc words, e.g. 'delay 1ms loss 0.5%') on node's eth0."""
        util.run(['tc', '-n', node.ns, 'qdisc', 'replace', 'dev', 'eth0', 'root',
                  'netem'] + spec.split(), timeout=30)

    def setup_disks(self):
        """Mount the tmpfs of each iod in full_iods (its data dir inside)."""
        for i, (top, mib) in sorted(self.tmpfs.items()):
            os.makedirs(top, exist_ok=True)
            util.run(['mount', '-t', 'tmpfs', '-o', 'size=%dm' % mib, 'tmpfs', top])
            self.made_tmpfs.append(top)

    def start(self):
        """Network, disks, then util.Cluster.start (iods, then the mgr)."""
        self.setup_network()
        self.setup_disks()
        super().start()

    def mount_client(self, k, path, opts):
        """Mount the file system at path from client node k."""
        self.nmounts += 1
        m = NetMount(self, self.cli_nodes[k], path, opts)
        m.start()
        self.mounts.append(m)
        return m

    def rpfs(self, *args, timeout=60):
        """Run the admin tool `rpfs ARGS --mgr MGR` on client host 0 (the
        mgr's address is reachable only on the bridge), over tcp like the
        daemons; fails with its output when it fails."""
        argv = [util.binary('admin/rpfs')] + [str(a) for a in args] + \
            ['--mgr', '%s:%d' % (self.mgr_node.addr, MGR_PORT)]
        return util.run(self.cli_nodes[0].argv(argv), timeout=timeout,
                        env=self.env)

    # ------------------------------------------------------------ faults

    def node_of(self, d):
        """The node daemon d (self.mgr or self.iods[i]) runs on."""
        if d is self.mgr:
            return self.mgr_node
        return self.iod_nodes[self.iods.index(d)]

    def signal_daemon(self, d, sig):
        """Send sig to daemon d, refused (NotInNamespace) unless its process
        runs in its node's namespace (signal_in_ns). Nothing if it is not
        running (an exited child is left to d.stop to reap)."""
        if d.running():
            signal_in_ns([d.proc.pid], self.node_of(d).ns, sig)

    def kill9(self, d):
        """kill -9 a daemon (self.mgr or self.iods[i]) and reap it."""
        self.signal_daemon(d, signal.SIGKILL)
        d.stop(signal.SIGKILL)

    def restart(self, d):
        """Start a daemon again in its namespace, same address and data."""
        d.start()

    def pause(self, i):
        """SIGSTOP iod i: a hung server (connections stay open)."""
        self.signal_daemon(self.iods[i], signal.SIGSTOP)

    def resume(self, i):
        """SIGCONT iod i (after pause)."""
        self.signal_daemon(self.iods[i], signal.SIGCONT)

    def link(self, node, up):
        """Take node's bridge port down (a partition: the node keeps its
        address and sockets, nothing reaches it) or bring it back up."""
        _ip('-n', self.bridge_ns, 'link', 'set', node.port, 'up' if up else 'down')

    def fill_disk(self, i):
        """Fill iod i's tmpfs with a file beside its data dir until ENOSPC;
        returns the bytes written."""
        top = self.tmpfs[i][0]
        path = os.path.join(top, 'filler')
        n = 0
        buf = b'\0' * (1 << 20)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while True:
                n += os.write(fd, buf)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
        finally:
            os.close(fd)
        return n

    def free_disk(self, i):
        """Remove the filler of iod i's tmpfs."""
        try:
            os.unlink(os.path.join(self.tmpfs[i][0], 'filler'))
        except FileNotFoundError:
            pass

    # ------------------------------------------------------------ teardown

    def destroy(self):
        """Everything, even after a failed start or test: SIGCONT a paused
        iod (so it can exit), unmount, stop the daemons (util.Cluster.stop),
        unmount the tmpfs, delete the namespaces. Raises the first error at
        the end, after undoing all it could."""
        first = None
        for d in self.iods:
            try:
                self.signal_daemon(d, signal.SIGCONT)
            except NotInNamespace as e:
                first = first or e
        try:
            self.stop()
        except Exception as e:
            first = e
            for d in self.daemons():
                if d.running():
                    d.stop(signal.SIGKILL)
        for top in reversed(self.made_tmpfs):
            r = subprocess.run(['umount', top], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0:
                subprocess.run(['umount', '-l', top])
                first = first or RuntimeError('umount %s: %s' % (top, r.stdout))
        self.made_tmpfs = []
        for ns in reversed(self.made_ns):
            r = _ip('netns', 'del', ns, check=False)
            if r.returncode != 0:
                first = first or RuntimeError('ip netns del %s: %s' % (ns, r.stderr))
        self.made_ns = []
        if first is not None:
            raise first


def start_net_cluster(state_dir, **kw):
    """A started NetCluster registered in util.clusters (so the log watch
    sees its processes); destroyed again if the start fails."""
    c = NetCluster(state_dir, **kw)
    util.clusters.append(c)
    try:
        c.start()
    except BaseException:
        try:
            destroy(c)
        except Exception:
            pass
        raise
    return c


def destroy(c):
    """Destroy c and drop it from util.clusters."""
    try:
        c.destroy()
    finally:
        if c in util.clusters:
            util.clusters.remove(c)

