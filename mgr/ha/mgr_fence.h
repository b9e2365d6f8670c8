/*
 * mgr_fence.h - the mgr side of fencing (mgr/ha/README.md "Fencing"): per
 * iod, the IO_FENCE message sequence (seq, confirm, lease), the fence set
 * loads (pages of the iod's stale records, RESET on the first, COMPLETE on
 * the last), the bound on the iod's lease, and the STALE_MARKs waiting
 * until the iod is fenced.
 *
 * A state machine without network or database: the poll thread
 * (mgr_iodpoll.c) asks mgr_fence_build for the next message, sends it, and
 * reports the outcome with mgr_fence_reply / mgr_fence_failed; the fence
 * set comes from a page callback. Poll thread only (one struct per iod);
 * the marks are handed in and out by mgr_iodpoll under its lock.
 */
#ifndef RPFS_MGR_FENCE_H
#define RPFS_MGR_FENCE_H

#include <stdint.h>

#include "proto.h"

#define MGR_FENCE_LEASE_MS 8000u   /* lease granted by each message */
#define MGR_FENCE_MIN_LEASE_MS 1000u
#define MGR_FENCE_MAX_LEASE_MS 60000u

/*
 * A STALE_MARK waiting until its iod is fenced. Made by the loop thread,
 * which keeps ctx (the pending request) to itself; owned by the poll
 * thread in between.
 */
struct mgr_fence_mark {
	struct mgr_fence_mark *next;
	uint64_t ino;
	uint16_t iod;
	int status;          /* the reply: 0 fenced (or lease ran out), -EIO
			      * the mgr stopped first */
	int sent;            /* carried by a message not yet acknowledged */
	int expired;         /* done because the iod's lease ran out (it
			      * did not answer), not by its ack */
	uint64_t t0_ns;      /* CLOCK_MONOTONIC when the record committed */
	void *ctx;           /* the loop thread's (the pending net_sreq) */
};

/*
 * The fence set of one iod, one page at a time: inodes above after, at
 * most max (ascending). @return 0 (*n set), -errno
 */
typedef int (*mgr_fence_page_fn)(void *arg, uint16_t iod, uint64_t after,
				 uint64_t *inos, uint32_t max, uint32_t *n);

/* Per iod state. Poll thread only. */
struct mgr_fence_iod {
	uint16_t iod;
	uint32_t lease_ms;
	uint64_t next_seq;       /* seq of the next message (never 0) */
	uint64_t confirm;        /* seq of the latest message whose reply came */
	uint64_t inflight;       /* seq of the message sent, 0 when none */
	uint64_t lease_bound_ns; /* CLOCK_MONOTONIC: the latest moment the
				  * iod may still hold a lease from this mgr
				  * (or its predecessor) */
	uint64_t delivered_ver;  /* stale version of the last complete set */
	int up;                  /* the last round found it up, and no
				  * message failed since */
	int delivered;           /* a complete set was delivered (and is
				  * known in force) since the last failure */
	int need_full;           /* send the whole set at the next message */
	int due;                 /* a poll round wants a message (renewal) */
	int follow;              /* send one more at once, to confirm the last
				  * (the lease starts only on a confirm) */
	int unsupported;         /* the iod answered IO_FENCE -EOPNOTSUPP */
	/* a load in progress (RESET sent, COMPLETE not yet) */
	int loading;
	uint64_t load_after;     /* last inode sent */
	uint64_t load_ver;       /* stale version read before its first page */
	uint32_t load_n;         /* inodes sent so far */
	uint32_t last_n;         /* size of the last set delivered */
	/* message being sent: what it carries */
	uint32_t msg_flags;
	uint32_t msg_nmarks;
	int msg_renewal;         /* it is a round's renewal: once answered, a
				  * follow confirms it at once, so the lease
				  * runs from this round, not the last one */
	uint64_t add[PROTO_MAX_INOS + 1]; /* its add list (+1: a page asks
					   * one more to know if it is the
					   * last) */
	struct mgr_fence_mark *marks;     /* waiting for this iod */
};

/**
 * Start the state of iod: messages numbered from seq0 (random per mgr
 * start, so a successor never reuses a seq the iod remembers), lease
 * bound now + lease (a predecessor may have granted one), a full set due.
 */
void mgr_fence_init(struct mgr_fence_iod *fi, uint16_t iod, uint64_t seq0,
		    uint64_t now_ns, uint32_t lease_ms);

/**
 * A connection to the iod over tcp was refused: nothing listens at its
 * address, so the process that may have held a lease is gone (a new one
 * starts with none). The lease bound drops to now, and a mark waiting for
 * it is answered at once instead of one lease later. Not for verbs, where
 * a live server may reject a connection it has no room for.
 */
void mgr_fence_refused(struct mgr_fence_iod *fi, uint64_t now_ns);

/** A poll round found the iod up: one message (renewal at least) is due. */
void mgr_fence_round(struct mgr_fence_iod *fi);

/** Hand a mark to the iod's state (poll thread, from the queue). */
void mgr_fence_add_mark(struct mgr_fence_iod *fi, struct mgr_fence_mark *m);

/**
 * Whether a message should be sent now: the iod is up, nothing is in
 * flight, and a round, a load, a confirm or a mark wants one.
 */
int mgr_fence_want(const struct mgr_fence_iod *fi);

/**
 * Build the next message into f (its add list points into fi): the first
 * page of a load when no set is known in force (it covers the marks
 * waiting: read after their records committed), else the marks waiting
 * (their own message), else the next page of a load in progress, else a
 * new load when a round finds the stale version changed since the last
 * delivery, else a renewal. Marks the message in flight.
 * @param ver the stale version, read BEFORE any page is read
 * @return 0 (f filled), 1 nothing to send, -errno from page
 */
int mgr_fence_build(struct mgr_fence_iod *fi, uint64_t ver,
		    mgr_fence_page_fn page, void *arg, struct proto_fence *f);

/**
 * The in-flight message was answered at now_ns (the mgr's receive time,
 * or later). status is the reply's; st its decoded body (NULL when the
 * status is not 0 or the body did not decode). Moves the lease bound,
 * the confirm, the load; acknowledged marks are appended to *done.
 * @return 1 when a set load just completed (fi->last_n is its size and
 *	the caller logs it when it changed), else 0
 */
int mgr_fence_reply(struct mgr_fence_iod *fi, int status,
		    const struct proto_fencestate *st, uint64_t now_ns,
		    struct mgr_fence_mark ***done);

/**
 * The in-flight message (if any) failed (no reply: down, timeout), or the
 * iod is known down: the next contact reloads the whole set, marks wait
 * for their resend or the lease bound.
 */
void mgr_fence_failed(struct mgr_fence_iod *fi);

/**
 * Complete (status 0) the marks whose iod can no longer hold a lease:
 * now_ns >= lease_bound_ns and no reply in flight that could still
 * extend it. Appended to *done.
 */
void mgr_fence_expire(struct mgr_fence_iod *fi, uint64_t now_ns,
		      struct mgr_fence_mark ***done);

/**
 * When the poll thread must wake up for this iod's marks: its lease bound
 * if a mark waits, else UINT64_MAX.
 */
uint64_t mgr_fence_deadline(const struct mgr_fence_iod *fi);

/** Take every mark (shutdown); appended to *done with status rc. */
void mgr_fence_drain(struct mgr_fence_iod *fi, int rc,
		     struct mgr_fence_mark ***done);

#endif
