/* mgr_lockd.c - the lock service on the wire: decode, run, (defer,) reply. */
#include "mgr_lockd.h"

#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "log.h"
#include "mgr_db.h"
#include "mgr_lock.h"
#include "srv_status.h"

#define LOCKD_TICK_S 0.1 /* slice and lease resolution */

/* The service. Loop thread only. */
struct mgr_lockd {
	struct ev_loop *loop;
	struct mgr_lock *ml;
	struct mgr_db *db;     /* for the lock mark */
	int marked;            /* the database's lock mark is set */
	uint64_t grace_end_ms; /* end of this start's grace period */
	ev_timer tick;
};

/* Monotonic milliseconds. */
static uint64_t lockd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Send the reply of a lock request: rep's body when status is 0. */
static void lockd_reply(struct net_sreq *r, int status,
			const struct proto_lockrep *rep)
{
	uint8_t buf[64];
	struct wbuf w;

	if (status == 0) {
		wb_init(&w, buf, sizeof(buf));
		if (!rep || proto_lockrep_encode(&w, rep)) {
			log_err("%s reply does not encode",
				proto_op_name(r->hdr.op));
			net_sreq_reply(r, -EIO, NULL, 0);
			return;
		}
		net_sreq_reply(r, 0, buf, (uint32_t)w.len);
		return;
	}
	net_sreq_reply(r, status, NULL, 0);
}

/* Set the database's lock mark once a lock is held (granted: one is
 * known to be), before its grant is answered, so that the next start after
 * a crash gives clients a grace period to reclaim it. Cost: a count while
 * unmarked; one synced store commit once per run. */
static void lockd_mark(struct mgr_lockd *ld, int granted)
{
	size_t locks, waiters, sessions;
	int rc;

	if (ld->marked)
		return;
	if (!granted) {
		mgr_lock_counts(ld->ml, &locks, &waiters, &sessions);
		if (!locks)
			return;
	}
	rc = mgr_db_lockmark_set(ld->db, 1);
	if (rc) {
		log_err("cannot record that locks are held (%s): a restart after "
			"a crash will not wait for reclaims", strerror(-rc));
		return;
	}
	ld->marked = 1;
}

/* mgr_lock_done_fn: a deferred WAIT finished. */
static void lockd_done(void *ctx, int status, const struct proto_lockrep *rep,
		       void *arg)
{
	log_debug("LOCK wait from %s: %d",
		  net_sconn_peer(((struct net_sreq *)ctx)->conn), status);
	if (status == 0)
		lockd_mark(arg, 1);
	lockd_reply(ctx, status, rep);
}

/* srvstat_extra_fn: the lock service's counters in the mgr's STATUS
 * (`rpfs stats --server`): locks held, WAITs queued, client sessions,
 * WAITs granted by a wake-up since the start. */
static int lockd_stats(char *buf, size_t cap, void *arg)
{
	struct mgr_lockd *ld = arg;
	size_t locks, waiters, sessions;
	int n;

	mgr_lock_counts(ld->ml, &locks, &waiters, &sessions);
	n = snprintf(buf, cap, "\"lock_held\":%zu,\"lock_waiters\":%zu,"
		     "\"lock_sessions\":%zu,\"lock_woken\":%llu", locks, waiters,
		     sessions, (unsigned long long)mgr_lock_woken(ld->ml));
	return n < 0 || (size_t)n >= cap ? -ERANGE : n;
}

/* See mgr_lockd.h. */
void mgr_lockd_counts(struct mgr_lockd *ld, size_t *locks, size_t *waiters,
		      size_t *sessions, uint64_t *woken)
{
	mgr_lock_counts(ld->ml, locks, waiters, sessions);
	*woken = mgr_lock_woken(ld->ml);
}

/* Timer: end slices, expire leases (and grant what they free). */
static void lockd_on_tick(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct mgr_lockd *ld = t->data;

	mgr_lock_tick(ld->ml, lockd_now_ms());
}

/* Create the table with a random boot id (and a grace period if the lock
 * mark asks for one), start the timer. */
int mgr_lockd_new(struct mgr_lockd **out, struct ev_loop *loop,
		  struct mgr_db *db, uint32_t grace_ms)
{
	struct mgr_lockd *ld = calloc(1, sizeof(*ld));
	uint64_t boot = 0;
	int rc;

	if (!ld)
		return -ENOMEM;
	rc = mgr_db_lockmark_get(db, &ld->marked);
	if (rc)
		goto out_free_ld;
	if (!ld->marked)
		grace_ms = 0;
	if (grace_ms)
		log_notice("locks may be held from the last run: %u s of grace "
			   "for clients to reclaim them", grace_ms / 1000u);
	ld->db = db;
	ld->grace_end_ms = lockd_now_ms() + grace_ms;
	while (boot == 0)
		if (getrandom(&boot, sizeof(boot), 0) != sizeof(boot))
			boot = (uint64_t)time(NULL) ^ lockd_now_ms() << 20;
	rc = mgr_lock_new(&ld->ml, grace_ms, lockd_now_ms(), boot, lockd_done,
			  ld);
	if (rc)
		goto out_free_ld;
	ld->loop = loop;
	ev_timer_init(&ld->tick, lockd_on_tick, LOCKD_TICK_S, LOCKD_TICK_S);
	ld->tick.data = ld;
	ev_timer_start(loop, &ld->tick);
	srvstat_extra(lockd_stats, ld);
	*out = ld;
	return 0;

out_free_ld:
	free(ld);
	return rc;
}

/* Stop the timer, clear the lock mark at a clean stop with nothing held,
 * answer the waiters, free. */
void mgr_lockd_free(struct mgr_lockd *ld, int clean)
{
	size_t locks, waiters, sessions;

	if (!ld)
		return;
	mgr_lock_counts(ld->ml, &locks, &waiters, &sessions);
	if (clean && ld->marked && !locks && lockd_now_ms() >= ld->grace_end_ms &&
	    mgr_db_lockmark_set(ld->db, 0) == 0)
		ld->marked = 0;
	srvstat_extra(NULL, NULL);
	ev_timer_stop(ld->loop, &ld->tick);
	mgr_lock_free(ld->ml);
	free(ld);
}

/* The lock ops. */
int mgr_lockd_owns(uint16_t op)
{
	return op == PROTO_OP_LOCK || op == PROTO_OP_LOCK_CANCEL ||
	       op == PROTO_OP_LOCK_KEEPALIVE;
}

/* Validate, run, reply (unless deferred). A malformed request closes its
 * connection, like any other. */
void mgr_lockd_handle(struct mgr_lockd *ld, struct net_sreq *r)
{
	struct proto_lockrep rep;
	struct proto_lock q;
	char host[64];
	const char *why = "request";
	int rc;

	if (r->hdr.bulk_len || r->hdr.aux) {
		net_sreq_reject(r, "lock request with bulk data");
		return;
	}
	rc = proto_lock_decode(r->body, r->body_len, r->hdr.op, &q, &why);
	if (rc) {
		net_sreq_reject(r, why ? why : "malformed lock request");
		return;
	}
	net_sconn_host(r->conn, host, sizeof(host));
	rc = mgr_lock_request(ld->ml, r->hdr.op, &q, host, lockd_now_ms(), r,
			      &rep);
	log_debug("%s cmd %u ino %llu [%llu, %llu] type %u from %s: %d",
		  proto_op_name(r->hdr.op), q.cmd, (unsigned long long)q.ino,
		  (unsigned long long)q.start, (unsigned long long)q.end,
		  q.type, net_sconn_peer(r->conn), rc);
	if (rc == 1)
		return; /* deferred: lockd_done replies */
	if (rc == 0)
		lockd_mark(ld, 0);
	lockd_reply(r, rc, &rep);
}
