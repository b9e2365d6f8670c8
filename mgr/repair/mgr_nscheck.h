/*
 * mgr_nscheck.h - the namespace consistency check (`rpfs scrub
 * --namespace`; mgr/repair/README.md "Namespace check"): every entry points
 * to a live inode, every directory entry has its readdir record and the
 * other way round, link counts match the entries, every inode is reachable
 * from the root or marked orphan, no directory is linked twice or sits in a
 * cycle, no xattr, orphan mark or stale record outlives its inode, and the
 * inode counters agree with the inodes.
 *
 * It reads one snapshot (one read transaction of the store, so it may run
 * beside a writing mgr) and writes nothing. Cost: one walk of every table
 * plus one range read of the dirents and of the dirseq records of each
 * directory; memory about 48 bytes per inode, plus the entries of the
 * largest directory (names included) at a time.
 */
#ifndef RPFS_MGR_NSCHECK_H
#define RPFS_MGR_NSCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "mgr_db.h"

/* What is wrong. The order is the order of the report's passes; the names
 * (mgr_nscheck_kind_name) are stable for --json. */
enum mgr_nscheck_kind {
	MGR_NSCHECK_BAD_RECORD,      /* a record that does not decode: table,
				      * ino (the key's inode, 0 if none) */
	MGR_NSCHECK_NO_ROOT,         /* no root directory (inode 1) */
	MGR_NSCHECK_DANGLING,        /* entry parent/name -> ino: no inode */
	MGR_NSCHECK_NO_DIRSEQ,       /* entry parent/name (seq) has no dirseq
				      * record */
	MGR_NSCHECK_DIRSEQ_DIFFERS,  /* dirseq record (parent, seq) differs
				      * from the entry with that seq: name,
				      * ino = the entry's; other, found = the
				      * record's (found 0: an older record
				      * without the child) */
	MGR_NSCHECK_DIRSEQ_STRAY,    /* dirseq record (parent, seq) -> name,
				      * ino, and no entry with that seq */
	MGR_NSCHECK_SEQ_RANGE,       /* entry seq not in [3, parent's
				      * next_seq): expected next_seq */
	MGR_NSCHECK_ENTRY_PARENT,    /* entry (or dirseq record, seq != 0)
				      * under parent, which is no directory */
	MGR_NSCHECK_DIR_NLINK,       /* dir ino: nlink found, expected 2 +
				      * subdirectories */
	MGR_NSCHECK_DIR_LINKS,       /* dir ino has found entries, expected
				      * 1 (root: 0) */
	MGR_NSCHECK_DIR_PARENT,      /* dir ino: parent field found, expected
				      * the directory that holds its entry */
	MGR_NSCHECK_CYCLE,           /* dirs in a cycle, not reachable from
				      * the root: ino the least of them,
				      * found their number */
	MGR_NSCHECK_NLINK,           /* non-dir ino: nlink found, expected
				      * its entries */
	MGR_NSCHECK_LEAKED,          /* ino unreachable from the root, no
				      * orphan mark */
	MGR_NSCHECK_ORPHAN_LINKED,   /* orphan mark on ino whose nlink (found)
				      * is not 0 */
	MGR_NSCHECK_ORPHAN_DIR,      /* orphan mark on directory ino */
	MGR_NSCHECK_ORPHAN_MISSING,  /* orphan mark of no inode */
	MGR_NSCHECK_XATTR_STRAY,     /* xattrs of no inode (found: how many) */
	MGR_NSCHECK_STALE_STRAY,     /* stale record (iod, ino) of no inode */
	MGR_NSCHECK_NINODES,         /* meta ninodes found, expected the
				      * inodes counted */
	MGR_NSCHECK_NEXT_INO,        /* meta next_ino found, expected above
				      * the largest inode (expected: it + 1) */
	MGR_NSCHECK_NKINDS
};

/* One problem; pointers are valid during the callback only. */
struct mgr_nscheck_problem {
	enum mgr_nscheck_kind kind;
	enum mgr_kv_table table; /* BAD_RECORD; ENTRY_PARENT: dirents or
				  * dirseq */
	uint64_t ino;            /* the inode concerned (entries: the child) */
	uint64_t parent;         /* entries and dirseq records */
	const char *name;        /* entries and dirseq records, else NULL */
	size_t name_len;
	const char *other;       /* DIRSEQ_DIFFERS: the dirseq record's name */
	size_t other_len;
	uint64_t seq;            /* entries and dirseq records */
	uint16_t iod;            /* STALE_STRAY */
	uint64_t expected, found;
};

/* Called per problem, in a deterministic order (pass, then key order). */
typedef void (*mgr_nscheck_fn)(void *arg, const struct mgr_nscheck_problem *p);

/* What the check saw. */
struct mgr_nscheck_result {
	uint64_t inodes;   /* inode records */
	uint64_t entries;  /* directory entries */
	uint64_t problems; /* fn's calls */
};

/**
 * Check the namespace of db in one read transaction of its own.
 * @param fn called per problem (may be NULL)
 * @param[out] res the counts
 * @return 0 (the check ran; res->problems says what it found), -ENOMEM,
 *	-EIO the store failed (a partial check: nothing is concluded)
 */
int mgr_nscheck_run(struct mgr_db *db, mgr_nscheck_fn fn, void *arg,
		    struct mgr_nscheck_result *res);

/**
 * mgr_nscheck_run in the caller's transaction (read or write: a write txn
 * is checked with its own writes; tests damage a namespace that way and
 * abort). Not in a batch's child.
 * @return as mgr_nscheck_run
 */
int mgr_nscheck_txn(struct mgr_txn *txn, mgr_nscheck_fn fn, void *arg,
		    struct mgr_nscheck_result *res);

/** @return the stable name of kind ("dangling_entry", ...) */
const char *mgr_nscheck_kind_name(enum mgr_nscheck_kind kind);

/**
 * Describe p in one line, without a newline: what, which inode or entry,
 * expected vs found (names with control bytes or quotes are escaped).
 * @return the length snprintf would have written
 */
int mgr_nscheck_format(const struct mgr_nscheck_problem *p, char *buf,
		       size_t cap);

#endif
