/*
 * adm_scrub_ns.c - `rpfs scrub --namespace`: check the namespace's
 * consistency (mgr/repair/mgr_nscheck.c; mgr/repair/README.md "Namespace
 * check") by
 * opening the store itself, read-only, in one snapshot: beside a running
 * mgr or without one. This file: command line, opening the store, output.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cfg.h"
#include "mgr_db.h"
#include "mgr_nscheck.h"
#include "opt.h"
#include "adm.h"

/* Command line of scrub --namespace. */
struct ns_args {
	const char *conf, *db, *uri; /* --conf, --db, --store-uri */
	int json;
	int ns;                      /* --namespace (what brought us here) */
};

/* rpfs scrub --namespace's options. */
static const struct opt ns_opts[] = {
	{ .name = "namespace", .kind = OPT_SWITCH, OPT_AT(struct ns_args, ns),
	  .help = "check the namespace, not the objects" },
	{ .name = "conf", .kind = OPT_STRING, .flags = OPT_EMPTY, .arg = "FILE",
	  OPT_AT(struct ns_args, conf), .defdoc = "$RPFS_CONF or "
	  CFG_DEFAULT_PATH, .help = "the config file: its [mgr] store" },
	{ .name = "db", .kind = OPT_STRING, .arg = "DIR",
	  OPT_AT(struct ns_args, db), .what = "a directory",
	  .help = "the mgr's LMDB database, not the config file's" },
	{ .name = "store-uri", .kind = OPT_STRING, .arg = "URI",
	  OPT_AT(struct ns_args, uri), .what = "a PostgreSQL URI",
	  .help = "the PostgreSQL store, not the config file's" },
	{ .name = "json", .kind = OPT_SWITCH, OPT_AT(struct ns_args, json),
	  .help = "the problems and the counts as one JSON object" },
};

/* See adm.h. */
const struct opt_prog scrub_ns_prog = {
	.name = "rpfs scrub --namespace",
	.usage = "usage: rpfs " USAGE_SCRUB_NS,
	.intro = "Check that the namespace is consistent: entries point to live "
		"inodes,\n"
		"link counts match, no inode leaks, no directory cycle. Opens "
		"the store\n"
		"read-only (beside a running mgr or without one) and reads one "
		"snapshot.\n"
		"Memory: about 48 bytes per inode, plus the largest directory.\n"
		"Exit: 0 consistent, 1 problems found (one line each), 2 bad "
		"arguments,\n"
		"3 the store cannot be opened or read.\n",
	.opts = ns_opts,
	.nopts = sizeof(ns_opts) / sizeof(ns_opts[0]),
};

/* Parse the command line. @return ADM_OK, ADM_USAGE (reported), OPT_HELP
 * after --help */
static int ns_parse(int argc, char **argv, struct ns_args *a)
{
	char err[512];
	uint64_t given;
	int rc;

	memset(a, 0, sizeof(*a));
	opt_defaults(&scrub_ns_prog, a);
	rc = opt_parse(&scrub_ns_prog, argc, argv, a, &given, err, sizeof(err));
	if (rc == OPT_HELP)
		return OPT_HELP;
	if (rc) {
		fprintf(stderr, "rpfs scrub --namespace: %s\n", err);
		return ADM_USAGE;
	}
	if (!!a->conf + !!a->db + !!a->uri > 1) {
		fprintf(stderr, "rpfs scrub --namespace: give one of --conf, --db and "
			"--store-uri\n");
		return ADM_USAGE;
	}
	return ADM_OK;
}

/*
 * The store of a config file's [mgr] section into kc (the mgr's rules:
 * store = postgresql needs store_uri, store_uri needs postgresql, lmdb
 * needs db); strings point into *conf, which the caller frees.
 * @return ADM_OK, ADM_CONFIG (reported)
 */
static int ns_conf_store(const char *path, struct cfg **conf,
			 struct mgr_kv_conf *kc)
{
	char msg[512];
	struct cfg *f;

	if (cfg_load(conf, path, msg, sizeof(msg))) {
		fprintf(stderr, "rpfs scrub: %s\n", msg);
		return ADM_CONFIG;
	}
	f = *conf;
	kc->kind = MGR_KV_LMDB;
	if (f->store && mgr_kv_kind_parse(f->store, &kc->kind)) {
		fprintf(stderr, "rpfs scrub: %s: [mgr] store: expected lmdb or "
			"postgresql, got \"%s\"\n", path, f->store);
		return ADM_CONFIG;
	}
	if (kc->kind == MGR_KV_POSTGRESQL && !f->store_uri) {
		fprintf(stderr, "rpfs scrub: %s: [mgr] store = postgresql needs "
			"[mgr] store_uri\n", path);
		return ADM_CONFIG;
	}
	if (kc->kind == MGR_KV_LMDB && f->store_uri) {
		fprintf(stderr, "rpfs scrub: %s: [mgr] store_uri is set, but the "
			"store is lmdb\n", path);
		return ADM_CONFIG;
	}
	if (kc->kind == MGR_KV_LMDB && !f->db) {
		fprintf(stderr, "rpfs scrub: %s: no [mgr] db (or use --db DIR)\n",
			path);
		return ADM_CONFIG;
	}
	kc->dir = f->db;
	kc->uri = f->store_uri;
	return ADM_OK;
}

/* Open the store kc names read-only; an LMDB directory must hold a
 * database (nothing is created). @return ADM_OK, ADM_CONFIG (reported) */
static int ns_open(const struct mgr_kv_conf *kc, struct mgr_db **db)
{
	char msg[1024], path[4096];
	struct stat st;
	int rc;

	if (kc->kind == MGR_KV_LMDB) {
		snprintf(path, sizeof(path), "%s/data.mdb", kc->dir);
		if (stat(path, &st)) {
			fprintf(stderr, "rpfs scrub: db %s: no LMDB database there "
				"(%s: %s)\n", kc->dir, path, strerror(errno));
			return ADM_CONFIG;
		}
	}
	rc = mgr_db_open_rdonly(db, kc, msg, sizeof(msg));
	if (rc) {
		fprintf(stderr, "rpfs scrub: %s\n", msg[0] ? msg : strerror(-rc));
		return ADM_CONFIG;
	}
	return ADM_OK;
}

/* Write s as a JSON string: quotes, backslashes and bytes outside
 * printable ASCII escaped as \u00XX. */
static void ns_json_str(const char *s, size_t len)
{
	putchar('"');
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* Output state: how many problems printed (JSON: commas). */
struct ns_out {
	int json;
	uint64_t n;
};

/* Print one problem: a line, or a JSON object of the "problems" array. */
static void ns_print(void *arg, const struct mgr_nscheck_problem *p)
{
	struct ns_out *o = arg;
	char line[2048];
	int len = mgr_nscheck_format(p, line, sizeof(line));

	if (len < 0)
		line[0] = '\0';
	if (!o->json) {
		printf("%s\n", line);
		o->n++;
		return;
	}
	printf("%s\n    {\"kind\": \"%s\", \"ino\": %llu, \"parent\": %llu, "
	       "\"seq\": %llu, \"expected\": %llu, \"found\": %llu, \"name\": ",
	       o->n ? "," : "", mgr_nscheck_kind_name(p->kind),
	       (unsigned long long)p->ino, (unsigned long long)p->parent,
	       (unsigned long long)p->seq, (unsigned long long)p->expected,
	       (unsigned long long)p->found);
	if (p->name)
		ns_json_str(p->name, p->name_len);
	else
		fputs("null", stdout);
	fputs(", \"text\": ", stdout);
	ns_json_str(line, strlen(line));
	putchar('}');
	o->n++;
}

/* The store the command line names into kc: --db, --store-uri, else the
 * config file (--conf, $RPFS_CONF or the default path; *conf holds its
 * strings). @return ADM_OK, ADM_CONFIG (reported) */
static int ns_store(struct ns_args *a, struct cfg **conf,
		    struct mgr_kv_conf *kc)
{
	if (a->db) {
		kc->dir = a->db;
		return ADM_OK;
	}
	if (a->uri) {
		kc->kind = MGR_KV_POSTGRESQL;
		kc->uri = a->uri;
		return ADM_OK;
	}
	if (!a->conf)
		a->conf = getenv("RPFS_CONF") && *getenv("RPFS_CONF") ?
			  getenv("RPFS_CONF") : CFG_DEFAULT_PATH;
	return ns_conf_store(a->conf, conf, kc);
}

/* Print the summary: a line, or the end of the JSON object. */
static void ns_summary(const struct ns_out *o,
		       const struct mgr_nscheck_result *res)
{
	if (o->json)
		printf("%s],\n  \"inodes\": %llu, \"entries\": %llu, "
		       "\"count\": %llu}\n", o->n ? "\n  " : "",
		       (unsigned long long)res->inodes,
		       (unsigned long long)res->entries,
		       (unsigned long long)res->problems);
	else
		printf("namespace: %llu inodes, %llu entries, %llu problems\n",
		       (unsigned long long)res->inodes,
		       (unsigned long long)res->entries,
		       (unsigned long long)res->problems);
}

/* See rpfs.h. */
int adm_scrub_namespace(int argc, char **argv)
{
	struct mgr_kv_conf kc = { .kind = MGR_KV_LMDB };
	struct mgr_nscheck_result res;
	struct ns_out out = { 0 };
	struct cfg *conf = NULL;
	struct mgr_db *db = NULL;
	struct ns_args a;
	int rc;

	rc = ns_parse(argc, argv, &a);
	if (rc)
		return rc == OPT_HELP ? ADM_OK : rc;
	rc = ns_store(&a, &conf, &kc);
	if (rc)
		goto out_free_conf;
	rc = ns_open(&kc, &db);
	if (rc)
		goto out_free_conf;
	out.json = a.json;
	if (a.json)
		fputs("{\"problems\": [", stdout);
	rc = mgr_nscheck_run(db, ns_print, &out, &res);
	if (rc) {
		fflush(stdout);
		fprintf(stderr, "rpfs scrub: reading the %s store failed: %s; "
			"nothing concluded\n", mgr_kv_kind_name(kc.kind),
			strerror(-rc));
		rc = ADM_CONFIG;
		goto out_close_db;
	}
	ns_summary(&out, &res);
	rc = res.problems ? ADM_FAIL : ADM_OK;
out_close_db:
	mgr_db_close(db);
out_free_conf:
	cfg_free(conf);
	return rc;
}
