/*
 * mgr_lockd.h - the mgr's lock service on the wire: decodes LOCK,
 * LOCK_CANCEL and LOCK_KEEPALIVE, runs them on the lock table (mgr_lock.h)
 * and answers, at once or (a WAIT) when the lock is granted or its slice
 * ends; a libev timer drives slices and leases. Loop thread only.
 */
#ifndef RPFS_MGR_LOCKD_H
#define RPFS_MGR_LOCKD_H

#include <stdint.h>

#include "net.h"

struct ev_loop;
struct mgr_db;
struct mgr_lockd;

/**
 * Create the service with a fresh random boot id and start its timer. The
 * grace period applies only when the database's lock mark says clients
 * may hold locks of the mgr's last run (a crash, or a stop with locks
 * held); a new file system or one stopped cleanly with no lock held has
 * nothing to reclaim and starts without one.
 * @param db the namespace database, for the lock mark (mgr_db.h)
 * @param grace_ms grace period from now: only reclaims are granted
 * @return 0, -ENOMEM, -EIO (the mark could not be read)
 */
int mgr_lockd_new(struct mgr_lockd **out, struct ev_loop *loop,
		  struct mgr_db *db, uint32_t grace_ms);

/** Answer the deferred requests (-ETIME: ask again), stop, free. Call
 * before the server is freed.
 * @param clean 1 at a clean stop: clear the lock mark if no lock is held
 *	and the grace period is over (nobody is left to reclaim), 0 on a
 *	start-up failure (the mark stays as it was) */
void mgr_lockd_free(struct mgr_lockd *ld, int clean);

/** Whether op is one of the lock service's. @return 1 or 0 */
int mgr_lockd_owns(uint16_t op);

/**
 * The lock table's gauges (locks held, WAITs queued, client sessions) and
 * the WAITs granted by a wake-up since the start. Loop thread.
 */
void mgr_lockd_counts(struct mgr_lockd *ld, size_t *locks, size_t *waiters,
		      size_t *sessions, uint64_t *woken);

/** Handle one request of a lock op (see mgr_lockd_owns). */
void mgr_lockd_handle(struct mgr_lockd *ld, struct net_sreq *r);

#endif
