/* test_mgr_fence.c - unit tests of the mgr's IO_FENCE sequence of one iod
 * (mgr_fence.c): seq and confirm, set loads in pages, the lease bound,
 * and when a STALE_MARK may be answered. No network, no database. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgr_fence.h"

#include "check_cond.h"

#define MS 1000000ull
#define LEASE 8000u

/* The fake fence set: inodes 1000 .. 1000 + set_n - 1. */
static uint32_t set_n;
static int page_calls;

/* mgr_fence_page_fn over the fake set. */
static int page(void *arg, uint16_t iod, uint64_t after, uint64_t *inos,
		uint32_t max, uint32_t *n)
{
	uint64_t first = after < 1000 ? 1000 : after + 1;

	page_calls++;
	*n = 0;
	for (uint64_t i = first; i < 1000 + set_n && *n < max; i++)
		inos[(*n)++] = i;
	return 0;
}

static const struct proto_fencestate st_ok = { 1, 1, 0, 0, LEASE };
static const struct proto_fencestate st_loading = { 1, 1, 1, 0, LEASE };
static const struct proto_fencestate st_empty = { 0, 0, 0, 0, 0 };

/* Build the next message; -1 when there is none. */
static int build(struct mgr_fence_iod *fi, uint64_t ver, struct proto_fence *f)
{
	if (!mgr_fence_want(fi))
		return -1;
	return mgr_fence_build(fi, ver, page, NULL, f);
}

/* Count a done list and free it; *status gets the last status. */
static int done_count(struct mgr_fence_mark *list, int *status)
{
	int n = 0;

	while (list) {
		struct mgr_fence_mark *next = list->next;

		if (status)
			*status = list->status;
		free(list);
		list = next;
		n++;
	}
	return n;
}

static struct mgr_fence_mark *mark(uint64_t ino)
{
	struct mgr_fence_mark *m = calloc(1, sizeof(*m));

	m->ino = ino;
	m->status = 12345;
	return m;
}

/* First contact: an empty set in one RESET|COMPLETE message that grants
 * no lease (confirm 0), then one more at once that confirms it. */
static void test_first_contact(void)
{
	struct mgr_fence_iod fi;
	struct mgr_fence_mark *done = NULL, **tail = &done;
	struct proto_fence f;
	uint64_t now = 1000 * MS;

	set_n = 0;
	mgr_fence_init(&fi, 3, 77, now, LEASE);
	CHECK(fi.lease_bound_ns == now + LEASE * MS); /* a predecessor's */
	CHECK(!mgr_fence_want(&fi));                  /* not up yet */
	mgr_fence_round(&fi);
	CHECK(build(&fi, 5, &f) == 0);
	CHECK(f.seq == 77 && f.confirm == 0 && f.lease_ms == LEASE);
	CHECK(f.flags == (PROTO_FENCE_RESET | PROTO_FENCE_COMPLETE));
	CHECK(f.add.n == 0 && f.del.n == 0);
	CHECK(!mgr_fence_want(&fi)); /* one in flight at a time */
	CHECK(mgr_fence_reply(&fi, 0, &st_ok, now + 10 * MS, &tail) == 0);
	CHECK(fi.lease_bound_ns == now + 10 * MS + LEASE * MS);
	CHECK(fi.delivered && fi.delivered_ver == 5);
	CHECK(build(&fi, 5, &f) == 0); /* the confirm, back to back */
	CHECK(f.seq == 78 && f.confirm == 77 && f.flags == 0 && f.add.n == 0);
	CHECK(mgr_fence_reply(&fi, 0, &st_ok, now + 20 * MS, &tail) == 0);
	CHECK(!mgr_fence_want(&fi));
	/* a round: a renewal, confirming the last; no reload (same version) */
	mgr_fence_round(&fi);
	page_calls = 0;
	CHECK(build(&fi, 5, &f) == 0);
	CHECK(f.seq == 79 && f.confirm == 78 && f.flags == 0 && page_calls == 0);
	CHECK(mgr_fence_reply(&fi, 0, &st_ok, now + 2000 * MS, &tail) == 0);
	CHECK(fi.lease_bound_ns == now + 2000 * MS + LEASE * MS);
	/* and at once a follow that confirms the renewal (so the lease runs
	 * from this round), which itself wants no follow */
	CHECK(build(&fi, 5, &f) == 0);
	CHECK(f.seq == 80 && f.confirm == 79 && f.flags == 0);
	CHECK(mgr_fence_reply(&fi, 0, &st_ok, now + 2010 * MS, &tail) == 0);
	CHECK(!mgr_fence_want(&fi));
	/* the records changed: the next round reloads */
	mgr_fence_round(&fi);
	set_n = 2;
	CHECK(build(&fi, 6, &f) == 0);
	CHECK(f.flags == (PROTO_FENCE_RESET | PROTO_FENCE_COMPLETE));
	CHECK(f.confirm == 80 && f.add.n == 2 && f.add.host[0] == 1000);
	CHECK(mgr_fence_reply(&fi, 0, &st_ok, now + 2100 * MS, &tail) == 1);
	CHECK(fi.last_n == 2 && done == NULL);
	/* seq never 0 */
	set_n = 0;
	mgr_fence_init(&fi, 0, UINT64_MAX, now, LEASE);
	mgr_fence_round(&fi);
	CHECK(build(&fi, 0, &f) == 0 && f.seq == UINT64_MAX);
	CHECK(mgr_fence_reply(&fi, 0, &st_ok, now, &tail) == 0);
	CHECK(build(&fi, 0, &f) == 0 && f.seq == 1 && f.confirm == UINT64_MAX);
}

/* A set of 300 goes in two pages; the lease is not confirmed before the
 * COMPLETE while no set is known in force; a mark sent during the load
 * is answered at the COMPLETE only. */
static void test_pages_and_marks(void)
{
	struct mgr_fence_iod fi;
	struct mgr_fence_mark *done = NULL, **tail = &done, *m = mark(55);
	struct proto_fence f;
	uint64_t now = 0, first;
	int status = 0;

	set_n = 300;
	mgr_fence_init(&fi, 1, 10, now, LEASE);
	mgr_fence_round(&fi);
	CHECK(build(&fi, 1, &f) == 0);
	first = f.seq;
	CHECK(f.flags == PROTO_FENCE_RESET && f.add.n == PROTO_MAX_INOS);
	CHECK(f.add.host[255] == 1255);
	CHECK(mgr_fence_reply(&fi, 0, &st_loading, 5 * MS, &tail) == 0);
	mgr_fence_add_mark(&fi, m);
	CHECK(build(&fi, 2, &f) == 0); /* the mark first, in its own message */
	CHECK(f.add.n == 1 && f.add.host[0] == 55 && f.flags == 0);
	CHECK(f.confirm == 0); /* no set known in force: no lease yet */
	CHECK(mgr_fence_reply(&fi, 0, &st_loading, 6 * MS, &tail) == 0);
	CHECK(done == NULL); /* only in the set being loaded */
	CHECK(build(&fi, 2, &f) == 0);
	CHECK(f.flags == PROTO_FENCE_COMPLETE && f.add.n == 44);
	CHECK(f.add.host[0] == 1256 && f.confirm == first + 1);
	CHECK(mgr_fence_reply(&fi, 0, &st_ok, 7 * MS, &tail) == 1);
	CHECK(fi.last_n == 300 && fi.delivered_ver == 1); /* read before p.1 */
	CHECK(done_count(done, &status) == 1 && status == 0);
	done = NULL;
	tail = &done;
	/* the version moved during the load: the next round loads again */
	mgr_fence_round(&fi);
	CHECK(build(&fi, 2, &f) == 0);
	CHECK(f.flags == PROTO_FENCE_RESET);
	/* the iod restarted meanwhile: it lost the load */
	CHECK(mgr_fence_reply(&fi, 0, &st_empty, 8 * MS, &tail) == 0);
	CHECK(build(&fi, 2, &f) == 0 && f.flags == PROTO_FENCE_RESET);
	CHECK(f.confirm == 0);
}

/* An up iod with its set: a mark is answered when the reply to the
 * message that carried it says the set is complete and in force. */
static void test_mark_acked(void)
{
	struct mgr_fence_iod fi;
	struct mgr_fence_mark *done = NULL, **tail = &done;
	struct proto_fence f;
	int status = 1;

	set_n = 0;
	mgr_fence_init(&fi, 1, 100, 0, LEASE);
	mgr_fence_round(&fi);
	CHECK(build(&fi, 1, &f) == 0);
	CHECK(mgr_fence_reply(&fi, 0, &st_ok, MS, &tail) == 0);
	CHECK(build(&fi, 1, &f) == 0);
	CHECK(mgr_fence_reply(&fi, 0, &st_ok, 2 * MS, &tail) == 0);
	mgr_fence_add_mark(&fi, mark(9));
	mgr_fence_add_mark(&fi, mark(10));
	CHECK(mgr_fence_deadline(&fi) == 2 * MS + LEASE * MS);
	CHECK(build(&fi, 2, &f) == 0);
	CHECK(f.add.n == 2 && f.add.host[1] == 10 && f.confirm == 101);
	CHECK(mgr_fence_reply(&fi, 0, &st_ok, 3 * MS, &tail) == 0);
	CHECK(done_count(done, &status) == 2 && status == 0);
	CHECK(mgr_fence_deadline(&fi) == UINT64_MAX);
	/* the iod restarted: complete 0 in a renewal's reply: reload now,
	 * and a mark is not answered by that reply */
	done = NULL;
	tail = &done;
	mgr_fence_round(&fi);
	mgr_fence_add_mark(&fi, mark(11));
	CHECK(build(&fi, 2, &f) == 0 && f.add.n == 1);
	CHECK(mgr_fence_reply(&fi, 0, &st_empty, 4 * MS, &tail) == 0);
	CHECK(done == NULL);
	set_n = 1; /* the load covers the mark: read after its commit */
	CHECK(build(&fi, 3, &f) == 0);
	CHECK(f.flags == (PROTO_FENCE_RESET | PROTO_FENCE_COMPLETE));
	CHECK(f.add.n == 1 && f.add.host[0] == 1000);
	CHECK(mgr_fence_reply(&fi, 0, &st_ok, 5 * MS, &tail) == 1);
	CHECK(done_count(done, NULL) == 1);
}

/* An iod that does not answer: its marks are answered once its lease
 * bound passed, never before, never while a reply may still come; then
 * it gets no lease again before a whole set is in force. */
static void test_mark_expires(void)
{
	struct mgr_fence_iod fi;
	struct mgr_fence_mark *done = NULL, **tail = &done;
	struct proto_fence f;
	uint64_t bound;
	int status = 1;

	set_n = 0;
	mgr_fence_init(&fi, 2, 500, 0, LEASE);
	mgr_fence_round(&fi);
	CHECK(build(&fi, 1, &f) == 0);
	CHECK(mgr_fence_reply(&fi, 0, &st_ok, 100 * MS, &tail) == 0);
	CHECK(build(&fi, 1, &f) == 0);
	CHECK(mgr_fence_reply(&fi, 0, &st_ok, 200 * MS, &tail) == 0);
	bound = fi.lease_bound_ns;
	CHECK(bound == 200 * MS + LEASE * MS);
	mgr_fence_add_mark(&fi, mark(42));
	CHECK(build(&fi, 2, &f) == 0 && f.add.n == 1);
	mgr_fence_expire(&fi, bound + MS, &tail); /* in flight: may answer */
	CHECK(done == NULL);
	mgr_fence_failed(&fi); /* timed out */
	CHECK(!mgr_fence_want(&fi));
	mgr_fence_expire(&fi, bound - 1, &tail);
	CHECK(done == NULL);
	CHECK(mgr_fence_deadline(&fi) == bound);
	mgr_fence_expire(&fi, bound, &tail);
	CHECK(done_count(done, &status) == 1 && status == 0);
	done = NULL;
	tail = &done;
	/* back: a load with no confirm but on its COMPLETE */
	set_n = 300;
	mgr_fence_round(&fi);
	CHECK(build(&fi, 2, &f) == 0);
	CHECK(f.flags == PROTO_FENCE_RESET && f.confirm == 0);
	CHECK(mgr_fence_reply(&fi, 0, &st_loading, bound + 10 * MS, &tail) == 0);
	CHECK(build(&fi, 2, &f) == 0);
	CHECK(f.flags == PROTO_FENCE_COMPLETE && f.confirm != 0);
	/* an iod without IO_FENCE: marks are answered on its reply */
	mgr_fence_init(&fi, 2, 900, 0, LEASE);
	mgr_fence_round(&fi);
	mgr_fence_add_mark(&fi, mark(1));
	CHECK(build(&fi, 1, &f) == 0);
	CHECK(mgr_fence_reply(&fi, -EOPNOTSUPP, NULL, MS, &tail) == 0);
	CHECK(done_count(done, &status) == 1 && status == 0 && fi.unsupported);
	CHECK(!mgr_fence_want(&fi));
	/* shutdown: what is left is answered with the given status */
	done = NULL;
	tail = &done;
	mgr_fence_add_mark(&fi, mark(2));
	mgr_fence_drain(&fi, -EIO, &tail);
	CHECK(done_count(done, &status) == 1 && status == -EIO);
}

/* A refused tcp connection (no process at the iod's address): a mark
 * waiting for the lease bound is answered at once, not a lease later. */
static void test_refused(void)
{
	struct mgr_fence_iod fi;
	struct mgr_fence_mark *done = NULL, **tail = &done;
	struct proto_fence f;
	int status = 1;

	set_n = 0;
	mgr_fence_init(&fi, 1, 7, 0, LEASE);
	mgr_fence_round(&fi);
	CHECK(build(&fi, 1, &f) == 0);
	CHECK(mgr_fence_reply(&fi, 0, &st_ok, 100 * MS, &tail) == 0);
	mgr_fence_failed(&fi); /* killed: the next round's connect fails */
	mgr_fence_add_mark(&fi, mark(9));
	mgr_fence_expire(&fi, 300 * MS, &tail);
	CHECK(done == NULL); /* the lease may still run */
	mgr_fence_refused(&fi, 300 * MS);
	CHECK(mgr_fence_deadline(&fi) == 300 * MS);
	mgr_fence_expire(&fi, 300 * MS, &tail);
	CHECK(done_count(done, &status) == 1 && status == 0);
	mgr_fence_refused(&fi, 900 * MS); /* never raises the bound */
	CHECK(fi.lease_bound_ns == 300 * MS);
}

int main(void)
{
	test_refused();
	test_first_contact();
	test_pages_and_marks();
	test_mark_acked();
	test_mark_expires();
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("test_mgr_fence: ok\n");
	return 0;
}
