/*
 * iod_main.c - rpfs-iod: command line, data directory and its lock, the
 * libev loop, signals. The work is done by iod_ops (requests), iod_store
 * (objects) and iod_buf (bulk buffers).
 */
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfg.h"
#include "iod_buf.h"
#include "iod_metrics.h"
#include "iod_ops.h"
#include "iod_store.h"
#include "iod_work.h"
#include "log.h"
#include "net.h"
#include "net_auth.h"
#include "srv_notify.h"
#include "srv_status.h"

#define PROG "rpfs-iod"

struct iod_args {
	char host[PROTO_MAX_HOST + 1];
	uint16_t port;
	int have_listen;
	const char *data;
	int level;             /* -1 = not given */
	int credits;           /* 0 = not given */
	int io_threads;        /* --io-threads N, 0 = not given */
	const char *conf;      /* --conf FILE */
	long id;               /* --id N, -1 = not given */
	const char *key_path;  /* --key FILE */
	const char *srv_key_path; /* --server-key FILE */
	const char *transport; /* --transport NAME */
	int insecure;          /* --insecure, [cluster] insecure: 1 = serve a
				* non-loopback address with no key */
	int request_timeout_ms; /* --request-timeout SECONDS, 0 = not given */
	char metrics_host[PROTO_MAX_HOST + 1]; /* --metrics, [metrics] listen */
	uint16_t metrics_port;
	const char *metrics_what; /* which of the two gave it; NULL = off */
};

/* Print usage to stderr. */
static void usage(void)
{
	fprintf(stderr,
		"usage: " PROG " --listen HOST:PORT --data DIR [--log-level LEVEL]"
		" [--credits N]\n"
		"       [--key FILE] [--server-key FILE] [--transport tcp|verbs|auto]\n"
		"       [--io-threads N] [--insecure] [--request-timeout SECONDS]\n"
		"       [--metrics HOST:PORT]\n"
		"   or: " PROG " --conf FILE --id N [any of the above, which override the file]\n"
		"HOST:PORT: a name, an IPv4 address or [IPv6]:PORT.\n"
		"--key: the clients' key; --server-key: the servers' key, which\n"
		"  alone may fence, list and checksum objects (see README).\n"
		"--metrics: serve Prometheus /metrics on HOST:PORT (default off; from\n"
		"  the config file's [metrics] listen = HOST:PORT, iod N takes PORT+1+N).\n"
		"--insecure: with no cluster key, listen on a non-loopback address\n"
		"  anyway (anyone who can reach it is served).\n");
}

/* Parse the command line; on a bad argument print why and return -EINVAL. */
static int parse_args(int argc, char **argv, struct iod_args *a)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "data", required_argument, NULL, 'd' },
		{ "log-level", required_argument, NULL, 'v' },
		{ "credits", required_argument, NULL, 'c' },
		{ "conf", required_argument, NULL, 'C' },
		{ "id", required_argument, NULL, 'i' },
		{ "key", required_argument, NULL, 'K' },
		{ "server-key", required_argument, NULL, 'E' },
		{ "transport", required_argument, NULL, 'T' },
		{ "io-threads", required_argument, NULL, 'W' },
		{ "insecure", no_argument, NULL, 'I' },
		{ "request-timeout", required_argument, NULL, 'R' },
		{ "metrics", required_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	char *end, msg[PROTO_MAX_HOST * 2 + 200];
	long n;
	enum net_transport t;

	memset(a, 0, sizeof(*a));
	a->level = -1;
	a->id = -1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			if (addr_parse("--listen", optarg, ADDR_PORT0, a->host,
				       sizeof(a->host), &a->port, msg, sizeof(msg))) {
				fprintf(stderr, PROG ": %s\n", msg);
				return -EINVAL;
			}
			a->have_listen = 1;
			break;
		case 'M':
			if (addr_parse("--metrics", optarg, ADDR_PORT0, a->metrics_host,
				       sizeof(a->metrics_host), &a->metrics_port, msg,
				       sizeof(msg))) {
				fprintf(stderr, PROG ": %s\n", msg);
				return -EINVAL;
			}
			a->metrics_what = "--metrics";
			break;
		case 'C':
			a->conf = optarg;
			break;
		case 'I':
			a->insecure = 1;
			break;
		case 'i':
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || n < 0 || n >= PROTO_MAX_IODS) {
				fprintf(stderr, PROG ": --id: expected a number in 0..%d, "
					"got \"%s\"\n", PROTO_MAX_IODS - 1, optarg);
				return -EINVAL;
			}
			a->id = n;
			break;
		case 'K':
			if (!*optarg) {
				fprintf(stderr, PROG ": --key: expected a key file, got \"\"\n");
				return -EINVAL;
			}
			a->key_path = optarg;
			break;
		case 'E':
			if (!*optarg) {
				fprintf(stderr, PROG ": --server-key: expected a key "
					"file, got \"\"\n");
				return -EINVAL;
			}
			a->srv_key_path = optarg;
			break;
		case 'T':
			if (net_transport_parse(optarg, &t)) {
				fprintf(stderr, PROG ": --transport: expected tcp, verbs or "
					"auto, got \"%s\"\n", optarg);
				return -EINVAL;
			}
			a->transport = optarg;
			break;
		case 'd':
			if (!*optarg) {
				fprintf(stderr, PROG ": --data: expected a directory, got \"\"\n");
				return -EINVAL;
			}
			a->data = optarg;
			break;
		case 'v':
			a->level = log_level_parse(optarg);
			if (a->level < LOG_ERR) {
				fprintf(stderr, PROG ": --log-level: expected err, warning, "
					"notice, info, debug or 3..7, got \"%s\"\n", optarg);
				return -EINVAL;
			}
			break;
		case 'c':
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || n < 1 || n > 65535) {
				fprintf(stderr, PROG ": --credits: expected a number in "
					"1..65535, got \"%s\"\n", optarg);
				return -EINVAL;
			}
			a->credits = (int)n;
			break;
		case 'W':
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || n < 1 ||
			    n > IOD_WORK_MAX_THREADS) {
				fprintf(stderr, PROG ": --io-threads: expected a number "
					"in 1..%d, got \"%s\"\n", IOD_WORK_MAX_THREADS,
					optarg);
				return -EINVAL;
			}
			a->io_threads = (int)n;
			break;
		case 'R': {
			double d;

			errno = 0;
			d = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(d >= 0.1) ||
			    d > 86400) {
				fprintf(stderr, PROG ": --request-timeout: expected "
					"seconds in 0.1..86400, got \"%s\"\n", optarg);
				return -EINVAL;
			}
			a->request_timeout_ms = (int)(d * 1000 + 0.5);
			break;
		}
		case 'h':
			usage();
			return -ECANCELED;
		case ':':
			fprintf(stderr, PROG ": %s: missing argument\n", argv[optind - 1]);
			return -EINVAL;
		default:
			fprintf(stderr, PROG ": %s: unknown option\n", argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": %s: unexpected argument\n", argv[optind]);
		return -EINVAL;
	}
	if (a->conf && a->id < 0) {
		fprintf(stderr, PROG ": --id: required with --conf (the N of [iod.N])\n");
		return -EINVAL;
	}
	if (!a->conf && a->id >= 0)
		a->conf = getenv("RPFS_CONF") ? getenv("RPFS_CONF") : CFG_DEFAULT_PATH;
	if (!a->conf && !a->have_listen) {
		fprintf(stderr, PROG ": --listen: missing (expected HOST:PORT)\n");
		return -EINVAL;
	}
	if (!a->conf && !a->data) {
		fprintf(stderr, PROG ": --data: missing (expected a directory)\n");
		return -EINVAL;
	}
	return 0;
}

/*
 * Fill what the command line left unset from [iod.ID] of the config file
 * (flags win) and check that everything required is there.
 * @return 0, -EINVAL (message printed)
 */
static int merge_args(struct iod_args *a, const struct cfg *f)
{
	if (f) {
		const struct cfg_iod *d = a->id < f->niods ? &f->iods[a->id] : NULL;

		if (!d || !d->host[0]) {
			fprintf(stderr, PROG ": --id %ld: %s has no [iod.%ld] section\n",
				a->id, f->path, a->id);
			return -EINVAL;
		}
		if (!a->have_listen) {
			snprintf(a->host, sizeof(a->host), "%s",
				 d->listen[0] ? d->listen : d->host);
			a->port = d->port;
			a->have_listen = 1;
		}
		if (!a->data && !d->data) {
			fprintf(stderr, PROG ": %s:%d: [iod.%ld]: missing key \"data\"\n",
				f->path, d->line, a->id);
			return -EINVAL;
		}
		if (!a->data)
			a->data = d->data;
		if (!a->credits)
			a->credits = d->credits;
		if (a->level < 0)
			a->level = f->log_level;
		if (!a->key_path)
			a->key_path = f->key_path;
		if (!a->insecure && f->insecure > 0)
			a->insecure = 1;
		if (!a->metrics_what && f->metrics_host[0]) {
			/* iod N serves on the base port + 1 + N (0 stays 0) */
			long port = f->metrics_port ? f->metrics_port + 1 + a->id : 0;

			if (port > 65535) {
				fprintf(stderr, PROG ": %s: [metrics] listen: port %u + 1 + "
					"%ld (iod %ld) is past 65535\n", f->path,
					f->metrics_port, a->id, a->id);
				return -EINVAL;
			}
			snprintf(a->metrics_host, sizeof(a->metrics_host), "%s",
				 f->metrics_host);
			a->metrics_port = (uint16_t)port;
			a->metrics_what = "[metrics] listen";
		}
	}
	if (a->level < 0)
		a->level = LOG_INFO;
	if (!a->credits)
		a->credits = NET_DEFAULT_CREDITS;
	return 0;
}

/* mkdir -p dir (mode 0700 for what we create). @return 0 or -errno */
static int make_dir_p(const char *dir)
{
	char path[PATH_MAX];
	size_t len = strlen(dir);

	if (len >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, dir, len + 1);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Take DIR/.lock exclusively so two iods never share a data directory.
 * @return the lock fd (kept open for the life of the process) or -errno;
 *	-EWOULDBLOCK when another process holds it */
static int lock_data_dir(const char *dir)
{
	char path[PATH_MAX];
	int fd;

	if (snprintf(path, sizeof(path), "%s/.lock", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	if (ftruncate(fd, 0) == 0)
		dprintf(fd, "%ld\n", (long)getpid());
	return fd;
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

/* SIGTERM/SIGINT: leave the loop for a clean shutdown. */
static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	log_notice("signal %d: shutting down", w->signum);
	ev_break(loop, EVBREAK_ALL);
}

/* Parse arguments, set up the data directory, store, buffer zones and
 * server, run the loop until SIGTERM/SIGINT, then tear down in reverse.
 * Exit 0 after a clean shutdown, 1 on a start-up failure, 2 on bad args. */
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

int main(int argc, char **argv)
{
	struct iod_args a;
	struct iod_buf_config bc;
	struct iod_buf_pool *pool;
	struct iod_store *st;
	struct iod_ops *ops;
	struct net_server *srv;
	struct iod_metrics *metrics = NULL;
	struct net_opts no;
	struct ev_loop *loop;
	struct cfg *conf = NULL;
	ev_signal sigterm_w, sigint_w;
	char msg[PROTO_MAX_HOST + 400], addr[ADDR_STRLEN];
	int rc, lockfd, warn, status = 1;

	rc = parse_args(argc, argv, &a);
	if (rc == -ECANCELED)
		return 0;
	if (rc < 0) {
		usage();
		return 2;
	}
	net_opts_default(&no);
	if (a.conf) {
		rc = cfg_load(&conf, a.conf, msg, sizeof(msg));
		if (rc == 0)
			rc = cfg_net_opts(conf, &no, msg, sizeof(msg));
		if (rc) {
			fprintf(stderr, PROG ": %s\n", msg);
			cfg_free(conf);
			return 2;
		}
	}
	rc = merge_args(&a, conf);
	if (rc == 0 && a.key_path && (!conf || a.key_path != conf->key_path)) {
		rc = cfg_load_key(a.key_path, &no, msg, sizeof(msg));
		if (rc)
			fprintf(stderr, PROG ": --key: %s\n", msg);
	}
	if (rc == 0) {
		rc = cfg_server_keys(conf, a.srv_key_path, &no, msg, sizeof(msg));
		if (rc)
			fprintf(stderr, PROG ": %s\n", msg);
	}
	if (rc) {
		cfg_free(conf);
		return 2;
	}
	if (a.transport)
		(void)net_transport_parse(a.transport, &no.transport);
	if (addr_listen_check(a.host, a.port, net_auth_keyed(&no), a.insecure, &warn,
			      msg, sizeof(msg))) {
		fprintf(stderr, PROG ": %s\n", msg);
		cfg_free(conf);
		return 2;
	}
	if (a.request_timeout_ms)
		no.request_timeout_ms = a.request_timeout_ms;
	log_init(PROG, a.level);
	if (warn)
		log_warn("%s", msg);
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();

	rc = make_dir_p(a.data);
	if (rc < 0) {
		log_err("--data %s: cannot create: %s", a.data, strerror(-rc));
		goto out_free_conf;
	}
	lockfd = lock_data_dir(a.data);
	if (lockfd == -EWOULDBLOCK) {
		log_err("--data %s: in use by another rpfs-iod (%s/.lock is locked)",
			a.data, a.data);
		goto out_free_conf;
	}
	if (lockfd < 0) {
		log_err("--data %s: cannot lock %s/.lock: %s", a.data, a.data,
			strerror(-lockfd));
		goto out_free_conf;
	}
	loop = ev_default_loop(0);
	if (!loop) {
		log_err("cannot initialise the event loop");
		goto out_close_lock;
	}
	iod_buf_config_default(&bc);
	rc = iod_buf_pool_new(&pool, &bc);
	if (rc < 0) {
		log_err("cannot allocate the buffer zones: %s", strerror(-rc));
		goto out_close_lock;
	}
	rc = iod_store_open(&st, a.data, IOD_STORE_DEFAULT_FDS);
	if (rc < 0) {
		log_err("--data %s: %s", a.data, strerror(-rc));
		goto out_free_pool;
	}
	rc = iod_ops_new_threads(&ops, loop, st, pool,
				 a.io_threads ? (unsigned)a.io_threads :
						IOD_WORK_THREADS);
	if (rc < 0) {
		log_err("cannot set up the request handler: %s", strerror(-rc));
		goto out_close_store;
	}
	if (test_hooks(ops) < 0) {
		status = 2;
		goto out_free_ops;
	}
	no.credits = a.credits;
	rc = net_server_new(&srv, loop, a.host, a.port, iod_main_handle, ops, &no);
	if (rc < 0) {
		log_err("--listen %s: %s", addr_format(addr, sizeof(addr), a.host,
			a.port), strerror(-rc));
		goto out_free_ops;
	}
	rc = register_zones(srv, pool);
	if (rc < 0)
		goto out_free_server;
	if (a.metrics_what) {
		struct iod_metrics_src src = {
			.what = a.metrics_what, .loop = loop, .srv = srv, .pool = pool,
			.bufs = bc,
		};

		rc = iod_metrics_start(&metrics, a.metrics_host, a.metrics_port, &src,
				       msg, sizeof(msg));
		if (rc < 0) {
			log_err("%s", msg);
			goto out_free_server;
		}
		log_notice("metrics on http://%s/metrics", addr_format(addr,
			   sizeof(addr), a.metrics_host, iod_metrics_port(metrics)));
	}
	ev_signal_init(&sigterm_w, on_signal, SIGTERM);
	ev_signal_start(loop, &sigterm_w);
	ev_signal_init(&sigint_w, on_signal, SIGINT);
	ev_signal_start(loop, &sigint_w);

	srvstat_init("iod", a.id >= 0 ? (uint16_t)a.id : 0, a.data, srv);
	sdn_start(loop);
	addr_format(addr, sizeof(addr), a.host, net_server_port(srv));
	snprintf(msg, sizeof(msg), "listening on %s, data %s (%s%s)", addr,
		 a.data, net_server_transport(srv),
		 no.has_srv_key ? ", two keys" : no.has_key ? ", cluster key" : "");
	log_notice("ready: %s", msg);
	sdn_ready(msg);
	ev_run(loop, 0);
	sdn_stop(loop);

	ev_signal_stop(loop, &sigint_w);
	ev_signal_stop(loop, &sigterm_w);
	status = 0;
	iod_metrics_stop(metrics);
out_free_server:
	net_server_free(srv);
out_free_ops:
	iod_ops_free(ops);
out_close_store:
	iod_store_close(st);
out_free_pool:
	iod_buf_pool_free(pool);
out_close_lock:
	close(lockfd);
out_free_conf:
	cfg_free(conf);
	return status;
}
