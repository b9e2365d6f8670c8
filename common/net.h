/*
 * net.h - the rpfs transport interface, shaped after the message classes of
 * the PVFS-over-InfiniBand design so that the tcp and verbs backends look
 * the same to mgr, iod and the client core:
 *
 *  - Requests, replies and control messages: a client submits a net_call;
 *    a tag matches the reply to it. Credits bound the requests a client has
 *    outstanding on one connection; each reply returns its credit.
 *  - Bulk data is moved by the server. A call names client memory: wr_iov,
 *    the write data the server pulls, and rd_iov, the memory the server
 *    pushes read data into. On TCP, pulled data follows the request on the
 *    stream and pushed data travels as data frames (PROTO_F_DATA) ahead of
 *    the reply, each read straight into rd_iov with readv: no extra copy.
 *
 * Client side: thread-safe. One progress thread per net_client reads every
 * connection's replies and wakes the waiting callers.
 * Server side: runs inside one libev loop; not thread-safe; callbacks run in
 * the loop thread.
 */
#ifndef RPFS_NET_H
#define RPFS_NET_H

#include <stdint.h>
#include <sys/uio.h>

#include "proto.h"

struct ev_loop;

#define NET_DEFAULT_CREDITS 32
#define NET_DEFAULT_TIMEOUT_MS 10000
#define NET_MAX_IOV 1024 /* iovecs per call direction / per pull or push */

struct net_opts {
	int credits;      /* server: credits granted per client connection */
	int timeout_ms;   /* client: connect + call deadline */
};

/* Transport counters, readable at any time (relaxed atomics). */
struct net_stats {
	uint64_t msgs_tx, msgs_rx;     /* request/reply/ctrl frames */
	uint64_t bytes_tx, bytes_rx;   /* all bytes on the wire */
	uint64_t bulk_pull_bytes;      /* write data moved by the server */
	uint64_t bulk_push_bytes;      /* read data moved by the server */
	uint64_t data_frames;          /* data frames (tcp) */
	uint64_t credit_waits;         /* submits that waited for a credit */
	uint64_t timeouts, reconnects, conn_errors;
	uint64_t rejects;              /* server: connections closed as malformed */
};

void net_opts_default(struct net_opts *o);

/* ------------------------------------------------------------------ client */

struct net_client;
struct net_conn;

/**
 * Create a client context and start its progress thread.
 * @return 0, -ENOMEM, or -errno from thread creation
 */
int net_client_new(struct net_client **out, const struct net_opts *o);

/** Stop the progress thread, close all connections, free. Calls must be done. */
void net_client_free(struct net_client *cl);

/**
 * Create a connection handle to host:port. It connects lazily on the first
 * submit, and again on the next submit after any failure (reconnect).
 * @return 0, -ENOMEM, -EINVAL (empty host or port 0)
 */
int net_conn_new(struct net_client *cl, const char *host, uint16_t port,
		 struct net_conn **out);

/** Counters of the whole client (all its connections). */
void net_client_stats(struct net_client *cl, struct net_stats *st);

/* States of a net_call, as the backend moves it along. */
enum net_call_state {
	NET_CALL_IDLE = 0, /* not submitted, or finished and collected */
	NET_CALL_SENT,     /* request on the wire, waiting for its reply */
	NET_CALL_DONE,     /* reply (or failure) recorded, waiter may collect */
};

/*
 * One request/reply exchange. The caller fills the "in" fields, submits,
 * then waits. The call and every buffer it names must stay valid until
 * net_call_wait() returns. After a transport failure or timeout the backend
 * guarantees it will never touch rd_iov or rep_buf again.
 */
struct net_call {
	/* in */
	uint16_t op;
	const void *body;          /* encoded request body */
	uint32_t body_len;
	const struct iovec *wr_iov;/* write data (bulk_len = sum of lengths) */
	int wr_cnt;
	const struct iovec *rd_iov;/* read memory (aux = sum of lengths) */
	int rd_cnt;
	void *rep_buf;             /* reply body lands here */
	uint32_t rep_cap;
	/* out */
	int32_t status;            /* the server's status, valid when wait returns 0 */
	uint32_t rep_len;          /* reply body length */
	uint64_t rd_bytes;         /* read bytes placed into rd_iov */
	/* private to the backend (protected by the connection's lock) */
	enum net_call_state state;
	int err;                   /* transport error, 0 or -errno */
	uint64_t tag;
	uint64_t deadline_ns;
	struct net_conn *conn;
	struct net_call *next;     /* pending list / hash chain */
};

/**
 * Send a call. Connects first if needed, and waits for a credit if all are
 * in use (up to the timeout). Does not wait for the reply.
 * @return 0 sent; -ENOTCONN/-ECONNREFUSED/-EHOSTUNREACH could not connect;
 *	-ETIMEDOUT no credit or connect in time; -EIO connection failed while
 *	sending; -EINVAL bad call (too many iovecs, body too large).
 */
int net_call_submit(struct net_conn *c, struct net_call *call);

/**
 * Wait for a submitted call's reply, until the deadline set at submit.
 * On timeout the connection is torn down (so no late reply can land in the
 * caller's memory) and every call pending on it fails.
 * @return 0 reply received (see call->status); -ETIMEDOUT; -EIO connection
 *	lost; -EPROTO malformed reply (connection closed).
 */
int net_call_wait(struct net_call *call);

/** submit + wait. */
int net_call_run(struct net_conn *c, struct net_call *call);

/* ------------------------------------------------------------------ server */

struct net_server;
struct net_sconn;

/* A request received by a server. Owned by the backend; valid until reply. */
struct net_sreq {
	struct net_sconn *conn;
	struct proto_hdr hdr;      /* op, tag, bulk_len (write), aux (read memory) */
	const uint8_t *body;
	uint32_t body_len;
	uint64_t pulled;           /* write bytes pulled so far */
	void *ctx;                 /* free for the handler */
};

/* Handler for a new request; must eventually reply or reject it. */
typedef void (*net_req_fn)(struct net_sreq *r, void *arg);
/* Completion of a pull or push: rc 0 or -errno (connection failed). On
 * failure the handler must still call net_sreq_reply (which just frees). */
typedef void (*net_xfer_fn)(struct net_sreq *r, int rc, void *arg);

/**
 * Listen on host:port and serve requests from the loop.
 * @return 0, -EADDRINUSE, -EINVAL (bad address), -errno from socket calls
 */
int net_server_new(struct net_server **out, struct ev_loop *loop,
		   const char *host, uint16_t port, net_req_fn fn, void *arg,
		   const struct net_opts *o);

/** Stop listening and close every connection. In-flight requests are dropped. */
void net_server_free(struct net_server *s);

/** The port actually bound (useful with port 0). */
uint16_t net_server_port(const struct net_server *s);

/** Counters of the server. */
void net_server_stats(struct net_server *s, struct net_stats *st);

/**
 * Pull the next write bytes of the request into iov, in order (the sum of
 * iov lengths must not exceed bulk_len - pulled). cb runs when they are in.
 * @return 0 started (cb will run), -EINVAL beyond bulk_len or too many iovs
 */
int net_sreq_pull(struct net_sreq *r, const struct iovec *iov, int cnt,
		  net_xfer_fn cb, void *arg);

/**
 * Push read bytes into the client's read memory at offset off (off + total
 * must not exceed aux). cb runs when iov may be reused.
 * @return 0 started (cb will run), -EINVAL out of range or too many iovs
 */
int net_sreq_push(struct net_sreq *r, uint64_t off, const struct iovec *iov,
		  int cnt, net_xfer_fn cb, void *arg);

/**
 * Send the reply and free r. Write data not pulled is discarded. Returns the
 * request's credit. If the connection already failed, just frees r.
 * @return 0, -EMSGSIZE body too large (r is still freed, connection closed)
 */
int net_sreq_reply(struct net_sreq *r, int32_t status, const void *body,
		   uint32_t len);

/**
 * Reject a malformed request: log a warning naming the peer and why, close
 * that connection, free r. The server keeps serving everyone else.
 */
void net_sreq_reject(struct net_sreq *r, const char *why);

/** "host:port" of the peer, for log lines. */
const char *net_sconn_peer(const struct net_sconn *c);

#endif
