/*
 * mgr_iodpoll.h - background poller of the iods' capacity (IO_STATFS every
 * 2 s on its own thread and net_client), for the mgr's STATFS replies.
 */
#ifndef RPFS_MGR_IODPOLL_H
#define RPFS_MGR_IODPOLL_H

#include "mgr_db.h"
#include "net.h"
#include "proto.h"

struct mgr_iodpoll;

/**
 * Start polling the iods of db's table (copied; db is not used afterwards).
 * @return 0, -ENOMEM, -errno from net_client_new or pthread_create
 */
int mgr_iodpoll_start(struct mgr_iodpoll **out, const struct mgr_db *db);

/**
 * mgr_iodpoll_start() with the transport options (cluster key, transport)
 * of the mgr; the poll timeout is set here.
 * @return as mgr_iodpoll_start()
 */
int mgr_iodpoll_start_opts(struct mgr_iodpoll **out, const struct mgr_db *db,
			   const struct net_opts *o);

/** Stop the thread and free. Waits for the current round (<= 2 s). */
void mgr_iodpoll_stop(struct mgr_iodpoll *p);

/**
 * The latest aggregate (bsize 4096; files/ffree/namemax left for the
 * caller). Before the first round finishes, waits for it up to wait_ms.
 * @param[out] nup iods that answered in the last round
 * @return 0, -EAGAIN no round finished yet (st is zeroed)
 */
int mgr_iodpoll_get(struct mgr_iodpoll *p, struct proto_statfs *st,
		    int wait_ms, unsigned *nup);

#endif
