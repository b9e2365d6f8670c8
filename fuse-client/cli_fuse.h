/*
 * cli_fuse.h - the FUSE low-level front end of the rpfs client.
 */
#ifndef RPFS_CLI_FUSE_H
#define RPFS_CLI_FUSE_H

#include <fuse_lowlevel.h>

#include "cli_core.h"

/* What the ops get as session userdata. Read-only while mounted. */
struct cli_fuse {
	struct cli_fs *fs;
	double attr_timeout;  /* seconds the kernel may cache attributes */
	double entry_timeout; /* seconds the kernel may cache names (and misses) */
	struct cli_wb *wb;    /* write-behind (cli_wb.h), NULL when off */
	struct cli_reap *reap; /* background data removal (cli_reap.h) */
	struct cli_lock *lock; /* cluster-wide locks (cli_lock.h) */
	struct cli_loop *loop; /* the worker loop (cli_loop.h): set before
				  its workers start, cleared after they end */
	const char *mountpoint; /* absolute, as mounted (read-only) */
	unsigned read_ahead_kb; /* -o read_ahead_kb=, 0: kernel default */
};

/**
 * The low-level operations; pass a struct cli_fuse as userdata to
 * fuse_session_new().
 * @return the static operations table
 */
const struct fuse_lowlevel_ops *cli_fuse_ops(void);

#endif
