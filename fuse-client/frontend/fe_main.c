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
#include "fe_fuse.h"
#include "fe_lock.h"
#include "cli_lock.h"
#include "fe_loop.h"
#include "fe_metrics.h"
#include "cli_reap.h"
#include "cli_size.h"
#include "fe_wback.h"
#include "cli_inode.h"
#include "log.h"
#include "mountinfo.h"

#define DEFAULT_MGR_PORT 7400
#define DEFAULT_READ_AHEAD_KB 4096 /* 4 READs of FE_MAX_IO (1 MiB) in flight */
#define MAX_READ_AHEAD_KB 65536

/* Command line state filled by fuse_opt_parse. */
struct cli_args {
	const char *prog;
	char *mgr;            /* MGRHOST[:PORT] as given */
	int nonopts;          /* positional arguments seen */
	double timeout;       /* seconds */
	double attr_timeout;
	double entry_timeout;
	int timeout_set;      /* -o timeout= given (overrides the config file) */
	char *key;            /* -o key=FILE */
	char *conf;           /* -o conf=FILE */
	char *transport;      /* -o transport=NAME */
	int writeback;        /* kernel writeback cache (-o [no_]writeback_cache) */
	int write_behind;     /* -o [no_]write_behind (fe_wback.h) */
	unsigned workers;     /* -o workers=N (fe_loop.h) */
	unsigned read_ahead_kb; /* -o read_ahead_kb=N (fe_bdi.h), 0: leave it */
	char metrics_host[PROTO_MAX_HOST + 1]; /* -o metrics=HOST:PORT */
	uint16_t metrics_port;
	int metrics;          /* -o metrics= given */
	int bad;              /* an argument was invalid (message printed) */
};

enum { KEY_TIMEOUT, KEY_ATTR_TIMEOUT, KEY_ENTRY_TIMEOUT, KEY_KEY, KEY_CONF,
       KEY_TRANSPORT, KEY_WB, KEY_NO_WB, KEY_BEHIND, KEY_NO_BEHIND, KEY_WORKERS,
       KEY_READ_AHEAD, KEY_METRICS, KEY_IGNORE };

static const struct fuse_opt cli_opt_spec[] = {
	FUSE_OPT_KEY("timeout=", KEY_TIMEOUT),
	FUSE_OPT_KEY("attr_timeout=", KEY_ATTR_TIMEOUT),
	FUSE_OPT_KEY("entry_timeout=", KEY_ENTRY_TIMEOUT),
	FUSE_OPT_KEY("key=", KEY_KEY),
	FUSE_OPT_KEY("conf=", KEY_CONF),
	FUSE_OPT_KEY("transport=", KEY_TRANSPORT),
	FUSE_OPT_KEY("writeback_cache", KEY_WB),
	FUSE_OPT_KEY("no_writeback_cache", KEY_NO_WB),
	FUSE_OPT_KEY("write_behind", KEY_BEHIND),
	FUSE_OPT_KEY("no_write_behind", KEY_NO_BEHIND),
	FUSE_OPT_KEY("workers=", KEY_WORKERS),
	FUSE_OPT_KEY("read_ahead_kb=", KEY_READ_AHEAD),
	FUSE_OPT_KEY("metrics=", KEY_METRICS),
	/* fstab-only options mount(8) may pass on: accepted and ignored */
	FUSE_OPT_KEY("_netdev", KEY_IGNORE),
	FUSE_OPT_KEY("nofail", KEY_IGNORE),
	FUSE_OPT_KEY("noauto", KEY_IGNORE),
	FUSE_OPT_KEY("auto", KEY_IGNORE),
	FUSE_OPT_KEY("defaults", KEY_IGNORE),
	FUSE_OPT_END
};

/* Print the usage text. */
static void usage(const char *prog, FILE *f)
{
	fprintf(f,
		"usage: %s MGRHOST[:PORT][,MGRHOST[:PORT]...] MOUNTPOINT [-f] [-d] [-o OPT[,OPT...]]\n"
		"  -f                 stay in the foreground\n"
		"  -d                 FUSE debug output (implies -f)\n"
		"  -o timeout=S       fail server requests with EIO after S seconds (default 10)\n"
		"  -o attr_timeout=S  attribute cache time (default 1.0)\n"
		"  -o entry_timeout=S name cache time (default 1.0)\n"
		"  -o key=FILE        cluster key file (mode 0600; see rpfs keygen)\n"
		"  -o conf=FILE       config file (default " CFG_DEFAULT_PATH " if it exists,\n"
		"                     or $RPFS_CONF): [cluster] key, transport, [client] timeout\n"
		"  -o transport=T     tcp, verbs or auto\n"
		"  -o writeback_cache the kernel caches writes (faster small\n"
		"                     writes, weaker cross-client semantics)\n"
		"  -o no_writeback_cache every write(2) goes to the iods (default)\n"
		"  -o write_behind    answer write(2) once the data is sent; a failure\n"
		"                     shows at the next write, close or fsync (default;\n"
		"                     tcp only; never for O_DIRECT, O_SYNC, O_DSYNC)\n"
		"  -o no_write_behind answer write(2) once the iods stored the data\n"
		"  -o workers=N       FUSE worker threads, 1..%d (default %d; -s: 1)\n"
		"  -o read_ahead_kb=N readahead window of the mount, 0..%d KiB (default\n"
		"                     %d: 1 MiB READs, 4 in flight; 0 keeps the kernel's\n"
		"                     128; needs root)\n"
		"  -o metrics=HOST:PORT serve Prometheus /metrics there (default off)\n"
		"  -o allow_other     and the other generic FUSE mount options\n"
		"  -o _netdev         (fstab) accepted and ignored\n"
		"default mgr port: %d\n", prog, FE_LOOP_MAX_WORKERS,
		FE_LOOP_DEFAULT_WORKERS, MAX_READ_AHEAD_KB, DEFAULT_READ_AHEAD_KB,
		DEFAULT_MGR_PORT);
}

/* Parse a number of seconds in [min, 86400] from "key=value". */
static int parse_seconds(struct cli_args *a, const char *arg, double min,
			 double *out)
{
	const char *v = strchr(arg, '=') + 1;
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if (errno || end == v || *end || !(d >= min) || d > 86400) {
		fprintf(stderr, "%s: -o %.*s: expected seconds%s, got \"%s\"\n",
			a->prog, (int)(v - arg - 1), arg,
			min > 0 ? " > 0" : " >= 0", v);
		a->bad = 1;
		return 0;
	}
	*out = d;
	return 0;
}

/* Parse the number of "-o NAME=N" into *out, N in min..max; a bad value
 * is reported (naming the option and the range) and marks a->bad. */
static int parse_count(struct cli_args *a, const char *arg, long min, long max,
		       unsigned *out)
{
	const char *v = strchr(arg, '=') + 1;
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end || n < min || n > max) {
		fprintf(stderr, "%s: -o %.*s: expected %ld..%ld, got \"%s\"\n",
			a->prog, (int)(v - arg - 1), arg, min, max, v);
		a->bad = 1;
		return 0;
	}
	*out = (unsigned)n;
	return 0;
}

/* fuse_opt_parse callback: our -o options and the two positionals. */
static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct cli_args *a = data;

	switch (key) {
	case KEY_TIMEOUT:
		a->timeout_set = 1;
		return parse_seconds(a, arg, 0.001, &a->timeout);
	case KEY_KEY:
	case KEY_CONF:
	case KEY_TRANSPORT: {
		char **dst = key == KEY_KEY ? &a->key : key == KEY_CONF ? &a->conf
					   : &a->transport;
		const char *v = strchr(arg, '=') + 1;
		enum net_transport t;

		if (!*v || (key == KEY_TRANSPORT && net_transport_parse(v, &t))) {
			fprintf(stderr, "%s: -o %.*s: expected %s, got \"%s\"\n", a->prog,
				(int)(v - arg - 1), arg, key == KEY_TRANSPORT ?
				"tcp, verbs or auto" : "a file", v);
			a->bad = 1;
			return 0;
		}
		free(*dst);
		*dst = strdup(v);
		return *dst ? 0 : -1;
	}
	case KEY_METRICS: {
		char msg[PROTO_MAX_HOST * 2 + 200];

		if (addr_parse("-o metrics", arg + strlen("metrics="), ADDR_PORT0,
			       a->metrics_host, sizeof(a->metrics_host),
			       &a->metrics_port, msg, sizeof(msg))) {
			fprintf(stderr, "%s: %s\n", a->prog, msg);
			a->bad = 1;
			return 0;
		}
		a->metrics = 1;
		return 0;
	}
	case KEY_IGNORE:
		return 0;
	case KEY_WB:
	case KEY_NO_WB:
		a->writeback = key == KEY_WB;
		return 0;
	case KEY_BEHIND:
	case KEY_NO_BEHIND:
		a->write_behind = key == KEY_BEHIND;
		return 0;
	case KEY_WORKERS:
		return parse_count(a, arg, 1, FE_LOOP_MAX_WORKERS, &a->workers);
	case KEY_READ_AHEAD:
		return parse_count(a, arg, 0, MAX_READ_AHEAD_KB, &a->read_ahead_kb);
	case KEY_ATTR_TIMEOUT:
		return parse_seconds(a, arg, 0, &a->attr_timeout);
	case KEY_ENTRY_TIMEOUT:
		return parse_seconds(a, arg, 0, &a->entry_timeout);
	case FUSE_OPT_KEY_NONOPT:
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
	default:
		return 1;
	}
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
static int client_net_opts(struct cli_args *a, struct net_opts *no)
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
	if (a->timeout_set || !conf || !conf->timeout_ms)
		no->timeout_ms = (int)(a->timeout * 1000 + 0.5);
	if (no->timeout_ms < 1)
		no->timeout_ms = 1;
	no->rdma_dev = NULL; /* conf is freed below; the default device */
out_free_conf:
	cfg_free(conf);
	return rc;
}

/*
 * The truncate test hook, $RPFS_FUSE_TEST_TRUNCATE_EXIT
 * (tests/integration/README.md "Fault harness"): after-iods or after-mgr
 * makes the next truncate _exit() there.
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

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct cli_args a = { .timeout = 10, .attr_timeout = 1.0,
			      .entry_timeout = 1.0, .writeback = 0, .write_behind = 1,
			      .workers = FE_LOOP_DEFAULT_WORKERS,
			      .read_ahead_kb = DEFAULT_READ_AHEAD_KB };
	struct fuse_cmdline_opts fo;
	struct net_opts no;
	struct fe_fuse cf;
	struct fuse_session *se;
	struct fe_loop *lp;
	struct fe_metrics *metrics = NULL;
	struct addr_hp mgrs[ADDR_MAX_LIST];
	int nmgrs = 0;
	char src[ADDR_STRLEN];
	int rc, ret = 1, notify_fd = -1;

	a.prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	memset(&fo, 0, sizeof(fo));
	log_init("rpfs-fuse", LOG_NOTICE);
	log_set_key_option("-o key=FILE");
	if (fuse_opt_parse(&args, &a, cli_opt_spec, opt_proc) == -1 || a.bad) {
		ret = 2;
		goto out_free_args;
	}
	if (fuse_parse_cmdline(&args, &fo) != 0) {
		ret = 2;
		goto out_free_args;
	}
	if (fo.show_help) {
		usage(a.prog, stdout);
		ret = 0;
		goto out_free_args;
	}
	if (fo.show_version) {
		printf("rpfs-fuse %s (libfuse %s)\n", RPFS_VERSION,
		       fuse_pkgversion());
		ret = 0;
		goto out_free_args;
	}
	if (!a.mgr || !fo.mountpoint) {
		fprintf(stderr, "%s: missing %s\n", a.prog,
			!a.mgr ? "MGRHOST" : "MOUNTPOINT");
		usage(a.prog, stderr);
		ret = 2;
		goto out_free_args;
	}
	if (parse_mgr(a.prog, a.mgr, mgrs, &nmgrs)) {
		ret = 2;
		goto out_free_args;
	}
	if (fo.debug)
		log_init("rpfs-fuse", LOG_DEBUG);
	if (client_net_opts(&a, &no)) {
		ret = 2;
		goto out_free_args;
	}
	if (test_hooks(a.prog)) {
		ret = 2;
		goto out_free_args;
	}
	if (refuse_stacked_mount(a.prog, fo.mountpoint))
		goto out_free_args;
	/* fsname: the first mgr (a comma would split the -o list) */
	addr_format(src, sizeof(src), mgrs[0].host, mgrs[0].port);
	if (add_opt(&args, "fsname=%s", src) ||
	    add_opt(&args, "subtype=%s", "rpfs") ||
	    add_opt(&args, "%s", "default_permissions"))
		goto out_free_args;

	if (daemon_start(fo.foreground, &notify_fd)) {
		fprintf(stderr, "%s: cannot fork: %s\n", a.prog, strerror(errno));
		goto out_free_args;
	}
	block_exit_signals();
	memset(&cf, 0, sizeof(cf));
	cf.attr_timeout = a.attr_timeout;
	cf.read_ahead_kb = a.read_ahead_kb;
	cf.mountpoint = fo.mountpoint;
	cf.entry_timeout = a.entry_timeout;
	rc = cli_fs_mount_list(&cf.fs, mgrs, nmgrs, &no);
	if (rc == -EACCES) {
		log_err("cannot mount %s: the cluster key was refused (see the "
			"line above)", src);
		goto out_notify;
	}
	if (rc) {
		log_err("cannot reach mgr %s: %s", src, strerror(-rc));
		goto out_notify;
	}
	if (a.metrics) {
		char msg[PROTO_MAX_HOST * 2 + 200], url[ADDR_STRLEN];

		rc = fe_metrics_start(&metrics, a.metrics_host, a.metrics_port,
				      cf.fs, msg, sizeof(msg));
		if (rc) {
			log_err("%s", msg);
			goto out_free_fs;
		}
		log_notice("metrics on http://%s/metrics", addr_format(url, sizeof(url),
			   a.metrics_host, fe_metrics_port(metrics)));
	}
	cli_itab_set_writeback(cf.fs->itab, a.writeback);
	cli_itab_set_attr_ttl(cf.fs->itab, a.attr_timeout);
	/* without it the root's GETATTRs all go to the mgr: only slower */
	(void)cli_inode_pin(cf.fs->itab, FUSE_ROOT_ID);
	/* write-behind where the data is sent at submit (tcp; see fe_wback.h) */
	if (a.write_behind && net_client_wr_sent_at_submit(cf.fs->net) &&
	    fe_wback_new(&cf.wb, cf.fs))
		goto out_stop_metrics;
	if (cli_reap_new(&cf.reap, cf.fs))
		goto out_free_wb;
	if (cli_lock_new(&cf.lock, cf.fs, &no))
		goto out_free_reap;
	if (fe_fuse_init(&cf))
		goto out_free_lock;
	se = fuse_session_new(&args, fe_fuse_ops(), sizeof(struct fuse_lowlevel_ops),
			      &cf);
	if (!se)
		goto out_end_handles;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_destroy_session;
	if (fuse_session_mount(se, fo.mountpoint) != 0)
		goto out_remove_handlers;
	if (fe_loop_new(&lp, se, cf.fs->net, fo.singlethread ? 1 : a.workers))
		goto out_unmount;
	log_notice("mounted %s on %s (%u iods)", src, fo.mountpoint,
		   cf.fs->niods);
	daemon_ready(notify_fd, 0);
	notify_fd = -1;
	ret = run_session(&cf, lp) ? 1 : 0;
	cf.loop = NULL;
	fe_loop_free(lp);
out_unmount:
	fuse_session_unmount(se);
out_remove_handlers:
	fuse_remove_signal_handlers(se);
out_destroy_session:
	fuse_session_destroy(se);
out_end_handles:
	/* no op runs any more: what the kernel never released goes now,
	 * before what the handles use (wb, reap, fs) is freed */
	fe_fuse_end(&cf);
out_free_lock:
	cli_lock_free(cf.lock);
out_free_reap:
	cli_reap_free(cf.reap);
out_free_wb:
	fe_wback_free(cf.wb);
out_stop_metrics:
	fe_metrics_stop(metrics); /* after every thread that makes calls */
out_free_fs:
	cli_fs_free(cf.fs);
out_notify:
	daemon_ready(notify_fd, (unsigned char)ret);
out_free_args:
	free(fo.mountpoint);
	free(a.mgr);
	free(a.key);
	free(a.conf);
	free(a.transport);
	fuse_opt_free_args(&args);
	return ret;
}
