/*
 * test_mgr_lead.c - unit test of the lease state machine of mgr_lead.c on
 * a fake clock: the deadline counts from the renew's send time minus the
 * margin, a refused renew loses the lease for good, an unreachable
 * database lets the deadline run out, and a lost holder never serves
 * again. Nothing sleeps; no database.
 */
#include <errno.h>
#include <stdio.h>

#include "mgr_lead.h"

#include "check_cond.h"

#define MS(x) ((uint64_t)(x) * 1000000ull)
#define T0 MS(5000000) /* an arbitrary monotonic start */

/* Lease bounds and the margin. */
static void test_init(void)
{
	struct mgr_lead_sm sm;

	CHECK_EQ(mgr_lead_sm_init(&sm, MGR_LEAD_MIN_MS - 1), -EINVAL);
	CHECK_EQ(mgr_lead_sm_init(&sm, MGR_LEAD_MAX_MS + 1), -EINVAL);
	CHECK_EQ(mgr_lead_sm_init(&sm, 10000), 0);
	CHECK_EQ(sm.margin_ms, 1000);
	CHECK_EQ(mgr_lead_sm_init(&sm, 2000), 0);
	CHECK_EQ(sm.margin_ms, 200);
	CHECK(!mgr_lead_sm_serving(&sm, T0)); /* a standby serves nothing */
}

/* Acquire, renew, and the deadline from the send time. */
static void test_deadline(void)
{
	struct mgr_lead_sm sm;

	CHECK_EQ(mgr_lead_sm_init(&sm, 10000), 0);
	CHECK_EQ(mgr_lead_sm_answer(&sm, T0, 0), 0); /* refused: standby */
	CHECK(!sm.lost);
	/* acquired: sent at T0, so the deadline is T0 + 10 s - 1 s, whatever
	 * time the answer came */
	CHECK_EQ(mgr_lead_sm_answer(&sm, T0 + MS(100), 7), 1);
	CHECK(mgr_lead_sm_serving(&sm, T0 + MS(100)));
	CHECK(mgr_lead_sm_serving(&sm, T0 + MS(9099)));
	CHECK(!mgr_lead_sm_serving(&sm, T0 + MS(9100)));
	/* a renew sent at T0 + 3.3 s moves it on */
	CHECK_EQ(mgr_lead_sm_answer(&sm, T0 + MS(3400), 7), 1);
	CHECK(mgr_lead_sm_serving(&sm, T0 + MS(12399)));
	CHECK(!mgr_lead_sm_serving(&sm, T0 + MS(12400)));
	/* a stopped process that resumes after its deadline serves nothing,
	 * before any renew: the check is against the clock */
	CHECK(!mgr_lead_sm_serving(&sm, T0 + MS(60000)));
}

/* A renew refused, or answered with another token: lost for good. */
static void test_lost(void)
{
	struct mgr_lead_sm sm;

	CHECK_EQ(mgr_lead_sm_init(&sm, 3000), 0);
	CHECK_EQ(mgr_lead_sm_answer(&sm, T0, 4), 1);
	CHECK_EQ(mgr_lead_sm_answer(&sm, T0 + MS(1000), 0), 0);
	CHECK(sm.lost);
	CHECK(!mgr_lead_sm_serving(&sm, T0 + MS(1001)));
	/* even a later grant does not bring it back (the process restarts) */
	CHECK_EQ(mgr_lead_sm_answer(&sm, T0 + MS(2000), 4), 0);
	CHECK(!mgr_lead_sm_serving(&sm, T0 + MS(2001)));

	CHECK_EQ(mgr_lead_sm_init(&sm, 3000), 0);
	CHECK_EQ(mgr_lead_sm_answer(&sm, T0, 4), 1);
	CHECK_EQ(mgr_lead_sm_answer(&sm, T0 + MS(1000), 5), 0); /* not ours */
	CHECK(sm.lost);
	CHECK(!mgr_lead_sm_serving(&sm, T0 + MS(1001)));
}

/* No answer at all (the database unreachable): the last deadline holds,
 * and runs out. */
static void test_unreachable(void)
{
	struct mgr_lead_sm sm;

	CHECK_EQ(mgr_lead_sm_init(&sm, 6000), 0);
	CHECK_EQ(mgr_lead_sm_answer(&sm, T0, 2), 1);
	/* renews at +2 s and +4 s get no answer: nothing recorded */
	CHECK(mgr_lead_sm_serving(&sm, T0 + MS(5399)));
	CHECK(!mgr_lead_sm_serving(&sm, T0 + MS(5400)));
}

int main(void)
{
	test_init();
	test_deadline();
	test_lost();
	test_unreachable();
	if (failures) {
		fprintf(stderr, "test_mgr_lead: %d failures\n", failures);
		return 1;
	}
	printf("test_mgr_lead: ok\n");
	return 0;
}
