/*
 * cli_lock.c - cluster-wide locks, client side: calls to the mgr's lock
 * service, the record of held locks, lease keepalive and reclaim after a
 * mgr restart. See cli_lock.h and mgr/lock/README.md "Locks".
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cli_lock.h"
#include "lockset.h"
#include "log.h"

#define LK_BODY_MAX 128
#define LK_GRACE_RETRY_MS 250   /* mgr in grace: ask again after this */
#define LK_DOWN_RETRY_MS 500    /* mgr unreachable during a wait */
#define LK_HELD_MAX 65536

/* A connection reserved for one blocking wait at a time. */
struct lk_conn {
	struct net_conn *c;
	struct lk_conn *next;
};

/* A (file handle, inode, owner) through which a POSIX lock was taken. */
struct lk_handle {
	uint64_t fh, ino, owner;
	struct lk_handle *next;
};

struct cli_lock {
	struct cli_fs *fs;           /* read-only */
	struct net_client *wnet;     /* waits' transport client; read-only */
	uint64_t session;            /* read-only */
	uint32_t lease_ms;           /* read-only */
	uint32_t slice_ms;           /* read-only: one WAIT's hold at the mgr */
	atomic_uint_fast64_t next_id;
	pthread_mutex_t mu;
	struct lockset held;         /* mu: the locks this client holds */
	struct lk_handle *handles;   /* mu */
	struct lk_conn *idle;        /* mu: wait connections not in use */
	uint64_t boot;               /* mu: the mgr's boot id last seen */
	int stop;                    /* mu: cli_lock_free began */
	int kick;                    /* mu: keepalive now (grace seen) */
	int nwaits;                  /* mu: cli_lock_set calls waiting */
	pthread_cond_t cv;           /* mu: kick/stop, and nwaits reaching 0 */
	pthread_t ka;                /* keepalive thread */
};

/* Sleep ms milliseconds. */
static void lk_sleep_ms(uint32_t ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/*
 * Run one lock op on conn (NULL: the active mgr, followed as metadata
 * calls follow it: cli_mgr_run) and decode a successful reply into rep
 * (boot id recorded; a changed one, as after a takeover, wakes the
 * keepalive thread to reclaim).
 * @return the mgr's status, or -EIO (transport failure, bad reply, a wait
 *	connection's mgr standing by)
 */
static int lk_run(struct cli_lock *lk, struct net_conn *conn, uint16_t op,
		  const struct proto_lock *q, struct proto_lockrep *rep)
{
	uint8_t req[LK_BODY_MAX], repb[LK_BODY_MAX];
	struct net_call call;
	const char *why = "?";
	struct wbuf w;
	int rc, retried;

	wb_init(&w, req, sizeof(req));
	rc = proto_lock_encode(&w, op, q);
	if (rc)
		return rc == -EMSGSIZE ? -EIO : rc;
	memset(&call, 0, sizeof(call));
	call.op = op;
	call.body = req;
	call.body_len = (uint32_t)w.len;
	call.rep_buf = repb;
	call.rep_cap = sizeof(repb);
	rc = conn ? net_call_run(conn, &call) :
		    cli_mgr_run(lk->fs, &call, &retried);
	if (rc) {
		log_debug("mgr: %s failed: %s", proto_op_name(op), strerror(-rc));
		return -EIO;
	}
	if (call.status > 0 || call.status < -4095 || call.status == PROTO_STANDBY ||
	    call.status == PROTO_RETRY)
		return -EIO;
	if (call.status < 0)
		return call.status;
	rc = proto_lockrep_decode(repb, call.rep_len, rep, &why);
	if (rc) {
		log_warn("mgr: malformed %s reply (%s)", proto_op_name(op), why);
		return -EIO;
	}
	pthread_mutex_lock(&lk->mu);
	if (lk->boot == 0)
		lk->boot = rep->boot;
	else if (lk->boot != rep->boot) {
		lk->kick = 1;
		pthread_cond_broadcast(&lk->cv);
	}
	pthread_mutex_unlock(&lk->mu);
	return 0;
}

/* A LOCK request of owner on ino from a cli_lk. */
static void lk_req(const struct cli_lock *lk, struct proto_lock *q,
		   uint64_t ino, uint64_t owner, const struct cli_lk *l,
		   uint8_t cmd)
{
	memset(q, 0, sizeof(*q));
	q->session = lk->session;
	q->owner = owner;
	q->ino = ino;
	q->start = l->start;
	q->end = l->end;
	q->pid = l->pid;
	q->type = l->type;
	q->kind = l->kind;
	q->cmd = cmd;
	q->lease_ms = lk->lease_ms;
}

/* Record a lock change the mgr granted (or a drop) in the held set. */
static void lk_record(struct cli_lock *lk, const struct proto_lock *q)
{
	struct lockset_lock l = {
		.ino = q->ino, .session = q->session, .owner = q->owner,
		.start = q->start, .end = q->end, .pid = q->pid,
		.type = q->type, .kind = q->kind,
	};
	int rc = 0;

	pthread_mutex_lock(&lk->mu);
	if (q->cmd == PROTO_LK_DROP)
		lockset_drop_owner(&lk->held, q->ino, q->session, q->owner,
				   q->kind);
	else
		rc = lockset_apply(&lk->held, &l);
	pthread_mutex_unlock(&lk->mu);
	if (rc)
		log_warn("inode %llu: cannot record a lock (%s): it will not "
			 "be reclaimed after a mgr restart",
			 (unsigned long long)q->ino, strerror(-rc));
}

/* Wake the keepalive thread and wait out a grace period slice.
 * @return 0, or -EINTR when w was cancelled or the client stops */
static int lk_grace_pause(struct cli_lock *lk, struct cli_lock_wait *w)
{
	pthread_mutex_lock(&lk->mu);
	lk->kick = 1;
	pthread_cond_broadcast(&lk->cv);
	pthread_mutex_unlock(&lk->mu);
	lk_sleep_ms(LK_GRACE_RETRY_MS);
	if (w && atomic_load(&w->cancelled))
		return -EINTR;
	return 0;
}

/* F_GETLK; retried through a grace period until w is cancelled. */
int cli_lock_get(struct cli_lock *lk, uint64_t ino, uint64_t owner,
		 struct cli_lk *want, struct cli_lock_wait *w)
{
	struct proto_lockrep rep;
	struct proto_lock q;
	int rc;

	if (want->type == PROTO_LK_UNLCK)
		return -EINVAL;
	lk_req(lk, &q, ino, owner, want, PROTO_LK_GET);
	while ((rc = lk_run(lk, NULL, PROTO_OP_LOCK, &q, &rep)) ==
	       -EINPROGRESS)
		if (lk_grace_pause(lk, w))
			return -EINTR;
	if (rc)
		return rc;
	want->type = rep.type;
	if (rep.type != PROTO_LK_UNLCK) {
		want->start = rep.start;
		want->end = rep.end;
		want->pid = rep.pid;
	}
	return 0;
}

/* Take an idle wait connection or make one. @return it, or NULL */
static struct lk_conn *lk_conn_get(struct cli_lock *lk)
{
	struct lk_conn *c;
	int cur;

	pthread_mutex_lock(&lk->mu);
	c = lk->idle;
	if (c)
		lk->idle = c->next;
	pthread_mutex_unlock(&lk->mu);
	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	cur = atomic_load(&lk->fs->mgr_cur); /* the mgr followed now */
	if (net_conn_new(lk->wnet, lk->fs->mgr_list[cur].host,
			 lk->fs->mgr_list[cur].port, &c->c)) {
		free(c);
		return NULL;
	}
	return c;
}

/* Return a wait connection to the pool. */
static void lk_conn_put(struct cli_lock *lk, struct lk_conn *c)
{
	pthread_mutex_lock(&lk->mu);
	c->next = lk->idle;
	lk->idle = c;
	pthread_mutex_unlock(&lk->mu);
}

/* Count a wait in (@return -EINTR when stopping) or out. */
static int lk_wait_enter(struct cli_lock *lk, int in)
{
	int rc = 0;

	pthread_mutex_lock(&lk->mu);
	if (in && lk->stop)
		rc = -EINTR;
	else if (in)
		lk->nwaits++;
	else if (--lk->nwaits == 0)
		pthread_cond_broadcast(&lk->cv);
	pthread_mutex_unlock(&lk->mu);
	return rc;
}

/* Whether the wait should end: cancelled, or the client stops. */
static int lk_wait_over(struct cli_lock *lk, struct cli_lock_wait *w)
{
	int stop;

	pthread_mutex_lock(&lk->mu);
	stop = lk->stop;
	pthread_mutex_unlock(&lk->mu);
	return stop || atomic_load(&w->cancelled);
}

/*
 * The blocking loop: WAIT slices on a connection of its own. The mgr
 * holds each for slice_ms (less than the request timeout), then answers
 * -ETIME and the wait goes on with the next slice; -EINPROGRESS (grace)
 * and an unreachable mgr are retried after a pause. Cost: one round trip
 * per slice while blocked.
 */
static int lk_wait(struct cli_lock *lk, struct proto_lock *q,
		   struct cli_lock_wait *w)
{
	struct proto_lockrep rep;
	struct lk_conn *c;
	int rc;

	rc = lk_wait_enter(lk, 1);
	if (rc)
		return rc;
	c = lk_conn_get(lk);
	if (!c) {
		lk_wait_enter(lk, 0);
		return -ENOMEM;
	}
	q->cmd = PROTO_LK_WAIT;
	q->id = w->id;
	q->wait_ms = lk->slice_ms;
	for (;;) {
		if (lk_wait_over(lk, w)) {
			rc = -EINTR;
			break;
		}
		rc = lk_run(lk, c->c, PROTO_OP_LOCK, q, &rep);
		if (rc == -ETIME)
			continue;
		if (rc == -EINPROGRESS) {
			(void)lk_grace_pause(lk, w);
			continue;
		}
		if (rc == -EIO) {
			lk_sleep_ms(LK_DOWN_RETRY_MS);
			continue;
		}
		break;
	}
	lk_conn_put(lk, c);
	lk_wait_enter(lk, 0);
	return rc;
}

/* SET, or WAIT until granted or cancelled; record what was granted. */
int cli_lock_set(struct cli_lock *lk, uint64_t ino, uint64_t owner,
		 const struct cli_lk *want, struct cli_lock_wait *w)
{
	struct proto_lockrep rep;
	struct proto_lock q;
	int rc;

	lk_req(lk, &q, ino, owner, want, PROTO_LK_SET);
	if (w && !w->nonblock && want->type != PROTO_LK_UNLCK) {
		rc = lk_wait(lk, &q, w);
		q.cmd = PROTO_LK_SET;
		q.id = 0;
		q.wait_ms = 0;
	} else {
		while ((rc = lk_run(lk, NULL, PROTO_OP_LOCK, &q,
				    &rep)) == -EINPROGRESS)
			if (lk_grace_pause(lk, w)) {
				rc = -EINTR;
				break;
			}
	}
	if (rc == 0)
		lk_record(lk, &q);
	return rc;
}

/* A fresh wait id. */
void cli_lock_wait_init(struct cli_lock *lk, struct cli_lock_wait *w)
{
	w->id = atomic_fetch_add(&lk->next_id, 1);
	atomic_init(&w->cancelled, 0);
	w->nonblock = 0;
}

/* Mark w cancelled and tell the mgr, which ends the WAIT in progress (or
 * the next one of that id) with -EINTR. */
void cli_lock_cancel(struct cli_lock *lk, struct cli_lock_wait *w)
{
	struct proto_lockrep rep;
	struct proto_lock q;

	atomic_store(&w->cancelled, 1);
	memset(&q, 0, sizeof(q));
	q.session = lk->session;
	q.id = w->id;
	q.lease_ms = lk->lease_ms;
	(void)lk_run(lk, NULL, PROTO_OP_LOCK_CANCEL, &q, &rep);
}

/* DROP every lock of owner of kind on ino, at the mgr and here. */
int cli_lock_drop(struct cli_lock *lk, uint64_t ino, uint64_t owner,
		  uint8_t kind)
{
	struct cli_lk all = { 0, PROTO_LK_EOF, 0, PROTO_LK_UNLCK, kind };
	struct proto_lockrep rep;
	struct proto_lock q;
	int rc;

	lk_req(lk, &q, ino, owner, &all, PROTO_LK_DROP);
	rc = lk_run(lk, NULL, PROTO_OP_LOCK, &q, &rep);
	if (rc == 0)
		lk_record(lk, &q);
	return rc;
}

/* Note (fh, ino, owner) once. */
int cli_lock_note_handle(struct cli_lock *lk, uint64_t fh, uint64_t ino,
			 uint64_t owner)
{
	struct lk_handle *h;
	int rc = 0;

	pthread_mutex_lock(&lk->mu);
	for (h = lk->handles; h; h = h->next)
		if (h->fh == fh && h->ino == ino && h->owner == owner)
			break;
	if (!h) {
		h = malloc(sizeof(*h));
		if (h) {
			*h = (struct lk_handle){ fh, ino, owner, lk->handles };
			lk->handles = h;
		} else {
			rc = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&lk->mu);
	return rc;
}

/* Forget the handle notes matching (fh or any when fh is 0, ino, owner or
 * any when owner is 0); collect up to max owners of removed ones. */
static size_t lk_forget(struct cli_lock *lk, uint64_t fh, uint64_t ino,
			uint64_t owner, uint64_t *owners, size_t max)
{
	struct lk_handle **pp = &lk->handles, *h;
	size_t n = 0;

	while ((h = *pp) != NULL) {
		if (h->ino != ino || (fh && h->fh != fh) ||
		    (owner && h->owner != owner)) {
			pp = &h->next;
			continue;
		}
		if (n < max)
			owners[n++] = h->owner;
		*pp = h->next;
		free(h);
	}
	return n;
}

/* FLUSH: drop owner's POSIX locks on ino when it holds any here. */
int cli_lock_flush(struct cli_lock *lk, uint64_t ino, uint64_t owner)
{
	int holds;

	pthread_mutex_lock(&lk->mu);
	lk_forget(lk, 0, ino, owner, NULL, 0);
	holds = lockset_owner_holds(&lk->held, ino, lk->session, owner,
				    PROTO_LK_POSIX);
	pthread_mutex_unlock(&lk->mu);
	return holds ? cli_lock_drop(lk, ino, owner, PROTO_LK_POSIX) : 0;
}

#define LK_RELEASE_OWNERS 16

/* RELEASE: the flock of the handle and the POSIX (OFD) locks taken
 * through it by owners that never flushed. */
int cli_lock_release_handle(struct cli_lock *lk, uint64_t fh, uint64_t ino,
			    uint64_t flock_owner)
{
	uint64_t owners[LK_RELEASE_OWNERS];
	size_t n;
	int rc = 0, holds = 0, r;

	pthread_mutex_lock(&lk->mu);
	n = lk_forget(lk, fh, ino, 0, owners, LK_RELEASE_OWNERS);
	if (flock_owner)
		holds = lockset_owner_holds(&lk->held, ino, lk->session,
					    flock_owner, PROTO_LK_FLOCK);
	pthread_mutex_unlock(&lk->mu);
	if (holds)
		rc = cli_lock_drop(lk, ino, flock_owner, PROTO_LK_FLOCK);
	for (size_t i = 0; i < n; i++) {
		r = cli_lock_drop(lk, ino, owners[i], PROTO_LK_POSIX);
		if (r && !rc)
			rc = r;
	}
	return rc;
}

/* Snapshot of held locks for a reclaim. */
struct lk_snap {
	struct lockset_lock *v;
	size_t n, cap;
};

/* lockset_each callback: copy one lock. */
static int lk_snap_one(const struct lockset_lock *l, void *arg)
{
	struct lk_snap *s = arg;

	if (s->n == s->cap)
		return 1;
	s->v[s->n++] = *l;
	return 0;
}

/*
 * The mgr restarted (new boot id): ask for every held lock again with
 * RECLAIM, within its grace period. A lock refused is gone: it is logged
 * and forgotten (the process holding it is not told: see
 * mgr/lock/README.md "Locks").
 * @return 0, or -EIO (mgr unreachable: try again later)
 */
static int lk_reclaim(struct cli_lock *lk, uint64_t boot)
{
	struct lk_snap s = { NULL, 0, 0 };
	struct proto_lockrep rep;
	struct proto_lock q;
	size_t ok = 0;
	int rc = 0;

	pthread_mutex_lock(&lk->mu);
	s.cap = lk->held.count;
	s.v = s.cap ? calloc(s.cap, sizeof(*s.v)) : NULL;
	if (s.v)
		lockset_each(&lk->held, lk_snap_one, &s);
	pthread_mutex_unlock(&lk->mu);
	if (s.cap && !s.v)
		return -ENOMEM;
	for (size_t i = 0; i < s.n && rc != -EIO; i++) {
		struct cli_lk l = { s.v[i].start, s.v[i].end, s.v[i].pid,
				    s.v[i].type, s.v[i].kind };

		lk_req(lk, &q, s.v[i].ino, s.v[i].owner, &l, PROTO_LK_SET);
		q.flags = PROTO_LKF_RECLAIM;
		rc = lk_run(lk, NULL, PROTO_OP_LOCK, &q, &rep);
		if (rc == 0) {
			ok++;
		} else if (rc != -EIO) {
			log_warn("inode %llu: lock [%llu, %llu] lost after the "
				 "mgr restarted: %s",
				 (unsigned long long)q.ino,
				 (unsigned long long)q.start,
				 (unsigned long long)q.end, strerror(-rc));
			q.type = PROTO_LK_UNLCK;
			lk_record(lk, &q);
		}
	}
	free(s.v);
	if (rc == -EIO)
		return rc;
	pthread_mutex_lock(&lk->mu);
	lk->boot = boot;
	pthread_mutex_unlock(&lk->mu);
	log_notice("mgr restarted: %zu of %zu locks reclaimed", ok, s.n);
	return 0;
}

/* One keepalive: renew the lease; reclaim after a restart; forget locks
 * the mgr dropped when the lease had run out. */
static void lk_keepalive(struct cli_lock *lk)
{
	struct proto_lockrep rep;
	struct proto_lock q;
	uint64_t boot;
	size_t n;

	memset(&q, 0, sizeof(q));
	q.session = lk->session;
	q.lease_ms = lk->lease_ms;
	pthread_mutex_lock(&lk->mu);
	boot = lk->boot;
	pthread_mutex_unlock(&lk->mu);
	q.boot = boot; /* informational: the reply's boot id decides */
	if (lk_run(lk, NULL, PROTO_OP_LOCK_KEEPALIVE, &q, &rep))
		return;
	if (boot && rep.boot != boot) {
		(void)lk_reclaim(lk, rep.boot);
		return;
	}
	if (!(rep.flags & PROTO_LKR_NEWSESSION))
		return;
	pthread_mutex_lock(&lk->mu);
	n = lk->held.count;
	if (n) {
		lockset_fini(&lk->held);
		lockset_init(&lk->held, LK_HELD_MAX);
	}
	pthread_mutex_unlock(&lk->mu);
	if (n)
		log_warn("mgr dropped this client's %zu locks: its lease of %u "
			 "ms ran out", n, lk->lease_ms);
}

/* Keepalive thread: every third of the lease while locks are held, or at
 * once when kicked (grace seen, boot changed). */
static void *lk_ka_main(void *arg)
{
	struct cli_lock *lk = arg;
	struct timespec ts;
	int run;

	pthread_mutex_lock(&lk->mu);
	while (!lk->stop) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += lk->lease_ms / 3000;
		ts.tv_nsec += (long)(lk->lease_ms / 3 % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (!lk->stop && !lk->kick &&
		       pthread_cond_timedwait(&lk->cv, &lk->mu, &ts) == 0)
			;
		if (lk->stop)
			break;
		run = lk->kick || lk->held.count;
		lk->kick = 0;
		pthread_mutex_unlock(&lk->mu);
		if (run)
			lk_keepalive(lk);
		pthread_mutex_lock(&lk->mu);
	}
	pthread_mutex_unlock(&lk->mu);
	return NULL;
}

/* Session id (random: two mounts never share one), wait transport,
 * keepalive thread. */
int cli_lock_new(struct cli_lock **out, struct cli_fs *fs,
		 const struct net_opts *no)
{
	struct net_opts wo = *no;
	struct cli_lock *lk;
	uint64_t session = 0;
	int rc;

	while (session == 0)
		if (getrandom(&session, sizeof(session), 0) != sizeof(session))
			return -errno;
	lk = calloc(1, sizeof(*lk));
	if (!lk)
		return -ENOMEM;
	lk->fs = fs;
	lk->session = session;
	lk->lease_ms = (uint32_t)fs->timeout_ms;
	if (lk->lease_ms < PROTO_LK_MIN_LEASE_MS)
		lk->lease_ms = PROTO_LK_MIN_LEASE_MS;
	if (lk->lease_ms > PROTO_LK_MAX_LEASE_MS)
		lk->lease_ms = PROTO_LK_MAX_LEASE_MS;
	lk->slice_ms = (uint32_t)fs->timeout_ms / 2;
	if (lk->slice_ms > lk->lease_ms / 2)
		lk->slice_ms = lk->lease_ms / 2;
	if (lk->slice_ms < 1)
		lk->slice_ms = 1;
	atomic_init(&lk->next_id, 1);
	lockset_init(&lk->held, LK_HELD_MAX);
	pthread_mutex_init(&lk->mu, NULL);
	pthread_cond_init(&lk->cv, NULL);
	wo.tcp_lanes = 1; /* one wait per connection: one socket is enough */
	rc = net_client_new(&lk->wnet, &wo);
	if (rc)
		goto out_free_lk;
	rc = -pthread_create(&lk->ka, NULL, lk_ka_main, lk);
	if (rc)
		goto out_free_net;
	*out = lk;
	return 0;

out_free_net:
	net_client_free(lk->wnet);
out_free_lk:
	pthread_cond_destroy(&lk->cv);
	pthread_mutex_destroy(&lk->mu);
	free(lk);
	return rc;
}

/* See cli_lock.h. */
uint64_t cli_lock_session(const struct cli_lock *lk)
{
	return lk->session;
}

/* Make the waits end and the keepalive thread leave. */
void cli_lock_stop(struct cli_lock *lk)
{
	pthread_mutex_lock(&lk->mu);
	lk->stop = 1;
	pthread_cond_broadcast(&lk->cv);
	pthread_mutex_unlock(&lk->mu);
}

/* Stop the keepalive, let the waits end, free. */
void cli_lock_free(struct cli_lock *lk)
{
	struct lk_conn *c, *cn;
	struct lk_handle *h, *hn;

	if (!lk)
		return;
	cli_lock_stop(lk);
	pthread_mutex_lock(&lk->mu);
	while (lk->nwaits)
		pthread_cond_wait(&lk->cv, &lk->mu);
	pthread_mutex_unlock(&lk->mu);
	pthread_join(lk->ka, NULL);
	net_client_free(lk->wnet);
	for (c = lk->idle; c; c = cn) {
		cn = c->next;
		free(c);
	}
	for (h = lk->handles; h; h = hn) {
		hn = h->next;
		free(h);
	}
	lockset_fini(&lk->held);
	pthread_cond_destroy(&lk->cv);
	pthread_mutex_destroy(&lk->mu);
	free(lk);
}
