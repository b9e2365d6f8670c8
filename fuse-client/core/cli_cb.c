/* cli_cb.c - the callback thread of a mount; see cli_cb.h. */
#include "cli_cb.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define CB_DOWN_RETRY_MS 500 /* the mgr unreachable: ask again after */
#define CB_LATE_MS 3000u     /* a wait's answer this late: the mgr is lost
			      * (a loaded mgr answers 1 s late at times) */
/* The session's lease at the mgr: it forgets a session that sent no wait
 * for this long, and runs the changes waiting for its acks. The mount
 * drops its leases sooner: CB_LATE_MS after a wait's end without an
 * answer. Twice that bound, whatever the mount's timeout=. */
#define CB_LEASE_MS (2u * (CLI_CB_WAIT_MAX_MS + CB_LATE_MS))

/* The callback client. The thread owns what says "thread"; stop and the
 * counters are atomics. */
struct cli_cb {
	struct cli_fs *fs;          /* read-only */
	struct net_client *net;     /* read-only; its connection: thread only */
	struct net_conn *conns[ADDR_MAX_LIST]; /* thread: one (lazy) per mgr of
					* the list; each reconnects on its
					* next call after a failure */
	uint64_t session;           /* read-only */
	uint32_t lease_ms;          /* read-only */
	uint32_t wait_ms;           /* read-only */
	cli_cb_fn fn;               /* read-only */
	void *arg;                  /* read-only */
	uint64_t boot;              /* thread: the mgr's boot id last seen */
	uint64_t acked;             /* thread: the last event handled */
	int lapsed;                 /* thread: RESET given for a lapse */
	atomic_int stop;
	atomic_int live;            /* cli_cb_live */
	atomic_uint_fast64_t live_from_ms; /* when the last answered wait was
				     * sent (the lease counts from there) */
	atomic_uint_fast64_t events, waits;
	pthread_t thread;
	struct proto_cbrep rep;     /* thread: the decoded reply */
	uint8_t req[64];            /* thread: the request's body */
	uint8_t buf[PROTO_MAX_BODY];/* thread: the reply's body */
};

/* Monotonic milliseconds. */
static uint64_t cb_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Sleep ms milliseconds (unless stopping). */
static void cb_sleep_ms(struct cli_cb *cb, uint32_t ms)
{
	struct timespec ts = { 0, 50 * 1000000L };

	for (uint32_t t = 0; t < ms && !atomic_load(&cb->stop); t += 50)
		nanosleep(&ts, NULL);
}

/* The connection to the mgr metadata calls follow now (they find the
 * active one: cli_mgr_run). @return it, or NULL (logged at debug) */
static struct net_conn *cb_conn(struct cli_cb *cb)
{
	int cur = atomic_load(&cb->fs->mgr_cur);

	if (!cb->conns[cur] &&
	    net_conn_new(cb->net, cb->fs->mgr_list[cur].host,
			 cb->fs->mgr_list[cur].port, &cb->conns[cur])) {
		log_debug("callbacks: no connection to mgr %s",
			  cb->fs->mgr_list[cur].host);
		return NULL;
	}
	return cb->conns[cur];
}

/* A wait failed (rc): the mgr died, moved, or is out of reach, and may
 * forget the session or have forgotten it (a restart), so invalidations
 * may be lost. Drop everything at once, once per outage: the call's
 * timeout (cb_once) makes this happen before the mgr forgets us. */
static void cb_lapse(struct cli_cb *cb, int rc)
{
	if (cb->lapsed || cb->boot == 0)
		return;
	log_notice("callbacks: the mgr's channel failed (%s): dropping every "
		   "name cached under a lease", strerror(-rc));
	cb->lapsed = 1;
	atomic_store(&cb->live, 0);
	atomic_fetch_add(&cb->fs->lease_resets, 1);
	cb->fn(PROTO_CB_RESET, 0, 1, NULL, 0, cb->arg);
}

/* Hand a reply's events to the handler: first a RESET if the mgr is
 * another start than the one we knew; then each event after acked. */
static void cb_deliver(struct cli_cb *cb, uint64_t sent_ms)
{
	const struct proto_cbrep *r = &cb->rep;

	if (cb->boot && cb->boot != r->boot) {
		log_notice("callbacks: the mgr restarted: dropping every cached "
			   "name and attribute");
		cb->fn(PROTO_CB_RESET, 0, 1, NULL, 0, cb->arg);
		atomic_fetch_add(&cb->fs->lease_resets, 1);
		cb->acked = 0;
	}
	cb->boot = r->boot;
	atomic_store(&cb->live_from_ms, sent_ms);
	cb->lapsed = 0;
	atomic_store(&cb->live, 1);
	atomic_fetch_add(&cb->waits, 1);
	for (unsigned i = 0; i < r->nev; i++) {
		if (r->ev[i].seq <= cb->acked)
			continue; /* sent again: already handled */
		cb->fn(r->ev[i].kind, r->ev[i].seq, r->ev[i].ino,
		       r->ev[i].name.p, r->ev[i].name.len, cb->arg);
		if (r->ev[i].kind == PROTO_CB_RESET)
			atomic_fetch_add(&cb->fs->lease_resets, 1);
		cb->acked = r->ev[i].seq;
		atomic_fetch_add(&cb->events, 1);
	}
}

/* Send a CB_WAIT (wait_ms, flags) to the mgr followed now and wait for
 * its answer, at most wait_ms + CB_LATE_MS: the reply body lands in
 * cb->buf (call->rep_len). @return net_call_run's result, -ENOTCONN (no
 * connection), -EINVAL (does not encode) */
static int cb_call(struct cli_cb *cb, uint32_t wait_ms, uint32_t flags,
		   struct net_call *call)
{
	struct proto_cbwait q = { .session = cb->session, .boot = cb->boot,
				  .acked = cb->acked, .wait_ms = wait_ms,
				  .lease_ms = cb->lease_ms, .flags = flags };
	struct net_conn *c = cb_conn(cb);
	struct wbuf w;

	if (!c)
		return -ENOTCONN;
	wb_init(&w, cb->req, sizeof(cb->req));
	if (proto_cbwait_encode(&w, &q))
		return -EINVAL;
	memset(call, 0, sizeof(*call));
	call->op = PROTO_OP_CB_WAIT;
	call->body = cb->req;
	call->body_len = (uint32_t)w.len;
	call->rep_buf = cb->buf;
	call->rep_cap = sizeof(cb->buf);
	/* fail (and drop everything: cb_lapse) CB_LATE_MS after the wait's
	 * end: before the mgr forgets us (CB_LEASE_MS), and before a standby
	 * can take over from a mgr that went silent (it waits out a mgr
	 * lease of 2 s at least) */
	call->timeout_ms = wait_ms + CB_LATE_MS;
	return net_call_run(c, call);
}

/* One CB_WAIT: send, wait, decode, deliver. @return 0, or -errno (the
 * caller pauses; a failed connection reconnects on its next call) */
static int cb_once(struct cli_cb *cb)
{
	uint64_t sent_ms = cb_now_ms();
	struct net_call call;
	const char *why = "?";
	int rc;

	rc = cb_call(cb, cb->wait_ms, 0, &call);
	if (rc == 0 && call.status != 0)
		rc = call.status == PROTO_STANDBY || call.status == PROTO_RETRY ||
		     call.status > 0 || call.status < -4095 ? -EAGAIN : call.status;
	if (rc == 0 && proto_cbrep_decode(cb->buf, call.rep_len, &cb->rep, &why)) {
		log_warn("callbacks: malformed CB_WAIT reply (%s)", why);
		rc = -EPROTO;
	}
	if (rc) {
		log_debug("callbacks: CB_WAIT: %s", strerror(-rc));
		return rc;
	}
	cb_deliver(cb, sent_ms);
	return 0;
}

/* The thread: a CB_WAIT pending at all times, until stopped. */
static void *cb_main(void *arg)
{
	struct cli_cb *cb = arg;

	while (!atomic_load(&cb->stop)) {
		int rc = cb_once(cb);

		if (rc) {
			cb_lapse(cb, rc);
			cb_sleep_ms(cb, CB_DOWN_RETRY_MS);
		}
	}
	return NULL;
}

/* See cli_cb.h. */
int cli_cb_new(struct cli_cb **out, struct cli_fs *fs, uint64_t session,
	       const struct net_opts *no, cli_cb_fn fn, void *arg)
{
	struct net_opts o = *no;
	struct cli_cb *cb;
	int rc;

	if (!session || !fn)
		return -EINVAL;
	cb = calloc(1, sizeof(*cb));
	if (!cb)
		return -ENOMEM;
	cb->fs = fs;
	cb->session = session;
	cb->fn = fn;
	cb->arg = arg;
	cb->lease_ms = CB_LEASE_MS;
	cb->wait_ms = CLI_CB_WAIT_MAX_MS;
	atomic_init(&cb->stop, 0);
	atomic_init(&cb->live, 0);
	atomic_init(&cb->live_from_ms, 0);
	atomic_init(&cb->events, 0);
	atomic_init(&cb->waits, 0);
	o.tcp_lanes = 1; /* one wait at a time */
	rc = net_client_new(&cb->net, &o);
	if (rc)
		goto out_free_cb;
	rc = -pthread_create(&cb->thread, NULL, cb_main, cb);
	if (rc)
		goto out_free_net;
	*out = cb;
	return 0;

out_free_net:
	net_client_free(cb->net);
out_free_cb:
	free(cb);
	return rc;
}

/* Tell the mgr the session ends (PROTO_CBW_BYE), so that its changes do
 * not wait out our lease; best effort, one short call. Thread joined. */
static void cb_bye(struct cli_cb *cb)
{
	struct net_call call;

	if (cb->boot && cb_call(cb, 1, PROTO_CBW_BYE, &call))
		log_debug("callbacks: the goodbye was not answered");
}

/* See cli_cb.h. */
void cli_cb_free(struct cli_cb *cb)
{
	if (!cb)
		return;
	atomic_store(&cb->stop, 1);
	pthread_join(cb->thread, NULL);
	cb_bye(cb);
	net_client_free(cb->net); /* and its connections */
	free(cb);
}

/* See cli_cb.h. The lapse is checked here too: the thread notices it
 * only when its wait fails, which may take longer than the lease. */
int cli_cb_live(struct cli_cb *cb)
{
	/* the thread keeps a wait pending and gives up (cb_lapse: live 0)
	 * when one is not answered in time; the clock is only a backstop for
	 * a thread that stopped waiting at all: not past the lease after
	 * which the mgr forgets the session (a wait answered a few seconds
	 * late by a loaded mgr must not count as lost) */
	return atomic_load(&cb->live) &&
	       cb_now_ms() - atomic_load(&cb->live_from_ms) < cb->lease_ms;
}

/* See cli_cb.h. */
void cli_cb_counts(struct cli_cb *cb, uint64_t *events, uint64_t *waits)
{
	*events = atomic_load(&cb->events);
	*waits = atomic_load(&cb->waits);
}
