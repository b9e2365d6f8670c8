/*
 * mgr_resync.h - the mgr's resync thread (mgr/repair/README.md "Mirroring",
 * "Resync"): for each stale record (iod X, inode) whose X and buddy Y are
 * up and whose Y replica is not stale itself, copy Y's object to X, compare
 * the two by IO_CSUM and copy again what differs, then delete the record if
 * it was not marked again meanwhile (its generation); the next fence round
 * unfences X. Its own thread, net_client and connections.
 */
#ifndef RPFS_MGR_RESYNC_H
#define RPFS_MGR_RESYNC_H

#include <stdint.h>

#include "mgr_db.h"
#include "net.h"

struct mgr_iodpoll;
struct mgr_resync;

#define MGR_RESYNC_DEFAULT_RATE 50u   /* MB/s (10^6 bytes) */
#define MGR_RESYNC_MAX_RATE 100000u

/**
 * Start the thread. It reads and deletes stale records of db (its own
 * transactions) and asks poll which iods are up; both stay in use until
 * mgr_resync_stop.
 * @param o transport options of the mgr (key, transport); the timeout is
 *	set here (10 s)
 * @param rate_mbs at most this many MB/s (10^6 bytes) copied, on average;
 *	1..MGR_RESYNC_MAX_RATE (0 = off: do not start the thread)
 * @return 0, -EINVAL rate, -ENOMEM, -errno from net_client_new or
 *	pthread_create
 */
int mgr_resync_start(struct mgr_resync **out, struct mgr_db *db,
		     struct mgr_iodpoll *poll, const struct net_opts *o,
		     uint32_t rate_mbs);

/** Wake the thread now rather than within the second. Any thread. */
void mgr_resync_kick(struct mgr_resync *rs);

/** Stop the thread (waits for the exchange in progress, <= 10 s) and
 * free (NULL is fine). */
void mgr_resync_stop(struct mgr_resync *rs);

/**
 * What the resync did for iod since the start: records resynced (and
 * deleted) and bytes copied to it. Any thread (atomic loads).
 */
void mgr_resync_counts(struct mgr_resync *rs, uint16_t iod, uint64_t *done,
		       uint64_t *bytes);

#endif
