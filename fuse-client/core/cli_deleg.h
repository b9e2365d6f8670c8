/*
 * cli_deleg.h - the mount's WRITE leases and delegated ops: directories
 * this mount made and holds alone, in which it answers CREATE, MKDIR and
 * SYMLINK itself, with inode numbers from ranges the mgr handed it; the
 * new inodes' SETATTRs and SETBLOCKS join the queue while their create is
 * unsent; a flusher thread sends the queue in order as BATCH requests (one
 * commit each). Anything else that names a queued inode or a held
 * directory waits until the queue has committed (cli_deleg_before).
 * Thread-safe (one mutex). Design: HACKING.md "Leases and callbacks",
 * Delegated ops.
 */
#ifndef RPFS_CLI_DELEG_H
#define RPFS_CLI_DELEG_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct cli_fs;
struct cli_deleg;

#define CLI_DELEG_BATCH_OPS 128u    /* send once this many ops wait ... */
#define CLI_DELEG_DELAY_MS 50u      /* ... or the oldest waited this long */
#define CLI_DELEG_RETRY_MS 1000u    /* a failed send is tried again after */
#define CLI_DELEG_MAX_QUEUED 8192u  /* past it, ops take today's path */

/* Whether the callback channel is live (cli_cb_live). */
typedef int (*cli_deleg_live_fn)(void *arg);

/**
 * Start the record and its flusher thread.
 * @param live says whether the callback channel answers: no lease is
 *	taken while it does not
 * @return 0, -ENOMEM, or pthread_create's -errno
 */
int cli_deleg_new(struct cli_deleg **out, struct cli_fs *fs,
		  cli_deleg_live_fn live, void *live_arg);

/**
 * Send what is queued and wait for its commit (up to the mount's timeout
 * per attempt, three attempts), log what could not be sent, stop the
 * thread and free. NULL: nothing.
 */
void cli_deleg_free(struct cli_deleg *d);

/**
 * A MKDIR reply granted this mount a WRITE lease on the new directory
 * (g->ino == dir->ino): record it, with no names, unless the channel is
 * down or a recall of it was handled after g->evseq.
 */
void cli_deleg_grant(struct cli_deleg *d, const struct proto_attr *dir,
		     const struct proto_grant *g);

/**
 * The callback thread handled a RECALL of dir, event seq: stop acting
 * alone in it, send the queue and wait for its commit, so that the
 * acknowledgement that follows tells the mgr everything this mount did
 * there is in the store.
 * @return 0, or -EIO: the queue could not be sent (acknowledged anyway:
 *	the mgr's wait would end with the lease)
 */
int cli_deleg_recall(struct cli_deleg *d, uint64_t dir, uint64_t seq);

/** Drop every WRITE lease (the channel lapsed, a RESET, a mgr restart);
 * the queue is still sent, as ordinary ops would be. */
void cli_deleg_reset(struct cli_deleg *d);

/**
 * This mount is about to change dir's names by today's path (unlink,
 * rename, link): what it queued reaches the mgr first, and it stops acting
 * alone in dir (it would have to track what the mgr decides).
 * @return 0, -EIO the queue could not be sent
 */
int cli_deleg_end(struct cli_deleg *d, uint64_t dir);

/** A SETATTR by today's path answered with a: an inode made here alone
 * keeps its record with these attributes, and a held directory judges
 * creates by its new mode and owner. */
void cli_deleg_attr(struct cli_deleg *d, const struct proto_attr *a);

/** This mount made name (inode ino) in dir by today's path: a held dir
 * records it. */
void cli_deleg_named(struct cli_deleg *d, uint64_t dir, const char *name,
		     uint64_t ino);

/**
 * A LOOKUP of name in parent: answered here when parent is held (the
 * mount knows every name in it) and the name is free or names an inode
 * made here alone (its record).
 * @param[out] a the inode's attributes, on a hit
 * @return 0 a hit; -ENOENT no such name; -EAGAIN ask the mgr
 */
int cli_deleg_lookup(struct cli_deleg *d, uint64_t parent, const char *name,
		     struct proto_attr *a);

/**
 * CREATE (mode S_IFREG | perms), MKDIR (S_IFDIR | perms) or SYMLINK
 * (target non-NULL) of name in parent, answered here if parent is held,
 * the name is free, the caller may write there alone (root, or parent's
 * owner with write and search permission) and a number is at hand.
 * @param[out] a the new inode's attributes
 * @return 0 queued; -EAGAIN take today's path
 */
int cli_deleg_mknode(struct cli_deleg *d, const struct proto_cred *c,
		     uint64_t parent, const char *name, uint32_t mode,
		     const char *target, struct proto_attr *a);

/**
 * UNLINK (dir 0) or RMDIR (dir 1) of name in parent, answered here if
 * parent is held, the caller may write there alone, and name is an inode
 * made here alone with one link (a directory: held here, empty). Its
 * record stays until the op is answered, so that a PURGE of it waits.
 * @param[out] f what the mgr frees (a regular file: its number and
 *	layout, whose data the caller removes as after today's UNLINK; else
 *	zero); may be NULL for RMDIR
 * @return 0 queued; -EAGAIN take today's path
 */
int cli_deleg_remove(struct cli_deleg *d, const struct proto_cred *c,
		     uint64_t parent, const char *name, int dir,
		     struct proto_freed *f);

/**
 * A SETATTR of an inode this mount made alone in a directory it still
 * holds joins the queue (no size change; for other than root, only its
 * owner's mode and times).
 * @param[out] a the attributes after it
 * @return 0 queued; -EAGAIN take today's path (after cli_deleg_before)
 */
int cli_deleg_setattr(struct cli_deleg *d, const struct proto_cred *c,
		      uint64_t ino, const struct proto_mreq *m,
		      struct proto_attr *a);

/**
 * A SETBLOCKS of an inode this mount made alone in a directory it still
 * holds joins the queue, its blocks counted from what the mount wrote (no
 * iod asked).
 * @return 0 queued; -EAGAIN take today's path
 */
int cli_deleg_setblocks(struct cli_deleg *d, const struct proto_cred *c,
			const struct proto_mreq *m, struct proto_attr *a);

/** Whether this mount made ino alone in a directory it still holds (its
 * record: queued, in flight or committed). */
int cli_deleg_pending(struct cli_deleg *d, uint64_t ino);

/**
 * GETATTR of an inode this mount made alone in a directory it still
 * holds: answered from its record (nobody else can reach the inode).
 * @return 0 (a filled), -EAGAIN ask the mgr
 */
int cli_deleg_getattr(struct cli_deleg *d, uint64_t ino, struct proto_attr *a);

/**
 * A request of today's path names these inodes (0s skipped): if an op
 * queued or in flight names one of them (an inode this mount made alone,
 * a directory it holds), wait until everything queued now has committed,
 * so the mgr sees them first. A request that changes them (change) also
 * drops their records: the mgr's answers rule from then on.
 * @return 0, -EIO the queue could not be sent
 */
int cli_deleg_before(struct cli_deleg *d, const uint64_t *inos, unsigned n,
		     int change);

/**
 * Wait until everything queued now has committed (a PURGE of what this
 * mount removed alone must come after the removal).
 * @return 0, -EIO the queue could not be sent
 */
int cli_deleg_flush(struct cli_deleg *d);

/**
 * fsync, fsyncdir, unmount: send everything queued, wait for its commit,
 * and report the first op the mgr refused since the last call (then
 * forgotten).
 * @return 0, the refused op's -errno, -EIO the queue could not be sent
 */
int cli_deleg_sync(struct cli_deleg *d);

/** Ops queued and in flight, sent in batches, refused by the mgr, and
 * creates answered here (stats, tests). */
void cli_deleg_counts(struct cli_deleg *d, uint64_t *queued,
		      uint64_t *batches, uint64_t *refused, uint64_t *local);

#endif
