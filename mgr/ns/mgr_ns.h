/*
 * mgr_ns.h - namespace operations of the mgr. Each call runs in the
 * caller's transaction txn and does not end it: the caller begins txn
 * (a write txn for an op that changes the namespace; a read txn will do
 * for lookup, getattr, readlink, readdir, open, access and files), and
 * commits it when the call returned 0, or aborts it otherwise, since a
 * failed call may have written part of its change. mgr_ops.c is that
 * caller: a top-level txn on the loop thread, or a child of the open
 * batch on the writer thread (group commit). Each call checks the
 * caller's permissions like the kernel would and returns 0 or -errno.
 * Common errors of every call taking an ino or parent: -ENOENT no such
 * inode/name, -ENOTDIR parent is not a directory, -EACCES permission
 * denied, -ENOSPC store full, -EIO store failure.
 */
#ifndef RPFS_MGR_NS_H
#define RPFS_MGR_NS_H

#include "mgr_db.h"
#include "proto.h"

#define MGR_LINK_MAX 65000

/** Fill a wire attr from an inode. */
void mgr_ns_attr(uint64_t ino, const struct mgr_inode *in, struct proto_attr *a);

/** Look name up in parent (needs x on parent). */
int mgr_ns_lookup(struct mgr_db *db, struct mgr_txn *txn,
		  const struct proto_cred *c, uint64_t parent, const char *name,
		  size_t len, struct proto_attr *a);

/** Attributes of ino. */
int mgr_ns_getattr(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		   struct proto_attr *a);

/**
 * Change attributes per m->valid (PROTO_SA_*), of m->ino.
 * @return also -EPERM not owner/root for mode, uid, gid or explicit times;
 *	-EISDIR / -EINVAL size on a directory / non-regular file
 */
int mgr_ns_setattr(struct mgr_db *db, struct mgr_txn *txn,
		   const struct proto_cred *c, const struct proto_mreq *m,
		   struct proto_attr *a);

/**
 * Create a regular file (CREATE; flags PROTO_CREATE_EXCL). Without EXCL an
 * existing regular file is returned after a write-permission check.
 * @return also -EEXIST, -EISDIR existing dir, -EINVAL mode not regular
 */
int mgr_ns_create(struct mgr_db *db, struct mgr_txn *txn,
		  const struct proto_cred *c, uint64_t parent, const char *name,
		  size_t len, uint32_t mode, uint32_t flags, struct proto_attr *a);

/** Make a directory. @return also -EEXIST, -EMLINK */
int mgr_ns_mkdir(struct mgr_db *db, struct mgr_txn *txn,
		 const struct proto_cred *c, uint64_t parent, const char *name,
		 size_t len, uint32_t mode, struct proto_attr *a);

/**
 * Make a fifo, socket or regular file; devices only for root.
 * @return also -EEXIST, -EPERM device by non-root or directory type, -EINVAL
 */
int mgr_ns_mknod(struct mgr_db *db, struct mgr_txn *txn,
		 const struct proto_cred *c, uint64_t parent, const char *name,
		 size_t len, uint32_t mode, uint32_t rdev, struct proto_attr *a);

/** Make a symlink. @return also -EEXIST, -ENAMETOOLONG, -ENOENT empty target */
int mgr_ns_symlink(struct mgr_db *db, struct mgr_txn *txn,
		   const struct proto_cred *c, uint64_t parent, const char *name,
		   size_t len, const char *target, size_t tlen,
		   struct proto_attr *a);

/**
 * A delegated create of a BATCH (proto.h): o->op CREATE, MKDIR or SYMLINK
 * with o->m's parent, name, mode (and target), checked as the op alone
 * with c (CREATE always exclusive: never opens an existing file), the new
 * inode numbered o->newino, which must come from session's ranges
 * (mgr_db_range_use). A CREATE's o->layout must be the one the directory
 * gives its files: same unit, mirror and count (clamped to the stripe
 * width), first below the width. When the name already holds o->newino
 * the op is a repeat (a batch sent again): 0, nothing changed, *a its attr.
 * @param session the batch's session (whose ranges)
 * @return 0, -EEXIST the name holds another inode, -EINVAL another op, a
 *	non-regular CREATE mode, a layout that does not match, newino not
 *	usable from the session's ranges; -ENOTDIR, -ENOENT (parent, or an
 *	empty symlink target), -EACCES, -EMLINK, -ENAMETOOLONG, -ENOSPC, -EIO
 */
int mgr_ns_make_given(struct mgr_db *db, struct mgr_txn *txn,
		      const struct proto_cred *c, uint64_t session,
		      const struct proto_bop *o, struct proto_attr *a);

/** Hard link ino as newparent/name. @return also -EPERM dir, -EEXIST, -EMLINK */
int mgr_ns_link(struct mgr_db *db, struct mgr_txn *txn,
		const struct proto_cred *c, uint64_t ino, uint64_t newparent,
		const char *name, size_t len, struct proto_attr *a);

/**
 * Remove a non-directory name. A regular file losing its last link becomes
 * an orphan returned in f; other inodes are deleted (f->ino = 0).
 * @return also -EISDIR, -EPERM sticky directory
 */
int mgr_ns_unlink(struct mgr_db *db, struct mgr_txn *txn,
		  const struct proto_cred *c, uint64_t parent, const char *name,
		  size_t len, struct proto_freed *f);

/** Remove an empty directory. @return also -ENOTDIR, -ENOTEMPTY, -EPERM */
int mgr_ns_rmdir(struct mgr_db *db, struct mgr_txn *txn,
		 const struct proto_cred *c, uint64_t parent, const char *name,
		 size_t len);

/**
 * Rename (flags PROTO_RENAME_NOREPLACE / EXCHANGE), atomically.
 * @return also -EEXIST (NOREPLACE), -ENOENT (EXCHANGE without target),
 *	-EISDIR, -ENOTDIR, -ENOTEMPTY, -EINVAL (dir into its own subtree or
 *	both flags), -EPERM (sticky), -EMLINK
 */
int mgr_ns_rename(struct mgr_db *db, struct mgr_txn *txn,
		  const struct proto_cred *c, uint64_t parent, const char *name,
		  size_t len, uint64_t newparent, const char *newname,
		  size_t newlen, uint32_t flags, struct proto_freed *f);

/** Copy the symlink target into buf (cap >= PROTO_MAX_PATH). @return also -EINVAL */
int mgr_ns_readlink(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		    char *buf, size_t cap, size_t *len);

/* Readdir output: return nonzero when the entry did not fit (stop). */
typedef int (*mgr_ns_emit_fn)(void *arg, uint64_t cookie, const char *name,
			      size_t len, const struct proto_attr *a);
/**
 * List ino after cookie: "." (cookie 1) and ".." (2) first, then entries.
 * @param[out] eof 1 when no entries follow the ones emitted
 */
int mgr_ns_readdir(struct mgr_db *db, struct mgr_txn *txn,
		   const struct proto_cred *c, uint64_t ino, uint64_t cookie,
		   mgr_ns_emit_fn fn, void *arg, int *eof);

/** Permission check for open(2) flags. @return also -EISDIR write to dir */
int mgr_ns_open(struct mgr_db *db, struct mgr_txn *txn,
		const struct proto_cred *c, uint64_t ino, uint32_t flags,
		struct proto_attr *a);

/** access(2): mask of R_OK/W_OK/X_OK (0 = existence). */
int mgr_ns_access(struct mgr_db *db, struct mgr_txn *txn,
		  const struct proto_cred *c, uint64_t ino, uint32_t mask);

/**
 * SETSIZE: grow the size of regular file ino to at least size, set mtime
 * and ctime. The caller must own the file, be root, or have write
 * permission on it (as for a truncate).
 * @return 0, -ENOENT, -EISDIR, -EINVAL not a regular file, -EACCES,
 *	-ENOSPC, -EIO
 */
int mgr_ns_setsize(struct mgr_db *db, struct mgr_txn *txn,
		   const struct proto_cred *c, uint64_t ino, uint64_t size,
		   const struct proto_time *mtime, struct proto_attr *a);

/**
 * SETBLOCKS: store blocks (512-byte blocks the iods hold) for regular file
 * ino; with PROTO_SB_GROW grow the size to at least size (a growth sets
 * mtime and ctime); PROTO_SB_MTIME sets mtime and ctime, PROTO_SB_CTIME
 * ctime, to t. The caller must be allowed to publish as for SETSIZE.
 * @return 0, -ENOENT, -EISDIR, -EINVAL not a regular file, -EACCES,
 *	-ENOSPC, -EIO
 */
int mgr_ns_setblocks(struct mgr_db *db, struct mgr_txn *txn,
		     const struct proto_cred *c, uint64_t ino, uint32_t flags,
		     uint64_t size, const struct proto_time *t, uint64_t blocks,
		     struct proto_attr *a);

/**
 * Drop an orphan whose stripe objects are gone. A client may drop only an
 * orphan it owns or freed (root, unsquashed, any); the servers any.
 * @param c the caller, or NULL for a connection with the servers' key
 * @return 0, -ENOENT no such orphan, -EBUSY still linked, -EPERM not the
 *	caller's, -EIO
 */
int mgr_ns_purge(struct mgr_db *db, struct mgr_txn *txn,
		 const struct proto_cred *c, uint64_t ino);

/**
 * PURGE each inode of the list in txn, with mgr_ns_purge's rule. An inode
 * that is no orphan (unknown, or linked again) or not the caller's is
 * skipped; the others are purged. The caller commits txn on 0 even when
 * some were skipped, and answers with *skipped.
 * @param[out] skipped 0 all purged, else -ENOENT, -EBUSY or -EPERM for the
 *	first skipped one
 * @return 0, -EIO (abort: nothing purged)
 */
int mgr_ns_purge_many(struct mgr_db *db, struct mgr_txn *txn,
		      const struct proto_cred *c,
		      const struct proto_inos *inos, int *skipped);

/** Inodes in use. */
uint64_t mgr_ns_files(struct mgr_db *db, struct mgr_txn *txn);

/* ---- helpers shared by mgr_ns.c, mgr_rename.c, mgr_xattr.c ---- */

/** Load dir and check it is a directory and the caller has mask on it. */
int mgr_ns_dir(struct mgr_db *db, struct mgr_txn *txn, const struct proto_cred *c,
	       uint64_t ino, uint32_t mask, struct mgr_inode *dir);
/** Drop one link of a non-directory; orphan or delete at zero (the orphan
 * mark keeps uid, the caller's, as the one who freed it). */
int mgr_ns_drop_link(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		     struct mgr_inode *in, const struct proto_time *now,
		     uint32_t uid, struct proto_freed *f);

#endif
