/*
 * mgr_stale.c - the mirror service: STALE_MARK writes a stale record in its
 * own transaction, then hands (iod, inode, the request) to the poll thread,
 * which fences the inode at the iod; the reply comes back through an
 * ev_async, so a client that tells its writer "done" while one replica
 * missed the data does so only once the mgr durably knows which replica
 * that is and that replica can no longer serve a read of it. STALE_COUNT
 * walks the records and adds the resync's counters.
 */
#include "mgr_stale.h"

#include <errno.h>
#include <ev.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"
#include "mgr_iodpoll.h"
#include "mgr_resync.h"

/* The service. Loop thread only (async is sent from the poll thread). */
struct mgr_stale {
	struct ev_loop *loop;
	struct mgr_db *db;
	struct mgr_iodpoll *poll;
	struct mgr_resync *rs;  /* NULL: resync off */
	ev_async async;         /* marks done */
};

/* CLOCK_MONOTONIC in ns. */
static uint64_t stale_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* See mgr_stale.h. */
void mgr_stale_flush(struct mgr_stale *st)
{
	struct mgr_fence_mark *m, *next;

	for (m = mgr_iodpoll_take_done(st->poll); m; m = next) {
		next = m->next;
		log_info("iod %u: STALE_MARK of inode %llu answered %d after "
			 "%.3f s (%s)", m->iod, (unsigned long long)m->ino,
			 m->status, (double)(stale_now_ns() - m->t0_ns) / 1e9,
			 m->status ? "the mgr is stopping" : m->expired ?
			 "the iod's lease ran out" : "the iod fenced it");
		net_sreq_reply(m->ctx, m->status, NULL, 0);
		free(m);
	}
}

/* ev_async: the poll thread finished marks. */
static void stale_on_async(struct ev_loop *loop, ev_async *w, int revents)
{
	mgr_stale_flush(w->data);
}

/* See mgr_stale.h. */
int mgr_stale_new(struct mgr_stale **out, struct ev_loop *loop,
		  struct mgr_db *db)
{
	struct mgr_stale *st = calloc(1, sizeof(*st));

	if (!st)
		return -ENOMEM;
	st->loop = loop;
	st->db = db;
	ev_async_init(&st->async, stale_on_async);
	st->async.data = st;
	ev_async_start(loop, &st->async);
	*out = st;
	return 0;
}

/* See mgr_stale.h. */
void mgr_stale_attach(struct mgr_stale *st, struct mgr_iodpoll *poll,
		      struct mgr_resync *rs)
{
	st->poll = poll;
	st->rs = rs;
}

/* See mgr_stale.h. */
void mgr_stale_wake(void *arg)
{
	struct mgr_stale *st = arg;

	ev_async_send(st->loop, &st->async);
}

/* See mgr_stale.h. */
void mgr_stale_free(struct mgr_stale *st)
{
	if (!st)
		return;
	ev_async_stop(st->loop, &st->async);
	free(st);
}

/* Whether op is a mirror service op. */
int mgr_stale_owns(uint16_t op)
{
	return op == PROTO_OP_STALE_MARK || op == PROTO_OP_STALE_COUNT;
}

/* See mgr_stale.h. Cost: one inode lookup and O(count) group checks. */
int mgr_stale_check(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		    uint16_t iod)
{
	struct mgr_inode in;
	int rc = mgr_db_inode_get(db, txn, ino, &in);

	if (rc)
		return rc;
	if (!S_ISREG(in.mode) || in.layout.mirror != 2 || db->ngroups == 0)
		return -EINVAL;
	for (uint16_t k = 0; k < in.layout.count && k < db->ngroups; k++) {
		const struct proto_group *g =
			&db->groups[(in.layout.first + k) % db->ngroups];

		if (g->iod[0] == iod || g->iod[1] == iod)
			return 0;
	}
	return -EINVAL;
}

/* STALE_MARK: validate, record (a new generation), commit. */
static int stale_mark(struct mgr_db *db, const struct proto_stale *s)
{
	struct mgr_txn *txn;
	uint64_t gen;
	int rc = mgr_db_begin(db, 0, &txn);

	if (rc)
		return rc;
	rc = mgr_stale_check(db, txn, s->ino, s->iod);
	if (!rc)
		rc = mgr_db_stale_add(db, txn, s->iod, s->ino, &gen);
	if (rc) {
		mgr_db_abort(txn);
		return rc;
	}
	rc = mgr_db_commit(txn);
	if (!rc)
		log_notice("iod %u: replica of inode %llu marked stale "
			   "(generation %llu)", s->iod,
			   (unsigned long long)s->ino, (unsigned long long)gen);
	return rc;
}

/* Hand a committed mark to the poll thread; the reply waits for it.
 * @return 0 deferred, -ENOMEM (answer now) */
static int stale_defer(struct mgr_stale *st, const struct proto_stale *s,
		       struct net_sreq *r)
{
	struct mgr_fence_mark *m;

	m = calloc(1, sizeof(*m));
	if (!m) {
		log_err("iod %u: out of memory fencing inode %llu", s->iod,
			(unsigned long long)s->ino);
		return -ENOMEM;
	}
	m->ino = s->ino;
	m->iod = s->iod;
	m->t0_ns = stale_now_ns();
	m->ctx = r;
	mgr_iodpoll_mark(st->poll, m);
	return 0;
}

/* STALE_COUNT: the records per iod and the resync's counters. */
static int stale_count(struct mgr_stale *st, struct wbuf *w)
{
	static struct proto_stalecnt cnt;
	int rc;

	cnt.n = st->db->niods;
	rc = mgr_db_stale_count(st->db, cnt.count, cnt.n);
	if (rc)
		return rc;
	for (uint16_t i = 0; i < cnt.n; i++) {
		cnt.done[i] = cnt.bytes[i] = 0;
		if (st->rs)
			mgr_resync_counts(st->rs, i, &cnt.done[i], &cnt.bytes[i]);
	}
	return proto_stalecnt_encode(w, &cnt);
}

/* Decode, run, reply (or defer a mark). */
void mgr_stale_handle(struct mgr_stale *st, struct net_sreq *r)
{
	static uint8_t rep[2 + 24 * PROTO_MAX_IODS];
	const char *why = "stale request";
	struct proto_stale s;
	struct wbuf w;
	int rc;

	if (r->hdr.bulk_len || r->hdr.aux) {
		net_sreq_reject(r, "stale request with bulk data");
		return;
	}
	wb_init(&w, rep, sizeof(rep));
	if (r->hdr.op == PROTO_OP_STALE_MARK) {
		rc = proto_stale_decode(r->body, r->body_len, &s, &why);
		if (rc) {
			net_sreq_reject(r, why ? why : "malformed STALE_MARK");
			return;
		}
		rc = stale_mark(st->db, &s);
		if (!rc) {
			rc = stale_defer(st, &s, r);
			if (!rc)
				return;
		}
	} else {
		if (r->body_len) {
			net_sreq_reject(r, "STALE_COUNT with a body");
			return;
		}
		rc = stale_count(st, &w);
	}
	if (rc > 0 || rc < -4095)
		rc = -EIO;
	log_debug("%s from %s: %d", proto_op_name(r->hdr.op),
		  net_sconn_peer(r->conn), rc);
	net_sreq_reply(r, rc, rc || !w.len ? NULL : rep, rc ? 0 : (uint32_t)w.len);
}
