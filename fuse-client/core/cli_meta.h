/*
 * cli_meta.h - one call per mgr operation. Each encodes a proto_mreq with
 * the caller's credential, runs it on the mgr connection and decodes the
 * reply. All return 0 or -errno: the mgr's status as it sent it, or -EIO
 * when the mgr could not be reached, timed out or sent a malformed reply
 * (logged once per failure burst). Names are NUL-terminated path components
 * (1..PROTO_MAX_NAME bytes, else -ENAMETOOLONG / -EINVAL).
 *
 * Results that point at bytes (struct proto_str, proto_mrep) point into the
 * calling thread's reply scratch and stay valid until that thread's next
 * cli_meta call.
 */
#ifndef RPFS_CLI_META_H
#define RPFS_CLI_META_H

#include "cli_core.h"

/** LOOKUP parent/name. @return 0, -ENOENT, -EACCES, -ENOTDIR, -EIO, ... */
int cli_meta_lookup(struct cli_fs *fs, const struct proto_cred *c,
		    uint64_t parent, const char *name, struct proto_attr *attr);

/**
 * LOOKUP, and the READ lease on parent its reply may grant (a request
 * carries the session only with leases on: cli_fs.session), for a hit or
 * a miss.
 * @param[out] g the grant (ino 0: none); NULL: not wanted
 * @return as cli_meta_lookup
 */
int cli_meta_lookup_grant(struct cli_fs *fs, const struct proto_cred *c,
			  uint64_t parent, const char *name,
			  struct proto_attr *attr, struct proto_grant *g);

/** GETATTR. @return 0, -ENOENT, -EIO */
int cli_meta_getattr(struct cli_fs *fs, const struct proto_cred *c,
		     uint64_t ino, struct proto_attr *attr);

/**
 * SETATTR: change the fields named by valid (PROTO_SA_*), taking the values
 * from in (mode, uid, gid, size, atime, mtime).
 * @return 0, -EPERM, -EACCES, -EINVAL, -ENOENT, -EIO
 */
int cli_meta_setattr(struct cli_fs *fs, const struct proto_cred *c,
		     uint64_t ino, uint32_t valid, const struct proto_attr *in,
		     struct proto_attr *attr);

/** CREATE (flags PROTO_CREATE_EXCL). @return 0, -EEXIST, -EACCES, -EIO, ... */
int cli_meta_create(struct cli_fs *fs, const struct proto_cred *c,
		    uint64_t parent, const char *name, uint32_t mode,
		    uint32_t flags, struct proto_attr *attr);

/** MKDIR. @return 0, -EEXIST, -EACCES, -ENOSPC, -EIO, ... */
int cli_meta_mkdir(struct cli_fs *fs, const struct proto_cred *c,
		   uint64_t parent, const char *name, uint32_t mode,
		   struct proto_attr *attr);

/** MKNOD. @return 0, -EEXIST, -EPERM (unsupported type), -EIO, ... */
int cli_meta_mknod(struct cli_fs *fs, const struct proto_cred *c,
		   uint64_t parent, const char *name, uint32_t mode,
		   uint32_t rdev, struct proto_attr *attr);

/** UNLINK; freed->ino != 0 when the last link went. @return 0, -ENOENT, -EISDIR, -EIO */
int cli_meta_unlink(struct cli_fs *fs, const struct proto_cred *c,
		    uint64_t parent, const char *name, struct proto_freed *freed);

/** RMDIR. @return 0, -ENOENT, -ENOTEMPTY, -ENOTDIR, -EIO */
int cli_meta_rmdir(struct cli_fs *fs, const struct proto_cred *c,
		   uint64_t parent, const char *name);

/** RENAME (PROTO_RENAME_*). @return 0, -ENOENT, -EEXIST, -ENOTEMPTY, -EINVAL, -EIO */
int cli_meta_rename(struct cli_fs *fs, const struct proto_cred *c,
		    uint64_t parent, const char *name, uint64_t newparent,
		    const char *newname, uint32_t flags,
		    struct proto_freed *freed);

/** LINK ino as newparent/newname. @return 0, -EEXIST, -EPERM, -EMLINK, -EIO */
int cli_meta_link(struct cli_fs *fs, const struct proto_cred *c, uint64_t ino,
		  uint64_t newparent, const char *newname,
		  struct proto_attr *attr);

/** SYMLINK. @return 0, -EEXIST, -ENAMETOOLONG (target), -EIO, ... */
int cli_meta_symlink(struct cli_fs *fs, const struct proto_cred *c,
		     uint64_t parent, const char *name, const char *target,
		     struct proto_attr *attr);

/**
 * READLINK into buf as a NUL-terminated string.
 * @param cap size of buf; targets longer than cap - 1 fail with -ENAMETOOLONG
 * @return 0, -EINVAL (not a symlink), -ENAMETOOLONG, -EIO
 */
int cli_meta_readlink(struct cli_fs *fs, const struct proto_cred *c,
		      uint64_t ino, char *buf, size_t cap);

/**
 * READDIR from after cookie, at most max reply body bytes. rep->dirents
 * (walk with proto_dirent_next) points into thread scratch.
 * @return 0, -ENOTDIR, -ENOENT, -EIO
 */
int cli_meta_readdir(struct cli_fs *fs, const struct proto_cred *c,
		     uint64_t ino, uint64_t cookie, uint32_t max,
		     struct proto_mrep *rep);

/** STATFS. @return 0, -EIO */
int cli_meta_statfs(struct cli_fs *fs, const struct proto_cred *c,
		    struct proto_statfs *st);

/**
 * GETXATTR. With max 0 only *xsize is set (size query); else *val points at
 * the value in thread scratch.
 * @return 0, -ENODATA, -ERANGE (value larger than max), -EIO
 */
int cli_meta_getxattr(struct cli_fs *fs, const struct proto_cred *c,
		      uint64_t ino, const char *name, uint32_t max,
		      struct proto_str *val, uint32_t *xsize);

/** SETXATTR (PROTO_XATTR_*). @return 0, -EEXIST, -ENODATA, -E2BIG, -EBUSY, -EINVAL, -EIO */
int cli_meta_setxattr(struct cli_fs *fs, const struct proto_cred *c,
		      uint64_t ino, const char *name, const void *value,
		      size_t len, uint32_t flags);

/** LISTXATTR, same size semantics as cli_meta_getxattr. @return 0, -ERANGE, -EIO */
int cli_meta_listxattr(struct cli_fs *fs, const struct proto_cred *c,
		       uint64_t ino, uint32_t max, struct proto_str *val,
		       uint32_t *xsize);

/** REMOVEXATTR. @return 0, -ENODATA, -EIO */
int cli_meta_removexattr(struct cli_fs *fs, const struct proto_cred *c,
			 uint64_t ino, const char *name);

/** OPEN: permission check for accmode flags; returns fresh attributes.
 * @return 0, -EACCES, -EISDIR, -ENOENT, -EIO */
int cli_meta_open(struct cli_fs *fs, const struct proto_cred *c, uint64_t ino,
		  uint32_t flags, struct proto_attr *attr);

/** ACCESS with an R_OK|W_OK|X_OK mask. @return 0, -EACCES, -EIO */
int cli_meta_access(struct cli_fs *fs, const struct proto_cred *c,
		    uint64_t ino, uint32_t mask);

/**
 * SETBLOCKS: publish the blocks the iods hold; flags PROTO_SB_GROW grows
 * the size to at least size, PROTO_SB_MTIME / PROTO_SB_CTIME set times to t.
 * @return 0, -ENOENT, -EISDIR, -EINVAL, -EOPNOTSUPP (an older mgr), -EIO
 */
int cli_meta_setblocks(struct cli_fs *fs, const struct proto_cred *c,
		       uint64_t ino, uint32_t flags, uint64_t size,
		       const struct proto_time *t, uint64_t blocks,
		       struct proto_attr *attr);

/** SETSIZE: grow the size to at least size and set mtime. @return 0, -ENOENT, -EIO */
int cli_meta_setsize(struct cli_fs *fs, const struct proto_cred *c,
		     uint64_t ino, uint64_t size, const struct proto_time *mtime,
		     struct proto_attr *attr);

/** PURGE an orphan inode. @return 0, -ENOENT, -EBUSY (still linked), -EIO */
int cli_meta_purge(struct cli_fs *fs, const struct proto_cred *c,
		   uint64_t ino);

/**
 * PURGE_MANY: purge n (1..PROTO_MAX_INOS) orphans in one mgr transaction;
 * the ones that are no orphans are skipped.
 * @return 0 all purged, -ENOENT/-EBUSY some skipped (the others purged),
 *	-EINVAL bad n, -EOPNOTSUPP an older mgr, -EIO
 */
int cli_meta_purge_many(struct cli_fs *fs, const struct proto_cred *c,
			const uint64_t *inos, uint32_t n);

/**
 * BATCH: send a session's delegated ops (cli_deleg.c) and decode the
 * statuses; a resend after a lost answer is a repeat the mgr recognises
 * for creates (an UNLINK or RMDIR sent again answers ENOENT).
 * @param[out] retried 1 if an attempt's answer was lost (cli_mgr_run)
 * @return 0 (r filled, r->n == b->n), -E2BIG the batch does not encode,
 *	-EIO the mgr is unreachable or answered badly, or the mgr's -errno
 *	for the batch as a whole
 */
int cli_meta_batch(struct cli_fs *fs, const struct proto_batch *b,
		   struct proto_batchrep *r, int *retried);

#endif
