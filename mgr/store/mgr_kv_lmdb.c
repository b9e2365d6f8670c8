/*
 * mgr_kv_lmdb.c - the LMDB store backend (the embedded default).
 *
 * One environment in --db DIR, one named database per table:
 *   inodes   ino (u64 BE)                    -> struct mgr_irec + symlink target
 *   dirents  parent (u64 BE) + name          -> struct mgr_dval (child, seq)
 *   dirseq   parent (u64 BE) + seq (u64 BE)  -> 0x00, child (u64), name; or
 *                                               name alone (older records)
 *   xattrs   ino (u64 BE) + name             -> value
 *   orphans  ino (u64 BE)                    -> freer uid (u32 BE; empty in
 *                                               older records)
 *   meta     string key                      -> counters, fsid, iod table,
 *                                               mirror groups, layout
 *   stale    iod (u16 BE) + ino (u64 BE)     -> u64 generation (empty:
 *                                               generation 0)
 * The names are the ones the mgr used before the store interface, so an
 * existing database opens unchanged. LMDB compares keys with memcmp, then
 * length: the order mgr_kv.h promises. Values are host order (an LMDB file
 * is not portable across architectures anyway).
 *
 * Transactions map one to one: a child is an LMDB nested txn. The
 * environment has no MDB_NOTLS: a thread has at most one top-level txn,
 * and write txns of different threads take turns (LMDB's writer lock, held
 * from begin to commit/abort). A top-level commit syncs (default flags).
 *
 * Space (mgr/store/README.md "Namespace space"): the map is conf->map_size
 * bytes; the reserve that the headroom rule keeps for deletes is 1/64 of
 * the map, at least 1 MiB and at most 64 MiB. usage counts the pages of
 * every B-tree.
 */
#include "mgr_kv_int.h"

#include <errno.h>
#include <lmdb.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"

#define KVL_MAXDBS 8
#define KVL_META_PAGES 2 /* LMDB's two meta pages */
#define KVL_FREE_DBI 0   /* LMDB's free list (as mdb_stat(1) reads it) */
#define KVL_MAIN_DBI 1   /* LMDB's main database: names the others */

/* The named database of each table (never rename: existing files). */
static const char *const kvl_names[MGR_KV_NTABLES] = {
	[MGR_KV_INODES] = "inodes", [MGR_KV_DIRENTS] = "dirents",
	[MGR_KV_DIRSEQ] = "dirseq", [MGR_KV_XATTRS] = "xattrs",
	[MGR_KV_ORPHANS] = "orphans", [MGR_KV_META] = "meta",
	[MGR_KV_STALE] = "stale",
};

/* An open LMDB store. Set at open, read-only afterwards. */
struct kvl {
	struct mgr_kv base;
	MDB_env *env;
	MDB_dbi dbi[MGR_KV_NTABLES];
	uint64_t map_pages;     /* the map in pages (can exceed map_size: an
				 * existing file that is larger) */
	uint64_t reserve_pages; /* growth stops this short of the map */
};

/* A transaction (owned by the thread that began it). */
struct kvl_txn {
	struct mgr_kv_txn base;
	MDB_txn *txn;
};

/* The LMDB store around a generic one (container_of). */
static struct kvl *kvl_of(struct mgr_kv *kv)
{
	return (struct kvl *)((char *)kv - offsetof(struct kvl, base));
}

/* The LMDB txn around a generic one (container_of). */
static struct kvl_txn *kvl_txn_of(struct mgr_kv_txn *t)
{
	return (struct kvl_txn *)((char *)t - offsetof(struct kvl_txn, base));
}

/* Map an LMDB or errno result to -errno, logging the unexpected ones
 * (naming the store and what failed). */
static int kvl_err(int rc, const char *what)
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

/* Begin an LMDB txn (nested under parent's when there is one). Cost: one
 * malloc; a top-level write txn waits for LMDB's writer lock. */
static int kvl_begin(struct mgr_kv *kv, struct mgr_kv_txn *parent,
		     int rdonly, struct mgr_kv_txn **out)
{
	struct kvl *s = kvl_of(kv);
	struct kvl_txn *t = malloc(sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	rc = mdb_txn_begin(s->env, parent ? kvl_txn_of(parent)->txn : NULL,
			   rdonly ? MDB_RDONLY : 0, &t->txn);
	if (rc) {
		free(t);
		return kvl_err(rc, "txn begin");
	}
	t->base = (struct mgr_kv_txn){ kv, parent, rdonly };
	*out = &t->base;
	return 0;
}

/* Commit: a child folds into its parent, a top-level txn syncs. */
static int kvl_commit(struct mgr_kv_txn *kt)
{
	struct kvl_txn *t = kvl_txn_of(kt);
	int rc = mdb_txn_commit(t->txn);

	free(t);
	return kvl_err(rc, "commit");
}

/* Abort (a read txn ends this way too). */
static void kvl_abort(struct mgr_kv_txn *kt)
{
	struct kvl_txn *t = kvl_txn_of(kt);

	mdb_txn_abort(t->txn);
	free(t);
}

/* One record; the value points into the map. Cost: one B-tree lookup. */
static int kvl_get(struct mgr_kv_txn *kt, enum mgr_kv_table tbl,
		   const void *key, size_t klen, const void **val, size_t *vlen)
{
	MDB_val k = { klen, (void *)key }, d;
	int rc = mdb_get(kvl_txn_of(kt)->txn, kvl_of(kt->kv)->dbi[tbl], &k, &d);

	if (rc)
		return kvl_err(rc, "get");
	*val = d.mv_data;
	*vlen = d.mv_size;
	return 0;
}

/* Write one record. */
static int kvl_put(struct mgr_kv_txn *kt, enum mgr_kv_table tbl,
		   const void *key, size_t klen, const void *val, size_t vlen,
		   unsigned flags)
{
	MDB_val k = { klen, (void *)key }, d = { vlen, (void *)val };

	return kvl_err(mdb_put(kvl_txn_of(kt)->txn, kvl_of(kt->kv)->dbi[tbl],
			       &k, &d,
			       flags & MGR_KV_NOOVERWRITE ? MDB_NOOVERWRITE : 0),
		       "put");
}

/* Delete one record. */
static int kvl_del(struct mgr_kv_txn *kt, enum mgr_kv_table tbl,
		   const void *key, size_t klen)
{
	MDB_val k = { klen, (void *)key };

	return kvl_err(mdb_del(kvl_txn_of(kt)->txn, kvl_of(kt->kv)->dbi[tbl],
			       &k, NULL), "del");
}

/* Walk from `from` while the keys keep its first plen bytes. Cost: one
 * cursor seek, one step per record. */
static int kvl_scan(struct mgr_kv_txn *kt, enum mgr_kv_table tbl,
		    const void *from, size_t flen, size_t plen,
		    mgr_kv_scan_fn fn, void *arg)
{
	MDB_val k = { flen, (void *)from }, d;
	MDB_cursor *c;
	int rc, ret = 0;

	rc = mdb_cursor_open(kvl_txn_of(kt)->txn, kvl_of(kt->kv)->dbi[tbl], &c);
	if (rc)
		return kvl_err(rc, "cursor open");
	for (rc = mdb_cursor_get(c, &k, &d, flen ? MDB_SET_RANGE : MDB_FIRST);
	     rc == 0; rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) {
		if (k.mv_size < plen || memcmp(k.mv_data, from, plen) != 0)
			break;
		ret = fn(arg, k.mv_data, k.mv_size, d.mv_data, d.mv_size);
		if (ret)
			break;
	}
	mdb_cursor_close(c);
	if (rc && rc != MDB_NOTFOUND)
		return kvl_err(rc, "scan");
	return ret;
}

/* Delete every record under prefix. Cost: one seek, one step per record. */
static int kvl_del_prefix(struct mgr_kv_txn *kt, enum mgr_kv_table tbl,
			  const void *prefix, size_t plen)
{
	MDB_val k = { plen, (void *)prefix }, d;
	MDB_cursor *c;
	int rc;

	rc = mdb_cursor_open(kvl_txn_of(kt)->txn, kvl_of(kt->kv)->dbi[tbl], &c);
	if (rc)
		return kvl_err(rc, "cursor open");
	rc = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size >= plen &&
	       memcmp(k.mv_data, prefix, plen) == 0) {
		rc = mdb_cursor_del(c, 0);
		if (rc)
			break;
		rc = mdb_cursor_get(c, &k, &d, MDB_GET_CURRENT);
		if (rc == EINVAL) /* cursor past the end after delete */
			rc = MDB_NOTFOUND;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : kvl_err(rc, "delete prefix");
}

/* Records in a table. Cost: one O(1) mdb_stat. */
static int kvl_count(struct mgr_kv_txn *kt, enum mgr_kv_table tbl,
		     uint64_t *n)
{
	MDB_stat st;
	int rc = mdb_stat(kvl_txn_of(kt)->txn, kvl_of(kt->kv)->dbi[tbl], &st);

	if (rc)
		return kvl_err(rc, "stat");
	*n = st.ms_entries;
	return 0;
}

/* The pages of every B-tree in t's view (the named databases, the main one
 * and the free list's own pages; not the free pages it lists, which LMDB
 * hands out again) plus the two meta pages. Cost: nine O(1) mdb_stat
 * calls. */
static int kvl_usage(struct mgr_kv_txn *kt, uint64_t *used, uint64_t *limit)
{
	struct kvl *s = kvl_of(kt->kv);
	MDB_txn *txn = kvl_txn_of(kt)->txn;
	uint64_t n = KVL_META_PAGES;
	MDB_stat st;
	int rc;

	for (int i = -2; i < MGR_KV_NTABLES; i++) {
		MDB_dbi dbi = i == -2 ? KVL_FREE_DBI :
			      i == -1 ? KVL_MAIN_DBI : s->dbi[i];

		rc = mdb_stat(txn, dbi, &st);
		if (rc)
			return kvl_err(rc, "stat");
		n += st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages;
	}
	*used = n;
	if (limit)
		*limit = s->map_pages - s->reserve_pages;
	return 0;
}

/* Close the environment and free the store. */
static void kvl_close(struct mgr_kv *kv)
{
	struct kvl *s = kvl_of(kv);

	mdb_env_close(s->env);
	free(s);
}

const struct mgr_kv_ops mgr_kv_lmdb_ops = {
	.begin = kvl_begin, .commit = kvl_commit, .abort = kvl_abort,
	.get = kvl_get, .put = kvl_put, .del = kvl_del, .scan = kvl_scan,
	.del_prefix = kvl_del_prefix, .count = kvl_count, .usage = kvl_usage,
	.close = kvl_close,
};

/*
 * After mdb_env_open: learn the map LMDB actually uses and size the
 * reserve, 1/64 of the map, at least 1 MiB and at most 64 MiB
 * (mgr/store/README.md "Namespace space" says why that is enough for a
 * delete). LMDB raises a map smaller than the data already in the file to
 * the data's size; that would leave no reserve, so the map is raised by the
 * reserve again.
 * @return 0, -EIO
 */
static int kvl_size_map(struct kvl *s, const char *dir, uint64_t asked)
{
	MDB_envinfo info;
	MDB_stat st;
	uint64_t psize, reserve;
	int rc = mdb_env_info(s->env, &info);

	if (!rc)
		rc = mdb_env_stat(s->env, &st);
	if (rc)
		return kvl_err(rc, "env info");
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
		rc = mdb_env_set_mapsize(s->env, info.me_mapsize + reserve);
		if (!rc)
			rc = mdb_env_info(s->env, &info);
		if (rc)
			return kvl_err(rc, "set mapsize");
	}
	s->map_pages = info.me_mapsize / psize;
	s->reserve_pages = reserve / psize;
	return 0;
}

/* Open (creating, unless rdonly) the named database of every table, in
 * one txn: a read txn when rdonly, so a reader beside a running mgr never
 * waits for its writer lock. */
static int kvl_open_dbis(struct kvl *s, int rdonly)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(s->env, NULL, rdonly ? MDB_RDONLY : 0, &txn);

	if (rc)
		return kvl_err(rc, "txn begin");
	for (int i = 0; i < MGR_KV_NTABLES && !rc; i++)
		rc = mdb_dbi_open(txn, kvl_names[i], rdonly ? 0 : MDB_CREATE,
				  &s->dbi[i]);
	if (rc) {
		mdb_txn_abort(txn);
		return kvl_err(rc, "dbi open");
	}
	return kvl_err(mdb_txn_commit(txn), "dbi commit");
}

/* Create and open the environment in conf->dir; see mgr_kv_int.h. */
int mgr_kv_lmdb_open(const struct mgr_kv_conf *conf, int create,
		     struct mgr_kv **out, char *msg, size_t msgcap)
{
	struct kvl *s;
	int rc;

	(void)create;
	if (!conf->dir || !conf->dir[0] ||
	    (conf->map_size == 0 && !conf->rdonly)) {
		snprintf(msg, msgcap, "--db: %s", conf->dir && conf->dir[0] ?
			 "map size 0" : "no directory given");
		return -EINVAL;
	}
	if (!conf->rdonly && mkdir(conf->dir, 0700) && errno != EEXIST) {
		rc = -errno;
		snprintf(msg, msgcap, "--db %s: %s", conf->dir, strerror(-rc));
		return rc;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->base = (struct mgr_kv){ &mgr_kv_lmdb_ops, MGR_KV_LMDB };
	rc = mdb_env_create(&s->env);
	if (rc) {
		rc = kvl_err(rc, "env create");
		goto out_free;
	}
	/* read only: the map the environment records (LMDB's default) */
	rc = conf->rdonly ? 0 : mdb_env_set_mapsize(s->env, conf->map_size);
	if (!rc)
		rc = mdb_env_set_maxdbs(s->env, KVL_MAXDBS);
	if (!rc)
		rc = mdb_env_open(s->env, conf->dir,
				  conf->rdonly ? MDB_RDONLY : 0, 0600);
	rc = kvl_err(rc, "env open");
	if (!rc && !conf->rdonly)
		rc = kvl_size_map(s, conf->dir, conf->map_size);
	if (!rc)
		rc = kvl_open_dbis(s, conf->rdonly);
	if (rc)
		goto out_close_env;
	*out = &s->base;
	return 0;

out_close_env:
	mdb_env_close(s->env);
out_free:
	free(s);
	snprintf(msg, msgcap, "--db %s: cannot open the database: %s",
		 conf->dir, strerror(-rc));
	return rc;
}

/* See mgr_kv_int.h. */
int mgr_kv_lmdb_space(const struct mgr_kv *kv, uint64_t *map_pages,
		      uint64_t *reserve_pages)
{
	const struct kvl *s;

	if (kv->kind != MGR_KV_LMDB)
		return -EOPNOTSUPP;
	s = (const struct kvl *)((const char *)kv - offsetof(struct kvl, base));
	*map_pages = s->map_pages;
	*reserve_pages = s->reserve_pages;
	return 0;
}
