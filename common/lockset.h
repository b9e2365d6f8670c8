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
 * overlap and one of them is a write lock. */
struct lockset_lock {
	uint64_t ino;
	uint64_t session, owner;
	uint64_t start, end;
	uint32_t pid;
	uint8_t type;              /* PROTO_LK_RDLCK / WRLCK (UNLCK in a request) */
	uint8_t kind;              /* PROTO_LK_POSIX / FLOCK */
	struct lockset_lock *next; /* hash chain */
};

#define LOCKSET_NBUCKETS 1024

struct lockset {
	struct lockset_lock *bucket[LOCKSET_NBUCKETS]; /* by inode */
	size_t count;              /* locks held */
	size_t max;                /* bound on count */
};

/** Start an empty set holding at most max locks. */
void lockset_init(struct lockset *s, size_t max);

/** Free every lock. */
void lockset_fini(struct lockset *s);

/**
 * The first lock of s that conflicts with want (NULL: none, or want is an
 * unlock). Cost: the locks of want's hash bucket.
 */
const struct lockset_lock *lockset_conflict(const struct lockset *s,
					    const struct lockset_lock *want);

/**
 * Call fn for every lock conflicting with want, until it returns non-zero.
 * @return fn's non-zero value, or 0
 */
int lockset_each_conflict(const struct lockset *s,
			  const struct lockset_lock *want,
			  int (*fn)(const struct lockset_lock *l, void *arg),
			  void *arg);

/**
 * Set want's range of want's owner to want->type (UNLCK removes), splitting
 * and merging the owner's locks of that kind on that inode. Conflicts with
 * other owners are not checked (see lockset_conflict). Atomic: on failure
 * nothing changed.
 * @return 0, -ENOLCK (the set is full), -ENOMEM
 */
int lockset_apply(struct lockset *s, const struct lockset_lock *want);

/** Whether (session, owner) holds a lock of kind on ino. Cost: a bucket. */
int lockset_owner_holds(const struct lockset *s, uint64_t ino,
			uint64_t session, uint64_t owner, uint8_t kind);

/** Whether want's owner holds want's whole range already, of want's type
 * and kind (so applying want would change nothing). Cost: a bucket. */
int lockset_owner_covers(const struct lockset *s,
			 const struct lockset_lock *want);

/**
 * Remove the locks of (session, owner) of kind on ino.
 * @return the number removed
 */
size_t lockset_drop_owner(struct lockset *s, uint64_t ino, uint64_t session,
			  uint64_t owner, uint8_t kind);

/**
 * Remove every lock of session (all inodes). Cost: the whole table.
 * @return the number removed
 */
size_t lockset_drop_session(struct lockset *s, uint64_t session);

/**
 * Call fn for every lock until it returns non-zero. fn must not change s.
 * @return fn's non-zero value, or 0
 */
int lockset_each(const struct lockset *s,
		 int (*fn)(const struct lockset_lock *l, void *arg), void *arg);

#endif
