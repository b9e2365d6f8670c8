/*
 * mgr_iodpoll.h - the mgr's background thread that talks to every iod on
 * its own net_client: IO_STATFS every round (2 s) for the mgr's STATFS
 * replies, then IO_FENCE (the lease and the fence sets, mgr_fence.h), and
 * the STALE_MARKs waiting until their iod is fenced.
 */
#ifndef RPFS_MGR_IODPOLL_H
#define RPFS_MGR_IODPOLL_H

#include "mgr_db.h"
#include "mgr_fence.h"
#include "net.h"
#include "proto.h"

struct mgr_iodpoll;

/* Called by the poll thread when marks are done (mgr_iodpoll_take_done has
 * something); must be thread-safe (an ev_async_send). */
typedef void (*mgr_iodpoll_notify_fn)(void *arg);

/**
 * Start polling the iods of db's table with the transport options of the
 * mgr (cluster key, transport); the poll timeout is set here. db stays in
 * use (the fence sets: read transactions of the poll thread) until
 * mgr_iodpoll_stop.
 * @param lease_ms the lease each IO_FENCE grants (MGR_FENCE_LEASE_MS; a
 *	shorter one for tests); a round comes every min(2 s, lease / 4)
 * @param notify run when marks are done (may be NULL)
 * @return 0, -ENOMEM, -errno from net_client_new or pthread_create
 */
int mgr_iodpoll_start_opts(struct mgr_iodpoll **out, struct mgr_db *db,
			   const struct net_opts *o, uint32_t lease_ms,
			   mgr_iodpoll_notify_fn notify, void *notify_arg);

/**
 * mgr_iodpoll_start_opts for one of several mgrs on a shared store: every
 * IO_FENCE carries token (an iod refuses one below the highest it saw), and
 * none is sent while serving(arg) says this mgr is past its lease.
 * @param serving thread-safe (called by the poll thread)
 * @return as mgr_iodpoll_start_opts
 */
int mgr_iodpoll_start_lead(struct mgr_iodpoll **out, struct mgr_db *db,
			   const struct net_opts *o, uint32_t lease_ms,
			   mgr_iodpoll_notify_fn notify, void *notify_arg,
			   uint64_t token, int (*serving)(void *arg),
			   void *serving_arg);

/**
 * Stop the thread (waits for the current exchange, <= 2 s). Marks not
 * done are moved to the done list with status -EIO: take them with
 * mgr_iodpoll_take_done. Idempotent.
 */
void mgr_iodpoll_halt(struct mgr_iodpoll *p);

/** Halt and free. Marks never taken are freed (their ctx is dropped). */
void mgr_iodpoll_stop(struct mgr_iodpoll *p);

/**
 * The latest aggregate (bsize 4096; files/ffree/namemax left for the
 * caller). Before the first round finishes, waits for it up to wait_ms.
 * @param[out] nup iods that answered in the last round
 * @return 0, -EAGAIN no round finished yet (st is zeroed)
 */
int mgr_iodpoll_get(struct mgr_iodpoll *p, struct proto_statfs *st,
		    int wait_ms, unsigned *nup);

/**
 * Whether iod answered the last round and no message to it failed since.
 * Any thread. @return 1 or 0
 */
int mgr_iodpoll_up(struct mgr_iodpoll *p, uint16_t iod);

/**
 * The latest moment iod may still hold a lease from this mgr, as of the
 * poll thread's last round (CLOCK_MONOTONIC ns): the last IO_FENCE answer
 * plus the lease. It stops moving when the iod stops answering. Any
 * thread.
 * @return the bound; 0 for an iod out of range
 */
uint64_t mgr_iodpoll_lease(struct mgr_iodpoll *p, uint16_t iod);

/**
 * Queue a STALE_MARK (its record committed) to be answered once m->iod is
 * fenced: the poll thread wakes at once, sends the iod an IO_FENCE adding
 * m->ino and, when the iod acknowledged it or its lease bound passed, puts
 * m on the done list (status 0) and notifies. m->iod < niods.
 */
void mgr_iodpoll_mark(struct mgr_iodpoll *p, struct mgr_fence_mark *m);

/** Take the done marks (a NULL-terminated list, in completion order). */
struct mgr_fence_mark *mgr_iodpoll_take_done(struct mgr_iodpoll *p);

#endif
