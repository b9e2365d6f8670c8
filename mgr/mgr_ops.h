/*
 * mgr_ops.h - the mgr's request handler: decode a request, run it against
 * the namespace with the caller's credentials, encode the reply.
 * Loop thread only; with group commit, write ops run on the writer thread
 * (mgr_batch.h) and are answered back on the loop thread.
 */
#ifndef RPFS_MGR_OPS_H
#define RPFS_MGR_OPS_H

#include <ev.h>

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

#define MGR_OPS_MAX_COMMIT_DELAY_MS 5000

/**
 * Turn group commit on (mgr/README.md "Group commit"): write ops go to a
 * writer thread, which runs those queued together in one batch and commits
 * it (mgr_batch.h); each is answered on loop after its batch's commit.
 * @param commit_delay_ms testing: the writer sleeps this long before each
 *	batch commit (0..MGR_OPS_MAX_COMMIT_DELAY_MS; 0 in production), so
 *	that a kill -9 test lands between an op and its commit
 * @return 0, -EINVAL delay out of range, -ENOMEM, -EAGAIN (no thread)
 */
int mgr_ops_group_commit(struct mgr_ops *ops, struct ev_loop *loop,
			 uint32_t commit_delay_ms);

/**
 * Leadership (several mgrs on one store, mgr_lead.h): before a batch
 * commits, serving(arg) is asked, on the writer thread (so it must be
 * thread-safe), whether this mgr may still answer as the active one. If
 * not, the batch is aborted; then, or if the commit is refused with
 * -ESTALE, lost(arg) is called on the loop thread and every op of the
 * batch is answered PROTO_STANDBY with nothing landing (lost must make
 * later commits fail: mgr_kv_set_token). Call before the first request.
 * With group commit off, an op whose own commit is refused so is answered
 * PROTO_STANDBY the same way.
 * Without this call (LMDB) a mgr is always active.
 */
void mgr_ops_set_lead(struct mgr_ops *ops, int (*serving)(void *arg),
		      void (*lost)(void *arg), void *arg);

struct mgr_leased;

/**
 * Leases (HACKING.md "Leases and callbacks"): grant READ leases with
 * LOOKUP and READDIR replies to requests that carry a session, and let an
 * op that changes names in a leased directory run only once the other
 * holders acknowledged their invalidations. Only with group commit on
 * (the parked op then waits off the loop's path); otherwise ignored.
 * Call before the first request. leased must outlive ops' requests.
 */
void mgr_ops_set_leases(struct mgr_ops *ops, struct mgr_leased *leased);

/** Wait until every write op submitted is committed and answered (before
 * the server is freed: it drops requests still held). NULL or group
 * commit off: nothing. */
void mgr_ops_flush(struct mgr_ops *ops);

/** net_req_fn: handle one request; arg is the struct mgr_ops. */
void mgr_ops_handle(struct net_sreq *r, void *arg);

#endif
