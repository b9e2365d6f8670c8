/*
 * tcp_server.c - the server half of the TCP backend, inside one libev loop.
 *
 * Each connection runs an input state machine: header -> body -> dispatch
 * to the handler; while a request is with the handler nothing more is read
 * from that connection except the request's own write data, which
 * net_sreq_pull() reads straight into the handler's memory. After the reply
 * any unpulled write data is read and dropped, and the next header is read.
 * Output is a queue of frames (data frames referencing the handler's iov,
 * replies with their small body copied) written with sendmsg as the socket
 * allows.
 *
 * A broken or malformed connection is closed at once (fd, watchers) but its
 * struct lives on while the handler still holds its request; transfer
 * callbacks of a closed connection run later from a fed event with -EIO,
 * never from inside the call that caused the close.
 *
 * Limits, so that a stalled, vanished or flooding peer cannot wear the
 * server down (common/transport/README.md "TCP server limits"):
 *  - a request with write data goes to the handler (which takes a pool
 *    buffer for it) only once the first byte of that data is staged
 *    (TSRV_BULK_GATE): a header without its data holds no buffer;
 *  - each connection has one request at a time, so it holds at most that
 *    request's buffers;
 *  - request deadline: the time spent waiting on the peer for a request's
 *    body and write data adds up to at most opts.request_timeout_ms, else
 *    the connection is closed (one warning naming the peer), which fails
 *    the handler's pull and so frees its buffer;
 *  - accepted sockets get TCP keepalive and TCP_USER_TIMEOUT derived from
 *    the same timeout (tsrv_sock_limits), so a vanished host is noticed;
 *  - output bound: while more than TSRV_OUT_MAX bytes of replies wait in
 *    the queue, no new request is read from that connection;
 *  - before the handshake is through: the same deadline for all of it
 *    (HELLO, AUTH), at most NET_UNAUTH_MAX such connections and
 *    NET_UNAUTH_PER_SOURCE per source address (past either, the oldest
 *    goes), so idle connects lock nobody out.
 *
 * Everything here runs in the loop thread; only the counters are atomics.
 */
#include "net_int.h"
#include "log.h"
#include "net_auth.h"
#include "net_seal.h"

#include <ev.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#define TSRV_STG_SIZE 16384     /* receive staging per connection */
#define TSRV_DIRECT_MIN 4096    /* pull bytes left above which we readv directly */
#define TSRV_BUDGET 32          /* reads per readable event (fairness) */
#define TSRV_ZERO_LEN 65536     /* zeros sent in place of a vanished file tail */
#define TSRV_OUT_MAX (256u << 10) /* queued reply bytes above which input stops */

/* A refill starts with less than a header left, and must fit a record. */
_Static_assert(TSRV_STG_SIZE >= PROTO_HDR_LEN + NET_SEAL_MAX + NET_SEAL_OVER,
	       "the staging buffer holds a whole sealed record");

static const uint8_t tsrv_zeros[TSRV_ZERO_LEN];

/* IN_BULKWAIT: body in, waiting for the first write data before dispatch */
enum tsrv_in { IN_HDR, IN_BODY, IN_BULKWAIT, IN_REQ, IN_DISCARD };

/* One output frame, or a transfer completion to deliver later. */
struct tsrv_frame {
	struct tsrv_frame *next;
	net_xfer_fn cb;           /* push completion, NULL for replies */
	void *arg;
	struct net_srv_done done; /* deferred completion (tsrv_defer) */
	struct tsrv_conn *conn;   /* whose, while deferred */
	enum net_sreq_event ev;   /* what its completion does to the request
				   * (PUSHED, PULLED), before cb runs */
	int cnt, cur;             /* iov entries, first unwritten */
	/* file tail sent by sendfile once the iovs are out (push_fd) */
	int sf_fd;                /* the file; only used while sf_left > 0 */
	int sf_zero;              /* file ended early: send zeros instead */
	size_t qbytes;            /* reply bytes counted in out_bytes */
	off_t sf_off;             /* next file offset */
	size_t sf_left;           /* file bytes still to send */
	struct iovec *sealed;     /* when sealed, what is sent instead of iov:
				   * the records (tsrv_seal_frame), cnt long */
	uint8_t hdr[PROTO_HDR_LEN];
	struct iovec iov[];       /* [0] = hdr; then body copy or handler iov */
};

struct tsrv_server;

struct tsrv_conn {
	struct net_sconn base;
	struct tsrv_server *srv;
	struct tsrv_conn *prev, *next;  /* server list */
	int fd;                         /* -1 once closed (base.dead) */
	struct sockaddr_storage src;    /* the peer's address (per-source cap) */
	ev_tstamp born;                 /* accept time (oldest unauth evicted) */
	const uint8_t *key;             /* the key of the class HELLO named */
	int key_priv;                   /* that class is privileged here */
	uint8_t cn[NET_AUTH_NONCE_LEN]; /* client nonce of the handshake */
	uint8_t sn[NET_AUTH_NONCE_LEN]; /* our nonce of the handshake */
	/* After AUTH with a key, both directions are sealed (net_seal.h,
	 * base.sealed): input is opened in stg, output sealed as it is
	 * queued. */
	int seal_mode;                  /* NET_SEAL_MAC, or _AEAD when either
					 * side asked to encrypt */
	struct net_seal rx_seal, tx_seal;
	ev_io rw, ww;
	ev_timer dl;                    /* request deadline, runs while we wait
					 * on the peer for a request's bytes */
	ev_tstamp dl_left;              /* seconds of the deadline left */

	/* input */
	enum tsrv_in in;
	struct proto_hdr h;
	uint8_t *body;                  /* grows up to PROTO_MAX_BODY */
	uint32_t body_cap, body_got;
	uint64_t discard_left;
	uint32_t stg_off, stg_len;      /* stg_len: end of opened bytes */
	uint32_t raw_len;               /* sealed bytes after stg_len, not
					 * yet a whole record */
	uint8_t *stg;                   /* TSRV_STG_SIZE */

	/* the request (one at a time); req.state says whether the handler
	 * has it and whether it pulls */
	struct net_sreq req;

	/* the pull reading the socket (tsrv_pulling) */
	struct iovec *pull_iov;         /* NET_MAX_IOV, allocated at first pull */
	int pull_cnt, pull_cur;
	uint64_t pull_total, pull_left;
	net_xfer_fn pull_cb;
	void *pull_arg;

	/* output queue, and completions queued in the server's deferred
	 * work (tsrv_defer) */
	struct tsrv_frame *out_head, *out_tail;
	int ndone;
	size_t out_bytes;               /* bytes of queued reply frames */
};

struct tsrv_server {
	struct net_server base;
	struct ev_loop *loop;
	ev_io accept_w;
	ev_timer accept_retry;          /* re-arms accept after EMFILE */
	int lfd;
	uint16_t port;
	net_req_fn fn;
	void *fn_arg;
	struct tsrv_conn *conns;
};

static void tsrv_conn_close(struct tsrv_conn *c, int warn, const char *why);
static void tsrv_want_read(struct tsrv_conn *c);
static int tsrv_staged(const struct tsrv_conn *c);
static void tsrv_flush(struct tsrv_conn *c);
static void tsrv_ctrl(struct tsrv_conn *c);
static int tsrv_open(struct tsrv_conn *c);
static void tsrv_queue(struct tsrv_conn *c, struct tsrv_frame *f);
static void tsrv_dispatch(struct tsrv_conn *c);

/* ---------------------------------------------------------------- lifetime */

/* Free an output frame and its sealed records. */
static void tsrv_frame_free(struct tsrv_frame *f)
{
	free(f->sealed);
	free(f);
}

/* The iovecs a frame sends: its own, or its sealed records. */
static struct iovec *tsrv_fv(struct tsrv_frame *f)
{
	return f->sealed ? f->sealed : f->iov;
}

/* Free a connection's memory (fd already closed). */
static void tsrv_conn_destroy(struct tsrv_conn *c)
{
	struct tsrv_server *s = c->srv;
	struct tsrv_frame *f, *nx;

	ev_timer_stop(s->loop, &c->dl);
	ev_clear_pending(s->loop, &c->rw);
	ev_clear_pending(s->loop, &c->ww);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	for (f = c->out_head; f; f = nx) {
		nx = f->next;
		tsrv_frame_free(f);
	}
	free(c->pull_iov);
	free(c->body);
	free(c->stg);
	free(c);
}

/* Whether the handler's pull is reading c's socket: the request is
 * PULLING with bytes left to read (a deferred pull reads nothing). */
static int tsrv_pulling(const struct tsrv_conn *c)
{
	return c->req.state == NET_SREQ_PULLING && c->pull_left > 0;
}

/* The reap hook of net_sconn_release: free a dead connection that no
 * handler and no deferred completion uses any more. */
static void tsrv_reap(struct net_sconn *b)
{
	struct tsrv_conn *c = NET_CONTAINER_OF(b, struct tsrv_conn, base);

	if (!net_sreq_with_handler(&c->req) && !c->ndone)
		tsrv_conn_destroy(c);
}

/* Queue a transfer completion in the server's deferred work; c lives on
 * until it is delivered. */
static void tsrv_defer(struct tsrv_conn *c, struct tsrv_frame *f, int rc)
{
	f->conn = c;
	c->ndone++;
	net_srv_defer(&c->srv->base, &f->done, rc);
}

/* Deliver one deferred transfer completion (the server's kick watcher):
 * advance the request, free the frame, run the callback. */
static void tsrv_done_run(struct net_srv_done *d)
{
	struct tsrv_frame *f = NET_CONTAINER_OF(d, struct tsrv_frame, done);
	struct tsrv_conn *c = f->conn;
	net_xfer_fn cb = f->cb;
	void *arg = f->arg;
	enum net_sreq_event ev = f->ev;
	int rc = d->rc;

	net_sconn_hold(&c->base);
	c->ndone--;
	tsrv_frame_free(f);
	(void)net_sreq_advance(&c->req, ev);
	if (cb)
		cb(&c->req, rc, arg);
	net_sconn_release(&c->base);
}

/* Server teardown: free an undelivered completion. */
static void tsrv_done_drop(struct net_srv_done *d)
{
	struct tsrv_frame *f = NET_CONTAINER_OF(d, struct tsrv_frame, done);

	f->conn->ndone--;
	tsrv_frame_free(f);
}

/*
 * Close a connection: stop its watchers and close the fd, turn pending
 * pushes and a pending pull into -EIO completions (delivered later), drop
 * queued replies. The struct is freed once the handler lets go.
 */
static void tsrv_conn_close(struct tsrv_conn *c, int warn, const char *why)
{
	struct tsrv_server *s = c->srv;
	struct tsrv_frame *f, *nx;

	if (net_sconn_close(&c->base, warn, why))
		return;
	ev_io_stop(s->loop, &c->rw);
	ev_io_stop(s->loop, &c->ww);
	ev_timer_stop(s->loop, &c->dl);
	close(c->fd);
	c->fd = -1;
	for (f = c->out_head; f; f = nx) {
		nx = f->next;
		if (f->cb)
			tsrv_defer(c, f, -EIO);
		else
			tsrv_frame_free(f);
	}
	c->out_head = c->out_tail = NULL;
	c->out_bytes = 0;
	if (tsrv_pulling(c)) {
		c->pull_left = 0;
		f = calloc(1, sizeof(*f));
		if (f) {
			f->cb = c->pull_cb;
			f->arg = c->pull_arg;
			f->ev = NET_SREQ_EV_PULLED;
			tsrv_defer(c, f, -EIO);
		} else {
			log_err("net: %s: out of memory failing a pull", c->base.peer);
			(void)net_sreq_advance(&c->req, NET_SREQ_EV_PULLED);
		}
	}
	net_sconn_hold(&c->base);
	net_sconn_release(&c->base);
}

/* ---------------------------------------------------------------- deadline */

/* Whether c waits on its peer for bytes of the current request: its body,
 * the first write data, data a pull asked for, or data to discard. */
static int tsrv_waits_peer(const struct tsrv_conn *c)
{
	if (c->base.dead)
		return 0;
	if (c->base.hs != NET_HS_OPEN)
		return 1; /* the whole handshake runs on the deadline */
	switch (c->in) {
	case IN_BODY:
	case IN_BULKWAIT:
	case IN_DISCARD:
		return 1;
	case IN_REQ:
		return tsrv_pulling(c);
	default:
		return 0;
	}
}

/* Run the request deadline while c waits on its peer, pause it (keeping
 * what is left) while the handler or the disk has the request. */
static void tsrv_dl_update(struct tsrv_conn *c)
{
	struct ev_loop *loop = c->srv->loop;
	int wait = tsrv_waits_peer(c);

	if (wait && !ev_is_active(&c->dl)) {
		ev_timer_set(&c->dl, c->dl_left > 0.001 ? c->dl_left : 0.001, 0.);
		ev_timer_start(loop, &c->dl);
	} else if (!wait && ev_is_active(&c->dl)) {
		c->dl_left = ev_timer_remaining(loop, &c->dl);
		ev_timer_stop(loop, &c->dl);
	}
}

/* A new request header: its deadline starts afresh (not during the
 * handshake, which has one deadline for all of it). */
static void tsrv_dl_reset(struct tsrv_conn *c)
{
	if (c->base.hs != NET_HS_OPEN)
		return;
	ev_timer_stop(c->srv->loop, &c->dl);
	c->dl_left = c->srv->base.opts.request_timeout_ms / 1000.;
}

/* The peer did not send a request's bytes in time: close the connection,
 * which fails a pending pull so the handler frees its buffer. */
static void tsrv_dl_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tsrv_conn *c = w->data;
	char why[96];

	net_sconn_hold(&c->base);
	if (c->base.hs != NET_HS_OPEN) {
		net_sconn_hs_late(&c->base, why, sizeof(why));
		tsrv_conn_close(c, 0, why);
		net_sconn_release(&c->base);
		return;
	}
	snprintf(why, sizeof(why), "request data did not arrive within %d ms",
		 c->srv->base.opts.request_timeout_ms);
	NET_STAT_ADD(&c->srv->base.st, conn_errors, 1);
	NET_STAT_ADD(&c->srv->base.st, deadline_closes, 1);
	tsrv_conn_close(c, 1, why);
	net_sconn_release(&c->base);
}

/* ------------------------------------------------------------------- input */

/* Staged write data needed before a request with bulk data is dispatched:
 * its first byte. A header whose data never comes so never reaches the
 * handler, and takes no pool buffer (its deadline closes it). */
#define TSRV_BULK_GATE 1

/* The body of the frame in c->h is in: a handshake frame is handled; a
 * request becomes c->req, dispatched at once or, with write data, once
 * that starts (IN_BULKWAIT: ARRIVING). */
static void tsrv_body_done(struct tsrv_conn *c)
{
	struct net_sreq *r = &c->req;

	if (c->h.flags & PROTO_F_CTRL) { /* handshake frame with a body */
		tsrv_ctrl(c);
		return;
	}
	memset(r, 0, sizeof(*r));
	r->conn = &c->base;
	r->hdr = c->h;
	r->body = c->body;
	r->body_len = c->h.body_len;
	net_sconn_enqueue(&c->base, r);
	if (c->h.bulk_len > 0) {
		(void)net_sreq_advance(r, NET_SREQ_EV_PARTIAL);
		c->in = IN_BULKWAIT;
		return;
	}
	(void)net_sreq_advance(r, NET_SREQ_EV_ARRIVE);
	tsrv_dispatch(c);
}

/* Make c->req (QUEUED) the handler's: c's next request in order, the
 * only one (nothing more is read until it is answered). */
static void tsrv_dispatch(struct tsrv_conn *c)
{
	struct tsrv_server *s = c->srv;
	struct net_sreq *r = net_sconn_next(&c->base);

	if (r != &c->req) { /* a request still served: a bug, not the peer's */
		log_err("net: %s: a request arrived while another is served",
			c->base.peer);
		tsrv_conn_close(c, 1, "request out of order");
		return;
	}
	(void)net_sreq_advance(r, NET_SREQ_EV_DISPATCH);
	c->in = IN_REQ;
	NET_STAT_ADD(&s->base.st, msgs_rx, 1);
	tsrv_want_read(c);
	s->fn(r, s->fn_arg);
}

/*
 * Send a handshake reply (CTRL|REPLY) with an optional small body. When
 * final, the frame is written at once (best effort: it is the first output
 * on a fresh socket) and the connection is closed: used to tell a refused
 * client why before hanging up.
 */
static void tsrv_ctrl_reply(struct tsrv_conn *c, int32_t status,
			    const void *body, uint32_t len, int final)
{
	struct tsrv_server *s = c->srv;
	struct tsrv_frame *f;
	struct proto_hdr h = { .op = c->h.op, .tag = c->h.tag, .status = status,
			       .credits = (uint16_t)s->base.opts.credits,
			       .flags = PROTO_F_CTRL | PROTO_F_REPLY,
			       .body_len = len };

	NET_STAT_ADD(&s->base.st, msgs_tx, 1);
	if (final) {
		uint8_t hb[PROTO_HDR_LEN];
		ssize_t n;

		proto_hdr_encode(hb, &h);
		n = send(c->fd, hb, sizeof(hb), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0)
			NET_STAT_ADD(&s->base.st, bytes_tx, n);
		tsrv_conn_close(c, 0, "cluster key refused");
		return;
	}
	f = calloc(1, sizeof(*f) + 2 * sizeof(struct iovec) + len);
	if (!f) {
		tsrv_conn_close(c, 1, "out of memory");
		return;
	}
	proto_hdr_encode(f->hdr, &h);
	f->cnt = len ? 2 : 1;
	f->iov[0] = (struct iovec){ f->hdr, PROTO_HDR_LEN };
	if (len) {
		uint8_t *copy = (uint8_t *)&f->iov[2];
		memcpy(copy, body, len);
		f->iov[1] = (struct iovec){ copy, len };
	}
	f->qbytes = PROTO_HDR_LEN + (size_t)len;
	if (c->out_tail)
		c->out_tail->next = f;
	else
		c->out_head = f;
	c->out_tail = f;
	c->out_bytes += f->qbytes;
	tsrv_flush(c);
}

/* The handshake is through: requests may come, on their own deadlines. */
static void tsrv_authed(struct tsrv_conn *c, int privileged)
{
	struct tsrv_server *s = c->srv;

	net_sconn_authed(&c->base, privileged);
	ev_timer_stop(s->loop, &c->dl);
	c->dl_left = s->base.opts.request_timeout_ms / 1000.;
}

/*
 * Handle HELLO (body in c->body): grant our credit limit and, with a key,
 * send our nonce and our proof of the key of the class the client named.
 * A client without a key, or naming a key we do not hold, is told -EACCES
 * and closed with a warning.
 */
static void tsrv_hello(struct tsrv_conn *c)
{
	struct tsrv_server *s = c->srv;
	const struct net_opts *o = &s->base.opts;
	uint8_t rep[NET_AUTH_NONCE_LEN + NET_AUTH_MAC_LEN + 1];
	int keyed = c->h.body_len >= NET_AUTH_HELLO_LEN;
	uint8_t cls, flags;

	if (!net_auth_keyed(o)) {
		tsrv_authed(c, 1);
		tsrv_ctrl_reply(c, 0, NULL, 0, 0);
		return;
	}
	cls = keyed ? c->body[NET_AUTH_NONCE_LEN] : 0;
	flags = c->h.body_len == NET_AUTH_HELLO_FLAGS_LEN ? c->body[NET_AUTH_HELLO_LEN] : 0;
	if (flags & ~NET_AUTH_F_ENCRYPT) {
		NET_STAT_ADD(&s->base.st, rejects, 1);
		log_warn("net: %s: unknown handshake flags 0x%x; refusing the client",
			 c->base.peer, flags);
		tsrv_ctrl_reply(c, -EPROTO, NULL, 0, 1);
		return;
	}
	if (!keyed || net_auth_server_key(o, cls, &c->key, &c->key_priv)) {
		NET_STAT_ADD(&s->base.st, auth_fail, 1);
		if (!keyed)
			log_warn("net: %s: client has no cluster key; refusing it",
				 c->base.peer);
		else
			log_warn("net: %s: client offers %s, which this server "
				 "does not hold; refusing it", c->base.peer,
				 net_auth_class_name(cls));
		tsrv_ctrl_reply(c, -EACCES, NULL, 0, 1);
		return;
	}
	memcpy(c->cn, c->body, NET_AUTH_NONCE_LEN);
	net_auth_nonce(c->sn);
	memcpy(rep, c->sn, NET_AUTH_NONCE_LEN);
	net_auth_mac(c->key, NET_AUTH_ROLE_SERVER, c->cn, c->sn,
		     rep + NET_AUTH_NONCE_LEN);
	/* encrypted when either side asks; the mode byte goes back only then
	 * (and is bound into the stream keys, net_seal.h) */
	c->seal_mode = (flags & NET_AUTH_F_ENCRYPT) || o->encrypt ? NET_SEAL_AEAD
								  : NET_SEAL_MAC;
	rep[NET_AUTH_NONCE_LEN + NET_AUTH_MAC_LEN] = (uint8_t)c->seal_mode;
	c->base.hs = NET_HS_AUTH;
	tsrv_ctrl_reply(c, 0, rep, sizeof(rep) - (c->seal_mode == NET_SEAL_MAC), 0);
}

/*
 * The key is proved: what follows AUTH in either direction is sealed
 * (net_seal.h). Bytes the client sent after AUTH that are staged already
 * were not opened: they become raw record bytes. The AUTH reply is queued
 * before this, unsealed. Sealed output cannot go by sendfile (its bytes
 * must be read to be tagged), so push_fd is off from here.
 */
static void tsrv_seal_start(struct tsrv_conn *c)
{
	net_seal_init(&c->rx_seal, c->key, NET_AUTH_ROLE_CLIENT, c->seal_mode, c->cn,
		      c->sn);
	net_seal_init(&c->tx_seal, c->key, NET_AUTH_ROLE_SERVER, c->seal_mode, c->cn,
		      c->sn);
	c->raw_len = c->stg_len - c->stg_off;
	c->stg_len = c->stg_off;
	c->base.sealed = 1;
	tsrv_open(c);
}

/*
 * Handle a handshake frame (HELLO or AUTH, body in c->body), the challenge
 * and response of net_auth.h. A client that fails AUTH is told -EACCES and
 * closed with a warning; nothing else is served before AUTH verified.
 */
static void tsrv_ctrl(struct tsrv_conn *c)
{
	struct tsrv_server *s = c->srv;

	c->in = IN_HDR;
	if (c->h.op == PROTO_OP_NET_HELLO) {
		tsrv_hello(c);
		return;
	}
	/* PROTO_OP_NET_AUTH (tsrv_on_hdr let nothing else through); a wrong
	 * proof closes c */
	if (net_sconn_auth_check(&c->base, c->key, c->cn, c->sn, c->body)) {
		tsrv_ctrl_reply(c, -EACCES, NULL, 0, 1);
		return;
	}
	tsrv_authed(c, c->key_priv);
	log_debug("net: %s: %s proved", c->base.peer,
		  c->key == s->base.opts.srv_key ? "the servers' key"
						 : "the clients' key");
	tsrv_ctrl_reply(c, 0, NULL, 0, 0);
	tsrv_seal_start(c);
}

/* A whole header is in c->h: validate it and pick the next state.
 * @return 0, or -EPROTO after closing the connection */
static int tsrv_on_hdr(struct tsrv_conn *c)
{
	struct proto_hdr *h = &c->h;
	const char *why = NULL;

	if (h->flags & (PROTO_F_REPLY | PROTO_F_DATA))
		why = "reply or data flag on a request";
	else if (h->status != 0)
		why = "nonzero status on a request";
	else if (h->flags & PROTO_F_CTRL) {
		if (h->bulk_len || h->aux)
			why = "unexpected control frame";
		else if (h->op == PROTO_OP_NET_HELLO && c->base.hs == NET_HS_HELLO &&
			 (h->body_len == 0 || h->body_len == NET_AUTH_HELLO_LEN ||
			  h->body_len == NET_AUTH_HELLO_FLAGS_LEN))
			;
		else if (h->op == PROTO_OP_NET_AUTH && c->base.hs == NET_HS_AUTH &&
			 h->body_len == NET_AUTH_MAC_LEN)
			;
		else
			why = "unexpected control frame";
	} else if (c->base.hs == NET_HS_HELLO)
		why = "request before handshake";
	else if (c->base.hs != NET_HS_OPEN) {
		NET_STAT_ADD(&c->srv->base.st, auth_fail, 1);
		why = "request before the cluster key was proved";
	} else if (h->op == PROTO_OP_NET_HELLO || h->op == PROTO_OP_NET_CREDIT ||
		 h->op == PROTO_OP_NET_AUTH)
		why = "control op without control flag";
	if (why) {
		NET_STAT_ADD(&c->srv->base.st, rejects, 1);
		tsrv_conn_close(c, 1, why);
		return -EPROTO;
	}
	tsrv_dl_reset(c);
	if ((h->flags & PROTO_F_CTRL) && h->body_len == 0) {
		tsrv_ctrl(c);
		return c->base.dead ? -EIO : 0;
	}
	if (h->body_len > c->body_cap) {
		uint32_t cap = c->body_cap ? c->body_cap : 4096;
		while (cap < h->body_len)
			cap *= 2;
		if (cap > PROTO_MAX_BODY)
			cap = PROTO_MAX_BODY;
		uint8_t *nb = realloc(c->body, cap);
		if (!nb) {
			tsrv_conn_close(c, 1, "out of memory for a request body");
			return -ENOMEM;
		}
		c->body = nb;
		c->body_cap = cap;
	}
	c->body_got = 0;
	c->in = IN_BODY;
	if (h->body_len == 0)
		tsrv_body_done(c);
	return 0;
}

/* Move staged bytes into the active pull's iov; complete it when full. */
static void tsrv_pull_take(struct tsrv_conn *c, const uint8_t *src, size_t n)
{
	while (n > 0 && c->pull_cur < c->pull_cnt) {
		struct iovec *v = &c->pull_iov[c->pull_cur];
		size_t k = v->iov_len < n ? v->iov_len : n;
		memcpy(v->iov_base, src, k);
		v->iov_base = (uint8_t *)v->iov_base + k;
		v->iov_len -= k;
		src += k;
		n -= k;
		c->pull_left -= k;
		if (v->iov_len == 0)
			c->pull_cur++;
	}
}

/* Account n bytes read directly into the pull iov. */
static void tsrv_pull_advance(struct tsrv_conn *c, size_t n)
{
	c->pull_left -= n;
	while (n > 0 && c->pull_cur < c->pull_cnt) {
		struct iovec *v = &c->pull_iov[c->pull_cur];
		size_t k = v->iov_len < n ? v->iov_len : n;
		v->iov_base = (uint8_t *)v->iov_base + k;
		v->iov_len -= k;
		n -= k;
		if (v->iov_len == 0)
			c->pull_cur++;
	}
	while (c->pull_cur < c->pull_cnt && c->pull_iov[c->pull_cur].iov_len == 0)
		c->pull_cur++;
}

/* The active pull is complete: account it and run its callback. */
static void tsrv_pull_done(struct tsrv_conn *c)
{
	net_xfer_fn cb = c->pull_cb;
	void *arg = c->pull_arg;

	(void)net_sreq_advance(&c->req, NET_SREQ_EV_PULLED);
	c->req.pulled += c->pull_total;
	NET_STAT_ADD(&c->srv->base.st, bulk_pull_bytes, c->pull_total);
	tsrv_want_read(c);
	cb(&c->req, 0, arg);
}

/* Open the whole sealed records in c's staging buffer (net_seal_open).
 * @return 0, -EBADMSG (c closed: the records are not the peer's) */
static int tsrv_open(struct tsrv_conn *c)
{
	if (!net_seal_open(&c->rx_seal, c->stg, &c->stg_len, &c->raw_len))
		return 0;
	NET_STAT_ADD(&c->srv->base.st, rejects, 1);
	tsrv_conn_close(c, 1, "a sealed record failed its check (not from the "
			"peer that proved the key)");
	return -EBADMSG;
}

/* An input step's answer that it needs more staged bytes. */
#define TSRV_REFILL 2

/* A read of c's socket returned n <= 0: the peer closed (clean only
 * between requests), would block, or failed.
 * @return 0 (would block), -ECONNRESET or -EIO (c closed) */
static int tsrv_rx_fail(struct tsrv_conn *c, ssize_t n)
{
	struct tsrv_server *s = c->srv;

	if (n == 0) {
		int clean = c->in == IN_HDR && c->stg_len == c->stg_off &&
			    c->raw_len == 0;
		if (!clean)
			NET_STAT_ADD(&s->base.st, conn_errors, 1);
		tsrv_conn_close(c, 0, clean ? "peer closed" : "peer closed mid-request");
		return -ECONNRESET;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return 0;
	NET_STAT_ADD(&s->base.st, conn_errors, 1);
	tsrv_conn_close(c, 0, strerror(errno));
	return -EIO;
}

/* IN_HDR: decode a staged header; none is read while c's queued replies
 * pass TSRV_OUT_MAX. @return 1, 0, TSRV_REFILL, -EPROTO (c closed) */
static int tsrv_in_hdr(struct tsrv_conn *c, uint32_t avail)
{
	const char *why = "?";
	char msg[96];
	int rc;

	if (c->out_bytes > TSRV_OUT_MAX) {
		tsrv_want_read(c); /* stops reading until replies drain */
		return 0;
	}
	if (avail < PROTO_HDR_LEN)
		return TSRV_REFILL;
	rc = proto_hdr_decode(c->stg + c->stg_off, &c->h, &why);
	c->stg_off += PROTO_HDR_LEN;
	if (rc) {
		snprintf(msg, sizeof(msg), "bad header: %s", why);
		NET_STAT_ADD(&c->srv->base.st, rejects, 1);
		tsrv_conn_close(c, 1, msg);
		return -EPROTO;
	}
	return tsrv_on_hdr(c) ? -EPROTO : 1;
}

/* IN_BODY: staged bytes into the body, or a large rest read straight
 * into it. @return 1, 0, TSRV_REFILL, <0 (c closed) */
static int tsrv_in_body(struct tsrv_conn *c, uint32_t avail)
{
	uint32_t k = c->h.body_len - c->body_got;
	ssize_t n;

	if (avail > 0) {
		if (k > avail)
			k = avail;
		memcpy(c->body + c->body_got, c->stg + c->stg_off, k);
		c->stg_off += k;
		c->body_got += k;
	} else if (k >= TSRV_DIRECT_MIN && !c->base.sealed) {
		n = recv(c->fd, c->body + c->body_got, k, 0);
		if (n <= 0)
			return tsrv_rx_fail(c, n);
		NET_STAT_ADD(&c->srv->base.st, bytes_rx, n);
		c->body_got += (uint32_t)n;
	} else {
		return TSRV_REFILL;
	}
	if (c->body_got == c->h.body_len)
		tsrv_body_done(c);
	return 1;
}

/* IN_REQ: the handler's active pull takes staged bytes, or a large rest
 * is read straight into its iovecs. @return 1, 0 (no pull), TSRV_REFILL,
 * <0 (c closed) */
static int tsrv_in_pull(struct tsrv_conn *c, uint32_t avail)
{
	ssize_t n;

	if (!tsrv_pulling(c))
		return 0;
	if (avail > 0) {
		size_t k = avail < c->pull_left ? avail : (size_t)c->pull_left;
		tsrv_pull_take(c, c->stg + c->stg_off, k);
		c->stg_off += (uint32_t)k;
	} else if (c->pull_left >= TSRV_DIRECT_MIN && !c->base.sealed) {
		int cnt = c->pull_cnt - c->pull_cur;
		n = readv(c->fd, c->pull_iov + c->pull_cur, cnt > IOV_MAX ? IOV_MAX : cnt);
		if (n <= 0)
			return tsrv_rx_fail(c, n);
		NET_STAT_ADD(&c->srv->base.st, bytes_rx, n);
		tsrv_pull_advance(c, (size_t)n);
	} else {
		return TSRV_REFILL;
	}
	if (c->pull_left == 0)
		tsrv_pull_done(c);
	return 1;
}

/* Compact c's staging buffer (the avail unread bytes, then raw sealed
 * ones) and read into it; when sealed, open the whole records that came.
 * @return 1, 0, <0 (c closed) */
static int tsrv_in_refill(struct tsrv_conn *c, uint32_t avail)
{
	ssize_t n;

	if (c->stg_off > 0) {
		memmove(c->stg, c->stg + c->stg_off, avail + c->raw_len);
		c->stg_off = 0;
		c->stg_len = avail;
	}
	n = recv(c->fd, c->stg + c->stg_len + c->raw_len,
		 TSRV_STG_SIZE - c->stg_len - c->raw_len, 0);
	if (n <= 0)
		return tsrv_rx_fail(c, n);
	NET_STAT_ADD(&c->srv->base.st, bytes_rx, n);
	if (!c->base.sealed) {
		c->stg_len += (uint32_t)n;
		return 1;
	}
	c->raw_len += (uint32_t)n;
	return tsrv_open(c) ? -EBADMSG : 1;
}

/*
 * One input step: consume staged bytes for the current state, or read
 * from the socket (straight into the body or the pull iov when what is
 * left is large).
 * @return 1 progress, 0 nothing to do / would block, <0 connection closed
 */
static int tsrv_in_step(struct tsrv_conn *c)
{
	uint32_t avail = c->stg_len - c->stg_off;
	int rc = TSRV_REFILL;

	switch (c->in) {
	case IN_HDR:
		rc = tsrv_in_hdr(c, avail);
		break;
	case IN_BODY:
		rc = tsrv_in_body(c, avail);
		break;
	case IN_BULKWAIT:
		if (avail >= TSRV_BULK_GATE) {
			(void)net_sreq_advance(&c->req, NET_SREQ_EV_DATA);
			tsrv_dispatch(c);
			return 1;
		}
		break;
	case IN_REQ:
		rc = tsrv_in_pull(c, avail);
		break;
	case IN_DISCARD:
		if (avail > 0) {
			uint32_t k = avail < c->discard_left ? avail : (uint32_t)c->discard_left;
			c->stg_off += k;
			c->discard_left -= k;
			if (c->discard_left == 0)
				c->in = IN_HDR;
			return 1;
		}
		break;
	}
	return rc == TSRV_REFILL ? tsrv_in_refill(c, avail) : rc;
}

/* Whether the current input state can progress from staged bytes alone. */
static int tsrv_staged(const struct tsrv_conn *c)
{
	uint32_t avail = c->stg_len - c->stg_off;

	switch (c->in) {
	case IN_HDR:
		return avail >= PROTO_HDR_LEN && c->out_bytes <= TSRV_OUT_MAX;
	case IN_BULKWAIT:
		return avail >= TSRV_BULK_GATE;
	case IN_REQ:
		return tsrv_pulling(c) && avail > 0;
	default:
		return avail > 0;
	}
}

/* Readable (or fed): run input steps within a budget. */
static void tsrv_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tsrv_conn *c = w->data;

	net_sconn_hold(&c->base);
	/* After the budget, still drain what is staged: level-triggered
	 * watchers would not fire again for bytes already read. */
	for (int i = 0; !c->base.dead && (i < TSRV_BUDGET || tsrv_staged(c)); i++)
		if (tsrv_in_step(c) <= 0)
			break;
	tsrv_dl_update(c);
	net_sconn_release(&c->base);
}

/* Whether input should be read now: not while a request is with the
 * handler, unless it is pulling, nor a new request while more than
 * TSRV_OUT_MAX reply bytes wait to be sent. Restarts processing of staged
 * bytes, and runs or pauses the request deadline to match. */
static void tsrv_want_read(struct tsrv_conn *c)
{
	struct ev_loop *loop = c->srv->loop;
	int want = !c->base.dead && (c->in != IN_REQ || tsrv_pulling(c)) &&
		   !(c->in == IN_HDR && c->out_bytes > TSRV_OUT_MAX);

	tsrv_dl_update(c);
	if (want) {
		if (!ev_is_active(&c->rw))
			ev_io_start(loop, &c->rw);
		if (tsrv_staged(c))
			ev_feed_event(loop, &c->rw, EV_READ);
	} else if (ev_is_active(&c->rw)) {
		ev_io_stop(loop, &c->rw);
	}
}

/* ------------------------------------------------------------------ output */

/*
 * Send the file tail of the head frame (push_fd) with sendfile(2): no copy
 * into user memory. Should the file have shrunk since the handler looked
 * (sendfile returns 0), the rest goes as zeros, as a read of a hole would.
 * @return 1 tail done, 0 socket full, -1 connection closed
 */
static int tsrv_send_file(struct tsrv_conn *c, struct tsrv_frame *f)
{
	struct tsrv_server *s = c->srv;

	while (f->sf_left) {
		size_t want = f->sf_left;
		ssize_t n;

		if (f->sf_zero) {
			if (want > TSRV_ZERO_LEN)
				want = TSRV_ZERO_LEN;
			n = send(c->fd, tsrv_zeros, want,
				 MSG_NOSIGNAL | MSG_DONTWAIT | MSG_MORE);
		} else {
			if (want > 0x7ffff000)
				want = 0x7ffff000;
			n = sendfile(c->fd, f->sf_fd, &f->sf_off, want);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			NET_STAT_ADD(&s->base.st, conn_errors, 1);
			tsrv_conn_close(c, 0, strerror(errno));
			return -1;
		}
		if (n == 0) {
			f->sf_zero = 1;
			continue;
		}
		NET_STAT_ADD(&s->base.st, bytes_tx, n);
		f->sf_left -= (size_t)n;
	}
	return 1;
}

/*
 * Write as much of the output queue as the socket takes, gathering several
 * frames per sendmsg. Completed pushes get their callbacks deferred.
 * While the queue ends in a data frame of a request not yet answered, the
 * send says MSG_MORE: the reply (or the next data frame) surely follows,
 * so the kernel holds a short tail and sends it with the reply in one
 * segment, and the client takes one wake-up per small read instead of two.
 * A frame with a file tail (push_fd) ends a gather: its header goes with
 * MSG_MORE, then its bytes by sendfile.
 */
static void tsrv_flush(struct tsrv_conn *c)
{
	struct tsrv_server *s = c->srv;
	struct iovec v[IOV_MAX];
	int over = c->out_bytes > TSRV_OUT_MAX;

	while (c->out_head && !c->base.dead) {
		int cnt = 0, more = 0, file = 0;
		struct tsrv_frame *g = c->out_head;
		if (g->cur == g->cnt && g->sf_left) {
			int rc = tsrv_send_file(c, g);
			if (rc <= 0) {
				if (rc < 0)
					return;
				break;
			}
			c->out_head = g->next;
			if (!c->out_head)
				c->out_tail = NULL;
			tsrv_defer(c, g, 0);
			continue;
		}
		for (; g && cnt < IOV_MAX && !file; g = g->next) {
			for (int i = g->cur; i < g->cnt && cnt < IOV_MAX; i++)
				v[cnt++] = tsrv_fv(g)[i];
			file = g->sf_left > 0;
		}
		if (file || (!g && net_sreq_with_handler(&c->req) && c->out_tail->cb))
			more = MSG_MORE;
		struct msghdr m = { .msg_iov = v, .msg_iovlen = (size_t)cnt };
		ssize_t n = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT | more);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			NET_STAT_ADD(&s->base.st, conn_errors, 1);
			tsrv_conn_close(c, 0, strerror(errno));
			return;
		}
		NET_STAT_ADD(&s->base.st, bytes_tx, n);
		while (n >= 0 && c->out_head) {
			struct tsrv_frame *f = c->out_head;
			struct iovec *fv = tsrv_fv(f);
			while (f->cur < f->cnt && (size_t)n >= fv[f->cur].iov_len) {
				n -= (ssize_t)fv[f->cur].iov_len;
				f->cur++;
			}
			if (f->cur < f->cnt) {
				fv[f->cur].iov_base = (uint8_t *)fv[f->cur].iov_base + n;
				fv[f->cur].iov_len -= (size_t)n;
				break;
			}
			if (f->sf_left)
				break; /* its file tail goes next */
			c->out_head = f->next;
			if (!c->out_head)
				c->out_tail = NULL;
			if (f->cb) {
				tsrv_defer(c, f, 0);
			} else {
				c->out_bytes -= f->qbytes;
				tsrv_frame_free(f);
			}
		}
	}
	if (c->base.dead)
		return;
	if (over && c->out_bytes <= TSRV_OUT_MAX)
		tsrv_want_read(c); /* replies drained: read requests again */
	if (c->out_head && !ev_is_active(&c->ww))
		ev_io_start(s->loop, &c->ww);
	else if (!c->out_head && ev_is_active(&c->ww))
		ev_io_stop(s->loop, &c->ww);
}

/* Writable: send what is queued. The hold keeps c alive should the flush
 * close it (a send error); the release then frees it. */
static void tsrv_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tsrv_conn *c = w->data;

	net_sconn_hold(&c->base);
	tsrv_flush(c);
	net_sconn_release(&c->base);
}

/*
 * Seal f's bytes as records (net_seal_iov): f then sends f->sealed, which
 * points at its payload where it lies (no copy) between each record's
 * length and tag. Cost: one Poly1305 pass over the frame; encrypted
 * (NET_SEAL_AEAD), a copy of it into the records and a ChaCha20-Poly1305
 * pass.
 * @return 0, -ENOMEM
 */
static int tsrv_seal_frame(struct tsrv_conn *c, struct tsrv_frame *f)
{
	size_t nrec = net_seal_records(net_iov_total(f->iov, f->cnt));
	/* each record: length, tag, and at most one piece more than the
	 * iovecs it covers (its first one may begin mid-entry) */
	size_t cap = (size_t)f->cnt + 3 * nrec;
	struct net_seal_cur cur;
	struct iovec *v;

	v = malloc(cap * sizeof(*v) + nrec * NET_SEAL_META(c->seal_mode));
	if (!v)
		return -ENOMEM;
	net_seal_cur_init(&cur, f->iov, f->cnt);
	f->cnt = net_seal_iov(&c->tx_seal, &cur, v, (int)cap,
			      (uint8_t *)(v + cap), (int)nrec);
	f->cur = 0;
	f->sealed = v;
	return 0;
}

/* Append a frame to the output queue (sealed, once the key is proved) and
 * try to write. A frame that cannot be sealed closes the connection. */
static void tsrv_queue(struct tsrv_conn *c, struct tsrv_frame *f)
{
	if (c->base.sealed && !c->base.dead && tsrv_seal_frame(c, f)) {
		tsrv_conn_close(c, 1, "out of memory sealing a reply");
		if (f->cb)
			tsrv_defer(c, f, -EIO);
		else
			tsrv_frame_free(f);
		return;
	}
	f->next = NULL;
	if (c->out_tail)
		c->out_tail->next = f;
	else
		c->out_head = f;
	c->out_tail = f;
	c->out_bytes += f->qbytes;
	tsrv_flush(c);
}

/* ---------------------------------------------------------------- requests */

/* The tcp connection a request came in on. */
static struct tsrv_conn *tsrv_of(struct net_sreq *r)
{
	return NET_CONTAINER_OF(r->conn, struct tsrv_conn, base);
}

/* Start pulling the next write bytes of r into iov. */
static int tsrv_pull(struct net_sreq *r, const struct iovec *iov, int cnt,
		     net_xfer_fn cb, void *arg)
{
	struct tsrv_conn *c = tsrv_of(r);
	uint64_t total;

	if (tsrv_pulling(c) || net_sreq_pull_check(r, iov, cnt, cb, &total))
		return -EINVAL;
	if (c->base.dead || total == 0) {
		struct tsrv_frame *f = calloc(1, sizeof(*f));
		if (!f)
			return -ENOMEM;
		f->cb = cb;
		f->arg = arg;
		f->ev = NET_SREQ_EV_PULLED;
		(void)net_sreq_advance(r, NET_SREQ_EV_PULL);
		tsrv_defer(c, f, c->base.dead ? -EIO : 0);
		return 0;
	}
	if (!c->pull_iov) {
		c->pull_iov = malloc(NET_MAX_IOV * sizeof(*c->pull_iov));
		if (!c->pull_iov)
			return -ENOMEM;
	}
	memcpy(c->pull_iov, iov, (size_t)cnt * sizeof(*iov));
	c->pull_cnt = cnt;
	c->pull_cur = 0;
	while (c->pull_cur < cnt && c->pull_iov[c->pull_cur].iov_len == 0)
		c->pull_cur++;
	c->pull_total = c->pull_left = total;
	c->pull_cb = cb;
	c->pull_arg = arg;
	(void)net_sreq_advance(r, NET_SREQ_EV_PULL);
	tsrv_want_read(c);
	return 0;
}

/*
 * Start a data frame of r carrying len bytes for client offset off, with
 * room for extra iovecs after its header (iov[0]). On a dead connection
 * the frame is completed with -EIO at once (deferred) and *out is NULL.
 * @return 0, -ENOMEM
 */
static int tsrv_data_frame(struct tsrv_conn *c, const struct net_sreq *r,
			   uint64_t off, uint64_t len, int extra,
			   net_xfer_fn cb, void *arg, struct tsrv_frame **out)
{
	struct tsrv_frame *f;

	*out = NULL;
	f = calloc(1, sizeof(*f) + (size_t)(extra + 1) * sizeof(struct iovec));
	if (!f)
		return -ENOMEM;
	f->cb = cb;
	f->arg = arg;
	f->ev = NET_SREQ_EV_PUSHED;
	(void)net_sreq_advance(&c->req, NET_SREQ_EV_PUSH);
	if (c->base.dead) {
		tsrv_defer(c, f, -EIO);
		return 0;
	}
	struct proto_hdr h = { .op = r->hdr.op, .tag = r->hdr.tag,
			       .flags = PROTO_F_DATA, .bulk_len = len, .aux = off };
	proto_hdr_encode(f->hdr, &h);
	f->iov[0] = (struct iovec){ f->hdr, PROTO_HDR_LEN };
	f->cnt = 1;
	*out = f;
	return 0;
}

/* Count and queue a data frame of len payload bytes (tsrv_data_frame). */
static void tsrv_data_queue(struct tsrv_conn *c, struct tsrv_frame *f,
			    uint64_t len)
{
	NET_STAT_ADD(&c->srv->base.st, data_frames, 1);
	NET_STAT_ADD(&c->srv->base.st, bulk_push_bytes, len);
	net_sconn_hold(&c->base);
	tsrv_queue(c, f);
	net_sconn_release(&c->base);
}

/* Queue a data frame carrying iov for client offset off. */
static int tsrv_push(struct net_sreq *r, uint64_t off, const struct iovec *iov,
		     int cnt, net_xfer_fn cb, void *arg)
{
	struct tsrv_conn *c = tsrv_of(r);
	struct tsrv_frame *f;
	uint64_t total;
	int rc;

	if (net_sreq_push_check(r, off, iov, cnt, cb, &total))
		return -EINVAL;
	rc = tsrv_data_frame(c, r, off, total, cnt, cb, arg, &f);
	if (rc || !f)
		return rc;
	memcpy(f->iov + 1, iov, (size_t)cnt * sizeof(*iov));
	f->cnt = cnt + 1;
	tsrv_data_queue(c, f, total);
	return 0;
}

/*
 * Queue a data frame whose bytes come from fd by sendfile (see net.h
 * net_sreq_push_fd). Saves the handler's pread into a buffer and the copy
 * of that buffer into the socket: the page cache pages go to the socket.
 */
static int tsrv_push_fd(struct net_sreq *r, uint64_t off, int fd,
			uint64_t file_off, size_t len, net_xfer_fn cb,
			void *arg)
{
	struct tsrv_conn *c = tsrv_of(r);
	struct tsrv_frame *f;
	int rc;

	if (fd < 0 || !cb || !net_sreq_with_handler(r) || off > r->hdr.aux ||
	    len > r->hdr.aux - off || file_off > (uint64_t)INT64_MAX - len)
		return -EINVAL;
	rc = tsrv_data_frame(c, r, off, len, 0, cb, arg, &f);
	if (rc || !f)
		return rc;
	f->sf_fd = fd;
	f->sf_off = (off_t)file_off;
	f->sf_left = len;
	tsrv_data_queue(c, f, len);
	return 0;
}

/* After a reply: drop unpulled write data, then read the next header. */
static void tsrv_resume_input(struct tsrv_conn *c)
{
	uint64_t left = c->req.hdr.bulk_len - c->req.pulled;

	c->pull_left = 0; /* an unfinished pull ends without its callback */
	c->discard_left = left;
	c->in = left ? IN_DISCARD : IN_HDR;
	tsrv_want_read(c);
}

/*
 * Send the reply for r and free r. Tries to write header + body at once
 * (no copy); only what the socket does not take is copied into a frame.
 */
static int tsrv_reply(struct net_sreq *r, int32_t status, const void *body,
		      uint32_t len)
{
	struct tsrv_conn *c = tsrv_of(r);
	struct tsrv_server *s = c->srv;
	uint8_t hb[PROTO_HDR_LEN];
	size_t sent = 0, total = PROTO_HDR_LEN + (size_t)len;
	int rc = 0;

	if (net_sreq_advance(r, NET_SREQ_EV_REPLY))
		return -EINVAL;
	net_sconn_finished(&c->base, r);
	net_sconn_hold(&c->base);
	if (c->base.dead)
		goto out_release;
	if (len > PROTO_MAX_BODY || (len && !body)) {
		log_err("net: %s: reply body of %u bytes too large", c->base.peer, len);
		tsrv_conn_close(c, 0, "reply too large");
		rc = -EMSGSIZE;
		goto out_release;
	}
	struct proto_hdr h = { .op = r->hdr.op, .tag = r->hdr.tag, .status = status,
			       .credits = 1, .flags = PROTO_F_REPLY, .body_len = len };
	proto_hdr_encode(hb, &h);
	NET_STAT_ADD(&s->base.st, msgs_tx, 1);
	if (!c->out_head && !c->base.sealed) {
		struct iovec v[2] = { { hb, PROTO_HDR_LEN }, { (void *)body, len } };
		struct msghdr m = { .msg_iov = v, .msg_iovlen = len ? 2 : 1 };
		ssize_t n;
		do
			n = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (n < 0 && errno == EINTR);
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			NET_STAT_ADD(&s->base.st, conn_errors, 1);
			tsrv_conn_close(c, 0, strerror(errno));
			goto out_release;
		}
		if (n > 0) {
			sent = (size_t)n;
			NET_STAT_ADD(&s->base.st, bytes_tx, n);
		}
	}
	if (sent < total) {
		size_t rest = total - sent;
		struct tsrv_frame *f = calloc(1, sizeof(*f) + sizeof(struct iovec) + rest);
		if (!f) {
			tsrv_conn_close(c, 1, "out of memory queueing a reply");
			rc = -ENOMEM;
			goto out_release;
		}
		uint8_t *p = (uint8_t *)(f->iov + 1);
		if (sent < PROTO_HDR_LEN) {
			memcpy(p, hb + sent, PROTO_HDR_LEN - sent);
			if (len)
				memcpy(p + PROTO_HDR_LEN - sent, body, len);
		} else {
			memcpy(p, (const uint8_t *)body + (sent - PROTO_HDR_LEN), rest);
		}
		f->iov[0] = (struct iovec){ p, rest };
		f->cnt = 1;
		f->qbytes = rest;
		tsrv_queue(c, f);
	}
	if (!c->base.dead)
		tsrv_resume_input(c);
out_release:
	net_sconn_release(&c->base);
	return rc;
}

/* Close the connection of a malformed request, naming the peer. */
static void tsrv_reject(struct net_sreq *r, const char *why)
{
	struct tsrv_conn *c = tsrv_of(r);

	net_sconn_hold(&c->base);
	(void)net_sreq_advance(r, NET_SREQ_EV_REJECT);
	net_sconn_finished(&c->base, r);
	NET_STAT_ADD(&c->srv->base.st, rejects, 1);
	if (!c->base.dead)
		tsrv_conn_close(c, 1, why ? why : "rejected");
	net_sconn_release(&c->base);
}

/* ----------------------------------------------------------------- accept */

/*
 * Make a vanished peer host noticed within about ms: TCP_USER_TIMEOUT = ms
 * (data unacknowledged that long fails the socket, so a pull or reply to
 * a dead host ends), and keepalive on an idle socket: first probe after
 * ms/2, then every ms/6, 3 probes (all at least 1 s).
 * @return 0, or -errno of the setsockopt that failed
 */
static int tsrv_sock_limits(int fd, int ms)
{
	int one = 1, cnt = 3;
	int idle = ms / 2000 > 1 ? ms / 2000 : 1;
	int intvl = ms / 6000 > 1 ? ms / 6000 : 1;
	unsigned int uto = (unsigned int)ms;

	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof(uto)))
		return -errno;
	return 0;
}

/*
 * Make room for a new connection from ss before the handshake: when its
 * source already has NET_UNAUTH_PER_SOURCE connections in the handshake,
 * evict that source's oldest; else when the server has NET_UNAUTH_MAX,
 * evict the oldest of all. The newcomer always gets in: a genuine client
 * needs one round trip, idle connects are what gets evicted. Cost: one
 * walk of the connection list.
 */
static void tsrv_unauth_admit(struct tsrv_server *s,
			      const struct sockaddr_storage *ss)
{
	struct net_evict e = { .src = (const struct sockaddr *)ss };
	struct tsrv_conn *c;
	int n;

	for (c = s->conns; c; c = c->next)
		if (!c->base.dead && c->base.hs != NET_HS_OPEN)
			net_evict_see(&e, c, c->born, &c->src);
	c = net_evict_pick(&e, 0, &n);
	if (!c)
		return;
	NET_STAT_ADD(&s->base.st, unauth_closes, 1);
	log_notice("net: %s: evicted: %d connections in the handshake%s",
		   c->base.peer, n, c == e.oldest_same ? " from its host" : "");
	net_sconn_hold(&c->base);
	tsrv_conn_close(c, 0, "evicted before its handshake");
	net_sconn_release(&c->base);
}

/* Accept every pending connection. */
static void tsrv_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tsrv_server *s = w->data;

	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int one = 1;
		int fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			/* Out of fds or memory: pause accepting for a moment
			 * instead of spinning on a level-triggered watcher. */
			log_warn("net: accept: %s; pausing accepts", strerror(errno));
			ev_io_stop(loop, &s->accept_w);
			ev_timer_start(loop, &s->accept_retry);
			return;
		}
		tsrv_unauth_admit(s, &ss);
		struct tsrv_conn *c = calloc(1, sizeof(*c));
		uint8_t *stg = malloc(TSRV_STG_SIZE);
		if (!c || !stg) {
			log_warn("net: out of memory accepting a connection");
			free(c);
			free(stg);
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->base.srv = &s->base;
		net_addr_format(&ss, c->base.peer, sizeof(c->base.peer));
		int rc = tsrv_sock_limits(fd, s->base.opts.request_timeout_ms);
		if (rc)
			log_warn("net: %s: cannot set keepalive or user timeout: %s",
				 c->base.peer, strerror(-rc));
		ev_timer_init(&c->dl, tsrv_dl_cb, 0., 0.);
		c->dl.data = c;
		c->dl_left = s->base.opts.request_timeout_ms / 1000.;
		c->srv = s;
		c->fd = fd;
		c->stg = stg;
		c->in = IN_HDR;
		c->src = ss;
		c->born = ev_now(loop);
		net_sconn_open(&c->base, NET_HS_HELLO, tsrv_reap);
		ev_io_init(&c->rw, tsrv_read_cb, fd, EV_READ);
		ev_io_init(&c->ww, tsrv_write_cb, fd, EV_WRITE);
		c->rw.data = c->ww.data = c;
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		ev_io_start(loop, &c->rw);
		tsrv_dl_update(c); /* the handshake deadline starts now */
		log_debug("net: connection from %s", c->base.peer);
	}
}

/* Resume accepting after a pause. */
static void tsrv_accept_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tsrv_server *s = w->data;

	ev_io_start(loop, &s->accept_w);
}

/* Bind and listen on host:port (port 0 picks one). */
static int tsrv_server_new(struct net_server **out, struct ev_loop *loop,
			   const char *host, uint16_t port, net_req_fn fn,
			   void *arg, const struct net_opts *o)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *res;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct tsrv_server *s;
	char ps[8];
	int rc, one = 1;

	snprintf(ps, sizeof(ps), "%u", port);
	if (getaddrinfo(host[0] ? host : NULL, ps, &hints, &res) != 0)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s) {
		rc = -ENOMEM;
		goto out_free_res;
	}
	s->base.ops = &tcp_server_ops;
	s->base.opts = *o;
	s->loop = loop;
	s->fn = fn;
	s->fn_arg = arg;
	s->lfd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->lfd < 0) {
		rc = -errno;
		goto out_free_s;
	}
	setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s->lfd, res->ai_addr, res->ai_addrlen) < 0 ||
	    listen(s->lfd, 256) < 0 ||
	    getsockname(s->lfd, (struct sockaddr *)&ss, &sl) < 0) {
		rc = -errno;
		goto out_close_lfd;
	}
	s->port = ss.ss_family == AF_INET6 ?
		ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) :
		ntohs(((struct sockaddr_in *)&ss)->sin_port);
	ev_io_init(&s->accept_w, tsrv_accept_cb, s->lfd, EV_READ);
	s->accept_w.data = s;
	ev_timer_init(&s->accept_retry, tsrv_accept_retry_cb, 0.1, 0.);
	s->accept_retry.data = s;
	ev_io_start(loop, &s->accept_w);
	net_srv_kick_init(&s->base, loop, tsrv_done_run, NULL);
	freeaddrinfo(res);
	*out = &s->base;
	return 0;

out_close_lfd:
	close(s->lfd);
out_free_s:
	free(s);
out_free_res:
	freeaddrinfo(res);
	return rc;
}

/* Stop listening, close and free every connection (requests dropped: the
 * handler must not touch them afterwards). */
static void tsrv_server_free(struct net_server *ns)
{
	struct tsrv_server *s = NET_CONTAINER_OF(ns, struct tsrv_server, base);

	ev_io_stop(s->loop, &s->accept_w);
	ev_timer_stop(s->loop, &s->accept_retry);
	close(s->lfd);
	net_srv_kick_drop(&s->base, tsrv_done_drop);
	while (s->conns) {
		struct tsrv_conn *c = s->conns;
		if (!c->base.dead) {
			ev_io_stop(s->loop, &c->rw);
			ev_io_stop(s->loop, &c->ww);
			close(c->fd);
		}
		tsrv_conn_destroy(c);
	}
	free(s);
}

/* The port listened on: the one bound when 0 was asked for. */
static uint16_t tsrv_server_port(const struct net_server *ns)
{
	return NET_CONTAINER_OF(ns, struct tsrv_server, base)->port;
}

const struct net_server_ops tcp_server_ops = {
	.name = "tcp",
	.server_new = tsrv_server_new,
	.server_free = tsrv_server_free,
	.server_port = tsrv_server_port,
	.pull = tsrv_pull,
	.push = tsrv_push,
	.push_fd = tsrv_push_fd,
	.reply = tsrv_reply,
	.reject = tsrv_reject,
};
