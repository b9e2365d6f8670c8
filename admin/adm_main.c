/*
 * adm_main.c - `rpfs`, the admin CLI: dispatch to the subcommands (each
 * answers -h/--help with its usage lines and its option table's help),
 * and the local ones: keygen and mkfs.
 */
#include <errno.h>
#include <netdb.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"
#include "mgr_db.h"
#include "mgr_kv.h"
#include "net_auth.h"
#include "adm.h"
#include "opt.h"

/* The usage text, with the exit codes. */
static void usage(FILE *f)
{
	fputs("usage: rpfs COMMAND [ARGS]   (rpfs COMMAND --help: one command)\n", f);
	fputs("  " USAGE_KEYGEN "  " USAGE_MKFS "  " USAGE_STATUS "  " USAGE_GETLAYOUT
	      "  " USAGE_SETLAYOUT "  " USAGE_STATS "  " USAGE_SCRUB, f);
	fputs("The config file defaults to $RPFS_CONF, else " CFG_DEFAULT_PATH ".\n"
	      "Exit status: 0 success (status: all servers up), 1 failure (status: a server\n"
	      "is down), 2 bad command line, 3 unusable config or key file.\n", f);
}

/* Load the servers' key for adm_load: --server-key, else the file's. */
static int adm_load_srv_key(const struct cfg *conf, const char *srv_key,
			    struct net_opts *no)
{
	const char *path = srv_key ? srv_key : conf ? conf->srv_key_path : NULL;
	char msg[512];

	if (!path)
		return ADM_OK;
	if (cfg_load_server_key(path, no, msg, sizeof(msg))) {
		fprintf(stderr, "rpfs: %s%s (this needs the servers' key: run it "
			"on a server host as the user the daemons run as)\n",
			srv_key ? "--server-key: " : "", msg);
		return ADM_CONFIG;
	}
	return ADM_OK;
}

/* See rpfs.h. */
int adm_load(const char *path, const char *key, const char *srv_key,
	     int servers, struct cfg **conf, struct net_opts *no)
{
	char msg[512];
	int rc;

	*conf = NULL;
	net_opts_default(no);
	no->timeout_ms = 3000;
	if (path) {
		rc = cfg_load(conf, path, msg, sizeof(msg));
		if (rc == 0 && !key)
			rc = cfg_net_opts(*conf, no, msg, sizeof(msg));
		if (rc) {
			fprintf(stderr, "rpfs: %s\n", msg);
			goto out_free_conf;
		}
	}
	if (key && cfg_load_key(key, no, msg, sizeof(msg))) {
		fprintf(stderr, "rpfs: --key: %s\n", msg);
		goto out_free_conf;
	}
	if (servers && adm_load_srv_key(*conf, srv_key, no))
		goto out_free_conf;
	return ADM_OK;

out_free_conf:
	cfg_free(*conf);
	*conf = NULL;
	return ADM_CONFIG;
}

/* The default config path: $RPFS_CONF or /etc/rpfs/rpfs.conf. */
static const char *default_conf(void)
{
	const char *e = getenv("RPFS_CONF");

	return e && *e ? e : CFG_DEFAULT_PATH;
}

/* rpfs keygen's command line. */
struct keygen_args {
	int force; /* -f: replace an existing file */
};

/* rpfs keygen's options. */
static const struct opt keygen_opts[] = {
	{ .name = "force", .letter = 'f', .kind = OPT_SWITCH,
	  OPT_AT(struct keygen_args, force),
	  .help = "replace FILE if it exists (every server and client then "
		  "needs the new key)" },
};

static const struct opt_prog keygen_prog = {
	.name = "rpfs keygen",
	.usage = "usage: rpfs " USAGE_KEYGEN,
	.opts = keygen_opts,
	.nopts = sizeof(keygen_opts) / sizeof(keygen_opts[0]),
};

/*
 * Parse rpfs keygen's command line: the flags into a, FILE into *path.
 * @return ADM_OK, ADM_USAGE (reported), OPT_HELP after --help
 */
static int keygen_parse(int argc, char **argv, struct keygen_args *a,
			const char **path)
{
	char err[512];
	uint64_t given;
	int first, rc;

	memset(a, 0, sizeof(*a));
	opt_defaults(&keygen_prog, a);
	rc = opt_parse_args(&keygen_prog, argc, argv, a, &given, &first, err,
			    sizeof(err));
	if (rc == OPT_HELP)
		return OPT_HELP;
	if (rc) {
		fprintf(stderr, "rpfs keygen: %s%s\n", err,
			strncmp(err, "unknown option", 14) ? "" :
			" (a file name starting with - needs ./)");
		return ADM_USAGE;
	}
	if (argc - first != 1) {
		fprintf(stderr, "rpfs keygen: expected [-f] FILE\n");
		return ADM_USAGE;
	}
	*path = argv[first];
	if ((*path)[0] == '-') {
		fprintf(stderr, "rpfs keygen: unknown option \"%s\" (a file name "
			"starting with - needs ./)\n", *path);
		return ADM_USAGE;
	}
	return ADM_OK;
}

/* rpfs keygen [-f] FILE */
static int cmd_keygen(int argc, char **argv)
{
	struct keygen_args a;
	const char *path;
	int rc;

	rc = keygen_parse(argc, argv, &a, &path);
	if (rc)
		return rc == OPT_HELP ? ADM_OK : rc;
	if (net_auth_init()) {
		fprintf(stderr, "rpfs keygen: cannot initialise libsodium\n");
		return ADM_FAIL;
	}
	rc = net_key_generate(path, a.force);
	if (rc == -EEXIST) {
		fprintf(stderr, "rpfs keygen: %s exists (use -f to replace it; every "
			"server and client then needs the new key)\n", path);
		return ADM_FAIL;
	}
	if (rc) {
		fprintf(stderr, "rpfs keygen: %s: %s\n", path, strerror(-rc));
		return ADM_FAIL;
	}
	printf("wrote a new cluster key to %s (mode 0600); copy it to every server "
	       "and client\n", path);
	return ADM_OK;
}

/* Whether host names an address of this machine (we can bind to it). */
static int host_is_local(const char *host)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int local = 0;

	if (getaddrinfo(host, NULL, &hints, &res))
		return 0;
	for (ai = res; ai && !local; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			continue;
		local = bind(fd, ai->ai_addr, ai->ai_addrlen) == 0;
		close(fd);
	}
	freeaddrinfo(res);
	return local;
}

/* Create the mgr database and record the iod table. @return ADM_* */
static int mkfs_db(const char *db_dir, const struct mgr_iod *iods, uint16_t n,
		   uint32_t unit, uint16_t count, uint8_t mirror)
{
	struct mgr_kv_conf kc = { .kind = MGR_KV_LMDB, .dir = db_dir };
	struct mgr_db_limits lim;
	struct mgr_db *db;
	char msg[512] = "";
	int rc;

	mgr_db_limits_default(&lim);
	rc = mgr_db_open_store(&db, &kc, &lim, 1, msg, sizeof(msg));
	if (rc) {
		fprintf(stderr, "rpfs mkfs: %s: cannot create the database: %s\n",
			db_dir, msg[0] ? msg : strerror(-rc));
		return ADM_FAIL;
	}
	rc = mgr_db_config(db, iods, n, unit, count, mirror, msg, sizeof(msg));
	mgr_db_close(db);
	if (rc == -EEXIST) {
		fprintf(stderr, "rpfs mkfs: %s already holds another iod table: %s\n",
			db_dir, msg);
		return ADM_FAIL;
	}
	if (rc) {
		fprintf(stderr, "rpfs mkfs: %s: %s\n", db_dir,
			msg[0] ? msg : strerror(-rc));
		return ADM_FAIL;
	}
	printf("mgr database %s: %u iods\n", db_dir, n);
	return ADM_OK;
}

/*
 * Create the schema of the PostgreSQL store at uri (harmless when it is
 * there already; a schema of another version is refused).
 * @param what where uri came from, for messages ("--store-uri", or the
 *	config file's path)
 * @return ADM_OK, ADM_USAGE / ADM_CONFIG an unparseable URI (from the
 *	command line / the file), ADM_FAIL
 */
static int mkfs_pg(const char *uri, const char *what, int from_conf)
{
#ifdef RPFS_HAVE_PG
	struct mgr_kv_conf kc = { .kind = MGR_KV_POSTGRESQL, .uri = uri };
	struct mgr_kv *kv;
	char msg[600] = "";
	int rc = mgr_kv_open(&kc, 1, &kv, msg, sizeof(msg));

	if (rc) {
		fprintf(stderr, "rpfs mkfs: %s: %s\n", what, msg);
		if (rc == -EINVAL)
			return from_conf ? ADM_CONFIG : ADM_USAGE;
		return ADM_FAIL;
	}
	mgr_kv_close(kv);
	printf("postgresql store: schema ready\n");
	return ADM_OK;
#else
	fprintf(stderr, "rpfs mkfs: %s: this rpfs is built without the postgresql "
		"store (meson -Dpostgresql=enabled)\n", what);
	return ADM_FAIL;
#endif
}

/* Make the iod data directories data[0..n). @return ADM_* */
static int mkfs_data(const char *const *data, int n)
{
	int rc;

	for (int i = 0; i < n; i++) {
		if ((rc = dmn_mkdir_p(data[i])) != 0) {
			fprintf(stderr, "rpfs mkfs: %s: %s\n", data[i], strerror(-rc));
			return ADM_FAIL;
		}
		printf("iod data directory %s\n", data[i]);
	}
	return ADM_OK;
}

/*
 * The store of --conf's [mgr] section: *uri is its store_uri when store is
 * postgresql, NULL for lmdb. The two must agree, as for rpfs-mgr.
 * @return ADM_OK, ADM_CONFIG (printed)
 */
static int mkfs_conf_store(const struct cfg *conf, const char **uri)
{
	int pg = conf->store && !strcmp(conf->store, "postgresql");

	*uri = NULL;
	if (pg && !conf->store_uri) {
		fprintf(stderr, "rpfs mkfs: %s: [mgr] store = postgresql needs "
			"[mgr] store_uri\n", conf->path);
		return ADM_CONFIG;
	}
	if (!pg && conf->store_uri) {
		fprintf(stderr, "rpfs mkfs: %s: [mgr] store_uri is set, but the store "
			"is lmdb (%s): set [mgr] store = postgresql, or drop store_uri\n",
			conf->path, conf->store ? "[mgr] store" : "the default");
		return ADM_CONFIG;
	}
	if (pg)
		*uri = conf->store_uri;
	return ADM_OK;
}

/* rpfs mkfs's command line. */
struct mkfs_args {
	const char *conf;        /* --conf FILE */
	int all;                 /* --all: the data directories of every iod */
	const char *db;          /* --db DIR */
	struct mgr_iod iods[PROTO_MAX_IODS]; /* --iod HOST:PORT... */
	uint16_t niods;
	const char *data[PROTO_MAX_IODS];    /* --data DIR... */
	int ndata;
	uint32_t unit;           /* --stripe-unit; 0: the default */
	long count;              /* --stripe-count; 0: all iods */
	const char *store_uri;   /* --store-uri URI */
	uint64_t given;
};

/* --iod fills struct mgr_iod as a struct opt_addr (OPT_LIST) */
_Static_assert(offsetof(struct mgr_iod, host) == offsetof(struct opt_addr, host) &&
	       offsetof(struct mgr_iod, port) == offsetof(struct opt_addr, port) &&
	       sizeof(((struct mgr_iod *)0)->host) == sizeof(((struct opt_addr *)0)->host),
	       "struct mgr_iod does not begin as struct opt_addr");

/* rpfs mkfs's options (its help: USAGE_MKFS, then these). */
static const struct opt mkfs_opts[] = {
	{ .name = "conf", .kind = OPT_STRING, .flags = OPT_EMPTY, .arg = "FILE",
	  OPT_AT(struct mkfs_args, conf), .help = "the config file" },
	{ .name = "all", .kind = OPT_SWITCH, OPT_AT(struct mkfs_args, all),
	  .help = "the data directories of every iod, not only this host's" },
	{ .name = "db", .kind = OPT_STRING, .flags = OPT_EMPTY, .arg = "DIR",
	  OPT_AT(struct mkfs_args, db), .help = "the mgr's database" },
	{ .name = "iod", .kind = OPT_ADDR, .flags = OPT_LIST, .arg = "HOST:PORT",
	  OPT_AT_LIST(struct mkfs_args, iods, niods), .many = "at most {hi} iods",
	  .help = "an iod, in order" },
	{ .name = "data", .kind = OPT_STRING, .flags = OPT_LIST | OPT_EMPTY,
	  .arg = "DIR", OPT_AT_LIST(struct mkfs_args, data, ndata),
	  .many = "at most {hi} directories", .help = "an iod's data directory" },
	{ .name = "stripe-unit", .kind = OPT_SIZE, .flags = OPT_POW2,
	  .arg = "SIZE", OPT_AT(struct mkfs_args, unit), .lo = 4096,
	  .hi = 64u << 20, .defdoc = "64K",
	  .what = "a power of two from {lo} to {hi}",
	  .help = "the stripe unit of new files" },
	{ .name = "stripe-count", .kind = OPT_INT, .arg = "N",
	  OPT_AT(struct mkfs_args, count), .lo = 0, .hi = PROTO_MAX_IODS,
	  .defdoc = "0 (all iods)", .what = "{lo}..{hi}",
	  .help = "the iods a new file is striped over" },
	{ .name = "store-uri", .kind = OPT_STRING, .arg = "URI",
	  OPT_AT(struct mkfs_args, store_uri), .what = "a PostgreSQL URI",
	  .help = "create the schema of this PostgreSQL store" },
};

static const struct opt_prog mkfs_prog = {
	.name = "rpfs mkfs",
	.usage = "usage: rpfs " USAGE_MKFS,
	.opts = mkfs_opts,
	.nopts = sizeof(mkfs_opts) / sizeof(mkfs_opts[0]),
};

/*
 * rpfs mkfs --store-uri URI, or --db DIR --iod HOST:PORT...: the schema,
 * or the database with the iod table; with --data, the data directories.
 * @return an ADM_* exit code
 */
static int mkfs_flags(const struct mkfs_args *a)
{
	int rc;

	if (a->store_uri && (a->db || a->niods || a->conf || a->all)) {
		fprintf(stderr, "rpfs mkfs: --store-uri goes without --db, --iod, "
			"--conf and --all\n");
		return ADM_USAGE;
	}
	if (!a->store_uri && (!a->db || !a->niods)) {
		fprintf(stderr, "rpfs mkfs: --db and --iod go together\n");
		return ADM_USAGE;
	}
	if (!a->store_uri && a->count > a->niods) {
		fprintf(stderr, "rpfs mkfs: --stripe-count: more than the %u iods\n",
			a->niods);
		return ADM_USAGE;
	}
	rc = mkfs_data(a->data, a->ndata);
	if (rc)
		return rc;
	if (a->store_uri)
		return mkfs_pg(a->store_uri, "--store-uri", 0);
	return mkfs_db(a->db, a->iods, a->niods, a->unit, (uint16_t)a->count, 0);
}

/*
 * The iod table of conf into iods, and the data directories of its iods
 * on this host (all: of every iod). @return ADM_OK, ADM_FAIL (printed)
 */
static int mkfs_conf_iods(const struct cfg *conf, int all, struct mgr_iod *iods)
{
	int rc;

	for (int i = 0; i < conf->niods; i++) {
		const struct cfg_iod *d = &conf->iods[i];

		snprintf(iods[i].host, sizeof(iods[i].host), "%s", d->host);
		iods[i].port = d->port;
		snprintf(iods[i].domain, sizeof(iods[i].domain), "%s", d->domain);
		if (!d->data || (!all && !host_is_local(d->listen[0] ? d->listen : d->host)))
			continue;
		rc = dmn_mkdir_p(d->data);
		if (rc) {
			fprintf(stderr, "rpfs mkfs: [iod.%d] data %s: %s\n", i, d->data,
				strerror(-rc));
			return ADM_FAIL;
		}
		printf("iod %d data directory %s\n", i, d->data);
	}
	return ADM_OK;
}

/*
 * rpfs mkfs [--conf FILE] [--all]: from the config file, the data
 * directories of the iods here, and the mgr's database with the iod
 * table ([mgr] db) or the PostgreSQL store's schema.
 * @return an ADM_* exit code
 */
static int mkfs_conf(struct mkfs_args *a)
{
	const char *path = a->conf ? a->conf : default_conf();
	const char *store_uri = NULL;
	struct cfg *conf = NULL;
	char msg[512];
	int rc;

	if (cfg_load(&conf, path, msg, sizeof(msg))) {
		fprintf(stderr, "rpfs mkfs: %s\n", msg);
		return ADM_CONFIG;
	}
	rc = mkfs_conf_store(conf, &store_uri);
	if (!rc)
		rc = mkfs_conf_iods(conf, a->all, a->iods);
	if (rc)
		goto out_free_conf;
	if (store_uri) {
		rc = mkfs_pg(store_uri, path, 1);
	} else if (conf->db && conf->niods) {
		rc = mkfs_db(conf->db, a->iods, (uint16_t)conf->niods,
			     conf->stripe_unit, conf->stripe_count > 0 ?
			     (uint16_t)conf->stripe_count : 0, conf->mirror);
	} else if (conf->db) {
		fprintf(stderr, "rpfs mkfs: %s: no [iod.N] sections, database not "
			"created\n", path);
		rc = ADM_CONFIG;
	}
out_free_conf:
	cfg_free(conf);
	return rc;
}

/* rpfs mkfs: see usage(). */
static int cmd_mkfs(int argc, char **argv)
{
	static struct mkfs_args a;
	char err[PROTO_MAX_HOST * 2 + 300];
	int rc;

	memset(&a, 0, sizeof(a));
	opt_defaults(&mkfs_prog, &a);
	rc = opt_parse(&mkfs_prog, argc, argv, &a, &a.given, err, sizeof(err));
	if (rc == OPT_HELP)
		return ADM_OK;
	if (rc) {
		fprintf(stderr, "rpfs mkfs: %s\n", err);
		return ADM_USAGE;
	}
	if (a.store_uri || a.db || a.niods)
		return mkfs_flags(&a);
	return mkfs_conf(&a);
}

/* rpfs stats PATH (client counters) or --server HOST:PORT. */
static int cmd_stats(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--server") || !strncmp(argv[i], "--server=", 9))
			return adm_stats_server(argc, argv);
	return adm_stats_path(argc, argv);
}

/* A subcommand: its name, its function, its option table (NULL: it
 * takes no flag) and its usage lines. */
struct adm_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const struct opt_prog *prog;
	const char *usage;
};

static const struct adm_cmd adm_cmds[] = {
	{ "keygen", cmd_keygen, &keygen_prog, USAGE_KEYGEN },
	{ "mkfs", cmd_mkfs, &mkfs_prog, USAGE_MKFS },
	{ "status", adm_status, &adm_status_prog, USAGE_STATUS },
	{ "getlayout", adm_getlayout, NULL, USAGE_GETLAYOUT },
	{ "setlayout", adm_setlayout, NULL, USAGE_SETLAYOUT },
	{ "stats", cmd_stats, &adm_stats_prog, USAGE_STATS },
	{ "scrub", adm_scrub, &scrub_prog, USAGE_SCRUB },
};

/* Print c's --help: its option table's (usage lines, then each flag;
 * scrub --namespace has its own), else its usage lines. */
static void cmd_help(const struct adm_cmd *c, int argc, char **argv)
{
	const struct opt_prog *p = c->prog;

	if (c->fn == adm_scrub && adm_scrub_is_namespace(argc, argv))
		p = &scrub_ns_prog;
	if (p)
		opt_help(p, stdout);
	else
		printf("usage: rpfs %s", c->usage);
}

/* Whether argv[1..] asks for help (-h or --help before any "--"). */
static int wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return 1;
	return 0;
}

/* rpfs: dispatch argv[1] to its subcommand (or its --help). @return the
 * subcommand's ADM_* exit code */
int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	log_init("rpfs", LOG_WARNING);
	log_set_key_option("--key FILE");
	if (!cmd) {
		usage(stderr);
		return ADM_USAGE;
	}
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		usage(stdout);
		return ADM_OK;
	}
	if (!strcmp(cmd, "--version")) {
		printf("rpfs %s\n", RPFS_VERSION);
		return ADM_OK;
	}
	argc--, argv++;
	for (size_t i = 0; i < sizeof(adm_cmds) / sizeof(adm_cmds[0]); i++) {
		if (strcmp(cmd, adm_cmds[i].name))
			continue;
		if (wants_help(argc, argv)) {
			cmd_help(&adm_cmds[i], argc, argv);
			return ADM_OK;
		}
		return adm_cmds[i].fn(argc, argv);
	}
	fprintf(stderr, "rpfs: unknown command \"%s\"\n", cmd);
	usage(stderr);
	return ADM_USAGE;
}
