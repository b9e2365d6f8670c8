/*
 * net_srv.c - the backend-independent server core of the transport: the
 * server calls of net.h (net_server_*, net_sreq_*, net_sconn_*) dispatched
 * to the backend chosen at creation, with the counters and per-op timing
 * they keep.
 *
 * Loop thread only, like the servers themselves; counters are atomics.
 */
#include "net_int.h"
#include "metrics_op.h"
#include "log.h"

#include <errno.h>
#include <string.h>

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

int net_sreq_pull(struct net_sreq *r, const struct iovec *iov, int cnt,
		  net_xfer_fn cb, void *arg)
{
	return r->conn->srv->ops->pull(r, iov, cnt, cb, arg);
}

int net_sreq_push(struct net_sreq *r, uint64_t off, const struct iovec *iov,
		  int cnt, net_xfer_fn cb, void *arg)
{
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
	return r->conn->srv->ops->push_fd(r, off, fd, file_off, len, cb, arg);
}

/* Reply through the backend; a timed request's latency and status go to
 * the server's opstats first (the reply may free r), and it stops
 * counting as active. */
int net_sreq_reply(struct net_sreq *r, int32_t status, const void *body,
		   uint32_t len)
{
	struct net_server *s = r->conn->srv;

	if (s->opstats && r->t0_ns)
		metrics_op_record(s->opstats, r->hdr.op, status, net_now_ns() - r->t0_ns);
	NET_STAT_ADD(&s->st, reqs_active, -1);
	return s->ops->reply(r, status, body, len);
}

/* Reject through the backend; counted as an -EPROTO answer of its op,
 * and no longer active. */
void net_sreq_reject(struct net_sreq *r, const char *why)
{
	struct net_server *s = r->conn->srv;

	if (s->opstats && r->t0_ns)
		metrics_op_record(s->opstats, r->hdr.op, -EPROTO, net_now_ns() - r->t0_ns);
	NET_STAT_ADD(&s->st, reqs_active, -1);
	s->ops->reject(r, why);
}

/* The peer string kept by the backend at accept time. */
const char *net_sconn_peer(const struct net_sconn *c)
{
	return c->peer;
}

/* The class of key the peer proved, recorded by the backend's handshake. */
int net_sconn_privileged(const struct net_sconn *c)
{
	return c->privileged;
}
