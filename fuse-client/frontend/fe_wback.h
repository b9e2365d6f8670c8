/*
 * fe_wback.h - write-behind for the FUSE client: a write(2) is answered once
 * its data is on the way to the iods, not when they have stored it, so the
 * writer's next write overlaps with this one's network and disk time (the
 * page cache's contract, and what NFS, Lustre and GlusterFS's write-behind
 * give by default).
 *
 * Per inode, writes in flight form a list. What keeps the file's meaning:
 * - a write waits first for every write in flight that overlaps it, so
 *   the iods see overlapping data in the writer's order;
 * - a read, a truncate and every close (flush), fsync and release wait
 *   for all of them first: a client reads its own writes, and close-to-open
 *   and fsync mean what they did;
 * - a write in flight that fails is reported by the next write, flush
 *   (close) or fsync of the inode, once, as -EIO or the iod's error;
 * - at most FE_WBACK_MAX_OPS writes per inode are in flight.
 * The FUSE front end uses it only for handles opened without O_DIRECT,
 * O_SYNC and O_DSYNC, and not with -o writeback_cache or -o no_write_behind,
 * nor over verbs: there the iods fetch the data by RDMA Read after the
 * request is sent, so answering early would need a copy of every write,
 * the client CPU the verbs path exists to save.
 */
#ifndef RPFS_FE_WBACK_H
#define RPFS_FE_WBACK_H

#include <stddef.h>
#include <stdint.h>

#include "cli_core.h"

#define FE_WBACK_MAX_OPS 16 /* writes in flight per inode */

struct fe_wback;

/**
 * Create the write-behind table of a mounted file system.
 * @param[out] out the table
 * @return 0, -ENOMEM
 */
int fe_wback_new(struct fe_wback **out, struct cli_fs *fs);

/** Wait for every write in flight (errors are logged), then free. */
void fe_wback_free(struct fe_wback *wb);

/**
 * Write buf to [off, off + len) of ino behind: after the writes in flight
 * that overlap it (and the oldest, beyond FE_WBACK_MAX_OPS) finished, start
 * it and return. A write that cannot be started in one round is done
 * synchronously. buf may be reused on return.
 * @return 0 started (or written); the deferred error of an earlier write of
 *	ino (this one is then not made); -EINVAL, -ENOMEM, -EIO or an iod's
 *	-errno when it failed at once
 */
int fe_wback_write(struct fe_wback *wb, uint64_t ino, const struct proto_layout *l,
		   uint64_t off, size_t len, const void *buf);

/**
 * Wait for every write of ino in flight.
 * @param take_err 1: return the deferred error (and clear it), for flush,
 *	fsync and release; 0: keep it for them (read, truncate)
 * @return 0, or with take_err the first error of a write acknowledged
 *	earlier (-EIO, -ENOSPC, ...)
 */
int fe_wback_drain(struct fe_wback *wb, uint64_t ino, int take_err);

#endif
