/*
 * mgr_kv_int.h - private to the store backends and their dispatch
 * (mgr_kv.c): the function table each backend fills, and the common heads
 * of a store and a transaction. A backend embeds struct mgr_kv and struct
 * mgr_kv_txn as the FIRST member of its own structs and gets its own back
 * with container_of. Each function has the signature and the contract of
 * the public call of the same name in mgr_kv.h.
 */
#ifndef RPFS_MGR_KV_INT_H
#define RPFS_MGR_KV_INT_H

#include <stddef.h>

#include "mgr_kv.h"

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

struct mgr_kv_ops {
	void (*close)(struct mgr_kv *kv);
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
};

/* An open store: the head of each backend's own. Immutable after open. */
struct mgr_kv {
	const struct mgr_kv_ops *ops;
	enum mgr_kv_kind kind;
};

/* A transaction: the head of each backend's own. Owned by the thread that
 * began it; immutable after begin. */
struct mgr_kv_txn {
	struct mgr_kv *kv;
	struct mgr_kv_txn *parent; /* NULL: top-level */
	int rdonly;
};

#ifdef RPFS_HAVE_PG
/* The PostgreSQL backend (mgr_kv_pg.c). */
extern const struct mgr_kv_ops mgr_kv_pg_ops;

/**
 * Open the PostgreSQL store conf->uri names (see mgr_kv_open).
 * @param create 1: create the schema if it is missing (rpfs mkfs)
 * @param[out] msg on error, one line naming store_uri and what is wrong
 *	(never the password)
 * @return 0, -EINVAL unparseable URI, -EHOSTUNREACH unreachable server,
 *	-EACCES authentication failed, -ENOENT missing database or schema,
 *	-EPROTO schema version mismatch, -ENOMEM, -EIO
 */
int mgr_kv_pg_open(const struct mgr_kv_conf *conf, int create,
		   struct mgr_kv **out, char *msg, size_t msgcap);
#endif

#endif
