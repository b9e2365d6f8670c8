/*
 * mgr_stale.c - the mirror service: STALE_MARK writes a stale record in its
 * own transaction and answers after the commit, so a client that tells its
 * writer "done" while one replica missed the data does so only once the mgr
 * durably knows which replica that is. STALE_COUNT walks the records.
 */
#include "mgr_stale.h"

#include <errno.h>
#include <sys/stat.h>

#include "log.h"

/* Whether op is a mirror service op. */
int mgr_stale_owns(uint16_t op)
{
	return op == PROTO_OP_STALE_MARK || op == PROTO_OP_STALE_COUNT;
}

/* See mgr_stale.h. Cost: one inode lookup and O(count) group checks. */
int mgr_stale_check(struct mgr_db *db, MDB_txn *txn, uint64_t ino,
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

/* STALE_MARK: validate, record, commit. */
static int stale_mark(struct mgr_db *db, const struct proto_stale *s)
{
	MDB_txn *txn;
	int rc = mgr_db_begin(db, 0, &txn);

	if (rc)
		return rc;
	rc = mgr_stale_check(db, txn, s->ino, s->iod);
	if (!rc)
		rc = mgr_db_stale_add(db, txn, s->iod, s->ino, NULL);
	if (rc) {
		mgr_db_abort(txn);
		return rc;
	}
	rc = mgr_db_commit(txn);
	if (!rc)
		log_notice("iod %u: replica of inode %llu marked stale", s->iod,
			   (unsigned long long)s->ino);
	return rc;
}

/* Decode, run, reply. */
void mgr_stale_handle(struct mgr_db *db, struct net_sreq *r)
{
	static struct proto_stalecnt cnt;
	static uint8_t rep[2 + 8 * PROTO_MAX_IODS];
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
		rc = stale_mark(db, &s);
	} else {
		if (r->body_len) {
			net_sreq_reject(r, "STALE_COUNT with a body");
			return;
		}
		cnt.n = db->niods;
		rc = mgr_db_stale_count(db, cnt.count, cnt.n);
		if (!rc)
			rc = proto_stalecnt_encode(&w, &cnt);
	}
	if (rc > 0 || rc < -4095)
		rc = -EIO;
	log_debug("%s from %s: %d", proto_op_name(r->hdr.op),
		  net_sconn_peer(r->conn), rc);
	net_sreq_reply(r, rc, rc || !w.len ? NULL : rep, rc ? 0 : (uint32_t)w.len);
}
