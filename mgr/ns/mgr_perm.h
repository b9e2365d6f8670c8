/*
 * mgr_perm.h - POSIX permission checks for the mgr, against the caller's
 * proto_cred, the way the kernel would do them.
 */
#ifndef RPFS_MGR_PERM_H
#define RPFS_MGR_PERM_H

#include <stdint.h>

#include "mgr_db.h"
#include "proto.h"

#define MGR_MAY_EXEC 1u
#define MGR_MAY_WRITE 2u
#define MGR_MAY_READ 4u

/** @return 1 if gid is the caller's primary or a supplementary group */
int mgr_perm_in_group(const struct proto_cred *c, uint32_t gid);

/**
 * Check rwx access (MGR_MAY_* mask) to an inode. Root passes, except that
 * exec of a non-directory needs at least one x bit.
 * @return 0, -EACCES
 */
int mgr_perm_check(const struct proto_cred *c, const struct mgr_inode *in,
		   uint32_t mask);

/**
 * May the caller remove or rename victim out of dir (sticky-bit rule)?
 * @return 0, -EPERM
 */
int mgr_perm_sticky(const struct proto_cred *c, const struct mgr_inode *dir,
		    const struct mgr_inode *victim);

/** @return 1 if the caller owns in or is root */
int mgr_perm_owner(const struct proto_cred *c, const struct mgr_inode *in);

/** Root squash, in place: uid 0 becomes 65534 with gid 65534, a gid 0
 * becomes 65534, and group 0 is dropped from the supplementary groups. */
void mgr_perm_squash(struct proto_cred *c);

#endif
