/*
 * cli_inode.h - the client's inode table: what the client knows about each
 * inode the kernel holds a reference to (lookup count) or has open. It keeps
 * the cached layout, the size last seen at the mgr and the size this client
 * has written up to, so that:
 *   - getattr reports max(mgr size, locally written size);
 *   - flush/fsync/release push a grown size to the mgr (SETSIZE) when dirty;
 *   - an unlinked file that is still open keeps its data until last release.
 * One mutex protects the whole table; every operation is O(1) under it.
 */
#ifndef RPFS_CLI_INODE_H
#define RPFS_CLI_INODE_H

#include <stdint.h>

#include "proto.h"

struct cli_itab;

/**
 * Create an empty table.
 * @return 0, -ENOMEM
 */
int cli_itab_new(struct cli_itab **out);

/** Free the table and every entry. */
void cli_itab_free(struct cli_itab *t);

/**
 * The table's clock: read it before sending a mgr request whose reply
 * carries attributes, and pass it to the call that merges them (since).
 * A reply to a request sent before this client's last size event on the
 * inode (SETSIZE acknowledged, truncate) may carry an older size; its size
 * is then ignored. Cost: one lock round.
 * @return the current clock value
 */
uint64_t cli_itab_clock(struct cli_itab *t);

/** Advance the clock and return it: a point that requests sent later are
 * after (their cli_itab_clock is not smaller), and requests sent earlier
 * are not. */
uint64_t cli_itab_tick(struct cli_itab *t);

/**
 * Merge fresh attributes from the mgr: creates the entry if needed, adds
 * nlookup to its lookup count, records the layout and mgr size (unless
 * stale, see cli_itab_clock), and rewrites attr->size to the size this
 * client must report.
 *
 * Writeback cache (cli_itab_set_writeback): the kernel then keeps a
 * regular file's size itself and ignores the size in every reply for an
 * inode it already has. So when a lookup (nlookup > 0) finds the size
 * changed behind the kernel's back (another client wrote or truncated)
 * and the file is not open here, the entry's generation is bumped: the
 * kernel sees a stale inode, drops it and builds a new one from this
 * reply (cli_inode_gen() gives the generation to reply with).
 * @return 0, -ENOMEM (only when nlookup > 0 and the entry is new)
 */
int cli_inode_update(struct cli_itab *t, struct proto_attr *attr,
		     uint64_t nlookup, uint64_t since);

/**
 * Drop nlookup kernel references; the entry goes when none remain and the
 * file is not open.
 */
void cli_inode_forget(struct cli_itab *t, uint64_t ino, uint64_t nlookup);

/**
 * Note an open of ino (attr from the mgr OPEN/CREATE reply sent at clock
 * since, size adjusted as cli_inode_update does).
 * @return 0, -ENOMEM
 */
int cli_inode_open(struct cli_itab *t, struct proto_attr *attr,
		   uint64_t since);

/**
 * Note a release. If it was the last open and the inode was unlinked in
 * the meantime, returns 1 with its layout in *rm: the caller removes the
 * stripe objects and purges it.
 * @return 0 nothing to do, 1 remove now
 */
int cli_inode_release(struct cli_itab *t, uint64_t ino,
		      struct proto_layout *rm);

/**
 * Get what I/O needs: the layout and the size to clip reads at.
 * @return 0, -ENOENT (not in the table or no layout known)
 */
int cli_inode_io(struct cli_itab *t, uint64_t ino, struct proto_layout *l,
		 uint64_t *size);

/** Record that this client wrote up to end (exclusive) at time when;
 * marks it dirty. */
void cli_inode_wrote(struct cli_itab *t, uint64_t ino, uint64_t end,
		     const struct proto_time *when);

/**
 * Take the dirty flag: returns 1 with the size to push (SETSIZE) and the
 * time of the last write as its mtime, and clears the flag; the caller
 * calls cli_inode_pushed() or cli_inode_push_failed() after the push.
 * @return 0 clean, 1 push *size
 */
int cli_inode_take_dirty(struct cli_itab *t, uint64_t ino, uint64_t *size,
			 struct proto_time *mtime);

/**
 * The mgr acknowledged a SETSIZE of size (sent at clock since) with attr:
 * merge attr and, unless the file was written again meanwhile, forget the
 * locally written size, so that a later truncate by another client shows
 * here. A size event: older replies' sizes are ignored from now on.
 */
void cli_inode_pushed(struct cli_itab *t, struct proto_attr *attr,
		      uint64_t size, uint64_t since);

/** Mark dirty again after a failed SETSIZE. */
void cli_inode_push_failed(struct cli_itab *t, uint64_t ino);

/** A truncate to size: the mgr size becomes size, nothing is left to push.
 * A size event (see cli_itab_clock). */
void cli_inode_truncated(struct cli_itab *t, uint64_t ino, uint64_t size);

/** Replace the cached layout (after user.rpfs.layout was set). */
void cli_inode_set_layout(struct cli_itab *t, uint64_t ino,
			  const struct proto_layout *l);

/**
 * The inode's last link is gone (UNLINK/RENAME returned it as freed). If it
 * is open here, removal is deferred to the last release and 0 is returned;
 * otherwise 1: the caller removes and purges now.
 * @return 0 deferred, 1 remove now
 */
int cli_inode_unlinked(struct cli_itab *t, uint64_t ino,
		       const struct proto_layout *l);

/**
 * Last attributes seen for ino, with nlink 0 if it was unlinked: lets
 * getattr answer for an open, unlinked file the mgr may no longer know.
 * @return 0, -ENOENT
 */
int cli_inode_cached_attr(struct cli_itab *t, uint64_t ino,
			  struct proto_attr *attr);

/**
 * Hold an entry for ino without a kernel lookup: the root, which the
 * kernel has from the mount on and never looks up, so that GETATTR
 * replies are kept for it (cli_inode_update keeps them only for entries
 * that exist) and creates in it are folded in (cli_inode_dir_created).
 * Its attributes stay unknown until the first mgr reply.
 * @return 0, -ENOMEM
 */
int cli_inode_pin(struct cli_itab *t, uint64_t ino);

/**
 * How long a directory's attributes from the mgr may be served by
 * cli_inode_fresh_attr: the mount's attr_timeout (0, the default: never).
 * Set before the mount serves requests.
 * @param seconds the time to live, >= 0
 */
void cli_itab_set_attr_ttl(struct cli_itab *t, double seconds);

/**
 * This mount created child (CREATE with O_EXCL, MKDIR, MKNOD, SYMLINK
 * acknowledged) in directory parent. The mgr set the parent's mtime and
 * ctime to the child's ctime in the same transaction, and a subdirectory
 * added a link: if the parent's cached attributes are trusted (see
 * cli_inode_fresh_attr) they are brought to that state, so that the
 * kernel's next GETATTR of the parent (it drops its own copy after every
 * change) needs no mgr round trip. A mgr reply to a request sent before
 * this no longer makes them trusted. Cost: a lookup in the table.
 * @param parent the directory's inode number
 * @param child  the new inode's attributes from the mgr's reply
 */
void cli_inode_dir_created(struct cli_itab *t, uint64_t parent,
			   const struct proto_attr *child);

/**
 * This mount made a change that cached directory attributes do not follow
 * (UNLINK, RMDIR, RENAME, LINK, a CREATE that may have opened an existing
 * file, an xattr change): no cached attributes are served from here until
 * each is fetched from the mgr again. Cost: one counter increment.
 */
void cli_itab_attr_changed(struct cli_itab *t);

/**
 * A directory's attributes, if they may be served without asking the mgr:
 * taken from a mgr reply less than the TTL (cli_itab_set_attr_ttl) ago,
 * with only this mount's own creates folded in since (cli_inode_dir_created)
 * and no cli_itab_attr_changed after. Another mount's change thus shows
 * within attr_timeout, as through the kernel's own cache. Only
 * directories: a file's size and times move with the writes in flight.
 * @param attr out: the attributes
 * @param ttl  out: seconds left of the TTL (> 0), for the kernel's cache
 * @return 0, -ENOENT (not cached, not a directory, or not fresh)
 */
int cli_inode_fresh_attr(struct cli_itab *t, uint64_t ino,
			 struct proto_attr *attr, double *ttl);

/**
 * A directory's attributes under its READ lease (cli_lease_dir_held): as
 * cli_inode_fresh_attr, but with no TTL, if the request that brought them
 * was sent at clock since or later (after the lease began: a change by
 * another mount since then recalls the lease) and no change of this
 * mount's they do not follow came after.
 * @return 0, -ENOENT (not cached, not a directory, or older)
 */
int cli_inode_leased_attr(struct cli_itab *t, uint64_t ino, uint64_t since,
			  struct proto_attr *attr);

/** Tell the table the kernel writeback cache is on (before serving). */
void cli_itab_set_writeback(struct cli_itab *t, int on);

/** @return whether the writeback cache is on */
int cli_itab_writeback(struct cli_itab *t);

/**
 * The FUSE generation to put in entry replies for ino (1 unless bumped by
 * cli_inode_update in writeback mode).
 * @return the generation, 1 for an unknown inode
 */
uint64_t cli_inode_gen(struct cli_itab *t, uint64_t ino);

#endif
