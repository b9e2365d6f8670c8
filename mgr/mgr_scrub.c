/*
 * mgr_scrub.c - the scrub service: SCRUB_INOS (which of a batch of inodes
 * exist, live or orphan) and SCRUB_ORPHANS (walk the orphan table from a
 * cookie). Both run in one read transaction each and change nothing: the
 * scrub reclaims orphans with the ordinary IO_REMOVE_MANY and PURGE_MANY.
 */
#include "mgr_scrub.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define SCRUB_REP_CAP (32u + PROTO_MAX_INOS * 32u) /* largest reply body */

/* Service state; every field is loop thread only. */
struct mgr_scrub {
	struct mgr_db *db;
	int64_t boot_ns;
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

/* State of one inode in txn: orphan if marked, live if it exists. */
static int scrub_state(struct mgr_db *db, MDB_txn *txn, uint64_t ino,
		       uint8_t *st)
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
	*st = rc ? PROTO_INO_ORPHAN : PROTO_INO_LIVE;
	return 0;
}

/* SCRUB_INOS: the state of each asked inode. Cost: n lookups. */
static int scrub_inos(struct mgr_scrub *sc, const struct proto_scrubq *q,
		      struct wbuf *w)
{
	MDB_txn *txn;
	int rc = mgr_db_begin(sc->db, 1, &txn);

	if (rc)
		return rc;
	sc->states.n = q->inos.n;
	for (uint32_t i = 0; i < q->inos.n && !rc; i++)
		rc = scrub_state(sc->db, txn, proto_inos_at(&q->inos, i),
				 &sc->states.st[i]);
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
	MDB_txn *txn;
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
	log_debug("%s from %s: %d", proto_op_name(op), net_sconn_peer(r->conn), rc);
	net_sreq_reply(r, rc, rc ? NULL : sc->rep, rc ? 0 : (uint32_t)w.len);
}
