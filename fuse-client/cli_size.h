/*
 * cli_size.h - a regular file's size between this client and the mgr:
 * publishing the size this client wrote up to (SETSIZE) and truncating.
 * Shared by both front ends (rpfs-fuse and librpfs).
 */
#ifndef RPFS_CLI_SIZE_H
#define RPFS_CLI_SIZE_H

#include <stdint.h>

#include "cli_core.h"

/**
 * Push this client's written size to the mgr if it wrote since the last
 * push: SETBLOCKS (SETSIZE with an older mgr) grows the size only, sets
 * mtime to the time of the last write and stores the blocks the iods hold.
 * Cost when dirty: one parallel iod round trip (IO_BLOCKS) and one mgr
 * round trip; none otherwise.
 * @param[in] fs the mounted file system
 * @param[in] c the caller's credential
 * @param[in] ino the inode
 * @return 0 (also when the inode was purged meanwhile), -EIO, or the
 *	mgr's -errno; on failure the inode stays dirty for the next push
 */
int cli_size_push(struct cli_fs *fs, const struct proto_cred *c,
		  uint64_t ino);

/**
 * Truncate: SETATTR at the mgr with PROTO_SA_SIZE and the other changes
 * named by valid (values in in, in->size the new size), then for a regular
 * file each iod's object to its share; unless the new size is 0, the
 * blocks left are published (cli_space_publish). Nothing written before is
 * left to push afterwards. Cost: two round trips (mgr, then the iods in
 * parallel), two more for a size above 0.
 * @param[in] fs the mounted file system
 * @param[in] c the caller's credential
 * @param[in] ino the inode
 * @param[in] valid PROTO_SA_* besides the size
 * @param[in] in the new values
 * @param[out] out the attributes after the change
 * @return 0, -EPERM, -EACCES, -EINVAL, -ENOENT, -EIO, or an iod's -errno
 */
int cli_size_truncate(struct cli_fs *fs, const struct proto_cred *c,
		      uint64_t ino, uint32_t valid, const struct proto_attr *in,
		      struct proto_attr *out);

#endif
