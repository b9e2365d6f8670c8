/*
 * adm_scrub.c - `rpfs scrub`: online orphan reclamation and replica
 * compare at a bounded rate (mgr/repair/README.md "Scrub").
 *
 * Two passes over a running file system, both paced by --rate:
 *  1. every iod's objects (IO_LIST, in batches), asking the mgr which of
 *     their inodes exist (SCRUB_INOS); objects of inodes that do not exist
 *     and whose mtime is older than --grace go with IO_REMOVE_MANY. The two
 *     iods of a mirror group are walked side by side and the replicas of
 *     mirrored files compared (adm_scrub_mirror.c);
 *  2. the mgr's orphan table (SCRUB_ORPHANS): orphans unlinked before the
 *     mgr's current start and longer ago than --grace lose their objects on
 *     every iod (IO_REMOVE_MANY), then the inode (PURGE_MANY).
 * This file: command line, pacing, the walk of one iod, orphans, report.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net.h"
#include "proto.h"
#include "adm.h"
#include "adm_scrub.h"

#define SCRUB_DEFAULT_RATE 1000.0      /* objects per second */
#define SCRUB_DEFAULT_GRACE 60
#define SCRUB_MAX_GRACE (366L * 86400)

/* The --rate parser (opt.h OPT_CUSTOM): "N" or "N/s" objects per second,
 * "NMB/s" megabytes (10^6) of objects per second. @return 0, -EINVAL */
static int parse_rate(const struct opt *o, const char *name, const char *s,
		      void *args, char *err, size_t errcap)
{
	struct scrub_args *a = args;
	char *end;
	double v = strtod(s, &end);

	if (end == s || !isfinite(v) || !(v > 0) || v > 1e9 ||
	    (*end && strcmp(end, "/s") && strcmp(end, "MB/s"))) {
		snprintf(err, errcap, "%s: expected objects per second (e.g. 500) "
			 "or megabytes per second (e.g. 20MB/s), above 0, got "
			 "\"%s\"", name, s);
		return -EINVAL;
	}
	a->rate_objs = strcmp(end, "MB/s") ? v : 0;
	a->rate_bytes = strcmp(end, "MB/s") ? 0 : v * 1e6;
	return 0;
}

/* rpfs scrub's options (its help: USAGE_SCRUB, then these). */
static const struct opt scrub_opts[] = {
	{ .name = "conf", .kind = OPT_STRING, .flags = OPT_EMPTY, .arg = "FILE",
	  OPT_AT(struct scrub_args, conf), .help = "the config file" },
	{ .name = "key", .kind = OPT_STRING, .flags = OPT_EMPTY, .arg = "FILE",
	  OPT_AT(struct scrub_args, key), .help = "the clients' key" },
	{ .name = "server-key", .kind = OPT_STRING, .flags = OPT_EMPTY,
	  .arg = "FILE", OPT_AT(struct scrub_args, srv_key),
	  .help = "the servers' key" },
	{ .name = "mgr", .kind = OPT_ADDR, .arg = "HOST:PORT",
	  OPT_AT(struct scrub_args, mgr), .help = "the mgr" },
	{ .name = "timeout", .kind = OPT_SECONDS, .flags = OPT_ABOVE, .arg = "S",
	  OPT_AT(struct scrub_args, timeout), .lo = 0, .hi = 3600000,
	  .def = 5000, .what = "seconds above {lo}, at most {hi}",
	  .help = "a request's timeout" },
	{ .name = "rate", .kind = OPT_CUSTOM, .arg = "N|NMB/s",
	  .parse = parse_rate, .defdoc = "1000",
	  .help = "objects (or MB) per second, at most" },
	{ .name = "grace", .kind = OPT_INT, .arg = "SECONDS",
	  OPT_AT(struct scrub_args, grace), .lo = 0, .hi = SCRUB_MAX_GRACE,
	  .def = SCRUB_DEFAULT_GRACE, .what = "seconds {lo}..{hi}",
	  .help = "objects and orphans younger than this are left alone" },
	{ .name = "dry-run", .kind = OPT_SWITCH, OPT_AT(struct scrub_args, dry_run),
	  .help = "report, change nothing" },
};

/* See adm.h. */
const struct opt_prog scrub_prog = {
	.name = "rpfs scrub",
	.usage = "usage: rpfs " USAGE_SCRUB,
	.opts = scrub_opts,
	.nopts = sizeof(scrub_opts) / sizeof(scrub_opts[0]),
};

/* Parse the command line into a. @return ADM_OK, ADM_USAGE (reported),
 * OPT_HELP after --help (the caller exits ADM_OK) */
static int scrub_parse(int argc, char **argv, struct scrub_args *a)
{
	char err[PROTO_MAX_HOST * 2 + 300];
	uint64_t given;
	int rc;

	memset(a, 0, sizeof(*a));
	opt_defaults(&scrub_prog, a);
	a->rate_objs = SCRUB_DEFAULT_RATE;
	rc = opt_parse(&scrub_prog, argc, argv, a, &given, err, sizeof(err));
	if (rc == OPT_HELP)
		return OPT_HELP;
	if (rc) {
		fprintf(stderr, "rpfs scrub: %s\n", err);
		return ADM_USAGE;
	}
	a->have_addr = opt_given(&scrub_prog, given, "mgr");
	return ADM_OK;
}

/* Seconds since t (monotonic). */
static double since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t->tv_sec) +
	       (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

/*
 * Count objs objects and bytes of work and sleep as long as the work done
 * so far is ahead of the rate: the scrub never checks more than rate
 * objects (or bytes) per second on average, so it stays in the background.
 */
void scrub_pace_add(struct scrub_pace *p, double objs, uint64_t bytes)
{
	double due = 0, ahead;

	p->objs += objs;
	p->bytes += (double)bytes;
	if (p->a->rate_objs > 0)
		due = p->objs / p->a->rate_objs;
	if (p->a->rate_bytes > 0 && p->bytes / p->a->rate_bytes > due)
		due = p->bytes / p->a->rate_bytes;
	ahead = due - since(&p->start);
	if (ahead > 0.001) {
		struct timespec ts = { (time_t)ahead,
				       (long)((ahead - (double)(time_t)ahead) * 1e9) };

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
}

/* One exchange with a server: body in req (len bytes), reply into rep.
 * @return 0, -errno of the transport, or the server's status */
static int scrub_call(struct scrub_ctx *x, struct net_conn *c, uint16_t op,
		      size_t len, uint32_t *rep_len)
{
	struct net_call call;
	int rc;

	memset(&call, 0, sizeof(call));
	call.op = op;
	call.body = x->req;
	call.body_len = (uint32_t)len;
	call.rep_buf = x->rep;
	call.rep_cap = sizeof(x->rep);
	rc = net_call_run(c, &call);
	if (rc)
		return rc;
	if (call.status)
		return call.status < 0 ? call.status : -EPROTO;
	*rep_len = call.rep_len;
	return 0;
}

/* SCRUB_INOS for x->inos[0..n): states into x->states. @return 0 or -errno */
static int call_inos(struct scrub_ctx *x, uint32_t n)
{
	struct proto_scrubq q = { .inos = { n, x->inos, NULL } };
	const char *why = "?";
	uint32_t len;
	struct wbuf w;
	int rc;

	wb_init(&w, x->req, sizeof(x->req));
	rc = proto_scrubq_encode(&w, PROTO_OP_SCRUB_INOS, &q);
	if (rc == 0)
		rc = scrub_call(x, x->mgr, PROTO_OP_SCRUB_INOS, w.len, &len);
	if (rc == 0)
		rc = proto_inostate_decode(x->rep, len, &x->states, &why);
	if (rc == 0 && x->states.n != n)
		rc = -EPROTO;
	return rc;
}

/* IO_REMOVE_MANY of x->inos[0..n) on iod i. @return 0 or -errno */
static int call_remove(struct scrub_ctx *x, uint16_t i, uint32_t n)
{
	struct proto_ioreq q = { .inos = { n, x->inos, NULL } };
	uint32_t len;
	struct wbuf w;
	int rc;

	wb_init(&w, x->req, sizeof(x->req));
	rc = proto_ioreq_encode(&w, PROTO_OP_IO_REMOVE_MANY, &q);
	return rc ? rc : scrub_call(x, x->iod[i], PROTO_OP_IO_REMOVE_MANY, w.len,
				    &len);
}

/* Report a failed operation (NULL: connecting) at a server, "mgr
 * HOST:PORT" or "iod N (HOST:PORT)", and remember the failure. */
void scrub_fail(struct scrub_ctx *x, const char *server, const char *op,
		int rc)
{
	fprintf(stderr, "rpfs scrub: %s%s%s: %s%s\n", server, op ? ": " : "",
		op ? op : "", strerror(-rc),
		rc == -EPERM ? " (scrub needs the servers' key: --server-key, "
			       "or server_key in the config file)" : "");
	x->report.failed = 1;
}

/* Check w's IO_LIST batch against the mgr (the states stay in w->st) and
 * remove the orphans older than the grace. Mirrored objects of a paired
 * walk are paced by their compare instead of their size.
 * @return 0 or -errno (reported) */
static int scrub_batch(struct scrub_ctx *x, struct scrub_walk *w)
{
	const struct proto_iolist *l = &w->list;
	uint64_t bytes = 0;
	uint32_t n = 0;
	int rc;

	for (uint32_t k = 0; k < l->n; k++)
		x->inos[k] = l->objs[k].ino;
	rc = call_inos(x, l->n);
	if (rc) {
		scrub_fail(x, x->mgr_addr, "SCRUB_INOS", rc);
		return rc;
	}
	memcpy(w->st, x->states.st, l->n);
	for (uint32_t k = 0; k < l->n; k++) {
		const struct proto_obj *o = &l->objs[k];
		int later = w->paired && w->st[k] == PROTO_INO_MIRRORED;

		scrub_pace_add(&x->pace, 1, later ? 0 : o->size);
		x->report.checked++;
		if (w->st[k] != PROTO_INO_NONE)
			continue;
		if (o->mtime > (int64_t)x->now - x->a.grace) {
			x->report.iod_young++;
			continue;
		}
		x->inos[n++] = o->ino;
		bytes += o->blocks * 512;
	}
	rc = n && !x->a.dry_run ? call_remove(x, w->iod, n) : 0;
	if (rc) {
		scrub_fail(x, x->iod_addr[w->iod], "IO_REMOVE_MANY", rc);
		return rc;
	}
	x->report.iod_found += n;
	x->report.iod_bytes += bytes;
	return 0;
}

/* See adm_scrub.h. */
int scrub_key_cmp(uint64_t a, uint64_t b)
{
	if ((a & 0xffff) != (b & 0xffff))
		return (a & 0xffff) < (b & 0xffff) ? -1 : 1;
	return a < b ? -1 : a > b;
}

/* Whether w->list continues the walk in IO_LIST order (strictly after
 * the last inode listed): the merge of a group's two walks relies on it. */
static int walk_in_order(struct scrub_walk *w)
{
	for (uint32_t k = 0; k < w->list.n; k++) {
		if (w->last && scrub_key_cmp(w->last, w->list.objs[k].ino) >= 0)
			return 0;
		w->last = w->list.objs[k].ino;
	}
	return 1;
}

/* Fetch w's next IO_LIST batch (skipping empty ones) and scrub its
 * orphans. @return 0 (w->list.n > 0, or the end) or -errno (reported) */
static int walk_fetch(struct scrub_ctx *x, struct scrub_walk *w)
{
	struct proto_ioreq q = { .max = SCRUB_BATCH };
	const char *why = "?";
	uint32_t len;
	struct wbuf wb;
	int rc;

	do {
		q.cursor = w->cur;
		wb_init(&wb, x->req, sizeof(x->req));
		rc = proto_ioreq_encode(&wb, PROTO_OP_IO_LIST, &q);
		if (rc == 0)
			rc = scrub_call(x, x->iod[w->iod], PROTO_OP_IO_LIST, wb.len,
					&len);
		if (rc == 0)
			rc = proto_iolist_decode(x->rep, len, &w->list, &why);
		if (rc == 0 && (w->list.n > q.max || !walk_in_order(w)))
			rc = -EPROTO; /* more than asked for, or out of order */
		if (rc) {
			w->list.n = 0;
			scrub_fail(x, x->iod_addr[w->iod], "IO_LIST", rc);
			return rc;
		}
		w->cur = w->list.next;
		w->pos = 0;
	} while (!w->list.n && !w->list.eof);
	return w->list.n ? scrub_batch(x, w) : 0;
}

/* See adm_scrub.h. */
void scrub_walk_start(struct scrub_ctx *x, struct scrub_walk *w, uint16_t iod,
		      int paired)
{
	w->iod = iod;
	w->paired = paired;
	w->done = w->failed = !x->iod[iod];
	w->pos = 0;
	w->last = 0;
	w->cur = (struct proto_cursor){ 0, 0 };
	w->list.n = 0;
	w->list.eof = 0;
}

/* See adm_scrub.h. */
const struct proto_obj *scrub_walk_head(struct scrub_ctx *x,
					struct scrub_walk *w)
{
	while (!w->done && w->pos >= w->list.n) {
		if (w->list.eof)
			w->done = 1;
		else if (walk_fetch(x, w))
			w->done = w->failed = 1;
	}
	return w->done ? NULL : &w->list.objs[w->pos];
}

/* Pass 1 over iod i alone (it is in no mirror group). */
static void scrub_iod(struct scrub_ctx *x, uint16_t i)
{
	struct scrub_walk *w = &x->walk[0];

	scrub_walk_start(x, w, i, 0);
	while (scrub_walk_head(x, w))
		w->pos++;
}

/* Pass 1: each mirror group's two iods side by side, then the iods in no
 * group alone. Failures are reported; the other iods go on. */
static void scrub_iods(struct scrub_ctx *x)
{
	uint8_t grouped[PROTO_MAX_IODS] = { 0 };

	for (uint16_t g = 0; g < x->mt.ngroups; g++) {
		grouped[x->mt.groups[g].iod[0]] = 1;
		grouped[x->mt.groups[g].iod[1]] = 1;
		scrub_mirror_group(x, g);
	}
	for (uint16_t i = 0; i < x->niods; i++)
		if (!grouped[i])
			scrub_iod(x, i);
}

/* PURGE_MANY of x->inos[0..n) at the mgr; -ENOENT / -EBUSY mean some were
 * not orphans any more (a client purged or linked them meanwhile). */
static int call_purge(struct scrub_ctx *x, uint32_t n)
{
	struct proto_mreq m;
	uint32_t len;
	struct wbuf w;
	int rc;

	memset(&m, 0, sizeof(m));
	m.inos = (struct proto_inos){ n, x->inos, NULL };
	wb_init(&w, x->req, sizeof(x->req));
	rc = proto_mreq_encode(&w, PROTO_OP_PURGE_MANY, &m);
	if (rc == 0)
		rc = scrub_call(x, x->mgr, PROTO_OP_PURGE_MANY, w.len, &len);
	return rc == -ENOENT || rc == -EBUSY ? 0 : rc;
}

/* Reclaim the n orphans in x->inos: objects on every iod, then the inodes;
 * count those really gone (asked again). @return 0 or -errno (reported) */
static int reclaim_orphans(struct scrub_ctx *x, uint32_t n,
			   const uint64_t *bytes)
{
	int rc;

	for (uint16_t i = 0; i < x->niods; i++) {
		rc = call_remove(x, i, n);
		if (rc) {
			scrub_fail(x, x->iod_addr[i], "IO_REMOVE_MANY", rc);
			return rc;
		}
	}
	rc = call_purge(x, n);
	if (rc == 0)
		rc = call_inos(x, n);
	if (rc) {
		scrub_fail(x, x->mgr_addr, "PURGE_MANY", rc);
		return rc;
	}
	for (uint32_t k = 0; k < n; k++) {
		if (x->states.st[k] != PROTO_INO_NONE)
			continue;
		x->report.mgr_found++;
		x->report.mgr_bytes += bytes[k];
	}
	return 0;
}

/* Pass 2: the mgr's orphan table. @return 0 or -errno (reported) */
static int scrub_orphans(struct scrub_ctx *x)
{
	static uint64_t bytes[SCRUB_BATCH];
	struct proto_scrubq q = { .cookie = 0, .max = SCRUB_BATCH };
	const struct proto_orphans *o = &x->orphans;
	const char *why = "?";
	uint32_t len, n;
	struct wbuf w;
	int rc;

	do {
		wb_init(&w, x->req, sizeof(x->req));
		rc = proto_scrubq_encode(&w, PROTO_OP_SCRUB_ORPHANS, &q);
		if (rc == 0)
			rc = scrub_call(x, x->mgr, PROTO_OP_SCRUB_ORPHANS, w.len, &len);
		if (rc == 0)
			rc = proto_orphans_decode(x->rep, len, &x->orphans, &why);
		if (rc) {
			scrub_fail(x, x->mgr_addr, "SCRUB_ORPHANS", rc);
			return rc;
		}
		n = 0;
		for (uint32_t k = 0; k < o->n; k++) {
			scrub_pace_add(&x->pace, 1, o->o[k].size);
			x->report.orphans_checked++;
			q.cookie = o->o[k].ino;
			if (o->o[k].ctime_ns >= o->boot_ns ||
			    o->o[k].ctime_ns / 1000000000 > (int64_t)x->now - x->a.grace) {
				x->report.mgr_young++;
				continue;
			}
			bytes[n] = o->o[k].blocks * 512;
			x->inos[n++] = o->o[k].ino;
		}
		if (n && x->a.dry_run) {
			x->report.mgr_found += n;
			for (uint32_t k = 0; k < n; k++)
				x->report.mgr_bytes += bytes[k];
		} else if (n) {
			rc = reclaim_orphans(x, n, bytes);
			if (rc)
				return rc;
		}
	} while (!o->eof);
	return 0;
}

/* Connect to the mgr and learn the iod table. @return ADM_* (reported) */
static int scrub_connect(struct scrub_ctx *x, struct net_opts *no)
{
	char addr[ADDR_STRLEN];
	int rc;

	no->timeout_ms = (int)(x->a.timeout * 1000);
	x->no = *no;
	rc = net_client_new(&x->cl, no);
	if (rc) {
		fprintf(stderr, "rpfs scrub: %s\n", strerror(-rc));
		return ADM_FAIL;
	}
	snprintf(x->mgr_addr, sizeof(x->mgr_addr), "mgr %s",
		 addr_format(addr, sizeof(addr), x->a.mgr.host, x->a.mgr.port));
	rc = net_conn_new(x->cl, x->a.mgr.host, x->a.mgr.port, &x->mgr);
	if (rc == 0)
		rc = adm_call_mount(x->mgr, x->req, x->rep, &x->mt);
	if (rc) {
		scrub_fail(x, x->mgr_addr, NULL, rc);
		return ADM_FAIL;
	}
	x->niods = x->mt.niods;
	for (uint16_t i = 0; i < x->niods; i++) {
		char host[PROTO_MAX_HOST + 1];

		snprintf(host, sizeof(host), "%.*s", (int)x->mt.iods[i].host.len,
			 x->mt.iods[i].host.p);
		snprintf(x->iod_addr[i], sizeof(x->iod_addr[i]), "iod %u (%s)", i,
			 addr_format(addr, sizeof(addr), host, x->mt.iods[i].port));
		rc = net_conn_new(x->cl, host, x->mt.iods[i].port, &x->iod[i]);
		if (rc) { /* reported; the other iods are still scrubbed */
			x->iod[i] = NULL;
			scrub_fail(x, x->iod_addr[i], NULL, rc);
		}
	}
	return ADM_OK;
}

/* Print the report (stdout). */
static void scrub_print(const struct scrub_ctx *x)
{
	const struct scrub_report *r = &x->report;

	printf("objects checked: %llu on %u iods, %llu orphan inodes at the mgr\n",
	       (unsigned long long)r->checked, x->niods,
	       (unsigned long long)r->orphans_checked);
	printf("%s: %llu iod objects, %llu mgr inodes\n",
	       x->a.dry_run ? "orphans found (dry run, nothing removed)"
			    : "orphans reclaimed",
	       (unsigned long long)r->iod_found, (unsigned long long)r->mgr_found);
	printf("%s: %llu\n", x->a.dry_run ? "bytes that would be freed" :
	       "bytes freed", (unsigned long long)(r->iod_bytes + r->mgr_bytes));
	printf("left for a later scrub (within the grace of %ld s, or unlinked "
	       "since the mgr started): %llu iod objects, %llu mgr inodes\n",
	       x->a.grace, (unsigned long long)r->iod_young,
	       (unsigned long long)r->mgr_young);
	printf("replicas compared: %llu (%llu bytes)\n",
	       (unsigned long long)r->compared,
	       (unsigned long long)r->compared_bytes);
	printf("mismatches found: %llu, repaired: %llu%s\n",
	       (unsigned long long)r->mismatches, (unsigned long long)r->repaired,
	       x->a.dry_run ? " (dry run)" : "");
	printf("replicas left to resync: %llu\n",
	       (unsigned long long)r->resync_left);
}

/* See adm.h. */
int adm_scrub_is_namespace(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--namespace"))
			return 1;
	return 0;
}

/* See rpfs.h. */
int adm_scrub(int argc, char **argv)
{
	static struct scrub_ctx x; /* large: keep off the stack */
	struct cfg *conf = NULL;
	struct net_opts no;
	int rc;

	if (adm_scrub_is_namespace(argc, argv))
		return adm_scrub_namespace(argc, argv);
	memset(&x, 0, sizeof(x));
	rc = scrub_parse(argc, argv, &x.a);
	if (rc)
		return rc == OPT_HELP ? ADM_OK : rc;
	if (!x.a.have_addr && !x.a.conf)
		x.a.conf = getenv("RPFS_CONF") && *getenv("RPFS_CONF") ?
			   getenv("RPFS_CONF") : CFG_DEFAULT_PATH;
	rc = adm_load(x.a.conf, x.a.key, x.a.srv_key, 1, &conf, &no);
	if (rc)
		return rc;
	if (!x.a.have_addr) {
		if (!conf->mgr_host[0]) {
			fprintf(stderr, "rpfs scrub: %s: no [cluster] mgr (or use --mgr "
				"HOST:PORT)\n", conf->path);
			cfg_free(conf);
			return ADM_CONFIG;
		}
		snprintf(x.a.mgr.host, sizeof(x.a.mgr.host), "%s", conf->mgr_host);
		x.a.mgr.port = conf->mgr_port;
	}
	x.now = time(NULL);
	x.pace.a = &x.a;
	clock_gettime(CLOCK_MONOTONIC, &x.pace.start);
	rc = scrub_connect(&x, &no);
	if (rc == ADM_OK)
		scrub_iods(&x); /* failures are reported; go on */
	/* orphans lose their objects on every iod: only with all of them up */
	if (rc == ADM_OK && !x.report.failed)
		scrub_orphans(&x);
	if (rc == ADM_OK)
		scrub_print(&x);
	scrub_mirror_close(&x);
	if (x.cl)
		net_client_free(x.cl);
	cfg_free(conf);
	if (rc == ADM_OK && x.report.failed) {
		fprintf(stderr, "rpfs scrub: incomplete: a server failed or is down\n");
		rc = ADM_FAIL;
	}
	return rc;
}
