/*
 * test_net_call.c - the client call core (net_call.c) on a fake backend:
 * no sockets, no verbs, only the hooks of net_client_ops. Covers the
 * admission loop (connects while down, takes a credit and hands back
 * what the hook returned with the lock held; waits counted in
 * credit_waits once per call; a timeout counted once, with the lock let
 * go; a connect error passed on), the call setup, the per-call failure
 * of a teardown (culprit, marked calls, the rest -EIO), abort (kill and
 * kick only for a call not done), and the wait loop (done at once; not
 * in flight: -EINVAL and wait_end told so; a lead hook that completes
 * the call; a lead hook at the deadline and a sleeper past it: aborted
 * (the connection marked kill, then kicked) with -ETIMEDOUT and counted
 * once; a sleeper woken by another thread, long before its deadline).
 */
#include "net_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "check_return.h"

/* What the fake backend does and saw. */
static struct {
	int connect_rc;    /* connect's result */
	int connects;
	int credits;       /* credit_take hands out slot 7 while > 0 */
	int give_at;       /* credit_wait call that returns a credit (0: none) */
	int waits;
	int kicks;
	int kick_done;     /* kick completes the call (the teardown) */
	int kill_seen;     /* c->kill as kick found it */
	struct net_call *kill_call;
	int lead_mode;     /* 0 never leads, 1 leads and completes the call on
			    * its second step, 2 the deadline passes leading */
	int leads;
	int ends, end_bad, end_lead;
} F;

/* The fake's connect hook: comes up (gen++) unless told to fail. */
static int f_connect(struct net_conn *c, uint64_t deadline)
{
	(void)deadline;
	F.connects++;
	if (F.connect_rc)
		return F.connect_rc;
	pthread_mutex_lock(&c->lock);
	c->up = 1;
	c->gen++;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* The fake's credit_take hook. @return 7 taken, -1 none */
static int f_credit_take(struct net_conn *c)
{
	(void)c;
	if (F.credits <= 0)
		return -1;
	F.credits--;
	return 7;
}

/* The fake's credit_wait hook: a millisecond off the lock per step.
 * @return 0, -ETIMEDOUT past the deadline */
static int f_credit_wait(struct net_conn *c, uint64_t deadline)
{
	if (++F.waits == F.give_at)
		F.credits = 1;
	pthread_mutex_unlock(&c->lock);
	usleep(1000);
	pthread_mutex_lock(&c->lock);
	return F.credits == 0 && net_now_ns() >= deadline ? -ETIMEDOUT : 0;
}

/* The fake's kick hook: the "progress thread" tears down at once. */
static void f_kick(struct net_conn *c)
{
	F.kicks++;
	pthread_mutex_lock(&c->lock);
	F.kill_seen = c->kill;
	pthread_mutex_unlock(&c->lock);
	if (F.kick_done && F.kill_call) {
		pthread_mutex_lock(&c->lock);
		c->kill = 0;
		net_call_fail(F.kill_call, NULL, 0);
		pthread_mutex_unlock(&c->lock);
	}
}

/* The fake's lead hook (see F.lead_mode). */
static int f_lead(struct net_call *call, struct net_wait *w)
{
	(void)w;
	F.leads++;
	if (F.lead_mode == 1) {
		if (F.leads == 2)
			net_call_done(call);
		return 1;
	}
	return F.lead_mode == 2 ? -ETIMEDOUT : 0;
}

/* The fake's wait_end hook. */
static void f_wait_end(struct net_call *call, struct net_wait *w)
{
	(void)call;
	F.ends++;
	F.end_bad = w->bad;
	F.end_lead = w->lead;
}

static const struct net_client_ops fake_ops = {
	.name = "fake",
	.connect = f_connect,
	.credit_take = f_credit_take,
	.credit_wait = f_credit_wait,
	.kick = f_kick,
	.lead = f_lead,
	.wait_end = f_wait_end,
};

static struct net_client cl = { .ops = &fake_ops };

/* A fresh connection, down, and a fresh fake. */
static void conn_reset(struct net_conn *c)
{
	memset(&F, 0, sizeof(F));
	memset(c, 0, sizeof(*c));
	net_conn_init(c, &cl);
}

/* Whether c->lock is free (the caller does not hold it). */
static int lock_free(struct net_conn *c)
{
	if (pthread_mutex_trylock(&c->lock))
		return 0;
	pthread_mutex_unlock(&c->lock);
	return 1;
}

static int test_admit(void)
{
	struct net_conn c;
	uint64_t cw, to;

	/* down: connects, then takes a credit; the lock is held */
	conn_reset(&c);
	F.credits = 1;
	cw = cl.st.credit_waits;
	CHECK(net_conn_admit(&c, net_now_ns() + 1000000000ull) == 7);
	CHECK(F.connects == 1 && c.up && c.gen == 1 && cl.st.credit_waits == cw);
	CHECK(!lock_free(&c));
	pthread_mutex_unlock(&c.lock);

	/* no credit: waits (counted once) until one comes */
	F.give_at = 3;
	CHECK(net_conn_admit(&c, net_now_ns() + 1000000000ull) == 7);
	CHECK(F.waits == 3 && cl.st.credit_waits == cw + 1 && F.connects == 1);
	pthread_mutex_unlock(&c.lock);

	/* none comes: -ETIMEDOUT, one credit wait and one timeout, unlocked
	 * (one wait step or more: each sleeps 1 ms, which a loaded machine
	 * may stretch past the 5 ms deadline) */
	to = cl.st.timeouts;
	F.waits = F.give_at = 0;
	CHECK(net_conn_admit(&c, net_now_ns() + 5000000ull) == -ETIMEDOUT);
	CHECK(F.waits >= 1 && cl.st.credit_waits == cw + 2 && cl.st.timeouts == to + 1);
	CHECK(lock_free(&c));
	net_conn_fini(&c);

	/* the connect fails: its error, unlocked */
	conn_reset(&c);
	F.connect_rc = -ECONNREFUSED;
	CHECK(net_conn_admit(&c, net_now_ns() + 1000000000ull) == -ECONNREFUSED);
	CHECK(lock_free(&c) && F.connects == 1);
	net_conn_fini(&c);
	return 0;
}

static int test_start_fail(void)
{
	struct net_conn c;
	struct net_call a = { .err = -EPIPE, .status = 5, .rep_len = 9, .rd_bytes = 3 };
	struct net_call b = { 0 }, d = { 0 }, e = { 0 };

	conn_reset(&c);
	net_call_start(&a, &c, 42, 1234, NET_CALL_SENT);
	CHECK(a.tag == 42 && a.conn == &c && a.err == 0 && a.status == 0 &&
	      a.rep_len == 0 && a.rd_bytes == 0 && a.deadline_ns == 1234 &&
	      a.state == NET_CALL_SENT);
	net_call_start(&b, &c, 43, 1, NET_CALL_IDLE);
	CHECK(b.state == NET_CALL_IDLE);

	/* a teardown: the culprit gets its error, a marked call keeps its
	 * own, the rest -EIO; all done */
	d.err = -ETIMEDOUT;
	net_call_fail(&a, &a, -EPROTO);
	net_call_fail(&b, &a, -EPROTO);
	net_call_fail(&d, &a, -EPROTO);
	net_call_fail(&e, NULL, 0);
	CHECK(a.err == -EPROTO && b.err == -EIO && d.err == -ETIMEDOUT && e.err == -EIO);
	CHECK(a.state == NET_CALL_DONE && b.state == NET_CALL_DONE &&
	      d.state == NET_CALL_DONE && e.state == NET_CALL_DONE);

	/* abort of a call that is done: no kill, no kick, its error kept */
	net_call_abort(&a, -ETIMEDOUT);
	CHECK(a.err == -EPROTO && !c.kill && F.kicks == 0);
	net_conn_fini(&c);
	return 0;
}

/* Complete the call after 20 ms (another thread's reply). */
static void *complete_later(void *arg)
{
	usleep(20000);
	net_call_done(arg);
	return NULL;
}

static int test_await(void)
{
	struct net_conn c;
	struct net_call call = { 0 };
	pthread_t thr;
	uint64_t to, t0;

	/* done already: its error, idle again, wait_end once */
	conn_reset(&c);
	net_call_start(&call, &c, 1, net_now_ns() + 1000000000ull, NET_CALL_SENT);
	call.lead = 1;
	net_call_fail(&call, NULL, 0);
	CHECK(net_call_await(&call) == -EIO);
	CHECK(call.state == NET_CALL_IDLE && F.ends == 1 && !F.end_bad && F.end_lead == 1);
	CHECK(call.lead == 0 && F.leads == 0);

	/* not in flight: -EINVAL, the state left alone, wait_end told */
	CHECK(net_call_await(&call) == -EINVAL);
	CHECK(call.state == NET_CALL_IDLE && F.ends == 2 && F.end_bad && F.end_lead == 0);

	/* the lead hook reads the reply */
	net_conn_fini(&c);
	conn_reset(&c);
	F.lead_mode = 1;
	net_call_start(&call, &c, 2, net_now_ns() + 1000000000ull, NET_CALL_SENT);
	CHECK(net_call_await(&call) == 0);
	CHECK(F.leads == 2 && F.ends == 1 && F.kicks == 0 && call.state == NET_CALL_IDLE);

	/* the deadline passes while leading: aborted (kill, kick, the
	 * teardown completes it), one timeout */
	net_conn_fini(&c);
	conn_reset(&c);
	F.lead_mode = 2;
	F.kick_done = 1;
	F.kill_call = &call;
	to = cl.st.timeouts;
	net_call_start(&call, &c, 3, net_now_ns() + 1000000000ull, NET_CALL_SENT);
	CHECK(net_call_await(&call) == -ETIMEDOUT);
	CHECK(F.kicks == 1 && F.kill_seen && cl.st.timeouts == to + 1 && F.ends == 1 &&
	      call.state == NET_CALL_IDLE);

	/* nobody leads, past the deadline: the same */
	net_conn_fini(&c);
	conn_reset(&c);
	F.kick_done = 1;
	F.kill_call = &call;
	net_call_start(&call, &c, 4, net_now_ns() + 5000000ull, NET_CALL_SENT);
	CHECK(net_call_await(&call) == -ETIMEDOUT);
	CHECK(F.kicks == 1 && F.kill_seen && cl.st.timeouts == to + 2 && F.leads > 0);

	/* nobody leads: sleeps until another thread completes it, woken by
	 * it: back well before the deadline (5 s; the completion comes after
	 * 20 ms), where a sleeper nobody wakes would return */
	net_conn_fini(&c);
	conn_reset(&c);
	t0 = net_now_ns();
	net_call_start(&call, &c, 5, t0 + 5000000000ull, NET_CALL_SENT);
	CHECK(pthread_create(&thr, NULL, complete_later, &call) == 0);
	CHECK(net_call_await(&call) == 0);
	CHECK(net_now_ns() - t0 < 2500000000ull);
	pthread_join(thr, NULL);
	CHECK(F.kicks == 0 && F.ends == 1 && cl.st.timeouts == to + 2);
	net_conn_fini(&c);
	return 0;
}

int main(void)
{
	int fails = 0;

	fails += test_admit();
	fails += test_start_fail();
	fails += test_await();
	printf("%s\n", fails ? "FAIL" : "ok");
	return fails != 0;
}
