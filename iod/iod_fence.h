/*
 * iod_fence.h - the iod side of fencing (mgr/ha/README.md "Fencing"): the
 * mgr's lease and the fence set, and the IO_FENCE op.
 *
 * A mirrored read (IO_READ / IO_SEEK with PROTO_IO_MIRROR) is served only
 * while (1) the iod holds the mgr's lease, (2) a whole fence set is in
 * force, and (3) the inode is not in it; else -ESTALE. A fresh iod has
 * neither lease nor set, so it refuses mirrored reads until the mgr gave
 * it both. Reads without the flag are never fenced.
 *
 * The lease works by confirmation: the iod remembers when it received each
 * of the last IOD_FENCE_RING messages (by seq); a later message whose
 * confirm names one of them extends the lease to that message's receive
 * time + its lease_ms. An unconfirmed message grants nothing.
 *
 * Times are CLOCK_MONOTONIC nanoseconds, passed in (now_ns) or read from
 * the module's clock (iod_fence_now_ns, replaceable for tests), so the
 * logic is testable without sleeping.
 *
 * Not thread-safe: owned by the iod's loop thread, as everything in it.
 */
#ifndef RPFS_IOD_FENCE_H
#define RPFS_IOD_FENCE_H

#include <stdint.h>

#include "net.h"
#include "proto.h"

#define IOD_FENCE_RING 8                /* IO_FENCE messages remembered */
#define IOD_FENCE_MAX_INOS (4u << 20)   /* inodes in one set, at most */

struct iod_fence;

/** A clock: CLOCK_MONOTONIC nanoseconds (tests inject their own). */
typedef uint64_t (*iod_fence_clock_fn)(void *arg);

/**
 * Create the fence state of a fresh iod: no lease, no complete set.
 * @param[out] out the state
 * @return 0, -ENOMEM
 */
int iod_fence_new(struct iod_fence **out);

/** Free the state (NULL is fine). */
void iod_fence_free(struct iod_fence *f);

/** CLOCK_MONOTONIC in nanoseconds (the default clock). */
uint64_t iod_fence_now_ns(void);

/**
 * Apply one decoded IO_FENCE message received at now_ns, and report the
 * state after it. Order: a COMPLETE without a set being loaded (no RESET
 * in this message or before) is refused and changes nothing; else the
 * confirm is applied (lease), the message is remembered (seq, now_ns,
 * lease_ms; a seq already remembered keeps its first receive time), then
 * RESET, the add list, the del list, COMPLETE. A set that would exceed the
 * inode cap abandons the load and drops to no complete set (fail safe:
 * mirrored reads are refused until the mgr loads a whole set again).
 * Cost: O(inodes of the message), a set may grow (rehash) once.
 * @param[in] m the message, from proto_fence_decode
 * @param[in] now_ns when it was received
 * @param[out] st the state after the message (filled on errors too)
 * A message whose token is below the highest token seen comes from a mgr
 * that lost its leadership: refused, nothing of it applied.
 * @return 0, -ESTALE an old mgr's token, -EINVAL COMPLETE without
 *	loading, -ENOSPC a set would exceed
 *	the cap, -ENOMEM a set could not grow (as -ENOSPC otherwise)
 */
int iod_fence_handle(struct iod_fence *f, const struct proto_fence *m,
		     uint64_t now_ns, struct proto_fencestate *st);

/**
 * The state at now_ns: leased, complete, loading, the size of the set in
 * force and the lease left (0 when not leased, at most PROTO_MAX_LEASE_MS).
 * @param[out] st the state
 */
void iod_fence_state(const struct iod_fence *f, uint64_t now_ns,
		     struct proto_fencestate *st);

/**
 * Whether a mirrored read of ino may be served at now_ns. Cost: one hash
 * probe sequence; no logging.
 * @return 0 may be served, -ESTALE not leased, no complete set, or ino fenced
 */
int iod_fence_check(const struct iod_fence *f, uint64_t ino, uint64_t now_ns);

/**
 * The rule for a decoded iod request: IO_READ and IO_SEEK flagged
 * PROTO_IO_MIRROR go through iod_fence_check at the module's clock; every
 * other request passes (the clock is not even read).
 * @param[in] op the request's op
 * @param[in] q the decoded request (flags, ino)
 * @return 0 may be served, -ESTALE refused
 */
int iod_fence_gate(const struct iod_fence *f, uint16_t op,
		   const struct proto_ioreq *q);

/**
 * Serve an IO_FENCE request: decode it (a malformed body rejects the
 * connection, naming what was wrong), apply it at the module's clock and
 * reply with the encoded proto_fencestate and iod_fence_handle's status.
 */
void iod_fence_serve(struct iod_fence *f, struct net_sreq *r);

/** Test hook: replace the clock used by iod_fence_gate / iod_fence_serve. */
void iod_fence_set_clock(struct iod_fence *f, iod_fence_clock_fn fn,
			 void *arg);

/** Test hook: lower the inode cap of each set (1..IOD_FENCE_MAX_INOS). */
void iod_fence_set_max(struct iod_fence *f, uint32_t max_inos);

#endif
