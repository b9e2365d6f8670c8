/*
 * mgr_xattr.h - extended attributes of mgr inodes, including the virtual
 * user.rpfs.layout. Namespaces: user.* (regular files and directories),
 * trusted.* (root only); security.* and system.* are not supported.
 * Each call runs in the caller's transaction txn (a write txn for set and
 * remove) and does not end it; on an error the caller aborts txn. Common
 * errors: -ENOENT no inode, -EACCES, -EOPNOTSUPP namespace, -EIO.
 */
#ifndef RPFS_MGR_XATTR_H
#define RPFS_MGR_XATTR_H

#include "mgr_db.h"
#include "proto.h"

#define MGR_XATTR_LAYOUT "user.rpfs.layout"

/**
 * Read an xattr into buf. cap 0 asks only for the size.
 * @param[out] size the value's full size
 * @return 0, -ENODATA missing, -ERANGE buf too small
 */
int mgr_xattr_get(struct mgr_db *db, struct mgr_txn *txn,
		  const struct proto_cred *c, uint64_t ino, const char *name,
		  size_t nlen, void *buf, size_t cap, size_t *size);

/**
 * Set an xattr (flags PROTO_XATTR_CREATE / REPLACE).
 * @return 0, -EEXIST (CREATE), -ENODATA (REPLACE), -EPERM (user.* on a
 *	special file, trusted.* by non-root), -EINVAL / -EBUSY (layout),
 *	-E2BIG value over PROTO_MAX_XATTR_VALUE, -ENOSPC a new or growing
 *	value when the namespace is full or the inode's xattrs would pass
 *	a cap (mgr_db_xattr_put)
 */
int mgr_xattr_set(struct mgr_db *db, struct mgr_txn *txn,
		  const struct proto_cred *c, uint64_t ino, const char *name,
		  size_t nlen, const void *val, size_t vlen, uint32_t flags);

/**
 * List the names, NUL-terminated each, into buf (cap 0 = size query).
 * @return 0, -ERANGE buf too small
 */
int mgr_xattr_list(struct mgr_db *db, struct mgr_txn *txn,
		   const struct proto_cred *c, uint64_t ino, void *buf,
		   size_t cap, size_t *size);

/** Remove an xattr. @return 0, -ENODATA, -EPERM */
int mgr_xattr_remove(struct mgr_db *db, struct mgr_txn *txn,
		     const struct proto_cred *c, uint64_t ino, const char *name,
		     size_t nlen);

#endif
