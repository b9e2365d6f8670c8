/* mgr_main.c - rpfs-mgr: command line, start-up and shutdown. */
#include <errno.h>
#include <ev.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cfg.h"
#include "log.h"
#include "mgr_db.h"
#include "mgr_iodpoll.h"
#include "mgr_kv.h"
#include "mgr_lead.h"
#include "mgr_lock.h"
#include "mgr_lockd.h"
#include "mgr_metrics.h"
#include "mgr_ops.h"
#include "mgr_resync.h"
#include "mgr_scrub.h"
#include "mgr_stale.h"
#include "net.h"
#include "net_auth.h"
#include "srv_notify.h"
#include "srv_status.h"

#define PROG "rpfs-mgr"

/* Parsed command line. */
struct mgr_args {
	char listen_host[PROTO_MAX_HOST + 1];
	uint16_t listen_port;
	int have_listen;
	const char *db_dir;
	const char *count_arg; /* --stripe-count, checked once niods is known */
	struct mgr_iod iods[PROTO_MAX_IODS];
	uint16_t niods;
	int iods_from_conf; /* the iods came from [iod.N] of --conf, not --iod */
	uint32_t unit;   /* 0 = not given */
	long count;      /* -1 = not given */
	uint8_t mirror;  /* --mirror, [layout] mirror: 1 or 2; 0 = not given */
	int root_squash;
	int group_commit; /* --group-commit, [mgr] group_commit; -1 = not given */
	int log_level;   /* -1 = not given */
	const char *conf;      /* --conf FILE */
	const char *key_path;  /* --key FILE */
	const char *srv_key_path; /* --server-key FILE */
	int insecure;          /* --insecure, [cluster] insecure: 1 = serve a
				* non-loopback address with no key */
	int insecure_warn;     /* check_listen: log insecure_msg as a warning */
	char insecure_msg[PROTO_MAX_HOST + 400];
	const char *transport; /* --transport NAME */
	int request_timeout_ms; /* --request-timeout SECONDS, 0 = not given */
	long lock_grace_ms;    /* --lock-grace SECONDS; -1 = not given */
	long resync_rate;      /* --resync-rate MB/s; -1 = not given */
	long lease_ms;         /* --lease-ms (testing); -1 = not given */
	long commit_delay_ms;  /* --commit-delay-ms (testing); 0 = none */
	struct mgr_db_limits lim; /* --db-size, --xattr-max-count, --xattr-max-bytes;
				   * fields 0 = not given */
	char metrics_host[PROTO_MAX_HOST + 1]; /* --metrics, [metrics] listen */
	uint16_t metrics_port;
	const char *metrics_what; /* which of the two gave it; NULL = off */
	const char *store;     /* --store NAME; NULL = not given */
	const char *store_uri; /* --store-uri URI; NULL = not given */
	long lead_ms;          /* --lease SECONDS, [mgr] lease; -1 = not given */
	struct mgr_kv_conf kc; /* the namespace store (store_conf) */
};

_Static_assert(MGR_DB_MIN_SIZE == CFG_MIN_DB_SIZE &&
	       MGR_DB_MAX_SIZE == CFG_MAX_DB_SIZE &&
	       MGR_XATTR_MAX_COUNT == CFG_MAX_XATTR_COUNT &&
	       MGR_XATTR_MIN_BYTES == CFG_MIN_XATTR_BYTES &&
	       MGR_XATTR_MAX_BYTES == CFG_MAX_XATTR_BYTES,
	       "the [mgr] limits of cfg.h and mgr_db.h differ");

/* What the request callback needs. Loop thread only. */
struct mgr_srv {
	struct mgr_ops *ops;
	struct mgr_lockd *lockd;
	struct mgr_scrub *scrub;
	struct mgr_stale *stale;
	struct mgr_lead *lead;  /* several mgrs (PostgreSQL store); NULL: LMDB */
	struct mgr_db *db;
	struct ev_loop *loop;
	ev_timer renew;         /* the lease's renew, every lease/3 */
	int restart;            /* the leadership was lost: main re-executes
				 * this program, which comes back as a standby
				 * (set by the loop thread; atomic: the writer
				 * thread reads it, lead_serving) */
	int acquired;           /* standby phase: the lease was taken */
};

static volatile int stop_requested; /* loop thread: a signal asked to stop */

/* Print the usage text to f. */
static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " --listen HOST:PORT --db DIR --iod HOST:PORT [--iod HOST:PORT ...]\n"
		   "       [--stripe-unit BYTES] [--stripe-count N] [--mirror 1|2] [--root-squash]\n"
		   "       [--log-level LEVEL]\n"
		   "       [--key FILE] [--server-key FILE] [--transport tcp|verbs|auto]\n"
		   "       [--lock-grace SECONDS]\n"
		   "       [--resync-rate MB/s] [--db-size SIZE] [--xattr-max-count N]\n"
		   "       [--xattr-max-bytes SIZE] [--insecure] [--request-timeout SECONDS]\n"
		   "       [--metrics HOST:PORT] [--store lmdb|postgresql] [--store-uri URI]\n"
		   "       [--group-commit on|off] [--lease SECONDS]\n"
		   "   or: " PROG " --conf FILE [any of the above, which override the file]\n"
		   "Without --conf and without --listen, " CFG_DEFAULT_PATH " is read.\n"
		   "HOST:PORT: a name, an IPv4 address or [IPv6]:PORT.\n"
		   "--key: the clients' key; --server-key: the servers' key, which\n"
		   "  alone may scrub and purge any orphan (see README).\n"
		   "--metrics: serve Prometheus /metrics on HOST:PORT (default off;\n"
		   "  [metrics] listen = HOST:PORT in the config file).\n"
		   "--group-commit: write ops queued together share one commit (one\n"
		   "  sync), each answered after it (default on; [mgr] group_commit).\n"
		   "--insecure: with no cluster key, listen on a non-loopback address\n"
		   "  anyway (anyone who can reach it is served).\n"
		   "--resync-rate: MB/s (10^6 bytes) at most of stale mirror replicas\n"
		   "  copied back from their buddies (0..%u, default %u; 0 = off).\n"
		   "--db-size: the namespace map, 4M..1024G (suffix K, M or G;\n"
		   "  default 4G); growth stops short of it, deletes still work.\n"
		   "--xattr-max-count, --xattr-max-bytes: per-inode xattr caps\n"
		   "  (1..65536, default 1024; 1K..64M names + values, default 1M).\n"
		   "--store: the namespace store, lmdb (default: in --db DIR) or\n"
		   "  postgresql (a database shared by several mgrs, at --store-uri,\n"
		   "  a libpq URI such as postgresql://h1,h2/rpfs?target_session_attrs=read-write;\n"
		   "  rpfs mkfs --store-uri creates its schema).\n"
		   "--lease: with store postgresql, several mgrs share the store and\n"
		   "  one is active; it holds a lease of SECONDS (%u..%u, default %u;\n"
		   "  [mgr] lease), and a standby takes over within about one lease\n"
		   "  after it dies.\n"
		   "For testing only:\n"
		   "  --lease-ms MS  the fence lease granted to the iods (%u..%u,\n"
		   "                 default %u); a STALE_MARK for an iod that does not\n"
		   "                 answer waits up to one lease\n"
		   "  --commit-delay-ms MS  sleep before each group commit (0..%u,\n"
		   "                 default 0), so that a crash lands before it\n",
		MGR_RESYNC_MAX_RATE, MGR_RESYNC_DEFAULT_RATE,
		MGR_LEAD_MIN_MS / 1000, MGR_LEAD_MAX_MS / 1000,
		MGR_LEAD_DEFAULT_MS / 1000, MGR_FENCE_MIN_LEASE_MS,
		MGR_FENCE_MAX_LEASE_MS, MGR_FENCE_LEASE_MS, MGR_OPS_MAX_COMMIT_DELAY_MS);
}

/* Complain about an argument; the caller exits 2. */
static int bad_arg(const char *opt, const char *what, const char *got)
{
	fprintf(stderr, PROG ": %s: expected %s, got \"%s\"\n", opt, what, got);
	return -EINVAL;
}

/* Parse HOST:PORT (addr.h) for option opt; the caller exits 2. */
static int parse_hostport(const char *opt, const char *s, char *host,
			  uint16_t *port, unsigned flags)
{
	char msg[PROTO_MAX_HOST * 2 + 200];

	if (addr_parse(opt, s, flags, host, PROTO_MAX_HOST + 1, port, msg,
		       sizeof(msg))) {
		fprintf(stderr, PROG ": %s\n", msg);
		return -EINVAL;
	}
	return 0;
}

/* Parse a stripe unit: bytes with optional k/K/m/M (KiB, MiB) suffix. */
static int parse_unit(const char *s, uint32_t *unit)
{
	char *end;
	unsigned long long v;
	const char *what = "a power of two from 4096 to 67108864 (suffix K or M allowed)";

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return bad_arg("--stripe-unit", what, s);
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	if (*end || v < 4096 || v > (64u << 20) || (v & (v - 1)))
		return bad_arg("--stripe-unit", what, s);
	*unit = (uint32_t)v;
	return 0;
}

/* Parse --lock-grace: whole seconds 0..3600 into milliseconds. */
static int parse_grace(const char *s, long *ms)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || s[0] < '0' || s[0] > '9' || v > 3600)
		return bad_arg("--lock-grace", "SECONDS 0..3600", s);
	*ms = v * 1000;
	return 0;
}

/* Parse a decimal integer option in [lo, hi] (what names the range for the
 * message). */
static int parse_long(const char *opt, const char *s, long lo, long hi,
		      const char *what, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || s[0] < '0' || s[0] > '9' || v < lo ||
	    v > hi)
		return bad_arg(opt, what, s);
	*out = v;
	return 0;
}

/* Parse a size option (K, M, G suffixes) in [lo, hi] into *out. */
static int parse_size(const char *opt, const char *s, uint64_t lo,
		      uint64_t hi, const char *what, uint64_t *out)
{
	uint64_t v;

	if (cfg_parse_size(s, &v) || v < lo || v > hi)
		return bad_arg(opt, what, s);
	*out = v;
	return 0;
}

/* Where the namespace lives, for messages: the --db directory, or
 * "store_uri" for the PostgreSQL store (its URI may hold a password). */
static const char *store_where(const struct mgr_args *a)
{
	if (a->kc.kind != MGR_KV_LMDB)
		return "store_uri";
	return a->db_dir ? a->db_dir : "";
}

/* Parse --store / --store-uri into a. @return 0, -EINVAL (printed) */
static int parse_store(int c, const char *s, struct mgr_args *a)
{
	enum mgr_kv_kind kind;

	if (c == 'O') {
		if (mgr_kv_kind_parse(s, &kind))
			return bad_arg("--store", "lmdb or postgresql", s);
		a->store = s;
		return 0;
	}
	if (!s[0])
		return bad_arg("--store-uri", "a PostgreSQL URI", s);
	a->store_uri = s;
	return 0;
}

/* Parse the three space options into a->lim. */
static int parse_limit(int c, const char *s, struct mgr_args *a)
{
	uint64_t v;
	long n;
	int rc;

	if (c == 'S')
		return parse_size("--db-size", s, MGR_DB_MIN_SIZE, MGR_DB_MAX_SIZE,
				  "a size 4M..1024G (suffix K, M or G)",
				  &a->lim.db_size);
	if (c == 'N') {
		rc = parse_long("--xattr-max-count", s, 1, MGR_XATTR_MAX_COUNT,
				"1..65536 xattrs per inode", &n);
		if (!rc)
			a->lim.xattr_max_count = (uint32_t)n;
		return rc;
	}
	rc = parse_size("--xattr-max-bytes", s, MGR_XATTR_MIN_BYTES,
			MGR_XATTR_MAX_BYTES, "a size 1K..64M (suffix K or M)", &v);
	if (!rc)
		a->lim.xattr_max_bytes = (uint32_t)v;
	return rc;
}

/* Parse argv into a; @return 0, 1 (help printed), -EINVAL (message printed) */
static int parse_args(int argc, char **argv, struct mgr_args *a)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "db", required_argument, NULL, 'd' },
		{ "iod", required_argument, NULL, 'i' },
		{ "stripe-unit", required_argument, NULL, 'u' },
		{ "stripe-count", required_argument, NULL, 'c' },
		{ "mirror", required_argument, NULL, 'm' },
		{ "root-squash", no_argument, NULL, 'r' },
		{ "log-level", required_argument, NULL, 'L' },
		{ "conf", required_argument, NULL, 'C' },
		{ "key", required_argument, NULL, 'K' },
		{ "server-key", required_argument, NULL, 'k' },
		{ "transport", required_argument, NULL, 'T' },
		{ "request-timeout", required_argument, NULL, 'Q' },
		{ "lock-grace", required_argument, NULL, 'G' },
		{ "resync-rate", required_argument, NULL, 'R' },
		{ "lease-ms", required_argument, NULL, 'E' },
		{ "commit-delay-ms", required_argument, NULL, 'D' },
		{ "db-size", required_argument, NULL, 'S' },
		{ "xattr-max-count", required_argument, NULL, 'N' },
		{ "xattr-max-bytes", required_argument, NULL, 'B' },
		{ "insecure", no_argument, NULL, 'I' },
		{ "metrics", required_argument, NULL, 'M' },
		{ "store", required_argument, NULL, 'O' },
		{ "store-uri", required_argument, NULL, 'U' },
		{ "group-commit", required_argument, NULL, 'g' },
		{ "lease", required_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, rc;

	memset(a, 0, sizeof(*a));
	a->count = -1;
	a->root_squash = -1;
	a->group_commit = -1;
	a->log_level = -1;
	a->lock_grace_ms = -1;
	a->resync_rate = -1;
	a->lease_ms = -1;
	a->lead_ms = -1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			rc = parse_hostport("--listen", optarg, a->listen_host,
					    &a->listen_port, ADDR_PORT0);
			if (rc)
				return rc;
			a->have_listen = 1;
			break;
		case 'd':
			if (!optarg[0])
				return bad_arg("--db", "a directory", optarg);
			a->db_dir = optarg;
			break;
		case 'i':
			if (a->niods >= PROTO_MAX_IODS) {
				fprintf(stderr, PROG ": --iod: at most %d iods\n", PROTO_MAX_IODS);
				return -EINVAL;
			}
			rc = parse_hostport("--iod", optarg, a->iods[a->niods].host,
					    &a->iods[a->niods].port, 0);
			if (rc)
				return rc;
			a->niods++;
			break;
		case 'u':
			rc = parse_unit(optarg, &a->unit);
			if (rc)
				return rc;
			break;
		case 'c':
			a->count_arg = optarg;
			break;
		case 'm':
			if (strcmp(optarg, "1") && strcmp(optarg, "2"))
				return bad_arg("--mirror", "1 or 2", optarg);
			a->mirror = (uint8_t)(optarg[0] - '0');
			break;
		case 'D':
			rc = parse_long("--commit-delay-ms", optarg, 0,
					MGR_OPS_MAX_COMMIT_DELAY_MS,
					"milliseconds 0..5000", &a->commit_delay_ms);
			if (rc)
				return rc;
			break;
		case 'A':
			rc = parse_long("--lease", optarg, MGR_LEAD_MIN_MS / 1000,
					MGR_LEAD_MAX_MS / 1000, "SECONDS 2..600",
					&a->lead_ms);
			if (rc)
				return rc;
			a->lead_ms *= 1000;
			break;
		case 'g':
			if (!strcmp(optarg, "on"))
				a->group_commit = 1;
			else if (!strcmp(optarg, "off"))
				a->group_commit = 0;
			else
				return bad_arg("--group-commit", "on or off", optarg);
			break;
		case 'r':
			a->root_squash = 1;
			break;
		case 'I':
			a->insecure = 1;
			break;
		case 'C':
			a->conf = optarg;
			break;
		case 'K':
			if (!optarg[0])
				return bad_arg("--key", "a key file", optarg);
			a->key_path = optarg;
			break;
		case 'k':
			if (!optarg[0])
				return bad_arg("--server-key", "a key file", optarg);
			a->srv_key_path = optarg;
			break;
		case 'T': {
			enum net_transport t;
			if (net_transport_parse(optarg, &t))
				return bad_arg("--transport", "tcp, verbs or auto", optarg);
			a->transport = optarg;
			break;
		}
		case 'L':
			a->log_level = log_level_parse(optarg);
			if (a->log_level < LOG_ERR)
				return bad_arg("--log-level",
					       "err, warning, notice, info, debug or 3..7", optarg);
			break;
		case 'G':
			rc = parse_grace(optarg, &a->lock_grace_ms);
			if (rc)
				return rc;
			break;
		case 'R':
			rc = parse_long("--resync-rate", optarg, 0,
					MGR_RESYNC_MAX_RATE,
					"MB/s 0..100000 (0 = resync off)",
					&a->resync_rate);
			if (rc)
				return rc;
			break;
		case 'E':
			rc = parse_long("--lease-ms", optarg,
					MGR_FENCE_MIN_LEASE_MS,
					MGR_FENCE_MAX_LEASE_MS,
					"milliseconds 1000..60000", &a->lease_ms);
			if (rc)
				return rc;
			break;
		case 'S':
		case 'N':
		case 'B':
			rc = parse_limit(c, optarg, a);
			if (rc)
				return rc;
			break;
		case 'O':
		case 'U':
			rc = parse_store(c, optarg, a);
			if (rc)
				return rc;
			break;
		case 'Q': {
			char *end;
			double d;

			errno = 0;
			d = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(d >= 0.1) || d > 86400)
				return bad_arg("--request-timeout",
					       "seconds in 0.1..86400", optarg);
			a->request_timeout_ms = (int)(d * 1000 + 0.5);
			break;
		}
		case 'M':
			rc = parse_hostport("--metrics", optarg, a->metrics_host,
					    &a->metrics_port, ADDR_PORT0);
			if (rc)
				return rc;
			a->metrics_what = "--metrics";
			break;
		case 'h':
			usage(stdout);
			return 1;
		case ':':
			fprintf(stderr, PROG ": %s: missing argument\n", argv[optind - 1]);
			return -EINVAL;
		default:
			fprintf(stderr, PROG ": unknown option \"%s\"\n", argv[optind - 1]);
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument \"%s\"\n", argv[optind]);
		return -EINVAL;
	}
	if (!a->conf && !a->have_listen)
		a->conf = getenv("RPFS_CONF") ? getenv("RPFS_CONF") : CFG_DEFAULT_PATH;
	return 0;
}

/* Fill the limits neither flags nor file gave with the defaults. */
static void merge_limits(struct mgr_db_limits *l)
{
	struct mgr_db_limits def;

	mgr_db_limits_default(&def);
	if (!l->db_size)
		l->db_size = def.db_size;
	if (!l->xattr_max_count)
		l->xattr_max_count = def.xattr_max_count;
	if (!l->xattr_max_bytes)
		l->xattr_max_bytes = def.xattr_max_bytes;
}

/*
 * Choose the namespace store into a->kc: --store and --store-uri, else
 * [mgr] store and store_uri (each flag wins over its key), and check that
 * they agree: postgresql needs a URI, a URI needs postgresql, lmdb needs
 * --db. Call after the file's values are merged (db, db_size).
 * @return 0, -EINVAL (message printed)
 */
static int store_conf(struct mgr_args *a, const struct cfg *f)
{
	const char *name = a->store, *what = "--store";
	const char *uri = a->store_uri, *uwhat = "--store-uri";

	if (!name && f && f->store)
		name = f->store, what = "[mgr] store";
	if (!uri && f && f->store_uri)
		uri = f->store_uri, uwhat = "[mgr] store_uri";
	memset(&a->kc, 0, sizeof(a->kc));
	a->kc.kind = MGR_KV_LMDB;
	if (name && mgr_kv_kind_parse(name, &a->kc.kind))
		return bad_arg(what, "lmdb or postgresql", name);
	if (a->kc.kind == MGR_KV_POSTGRESQL && !uri) {
		fprintf(stderr, PROG ": %s%spostgresql needs a PostgreSQL URI "
			"(--store-uri URI, or [mgr] store_uri in the config file)\n",
			what, a->store ? " " : " = ");
		return -EINVAL;
	}
	if (a->kc.kind == MGR_KV_LMDB && uri) {
		fprintf(stderr, PROG ": %s is set, but the store is lmdb (%s): set "
			"--store postgresql or [mgr] store = postgresql, or drop %s\n",
			uwhat, name ? what : "the default", uwhat);
		return -EINVAL;
	}
	if (a->kc.kind == MGR_KV_LMDB && !a->db_dir) {
		fprintf(stderr, PROG ": --db: required (DIR, or [mgr] db in the config file)\n");
		return -EINVAL;
	}
	a->kc.uri = uri;
	a->kc.dir = a->db_dir;
	a->kc.map_size = a->lim.db_size;
	return 0;
}

/*
 * Fill what the command line left unset from the config file (flags win),
 * then check that everything required is there.
 * @return 0, -EINVAL (message printed)
 */
static int merge_args(struct mgr_args *a, const struct cfg *f)
{
	if (f) {
		if (!a->have_listen && f->listen_host[0]) {
			snprintf(a->listen_host, sizeof(a->listen_host), "%s", f->listen_host);
			a->listen_port = f->listen_port;
			a->have_listen = 1;
		} else if (!a->have_listen && f->mgr_host[0]) {
			snprintf(a->listen_host, sizeof(a->listen_host), "0.0.0.0");
			a->listen_port = f->mgr_port;
			a->have_listen = 1;
		}
		if (!a->db_dir)
			a->db_dir = f->db;
		if (a->niods == 0) {
			for (int i = 0; i < f->niods; i++) {
				snprintf(a->iods[i].host, sizeof(a->iods[i].host), "%s",
					 f->iods[i].host);
				a->iods[i].port = f->iods[i].port;
				snprintf(a->iods[i].domain, sizeof(a->iods[i].domain),
					 "%s", f->iods[i].domain);
			}
			a->niods = (uint16_t)f->niods;
			a->iods_from_conf = a->niods > 0;
		}
		if (!a->unit)
			a->unit = f->stripe_unit;
		if (!a->count_arg && f->stripe_count >= 0)
			a->count = f->stripe_count;
		if (!a->mirror)
			a->mirror = f->mirror;
		if (a->root_squash < 0)
			a->root_squash = f->root_squash;
		if (a->group_commit < 0)
			a->group_commit = f->group_commit;
		if (a->lead_ms < 0 && f->lease_ms)
			a->lead_ms = f->lease_ms;
		if (a->log_level < 0)
			a->log_level = f->log_level;
		if (!a->key_path)
			a->key_path = f->key_path;
		if (!a->insecure && f->insecure > 0)
			a->insecure = 1;
		if (a->resync_rate < 0)
			a->resync_rate = f->resync_rate;
		if (!a->lim.db_size)
			a->lim.db_size = f->db_size;
		if (!a->lim.xattr_max_count)
			a->lim.xattr_max_count = f->xattr_max_count;
		if (!a->lim.xattr_max_bytes)
			a->lim.xattr_max_bytes = f->xattr_max_bytes;
		if (!a->metrics_what && f->metrics_host[0]) {
			snprintf(a->metrics_host, sizeof(a->metrics_host), "%s",
				 f->metrics_host);
			a->metrics_port = f->metrics_port;
			a->metrics_what = "[metrics] listen";
		}
	}
	merge_limits(&a->lim);
	if (a->resync_rate < 0)
		a->resync_rate = MGR_RESYNC_DEFAULT_RATE;
	if (a->lease_ms < 0)
		a->lease_ms = MGR_FENCE_LEASE_MS;
	if (a->root_squash < 0)
		a->root_squash = 0;
	if (a->group_commit < 0)
		a->group_commit = 1;
	if (a->lead_ms < 0)
		a->lead_ms = MGR_LEAD_DEFAULT_MS;
	if (a->log_level < 0)
		a->log_level = LOG_NOTICE;
	if (!a->have_listen) {
		fprintf(stderr, PROG ": --listen: required (HOST:PORT, or [mgr] listen "
			"in the config file)\n");
		return -EINVAL;
	}
	if (store_conf(a, f))
		return -EINVAL;
	if (a->niods == 0) {
		fprintf(stderr, PROG ": --iod: at least one is required (HOST:PORT, or "
			"[iod.N] sections in the config file)\n");
		return -EINVAL;
	}
	if (a->count > a->niods) {
		fprintf(stderr, PROG ": stripe_count: %ld is more than the %u iods\n",
			a->count, a->niods);
		return -EINVAL;
	}
	if (a->count_arg) {
		char *end;
		errno = 0;
		long v = strtol(a->count_arg, &end, 10);
		if (errno || end == a->count_arg || *end || v < 0 || v > a->niods) {
			char what[64];
			snprintf(what, sizeof(what), "0..%u (0 = all iods)", a->niods);
			return bad_arg("--stripe-count", what, a->count_arg);
		}
		a->count = v;
	}
	return 0;
}

/* The no-key rule (addr_listen_check): refuse a non-loopback --listen
 * without a key or --insecure; keep the warning for after log_init.
 * @return 0, -EPERM (message printed) */
static int check_listen(struct mgr_args *a, int has_key)
{
	int rc = addr_listen_check(a->listen_host, a->listen_port, has_key,
				   a->insecure, &a->insecure_warn,
				   a->insecure_msg, sizeof(a->insecure_msg));

	if (rc)
		fprintf(stderr, PROG ": %s\n", a->insecure_msg);
	return rc;
}

/* Answer r as a standby does: PROTO_STANDBY with the active mgr's address
 * when known (mgr_lead_hint). */
static void standby_reply(struct mgr_srv *ms, struct net_sreq *r)
{
	uint8_t hint[PROTO_MAX_HOST + 32];
	uint32_t n = ms->lead ? mgr_lead_hint(ms->lead, hint, sizeof(hint)) : 0;

	net_sreq_reply(r, PROTO_STANDBY, n ? hint : NULL, n);
}

/* The leadership is lost (the deadline passed, a renew or a commit was
 * refused): every later commit is refused (an impossible token), and the
 * loop ends; main then re-executes the program as a standby, so that no
 * state of the active mgr (locks, the poller's view, caches) survives. */
static void lead_lost(void *arg)
{
	struct mgr_srv *ms = arg;

	if (ms->restart)
		return;
	__atomic_store_n(&ms->restart, 1, __ATOMIC_RELEASE);
	mgr_lead_lose(ms->lead);
	(void)mgr_kv_set_token(ms->db->kv, INT64_MAX);
	log_warn("lease: this mgr is no longer the active one (token %lld): it "
		 "stops serving and restarts as a standby",
		 (long long)mgr_lead_token(ms->lead));
	ev_break(ms->loop, EVBREAK_ALL);
}

/* mgr_ops's question before a batch commits (the writer thread: thread-safe):
 * still the active one? */
static int lead_serving(void *arg)
{
	struct mgr_srv *ms = arg;

	return !__atomic_load_n(&ms->restart, __ATOMIC_ACQUIRE) &&
	       mgr_lead_serving(ms->lead);
}

/* The poll thread's question before it grants an iod anything: still
 * within the lease? (mgr_lead_serving is thread-safe.) */
static int lead_serving_mt(void *arg)
{
	return mgr_lead_serving(arg);
}

/* ev_timer, every lease/3: renew the lease (active) or try to take it
 * (standby phase: stop the loop once taken). */
static void lead_on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct mgr_srv *ms = w->data;
	int rc = mgr_lead_tick(ms->lead);

	if (ms->acquired && rc < 0) {
		lead_lost(ms);
	} else if (!ms->acquired && rc == 1) {
		ms->acquired = 1;
		ev_break(loop, EVBREAK_ALL);
	}
}

/* net_req_fn of the standby phase: every request gets the standby answer. */
static void standby_handle(struct net_sreq *r, void *arg)
{
	standby_reply(arg, r);
}

/*
 * The standby phase of a mgr on a shared store: serve only the standby
 * answer on the listen address and try to take the lease every lease/3,
 * until it is taken (then the caller starts the active services) or a
 * signal stops the loop. Cost: one or two round trips per try.
 * @return 1 taken, 0 stopped by a signal, -errno of net_server_new
 */
static int standby_wait(struct mgr_srv *ms, struct mgr_args *a,
			const struct net_opts *o)
{
	struct net_server *srv = NULL;
	char addr[ADDR_STRLEN], msg[ADDR_STRLEN + 80];
	double every = mgr_lead_lease_ms(ms->lead) / 3000.0;
	int rc;

	ms->acquired = mgr_lead_tick(ms->lead) == 1;
	if (ms->acquired)
		return 1;
	if (stop_requested)
		return 0;
	rc = net_server_new(&srv, ms->loop, a->listen_host, a->listen_port,
			    standby_handle, ms, o);
	if (rc) {
		log_err("--listen %s: %s", addr_format(addr, sizeof(addr),
			a->listen_host, a->listen_port), strerror(-rc));
		return rc;
	}
	addr_format(addr, sizeof(addr), a->listen_host, net_server_port(srv));
	snprintf(msg, sizeof(msg), "standby on %s, waiting for the lease", addr);
	log_notice("%s", msg);
	sdn_ready(msg);
	ev_timer_init(&ms->renew, lead_on_tick, every, every);
	ms->renew.data = ms;
	ev_timer_start(ms->loop, &ms->renew);
	ev_run(ms->loop, 0);
	ev_timer_stop(ms->loop, &ms->renew);
	net_server_free(srv);
	return ms->acquired;
}

/* The address this mgr records as the lease's holder: --listen, or this
 * host's name when --listen is a wildcard. */
static void lead_address(const struct mgr_args *a, char *host, size_t cap)
{
	if (strcmp(a->listen_host, "0.0.0.0") && strcmp(a->listen_host, "::") &&
	    a->listen_host[0]) {
		snprintf(host, cap, "%s", a->listen_host);
		return;
	}
	if (gethostname(host, cap - 1))
		snprintf(host, cap, "localhost");
	host[cap - 1] = '\0';
}

/*
 * On a PostgreSQL store: connect the lease and wait as a standby until
 * this mgr is the active one, then fence every commit with its token.
 * @return 1 active, 0 stopped while standing by, -errno (logged)
 */
static int lead_start(struct mgr_srv *ms, struct mgr_args *a,
		      const struct net_opts *o)
{
	char host[PROTO_MAX_HOST + 1], msg[600];
	int rc;

	lead_address(a, host, sizeof(host));
	rc = mgr_lead_new(&ms->lead, a->kc.uri, host, a->listen_port,
			  (uint32_t)a->lead_ms, msg, sizeof(msg));
	if (rc) {
		log_err("%s", msg);
		return rc;
	}
	rc = standby_wait(ms, a, o);
	if (rc <= 0)
		return rc;
	rc = mgr_kv_set_token(ms->db->kv, mgr_lead_token(ms->lead));
	if (rc) {
		log_err("store_uri: cannot fence commits: %s", strerror(-rc));
		return rc;
	}
	return 1;
}

/* net_req_fn: the admin STATUS op, else the metadata handler. A mgr past
 * its lease answers nothing as the active one (checked per request: a
 * process that was stopped and resumes must not serve one more). */
static void mgr_main_handle(struct net_sreq *r, void *arg)
{
	struct mgr_srv *ms = arg;

	if (ms->lead && !lead_serving(ms)) {
		lead_lost(ms);
		standby_reply(ms, r);
		return;
	}
	if (r->hdr.op == PROTO_OP_STATUS)
		srvstat_handle(r);
	else if (mgr_lockd_owns(r->hdr.op))
		mgr_lockd_handle(ms->lockd, r);
	else if (mgr_scrub_owns(r->hdr.op))
		mgr_scrub_handle(ms->scrub, r);
	else if (mgr_stale_owns(r->hdr.op))
		mgr_stale_handle(ms->stale, r);
	else
		mgr_ops_handle(r, ms->ops);
}

/* SIGTERM/SIGINT: leave the loop so main closes everything cleanly. */
static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	log_notice("signal %d: shutting down", w->signum);
	stop_requested = 1;
	ev_break(loop, EVBREAK_ALL);
}

/* Set in the environment of the re-executed program (lead_lost). */
#define LEAD_RESTART_ENV "RPFS_MGR_LEAD_RESTART"

/*
 * Open the store. A mgr re-executed after losing the lease waits for an
 * unreachable store instead of exiting (the database may be failing over
 * itself), trying every lease/3 until it opens or a signal stops it; a
 * first start still fails at once with the store's message.
 * @return 0, or mgr_db_open_store's error (msg set, not yet logged)
 */
static int open_store(struct mgr_db **db, struct mgr_args *a,
		      struct ev_loop *loop, char *msg, size_t cap)
{
	int restarted = getenv(LEAD_RESTART_ENV) != NULL, said = 0, rc;
	struct timespec ts = { a->lead_ms / 3000, (a->lead_ms / 3 % 1000) * 1000000L };

	unsetenv(LEAD_RESTART_ENV);
	for (;;) {
		msg[0] = '\0';
		rc = mgr_db_open_store(db, &a->kc, &a->lim, 0, msg, cap);
		if (!rc || !restarted || stop_requested ||
		    (rc != -EHOSTUNREACH && rc != -EIO))
			return rc;
		if (!said++)
			log_notice("%s; restarting as a standby: trying again every "
				   "%ld ms", msg[0] ? msg : strerror(-rc),
				   a->lead_ms / 3);
		nanosleep(&ts, NULL);
		ev_run(loop, EVRUN_NOWAIT); /* a SIGTERM meanwhile */
	}
}

int main(int argc, char **argv)
{
	static struct mgr_args a;
	struct ev_loop *loop;
	struct mgr_db *db = NULL;
	struct mgr_iodpoll *poll = NULL;
	struct mgr_ops *ops = NULL;
	struct mgr_lockd *lockd = NULL;
	struct mgr_scrub *scrub = NULL;
	struct mgr_stale *stale = NULL;
	struct mgr_resync *resync = NULL;
	struct mgr_metrics *metrics = NULL;
	struct proto_time boot;
	static struct mgr_srv ms;
	struct net_server *srv = NULL;
	struct cfg *conf = NULL;
	struct net_opts o;
	ev_signal sigterm, sigint;
	char msg[512], addr[ADDR_STRLEN];
	int rc, status = 1;
	uint64_t mark;

	signal(SIGPIPE, SIG_IGN);
	rc = parse_args(argc, argv, &a);
	if (rc)
		return rc > 0 ? 0 : 2;
	net_opts_default(&o);
	if (a.conf) {
		rc = cfg_load(&conf, a.conf, msg, sizeof(msg));
		if (rc) {
			fprintf(stderr, PROG ": %s\n", msg);
			return 2;
		}
		rc = cfg_net_opts(conf, &o, msg, sizeof(msg));
		if (rc) {
			fprintf(stderr, PROG ": %s\n", msg);
			status = 2;
			goto out_free_conf;
		}
	}
	if (merge_args(&a, conf)) {
		status = 2;
		goto out_free_conf;
	}
	if (a.transport)
		(void)net_transport_parse(a.transport, &o.transport);
	if (a.request_timeout_ms)
		o.request_timeout_ms = a.request_timeout_ms;
	if (a.key_path && (!conf || a.key_path != conf->key_path)) {
		rc = cfg_load_key(a.key_path, &o, msg, sizeof(msg));
		if (rc) {
			fprintf(stderr, PROG ": --key: %s\n", msg);
			status = 2;
			goto out_free_conf;
		}
	}
	rc = cfg_server_keys(conf, a.srv_key_path, &o, msg, sizeof(msg));
	if (rc) {
		fprintf(stderr, PROG ": %s\n", msg);
		status = 2;
		goto out_free_conf;
	}
	if (check_listen(&a, net_auth_keyed(&o))) {
		status = 2;
		goto out_free_conf;
	}
	log_init(PROG, a.log_level);
	if (a.insecure_warn)
		log_warn("%s", a.insecure_msg);
	loop = ev_default_loop(EVFLAG_AUTO);
	if (!loop) {
		log_err("cannot create the event loop");
		goto out_free_conf;
	}
	ev_signal_init(&sigterm, on_signal, SIGTERM);
	ev_signal_start(loop, &sigterm);
	ev_signal_init(&sigint, on_signal, SIGINT);
	ev_signal_start(loop, &sigint);
	sdn_start(loop); /* the watchdog, fed while standing by too */
	rc = open_store(&db, &a, loop, msg, sizeof(msg));
	if (rc && stop_requested) {
		status = 0;
		goto out_free_conf;
	}
	if (rc) {
		if (msg[0])
			log_err("%s", msg);
		else
			log_err("%s%s: cannot open the store: %s",
				a.kc.kind == MGR_KV_LMDB ? "--db " : "",
				store_where(&a), strerror(-rc));
		goto out_free_conf;
	}
	ms.db = db;
	ms.loop = loop;
	if (a.kc.kind == MGR_KV_POSTGRESQL) {
		if (!a.listen_port) {
			log_err("--listen %s: store postgresql needs a port other "
				"than 0 (the lease names it to clients)",
				a.listen_host);
			goto out_close_db;
		}
		rc = lead_start(&ms, &a, &o);
		if (rc <= 0) {
			status = rc == 0 ? 0 : 1;
			goto out_close_db;
		}
	}
	msg[0] = '\0';
	mark = mgr_kv_reach_mark(db->kv);
	rc = mgr_db_config(db, a.iods, a.niods, a.unit,
			   a.count > 0 ? (uint16_t)a.count : 0, a.mirror, msg,
			   sizeof(msg));
	if (rc && ms.lead && (rc == -ESTALE ||
			      (rc == -EIO && mgr_kv_unreachable_since(db->kv, mark)))) {
		/* the lease moved on, or the store went, between taking the
		 * lease and recording: as a loss of the lease */
		log_warn("lease: lost before this mgr recorded the configuration "
			 "(token %lld: %s): it restarts as a standby",
			 (long long)mgr_lead_token(ms.lead),
			 rc == -ESTALE ? "another mgr holds the lease" :
					 "the store is out of reach");
		ms.restart = 1;
		status = 3;
		goto out_close_db;
	}
	if (rc) {
		if (rc == -EINVAL && msg[0])
			log_err("cannot start: %s", msg);
		else if (rc == -EEXIST)
			log_err("%s%s: the iod table differs from the one recorded in %s: %s",
				a.iods_from_conf ? a.conf : "--iod",
				a.iods_from_conf ? " [iod.N]" : "", store_where(&a), msg);
		else
			log_err("%s%s: cannot record the configuration: %s",
				a.kc.kind == MGR_KV_LMDB ? "--db " : "",
				store_where(&a), strerror(-rc));
		goto out_close_db;
	}
	rc = mgr_stale_new(&stale, loop, db);
	if (rc) {
		log_err("out of memory");
		goto out_close_db;
	}
	rc = mgr_iodpoll_start_lead(&poll, db, &o, (uint32_t)a.lease_ms,
				    mgr_stale_wake, stale,
				    ms.lead ? (uint64_t)mgr_lead_token(ms.lead) : 0,
				    ms.lead ? lead_serving_mt : NULL, ms.lead);
	if (rc) {
		log_err("cannot start the iod poller: %s", strerror(-rc));
		goto out_free_stale;
	}
	if (a.resync_rate > 0) {
		rc = mgr_resync_start(&resync, db, poll, &o,
				      (uint32_t)a.resync_rate);
		if (rc) {
			log_err("cannot start the resync: %s", strerror(-rc));
			goto out_stop_poll;
		}
	} else {
		log_notice("resync is off (resync rate 0): stale replicas "
			   "stay stale");
	}
	mgr_stale_attach(stale, poll, resync);
	rc = mgr_ops_new(&ops, db, poll, a.root_squash);
	if (!rc && a.group_commit)
		rc = mgr_ops_group_commit(ops, loop, (uint32_t)a.commit_delay_ms);
	if (rc) {
		log_err("out of memory");
		goto out_free_ops;
	}
	if (ms.lead)
		mgr_ops_set_lead(ops, lead_serving, lead_lost, &ms);
	rc = mgr_lockd_new(&lockd, loop, db, a.lock_grace_ms >= 0 ?
			   (uint32_t)a.lock_grace_ms : MGR_LOCK_DEFAULT_GRACE_MS);
	if (rc) {
		log_err("cannot start the lock service: %s", strerror(-rc));
		goto out_free_ops;
	}
	mgr_db_now(&boot);
	rc = mgr_scrub_new(&scrub, db, mgr_scrub_ns(&boot));
	if (rc) {
		log_err("out of memory");
		goto out_free_lockd;
	}
	ms.ops = ops;
	ms.lockd = lockd;
	ms.scrub = scrub;
	ms.stale = stale;
	rc = net_server_new(&srv, loop, a.listen_host, a.listen_port,
			    mgr_main_handle, &ms, &o);
	if (rc) {
		log_err("--listen %s: %s", addr_format(msg, sizeof(msg),
			a.listen_host, a.listen_port), strerror(-rc));
		goto out_free_scrub;
	}
	if (a.metrics_what) {
		struct mgr_metrics_src src = {
			.what = a.metrics_what, .loop = loop, .srv = srv, .db = db,
			.poll = poll, .resync = resync, .lockd = lockd, .scrub = scrub,
			.niods = a.niods, .resync_rate = a.resync_rate,
		};

		rc = mgr_metrics_start(&metrics, a.metrics_host, a.metrics_port, &src,
				       msg, sizeof(msg));
		if (rc) {
			log_err("%s", msg);
			goto out_free_srv;
		}
		log_notice("metrics on http://%s/metrics", addr_format(addr,
			   sizeof(addr), a.metrics_host, mgr_metrics_port(metrics)));
	}
	if (ms.lead) {
		double every = mgr_lead_lease_ms(ms.lead) / 3000.0;

		ev_timer_init(&ms.renew, lead_on_tick, every, every);
		ms.renew.data = &ms;
		ev_timer_start(loop, &ms.renew);
	}
	srvstat_init("mgr", 0, a.db_dir ? a.db_dir : "/", srv);
	addr_format(addr, sizeof(addr), a.listen_host, net_server_port(srv));
	snprintf(msg, sizeof(msg), "listening on %s, %u iods (%s%s), store %s", addr,
		 a.niods, net_server_transport(srv),
		 o.has_srv_key ? ", two keys" : o.has_key ? ", cluster key" : "",
		 mgr_kv_kind_name(a.kc.kind));
	log_notice("ready: %s", msg);
	sdn_ready(msg);
	ev_run(loop, 0);
	mgr_ops_flush(ops); /* the last iteration's batch, if any */
	if (ms.lead)
		ev_timer_stop(loop, &ms.renew);
	if (!ms.restart) /* a restart as a standby is no stop to systemd */
		sdn_stop(loop);
	status = ms.restart ? 3 : 0;

	mgr_metrics_stop(metrics); /* reads lockd, poll and resync */
	metrics = NULL;
	mgr_lockd_free(lockd, 1); /* answers its deferred requests */
	lockd = NULL;
	/* pending STALE_MARKs: the poll thread stops, they are answered
	 * (-EIO unless fenced) while their connections still exist */
	mgr_resync_stop(resync);
	resync = NULL;
	mgr_iodpoll_halt(poll);
	mgr_stale_flush(stale);
out_free_srv:
	net_server_free(srv);
out_free_scrub:
	mgr_scrub_free(scrub);
out_free_lockd:
	mgr_lockd_free(lockd, 0);
out_free_ops:
	mgr_ops_free(ops);
	mgr_resync_stop(resync);
out_stop_poll:
	mgr_iodpoll_stop(poll);
out_free_stale:
	mgr_stale_free(stale);
out_close_db:
	if (ms.lead && !ms.restart && mgr_lead_token(ms.lead))
		mgr_lead_release(ms.lead); /* served nothing since the loop ended */
	mgr_lead_free(ms.lead);
	mgr_db_close(db);
out_free_conf:
	cfg_free(conf);
	if (status == 3) { /* lost the lease: come back as a standby */
		setenv(LEAD_RESTART_ENV, "1", 1);
		execv("/proc/self/exe", argv);
		fprintf(stderr, PROG ": cannot restart as a standby: %s\n",
			strerror(errno));
	}
	return status;
}
