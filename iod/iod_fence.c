/*
 * iod_fence.c - the lease and fence set of an iod, and the IO_FENCE op;
 * see iod_fence.h and mgr/ha/README.md "Fencing".
 *
 * The sets are open-addressing hash sets of inode numbers (linear probing,
 * backward-shift deletion, so no tombstones; 0 marks an empty slot, as
 * inode 0 never exists), grown by doubling at 3/4 load and freed when a
 * large one is cleared. At the cap of 4 Mi inodes a set takes 64 MiB.
 */
#include "iod_fence.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define SET_MIN_BITS 4        /* smallest table: 16 slots */
#define SET_KEEP_SLOTS 1024   /* a cleared table up to this size is kept */
#define NS_PER_MS 1000000ull

/* One remembered IO_FENCE message (seq 0: empty entry). */
struct fence_msg {
	uint64_t seq;
	uint64_t recv_ns;     /* CLOCK_MONOTONIC when it was received */
	uint32_t lease_ms;
};

/* A hash set of inode numbers. */
struct fence_set {
	uint64_t *slot;       /* 1 << bits slots, 0 = empty; NULL when bits 0 */
	unsigned bits;
	uint32_t n;           /* inodes in the set */
};

/* The fence state (loop thread only, as every field). */
struct iod_fence {
	struct fence_msg ring[IOD_FENCE_RING]; /* recent messages */
	unsigned ring_next;   /* the entry the next message overwrites */
	uint64_t lease_until; /* monotonic ns; 0 = never leased */
	int ever_leased;      /* the lease was in force at some point */
	struct fence_set live;    /* the set in force */
	struct fence_set staging; /* the set being loaded */
	int complete;         /* live is a whole set from the mgr */
	int loading;          /* a RESET started staging, no COMPLETE yet */
	uint32_t max_inos;    /* cap per set */
	int cap_logged;       /* the cap error was logged (until a COMPLETE) */
	iod_fence_clock_fn clock;
	void *clock_arg;
	uint64_t max_token;   /* the highest mgr token seen (0: none); kept in
			       * memory only, see mgr/ha/README.md
			       * "Several mgrs, one active" */
};

/* The default clock: CLOCK_MONOTONIC in ns. */
uint64_t iod_fence_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* iod_fence_clock_fn of the default clock. */
static uint64_t default_clock(void *arg)
{
	(void)arg;
	return iod_fence_now_ns();
}

/* ------------------------------------------------------------- hash set */

/* Home slot of ino (Fibonacci hashing: the high bits of the product). */
static size_t set_home(const struct fence_set *s, uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> (64 - s->bits));
}

/* Whether ino is in s. Cost: one probe sequence (short at <= 3/4 load). */
static int set_has(const struct fence_set *s, uint64_t ino)
{
	size_t mask, i;

	if (!s->bits)
		return 0;
	mask = ((size_t)1 << s->bits) - 1;
	for (i = set_home(s, ino); s->slot[i]; i = (i + 1) & mask)
		if (s->slot[i] == ino)
			return 1;
	return 0;
}

/* Put ino (not in s) into a table with a free slot. */
static void set_place(struct fence_set *s, uint64_t ino)
{
	size_t mask = ((size_t)1 << s->bits) - 1, i;

	for (i = set_home(s, ino); s->slot[i]; i = (i + 1) & mask)
		;
	s->slot[i] = ino;
	s->n++;
}

/* Rehash s into a table of twice its size (16 slots when empty).
 * Cost: O(slots). @return 0, -ENOMEM (s unchanged) */
static int set_grow(struct fence_set *s)
{
	struct fence_set g = { NULL, s->bits ? s->bits + 1 : SET_MIN_BITS, 0 };
	size_t old = s->bits ? (size_t)1 << s->bits : 0;

	g.slot = calloc((size_t)1 << g.bits, sizeof(*g.slot));
	if (!g.slot)
		return -ENOMEM;
	for (size_t i = 0; i < old; i++)
		if (s->slot[i])
			set_place(&g, s->slot[i]);
	free(s->slot);
	*s = g;
	return 0;
}

/* Add ino to s unless it is there. @return 0, -ENOSPC s holds max
 * inodes already, -ENOMEM */
static int set_add(struct fence_set *s, uint64_t ino, uint32_t max)
{
	int rc;

	if (set_has(s, ino))
		return 0;
	if (s->n >= max)
		return -ENOSPC;
	if (!s->bits || ((uint64_t)s->n + 1) * 4 > ((uint64_t)3 << s->bits)) {
		rc = set_grow(s);
		if (rc < 0)
			return rc;
	}
	set_place(s, ino);
	return 0;
}

/* Remove ino from s if it is there, shifting back the entries of its
 * probe run so that every lookup still finds its inode. */
static void set_del(struct fence_set *s, uint64_t ino)
{
	size_t mask, i, j;

	if (!s->bits)
		return;
	mask = ((size_t)1 << s->bits) - 1;
	for (i = set_home(s, ino); s->slot[i] != ino; i = (i + 1) & mask)
		if (!s->slot[i])
			return;
	s->slot[i] = 0;
	s->n--;
	for (j = (i + 1) & mask; s->slot[j]; j = (j + 1) & mask) {
		size_t home = set_home(s, s->slot[j]);

		/* the entry may fill the hole unless its home lies in (i, j] */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			s->slot[i] = s->slot[j];
			s->slot[j] = 0;
			i = j;
		}
	}
}

/* Empty s; a large table is freed rather than kept. */
static void set_clear(struct fence_set *s)
{
	size_t slots = s->bits ? (size_t)1 << s->bits : 0;

	if (slots > SET_KEEP_SLOTS) {
		free(s->slot);
		s->slot = NULL;
		s->bits = 0;
	} else if (slots) {
		memset(s->slot, 0, slots * sizeof(*s->slot));
	}
	s->n = 0;
}

/* ------------------------------------------------------------ the state */

/* See iod_fence.h. */
int iod_fence_new(struct iod_fence **out)
{
	struct iod_fence *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->max_inos = IOD_FENCE_MAX_INOS;
	f->clock = default_clock;
	*out = f;
	return 0;
}

/* See iod_fence.h. */
void iod_fence_free(struct iod_fence *f)
{
	if (!f)
		return;
	free(f->live.slot);
	free(f->staging.slot);
	free(f);
}

/* See iod_fence.h. */
void iod_fence_set_clock(struct iod_fence *f, iod_fence_clock_fn fn,
			 void *arg)
{
	f->clock = fn ? fn : default_clock;
	f->clock_arg = fn ? arg : NULL;
}

/* See iod_fence.h. */
void iod_fence_set_max(struct iod_fence *f, uint32_t max_inos)
{
	if (max_inos >= 1 && max_inos <= IOD_FENCE_MAX_INOS)
		f->max_inos = max_inos;
}

/* The remembered message with that seq, or NULL (seq 0 never matches). */
static const struct fence_msg *ring_find(const struct iod_fence *f,
					 uint64_t seq)
{
	for (unsigned i = 0; seq && i < IOD_FENCE_RING; i++)
		if (f->ring[i].seq == seq)
			return &f->ring[i];
	return NULL;
}

/* Remember message m received at now, overwriting the oldest entry. A seq
 * remembered already keeps its first receive time: a duplicate (or a
 * restarted mgr numbering from 1 again) can only shorten a lease. */
static void ring_record(struct iod_fence *f, const struct proto_fence *m,
			uint64_t now)
{
	struct fence_msg *e;

	if (ring_find(f, m->seq))
		return;
	e = &f->ring[f->ring_next];
	f->ring_next = (f->ring_next + 1) % IOD_FENCE_RING;
	e->seq = m->seq;
	e->recv_ns = now;
	e->lease_ms = m->lease_ms;
}

/* Apply a confirm: the lease runs to (receive time + lease_ms) of the
 * confirmed message, if that is later than now's end. A confirm that names
 * no remembered message does nothing. Logs when the lease comes into
 * force after none or after a lapse. */
static void lease_confirm(struct iod_fence *f, uint64_t confirm, uint64_t now)
{
	const struct fence_msg *e = ring_find(f, confirm);
	uint64_t until;

	if (!e)
		return;
	until = e->recv_ns + e->lease_ms * NS_PER_MS;
	if (until <= f->lease_until)
		return;
	if (now >= f->lease_until && now < until) {
		if (f->ever_leased)
			log_notice("fence: lease regained (lapsed %llu ms ago), "
				   "%llu ms left",
				   (unsigned long long)((now - f->lease_until) / NS_PER_MS),
				   (unsigned long long)((until - now) / NS_PER_MS));
		else
			log_notice("fence: lease gained from the mgr, %llu ms left",
				   (unsigned long long)((until - now) / NS_PER_MS));
		f->ever_leased = 1;
	}
	f->lease_until = until;
}

/* A set hit its cap (or could not grow): abandon any load and refuse
 * mirrored reads until the mgr loads a whole set again; log it once. */
static void set_overflow(struct iod_fence *f, int rc, uint64_t seq)
{
	if (!f->cap_logged)
		log_err("fence: IO_FENCE seq %llu: %s at %u inodes; refusing "
			"mirrored reads until the mgr sends a whole set again",
			(unsigned long long)seq,
			rc == -ENOSPC ? "fence set too large" : "out of memory",
			f->loading ? f->staging.n : f->live.n);
	f->cap_logged = 1;
	f->complete = 0;
	f->loading = 0;
	set_clear(&f->staging);
}

/* The add list then the del list of m to s. @return 0, -ENOSPC, -ENOMEM */
static int set_apply_lists(struct fence_set *s, const struct proto_fence *m,
			   uint32_t max)
{
	for (uint32_t i = 0; i < m->add.n; i++) {
		int rc = set_add(s, proto_inos_at(&m->add, i), max);

		if (rc < 0)
			return rc;
	}
	for (uint32_t i = 0; i < m->del.n; i++)
		set_del(s, proto_inos_at(&m->del, i));
	return 0;
}

/* RESET, the lists and COMPLETE of m. @return 0, -ENOSPC, -ENOMEM */
static int fence_apply_set(struct iod_fence *f, const struct proto_fence *m)
{
	struct fence_set t;
	int rc;

	if (m->flags & PROTO_FENCE_RESET) {
		set_clear(&f->staging);
		f->loading = 1;
	}
	rc = set_apply_lists(f->loading ? &f->staging : &f->live, m,
			     f->max_inos);
	if (rc < 0) {
		set_overflow(f, rc, m->seq);
		return rc;
	}
	if (!(m->flags & PROTO_FENCE_COMPLETE))
		return 0;
	t = f->live;
	f->live = f->staging;
	f->staging = t;
	set_clear(&f->staging);
	f->loading = 0;
	f->cap_logged = 0;
	if (!f->complete)
		log_notice("fence: a complete fence set is in force, %u inodes "
			   "fenced", f->live.n);
	else
		log_info("fence: fence set reloaded, %u inodes fenced", f->live.n);
	f->complete = 1;
	return 0;
}

/* See iod_fence.h. */
int iod_fence_handle(struct iod_fence *f, const struct proto_fence *m,
		     uint64_t now_ns, struct proto_fencestate *st)
{
	int rc = 0;

	if (m->token < f->max_token) {
		log_notice("fence: IO_FENCE seq %llu from a mgr with token %llu, "
			   "below %llu: a mgr that lost its leadership; refused",
			   (unsigned long long)m->seq,
			   (unsigned long long)m->token,
			   (unsigned long long)f->max_token);
		rc = -ESTALE;
	} else if ((m->flags & PROTO_FENCE_COMPLETE) &&
	    !(m->flags & PROTO_FENCE_RESET) && !f->loading) {
		log_notice("fence: IO_FENCE seq %llu: COMPLETE but no fence set "
			   "is being loaded (no RESET since the last COMPLETE "
			   "or a restart): refused",
			   (unsigned long long)m->seq);
		rc = -EINVAL;
	} else {
		f->max_token = m->token;
		lease_confirm(f, m->confirm, now_ns);
		ring_record(f, m, now_ns);
		rc = fence_apply_set(f, m);
	}
	iod_fence_state(f, now_ns, st);
	return rc;
}

/* See iod_fence.h. */
void iod_fence_state(const struct iod_fence *f, uint64_t now_ns,
		     struct proto_fencestate *st)
{
	uint64_t left = 0;

	memset(st, 0, sizeof(*st));
	st->leased = now_ns < f->lease_until;
	st->complete = f->complete != 0;
	st->loading = f->loading != 0;
	st->nfenced = f->live.n;
	if (st->leased)
		left = (f->lease_until - now_ns + NS_PER_MS - 1) / NS_PER_MS;
	st->lease_left_ms = left > PROTO_MAX_LEASE_MS ? PROTO_MAX_LEASE_MS
						       : (uint32_t)left;
}

/* See iod_fence.h. */
int iod_fence_check(const struct iod_fence *f, uint64_t ino, uint64_t now_ns)
{
	if (!f->complete || now_ns >= f->lease_until || set_has(&f->live, ino))
		return -ESTALE;
	return 0;
}

/* See iod_fence.h. */
int iod_fence_gate(const struct iod_fence *f, uint16_t op,
		   const struct proto_ioreq *q)
{
	if (op != PROTO_OP_IO_READ && op != PROTO_OP_IO_SEEK)
		return 0;
	if (!(q->flags & PROTO_IO_MIRROR))
		return 0;
	return iod_fence_check(f, q->ino, f->clock(f->clock_arg));
}

/* See iod_fence.h. Cost: the decode and apply, O(inodes of the body). */
void iod_fence_serve(struct iod_fence *f, struct net_sreq *r)
{
	struct proto_fence m;
	struct proto_fencestate st;
	const char *why = NULL;
	uint8_t body[32];
	struct wbuf w;
	int rc;

	rc = proto_fence_decode(r->body, r->body_len, &m, &why);
	if (rc < 0) {
		/* loop thread only, and the transport logs it at once */
		static char msg[80];

		snprintf(msg, sizeof(msg), "bad IO_FENCE body (%s)",
			 why ? why : "malformed");
		net_sreq_reject(r, msg);
		return;
	}
	rc = iod_fence_handle(f, &m, f->clock(f->clock_arg), &st);
	wb_init(&w, body, sizeof(body));
	if (proto_fencestate_encode(&w, &st) < 0 || w.err) {
		log_err("fence: IO_FENCE reply does not encode");
		net_sreq_reply(r, -EIO, NULL, 0);
		return;
	}
	net_sreq_reply(r, rc, body, (uint32_t)w.len);
}
