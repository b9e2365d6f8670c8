/* mgr_main.c - rpfs-mgr: command line, start-up and shutdown. */
#include <errno.h>
#include <ev.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cfg.h"
#include "daemon.h"
#include "log.h"
#include "mgr_db.h"
#include "mgr_fence.h"
#include "mgr_iodpoll.h"
#include "mgr_kv.h"
#include "mgr_lead.h"
#include "mgr_lock.h"
#include "mgr_leased.h"
#include "mgr_lockd.h"
#include "mgr_metrics.h"
#include "mgr_ops.h"
#include "mgr_resync.h"
#include "mgr_scrub.h"
#include "mgr_stale.h"
#include "net.h"
#include "opt.h"
#include "srv_notify.h"
#include "srv_status.h"

#define PROG "rpfs-mgr"
#define MGR_STOPPED (-1) /* a step's answer: a signal stopped the mgr */

/* The command line, merged with the config file. */
struct mgr_args {
	struct opt_addr listen; /* --listen, [mgr] listen or [cluster] mgr */
	int have_listen;        /* listen was given (flag or file) */
	const char *db_dir;     /* --db, [mgr] db */
	const char *count_arg;  /* --stripe-count, checked once niods is known */
	struct mgr_iod iods[PROTO_MAX_IODS]; /* --iod..., or [iod.N] */
	uint16_t niods;
	int iods_from_conf;     /* the iods came from [iod.N] of --conf */
	uint32_t unit;          /* --stripe-unit, [layout]; 0 = not given */
	long count;             /* [layout] stripe_count, --stripe-count;
				 * -1 = not given */
	uint8_t mirror;         /* --mirror, [layout] mirror; 0 = not given */
	int root_squash;
	int group_commit;       /* --group-commit, [mgr] group_commit */
	long lock_grace_ms;     /* --lock-grace SECONDS */
	long resync_rate;       /* --resync-rate MB/s, [mgr] resync_rate */
	long lease_ms;          /* --lease-ms (testing): the iods' fence lease */
	long commit_delay_ms;   /* --commit-delay-ms (testing) */
	struct mgr_db_limits lim; /* --db-size, --xattr-max-count, -bytes */
	const char *store;      /* --store, [mgr] store; NULL = lmdb */
	const char *store_uri;  /* --store-uri, [mgr] store_uri */
	long lead_ms;           /* --lease SECONDS, [mgr] lease */
	struct mgr_kv_conf kc;  /* the namespace store (store_conf) */
	struct dmn_args d;      /* --conf, --key, --log-level, --metrics, ... */
	uint64_t given;         /* the entries given on the command line */
};

/* --iod fills struct mgr_iod as a struct opt_addr (OPT_LIST) */
_Static_assert(offsetof(struct mgr_iod, host) == offsetof(struct opt_addr, host) &&
	       offsetof(struct mgr_iod, port) == offsetof(struct opt_addr, port) &&
	       sizeof(((struct mgr_iod *)0)->host) == sizeof(((struct opt_addr *)0)->host),
	       "struct mgr_iod does not begin as struct opt_addr");
_Static_assert(MGR_DB_MIN_SIZE == CFG_MIN_DB_SIZE &&
	       MGR_DB_MAX_SIZE == CFG_MAX_DB_SIZE &&
	       MGR_XATTR_MAX_COUNT == CFG_MAX_XATTR_COUNT &&
	       MGR_XATTR_MIN_BYTES == CFG_MIN_XATTR_BYTES &&
	       MGR_XATTR_MAX_BYTES == CFG_MAX_XATTR_BYTES &&
	       MGR_RESYNC_MAX_RATE == CFG_MAX_RESYNC_RATE &&
	       MGR_LEAD_MIN_MS == CFG_MIN_LEASE_S * 1000 &&
	       MGR_LEAD_MAX_MS == CFG_MAX_LEASE_S * 1000,
	       "the [mgr] limits of cfg.h and the mgr's differ");

static int store_check(const char *s);

/* rpfs-mgr's options. */
static const struct opt mgr_opts[] = {
	{ .name = "listen", .kind = OPT_ADDR, .arg = "HOST:PORT",
	  OPT_AT(struct mgr_args, listen), .addr = ADDR_PORT0,
	  .key = "[mgr] listen",
	  .help = "the address to serve on (port 0: a free one); without it, "
		  "the config file's [mgr] listen, else 0.0.0.0 and [cluster] "
		  "mgr's port" },
	{ .name = "db", .kind = OPT_STRING, .arg = "DIR",
	  OPT_AT(struct mgr_args, db_dir), .what = "a directory",
	  .key = "[mgr] db", OPT_CF_S(db),
	  .help = "the directory of the namespace (store lmdb)" },
	{ .name = "iod", .kind = OPT_ADDR, .flags = OPT_LIST, .arg = "HOST:PORT",
	  OPT_AT_LIST(struct mgr_args, iods, niods), .many = "at most {hi} iods",
	  .key = "[iod.N] host, port",
	  .help = "an iod; repeat it for each, in order: the order is the iod "
		  "table, recorded at the first start and checked at every "
		  "later one" },
	{ .name = "stripe-unit", .kind = OPT_SIZE, .flags = OPT_POW2 | OPT_BYTES,
	  .arg = "BYTES", OPT_AT(struct mgr_args, unit), .lo = 4096,
	  .hi = 64u << 20, .defdoc = "65536 (first start)",
	  .what = "a power of two from {lo} to {hi} (suffix K or M allowed)",
	  .key = "[layout] stripe_unit", OPT_CF(stripe_unit, 0),
	  .help = "the stripe unit of new files" },
	{ .name = "stripe-count", .kind = OPT_STRING, .flags = OPT_EMPTY,
	  .arg = "N", OPT_AT(struct mgr_args, count_arg),
	  .defdoc = "0 (first start)",
	  .key = "[layout] stripe_count",
	  .help = "the iods a new file is striped over, 0..the number of iods "
		  "(0: all of them, or all mirror groups)" },
	{ .name = "mirror", .kind = OPT_INT, .arg = "1|2",
	  OPT_AT(struct mgr_args, mirror), .lo = 1, .hi = 2, .what = "1 or 2",
	  .defdoc = "1 (first start)", .key = "[layout] mirror",
	  OPT_CF(mirror, 0),
	  .help = "2: each stripe unit of a new file on two iods "
		  "(mgr/repair/README.md \"Mirroring\")" },
	{ .name = "root-squash", .kind = OPT_SWITCH,
	  OPT_AT(struct mgr_args, root_squash), .key = "[mgr] root_squash",
	  OPT_CF(root_squash, -1),
	  .help = "map uid 0 to 65534:65534, a gid 0 to 65534, and drop "
		  "group 0" },
	DMN_OPTS(struct mgr_args, d, LOG_NOTICE),
	{ .name = "conf", .kind = OPT_STRING, .flags = OPT_EMPTY, .arg = "FILE",
	  OPT_AT(struct mgr_args, d.conf),
	  .defdoc = "$RPFS_CONF, " CFG_DEFAULT_PATH,
	  .help = "the config file; the options given override it (the "
		  "default is read without --conf and --listen)" },
	{ .name = "lock-grace", .kind = OPT_INT, .arg = "SECONDS",
	  OPT_AT(struct mgr_args, lock_grace_ms), .lo = 0, .hi = 3600,
	  .scale = 1000, .def = MGR_LOCK_DEFAULT_GRACE_MS,
	  .what = "SECONDS {lo}..{hi}",
	  .help = "after a start, only the locks clients reclaim are granted "
		  "for this long (mgr/lock/README.md \"Locks\")" },
	{ .name = "resync-rate", .kind = OPT_INT, .arg = "MB/s",
	  OPT_AT(struct mgr_args, resync_rate), .lo = 0,
	  .hi = MGR_RESYNC_MAX_RATE, .def = MGR_RESYNC_DEFAULT_RATE,
	  .what = "MB/s {lo}..{hi} (0 = resync off)",
	  .key = "[mgr] resync_rate", OPT_CF(resync_rate, -1),
	  .help = "MB/s (10^6 bytes) at most of stale mirror replicas copied "
		  "back from their buddies; 0: off" },
	{ .name = "db-size", .kind = OPT_SIZE, .arg = "SIZE",
	  OPT_AT(struct mgr_args, lim.db_size), .lo = MGR_DB_MIN_SIZE,
	  .hi = MGR_DB_MAX_SIZE, .def = MGR_DB_DEFAULT_SIZE,
	  .what = "a size {lo}..{hi} (suffix K, M or G)",
	  .key = "[mgr] db_size", OPT_CF(db_size, 0),
	  .help = "the namespace map (store lmdb); growth stops short of it, "
		  "deletes still work" },
	{ .name = "xattr-max-count", .kind = OPT_INT, .arg = "N",
	  OPT_AT(struct mgr_args, lim.xattr_max_count), .lo = 1,
	  .hi = MGR_XATTR_MAX_COUNT, .def = MGR_XATTR_DEFAULT_COUNT,
	  .what = "{lo}..{hi} xattrs per inode",
	  .key = "[mgr] xattr_max_count", OPT_CF(xattr_max_count, 0),
	  .help = "the xattrs of one inode, at most" },
	{ .name = "xattr-max-bytes", .kind = OPT_SIZE, .arg = "SIZE",
	  OPT_AT(struct mgr_args, lim.xattr_max_bytes), .lo = MGR_XATTR_MIN_BYTES,
	  .hi = MGR_XATTR_MAX_BYTES, .def = MGR_XATTR_DEFAULT_BYTES,
	  .what = "a size {lo}..{hi} (suffix K or M)",
	  .key = "[mgr] xattr_max_bytes", OPT_CF(xattr_max_bytes, 0),
	  .help = "the names and values of one inode's xattrs, at most" },
	{ .name = "metrics", .kind = OPT_ADDR, .arg = "HOST:PORT",
	  OPT_AT(struct mgr_args, d.metrics), .addr = ADDR_PORT0,
	  .defdoc = "off", .key = "[metrics] listen",
	  .help = "serve Prometheus /metrics on HOST:PORT" },
	{ .name = "store", .kind = OPT_STRING, .arg = "lmdb|postgresql",
	  OPT_AT(struct mgr_args, store), .check = store_check,
	  .what = "lmdb or postgresql", .defdoc = "lmdb", .key = "[mgr] store",
	  OPT_CF_S(store),
	  .help = "the namespace store: lmdb, in --db DIR, or postgresql, a "
		  "database several mgrs share, at --store-uri (rpfs mkfs "
		  "--store-uri creates its schema)" },
	{ .name = "store-uri", .kind = OPT_STRING, .arg = "URI",
	  OPT_AT(struct mgr_args, store_uri), .what = "a PostgreSQL URI",
	  .key = "[mgr] store_uri", OPT_CF_S(store_uri),
	  .help = "store postgresql: a libpq URI such as postgresql://h1,h2/"
		  "rpfs?target_session_attrs=read-write" },
	{ .name = "group-commit", .kind = OPT_ONOFF, .arg = "on|off",
	  OPT_AT(struct mgr_args, group_commit), .def = 1,
	  .what = "on or off", .key = "[mgr] group_commit",
	  OPT_CF(group_commit, -1),
	  .help = "write ops queued together share one commit (one sync), "
		  "each answered after it (mgr/README.md \"Group commit\")" },
	{ .name = "lease", .kind = OPT_INT, .arg = "SECONDS",
	  OPT_AT(struct mgr_args, lead_ms), .lo = MGR_LEAD_MIN_MS / 1000,
	  .hi = MGR_LEAD_MAX_MS / 1000, .scale = 1000,
	  .def = MGR_LEAD_DEFAULT_MS, .what = "SECONDS {lo}..{hi}",
	  .key = "[mgr] lease", OPT_CF(lease_ms, 0),
	  .help = "with store postgresql, several mgrs share the store and one "
		  "is active: the lease it holds; a standby takes over within "
		  "about one lease after it dies" },
	{ .name = "lease-ms", .kind = OPT_INT, .flags = OPT_TESTING, .arg = "MS",
	  OPT_AT(struct mgr_args, lease_ms), .lo = MGR_FENCE_MIN_LEASE_MS,
	  .hi = MGR_FENCE_MAX_LEASE_MS, .def = MGR_FENCE_LEASE_MS,
	  .what = "milliseconds {lo}..{hi}",
	  .help = "the fence lease granted to the iods; a STALE_MARK for an iod "
		  "that does not answer waits up to one lease" },
	{ .name = "commit-delay-ms", .kind = OPT_INT, .flags = OPT_TESTING,
	  .arg = "MS", OPT_AT(struct mgr_args, commit_delay_ms), .lo = 0,
	  .hi = MGR_OPS_MAX_COMMIT_DELAY_MS, .what = "milliseconds {lo}..{hi}",
	  .help = "sleep before each group commit, so that a crash lands "
		  "before it" },
};

static const struct opt_prog mgr_prog = {
	.name = PROG,
	.usage = "usage: " PROG " --listen HOST:PORT --db DIR --iod HOST:PORT "
		 "[--iod HOST:PORT ...] [OPTION...]\n"
		 "   or: " PROG " --conf FILE [OPTION...]\n",
	.intro = "Without --conf and without --listen, $RPFS_CONF or "
		 CFG_DEFAULT_PATH " is read.\n"
		 "HOST:PORT: a name, an IPv4 address or [IPv6]:PORT.\n",
	.opts = mgr_opts,
	.nopts = sizeof(mgr_opts) / sizeof(mgr_opts[0]),
};

/* Everything main sets up, and what the request callback needs. Loop
 * thread only, but for restart. */
struct mgr_srv {
	struct mgr_args a;
	struct cfg *conf;
	struct net_opts o;
	struct ev_loop *loop;
	struct dmn_signals sig;
	struct mgr_db *db;
	struct mgr_stale *stale;
	struct mgr_iodpoll *poll;
	struct mgr_resync *resync; /* NULL: resync off */
	struct mgr_ops *ops;
	struct mgr_lockd *lockd;
	struct mgr_leased *leased;   /* the callback channel */
	struct mgr_scrub *scrub;
	struct net_server *srv;
	struct dmn_metrics *metrics;
	struct mgr_lead *lead;  /* several mgrs (PostgreSQL store); NULL: LMDB */
	ev_timer renew;         /* the lease's renew, every lease/3 */
	int served;             /* the loop ran: stop gracefully */
	int restart;            /* the leadership was lost: main re-executes
				 * this program, which comes back as a standby
				 * (set by the loop thread; atomic: the writer
				 * thread reads it, lead_serving) */
	int acquired;           /* standby phase: the lease was taken */
};

/* Complain about an argument. @return -EINVAL */
static int bad_arg(const char *opt, const char *what, const char *got)
{
	fprintf(stderr, PROG ": %s: expected %s, got \"%s\"\n", opt, what, got);
	return -EINVAL;
}

/* The --store check (opt.h OPT_STRING): 0 for a store this mgr has. */
static int store_check(const char *s)
{
	enum mgr_kv_kind kind;

	return mgr_kv_kind_parse(s, &kind);
}

/* Where the namespace lives, for messages: the --db directory, or
 * "store_uri" for the PostgreSQL store (its URI may hold a password). */
static const char *store_where(const struct mgr_args *a)
{
	if (a->kc.kind != MGR_KV_LMDB)
		return "store_uri";
	return a->db_dir ? a->db_dir : "";
}

/*
 * Parse the command line into a, after the defaults; without --conf and
 * --listen the config file is $RPFS_CONF or the default path.
 * @return 0, OPT_HELP (printed), -EINVAL (message printed)
 */
static int mgr_parse(int argc, char **argv, struct mgr_args *a)
{
	char err[PROTO_MAX_HOST * 2 + 300];
	int rc;

	memset(a, 0, sizeof(*a));
	a->count = -1;
	opt_defaults(&mgr_prog, a);
	rc = opt_parse(&mgr_prog, argc, argv, a, &a->given, err, sizeof(err));
	if (rc < 0)
		fprintf(stderr, PROG ": %s\n", err);
	if (rc)
		return rc;
	a->have_listen = opt_given(&mgr_prog, a->given, "listen");
	if (!a->d.conf && !a->have_listen)
		a->d.conf = getenv("RPFS_CONF") ? getenv("RPFS_CONF") : CFG_DEFAULT_PATH;
	return 0;
}

/*
 * Choose the namespace store into a->kc: --store and --store-uri, else
 * [mgr] store and store_uri (merged already), and check that they agree:
 * postgresql needs a URI, a URI needs postgresql, lmdb needs --db.
 * @return 0, -EINVAL (message printed)
 */
static int store_conf(struct mgr_args *a)
{
	int flag = opt_given(&mgr_prog, a->given, "store");
	const char *what = flag ? "--store" : "[mgr] store";
	const char *uwhat = opt_given(&mgr_prog, a->given, "store-uri") ?
			    "--store-uri" : "[mgr] store_uri";

	memset(&a->kc, 0, sizeof(a->kc));
	a->kc.kind = MGR_KV_LMDB;
	if (a->store && mgr_kv_kind_parse(a->store, &a->kc.kind))
		return bad_arg(what, "lmdb or postgresql", a->store);
	if (a->kc.kind == MGR_KV_POSTGRESQL && !a->store_uri) {
		fprintf(stderr, PROG ": %s%spostgresql needs a PostgreSQL URI "
			"(--store-uri URI, or [mgr] store_uri in the config file)\n",
			what, flag ? " " : " = ");
		return -EINVAL;
	}
	if (a->kc.kind == MGR_KV_LMDB && a->store_uri) {
		fprintf(stderr, PROG ": %s is set, but the store is lmdb (%s): set "
			"--store postgresql or [mgr] store = postgresql, or drop %s\n",
			uwhat, a->store ? what : "the default", uwhat);
		return -EINVAL;
	}
	if (a->kc.kind == MGR_KV_LMDB && !a->db_dir) {
		fprintf(stderr, PROG ": --db: required (DIR, or [mgr] db in the config file)\n");
		return -EINVAL;
	}
	a->kc.uri = a->store_uri;
	a->kc.dir = a->db_dir;
	a->kc.map_size = a->lim.db_size;
	return 0;
}

/* What the table's keys do not cover: the listen address ([mgr] listen,
 * else [cluster] mgr's port on 0.0.0.0), the iods, the stripe count and
 * the metrics address, each when the command line left it unset. */
static void merge_rest(struct mgr_args *a, const struct cfg *f)
{
	if (!a->have_listen && (f->listen_host[0] || f->mgr_host[0])) {
		snprintf(a->listen.host, sizeof(a->listen.host), "%s",
			 f->listen_host[0] ? f->listen_host : "0.0.0.0");
		a->listen.port = f->listen_host[0] ? f->listen_port : f->mgr_port;
		a->have_listen = 1;
	}
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
	if (!a->count_arg && f->stripe_count >= 0)
		a->count = f->stripe_count;
}

/* The stripe count against the iods: the file's, then --stripe-count
 * (0..niods). @return 0, -EINVAL (message printed) */
static int check_count(struct mgr_args *a)
{
	char what[64], *end;
	long v;

	if (a->count > a->niods) {
		fprintf(stderr, PROG ": stripe_count: %ld is more than the %u iods\n",
			a->count, a->niods);
		return -EINVAL;
	}
	if (!a->count_arg)
		return 0;
	errno = 0;
	v = strtol(a->count_arg, &end, 10);
	if (errno || end == a->count_arg || *end || v < 0 || v > a->niods) {
		snprintf(what, sizeof(what), "0..%u (0 = all iods)", a->niods);
		return bad_arg("--stripe-count", what, a->count_arg);
	}
	a->count = v;
	return 0;
}

/*
 * Fill what the command line left unset from the config file (flags win),
 * then check that everything required is there.
 * @return 0, -EINVAL (message printed)
 */
static int mgr_merge(struct mgr_args *a, const struct cfg *f)
{
	opt_merge_conf(&mgr_prog, f, a, a->given);
	if (f)
		merge_rest(a, f);
	(void)dmn_metrics_conf(&a->d, f, opt_given(&mgr_prog, a->given,
			       "metrics"), 0);
	if (!a->have_listen) {
		fprintf(stderr, PROG ": --listen: required (HOST:PORT, or [mgr] listen "
			"in the config file)\n");
		return -EINVAL;
	}
	if (store_conf(a))
		return -EINVAL;
	if (a->niods == 0) {
		fprintf(stderr, PROG ": --iod: at least one is required (HOST:PORT, or "
			"[iod.N] sections in the config file)\n");
		return -EINVAL;
	}
	return check_count(a);
}

/*
 * The command line, the config file and the keys into ms (a, conf, o),
 * then logging. @return 0, OPT_HELP, -EINVAL or a key's error (printed)
 */
static int mgr_setup(int argc, char **argv, struct mgr_srv *ms)
{
	struct mgr_args *a = &ms->a;
	char msg[512];
	int rc;

	rc = mgr_parse(argc, argv, a);
	if (rc)
		return rc;
	rc = dmn_load_conf(a->d.conf, &ms->conf, &ms->o, msg, sizeof(msg));
	if (rc) {
		fprintf(stderr, PROG ": %s\n", msg);
		return rc;
	}
	rc = mgr_merge(a, ms->conf);
	if (rc)
		return rc;
	rc = dmn_settle(&a->d, ms->conf, opt_given(&mgr_prog, a->given,
			"request-timeout"), &a->listen, &ms->o, msg, sizeof(msg));
	if (rc) {
		fprintf(stderr, PROG ": %s\n", msg);
		return rc;
	}
	log_init(PROG, a->d.log_level);
	if (a->d.listen_warn)
		log_warn("%s", a->d.listen_msg);
	return 0;
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
static int standby_wait(struct mgr_srv *ms)
{
	const struct mgr_args *a = &ms->a;
	struct net_server *srv = NULL;
	char addr[ADDR_STRLEN], msg[ADDR_STRLEN + 80];
	double every = mgr_lead_lease_ms(ms->lead) / 3000.0;
	int rc;

	ms->acquired = mgr_lead_tick(ms->lead) == 1;
	if (ms->acquired)
		return 1;
	if (ms->sig.stopped)
		return 0;
	rc = net_server_new(&srv, ms->loop, a->listen.host, a->listen.port,
			    standby_handle, ms, &ms->o);
	if (rc) {
		log_err("--listen %s: %s", addr_format(addr, sizeof(addr),
			a->listen.host, a->listen.port), strerror(-rc));
		return rc;
	}
	addr_format(addr, sizeof(addr), a->listen.host, net_server_port(srv));
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
	if (strcmp(a->listen.host, "0.0.0.0") && strcmp(a->listen.host, "::") &&
	    a->listen.host[0]) {
		snprintf(host, cap, "%s", a->listen.host);
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
static int lead_start(struct mgr_srv *ms)
{
	const struct mgr_args *a = &ms->a;
	char host[PROTO_MAX_HOST + 1], msg[600];
	int rc;

	lead_address(a, host, sizeof(host));
	rc = mgr_lead_new(&ms->lead, a->kc.uri, host, a->listen.port,
			  (uint32_t)a->lead_ms, msg, sizeof(msg));
	if (rc) {
		log_err("%s", msg);
		return rc;
	}
	rc = standby_wait(ms);
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
	else if (mgr_leased_owns(r->hdr.op))
		mgr_leased_handle(ms->leased, r);
	else if (mgr_scrub_owns(r->hdr.op))
		mgr_scrub_handle(ms->scrub, r);
	else if (mgr_stale_owns(r->hdr.op))
		mgr_stale_handle(ms->stale, r);
	else
		mgr_ops_handle(r, ms->ops);
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
static int open_store(struct mgr_srv *ms, char *msg, size_t cap)
{
	const struct mgr_args *a = &ms->a;
	int restarted = getenv(LEAD_RESTART_ENV) != NULL, said = 0, rc;
	struct timespec ts = { a->lead_ms / 3000, (a->lead_ms / 3 % 1000) * 1000000L };

	unsetenv(LEAD_RESTART_ENV);
	for (;;) {
		msg[0] = '\0';
		rc = mgr_db_open_store(&ms->db, &a->kc, &a->lim, 0, msg, cap);
		if (!rc || !restarted || ms->sig.stopped ||
		    (rc != -EHOSTUNREACH && rc != -EIO))
			return rc;
		if (!said++)
			log_notice("%s; restarting as a standby: trying again every "
				   "%ld ms", msg[0] ? msg : strerror(-rc),
				   a->lead_ms / 3);
		nanosleep(&ts, NULL);
		ev_run(ms->loop, EVRUN_NOWAIT); /* a SIGTERM meanwhile */
	}
}

/*
 * Open the store; on a PostgreSQL store, take the lease, standing by
 * until then. @return 0 open and active; MGR_STOPPED a signal stopped it
 * first; 1 a failure (logged)
 */
static int mgr_open(struct mgr_srv *ms)
{
	const struct mgr_args *a = &ms->a;
	char msg[512];
	int rc = open_store(ms, msg, sizeof(msg));

	if (rc && ms->sig.stopped)
		return MGR_STOPPED;
	if (rc && msg[0])
		log_err("%s", msg);
	else if (rc)
		log_err("%s%s: cannot open the store: %s",
			a->kc.kind == MGR_KV_LMDB ? "--db " : "", store_where(a),
			strerror(-rc));
	if (rc)
		return 1;
	if (a->kc.kind != MGR_KV_POSTGRESQL)
		return 0;
	if (!a->listen.port) {
		log_err("--listen %s: store postgresql needs a port other than 0 "
			"(the lease names it to clients)", a->listen.host);
		return 1;
	}
	rc = lead_start(ms);
	return rc > 0 ? 0 : rc == 0 ? MGR_STOPPED : 1;
}

/*
 * Record (or check) the iod table and the default layout in the store.
 * Should the lease move on, or the store go, between taking the lease and
 * recording, it is a loss of the lease.
 * @return 0; 1 a failure (logged); 3 the lease was lost (restart)
 */
static int mgr_record(struct mgr_srv *ms)
{
	const struct mgr_args *a = &ms->a;
	uint64_t mark = mgr_kv_reach_mark(ms->db->kv);
	char msg[512] = "";
	int rc;

	rc = mgr_db_config(ms->db, a->iods, a->niods, a->unit,
			   a->count > 0 ? (uint16_t)a->count : 0, a->mirror, msg,
			   sizeof(msg));
	if (rc && ms->lead && (rc == -ESTALE || (rc == -EIO &&
			       mgr_kv_unreachable_since(ms->db->kv, mark)))) {
		log_warn("lease: lost before this mgr recorded the configuration "
			 "(token %lld: %s): it restarts as a standby",
			 (long long)mgr_lead_token(ms->lead),
			 rc == -ESTALE ? "another mgr holds the lease" :
					 "the store is out of reach");
		ms->restart = 1;
		return 3;
	}
	if (rc && rc == -EINVAL && msg[0])
		log_err("cannot start: %s", msg);
	else if (rc == -EEXIST)
		log_err("%s%s: the iod table differs from the one recorded in %s: %s",
			a->iods_from_conf ? a->d.conf : "--iod",
			a->iods_from_conf ? " [iod.N]" : "", store_where(a), msg);
	else if (rc)
		log_err("%s%s: cannot record the configuration: %s",
			a->kc.kind == MGR_KV_LMDB ? "--db " : "", store_where(a),
			strerror(-rc));
	return rc ? 1 : 0;
}

/*
 * Start the iods' side: the stale marks, the iod poller (fencing leases,
 * statfs) and the resync. mgr_close undoes them.
 * @return 0, 1 a failure (logged)
 */
static int mgr_start_iods(struct mgr_srv *ms)
{
	const struct mgr_args *a = &ms->a;
	int rc;

	rc = mgr_stale_new(&ms->stale, ms->loop, ms->db);
	if (rc) {
		log_err("out of memory");
		return 1;
	}
	rc = mgr_iodpoll_start_lead(&ms->poll, ms->db, &ms->o, (uint32_t)a->lease_ms,
				    mgr_stale_wake, ms->stale,
				    ms->lead ? (uint64_t)mgr_lead_token(ms->lead) : 0,
				    ms->lead ? lead_serving_mt : NULL, ms->lead);
	if (rc) {
		log_err("cannot start the iod poller: %s", strerror(-rc));
		return 1;
	}
	if (a->resync_rate > 0) {
		rc = mgr_resync_start(&ms->resync, ms->db, ms->poll, &ms->o,
				      (uint32_t)a->resync_rate);
		if (rc) {
			log_err("cannot start the resync: %s", strerror(-rc));
			return 1;
		}
	} else {
		log_notice("resync is off (resync rate 0): stale replicas "
			   "stay stale");
	}
	mgr_stale_attach(ms->stale, ms->poll, ms->resync);
	return 0;
}

/*
 * Start the clients' side: the metadata ops (with group commit), the lock
 * service and the scrub service. mgr_close undoes them.
 * @return 0, 1 a failure (logged)
 */
static int mgr_start_ops(struct mgr_srv *ms)
{
	const struct mgr_args *a = &ms->a;
	struct proto_time boot;
	int rc;

	rc = mgr_ops_new(&ms->ops, ms->db, ms->poll, a->root_squash);
	if (!rc && a->group_commit)
		rc = mgr_ops_group_commit(ms->ops, ms->loop,
					  (uint32_t)a->commit_delay_ms);
	if (rc) {
		log_err("out of memory");
		return 1;
	}
	if (ms->lead)
		mgr_ops_set_lead(ms->ops, lead_serving, lead_lost, ms);
	rc = mgr_lockd_new(&ms->lockd, ms->loop, ms->db, (uint32_t)a->lock_grace_ms);
	if (rc) {
		log_err("cannot start the lock service: %s", strerror(-rc));
		return 1;
	}
	rc = mgr_leased_new(&ms->leased, ms->loop);
	if (rc) {
		log_err("cannot start the callback channel: %s", strerror(-rc));
		return 1;
	}
	if (ms->lead && mgr_lead_lease_ms(ms->lead) < MGR_LEASE_MIN_LEAD_MS)
		log_notice("leases: none granted: the mgr lease (%u ms) is under "
			   "%u ms, too short for the mounts to drop what they "
			   "keep before a standby takes over",
			   mgr_lead_lease_ms(ms->lead), MGR_LEASE_MIN_LEAD_MS);
	else
		mgr_ops_set_leases(ms->ops, ms->leased);
	mgr_db_now(&boot);
	rc = mgr_scrub_new(&ms->scrub, ms->db, mgr_scrub_ns(&boot));
	if (rc) {
		log_err("out of memory");
		return 1;
	}
	return 0;
}

/*
 * Listen: the server on --listen, then the metrics endpoint. mgr_close
 * undoes them. @return 0, 1 a failure (logged)
 */
static int mgr_listen(struct mgr_srv *ms)
{
	const struct mgr_args *a = &ms->a;
	struct mgr_metrics_src src = {
		.db = ms->db, .poll = ms->poll, .resync = ms->resync,
		.lockd = ms->lockd, .leased = ms->leased, .scrub = ms->scrub,
		.niods = a->niods,
		.resync_rate = a->resync_rate,
	};
	struct dmn_metrics_src ds = { .what = a->d.metrics_what,
		.host = a->d.metrics.host, .port = a->d.metrics.port, .loop = ms->loop };
	char msg[512];
	int rc;

	rc = net_server_new(&ms->srv, ms->loop, a->listen.host, a->listen.port,
			    mgr_main_handle, ms, &ms->o);
	if (rc) {
		log_err("--listen %s: %s", addr_format(msg, sizeof(msg),
			a->listen.host, a->listen.port), strerror(-rc));
		return 1;
	}
	ds.srv = ms->srv;
	if (a->d.metrics_what && dmn_metrics_start(&ms->metrics, &mgr_metrics_kind,
						   &ds, &src, msg, sizeof(msg))) {
		log_err("%s", msg);
		return 1;
	}
	return 0;
}

/*
 * Serve until a signal or the loss of the lease: the lease's renew timer,
 * the STATUS op, the ready line, the loop, then the last batch.
 * @return 0 stopped, 3 the lease was lost (restart as a standby)
 */
static int mgr_serve(struct mgr_srv *ms)
{
	const struct mgr_args *a = &ms->a;
	double every = ms->lead ? mgr_lead_lease_ms(ms->lead) / 3000.0 : 0;
	char addr[ADDR_STRLEN];

	if (ms->lead) {
		ev_timer_init(&ms->renew, lead_on_tick, every, every);
		ms->renew.data = ms;
		ev_timer_start(ms->loop, &ms->renew);
	}
	srvstat_init("mgr", 0, a->db_dir ? a->db_dir : "/", ms->srv);
	addr_format(addr, sizeof(addr), a->listen.host, net_server_port(ms->srv));
	dmn_ready("listening on %s, %u iods (%s%s), store %s", addr, a->niods,
		  net_server_transport(ms->srv), ms->o.has_srv_key ? ", two keys" :
		  ms->o.has_key ? ", cluster key" : "", mgr_kv_kind_name(a->kc.kind));
	ms->served = 1;
	ev_run(ms->loop, 0);
	/* the callback channel first: its parked waits are answered, its
	 * parked changes join the last batch, which is flushed now */
	mgr_ops_set_leases(ms->ops, NULL);
	mgr_leased_free(ms->leased);
	ms->leased = NULL;
	mgr_ops_flush(ms->ops); /* the last iteration's batch, if any */
	if (ms->lead)
		ev_timer_stop(ms->loop, &ms->renew);
	if (!ms->restart) /* a restart as a standby is no stop to systemd */
		sdn_stop(ms->loop);
	return ms->restart ? 3 : 0;
}

/*
 * Stop what mgr_open .. mgr_serve started, in reverse. After the loop
 * ran (mgr_serve has ended the callback channel), first the parts that
 * still answer: the metrics (they read lockd, poll and resync), the lock
 * service's deferred requests, and the pending
 * STALE_MARKs (the poll thread stops, they are answered, -EIO unless
 * fenced, while their connections still exist).
 */
static void mgr_close(struct mgr_srv *ms)
{
	if (ms->served) {
		dmn_metrics_stop(ms->metrics);
		ms->metrics = NULL;
		mgr_lockd_free(ms->lockd, 1);
		ms->lockd = NULL;
		mgr_resync_stop(ms->resync);
		ms->resync = NULL;
		mgr_iodpoll_halt(ms->poll);
		mgr_stale_flush(ms->stale);
	}
	dmn_metrics_stop(ms->metrics);
	net_server_free(ms->srv);
	mgr_scrub_free(ms->scrub);
	mgr_lockd_free(ms->lockd, 0);
	if (ms->ops)
		mgr_ops_set_leases(ms->ops, NULL);
	mgr_leased_free(ms->leased);
	mgr_ops_free(ms->ops);
	mgr_resync_stop(ms->resync);
	mgr_iodpoll_stop(ms->poll);
	mgr_stale_free(ms->stale);
	if (ms->lead && !ms->restart && mgr_lead_token(ms->lead))
		mgr_lead_release(ms->lead); /* served nothing since the loop ended */
	mgr_lead_free(ms->lead);
	mgr_db_close(ms->db);
}

/*
 * Run the mgr: the loop and its signals, the store (and the lease), the
 * configuration, the services, then serve.
 * @return the exit status: 0 stopped, 1 a failure (logged), 3 the lease
 *	was lost (restart as a standby)
 */
static int mgr_run(struct mgr_srv *ms)
{
	int rc;

	ms->loop = ev_default_loop(EVFLAG_AUTO);
	if (!ms->loop) {
		log_err("cannot create the event loop");
		return 1;
	}
	dmn_signals_start(&ms->sig, ms->loop);
	sdn_start(ms->loop); /* the watchdog, fed while standing by too */
	rc = mgr_open(ms);
	if (!rc)
		rc = mgr_record(ms);
	if (!rc)
		rc = mgr_start_iods(ms);
	if (!rc)
		rc = mgr_start_ops(ms);
	if (!rc)
		rc = mgr_listen(ms);
	if (!rc)
		rc = mgr_serve(ms);
	return rc == MGR_STOPPED ? 0 : rc;
}

/* rpfs-mgr: exit 0 after a stop by a signal (or --help), 1 on a failure,
 * 2 on a bad command line, config file or key; a mgr that lost the lease
 * executes itself again, to come back as a standby. */
int main(int argc, char **argv)
{
	static struct mgr_srv ms;
	int status;

	signal(SIGPIPE, SIG_IGN);
	status = mgr_setup(argc, argv, &ms);
	if (status) {
		cfg_free(ms.conf);
		return status == OPT_HELP ? 0 : 2;
	}
	status = mgr_run(&ms);
	mgr_close(&ms);
	cfg_free(ms.conf);
	if (status == 3) { /* lost the lease: come back as a standby */
		setenv(LEAD_RESTART_ENV, "1", 1);
		execv("/proc/self/exe", argv);
		fprintf(stderr, PROG ": cannot restart as a standby: %s\n",
			strerror(errno));
	}
	return status;
}
