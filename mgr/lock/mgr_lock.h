/*
 * mgr_lock.h - the mgr's cluster-wide lock table: who holds which lock
 * (lockset), who waits for which (FIFO of waiters, each holding a request
 * the reply of which is deferred until the lock is granted or the wait
 * slice ends), client sessions with their leases, deadlock detection for
 * POSIX locks and the grace period after a start. Pure logic: time comes in
 * as milliseconds, finished waits leave through a callback, so unit tests
 * drive it without a loop or a network (mgr_lockd.c wires it to both).
 * Loop thread only. Semantics: mgr/lock/README.md "Locks".
 */
#ifndef RPFS_MGR_LOCK_H
#define RPFS_MGR_LOCK_H

#include <stdint.h>

#include "proto.h"

struct mgr_lock;

/* A deferred request finished: status as for a reply, rep valid when 0. */
typedef void (*mgr_lock_done_fn)(void *ctx, int status,
				 const struct proto_lockrep *rep, void *arg);

#define MGR_LOCK_MAX 65536          /* locks in the table */
#define MGR_LOCK_MAX_WAITERS 4096
#define MGR_LOCK_MAX_SESSIONS 16384u /* client sessions (mounts) at once */
#define MGR_LOCK_MAX_CLIENT_SESSIONS 1024u /* of them made from one host */
#define MGR_LOCK_DEFAULT_GRACE_MS 20000u /* 2 x the default client lease */

/**
 * Create a table.
 * @param grace_ms after now_ms, only reclaims are granted for this long
 * @param boot this start's boot id (random, non-zero), sent in every reply
 * @param done called for each deferred request when it finishes
 * @return 0, -ENOMEM
 */
int mgr_lock_new(struct mgr_lock **out, uint32_t grace_ms, uint64_t now_ms,
		 uint64_t boot, mgr_lock_done_fn done, void *arg);

/** Finish every waiter with -ETIME (ask again) and free the table. */
void mgr_lock_free(struct mgr_lock *ml);

/**
 * Run a decoded lock request of op. The session's lease is renewed; a
 * session not known yet is made, unless MGR_LOCK_MAX_SESSIONS are known
 * or its client host has MGR_LOCK_MAX_CLIENT_SESSIONS (then the request
 * fails with -ENOLCK until sessions expire).
 * @param client the host the request came from (its address, without
 *	port), against which a new session counts; NULL: none (only the
 *	table's cap applies)
 * @param ctx the request, kept when the result is 1
 * @param[out] rep the reply when the result is 0
 * @return 0 done (send rep); 1 queued (done runs later with ctx);
 *	-EAGAIN, -EDEADLK, -EINPROGRESS (grace), -EINTR (cancelled before it
 *	came), -ENOLCK (reclaim after grace; locks, waiters or sessions at
 *	their limit), -ENOENT (CANCEL of no wait), -ENOMEM
 * Cost: a hash lookup of the session; a conflict search (O(log n) in the
 *	inode's locks); for a release, one search per waiter of the inode
 *	whose range overlaps the released one.
 */
int mgr_lock_request(struct mgr_lock *ml, uint16_t op,
		     const struct proto_lock *q, const char *client,
		     uint64_t now_ms, void *ctx, struct proto_lockrep *rep);

/**
 * Time passes: waits past their slice finish with -ETIME; sessions silent
 * for longer than their lease lose their locks (waiters of theirs finish
 * with -ENOLCK), and waiters the freed locks unblock are granted.
 * Cost: all waiters and sessions, plus the table and a conflict search per
 * waiter when a session expires (once for all that expire in one tick).
 */
void mgr_lock_tick(struct mgr_lock *ml, uint64_t now_ms);

/** Locks held, waiters queued and sessions known (for STATUS, tests and
 * log lines). */
void mgr_lock_counts(const struct mgr_lock *ml, size_t *locks,
		     size_t *waiters, size_t *sessions);

/** Waiters granted so far by a wake-up (a release, a lease expiry), as
 * opposed to a WAIT granted at once: shows that the wake-up path ran. */
uint64_t mgr_lock_woken(const struct mgr_lock *ml);

/** Work done so far: locks looked at by conflict searches plus waiters
 * looked at by wake-ups and deadlock checks. Deterministic, for tests that
 * bound the cost of an operation. */
uint64_t mgr_lock_work(const struct mgr_lock *ml);

#endif
