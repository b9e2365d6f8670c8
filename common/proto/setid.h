/*
 * setid.h - when a write, truncate or chown drops the set-user-ID and
 * set-group-ID bits of a file, by the rule of the Linux VFS
 * (setattr_should_drop_suidgid, setattr_should_drop_sgid; checked against
 * tmpfs/ext4 on kernel 6.18). Shared by the mgr, which applies it, and the
 * client core, which uses it to ask the mgr only when a write drops bits.
 * A caller with uid 0 stands for CAP_FSETID (no root squash).
 */
#ifndef RPFS_SETID_H
#define RPFS_SETID_H

#include <stdint.h>

#include "proto.h"

/** @return 1 if gid is the caller's primary or a supplementary group */
int setid_in_group(const struct proto_cred *c, uint32_t gid);

/**
 * Bits a write or truncate by c drops from a file of mode and group gid:
 * none for root or a file that is not regular; else S_ISUID if set, and
 * S_ISGID if set together with S_IXGRP, or without S_IXGRP when c is not
 * in the file's group.
 * @return a subset of S_ISUID | S_ISGID
 */
uint32_t setid_kill_write(const struct proto_cred *c, uint32_t mode,
			  uint32_t gid);

/**
 * Bits a chown/chgrp by c (even to the same owner) drops from a file of
 * mode and (old) group gid: none for a directory; else S_ISUID if set,
 * also for root, and S_ISGID if set together with S_IXGRP, or without
 * S_IXGRP when c is neither root nor in the file's group.
 * @return a subset of S_ISUID | S_ISGID
 */
uint32_t setid_kill_chown(const struct proto_cred *c, uint32_t mode,
			  uint32_t gid);

#endif
