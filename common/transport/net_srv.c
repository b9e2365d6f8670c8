/*
 * net_srv.c - the backend-independent server core of the transport: the
 * server calls of net.h (net_server_*, net_sreq_*, net_sconn_*) dispatched
 * to the backend chosen at creation, with the counters and per-op timing
 * they keep; and what both server backends (tcp_server.c, vb_server.c)
 * drive alike: a request's state (net_sreq_advance, one transition table),
 * ordered dispatch (one request served at a time per connection, in
 * arrival order), the deferred-completion queue and its kick watcher, a
 * connection's lifetime (holds, close with its reason and counters, a
 * backend reap hook) and its handshake state. The backends keep their
 * wire, their memory and their limits.
 *
 * Loop thread only, like the servers themselves; counters are atomics.
 */
#include "net_int.h"
#include "metrics_op.h"
#include "log.h"
#include "net_auth.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------- request states */

#define NET_SREQ_B(st) (1u << (st))
/* the states in which the handler has the request */
#define NET_SREQ_HANDLERS \
	(NET_SREQ_B(NET_SREQ_HANDLER) | NET_SREQ_B(NET_SREQ_PULLING) | \
	 NET_SREQ_B(NET_SREQ_PUSHING))
#define NET_SREQ_ANY 0xffffffffu

/* The legal transitions: from which states each event may come, and the
 * state it leads to (NET_SREQ_FREE for the transfer events, whose state
 * follows from what is in flight: net_sreq_xfer). */
static const struct {
	unsigned from;
	enum net_sreq_state to;
	const char *name;
} net_sreq_tr[] = {
	[NET_SREQ_EV_NONE] = { NET_SREQ_ANY, NET_SREQ_FREE, "nothing" },
	[NET_SREQ_EV_ARRIVE] = { NET_SREQ_B(NET_SREQ_FREE) | NET_SREQ_B(NET_SREQ_DONE),
				 NET_SREQ_QUEUED, "arrival" },
	[NET_SREQ_EV_PARTIAL] = { NET_SREQ_B(NET_SREQ_FREE) | NET_SREQ_B(NET_SREQ_DONE),
				  NET_SREQ_ARRIVING, "partial arrival" },
	[NET_SREQ_EV_DATA] = { NET_SREQ_B(NET_SREQ_ARRIVING), NET_SREQ_QUEUED,
			       "the rest of it" },
	[NET_SREQ_EV_DISPATCH] = { NET_SREQ_B(NET_SREQ_QUEUED), NET_SREQ_HANDLER,
				   "dispatch" },
	[NET_SREQ_EV_PULL] = { NET_SREQ_HANDLERS, NET_SREQ_FREE, "pull" },
	[NET_SREQ_EV_PULLED] = { NET_SREQ_ANY, NET_SREQ_FREE, "pull done" },
	[NET_SREQ_EV_PUSH] = { NET_SREQ_HANDLERS, NET_SREQ_FREE, "push" },
	[NET_SREQ_EV_PUSHED] = { NET_SREQ_ANY, NET_SREQ_FREE, "push done" },
	[NET_SREQ_EV_REPLY] = { NET_SREQ_HANDLERS, NET_SREQ_DONE, "reply" },
	[NET_SREQ_EV_REJECT] = { NET_SREQ_HANDLERS, NET_SREQ_DONE, "reject" },
	[NET_SREQ_EV_DROP] = { NET_SREQ_ANY, NET_SREQ_FREE, "drop" },
};

static const char *const net_sreq_names[] = {
	[NET_SREQ_FREE] = "free", [NET_SREQ_ARRIVING] = "arriving",
	[NET_SREQ_QUEUED] = "queued", [NET_SREQ_HANDLER] = "with the handler",
	[NET_SREQ_PULLING] = "pulling", [NET_SREQ_PUSHING] = "pushing",
	[NET_SREQ_DONE] = "done",
};

/* See net_int.h. */
int net_sreq_with_handler(const struct net_sreq *r)
{
	return (NET_SREQ_HANDLERS & NET_SREQ_B(r->state)) != 0;
}

/* Whether ev may happen to r now; an illegal event is logged with the
 * request and its state. @return 0, -EINVAL */
static int net_sreq_check(const struct net_sreq *r, enum net_sreq_event ev)
{
	if ((unsigned)ev < sizeof(net_sreq_tr) / sizeof(net_sreq_tr[0]) &&
	    (net_sreq_tr[ev].from & NET_SREQ_B(r->state)))
		return 0;
	log_err("net: %s: op %u tag %llu: %s of a request that is %s; refused",
		r->conn ? r->conn->peer : "?", (unsigned)r->hdr.op,
		(unsigned long long)r->hdr.tag,
		(unsigned)ev < sizeof(net_sreq_tr) / sizeof(net_sreq_tr[0]) ?
			net_sreq_tr[ev].name : "an unknown event",
		(unsigned)r->state < sizeof(net_sreq_names) / sizeof(net_sreq_names[0]) ?
			net_sreq_names[r->state] : "in no known state");
	return -EINVAL;
}

/* A transfer started or ended: count it, and while the handler has r its
 * state says what is in flight (pulls first). A completion with none of
 * its kind counted belongs to an earlier, answered request: ignored. */
static void net_sreq_xfer(struct net_sreq *r, enum net_sreq_event ev)
{
	if (ev == NET_SREQ_EV_PULL)
		r->npull++;
	else if (ev == NET_SREQ_EV_PUSH)
		r->npush++;
	else if (ev == NET_SREQ_EV_PULLED && r->npull)
		r->npull--;
	else if (ev == NET_SREQ_EV_PUSHED && r->npush)
		r->npush--;
	if (!net_sreq_with_handler(r))
		return;
	r->state = r->npull ? NET_SREQ_PULLING :
		   r->npush ? NET_SREQ_PUSHING : NET_SREQ_HANDLER;
}

/* Arguments every transfer checks alike. */
static int net_sreq_xfer_args(const struct net_sreq *r, const struct iovec *iov,
			      int cnt, net_xfer_fn cb, uint64_t *total)
{
	if (cnt < 0 || cnt > NET_MAX_IOV || (cnt && !iov) || !cb ||
	    !net_sreq_with_handler(r))
		return -EINVAL;
	*total = net_iov_total(iov, cnt);
	return 0;
}

/* See net_int.h. */
int net_sreq_pull_check(const struct net_sreq *r, const struct iovec *iov,
			int cnt, net_xfer_fn cb, uint64_t *total)
{
	if (net_sreq_xfer_args(r, iov, cnt, cb, total) ||
	    *total > r->hdr.bulk_len - r->pulled)
		return -EINVAL;
	return 0;
}

/* See net_int.h. */
int net_sreq_push_check(const struct net_sreq *r, uint64_t off,
			const struct iovec *iov, int cnt, net_xfer_fn cb,
			uint64_t *total)
{
	if (net_sreq_xfer_args(r, iov, cnt, cb, total) || off > r->hdr.aux ||
	    *total > r->hdr.aux - off)
		return -EINVAL;
	return 0;
}

/* See net_int.h. Cost: a table look-up. */
int net_sreq_advance(struct net_sreq *r, enum net_sreq_event ev)
{
	int rc = net_sreq_check(r, ev);

	if (rc)
		return rc;
	switch (ev) {
	case NET_SREQ_EV_NONE:
		return 0;
	case NET_SREQ_EV_PULL:
	case NET_SREQ_EV_PULLED:
	case NET_SREQ_EV_PUSH:
	case NET_SREQ_EV_PUSHED:
		net_sreq_xfer(r, ev);
		return 0;
	case NET_SREQ_EV_ARRIVE:
	case NET_SREQ_EV_PARTIAL:
	case NET_SREQ_EV_DROP:
		r->npull = r->npush = 0;
		break;
	default:
		break;
	}
	r->state = net_sreq_tr[ev].to;
	return 0;
}

/* ------------------------------------------------------- deferred work */

/* The kick watcher: deliver the queued completions in order (those queued
 * meanwhile too), then the backend's other deferred work. Runs from the
 * loop, never nested in a caller. Cost: one call per completion. */
static void net_srv_kick_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	struct net_server *s = w->data;
	struct net_srv_done *d;

	(void)loop;
	(void)revents;
	while ((d = STAILQ_FIRST(&s->done)) != NULL) {
		STAILQ_REMOVE_HEAD(&s->done, link);
		s->done_run(d);
	}
	if (s->kick_more)
		s->kick_more(s);
}

/* See net_int.h. */
void net_srv_kick_init(struct net_server *s, struct ev_loop *loop,
		       net_srv_run_fn run, net_srv_more_fn more)
{
	s->kick_loop = loop;
	STAILQ_INIT(&s->done);
	s->done_run = run;
	s->kick_more = more;
	ev_idle_init(&s->kick, net_srv_kick_cb);
	s->kick.data = s;
}

/* See net_int.h. */
void net_srv_kick(struct net_server *s)
{
	ev_feed_event(s->kick_loop, &s->kick, EV_CUSTOM);
}

/* See net_int.h. */
void net_srv_defer(struct net_server *s, struct net_srv_done *d, int rc)
{
	d->rc = rc;
	STAILQ_INSERT_TAIL(&s->done, d, link);
	net_srv_kick(s);
}

/* See net_int.h. */
void net_srv_kick_drop(struct net_server *s, void (*drop)(struct net_srv_done *d))
{
	struct net_srv_done *d;

	ev_clear_pending(s->kick_loop, &s->kick);
	while ((d = STAILQ_FIRST(&s->done)) != NULL) {
		STAILQ_REMOVE_HEAD(&s->done, link);
		drop(d);
	}
}

/* net_req_fn given to every backend: note when the request starts (for
 * opstats), count it active until its reply or reject, and hand it to the
 * program's handler. Loop thread. */
static void net_srv_dispatch(struct net_sreq *r, void *arg)
{
	struct net_server *s = r->conn->srv;

	r->t0_ns = s->opstats ? net_now_ns() : 0;
	NET_STAT_ADD(&s->st, reqs_active, 1);
	s->user_fn(r, s->user_arg);
}

/* Create a listening server through its backend, with net_srv_dispatch
 * in front of the handler. */
int net_server_new(struct net_server **out, struct ev_loop *loop,
		   const char *host, uint16_t port, net_req_fn fn, void *arg,
		   const struct net_opts *o)
{
	struct net_opts opts;
	int rc = net_opts_check(o, &opts);

	if (rc)
		return rc;
	const struct net_client_ops *co;
	const struct net_server_ops *so;

	if (!out || !loop || !host || !fn)
		return -EINVAL;
	rc = net_backend(opts.transport, &co, &so);
	if (rc)
		return rc;
	net_encrypt_check(&opts, co, "server");
	rc = so->server_new(out, loop, host, port, net_srv_dispatch, NULL, &opts);
	if (rc)
		return rc;
	(*out)->user_fn = fn;
	(*out)->user_arg = arg;
	(*out)->st.credit_limit = (uint64_t)opts.credits;
	return 0;
}

/* See net.h. */
void net_server_set_opstats(struct net_server *s, struct metrics_ops *m)
{
	s->opstats = m;
}

/* Close everything; in-flight requests are dropped. */
void net_server_free(struct net_server *s)
{
	if (s)
		s->ops->server_free(s);
}

/* The bound port. */
uint16_t net_server_port(const struct net_server *s)
{
	return s->ops->server_port(s);
}

/* Counters of the server. */
void net_server_stats(struct net_server *s, struct net_stats *st)
{
	net_stats_snapshot(&s->st, st);
}

/* The backend this server runs on. */
const char *net_server_transport(const struct net_server *s)
{
	return s->ops->name;
}

/* Register a buffer region with the backend; tcp needs none. */
int net_server_register_mem(struct net_server *s, void *addr, size_t len)
{
	if (!s || !addr || !len)
		return -EINVAL;
	if (!s->ops->register_mem)
		return 0;
	return s->ops->register_mem(s, addr, len);
}

/* Pull through the backend, which advances r to PULLING; refused (logged)
 * when the handler does not have r. */
int net_sreq_pull(struct net_sreq *r, const struct iovec *iov, int cnt,
		  net_xfer_fn cb, void *arg)
{
	if (net_sreq_check(r, NET_SREQ_EV_PULL))
		return -EINVAL;
	return r->conn->srv->ops->pull(r, iov, cnt, cb, arg);
}

/* Push through the backend, which advances r to PUSHING (unless it
 * pulls); refused (logged) when the handler does not have r. */
int net_sreq_push(struct net_sreq *r, uint64_t off, const struct iovec *iov,
		  int cnt, net_xfer_fn cb, void *arg)
{
	if (net_sreq_check(r, NET_SREQ_EV_PUSH))
		return -EINVAL;
	return r->conn->srv->ops->push(r, off, iov, cnt, cb, arg);
}

/* Whether push_fd is there: see net.h. */
int net_sreq_can_push_fd(const struct net_sreq *r)
{
	return r->conn->srv->ops->push_fd != NULL && !r->conn->sealed;
}

/* Push from a file: see net.h. */
int net_sreq_push_fd(struct net_sreq *r, uint64_t off, int fd,
		     uint64_t file_off, size_t len, net_xfer_fn cb, void *arg)
{
	if (!r->conn->srv->ops->push_fd || r->conn->sealed)
		return -EOPNOTSUPP;
	if (net_sreq_check(r, NET_SREQ_EV_PUSH))
		return -EINVAL;
	return r->conn->srv->ops->push_fd(r, off, fd, file_off, len, cb, arg);
}

/* Reply through the backend (which advances r to DONE); a timed request's
 * latency and status go to the server's opstats first (the reply may free
 * r), and it stops counting as active. A second reply, or one the handler
 * does not have, is refused (logged) and counts nothing. */
int net_sreq_reply(struct net_sreq *r, int32_t status, const void *body,
		   uint32_t len)
{
	struct net_server *s = r->conn->srv;

	if (net_sreq_check(r, NET_SREQ_EV_REPLY))
		return -EINVAL;
	if (s->opstats && r->t0_ns)
		metrics_op_record(s->opstats, r->hdr.op, status, net_now_ns() - r->t0_ns);
	NET_STAT_ADD(&s->st, reqs_active, -1);
	return s->ops->reply(r, status, body, len);
}

/* Reject through the backend (which advances r to DONE); counted as an
 * -EPROTO answer of its op, and no longer active. Refused (logged) when
 * the handler does not have r. */
void net_sreq_reject(struct net_sreq *r, const char *why)
{
	struct net_server *s = r->conn->srv;

	if (net_sreq_check(r, NET_SREQ_EV_REJECT))
		return;
	if (s->opstats && r->t0_ns)
		metrics_op_record(s->opstats, r->hdr.op, -EPROTO, net_now_ns() - r->t0_ns);
	NET_STAT_ADD(&s->st, reqs_active, -1);
	s->ops->reject(r, why);
}

/* ------------------------------------------------------------- connections */

/* See net_int.h. */
void net_sconn_open(struct net_sconn *c, enum net_sconn_hs hs,
		    void (*reap)(struct net_sconn *c))
{
	c->hs = hs;
	c->reap = reap;
	STAILQ_INIT(&c->rq);
	c->active = NULL;
	NET_STAT_ADD(&c->srv->st, conns_open, 1);
	if (hs != NET_HS_OPEN)
		NET_STAT_ADD(&c->srv->st, unauth_open, 1);
}

/* See net_int.h. */
void net_sconn_authed(struct net_sconn *c, int privileged)
{
	if (c->hs != NET_HS_OPEN)
		NET_STAT_ADD(&c->srv->st, unauth_open, -1);
	c->hs = NET_HS_OPEN;
	c->privileged = privileged;
}

/* See net_int.h. The log line's text is matched by tests (test_seal,
 * test_netfault). */
int net_sconn_close(struct net_sconn *c, int warn, const char *why)
{
	if (c->dead)
		return -EALREADY;
	if (warn)
		log_warn("net: %s: %s; closing connection", c->peer, why);
	else
		log_debug("net: %s: %s; closing connection", c->peer, why);
	c->dead = 1;
	NET_STAT_ADD(&c->srv->st, conns_open, -1);
	if (c->hs != NET_HS_OPEN)
		NET_STAT_ADD(&c->srv->st, unauth_open, -1);
	return 0;
}

/* See net_int.h. The warning's text is the one both backends had. */
int net_sconn_auth_check(struct net_sconn *c, const uint8_t *key,
			 const uint8_t *cn, const uint8_t *sn, const uint8_t *mac)
{
	if (net_auth_check(key, NET_AUTH_ROLE_CLIENT, cn, sn, mac)) {
		NET_STAT_ADD(&c->srv->st, auth_fail, 1);
		log_warn("net: %s: wrong cluster key; refusing the client", c->peer);
		return -EACCES;
	}
	NET_STAT_ADD(&c->srv->st, auth_ok, 1);
	return 0;
}

/* See net_int.h. A port scan or an idle connect: worth a notice, not
 * more. The text is the one both backends had (test_srvcore checks it). */
void net_sconn_hs_late(struct net_sconn *c, char *why, size_t cap)
{
	snprintf(why, cap, "handshake not done within %d ms",
		 c->srv->opts.request_timeout_ms);
	NET_STAT_ADD(&c->srv->st, unauth_closes, 1);
	log_notice("net: %s: %s; closing connection", c->peer, why);
}

/* See net_int.h. */
void net_sconn_enqueue(struct net_sconn *c, struct net_sreq *r)
{
	STAILQ_INSERT_TAIL(&c->rq, r, qlink);
}

/* See net_int.h. */
void net_sconn_requeue(struct net_sconn *c, struct net_sreq *r)
{
	STAILQ_INSERT_HEAD(&c->rq, r, qlink);
}

/* See net_int.h. */
int net_sconn_ready(const struct net_sconn *c)
{
	return !c->active && !STAILQ_EMPTY(&c->rq);
}

/* See net_int.h. */
struct net_sreq *net_sconn_next(struct net_sconn *c)
{
	struct net_sreq *r;

	if (!net_sconn_ready(c))
		return NULL;
	r = STAILQ_FIRST(&c->rq);
	STAILQ_REMOVE_HEAD(&c->rq, qlink);
	c->active = r;
	return r;
}

/* See net_int.h. */
void net_sconn_finished(struct net_sconn *c, struct net_sreq *r)
{
	if (c->active == r)
		c->active = NULL;
}

/* See net_int.h. */
void net_sconn_drain(struct net_sconn *c, void (*drop)(struct net_sreq *r))
{
	struct net_sreq *r;

	while ((r = STAILQ_FIRST(&c->rq)) != NULL) {
		STAILQ_REMOVE_HEAD(&c->rq, qlink);
		drop(r);
	}
}

/* See net_int.h. */
void net_sconn_hold(struct net_sconn *c)
{
	c->holds++;
}

/* See net_int.h. */
void net_sconn_release(struct net_sconn *c)
{
	if (--c->holds == 0 && c->dead && c->reap)
		c->reap(c);
}

/* The peer string kept by the backend at accept time. */
const char *net_sconn_peer(const struct net_sconn *c)
{
	return c->peer;
}

/* See net.h: the peer string up to its last ':'. */
const char *net_sconn_host(const struct net_sconn *c, char *buf, size_t cap)
{
	const char *colon = strrchr(c->peer, ':');
	size_t n = colon ? (size_t)(colon - c->peer) : strlen(c->peer);

	if (n >= cap)
		n = cap - 1;
	memcpy(buf, c->peer, n);
	buf[n] = '\0';
	return buf;
}

/* The class of key the peer proved, recorded by the backend's handshake. */
int net_sconn_privileged(const struct net_sconn *c)
{
	return c->privileged;
}
