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
#include <sys/queue.h>
#include <sys/uio.h>

#include "proto.h"

struct ev_loop;

#define NET_DEFAULT_CREDITS 32
#define NET_DEFAULT_TCP_LANES 4  /* tcp: sockets per server connection */
#define NET_MAX_TCP_LANES 16
#define NET_DEFAULT_TIMEOUT_MS 10000
#define NET_DEFAULT_REQUEST_TIMEOUT_MS 10000 /* server request deadline */
#define NET_MAX_REQUEST_TIMEOUT_MS 86400000  /* one day */
#define NET_MAX_IOV 1024 /* iovecs per call direction / per pull or push */

/* Which backend carries the messages. */
enum net_transport {
	NET_TRANSPORT_TCP = 0,   /* sockets; the fallback and the baseline */
	NET_TRANSPORT_VERBS,     /* RDMA verbs through rdma-core / librdmacm */
	NET_TRANSPORT_AUTO,      /* verbs when an RDMA device is present, else tcp */
};

/* How a verbs server waits for completions. */
enum net_poll_mode {
	NET_POLL_ADAPTIVE = 0,   /* spin briefly after the last event, then sleep
				  * on the completion channel fd (default) */
	NET_POLL_BUSY,           /* spin inside the loop, as on a dedicated server */
};

/* Message classes, each mapped to an InfiniBand service level. */
enum net_msg_class {
	NET_CLASS_REQUEST = 0,
	NET_CLASS_REPLY,
	NET_CLASS_CONTROL,
	NET_CLASS_BULK,
	NET_CLASS_COUNT,
};

#define NET_KEY_LEN 32           /* cluster key: 32 random bytes */
#define NET_DEFAULT_INLINE_MAX (4u * 1024)
#define NET_DEFAULT_FAST_MAX (64u * 1024)
#define NET_DEFAULT_MAX_CLIENTS 64
#define NET_DEFAULT_PIPELINE_UNIT (2u * 1024 * 1024)

struct net_opts {
	int credits;      /* server: credits granted per client connection;
			   * client: upper bound it will use */
	int timeout_ms;   /* client: connect + call deadline */
	int request_timeout_ms; /* server (tcp): how long a request's body and
				 * write data may take to arrive, counting only
				 * time spent waiting on the peer; also sets the
				 * accepted sockets' keepalive and
				 * TCP_USER_TIMEOUT. 0 = default
				 * (NET_DEFAULT_REQUEST_TIMEOUT_MS) */
	int tcp_lanes;    /* client (tcp): sockets per server, 1..16; each
			   * call takes the least busy one, so concurrent
			   * callers rarely share a socket's receive side
			   * (one more wake-up each when they do) */
	enum net_transport transport;
	/* Cluster keys. With either, every connection proves knowledge of
	 * one (HMAC challenge and response) before any request is served, and
	 * a peer that fails is refused with a log line.
	 * key, the clients' key: what mounts and librpfs prove; a server
	 * accepts it. srv_key, the servers' key: what the mgr, the iods and
	 * the admin tool on a server host prove to each other; a server
	 * accepts it as privileged (net_sconn_privileged). A client proves
	 * srv_key when it has it, else key. A server with key alone runs a
	 * one-key cluster: every key holder is privileged. */
	int has_key;
	uint8_t key[NET_KEY_LEN];
	int has_srv_key;
	uint8_t srv_key[NET_KEY_LEN];
	/* verbs knobs (ignored by tcp) */
	enum net_poll_mode poll_mode;
	uint32_t inline_max;       /* bytes carried inside the message */
	uint32_t fast_max;         /* bytes moved through fast RDMA buffers */
	uint32_t pipeline_unit;    /* largest bulk transfer unit */
	int max_clients;           /* server: expected clients (SRQ sizing) */
	uint8_t sl[NET_CLASS_COUNT]; /* service level per message class */
	const char *rdma_dev;      /* device name, NULL = first found */
	uint64_t pin_max;          /* client: bound on bytes the pin-down cache
				    * keeps registered (0 = 256 MiB) */
	int list_mode; /* 0 gather/scatter (default), 1 multiple message: one
			* RDMA operation per segment (verbs; also
			* $RPFS_LIST_MODE=gather|multi) */
	int encrypt;   /* keyed TCP: encrypt the sealed stream (net_seal.h
			* NET_SEAL_AEAD), not only authenticate it. A
			* connection is encrypted when either side asks */
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
	uint64_t auth_ok, auth_fail;   /* handshakes that proved / failed the key */
	/* per mechanism (verbs): messages and bytes each one carried */
	uint64_t inline_msgs, inline_bytes;
	uint64_t fast_msgs, fast_bytes;         /* RDMA Write with Immediate */
	uint64_t rdma_read_ops, rdma_read_bytes;  /* server-based, writes */
	uint64_t rdma_write_ops, rdma_write_bytes;/* server-based, reads */
	uint64_t pipeline_units;       /* bulk units moved (pipelining) */
	uint64_t sge_max;              /* most segments in one work request */
	/* memory registration */
	uint64_t reg_count, dereg_count;   /* ibv_reg_mr / ibv_dereg_mr calls */
	uint64_t reg_bytes;                /* bytes registered in total */
	uint64_t reg_cache_hits, reg_cache_misses, reg_cache_evictions;
	uint64_t pinned_bytes;             /* currently pinned (gauge) */
	uint64_t srq_posted;               /* receives posted to the SRQ (gauge) */
	uint64_t poll_sleeps;              /* server (verbs): times polling went
					    * back to sleep on the channel
					    * (adaptive mode; busy never does) */
	/* noncontiguous transfers and Optimistic Group Registration */
	uint64_t reg_ns;                   /* time in ibv_reg_mr + ibv_dereg_mr */
	uint64_t ogr_groups;               /* covering registrations spanning
					    * more than one segment */
	uint64_t ogr_fallbacks;            /* group registrations that failed
					    * (unmapped hole) and were redone */
	uint64_t rdma_signaled;            /* signaled RDMA work requests: one per
					    * pull/push (gather), one per
					    * segment (multiple message) */
	uint64_t ogr_cost_a_ns;            /* client: OGR cost model in use, */
	uint64_t ogr_cost_b_ns;            /* ns per page and per call (gauges) */
	uint64_t ogr_cal_ns;               /* client: time its calibration took */
	/* client CPU spent on data (issue 11) */
	uint64_t client_copy_bytes;        /* client: payload bytes copied in
					    * user space (verbs: gathers into
					    * inline/fast buffers, inline and
					    * fast-buffer copy-out; tcp: reads
					    * through the staging buffer) */
	uint64_t data_ops;                 /* client: calls submitted that
					    * carried data (write or read
					    * memory); reg_count / data_ops =
					    * registrations per operation */
	uint64_t pipe_bytes;               /* client (tcp): read data put into
					    * callers' pipes (net_call rd_pipe) */
	uint64_t pipe_staged_bytes;        /* of those, bytes staged by recv and
					    * written, not spliced */
	/* server (tcp) limits (common/transport/README.md "TCP server limits") */
	uint64_t conns_open;               /* connections open now (gauge) */
	uint64_t deadline_closes;          /* connections closed because a
					    * request's data did not arrive
					    * within request_timeout */
	uint64_t unauth_open;              /* connections not through the
					    * handshake yet (gauge) */
	uint64_t unauth_closes;            /* of those, closed for taking longer
					    * than request_timeout, or evicted
					    * (NET_UNAUTH_MAX, _PER_SOURCE) */
	/* server: flow control (net.c, any backend) */
	uint64_t reqs_active;              /* requests handed to the program
					    * and not yet answered: the
					    * credits in use over all
					    * connections (gauge) */
	uint64_t credit_limit;             /* credits granted to each client
					    * connection (gauge, constant) */
};

/* Connections in the handshake (not yet authenticated) a server keeps, in
 * all and per source address: a new connection past either evicts the
 * oldest (of all, or of its source). Each also has request_timeout to
 * finish the handshake. A genuine client is through in one round trip, so
 * neither limit touches it. */
#define NET_UNAUTH_MAX 128
#define NET_UNAUTH_PER_SOURCE 16

/** Defaults: credits, timeout, thresholds of the paper (4 KiB inline, 64 KiB
 * fast RDMA, 2 MiB pipeline unit), adaptive polling, no key. The transport
 * defaults to $RPFS_TRANSPORT if set to tcp/verbs/auto, else tcp. */
void net_opts_default(struct net_opts *o);

/** Parse "tcp", "verbs" or "auto". @return 0, -EINVAL */
int net_transport_parse(const char *s, enum net_transport *t);
/** Name of a transport ("tcp", "verbs", "auto"). */
const char *net_transport_name(enum net_transport t);

/**
 * Format counters as one JSON object, e.g. {"transport":"tcp","msgs_tx":1,...}.
 * @param transport name put in the "transport" member
 * @return bytes written (excluding NUL), or -ERANGE if cap is too small
 */
int net_stats_json(const struct net_stats *st, const char *transport,
		   char *buf, size_t cap);

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

/**
 * Declare [addr, addr+len) long-lived: it stays mapped until
 * net_client_unregister_mem. Only such regions are kept in the verbs
 * backend's pin-down cache (registered on first use, evicted LRU under
 * net_opts.pin_max); other memory is registered per call. A no-op on tcp.
 * @return 0, -EINVAL (overlaps a declared region), -ENOMEM
 */
int net_client_register_mem(struct net_client *cl, void *addr, size_t len);
/** Forget a declared region (deregisters it). @return 0, -ENOENT, -EBUSY */
int net_client_unregister_mem(struct net_client *cl, void *addr);

/** Counters of the whole client (all its connections). */
void net_client_stats(struct net_client *cl, struct net_stats *st);

struct metrics_ops;
/**
 * Record each call's latency and error by op into m (metrics_op.h) from
 * now on, from the threads that submit and wait (NULL: stop). m must
 * outlive the client. Cost per call: one clock read and a few atomic adds.
 */
void net_client_set_opstats(struct net_client *cl, struct metrics_ops *m);

/**
 * Calls submitted while opstats was set and not yet waited for: each holds
 * a server credit until its reply comes. Any thread.
 * @return the count (0 when opstats was never set)
 */
uint64_t net_client_calls_in_flight(struct net_client *cl);

/**
 * Calls submitted on this connection and not yet waited for, whether or
 * not opstats is set: each holds one of the server's credits until its
 * reply. Any thread (a relaxed atomic).
 * @return the count
 */
uint64_t net_conn_calls_in_flight(const struct net_conn *c);

/**
 * Times this connection was set up again after its first time (any of its
 * tcp lanes): reconnections to that server. Any thread.
 * @return the count
 */
uint64_t net_conn_reconnects(const struct net_conn *c);

/* States of a net_call, as the backend moves it along. */
enum net_call_state {
	NET_CALL_IDLE = 0, /* not submitted, or finished and collected */
	NET_CALL_SENT,     /* request on the wire, waiting for its reply */
	NET_CALL_DONE,     /* reply (or failure) recorded, waiter may collect */
	NET_CALL_SLEEPING, /* as SENT, and its waiter sleeps on the state word:
			    * only then does completing it cost a wake-up */
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
	uint32_t timeout_ms;       /* 0: the client's timeout; else this call's
				    * own (a STALE_MARK, which the mgr answers
				    * only once the replica is fenced) */
	/* Optional: for each rd_iov / wr_iov entry, the allocation it lies in
	 * (same count, or NULL), from the list I/O extended interface; lets
	 * the verbs backend register whole allocations (OGR). */
	const struct iovec *rd_alloc, *wr_alloc;
	/* Optional, tcp only (net_client_rd_to_pipe): with rd_pipe 1 the
	 * read data is appended, in order, to the pipe whose write end is
	 * rd_pipe_fd, moved there from the socket by splice(2) (no copy
	 * through user space); rd_iov then only gives the length (aux) and
	 * is never written. The pipe must be empty, non-blocking
	 * (O_NONBLOCK) and hold at least twice that length (its buffers are
	 * counted in pages, and the socket's pieces need not fill pages);
	 * submit checks the last two (-EINVAL). A data frame out of order
	 * fails the call (-EPROTO, connection closed); a pipe found full
	 * fails it with -ENOBUFS (connection closed). */
	int rd_pipe;
	int rd_pipe_fd;
	/* 1: the submitter waits for this call right after its submits, before
	 * it blocks on anything else (net_call_run; a round of I/O). The verbs
	 * backend then has the submitting thread take reply completions from
	 * before the post, so a fast reply does not go through the progress
	 * thread. 0 for a call waited for later or by another thread. */
	int wait_now;
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
	int lead;                  /* wait_now call not yet waited for: verbs: counted
				    * in its submitter's lead; tcp: in its thread's
				    * unwaited calls */
	uint64_t t0_ns;            /* net.c: submit time, for the client's
				    * opstats (0: not timed) */
	struct net_conn *counted;  /* net.c: the connection whose in-flight
				    * count holds this call (NULL: none) */
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

/*
 * Life of a server request, advanced only by net_sreq_advance (net_srv.c,
 * the transition table there). The handler sees HANDLER, PULLING or
 * PUSHING; the others belong to the backend.
 */
enum net_sreq_state {
	NET_SREQ_FREE = 0, /* unused: on a free list, or not yet received */
	NET_SREQ_ARRIVING, /* received, its message (verbs: a big one, to
			    * fetch) or its first write data (tcp) still
			    * arriving; queued behind earlier requests */
	NET_SREQ_QUEUED,   /* whole, waits its turn behind earlier requests */
	NET_SREQ_HANDLER,  /* with the handler, no transfer in flight */
	NET_SREQ_PULLING,  /* with the handler, pulling write data (npull) */
	NET_SREQ_PUSHING,  /* with the handler, pushing read data (npush),
			    * no pull in flight */
	NET_SREQ_DONE,     /* replied or rejected; the backend lets go of it
			    * (and its reply goes out) */
};

/* A request received by a server. Owned by the backend; valid until reply. */
struct net_sreq {
	struct net_sconn *conn;
	struct proto_hdr hdr;      /* op, tag, bulk_len (write), aux (read memory) */
	const uint8_t *body;
	uint32_t body_len;
	uint64_t pulled;           /* write bytes pulled so far */
	void *ctx;                 /* free for the handler */
	uint64_t t0_ns;            /* net_srv.c: when it was handed to the
				    * handler (0: not timed;
				    * net_server_set_opstats) */
	enum net_sreq_state state; /* net_sreq_advance only (loop thread) */
	uint32_t npull, npush;     /* transfers in flight (net_sreq_advance) */
	STAILQ_ENTRY(net_sreq) qlink; /* its connection's queue (net_srv.c,
				       * loop thread) */
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
 * Record each request's latency (handed to the handler .. its reply) and
 * error by op into m (metrics_op.h), NULL to stop. Loop thread; m must
 * outlive the server.
 */
void net_server_set_opstats(struct net_server *s, struct metrics_ops *m);

/** The transport a server or client actually uses ("tcp" or "verbs"). */
const char *net_server_transport(const struct net_server *s);
const char *net_client_transport(const struct net_client *cl);
/**
 * Whether net_call_submit() has sent all of a call's write data when it
 * returns 0, so its wr_iov memory may be reused before the reply (tcp),
 * or the server fetches the data later and the memory must stay until
 * net_call_wait() (verbs).
 * @return 1 or 0
 */
int net_client_wr_sent_at_submit(const struct net_client *cl);

/**
 * Whether calls may have their read data appended to a pipe (net_call
 * rd_pipe): tcp can (splice from the socket), verbs cannot.
 * @return 1 or 0
 */
int net_client_rd_to_pipe(const struct net_client *cl);

/**
 * Register a region the server will pass to pull/push (its buffer zones),
 * so the verbs backend can use it as an RDMA source or target without
 * registering per request. A no-op on tcp. Call before serving.
 * @return 0, -ENOMEM, -EINVAL, or -errno from ibv_reg_mr (e.g. -ENOMEM when
 *	RLIMIT_MEMLOCK is too small; the log line names the limit)
 */
int net_server_register_mem(struct net_server *s, void *addr, size_t len);

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
 * Whether the transport of r can push straight from a file descriptor
 * (net_sreq_push_fd): TCP can (sendfile) unless the connection is
 * sealed (a keyed one: the bytes must be read to be tagged), verbs cannot.
 * @return 1 yes, 0 no
 */
int net_sreq_can_push_fd(const struct net_sreq *r);

/**
 * Push len bytes of the file fd, from file offset file_off, into the
 * client's read memory at offset off (off + len must not exceed aux),
 * without copying them through a buffer. The bytes must exist: the caller
 * pushes only below the file's size (should the file shrink meanwhile, the
 * missing tail goes as zeros). fd must stay open until cb runs.
 * @return 0 started (cb will run), -EINVAL out of range or fd < 0,
 *         -EOPNOTSUPP the transport cannot (net_sreq_can_push_fd() is 0),
 *         -ENOMEM
 */
int net_sreq_push_fd(struct net_sreq *r, uint64_t off, int fd,
		     uint64_t file_off, size_t len, net_xfer_fn cb, void *arg);

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

/**
 * The peer's host alone ("host" or "[v6]", without the port), into buf:
 * what per-client caps count against.
 * @param cap buf's size, > 0 (a longer host is cut)
 * @return buf
 */
const char *net_sconn_host(const struct net_sconn *c, char *buf, size_t cap);

/**
 * May this connection do the servers' work (fence, list, checksum, scrub,
 * purge anyone's orphan)? True when it proved the servers' key, when the
 * server has only one key (a one-key cluster), or when it has none.
 * @return 1 or 0
 */
int net_sconn_privileged(const struct net_sconn *c);

#endif
