/* mgr_lease.c - the callback channel's sessions and event queues; see
 * mgr_lease.h. */
#include "mgr_lease.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "log.h"

#define LS_BUCKETS 4096      /* session hash */
#define LS_OBJ_BUCKETS 16384 /* directory hash */
#define LS_HOST_MAX 64  /* bytes of a host name kept for the cap */

/* One queued event; its name is stored after it. */
struct ls_event {
	struct proto_cbev ev;          /* name.p points at name below */
	TAILQ_ENTRY(ls_event) link;    /* ls_session.events */
	char name[];
};

/* A client host: how many sessions its requests made. */
struct ls_host {
	char name[LS_HOST_MAX];
	size_t nsessions;              /* freed at 0 */
	struct ls_host *next;          /* mgr_lease.hosts */
};

/* A mount session. */
struct ls_session {
	uint64_t id;
	uint64_t gen;                  /* table-wide, from 1: tells this
					* session from an earlier one of the
					* same id that the table forgot */
	uint64_t next_seq;             /* the next event's number (from 1) */
	uint64_t sent;                 /* the last event put in a reply */
	uint64_t acked;                /* the last event acknowledged */
	uint32_t lease_ms;             /* from its last wait */
	uint64_t last_ms;              /* when its last wait came */
	void *wait;                    /* the parked request, or NULL */
	uint64_t wait_end_ms;          /* when the parked wait is answered */
	TAILQ_HEAD(, ls_event) events; /* not acknowledged yet, by seq */
	size_t nevents;
	struct ls_host *host;          /* NULL: counted against no host */
	struct ls_session *hnext;      /* hash chain */
	TAILQ_ENTRY(ls_session) link;  /* mgr_lease.slist */
};

/* A holder of a READ or WRITE lease on a directory, or one whose lease a
 * change or an access recalled and that has not acknowledged the recall
 * yet (every change of the directory waits for that ack, not only the one
 * that recalled; every access too if it held WRITE). */
struct ls_holder {
	uint64_t session;
	uint64_t gen;                  /* its ls_session.gen when granted */
	uint64_t recall_seq;           /* 0: holding; else the RECALL's seq */
	int write;                     /* a WRITE lease (exclusive) */
};

/* A directory with READ or WRITE leases, or with changes waiting or
 * running. */
struct ls_obj {
	uint64_t ino;
	struct ls_holder *holders;     /* NULL until the first; grows by
				        * doubling, up to MGR_LEASE_MAX_HOLDERS */
	unsigned nholders, cap;
	unsigned changing;             /* changes parked or running */
	uint64_t nogrant_until_ms;     /* no grant before (the back-off) */
	uint64_t recalled_ms;          /* the last recall (0: none) */
	uint32_t backoff_ms;           /* the last back-off */
	struct ls_obj *hnext;          /* hash chain */
};

/* An invalidation a parked change waits for: session's ack of seq. */
struct ls_ack {
	uint64_t session, seq;
};

/* A change (or an access: mgr_lease_access) waiting for
 * acknowledgements. */
struct ls_change {
	void *ctx;
	unsigned nacks;
	TAILQ_ENTRY(ls_change) link;   /* mgr_lease.changes */
	struct ls_ack acks[];
};

/* The table. Loop thread only: no lock. */
struct mgr_lease {
	uint64_t boot;
	mgr_lease_done_fn done;
	mgr_lease_ready_fn ready;
	void *arg;
	struct ls_obj *objs[LS_OBJ_BUCKETS];
	size_t nobjs;
	TAILQ_HEAD(, ls_change) changes; /* parked, oldest first (changes
					  * and accesses) */
	size_t nchanges;
	uint64_t ngrants, nrecalls;      /* since the start */
	uint64_t next_gen;               /* the last session gen given */
	struct ls_session *hash[LS_BUCKETS];
	TAILQ_HEAD(, ls_session) slist;
	size_t nsessions, nparked, nqueued;
	struct ls_host *hosts;
	struct proto_cbrep rep;        /* scratch for parked waits' replies */
};

/* The hash bucket of a session id (ids are random: the low bits do). */
static size_t ls_bucket(uint64_t id)
{
	return (size_t)((id ^ (id >> 29)) % LS_BUCKETS);
}

/* The session of id, or NULL. Cost: one hash chain. */
static struct ls_session *ls_find(const struct mgr_lease *ml, uint64_t id)
{
	struct ls_session *s = ml->hash[ls_bucket(id)];

	while (s && s->id != id)
		s = s->hnext;
	return s;
}

/* See mgr_lease.h. */
int mgr_lease_new(struct mgr_lease **out, uint64_t boot,
		  mgr_lease_done_fn done, mgr_lease_ready_fn ready, void *arg)
{
	struct mgr_lease *ml;

	if (!boot || !done || !ready)
		return -EINVAL;
	ml = calloc(1, sizeof(*ml));
	if (!ml)
		return -ENOMEM;
	ml->boot = boot;
	ml->done = done;
	ml->ready = ready;
	ml->arg = arg;
	TAILQ_INIT(&ml->slist);
	TAILQ_INIT(&ml->changes);
	*out = ml;
	return 0;
}

/* Drop session s's events up to seq. */
static void ls_drop_events(struct mgr_lease *ml, struct ls_session *s,
			   uint64_t seq)
{
	struct ls_event *e;

	while ((e = TAILQ_FIRST(&s->events)) && e->ev.seq <= seq) {
		TAILQ_REMOVE(&s->events, e, link);
		s->nevents--;
		ml->nqueued--;
		free(e);
	}
}

/* Fill rep with session s's events not acknowledged yet (at most
 * PROTO_CB_MAX_EVENTS, in order); they count as sent. */
static void ls_fill(const struct mgr_lease *ml, struct ls_session *s,
		    struct proto_cbrep *rep)
{
	struct ls_event *e;

	rep->boot = ml->boot;
	rep->nev = 0;
	TAILQ_FOREACH(e, &s->events, link) {
		if (rep->nev == PROTO_CB_MAX_EVENTS)
			break;
		rep->ev[rep->nev++] = e->ev;
		if (e->ev.seq > s->sent)
			s->sent = e->ev.seq;
	}
}

/* An empty answer (a goodbye's). */
static void ls_fill_empty(const struct mgr_lease *ml, struct proto_cbrep *rep)
{
	rep->boot = ml->boot;
	rep->nev = 0;
}

/* Answer session s's parked wait with what it has. */
static void ls_answer(struct mgr_lease *ml, struct ls_session *s)
{
	void *ctx = s->wait;

	if (!ctx)
		return;
	s->wait = NULL;
	ml->nparked--;
	ls_fill(ml, s, &ml->rep);
	ml->done(ctx, &ml->rep, ml->arg);
}

/* Free host h if no session counts against it any more. */
static void ls_host_release(struct mgr_lease *ml, struct ls_host *h)
{
	struct ls_host **hp;

	if (h->nsessions)
		return;
	for (hp = &ml->hosts; *hp != h; hp = &(*hp)->next)
		;
	*hp = h->next;
	free(h);
}

/* Unlink session s from the table and free it, its events and, if it
 * was its last session, its host. Its wait must be answered already. */
static void ls_free(struct mgr_lease *ml, struct ls_session *s)
{
	struct ls_session **pp = &ml->hash[ls_bucket(s->id)];

	while (*pp != s)
		pp = &(*pp)->hnext;
	*pp = s->hnext;
	TAILQ_REMOVE(&ml->slist, s, link);
	ml->nsessions--;
	ls_drop_events(ml, s, UINT64_MAX);
	if (s->host) {
		s->host->nsessions--;
		ls_host_release(ml, s->host);
	}
	free(s);
}

/* See mgr_lease.h. */
void mgr_lease_free(struct mgr_lease *ml)
{
	struct ls_session *s;
	struct ls_change *c;
	struct ls_obj *o;

	if (!ml)
		return;
	while ((c = TAILQ_FIRST(&ml->changes))) {
		TAILQ_REMOVE(&ml->changes, c, link);
		ml->ready(c->ctx, ml->arg);
		free(c);
	}
	while ((s = TAILQ_FIRST(&ml->slist))) {
		ls_answer(ml, s);
		ls_free(ml, s);
	}
	for (size_t b = 0; b < LS_OBJ_BUCKETS; b++)
		while ((o = ml->objs[b])) {
			ml->objs[b] = o->hnext;
			free(o->holders);
			free(o);
		}
	free(ml);
}

/* The host a new session of client counts against (made if new), or
 * NULL with *err set: -EUSERS at its cap, -ENOMEM. Cost: the hosts. */
static struct ls_host *ls_host_admit(struct mgr_lease *ml, const char *client,
				     int *err)
{
	struct ls_host *h;

	for (h = ml->hosts; h; h = h->next)
		if (strncmp(h->name, client, LS_HOST_MAX - 1) == 0)
			break;
	if (h && h->nsessions >= MGR_LEASE_MAX_CLIENT_SESSIONS) {
		*err = -EUSERS;
		return NULL;
	}
	if (!h) {
		h = calloc(1, sizeof(*h));
		if (!h) {
			*err = -ENOMEM;
			return NULL;
		}
		strncpy(h->name, client, LS_HOST_MAX - 1);
		h->next = ml->hosts;
		ml->hosts = h;
	}
	return h;
}

/* Make session id, counted against client (may be NULL). */
static int ls_make(struct mgr_lease *ml, uint64_t id, const char *client,
		   struct ls_session **out)
{
	struct ls_host *h = NULL;
	struct ls_session *s;
	int rc = 0;

	if (ml->nsessions >= MGR_LEASE_MAX_SESSIONS)
		return -EUSERS;
	if (client && !(h = ls_host_admit(ml, client, &rc)))
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s) {
		if (h)
			ls_host_release(ml, h);
		return -ENOMEM;
	}
	s->id = id;
	s->gen = ++ml->next_gen;
	s->next_seq = 1;
	TAILQ_INIT(&s->events);
	s->host = h;
	if (h)
		h->nsessions++;
	s->hnext = ml->hash[ls_bucket(id)];
	ml->hash[ls_bucket(id)] = s;
	TAILQ_INSERT_TAIL(&ml->slist, s, link);
	ml->nsessions++;
	*out = s;
	return 0;
}

/* Append an event to session s, collapsing the queue into one RESET when
 * it is full (a RESET makes the mount drop everything, so the events it
 * replaces need no delivery). Returns the event's seq or -ENOMEM. */
static int64_t ls_queue(struct mgr_lease *ml, struct ls_session *s,
			uint8_t kind, uint64_t ino, const char *name,
			size_t len)
{
	struct ls_event *e;

	if (s->nevents >= MGR_LEASE_MAX_QUEUED && kind != PROTO_CB_RESET) {
		ls_drop_events(ml, s, UINT64_MAX);
		kind = PROTO_CB_RESET;
		ino = 1;
		len = 0;
	}
	e = calloc(1, sizeof(*e) + len + 1);
	if (!e)
		return -ENOMEM;
	if (len)
		memcpy(e->name, name, len);
	e->ev = (struct proto_cbev){ .seq = s->next_seq++, .ino = ino,
				     .kind = kind,
				     .name = { e->name, (uint32_t)len } };
	TAILQ_INSERT_TAIL(&s->events, e, link);
	s->nevents++;
	ml->nqueued++;
	return (int64_t)e->ev.seq;
}

/* Let every parked change run whose acknowledgements all came (or whose
 * sessions were forgotten), in the order they were parked. Cost: the
 * parked changes and their acks. */
static void ls_changes_check(struct mgr_lease *ml)
{
	struct ls_change *c, *next;
	struct ls_session *s;

	for (c = TAILQ_FIRST(&ml->changes); c; c = next) {
		next = TAILQ_NEXT(c, link);
		for (unsigned i = 0; i < c->nacks;) {
			s = ls_find(ml, c->acks[i].session);
			if (!s || s->acked >= c->acks[i].seq)
				c->acks[i] = c->acks[--c->nacks];
			else
				i++;
		}
		if (c->nacks)
			continue;
		TAILQ_REMOVE(&ml->changes, c, link);
		ml->nchanges--;
		ml->ready(c->ctx, ml->arg);
		free(c);
	}
}

/* See mgr_lease.h. */
int mgr_lease_wait(struct mgr_lease *ml, const struct proto_cbwait *q,
		   const char *client, uint64_t now_ms, void *ctx,
		   struct proto_cbrep *rep)
{
	struct ls_session *s = ls_find(ml, q->session);
	int acked_more = 0, made = 0;
	int64_t seq;
	int rc;

	if (q->flags & PROTO_CBW_BYE) {
		if (s) {
			ls_answer(ml, s);
			ls_free(ml, s);
			ls_changes_check(ml);
		}
		ls_fill_empty(ml, rep);
		return 0;
	}
	if (!s) {
		rc = ls_make(ml, q->session, client, &s);
		if (rc)
			return rc;
		made = 1;
		if (q->boot == ml->boot) {
			/* it knew this start: we forgot it, events are lost */
			seq = ls_queue(ml, s, PROTO_CB_RESET, 1, NULL, 0);
			if (seq < 0) {
				ls_free(ml, s);
				return (int)seq;
			}
		}
	} else if (q->boot == ml->boot) {
		if (q->acked > s->sent)
			return -EBADMSG;
		if (q->acked > s->acked) {
			s->acked = q->acked;
			acked_more = 1;
		}
		ls_drop_events(ml, s, s->acked);
	}
	s->lease_ms = q->lease_ms;
	s->last_ms = now_ms;
	if (acked_more)
		ls_changes_check(ml);
	ls_answer(ml, s); /* an older wait of the session: it reconnected */
	if (s->nevents || made) { /* a new session learns the boot at once */
		ls_fill(ml, s, rep);
		return 0;
	}
	s->wait = ctx;
	s->wait_end_ms = now_ms + q->wait_ms;
	ml->nparked++;
	return 1;
}

/* See mgr_lease.h. */
int64_t mgr_lease_post(struct mgr_lease *ml, uint64_t session, uint8_t kind,
		       uint64_t ino, const char *name, size_t len)
{
	struct ls_session *s = ls_find(ml, session);
	int64_t seq;

	if (kind < PROTO_CB_RECALL || kind > PROTO_CB_RESET || ino == 0)
		return -EINVAL;
	if ((kind == PROTO_CB_INVAL_ENTRY) != (len > 0) || len > PROTO_MAX_NAME)
		return -EINVAL;
	if (!s)
		return -ENOENT;
	seq = ls_queue(ml, s, kind, ino, name, len);
	if (seq > 0)
		ls_answer(ml, s);
	return seq;
}

/* See mgr_lease.h. */
void mgr_lease_tick(struct mgr_lease *ml, uint64_t now_ms)
{
	struct ls_session *s, *next;
	int forgot = 0;

	for (s = TAILQ_FIRST(&ml->slist); s; s = next) {
		next = TAILQ_NEXT(s, link);
		if (s->wait) {
			if (now_ms >= s->wait_end_ms) {
				s->last_ms = now_ms;
				ls_answer(ml, s);
			}
			continue;
		}
		if (now_ms - s->last_ms > s->lease_ms) {
			log_info("callbacks: session %016llx silent for over "
				 "its lease (%u ms): forgotten, with %zu events",
				 (unsigned long long)s->id, s->lease_ms,
				 s->nevents);
			ls_free(ml, s);
			forgot = 1;
		}
	}
	if (forgot)
		ls_changes_check(ml);
}

/* See mgr_lease.h. */
void mgr_lease_counts(const struct mgr_lease *ml, size_t *sessions,
		      size_t *parked, size_t *queued)
{
	*sessions = ml->nsessions;
	*parked = ml->nparked;
	*queued = ml->nqueued;
}

/* See mgr_lease.h. */
int mgr_lease_acked(const struct mgr_lease *ml, uint64_t session,
		    uint64_t *acked)
{
	const struct ls_session *s = ls_find(ml, session);

	if (!s)
		return 0;
	*acked = s->acked;
	return 1;
}

/* ------------------------------------------------------------- leases */

/* The bucket of a directory's inode number. */
static size_t ls_obj_bucket(uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 50) % LS_OBJ_BUCKETS;
}

/* The object of directory ino, or NULL. Cost: one hash chain. */
static struct ls_obj *ls_obj_find(const struct mgr_lease *ml, uint64_t ino)
{
	struct ls_obj *o;

	for (o = ml->objs[ls_obj_bucket(ino)]; o; o = o->hnext)
		if (o->ino == ino)
			return o;
	return NULL;
}

/* The object of directory ino; made (empty) if make and the cap allows.
 * @return it, or NULL */
static struct ls_obj *ls_obj_get(struct mgr_lease *ml, uint64_t ino, int make)
{
	size_t b = ls_obj_bucket(ino);
	struct ls_obj *o = ls_obj_find(ml, ino);

	if (o || !make || ml->nobjs >= MGR_LEASE_MAX_OBJECTS)
		return o;
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->ino = ino;
	o->hnext = ml->objs[b];
	ml->objs[b] = o;
	ml->nobjs++;
	return o;
}

/* Free object o if it holds nothing any more, and its back-off would not
 * grow from the last recall any more. */
static void ls_obj_put(struct mgr_lease *ml, struct ls_obj *o, uint64_t now_ms)
{
	struct ls_obj **pp = &ml->objs[ls_obj_bucket(o->ino)];

	if (o->nholders || o->changing ||
	    (o->recalled_ms && now_ms - o->recalled_ms <= MGR_LEASE_BACKOFF_MAX_MS))
		return;
	while (*pp != o)
		pp = &(*pp)->hnext;
	*pp = o->hnext;
	ml->nobjs--;
	free(o->holders);
	free(o);
}

/* Room for one more holder of o (2, then doubling, up to
 * MGR_LEASE_MAX_HOLDERS). @return 0, -ENOMEM */
static int ls_obj_grow(struct ls_obj *o)
{
	unsigned cap = o->cap ? 2 * o->cap : 2;
	struct ls_holder *h;

	if (cap > MGR_LEASE_MAX_HOLDERS)
		cap = MGR_LEASE_MAX_HOLDERS;
	h = realloc(o->holders, cap * sizeof(*h));
	if (!h)
		return -ENOMEM;
	o->holders = h;
	o->cap = cap;
	return 0;
}

/* Whether holder h still counts: its session is the one it was granted
 * to (not forgotten, nor forgotten and back under the same id) and holds
 * the lease or has not acknowledged its recall yet. */
static int ls_holder_live(const struct mgr_lease *ml, const struct ls_holder *h)
{
	const struct ls_session *s = ls_find(ml, h->session);

	return s && s->gen == h->gen &&
	       (!h->recall_seq || s->acked < h->recall_seq);
}

/* Drop the holders of o whose sessions the table forgot, and those whose
 * recall is acknowledged (a WRITE lease ends with them). */
static void ls_obj_prune(struct mgr_lease *ml, struct ls_obj *o)
{
	for (unsigned i = 0; i < o->nholders;) {
		if (ls_holder_live(ml, &o->holders[i]))
			i++;
		else
			o->holders[i] = o->holders[--o->nholders];
	}
}

/* Whether o may grant session s a lease now (a WRITE one if write): no
 * change waits or runs, the back-off is over, s's own lease is not being
 * recalled, and no other session holds (or is being recalled from) a
 * WRITE lease, nor, for a WRITE grant, any lease. *mine is s's holder
 * entry, or NULL. Cost: the holders. */
static int ls_grantable(struct mgr_lease *ml, struct ls_obj *o,
			const struct ls_session *s, uint64_t now_ms, int write,
			struct ls_holder **mine)
{
	struct ls_holder *h;

	*mine = NULL;
	if (o->changing || now_ms < o->nogrant_until_ms)
		return 0;
	ls_obj_prune(ml, o);
	for (unsigned i = 0; i < o->nholders; i++) {
		h = &o->holders[i];
		if (h->session == s->id) {
			if (h->recall_seq)
				return 0; /* its recall is not acknowledged yet */
			*mine = h;
		} else if (write || h->write) {
			return 0;
		}
	}
	return 1;
}

/* Grant session s a lease on directory dir (a WRITE one if write; a
 * holder of a READ lease asking WRITE is upgraded, a WRITE holder asking
 * READ keeps WRITE). @return 1 granted (*evseq set), 0 not */
static int ls_grant(struct mgr_lease *ml, uint64_t session, uint64_t dir,
		    uint64_t now_ms, int write, uint64_t *evseq)
{
	struct ls_session *s = session ? ls_find(ml, session) : NULL;
	struct ls_holder *mine;
	struct ls_obj *o;

	if (!s || !dir)
		return 0;
	o = ls_obj_get(ml, dir, 1);
	if (!o)
		return 0;
	if (!ls_grantable(ml, o, s, now_ms, write, &mine))
		goto out_put;
	if (!mine) {
		if (o->nholders == MGR_LEASE_MAX_HOLDERS ||
		    (o->nholders == o->cap && ls_obj_grow(o)))
			goto out_put;
		mine = &o->holders[o->nholders++];
		*mine = (struct ls_holder){ .session = session, .gen = s->gen };
	}
	if (write)
		mine->write = 1;
	*evseq = s->next_seq - 1;
	ml->ngrants++;
	return 1;
out_put:
	ls_obj_put(ml, o, now_ms); /* an object made for nothing */
	return 0;
}

/* See mgr_lease.h. */
int mgr_lease_grant(struct mgr_lease *ml, uint64_t session, uint64_t dir,
		    uint64_t now_ms, uint64_t *evseq)
{
	return ls_grant(ml, session, dir, now_ms, 0, evseq);
}

/* See mgr_lease.h. */
int mgr_lease_grant_write(struct mgr_lease *ml, uint64_t session, uint64_t dir,
			  uint64_t now_ms, uint64_t *evseq)
{
	return ls_grant(ml, session, dir, now_ms, 1, evseq);
}

/* See mgr_lease.h. */
uint64_t mgr_lease_writer(const struct mgr_lease *ml, uint64_t dir)
{
	const struct ls_obj *o = ls_obj_find(ml, dir);

	for (unsigned i = 0; o && i < o->nholders; i++)
		if (o->holders[i].write && ls_holder_live(ml, &o->holders[i]))
			return o->holders[i].session;
	return 0;
}

/* Note that session must acknowledge seq before the change runs (the
 * highest seq per session is kept). The caller sized acks for one entry
 * per session. Cost: the entries so far. */
static void ls_need_ack(struct ls_ack *acks, unsigned *n, uint64_t session,
			uint64_t seq)
{
	for (unsigned i = 0; i < *n; i++)
		if (acks[i].session == session) {
			if (seq > acks[i].seq)
				acks[i].seq = seq;
			return;
		}
	acks[(*n)++] = (struct ls_ack){ session, seq };
}

/* Queue for session s the invalidation of name nm (none if nm->len is 0)
 * and the recall of its directory's lease. A failed post (no memory)
 * turns into a RESET, or, if even that fails, forgetting the session (it
 * drops everything when its next wait fails). @return the seq to wait
 * for, or 0 (forgotten: s is freed) */
static uint64_t ls_recall_one(struct mgr_lease *ml, struct ls_session *s,
			      const struct mgr_lease_name *nm)
{
	int64_t seq = 1;

	if (nm->len) /* a name; else the directory's attributes only */
		seq = ls_queue(ml, s, PROTO_CB_INVAL_ENTRY, nm->dir, nm->name,
			       nm->len);
	if (seq > 0)
		seq = ls_queue(ml, s, PROTO_CB_RECALL, nm->dir, NULL, 0);
	if (seq < 0)
		seq = ls_queue(ml, s, PROTO_CB_RESET, 1, NULL, 0);
	if (seq < 0) {
		log_warn("callbacks: out of memory: forgetting session %016llx",
			 (unsigned long long)s->id);
		ls_answer(ml, s);
		ls_free(ml, s);
		return 0;
	}
	ls_answer(ml, s);
	return (uint64_t)seq;
}

/* A recall of o's leases at now_ms: no grant for a back-off that doubles
 * with each recall soon after the last (1 s .. MGR_LEASE_BACKOFF_MAX_MS),
 * so a directory that several mounts use does not recall on every op. */
static void ls_backoff(struct ls_obj *o, uint64_t now_ms)
{
	if (o->recalled_ms && now_ms - o->recalled_ms <= MGR_LEASE_BACKOFF_MAX_MS)
		o->backoff_ms = o->backoff_ms * 2 > MGR_LEASE_BACKOFF_MAX_MS ?
				MGR_LEASE_BACKOFF_MAX_MS : o->backoff_ms * 2;
	else
		o->backoff_ms = MGR_LEASE_BACKOFF_MIN_MS;
	o->recalled_ms = now_ms;
	o->nogrant_until_ms = now_ms + o->backoff_ms;
}

/* An op of origin on name nm in directory o (writers_only: an access,
 * else a change): every other holder (of a WRITE lease only, if
 * writers_only) is told to drop the name (if any) and its whole lease on
 * o (INVAL_ENTRY, RECALL), and is waited for (acks), as is every such
 * holder recalled before that has not acknowledged yet; a holder stops
 * being one once it acknowledged. A change's recall starts a back-off
 * (ls_backoff); an access's does not (see mgr_lease_access). Cost: the
 * holders. */
static void ls_recall(struct mgr_lease *ml, struct ls_obj *o, uint64_t origin,
		      const struct mgr_lease_name *nm, int writers_only,
		      uint64_t now_ms, struct ls_ack *acks, unsigned *nacks)
{
	struct ls_holder *h;
	unsigned recalled = 0;

	ls_obj_prune(ml, o);
	for (unsigned i = 0; i < o->nholders; i++) {
		h = &o->holders[i];
		if (h->session == origin || (writers_only && !h->write))
			continue;
		if (!h->recall_seq) {
			h->recall_seq = ls_recall_one(ml, ls_find(ml, h->session), nm);
			recalled++;
			ml->nrecalls++;
		}
		if (h->recall_seq)
			ls_need_ack(acks, nacks, h->session, h->recall_seq);
	}
	ls_obj_prune(ml, o); /* the sessions ls_recall_one had to forget */
	if (recalled && !writers_only)
		ls_backoff(o, now_ms);
}

/* Park ctx until each of acks[0..n) came (ls_changes_check). @return 1,
 * -ENOMEM */
static int ls_park(struct mgr_lease *ml, void *ctx, const struct ls_ack *acks,
		   unsigned n)
{
	struct ls_change *c = malloc(sizeof(*c) + n * sizeof(acks[0]));

	if (!c)
		return -ENOMEM;
	c->ctx = ctx;
	c->nacks = n;
	memcpy(c->acks, acks, n * sizeof(acks[0]));
	TAILQ_INSERT_TAIL(&ml->changes, c, link);
	ml->nchanges++;
	return 1;
}

/* See mgr_lease.h. At most one WRITE holder per object, whose recall is
 * only a RECALL (the holder drops every name it keeps there). */
int mgr_lease_access(struct mgr_lease *ml, uint64_t origin,
		     const uint64_t *inos, unsigned n, uint64_t now_ms,
		     void *ctx)
{
	struct ls_ack acks[MGR_LEASE_MAX_INOS * MGR_LEASE_MAX_HOLDERS];
	struct mgr_lease_name nm = { 0 };
	unsigned nacks = 0;
	struct ls_obj *o;

	if (n > MGR_LEASE_MAX_INOS)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		if (!inos[i] || !(o = ls_obj_get(ml, inos[i], 0)))
			continue; /* no object: nobody holds a lease on it */
		nm.dir = inos[i];
		ls_recall(ml, o, origin, &nm, 1, now_ms, acks, &nacks);
	}
	return nacks ? ls_park(ml, ctx, acks, nacks) : 0;
}

/* See mgr_lease.h. The acks (one per session to wait for) are on the
 * stack for a few names, else on the heap, sized by the sessions known. */
int mgr_lease_change(struct mgr_lease *ml, uint64_t origin,
		     const struct mgr_lease_name *names, unsigned n,
		     uint64_t now_ms, void *ctx)
{
	struct ls_ack stack[2 * MGR_LEASE_MAX_HOLDERS], *acks = stack;
	size_t cap = (size_t)n * MGR_LEASE_MAX_HOLDERS;
	unsigned nacks = 0;
	struct ls_obj *o;
	int rc;

	if (n > MGR_LEASE_MAX_NAMES)
		return -EINVAL;
	if (cap > ml->nsessions)
		cap = ml->nsessions; /* an ack per session, and none is made */
	if (cap > sizeof(stack) / sizeof(stack[0]) &&
	    !(acks = malloc(cap * sizeof(*acks))))
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		/* none made (the cap, no memory): then nobody holds a lease
		 * on it, and none can be granted while it is missing */
		o = ls_obj_get(ml, names[i].dir, 1);
		if (!o)
			continue;
		o->changing++;
		ls_recall(ml, o, origin, &names[i], 0, now_ms, acks, &nacks);
	}
	rc = nacks ? ls_park(ml, ctx, acks, nacks) : 0;
	if (rc < 0)
		mgr_lease_done(ml, names, n, now_ms);
	if (acks != stack)
		free(acks);
	return rc;
}

/* See mgr_lease.h. */
void mgr_lease_done(struct mgr_lease *ml, const struct mgr_lease_name *names,
		    unsigned n, uint64_t now_ms)
{
	struct ls_obj *o;

	for (unsigned i = 0; i < n; i++) {
		o = ls_obj_get(ml, names[i].dir, 0);
		if (!o || !o->changing)
			continue;
		o->changing--;
		ls_obj_put(ml, o, now_ms);
	}
}

/* See mgr_lease.h. */
void mgr_lease_object_counts(const struct mgr_lease *ml, size_t *objects,
			     size_t *parked)
{
	*objects = ml->nobjs;
	*parked = ml->nchanges;
}

/* See mgr_lease.h. */
void mgr_lease_totals(const struct mgr_lease *ml, uint64_t *grants,
		      uint64_t *recalls)
{
	*grants = ml->ngrants;
	*recalls = ml->nrecalls;
}
