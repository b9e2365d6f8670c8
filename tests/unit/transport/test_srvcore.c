/*
 * test_srvcore.c - the server request core (net_srv.c) on its own, with no
 * backend: the request state table (net_sreq_advance: the legal path, an
 * illegal event refused with -EINVAL and nothing changed, a completion of
 * an earlier request ignored), the public wrappers refusing what the state
 * forbids before they reach a backend, the deferred-completion queue
 * (order, work queued while it runs, the backend's more, teardown), a
 * connection's lifetime (open and close counters, close once, reap only
 * when dead and unheld), and ordered dispatch (net_sconn_next).
 */
#include "net_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "check_return.h"

static struct net_server srv; /* no ops: a wrapper reaching them crashes */
static struct net_sconn conn = { .srv = &srv, .peer = "test:1" };

/* The legal life of a request, and what is refused on the way. */
static int states(void)
{
	struct net_sreq r = { .conn = &conn };

	CHECK(net_sreq_advance(&r, NET_SREQ_EV_DISPATCH) == -EINVAL);
	CHECK(r.state == NET_SREQ_FREE);
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_PARTIAL) == 0 &&
	      r.state == NET_SREQ_ARRIVING);
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_DISPATCH) == -EINVAL);
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_DATA) == 0 && r.state == NET_SREQ_QUEUED);
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_PULL) == -EINVAL);
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_DISPATCH) == 0 &&
	      r.state == NET_SREQ_HANDLER && net_sreq_with_handler(&r));
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_PUSH) == 0 && r.state == NET_SREQ_PUSHING);
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_PULL) == 0 && r.state == NET_SREQ_PULLING);
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_PULLED) == 0 && r.state == NET_SREQ_PUSHING);
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_PUSHED) == 0 && r.state == NET_SREQ_HANDLER);
	/* a completion with none in flight (an earlier request's): nothing */
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_PUSHED) == 0 && r.state == NET_SREQ_HANDLER);
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_REPLY) == 0 && r.state == NET_SREQ_DONE &&
	      !net_sreq_with_handler(&r));
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_REPLY) == -EINVAL);
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_REJECT) == -EINVAL);
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_PUSH) == -EINVAL);
	CHECK(r.state == NET_SREQ_DONE);
	/* the wrappers refuse before any backend call (srv has no ops) */
	CHECK(net_sreq_reply(&r, 0, NULL, 0) == -EINVAL);
	CHECK(net_sreq_pull(&r, NULL, 0, NULL, NULL) == -EINVAL);
	CHECK(net_sreq_push(&r, 0, NULL, 0, NULL, NULL) == -EINVAL);
	net_sreq_reject(&r, "twice");
	CHECK(srv.st.reqs_active == 0);
	/* reused: a new arrival starts afresh */
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_ARRIVE) == 0 && r.state == NET_SREQ_QUEUED);
	CHECK(net_sreq_advance(&r, NET_SREQ_EV_DROP) == 0 && r.state == NET_SREQ_FREE);
	CHECK(net_sreq_advance(&r, (enum net_sreq_event)99) == -EINVAL);
	return 0;
}

struct item {
	struct net_srv_done d;
	int id;
};

static int order[8], norder, mores, drops;
static struct item later = { .id = 3 };

/* Deliver an item: note its id; the first one queues another. */
static void run(struct net_srv_done *d)
{
	struct item *it = NET_CONTAINER_OF(d, struct item, d);

	order[norder++] = it->id * 10 + d->rc;
	if (it->id == 1)
		net_srv_defer(&srv, &later.d, 0);
}

static void more(struct net_server *s)
{
	(void)s;
	mores++;
}

static void drop(struct net_srv_done *d)
{
	(void)d;
	drops++;
}

/* The queue runs from the loop, in order, then more; teardown drops. */
static int deferred(void)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct item a = { .id = 1 }, b = { .id = 2 };

	net_srv_kick_init(&srv, loop, run, more);
	net_srv_defer(&srv, &a.d, 1);
	net_srv_defer(&srv, &b.d, 2);
	CHECK(norder == 0); /* never from inside the call */
	ev_run(loop, EVRUN_NOWAIT);
	CHECK(norder == 3 && order[0] == 11 && order[1] == 22 && order[2] == 30);
	/* at least once (the defer from inside run feeds the watcher again,
	 * which libev runs again, with the queue empty by then) */
	int m = mores;
	CHECK(m >= 1);
	net_srv_kick(&srv);
	ev_run(loop, EVRUN_NOWAIT);
	CHECK(norder == 3 && mores == m + 1);
	net_srv_defer(&srv, &a.d, 0);
	net_srv_kick_drop(&srv, drop);
	ev_run(loop, EVRUN_NOWAIT);
	CHECK(drops == 1 && norder == 3 && mores == m + 1);
	ev_loop_destroy(loop);
	return 0;
}

static int reaped;

static void reap(struct net_sconn *c)
{
	(void)c;
	reaped++;
}

/* Counters of open and close; reap once dead and unheld. */
static int lifetime(void)
{
	struct net_sconn c = { .srv = &srv, .peer = "test:2" };
	char why[96];

	net_sconn_open(&c, NET_HS_HELLO, reap);
	CHECK(srv.st.conns_open == 1 && srv.st.unauth_open == 1);
	c.hs = NET_HS_AUTH;
	net_sconn_authed(&c, 0);
	CHECK(c.hs == NET_HS_OPEN && srv.st.unauth_open == 0 && !c.privileged);
	/* held and let go while alive: not reaped */
	net_sconn_hold(&c);
	net_sconn_release(&c);
	CHECK(reaped == 0 && !c.dead);
	net_sconn_hold(&c);
	CHECK(net_sconn_close(&c, 0, "test") == 0 && c.dead);
	CHECK(srv.st.conns_open == 0 && srv.st.unauth_open == 0);
	CHECK(net_sconn_close(&c, 1, "again") == -EALREADY && srv.st.conns_open == 0);
	CHECK(reaped == 0);
	net_sconn_release(&c);
	CHECK(reaped == 1);
	/* closed in the handshake: both gauges come down */
	struct net_sconn u = { .srv = &srv, .peer = "test:3" };
	net_sconn_open(&u, NET_HS_AUTH, reap);
	CHECK(srv.st.conns_open == 1 && srv.st.unauth_open == 1);
	net_sconn_hs_late(&u, why, sizeof(why));
	CHECK(srv.st.unauth_closes == 1 && strstr(why, "handshake not done within"));
	CHECK(net_sconn_close(&u, 0, why) == 0);
	CHECK(srv.st.conns_open == 0 && srv.st.unauth_open == 0);
	return 0;
}

static int dropped;

static void drop_req(struct net_sreq *r)
{
	(void)r;
	dropped++;
}

/* Ordered dispatch: one at a time, in arrival order; a requeued one is
 * next again; a close drains what waits. */
static int ordered(void)
{
	struct net_sconn c = { .srv = &srv, .peer = "test:4" };
	struct net_sreq a = { .conn = &c }, b = { .conn = &c }, d = { .conn = &c };

	net_sconn_open(&c, NET_HS_OPEN, reap);
	CHECK(!net_sconn_ready(&c) && net_sconn_next(&c) == NULL);
	net_sconn_enqueue(&c, &a);
	net_sconn_enqueue(&c, &b);
	net_sconn_enqueue(&c, &d);
	CHECK(net_sconn_next(&c) == &a && net_sconn_next(&c) == NULL);
	net_sconn_finished(&c, &b); /* not the one served: nothing */
	CHECK(!net_sconn_ready(&c));
	net_sconn_finished(&c, &a);
	CHECK(net_sconn_next(&c) == &b);
	net_sconn_finished(&c, &b);
	net_sconn_requeue(&c, &b); /* fetched: its turn again */
	CHECK(net_sconn_next(&c) == &b);
	net_sconn_finished(&c, &b);
	net_sconn_drain(&c, drop_req);
	CHECK(dropped == 1 && !net_sconn_ready(&c));
	CHECK(net_sconn_close(&c, 0, "test") == 0);
	return 0;
}

int main(void)
{
	net_opts_default(&srv.opts);
	CHECK(states() == 0);
	CHECK(deferred() == 0);
	CHECK(lifetime() == 0);
	CHECK(ordered() == 0);
	printf("srvcore: ok\n");
	return 0;
}
