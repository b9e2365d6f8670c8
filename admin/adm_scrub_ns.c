/*
 * adm_scrub_ns.c - `rpfs scrub --namespace`: check the namespace's
 * consistency (mgr/repair/mgr_nscheck.c; mgr/repair/README.md "Namespace
 * check") by
 * opening the store itself, read-only, in one snapshot: beside a running
 * mgr or without one. This file: command line, opening the store, output.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cfg.h"
#include "mgr_db.h"
#include "mgr_nscheck.h"
#include "adm.h"

/* Command line of scrub --namespace. */
struct ns_args {
	const char *conf, *db, *uri; /* --conf, --db, --store-uri */
	int json;
};

/* Print the usage of scrub --namespace. */
static void ns_usage(FILE *f)
{
	fprintf(f, "usage: rpfs scrub --namespace [--conf FILE | --db DIR | "
		"--store-uri URI] [--json]\n"
		"Check that the namespace is consistent: entries point to live "
		"inodes,\n"
		"link counts match, no inode leaks, no directory cycle. Opens "
		"the store\n"
		"read-only (beside a running mgr or without one) and reads one "
		"snapshot.\n"
		"Memory: about 48 bytes per inode, plus the largest directory.\n"
		"Exit: 0 consistent, 1 problems found (one line each), 2 bad "
		"arguments,\n"
		"3 the store cannot be opened or read.\n");
}

/* Parse the command line. @return ADM_OK, ADM_USAGE (reported), or -1
 * after --help */
static int ns_parse(int argc, char **argv, struct ns_args *a)
{
	static const struct option opts[] = {
		{ "namespace", no_argument, NULL, 'N' },
		{ "conf", required_argument, NULL, 'C' },
		{ "db", required_argument, NULL, 'D' },
		{ "store-uri", required_argument, NULL, 'U' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, nsrc;

	memset(a, 0, sizeof(*a));
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'N': break;
		case 'C': a->conf = optarg; break;
		case 'D': a->db = optarg; break;
		case 'U': a->uri = optarg; break;
		case 'j': a->json = 1; break;
		case 'h': ns_usage(stdout); return -1;
		default:
			fprintf(stderr, "rpfs scrub: unknown or incomplete option \"%s\" "
				"(with --namespace)\n", argv[optind - 1]);
			ns_usage(stderr);
			return ADM_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rpfs scrub: unexpected argument \"%s\"\n", argv[optind]);
		return ADM_USAGE;
	}
	nsrc = !!a->conf + !!a->db + !!a->uri;
	if (nsrc > 1) {
		fprintf(stderr, "rpfs scrub --namespace: give one of --conf, --db and "
			"--store-uri\n");
		return ADM_USAGE;
	}
	if ((a->db && !a->db[0]) || (a->uri && !a->uri[0])) {
		fprintf(stderr, "rpfs scrub --namespace: --%s: empty\n",
			a->db ? "db" : "store-uri");
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
		return rc < 0 ? ADM_OK : rc;
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
