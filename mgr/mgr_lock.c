/* mgr_lock.c - the cluster-wide lock table: grants, waits, deadlocks,
 * leases and the grace period. See mgr_lock.h. */
#include "mgr_lock.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lockset.h"
#include "log.h"

#define ML_DEADLOCK_BUDGET 1024 /* holders visited per deadlock check */

/* A client session. */
struct ml_session {
	uint64_t id;
	uint64_t last_ms;       /* last request from it */
	uint32_t lease_ms;      /* as it last asked */
	uint64_t cancelled;     /* wait id cancelled before the wait came */
	struct ml_session *next;
};

/* A queued WAIT: its reply is deferred. */
struct ml_waiter {
	struct lockset_lock want;
	uint64_t id;            /* the client's wait id */
	uint64_t deadline_ms;   /* end of its slice: -ETIME then */
	void *ctx;              /* the request */
	struct ml_waiter *next; /* FIFO */
};

/* The table. Loop thread only, like every field. */
struct mgr_lock {
	struct lockset set;
	struct ml_waiter *wait_head, **wait_tail;
	size_t nwaiters;
	struct ml_session *sessions;
	size_t nsessions;
	uint64_t boot;
	uint64_t grace_end_ms;
	mgr_lock_done_fn done;
	void *done_arg;
};

/* Allocate an empty table whose grace runs from now_ms. */
int mgr_lock_new(struct mgr_lock **out, uint32_t grace_ms, uint64_t now_ms,
		 uint64_t boot, mgr_lock_done_fn done, void *arg)
{
	struct mgr_lock *ml = calloc(1, sizeof(*ml));

	if (!ml)
		return -ENOMEM;
	lockset_init(&ml->set, MGR_LOCK_MAX);
	ml->wait_tail = &ml->wait_head;
	ml->boot = boot;
	ml->grace_end_ms = now_ms + grace_ms;
	ml->done = done;
	ml->done_arg = arg;
	*out = ml;
	return 0;
}

/* Unlink waiter w (found through its link pointer pp) from the FIFO. */
static void ml_waiter_unlink(struct mgr_lock *ml, struct ml_waiter **pp)
{
	struct ml_waiter *w = *pp;

	*pp = w->next;
	if (ml->wait_tail == &w->next)
		ml->wait_tail = pp;
	ml->nwaiters--;
}

/* Finish every waiter (the clients ask again), free everything. */
void mgr_lock_free(struct mgr_lock *ml)
{
	struct ml_session *s, *sn;

	if (!ml)
		return;
	while (ml->wait_head) {
		struct ml_waiter *w = ml->wait_head;

		ml_waiter_unlink(ml, &ml->wait_head);
		ml->done(w->ctx, -ETIME, NULL, ml->done_arg);
		free(w);
	}
	for (s = ml->sessions; s; s = sn) {
		sn = s->next;
		free(s);
	}
	lockset_fini(&ml->set);
	free(ml);
}

/* Find session id, creating it (*created = 1); renew its lease.
 * @return the session, or NULL (out of memory) */
static struct ml_session *ml_session_touch(struct mgr_lock *ml, uint64_t id,
					   uint32_t lease_ms, uint64_t now_ms,
					   int *created)
{
	struct ml_session *s;

	*created = 0;
	for (s = ml->sessions; s; s = s->next)
		if (s->id == id)
			break;
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		s->id = id;
		s->next = ml->sessions;
		ml->sessions = s;
		ml->nsessions++;
		*created = 1;
	}
	s->last_ms = now_ms;
	s->lease_ms = lease_ms;
	return s;
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

/*
 * Grant what can be granted now, in FIFO order, to the waiters on ino (0:
 * on every inode). Cost: all waiters, each a bucket scan.
 */
static void ml_wake(struct mgr_lock *ml, uint64_t ino)
{
	struct ml_waiter **pp = &ml->wait_head, *w;
	struct proto_lockrep rep;
	int rc;

	while ((w = *pp) != NULL) {
		if ((ino && w->want.ino != ino) ||
		    lockset_conflict(&ml->set, &w->want)) {
			pp = &w->next;
			continue;
		}
		rc = lockset_apply(&ml->set, &w->want);
		ml_waiter_unlink(ml, pp);
		ml_rep_fill(ml, rc ? NULL : &w->want, &rep);
		ml->done(w->ctx, rc, &rep, ml->done_arg);
		free(w);
	}
}

/* Deadlock walk state. */
struct ml_dl {
	struct mgr_lock *ml;
	uint64_t session, owner; /* who would wait */
	int budget;
};

/* lockset_each_conflict callback: does the holder l (transitively) wait
 * for the owner that asks? */
static int ml_dl_holder(const struct lockset_lock *l, void *arg)
{
	struct ml_dl *d = arg;

	if (l->session == d->session && l->owner == d->owner)
		return 1;
	if (--d->budget <= 0)
		return 0;
	for (struct ml_waiter *w = d->ml->wait_head; w; w = w->next) {
		if (w->want.kind != PROTO_LK_POSIX ||
		    w->want.session != l->session || w->want.owner != l->owner)
			continue;
		if (lockset_each_conflict(&d->ml->set, &w->want, ml_dl_holder, d))
			return 1;
	}
	return 0;
}

/*
 * Whether want waiting would close a cycle of POSIX owners waiting for
 * each other (the kernel's rule: POSIX locks only, never flock). Follows
 * every conflicting holder, bounded by ML_DEADLOCK_BUDGET visits.
 */
static bool ml_deadlock(struct mgr_lock *ml, const struct lockset_lock *want)
{
	struct ml_dl d = { ml, want->session, want->owner, ML_DEADLOCK_BUDGET };

	if (want->kind != PROTO_LK_POSIX)
		return false;
	return lockset_each_conflict(&ml->set, want, ml_dl_holder, &d) != 0;
}

/* Queue want as a waiter with a deferred reply. @return 1, -ENOLCK, -ENOMEM */
static int ml_enqueue(struct mgr_lock *ml, const struct lockset_lock *want,
		      const struct proto_lock *q, uint64_t now_ms, void *ctx)
{
	struct ml_waiter *w;

	if (ml->nwaiters >= MGR_LOCK_MAX_WAITERS)
		return -ENOLCK;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->want = *want;
	w->id = q->id;
	w->deadline_ms = now_ms + q->wait_ms;
	w->ctx = ctx;
	*ml->wait_tail = w;
	ml->wait_tail = &w->next;
	ml->nwaiters++;
	return 1;
}

/* CANCEL: finish the session's wait id with -EINTR, or remember the id so
 * that the wait, should it come later, fails at once. */
static int ml_cancel(struct mgr_lock *ml, struct ml_session *s, uint64_t id)
{
	for (struct ml_waiter **pp = &ml->wait_head; *pp; pp = &(*pp)->next) {
		struct ml_waiter *w = *pp;

		if (w->want.session != s->id || w->id != id)
			continue;
		ml_waiter_unlink(ml, pp);
		ml->done(w->ctx, -EINTR, NULL, ml->done_arg);
		free(w);
		return 0;
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
			ml_wake(ml, q->ino);
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
		return ml_enqueue(ml, &want, q, now_ms, ctx);
	default: /* SET */
		if (lockset_conflict(&ml->set, &want))
			return -EAGAIN;
		break;
	}
	rc = lockset_apply(&ml->set, &want);
	if (rc)
		return rc;
	ml_rep_fill(ml, want.type == PROTO_LK_UNLCK ? NULL : &want, rep);
	ml_wake(ml, q->ino);
	return 0;
}

/* Dispatch one request after renewing the session. */
int mgr_lock_request(struct mgr_lock *ml, uint16_t op,
		     const struct proto_lock *q, uint64_t now_ms, void *ctx,
		     struct proto_lockrep *rep)
{
	int created;
	struct ml_session *s = ml_session_touch(ml, q->session, q->lease_ms,
						now_ms, &created);

	ml_rep_fill(ml, NULL, rep);
	if (!s)
		return -ENOMEM;
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

/* Whether session id has a waiter queued (its client is still there). */
static bool ml_session_waits(const struct mgr_lock *ml, uint64_t id)
{
	for (const struct ml_waiter *w = ml->wait_head; w; w = w->next)
		if (w->want.session == id)
			return true;
	return false;
}

/* End the slices that ran out; expire silent sessions. */
void mgr_lock_tick(struct mgr_lock *ml, uint64_t now_ms)
{
	struct ml_waiter **wp = &ml->wait_head, *w;
	struct ml_session **sp = &ml->sessions, *s;
	size_t dropped = 0;

	while ((w = *wp) != NULL) {
		if (w->deadline_ms > now_ms) {
			wp = &w->next;
			continue;
		}
		ml_waiter_unlink(ml, wp);
		ml->done(w->ctx, -ETIME, NULL, ml->done_arg);
		free(w);
	}
	while ((s = *sp) != NULL) {
		if (now_ms - s->last_ms <= s->lease_ms ||
		    ml_session_waits(ml, s->id)) {
			sp = &s->next;
			continue;
		}
		*sp = s->next;
		ml->nsessions--;
		size_t n = lockset_drop_session(&ml->set, s->id);
		if (n)
			log_notice("locks: session %016llx silent for over its "
				   "lease of %u ms: %zu locks dropped",
				   (unsigned long long)s->id, s->lease_ms, n);
		dropped += n;
		free(s);
	}
	if (dropped)
		ml_wake(ml, 0);
}

/* Counters. */
void mgr_lock_counts(const struct mgr_lock *ml, size_t *locks,
		     size_t *waiters, size_t *sessions)
{
	*locks = ml->set.count;
	*waiters = ml->nwaiters;
	*sessions = ml->nsessions;
}
