/*
 * test_mgr_lock.c - unit tests of the lock table: lockset range split,
 * merge, upgrade and conflicts (also against a byte model); mgr_lock
 * waits, slices, cancel, deadlock detection, lease expiry, the grace
 * period, the session cap and the cost of a release in the worst case.
 * No network, no loop: time is passed in and deferred replies land in
 * done_cb.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lockset.h"
#include "mgr_lock.h"
#include "check.h"



/* ---------------------------------------------------------------- lockset */

/* A lock of owner o (session 1) on inode 1. */
static struct lockset_lock L(uint64_t o, uint64_t s, uint64_t e, uint8_t t)
{
	return (struct lockset_lock){ .ino = 1, .session = 1, .owner = o,
				      .start = s, .end = e, .type = t,
				      .kind = PROTO_LK_POSIX };
}

/* Collected locks, sorted by start. */
struct got {
	struct lockset_lock v[16];
	int n;
};

/* lockset_each callback: copy a lock into the struct got. */
static int collect(const struct lockset_lock *l, void *arg)
{
	struct got *g = arg;

	if (g->n < 16)
		g->v[g->n++] = *l;
	return 0;
}

/* qsort order: by start offset. */
static int by_start(const void *a, const void *b)
{
	const struct lockset_lock *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The set as "start-end:type ..." text, for compact checks. */
static const char *dump(const struct lockset *s)
{
	static char buf[512];
	struct got g = { .n = 0 };
	size_t off = 0;

	lockset_each(s, collect, &g);
	qsort(g.v, (size_t)g.n, sizeof(g.v[0]), by_start);
	buf[0] = '\0';
	for (int i = 0; i < g.n; i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%llu-%lld:%c",
					i ? " " : "", (unsigned long long)g.v[i].start,
					g.v[i].end == PROTO_LK_EOF ? -1LL : (long long)g.v[i].end,
					g.v[i].type == PROTO_LK_WRLCK ? 'w' : 'r');
	return buf;
}

/* Split, merge, downgrade, conflicts, drops and a full set. */
static void test_lockset(void)
{
	struct lockset s;
	struct lockset_lock w;

	lockset_init(&s, 100);
	w = L(1, 0, 99, PROTO_LK_WRLCK);
	CHECK(lockset_apply(&s, &w) == 0, "lock");
	w = L(1, 40, 59, PROTO_LK_UNLCK);
	CHECK(lockset_apply(&s, &w) == 0 && !strcmp(dump(&s), "0-39:w 60-99:w"),
	      "punch: %s", dump(&s));
	w = L(1, 40, 59, PROTO_LK_WRLCK);
	CHECK(lockset_apply(&s, &w) == 0 && !strcmp(dump(&s), "0-99:w"),
	      "merge: %s", dump(&s));
	w = L(1, 20, 29, PROTO_LK_RDLCK);
	CHECK(lockset_apply(&s, &w) == 0 &&
	      !strcmp(dump(&s), "0-19:w 20-29:r 30-99:w") && s.count == 3,
	      "downgrade inside: %s", dump(&s));
	w = L(1, 10, 200, PROTO_LK_RDLCK);
	CHECK(lockset_apply(&s, &w) == 0 && !strcmp(dump(&s), "0-9:w 10-200:r"),
	      "downgrade over: %s", dump(&s));
	w = L(1, 201, PROTO_LK_EOF, PROTO_LK_RDLCK);
	CHECK(lockset_apply(&s, &w) == 0 && !strcmp(dump(&s), "0-9:w 10--1:r"),
	      "adjacent merge to EOF: %s", dump(&s));
	w = L(1, 0, PROTO_LK_EOF, PROTO_LK_UNLCK);
	CHECK(lockset_apply(&s, &w) == 0 && s.count == 0, "unlock all");

	/* conflicts: other owner, overlap, one writer; same owner never */
	w = L(1, 10, 19, PROTO_LK_RDLCK);
	lockset_apply(&s, &w);
	w = L(2, 15, 30, PROTO_LK_RDLCK);
	CHECK(!lockset_conflict(&s, &w), "read/read");
	w.type = PROTO_LK_WRLCK;
	CHECK(lockset_conflict(&s, &w) && lockset_conflict(&s, &w)->owner == 1,
	      "read/write");
	w.start = 20;
	CHECK(!lockset_conflict(&s, &w), "no overlap");
	w = L(1, 0, 100, PROTO_LK_WRLCK);
	CHECK(!lockset_conflict(&s, &w), "own lock");
	w = L(2, 0, 100, PROTO_LK_WRLCK);
	w.kind = PROTO_LK_FLOCK;
	CHECK(!lockset_conflict(&s, &w), "flock vs posix");
	w = L(2, 0, 100, PROTO_LK_WRLCK);
	w.ino = 2;
	CHECK(!lockset_conflict(&s, &w), "other inode");
	w = L(2, 0, 100, PROTO_LK_WRLCK);
	w.session = 2;
	w.owner = 1;
	CHECK(lockset_conflict(&s, &w), "same owner id, other session");
	CHECK(lockset_owner_holds(&s, 1, 1, 1, PROTO_LK_POSIX) &&
	      !lockset_owner_holds(&s, 1, 1, 2, PROTO_LK_POSIX), "holds");
	CHECK(lockset_drop_owner(&s, 1, 1, 1, PROTO_LK_POSIX) == 1 && s.count == 0,
	      "drop owner");
	/* a full set refuses, atomically */
	lockset_fini(&s);
	lockset_init(&s, 2);
	w = L(1, 0, 99, PROTO_LK_WRLCK);
	CHECK(lockset_apply(&s, &w) == 0, "one");
	w = L(1, 10, 19, PROTO_LK_RDLCK);
	CHECK(lockset_apply(&s, &w) == -ENOLCK && !strcmp(dump(&s), "0-99:w"),
	      "full: %s", dump(&s));
	lockset_fini(&s);
	lockset_init(&s, 100);
	w = L(1, 0, 9, PROTO_LK_WRLCK);
	lockset_apply(&s, &w);
	w = L(2, 20, 29, PROTO_LK_WRLCK);
	w.session = 2;
	lockset_apply(&s, &w);
	CHECK(lockset_drop_session(&s, 2) == 1 && s.count == 1, "drop session");
	lockset_fini(&s);
}

/* lockset_drop_sessions match: sessions in [lo, hi] (arg: uint64_t[2]). */
static int in_range(uint64_t session, size_t nlocks, void *arg)
{
	const uint64_t *r = arg;

	return session >= r[0] && session <= r[1];
}

/* lockset_each callback: count. */
static int count_one(const struct lockset_lock *l, void *arg)
{
	(*(size_t *)arg)++;
	return 0;
}

/* Whether session q's write lock on [b, b] conflicts, and with whom. */
static uint64_t blocker(struct lockset *s, uint64_t q, uint64_t b)
{
	struct lockset_lock w = L(1, b, b, PROTO_LK_WRLCK);
	const struct lockset_lock *c;

	w.session = q;
	c = lockset_conflict(s, &w);
	return c ? c->session : 0;
}

/* Dropping many sessions at once: a few of a file's locks go one by one,
 * most of them in one pass over its trees; what stays stays findable. */
static void test_lockset_drop_sessions(void)
{
	uint64_t r[2];
	struct lockset s;
	struct lockset_lock w;
	size_t n = 0;

	lockset_init(&s, 1000);
	for (uint64_t i = 1; i <= 100; i++) {
		w = L(1, i, i, PROTO_LK_WRLCK);
		w.session = i;
		lockset_apply(&s, &w);
	}
	w = L(1, 1000, 2000, PROTO_LK_RDLCK);
	w.session = 200;
	lockset_apply(&s, &w);
	r[0] = 1, r[1] = 2; /* few: one by one */
	CHECK(lockset_drop_sessions(&s, in_range, r) == 2 && s.count == 99,
	      "drop few: %zu", s.count);
	CHECK(blocker(&s, 300, 1) == 0 && blocker(&s, 300, 3) == 3, "after few");
	r[0] = 3, r[1] = 90; /* most: one pass */
	CHECK(lockset_drop_sessions(&s, in_range, r) == 88 && s.count == 11,
	      "drop most: %zu", s.count);
	CHECK(blocker(&s, 300, 50) == 0 && blocker(&s, 300, 95) == 95 &&
	      blocker(&s, 300, 1500) == 200 && blocker(&s, 95, 95) == 0,
	      "after most");
	lockset_each(&s, count_one, &n);
	CHECK(n == 11, "each %zu", n);
	r[0] = 0, r[1] = UINT64_MAX;
	CHECK(lockset_drop_sessions(&s, in_range, r) == 11 && s.count == 0, "all");
	w = L(1, 5, 5, PROTO_LK_WRLCK);
	CHECK(lockset_apply(&s, &w) == 0 && blocker(&s, 300, 5) == 1, "anew");
	lockset_fini(&s);
}

/* Reference model for test_lockset_model: per owner, the type held on
 * each of MB bytes (0 none). Owner 0..MO-1 is session 1, owner id o+1. */
#define MO 3
#define MB 40
static uint8_t model[MO][MB];

/* The model's runs of owner o, counted, checked against the set's locks:
 * same count and each set lock a maximal run of one type. */
struct runs {
	int bad, n[MO];
};

/* lockset_each callback: check one lock against the model. */
static int model_lock(const struct lockset_lock *l, void *arg)
{
	struct runs *r = arg;
	int o = (int)l->owner - 1;
	uint64_t end = l->end == PROTO_LK_EOF ? MB - 1 : l->end;

	if (o < 0 || o >= MO || end >= MB) {
		r->bad++;
		return 0;
	}
	r->n[o]++;
	for (uint64_t b = l->start; b <= end; b++)
		if (model[o][b] != l->type)
			r->bad++;
	if ((l->start > 0 && model[o][l->start - 1] == l->type) ||
	    (end + 1 < MB && model[o][end + 1] == l->type))
		r->bad++; /* not merged with its neighbour */
	return 0;
}

/* Whether the model has a lock of another owner than q conflicting with
 * type t over [s, e]. */
static int model_conflict(int q, uint64_t s, uint64_t e, uint8_t t)
{
	for (int o = 0; o < MO; o++)
		for (uint64_t b = s; o != q && b <= e; b++)
			if (model[o][b] && (t == PROTO_LK_WRLCK ||
					    model[o][b] == PROTO_LK_WRLCK))
				return 1;
	return 0;
}

/*
 * Random applies (every owner, any types, no conflict check, as the client
 * record sees them) against the byte model: after each, the set's locks
 * are exactly the model's maximal runs and conflict searches agree with
 * the model. Ranges stay within MB bytes (an end of EOF stands for MB-1).
 */
static void test_lockset_model(void)
{
	static const uint8_t types[] = { PROTO_LK_RDLCK, PROTO_LK_WRLCK,
					 PROTO_LK_UNLCK };
	struct lockset s;
	unsigned seed = 12345;
	int bad = 0;

	memset(model, 0, sizeof(model));
	lockset_init(&s, 1000);
	for (int i = 0; i < 20000 && !bad; i++) {
		int o = rand_r(&seed) % MO;
		uint64_t a = (uint64_t)(rand_r(&seed) % MB);
		uint64_t b = a + (uint64_t)(rand_r(&seed) % (int)(MB - a));
		uint8_t t = types[rand_r(&seed) % 3];
		struct lockset_lock w = L((uint64_t)o + 1, a,
					  b == MB - 1 ? PROTO_LK_EOF : b, t);
		struct runs r = { 0, { 0 } };
		size_t runs = 0;

		if (lockset_apply(&s, &w)) {
			bad = 1;
			break;
		}
		for (uint64_t x = a; x <= b; x++)
			model[o][x] = t == PROTO_LK_UNLCK ? 0 : t;
		lockset_each(&s, model_lock, &r);
		for (int k = 0; k < MO; k++)
			for (int x = 0; x < MB; x++)
				runs += model[k][x] &&
					(x == 0 || model[k][x - 1] != model[k][x]);
		if (r.bad || s.count != runs)
			bad = 2;
		/* a random query of a random owner */
		o = rand_r(&seed) % (MO + 1);
		a = (uint64_t)(rand_r(&seed) % MB);
		b = a + (uint64_t)(rand_r(&seed) % (int)(MB - a));
		t = types[rand_r(&seed) % 2];
		w = L((uint64_t)o + 1, a, b, t);
		if (!lockset_conflict(&s, &w) != !model_conflict(o, a, b, t))
			bad = 3;
	}
	CHECK(!bad, "lockset agrees with the byte model (%d)", bad);
	lockset_fini(&s);
}

/* --------------------------------------------------------------- mgr_lock */

/* Deferred replies as they arrive. */
struct done {
	void *ctx;
	int status;
	struct proto_lockrep rep;
};
static struct done dq[32];
static int ndq;
static int ngranted; /* every deferred reply with status 0 */

/* mgr_lock_done_fn: record a deferred reply. */
static void done_cb(void *ctx, int status, const struct proto_lockrep *rep,
		    void *arg)
{
	if (status == 0)
		ngranted++;
	if (ndq < 32) {
		dq[ndq].ctx = ctx;
		dq[ndq].status = status;
		if (rep)
			dq[ndq].rep = *rep;
		ndq++;
	}
}

/* A LOCK request of (session, owner) on inode 1. */
static struct proto_lock Q(uint64_t sess, uint64_t owner, uint8_t cmd,
			   uint8_t type, uint64_t s, uint64_t e)
{
	return (struct proto_lock){ .session = sess, .owner = owner, .ino = 1,
				    .start = s, .end = e, .pid = 100 + (uint32_t)owner,
				    .wait_ms = cmd == PROTO_LK_WAIT ? 1000 : 0,
				    .id = cmd == PROTO_LK_WAIT ? owner : 0,
				    .lease_ms = 2000, .type = type,
				    .kind = PROTO_LK_POSIX, .cmd = cmd };
}

/* Run a LOCK request at time now; the reply body is dropped. */
static int req(struct mgr_lock *ml, struct proto_lock q, uint64_t now, void *ctx)
{
	struct proto_lockrep rep;

	return mgr_lock_request(ml, PROTO_OP_LOCK, &q, NULL, now, ctx, &rep);
}

/* Queue, FIFO grant, slice end, cancel (queued and early), DROP. */
static void test_waits(void)
{
	struct mgr_lock *ml;
	struct proto_lockrep rep;
	struct proto_lock q;
	int ctx1, ctx2;
	size_t nl, nw, ns;

	CHECK(mgr_lock_new(&ml, 0, 0, 77, done_cb, NULL) == 0, "new");
	CHECK(req(ml, Q(1, 1, PROTO_LK_SET, PROTO_LK_WRLCK, 0, 9), 0, NULL) == 0, "a");
	CHECK(req(ml, Q(2, 1, PROTO_LK_SET, PROTO_LK_RDLCK, 5, 5), 0, NULL) == -EAGAIN,
	      "conflict");
	q = Q(2, 1, PROTO_LK_GET, PROTO_LK_RDLCK, 5, 5);
	CHECK(mgr_lock_request(ml, PROTO_OP_LOCK, &q, NULL, 0, NULL, &rep) == 0 &&
	      rep.type == PROTO_LK_WRLCK && rep.start == 0 && rep.end == 9 &&
	      rep.pid == 101 && rep.boot == 77, "getlk");
	/* a waiter is queued, woken by the unlock, FIFO before a later one */
	ndq = 0;
	CHECK(req(ml, Q(2, 1, PROTO_LK_WAIT, PROTO_LK_WRLCK, 0, 0), 0, &ctx1) == 1,
	      "queued");
	CHECK(req(ml, Q(3, 1, PROTO_LK_WAIT, PROTO_LK_WRLCK, 0, 0), 0, &ctx2) == 1,
	      "queued 2");
	CHECK(req(ml, Q(1, 1, PROTO_LK_SET, PROTO_LK_UNLCK, 0, PROTO_LK_EOF), 1, NULL) == 0,
	      "unlock");
	CHECK(ndq == 1 && dq[0].ctx == &ctx1 && dq[0].status == 0 &&
	      dq[0].rep.type == PROTO_LK_WRLCK, "first waiter granted");
	CHECK(mgr_lock_woken(ml) == 1, "woken %llu",
	      (unsigned long long)mgr_lock_woken(ml));
	/* the second one's slice runs out: -ETIME, ask again */
	mgr_lock_tick(ml, 999);
	CHECK(ndq == 1, "slice not over");
	mgr_lock_tick(ml, 1000);
	CHECK(ndq == 2 && dq[1].ctx == &ctx2 && dq[1].status == -ETIME, "slice over");
	/* cancel: of a queued wait, and of one not there yet */
	CHECK(req(ml, Q(3, 1, PROTO_LK_WAIT, PROTO_LK_WRLCK, 0, 0), 1000, &ctx2) == 1,
	      "queued again");
	q = (struct proto_lock){ .session = 3, .id = 1, .lease_ms = 2000 };
	CHECK(mgr_lock_request(ml, PROTO_OP_LOCK_CANCEL, &q, NULL, 1000, NULL, &rep) == 0 &&
	      ndq == 3 && dq[2].status == -EINTR, "cancel queued");
	q.id = 9;
	CHECK(mgr_lock_request(ml, PROTO_OP_LOCK_CANCEL, &q, NULL, 1000, NULL, &rep) == -ENOENT,
	      "cancel early");
	q = Q(3, 9, PROTO_LK_WAIT, PROTO_LK_WRLCK, 0, 0);
	CHECK(req(ml, q, 1000, &ctx2) == -EINTR, "wait after its cancel");
	/* DROP wakes too */
	CHECK(req(ml, Q(3, 1, PROTO_LK_WAIT, PROTO_LK_WRLCK, 0, 0), 1000, &ctx2) == 1, "q3");
	q = Q(2, 1, PROTO_LK_DROP, PROTO_LK_UNLCK, 0, PROTO_LK_EOF);
	CHECK(mgr_lock_request(ml, PROTO_OP_LOCK, &q, NULL, 1000, NULL, &rep) == 0 &&
	      ndq == 4 && dq[3].status == 0, "drop wakes");
	mgr_lock_counts(ml, &nl, &nw, &ns);
	CHECK(nl == 1 && nw == 0 && ns == 3, "counts %zu %zu %zu", nl, nw, ns);
	mgr_lock_free(ml);
}

/* A three-owner cycle gets EDEADLK; other owners and flock never do. */
static void test_deadlock(void)
{
	struct mgr_lock *ml;
	int c1, c2;
	struct proto_lock q;

	mgr_lock_new(&ml, 0, 0, 1, done_cb, NULL);
	ndq = 0;
	/* A holds 0, B holds 1, C holds 2 */
	req(ml, Q(1, 1, PROTO_LK_SET, PROTO_LK_WRLCK, 0, 0), 0, NULL);
	req(ml, Q(2, 1, PROTO_LK_SET, PROTO_LK_WRLCK, 1, 1), 0, NULL);
	req(ml, Q(3, 1, PROTO_LK_SET, PROTO_LK_WRLCK, 2, 2), 0, NULL);
	CHECK(req(ml, Q(1, 1, PROTO_LK_WAIT, PROTO_LK_WRLCK, 1, 1), 0, &c1) == 1,
	      "A waits for B");
	CHECK(req(ml, Q(2, 1, PROTO_LK_WAIT, PROTO_LK_WRLCK, 2, 2), 0, &c2) == 1,
	      "B waits for C");
	CHECK(req(ml, Q(3, 1, PROTO_LK_WAIT, PROTO_LK_WRLCK, 0, 0), 0, NULL) == -EDEADLK,
	      "C waiting for A closes the cycle");
	CHECK(req(ml, Q(3, 2, PROTO_LK_WAIT, PROTO_LK_WRLCK, 0, 0), 0, &c2) == 1,
	      "another owner of the same client: no cycle");
	/* flock: no detection (the kernel's rule) */
	q = Q(1, 7, PROTO_LK_SET, PROTO_LK_WRLCK, 0, PROTO_LK_EOF);
	q.kind = PROTO_LK_FLOCK;
	req(ml, q, 0, NULL);
	q = Q(3, 1, PROTO_LK_WAIT, PROTO_LK_WRLCK, 0, PROTO_LK_EOF);
	q.kind = PROTO_LK_FLOCK;
	CHECK(req(ml, q, 0, &c2) == 1, "flock waits, never EDEADLK");
	mgr_lock_free(ml); /* waiters finish with -ETIME */
	CHECK(ndq == 4 && dq[0].status == -ETIME, "free answers %d", ndq);
}

/* A chain of 1000 owners, each waiting for the next one's lock: the wait
 * of the last for the first's lock closes it, found through the chain. */
static void test_deadlock_chain(void)
{
	static int ctx[1000];
	struct mgr_lock *ml;
	int bad = 0;

	mgr_lock_new(&ml, 0, 0, 1, done_cb, NULL);
	for (uint64_t i = 0; i < 1000; i++)
		bad |= req(ml, Q(1 + i, 1, PROTO_LK_SET, PROTO_LK_WRLCK, i, i), 0, NULL);
	for (uint64_t i = 0; i + 1 < 1000; i++)
		bad |= req(ml, Q(1 + i, 1, PROTO_LK_WAIT, PROTO_LK_WRLCK, i + 1, i + 1),
			   0, &ctx[i]) != 1;
	CHECK(!bad, "chain set up");
	CHECK(req(ml, Q(1000, 1, PROTO_LK_WAIT, PROTO_LK_WRLCK, 0, 0), 0, NULL) ==
	      -EDEADLK, "the chain's last closes the cycle");
	CHECK(req(ml, Q(1001, 1, PROTO_LK_WAIT, PROTO_LK_WRLCK, 0, 0), 0, &ctx[999]) == 1,
	      "an owner outside the chain waits");
	mgr_lock_free(ml);
}

/* A silent session loses its locks after its lease; grace admits only
 * reclaims and releases, reclaims after it fail. */
static void test_lease_and_grace(void)
{
	struct mgr_lock *ml;
	struct proto_lockrep rep;
	struct proto_lock q;
	int c1;
	size_t nl, nw, ns;

	mgr_lock_new(&ml, 0, 0, 5, done_cb, NULL);
	ndq = 0;
	req(ml, Q(1, 1, PROTO_LK_SET, PROTO_LK_WRLCK, 0, 9), 0, NULL);
	CHECK(req(ml, Q(2, 1, PROTO_LK_WAIT, PROTO_LK_WRLCK, 0, 0), 0, &c1) == 1, "wait");
	/* session 1 renews at 1500, then falls silent */
	q = (struct proto_lock){ .session = 1, .lease_ms = 2000 };
	CHECK(mgr_lock_request(ml, PROTO_OP_LOCK_KEEPALIVE, &q, NULL, 1500, NULL, &rep) == 0 &&
	      !(rep.flags & PROTO_LKR_NEWSESSION) && rep.boot == 5, "keepalive");
	mgr_lock_tick(ml, 3500);
	mgr_lock_counts(ml, &nl, &nw, &ns);
	CHECK(nl == 1, "within the lease");
	mgr_lock_tick(ml, 3501);
	CHECK(ndq >= 1 && dq[0].ctx == &c1 && dq[0].status == -ETIME,
	      "the waiter's slice ended first");
	CHECK(req(ml, Q(2, 1, PROTO_LK_WAIT, PROTO_LK_WRLCK, 0, 0), 3501, &c1) == 0,
	      "lease over: locks gone, granted at once");
	q = (struct proto_lock){ .session = 1, .lease_ms = 2000 };
	CHECK(mgr_lock_request(ml, PROTO_OP_LOCK_KEEPALIVE, &q, NULL, 3600, NULL, &rep) == 0 &&
	      (rep.flags & PROTO_LKR_NEWSESSION), "the late client learns it");
	mgr_lock_free(ml);

	/* grace: only reclaims and releases until it ends */
	mgr_lock_new(&ml, 3000, 1000, 6, done_cb, NULL);
	CHECK(req(ml, Q(1, 1, PROTO_LK_SET, PROTO_LK_WRLCK, 0, 9), 1000, NULL) ==
	      -EINPROGRESS, "new lock in grace");
	q = Q(1, 1, PROTO_LK_GET, PROTO_LK_WRLCK, 0, 9);
	CHECK(req(ml, q, 1000, NULL) == -EINPROGRESS, "getlk in grace");
	q = Q(1, 1, PROTO_LK_SET, PROTO_LK_WRLCK, 0, 9);
	q.flags = PROTO_LKF_RECLAIM;
	CHECK(req(ml, q, 1000, NULL) == 0, "reclaim in grace");
	CHECK(req(ml, Q(1, 1, PROTO_LK_SET, PROTO_LK_UNLCK, 5, 5), 2000, NULL) == 0,
	      "unlock in grace");
	CHECK(req(ml, Q(2, 1, PROTO_LK_SET, PROTO_LK_RDLCK, 0, 0), 4000, NULL) == -EAGAIN,
	      "after grace: the reclaimed lock holds");
	CHECK(req(ml, Q(2, 1, PROTO_LK_SET, PROTO_LK_RDLCK, 5, 5), 4000, NULL) == 0,
	      "after grace: the unlocked hole is free");
	q.session = 3;
	CHECK(req(ml, q, 4000, NULL) == -ENOLCK, "reclaim after grace");
	/* a reclaim after the grace of what the owner holds: granted */
	q = Q(1, 1, PROTO_LK_SET, PROTO_LK_WRLCK, 0, 4);
	q.flags = PROTO_LKF_RECLAIM;
	CHECK(req(ml, q, 4000, NULL) == 0, "reclaim of a held lock");
	q = Q(1, 1, PROTO_LK_SET, PROTO_LK_WRLCK, 0, 9);
	q.flags = PROTO_LKF_RECLAIM;
	CHECK(req(ml, q, 4000, NULL) == -ENOLCK, "reclaim across the hole");
	mgr_lock_free(ml);
}

/* Monotonic milliseconds, fractional. */
static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#define RC_HOLDERS 60000 /* read locks on one inode, one owner each */
#define RC_WAITERS 4000  /* write waiters on it, one session each */

/*
 * The worst case of a release: RC_HOLDERS read locks on one inode (owner
 * i on byte 2i) under one read lock X over the whole file, and RC_WAITERS
 * write waiters (waiter j on bytes 2j..2j+1, blocked by holder j and X).
 * X's unlock makes every waiter a candidate and grants none; the drop of
 * holder 0 grants waiter 0; the lease expiry of every holder grants the
 * rest. Each release must make a bounded number of lock and waiter
 * visits (mgr_lock_work: deterministic, where a wall-clock bound failed
 * on a loaded machine); a wake-up that walks the inode's locks for each
 * waiter does RC_HOLDERS x RC_WAITERS. The times are printed only.
 */
static void test_release_cost(void)
{
	static int ctx[RC_WAITERS];
	struct mgr_lock *ml;
	struct proto_lock q;
	uint64_t w0;
	double t0, t1, t2;
	size_t nl, nw, ns;
	int bad = 0;

	mgr_lock_new(&ml, 0, 0, 9, done_cb, NULL);
	ndq = ngranted = 0;
	q = Q(1, 1000000, PROTO_LK_SET, PROTO_LK_RDLCK, 0, PROTO_LK_EOF);
	bad |= req(ml, q, 0, NULL);
	for (uint64_t i = 0; i < RC_HOLDERS; i++) {
		q = Q(1 + i % 64, i + 1, PROTO_LK_SET, PROTO_LK_RDLCK, 2 * i, 2 * i);
		bad |= req(ml, q, 0, NULL);
	}
	for (uint64_t j = 0; j < RC_WAITERS; j++) {
		q = Q(1000 + j, 1, PROTO_LK_WAIT, PROTO_LK_WRLCK, 2 * j, 2 * j + 1);
		q.wait_ms = 100000;
		bad |= req(ml, q, 0, &ctx[j]) != 1;
	}
	mgr_lock_counts(ml, &nl, &nw, &ns);
	CHECK(!bad && nl == RC_HOLDERS + 1 && nw == RC_WAITERS, "set up %zu %zu",
	      nl, nw);

	w0 = mgr_lock_work(ml);
	t0 = now_ms();
	q = Q(1, 1000000, PROTO_LK_SET, PROTO_LK_UNLCK, 0, PROTO_LK_EOF);
	CHECK(req(ml, q, 0, NULL) == 0 && ndq == 0, "X unlocks, nobody granted");
	t1 = now_ms() - t0;
	w0 = mgr_lock_work(ml) - w0;
	printf("release over %d waiters and %d locks: %.2f ms, %llu visits\n",
	       RC_WAITERS, RC_HOLDERS, t1, (unsigned long long)w0);
	CHECK(w0 < 100 * RC_WAITERS, "release visited %llu", (unsigned long long)w0);

	w0 = mgr_lock_work(ml);
	t0 = now_ms();
	q = Q(1, 1, PROTO_LK_DROP, PROTO_LK_UNLCK, 0, PROTO_LK_EOF);
	CHECK(req(ml, q, 0, NULL) == 0 && ndq == 1 && dq[0].ctx == &ctx[0] &&
	      dq[0].status == 0, "holder 0 drops: waiter 0 granted");
	t2 = now_ms() - t0;
	w0 = mgr_lock_work(ml) - w0;
	printf("drop granting one of %d waiters: %.2f ms, %llu visits\n",
	       RC_WAITERS, t2, (unsigned long long)w0);
	CHECK(w0 < 100 * RC_WAITERS, "drop visited %llu", (unsigned long long)w0);

	/* the holders' sessions fall silent; the waiters' are kept by their
	 * waits: every remaining waiter is granted in one tick */
	w0 = mgr_lock_work(ml);
	t0 = now_ms();
	mgr_lock_tick(ml, 2001);
	t2 = now_ms() - t0;
	w0 = mgr_lock_work(ml) - w0;
	mgr_lock_counts(ml, &nl, &nw, &ns);
	printf("lease expiry of %d locks granting %d waiters: %.2f ms, %llu visits\n",
	       RC_HOLDERS - 1, RC_WAITERS - 1, t2, (unsigned long long)w0);
	/* waiter 0's session, silent since it was granted, goes too */
	CHECK(ngranted == RC_WAITERS && nw == 0 && nl == RC_WAITERS - 1 &&
	      ns == RC_WAITERS - 1, "expiry: %d granted, %zu %zu %zu", ngranted,
	      nl, nw, ns);
	CHECK(w0 < 100 * RC_WAITERS, "expiry visited %llu", (unsigned long long)w0);
	mgr_lock_free(ml);
}

/* Sessions are capped, in all and per client host: a new one past
 * MGR_LOCK_MAX_SESSIONS or its host's MGR_LOCK_MAX_CLIENT_SESSIONS gets
 * -ENOLCK, known ones go on, and room comes back as sessions expire. */
static void test_session_cap(void)
{
	struct mgr_lock *ml;
	struct proto_lockrep rep;
	struct proto_lock q = { .lease_ms = 1000 };
	int bad = 0;
	size_t nl, nw, ns;

	mgr_lock_new(&ml, 0, 0, 3, done_cb, NULL);
	for (uint64_t i = 1; i <= MGR_LOCK_MAX_SESSIONS; i++) {
		q.session = i;
		bad |= mgr_lock_request(ml, PROTO_OP_LOCK_KEEPALIVE, &q, NULL, 0, NULL,
					&rep);
	}
	CHECK(!bad, "sessions up to the cap");
	q.session = MGR_LOCK_MAX_SESSIONS + 1;
	CHECK(mgr_lock_request(ml, PROTO_OP_LOCK_KEEPALIVE, &q, NULL, 0, NULL, &rep) ==
	      -ENOLCK, "keepalive of a new session past the cap");
	CHECK(req(ml, Q(MGR_LOCK_MAX_SESSIONS + 1, 1, PROTO_LK_SET, PROTO_LK_WRLCK,
			0, 0), 0, NULL) == -ENOLCK, "lock of a new session past the cap");
	CHECK(req(ml, Q(7, 1, PROTO_LK_SET, PROTO_LK_WRLCK, 0, 0), 500, NULL) == 0,
	      "a known session locks");
	mgr_lock_tick(ml, 1001); /* all but session 7 (renewed at 500) expire */
	mgr_lock_counts(ml, &nl, &nw, &ns);
	CHECK(ns == 1 && nl == 1, "expired: %zu sessions", ns);
	CHECK(req(ml, Q(MGR_LOCK_MAX_SESSIONS + 1, 1, PROTO_LK_SET, PROTO_LK_RDLCK,
			5, 5), 1001, NULL) == 0, "room again");
	mgr_lock_free(ml);

	/* one client host makes at most MGR_LOCK_MAX_CLIENT_SESSIONS */
	mgr_lock_new(&ml, 0, 0, 4, done_cb, NULL);
	for (uint64_t i = 1; i <= MGR_LOCK_MAX_CLIENT_SESSIONS; i++) {
		q.session = i;
		bad |= mgr_lock_request(ml, PROTO_OP_LOCK_KEEPALIVE, &q, "10.0.0.1",
					0, NULL, &rep);
	}
	CHECK(!bad, "a client's sessions up to its cap");
	q.session = 5000;
	CHECK(mgr_lock_request(ml, PROTO_OP_LOCK_KEEPALIVE, &q, "10.0.0.1", 0,
			       NULL, &rep) == -ENOLCK, "a new session past it");
	CHECK(mgr_lock_request(ml, PROTO_OP_LOCK_KEEPALIVE, &q, "10.0.0.2", 0,
			       NULL, &rep) == 0, "another client's");
	q.session = 5001;
	CHECK(mgr_lock_request(ml, PROTO_OP_LOCK_KEEPALIVE, &q, NULL, 0, NULL,
			       &rep) == 0, "one of no client");
	q.session = 1;
	CHECK(mgr_lock_request(ml, PROTO_OP_LOCK_KEEPALIVE, &q, "10.0.0.1", 500,
			       NULL, &rep) == 0 && !(rep.flags & PROTO_LKR_NEWSESSION),
	      "a known session of the client at its cap");
	mgr_lock_tick(ml, 1001); /* all but session 1 expire */
	mgr_lock_counts(ml, &nl, &nw, &ns);
	CHECK(ns == 1, "expired: %zu sessions", ns);
	q.session = 6000;
	CHECK(mgr_lock_request(ml, PROTO_OP_LOCK_KEEPALIVE, &q, "10.0.0.1", 1001,
			       NULL, &rep) == 0, "room again for the client");
	mgr_lock_free(ml);
}

int main(void)
{
	test_lockset();
	test_lockset_model();
	test_lockset_drop_sessions();
	test_waits();
	test_deadlock();
	test_deadlock_chain();
	test_lease_and_grace();
	test_release_cost();
	test_session_cap();
	return check_summary("test_mgr_lock");
}
