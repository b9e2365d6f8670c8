/*
 * fe_lock.h - the FUSE lock operations (.getlk, .setlk, .flock) and
 * the lock side of FLUSH and RELEASE, on cli_lock. A blocking request
 * (F_SETLKW, flock without LOCK_NB) is handed to a thread of its own, so a
 * blocked process never holds one of the session loop's workers; a signal
 * (FUSE INTERRUPT) cancels the wait at the mgr and the call fails EINTR.
 */
#ifndef RPFS_FE_LOCK_H
#define RPFS_FE_LOCK_H

#include <fcntl.h>
#include <fuse_lowlevel.h>

#include "fe_fuse.h"

/** .getlk: the conflicting lock, or F_UNLCK. */
void fe_lock_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		   struct flock *lock);

/** .setlk: F_SETLK (sleep 0) and F_SETLKW (sleep 1). */
void fe_lock_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		   struct flock *lock, int sleep);

/** .flock: LOCK_SH / LOCK_EX / LOCK_UN, with LOCK_NB or blocking. */
void fe_lock_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		   int op);

/**
 * FLUSH: release the POSIX locks of fi->lock_owner on ino.
 * @return 0, -EIO
 */
int fe_lock_flush(struct fe_fuse *cf, fuse_ino_t ino,
		  struct fuse_file_info *fi);

/**
 * RELEASE: release the handle's flock and the locks taken through it by
 * owners that did not flush (open file description locks).
 * @return 0, -EIO
 */
int fe_lock_release(struct fe_fuse *cf, fuse_ino_t ino,
		    struct fuse_file_info *fi);

/** At unmount: end the blocking waits and wait for their threads. */
void fe_lock_drain(struct fe_fuse *cf);

#endif
