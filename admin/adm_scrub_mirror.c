/*
 * adm_scrub_mirror.c - the mirror part of `rpfs scrub` pass 1
 * (mgr/repair/README.md "Scrub"): a mirror group's two iods are listed side
 * by side, merged in IO_LIST order, so each (group, inode) pair is met
 * exactly once with memory for two batches only, whether one iod or both
 * hold the object. The replicas of a MIRRORED inode are compared by IO_CSUM
 * (both iods at once, 4 MiB ranges, sizes too); a range that differs is
 * checked again after a short pause (a client write may be between the two
 * replicas), and a difference that stays is repaired by recording the
 * group's second iod's replica stale at the mgr (STALE_MARK): the mgr's
 * resync copies the first iod's over it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "adm_scrub.h"

#define MIRROR_RECHECK_NS 200000000L  /* pause before a range is re-checked */
#define MIRROR_MARK_TIMEOUT_MS 20000  /* STALE_MARK waits for the iod's fence
				       * (up to a lease, 8 s) */

/* Outcome of a compare. */
enum mirror_cmp {
	MIRROR_EQUAL = 0,
	MIRROR_DIFFER = 1,
	MIRROR_GONE = 2,    /* no replica left: the file was removed */
};

/* One replica's IO_CSUM answer. */
struct mirror_sum {
	int missing;        /* no object: counts as an empty one */
	uint32_t crc;
	uint64_t size;
};

/* A compare in progress: the group's iods (first, second) and the last
 * range checked, which is where they differ after MIRROR_DIFFER. */
struct mirror_pair {
	uint16_t g, iod[2];
	uint64_t ino, off, len;
	struct mirror_sum r[2];
	int down;           /* after a failure: index of the iod that is
			     * unreachable (its walk stops), or -1 */
};

/* Decode one IO_CSUM reply; -ENOENT (no object) is an answer too.
 * @return 0, or the iod's status / -EBADMSG */
static int sum_decode(const struct net_call *c, struct mirror_sum *s)
{
	struct proto_csum cs;
	const char *why = "?";
	int rc;

	memset(s, 0, sizeof(*s));
	if (c->status == -ENOENT) {
		s->missing = 1;
		return 0;
	}
	if (c->status)
		return c->status < 0 && c->status >= -4095 ? c->status : -EPROTO;
	rc = proto_csum_decode(c->rep_buf, c->rep_len, &cs, &why);
	if (rc)
		return rc;
	s->crc = cs.crc;
	s->size = cs.size;
	return 0;
}

/* IO_CSUM of p's range on both iods at once (submitted together, so the
 * two answers are close in time). On failure the iod is reported, and
 * p->down names it when it is unreachable. @return 0 or -errno */
static int csum_both(struct scrub_ctx *x, struct mirror_pair *p)
{
	struct proto_ioreq q = { .ino = p->ino, .off = p->off, .len = p->len };
	uint8_t body[64], rep[2][64];
	struct net_call call[2];
	int sent[2] = { 0, 0 }, rc = 0, bad = 0, e;
	struct wbuf w;

	wb_init(&w, body, sizeof(body));
	rc = proto_ioreq_encode(&w, PROTO_OP_IO_CSUM, &q);
	for (int k = 0; rc == 0 && k < 2; k++) {
		memset(&call[k], 0, sizeof(call[k]));
		call[k].op = PROTO_OP_IO_CSUM;
		call[k].body = body;
		call[k].body_len = (uint32_t)w.len;
		call[k].rep_buf = rep[k];
		call[k].rep_cap = sizeof(rep[k]);
		e = net_call_submit(x->iod[p->iod[k]], &call[k]);
		sent[k] = e == 0;
		if (e)
			p->down = k;
		if (e && !rc) {
			rc = e;
			bad = k;
		}
	}
	for (int k = 0; k < 2; k++) { /* wait for every call sent */
		if (!sent[k])
			continue;
		e = net_call_wait(&call[k]);
		if (e == 0)
			e = sum_decode(&call[k], &p->r[k]);
		else
			p->down = k;
		if (e && !rc) {
			rc = e;
			bad = k;
		}
	}
	if (rc)
		scrub_fail(x, x->iod_addr[p->iod[bad]], "IO_CSUM", rc);
	return rc;
}

/* Whether the two answers agree: same size and checksum; a missing object
 * agrees only with a missing or an empty one. */
static int sums_equal(const struct mirror_sum r[2])
{
	if (r[0].missing || r[1].missing)
		return r[0].size == r[1].size;
	return r[0].crc == r[1].crc && r[0].size == r[1].size;
}

/* Check p's range on both replicas, paced (both replicas' bytes count),
 * and once more after MIRROR_RECHECK_NS when they differ.
 * @return enum mirror_cmp, or -errno (reported) */
static int range_check(struct scrub_ctx *x, struct mirror_pair *p)
{
	struct timespec ts = { 0, MIRROR_RECHECK_NS };
	int rc;

	for (int pass = 0;; pass++) {
		scrub_pace_add(&x->pace, 0, 2 * p->len);
		rc = csum_both(x, p);
		if (rc)
			return rc;
		x->report.compared_bytes += 2 * p->len;
		if (p->r[0].missing && p->r[1].missing)
			return MIRROR_GONE;
		if (sums_equal(p->r))
			return MIRROR_EQUAL;
		if (pass == 1)
			return MIRROR_DIFFER;
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		ts = (struct timespec){ 0, MIRROR_RECHECK_NS };
	}
}

/* Compare p's replicas range by range, from offset 0 up to the larger
 * object size seen (at least one range: it tells the sizes; size is what
 * the listing said). Cost: reads the object on both iods, in ranges of
 * PROTO_MAX_CSUM_LEN. @return enum mirror_cmp (p holds the range that
 * differs), or -errno (reported) */
static int mirror_compare(struct scrub_ctx *x, struct mirror_pair *p,
			  uint64_t size)
{
	uint64_t end = size ? size : 1;
	int rc;

	for (p->off = 0; p->off < end; p->off += p->len) {
		p->len = end - p->off < PROTO_MAX_CSUM_LEN ? end - p->off
							  : PROTO_MAX_CSUM_LEN;
		rc = range_check(x, p);
		if (rc != MIRROR_EQUAL)
			return rc;
		for (int k = 0; k < 2; k++)
			if (p->r[k].size > end)
				end = p->r[k].size; /* grown since the listing */
	}
	return MIRROR_EQUAL;
}

/* Open the STALE_MARK connection to the mgr, with a timeout of at least
 * MIRROR_MARK_TIMEOUT_MS: the mgr answers only once the iod is fenced.
 * @return 0 or -errno */
static int mark_connect(struct scrub_ctx *x)
{
	struct net_opts no = x->no;
	int rc;

	if (x->mark_mgr)
		return 0;
	if (no.timeout_ms < MIRROR_MARK_TIMEOUT_MS)
		no.timeout_ms = MIRROR_MARK_TIMEOUT_MS;
	rc = net_client_new(&x->mark_cl, &no);
	if (rc)
		return rc;
	rc = net_conn_new(x->mark_cl, x->a.mgr.host, x->a.mgr.port, &x->mark_mgr);
	if (rc) {
		net_client_free(x->mark_cl);
		x->mark_cl = NULL;
	}
	return rc;
}

/* Record iod's replica of ino stale at the mgr (STALE_MARK; the reply
 * comes after the commit and the iod's fence). @return 0 or -errno */
static int mirror_mark(struct scrub_ctx *x, uint64_t ino, uint16_t iod)
{
	struct proto_stale s = { ino, iod };
	struct net_call call;
	struct wbuf w;
	int rc = mark_connect(x);

	if (rc)
		return rc;
	wb_init(&w, x->req, sizeof(x->req));
	rc = proto_stale_encode(&w, &s);
	if (rc)
		return rc;
	memset(&call, 0, sizeof(call));
	call.op = PROTO_OP_STALE_MARK;
	call.body = x->req;
	call.body_len = (uint32_t)w.len;
	call.rep_buf = x->rep;
	call.rep_cap = sizeof(x->rep);
	rc = net_call_run(x->mark_mgr, &call);
	if (rc == 0 && call.status)
		rc = call.status < 0 && call.status >= -4095 ? call.status : -EPROTO;
	return rc;
}

/* Describe how p's replicas differ into buf. */
static void mirror_describe(const struct mirror_pair *p, char *buf, size_t cap)
{
	const struct mirror_sum *r = p->r;

	if (r[0].missing || r[1].missing)
		snprintf(buf, cap, "no object on iod %u, %llu bytes on iod %u",
			 p->iod[r[0].missing ? 0 : 1],
			 (unsigned long long)r[r[0].missing ? 1 : 0].size,
			 p->iod[r[0].missing ? 1 : 0]);
	else if (r[0].size != r[1].size)
		snprintf(buf, cap, "object sizes differ (%llu bytes on iod %u, %llu "
			 "on iod %u)", (unsigned long long)r[0].size, p->iod[0],
			 (unsigned long long)r[1].size, p->iod[1]);
	else
		snprintf(buf, cap, "data differs in local bytes %llu..%llu",
			 (unsigned long long)p->off,
			 (unsigned long long)(p->off + p->len));
}

/* A mismatch found: report it (stdout) and, unless --dry-run, record the
 * second iod's replica stale. A file removed meanwhile (ENOENT) needs no
 * repair; any other failure is reported and fails the scrub. */
static void mirror_repair(struct scrub_ctx *x, const struct mirror_pair *p)
{
	char what[160], done[128];
	int rc = 0;

	x->report.mismatches++;
	mirror_describe(p, what, sizeof(what));
	if (!x->a.dry_run)
		rc = mirror_mark(x, p->ino, p->iod[1]);
	if (x->a.dry_run)
		snprintf(done, sizeof(done), "not repaired (dry run)");
	else if (rc == 0)
		snprintf(done, sizeof(done), "iod %u's replica recorded stale (the "
			 "resync copies iod %u's over it)", p->iod[1], p->iod[0]);
	else if (rc == -ENOENT)
		snprintf(done, sizeof(done), "the file is gone, nothing to repair");
	else
		snprintf(done, sizeof(done), "not repaired (STALE_MARK failed)");
	printf("mismatch: inode %llu, group %u (iod %u, iod %u): %s; %s\n",
	       (unsigned long long)p->ino, p->g, p->iod[0], p->iod[1], what, done);
	if (!x->a.dry_run && rc == 0)
		x->report.repaired++;
	if (rc && rc != -ENOENT)
		scrub_fail(x, x->mgr_addr, "STALE_MARK", rc);
}

/* The mgr's state of a (group, inode) pair met in the merge: the one
 * listing's, or when both iods listed it, MIRROR_STALE if either answer
 * says so, MIRRORED only if both do, else LIVE (not compared). */
static uint8_t pair_state(const uint8_t st[2], const int here[2])
{
	if (!here[0] || !here[1])
		return here[0] ? st[0] : st[1];
	if (st[0] == PROTO_INO_MIRROR_STALE || st[1] == PROTO_INO_MIRROR_STALE)
		return PROTO_INO_MIRROR_STALE;
	return st[0] == PROTO_INO_MIRRORED && st[1] == PROTO_INO_MIRRORED ?
	       PROTO_INO_MIRRORED : PROTO_INO_LIVE;
}

/* One (group g, inode) pair of the merge, at the head of the walks marked
 * in here[]: count it for the resync, or compare and repair it. */
static void mirror_one(struct scrub_ctx *x, uint16_t g, struct scrub_walk *w[2],
		       const struct proto_obj *o[2], const int here[2])
{
	struct mirror_pair p = { .g = g, .iod = { w[0]->iod, w[1]->iod },
				 .ino = here[0] ? o[0]->ino : o[1]->ino,
				 .down = -1 };
	uint64_t size = 0;
	uint8_t sts[2], st;
	int rc;

	for (int k = 0; k < 2; k++)
		sts[k] = here[k] ? w[k]->st[w[k]->pos] : PROTO_INO_NONE;
	st = pair_state(sts, here);
	if (st == PROTO_INO_MIRROR_STALE)
		x->report.resync_left++;
	if (st != PROTO_INO_MIRRORED || w[0]->failed || w[1]->failed)
		return;
	for (int k = 0; k < 2; k++)
		if (here[k] && o[k]->size > size)
			size = o[k]->size;
	rc = mirror_compare(x, &p, size);
	if (rc < 0) {
		if (p.down >= 0) /* unreachable: stop walking it */
			w[p.down]->done = w[p.down]->failed = 1;
		return;
	}
	if (rc != MIRROR_GONE)
		x->report.compared++;
	if (rc == MIRROR_DIFFER)
		mirror_repair(x, &p);
}

/* See adm_scrub.h. Cost: the two listings, plus a read of both replicas
 * of every mirrored object. */
void scrub_mirror_group(struct scrub_ctx *x, uint16_t g)
{
	struct scrub_walk *w[2] = { &x->walk[0], &x->walk[1] };
	const struct proto_obj *o[2];
	int here[2], c;

	scrub_walk_start(x, w[0], x->mt.groups[g].iod[0], 1);
	scrub_walk_start(x, w[1], x->mt.groups[g].iod[1], 1);
	for (;;) {
		o[0] = scrub_walk_head(x, w[0]);
		o[1] = scrub_walk_head(x, w[1]);
		if (!o[0] && !o[1])
			break;
		c = !o[0] ? 1 : !o[1] ? -1 : scrub_key_cmp(o[0]->ino, o[1]->ino);
		here[0] = c <= 0;
		here[1] = c >= 0;
		mirror_one(x, g, w, o, here);
		for (int k = 0; k < 2; k++)
			if (here[k] && !w[k]->done)
				w[k]->pos++;
	}
}

/* See adm_scrub.h. */
void scrub_mirror_close(struct scrub_ctx *x)
{
	if (x->mark_cl)
		net_client_free(x->mark_cl);
	x->mark_cl = NULL;
	x->mark_mgr = NULL;
}
