/*
 * lockset.h - a set of byte-range locks of many owners on many inodes, with
 * POSIX semantics per owner: setting a range splits, merges, upgrades and
 * downgrades the owner's own locks, an F_UNLCK range punches them. Used by
 * the mgr as the authoritative lock table (mgr_lock.c) and by the client as
 * its record of the locks it holds, to reclaim them after a mgr restart
 * (cli_lock.c). Not thread-safe: the user serializes.
 */
#ifndef RPFS_LOCKSET_H
#define RPFS_LOCKSET_H

#include <stddef.h>
#include <stdint.h>

/* One lock, or a wanted lock. Ranges are inclusive; end PROTO_LK_EOF = to
 * the end of the file. Two locks conflict when they are on the same inode,
 * of the same kind, of different owners (session, owner), their ranges
 * overlap and one of them is a write lock. The fields after kind are the
 * set's index links: meaningless in a request or in a copy. */
struct lockset_lock {
	uint64_t ino;
	uint64_t session, owner;
	uint64_t start, end;
	uint32_t pid;
	uint8_t type;              /* PROTO_LK_RDLCK / WRLCK (UNLCK in a request) */
	uint8_t kind;              /* PROTO_LK_POSIX / FLOCK */
	uint8_t gone;              /* being dropped (lockset_drop_sessions) */
	uint32_t prio;             /* range tree: heap priority (treap) */
	uint64_t max_end;          /* range tree: largest end in the subtree */
	struct lockset_lock *left, *right; /* range tree of its file and type */
	struct lockset_lock *onext; /* its owner's list */
};

struct ls_hnode;

/* An open hash (chained, doubled as it fills) of files or owners. */
struct ls_hash {
	struct ls_hnode **bucket;  /* nb chains, NULL until the first insert */
	size_t nb, n;
};

/*
 * The set. Locks are indexed twice: by owner (inode, kind, session, owner:
 * what apply and drop touch) and, per file (inode, kind), in two range
 * trees, of read and of write locks (what a conflict search touches). So
 * the cost of an operation does not grow with the number of other owners'
 * locks on the same inode, only (logarithmically) with the tree.
 */
struct lockset {
	struct ls_hash files;      /* struct ls_file by (ino, kind) */
	struct ls_hash owners;     /* struct ls_owner by (ino, kind, sess, owner) */
	size_t count;              /* locks held */
	size_t max;                /* bound on count */
	uint64_t rng;              /* treap priorities */
	uint64_t visits;           /* locks looked at by searches (a cost gauge) */
};

/** Start an empty set holding at most max locks. */
void lockset_init(struct lockset *s, size_t max);

/** Free every lock. */
void lockset_fini(struct lockset *s);

/**
 * The first lock of s that conflicts with want (NULL: none, or want is an
 * unlock): write locks first, each type in order of start. Cost:
 * O(log n) in the locks of want's file, plus the owner's own locks in
 * want's range (skipped).
 */
const struct lockset_lock *lockset_conflict(struct lockset *s,
					    const struct lockset_lock *want);

/**
 * Call fn for every lock conflicting with want, until it returns non-zero.
 * fn must not change s. Cost: as lockset_conflict, plus the locks visited.
 * Searches add the locks they look at to s->visits, and change nothing
 * else.
 * @return fn's non-zero value, or 0
 */
int lockset_each_conflict(struct lockset *s,
			  const struct lockset_lock *want,
			  int (*fn)(const struct lockset_lock *l, void *arg),
			  void *arg);

/**
 * Set want's range of want's owner to want->type (UNLCK removes), splitting
 * and merging the owner's locks of that kind on that inode. Conflicts with
 * other owners are not checked (see lockset_conflict). Atomic: on failure
 * nothing changed. Cost: the owner's locks on that file, O(log n) each
 * changed.
 * @return 0, -ENOLCK (the set is full), -ENOMEM
 */
int lockset_apply(struct lockset *s, const struct lockset_lock *want);

/** Whether (session, owner) holds a lock of kind on ino. Cost: O(1). */
int lockset_owner_holds(const struct lockset *s, uint64_t ino,
			uint64_t session, uint64_t owner, uint8_t kind);

/** Whether want's owner holds want's whole range already, of want's type
 * and kind (so applying want would change nothing). Cost: the owner's
 * locks on that file. */
int lockset_owner_covers(const struct lockset *s,
			 const struct lockset_lock *want);

/**
 * Remove the locks of (session, owner) of kind on ino. Cost: those locks.
 * @return the number removed
 */
size_t lockset_drop_owner(struct lockset *s, uint64_t ino, uint64_t session,
			  uint64_t owner, uint8_t kind);

/**
 * Remove every lock of session (all inodes). Cost: every owner of the set.
 * @return the number removed
 */
size_t lockset_drop_session(struct lockset *s, uint64_t session);

/**
 * Remove every lock of the sessions match() picks, in one pass (so that
 * many sessions ending at once cost one pass, not one each). match is
 * called once per owner with locks: (its session, its lock count, arg).
 * Cost: every owner of the set; a file that loses many of its locks is
 * rebuilt once (O(its locks)) instead of losing them one by one.
 * @return the number of locks removed
 */
size_t lockset_drop_sessions(struct lockset *s,
			     int (*match)(uint64_t session, size_t nlocks,
					  void *arg),
			     void *arg);

/**
 * Call fn for every lock until it returns non-zero. fn must not change s.
 * @return fn's non-zero value, or 0
 */
int lockset_each(const struct lockset *s,
		 int (*fn)(const struct lockset_lock *l, void *arg), void *arg);

#endif
