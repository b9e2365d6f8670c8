/*
 * iod_main.c - rpfs-iod: command line, data directory and its lock, the
 * libev loop, signals. The work is done by iod_ops (requests), iod_store
 * (objects) and iod_buf (bulk buffers).
 */
#include <errno.h>
#include <ev.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cfg.h"
#include "daemon.h"
#include "iod_buf.h"
#include "iod_metrics.h"
#include "iod_ops.h"
#include "iod_store.h"
#include "iod_work.h"
#include "log.h"
#include "net.h"
#include "opt.h"
#include "srv_notify.h"
#include "srv_status.h"

#define PROG "rpfs-iod"

/* The command line, merged with [iod.ID] of the config file. */
struct iod_args {
	struct opt_addr listen; /* --listen, [iod.N] listen (or host) and port */
	const char *data;       /* --data, [iod.N] data */
	int credits;            /* --credits, [iod.N] credits */
	int io_threads;         /* --io-threads */
	long id;                /* --id N; -1: not given */
	struct dmn_args d;      /* --conf, --key, --log-level, --metrics, ... */
	uint64_t given;         /* the entries given on the command line */
};

/* rpfs-iod's options. */
static const struct opt iod_opts[] = {
	{ .name = "listen", .kind = OPT_ADDR, .arg = "HOST:PORT",
	  OPT_AT(struct iod_args, listen), .addr = ADDR_PORT0,
	  .key = "[iod.N] listen, port",
	  .help = "the address to serve on (port 0: a free one); required "
		  "without --conf, where [iod.N] listen defaults to its host" },
	{ .name = "data", .kind = OPT_STRING, .arg = "DIR",
	  OPT_AT(struct iod_args, data), .what = "a directory",
	  .key = "[iod.N] data",
	  .help = "the directory of the stripe objects (created if missing); "
		  "required without --conf" },
	{ .name = "credits", .kind = OPT_INT, .arg = "N",
	  OPT_AT(struct iod_args, credits), .lo = 1, .hi = 65535,
	  .def = NET_DEFAULT_CREDITS, .what = "a number in {lo}..{hi}",
	  .key = "[iod.N] credits",
	  .help = "requests each connection may have in flight" },
	{ .name = "io-threads", .kind = OPT_INT, .arg = "N",
	  OPT_AT(struct iod_args, io_threads), .lo = 1,
	  .hi = IOD_WORK_MAX_THREADS, .def = IOD_WORK_THREADS,
	  .what = "a number in {lo}..{hi}",
	  .help = "worker threads for the slow disk calls (fsync, fallocate, "
		  "checksums, listings)" },
	{ .name = "conf", .kind = OPT_STRING, .flags = OPT_EMPTY, .arg = "FILE",
	  OPT_AT(struct iod_args, d.conf),
	  .defdoc = "$RPFS_CONF, " CFG_DEFAULT_PATH,
	  .help = "the config file; with --id N this iod is its [iod.N], and "
		  "the options given override the file (the default is read "
		  "with --id and no --conf)" },
	{ .name = "id", .kind = OPT_INT, .arg = "N", OPT_AT(struct iod_args, id),
	  .lo = 0, .hi = PROTO_MAX_IODS - 1, .def = -1, .defdoc = "",
	  .what = "a number in {lo}..{hi}",
	  .help = "which [iod.N] of the config file this iod is" },
	DMN_OPTS(struct iod_args, d, LOG_INFO),
	{ .name = "metrics", .kind = OPT_ADDR, .arg = "HOST:PORT",
	  OPT_AT(struct iod_args, d.metrics), .addr = ADDR_PORT0,
	  .defdoc = "off", .key = "[metrics] listen (port + 1 + N)",
	  .help = "serve Prometheus /metrics on HOST:PORT; from the config "
		  "file, iod N takes PORT+1+N" },
};

static const struct opt_prog iod_prog = {
	.name = PROG,
	.usage = "usage: " PROG " --listen HOST:PORT --data DIR [OPTION...]\n"
		 "   or: " PROG " --conf FILE --id N [OPTION...]\n",
	.intro = "HOST:PORT: a name, an IPv4 address or [IPv6]:PORT.\n",
	.opts = iod_opts,
	.nopts = sizeof(iod_opts) / sizeof(iod_opts[0]),
};

/* Everything main sets up, in order; torn down by iod_close. */
struct iod_main {
	struct iod_args a;
	struct cfg *conf;
	struct net_opts no;
	struct ev_loop *loop;
	struct dmn_signals sig;
	int lockfd;             /* DIR/.lock, -1 before it is taken */
	struct iod_buf_config bc;
	struct iod_buf_pool *pool;
	struct iod_store *st;
	struct iod_ops *ops;
	struct net_server *srv;
	struct dmn_metrics *metrics;
};

/*
 * Parse the command line into a, and check what it must give without a
 * config file (--listen, --data) or with one (--id).
 * @return 0, OPT_HELP (printed), -EINVAL (message printed)
 */
static int iod_parse(int argc, char **argv, struct iod_args *a)
{
	char err[PROTO_MAX_HOST * 2 + 300];
	int rc;

	memset(a, 0, sizeof(*a));
	opt_defaults(&iod_prog, a);
	rc = opt_parse(&iod_prog, argc, argv, a, &a->given, err, sizeof(err));
	if (rc < 0)
		fprintf(stderr, PROG ": %s\n", err);
	if (rc)
		return rc;
	if (a->d.conf && a->id < 0) {
		fprintf(stderr, PROG ": --id: required with --conf (the N of [iod.N])\n");
		return -EINVAL;
	}
	if (!a->d.conf && a->id >= 0)
		a->d.conf = getenv("RPFS_CONF") ? getenv("RPFS_CONF") : CFG_DEFAULT_PATH;
	if (!a->d.conf && !opt_given(&iod_prog, a->given, "listen")) {
		fprintf(stderr, PROG ": --listen: missing (expected HOST:PORT)\n");
		return -EINVAL;
	}
	if (!a->d.conf && !a->data) {
		fprintf(stderr, PROG ": --data: missing (expected a directory)\n");
		return -EINVAL;
	}
	return 0;
}

/*
 * Fill what the command line left unset from [iod.ID] of the config file
 * and its [cluster], [log] and [metrics] keys (flags win).
 * @return 0, -EINVAL (message printed)
 */
static int iod_merge(struct iod_args *a, const struct cfg *f)
{
	const struct cfg_iod *s;

	opt_merge_conf(&iod_prog, f, a, a->given);
	if (!f)
		return dmn_metrics_conf(&a->d, NULL, opt_given(&iod_prog, a->given,
					"metrics"), 0);
	s = a->id < f->niods ? &f->iods[a->id] : NULL;
	if (!s || !s->host[0]) {
		fprintf(stderr, PROG ": --id %ld: %s has no [iod.%ld] section\n",
			a->id, f->path, a->id);
		return -EINVAL;
	}
	if (!opt_given(&iod_prog, a->given, "listen")) {
		snprintf(a->listen.host, sizeof(a->listen.host), "%s",
			 s->listen[0] ? s->listen : s->host);
		a->listen.port = s->port;
	}
	if (!a->data && !s->data) {
		fprintf(stderr, PROG ": %s:%d: [iod.%ld]: missing key \"data\"\n",
			f->path, s->line, a->id);
		return -EINVAL;
	}
	if (!a->data)
		a->data = s->data;
	if (!opt_given(&iod_prog, a->given, "credits") && s->credits)
		a->credits = s->credits;
	/* iod N serves on the base port + 1 + N (0 stays 0) */
	if (dmn_metrics_conf(&a->d, f, opt_given(&iod_prog, a->given, "metrics"),
			     1 + a->id)) {
		fprintf(stderr, PROG ": %s: [metrics] listen: port %u + 1 + %ld "
			"(iod %ld) is past 65535\n", f->path, f->metrics_port,
			a->id, a->id);
		return -EINVAL;
	}
	return 0;
}

/*
 * The command line, the config file and the keys into m (a, conf, no),
 * then logging. @return 0, OPT_HELP, -EINVAL or a key's error (printed)
 */
static int iod_setup(int argc, char **argv, struct iod_main *m)
{
	char msg[PROTO_MAX_HOST + 400];
	int rc;

	rc = iod_parse(argc, argv, &m->a);
	if (rc)
		return rc;
	rc = dmn_load_conf(m->a.d.conf, &m->conf, &m->no, msg, sizeof(msg));
	if (rc) {
		fprintf(stderr, PROG ": %s\n", msg);
		return rc;
	}
	rc = iod_merge(&m->a, m->conf);
	if (rc)
		return rc;
	rc = dmn_settle(&m->a.d, m->conf, opt_given(&iod_prog, m->a.given,
			"request-timeout"), &m->a.listen, &m->no, msg, sizeof(msg));
	if (rc) {
		fprintf(stderr, PROG ": %s\n", msg);
		return rc;
	}
	m->no.credits = m->a.credits;
	log_init(PROG, m->a.d.log_level);
	if (m->a.d.listen_warn)
		log_warn("%s", m->a.d.listen_msg);
	return 0;
}

/* Raise the open-file limit to its hard maximum: the fd cache and many
 * client connections both need fds. Failure is harmless. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Parse a decimal number in lo..hi from the environment variable name.
 * @return 0 (*out set; 0 when unset), -EINVAL (message logged) */
static int env_number(const char *name, unsigned long long lo,
		      unsigned long long hi, unsigned long long *out)
{
	const char *s = getenv(name);
	unsigned long long v;
	char *end;

	*out = 0;
	if (!s)
		return 0;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || s[0] == '+' || v < lo ||
	    v > hi) {
		log_err("%s: expected a number in %llu..%llu, got \"%s\"", name,
			lo, hi, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/*
 * The fault-injection hook for tests, off unless its variable is set:
 * RPFS_IOD_TEST_FSYNC_DELAY_MS=N (1..60000) holds each IO_FSYNC N ms
 * before its fsync; RPFS_IOD_TEST_FSYNC_INO=INO limits that to one object.
 * A set hook is announced by a warning; a bad value refuses the start.
 * @return 0, -EINVAL (message logged)
 */
static int test_hooks(struct iod_ops *ops)
{
	unsigned long long ms, ino;

	if (env_number("RPFS_IOD_TEST_FSYNC_DELAY_MS", 1,
		       IOD_OPS_MAX_TEST_DELAY_MS, &ms) < 0 ||
	    env_number("RPFS_IOD_TEST_FSYNC_INO", 1, UINT64_MAX, &ino) < 0)
		return -EINVAL;
	if (ino && !ms) {
		log_err("RPFS_IOD_TEST_FSYNC_INO: set without "
			"RPFS_IOD_TEST_FSYNC_DELAY_MS");
		return -EINVAL;
	}
	if (!ms)
		return 0;
	if (ino)
		log_warn("test hook RPFS_IOD_TEST_FSYNC_DELAY_MS=%llu: IO_FSYNC "
			 "of ino %llu is held %llu ms (never set this in "
			 "production)", ms, ino, ms);
	else
		log_warn("test hook RPFS_IOD_TEST_FSYNC_DELAY_MS=%llu: every "
			 "IO_FSYNC is held %llu ms (never set this in "
			 "production)", ms, ms);
	return iod_ops_test_fsync_delay(ops, (unsigned)ms, ino);
}

/* net_req_fn: the admin STATUS op, else the I/O handler. */
static void iod_main_handle(struct net_sreq *r, void *arg)
{
	if (r->hdr.op == PROTO_OP_STATUS)
		srvstat_handle(r);
	else
		iod_ops_handle(r, arg);
}

/*
 * Register every buffer zone with the transport once, at start, so that
 * pulls and pushes never register memory per request (the verbs backend
 * needs the regions as RDMA sources and targets; tcp needs nothing).
 */
static int register_zones(struct net_server *srv, struct iod_buf_pool *pool)
{
	for (unsigned z = 0; z < IOD_BUF_NZONES; z++) {
		void *base;
		size_t len;
		int rc;

		iod_buf_zone_region(pool, z, &base, &len);
		if (!len)
			continue;
		rc = net_server_register_mem(srv, base, len);
		if (rc < 0) {
			log_err("cannot register buffer zone %u (%zu bytes) with "
				"the %s transport: %s", z, len,
				net_server_transport(srv), strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/*
 * The data directory (created, then locked), the event loop, the buffer
 * zones, the object store and the request handler, into m.
 * @return 0, or the exit status of a failure (logged): 1, or 2 for a bad
 *	test hook
 */
static int iod_open(struct iod_main *m)
{
	const char *data = m->a.data;
	int rc = dmn_mkdir_p(data);

	if (rc < 0) {
		log_err("--data %s: cannot create: %s", data, strerror(-rc));
		return 1;
	}
	m->lockfd = dmn_lock_dir(data);
	if (m->lockfd == -EWOULDBLOCK)
		log_err("--data %s: in use by another rpfs-iod (%s/.lock is "
			"locked)", data, data);
	else if (m->lockfd < 0)
		log_err("--data %s: cannot lock %s/.lock: %s", data, data,
			strerror(-m->lockfd));
	if (m->lockfd < 0)
		return 1;
	m->loop = ev_default_loop(0);
	if (!m->loop) {
		log_err("cannot initialise the event loop");
		return 1;
	}
	iod_buf_config_default(&m->bc);
	rc = iod_buf_pool_new(&m->pool, &m->bc);
	if (rc < 0) {
		log_err("cannot allocate the buffer zones: %s", strerror(-rc));
		return 1;
	}
	rc = iod_store_open(&m->st, data, IOD_STORE_DEFAULT_FDS);
	if (rc < 0) {
		log_err("--data %s: %s", data, strerror(-rc));
		return 1;
	}
	rc = iod_ops_new_threads(&m->ops, m->loop, m->st, m->pool,
				 (unsigned)m->a.io_threads);
	if (rc < 0) {
		log_err("cannot set up the request handler: %s", strerror(-rc));
		return 1;
	}
	return test_hooks(m->ops) < 0 ? 2 : 0;
}

/*
 * Serve: the server with the buffer zones registered, the metrics
 * endpoint, the signals, then the loop until SIGTERM or SIGINT.
 * @return 0 after a clean stop, 1 a start-up failure (logged)
 */
static int iod_serve(struct iod_main *m)
{
	const struct iod_args *a = &m->a;
	struct iod_metrics_src src = { .pool = m->pool, .bufs = m->bc };
	struct dmn_metrics_src ds = { .what = a->d.metrics_what,
		.host = a->d.metrics.host, .port = a->d.metrics.port, .loop = m->loop };
	char addr[ADDR_STRLEN], msg[PROTO_MAX_HOST + 400];
	int rc;

	rc = net_server_new(&m->srv, m->loop, a->listen.host, a->listen.port,
			    iod_main_handle, m->ops, &m->no);
	if (rc < 0) {
		log_err("--listen %s: %s", addr_format(addr, sizeof(addr),
			a->listen.host, a->listen.port), strerror(-rc));
		return 1;
	}
	if (register_zones(m->srv, m->pool) < 0)
		return 1;
	ds.srv = m->srv;
	if (a->d.metrics_what && dmn_metrics_start(&m->metrics, &iod_metrics_kind,
						   &ds, &src, msg, sizeof(msg))) {
		log_err("%s", msg);
		return 1;
	}
	dmn_signals_start(&m->sig, m->loop);
	srvstat_init("iod", a->id >= 0 ? (uint16_t)a->id : 0, a->data, m->srv);
	sdn_start(m->loop);
	addr_format(addr, sizeof(addr), a->listen.host, net_server_port(m->srv));
	dmn_ready("listening on %s, data %s (%s%s)", addr, a->data,
		  net_server_transport(m->srv), m->no.has_srv_key ? ", two keys" :
		  m->no.has_key ? ", cluster key" : "");
	ev_run(m->loop, 0);
	sdn_stop(m->loop);
	dmn_signals_stop(&m->sig, m->loop);
	return 0;
}

/* Tear down what iod_setup, iod_open and iod_serve set up, in reverse
 * (each part only if it was set up). */
static void iod_close(struct iod_main *m)
{
	dmn_metrics_stop(m->metrics);
	net_server_free(m->srv);
	iod_ops_free(m->ops);
	iod_store_close(m->st);
	iod_buf_pool_free(m->pool);
	if (m->lockfd >= 0)
		close(m->lockfd);
	cfg_free(m->conf);
}

/* rpfs-iod: exit 0 after a clean shutdown (or --help), 1 on a start-up
 * failure, 2 on a bad command line, config file or key. */
int main(int argc, char **argv)
{
	static struct iod_main m = { .lockfd = -1 };
	int rc, status;

	rc = iod_setup(argc, argv, &m);
	if (rc) {
		cfg_free(m.conf);
		return rc == OPT_HELP ? 0 : 2;
	}
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	status = iod_open(&m);
	if (!status)
		status = iod_serve(&m);
	iod_close(&m);
	return status;
}
