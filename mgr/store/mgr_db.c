/*
 * mgr_db.c - the mgr namespace as records in the store interface
 * (mgr_kv.h): keys, record formats, counters, the headroom rule.
 * No backend's types here; the LMDB layout is in mgr_kv_lmdb.c.
 */
#include "mgr_db.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"
#include "mgr_kv_int.h"

#define MGR_KEY_MAX (8 + PROTO_MAX_NAME)

/* On-disk inode record header; the symlink target follows it. Version 1
 * records end before blocks (MGR_IREC_V1_LEN); version 2 added it. */
struct mgr_irec {
	uint32_t version;
	uint32_t mode, nlink, uid, gid, rdev, flags;
	uint32_t target_len;
	uint64_t size, parent, next_seq;
	int64_t asec, msec, csec;
	uint32_t ansec, mnsec, cnsec;
	uint32_t unit;
	uint16_t count, first;
	uint8_t mirror;  /* 0 in records written before mirroring: 1 */
	uint8_t pad[3]; /* explicit, so no uninitialised bytes reach the disk */
	uint64_t blocks; /* version 2 */
};

#define MGR_IREC_V1_LEN offsetof(struct mgr_irec, blocks)

/* Dirent value. */
struct mgr_dval {
	uint64_t child;
	uint64_t seq;
};

/* A dirseq value: MGR_DSEQ_TAG, the child (host order), the name. Older
 * records hold the name alone; a name never starts with a NUL byte, so
 * the tag tells them apart. */
#define MGR_DSEQ_TAG 0x00
#define MGR_DSEQ_HDR 9

/* A transaction of the namespace: the store's txn and what mgr_db_commit
 * must know about it. Owned by the thread that began it. */
struct mgr_txn {
	struct mgr_kv_txn *kv;
	struct mgr_db *db;
	struct mgr_txn *parent; /* NULL: top-level */
	int rdonly;             /* a read transaction: its commit syncs
				 * nothing and is not timed */
	int stale_dirty;        /* it (or a committed child) added or deleted
				 * stale records: bump the version at commit */
	uint64_t name_credit;   /* bytes of dirent names it removed that no
				 * dirent_add used yet: lets a rename's add go
				 * into the upper half of the reserve */
};

/* Build an 8-byte big-endian key, optionally followed by bytes. */
static size_t db_key(uint8_t *k, uint64_t id, const void *tail, size_t len)
{
	uint64_t be = htobe64(id);

	memcpy(k, &be, 8);
	if (len)
		memcpy(k + 8, tail, len);
	return 8 + len;
}

/* Current wall-clock time for timestamps. */
void mgr_db_now(struct proto_time *t)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	t->sec = ts.tv_sec;
	t->nsec = (uint32_t)ts.tv_nsec;
}

/* Read a u64 from meta; *v = def when missing. @return 0, -EIO */
static int meta_get_u64(struct mgr_txn *txn, const char *key, uint64_t *v,
			uint64_t def)
{
	const void *d;
	size_t dl;
	int rc = mgr_kv_get(txn->kv, MGR_KV_META, key, strlen(key), &d, &dl);

	if (rc == -ENOENT) {
		*v = def;
		return 0;
	}
	if (rc)
		return rc;
	if (dl != 8)
		return -EIO;
	memcpy(v, d, 8);
	return 0;
}

/* Write a u64 to meta. @return 0, -ENOSPC, -EIO */
static int meta_put_u64(struct mgr_txn *txn, const char *key, uint64_t v)
{
	return mgr_kv_put(txn->kv, MGR_KV_META, key, strlen(key), &v, 8, 0);
}

/* Remember that txn changed its store's stale records. */
static void stale_touch(struct mgr_txn *txn)
{
	txn->stale_dirty = 1;
}

/* Wrap a store txn just begun. @return 0, -ENOMEM (kt aborted) */
static int txn_wrap(struct mgr_db *db, struct mgr_kv_txn *kt,
		    struct mgr_txn *parent, struct mgr_txn **out)
{
	struct mgr_txn *t = calloc(1, sizeof(*t));

	if (!t) {
		mgr_kv_abort(kt);
		return -ENOMEM;
	}
	t->kv = kt;
	t->db = db;
	t->parent = parent;
	*out = t;
	return 0;
}

/* Begin a top-level transaction on db's store. The caller owns it and
 * ends it (mgr_db_commit or mgr_db_abort); nothing is implied by the
 * thread it runs on. */
int mgr_db_begin(struct mgr_db *db, int rdonly, struct mgr_txn **txn)
{
	struct mgr_kv_txn *kt;
	int rc = mgr_kv_begin(db->kv, NULL, rdonly, &kt);

	if (!rc)
		rc = txn_wrap(db, kt, NULL, txn);
	if (!rc)
		(*txn)->rdonly = rdonly;
	return rc;
}

/* Begin a child of a write transaction. */
int mgr_db_begin_child(struct mgr_txn *parent, struct mgr_txn **txn)
{
	struct mgr_kv_txn *kt;
	int rc = mgr_kv_begin(parent->db->kv, parent->kv, 0, &kt);

	return rc ? rc : txn_wrap(parent->db, kt, parent, txn);
}

/* The store transaction under txn. */
struct mgr_kv_txn *mgr_db_txn_kv(struct mgr_txn *txn)
{
	return txn->kv;
}

/* Commit latency of the process (relaxed atomics; mgr_db_commit_latency). */
static struct metrics_hist commit_lat;

/* See mgr_db.h. */
const struct metrics_hist *mgr_db_commit_latency(void)
{
	return &commit_lat;
}

/* Commit. A child folds into its parent (its stale change with it); a
 * top-level commit syncs, so an acknowledged op survives, and then, if the
 * txn changed stale records, bumps the stale version (after the commit: a
 * reader that sees the new version sees the records too). Only top-level
 * write commits go to the commit histogram: its count is the syncs. */
int mgr_db_commit(struct mgr_txn *txn)
{
	struct mgr_db *db = txn->db;
	struct mgr_txn *parent = txn->parent;
	struct mgr_kv_txn *kt = txn->kv;
	int dirty = txn->stale_dirty, rdonly = txn->rdonly, rc;
	uint64_t t0;

	free(txn);
	if (parent) {
		rc = mgr_kv_commit(kt);
		if (!rc && dirty)
			parent->stale_dirty = 1;
		return rc;
	}
	t0 = metrics_now_ns();
	rc = mgr_kv_commit(kt);
	if (!rdonly)
		metrics_hist_add(&commit_lat, metrics_now_ns() - t0);
	if (!rc && dirty)
		__atomic_add_fetch(&db->stale_ver, 1, __ATOMIC_RELEASE);
	return rc;
}

/* Abort a transaction (its stale changes, if any, are gone with it). */
void mgr_db_abort(struct mgr_txn *txn)
{
	struct mgr_kv_txn *kt = txn->kv;

	free(txn);
	mgr_kv_abort(kt);
}

/* The headroom rule's view of txn; see mgr_db.h. */
int mgr_db_usage(struct mgr_db *db, struct mgr_txn *txn, uint64_t *used,
		 uint64_t *limit)
{
	(void)db;
	return mgr_kv_usage(txn->kv, used, limit);
}

/*
 * The headroom rule, asked by the ops that grow the namespace before they
 * do: a plain growth stops once the pages in use reach the map minus the
 * reserve, and once stopped resumes only when they are an eighth of the
 * reserve below that (deletes freed real space: each txn moves the free
 * list's own pages by a few, which must not let a create through at the
 * edge); an add paid for by a delete in the same txn (credited: a rename)
 * may go on until half the reserve is left, so renames work at "full" but
 * cannot eat the half that deletes need. Logs when the namespace becomes
 * full and when it has room again. A store with no fixed size (usage
 * -EOPNOTSUPP) has no rule: its own disk-full error is the limit. Cost:
 * mgr_kv_usage.
 * @return 0, -ENOSPC, -EIO
 */
static int db_room(struct mgr_db *db, struct mgr_txn *txn, int credited)
{
	uint64_t used, stop;
	int rc = mgr_kv_usage(txn->kv, &used, &stop);

	if (rc == -EOPNOTSUPP)
		return 0;
	if (rc)
		return rc;
	if (credited)
		stop += db->reserve_pages / 2;
	else if (db->full)
		stop -= db->reserve_pages / 8;
	if (used < stop) {
		if (db->full && !credited) {
			log_notice("namespace has room again: %llu of %llu pages "
				   "in use", (unsigned long long)used,
				   (unsigned long long)db->map_pages);
			db->full = 0;
		}
		return 0;
	}
	if (!db->full)
		log_warn("namespace full: %llu of %llu pages in use (%llu kept "
			 "for deletes); creates, links and xattrs get ENOSPC",
			 (unsigned long long)used, (unsigned long long)db->map_pages,
			 (unsigned long long)db->reserve_pages);
	db->full = 1;
	return -ENOSPC;
}

/* Load and unpack inode ino. Cost: one lookup, no copy of target. */
int mgr_db_inode_get(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		     struct mgr_inode *in)
{
	uint8_t kb[8];
	const void *d;
	size_t dl;
	int rc = mgr_kv_get(txn->kv, MGR_KV_INODES, kb,
			    db_key(kb, ino, NULL, 0), &d, &dl);

	(void)db;
	return rc ? rc : mgr_db_inode_decode(d, dl, in);
}

/* Unpack an inode record (version 1 or 2) read by get or a scan; target
 * points into d. */
int mgr_db_inode_decode(const void *d, size_t dl, struct mgr_inode *in)
{
	struct mgr_irec r;
	size_t hlen;

	if (dl < MGR_IREC_V1_LEN)
		return -EIO;
	memset(&r, 0, sizeof(r));
	memcpy(&r, d, MGR_IREC_V1_LEN);
	if (r.version == 1) {
		hlen = MGR_IREC_V1_LEN;
		r.blocks = S_ISREG(r.mode) ? (r.size + 511) / 512 : 0;
	} else if (r.version == MGR_IREC_VERSION) {
		hlen = sizeof(r);
		if (dl < hlen)
			return -EIO;
		memcpy(&r, d, hlen);
	} else {
		return -EIO;
	}
	if (dl != hlen + r.target_len)
		return -EIO;
	in->mode = r.mode;
	in->nlink = r.nlink;
	in->uid = r.uid;
	in->gid = r.gid;
	in->rdev = r.rdev;
	in->flags = r.flags;
	in->size = r.size;
	in->blocks = r.blocks;
	in->parent = r.parent;
	in->next_seq = r.next_seq;
	in->atime = (struct proto_time){ r.asec, r.ansec };
	in->mtime = (struct proto_time){ r.msec, r.mnsec };
	in->ctime = (struct proto_time){ r.csec, r.cnsec };
	in->layout = (struct proto_layout){ r.unit, r.count, r.first,
					    r.mirror ? r.mirror : (r.unit ? 1 : 0) };
	in->target_len = r.target_len;
	in->target = r.target_len ? (const char *)d + hlen : NULL;
	return 0;
}

/* Pack and store inode ino. The record is built in a buffer first: the
 * target may point into the store's copy of the old record, which the put
 * may overwrite. Cost: one put of at most 4 KiB + the header. */
int mgr_db_inode_put(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		     const struct mgr_inode *in)
{
	uint8_t kb[8], vb[sizeof(struct mgr_irec) + PROTO_MAX_PATH];
	struct mgr_irec r = {
		.pad = { 0, 0, 0 }, .mirror = in->layout.mirror, .version = MGR_IREC_VERSION, .mode = in->mode, .nlink = in->nlink,
		.uid = in->uid, .gid = in->gid, .rdev = in->rdev,
		.flags = in->flags, .target_len = in->target_len,
		.size = in->size, .parent = in->parent,
		.next_seq = in->next_seq,
		.asec = in->atime.sec, .msec = in->mtime.sec,
		.csec = in->ctime.sec, .ansec = in->atime.nsec,
		.mnsec = in->mtime.nsec, .cnsec = in->ctime.nsec,
		.unit = in->layout.unit, .count = in->layout.count,
		.first = in->layout.first, .blocks = in->blocks,
	};

	(void)db;
	if (in->target_len > PROTO_MAX_PATH)
		return -EINVAL;
	memcpy(vb, &r, sizeof(r));
	if (in->target_len)
		memcpy(vb + sizeof(r), in->target, in->target_len);
	return mgr_kv_put(txn->kv, MGR_KV_INODES, kb, db_key(kb, ino, NULL, 0),
			  vb, sizeof(r) + in->target_len, 0);
}

static size_t stale_key(uint8_t *k, uint16_t iod, uint64_t ino);

/* Drop the stale records of a purged inode (its objects are gone). Cost:
 * nothing without mirror groups; else one count (PostgreSQL: a query), and
 * one delete per iod in a group while some record exists. @return 0, -EIO */
static int stale_del_ino(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino)
{
	uint64_t n;
	int rc;

	if (!db->ngroups) /* no mirror groups: no stale records, no query */
		return 0;
	rc = mgr_kv_count(txn->kv, MGR_KV_STALE, &n);
	if (rc)
		return rc;
	for (uint16_t g = 0; n && g < db->ngroups; g++) {
		for (int r = 0; r < 2; r++) {
			uint8_t kb[10];

			rc = mgr_kv_del(txn->kv, MGR_KV_STALE, kb,
					stale_key(kb, db->groups[g].iod[r], ino));
			if (rc && rc != -ENOENT)
				return rc;
			if (rc == 0)
				stale_touch(txn);
		}
	}
	return 0;
}

/* Delete inode ino with its xattrs, orphan mark and stale records, and
 * uncount it. */
int mgr_db_inode_del(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino)
{
	uint8_t kb[8];
	size_t kl = db_key(kb, ino, NULL, 0);
	uint64_t n;
	int rc = mgr_kv_del(txn->kv, MGR_KV_INODES, kb, kl);

	if (rc)
		return rc;
	rc = mgr_kv_del(txn->kv, MGR_KV_ORPHANS, kb, kl);
	if (rc && rc != -ENOENT)
		return rc;
	rc = mgr_kv_del_prefix(txn->kv, MGR_KV_XATTRS, kb, kl);
	if (!rc)
		rc = stale_del_ino(db, txn, ino);
	if (rc)
		return rc;
	rc = meta_get_u64(txn, "ninodes", &n, 1);
	if (rc)
		return rc;
	return meta_put_u64(txn, "ninodes", n ? n - 1 : 0);
}

/* Take the next inode number from the never-reused counter. */
int mgr_db_inode_alloc(struct mgr_db *db, struct mgr_txn *txn, uint64_t *ino)
{
	uint64_t next, n;
	int rc = db_room(db, txn, 0);

	if (!rc)
		rc = meta_get_u64(txn, "next_ino", &next, MGR_ROOT_INO + 1);
	if (!rc)
		rc = meta_put_u64(txn, "next_ino", next + 1);
	if (!rc)
		rc = meta_get_u64(txn, "ninodes", &n, 1);
	if (!rc)
		rc = meta_put_u64(txn, "ninodes", n + 1);
	if (!rc)
		*ino = next;
	return rc;
}

/*
 * Ranges of inode numbers delegated to sessions (BATCH, proto.h): meta
 * "drange/<session, 16 hex digits>" holds the session's current and
 * previous range, each as {first number, next unused}, host order (a
 * previous first of 0: none). Keeping two lets a mount use the rest of a
 * range while it asks for the next one.
 */
#define RANGE_KEY_LEN 23 /* "drange/" + 16 hex digits */

struct drange {
	uint64_t cur, cur_next;   /* current range: first, next unused */
	uint64_t prev, prev_next; /* previous range, prev 0: none */
};

/* The meta key of session's ranges into k (RANGE_KEY_LEN + 1 bytes). */
static void range_key(char *k, uint64_t session)
{
	snprintf(k, RANGE_KEY_LEN + 1, "drange/%016llx",
		 (unsigned long long)session);
}

/* Load session's ranges. @return 0, -ENOENT none yet, -EIO corrupt */
static int range_load(struct mgr_txn *txn, uint64_t session, struct drange *r)
{
	char k[RANGE_KEY_LEN + 1];
	const void *d;
	size_t dl;
	int rc;

	range_key(k, session);
	rc = mgr_kv_get(txn->kv, MGR_KV_META, k, RANGE_KEY_LEN, &d, &dl);
	if (rc)
		return rc;
	if (dl != sizeof(*r))
		return -EIO;
	memcpy(r, d, sizeof(*r));
	return 0;
}

/* Store session's ranges. @return 0, -ENOSPC, -EIO */
static int range_store(struct mgr_txn *txn, uint64_t session,
		       const struct drange *r)
{
	char k[RANGE_KEY_LEN + 1];

	range_key(k, session);
	return mgr_kv_put(txn->kv, MGR_KV_META, k, RANGE_KEY_LEN, r,
			  sizeof(*r), 0);
}

/* Hand session a new range: advance next_ino past the next multiple of
 * PROTO_INO_RANGE, make it the current range. Cost: three meta lookups,
 * two writes. */
int mgr_db_range_take(struct mgr_db *db, struct mgr_txn *txn, uint64_t session,
		      uint64_t *first)
{
	struct drange r = { 0 };
	uint64_t next, start;
	int rc;

	(void)db;
	if (session == 0)
		return -EINVAL;
	rc = meta_get_u64(txn, "next_ino", &next, MGR_ROOT_INO + 1);
	if (rc)
		return rc;
	start = (next + PROTO_INO_RANGE - 1) & ~(uint64_t)(PROTO_INO_RANGE - 1);
	if (start < next || start > UINT64_MAX - 2 * PROTO_INO_RANGE)
		return -ENOSPC;
	rc = range_load(txn, session, &r);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc == 0) {
		r.prev = r.cur;
		r.prev_next = r.cur_next;
	}
	r.cur = r.cur_next = start;
	rc = meta_put_u64(txn, "next_ino", start + PROTO_INO_RANGE);
	if (!rc)
		rc = range_store(txn, session, &r);
	if (!rc)
		*first = start;
	return rc;
}

/* Forget session's ranges (its session ended: numbers it did not use are
 * never used). Cost: one delete. */
int mgr_db_range_drop(struct mgr_db *db, struct mgr_txn *txn, uint64_t session)
{
	char k[RANGE_KEY_LEN + 1];
	int rc;

	(void)db;
	range_key(k, session);
	rc = mgr_kv_del(txn->kv, MGR_KV_META, k, RANGE_KEY_LEN);
	return rc == -ENOENT ? 0 : rc;
}

/* Whether ino may be used from the range starting at first with next
 * unused number next (0: no such range). */
static int range_fits(uint64_t first, uint64_t next, uint64_t ino)
{
	return first && ino >= first && ino - first < PROTO_INO_RANGE &&
	       ino >= next;
}

/* Use ino from one of session's ranges and count it as an inode. Cost:
 * db_room, three meta lookups, two writes. */
int mgr_db_range_use(struct mgr_db *db, struct mgr_txn *txn, uint64_t session,
		     uint64_t ino)
{
	struct drange r;
	uint64_t n;
	int rc = db_room(db, txn, 0);

	if (rc)
		return rc;
	if (session == 0 || ino == 0)
		return -EINVAL;
	rc = range_load(txn, session, &r);
	if (rc == -ENOENT)
		return -EINVAL;
	if (rc)
		return rc;
	if (range_fits(r.cur, r.cur_next, ino))
		r.cur_next = ino + 1;
	else if (range_fits(r.prev, r.prev_next, ino))
		r.prev_next = ino + 1;
	else
		return -EINVAL;
	rc = range_store(txn, session, &r);
	if (!rc)
		rc = meta_get_u64(txn, "ninodes", &n, 1);
	if (!rc)
		rc = meta_put_u64(txn, "ninodes", n + 1);
	return rc;
}

/* Inodes in use (for statfs). */
uint64_t mgr_db_inode_count(struct mgr_db *db, struct mgr_txn *txn)
{
	uint64_t n = 0;

	(void)db;
	meta_get_u64(txn, "ninodes", &n, 1);
	return n;
}

/* Fetch the raw dirent value of parent/name. */
static int dirent_raw(struct mgr_txn *txn, uint64_t parent, const char *name,
		      size_t len, struct mgr_dval *v)
{
	uint8_t kb[MGR_KEY_MAX];
	const void *d;
	size_t dl;
	int rc;

	if (len == 0 || len > PROTO_MAX_NAME)
		return -ENOENT;
	rc = mgr_kv_get(txn->kv, MGR_KV_DIRENTS, kb,
			db_key(kb, parent, name, len), &d, &dl);
	if (rc)
		return rc;
	if (dl != sizeof(*v))
		return -EIO;
	memcpy(v, d, sizeof(*v));
	return 0;
}

/* Look up name in parent. */
int mgr_db_dirent_get(struct mgr_db *db, struct mgr_txn *txn, uint64_t parent,
		      const char *name, size_t len, uint64_t *child)
{
	struct mgr_dval v;
	int rc = dirent_raw(txn, parent, name, len, &v);

	(void)db;
	if (!rc)
		*child = v.child;
	return rc;
}

/* Write the dirseq record (parent, seq) -> tag, child, name (the new
 * format, which readdir reads without a dirents lookup). */
static int dirseq_put(struct mgr_txn *txn, uint64_t parent, uint64_t seq,
		      const char *name, size_t len, uint64_t child)
{
	uint8_t sb[16], vb[MGR_DSEQ_HDR + PROTO_MAX_NAME];
	uint64_t seq_be = htobe64(seq);

	vb[0] = MGR_DSEQ_TAG;
	memcpy(vb + 1, &child, 8);
	memcpy(vb + MGR_DSEQ_HDR, name, len);
	return mgr_kv_put(txn->kv, MGR_KV_DIRSEQ, sb,
			  db_key(sb, parent, &seq_be, 8), vb,
			  MGR_DSEQ_HDR + len, 0);
}

/* Link name into parent with a fresh cookie; two puts (dirents, dirseq). */
int mgr_db_dirent_add(struct mgr_db *db, struct mgr_txn *txn, uint64_t parent,
		      struct mgr_inode *pdir, const char *name, size_t len,
		      uint64_t child)
{
	uint8_t kb[MGR_KEY_MAX];
	struct mgr_dval v = { child, pdir->next_seq };
	int rc;

	if (len == 0 || len > PROTO_MAX_NAME)
		return -EINVAL;
	rc = db_room(db, txn, txn->name_credit >= len);
	if (rc)
		return rc;
	rc = mgr_kv_put(txn->kv, MGR_KV_DIRENTS, kb,
			db_key(kb, parent, name, len), &v, sizeof(v),
			MGR_KV_NOOVERWRITE);
	if (!rc)
		rc = dirseq_put(txn, parent, v.seq, name, len, child);
	if (rc)
		return rc;
	txn->name_credit = txn->name_credit >= len ? txn->name_credit - len : 0;
	pdir->next_seq++;
	return 0;
}

/* Repoint parent/name at child, keeping its cookie (RENAME_EXCHANGE):
 * the dirent and the child its dirseq record carries. */
int mgr_db_dirent_set(struct mgr_db *db, struct mgr_txn *txn, uint64_t parent,
		      const char *name, size_t len, uint64_t child)
{
	uint8_t kb[MGR_KEY_MAX];
	struct mgr_dval v;
	int rc = dirent_raw(txn, parent, name, len, &v);

	(void)db;
	if (rc)
		return rc;
	v.child = child;
	rc = mgr_kv_put(txn->kv, MGR_KV_DIRENTS, kb,
			db_key(kb, parent, name, len), &v, sizeof(v), 0);
	return rc ? rc : dirseq_put(txn, parent, v.seq, name, len, child);
}

/* Unlink name from parent (both indexes). */
int mgr_db_dirent_del(struct mgr_db *db, struct mgr_txn *txn, uint64_t parent,
		      const char *name, size_t len)
{
	uint8_t kb[MGR_KEY_MAX], sb[16];
	struct mgr_dval v;
	uint64_t seq_be;
	int rc = dirent_raw(txn, parent, name, len, &v);

	(void)db;
	if (rc)
		return rc;
	rc = mgr_kv_del(txn->kv, MGR_KV_DIRENTS, kb,
			db_key(kb, parent, name, len));
	if (rc)
		return rc;
	seq_be = htobe64(v.seq);
	rc = mgr_kv_del(txn->kv, MGR_KV_DIRSEQ, sb,
			db_key(sb, parent, &seq_be, 8));
	if (rc && rc != -ENOENT)
		return rc;
	txn->name_credit += len;
	return 0;
}

/* A readdir walk in progress (mgr_kv_scan's argument). */
struct rd_walk {
	struct mgr_txn *txn;
	uint64_t dir;
	mgr_db_dirent_fn fn;
	void *arg;
};

/* One dirseq record: decode the name and child (an older record without
 * the child costs a dirents lookup) and hand them to the caller's fn.
 * @return 0 go on, 1 the caller stopped */
static int rd_one(void *arg, const void *key, size_t klen, const void *val,
		  size_t vlen)
{
	struct rd_walk *w = arg;
	const uint8_t *v = val;
	const char *name = val;
	uint64_t seq_be, seq, child;
	size_t len = vlen;

	if (klen != 16)
		return 0;
	memcpy(&seq_be, (const uint8_t *)key + 8, 8);
	seq = be64toh(seq_be);
	if (vlen > MGR_DSEQ_HDR && v[0] == MGR_DSEQ_TAG) {
		memcpy(&child, v + 1, 8);
		name = (const char *)v + MGR_DSEQ_HDR;
		len = vlen - MGR_DSEQ_HDR;
	} else if (vlen == 0 || v[0] == MGR_DSEQ_TAG ||
		   mgr_db_dirent_get(w->txn->db, w->txn, w->dir, name, len,
				     &child) != 0) {
		log_err("dirseq %llu/%llu has no dirent",
			(unsigned long long)w->dir, (unsigned long long)seq);
		return 0;
	}
	return w->fn(w->arg, seq, name, len, child) ? 1 : 0;
}

/* Walk dirseq from (dir, after + 1): one scan. */
int mgr_db_readdir(struct mgr_db *db, struct mgr_txn *txn, uint64_t dir,
		   uint64_t after, mgr_db_dirent_fn fn, void *arg)
{
	struct rd_walk w = { txn, dir, fn, arg };
	uint8_t sb[16];
	uint64_t seq_be = htobe64(after + 1);
	int rc;

	(void)db;
	if (after == UINT64_MAX)
		return 1;
	rc = mgr_kv_scan(txn->kv, MGR_KV_DIRSEQ, sb,
			 db_key(sb, dir, &seq_be, 8), 8, rd_one, &w);
	if (rc < 0)
		return rc;
	return rc ? 0 : 1;
}

/* Stop at the first entry. */
static int dir_any(void *arg, uint64_t seq, const char *name, size_t len,
		   uint64_t child)
{
	return 1;
}

/* Is dir empty? Cost: one seek. */
int mgr_db_dir_empty(struct mgr_db *db, struct mgr_txn *txn, uint64_t dir)
{
	return mgr_db_readdir(db, txn, dir, 0, dir_any, NULL);
}

/* Get xattr ino/name. */
int mgr_db_xattr_get(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		     const char *name, size_t len, const void **val,
		     size_t *vlen)
{
	uint8_t kb[MGR_KEY_MAX];
	int rc;

	(void)db;
	if (len == 0 || len > PROTO_MAX_XATTR_NAME)
		return -ENODATA;
	rc = mgr_kv_get(txn->kv, MGR_KV_XATTRS, kb, db_key(kb, ino, name, len),
			val, vlen);
	return rc == -ENOENT ? -ENODATA : rc;
}

/* The running totals of xattr_cap_check's walk. */
struct xcap {
	uint64_t count, bytes, max_count, max_bytes;
};

/* Add one xattr record; stop once a cap is passed. */
static int xcap_one(void *arg, const void *key, size_t klen, const void *val,
		    size_t vlen)
{
	struct xcap *x = arg;

	if (klen <= 8)
		return 0;
	x->count++;
	x->bytes += klen - 8 + vlen;
	return x->count > x->max_count || x->bytes > x->max_bytes;
}

/*
 * Would ino's xattrs stay within the caps if one of old bytes (name +
 * value; 0: a new one) became one of new bytes? Walks the inode's records
 * and stops as soon as a cap is passed: the total only grows from there,
 * so the answer is no. Cost: one seek and at most xattr_max_count + 1
 * steps, whatever an older database holds.
 * @return 0, -ENOSPC a cap would be passed, -EIO
 */
static int xattr_cap_check(struct mgr_db *db, struct mgr_txn *txn,
			   uint64_t ino, uint64_t old, uint64_t new)
{
	struct xcap x = { old ? 0 : 1, new - old, db->xattr_max_count,
			  db->xattr_max_bytes };
	uint8_t kb[8];
	int rc;

	if (x.count > x.max_count || x.bytes > x.max_bytes)
		return -ENOSPC;
	rc = mgr_kv_scan(txn->kv, MGR_KV_XATTRS, kb, db_key(kb, ino, NULL, 0),
			 8, xcap_one, &x);
	if (rc < 0)
		return rc;
	return rc ? -ENOSPC : 0;
}

/* Set xattr ino/name; a new or growing one is checked first (headroom
 * rule, per-inode caps). */
int mgr_db_xattr_put(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		     const char *name, size_t len, const void *val,
		     size_t vlen)
{
	uint8_t kb[MGR_KEY_MAX];
	const void *o;
	size_t kl, ol;
	int rc;

	if (len == 0 || len > PROTO_MAX_XATTR_NAME)
		return -EINVAL;
	kl = db_key(kb, ino, name, len);
	rc = mgr_kv_get(txn->kv, MGR_KV_XATTRS, kb, kl, &o, &ol);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc || vlen > ol) {
		uint64_t old = rc ? 0 : len + ol;

		rc = db_room(db, txn, 0);
		if (!rc)
			rc = xattr_cap_check(db, txn, ino, old, len + vlen);
		if (rc)
			return rc;
	}
	return mgr_kv_put(txn->kv, MGR_KV_XATTRS, kb, kl, val, vlen, 0);
}

/* Remove xattr ino/name. */
int mgr_db_xattr_del(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		     const char *name, size_t len)
{
	uint8_t kb[MGR_KEY_MAX];
	int rc;

	(void)db;
	if (len == 0 || len > PROTO_MAX_XATTR_NAME)
		return -ENODATA;
	rc = mgr_kv_del(txn->kv, MGR_KV_XATTRS, kb, db_key(kb, ino, name, len));
	return rc == -ENOENT ? -ENODATA : rc;
}

/* A listing of xattr names in progress (mgr_kv_scan's argument). */
struct xl_walk {
	mgr_db_xname_fn fn;
	void *arg;
};

/* One xattr record: hand its name to the caller's fn. */
static int xl_one(void *arg, const void *key, size_t klen, const void *val,
		  size_t vlen)
{
	struct xl_walk *w = arg;

	(void)val;
	(void)vlen;
	if (klen <= 8)
		return 0;
	return w->fn(w->arg, (const char *)key + 8, klen - 8);
}

/* Walk the names of ino's xattrs in name order. */
int mgr_db_xattr_list(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		      mgr_db_xname_fn fn, void *arg)
{
	struct xl_walk w = { fn, arg };
	uint8_t kb[8];

	(void)db;
	return mgr_kv_scan(txn->kv, MGR_KV_XATTRS, kb, db_key(kb, ino, NULL, 0),
			   8, xl_one, &w);
}

/* Mark ino as an orphan (nlink 0, stripe objects not yet removed); the
 * value is the freer's uid, 4 bytes big-endian. */
int mgr_db_orphan_add(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		      uint32_t freer)
{
	uint8_t kb[8], vb[4] = { (uint8_t)(freer >> 24), (uint8_t)(freer >> 16),
				 (uint8_t)(freer >> 8), (uint8_t)freer };

	(void)db;
	return mgr_kv_put(txn->kv, MGR_KV_ORPHANS, kb, db_key(kb, ino, NULL, 0),
			  vb, sizeof(vb), 0);
}

/* Is ino marked as an orphan, and by whom? An empty value is a mark from
 * before the freer was kept. */
int mgr_db_orphan_freer(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
			uint32_t *freer)
{
	uint8_t kb[8];
	const void *d;
	const uint8_t *v;
	size_t dl;
	int rc = mgr_kv_get(txn->kv, MGR_KV_ORPHANS, kb,
			    db_key(kb, ino, NULL, 0), &d, &dl);

	(void)db;
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	v = d;
	*freer = dl == 4 ? (uint32_t)v[0] << 24 | (uint32_t)v[1] << 16 |
			   (uint32_t)v[2] << 8 | v[3]
			 : MGR_DB_UID_NONE;
	return 1;
}

/* Is ino marked as an orphan? */
int mgr_db_orphan_is(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino)
{
	uint32_t freer;

	return mgr_db_orphan_freer(db, txn, ino, &freer);
}

/* Take the first key of a walk. @return 1 (stop) */
static int first_key(void *arg, const void *key, size_t klen,
		     const void *val, size_t vlen)
{
	uint64_t *ino = arg, be;

	(void)val;
	(void)vlen;
	if (klen != 8)
		return -EIO;
	memcpy(&be, key, 8);
	*ino = be64toh(be);
	return 1;
}

/* The first orphan above after: one seek, O(log orphans). */
int mgr_db_orphan_next(struct mgr_db *db, struct mgr_txn *txn, uint64_t after,
		       uint64_t *ino)
{
	uint8_t kb[8];
	int rc;

	(void)db;
	if (after == UINT64_MAX)
		return -ENOENT;
	rc = mgr_kv_scan(txn->kv, MGR_KV_ORPHANS, kb,
			 db_key(kb, after + 1, NULL, 0), 0, first_key, ino);
	if (rc == 0)
		return -ENOENT;
	return rc < 0 ? rc : 0;
}

/* Post-increment the layout rotation counter. */
int mgr_db_rotate(struct mgr_db *db, struct mgr_txn *txn, uint64_t *val)
{
	int rc = meta_get_u64(txn, "rotation", val, 0);

	(void)db;
	return rc ? rc : meta_put_u64(txn, "rotation", *val + 1);
}

/* Create the root directory and fsid in a fresh store. */
static int db_format(struct mgr_db *db, struct mgr_txn *txn)
{
	struct mgr_inode root = { 0 };
	uint64_t fsid = 0;
	int rc;

	if (getrandom(&fsid, sizeof(fsid), 0) != sizeof(fsid))
		return -EIO;
	mgr_db_now(&root.ctime);
	root.atime = root.mtime = root.ctime;
	root.mode = S_IFDIR | 0755;
	root.nlink = 2;
	root.parent = MGR_ROOT_INO;
	root.next_seq = MGR_SEQ_FIRST;
	rc = mgr_db_inode_put(db, txn, MGR_ROOT_INO, &root);
	if (!rc)
		rc = meta_put_u64(txn, "next_ino", MGR_ROOT_INO + 1);
	if (!rc)
		rc = meta_put_u64(txn, "ninodes", 1);
	if (!rc)
		rc = meta_put_u64(txn, "fsid", fsid);
	return rc;
}

/* The defaults; see mgr_db.h. */
void mgr_db_limits_default(struct mgr_db_limits *l)
{
	l->db_size = MGR_DB_DEFAULT_SIZE;
	l->xattr_max_count = MGR_XATTR_DEFAULT_COUNT;
	l->xattr_max_bytes = MGR_XATTR_DEFAULT_BYTES;
}

/* Is every limit within its range? */
static int db_limits_ok(const struct mgr_db_limits *l)
{
	return l->db_size >= MGR_DB_MIN_SIZE && l->db_size <= MGR_DB_MAX_SIZE &&
	       l->xattr_max_count >= 1 &&
	       l->xattr_max_count <= MGR_XATTR_MAX_COUNT &&
	       l->xattr_max_bytes >= MGR_XATTR_MIN_BYTES &&
	       l->xattr_max_bytes <= MGR_XATTR_MAX_BYTES;
}

/* Open an LMDB store in dir with the default limits (tests). */
int mgr_db_open(struct mgr_db **out, const char *dir)
{
	struct mgr_kv_conf kc = { .kind = MGR_KV_LMDB, .dir = dir };
	struct mgr_db_limits l;
	char msg[256];
	int rc;

	mgr_db_limits_default(&l);
	rc = mgr_db_open_store(out, &kc, &l, 1, msg, sizeof(msg));
	if (rc && msg[0])
		log_err("%s", msg);
	return rc;
}

/* Read the fsid; format a store that has none. One write txn. */
static int db_load(struct mgr_db *db)
{
	struct mgr_txn *txn;
	uint64_t v;
	int rc = mgr_db_begin(db, 0, &txn);

	if (rc)
		return rc;
	rc = meta_get_u64(txn, "fsid", &v, 0);
	if (!rc && v == 0) {
		rc = db_format(db, txn);
		if (!rc)
			rc = meta_get_u64(txn, "fsid", &v, 0);
	}
	if (rc) {
		mgr_db_abort(txn);
		return rc;
	}
	db->fsid = v;
	return mgr_db_commit(txn);
}

/* Open the store kc names with lim's map and caps; format a new store. */
int mgr_db_open_store(struct mgr_db **out, const struct mgr_kv_conf *kc,
		      const struct mgr_db_limits *lim, int create, char *msg,
		      size_t msgcap)
{
	struct mgr_kv_conf c = *kc;
	struct mgr_db *db;
	int rc;

	if (msgcap)
		msg[0] = '\0';
	if (!db_limits_ok(lim)) {
		snprintf(msg, msgcap, "a namespace limit is out of its range");
		return -EINVAL;
	}
	db = calloc(1, sizeof(*db));
	if (!db)
		return -ENOMEM;
	db->xattr_max_count = lim->xattr_max_count;
	db->xattr_max_bytes = lim->xattr_max_bytes;
	c.map_size = lim->db_size;
	rc = mgr_kv_open(&c, create, &db->kv, msg, msgcap);
	if (rc)
		goto out_free_db;
	if (mgr_kv_lmdb_space(db->kv, &db->map_pages, &db->reserve_pages))
		db->map_pages = db->reserve_pages = 0;
	rc = db_load(db);
	if (rc) {
		snprintf(msg, msgcap, "cannot load the namespace from the %s "
			 "store: %s", mgr_kv_kind_name(c.kind), strerror(-rc));
		goto out_close_kv;
	}
	*out = db;
	return 0;

out_close_kv:
	mgr_kv_close(db->kv);
out_free_db:
	free(db);
	return rc;
}

/* Open the store kc names for reading only (see mgr_db.h): no write
 * transaction, so nothing waits for a running mgr's writer lock. */
int mgr_db_open_rdonly(struct mgr_db **out, const struct mgr_kv_conf *kc,
		       char *msg, size_t msgcap)
{
	struct mgr_kv_conf c = *kc;
	struct mgr_txn *txn;
	struct mgr_db *db;
	int rc;

	if (msgcap)
		msg[0] = '\0';
	db = calloc(1, sizeof(*db));
	if (!db)
		return -ENOMEM;
	c.rdonly = 1;
	rc = mgr_kv_open(&c, 0, &db->kv, msg, msgcap);
	if (rc)
		goto out_free_db;
	rc = mgr_db_begin(db, 1, &txn);
	if (!rc) {
		rc = meta_get_u64(txn, "fsid", &db->fsid, 0);
		mgr_db_abort(txn);
	}
	if (!rc && db->fsid == 0)
		rc = -ENOENT;
	if (rc) {
		snprintf(msg, msgcap, "the %s store holds no rpfs namespace%s: %s",
			 mgr_kv_kind_name(c.kind), rc == -ENOENT ?
			 " (run rpfs mkfs)" : "", strerror(-rc));
		goto out_close_kv;
	}
	*out = db;
	return 0;

out_close_kv:
	mgr_kv_close(db->kv);
out_free_db:
	free(db);
	return rc;
}

/* Serialize the iod table: u16 n, then per iod u16 port, u8 len, host. */
static size_t iodtab_pack(uint8_t *buf, const struct mgr_iod *iods, uint16_t n)
{
	size_t off = 2;

	memcpy(buf, &n, 2);
	for (uint16_t i = 0; i < n; i++) {
		uint8_t hl = (uint8_t)strlen(iods[i].host);

		memcpy(buf + off, &iods[i].port, 2);
		buf[off + 2] = hl;
		memcpy(buf + off + 3, iods[i].host, hl);
		off += 3 + hl;
	}
	return off;
}

/* Parse a stored iod table; @return 0 or -EIO when corrupt. */
static int iodtab_unpack(const uint8_t *p, size_t len, struct mgr_iod *iods,
			 uint16_t *n)
{
	size_t off = 2;

	if (len < 2)
		return -EIO;
	memcpy(n, p, 2);
	if (*n == 0 || *n > PROTO_MAX_IODS)
		return -EIO;
	for (uint16_t i = 0; i < *n; i++) {
		if (off + 3 > len || off + 3 + p[off + 2] > len)
			return -EIO;
		memcpy(&iods[i].port, p + off, 2);
		memcpy(iods[i].host, p + off + 3, p[off + 2]);
		iods[i].host[p[off + 2]] = '\0';
		off += 3 + p[off + 2];
	}
	return off == len ? 0 : -EIO;
}
/* Compare the stored table with the given one; describe the first difference. */
static int iodtab_diff(const struct mgr_iod *old, uint16_t on,
		       const struct mgr_iod *cur, uint16_t cn, char *msg,
		       size_t cap)
{
	for (uint16_t i = 0; i < on || i < cn; i++) {
		if (i >= on) {
			snprintf(msg, cap, "the database has %u iods, this table %u (extra iod %s:%u)",
				 on, cn, cur[i].host, cur[i].port);
			return -EEXIST;
		}
		if (i >= cn) {
			snprintf(msg, cap, "the database has %u iods, this table %u (missing iod %u %s:%u)",
				 on, cn, i, old[i].host, old[i].port);
			return -EEXIST;
		}
		if (strcmp(old[i].host, cur[i].host) || old[i].port != cur[i].port) {
			snprintf(msg, cap, "iod %u is %s:%u in the database but %s:%u in this table",
				 i, old[i].host, old[i].port, cur[i].host, cur[i].port);
			return -EEXIST;
		}
	}
	return 0;
}

/* Record the iod table at first start, else compare it with the stored
 * one. @return 0, -EEXIST (msg says what differs), -EIO */
static int config_iods(struct mgr_txn *txn, const struct mgr_iod *iods,
		       uint16_t n, char *msg, size_t msgcap)
{
	static uint8_t buf[2 + PROTO_MAX_IODS * (3 + PROTO_MAX_HOST)];
	static struct mgr_iod old[PROTO_MAX_IODS];
	const void *d;
	size_t dl;
	uint16_t on;
	int rc = mgr_kv_get(txn->kv, MGR_KV_META, "iods", 4, &d, &dl);

	if (rc == -ENOENT)
		return mgr_kv_put(txn->kv, MGR_KV_META, "iods", 4, buf,
				  iodtab_pack(buf, iods, n), 0);
	if (rc)
		return rc;
	rc = iodtab_unpack(d, dl, old, &on);
	if (rc) {
		snprintf(msg, msgcap, "stored iod table is corrupt");
		return rc;
	}
	return iodtab_diff(old, on, iods, n, msg, msgcap);
}

/* Form the mirror groups from the iods' domains; record them at first
 * start (of a version with mirroring), else they must equal the stored
 * ones. Stored as u16 n, then n x (u16, u16), host order.
 * @return 0, -EINVAL (domains cannot pair), -EEXIST (differ), -EIO */
static int config_groups(struct mgr_db *db, struct mgr_txn *txn,
			 const struct mgr_iod *iods, uint16_t n, char *msg,
			 size_t msgcap)
{
	static uint16_t buf[1 + PROTO_MAX_IODS];
	const char *doms[PROTO_MAX_IODS];
	const void *d;
	size_t dl, len;
	uint16_t ng;
	int rc;

	for (uint16_t i = 0; i < n; i++)
		doms[i] = iods[i].domain;
	rc = stripe_groups_form(doms, n, db->groups, &ng, msg, msgcap);
	if (rc)
		return rc;
	db->ngroups = ng;
	buf[0] = ng;
	memcpy(buf + 1, db->groups, ng * sizeof(struct proto_group));
	len = 2 + ng * sizeof(struct proto_group);
	rc = mgr_kv_get(txn->kv, MGR_KV_META, "groups", 6, &d, &dl);
	if (rc == -ENOENT)
		return mgr_kv_put(txn->kv, MGR_KV_META, "groups", 6, buf, len, 0);
	if (rc)
		return rc;
	if (dl != len || memcmp(d, buf, dl)) {
		snprintf(msg, msgcap, "the mirror groups formed from the failure "
			 "domains differ from the ones recorded in the database");
		return -EEXIST;
	}
	return 0;
}

/* Resolve the default layout from the stored one and the given values
 * (0 = not given): a mirror change without a count takes the full width.
 * @return 0, -EINVAL (msg says why) */
static int config_layout(struct mgr_db *db, struct proto_layout *lay,
			 uint32_t unit, uint16_t count, uint8_t mirror,
			 char *msg, size_t msgcap)
{
	uint16_t width;

	if (unit)
		lay->unit = unit;
	if (mirror && mirror != lay->mirror && !count)
		lay->count = 0;
	if (mirror)
		lay->mirror = mirror;
	if (count)
		lay->count = count;
	if (lay->mirror == 2 && db->ngroups == 0) {
		snprintf(msg, msgcap, "mirror=2 needs at least 2 iods");
		return -EINVAL;
	}
	width = lay->mirror == 2 ? db->ngroups : db->niods;
	if (count > width) {
		snprintf(msg, msgcap, "stripe count %u is more than the %u mirror "
			 "groups", count, width);
		return -EINVAL;
	}
	if (lay->count == 0 || lay->count > width)
		lay->count = width;
	return 0;
}

/* Record or verify the iod table, the mirror groups and the default
 * layout (one write txn). */
int mgr_db_config(struct mgr_db *db, const struct mgr_iod *iods, uint16_t n,
		  uint32_t unit, uint16_t count, uint8_t mirror, char *msg,
		  size_t msgcap)
{
	struct proto_layout lay, stored;
	struct mgr_txn *txn;
	const void *d;
	size_t dl;
	int rc, have = 0;

	if (n == 0 || n > PROTO_MAX_IODS || mirror > 2 ||
	    (mirror != 2 && count > n))
		return -EINVAL;
	memset(&lay, 0, sizeof(lay)); /* padding reaches the disk */
	lay.unit = 65536;
	lay.count = n;
	lay.mirror = 1;
	rc = mgr_db_begin(db, 0, &txn);
	if (rc)
		return rc;
	db->niods = n;
	rc = config_iods(txn, iods, n, msg, msgcap);
	if (!rc)
		rc = config_groups(db, txn, iods, n, msg, msgcap);
	if (rc)
		goto out_abort;
	rc = mgr_kv_get(txn->kv, MGR_KV_META, "deflayout", 9, &d, &dl);
	if (rc == 0 && (dl == sizeof(stored) || dl == 8)) {
		memset(&stored, 0, sizeof(stored));
		memcpy(&stored, d, dl); /* 8: before mirroring */
		if (!stored.mirror)
			stored.mirror = 1;
		memcpy(&lay, &stored, sizeof(lay));
		have = 1;
	} else if (rc && rc != -ENOENT) {
		goto out_abort;
	}
	rc = config_layout(db, &lay, unit, count, mirror, msg, msgcap);
	if (rc)
		goto out_abort;
	if (have && (lay.unit != stored.unit || lay.count != stored.count ||
		     lay.mirror != stored.mirror))
		log_notice("default layout changed from unit=%u,count=%u,mirror=%u "
			   "to unit=%u,count=%u,mirror=%u", stored.unit, stored.count,
			   stored.mirror, lay.unit, lay.count, lay.mirror);
	rc = mgr_kv_put(txn->kv, MGR_KV_META, "deflayout", 9, &lay,
			sizeof(lay), 0);
	if (rc)
		goto out_abort;
	rc = mgr_db_commit(txn);
	if (rc)
		return rc;
	memcpy(db->iods, iods, n * sizeof(*iods));
	db->deflayout = lay;
	return 0;

out_abort:
	mgr_db_abort(txn);
	return rc;
}

/* Stale record key: u16 iod, u64 ino, both big-endian (a cursor walks
 * one iod's records in inode order). */
static size_t stale_key(uint8_t *k, uint16_t iod, uint64_t ino)
{
	uint16_t bi = htobe16(iod);
	uint64_t bo = htobe64(ino);

	memcpy(k, &bi, 2);
	memcpy(k + 2, &bo, 8);
	return 10;
}

/* The generation of a stale record's value (empty: written before
 * generations, 0). @return 0, -EIO (a value of another size) */
static int stale_gen(const void *d, size_t dl, uint64_t *gen)
{
	if (dl == 0) {
		*gen = 0;
		return 0;
	}
	if (dl != 8)
		return -EIO;
	memcpy(gen, d, 8);
	return 0;
}

/* The (iod, ino) of a stale key. @return 0, -EIO (not a stale key) */
static int stale_unkey(const void *k, size_t kl, uint16_t *iod, uint64_t *ino)
{
	uint16_t bi;
	uint64_t bo;

	if (kl != 10)
		return -EIO;
	memcpy(&bi, k, 2);
	memcpy(&bo, (const uint8_t *)k + 2, 8);
	*iod = be16toh(bi);
	*ino = be64toh(bo);
	return 0;
}

/* See mgr_db.h. Cost: a counter update and one insert. */
int mgr_db_stale_add(struct mgr_db *db, struct mgr_txn *txn, uint16_t iod,
		     uint64_t ino, uint64_t *gen)
{
	uint8_t kb[10];
	uint64_t seq;
	int rc = meta_get_u64(txn, "stale_seq", &seq, 0);

	(void)db;
	if (rc)
		return rc;
	seq++;
	rc = meta_put_u64(txn, "stale_seq", seq);
	if (!rc)
		rc = mgr_kv_put(txn->kv, MGR_KV_STALE, kb,
				stale_key(kb, iod, ino), &seq, 8, 0);
	if (rc)
		return rc;
	stale_touch(txn);
	if (gen)
		*gen = seq;
	return 0;
}

/* See mgr_db.h. */
int mgr_db_stale_get(struct mgr_db *db, struct mgr_txn *txn, uint16_t iod,
		     uint64_t ino, uint64_t *gen)
{
	uint8_t kb[10];
	const void *d;
	size_t dl;
	uint64_t g;
	int rc = mgr_kv_get(txn->kv, MGR_KV_STALE, kb, stale_key(kb, iod, ino),
			    &d, &dl);

	(void)db;
	if (rc)
		return rc;
	rc = stale_gen(d, dl, &g);
	if (!rc && gen)
		*gen = g;
	return rc;
}

/* See mgr_db.h. Cost: one count. */
int mgr_db_stale_total(struct mgr_db *db, struct mgr_txn *txn, uint64_t *n)
{
	(void)db;
	return mgr_kv_count(txn->kv, MGR_KV_STALE, n);
}

/* See mgr_db.h. Cost: one lookup and one delete. */
int mgr_db_stale_del_if(struct mgr_db *db, struct mgr_txn *txn, uint16_t iod,
			uint64_t ino, uint64_t gen)
{
	uint8_t kb[10];
	uint64_t cur;
	int rc = mgr_db_stale_get(db, txn, iod, ino, &cur);

	if (rc)
		return rc;
	if (cur != gen)
		return -EAGAIN;
	rc = mgr_kv_del(txn->kv, MGR_KV_STALE, kb, stale_key(kb, iod, ino));
	if (!rc)
		stale_touch(txn);
	return rc;
}

/* Output of a listing, and the walk's filter. */
struct stale_page {
	uint32_t max, n;
	uint64_t *inos, *gens;         /* mgr_db_stale_list */
	struct mgr_stale_rec *recs;    /* mgr_db_stale_list_all */
	uint64_t *counts;              /* mgr_db_stale_count: per iod */
	uint16_t ncounts;
};

/* One stale record of a listing: take it; stop when the page is full.
 * @return 0 go on, 1 stop, -EIO a corrupt record */
static int stale_take(void *arg, const void *key, size_t klen,
		      const void *val, size_t vlen)
{
	struct stale_page *pg = arg;
	uint16_t iod;
	uint64_t ino, gen;

	if (stale_unkey(key, klen, &iod, &ino) || stale_gen(val, vlen, &gen)) {
		log_err("stale record of %zu key bytes, %zu value bytes is "
			"corrupt", klen, vlen);
		return -EIO;
	}
	if (pg->recs) {
		pg->recs[pg->n] = (struct mgr_stale_rec){ iod, ino, gen };
	} else {
		pg->inos[pg->n] = ino;
		if (pg->gens)
			pg->gens[pg->n] = gen;
	}
	return ++pg->n >= pg->max;
}

/* Walk the stale records from key kb (inclusive), only iod's (the first
 * plen bytes: 2) or all (0). @return 0, -EIO */
static int stale_walk(struct mgr_txn *txn, const uint8_t *kb, size_t plen,
		      struct stale_page *pg)
{
	int rc = mgr_kv_scan(txn->kv, MGR_KV_STALE, kb, 10, plen, stale_take,
			     pg);

	return rc < 0 ? rc : 0;
}

/* See mgr_db.h. */
int mgr_db_stale_list(struct mgr_db *db, struct mgr_txn *txn, uint16_t iod,
		      uint64_t after, uint32_t max, uint64_t *inos,
		      uint64_t *gens, uint32_t *n)
{
	struct stale_page pg = { max, 0, inos, gens, NULL, NULL, 0 };
	uint8_t kb[10];
	int rc;

	(void)db;
	*n = 0;
	if (max == 0 || after == UINT64_MAX)
		return 0;
	stale_key(kb, iod, after + 1);
	rc = stale_walk(txn, kb, 2, &pg);
	*n = pg.n;
	return rc;
}

/* See mgr_db.h. */
int mgr_db_stale_list_all(struct mgr_db *db, struct mgr_txn *txn,
			  uint16_t after_iod, uint64_t after_ino, uint32_t max,
			  struct mgr_stale_rec *recs, uint32_t *n)
{
	struct stale_page pg = { max, 0, NULL, NULL, recs, NULL, 0 };
	uint8_t kb[10];
	int rc;

	(void)db;
	*n = 0;
	if (max == 0)
		return 0;
	if (after_ino == UINT64_MAX) {
		if (after_iod == UINT16_MAX)
			return 0;
		stale_key(kb, after_iod + 1, 0);
	} else {
		stale_key(kb, after_iod, after_ino + 1);
	}
	rc = stale_walk(txn, kb, 0, &pg);
	*n = pg.n;
	return rc;
}

/* See mgr_db.h. */
uint64_t mgr_db_stale_version(const struct mgr_db *db)
{
	return __atomic_load_n(&db->stale_ver, __ATOMIC_ACQUIRE);
}

/* Count one stale record under its iod (keys of another size skipped). */
static int stale_count_one(void *arg, const void *key, size_t klen,
			   const void *val, size_t vlen)
{
	struct stale_page *pg = arg;
	uint16_t be;

	(void)val;
	(void)vlen;
	if (klen != 10)
		return 0;
	memcpy(&be, key, 2);
	if (be16toh(be) < pg->ncounts)
		pg->counts[be16toh(be)]++;
	return 0;
}

/* See mgr_db.h. Cost: a walk over every stale record. */
int mgr_db_stale_count(struct mgr_db *db, uint64_t *counts, uint16_t n)
{
	struct stale_page pg = { .counts = counts, .ncounts = n };
	uint8_t kb[10];
	struct mgr_txn *txn;
	int rc = mgr_db_begin(db, 1, &txn);

	if (rc)
		return rc;
	memset(counts, 0, n * sizeof(*counts));
	rc = mgr_kv_scan(txn->kv, MGR_KV_STALE, kb, stale_key(kb, 0, 0), 0,
			 stale_count_one, &pg);
	mgr_db_abort(txn);
	return rc;
}

/* Close the store and free db (NULL: nothing). */
void mgr_db_close(struct mgr_db *db)
{
	if (!db)
		return;
	mgr_kv_close(db->kv);
	free(db);
}

/* See mgr_db.h. */
int mgr_db_lockmark_get(struct mgr_db *db, int *held)
{
	struct mgr_txn *txn;
	uint64_t v;
	int rc = mgr_db_begin(db, 1, &txn);

	if (rc)
		return rc;
	rc = meta_get_u64(txn, "lockmark", &v, 0);
	mgr_db_abort(txn);
	if (rc)
		return rc;
	*held = v != 0;
	return 0;
}

/* See mgr_db.h. Cost: one synced commit. */
int mgr_db_lockmark_set(struct mgr_db *db, int held)
{
	struct mgr_txn *txn;
	int rc = mgr_db_begin(db, 0, &txn);

	if (rc)
		return rc;
	rc = meta_put_u64(txn, "lockmark", held ? 1 : 0);
	if (rc) {
		mgr_db_abort(txn);
		return rc;
	}
	return mgr_db_commit(txn);
}
