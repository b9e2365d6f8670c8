/*
 * mgr_lease.h - the mgr's side of the callback channel: the mount sessions
 * that keep a CB_WAIT pending, each with its queue of events (recalls and
 * invalidations) and its lease. Pure logic: time comes in as
 * milliseconds, answered waits leave through a callback, so unit tests
 * drive it without a loop or a network (mgr_leased.c wires it to both).
 * Loop thread only. Design: HACKING.md "Leases and callbacks".
 */
#ifndef RPFS_MGR_LEASE_H
#define RPFS_MGR_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct mgr_lease;

/* A parked CB_WAIT is answered: rep is valid only during the call. */
typedef void (*mgr_lease_done_fn)(void *ctx, const struct proto_cbrep *rep,
				  void *arg);

#define MGR_LEASE_MAX_SESSIONS 16384u       /* sessions at once */
#define MGR_LEASE_MAX_CLIENT_SESSIONS 1024u /* of them from one host */
#define MGR_LEASE_MAX_QUEUED 4096u          /* events queued per session;
					     * past it they collapse into
					     * one RESET */

/**
 * Create a table.
 * @param boot this start's boot id (random, non-zero), sent in every reply
 * @param done called for each parked wait when it is answered
 * @return 0, -EINVAL (boot 0), -ENOMEM
 */
int mgr_lease_new(struct mgr_lease **out, uint64_t boot,
		  mgr_lease_done_fn done, void *arg);

/** Answer every parked wait (with the events it has) and free the table. */
void mgr_lease_free(struct mgr_lease *ml);

/**
 * Run a decoded CB_WAIT: drop the session's events up to q->acked (when
 * q->boot is this start's; an ack from another start means nothing here),
 * renew its lease, and answer at once if it has events, else park the
 * wait until it has some or q->wait_ms has passed. A session not known
 * yet is made; if the wait says it knew this start (q->boot is this
 * boot), the mgr forgot it (it expired): its first event is a RESET. A
 * second wait of a session answers the first one, empty.
 * @param client the host the request came from, against which a new
 *	session counts; NULL: none (only the table's cap applies)
 * @param ctx the request, kept when the result is 1
 * @param[out] rep the reply when the result is 0 (names point into the
 *	table: valid until the next call)
 * @return 0 answered (send rep); 1 parked (done runs later with ctx);
 *	-EBADMSG acked is past the last event sent; -EUSERS the session
 *	table, or the host's share of it, is full; -ENOMEM
 * Cost: a hash lookup; freeing the acknowledged events.
 */
int mgr_lease_wait(struct mgr_lease *ml, const struct proto_cbwait *q,
		   const char *client, uint64_t now_ms, void *ctx,
		   struct proto_cbrep *rep);

/**
 * Queue an event for a session and answer its parked wait, if any.
 * @param kind enum proto_cb_kind
 * @param name the name for PROTO_CB_INVAL_ENTRY (len bytes), else NULL
 * @return the event's seq (> 0), or -ENOENT (no such session), -EINVAL (a
 *	bad kind, ino or name), -ENOMEM. A queue past MGR_LEASE_MAX_QUEUED
 *	collapses into one RESET: the result is then that RESET's seq.
 */
int64_t mgr_lease_post(struct mgr_lease *ml, uint64_t session, uint8_t kind,
		       uint64_t ino, const char *name, size_t len);

/**
 * Time passes: parked waits past their wait_ms are answered (empty);
 * sessions with no wait parked that sent none for longer than their lease
 * are forgotten, with their events.
 * Cost: one walk of the sessions.
 */
void mgr_lease_tick(struct mgr_lease *ml, uint64_t now_ms);

/** Sessions known, waits parked, events queued (for metrics and tests). */
void mgr_lease_counts(const struct mgr_lease *ml, size_t *sessions,
		      size_t *parked, size_t *queued);

/** Whether session is known, and if so the last event it acknowledged. */
int mgr_lease_acked(const struct mgr_lease *ml, uint64_t session,
		    uint64_t *acked);

#endif
