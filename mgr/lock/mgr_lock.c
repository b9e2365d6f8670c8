/* mgr_lock.c - the cluster-wide lock table: grants, waits, deadlocks,
 * leases and the grace period. See mgr_lock.h. */
#include "mgr_lock.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "lockset.h"
#include "log.h"

#define ML_DEADLOCK_BUDGET 1024 /* owners listed per deadlock check */
#define ML_SESSION_BUCKETS 4096 /* session hash (at most MAX_SESSIONS) */
#define ML_QUEUE_BUCKETS 1024   /* inode queue hash (at most MAX_WAITERS) */
#define ML_CLIENT_BUCKETS 1024  /* client host hash */
#define ML_HOST_MAX 64          /* longest host kept (net_sconn_peer's) */

/* A client host: the sessions made by requests from its address. */
struct ml_client {
	char host[ML_HOST_MAX];
	size_t nsessions;       /* freed at 0 */
	int cap_logged;         /* "at its cap" said */
	struct ml_client *hnext; /* hash chain */
};

struct ml_waiter;
TAILQ_HEAD(ml_wlist, ml_waiter);

/* An owner on the deadlock walk's list. */
struct ml_dl_owner {
	uint64_t session, owner;
};

/* A client session (a mount). */
struct ml_session {
	uint64_t id;
	uint64_t last_ms;       /* last request from it */
	uint32_t lease_ms;      /* as it last asked */
	uint64_t cancelled;     /* wait id cancelled before the wait came */
	struct ml_wlist waiters; /* its queued WAITs (links: w->in_sess) */
	struct ml_client *client; /* its host; NULL when none was given */
	int expired;            /* in a tick: its lease ran out */
	size_t dropped;         /* in a tick: its locks dropped */
	struct ml_session *hnext; /* hash chain */
	TAILQ_ENTRY(ml_session) link; /* mgr_lock.slist */
};

/* The waiters on one inode, FIFO; exists while there is one. */
struct ml_queue {
	uint64_t ino;
	struct ml_wlist waiters; /* links: w->in_queue */
	struct ml_queue *hnext;  /* hash chain */
};

/* A queued WAIT: its reply is deferred. */
struct ml_waiter {
	struct lockset_lock want;
	uint64_t id;            /* the client's wait id */
	uint64_t deadline_ms;   /* end of its slice: -ETIME then */
	void *ctx;              /* the request */
	struct ml_session *sess;
	struct ml_queue *queue;
	TAILQ_ENTRY(ml_waiter) in_all;   /* mgr_lock.waiters, arrival order */
	TAILQ_ENTRY(ml_waiter) in_queue; /* its inode's FIFO */
	TAILQ_ENTRY(ml_waiter) in_sess;  /* its session's */
};

/*
 * The table. Loop thread only, like every field. Sessions are found by id
 * and waiters by inode (queues) or by session through hashes, so no
 * request walks the table; a tick walks the waiters and sessions once.
 */
struct mgr_lock {
	struct lockset set;
	struct ml_wlist waiters;              /* all, in arrival order */
	size_t nwaiters;
	struct ml_queue *queues[ML_QUEUE_BUCKETS];
	struct ml_session *sessions[ML_SESSION_BUCKETS];
	struct ml_client *clients[ML_CLIENT_BUCKETS];
	TAILQ_HEAD(, ml_session) slist;       /* all sessions */
	size_t nsessions;
	int full_logged;                      /* "session table full" said */
	uint64_t work;                        /* waiters looked at (gauge) */
	uint64_t woken;                       /* waiters granted by a wake-up */
	struct ml_dl_owner dl[ML_DEADLOCK_BUDGET]; /* deadlock walk: [0] asks */
	size_t ndl;                           /* listed in dl */
	uint64_t boot;
	uint64_t grace_end_ms;
	mgr_lock_done_fn done;
	void *done_arg;
};

/* Bucket of a 64-bit key in a table of nb (a power of 2) buckets. */
static size_t ml_bucket(uint64_t key, size_t nb)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return (size_t)key & (nb - 1);
}

/* Allocate an empty table whose grace runs from now_ms. */
int mgr_lock_new(struct mgr_lock **out, uint32_t grace_ms, uint64_t now_ms,
		 uint64_t boot, mgr_lock_done_fn done, void *arg)
{
	struct mgr_lock *ml = calloc(1, sizeof(*ml));

	if (!ml)
		return -ENOMEM;
	lockset_init(&ml->set, MGR_LOCK_MAX);
	TAILQ_INIT(&ml->waiters);
	TAILQ_INIT(&ml->slist);
	ml->boot = boot;
	ml->grace_end_ms = now_ms + grace_ms;
	ml->done = done;
	ml->done_arg = arg;
	*out = ml;
	return 0;
}

/* The queue of ino, or NULL. */
static struct ml_queue *ml_queue_find(struct mgr_lock *ml, uint64_t ino)
{
	struct ml_queue *q = ml->queues[ml_bucket(ino, ML_QUEUE_BUCKETS)];

	while (q && q->ino != ino)
		q = q->hnext;
	return q;
}

/* The queue of ino, made if new. @return it, or NULL (out of memory) */
static struct ml_queue *ml_queue_get(struct mgr_lock *ml, uint64_t ino)
{
	struct ml_queue *q = ml_queue_find(ml, ino), **b;

	if (q)
		return q;
	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->ino = ino;
	TAILQ_INIT(&q->waiters);
	b = &ml->queues[ml_bucket(ino, ML_QUEUE_BUCKETS)];
	q->hnext = *b;
	*b = q;
	return q;
}

/* Free queue q, which is empty. Cost: its hash chain. */
static void ml_queue_free(struct mgr_lock *ml, struct ml_queue *q)
{
	struct ml_queue **pp = &ml->queues[ml_bucket(q->ino, ML_QUEUE_BUCKETS)];

	while (*pp != q)
		pp = &(*pp)->hnext;
	*pp = q->hnext;
	free(q);
}

/* A lock of the table as it goes into a reply. */
static void ml_rep_fill(const struct mgr_lock *ml,
			const struct lockset_lock *l, struct proto_lockrep *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->boot = ml->boot;
	if (!l)
		return;
	rep->start = l->start;
	rep->end = l->end;
	rep->pid = l->pid;
	rep->type = l->type;
}

/* Take waiter w off every list (and free its queue if it was the last),
 * answer its request with status (and lock l when granted), free it. */
static void ml_waiter_finish(struct mgr_lock *ml, struct ml_waiter *w,
			     int status, const struct lockset_lock *l)
{
	struct proto_lockrep rep;

	TAILQ_REMOVE(&ml->waiters, w, in_all);
	TAILQ_REMOVE(&w->queue->waiters, w, in_queue);
	TAILQ_REMOVE(&w->sess->waiters, w, in_sess);
	ml->nwaiters--;
	if (TAILQ_EMPTY(&w->queue->waiters))
		ml_queue_free(ml, w->queue);
	ml_rep_fill(ml, l, &rep);
	ml->done(w->ctx, status, status ? NULL : &rep, ml->done_arg);
	free(w);
}

/* The session of id, or NULL. */
static struct ml_session *ml_session_find(struct mgr_lock *ml, uint64_t id)
{
	struct ml_session *s = ml->sessions[ml_bucket(id, ML_SESSION_BUCKETS)];

	while (s && s->id != id)
		s = s->hnext;
	return s;
}

/* Bucket of a host name (FNV-1a). */
static size_t ml_host_bucket(const char *host)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *host; host++)
		h = (h ^ (uint8_t)*host) * 0x100000001b3ull;
	return ml_bucket(h, ML_CLIENT_BUCKETS);
}

/* The client of host, made (with no session) if new.
 * @return it, or NULL (out of memory) */
static struct ml_client *ml_client_get(struct mgr_lock *ml, const char *host)
{
	struct ml_client **b = &ml->clients[ml_host_bucket(host)], *c;

	for (c = *b; c; c = c->hnext)
		if (!strncmp(c->host, host, sizeof(c->host) - 1))
			return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	snprintf(c->host, sizeof(c->host), "%s", host);
	c->hnext = *b;
	*b = c;
	return c;
}

/* Free client c if it has no session left. */
static void ml_client_put(struct mgr_lock *ml, struct ml_client *c)
{
	struct ml_client **pp;

	if (c->nsessions)
		return;
	pp = &ml->clients[ml_host_bucket(c->host)];
	while (*pp != c)
		pp = &(*pp)->hnext;
	*pp = c->hnext;
	free(c);
}

/* Unlink session s from the table and free it; it has no waiters. */
static void ml_session_free(struct mgr_lock *ml, struct ml_session *s)
{
	struct ml_session **pp =
		&ml->sessions[ml_bucket(s->id, ML_SESSION_BUCKETS)];

	while (*pp != s)
		pp = &(*pp)->hnext;
	*pp = s->hnext;
	TAILQ_REMOVE(&ml->slist, s, link);
	ml->nsessions--;
	if (ml->nsessions < MGR_LOCK_MAX_SESSIONS)
		ml->full_logged = 0;
	if (s->client) {
		s->client->nsessions--;
		s->client->cap_logged = 0;
		ml_client_put(ml, s->client);
	}
	free(s);
}

/* Finish every waiter (the clients ask again), free everything. */
void mgr_lock_free(struct mgr_lock *ml)
{
	struct ml_session *s;
	struct ml_waiter *w;

	if (!ml)
		return;
	while ((w = TAILQ_FIRST(&ml->waiters)) != NULL)
		ml_waiter_finish(ml, w, -ETIME, NULL);
	while ((s = TAILQ_FIRST(&ml->slist)) != NULL)
		ml_session_free(ml, s);
	lockset_fini(&ml->set);
	free(ml);
}

/*
 * The client a new session of host counts against, or NULL with *err set:
 * -ENOLCK when host has MGR_LOCK_MAX_CLIENT_SESSIONS or the table
 * MGR_LOCK_MAX_SESSIONS (each said once in the log while it lasts),
 * -ENOMEM. host NULL: no client, only the table's cap applies (*err 0).
 */
static struct ml_client *ml_session_admit(struct mgr_lock *ml,
					  const char *host, int *err)
{
	struct ml_client *c;

	*err = 0;
	if (ml->nsessions >= MGR_LOCK_MAX_SESSIONS) {
		if (!ml->full_logged)
			log_warn("locks: %u client sessions, the most the mgr "
				 "keeps: lock requests of new sessions fail "
				 "with ENOLCK until sessions expire",
				 MGR_LOCK_MAX_SESSIONS);
		ml->full_logged = 1;
		*err = -ENOLCK;
		return NULL;
	}
	if (!host)
		return NULL;
	c = ml_client_get(ml, host);
	if (!c) {
		*err = -ENOMEM;
		return NULL;
	}
	if (c->nsessions >= MGR_LOCK_MAX_CLIENT_SESSIONS) {
		if (!c->cap_logged)
			log_warn("locks: client %s has %u sessions, the most one "
				 "client may have: lock requests of its new "
				 "sessions fail with ENOLCK until some expire",
				 c->host, MGR_LOCK_MAX_CLIENT_SESSIONS);
		c->cap_logged = 1;
		*err = -ENOLCK;
		return NULL;
	}
	return c;
}

/*
 * Find session id, creating it (*created = 1) unless the table or host's
 * count is at its cap (ml_session_admit); renew its lease. Cost: hash
 * chains.
 * @return 0, -ENOLCK (a cap: said once in the log), -ENOMEM
 */
static int ml_session_touch(struct mgr_lock *ml, uint64_t id,
			    const char *host, uint32_t lease_ms,
			    uint64_t now_ms, struct ml_session **out,
			    int *created)
{
	struct ml_session *s = ml_session_find(ml, id), **b;
	struct ml_client *c;
	int rc;

	*created = 0;
	if (!s) {
		c = ml_session_admit(ml, host, &rc);
		if (rc)
			return rc;
		s = calloc(1, sizeof(*s));
		if (!s) {
			if (c)
				ml_client_put(ml, c);
			return -ENOMEM;
		}
		s->client = c;
		if (c)
			c->nsessions++;
		s->id = id;
		TAILQ_INIT(&s->waiters);
		b = &ml->sessions[ml_bucket(id, ML_SESSION_BUCKETS)];
		s->hnext = *b;
		*b = s;
		TAILQ_INSERT_TAIL(&ml->slist, s, link);
		ml->nsessions++;
		*created = 1;
	}
	s->last_ms = now_ms;
	s->lease_ms = lease_ms;
	*out = s;
	return 0;
}

/*
 * Grant what can be granted now, in FIFO order, to the waiters on ino
 * whose range overlaps [start, end], the range where locks went: only
 * those can have been unblocked (every queued waiter conflicted before).
 * A granted read lock may have downgraded its owner's write lock, so the
 * range grows over it for the waiters after it. Cost: the inode's
 * waiters, plus a conflict search (O(log n) in the inode's locks) for
 * each in the range, never a walk of the inode's locks.
 */
static void ml_wake(struct mgr_lock *ml, uint64_t ino, uint64_t start,
		    uint64_t end)
{
	struct ml_queue *q = ml_queue_find(ml, ino);
	struct ml_waiter *w, *next;
	int rc;

	for (w = q ? TAILQ_FIRST(&q->waiters) : NULL; w; w = next) {
		next = TAILQ_NEXT(w, in_queue);
		ml->work++;
		if (w->want.start > end || w->want.end < start ||
		    lockset_conflict(&ml->set, &w->want))
			continue;
		rc = lockset_apply(&ml->set, &w->want);
		ml->woken += rc == 0;
		if (rc == 0 && w->want.type == PROTO_LK_RDLCK) {
			if (w->want.start < start)
				start = w->want.start;
			if (w->want.end > end)
				end = w->want.end;
		}
		ml_waiter_finish(ml, w, rc, &w->want); /* may free q */
	}
}

/* Reconsider every waiter on every inode (after locks of several inodes
 * went). Cost: all waiters, a conflict search each. */
static void ml_wake_all(struct mgr_lock *ml)
{
	for (size_t b = 0; b < ML_QUEUE_BUCKETS; b++) {
		struct ml_queue *q = ml->queues[b], *next;

		for (; q; q = next) {
			next = q->hnext; /* q may go */
			ml_wake(ml, q->ino, 0, PROTO_LK_EOF);
		}
	}
}

/* lockset_each_conflict callback of the deadlock walk: holder l blocks
 * the waiter looked at. It is the owner that asks (a cycle: 1), or goes on
 * the list of owners to look at, unless the budget is spent or it is the
 * one just listed (an owner's many locks). */
static int ml_dl_push(const struct lockset_lock *l, void *arg)
{
	struct mgr_lock *ml = arg;
	struct ml_dl_owner *last = &ml->dl[ml->ndl - 1];

	if (l->session == ml->dl[0].session && l->owner == ml->dl[0].owner)
		return 1;
	if (ml->ndl >= ML_DEADLOCK_BUDGET ||
	    (l->session == last->session && l->owner == last->owner))
		return 0;
	ml->dl[ml->ndl].session = l->session;
	ml->dl[ml->ndl].owner = l->owner;
	ml->ndl++;
	return 0;
}

/*
 * Whether want waiting would close a cycle of POSIX owners waiting for
 * each other (the kernel's rule: POSIX locks only, never flock). Walks
 * from want's owner through the holders of the locks it and they wait
 * for, breadth first, listing up to ML_DEADLOCK_BUDGET owners (a list,
 * not recursion: a chain of a thousand owners costs no stack). Cost: for
 * each owner listed, its session's waiters and a conflict search each.
 */
static bool ml_deadlock(struct mgr_lock *ml, const struct lockset_lock *want)
{
	struct ml_session *s;
	struct ml_waiter *w;

	if (want->kind != PROTO_LK_POSIX)
		return false;
	ml->dl[0].session = want->session;
	ml->dl[0].owner = want->owner;
	ml->ndl = 1;
	if (lockset_each_conflict(&ml->set, want, ml_dl_push, ml))
		return true;
	for (size_t i = 1; i < ml->ndl; i++) {
		s = ml_session_find(ml, ml->dl[i].session);
		if (!s)
			continue;
		TAILQ_FOREACH(w, &s->waiters, in_sess) {
			ml->work++;
			if (w->want.kind != PROTO_LK_POSIX ||
			    w->want.owner != ml->dl[i].owner)
				continue;
			if (lockset_each_conflict(&ml->set, &w->want, ml_dl_push,
						  ml))
				return true;
		}
	}
	return false;
}

/* Queue want of session s as a waiter with a deferred reply: last in its
 * inode's FIFO. @return 1, -ENOLCK (MGR_LOCK_MAX_WAITERS), -ENOMEM */
static int ml_enqueue(struct mgr_lock *ml, struct ml_session *s,
		      const struct lockset_lock *want,
		      const struct proto_lock *q, uint64_t now_ms, void *ctx)
{
	struct ml_waiter *w;

	if (ml->nwaiters >= MGR_LOCK_MAX_WAITERS)
		return -ENOLCK;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->queue = ml_queue_get(ml, want->ino);
	if (!w->queue) {
		free(w);
		return -ENOMEM;
	}
	w->want = *want;
	w->id = q->id;
	w->deadline_ms = now_ms + q->wait_ms;
	w->ctx = ctx;
	w->sess = s;
	TAILQ_INSERT_TAIL(&ml->waiters, w, in_all);
	TAILQ_INSERT_TAIL(&w->queue->waiters, w, in_queue);
	TAILQ_INSERT_TAIL(&s->waiters, w, in_sess);
	ml->nwaiters++;
	return 1;
}

/* CANCEL: finish the session's wait id with -EINTR, or remember the id so
 * that the wait, should it come later, fails at once. Cost: the session's
 * waiters. */
static int ml_cancel(struct mgr_lock *ml, struct ml_session *s, uint64_t id)
{
	struct ml_waiter *w;

	TAILQ_FOREACH(w, &s->waiters, in_sess) {
		if (w->id == id) {
			ml_waiter_finish(ml, w, -EINTR, NULL);
			return 0;
		}
	}
	s->cancelled = id;
	return -ENOENT;
}

/* LOCK: GET, SET, WAIT or DROP of one owner's lock on one inode. */
static int ml_lock(struct mgr_lock *ml, struct ml_session *s,
		   const struct proto_lock *q, uint64_t now_ms, void *ctx,
		   struct proto_lockrep *rep)
{
	struct lockset_lock want = {
		.ino = q->ino, .session = q->session, .owner = q->owner,
		.start = q->start, .end = q->end, .pid = q->pid,
		.type = q->type, .kind = q->kind,
	};
	bool grace = now_ms < ml->grace_end_ms;
	bool release = q->cmd == PROTO_LK_DROP ||
		       (q->cmd == PROTO_LK_SET && q->type == PROTO_LK_UNLCK);
	int rc;

	ml_rep_fill(ml, NULL, rep);
	if (q->flags & PROTO_LKF_RECLAIM) {
		/* after the grace, a reclaim of what the owner holds anyway
		 * (a client that saw the new boot id in the very reply that
		 * granted the lock) is answered as granted */
		if (!grace && lockset_owner_covers(&ml->set, &want)) {
			ml_rep_fill(ml, &want, rep);
			return 0;
		}
		if (!grace)
			return -ENOLCK;
	} else if (grace && !release) {
		return -EINPROGRESS;
	}
	switch (q->cmd) {
	case PROTO_LK_GET:
		ml_rep_fill(ml, lockset_conflict(&ml->set, &want), rep);
		return 0;
	case PROTO_LK_DROP:
		if (lockset_drop_owner(&ml->set, q->ino, q->session, q->owner,
				       q->kind))
			ml_wake(ml, q->ino, 0, PROTO_LK_EOF);
		return 0;
	case PROTO_LK_WAIT:
		if (s->cancelled == q->id) {
			s->cancelled = 0;
			return -EINTR;
		}
		if (!lockset_conflict(&ml->set, &want))
			break;
		if (ml_deadlock(ml, &want))
			return -EDEADLK;
		return ml_enqueue(ml, s, &want, q, now_ms, ctx);
	default: /* SET */
		if (lockset_conflict(&ml->set, &want))
			return -EAGAIN;
		break;
	}
	rc = lockset_apply(&ml->set, &want);
	if (rc)
		return rc;
	ml_rep_fill(ml, want.type == PROTO_LK_UNLCK ? NULL : &want, rep);
	/* an unlock frees its range, a read lock may downgrade the owner's
	 * write lock; a write lock frees nothing */
	if (want.type != PROTO_LK_WRLCK)
		ml_wake(ml, q->ino, want.start, want.end);
	return 0;
}

/* Dispatch one request after renewing the session. */
int mgr_lock_request(struct mgr_lock *ml, uint16_t op,
		     const struct proto_lock *q, const char *client,
		     uint64_t now_ms, void *ctx, struct proto_lockrep *rep)
{
	struct ml_session *s;
	int created, rc;

	ml_rep_fill(ml, NULL, rep);
	rc = ml_session_touch(ml, q->session, client, q->lease_ms, now_ms, &s,
			      &created);
	if (rc)
		return rc;
	switch (op) {
	case PROTO_OP_LOCK_KEEPALIVE:
		if (created)
			rep->flags |= PROTO_LKR_NEWSESSION;
		return 0;
	case PROTO_OP_LOCK_CANCEL:
		return ml_cancel(ml, s, q->id);
	case PROTO_OP_LOCK:
		return ml_lock(ml, s, q, now_ms, ctx, rep);
	default:
		return -EOPNOTSUPP;
	}
}

/* lockset_drop_sessions match: a session marked expired by this tick;
 * count its locks for the log line. */
static int ml_match_expired(uint64_t session, size_t nlocks, void *arg)
{
	struct ml_session *s = ml_session_find(arg, session);

	if (!s || !s->expired)
		return 0;
	s->dropped += nlocks;
	return 1;
}

/*
 * Expire the sessions silent for longer than their lease with no WAIT
 * pending: their locks go in one pass over the table, then every waiter
 * is reconsidered. Cost: the sessions; when one expires, the table and
 * the waiters too.
 */
static void ml_expire(struct mgr_lock *ml, uint64_t now_ms)
{
	struct ml_session *s, *next;
	size_t n = 0, dropped;

	TAILQ_FOREACH(s, &ml->slist, link) {
		s->expired = now_ms - s->last_ms > s->lease_ms &&
			     TAILQ_EMPTY(&s->waiters);
		s->dropped = 0;
		n += (size_t)s->expired;
	}
	if (!n)
		return;
	dropped = lockset_drop_sessions(&ml->set, ml_match_expired, ml);
	for (s = TAILQ_FIRST(&ml->slist); s; s = next) {
		next = TAILQ_NEXT(s, link);
		if (!s->expired)
			continue;
		if (s->dropped)
			log_notice("locks: session %016llx silent for over its "
				   "lease of %u ms: %zu locks dropped",
				   (unsigned long long)s->id, s->lease_ms,
				   s->dropped);
		ml_session_free(ml, s);
	}
	if (dropped)
		ml_wake_all(ml);
}

/* End the slices that ran out; expire silent sessions. */
void mgr_lock_tick(struct mgr_lock *ml, uint64_t now_ms)
{
	struct ml_waiter *w, *next;

	for (w = TAILQ_FIRST(&ml->waiters); w; w = next) {
		next = TAILQ_NEXT(w, in_all);
		if (w->deadline_ms <= now_ms)
			ml_waiter_finish(ml, w, -ETIME, NULL);
	}
	ml_expire(ml, now_ms);
}

/* Counters. */
void mgr_lock_counts(const struct mgr_lock *ml, size_t *locks,
		     size_t *waiters, size_t *sessions)
{
	*locks = ml->set.count;
	*waiters = ml->nwaiters;
	*sessions = ml->nsessions;
}

/* Waiters granted by wake-ups. */
uint64_t mgr_lock_woken(const struct mgr_lock *ml)
{
	return ml->woken;
}

/* Work gauge: lock and waiter visits. */
uint64_t mgr_lock_work(const struct mgr_lock *ml)
{
	return ml->set.visits + ml->work;
}
