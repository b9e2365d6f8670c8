/*
 * mgr_iodpoll.c - the thread that talks to every iod: each round IO_STATFS
 * (for STATFS), then IO_FENCE (mgr_fence.c: lease renewal, fence sets);
 * between rounds it wakes at once for a STALE_MARK to push, and at the
 * lease bound of an iod a mark waits for.
 */
#include "mgr_iodpoll.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "log.h"
#include "net.h"

#define POLL_INTERVAL_MS 2000
#define POLL_TIMEOUT_MS 2000
#define POLL_BSIZE 4096u
#define POLL_FENCE_BODY (40 + 8 * PROTO_MAX_INOS)

enum iod_state { IOD_UNKNOWN, IOD_UP, IOD_DOWN };

/* Per iod state: owned by the poll thread, but for up. */
struct poll_iod {
	struct mgr_iod addr;
	struct net_conn *conn;
	struct net_call call;
	uint8_t rep[256];
	uint8_t body[POLL_FENCE_BODY]; /* the IO_FENCE in flight */
	int submitted;
	enum iod_state state;
	struct mgr_fence_iod fence;
	int up;                  /* atomic: for mgr_iodpoll_up */
	uint64_t lease_pub;      /* atomic: fence.lease_bound_ns as of the
				  * last publish (mgr_iodpoll_lease) */
	int fence_status;        /* the last IO_FENCE status logged */
};

struct mgr_iodpoll {
	pthread_t thread;
	struct net_client *cl;   /* poll thread only (after start) */
	int tcp;                 /* cl is tcp (mgr_fence_refused applies) */
	struct mgr_db *db;       /* the fence sets (read txns of the thread) */
	uint16_t niods;
	uint32_t lease_ms, interval_ms;
	struct poll_iod *iods;   /* poll thread only */
	mgr_iodpoll_notify_fn notify;
	void *notify_arg;
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* CLOCK_MONOTONIC; signals stop, marks
				  * queued and round completion */
	int stop;                /* lock */
	int halted;              /* lock: the thread is joined */
	int have;                /* lock: a round has finished */
	struct proto_statfs agg; /* lock */
	unsigned nup;            /* lock */
	struct mgr_fence_mark *in, **in_tail;     /* lock: queued marks */
	struct mgr_fence_mark *done, **done_tail; /* lock: done marks */
	uint64_t token;          /* the leadership token fence messages carry
				  * (0: none); set before the thread starts */
	int (*serving)(void *arg); /* NULL: always; thread-safe; set before
				    * the thread starts */
	void *serving_arg;
};

/* CLOCK_MONOTONIC in ns. */
static uint64_t poll_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Absolute CLOCK_MONOTONIC deadline of ns, for pthread_cond_timedwait. */
static void poll_abs(struct timespec *ts, uint64_t ns)
{
	ts->tv_sec = (time_t)(ns / 1000000000u);
	ts->tv_nsec = (long)(ns % 1000000000u);
}

/* Record an iod's state change with the right log level: an iod down from
 * the start is only a notice; one that was up and went away is a warning. */
static void poll_mark(struct poll_iod *pi, uint16_t i, int up, int err)
{
	enum iod_state ns = up ? IOD_UP : IOD_DOWN;

	__atomic_store_n(&pi->up, up, __ATOMIC_RELEASE);
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

/* One STATFS round: IO_STATFS to every iod at once, then collect; the iods
 * that answered are due an IO_FENCE. Cost: one round trip (or the timeout
 * when an iod hangs). */
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
		if (rc) {
			poll_mark(pi, i, 0, rc);
			mgr_fence_failed(&pi->fence);
		}
		if (rc == -ECONNREFUSED && p->tcp)
			mgr_fence_refused(&pi->fence, poll_now_ns());
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
			mgr_fence_failed(&pi->fence);
			continue;
		}
		poll_mark(pi, i, 1, 0);
		mgr_fence_round(&pi->fence);
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

/* mgr_fence_page_fn: a page of iod's stale records, in a read txn of this
 * thread. */
static int poll_page(void *arg, uint16_t iod, uint64_t after, uint64_t *inos,
		     uint32_t max, uint32_t *n)
{
	struct mgr_iodpoll *p = arg;
	struct mgr_txn *txn;
	int rc = mgr_db_begin(p->db, 1, &txn);

	if (rc)
		return rc;
	rc = mgr_db_stale_list(p->db, txn, iod, after, max, inos, NULL, n);
	mgr_db_abort(txn);
	return rc;
}

/* Move the marks queued by the loop thread to their iods. */
static void poll_take_marks(struct mgr_iodpoll *p)
{
	struct mgr_fence_mark *m, *next;

	pthread_mutex_lock(&p->lock);
	m = p->in;
	p->in = NULL;
	p->in_tail = &p->in;
	pthread_mutex_unlock(&p->lock);
	for (; m; m = next) {
		next = m->next;
		mgr_fence_add_mark(&p->iods[m->iod].fence, m);
	}
}

/* Hand the marks collected in list to the loop thread. */
static void poll_publish(struct mgr_iodpoll *p, struct mgr_fence_mark *list)
{
	struct mgr_fence_mark *last = list;

	if (!list)
		return;
	while (last->next)
		last = last->next;
	pthread_mutex_lock(&p->lock);
	*p->done_tail = list;
	p->done_tail = &last->next;
	pthread_mutex_unlock(&p->lock);
	if (p->notify)
		p->notify(p->notify_arg);
}

/* Build and send iod i's next IO_FENCE if one is wanted. @return 1 sent */
static int poll_fence_send(struct mgr_iodpoll *p, uint16_t i, uint64_t ver)
{
	struct poll_iod *pi = &p->iods[i];
	struct proto_fence f;
	struct wbuf w;
	int rc;

	if (!mgr_fence_want(&pi->fence))
		return 0;
	if (p->serving && !p->serving(p->serving_arg))
		return 0; /* past the mgr's lease: grant nothing more */
	rc = mgr_fence_build(&pi->fence, ver, poll_page, p, &f);
	if (rc == 1)
		return 0;
	if (rc) {
		log_err("iod %u: cannot read its fence set: %s", i, strerror(-rc));
		return 0;
	}
	f.token = p->token;
	wb_init(&w, pi->body, sizeof(pi->body));
	rc = proto_fence_encode(&w, &f);
	memset(&pi->call, 0, sizeof(pi->call));
	pi->call.op = PROTO_OP_IO_FENCE;
	pi->call.body = pi->body;
	pi->call.body_len = (uint32_t)w.len;
	pi->call.rep_buf = pi->rep;
	pi->call.rep_cap = sizeof(pi->rep);
	if (!rc)
		rc = net_call_submit(pi->conn, &pi->call);
	log_debug("iod %u: IO_FENCE seq %llu confirm %llu flags %u add %u: %d", i,
		  (unsigned long long)f.seq, (unsigned long long)f.confirm,
		  f.flags, f.add.n, rc);
	if (rc) {
		poll_mark(pi, i, 0, rc);
		mgr_fence_failed(&pi->fence);
		return 0;
	}
	return 1;
}

/* Collect iod i's IO_FENCE reply and account for it. */
static void poll_fence_wait(struct mgr_iodpoll *p, uint16_t i,
			    struct mgr_fence_mark ***done)
{
	struct poll_iod *pi = &p->iods[i];
	struct proto_fencestate st;
	const char *why = NULL;
	int rc = net_call_wait(&pi->call), status;
	uint64_t now = poll_now_ns();

	if (rc) {
		poll_mark(pi, i, 0, rc);
		mgr_fence_failed(&pi->fence);
		return;
	}
	status = pi->call.status;
	if (status == 0 &&
	    proto_fencestate_decode(pi->rep, pi->call.rep_len, &st, &why)) {
		log_err("iod %u: malformed IO_FENCE reply: %s", i, why ? why : "?");
		status = -EPROTO;
	}
	if (status != pi->fence_status) { /* once per change, not per round */
		if (status == -EOPNOTSUPP)
			log_notice("iod %u (%s:%u) does not know IO_FENCE: its "
				   "replicas are not fenced", i, pi->addr.host,
				   pi->addr.port);
		else if (status)
			log_notice("iod %u: IO_FENCE failed: %s", i,
				   strerror(-status));
		pi->fence_status = status;
	}
	if (mgr_fence_reply(&pi->fence, status, status ? NULL : &st, now, done))
		log_notice("iod %u: fence set delivered: %u inodes", i,
			   pi->fence.last_n);
}

/* IO_FENCE exchanges in waves (one message in flight per iod, as a load's
 * pages must arrive in order) until no iod wants one. Done marks are
 * published after each wave. Cost: a round trip per wave; a full set is
 * ceil(records / 256) waves. */
static void poll_fence(struct mgr_iodpoll *p)
{
	for (;;) {
		struct mgr_fence_mark *list = NULL, **tail = &list;
		uint64_t ver;
		int sent = 0;

		poll_take_marks(p);
		ver = mgr_db_stale_version(p->db);
		for (uint16_t i = 0; i < p->niods; i++) {
			p->iods[i].submitted = poll_fence_send(p, i, ver);
			sent += p->iods[i].submitted;
		}
		for (uint16_t i = 0; i < p->niods; i++)
			if (p->iods[i].submitted)
				poll_fence_wait(p, i, &tail);
		for (uint16_t i = 0; i < p->niods; i++)
			mgr_fence_expire(&p->iods[i].fence, poll_now_ns(), &tail);
		poll_publish(p, list);
		pthread_mutex_lock(&p->lock);
		int stop = p->stop;
		pthread_mutex_unlock(&p->lock);
		if (!sent || stop)
			break;
	}
}

/* Copy each iod's lease bound where other threads read it (the metrics
 * endpoint). Poll thread; cost: one atomic store per iod. */
static void poll_publish_leases(struct mgr_iodpoll *p)
{
	for (uint16_t i = 0; i < p->niods; i++)
		__atomic_store_n(&p->iods[i].lease_pub,
				 p->iods[i].fence.lease_bound_ns, __ATOMIC_RELAXED);
}

/* Thread body: a round every interval, fence work after it and whenever a
 * mark arrives, and a wake-up at the earliest lease bound a mark waits for. */
static void *poll_main(void *arg)
{
	struct mgr_iodpoll *p = arg;
	uint64_t next_round = 0, wake;
	struct timespec ts;

	for (;;) {
		if (poll_now_ns() >= next_round) {
			poll_round(p);
			next_round = poll_now_ns() +
				     (uint64_t)p->interval_ms * 1000000u;
		}
		poll_fence(p);
		poll_publish_leases(p);
		wake = next_round;
		for (uint16_t i = 0; i < p->niods; i++) {
			uint64_t d = mgr_fence_deadline(&p->iods[i].fence);

			if (d < wake)
				wake = d;
		}
		poll_abs(&ts, wake);
		pthread_mutex_lock(&p->lock);
		while (!p->stop && !p->in && poll_now_ns() < wake &&
		       pthread_cond_timedwait(&p->cond, &p->lock, &ts) != ETIMEDOUT)
			;
		int stop = p->stop;
		pthread_mutex_unlock(&p->lock);
		if (stop)
			break;
	}
	return NULL;
}

/* A random first seq per iod: a restarted mgr never reuses its
 * predecessor's numbers (which the iod may remember). */
static uint64_t poll_seq0(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		v = poll_now_ns() * 0x9e3779b97f4a7c15ull;
	return v ? v : 1;
}

/* See mgr_iodpoll.h: no leadership. */
int mgr_iodpoll_start_opts(struct mgr_iodpoll **out, struct mgr_db *db,
			   const struct net_opts *base, uint32_t lease_ms,
			   mgr_iodpoll_notify_fn notify, void *notify_arg)
{
	return mgr_iodpoll_start_lead(out, db, base, lease_ms, notify,
				      notify_arg, 0, NULL, NULL);
}

/* Create the client, one lazy connection per iod, the fence states and
 * the thread. */
int mgr_iodpoll_start_lead(struct mgr_iodpoll **out, struct mgr_db *db,
			   const struct net_opts *base, uint32_t lease_ms,
			   mgr_iodpoll_notify_fn notify, void *notify_arg,
			   uint64_t token, int (*serving)(void *arg),
			   void *serving_arg)
{
	struct net_opts o = *base;
	struct mgr_iodpoll *p;
	pthread_condattr_t ca;
	uint64_t now = poll_now_ns();
	int rc;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->db = db;
	p->niods = db->niods;
	p->lease_ms = lease_ms;
	p->interval_ms = lease_ms / 4 < POLL_INTERVAL_MS ? lease_ms / 4 :
			 POLL_INTERVAL_MS;
	p->notify = notify;
	p->notify_arg = notify_arg;
	p->token = token;
	p->serving = serving;
	p->serving_arg = serving_arg;
	p->in_tail = &p->in;
	p->done_tail = &p->done;
	p->iods = calloc(db->niods, sizeof(*p->iods));
	if (!p->iods) {
		rc = -ENOMEM;
		goto out_free_p;
	}
	o.timeout_ms = POLL_TIMEOUT_MS;
	rc = net_client_new(&p->cl, &o);
	if (rc)
		goto out_free_iods;
	p->tcp = strcmp(net_client_transport(p->cl), "tcp") == 0;
	for (uint16_t i = 0; i < db->niods; i++) {
		p->iods[i].addr = db->iods[i];
		mgr_fence_init(&p->iods[i].fence, i, poll_seq0(), now, lease_ms);
		p->iods[i].lease_pub = p->iods[i].fence.lease_bound_ns;
		rc = net_conn_new(p->cl, db->iods[i].host, db->iods[i].port,
				  &p->iods[i].conn);
		if (rc)
			goto out_free_client;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
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

/* Stop and join the thread; every mark not done becomes done with -EIO. */
void mgr_iodpoll_halt(struct mgr_iodpoll *p)
{
	struct mgr_fence_mark *list = NULL, **tail = &list;

	pthread_mutex_lock(&p->lock);
	if (p->halted) {
		pthread_mutex_unlock(&p->lock);
		return;
	}
	p->stop = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	poll_take_marks(p);
	for (uint16_t i = 0; i < p->niods; i++)
		mgr_fence_drain(&p->iods[i].fence, -EIO, &tail);
	pthread_mutex_lock(&p->lock);
	p->halted = 1;
	pthread_mutex_unlock(&p->lock);
	poll_publish(p, list);
}

/* Halt, then free the client (no call is in flight then) and what is
 * left. */
void mgr_iodpoll_stop(struct mgr_iodpoll *p)
{
	struct mgr_fence_mark *m, *next;

	if (!p)
		return;
	mgr_iodpoll_halt(p);
	for (m = mgr_iodpoll_take_done(p); m; m = next) {
		next = m->next;
		free(m);
	}
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
	uint64_t end = poll_now_ns() + (uint64_t)wait_ms * 1000000u;
	struct timespec ts;
	int rc = 0;

	poll_abs(&ts, end);
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

/* See mgr_iodpoll.h. */
int mgr_iodpoll_up(struct mgr_iodpoll *p, uint16_t iod)
{
	return iod < p->niods &&
	       __atomic_load_n(&p->iods[iod].up, __ATOMIC_ACQUIRE);
}

/* See mgr_iodpoll.h. */
uint64_t mgr_iodpoll_lease(struct mgr_iodpoll *p, uint16_t iod)
{
	if (iod >= p->niods)
		return 0;
	return __atomic_load_n(&p->iods[iod].lease_pub, __ATOMIC_RELAXED);
}

/* See mgr_iodpoll.h. */
void mgr_iodpoll_mark(struct mgr_iodpoll *p, struct mgr_fence_mark *m)
{
	int direct;

	m->next = NULL;
	pthread_mutex_lock(&p->lock);
	direct = p->halted || m->iod >= p->niods; /* nobody would push it */
	if (direct) {
		m->status = p->halted ? -EIO : 0;
		*p->done_tail = m;
		p->done_tail = &m->next;
	} else {
		*p->in_tail = m;
		p->in_tail = &m->next;
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
	if (direct && p->notify)
		p->notify(p->notify_arg);
}

/* See mgr_iodpoll.h. */
struct mgr_fence_mark *mgr_iodpoll_take_done(struct mgr_iodpoll *p)
{
	struct mgr_fence_mark *list;

	pthread_mutex_lock(&p->lock);
	list = p->done;
	p->done = NULL;
	p->done_tail = &p->done;
	pthread_mutex_unlock(&p->lock);
	return list;
}
