/*
 * mgr_kv.h - what a namespace backend implements: ordered tables of byte
 * keys, in transactions.
 *
 * mgr_db.c keeps the namespace (inodes, entries, xattrs, orphans, stale
 * records, counters) as key/value records in a few tables, and speaks to
 * the backend only through this interface. Two backends:
 *   lmdb        mgr_kv_lmdb.c: one named database per table, in --db DIR
 *               (the embedded default);
 *   postgresql  mgr_kv_pg.c: one table of (tbl, k, v) rows on libpq, so that
 *               several mgr hosts share one replicated namespace.
 *
 * Keys compare as unsigned bytes (memcmp, then length), in every backend.
 *
 * Transactions. One thread has at most one top-level transaction at a time.
 * Write transactions of the process take turns (a backend holds a lock, or
 * LMDB's writer lock, from begin to commit/abort). A write transaction may
 * have one child at a time (mgr_kv_begin with parent): the child sees the
 * parent's writes; committing it folds its writes into the parent, aborting
 * it drops only its own. Only committing a top-level transaction makes its
 * writes durable (one sync): that is group commit, one op per child.
 *
 * Values returned by get and scan stay valid until the transaction ends or
 * the next write in it (LMDB's rule; the other backend keeps it too).
 *
 * Errors: every call returns 0 or -errno. A backend maps its own failures
 * (and logs them once, naming the store):
 *   -ENOENT   no such key
 *   -EEXIST   put with MGR_KV_NOOVERWRITE on an existing key
 *   -ENOSPC   the store is full (LMDB map) or the txn too large
 *   -EAGAIN   a conflict the caller should retry in a new txn (PostgreSQL
 *             SQLSTATE 40001 or 40P01, retried a bounded number of times
 *             inside the backend first)
 *   -ESTALE   this process no longer holds the store's leadership token
 *             (commit refused; see mgr/ha/README.md "Several mgrs, one
 *             active")
 *   -EIO      anything else (the store is unreachable, a corrupt record)
 */
#ifndef RPFS_MGR_KV_H
#define RPFS_MGR_KV_H

#include <stddef.h>
#include <stdint.h>

/* The tables. The numbers are stored (PostgreSQL's tbl column): never
 * renumber; add at the end. */
enum mgr_kv_table {
	MGR_KV_INODES = 0,  /* ino (u64 BE) -> inode record */
	MGR_KV_DIRENTS = 1, /* parent (u64 BE) + name -> child, seq */
	MGR_KV_DIRSEQ = 2,  /* parent (u64 BE) + seq (u64 BE) -> name */
	MGR_KV_XATTRS = 3,  /* ino (u64 BE) + name -> value */
	MGR_KV_ORPHANS = 4, /* ino (u64 BE) -> freer */
	MGR_KV_META = 5,    /* string -> counters, fsid, iod table, ... */
	MGR_KV_STALE = 6,   /* iod (u16 BE) + ino (u64 BE) -> generation */
	MGR_KV_NTABLES
};

/* put flags */
#define MGR_KV_NOOVERWRITE 0x1u /* -EEXIST if the key exists */

/* Which backend, and where (from [mgr] store / store_uri / --db). */
enum mgr_kv_kind {
	MGR_KV_LMDB = 0,
	MGR_KV_POSTGRESQL = 1,
};

struct mgr_kv_conf {
	enum mgr_kv_kind kind;
	const char *dir;      /* lmdb: the environment's directory */
	uint64_t map_size;    /* lmdb: map bytes (mgr_db_limits.db_size) */
	const char *uri;      /* postgresql: a libpq URI or conninfo */
	int rdonly;           /* 1: read only (rpfs scrub --namespace): lmdb
			       * opens an existing environment without its
			       * writer lock, creating nothing, and ignores
			       * map_size; postgresql creates nothing either
			       * way without create; only read txns follow */
};

struct mgr_kv;     /* an open store */
struct mgr_kv_txn; /* a transaction on it */

/* Called per record by mgr_kv_scan; return nonzero to stop the walk (that
 * value is then scan's result). */
typedef int (*mgr_kv_scan_fn)(void *arg, const void *key, size_t klen,
			      const void *val, size_t vlen);

/**
 * Parse a store name ("lmdb" or "postgresql").
 * @return 0, -EINVAL unknown name
 */
int mgr_kv_kind_parse(const char *s, enum mgr_kv_kind *kind);

/** @return "lmdb" or "postgresql" */
const char *mgr_kv_kind_name(enum mgr_kv_kind kind);

/**
 * Open (creating an empty store if needed: an LMDB directory, or the
 * PostgreSQL schema when create is set; nothing with conf->rdonly) the
 * store conf names.
 * @param create 1: create the schema if missing (rpfs mkfs); 0: a
 *	PostgreSQL database without it is an error (the mgr)
 * @param[out] out the store
 * @param[out] msg on error, one line naming the setting and what is wrong
 *	(for the log and for a non-zero exit)
 * @return 0, -EINVAL bad conf, -ENOENT missing database or schema,
 *	-EACCES wrong credentials, -EHOSTUNREACH unreachable, -EPROTO schema
 *	version mismatch, -ENOMEM, -EIO
 */
int mgr_kv_open(const struct mgr_kv_conf *conf, int create,
		struct mgr_kv **out, char *msg, size_t msgcap);

/** Close the store (every txn finished). */
void mgr_kv_close(struct mgr_kv *kv);

/** @return the backend of an open store */
enum mgr_kv_kind mgr_kv_kind(const struct mgr_kv *kv);

/**
 * Fence every later top-level write commit with a leadership token
 * (mgr/ha/README.md "Several mgrs, one active"): the commit then runs only
 * while the store's lease row still holds that token, checked inside the
 * commit's own database transaction (no extra round trip); otherwise it is
 * refused with -ESTALE and nothing of it is applied. 0 turns fencing off.
 * @param token the token mgr_lead acquired (0: none)
 * @return 0, -EOPNOTSUPP the backend has no shared lease (LMDB: one mgr,
 *	always active)
 */
int mgr_kv_set_token(struct mgr_kv *kv, int64_t token);

/**
 * Is the store's server out of reach for now? Set when a backend could
 * neither keep nor open a connection (a database failover, a cut link),
 * cleared by its next good connection. While it is set, a call that needs
 * a new connection fails at once with -EIO instead of waiting out another
 * connect timeout, and the mgr answers such failures "retry later"
 * (PROTO_RETRY) instead of EIO. Cost: one atomic load.
 * @return 1 unreachable, 0 reachable or an embedded store (LMDB)
 */
int mgr_kv_unreachable(const struct mgr_kv *kv);

/**
 * A mark of the store's reachability, taken before a call whose -EIO is
 * to be judged with mgr_kv_unreachable_since. Another thread may end an
 * outage between a call's failure and a look at mgr_kv_unreachable, so
 * judging by the state after the call alone would take a failure the
 * outage caused for a store error. Cost: one atomic load.
 * @return an opaque mark (0 for an embedded store)
 */
uint64_t mgr_kv_reach_mark(const struct mgr_kv *kv);

/**
 * Was the store's server out of reach at some moment since mark (at the
 * mark, now, or in an outage that began and ended between)? The mgr
 * answers a call that failed with -EIO in such a span "retry later".
 * Cost: one atomic load.
 * @param mark what mgr_kv_reach_mark gave before the call
 * @return 1 yes, 0 no (always 0 for an embedded store)
 */
int mgr_kv_unreachable_since(const struct mgr_kv *kv, uint64_t mark);

/**
 * Begin a transaction: top-level (parent NULL) or a child of a write
 * transaction of this thread. A child of a read transaction is -EINVAL.
 * @return 0, -EINVAL, -ENOMEM, -EIO
 */
int mgr_kv_begin(struct mgr_kv *kv, struct mgr_kv_txn *parent, int rdonly,
		 struct mgr_kv_txn **out);

/**
 * Commit and end t: a child folds into its parent; a top-level write txn
 * becomes durable (one sync / one round trip). t is gone afterwards, also
 * on error.
 * @return 0, -ENOSPC, -EAGAIN, -ESTALE, -EIO
 */
int mgr_kv_commit(struct mgr_kv_txn *t);

/** Abort and end t (read transactions end this way too). */
void mgr_kv_abort(struct mgr_kv_txn *t);

/**
 * Read one record.
 * @param[out] val, vlen the value (see "Values" above)
 * @return 0, -ENOENT, -EIO
 */
int mgr_kv_get(struct mgr_kv_txn *t, enum mgr_kv_table tbl, const void *key,
	       size_t klen, const void **val, size_t *vlen);

/**
 * Write one record (in a write txn).
 * @param flags 0 or MGR_KV_NOOVERWRITE
 * @return 0, -EEXIST, -ENOSPC, -EINVAL read-only txn, -EIO
 */
int mgr_kv_put(struct mgr_kv_txn *t, enum mgr_kv_table tbl, const void *key,
	       size_t klen, const void *val, size_t vlen, unsigned flags);

/**
 * Delete one record (in a write txn).
 * @return 0, -ENOENT, -EINVAL read-only txn, -EIO
 */
int mgr_kv_del(struct mgr_kv_txn *t, enum mgr_kv_table tbl, const void *key,
	       size_t klen);

/**
 * Walk the records with key >= from that start with from's first plen
 * bytes, in key order, calling fn for each until fn returns nonzero or the
 * prefix ends. Cost: one seek, then one step per record (PostgreSQL: one
 * range query per page of records).
 * @return 0 walked to the end, fn's nonzero value, -EIO
 */
int mgr_kv_scan(struct mgr_kv_txn *t, enum mgr_kv_table tbl, const void *from,
		size_t flen, size_t plen, mgr_kv_scan_fn fn, void *arg);

/**
 * Delete every record whose key starts with prefix (in a write txn).
 * @return 0 (also when none), -EIO
 */
int mgr_kv_del_prefix(struct mgr_kv_txn *t, enum mgr_kv_table tbl,
		      const void *prefix, size_t plen);

/**
 * Count the records of a table in t's view. Cost: LMDB O(1); PostgreSQL
 * one count query.
 * @return 0, -EIO
 */
int mgr_kv_count(struct mgr_kv_txn *t, enum mgr_kv_table tbl, uint64_t *n);

/**
 * Space in use, as the headroom rule counts it (see mgr_db.h).
 * @param[out] used, limit pages in use; growing ops stop at limit
 * @return 0, -EOPNOTSUPP the backend has no fixed size (PostgreSQL: the
 *	database's own disk-full error is the limit), -EIO
 */
int mgr_kv_usage(struct mgr_kv_txn *t, uint64_t *used, uint64_t *limit);

#endif
