/*
 * cli_lock.h - cluster-wide locks, client side: POSIX byte-range locks and
 * flock through the mgr's lock service (PROTO_OP_LOCK*). Owns the mount's
 * random session id, a record of the locks this client holds (to reclaim
 * them after a mgr restart), a keepalive thread that renews the session's
 * lease while it holds any, and a pool of connections for blocking waits:
 * the mgr defers a WAIT's reply, and a connection with a deferred request
 * serves nothing else, so every waiting thread has its own. No FUSE here:
 * the front end (fe_lock.c) maps its requests onto these calls.
 * Thread-safe. Semantics: mgr/lock/README.md "Locks".
 */
#ifndef RPFS_CLI_LOCK_H
#define RPFS_CLI_LOCK_H

#include <stdatomic.h>
#include <stdint.h>

#include "cli_core.h"

struct cli_lock;

/* One lock as the callers see it. end PROTO_LK_EOF = to the end of file. */
struct cli_lk {
	uint64_t start, end;       /* inclusive */
	uint32_t pid;              /* the locking process (GET: the holder's) */
	uint8_t type;              /* PROTO_LK_RDLCK / WRLCK / UNLCK */
	uint8_t kind;              /* PROTO_LK_POSIX / FLOCK */
};

/* A blocking wait in progress, so another thread can cancel it; or, with
 * nonblock, a non-blocking call that only retries through a grace period
 * and stops doing so when cancelled. */
struct cli_lock_wait {
	uint64_t id;               /* unique within the session */
	atomic_int cancelled;      /* set by cli_lock_cancel / the caller */
	int nonblock;              /* never WAIT (set before the call) */
};

/** The mount's random session id (!= 0), which the callback channel
 * shares. Any thread. */
uint64_t cli_lock_session(const struct cli_lock *lk);

/**
 * Start the lock client of a mounted fs: a session id, a transport client
 * for waits (same options as the mount's, one lane) and the keepalive
 * thread.
 * @param no the mount's transport options (key, transport, timeout)
 * @return 0, -ENOMEM, -errno from thread creation
 */
int cli_lock_new(struct cli_lock **out, struct cli_fs *fs,
		 const struct net_opts *no);

/** Stop: waits in progress and later ones end with -EINTR. Returns
 * without waiting for them (cli_lock_free waits). */
void cli_lock_stop(struct cli_lock *lk);

/** Stop, wait for the waits to end, free. */
void cli_lock_free(struct cli_lock *lk);

/**
 * F_GETLK: the first lock of another owner conflicting with want. During
 * the mgr's grace period it asks again until the grace ends or w (if
 * given) is cancelled.
 * @param[in,out] want in: the lock wanted; out: the conflicting lock, or
 *	type PROTO_LK_UNLCK when want could be granted
 * @param w NULL, or a wait whose cancellation ends the retries
 * @return 0, -EIO (mgr unreachable), -EINVAL, -EINTR (w cancelled)
 */
int cli_lock_get(struct cli_lock *lk, uint64_t ino, uint64_t owner,
		 struct cli_lk *want, struct cli_lock_wait *w);

/**
 * Set (or with type UNLCK release) a lock of owner. With w, wait until it
 * can be granted, in slices shorter than the request timeout, until
 * cli_lock_cancel(w) or cli_lock_free. During the mgr's grace period
 * after a restart this waits for the grace to end (new locks are not
 * granted then).
 * @param w NULL: do not wait; else a wait set up with cli_lock_wait_init
 *	(with w->nonblock set: do not wait, but let a cancellation end the
 *	retries through a grace period)
 * @return 0, -EAGAIN (conflict, not waiting), -EDEADLK (POSIX, waiting would
 *	deadlock), -EINTR (cancelled), -ENOLCK (mgr table full), -EIO
 */
int cli_lock_set(struct cli_lock *lk, uint64_t ino, uint64_t owner,
		 const struct cli_lk *want, struct cli_lock_wait *w);

/** Give w a fresh id. */
void cli_lock_wait_init(struct cli_lock *lk, struct cli_lock_wait *w);

/** End the wait w from another thread: cli_lock_set returns -EINTR soon. */
void cli_lock_cancel(struct cli_lock *lk, struct cli_lock_wait *w);

/**
 * Release every lock of owner of kind on ino (close: flush drops a
 * process's POSIX locks, release drops the flock of a file handle).
 * @return 0, -EIO
 */
int cli_lock_drop(struct cli_lock *lk, uint64_t ino, uint64_t owner,
		  uint8_t kind);

/**
 * Remember that owner took a POSIX lock on ino through file handle fh, so
 * that cli_lock_release_handle() can drop it (open file description locks
 * have the file as owner and get no flush). Cost: a short list walk.
 * @return 0, -ENOMEM
 */
int cli_lock_note_handle(struct cli_lock *lk, uint64_t fh, uint64_t ino,
			 uint64_t owner);

/**
 * FLUSH of ino by owner: drop owner's POSIX locks on ino (POSIX: closing
 * any descriptor of a file releases the process's locks on it) and forget
 * owner in every handle of ino. A no-op when owner holds none here.
 * @return 0, -EIO
 */
int cli_lock_flush(struct cli_lock *lk, uint64_t ino, uint64_t owner);

/**
 * RELEASE of handle fh of ino: drop the flock of flock_owner (0: none) and
 * the POSIX locks of owners noted for fh.
 * @return 0, -EIO
 */
int cli_lock_release_handle(struct cli_lock *lk, uint64_t fh, uint64_t ino,
			    uint64_t flock_owner);

#endif
