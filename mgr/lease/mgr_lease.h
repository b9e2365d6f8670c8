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

/* A parked change (or access: mgr_lease_access) may run: every other
 * holder it recalled (of a lease on its directories; of a WRITE lease on
 * the access's objects) acknowledged, or was forgotten. */
typedef void (*mgr_lease_ready_fn)(void *ctx, void *arg);

/* A name a change adds, removes or replaces: the directory and the name;
 * or (len 0) a change of the directory's own attributes. */
struct mgr_lease_name {
	uint64_t dir;
	const char *name;
	size_t len;
};

#define MGR_LEASE_MAX_SESSIONS 16384u       /* sessions at once */
#define MGR_LEASE_MAX_CLIENT_SESSIONS 1024u /* of them from one host */
#define MGR_LEASE_MAX_QUEUED 4096u          /* events queued per session;
					     * past it they collapse into
					     * one RESET */
#define MGR_LEASE_MAX_OBJECTS 262144u       /* directories with leases */
#define MGR_LEASE_MAX_HOLDERS 64u           /* READ leases on one of them */
#define MGR_LEASE_MAX_NAMES 256u            /* names of one change (a BATCH
					     * touches up to 256) */
#define MGR_LEASE_MAX_INOS 4u               /* objects of one access */
#define MGR_LEASE_MIN_LEAD_MS 8000u /* with several mgrs, leases only with a
				     * mgr lease this long at least: a standby
				     * then takes over after the mounts dropped
				     * what they kept under the old mgr's (a
				     * wait, 1 s, and its lateness, 3 s) */
#define MGR_LEASE_BACKOFF_MIN_MS 1000u      /* no grant after a recall ... */
#define MGR_LEASE_BACKOFF_MAX_MS 60000u     /* ... doubling up to this */

/**
 * Create a table.
 * @param boot this start's boot id (random, non-zero), sent in every reply
 * @param done called for each parked wait when it is answered
 * @param ready called for each parked change when it may run
 * @return 0, -EINVAL (boot 0, no callback), -ENOMEM
 */
int mgr_lease_new(struct mgr_lease **out, uint64_t boot,
		  mgr_lease_done_fn done, mgr_lease_ready_fn ready, void *arg);

/** Answer every parked wait (with the events it has), let every parked
 * change run (ready), and free the table. */
void mgr_lease_free(struct mgr_lease *ml);

/**
 * Run a decoded CB_WAIT: drop the session's events up to q->acked (when
 * q->boot is this start's; an ack from another start means nothing here),
 * renew its lease, and answer at once if it has events or is new (so that
 * it learns the boot id), else park the wait until it has some or
 * q->wait_ms has passed. A session not known
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

/**
 * Grant session a READ lease on directory dir, for a LOOKUP in it or a
 * READDIR of it whose reply is being made now (from a read transaction
 * begun after every change the table let run committed: mgr_lease_done).
 * Refused while a change of the directory is waiting or running, during
 * its back-off after a recall, for a session without a callback channel,
 * while another session holds (or is being recalled from) a WRITE lease
 * on it, and past the caps. A WRITE holder asking keeps its WRITE lease.
 * @param[out] evseq the session's last event number now (proto_grant)
 * @return 1 granted, 0 not (answer without a grant)
 * Cost: two hash lookups.
 */
int mgr_lease_grant(struct mgr_lease *ml, uint64_t session, uint64_t dir,
		    uint64_t now_ms, uint64_t *evseq);

/**
 * Grant session a WRITE lease on directory dir (HACKING.md "Leases and
 * callbacks": exclusive; the holder answers ops in it itself and sends
 * them in a BATCH). Given only for a directory the session has just made
 * (its MKDIR reply, or a MKDIR in its BATCH being submitted), so that the
 * holder knows every name in it. Refused like a READ grant (a change
 * waiting or running, the back-off, no callback channel, the caps) and
 * while any other session holds or is being recalled from a lease on dir.
 * A READ holder asking is upgraded (unless its lease is being recalled).
 * A WRITE holder is a holder: a change of dir by another session recalls
 * it as it recalls READ holders (mgr_lease_change); so does any other
 * session's use of dir (mgr_lease_access).
 * @param[out] evseq the session's last event number now (proto_grant)
 * @return 1 granted, 0 not
 * Cost: two hash lookups.
 */
int mgr_lease_grant_write(struct mgr_lease *ml, uint64_t session, uint64_t dir,
			  uint64_t now_ms, uint64_t *evseq);

/** The session holding a WRITE lease on dir (recalled or not yet), or 0.
 * Cost: a hash lookup and the holders. */
uint64_t mgr_lease_writer(const struct mgr_lease *ml, uint64_t dir);

/**
 * An op of origin (0: a mount without a session) is about to read or use
 * the objects inos (its ino, parent, ...; 0 entries are skipped): each
 * that another session holds a WRITE lease on is recalled from it (RECALL,
 * no INVAL_ENTRY), and the op is parked until each such holder has
 * acknowledged (after sending its pending ops) or been forgotten. READ
 * leases are not touched: readers share. No back-off follows: a WRITE
 * lease is granted only with the directory's creation, so once recalled
 * it never comes back, and READ leases may be granted again at once.
 * @param ctx the op, handed to ready when it may run
 * A recall not acknowledged yet is waited for, not sent again; the
 * holder's own ops (origin) run at once even then (it sends them before
 * acknowledging). Parked accesses count with the parked changes.
 * @return 0 run it now; 1 parked (ready runs later with ctx); -EINVAL (n
 *	over MGR_LEASE_MAX_INOS); -ENOMEM (fail the op: recalls may have
 *	been sent for nothing)
 * Cost: a hash lookup per ino.
 */
int mgr_lease_access(struct mgr_lease *ml, uint64_t origin,
		     const uint64_t *inos, unsigned n, uint64_t now_ms,
		     void *ctx);

/**
 * A change of names is about to run: recall the READ lease on each name's
 * directory from every holder but origin (the session that asks, 0:
 * none): queue INVAL_ENTRY for the name and RECALL for the directory to
 * each, which stops being a holder, and park the change until each has
 * acknowledged or been forgotten. From now until mgr_lease_done, the
 * directories grant no lease, nor for a back-off after a recall (1 s,
 * doubling while recalls follow each other, up to
 * MGR_LEASE_BACKOFF_MAX_MS). A WRITE holder is recalled the same way; a
 * change by the WRITE holder itself runs at once, even while its recall
 * is pending (it sends its ops before it acknowledges). A holder already
 * recalled (by an earlier name or change) gets nothing more; it is
 * waited for. Names may repeat a directory: each counts as a change of it
 * until mgr_lease_done (with the same names).
 * @param ctx the change, handed to ready when it may run
 * @return 0 run it now (nobody to wait for); 1 parked (ready runs later
 *	with ctx); -EINVAL (more than MGR_LEASE_MAX_NAMES names); -ENOMEM
 *	(fail the change: the table is as before, but for invalidations
 *	sent for nothing)
 * Cost: the holders of the directories, times the sessions to wait for;
 * past 2 names, a heap array of an entry per session known (at most).
 */
int mgr_lease_change(struct mgr_lease *ml, uint64_t origin,
		     const struct mgr_lease_name *names, unsigned n,
		     uint64_t now_ms, void *ctx);

/**
 * A change mgr_lease_change let run is committed (or failed): its
 * directories may grant leases again once no other change of theirs runs.
 */
void mgr_lease_done(struct mgr_lease *ml, const struct mgr_lease_name *names,
		    unsigned n, uint64_t now_ms);

/** Directories with leases or changes, and changes parked (tests, metrics). */
void mgr_lease_object_counts(const struct mgr_lease *ml, size_t *objects,
			     size_t *parked);

/** Grants made and leases recalled since the start (metrics, tests). */
void mgr_lease_totals(const struct mgr_lease *ml, uint64_t *grants,
		      uint64_t *recalls);

/** Sessions known, waits parked, events queued (for metrics and tests). */
void mgr_lease_counts(const struct mgr_lease *ml, size_t *sessions,
		      size_t *parked, size_t *queued);

/** Whether session is known, and if so the last event it acknowledged. */
int mgr_lease_acked(const struct mgr_lease *ml, uint64_t session,
		    uint64_t *acked);

#endif
