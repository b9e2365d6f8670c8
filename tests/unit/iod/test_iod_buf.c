/* test_iod_buf.c - unit test of the iod buffer zone allocator. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iod_buf.h"

#include "check_cond.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

/* Pool with the given counts per zone. */
static struct iod_buf_pool *mkpool(unsigned c0, unsigned c1, unsigned c2,
				   unsigned c3, unsigned c4, unsigned c5)
{
	struct iod_buf_config c = { { c0, c1, c2, c3, c4, c5 } };
	struct iod_buf_pool *p = NULL;

	if (iod_buf_pool_new(&p, &c) != 0) {
		fprintf(stderr, "pool_new failed\n");
		exit(1);
	}
	return p;
}

/* Matching zone first, then larger, then chop from smaller. */
static void test_zone_choice(void)
{
	struct iod_buf_pool *p = mkpool(1, 1, 1, 0, 1, 1);
	struct iod_buf a, b, c, d, e, f;

	CHECK(iod_buf_get(p, 0, &a) == -EINVAL);
	CHECK(iod_buf_get(p, 100 * KiB, &a) == 0 && a.size == 128 * KiB && a.zone == 1);
	/* 128K zone empty: next larger (256K). */
	CHECK(iod_buf_get(p, 128 * KiB, &b) == 0 && b.size == 256 * KiB);
	/* 512K zone has none: larger (1M). */
	CHECK(iod_buf_get(p, 300 * KiB, &c) == 0 && c.size == MiB);
	/* Beyond 2 MiB: capped at the 2 MiB zone. */
	CHECK(iod_buf_get(p, 8 * MiB, &d) == 0 && d.size == 2 * MiB);
	/* Nothing >= 1M left: chop from the largest smaller zone, 64K. */
	CHECK(iod_buf_get(p, MiB, &e) == 0 && e.size == 64 * KiB);
	CHECK(iod_buf_get(p, 4 * KiB, &f) == -EAGAIN);
	/* Buffers are distinct, writable, and sized as promised. */
	memset(a.p, 1, a.size);
	memset(b.p, 2, b.size);
	memset(c.p, 3, c.size);
	memset(d.p, 4, d.size);
	memset(e.p, 5, e.size);
	CHECK(((char *)a.p)[a.size - 1] == 1 && ((char *)e.p)[0] == 5);
	iod_buf_put(p, &a);
	iod_buf_put(p, &b);
	iod_buf_put(p, &c);
	iod_buf_put(p, &d);
	iod_buf_put(p, &e);
	CHECK(iod_buf_nfree(p, 0) == 1 && iod_buf_nfree(p, 1) == 1 &&
	      iod_buf_nfree(p, 2) == 1 && iod_buf_nfree(p, 3) == 0 &&
	      iod_buf_nfree(p, 4) == 1 && iod_buf_nfree(p, 5) == 1);
	iod_buf_pool_free(p);
}

/* A 2 MiB request with only small buffers free is chopped into pieces. */
static void test_chopping(void)
{
	struct iod_buf_pool *p = mkpool(4, 2, 0, 0, 0, 1);
	struct iod_buf big, pieces[8];
	size_t got = 0;
	int n = 0;

	CHECK(iod_buf_get(p, 2 * MiB, &big) == 0 && big.size == 2 * MiB);
	/* The next 2 MiB transfer takes what it can: 128K pieces, then 64K. */
	while (got < 2 * MiB && n < 8 && iod_buf_get(p, 2 * MiB - got, &pieces[n]) == 0)
		got += pieces[n++].size;
	CHECK(n == 6);
	CHECK(pieces[0].size == 128 * KiB && pieces[1].size == 128 * KiB);
	CHECK(pieces[2].size == 64 * KiB && pieces[5].size == 64 * KiB);
	CHECK(got == 512 * KiB);
	for (int i = 0; i < n; i++)
		iod_buf_put(p, &pieces[i]);
	iod_buf_put(p, &big);
	iod_buf_pool_free(p);
}

static int woken;
static struct iod_buf woken_buf;

static void on_wake(struct iod_buf_waiter *w)
{
	woken++;
	woken_buf = w->buf;
}

/* Exhaustion queues waiters; release hands buffers over in FIFO order and
 * nobody jumps the queue while waiters exist. */
static void test_exhaustion(void)
{
	struct iod_buf_pool *p = mkpool(2, 0, 0, 0, 0, 0);
	struct iod_buf a, b, c;
	struct iod_buf_waiter w1 = { .fn = on_wake }, w2 = { .fn = on_wake },
			      w3 = { .fn = on_wake };

	CHECK(iod_buf_get(p, 64 * KiB, &a) == 0);
	CHECK(iod_buf_get(p, 64 * KiB, &b) == 0);
	CHECK(iod_buf_get(p, 64 * KiB, &c) == -EAGAIN);
	iod_buf_wait(p, &w1);
	iod_buf_wait(p, &w2);
	iod_buf_wait(p, &w3);
	iod_buf_cancel(p, &w2);
	CHECK(!w2.queued);
	iod_buf_put(p, &a);
	CHECK(woken == 1 && woken_buf.p == a.p && !w1.queued && w3.queued);
	CHECK(iod_buf_nfree(p, 0) == 0);
	/* A waiter is queued: a fresh get must not take a released buffer. */
	iod_buf_put(p, &b);
	CHECK(woken == 2 && woken_buf.p == b.p && !w3.queued);
	iod_buf_put(p, &w1.buf);
	CHECK(woken == 2 && iod_buf_nfree(p, 0) == 1);
	iod_buf_put(p, &w3.buf);
	CHECK(iod_buf_nfree(p, 0) == 2);
	/* Cancel of the tail keeps the FIFO consistent. */
	CHECK(iod_buf_get(p, 1, &a) == 0 && iod_buf_get(p, 1, &b) == 0);
	iod_buf_wait(p, &w1);
	iod_buf_wait(p, &w2);
	iod_buf_cancel(p, &w2);
	iod_buf_wait(p, &w3);
	iod_buf_put(p, &a);
	CHECK(woken == 3 && woken_buf.p == a.p);
	iod_buf_put(p, &b);
	CHECK(woken == 4 && woken_buf.p == b.p && !w3.queued);
	iod_buf_put(p, &w1.buf);
	iod_buf_put(p, &w3.buf);
	CHECK(iod_buf_nfree(p, 0) == 2);
	iod_buf_pool_free(p);
}

/* Random get/put churn: every buffer comes back whole, no two live
 * buffers overlap, and the pool ends exactly as it started. */
static void test_no_fragmentation(void)
{
	struct iod_buf_pool *p = mkpool(3, 3, 2, 2, 2, 2);
	static const unsigned start[IOD_BUF_NZONES] = { 3, 3, 2, 2, 2, 2 };
	struct iod_buf live[14];
	int nlive = 0;

	srand(7);
	for (int it = 0; it < 20000; it++) {
		if (nlive < 14 && (rand() & 1)) {
			size_t want = 1 + (size_t)rand() % (3 * MiB);
			struct iod_buf b;

			if (iod_buf_get(p, want, &b) == 0) {
				for (int i = 0; i < nlive; i++) {
					char *x = live[i].p, *y = b.p;
					CHECK(y + b.size <= x || x + live[i].size <= y);
				}
				live[nlive++] = b;
			} else {
				CHECK(nlive == 14);
			}
		} else if (nlive) {
			int i = rand() % nlive;
			iod_buf_put(p, &live[i]);
			live[i] = live[--nlive];
		}
	}
	while (nlive)
		iod_buf_put(p, &live[--nlive]);
	for (unsigned z = 0; z < IOD_BUF_NZONES; z++) {
		void *base;
		size_t len;

		CHECK(iod_buf_nfree(p, z) == start[z]);
		iod_buf_zone_region(p, z, &base, &len);
		CHECK(len == start[z] * (IOD_BUF_MIN << z));
	}
	iod_buf_pool_free(p);
}

/* Bad configurations are refused. */
static void test_config(void)
{
	struct iod_buf_config c = { { 0 } };
	struct iod_buf_pool *p;

	CHECK(iod_buf_pool_new(&p, &c) == -EINVAL);
	c.count[0] = 70000;
	CHECK(iod_buf_pool_new(&p, &c) == -EINVAL);
	iod_buf_config_default(&c);
	CHECK(iod_buf_pool_new(&p, &c) == 0);
	iod_buf_pool_free(p);
}

int main(void)
{
	test_zone_choice();
	test_chopping();
	test_exhaustion();
	test_no_fragmentation();
	test_config();
	if (failures) {
		fprintf(stderr, "test_iod_buf: %d failures\n", failures);
		return 1;
	}
	printf("test_iod_buf: ok\n");
	return 0;
}
