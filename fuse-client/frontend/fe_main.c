/*
 * fe_main.c - rpfs-fuse: mount an rpfs file system with FUSE.
 *
 *   rpfs-fuse MGRHOST[:PORT] MOUNTPOINT [-f] [-d] [-o OPT[,OPT...]]
 *
 * The mgr is contacted before anything is mounted, so a dead file system is
 * never mounted. Without -f the process forks first and the parent waits
 * until the child has mounted, so the exit status tells whether the mount
 * is in place (the transport's threads are only started in the child).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cfg.h"
#include "cli_core.h"
#include "fe_cb.h"
#include "fe_fuse.h"
#include "fe_lock.h"
#include "cli_lock.h"
#include "fe_loop.h"
#include "fe_metrics.h"
#include "cli_reap.h"
#include "cli_size.h"
#include "fe_wback.h"
#include "cli_inode.h"
#include "daemon.h"
#include "log.h"
#include "mountinfo.h"
#include "opt.h"

#define DEFAULT_MGR_PORT 7400
#define DEFAULT_READ_AHEAD_KB 4096 /* 4 READs of FE_MAX_IO (1 MiB) in flight */
#define MAX_READ_AHEAD_KB 65536
#define KEY_IGNORE 1000 /* fuse_opt key of the fstab-only options */

/* Command line state filled by fuse_opt_parse and the option table. */
struct fe_args {
	const char *prog;
	char *mgr;            /* MGRHOST[:PORT] as given */
	int nonopts;          /* positional arguments seen */
	double timeout;       /* -o timeout= seconds, [client] timeout */
	double attr_timeout;
	double entry_timeout;
	char *key;            /* -o key=FILE */
	char *conf;           /* -o conf=FILE */
	char *transport;      /* -o transport=NAME */
	int writeback;        /* kernel writeback cache (-o [no_]writeback_cache) */
	int write_behind;     /* -o [no_]write_behind (fe_wback.h) */
	unsigned workers;     /* -o workers=N (fe_loop.h) */
	unsigned read_ahead_kb; /* -o read_ahead_kb=N (fe_bdi.h), 0: leave it */
	struct opt_addr metrics; /* -o metrics=HOST:PORT */
	int leases;           /* -o [no_]leases (fe_cb.h) */
	int deleg;            /* -o [no_]deleg (fe_cb.h): WRITE leases */
	uint64_t given;       /* the table's entries given */
	int bad;              /* an argument was invalid (message printed) */
};

/* rpfs-fuse's -o options. */
static const struct opt fe_opts[] = {
	{ .name = "timeout", .kind = OPT_SECONDS, .arg = "S",
	  OPT_AT(struct fe_args, timeout), .lo = 1, .hi = 86400000,
	  .def = NET_DEFAULT_TIMEOUT_MS, .what = "seconds > 0",
	  .key = "[client] timeout",
	  .help = "fail a server request with EIO after S seconds; the calls "
		  "to an iod that timed out fail at once for one more period" },
	{ .name = "attr_timeout", .kind = OPT_SECONDS, .arg = "S",
	  OPT_AT(struct fe_args, attr_timeout), .lo = 0, .hi = 86400000,
	  .def = 1000, .what = "seconds >= 0",
	  .help = "how long the kernel may cache attributes" },
	{ .name = "entry_timeout", .kind = OPT_SECONDS, .arg = "S",
	  OPT_AT(struct fe_args, entry_timeout), .lo = 0, .hi = 86400000,
	  .def = 1000, .what = "seconds >= 0",
	  .help = "how long the kernel may cache names (and misses)" },
	{ .name = "key", .kind = OPT_STRING, .flags = OPT_COPY, .arg = "FILE",
	  OPT_AT(struct fe_args, key), .what = "a file", .key = "[cluster] key",
	  .help = "the clients' key file (mode 0600; see rpfs keygen)" },
	{ .name = "conf", .kind = OPT_STRING, .flags = OPT_COPY, .arg = "FILE",
	  OPT_AT(struct fe_args, conf), .what = "a file",
	  .defdoc = "$RPFS_CONF, " CFG_DEFAULT_PATH " if it exists",
	  .help = "the config file: its [cluster] key and transport, [client] "
		  "timeout and connections, [net] and [verbs]" },
	{ .name = "transport", .kind = OPT_STRING, .flags = OPT_COPY,
	  .arg = "tcp|verbs|auto", OPT_AT(struct fe_args, transport),
	  .check = dmn_transport_check, .what = "tcp, verbs or auto",
	  .defdoc = "tcp ($RPFS_TRANSPORT)", .key = "[cluster] transport",
	  .help = "how to reach the servers" },
	{ .name = "writeback_cache", .kind = OPT_SWITCH,
	  OPT_AT(struct fe_args, writeback), .defdoc = "off",
	  .help = "the kernel caches writes (faster small writes, weaker "
		  "cross-client semantics)" },
	{ .name = "no_writeback_cache", .kind = OPT_SWITCH, .flags = OPT_NEGATE,
	  OPT_AT(struct fe_args, writeback),
	  .help = "every write(2) goes to the iods (the default)" },
	{ .name = "write_behind", .kind = OPT_SWITCH,
	  OPT_AT(struct fe_args, write_behind), .def = 1, .defdoc = "on",
	  .help = "answer write(2) once the data is sent; a failure shows at "
		  "the next write, close or fsync (tcp only; never for "
		  "O_DIRECT, O_SYNC, O_DSYNC)" },
	{ .name = "no_write_behind", .kind = OPT_SWITCH, .flags = OPT_NEGATE,
	  OPT_AT(struct fe_args, write_behind),
	  .help = "answer write(2) once the iods stored the data" },
	{ .name = "workers", .kind = OPT_INT, .arg = "N",
	  OPT_AT(struct fe_args, workers), .lo = 1, .hi = FE_LOOP_MAX_WORKERS,
	  .def = FE_LOOP_DEFAULT_WORKERS, .what = "{lo}..{hi}",
	  .help = "FUSE worker threads (-s: 1)" },
	{ .name = "read_ahead_kb", .kind = OPT_INT, .arg = "N",
	  OPT_AT(struct fe_args, read_ahead_kb), .lo = 0,
	  .hi = MAX_READ_AHEAD_KB, .def = DEFAULT_READ_AHEAD_KB,
	  .what = "{lo}..{hi}",
	  .help = "the mount's readahead window in KiB (the default: 1 MiB "
		  "READs, 4 in flight; 0 keeps the kernel's 128; needs root)" },
	{ .name = "leases", .kind = OPT_SWITCH,
	  OPT_AT(struct fe_args, leases), .defdoc = "off",
	  .help = "READ leases on directories: the kernel keeps names an hour, "
		  "and the mgr has a change elsewhere invalidate them first, "
		  "through a callback channel (needs group commit at the mgr)" },
	{ .name = "no_leases", .kind = OPT_SWITCH, .flags = OPT_NEGATE,
	  OPT_AT(struct fe_args, leases),
	  .help = "no leases: names and attributes follow the fixed timeouts "
		  "(the default)" },
	{ .name = "deleg", .kind = OPT_SWITCH,
	  OPT_AT(struct fe_args, deleg), .defdoc = "off",
	  .help = "with leases: WRITE leases on the directories this mount "
		  "makes, in which it answers creates itself and sends them "
		  "in batches (one commit each); fsync waits for them" },
	{ .name = "no_deleg", .kind = OPT_SWITCH, .flags = OPT_NEGATE,
	  OPT_AT(struct fe_args, deleg),
	  .help = "every create is a request to the mgr (the default)" },
	{ .name = "metrics", .kind = OPT_ADDR, .arg = "HOST:PORT",
	  OPT_AT(struct fe_args, metrics), .addr = ADDR_PORT0, .defdoc = "off",
	  .help = "serve Prometheus /metrics on HOST:PORT" },
};

static const struct opt_prog fe_prog = {
	.name = "rpfs-fuse",
	.style = OPT_MOUNT,
	.usage = "usage: rpfs-fuse MGRHOST[:PORT][,MGRHOST[:PORT]...] MOUNTPOINT "
		 "[-f] [-d] [-o OPT[,OPT...]]\n",
	.intro = "  -f                 stay in the foreground\n"
		 "  -d                 FUSE debug output (implies -f)\n"
		 "  -s                 one FUSE worker thread\n"
		 "  -o allow_other     and the other generic FUSE mount options\n"
		 "  -o _netdev         (and nofail, noauto, auto, defaults: "
		 "fstab) accepted and ignored\n"
		 "The default mgr port: 7400.\n",
	.opts = fe_opts,
	.nopts = sizeof(fe_opts) / sizeof(fe_opts[0]),
};

/* fstab-only options mount(8) may pass on: accepted and ignored */
static const char *const fe_ignored[] = { "_netdev", "nofail", "noauto",
					    "auto", "defaults" };

/*
 * fuse_opt_parse's templates: one per entry of the table ("name=" or
 * "name", its key the entry's index), then the ignored ones.
 * @param[out] templ the names' storage; free it and *out after the parse
 * @return 0, -ENOMEM
 */
static int mount_spec(struct fuse_opt **out, char (**templ)[32])
{
	size_t n = fe_prog.nopts, ni = sizeof(fe_ignored) / sizeof(fe_ignored[0]);
	struct fuse_opt *spec = calloc(n + ni + 1, sizeof(*spec));
	char (*t)[32] = calloc(n, sizeof(*t));

	if (!spec || !t) {
		free(spec);
		free(t);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(t[i], sizeof(t[i]), "%s%s", fe_opts[i].name,
			 fe_opts[i].kind == OPT_SWITCH ? "" : "=");
		spec[i] = (struct fuse_opt)FUSE_OPT_KEY(t[i], (int)i);
	}
	for (size_t i = 0; i < ni; i++)
		spec[n + i] = (struct fuse_opt)FUSE_OPT_KEY(fe_ignored[i], KEY_IGNORE);
	*out = spec;
	*templ = t;
	return 0;
}

/* fuse_opt_parse callback: the table's -o options, the ignored ones and
 * the two positionals; a bad value is reported and marks a->bad. */
static int mount_opt(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct fe_args *a = data;
	char name[64], err[PROTO_MAX_HOST * 2 + 300];
	int rc;

	if (key >= 0 && key < (int)fe_prog.nopts) {
		snprintf(name, sizeof(name), "-o %s", fe_opts[key].name);
		rc = opt_set(&fe_prog, (unsigned)key, name,
			     strchr(arg, '=') ? strchr(arg, '=') + 1 : arg, a,
			     err, sizeof(err));
		if (rc == -EINVAL) {
			fprintf(stderr, "%s: %s\n", a->prog, err);
			a->bad = 1;
		}
		a->given |= 1ull << key;
		return rc == -ENOMEM ? -1 : 0;
	}
	if (key == KEY_IGNORE)
		return 0;
	if (key != FUSE_OPT_KEY_NONOPT)
		return 1;
	a->nonopts++;
	if (a->nonopts == 1) {
		a->mgr = strdup(arg);
		return a->mgr ? 0 : -1;
	}
	if (a->nonopts == 2)
		return 1; /* the mountpoint: fuse_parse_cmdline takes it */
	fprintf(stderr, "%s: unexpected argument \"%s\"\n", a->prog, arg);
	a->bad = 1;
	return 0;
}

/* Split MGRHOST, a list "HOST[:PORT],HOST[:PORT]..." of up to
 * ADDR_MAX_LIST mgrs (each "[V6ADDR][:PORT]" too, addr.h; the port
 * DEFAULT_MGR_PORT if none), into mgrs. @return 0, -EINVAL (printed) */
static int parse_mgr(const char *prog, const char *spec, struct addr_hp *mgrs,
		     int *n)
{
	char msg[PROTO_MAX_HOST * 2 + 200];

	if (addr_parse_list("MGRHOST", spec, DEFAULT_MGR_PORT, mgrs, n, msg,
			   sizeof(msg))) {
		fprintf(stderr, "%s: %s\n", prog, msg);
		return -EINVAL;
	}
	return 0;
}

/*
 * Fork; the parent waits for the child's status byte on a pipe and exits
 * with it. Returns the pipe's write end in the child (-1 in foreground).
 * Nothing before this starts a thread.
 */
static int daemon_start(int foreground, int *notify_fd)
{
	int p[2];
	pid_t pid;

	*notify_fd = -1;
	if (foreground)
		return 0;
	if (pipe(p))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		unsigned char st = 1;

		close(p[1]);
		if (read(p[0], &st, 1) != 1) {
			int ws;

			waitpid(pid, &ws, 0);
			st = 1;
		}
		_exit(st);
	}
	close(p[0]);
	setsid();
	*notify_fd = p[1];
	return 0;
}

/* Tell the waiting parent the outcome; on success detach stdio like
 * fuse_daemonize() does. */
static void daemon_ready(int fd, unsigned char status)
{
	if (fd < 0)
		return;
	if (status == 0) {
		int nul = open("/dev/null", O_RDWR);

		if (chdir("/") != 0)
			log_warn("chdir /: %s", strerror(errno));
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			dup2(nul, 2);
			if (nul > 2)
				close(nul);
		}
	}
	if (write(fd, &status, 1) != 1)
		log_warn("cannot notify the parent process");
	close(fd);
}

/*
 * Run the FUSE session on our worker loop (fe_loop.h) until unmount or
 * signal; the threads that may still reply (lock waiters) are drained
 * before the caller frees the loop and so closes its fds. @return 0, -errno
 */
static int run_session(struct fe_fuse *cf, struct fe_loop *lp)
{
	int rc;

	cf->loop = lp;
	rc = fe_loop_run(lp);
	fe_lock_drain(cf);
	return rc;
}

/* Block the signals that end the session in this thread and so in every
 * thread started after: only the loop's wait unblocks them (fe_loop_run),
 * so the handler always runs where the exit is noticed. */
static void block_exit_signals(void)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGTERM);
	sigaddset(&s, SIGHUP);
	(void)pthread_sigmask(SIG_BLOCK, &s, NULL);
}

/*
 * Transport options from the config file (-o conf=, $RPFS_CONF, or the
 * default path if it exists) and the -o key=/transport=/timeout= flags,
 * which win. @return 0, or -errno (message printed)
 */
static int client_net_opts(struct fe_args *a, struct net_opts *no)
{
	const char *path = a->conf;
	struct cfg *conf = NULL;
	char msg[512];
	int rc = 0;

	net_opts_default(no);
	if (!path)
		path = getenv("RPFS_CONF");
	if (!path && access(CFG_DEFAULT_PATH, R_OK) == 0)
		path = CFG_DEFAULT_PATH;
	if (path) {
		rc = cfg_load(&conf, path, msg, sizeof(msg));
		if (rc == 0 && !a->key)
			rc = cfg_net_opts(conf, no, msg, sizeof(msg));
		else if (rc == 0) {
			char *kp = conf->key_path;

			conf->key_path = NULL; /* -o key= wins */
			rc = cfg_net_opts(conf, no, msg, sizeof(msg));
			conf->key_path = kp;
		}
		if (rc) {
			fprintf(stderr, "%s: %s\n", a->prog, msg);
			goto out_free_conf;
		}
	}
	if (a->key) {
		rc = cfg_load_key(a->key, no, msg, sizeof(msg));
		if (rc) {
			fprintf(stderr, "%s: -o key: %s\n", a->prog, msg);
			goto out_free_conf;
		}
	}
	if (a->transport)
		(void)net_transport_parse(a->transport, &no->transport);
	if (opt_given(&fe_prog, a->given, "timeout") || !conf || !conf->timeout_ms)
		no->timeout_ms = (int)(a->timeout * 1000 + 0.5);
	if (no->timeout_ms < 1)
		no->timeout_ms = 1;
	no->rdma_dev = NULL; /* conf is freed below; the default device */
out_free_conf:
	cfg_free(conf);
	return rc;
}

/*
 * The truncate test hook, $RPFS_FUSE_TEST_TRUNCATE_EXIT (tests/integration/README.md "Fault
 * harness"): after-iods or after-mgr makes the next truncate _exit() there.
 * Off when unset; any other value is refused.
 * @return 0, or -EINVAL (message printed)
 */
static int test_hooks(const char *prog)
{
	const char *v = getenv("RPFS_FUSE_TEST_TRUNCATE_EXIT");

	if (!v)
		return 0;
	if (cli_size_test_exit(v)) {
		fprintf(stderr, "%s: RPFS_FUSE_TEST_TRUNCATE_EXIT=%s: expected "
			"after-iods or after-mgr\n", prog, v);
		return -EINVAL;
	}
	log_warn("test hook: the next truncate ends this process %s "
		 "(RPFS_FUSE_TEST_TRUNCATE_EXIT)", v);
	return 0;
}

/*
 * Refuse to stack a second mount on a directory that already holds an rpfs
 * mount (live, or dead: ENOTCONN); mountinfo is read by name, so a dead
 * mount is not called into. @return 0, or -EBUSY (message printed)
 */
static int refuse_stacked_mount(const char *prog, const char *dir)
{
	int rc = mnt_is_rpfs_mountpoint(dir);

	if (rc == 1) {
		fprintf(stderr, "%s: %s: already an rpfs mount point (umount it "
			"first)\n", prog, dir);
		return -EBUSY;
	}
	if (rc == -ENOTCONN) {
		fprintf(stderr, "%s: %s: a dead FUSE mount is there (transport "
			"endpoint is not connected): umount it first\n", prog, dir);
		return -EBUSY;
	}
	return 0; /* any other error: fuse_session_mount() reports it */
}

/* Add a -o option to the argument list. @return 0 or -ENOMEM */
static int add_opt(struct fuse_args *args, const char *fmt, const char *v)
{
	char buf[PROTO_MAX_HOST + 64];

	snprintf(buf, sizeof(buf), fmt, v);
	return fuse_opt_add_arg(args, "-o") || fuse_opt_add_arg(args, buf) ?
	       -ENOMEM : 0;
}

/* Everything main sets up, in order; undone by mount_close and
 * mount_free. */
struct mount_main {
	struct fuse_args args;
	struct fe_args a;
	struct fuse_cmdline_opts fo;
	struct net_opts no;
	struct addr_hp mgrs[ADDR_MAX_LIST];
	int nmgrs;
	char src[ADDR_STRLEN];  /* the first mgr: the fsname, messages */
	int notify_fd;          /* the waiting parent's pipe; -1: none */
	struct fe_fuse cf;
	struct fe_metrics *metrics;
	struct fuse_session *se;
};

/* Whether argv asks for the README's table of the -o options. */
static int wants_markdown(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help-markdown"))
			return 1;
	return 0;
}

/*
 * The command line: the -o options of the table, the generic FUSE ones,
 * the mgr list and the mount point.
 * @return -1 go on; else the exit status: 0 after --help or --version, 1
 *	out of memory, 2 a bad command line (printed)
 */
static int mount_parse(struct mount_main *m, int argc, char **argv)
{
	struct fe_args *a = &m->a;
	struct fuse_opt *spec;
	char (*templ)[32];
	int rc;

	a->prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	if (wants_markdown(argc, argv)) {
		opt_markdown(&fe_prog, stdout);
		return 0;
	}
	opt_defaults(&fe_prog, a);
	if (mount_spec(&spec, &templ))
		return 1;
	rc = fuse_opt_parse(&m->args, a, spec, mount_opt);
	free(spec);
	free(templ);
	if (rc == -1 || a->bad || fuse_parse_cmdline(&m->args, &m->fo) != 0)
		return 2;
	if (m->fo.show_help || m->fo.show_version) {
		if (m->fo.show_help)
			opt_help(&fe_prog, stdout);
		else
			printf("rpfs-fuse %s (libfuse %s)\n", RPFS_VERSION,
			       fuse_pkgversion());
		return 0;
	}
	if (a->deleg && !a->leases) {
		fprintf(stderr, "%s: -o deleg: delegated creates need -o leases "
			"(the mgr recalls them through its callback channel)\n",
			a->prog);
		return 2;
	}
	if (!a->mgr || !m->fo.mountpoint) {
		fprintf(stderr, "%s: missing %s\n", a->prog,
			!a->mgr ? "MGRHOST" : "MOUNTPOINT");
		fputs(fe_prog.usage, stderr);
		return 2;
	}
	if (parse_mgr(a->prog, a->mgr, m->mgrs, &m->nmgrs))
		return 2;
	if (m->fo.debug)
		log_init("rpfs-fuse", LOG_DEBUG);
	return -1;
}

/*
 * Before anything is mounted: the transport options (config file and
 * flags), the test hook, the refusal of a stacked mount, and the mount
 * options rpfs adds (fsname: the first mgr, as a comma would split the -o
 * list; subtype; default_permissions).
 * @return -1 go on; else the exit status: 2 a bad config file, key or hook,
 *	1 a refused mount point or out of memory (printed)
 */
static int mount_prepare(struct mount_main *m)
{
	if (client_net_opts(&m->a, &m->no) || test_hooks(m->a.prog))
		return 2;
	if (refuse_stacked_mount(m->a.prog, m->fo.mountpoint))
		return 1;
	addr_format(m->src, sizeof(m->src), m->mgrs[0].host, m->mgrs[0].port);
	if (add_opt(&m->args, "fsname=%s", m->src) ||
	    add_opt(&m->args, "subtype=%s", "rpfs") ||
	    add_opt(&m->args, "%s", "default_permissions"))
		return 1;
	return -1;
}

/*
 * The client side of the mount: reach the mgr, then the metrics endpoint,
 * the inode table's settings, write-behind (where the data is sent at
 * submit: tcp, fe_wback.h), background removal and locks. mount_close
 * undoes it. @return 0, 1 a failure (logged)
 */
static int mount_start(struct mount_main *m)
{
	const struct fe_args *a = &m->a;
	char msg[PROTO_MAX_HOST * 2 + 200], url[ADDR_STRLEN];
	int rc;

	m->cf.attr_timeout = a->attr_timeout;
	m->cf.entry_timeout = a->entry_timeout;
	m->cf.read_ahead_kb = a->read_ahead_kb;
	m->cf.mountpoint = m->fo.mountpoint;
	rc = cli_fs_mount_list(&m->cf.fs, m->mgrs, m->nmgrs, &m->no);
	if (rc == -EACCES)
		log_err("cannot mount %s: the cluster key was refused (see the "
			"line above)", m->src);
	else if (rc)
		log_err("cannot reach mgr %s: %s", m->src, strerror(-rc));
	if (rc)
		return 1;
	if (opt_given(&fe_prog, a->given, "metrics")) {
		rc = fe_metrics_start(&m->metrics, a->metrics.host, a->metrics.port,
				       m->cf.fs, msg, sizeof(msg));
		if (rc) {
			log_err("%s", msg);
			return 1;
		}
		log_notice("metrics on http://%s/metrics", addr_format(url, sizeof(url),
			   a->metrics.host, fe_metrics_port(m->metrics)));
	}
	cli_itab_set_writeback(m->cf.fs->itab, a->writeback);
	cli_itab_set_attr_ttl(m->cf.fs->itab, a->attr_timeout);
	/* without it the root's GETATTRs all go to the mgr: only slower */
	(void)cli_inode_pin(m->cf.fs->itab, FUSE_ROOT_ID);
	if (a->write_behind && net_client_wr_sent_at_submit(m->cf.fs->net) &&
	    fe_wback_new(&m->cf.wb, m->cf.fs))
		return 1;
	if (cli_reap_new(&m->cf.reap, m->cf.fs) ||
	    cli_lock_new(&m->cf.lock, m->cf.fs, &m->no))
		return 1;
	return 0;
}

/*
 * The FUSE session on m->se: signal handlers, the kernel mount, the worker
 * loop until unmount or a signal; each undone in reverse.
 * @return the exit status: 0 unmounted, 1 a failure
 */
static int mount_session(struct mount_main *m)
{
	struct fe_loop *lp;
	int ret = 1;

	if (fuse_set_signal_handlers(m->se) != 0)
		return 1;
	if (fuse_session_mount(m->se, m->fo.mountpoint) != 0)
		goto out_remove_handlers;
	if (m->a.leases && fe_cb_start(&m->cf, m->se, &m->no, m->a.deleg)) {
		log_err("cannot start the callback channel");
		goto out_unmount;
	}
	if (fe_loop_new(&lp, m->se, m->cf.fs->net,
			 m->fo.singlethread ? 1 : m->a.workers))
		goto out_stop_cb;
	log_notice("mounted %s on %s (%u iods)", m->src, m->fo.mountpoint,
		   m->cf.fs->niods);
	daemon_ready(m->notify_fd, 0);
	m->notify_fd = -1;
	ret = run_session(&m->cf, lp) ? 1 : 0;
	m->cf.loop = NULL;
	fe_loop_free(lp);
out_stop_cb:
	if (m->a.leases)
		fe_cb_stop(&m->cf);
out_unmount:
	fuse_session_unmount(m->se);
out_remove_handlers:
	fuse_remove_signal_handlers(m->se);
	return ret;
}

/*
 * Serve the mount: the handle list, the FUSE session, then the end of the
 * handles once no op runs any more (what the kernel never released goes
 * now, before what the handles use, wb, reap and fs, is freed).
 * @return the exit status: 0 unmounted, 1 a failure
 */
static int mount_serve(struct mount_main *m)
{
	int ret = 1;

	if (fe_fuse_init(&m->cf))
		return 1;
	m->se = fuse_session_new(&m->args, fe_fuse_ops(),
				 sizeof(struct fuse_lowlevel_ops), &m->cf);
	if (m->se) {
		ret = mount_session(m);
		fuse_session_destroy(m->se);
	}
	fe_fuse_end(&m->cf);
	return ret;
}

/* Undo mount_start, then tell a waiting parent the exit status ret. */
static void mount_close(struct mount_main *m, int ret)
{
	cli_lock_free(m->cf.lock);
	cli_reap_free(m->cf.reap);
	fe_wback_free(m->cf.wb);
	fe_metrics_stop(m->metrics); /* after every thread that makes calls */
	cli_fs_free(m->cf.fs);
	daemon_ready(m->notify_fd, (unsigned char)ret);
}

/*
 * Mount: fork (the parent waits for the outcome; no thread before this),
 * then the client side and the session. @return the exit status
 */
static int mount_run(struct mount_main *m)
{
	int ret;

	if (daemon_start(m->fo.foreground, &m->notify_fd)) {
		fprintf(stderr, "%s: cannot fork: %s\n", m->a.prog, strerror(errno));
		return 1;
	}
	block_exit_signals();
	ret = mount_start(m) ? 1 : mount_serve(m);
	mount_close(m, ret);
	return ret;
}

/* rpfs-fuse: exit 0 after an unmount (or --help), 1 when the mount
 * failed, 2 on a bad command line, config file or key. */
int main(int argc, char **argv)
{
	static struct mount_main m = { .notify_fd = -1 };
	int ret;

	m.args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	log_init("rpfs-fuse", LOG_NOTICE);
	log_set_key_option("-o key=FILE");
	ret = mount_parse(&m, argc, argv);
	if (ret < 0)
		ret = mount_prepare(&m);
	if (ret < 0)
		ret = mount_run(&m);
	free(m.fo.mountpoint);
	free(m.a.mgr);
	opt_free(&fe_prog, &m.a);
	fuse_opt_free_args(&m.args);
	return ret;
}
