/*
 * cli_space.h - the space of a regular file on the iods: fallocate, the
 * blocks the iods really hold (published to the mgr, so stat and du see
 * holes), and SEEK_DATA / SEEK_HOLE answered from the iods' objects.
 * Shared by both front ends (rpfs-fuse and librpfs). The caller waits for
 * the inode's writes in flight first (write-behind), so the iods see them.
 */
#ifndef RPFS_CLI_SPACE_H
#define RPFS_CLI_SPACE_H

#include <stdint.h>

#include "cli_core.h"

/**
 * fallocate [off, off + len) of regular file ino with mode (PROTO_FALLOC_*,
 * the Linux FALLOC_FL_* values): each iod the range touches gets
 * IO_FALLOCATE of the local image of the range (partial stripe units map
 * to partial local ranges), then the blocks are published with SETBLOCKS,
 * which for mode 0 and ZERO_RANGE without KEEP_SIZE also grows the size to
 * off + len. Times as ext4: PUNCH_HOLE and ZERO_RANGE set mtime and ctime,
 * an allocation sets ctime (and mtime when the size grows). Writes this
 * client has not published yet are published first.
 * Cost: a mgr round trip if dirty, two parallel iod round trips, one mgr
 * round trip.
 * @return 0; -EOPNOTSUPP any other mode (or an iod's file system cannot);
 *	-EINVAL len 0; -EFBIG off + len past 2^62; -EBADF ino not open here;
 *	-ENOSPC, -EIO, or the mgr's or an iod's -errno
 */
int cli_space_fallocate(struct cli_fs *fs, const struct proto_cred *c,
			uint64_t ino, uint32_t mode, uint64_t off,
			uint64_t len);

/**
 * Sum the 512-byte blocks the iods of layout l hold for ino (IO_BLOCKS).
 * Cost: one parallel iod round trip.
 * @return 0, -ENOMEM, -EIO, -EOPNOTSUPP (an older iod), an iod's -errno
 */
int cli_space_blocks(struct cli_fs *fs, uint64_t ino,
		     const struct proto_layout *l, uint64_t *blocks);

/**
 * Sum the blocks the iods hold for ino (IO_BLOCKS) and store them at the
 * mgr (SETBLOCKS, no other change); the reply's attributes are merged into
 * the inode table. An older iod or mgr (-EOPNOTSUPP) is not an error.
 * Cost: one parallel iod round trip and one mgr round trip.
 * @param[out] out NULL, or the attributes after the change (left as they
 *	were when nothing was published)
 * @return 0 (also when ino is not in the table), -EIO, or the mgr's or an
 *	iod's -errno
 */
int cli_space_publish(struct cli_fs *fs, const struct proto_cred *c,
		      uint64_t ino, struct proto_attr *out);

/**
 * SEEK_DATA (hole 0) or SEEK_HOLE (hole 1) from file offset off: each iod
 * answers from the local offset that off maps to; its answer is mapped
 * back to a file offset and the least one wins. The end of the file is a
 * hole. Cost: one parallel iod round trip.
 * @param[out] res the file offset found
 * @return 0; -ENXIO off at or past the end of the file, or (SEEK_DATA) no
 *	data after off; -EBADF ino not open here; -EIO or an iod's -errno
 */
int cli_space_seek(struct cli_fs *fs, uint64_t ino, uint64_t off, int hole,
		   uint64_t *res);

#endif
