/*
 * mgr_db.h - the mgr's namespace store: inodes, directory entries, xattrs,
 * orphans, stale records and counters, in transactions, on any backend of
 * the store interface (mgr_kv.h: LMDB by default, mgr_kv_lmdb.c documents
 * its layout; PostgreSQL). No backend's types appear here: a transaction
 * is the opaque struct mgr_txn.
 *
 * Records, one table each (enum mgr_kv_table):
 *   inodes   ino (u64 BE)                    -> struct mgr_irec + symlink target
 *   dirents  parent (u64 BE) + name          -> struct mgr_dval (child, seq)
 *   dirseq   parent (u64 BE) + seq (u64 BE)  -> 0x00, child (u64), name
 *                                               (older records: the name
 *                                               alone; readdir then looks
 *                                               the child up in dirents)
 *   xattrs   ino (u64 BE) + name             -> value
 *   orphans  ino (u64 BE)                    -> freer uid: inodes with nlink 0
 *   meta     string key                      -> counters, fsid, iod table,
 *                                               mirror groups, layout,
 *                                               sessions' inode ranges
 *                                               (mgr_db_range_take)
 *   stale    iod (u16 BE) + ino (u64 BE)     -> u64 generation: replicas of
 *                                               mirrored files that missed a
 *                                               write (empty: generation 0,
 *                                               records written before)
 * Keys are big-endian so that a scan walks one directory (or one inode's
 * xattrs) in order; this is a storage format, not wire byte order. Values
 * are host order.
 *
 * Readdir cookies: each directory entry gets a per-directory sequence number
 * from the directory's next_seq when it is linked. Cookies 1 and 2 are "."
 * and ".."; entries start at 3. Resuming after a cookie walks dirseq from
 * cookie + 1, so concurrent adds and removes never make readdir skip or repeat
 * an entry that stayed in place.
 *
 * All functions run in the caller's transaction (mgr_db_begin). The loop
 * thread reads the namespace and the writer thread (mgr_batch.c) changes
 * it; the poll and resync threads read the stale records and the resync
 * thread deletes them. A thread has at most one
 * top-level transaction at a time (its own), and write transactions of
 * different threads take turns (the backend's writer lock). A write
 * transaction may have one child at a time (mgr_db_begin_child): its
 * commit folds into the parent, its abort drops only its own writes.
 *
 * Space (see mgr/store/README.md "Namespace space"), on a store with a
 * fixed size (LMDB; mgr_kv_usage): the map is db_size bytes. Ops that
 * grow the namespace (mgr_db_inode_alloc, mgr_db_range_use,
 * mgr_db_dirent_add, a growing
 * mgr_db_xattr_put) get -ENOSPC once the B-tree pages in use reach the map
 * minus a reserve (mgr_db_usage); deletes, same-size updates and shrinking
 * replaces are never refused by that rule, so they still fit when growth
 * has stopped. A dirent_add paid for by a dirent_del of as many name bytes
 * in the same txn (a rename) may go on into half of the reserve. The
 * stored xattrs of one inode are capped in number and in bytes (names +
 * values): past a cap mgr_db_xattr_put fails with -ENOSPC.
 *
 * Stale version: an in-memory counter bumped after every committed
 * top-level transaction that (itself or a committed child) added or deleted stale records (mgr_db_commit notices
 * them, PURGE's included), so another thread learns cheaply that the fence
 * sets changed: read the version BEFORE reading the records, and a change
 * committed meanwhile shows as a newer version next time.
 */
#ifndef RPFS_MGR_DB_H
#define RPFS_MGR_DB_H

#include <stddef.h>
#include <stdint.h>

#include "metrics_op.h"
#include "mgr_kv.h"
#include "proto.h"
#include "stripe.h"

#define MGR_ROOT_INO 1
#define MGR_SEQ_FIRST 3       /* cookies 1, 2 are "." and ".." */
#define MGR_IREC_VERSION 2    /* 2 added blocks; version 1 records still load */

/* The map (--db-size, [mgr] db_size) and the per-inode xattr caps. */
#define MGR_DB_DEFAULT_SIZE (4ull << 30)
#define MGR_DB_MIN_SIZE (4ull << 20)     /* the reserve is at most a quarter */
#define MGR_DB_MAX_SIZE (1ull << 40)
#define MGR_XATTR_DEFAULT_COUNT 1024u
#define MGR_XATTR_MAX_COUNT 65536u
#define MGR_XATTR_DEFAULT_BYTES (1u << 20)
#define MGR_XATTR_MIN_BYTES 1024u
#define MGR_XATTR_MAX_BYTES (64u << 20)

/* Inode flags. */
#define MGR_IF_DIRLAYOUT 0x1u /* dir: layout holds the default for new files */

/* An inode in memory. target points into the store's memory (valid until
 * the txn ends or its next write) after mgr_db_inode_get, or at caller memory for mgr_db_inode_put. */
struct mgr_inode {
	uint32_t mode, nlink, uid, gid, rdev, flags;
	uint64_t size;
	uint64_t blocks;    /* regular: 512-byte blocks the iods hold, as last
			     * published (SETBLOCKS); a version 1 record
			     * loads with size / 512 rounded up */
	uint64_t parent;    /* dirs: parent directory ino (root: itself) */
	uint64_t next_seq;  /* dirs: sequence number of the next entry */
	struct proto_time atime, mtime, ctime;
	struct proto_layout layout; /* regular: file layout; dir: see flags */
	const char *target; /* symlinks */
	uint32_t target_len;
};

/* One iod of the table, as configured. */
struct mgr_iod {
	char host[PROTO_MAX_HOST + 1];
	uint16_t port;
	char domain[STRIPE_MAX_DOMAIN + 1]; /* failure domain; "" = none */
};

/* Sizes for mgr_db_open_store; mgr_db_limits_default fills the defaults. */
struct mgr_db_limits {
	uint64_t db_size;         /* MGR_DB_MIN_SIZE..MGR_DB_MAX_SIZE bytes */
	uint32_t xattr_max_count; /* 1..MGR_XATTR_MAX_COUNT per inode */
	uint32_t xattr_max_bytes; /* MGR_XATTR_MIN_BYTES..MGR_XATTR_MAX_BYTES
				   * per inode, names + values */
};

/* The open store. Fields are set at open/config and read-only afterwards,
 * except full (see there). */
struct mgr_db {
	struct mgr_kv *kv;             /* the backend */
	uint64_t fsid;
	uint16_t niods;
	struct mgr_iod iods[PROTO_MAX_IODS];
	uint16_t ngroups;              /* mirror groups (stripe_groups_form) */
	struct proto_group groups[PROTO_MAX_IODS / 2];
	struct proto_layout deflayout; /* count resolved (never 0), first 0 */
	uint64_t stale_ver;            /* atomic (__atomic_*): the stale version */
	uint64_t map_pages;            /* LMDB: the map in pages (can exceed
					* db_size: an existing file that is
					* larger); 0 for a store without */
	uint64_t reserve_pages;        /* growth stops this short of the map */
	uint32_t xattr_max_count, xattr_max_bytes; /* per-inode caps */
	int full;                      /* growth refused last time we looked
					* (for the log); the writer lock:
					* only write txns touch it */
};

/* One stale record: iod's replica of ino missed a write; gen changes with
 * every STALE_MARK of it (mgr_db_stale_add). */
struct mgr_stale_rec {
	uint16_t iod;
	uint64_t ino;
	uint64_t gen;
};

/** Fill l with the defaults (4 GiB map, 1024 xattrs / 1 MiB per inode). */
void mgr_db_limits_default(struct mgr_db_limits *l);

/* A transaction of the namespace (opaque; mgr_db_begin). */
struct mgr_txn;

/**
 * Open the store kc names (kc->dir for LMDB; the map size comes from
 * lim->db_size), with lim's caps; creates the root inode and the fsid at
 * first start. An LMDB database already larger than lim->db_size is
 * opened with its size plus the reserve (logged), so deletes still fit.
 * @param create 1: create a missing PostgreSQL schema (rpfs mkfs); 0: the
 *	mgr (an LMDB directory is created either way)
 * @param[out] out the store
 * @param[out] msg on error, one line naming the setting and what is wrong
 * @return 0, -EINVAL a limit out of its range or a bad kc, -ENOMEM,
 *	-EOPNOTSUPP a store this build lacks, -errno of mkdir, and
 *	mgr_kv_open's errors (-ENOENT, -EACCES, -EHOSTUNREACH, -EPROTO, -EIO)
 */
int mgr_db_open_store(struct mgr_db **out, const struct mgr_kv_conf *kc,
		      const struct mgr_db_limits *lim, int create, char *msg,
		      size_t msgcap);

/**
 * Open the store kc names for reading only (rpfs scrub --namespace, beside
 * a running mgr or without one): kc->rdonly is implied, nothing is
 * created or formatted, kc->map_size is ignored; only read transactions
 * (mgr_db_begin with rdonly) may follow. The limits are unset (0).
 * @param[out] out the store (mgr_db_close)
 * @param[out] msg on error, one line naming the setting and what is wrong
 * @return 0, -ENOENT no store or no namespace in it, -ENOMEM, -EOPNOTSUPP,
 *	and mgr_kv_open's errors
 */
int mgr_db_open_rdonly(struct mgr_db **out, const struct mgr_kv_conf *kc,
		       char *msg, size_t msgcap);

/**
 * mgr_db_open_store of an LMDB store in dir with the default limits
 * (tests; an error's message is logged).
 * @param[out] out the store
 * @return as mgr_db_open_store
 */
int mgr_db_open(struct mgr_db **out, const char *dir);

/**
 * The namespace's page use as the headroom rule counts it, in txn's view
 * (mgr_kv_usage: for LMDB the pages of every B-tree and the meta pages).
 * @param[out] used pages in use
 * @param[out] limit growing ops get -ENOSPC at this many (may be NULL)
 * @return 0, -EOPNOTSUPP a store without a fixed size, -EIO
 */
int mgr_db_usage(struct mgr_db *db, struct mgr_txn *txn, uint64_t *used,
		 uint64_t *limit);

/**
 * Check or record the iod table, its mirror groups (formed from the iods'
 * failure domains, stripe_groups_form) and the default layout. At first
 * start table and groups are stored; later they must match.
 * unit/count/mirror of 0 mean "not given": the defaults (65536, all iods
 * or groups, 1) are used at first start, the stored values are kept later;
 * given and different values replace the stored ones.
 * @param[out] msg on -EEXIST or -EINVAL, a message naming what is wrong
 * @return 0, -EEXIST table or groups differ, -EINVAL bad count, mirror 2
 *	without a group, or domains that cannot be paired, -EIO
 */
int mgr_db_config(struct mgr_db *db, const struct mgr_iod *iods, uint16_t n,
		  uint32_t unit, uint16_t count, uint8_t mirror, char *msg,
		  size_t msgcap);

/**
 * Record that iod's replica of mirrored file ino missed a write (in the
 * caller's write txn). The record's value becomes a new generation, taken
 * from the counter meta "stale_seq", also when the record exists already:
 * a repeated mark bumps it, so a resync that copied before the mark does
 * not clear it (mgr_db_stale_del_if). The stale version is bumped at commit.
 * @param[out] gen the new generation (may be NULL)
 * @return 0, -ENOSPC, -EIO
 */
int mgr_db_stale_add(struct mgr_db *db, struct mgr_txn *txn, uint16_t iod,
		     uint64_t ino, uint64_t *gen);

/**
 * Look one record up. Cost: one B-tree lookup.
 * @param[out] gen its generation (may be NULL)
 * @return 0, -ENOENT no record, -EIO
 */
int mgr_db_stale_get(struct mgr_db *db, struct mgr_txn *txn, uint16_t iod,
		     uint64_t ino, uint64_t *gen);

/**
 * Count every stale record in txn's view (scrub: skip the lookups while
 * there is none). Cost: mgr_kv_count.
 * @param[out] n the count
 * @return 0, -EIO
 */
int mgr_db_stale_total(struct mgr_db *db, struct mgr_txn *txn, uint64_t *n);

/**
 * Delete the record (iod, ino) only if its generation is still gen (in the
 * caller's write txn; the stale version is bumped at commit).
 * @return 0 deleted, -EAGAIN marked again since (another generation),
 *	-ENOENT no record, -EIO
 */
int mgr_db_stale_del_if(struct mgr_db *db, struct mgr_txn *txn, uint16_t iod,
			uint64_t ino, uint64_t gen);

/**
 * A page of iod's records: inodes above after in ascending order, at most
 * max of them. Cost: one seek and n steps.
 * @param[out] inos n inode numbers (room for max)
 * @param[out] gens their generations (room for max; may be NULL)
 * @param[out] n how many (0: none left after after)
 * @return 0, -EIO
 */
int mgr_db_stale_list(struct mgr_db *db, struct mgr_txn *txn, uint16_t iod,
		      uint64_t after, uint32_t max, uint64_t *inos,
		      uint64_t *gens, uint32_t *n);

/**
 * A page of all records in (iod, ino) order, strictly after (after_iod,
 * after_ino) ((0, 0) starts at the beginning: no inode is 0), at most max.
 * @param[out] recs n records (room for max)
 * @return 0, -EIO
 */
int mgr_db_stale_list_all(struct mgr_db *db, struct mgr_txn *txn, uint16_t after_iod,
			  uint64_t after_ino, uint32_t max,
			  struct mgr_stale_rec *recs, uint32_t *n);

/**
 * The stale version: changes after every committed add or delete of stale
 * records. Any thread; an atomic load.
 */
uint64_t mgr_db_stale_version(const struct mgr_db *db);

/**
 * Count the stale records per iod (counts[0..n), iods >= n ignored), in a
 * read transaction of its own.
 * @return 0, -EIO
 */
int mgr_db_stale_count(struct mgr_db *db, uint64_t *counts, uint16_t n);

/** Close the environment (every txn must be finished) and free db. */
void mgr_db_close(struct mgr_db *db);

/**
 * Begin a top-level transaction; the caller ends it. Nothing about the
 * calling thread changes what it is: a caller that runs an op inside a
 * batch passes the batch's child (mgr_db_begin_child) down instead.
 * @return 0, -EINVAL, -ENOMEM, -EIO
 */
int mgr_db_begin(struct mgr_db *db, int rdonly, struct mgr_txn **txn);
/**
 * Begin a child of the write transaction parent (group commit: one op in
 * a batch). It sees parent's writes; parent must not be used until the
 * child ends.
 * @return 0, -EINVAL parent is read-only, -ENOMEM, -EIO
 */
int mgr_db_begin_child(struct mgr_txn *parent, struct mgr_txn **txn);
/** Commit and end txn: a child folds into its parent; a top-level txn
 * becomes durable (one sync), then bumps the stale version when it (or a
 * committed child) added or deleted stale records. txn is gone, also on
 * error. @return 0, -ENOSPC store full, -EAGAIN, -ESTALE, -EIO */
int mgr_db_commit(struct mgr_txn *txn);
/** Abort txn (also used to end read transactions); a child's writes go,
 * its parent's stay. */
void mgr_db_abort(struct mgr_txn *txn);
/** The store's transaction under txn (tests write raw records with it). */
struct mgr_kv_txn *mgr_db_txn_kv(struct mgr_txn *txn);
/** Latency of every top-level mgr_db_commit of the process (the store's
 * commit with its sync) since the start; any thread reads it (metrics_hist_read). */
const struct metrics_hist *mgr_db_commit_latency(void);

/** Load an inode. @return 0, -ENOENT, -EIO (corrupt record) */
int mgr_db_inode_get(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		     struct mgr_inode *in);
/**
 * Unpack an inode record's value (as a scan of MGR_KV_INODES hands it
 * out); in->target points into d.
 * @return 0, -EIO corrupt or unknown version
 */
int mgr_db_inode_decode(const void *d, size_t dl, struct mgr_inode *in);
/** Store an inode. @return 0, -ENOSPC, -EIO */
int mgr_db_inode_put(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		     const struct mgr_inode *in);
/** Delete an inode, its xattrs, its orphan mark and its stale records.
 * @return 0, -EIO */
int mgr_db_inode_del(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino);
/** Take the next inode number (never reused) and count it.
 * @return 0, -ENOSPC the namespace is full (headroom rule), -EIO */
int mgr_db_inode_alloc(struct mgr_db *db, struct mgr_txn *txn, uint64_t *ino);
/**
 * Hand session a new range of PROTO_INO_RANGE inode numbers for its
 * delegated creates (BATCH): the store's next_ino counter moves to the
 * next multiple of PROTO_INO_RANGE at or above it, plus PROTO_INO_RANGE;
 * the range becomes the session's current one, its current one its
 * previous one (an older one is forgotten). Recorded in meta
 * "drange/<session hex>", so it survives a restart. Not counted as inodes.
 * @param session the session (!= 0)
 * @param[out] first the range's first number (a multiple of
 *	PROTO_INO_RANGE, never 0)
 * @return 0, -EINVAL session 0, -ENOSPC the counter would wrap, -EIO
 */
int mgr_db_range_take(struct mgr_db *db, struct mgr_txn *txn, uint64_t session,
		      uint64_t *first);
/**
 * Forget session's ranges (when the mgr forgets the session: its unsent
 * delegated creates are then refused, -EINVAL). No record: 0.
 * @return 0, -EIO
 */
int mgr_db_range_drop(struct mgr_db *db, struct mgr_txn *txn, uint64_t session);
/**
 * Use ino for a delegated create of session (instead of
 * mgr_db_inode_alloc): ino must lie in the session's current or previous
 * range and be at or above every number of that range used before; the
 * range's next unused number becomes ino + 1 and the inode is counted.
 * @return 0, -EINVAL session or ino 0, no range of the session holds ino,
 *	or ino is below the range's next unused number (used, or skipped);
 *	-ENOSPC the namespace is full (headroom rule), -EIO
 */
int mgr_db_range_use(struct mgr_db *db, struct mgr_txn *txn, uint64_t session,
		     uint64_t ino);
/** Number of inodes in use. */
uint64_t mgr_db_inode_count(struct mgr_db *db, struct mgr_txn *txn);

/** Look a name up in parent. @return 0, -ENOENT, -EIO */
int mgr_db_dirent_get(struct mgr_db *db, struct mgr_txn *txn, uint64_t parent,
		      const char *name, size_t len, uint64_t *child);
/**
 * Add parent/name -> child with the next sequence number of pdir (which the
 * caller must store afterwards). Under the headroom rule; name bytes that
 * mgr_db_dirent_del removed earlier in the txn pay for it (a rename).
 * @return 0, -EEXIST, -ENOSPC the namespace is full, -EIO
 */
int mgr_db_dirent_add(struct mgr_db *db, struct mgr_txn *txn, uint64_t parent,
		      struct mgr_inode *pdir, const char *name, size_t len,
		      uint64_t child);
/** Point an existing entry at another inode (keeps its cookie). @return 0, -ENOENT, -EIO */
int mgr_db_dirent_set(struct mgr_db *db, struct mgr_txn *txn, uint64_t parent,
		      const char *name, size_t len, uint64_t child);
/** Remove parent/name. @return 0, -ENOENT, -EIO */
int mgr_db_dirent_del(struct mgr_db *db, struct mgr_txn *txn, uint64_t parent,
		      const char *name, size_t len);
/** @return 1 dir has no entries, 0 it has some, -EIO */
int mgr_db_dir_empty(struct mgr_db *db, struct mgr_txn *txn, uint64_t dir);

/* Called per entry by mgr_db_readdir; return nonzero to stop. */
typedef int (*mgr_db_dirent_fn)(void *arg, uint64_t seq, const char *name,
				size_t len, uint64_t child);
/**
 * Walk dir's entries with seq > after, in seq order. Cost: one scan of
 * the entries walked (plus a dirents lookup per entry written before the
 * child was kept in dirseq).
 * @return 1 reached the end, 0 stopped by fn, -EIO
 */
int mgr_db_readdir(struct mgr_db *db, struct mgr_txn *txn, uint64_t dir,
		   uint64_t after, mgr_db_dirent_fn fn, void *arg);

/** Get an xattr; *val points into the store's memory (as target above). @return 0, -ENODATA, -EIO */
int mgr_db_xattr_get(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		     const char *name, size_t len, const void **val,
		     size_t *vlen);
/**
 * Set an xattr. One that is new or grows is under the headroom rule and
 * the per-inode caps (cost then: a scan of the inode's xattrs, at
 * most xattr_max_count + 1 steps); replacing one with a value of the same
 * or a smaller size is always allowed.
 * @return 0, -EINVAL bad name, -ENOSPC the namespace is full or the
 *	inode's xattrs would pass a cap, -EIO
 */
int mgr_db_xattr_put(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		     const char *name, size_t len, const void *val,
		     size_t vlen);
/** Remove an xattr. @return 0, -ENODATA, -EIO */
int mgr_db_xattr_del(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		     const char *name, size_t len);
/* Called per xattr name by mgr_db_xattr_list; return nonzero to stop. */
typedef int (*mgr_db_xname_fn)(void *arg, const char *name, size_t len);
/** Walk the xattr names of ino. @return 0, or fn's nonzero value, -EIO */
int mgr_db_xattr_list(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		      mgr_db_xname_fn fn, void *arg);

/** An orphan mark written before marks named who freed the inode. */
#define MGR_DB_UID_NONE UINT32_MAX

/**
 * Mark an inode as orphan, with the uid whose unlink or rename dropped its
 * last link (who may purge it besides its owner).
 * @return 0, -ENOSPC, -EIO
 */
int mgr_db_orphan_add(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		      uint32_t freer);
/** Test the mark. @return 1 orphan, 0 not, -EIO */
int mgr_db_orphan_is(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino);
/**
 * Test the mark and read who freed it.
 * @param[out] freer the uid, or MGR_DB_UID_NONE for an older mark
 * @return 1 orphan, 0 not, -EIO
 */
int mgr_db_orphan_freer(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
			uint32_t *freer);

/**
 * The smallest orphan inode number above after (scrub's walk of the orphan
 * table). Cost: one cursor seek.
 * @return 0 (*ino set), -ENOENT no orphan above after, -EIO
 */
int mgr_db_orphan_next(struct mgr_db *db, struct mgr_txn *txn, uint64_t after,
		       uint64_t *ino);

/** Next value of the layout rotation counter (post-increment). @return 0, -EIO */
int mgr_db_rotate(struct mgr_db *db, struct mgr_txn *txn, uint64_t *val);

/**
 * Read the lock mark: whether, when the mgr last stopped, clients may have
 * held locks that it granted (set at the first lock of a run, cleared at a
 * clean stop with none held; see mgr_lockd.c). One read transaction.
 * @param[out] held 1 or 0 (0 for a database that never had a lock)
 * @return 0, -EIO
 */
int mgr_db_lockmark_get(struct mgr_db *db, int *held);
/**
 * Write the lock mark, in a transaction of its own (synced).
 * @return 0, -EIO, -ENOSPC
 */
int mgr_db_lockmark_set(struct mgr_db *db, int held);

/** Current time, for inode timestamps. */
void mgr_db_now(struct proto_time *t);

#endif
