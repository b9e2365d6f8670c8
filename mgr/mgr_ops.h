/*
 * mgr_ops.h - the mgr's request handler: decode a request, run it against
 * the namespace with the caller's credentials, encode the reply.
 * Loop thread only.
 */
#ifndef RPFS_MGR_OPS_H
#define RPFS_MGR_OPS_H

#include "mgr_db.h"
#include "mgr_iodpoll.h"
#include "net.h"

struct mgr_ops;

/**
 * Create a handler context with its reply buffers (allocated once).
 * @param poll statfs source (may be NULL: STATFS then reports zero blocks)
 * @param root_squash map uid 0 to 65534
 * @return 0, -ENOMEM
 */
int mgr_ops_new(struct mgr_ops **out, struct mgr_db *db,
		struct mgr_iodpoll *poll, int root_squash);

/** Free the context (the server must be gone). */
void mgr_ops_free(struct mgr_ops *ops);

/** net_req_fn: handle one request; arg is the struct mgr_ops. */
void mgr_ops_handle(struct net_sreq *r, void *arg);

#endif
