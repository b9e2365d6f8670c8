/*
 * cli_reap.h - background removal of freed files' data: once the mgr has
 * unlinked a file's last name (and the last handle is closed), its stripe
 * objects go from every iod and then the inode is purged at the mgr. The
 * namespace change is done when the caller answers; the data goes behind,
 * in a worker thread, the way Lustre and BeeGFS destroy objects. Until then
 * the mgr lists the inode as an orphan, which is also what a crash or a
 * failed removal leaves (logged). Inode numbers are never reused, so a
 * late removal cannot hit a new file.
 */
#ifndef RPFS_CLI_REAP_H
#define RPFS_CLI_REAP_H

#include <stdint.h>

#include "cli_core.h"

#define CLI_REAP_MAX_QUEUE 4096 /* beyond this, removals are synchronous */

struct cli_reap;

/**
 * Start the removal worker of a mounted file system.
 * @param[out] out the worker
 * @return 0, -ENOMEM, or -errno from pthread_create
 */
int cli_reap_new(struct cli_reap **out, struct cli_fs *fs);

/** Finish every queued removal, then stop the worker and free it. */
void cli_reap_free(struct cli_reap *r);

/**
 * Remove the data of freed inode ino (layout l) of fs and purge it at the
 * mgr as c: queued, or at once when the queue is full or r is NULL.
 * Failures are logged; the inode stays an orphan at the mgr.
 */
void cli_reap_queue(struct cli_reap *r, struct cli_fs *fs, const struct proto_cred *c,
		    uint64_t ino, const struct proto_layout *l);

/**
 * Counters of the worker: freed inodes it has handled (removed, or left
 * as orphans after a failure), the batches it took them in, and the freed
 * inodes queued to it so far (a removal done at once is in neither count):
 * queued - inodes is what it still has to remove and purge.
 */
void cli_reap_counts(struct cli_reap *r, uint64_t *inodes, uint64_t *batches,
		     uint64_t *queued);

#endif
