/*
 * mgr_kv_int.h - what a store backend provides to mgr_kv.c's dispatch:
 * an ops table with the same calls as mgr_kv.h, and the two structs each
 * backend embeds as the first member of its own (so a backend gets its
 * struct back with container_of).
 *
 * mgr_kv.c validates the arguments before it calls an op: a backend's
 * put/del/del_prefix never see a read-only txn, get/put/del never a NULL
 * key or one of 0 or more than MGR_KV_KEY_MAX bytes, begin never a child
 * of a read txn. Private to mgr/ (mgr_kv.c, the backends, their tests).
 */
#ifndef RPFS_MGR_KV_INT_H
#define RPFS_MGR_KV_INT_H

#include "mgr_kv.h"

/* The longest key any backend takes (LMDB's default maximum). */
#define MGR_KV_KEY_MAX 511

/* An open store; the first member of each backend's store. */
struct mgr_kv {
	const struct mgr_kv_ops *ops;
	enum mgr_kv_kind kind;
};

/* A transaction; the first member of each backend's txn. Owned by the
 * thread that began it; set at begin and read-only afterwards. */
struct mgr_kv_txn {
	struct mgr_kv *kv;
	struct mgr_kv_txn *parent; /* NULL: top-level */
	int rdonly;
};

/* A backend: each op has the semantics and errors of the mgr_kv_* call of
 * the same name (mgr_kv.h). */
struct mgr_kv_ops {
	int (*begin)(struct mgr_kv *kv, struct mgr_kv_txn *parent, int rdonly,
		     struct mgr_kv_txn **out);
	int (*commit)(struct mgr_kv_txn *t);
	void (*abort)(struct mgr_kv_txn *t);
	int (*get)(struct mgr_kv_txn *t, enum mgr_kv_table tbl,
		   const void *key, size_t klen, const void **val,
		   size_t *vlen);
	int (*put)(struct mgr_kv_txn *t, enum mgr_kv_table tbl,
		   const void *key, size_t klen, const void *val, size_t vlen,
		   unsigned flags);
	int (*del)(struct mgr_kv_txn *t, enum mgr_kv_table tbl,
		   const void *key, size_t klen);
	int (*scan)(struct mgr_kv_txn *t, enum mgr_kv_table tbl,
		    const void *from, size_t flen, size_t plen,
		    mgr_kv_scan_fn fn, void *arg);
	int (*del_prefix)(struct mgr_kv_txn *t, enum mgr_kv_table tbl,
			  const void *prefix, size_t plen);
	int (*count)(struct mgr_kv_txn *t, enum mgr_kv_table tbl, uint64_t *n);
	int (*usage)(struct mgr_kv_txn *t, uint64_t *used, uint64_t *limit);
	void (*close)(struct mgr_kv *kv);
	int (*set_token)(struct mgr_kv *kv, int64_t token); /* NULL: -EOPNOTSUPP */
	/* bit 0: out of reach now; above: outages so far. NULL: always 0 */
	uint64_t (*reach_mark)(const struct mgr_kv *kv);
};

/* The LMDB backend (mgr_kv_lmdb.c). */
extern const struct mgr_kv_ops mgr_kv_lmdb_ops;

/**
 * Open (creating the directory and the named databases if needed) the
 * LMDB environment in conf->dir with a map of conf->map_size bytes; with
 * conf->rdonly an existing one, read-only (MDB_RDONLY), creating nothing.
 * @param create unused: an LMDB store is always created when missing
 * @param[out] msg on error, one line naming --db and what is wrong
 * @return 0, -EINVAL no dir or a map size of 0, -ENOMEM, -errno of mkdir,
 *	-EIO
 */
int mgr_kv_lmdb_open(const struct mgr_kv_conf *conf, int create,
		     struct mgr_kv **out, char *msg, size_t msgcap);

/**
 * The LMDB map and the reserve of the headroom rule, in pages (the
 * headroom rule of mgr_db.c needs the reserve; mgr_kv_usage's limit is
 * the map minus it).
 * @return 0, -EOPNOTSUPP kv is not an LMDB store
 */
int mgr_kv_lmdb_space(const struct mgr_kv *kv, uint64_t *map_pages,
		      uint64_t *reserve_pages);

#ifdef RPFS_HAVE_PG
/* The PostgreSQL backend (mgr_kv_pg.c). */
extern const struct mgr_kv_ops mgr_kv_pg_ops;
int mgr_kv_pg_open(const struct mgr_kv_conf *conf, int create,
		   struct mgr_kv **out, char *msg, size_t msgcap);
#endif

#endif
