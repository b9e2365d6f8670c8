/*
 * mgr_lead.h - the leadership of several rpfs-mgr processes that share one
 * PostgreSQL store: exactly one is active (mgr/ha/README.md "Several
 * mgrs, one active").
 *
 * The lease is the row rpfs_lease(id 1) on the database's clock: a mgr
 * takes it when it has expired (or is its own), which adds one to its
 * fencing token, and renews it every lease/3 while the token is still its
 * own. Every write commit of the active mgr is fenced by that token in the
 * same database transaction (mgr_kv_set_token). Locally the active mgr
 * serves only until a deadline = (monotonic time it SENT the last renew
 * that succeeded) + lease - margin: earlier than any other mgr can take
 * the lease, as long as the two clocks' rates differ by less than the
 * margin over one lease.
 *
 * Two layers: a pure state machine on a caller's clock (mgr_lead_sm_*, for
 * unit tests with a fake clock) and the database side (mgr_lead_*), which
 * uses its own libpq connection on the calling (loop) thread.
 */
#ifndef RPFS_MGR_LEAD_H
#define RPFS_MGR_LEAD_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define MGR_LEAD_DEFAULT_MS 10000u /* [mgr] lease, --lease */
#define MGR_LEAD_MIN_MS 2000u
#define MGR_LEAD_MAX_MS 600000u

/* The lease as this process sees it, on its monotonic clock. Written by
 * one thread (the mgr's loop); deadline_ns and lost are also read by others
 * (mgr_lead_sm_serving: __atomic loads), token is set before they start. */
struct mgr_lead_sm {
	uint32_t lease_ms;
	uint32_t margin_ms;   /* lease / 10, at least 200 ms */
	int64_t token;        /* the token held (0: none) */
	uint64_t deadline_ns; /* serve until then (0: not active) */
	int lost;             /* held it once, then lost it: never serve again */
};

/**
 * Start a state machine: not active.
 * @return 0, -EINVAL lease_ms out of MGR_LEAD_MIN_MS..MGR_LEAD_MAX_MS
 */
int mgr_lead_sm_init(struct mgr_lead_sm *sm, uint32_t lease_ms);

/**
 * Record the answer to an acquire or renew that was sent at sent_ns.
 * @param got the token the database returned; 0: refused (not expired,
 *	or the token moved on)
 * @return 1 active until sent_ns + lease - margin, 0 not active (a renew
 *	refused means the lease was lost: lost is set)
 */
int mgr_lead_sm_answer(struct mgr_lead_sm *sm, uint64_t sent_ns, int64_t got);

/** @return 1 if the holder may still answer as the active mgr at now_ns */
int mgr_lead_sm_serving(const struct mgr_lead_sm *sm, uint64_t now_ns);

struct mgr_lead;

/**
 * Connect to the store's database for the lease.
 * @param uri the store's libpq URI
 * @param host, port this mgr's address as clients reach it: the holder
 *	recorded in the lease, and the standby answer's hint
 * @param lease_ms the lease (validated: see mgr_lead_sm_init)
 * @param[out] msg on error, one line naming the setting
 * @return 0, -EINVAL bad argument, -EHOSTUNREACH the database cannot be
 *	reached, -ENOMEM
 */
int mgr_lead_new(struct mgr_lead **out, const char *uri, const char *host,
		 uint16_t port, uint32_t lease_ms, char *msg, size_t msgcap);

/** Close the connection and free l (NULL: nothing). */
void mgr_lead_free(struct mgr_lead *l);

/**
 * One acquire (not active) or renew (active) round trip. A standby that is
 * refused also reads who holds the lease, for its hint. Cost: one or two
 * round trips on the calling thread.
 * @return 1 active, 0 not active, -ESTALE lost (was active; the token moved
 *	on or the deadline passed)
 */
int mgr_lead_tick(struct mgr_lead *l);

/** Give the lease up at a clean shutdown (the server is closed and no
 * commit is in flight), so that a standby takes over at once. Cost: one
 * round trip; errors are ignored (the lease then expires). */
void mgr_lead_release(struct mgr_lead *l);

/** @return 1 if this mgr may answer as the active one now (checked against
 * the monotonic clock at each call) */
int mgr_lead_serving(struct mgr_lead *l);

/** Mark the leadership lost (a commit was refused): never serving again. */
void mgr_lead_lose(struct mgr_lead *l);

/** @return the token held (0: none) */
int64_t mgr_lead_token(const struct mgr_lead *l);

/** @return the lease in milliseconds */
uint32_t mgr_lead_lease_ms(const struct mgr_lead *l);

/**
 * Encode the standby answer's body: the holder last seen (empty if none,
 * or if it is this mgr).
 * @return the body's length (0: no hint)
 */
uint32_t mgr_lead_hint(const struct mgr_lead *l, void *buf, size_t cap);

#endif
