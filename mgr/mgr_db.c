/* mgr_db.c - LMDB storage of the mgr namespace: records, keys, counters. */
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

#define MGR_DB_MAXDBS 8
#define MGR_DB_META_PAGES 2     /* LMDB's two meta pages */
#define MGR_DB_FREE_DBI 0       /* LMDB's free list (as mdb_stat(1) reads it) */
#define MGR_DB_MAIN_DBI 1       /* LMDB's main database: names the others */
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

/* Map an LMDB or errno result to -errno and log unexpected ones. */
static int db_err(int rc, const char *what)
{
	if (rc == 0)
		return 0;
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL)
		return -ENOSPC;
	if (rc == MDB_KEYEXIST)
		return -EEXIST;
	log_err("lmdb %s: %s", what, mdb_strerror(rc));
	return rc > 0 && rc < 4096 ? -rc : -EIO;
}

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

/* Read a u64 from meta; *v = def when missing. */
static int meta_get_u64(struct mgr_db *db, MDB_txn *txn, const char *key,
			uint64_t *v, uint64_t def)
{
	MDB_val k = { strlen(key), (void *)key }, d;
	int rc = mdb_get(txn, db->meta, &k, &d);

	if (rc == MDB_NOTFOUND) {
		*v = def;
		return 0;
	}
	if (rc)
		return db_err(rc, "meta get");
	if (d.mv_size != 8)
		return -EIO;
	memcpy(v, d.mv_data, 8);
	return 0;
}

/* Write a u64 to meta. */
static int meta_put_u64(struct mgr_db *db, MDB_txn *txn, const char *key,
			uint64_t v)
{
	MDB_val k = { strlen(key), (void *)key }, d = { 8, &v };

	return db_err(mdb_put(txn, db->meta, &k, &d, 0), "meta put");
}

/* The store whose stale records the calling thread's open write txn
 * changed (NULL: none); mgr_db_commit bumps its stale version. Per thread,
 * as the transactions are (one at a time per thread, no MDB_NOTLS). */
static __thread struct mgr_db *stale_dirty;

/* Bytes of dirent names the calling thread's open write txn removed and
 * no dirent_add has used yet: the credit that lets a rename's add into the
 * upper half of the reserve (db_room). Per thread, as stale_dirty. */
static __thread uint64_t name_credit;

/* Remember that the current txn changed db's stale records. */
static void stale_touch(struct mgr_db *db)
{
	stale_dirty = db;
}

/* Begin a transaction on db's environment. */
int mgr_db_begin(struct mgr_db *db, int rdonly, MDB_txn **txn)
{
	if (!rdonly)
		name_credit = 0;
	return db_err(mdb_txn_begin(db->env, NULL, rdonly ? MDB_RDONLY : 0, txn),
		      "txn begin");
}

/* Commit latency of the process (relaxed atomics; mgr_db_commit_latency). */
static struct metrics_hist commit_lat;

/* See mgr_db.h. */
const struct metrics_hist *mgr_db_commit_latency(void)
{
	return &commit_lat;
}

/* Commit; with default flags this fsyncs, so an acknowledged op survives.
 * Then, if the txn changed stale records, bump the stale version (after
 * the commit: a reader that sees the new version sees the records too). */
int mgr_db_commit(MDB_txn *txn)
{
	struct mgr_db *dirty = stale_dirty;
	uint64_t t0 = metrics_now_ns();
	int rc;

	stale_dirty = NULL;
	name_credit = 0;
	rc = db_err(mdb_txn_commit(txn), "commit");
	metrics_hist_add(&commit_lat, metrics_now_ns() - t0);
	if (!rc && dirty)
		__atomic_add_fetch(&dirty->stale_ver, 1, __ATOMIC_RELEASE);
	return rc;
}

/* Abort a transaction (its stale changes, if any, are gone with it). */
void mgr_db_abort(MDB_txn *txn)
{
	stale_dirty = NULL;
	name_credit = 0;
	mdb_txn_abort(txn);
}

/* Sum the B-tree pages of every database in txn's view; see mgr_db.h. */
int mgr_db_usage(struct mgr_db *db, MDB_txn *txn, uint64_t *used,
		 uint64_t *limit)
{
	const MDB_dbi all[] = { MGR_DB_FREE_DBI, MGR_DB_MAIN_DBI, db->inodes,
				db->dirents, db->dirseq, db->xattrs,
				db->orphans, db->meta, db->stale };
	uint64_t n = MGR_DB_META_PAGES;
	MDB_stat st;

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		int rc = mdb_stat(txn, all[i], &st);

		if (rc)
			return db_err(rc, "stat");
		n += st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages;
	}
	*used = n;
	if (limit)
		*limit = db->map_pages - db->reserve_pages;
	return 0;
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
 * full and when it has room again. Cost: mgr_db_usage.
 * @return 0, -ENOSPC, -EIO
 */
static int db_room(struct mgr_db *db, MDB_txn *txn, int credited)
{
	uint64_t used, stop;
	int rc = mgr_db_usage(db, txn, &used, &stop);

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

/* Load and unpack inode ino (a version 1 or 2 record). Cost: one B-tree lookup, no copy of target. */
int mgr_db_inode_get(struct mgr_db *db, MDB_txn *txn, uint64_t ino,
		     struct mgr_inode *in)
{
	uint8_t kb[8];
	MDB_val k = { db_key(kb, ino, NULL, 0), kb }, d;
	struct mgr_irec r;
	int rc = mdb_get(txn, db->inodes, &k, &d);
	size_t hlen;

	if (rc)
		return db_err(rc, "inode get");
	if (d.mv_size < MGR_IREC_V1_LEN)
		return -EIO;
	memset(&r, 0, sizeof(r));
	memcpy(&r, d.mv_data, MGR_IREC_V1_LEN);
	if (r.version == 1) {
		hlen = MGR_IREC_V1_LEN;
		r.blocks = S_ISREG(r.mode) ? (r.size + 511) / 512 : 0;
	} else if (r.version == MGR_IREC_VERSION) {
		hlen = sizeof(r);
		if (d.mv_size < hlen)
			return -EIO;
		memcpy(&r, d.mv_data, hlen);
	} else {
		return -EIO;
	}
	if (d.mv_size != hlen + r.target_len)
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
	in->target = r.target_len ? (const char *)d.mv_data + hlen : NULL;
	return 0;
}

/* Pack and store inode ino, writing the record in place with MDB_RESERVE. */
int mgr_db_inode_put(struct mgr_db *db, MDB_txn *txn, uint64_t ino,
		     const struct mgr_inode *in)
{
	uint8_t kb[8];
	MDB_val k = { db_key(kb, ino, NULL, 0), kb };
	MDB_val d = { sizeof(struct mgr_irec) + in->target_len, NULL };
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
	int rc = mdb_put(txn, db->inodes, &k, &d, MDB_RESERVE);

	if (rc)
		return db_err(rc, "inode put");
	memcpy(d.mv_data, &r, sizeof(r));
	if (in->target_len)
		memmove((uint8_t *)d.mv_data + sizeof(r), in->target,
			in->target_len);
	return 0;
}

/* Delete every key of dbi starting with the 8-byte prefix of id. */
static int db_del_prefix(MDB_txn *txn, MDB_dbi dbi, uint64_t id)
{
	uint8_t kb[8];
	MDB_val k = { db_key(kb, id, NULL, 0), kb }, d;
	MDB_cursor *c;
	int rc = mdb_cursor_open(txn, dbi, &c);

	if (rc)
		return db_err(rc, "cursor open");
	rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size >= 8 && memcmp(k.mv_data, kb, 8) == 0) {
		rc = mdb_cursor_del(c, 0);
		if (rc)
			break;
		rc = mdb_cursor_get(c, &k, &d, MDB_GET_CURRENT);
		if (rc == EINVAL) /* cursor past the end after delete */
			rc = MDB_NOTFOUND;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : db_err(rc, "delete prefix");
}

static size_t stale_key(uint8_t *k, uint16_t iod, uint64_t ino);

/* Drop the stale records of a purged inode (its objects are gone). Cost:
 * nothing while no record exists (one O(1) stat), else one delete per iod
 * in a group. @return 0, -EIO */
static int stale_del_ino(struct mgr_db *db, MDB_txn *txn, uint64_t ino)
{
	MDB_stat st;
	int rc = mdb_stat(txn, db->stale, &st);

	if (rc)
		return db_err(rc, "stale stat");
	for (uint16_t g = 0; st.ms_entries && g < db->ngroups; g++) {
		for (int r = 0; r < 2; r++) {
			uint8_t kb[10];
			MDB_val k = { stale_key(kb, db->groups[g].iod[r], ino), kb };

			rc = mdb_del(txn, db->stale, &k, NULL);
			if (rc && rc != MDB_NOTFOUND)
				return db_err(rc, "stale del");
			if (rc == 0)
				stale_touch(db);
		}
	}
	return 0;
}

/* Delete inode ino with its xattrs, orphan mark and stale records, and
 * uncount it. */
int mgr_db_inode_del(struct mgr_db *db, MDB_txn *txn, uint64_t ino)
{
	uint8_t kb[8];
	MDB_val k = { db_key(kb, ino, NULL, 0), kb };
	uint64_t n;
	int rc = mdb_del(txn, db->inodes, &k, NULL);

	if (rc)
		return db_err(rc, "inode del");
	rc = mdb_del(txn, db->orphans, &k, NULL);
	if (rc && rc != MDB_NOTFOUND)
		return db_err(rc, "orphan del");
	rc = db_del_prefix(txn, db->xattrs, ino);
	if (!rc)
		rc = stale_del_ino(db, txn, ino);
	if (rc)
		return rc;
	rc = meta_get_u64(db, txn, "ninodes", &n, 1);
	if (rc)
		return rc;
	return meta_put_u64(db, txn, "ninodes", n ? n - 1 : 0);
}

/* Take the next inode number from the never-reused counter. */
int mgr_db_inode_alloc(struct mgr_db *db, MDB_txn *txn, uint64_t *ino)
{
	uint64_t next, n;
	int rc = db_room(db, txn, 0);

	if (!rc)
		rc = meta_get_u64(db, txn, "next_ino", &next, MGR_ROOT_INO + 1);

	if (!rc)
		rc = meta_put_u64(db, txn, "next_ino", next + 1);
	if (!rc)
		rc = meta_get_u64(db, txn, "ninodes", &n, 1);
	if (!rc)
		rc = meta_put_u64(db, txn, "ninodes", n + 1);
	if (!rc)
		*ino = next;
	return rc;
}

/* Inodes in use (for statfs). */
uint64_t mgr_db_inode_count(struct mgr_db *db, MDB_txn *txn)
{
	uint64_t n = 0;

	meta_get_u64(db, txn, "ninodes", &n, 1);
	return n;
}

/* Fetch the raw dirent value of parent/name. */
static int dirent_raw(struct mgr_db *db, MDB_txn *txn, uint64_t parent,
		      const char *name, size_t len, struct mgr_dval *v)
{
	uint8_t kb[MGR_KEY_MAX];
	MDB_val k, d;
	int rc;

	if (len == 0 || len > PROTO_MAX_NAME)
		return -ENOENT;
	k = (MDB_val){ db_key(kb, parent, name, len), kb };
	rc = mdb_get(txn, db->dirents, &k, &d);
	if (rc)
		return db_err(rc, "dirent get");
	if (d.mv_size != sizeof(*v))
		return -EIO;
	memcpy(v, d.mv_data, sizeof(*v));
	return 0;
}

/* Look up name in parent. */
int mgr_db_dirent_get(struct mgr_db *db, MDB_txn *txn, uint64_t parent,
		      const char *name, size_t len, uint64_t *child)
{
	struct mgr_dval v;
	int rc = dirent_raw(db, txn, parent, name, len, &v);

	if (!rc)
		*child = v.child;
	return rc;
}

/* Link name into parent with a fresh cookie; two puts (dirents, dirseq). */
int mgr_db_dirent_add(struct mgr_db *db, MDB_txn *txn, uint64_t parent,
		      struct mgr_inode *pdir, const char *name, size_t len,
		      uint64_t child)
{
	uint8_t kb[MGR_KEY_MAX], sb[16];
	struct mgr_dval v = { child, pdir->next_seq };
	uint64_t seq_be = htobe64(v.seq);
	MDB_val k, d = { sizeof(v), &v }, sk, sd = { len, (void *)name };
	int rc;

	if (len == 0 || len > PROTO_MAX_NAME)
		return -EINVAL;
	rc = db_room(db, txn, name_credit >= len);
	if (rc)
		return rc;
	k = (MDB_val){ db_key(kb, parent, name, len), kb };
	rc = mdb_put(txn, db->dirents, &k, &d, MDB_NOOVERWRITE);
	if (rc)
		return db_err(rc, "dirent add");
	sk = (MDB_val){ db_key(sb, parent, &seq_be, 8), sb };
	rc = mdb_put(txn, db->dirseq, &sk, &sd, 0);
	if (rc)
		return db_err(rc, "dirseq add");
	name_credit = name_credit >= len ? name_credit - len : 0;
	pdir->next_seq++;
	return 0;
}

/* Repoint parent/name at child, keeping its cookie (RENAME_EXCHANGE). */
int mgr_db_dirent_set(struct mgr_db *db, MDB_txn *txn, uint64_t parent,
		      const char *name, size_t len, uint64_t child)
{
	uint8_t kb[MGR_KEY_MAX];
	struct mgr_dval v;
	MDB_val k, d = { sizeof(v), &v };
	int rc = dirent_raw(db, txn, parent, name, len, &v);

	if (rc)
		return rc;
	v.child = child;
	k = (MDB_val){ db_key(kb, parent, name, len), kb };
	return db_err(mdb_put(txn, db->dirents, &k, &d, 0), "dirent set");
}

/* Unlink name from parent (both indexes). */
int mgr_db_dirent_del(struct mgr_db *db, MDB_txn *txn, uint64_t parent,
		      const char *name, size_t len)
{
	uint8_t kb[MGR_KEY_MAX], sb[16];
	struct mgr_dval v;
	uint64_t seq_be;
	MDB_val k, sk;
	int rc = dirent_raw(db, txn, parent, name, len, &v);

	if (rc)
		return rc;
	k = (MDB_val){ db_key(kb, parent, name, len), kb };
	rc = mdb_del(txn, db->dirents, &k, NULL);
	if (rc)
		return db_err(rc, "dirent del");
	seq_be = htobe64(v.seq);
	sk = (MDB_val){ db_key(sb, parent, &seq_be, 8), sb };
	rc = mdb_del(txn, db->dirseq, &sk, NULL);
	if (rc && rc != MDB_NOTFOUND)
		return db_err(rc, "dirseq del");
	name_credit += len;
	return 0;
}

/* Walk dirseq from (dir, after + 1). */
int mgr_db_readdir(struct mgr_db *db, MDB_txn *txn, uint64_t dir,
		   uint64_t after, mgr_db_dirent_fn fn, void *arg)
{
	uint8_t sb[16], pre[8];
	uint64_t seq_be = htobe64(after + 1), seq, child;
	MDB_val k = { db_key(sb, dir, &seq_be, 8), sb }, d;
	MDB_cursor *c;
	int rc, ret = 1;

	if (after == UINT64_MAX)
		return 1;
	db_key(pre, dir, NULL, 0);
	rc = mdb_cursor_open(txn, db->dirseq, &c);
	if (rc)
		return db_err(rc, "cursor open");
	for (rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) {
		if (k.mv_size != 16 || memcmp(k.mv_data, pre, 8) != 0)
			break;
		memcpy(&seq_be, (uint8_t *)k.mv_data + 8, 8);
		seq = be64toh(seq_be);
		if (mgr_db_dirent_get(db, txn, dir, d.mv_data, d.mv_size,
				      &child) != 0) {
			log_err("dirseq %llu/%llu has no dirent",
				(unsigned long long)dir, (unsigned long long)seq);
			continue;
		}
		if (fn(arg, seq, d.mv_data, d.mv_size, child)) {
			ret = 0;
			break;
		}
	}
	mdb_cursor_close(c);
	if (rc && rc != MDB_NOTFOUND)
		return db_err(rc, "readdir");
	return ret;
}

/* Stop at the first entry. */
static int dir_any(void *arg, uint64_t seq, const char *name, size_t len,
		   uint64_t child)
{
	return 1;
}

/* Is dir empty? Cost: one cursor seek. */
int mgr_db_dir_empty(struct mgr_db *db, MDB_txn *txn, uint64_t dir)
{
	return mgr_db_readdir(db, txn, dir, 0, dir_any, NULL);
}

/* Get xattr ino/name. */
int mgr_db_xattr_get(struct mgr_db *db, MDB_txn *txn, uint64_t ino,
		     const char *name, size_t len, const void **val,
		     size_t *vlen)
{
	uint8_t kb[MGR_KEY_MAX];
	MDB_val k, d;
	int rc;

	if (len == 0 || len > PROTO_MAX_XATTR_NAME)
		return -ENODATA;
	k = (MDB_val){ db_key(kb, ino, name, len), kb };
	rc = mdb_get(txn, db->xattrs, &k, &d);
	if (rc == MDB_NOTFOUND)
		return -ENODATA;
	if (rc)
		return db_err(rc, "xattr get");
	*val = d.mv_data;
	*vlen = d.mv_size;
	return 0;
}

/*
 * Would ino's xattrs stay within the caps if one of old bytes (name +
 * value; 0: a new one) became one of new bytes? Walks the inode's records
 * and stops as soon as a cap is passed: the total only grows from there,
 * so the answer is no. Cost: one cursor seek and at most xattr_max_count
 * + 1 steps, whatever an older database holds.
 * @return 0, -ENOSPC a cap would be passed, -EIO
 */
static int xattr_cap_check(struct mgr_db *db, MDB_txn *txn, uint64_t ino,
			   uint64_t old, uint64_t new)
{
	uint8_t kb[8];
	MDB_val k = { db_key(kb, ino, NULL, 0), kb }, d;
	uint64_t count = old ? 0 : 1, bytes = new - old;
	MDB_cursor *c;
	int rc = mdb_cursor_open(txn, db->xattrs, &c);

	if (rc)
		return db_err(rc, "cursor open");
	for (rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
	     rc == 0 && count <= db->xattr_max_count &&
	     bytes <= db->xattr_max_bytes;
	     rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) {
		if (k.mv_size <= 8 || memcmp(k.mv_data, kb, 8) != 0)
			break;
		count++;
		bytes += k.mv_size - 8 + d.mv_size;
	}
	mdb_cursor_close(c);
	if (rc && rc != MDB_NOTFOUND)
		return db_err(rc, "xattr usage");
	if (count > db->xattr_max_count || bytes > db->xattr_max_bytes)
		return -ENOSPC;
	return 0;
}

/* Set xattr ino/name; a new or growing one is checked first (headroom
 * rule, per-inode caps). */
int mgr_db_xattr_put(struct mgr_db *db, MDB_txn *txn, uint64_t ino,
		     const char *name, size_t len, const void *val,
		     size_t vlen)
{
	uint8_t kb[MGR_KEY_MAX];
	MDB_val k, d = { vlen, (void *)val }, o;
	int rc;

	if (len == 0 || len > PROTO_MAX_XATTR_NAME)
		return -EINVAL;
	k = (MDB_val){ db_key(kb, ino, name, len), kb };
	rc = mdb_get(txn, db->xattrs, &k, &o);
	if (rc && rc != MDB_NOTFOUND)
		return db_err(rc, "xattr get");
	if (rc || vlen > o.mv_size) {
		uint64_t old = rc ? 0 : len + o.mv_size;

		rc = db_room(db, txn, 0);
		if (!rc)
			rc = xattr_cap_check(db, txn, ino, old, len + vlen);
		if (rc)
			return rc;
	}
	return db_err(mdb_put(txn, db->xattrs, &k, &d, 0), "xattr put");
}

/* Remove xattr ino/name. */
int mgr_db_xattr_del(struct mgr_db *db, MDB_txn *txn, uint64_t ino,
		     const char *name, size_t len)
{
	uint8_t kb[MGR_KEY_MAX];
	MDB_val k;
	int rc;

	if (len == 0 || len > PROTO_MAX_XATTR_NAME)
		return -ENODATA;
	k = (MDB_val){ db_key(kb, ino, name, len), kb };
	rc = mdb_del(txn, db->xattrs, &k, NULL);
	if (rc == MDB_NOTFOUND)
		return -ENODATA;
	return db_err(rc, "xattr del");
}

/* Walk the names of ino's xattrs in name order. */
int mgr_db_xattr_list(struct mgr_db *db, MDB_txn *txn, uint64_t ino,
		      mgr_db_xname_fn fn, void *arg)
{
	uint8_t kb[8];
	MDB_val k = { db_key(kb, ino, NULL, 0), kb }, d;
	MDB_cursor *c;
	int rc, ret = 0;

	rc = mdb_cursor_open(txn, db->xattrs, &c);
	if (rc)
		return db_err(rc, "cursor open");
	for (rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) {
		if (k.mv_size <= 8 || memcmp(k.mv_data, kb, 8) != 0)
			break;
		ret = fn(arg, (const char *)k.mv_data + 8, k.mv_size - 8);
		if (ret)
			break;
	}
	mdb_cursor_close(c);
	if (rc && rc != MDB_NOTFOUND)
		return db_err(rc, "xattr list");
	return ret;
}

/* Mark ino as an orphan (nlink 0, stripe objects not yet removed); the
 * value is the freer's uid, 4 bytes big-endian. */
int mgr_db_orphan_add(struct mgr_db *db, MDB_txn *txn, uint64_t ino,
		      uint32_t freer)
{
	uint8_t kb[8], vb[4] = { (uint8_t)(freer >> 24), (uint8_t)(freer >> 16),
				 (uint8_t)(freer >> 8), (uint8_t)freer };
	MDB_val k = { db_key(kb, ino, NULL, 0), kb }, d = { sizeof(vb), vb };

	return db_err(mdb_put(txn, db->orphans, &k, &d, 0), "orphan add");
}

/* Is ino marked as an orphan, and by whom? An empty value is a mark from
 * before the freer was kept. */
int mgr_db_orphan_freer(struct mgr_db *db, MDB_txn *txn, uint64_t ino,
			uint32_t *freer)
{
	uint8_t kb[8];
	MDB_val k = { db_key(kb, ino, NULL, 0), kb }, d;
	const uint8_t *v;
	int rc = mdb_get(txn, db->orphans, &k, &d);

	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return db_err(rc, "orphan get");
	v = d.mv_data;
	*freer = d.mv_size == 4 ? (uint32_t)v[0] << 24 | (uint32_t)v[1] << 16 |
				  (uint32_t)v[2] << 8 | v[3]
				: MGR_DB_UID_NONE;
	return 1;
}

/* Is ino marked as an orphan? */
int mgr_db_orphan_is(struct mgr_db *db, MDB_txn *txn, uint64_t ino)
{
	uint32_t freer;

	return mgr_db_orphan_freer(db, txn, ino, &freer);
}

/* The first orphan above after: one cursor seek, O(log orphans). */
int mgr_db_orphan_next(struct mgr_db *db, MDB_txn *txn, uint64_t after,
		       uint64_t *ino)
{
	uint8_t kb[8];
	MDB_val k = { 0, kb }, d;
	MDB_cursor *c;
	uint64_t be;
	int rc;

	if (after == UINT64_MAX)
		return -ENOENT;
	k.mv_size = db_key(kb, after + 1, NULL, 0);
	rc = mdb_cursor_open(txn, db->orphans, &c);
	if (rc)
		return db_err(rc, "orphan cursor");
	rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
	if (rc == 0 && k.mv_size != 8)
		rc = MDB_CORRUPTED;
	if (rc == 0) {
		memcpy(&be, k.mv_data, 8);
		*ino = be64toh(be);
	}
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	return rc ? db_err(rc, "orphan next") : 0;
}

/* Post-increment the layout rotation counter. */
int mgr_db_rotate(struct mgr_db *db, MDB_txn *txn, uint64_t *val)
{
	int rc = meta_get_u64(db, txn, "rotation", val, 0);

	return rc ? rc : meta_put_u64(db, txn, "rotation", *val + 1);
}

/* Create the root directory and fsid in a fresh store. */
static int db_format(struct mgr_db *db, MDB_txn *txn)
{
	struct mgr_inode root = { 0 };
	uint64_t fsid = 0;

	if (getrandom(&fsid, sizeof(fsid), 0) != sizeof(fsid))
		return -EIO;
	mgr_db_now(&root.ctime);
	root.atime = root.mtime = root.ctime;
	root.mode = S_IFDIR | 0755;
	root.nlink = 2;
	root.parent = MGR_ROOT_INO;
	root.next_seq = MGR_SEQ_FIRST;
	int rc = mgr_db_inode_put(db, txn, MGR_ROOT_INO, &root);
	if (!rc)
		rc = meta_put_u64(db, txn, "next_ino", MGR_ROOT_INO + 1);
	if (!rc)
		rc = meta_put_u64(db, txn, "ninodes", 1);
	if (!rc)
		rc = meta_put_u64(db, txn, "fsid", fsid);
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

/*
 * After mdb_env_open: learn the map LMDB actually uses and size the
 * reserve, 1/64 of the map, at least 1 MiB and at most 64 MiB (HACKING
 * "Namespace space" says why that is enough for a delete). LMDB raises a
 * map smaller than the data already in the file to the data's size; that
 * would leave no reserve, so the map is raised by the reserve again.
 * @return 0, -EIO
 */
static int db_size_map(struct mgr_db *db, const char *dir, uint64_t asked)
{
	MDB_envinfo info;
	MDB_stat st;
	uint64_t psize, reserve;
	int rc = mdb_env_info(db->env, &info);

	if (!rc)
		rc = mdb_env_stat(db->env, &st);
	if (rc)
		return db_err(rc, "env info");
	psize = st.ms_psize;
	reserve = info.me_mapsize / 64;
	if (reserve < (1u << 20))
		reserve = 1u << 20;
	if (reserve > (64u << 20))
		reserve = 64u << 20;
	if (info.me_mapsize / psize > (asked + psize - 1) / psize) {
		log_warn("--db %s: the database holds %llu bytes, more than the "
			 "db_size of %llu: using %llu", dir,
			 (unsigned long long)info.me_mapsize,
			 (unsigned long long)asked,
			 (unsigned long long)(info.me_mapsize + reserve));
		rc = mdb_env_set_mapsize(db->env, info.me_mapsize + reserve);
		if (!rc)
			rc = mdb_env_info(db->env, &info);
		if (rc)
			return db_err(rc, "set mapsize");
	}
	db->map_pages = info.me_mapsize / psize;
	db->reserve_pages = reserve / psize;
	return 0;
}

/* Open with the default limits. */
int mgr_db_open(struct mgr_db **out, const char *dir)
{
	struct mgr_db_limits l;

	mgr_db_limits_default(&l);
	return mgr_db_open_limits(out, dir, &l);
}

/* Open the env and its named databases; format a new store. */
int mgr_db_open_limits(struct mgr_db **out, const char *dir,
		       const struct mgr_db_limits *lim)
{
	struct mgr_db *db;
	MDB_txn *txn;
	uint64_t v;
	int rc;

	if (!db_limits_ok(lim))
		return -EINVAL;
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	db = calloc(1, sizeof(*db));
	if (!db)
		return -ENOMEM;
	db->xattr_max_count = lim->xattr_max_count;
	db->xattr_max_bytes = lim->xattr_max_bytes;
	rc = mdb_env_create(&db->env);
	if (rc) {
		rc = db_err(rc, "env create");
		goto out_free_db;
	}
	rc = mdb_env_set_mapsize(db->env, lim->db_size);
	if (!rc)
		rc = mdb_env_set_maxdbs(db->env, MGR_DB_MAXDBS);
	if (!rc)
		rc = mdb_env_open(db->env, dir, 0, 0600);
	if (rc) {
		rc = db_err(rc, "env open");
		goto out_close_env;
	}
	rc = db_size_map(db, dir, lim->db_size);
	if (rc)
		goto out_close_env;
	rc = mdb_txn_begin(db->env, NULL, 0, &txn);
	if (rc) {
		rc = db_err(rc, "txn begin");
		goto out_close_env;
	}
	rc = mdb_dbi_open(txn, "inodes", MDB_CREATE, &db->inodes);
	if (!rc)
		rc = mdb_dbi_open(txn, "dirents", MDB_CREATE, &db->dirents);
	if (!rc)
		rc = mdb_dbi_open(txn, "dirseq", MDB_CREATE, &db->dirseq);
	if (!rc)
		rc = mdb_dbi_open(txn, "xattrs", MDB_CREATE, &db->xattrs);
	if (!rc)
		rc = mdb_dbi_open(txn, "orphans", MDB_CREATE, &db->orphans);
	if (!rc)
		rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &db->meta);
	if (!rc)
		rc = mdb_dbi_open(txn, "stale", MDB_CREATE, &db->stale);
	rc = db_err(rc, "dbi open");
	if (!rc)
		rc = meta_get_u64(db, txn, "fsid", &v, 0);
	if (!rc && v == 0) {
		rc = db_format(db, txn);
		if (!rc)
			rc = meta_get_u64(db, txn, "fsid", &v, 0);
	}
	if (rc) {
		mdb_txn_abort(txn);
		goto out_close_env;
	}
	db->fsid = v;
	rc = mgr_db_commit(txn);
	if (rc)
		goto out_close_env;
	*out = db;
	return 0;

out_close_env:
	mdb_env_close(db->env);
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
static int config_iods(struct mgr_db *db, MDB_txn *txn,
		       const struct mgr_iod *iods, uint16_t n, char *msg,
		       size_t msgcap)
{
	static uint8_t buf[2 + PROTO_MAX_IODS * (3 + PROTO_MAX_HOST)];
	static struct mgr_iod old[PROTO_MAX_IODS];
	MDB_val k = { 4, "iods" }, d;
	uint16_t on;
	int rc = mdb_get(txn, db->meta, &k, &d);

	if (rc == MDB_NOTFOUND) {
		d = (MDB_val){ iodtab_pack(buf, iods, n), buf };
		return db_err(mdb_put(txn, db->meta, &k, &d, 0), "iods put");
	}
	if (rc)
		return db_err(rc, "iods get");
	rc = iodtab_unpack(d.mv_data, d.mv_size, old, &on);
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
static int config_groups(struct mgr_db *db, MDB_txn *txn,
			 const struct mgr_iod *iods, uint16_t n, char *msg,
			 size_t msgcap)
{
	static uint16_t buf[1 + PROTO_MAX_IODS];
	const char *doms[PROTO_MAX_IODS];
	MDB_val k = { 6, "groups" }, d;
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
	rc = mdb_get(txn, db->meta, &k, &d);
	if (rc == MDB_NOTFOUND) {
		d = (MDB_val){ 2 + ng * sizeof(struct proto_group), buf };
		return db_err(mdb_put(txn, db->meta, &k, &d, 0), "groups put");
	}
	if (rc)
		return db_err(rc, "groups get");
	if (d.mv_size != 2 + ng * sizeof(struct proto_group) ||
	    memcmp(d.mv_data, buf, d.mv_size)) {
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
	MDB_val lk = { 9, "deflayout" }, d;
	struct proto_layout lay, stored;
	MDB_txn *txn;
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
	rc = config_iods(db, txn, iods, n, msg, msgcap);
	if (!rc)
		rc = config_groups(db, txn, iods, n, msg, msgcap);
	if (rc)
		goto out_abort;
	rc = mdb_get(txn, db->meta, &lk, &d);
	if (rc == 0 && (d.mv_size == sizeof(stored) || d.mv_size == 8)) {
		memset(&stored, 0, sizeof(stored));
		memcpy(&stored, d.mv_data, d.mv_size); /* 8: before mirroring */
		if (!stored.mirror)
			stored.mirror = 1;
		memcpy(&lay, &stored, sizeof(lay));
		have = 1;
	} else if (rc && rc != MDB_NOTFOUND) {
		rc = db_err(rc, "deflayout get");
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
	d = (MDB_val){ sizeof(lay), &lay };
	rc = db_err(mdb_put(txn, db->meta, &lk, &d, 0), "deflayout put");
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
static int stale_gen(const MDB_val *d, uint64_t *gen)
{
	if (d->mv_size == 0) {
		*gen = 0;
		return 0;
	}
	if (d->mv_size != 8)
		return -EIO;
	memcpy(gen, d->mv_data, 8);
	return 0;
}

/* The (iod, ino) of a stale key. @return 0, -EIO (not a stale key) */
static int stale_unkey(const MDB_val *k, uint16_t *iod, uint64_t *ino)
{
	uint16_t bi;
	uint64_t bo;

	if (k->mv_size != 10)
		return -EIO;
	memcpy(&bi, k->mv_data, 2);
	memcpy(&bo, (const uint8_t *)k->mv_data + 2, 8);
	*iod = be16toh(bi);
	*ino = be64toh(bo);
	return 0;
}

/* See mgr_db.h. Cost: a counter update and one B-tree insert. */
int mgr_db_stale_add(struct mgr_db *db, MDB_txn *txn, uint16_t iod,
		     uint64_t ino, uint64_t *gen)
{
	uint8_t kb[10];
	uint64_t seq;
	MDB_val k = { stale_key(kb, iod, ino), kb }, d = { 8, &seq };
	int rc = meta_get_u64(db, txn, "stale_seq", &seq, 0);

	if (rc)
		return rc;
	seq++;
	rc = meta_put_u64(db, txn, "stale_seq", seq);
	if (!rc)
		rc = db_err(mdb_put(txn, db->stale, &k, &d, 0), "stale put");
	if (rc)
		return rc;
	stale_touch(db);
	if (gen)
		*gen = seq;
	return 0;
}

/* See mgr_db.h. */
int mgr_db_stale_get(struct mgr_db *db, MDB_txn *txn, uint16_t iod,
		     uint64_t ino, uint64_t *gen)
{
	uint8_t kb[10];
	MDB_val k = { stale_key(kb, iod, ino), kb }, d;
	uint64_t g;
	int rc = mdb_get(txn, db->stale, &k, &d);

	if (rc)
		return db_err(rc, "stale get");
	rc = stale_gen(&d, &g);
	if (!rc && gen)
		*gen = g;
	return rc;
}

/* See mgr_db.h. Cost: one lookup and one delete. */
int mgr_db_stale_del_if(struct mgr_db *db, MDB_txn *txn, uint16_t iod,
			uint64_t ino, uint64_t gen)
{
	uint8_t kb[10];
	MDB_val k = { stale_key(kb, iod, ino), kb };
	uint64_t cur;
	int rc = mgr_db_stale_get(db, txn, iod, ino, &cur);

	if (rc)
		return rc;
	if (cur != gen)
		return -EAGAIN;
	rc = db_err(mdb_del(txn, db->stale, &k, NULL), "stale del");
	if (!rc)
		stale_touch(db);
	return rc;
}

/* Walk the stale records from key kb (inclusive) with fn until it says
 * stop (1) or the keys leave iod (only_iod) or end. Shared by both
 * listings. @return 0, -EIO */
static int stale_walk(struct mgr_db *db, MDB_txn *txn, const uint8_t *kb,
		      int only_iod, uint16_t iod,
		      int (*fn)(void *arg, uint16_t iod, uint64_t ino,
				uint64_t gen),
		      void *arg)
{
	MDB_val k = { 10, (void *)kb }, d;
	MDB_cursor *c;
	int rc = mdb_cursor_open(txn, db->stale, &c);

	if (rc)
		return db_err(rc, "stale cursor");
	for (rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) {
		uint16_t ki;
		uint64_t ino, gen;

		if (stale_unkey(&k, &ki, &ino) || stale_gen(&d, &gen)) {
			rc = MDB_CORRUPTED;
			break;
		}
		if (only_iod && ki != iod)
			break;
		if (fn(arg, ki, ino, gen))
			break;
	}
	mdb_cursor_close(c);
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : db_err(rc, "stale walk");
}

/* Output of a listing. */
struct stale_page {
	uint32_t max, n;
	uint64_t *inos, *gens;         /* mgr_db_stale_list */
	struct mgr_stale_rec *recs;    /* mgr_db_stale_list_all */
};

/* stale_walk callback: take one record, stop when the page is full. */
static int stale_take(void *arg, uint16_t iod, uint64_t ino, uint64_t gen)
{
	struct stale_page *pg = arg;

	if (pg->recs) {
		pg->recs[pg->n] = (struct mgr_stale_rec){ iod, ino, gen };
	} else {
		pg->inos[pg->n] = ino;
		if (pg->gens)
			pg->gens[pg->n] = gen;
	}
	return ++pg->n >= pg->max;
}

/* See mgr_db.h. */
int mgr_db_stale_list(struct mgr_db *db, MDB_txn *txn, uint16_t iod,
		      uint64_t after, uint32_t max, uint64_t *inos,
		      uint64_t *gens, uint32_t *n)
{
	struct stale_page pg = { max, 0, inos, gens, NULL };
	uint8_t kb[10];
	int rc;

	*n = 0;
	if (max == 0 || after == UINT64_MAX)
		return 0;
	stale_key(kb, iod, after + 1);
	rc = stale_walk(db, txn, kb, 1, iod, stale_take, &pg);
	*n = pg.n;
	return rc;
}

/* See mgr_db.h. */
int mgr_db_stale_list_all(struct mgr_db *db, MDB_txn *txn, uint16_t after_iod,
			  uint64_t after_ino, uint32_t max,
			  struct mgr_stale_rec *recs, uint32_t *n)
{
	struct stale_page pg = { max, 0, NULL, NULL, recs };
	uint8_t kb[10];
	int rc;

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
	rc = stale_walk(db, txn, kb, 0, 0, stale_take, &pg);
	*n = pg.n;
	return rc;
}

/* See mgr_db.h. */
uint64_t mgr_db_stale_version(const struct mgr_db *db)
{
	return __atomic_load_n(&db->stale_ver, __ATOMIC_ACQUIRE);
}

/* See mgr_db.h. Cost: a walk over every stale record. */
int mgr_db_stale_count(struct mgr_db *db, uint64_t *counts, uint16_t n)
{
	MDB_cursor *c;
	MDB_txn *txn;
	MDB_val k, d;
	int rc = mgr_db_begin(db, 1, &txn);

	if (rc)
		return rc;
	memset(counts, 0, n * sizeof(*counts));
	rc = db_err(mdb_cursor_open(txn, db->stale, &c), "stale cursor");
	if (rc)
		goto out_abort;
	for (rc = mdb_cursor_get(c, &k, &d, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) {
		uint16_t be;

		if (k.mv_size != 10)
			continue;
		memcpy(&be, k.mv_data, 2);
		if (be16toh(be) < n)
			counts[be16toh(be)]++;
	}
	mdb_cursor_close(c);
	rc = rc == MDB_NOTFOUND ? 0 : db_err(rc, "stale walk");
out_abort:
	mgr_db_abort(txn);
	return rc;
}

/* Close the env. */
void mgr_db_close(struct mgr_db *db)
{
	if (!db)
		return;
	mdb_env_close(db->env);
	free(db);
}

/* See mgr_db.h. */
int mgr_db_lockmark_get(struct mgr_db *db, int *held)
{
	MDB_txn *txn;
	uint64_t v;
	int rc = mgr_db_begin(db, 1, &txn);

	if (rc)
		return rc;
	rc = meta_get_u64(db, txn, "lockmark", &v, 0);
	mgr_db_abort(txn);
	if (rc)
		return rc;
	*held = v != 0;
	return 0;
}

/* See mgr_db.h. Cost: one synced LMDB commit. */
int mgr_db_lockmark_set(struct mgr_db *db, int held)
{
	MDB_txn *txn;
	int rc = mgr_db_begin(db, 0, &txn);

	if (rc)
		return rc;
	rc = meta_put_u64(db, txn, "lockmark", held ? 1 : 0);
	if (rc) {
		mgr_db_abort(txn);
		return rc;
	}
	return mgr_db_commit(txn);
}
