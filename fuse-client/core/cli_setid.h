/*
 * cli_setid.h - drop a file's set-user-ID / set-group-ID bits when the
 * caller writes to it, as the kernel does on a local file system
 * (setid.h has the rule). Truncate and chown drop them at the mgr by
 * themselves; a write needs this call first. Shared by both front ends
 * (rpfs-fuse and librpfs).
 */
#ifndef RPFS_CLI_SETID_H
#define RPFS_CLI_SETID_H

#include <stdint.h>

#include "cli_core.h"

/**
 * Does the attribute cache show set-id bits on ino? A cheap filter before
 * building the caller's credential (reads /proc on the FUSE side). Cost: a
 * hash lookup under the inode table's lock.
 * @param[in] fs the mounted file system
 * @param[in] ino the inode
 * @return 1 if the cached mode has S_ISUID or S_ISGID, 0 otherwise or when
 *	the inode is not cached
 */
int cli_setid_maybe(struct cli_fs *fs, uint64_t ino);

/**
 * Before a write by c: if the cached mode shows set-id bits that such a
 * write drops (setid_kill_write), drop them at the mgr (SETATTR with
 * PROTO_SA_KILLPRIV) and merge the new attributes into the cache, so
 * that later writes cost nothing. A bit set by another client after this
 * one last fetched the attributes (open, stat) is not seen.
 * Cost: nothing unless bits drop; then one mgr round trip.
 * @param[in] fs the mounted file system
 * @param[in] c the writer's credential
 * @param[in] ino the inode
 * @return 1 bits were dropped, 0 nothing to drop, or -EACCES (no write
 *	permission any more), -ENOENT, -EIO, another mgr -errno
 */
int cli_setid_write(struct cli_fs *fs, const struct proto_cred *c,
		    uint64_t ino);

#endif
