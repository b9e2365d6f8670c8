/* mgr_leased.c - the callback channel on the wire: decode, run, (park,)
 * reply; see mgr_leased.h. */
#include "mgr_leased.h"

#include <errno.h>
#include <ev.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "log.h"
#include "mgr_lease.h"

#define LEASED_TICK_S 0.1 /* wait and lease resolution */

/* The service. Loop thread only. */
struct mgr_leased {
	struct ev_loop *loop;
	struct mgr_lease *ml;
	ev_timer tick;
	struct proto_cbrep rep;   /* the reply of a wait answered at once */
	uint8_t buf[PROTO_MAX_BODY]; /* its encoding */
};

/* Monotonic milliseconds. */
static uint64_t leased_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Send the reply of a CB_WAIT: rep's body. Cost: the encoding (at most
 * PROTO_CB_MAX_EVENTS events, about 70 KiB with the longest names). */
static void leased_reply(struct mgr_leased *ld, struct net_sreq *r,
			 const struct proto_cbrep *rep)
{
	struct wbuf w;

	wb_init(&w, ld->buf, sizeof(ld->buf));
	if (proto_cbrep_encode(&w, rep)) {
		log_err("CB_WAIT reply does not encode");
		net_sreq_reply(r, -EIO, NULL, 0);
		return;
	}
	net_sreq_reply(r, 0, ld->buf, (uint32_t)w.len);
}

/* mgr_lease_done_fn: a parked wait is answered. */
static void leased_done(void *ctx, const struct proto_cbrep *rep, void *arg)
{
	leased_reply(arg, ctx, rep);
}

/* mgr_lease_ready_fn: a parked change or access may run. */
static void leased_ready(void *ctx, void *arg)
{
	struct mgr_leased_wait *w = ctx;

	(void)arg;
	w->ready(w);
}

/* Timer: end waits, forget silent sessions. */
static void leased_on_tick(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct mgr_leased *ld = t->data;

	(void)loop;
	(void)revents;
	mgr_lease_tick(ld->ml, leased_now_ms());
}

/* See mgr_leased.h. */
int mgr_leased_new(struct mgr_leased **out, struct ev_loop *loop)
{
	struct mgr_leased *ld = calloc(1, sizeof(*ld));
	uint64_t boot = 0;
	int rc;

	if (!ld)
		return -ENOMEM;
	while (boot == 0)
		if (getrandom(&boot, sizeof(boot), 0) != sizeof(boot))
			boot = (uint64_t)time(NULL) ^ leased_now_ms() << 20;
	rc = mgr_lease_new(&ld->ml, boot, leased_done, leased_ready, ld);
	if (rc) {
		free(ld);
		return rc;
	}
	ld->loop = loop;
	ev_timer_init(&ld->tick, leased_on_tick, LEASED_TICK_S, LEASED_TICK_S);
	ld->tick.data = ld;
	ev_timer_start(loop, &ld->tick);
	*out = ld;
	return 0;
}

/* See mgr_leased.h. */
void mgr_leased_free(struct mgr_leased *ld)
{
	if (!ld)
		return;
	ev_timer_stop(ld->loop, &ld->tick);
	mgr_lease_free(ld->ml);
	free(ld);
}

/* See mgr_leased.h. */
int mgr_leased_owns(uint16_t op)
{
	return op == PROTO_OP_CB_WAIT;
}

/* See mgr_leased.h. A malformed request closes its connection, like any
 * other; an ack past what was sent is answered -EBADMSG. */
void mgr_leased_handle(struct mgr_leased *ld, struct net_sreq *r)
{
	struct proto_cbwait q;
	const char *why = "request";
	char host[64];
	int rc;

	if (r->hdr.bulk_len || r->hdr.aux)
		return (void)net_sreq_reject(r, "CB_WAIT with bulk data");
	rc = proto_cbwait_decode(r->body, r->body_len, &q, &why);
	if (rc)
		return (void)net_sreq_reject(r, why ? why : "malformed CB_WAIT");
	net_sconn_host(r->conn, host, sizeof(host));
	rc = mgr_lease_wait(ld->ml, &q, host, leased_now_ms(), r, &ld->rep);
	log_debug("CB_WAIT session %016llx acked %llu from %s: %d",
		  (unsigned long long)q.session, (unsigned long long)q.acked,
		  net_sconn_peer(r->conn), rc);
	if (rc == 1)
		return; /* parked: leased_done replies */
	if (rc == -EUSERS)
		log_warn("callbacks: no room for a session of %s (%u at most "
			 "per host, %u in all)", host,
			 MGR_LEASE_MAX_CLIENT_SESSIONS, MGR_LEASE_MAX_SESSIONS);
	if (rc)
		return (void)net_sreq_reply(r, rc, NULL, 0);
	leased_reply(ld, r, &ld->rep);
}

/* See mgr_leased.h. */
int64_t mgr_leased_post(struct mgr_leased *ld, uint64_t session,
			uint8_t kind, uint64_t ino, const char *name,
			size_t len)
{
	return mgr_lease_post(ld->ml, session, kind, ino, name, len);
}

/* See mgr_leased.h. */
void mgr_leased_counts(struct mgr_leased *ld, size_t *sessions,
		       size_t *parked, size_t *queued, uint64_t *grants,
		       uint64_t *recalls)
{
	mgr_lease_counts(ld->ml, sessions, parked, queued);
	mgr_lease_totals(ld->ml, grants, recalls);
}

/* See mgr_leased.h. */
int mgr_leased_change(struct mgr_leased *ld, uint64_t origin,
		      const struct mgr_lease_name *names, unsigned n,
		      struct mgr_leased_wait *w)
{
	return ld ? mgr_lease_change(ld->ml, origin, names, n, leased_now_ms(),
				     w) : 0;
}

/* See mgr_leased.h. */
void mgr_leased_done(struct mgr_leased *ld, const struct mgr_lease_name *names,
		     unsigned n)
{
	if (ld)
		mgr_lease_done(ld->ml, names, n, leased_now_ms());
}

/* See mgr_leased.h. */
int mgr_leased_grant(struct mgr_leased *ld, uint64_t session, uint64_t dir,
		     struct proto_grant *g)
{
	uint64_t evseq;

	if (!ld || !session ||
	    !mgr_lease_grant(ld->ml, session, dir, leased_now_ms(), &evseq))
		return 0;
	g->ino = dir;
	g->evseq = evseq;
	return 1;
}

/* See mgr_leased.h. */
int mgr_leased_grant_write(struct mgr_leased *ld, uint64_t session,
			   uint64_t dir, struct proto_grant *g)
{
	uint64_t evseq;

	if (!ld || !session ||
	    !mgr_lease_grant_write(ld->ml, session, dir, leased_now_ms(),
				   &evseq))
		return 0;
	g->ino = dir;
	g->evseq = evseq;
	return 1;
}

/* See mgr_leased.h. A parked access leaves through leased_ready, as a
 * parked change does. */
int mgr_leased_access(struct mgr_leased *ld, uint64_t origin,
		      const uint64_t *inos, unsigned n,
		      struct mgr_leased_wait *w)
{
	return ld ? mgr_lease_access(ld->ml, origin, inos, n, leased_now_ms(),
				     w) : 0;
}

/* See mgr_leased.h. */
uint64_t mgr_leased_writer(const struct mgr_leased *ld, uint64_t ino)
{
	return ld && ino ? mgr_lease_writer(ld->ml, ino) : 0;
}
