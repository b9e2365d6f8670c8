/*
 * test_iod_fence.c - unit test of the iod's fence state (iod_fence.c): the
 * lease by confirmation (receive times, lapse, the ring), the fence set
 * with RESET / COMPLETE staging, add-then-del order, COMPLETE without a
 * load, the gate for flagged and unflagged reads, the inode cap, the hash
 * set against a reference, and what is logged. Every message goes through
 * proto_fence_encode / proto_fence_decode first, as on the wire. Times are
 * injected; nothing sleeps.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "iod_fence.h"
#include "log.h"
#include "proto.h"

#include "check_cond.h"

#define MS(x) ((uint64_t)(x) * 1000000ull)
#define T0 MS(1000000) /* an arbitrary monotonic start, far from 0 */
#define LIST(...) ((const uint64_t[]){ __VA_ARGS__ })
#define NOLIST NULL, 0

static struct proto_fencestate st; /* state after the last send() */
static uint64_t send_token;        /* the token send() puts in messages */

/*
 * Deliver one IO_FENCE message to f at time now, encoded and decoded as on
 * the wire (lists read from the decoded body).
 * @return iod_fence_handle's status; st holds the state after it
 */
static int send(struct iod_fence *f, uint64_t now, uint64_t seq,
		uint64_t confirm, uint32_t lease_ms, uint32_t flags,
		const uint64_t *add, uint32_t nadd, const uint64_t *del,
		uint32_t ndel)
{
	static uint8_t buf[PROTO_MAX_BODY];
	struct proto_fence m = { .seq = seq, .confirm = confirm,
				 .lease_ms = lease_ms, .flags = flags,
				 .add = { nadd, add, NULL },
				 .del = { ndel, del, NULL },
				 .token = send_token };
	struct proto_fence d;
	const char *why = NULL;
	struct wbuf w;

	wb_init(&w, buf, sizeof(buf));
	if (proto_fence_encode(&w, &m) < 0 || w.err ||
	    proto_fence_decode(buf, w.len, &d, &why) < 0) {
		fprintf(stderr, "fence message seq %llu does not round trip (%s)\n",
			(unsigned long long)seq, why ? why : "encode");
		failures++;
		return -999;
	}
	return iod_fence_handle(f, &d, now, &st);
}

/* A fresh fence state (exits on ENOMEM: nothing else can be tested). */
static struct iod_fence *mk(void)
{
	struct iod_fence *f = NULL;

	if (iod_fence_new(&f) < 0) {
		fprintf(stderr, "iod_fence_new failed\n");
		exit(1);
	}
	return f;
}

/* A fresh state leased until now + 60 s, with a complete set of the
 * given inodes in force (messages seq 1 and 2). */
static struct iod_fence *mk_leased(uint64_t now, const uint64_t *ino,
				   uint32_t n)
{
	struct iod_fence *f = mk();

	CHECK_EQ(send(f, now, 1, 0, 60000, PROTO_FENCE_ALL, ino, n, NOLIST), 0);
	CHECK_EQ(send(f, now, 2, 1, 60000, 0, NOLIST, NOLIST), 0);
	CHECK(st.leased && st.complete && !st.loading);
	return f;
}

/* A fresh iod has no lease and no set: every mirrored read is refused. */
static void test_fresh(void)
{
	struct iod_fence *f = mk();

	CHECK_EQ(iod_fence_check(f, 5, T0), -ESTALE);
	CHECK_EQ(iod_fence_check(f, 5, 0), -ESTALE);
	iod_fence_state(f, T0, &st);
	CHECK(!st.leased && !st.complete && !st.loading);
	CHECK_EQ(st.nfenced, 0);
	CHECK_EQ(st.lease_left_ms, 0);
	/* a lease without a complete set is not enough ... */
	CHECK_EQ(send(f, T0, 1, 0, 8000, 0, NOLIST, NOLIST), 0);
	CHECK_EQ(send(f, T0, 2, 1, 8000, 0, NOLIST, NOLIST), 0);
	CHECK(st.leased && !st.complete);
	CHECK_EQ(iod_fence_check(f, 5, T0 + MS(1)), -ESTALE);
	/* ... a complete set makes it */
	CHECK_EQ(send(f, T0 + MS(2), 3, 0, 8000, PROTO_FENCE_ALL, NOLIST, NOLIST), 0);
	CHECK(st.leased && st.complete);
	CHECK_EQ(iod_fence_check(f, 5, T0 + MS(3)), 0);
	iod_fence_free(f);
}

/* The lease comes from confirmations only, and runs from the receive time
 * of the confirmed message. */
static void test_lease_confirm(void)
{
	struct iod_fence *f = mk();

	CHECK_EQ(send(f, T0, 1, 0, 8000, PROTO_FENCE_ALL, NOLIST, NOLIST), 0);
	CHECK(!st.leased && st.complete); /* unconfirmed: no lease */
	CHECK_EQ(st.lease_left_ms, 0);
	CHECK_EQ(iod_fence_check(f, 7, T0 + MS(1)), -ESTALE);
	/* a confirm of a seq never received grants nothing */
	CHECK_EQ(send(f, T0 + MS(100), 2, 99, 8000, 0, NOLIST, NOLIST), 0);
	CHECK(!st.leased);
	CHECK_EQ(iod_fence_check(f, 7, T0 + MS(101)), -ESTALE);
	/* a late confirm of 1: the lease ends 8 s after 1 was RECEIVED */
	CHECK_EQ(send(f, T0 + MS(3000), 3, 1, 8000, 0, NOLIST, NOLIST), 0);
	CHECK(st.leased);
	CHECK_EQ(st.lease_left_ms, 5000);
	CHECK_EQ(iod_fence_check(f, 7, T0 + MS(3000)), 0);
	CHECK_EQ(iod_fence_check(f, 7, T0 + MS(8000) - 1), 0);
	/* lapse */
	CHECK_EQ(iod_fence_check(f, 7, T0 + MS(8000)), -ESTALE);
	iod_fence_state(f, T0 + MS(8000), &st);
	CHECK(!st.leased && st.complete);
	CHECK_EQ(st.lease_left_ms, 0);
	/* a confirm of 3 (received at +3 s) after the lapse: regained */
	CHECK_EQ(send(f, T0 + MS(9000), 4, 3, 8000, 0, NOLIST, NOLIST), 0);
	CHECK(st.leased);
	CHECK_EQ(st.lease_left_ms, 2000);
	CHECK_EQ(iod_fence_check(f, 7, T0 + MS(11000) - 1), 0);
	CHECK_EQ(iod_fence_check(f, 7, T0 + MS(11000)), -ESTALE);
	/* an older confirm never shortens it; confirm 0 is none */
	CHECK_EQ(send(f, T0 + MS(9500), 5, 1, 8000, 0, NOLIST, NOLIST), 0);
	CHECK_EQ(st.lease_left_ms, 1500);
	CHECK_EQ(send(f, T0 + MS(9600), 6, 0, 8000, 0, NOLIST, NOLIST), 0);
	CHECK_EQ(st.lease_left_ms, 1400);
	/* a confirmed message granting 0 ms grants nothing */
	CHECK_EQ(send(f, T0 + MS(20000), 7, 0, 0, 0, NOLIST, NOLIST), 0);
	CHECK_EQ(send(f, T0 + MS(20001), 8, 7, 8000, 0, NOLIST, NOLIST), 0);
	CHECK(!st.leased);
	iod_fence_free(f);
}

/* A message cannot confirm itself; the ring forgets the oldest of 9; a
 * seq received twice keeps its first receive time. */
static void test_lease_ring(void)
{
	struct iod_fence *f = mk();

	CHECK_EQ(send(f, T0, 10, 10, 8000, PROTO_FENCE_ALL, NOLIST, NOLIST), 0);
	CHECK(!st.leased);
	for (uint64_t s = 11; s < 11 + IOD_FENCE_RING; s++)
		CHECK_EQ(send(f, T0 + MS(s), s, 0, 8000, 0, NOLIST, NOLIST), 0);
	CHECK_EQ(send(f, T0 + MS(100), 30, 10, 8000, 0, NOLIST, NOLIST), 0);
	CHECK(!st.leased); /* 10 was pushed out of the ring */
	CHECK_EQ(send(f, T0 + MS(100), 31, 12, 8000, 0, NOLIST, NOLIST), 0);
	CHECK(st.leased);
	CHECK_EQ(st.lease_left_ms, 8000 - 100 + 12);
	iod_fence_free(f);

	f = mk();
	CHECK_EQ(send(f, T0, 1, 0, 8000, PROTO_FENCE_ALL, NOLIST, NOLIST), 0);
	CHECK_EQ(send(f, T0 + MS(5000), 1, 0, 8000, 0, NOLIST, NOLIST), 0);
	CHECK_EQ(send(f, T0 + MS(6000), 2, 1, 8000, 0, NOLIST, NOLIST), 0);
	CHECK(st.leased);
	CHECK_EQ(st.lease_left_ms, 2000);
	iod_fence_free(f);

	/* the longest lease, confirmed at once: left capped at the maximum */
	f = mk();
	CHECK_EQ(send(f, T0, 1, 0, PROTO_MAX_LEASE_MS, 0, NOLIST, NOLIST), 0);
	CHECK_EQ(send(f, T0, 2, 1, 0, 0, NOLIST, NOLIST), 0);
	CHECK_EQ(st.lease_left_ms, PROTO_MAX_LEASE_MS);
	iod_fence_free(f);
}

/* RESET stages a new set; the old one stays in force until COMPLETE. */
static void test_staging(void)
{
	struct iod_fence *f = mk_leased(T0, LIST(5), 1);
	uint64_t t = T0 + MS(10);

	CHECK_EQ(st.nfenced, 1);
	CHECK_EQ(iod_fence_check(f, 5, t), -ESTALE);
	CHECK_EQ(iod_fence_check(f, 6, t), 0);
	CHECK_EQ(send(f, t, 3, 2, 60000, PROTO_FENCE_RESET, LIST(6, 7), 2, NOLIST), 0);
	CHECK(st.loading && st.complete && st.leased);
	CHECK_EQ(st.nfenced, 1);
	CHECK_EQ(iod_fence_check(f, 5, t), -ESTALE); /* old set in force */
	CHECK_EQ(iod_fence_check(f, 6, t), 0);       /* only staged: served */
	CHECK_EQ(iod_fence_check(f, 7, t), 0);
	CHECK_EQ(send(f, t, 4, 3, 60000, 0, LIST(8), 1, LIST(7), 1), 0);
	CHECK(st.loading);
	CHECK_EQ(iod_fence_check(f, 8, t), 0);
	CHECK_EQ(send(f, t, 5, 4, 60000, PROTO_FENCE_COMPLETE, NOLIST, NOLIST), 0);
	CHECK(!st.loading && st.complete);
	CHECK_EQ(st.nfenced, 2);
	CHECK_EQ(iod_fence_check(f, 5, t), 0);
	CHECK_EQ(iod_fence_check(f, 6, t), -ESTALE);
	CHECK_EQ(iod_fence_check(f, 7, t), 0);
	CHECK_EQ(iod_fence_check(f, 8, t), -ESTALE);
	/* not loading: lists change the set in force */
	CHECK_EQ(send(f, t, 6, 5, 60000, 0, LIST(9), 1, NOLIST), 0);
	CHECK_EQ(iod_fence_check(f, 9, t), -ESTALE);
	CHECK_EQ(send(f, t, 7, 6, 60000, 0, NOLIST, LIST(6), 1), 0);
	CHECK_EQ(iod_fence_check(f, 6, t), 0);
	CHECK_EQ(st.nfenced, 2);
	/* a second RESET restarts the load */
	CHECK_EQ(send(f, t, 8, 7, 60000, PROTO_FENCE_RESET, LIST(20), 1, NOLIST), 0);
	CHECK_EQ(send(f, t, 9, 8, 60000, PROTO_FENCE_RESET, LIST(21), 1, NOLIST), 0);
	CHECK_EQ(send(f, t, 10, 9, 60000, PROTO_FENCE_COMPLETE, NOLIST, NOLIST), 0);
	CHECK_EQ(st.nfenced, 1);
	CHECK_EQ(iod_fence_check(f, 20, t), 0);
	CHECK_EQ(iod_fence_check(f, 21, t), -ESTALE);
	CHECK_EQ(iod_fence_check(f, 8, t), 0);
	iod_fence_free(f);
}

/* Within one message the add list goes first, then the del list. */
static void test_add_then_del(void)
{
	struct iod_fence *f = mk_leased(T0, LIST(8), 1);
	uint64_t t = T0 + MS(1);

	CHECK_EQ(send(f, t, 3, 2, 60000, 0, LIST(10, 8), 2, LIST(10, 8), 2), 0);
	CHECK_EQ(iod_fence_check(f, 10, t), 0);
	CHECK_EQ(iod_fence_check(f, 8, t), 0);
	CHECK_EQ(st.nfenced, 0);
	/* the same in a load */
	CHECK_EQ(send(f, t, 4, 3, 60000, PROTO_FENCE_ALL, LIST(11, 12), 2,
		      LIST(11), 1), 0);
	CHECK_EQ(st.nfenced, 1);
	CHECK_EQ(iod_fence_check(f, 11, t), 0);
	CHECK_EQ(iod_fence_check(f, 12, t), -ESTALE);
	/* deleting what is not there, adding what is: no change */
	CHECK_EQ(send(f, t, 5, 4, 60000, 0, LIST(12), 1, LIST(99), 1), 0);
	CHECK_EQ(st.nfenced, 1);
	iod_fence_free(f);
}

/* COMPLETE with no load under way is refused and changes nothing. */
static void test_complete_without_load(void)
{
	struct iod_fence *f = mk();

	CHECK_EQ(send(f, T0, 1, 0, 8000, PROTO_FENCE_COMPLETE, NOLIST, NOLIST),
		 -EINVAL);
	CHECK(!st.complete && !st.loading && !st.leased);
	iod_fence_free(f);

	f = mk_leased(T0, LIST(5), 1);
	CHECK_EQ(send(f, T0 + MS(1), 3, 2, PROTO_MAX_LEASE_MS, PROTO_FENCE_COMPLETE,
		      LIST(30), 1, LIST(5), 1), -EINVAL);
	CHECK(st.complete && !st.loading && st.leased);
	CHECK_EQ(st.nfenced, 1);
	CHECK_EQ(iod_fence_check(f, 30, T0 + MS(1)), 0);
	CHECK_EQ(iod_fence_check(f, 5, T0 + MS(1)), -ESTALE);
	/* the refused message was not remembered: confirming it grants nothing */
	CHECK_EQ(send(f, T0 + MS(59000), 4, 3, 8000, 0, NOLIST, NOLIST), 0);
	CHECK_EQ(st.lease_left_ms, 1000);
	/* nor its confirm applied: a refused message confirming 4 */
	CHECK_EQ(send(f, T0 + MS(59500), 5, 4, 8000, PROTO_FENCE_COMPLETE, NOLIST,
		      NOLIST), -EINVAL);
	CHECK_EQ(st.lease_left_ms, 500);
	iod_fence_free(f);
}

static uint64_t fake_now;
static int clock_reads;

/* The test's clock for iod_fence_gate. */
static uint64_t fake_clock(void *arg)
{
	CHECK(arg == &fake_now);
	clock_reads++;
	return fake_now;
}

/* The gate: flagged IO_READ / IO_SEEK are checked at the module's clock;
 * anything else passes without a look at the clock. */
static void test_gate(void)
{
	struct iod_fence *f = mk();
	struct proto_ioreq q = { .ino = 5 };

	iod_fence_set_clock(f, fake_clock, &fake_now);
	fake_now = T0;
	CHECK_EQ(iod_fence_gate(f, PROTO_OP_IO_READ, &q), 0);
	q.flags = PROTO_SEEK_HOLE;
	CHECK_EQ(iod_fence_gate(f, PROTO_OP_IO_SEEK, &q), 0);
	q.flags = PROTO_IO_MIRROR;
	CHECK_EQ(iod_fence_gate(f, PROTO_OP_IO_WRITE, &q), 0);
	CHECK_EQ(iod_fence_gate(f, PROTO_OP_IO_TRUNCATE, &q), 0);
	CHECK_EQ(iod_fence_gate(f, PROTO_OP_IO_CSUM, &q), 0);
	CHECK_EQ(clock_reads, 0);
	CHECK_EQ(iod_fence_gate(f, PROTO_OP_IO_READ, &q), -ESTALE);
	q.flags = PROTO_IO_MIRROR | PROTO_SEEK_HOLE;
	CHECK_EQ(iod_fence_gate(f, PROTO_OP_IO_SEEK, &q), -ESTALE);
	CHECK_EQ(clock_reads, 2);

	CHECK_EQ(send(f, T0, 1, 0, 8000, PROTO_FENCE_ALL, LIST(5), 1, NOLIST), 0);
	CHECK_EQ(send(f, T0, 2, 1, 8000, 0, NOLIST, NOLIST), 0);
	q.ino = 6;
	CHECK_EQ(iod_fence_gate(f, PROTO_OP_IO_SEEK, &q), 0);
	q.flags = PROTO_IO_MIRROR;
	CHECK_EQ(iod_fence_gate(f, PROTO_OP_IO_READ, &q), 0);
	q.ino = 5;
	CHECK_EQ(iod_fence_gate(f, PROTO_OP_IO_READ, &q), -ESTALE);
	q.flags = 0;
	CHECK_EQ(iod_fence_gate(f, PROTO_OP_IO_READ, &q), 0); /* unflagged */
	q.ino = 6;
	q.flags = PROTO_IO_MIRROR;
	fake_now = T0 + MS(8000);
	CHECK_EQ(iod_fence_gate(f, PROTO_OP_IO_READ, &q), -ESTALE); /* lapsed */
	iod_fence_set_clock(f, NULL, NULL); /* back to CLOCK_MONOTONIC */
	CHECK(iod_fence_now_ns() > 0);
	iod_fence_free(f);
}

/* At the cap a set refuses more inodes: -ENOSPC, and no complete set
 * until the mgr loads a whole one again. */
static void test_cap(void)
{
	struct iod_fence *f = mk_leased(T0, LIST(1, 2, 3), 3);
	uint64_t t = T0 + MS(1);

	iod_fence_set_max(f, 4);
	CHECK_EQ(send(f, t, 3, 2, 60000, 0, LIST(4, 1), 2, NOLIST), 0);
	CHECK_EQ(st.nfenced, 4);
	CHECK_EQ(iod_fence_check(f, 9, t), 0);
	CHECK_EQ(send(f, t, 4, 3, 60000, 0, LIST(5), 1, NOLIST), -ENOSPC);
	CHECK(!st.complete && !st.loading && st.leased);
	CHECK_EQ(iod_fence_check(f, 9, t), -ESTALE); /* fail safe */
	/* incremental messages do not make it whole again */
	CHECK_EQ(send(f, t, 5, 4, 60000, 0, NOLIST, LIST(1, 2), 2), 0);
	CHECK(!st.complete);
	CHECK_EQ(iod_fence_check(f, 9, t), -ESTALE);
	/* a whole set within the cap does */
	CHECK_EQ(send(f, t, 6, 5, 60000, PROTO_FENCE_ALL, LIST(1, 2, 3, 4), 4,
		      NOLIST), 0);
	CHECK(st.complete);
	CHECK_EQ(st.nfenced, 4);
	CHECK_EQ(iod_fence_check(f, 9, t), 0);
	CHECK_EQ(iod_fence_check(f, 4, t), -ESTALE);
	/* a load past the cap is abandoned: its COMPLETE is then refused */
	CHECK_EQ(send(f, t, 7, 6, 60000, PROTO_FENCE_RESET, LIST(1, 2, 3, 4, 5), 5,
		      NOLIST), -ENOSPC);
	CHECK(!st.complete && !st.loading);
	CHECK_EQ(send(f, t, 8, 7, 60000, PROTO_FENCE_COMPLETE, NOLIST, NOLIST),
		 -EINVAL);
	CHECK(!st.complete);
	CHECK_EQ(iod_fence_check(f, 9, t), -ESTALE);
	/* an out-of-range hook value is ignored */
	iod_fence_set_max(f, 0);
	CHECK_EQ(send(f, t, 9, 8, 60000, PROTO_FENCE_ALL, LIST(1, 2, 3, 4), 4,
		      NOLIST), 0);
	CHECK(st.complete);
	iod_fence_free(f);
}

/* Many adds and deletes through the growing table agree with a bitmap. */
static void test_set_reference(void)
{
	enum { RANGE = 40000, ROUNDS = 400 };
	static uint8_t ref[RANGE + 1];
	static uint64_t add[PROTO_MAX_INOS], del[PROTO_MAX_INOS];
	struct iod_fence *f = mk_leased(T0, NOLIST);
	uint64_t x = 88172645463325252ull, seq = 3;
	uint32_t n = 0;
	int bad = 0;

	for (int r = 0; r < ROUNDS; r++) {
		uint32_t na = 0, nd = 0;

		for (int i = 0; i < PROTO_MAX_INOS; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			uint64_t ino = 1 + x % RANGE;

			/* grow for the first half, then mostly delete */
			if ((x >> 32) % 4 < (r < ROUNDS / 2 ? 3u : 1u))
				add[na++] = ino;
			else
				del[nd++] = ino;
		}
		CHECK_EQ(send(f, T0, seq, seq - 1, 60000, 0, add, na, del, nd), 0);
		seq++;
		for (uint32_t i = 0; i < na; i++)
			ref[add[i]] = 1;
		for (uint32_t i = 0; i < nd; i++)
			ref[del[i]] = 0;
	}
	for (uint64_t i = 1; i <= RANGE; i++) {
		n += ref[i];
		bad += (iod_fence_check(f, i, T0) == 0) != !ref[i];
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(st.nfenced, n);
	CHECK(n > 0);
	iod_fence_free(f);
}

static char logbuf[8192];

/* Run fn with stderr going to a temporary file, whose text lands in
 * logbuf. */
static void capture(void (*fn)(void))
{
	FILE *tmp = tmpfile();
	int saved = dup(2);
	size_t n;

	fflush(stderr);
	dup2(fileno(tmp), 2);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	n = fread(logbuf, 1, sizeof(logbuf) - 1, tmp);
	logbuf[n] = '\0';
	fclose(tmp);
}

/* Count occurrences of s in logbuf. */
static int count(const char *s)
{
	int c = 0;

	for (const char *p = logbuf; (p = strstr(p, s)); p++)
		c++;
	return c;
}

/* The logged story of one iod: gain, reads, lapse, regain, a new set. */
static void log_story(void)
{
	struct iod_fence *f = mk();

	send(f, T0, 1, 0, 8000, PROTO_FENCE_ALL, LIST(5), 1, NOLIST);
	send(f, T0, 2, 1, 8000, 0, NOLIST, NOLIST);
	send(f, T0 + MS(2000), 3, 2, 8000, 0, NOLIST, NOLIST);
	for (int i = 0; i < 100; i++) {
		iod_fence_check(f, 5, T0 + MS(3000));
		iod_fence_check(f, 6, T0 + MS(3000));
	}
	send(f, T0 + MS(20000), 4, 3, 8000, 0, NOLIST, NOLIST); /* too late */
	send(f, T0 + MS(21000), 5, 4, 8000, 0, NOLIST, NOLIST);
	send(f, T0 + MS(21000), 6, 5, 8000, PROTO_FENCE_ALL, LIST(5, 6), 2, NOLIST);
	iod_fence_set_max(f, 2);
	send(f, T0 + MS(21000), 7, 6, 8000, 0, LIST(7), 1, NOLIST);
	send(f, T0 + MS(21000), 8, 7, 8000, 0, LIST(8), 1, NOLIST);
	send(f, T0 + MS(21000), 9, 8, 8000, PROTO_FENCE_COMPLETE, NOLIST, NOLIST);
	iod_fence_free(f);
}

/* Notices at lease gain / regain and for a complete set; one error for
 * the cap however often it is hit; nothing per read. */
static void test_logging(void)
{
	log_init("test_iod_fence", LOG_INFO);
	capture(log_story);
	fputs(logbuf, stderr);
	CHECK_EQ(count("<5>test_iod_fence: fence: lease gained"), 1);
	CHECK_EQ(count("<5>test_iod_fence: fence: lease regained"), 1);
	CHECK_EQ(count("complete fence set is in force, 1 inodes"), 1);
	CHECK_EQ(count("fence set reloaded, 2 inodes"), 1);
	CHECK_EQ(count("<3>"), 1);
	CHECK_EQ(count("fence set too large"), 1);
	CHECK_EQ(count("COMPLETE but no fence set is being loaded"), 1);
	CHECK_EQ(count("\n"), 6);
}

/* A message from a mgr whose token is below the highest seen (a mgr that
 * lost its leadership) is refused whole: its set changes, its confirm and
 * its own seq (for a later confirm) are all ignored. */
static void test_old_token(void)
{
	struct iod_fence *f = mk();

	send_token = 5;
	CHECK_EQ(send(f, T0, 1, 0, 8000, PROTO_FENCE_ALL, LIST(7), 1, NOLIST), 0);
	CHECK_EQ(send(f, T0, 2, 1, 8000, 0, NOLIST, NOLIST), 0);
	CHECK(st.leased && st.complete);
	CHECK_EQ(st.nfenced, 1);
	send_token = 4;
	CHECK_EQ(send(f, T0 + MS(7000), 3, 2, 8000, 0, NOLIST, LIST(7), 1),
		 -ESTALE);
	CHECK_EQ(st.nfenced, 1);
	CHECK_EQ(iod_fence_check(f, 7, T0 + MS(7001)), -ESTALE);
	send_token = 0; /* no token at all is below 5 too */
	CHECK_EQ(send(f, T0 + MS(7000), 4, 2, 8000, 0, NOLIST, NOLIST), -ESTALE);
	/* the new mgr (token 6) confirms seq 3: never recorded, no lease */
	send_token = 6;
	CHECK_EQ(send(f, T0 + MS(7100), 5, 3, 8000, 0, NOLIST, NOLIST), 0);
	iod_fence_state(f, T0 + MS(8001), &st);
	CHECK(!st.leased);
	/* and from now on token 5 is old as well */
	send_token = 5;
	CHECK_EQ(send(f, T0 + MS(7200), 6, 5, 8000, 0, NOLIST, NOLIST), -ESTALE);
	send_token = 0;
	iod_fence_free(f);
}

int main(void)
{
	test_fresh();
	test_lease_confirm();
	test_lease_ring();
	test_staging();
	test_add_then_del();
	test_complete_without_load();
	test_gate();
	test_cap();
	test_set_reference();
	test_logging();
	test_old_token();
	if (failures) {
		fprintf(stderr, "test_iod_fence: %d failures\n", failures);
		return 1;
	}
	printf("test_iod_fence: ok\n");
	return 0;
}
