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
 * Truncate a file to in->size, iods first: unless checked is given, ask
 * the mgr whether c may truncate (OPEN for writing; a GETATTR too when
 * that says EACCES, for an owner without the write bit) and take the
 * layout from its answer; apply the changes of valid the mgr judges apart
 * from the size (chown, chmod, explicit times) with a SETATTR of their
 * own; then truncate each iod's object of a regular file to its share of
 * the new size, or of the current one when it grows (nothing an object
 * holds past the current size may show; both replicas of a mirrored
 * file, cli_io_truncate); only
 * then SETATTR with PROTO_SA_SIZE and valid at the mgr; unless the new
 * size is 0, the blocks left are published (cli_space_publish). Nothing
 * written before is left to push afterwards. A failure before the mgr's
 * SETATTR leaves the old size, with zeros past the new one where an iod
 * truncated (never old bytes past a published size;
 * fuse-client/core/README.md "Truncate"). Cost: three round trips (mgr, iods in parallel, mgr), two
 * with checked, two more for a size above 0, one more with chown, chmod
 * or explicit times.
 * @param[in] fs the mounted file system
 * @param[in] c the caller's credential
 * @param[in] ino the inode
 * @param[in] valid PROTO_SA_* besides the size
 * @param[in] in the new values
 * @param[in] checked NULL, or the attributes a mgr call that has just
 *	checked c's write permission returned (OPEN or CREATE for writing)
 * @param[out] out the attributes after the change
 * @return 0, -EPERM, -EACCES, -EISDIR, -EINVAL, -ENOENT, -EIO, or an
 *	iod's -errno
 */
int cli_size_truncate(struct cli_fs *fs, const struct proto_cred *c,
		      uint64_t ino, uint32_t valid, const struct proto_attr *in,
		      const struct proto_attr *checked, struct proto_attr *out);

/* Points of a truncate where the test hook may end the process. */
enum {
	CLI_SIZE_EXIT_AFTER_IODS = 1, /* objects truncated, size not sent */
	CLI_SIZE_EXIT_AFTER_MGR = 2,  /* size published, blocks not */
};

/* The status the test hook's _exit gives. */
#define CLI_SIZE_EXIT_STATUS 86

/**
 * Test hook (rpfs-fuse's $RPFS_FUSE_TEST_TRUNCATE_EXIT,
 * tests/integration/README.md "Fault harness"): make every later truncate
 * _exit() the process at the named point. Call once at start, before any request. Off unless called.
 * @param[in] spec "after-iods", "after-mgr", or NULL (off)
 * @return 0, -EINVAL (spec names no point)
 */
int cli_size_test_exit(const char *spec);

#endif
