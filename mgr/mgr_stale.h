/*
 * mgr_stale.h - the mgr's mirror service: durable records of replicas of
 * mirrored files that missed a write (HACKING.md "Mirroring"). A client
 * that wrote one replica of a mirror=2 file but not its buddy (down) sends
 * STALE_MARK and acknowledges the write only after the reply; STALE_COUNT
 * reports the records per iod for `rpfs status`.
 *
 * Loop thread only.
 */
#ifndef RPFS_MGR_STALE_H
#define RPFS_MGR_STALE_H

#include <stdint.h>

#include "mgr_db.h"
#include "net.h"

/** Whether op belongs to the mirror service (PROTO_OP_STALE_*). */
int mgr_stale_owns(uint16_t op);

/**
 * Check that iod holds a replica of file ino: a mirror=2 regular file one
 * of whose groups has iod. Runs in the caller's transaction.
 * @return 0, -ENOENT no such inode, -EINVAL not a mirrored regular file or
 *	iod not one of its replicas, -EIO
 */
int mgr_stale_check(struct mgr_db *db, MDB_txn *txn, uint64_t ino,
		    uint16_t iod);

/**
 * Serve one request and reply. STALE_MARK: status 0 only after the record
 * is committed; -ENOENT / -EINVAL as mgr_stale_check, -ENOSPC, -EIO.
 * STALE_COUNT: 0 with the counts, -EIO. A malformed body closes the
 * connection.
 */
void mgr_stale_handle(struct mgr_db *db, struct net_sreq *r);

#endif
