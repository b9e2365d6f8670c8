/*
 * mgr_scrub.c - the scrub service: SCRUB_INOS (which of a batch of inodes
 * exist: live, orphan, or a linked mirrored file with or without a stale
 * replica) and SCRUB_ORPHANS (walk the orphan table from a cookie). Both
 * run in one read transaction each and change nothing: the scrub reclaims
 * orphans with the ordinary IO_REMOVE_MANY and PURGE_MANY, and repairs
 * replicas with STALE_MARK (mgr_stale.c).
 */
#include "mgr_scrub.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"

#define SCRUB_REP_CAP (32u + PROTO_MAX_INOS * 32u) /* largest reply body */

/* Service state; every field is loop thread only, but counts (written by
 * the loop thread, read by any: relaxed atomics). */
struct mgr_scrub {
	struct mgr_db *db;
	int64_t boot_ns;
	struct mgr_scrub_counts counts;
	struct proto_orphans orphans; /* reply being built (8 KiB) */
	struct proto_inostate states;
	uint8_t rep[SCRUB_REP_CAP];   /* encoded reply body */
};

/* Allocate the service and its reply buffers (about 17 KiB, once). */
int mgr_scrub_new(struct mgr_scrub **out, struct mgr_db *db, int64_t boot_ns)
{
	struct mgr_scrub *sc = calloc(1, sizeof(*sc));

	if (!sc)
		return -ENOMEM;
	sc->db = db;
	sc->boot_ns = boot_ns;
	*out = sc;
	return 0;
}

/* Free the service. */
void mgr_scrub_free(struct mgr_scrub *sc)
{
	free(sc);
}

/* Whether op is a scrub op. */
int mgr_scrub_owns(uint16_t op)
{
	return op == PROTO_OP_SCRUB_INOS || op == PROTO_OP_SCRUB_ORPHANS;
}

/* A time in nanoseconds since the epoch, clamped to what an i64 holds. */
int64_t mgr_scrub_ns(const struct proto_time *t)
{
	if (t->sec >= INT64_MAX / 1000000000 - 1)
		return INT64_MAX;
	if (t->sec <= INT64_MIN / 1000000000 + 1)
		return INT64_MIN;
	return t->sec * 1000000000 + (int64_t)t->nsec;
}

/* Whether db's stale table holds a record for (iod, ino) (whatever its
 * generation). @return 1, 0, -EIO */
static int scrub_stale_has(struct mgr_db *db, struct mgr_txn *txn,
			   uint16_t iod, uint64_t ino)
{
	int rc = mgr_db_stale_get(db, txn, iod, ino, NULL);

	if (rc == -ENOENT)
		return 0;
	return rc ? rc : 1;
}

/* State of a linked mirror=2 regular file: MIRROR_STALE if either replica
 * of any of its groups has a stale record, else MIRRORED. Cost: nothing
 * while the stale table is empty (stale_any 0), else up to 2 x count
 * lookups. @return 0, -EIO */
static int scrub_mirror_state(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
			      const struct proto_layout *l, int stale_any,
			      uint8_t *st)
{
	*st = PROTO_INO_MIRRORED;
	for (uint16_t k = 0; stale_any && k < l->count && k < db->ngroups; k++) {
		const struct proto_group *g =
			&db->groups[(l->first + k) % db->ngroups];

		for (int r = 0; r < 2; r++) {
			int rc = scrub_stale_has(db, txn, g->iod[r], ino);

			if (rc < 0)
				return rc;
			if (rc) {
				*st = PROTO_INO_MIRROR_STALE;
				return 0;
			}
		}
	}
	return 0;
}

/* State of one inode in txn: orphan if marked, else mirrored (with or
 * without a stale replica) for a mirror=2 regular file, else live; none if
 * it does not exist. */
static int scrub_state(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		       int stale_any, uint8_t *st)
{
	struct mgr_inode in;
	int rc = mgr_db_inode_get(db, txn, ino, &in);

	if (rc == -ENOENT) {
		*st = PROTO_INO_NONE;
		return 0;
	}
	if (rc)
		return rc;
	rc = mgr_db_orphan_is(db, txn, ino);
	if (rc < 0)
		return rc;
	if (rc) {
		*st = PROTO_INO_ORPHAN;
		return 0;
	}
	if (S_ISREG(in.mode) && in.layout.mirror == 2 && db->ngroups)
		return scrub_mirror_state(db, txn, ino, &in.layout, stale_any, st);
	*st = PROTO_INO_LIVE;
	return 0;
}

/* SCRUB_INOS: the state of each asked inode. Cost: n inode lookups, and
 * for mirrored files up to 2 x count stale lookups each while any stale
 * record exists. */
static int scrub_inos(struct mgr_scrub *sc, const struct proto_scrubq *q,
		      struct wbuf *w)
{
	uint64_t nstale;
	struct mgr_txn *txn;
	int rc = mgr_db_begin(sc->db, 1, &txn);

	if (rc)
		return rc;
	rc = mgr_db_stale_total(sc->db, txn, &nstale);
	if (rc) {
		mgr_db_abort(txn);
		return rc;
	}
	sc->states.n = q->inos.n;
	for (uint32_t i = 0; i < q->inos.n && !rc; i++)
		rc = scrub_state(sc->db, txn, proto_inos_at(&q->inos, i),
				 nstale != 0, &sc->states.st[i]);
	mgr_db_abort(txn);
	return rc ? rc : proto_inostate_encode(w, &sc->states);
}

/* SCRUB_ORPHANS: up to max orphans above the cookie, with their size,
 * blocks and ctime. Cost: max cursor seeks and inode loads. */
static int scrub_orphans(struct mgr_scrub *sc, const struct proto_scrubq *q,
			 struct wbuf *w)
{
	struct proto_orphans *o = &sc->orphans;
	uint64_t after = q->cookie, ino;
	struct mgr_inode in;
	struct mgr_txn *txn;
	int rc = mgr_db_begin(sc->db, 1, &txn);

	if (rc)
		return rc;
	o->boot_ns = sc->boot_ns;
	o->n = 0;
	o->eof = 0;
	while (o->n < q->max) {
		rc = mgr_db_orphan_next(sc->db, txn, after, &ino);
		if (rc == -ENOENT) {
			o->eof = 1;
			rc = 0;
			break;
		}
		if (rc)
			break;
		after = ino;
		rc = mgr_db_inode_get(sc->db, txn, ino, &in);
		if (rc == -ENOENT) { /* a mark without an inode: nothing to free */
			rc = 0;
			continue;
		}
		if (rc)
			break;
		o->o[o->n++] = (struct proto_orphan){ ino, in.size,
			in.blocks <= PROTO_MAX_BLOCKS ? in.blocks : PROTO_MAX_BLOCKS,
			mgr_scrub_ns(&in.ctime) };
	}
	mgr_db_abort(txn);
	return rc ? rc : proto_orphans_encode(w, o);
}

/* Count one scrub request that ran (n: the inodes or orphans its reply
 * carries, 0 when it failed) and note when. Loop thread; cost: a few
 * relaxed atomic adds and a clock read. */
static void scrub_count(struct mgr_scrub *sc, uint16_t op, uint32_t n)
{
	struct mgr_scrub_counts *c = &sc->counts;
	struct timespec ts;

	if (op == PROTO_OP_SCRUB_INOS) {
		__atomic_fetch_add(&c->inos_requests, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&c->inos_checked, n, __ATOMIC_RELAXED);
	} else {
		__atomic_fetch_add(&c->orphans_requests, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&c->orphans_reported, n, __ATOMIC_RELAXED);
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	__atomic_store_n(&c->last_ns, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
			 __ATOMIC_RELAXED);
}

/* See mgr_scrub.h. */
void mgr_scrub_counts(const struct mgr_scrub *sc, struct mgr_scrub_counts *out)
{
	const struct mgr_scrub_counts *c = &sc->counts;

	out->inos_requests = __atomic_load_n(&c->inos_requests, __ATOMIC_RELAXED);
	out->orphans_requests = __atomic_load_n(&c->orphans_requests, __ATOMIC_RELAXED);
	out->inos_checked = __atomic_load_n(&c->inos_checked, __ATOMIC_RELAXED);
	out->orphans_reported = __atomic_load_n(&c->orphans_reported, __ATOMIC_RELAXED);
	out->last_ns = __atomic_load_n(&c->last_ns, __ATOMIC_RELAXED);
}

/* Decode, run, reply. */
void mgr_scrub_handle(struct mgr_scrub *sc, struct net_sreq *r)
{
	uint16_t op = r->hdr.op;
	const char *why = "scrub request";
	struct proto_scrubq q;
	struct wbuf w;
	int rc;

	if (r->hdr.bulk_len || r->hdr.aux) {
		net_sreq_reject(r, "scrub request with bulk data");
		return;
	}
	if (!net_sconn_privileged(r->conn)) {
		log_notice("%s from %s refused: it needs the servers' key",
			   proto_op_name(op), net_sconn_peer(r->conn));
		net_sreq_reply(r, -EPERM, NULL, 0);
		return;
	}
	rc = proto_scrubq_decode(r->body, r->body_len, op, &q, &why);
	if (rc) {
		net_sreq_reject(r, why ? why : "malformed scrub request");
		return;
	}
	wb_init(&w, sc->rep, sizeof(sc->rep));
	rc = op == PROTO_OP_SCRUB_INOS ? scrub_inos(sc, &q, &w)
				       : scrub_orphans(sc, &q, &w);
	if (rc > 0 || rc < -4095)
		rc = -EIO;
	scrub_count(sc, op, rc ? 0 : op == PROTO_OP_SCRUB_INOS ?
		    sc->states.n : sc->orphans.n);
	log_debug("%s from %s: %d", proto_op_name(op), net_sconn_peer(r->conn), rc);
	net_sreq_reply(r, rc, rc ? NULL : sc->rep, rc ? 0 : (uint32_t)w.len);
}
