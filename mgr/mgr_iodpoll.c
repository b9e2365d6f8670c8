/* mgr_iodpoll.c - poll every iod's statfs in the background for STATFS. */
#include "mgr_iodpoll.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "net.h"

#define POLL_INTERVAL_MS 2000
#define POLL_TIMEOUT_MS 2000
#define POLL_BSIZE 4096u

enum iod_state { IOD_UNKNOWN, IOD_UP, IOD_DOWN };

/* Per iod state: owned by the poll thread. */
struct poll_iod {
	struct mgr_iod addr;
	struct net_conn *conn;
	struct net_call call;
	uint8_t rep[256];
	int submitted;
	enum iod_state state;
};

struct mgr_iodpoll {
	pthread_t thread;
	struct net_client *cl;   /* poll thread only (after start) */
	uint16_t niods;
	struct poll_iod *iods;   /* poll thread only */
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* signals stop and round completion */
	int stop;                /* lock */
	int have;                /* lock: a round has finished */
	struct proto_statfs agg; /* lock */
	unsigned nup;            /* lock */
};

/* Record an iod's state change with the right log level: an iod down from
 * the start is only a notice; one that was up and went away is a warning. */
static void poll_mark(struct poll_iod *pi, uint16_t i, int up, int err)
{
	enum iod_state ns = up ? IOD_UP : IOD_DOWN;

	if (ns == pi->state)
		return;
	if (up && pi->state == IOD_DOWN)
		log_notice("iod %u (%s:%u) is up again", i, pi->addr.host, pi->addr.port);
	else if (up)
		log_info("iod %u (%s:%u) is up", i, pi->addr.host, pi->addr.port);
	else if (pi->state == IOD_UP)
		log_warn("iod %u (%s:%u) went down: %s", i, pi->addr.host,
			 pi->addr.port, strerror(-err));
	else
		log_notice("iod %u (%s:%u) is not answering: %s", i,
			   pi->addr.host, pi->addr.port, strerror(-err));
	pi->state = ns;
}

/* One round: IO_STATFS to every iod at once, then collect. Cost: one
 * round trip (or the timeout when an iod hangs). */
static void poll_round(struct mgr_iodpoll *p)
{
	struct proto_statfs sum = { .bsize = POLL_BSIZE }, st;
	unsigned __int128 blocks = 0, bfree = 0, bavail = 0;
	unsigned nup = 0;
	const char *why;
	int rc;

	for (uint16_t i = 0; i < p->niods; i++) {
		struct poll_iod *pi = &p->iods[i];

		memset(&pi->call, 0, sizeof(pi->call));
		pi->call.op = PROTO_OP_IO_STATFS;
		pi->call.rep_buf = pi->rep;
		pi->call.rep_cap = sizeof(pi->rep);
		rc = net_call_submit(pi->conn, &pi->call);
		pi->submitted = rc == 0;
		if (rc)
			poll_mark(pi, i, 0, rc);
	}
	for (uint16_t i = 0; i < p->niods; i++) {
		struct poll_iod *pi = &p->iods[i];

		if (!pi->submitted)
			continue;
		rc = net_call_wait(&pi->call);
		if (!rc)
			rc = pi->call.status;
		if (!rc)
			rc = proto_statfs_decode(pi->rep, pi->call.rep_len, &st, &why);
		if (rc) {
			poll_mark(pi, i, 0, rc);
			continue;
		}
		poll_mark(pi, i, 1, 0);
		nup++;
		blocks += (unsigned __int128)st.blocks * st.bsize;
		bfree += (unsigned __int128)st.bfree * st.bsize;
		bavail += (unsigned __int128)st.bavail * st.bsize;
	}
	sum.blocks = (uint64_t)(blocks / POLL_BSIZE);
	sum.bfree = (uint64_t)(bfree / POLL_BSIZE);
	sum.bavail = (uint64_t)(bavail / POLL_BSIZE);
	pthread_mutex_lock(&p->lock);
	p->agg = sum;
	p->nup = nup;
	p->have = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* Absolute CLOCK_REALTIME deadline ms from now, for pthread_cond_timedwait. */
static void poll_deadline(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/* Thread body: a round every POLL_INTERVAL_MS until stopped. */
static void *poll_main(void *arg)
{
	struct mgr_iodpoll *p = arg;
	struct timespec ts;

	for (;;) {
		poll_round(p);
		poll_deadline(&ts, POLL_INTERVAL_MS);
		pthread_mutex_lock(&p->lock);
		while (!p->stop &&
		       pthread_cond_timedwait(&p->cond, &p->lock, &ts) != ETIMEDOUT)
			;
		int stop = p->stop;
		pthread_mutex_unlock(&p->lock);
		if (stop)
			break;
	}
	return NULL;
}

/* Start with default transport options (no cluster key). */
int mgr_iodpoll_start(struct mgr_iodpoll **out, const struct mgr_db *db)
{
	struct net_opts o;

	net_opts_default(&o);
	return mgr_iodpoll_start_opts(out, db, &o);
}

/* Create the client, one lazy connection per iod, and the thread. */
int mgr_iodpoll_start_opts(struct mgr_iodpoll **out, const struct mgr_db *db,
			   const struct net_opts *base)
{
	struct net_opts o = *base;
	struct mgr_iodpoll *p;
	int rc;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->niods = db->niods;
	p->iods = calloc(db->niods, sizeof(*p->iods));
	if (!p->iods) {
		rc = -ENOMEM;
		goto out_free_p;
	}
	o.timeout_ms = POLL_TIMEOUT_MS;
	rc = net_client_new(&p->cl, &o);
	if (rc)
		goto out_free_iods;
	for (uint16_t i = 0; i < db->niods; i++) {
		p->iods[i].addr = db->iods[i];
		rc = net_conn_new(p->cl, db->iods[i].host, db->iods[i].port,
				  &p->iods[i].conn);
		if (rc)
			goto out_free_client;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	rc = -pthread_create(&p->thread, NULL, poll_main, p);
	if (rc)
		goto out_destroy_lock;
	*out = p;
	return 0;

out_destroy_lock:
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
out_free_client:
	net_client_free(p->cl);
out_free_iods:
	free(p->iods);
out_free_p:
	free(p);
	return rc;
}

/* Stop the thread, then free the client (no call is in flight then). */
void mgr_iodpoll_stop(struct mgr_iodpoll *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	net_client_free(p->cl);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p->iods);
	free(p);
}

/* Copy the aggregate out, waiting for the first round if needed. */
int mgr_iodpoll_get(struct mgr_iodpoll *p, struct proto_statfs *st,
		    int wait_ms, unsigned *nup)
{
	struct timespec ts;
	int rc = 0;

	poll_deadline(&ts, wait_ms);
	pthread_mutex_lock(&p->lock);
	while (!p->have && !p->stop &&
	       pthread_cond_timedwait(&p->cond, &p->lock, &ts) != ETIMEDOUT)
		;
	if (p->have) {
		*st = p->agg;
		*nup = p->nup;
	} else {
		memset(st, 0, sizeof(*st));
		st->bsize = POLL_BSIZE;
		*nup = 0;
		rc = -EAGAIN;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}
