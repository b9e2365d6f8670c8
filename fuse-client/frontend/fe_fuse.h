/*
 * fe_fuse.h - the FUSE low-level front end of the rpfs client.
 */
#ifndef RPFS_FE_FUSE_H
#define RPFS_FE_FUSE_H

#include <fuse_lowlevel.h>
#include <pthread.h>

#include "cli_core.h"

/*
 * The list link of a handle the kernel holds: an open file or directory
 * (struct fe_file, struct fe_dir in fe_fuse.c, which begin with it).
 * The kernel sends RELEASE and RELEASEDIR in the background, and at
 * unmount ends the connection without sending those still queued, so the
 * handles left on the list when the session ends are released then
 * (fe_fuse_end).
 */
struct fe_open {
	struct fe_open *prev, *next; /* fe_fuse.open_lock */
	int dir;                     /* a struct fe_dir; set before it is
				      * listed, read-only after */
};

/* What the ops get as session userdata. Read-only while mounted, except
 * the handle list (open_lock). */
struct fe_fuse {
	struct cli_fs *fs;
	double attr_timeout;  /* seconds the kernel may cache attributes */
	double entry_timeout; /* seconds the kernel may cache names (and misses) */
	struct fe_wback *wb;   /* write-behind (fe_wback.h), NULL when off */
	struct cli_reap *reap; /* background data removal (cli_reap.h) */
	struct cli_lock *lock; /* cluster-wide locks (cli_lock.h) */
	struct cli_lease *lease; /* leases (fe_cb.h), NULL when off */
	struct cli_cb *cb;     /* the callback channel, NULL when off */
	struct fe_loop *loop;  /* the worker loop (fe_loop.h): set before
				  its workers start, cleared after they end */
	const char *mountpoint; /* absolute, as mounted (read-only) */
	unsigned read_ahead_kb; /* -o read_ahead_kb=, 0: kernel default */
	pthread_mutex_t open_lock; /* protects opens (fe_fuse_init) */
	struct fe_open *opens; /* open_lock: every handle the kernel holds */
};

/**
 * Prepare the handle list of cf: before the session serves requests.
 * Undone by fe_fuse_end.
 * @return 0, -errno from pthread_mutex_init
 */
int fe_fuse_init(struct fe_fuse *cf);

/**
 * End of the session: once no thread can run an op any more (the loop's
 * workers joined, the lock waits drained) and before cf->wb, reap, lock
 * and fs are freed, release every handle the kernel opened and never
 * released, as RELEASE would minus what needs the request (the locks
 * taken through it: the kernel unlocked the POSIX ones at close, and the
 * mgr drops what is left, flock locks, with the mount's lock session one
 * lease after its last keepalive), and free them: the writes in flight
 * finish, the size is published, and an unlinked file's last close
 * queues its removal (cf->reap).
 * How many there were is logged (info).
 */
void fe_fuse_end(struct fe_fuse *cf);

/**
 * The low-level operations; pass a struct fe_fuse as userdata to
 * fuse_session_new().
 * @return the static operations table
 */
const struct fuse_lowlevel_ops *fe_fuse_ops(void);

#endif
