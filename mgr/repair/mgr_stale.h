/*
 * mgr_stale.h - the mgr's mirror service: durable records of replicas of
 * mirrored files that missed a write (mgr/repair/README.md "Mirroring"). A
 * client that wrote one replica of a mirror=2 file but not its buddy (down)
 * sends STALE_MARK and acknowledges the write only after the reply, which
 * comes once the record is committed AND the iod is fenced (mgr_iodpoll.h),
 * or can no longer hold a lease; STALE_COUNT reports the records per iod
 * and what the resync did for each (`rpfs status`).
 *
 * Loop thread only (but mgr_stale_wake).
 */
#ifndef RPFS_MGR_STALE_H
#define RPFS_MGR_STALE_H

#include <stdint.h>

#include "mgr_db.h"
#include "net.h"

struct ev_loop;
struct mgr_iodpoll;
struct mgr_resync;
struct mgr_stale;

/**
 * Create the service and its ev_async (started on loop).
 * @return 0, -ENOMEM
 */
int mgr_stale_new(struct mgr_stale **out, struct ev_loop *loop,
		  struct mgr_db *db);

/**
 * Give the service the poll thread (which fences the marks) and the
 * resync (NULL when off; its counters go into STALE_COUNT). Before the
 * first request.
 */
void mgr_stale_attach(struct mgr_stale *st, struct mgr_iodpoll *poll,
		      struct mgr_resync *rs);

/** mgr_iodpoll_notify_fn: marks are done; wakes the loop. Any thread. */
void mgr_stale_wake(void *st);

/**
 * Answer the marks done (the ev_async callback does the same). At
 * shutdown: after mgr_iodpoll_halt (which makes every pending mark done
 * with -EIO) and before net_server_free (which would drop the requests).
 */
void mgr_stale_flush(struct mgr_stale *st);

/** Stop the ev_async and free (NULL is fine). */
void mgr_stale_free(struct mgr_stale *st);

/** Whether op belongs to the mirror service (PROTO_OP_STALE_*). */
int mgr_stale_owns(uint16_t op);

/**
 * Check that iod holds a replica of file ino: a mirror=2 regular file one
 * of whose groups has iod. Runs in the caller's transaction.
 * @return 0, -ENOENT no such inode, -EINVAL not a mirrored regular file or
 *	iod not one of its replicas, -EIO
 */
int mgr_stale_check(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		    uint16_t iod);

/**
 * Serve one request. STALE_MARK: -ENOENT / -EINVAL as mgr_stale_check,
 * -ENOSPC, -EIO at once; else the record is committed and the reply (0)
 * comes once the iod is fenced (-EIO if the mgr stops first). A client
 * connection that closes meanwhile is fine: the transport keeps a request
 * until it is answered (net_sreq_reply then only frees it). STALE_COUNT:
 * 0 with the counts, -EIO. A malformed body closes the connection.
 */
void mgr_stale_handle(struct mgr_stale *st, struct net_sreq *r);

#endif
