/*
 * net_int.h - private to the transport: the backend ops tables that
 * net.c dispatches through, the common heads every backend embeds in its
 * own client/connection/server structs, and small shared helpers.
 *
 * A backend (tcp_*.c, vb_*.c) allocates its own structs with
 * the matching head as first member and fills in the ops pointer; net.c
 * only ever follows head->ops.
 */
#ifndef RPFS_NET_INT_H
#define RPFS_NET_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/queue.h>
#include <sys/uio.h>
#include <ev.h>

#include "net.h"

#define NET_CONTAINER_OF(p, type, member) \
	((type *)(void *)((char *)(p) - offsetof(type, member)))

/* Counter update: relaxed atomics, readable at any time from any thread. */
#define NET_STAT_ADD(st, field, n) \
	__atomic_fetch_add(&(st)->field, (uint64_t)(n), __ATOMIC_RELAXED)

struct net_wait;

struct net_client_ops {
	const char *name;
	/* 1 when submit has put all write data on the wire before it returns,
	 * so the caller may reuse wr_iov memory at once (tcp); 0 when the
	 * server fetches it later (verbs: RDMA Read) */
	int wr_sent_at_submit;
	/* 1 when calls may name a pipe for their read data (rd_pipe) */
	int rd_to_pipe;
	int (*client_new)(struct net_client **out, const struct net_opts *o);
	void (*client_free)(struct net_client *cl);
	int (*conn_new)(struct net_client *cl, const char *host, uint16_t port,
			struct net_conn **out);
	int (*submit)(struct net_conn *c, struct net_call *call);
	int (*wait)(struct net_call *call);
	/* optional: long-lived client memory for the pin-down cache */
	int (*register_mem)(struct net_client *cl, void *addr, size_t len);
	int (*unregister_mem)(struct net_client *cl, void *addr);

	/* Hooks of the call core (net_call.c), which runs submit's admission
	 * and the wait loop the same way for every backend. */
	/* Bring c up by deadline (c->lock not held). @return 0 or -errno */
	int (*connect)(struct net_conn *c, uint64_t deadline);
	/* Take a credit of c, which is up (c->lock held). @return the index
	 * of what was taken (verbs: the call slot; tcp: 0), -1 none free */
	int (*credit_take)(struct net_conn *c);
	/* Wait for a credit or a state change of c up to deadline (c->lock
	 * held, released while waiting). @return 0 look again, -ETIMEDOUT */
	int (*credit_wait)(struct net_conn *c, uint64_t deadline);
	/* Wake the progress thread: c->kill was set. Any thread. */
	void (*kick)(struct net_conn *c);
	/* One step of a wait: read replies ourselves if we may (lead).
	 * @return 1 led (look at the call again), 0 did not (the core sleeps),
	 * -ETIMEDOUT the deadline passed while leading */
	int (*lead)(struct net_call *call, struct net_wait *w);
	/* The wait of call is over (w->bad: it was not in flight). */
	void (*wait_end)(struct net_call *call, struct net_wait *w);
};

struct net_server_ops {
	const char *name;
	int (*server_new)(struct net_server **out, struct ev_loop *loop,
			  const char *host, uint16_t port, net_req_fn fn,
			  void *arg, const struct net_opts *o);
	void (*server_free)(struct net_server *s);
	uint16_t (*server_port)(const struct net_server *s);
	int (*pull)(struct net_sreq *r, const struct iovec *iov, int cnt,
		    net_xfer_fn cb, void *arg);
	int (*push)(struct net_sreq *r, uint64_t off, const struct iovec *iov,
		    int cnt, net_xfer_fn cb, void *arg);
	int (*reply)(struct net_sreq *r, int32_t status, const void *body,
		     uint32_t len);
	void (*reject)(struct net_sreq *r, const char *why);
	/* optional: pre-register server buffers (NULL = nothing to do) */
	int (*register_mem)(struct net_server *s, void *addr, size_t len);
	/* optional: push from a file descriptor (NULL = not supported) */
	int (*push_fd)(struct net_sreq *r, uint64_t off, int fd,
		       uint64_t file_off, size_t len, net_xfer_fn cb,
		       void *arg);
};

/*
 * Call completion, shared by the client backends. Waiters sleep on a futex
 * on their own call's state word, so a completion wakes exactly the caller
 * it concerns.
 */
/** Publish call's completion (its other fields final) and wake its waiter
 * if it sleeps. After the exchange the caller may free the call at once: a
 * wake on reused memory is only a spurious wakeup, which waiters tolerate. */
void net_call_done(struct net_call *call);
/** Sleep while call is NET_CALL_SENT (marking it NET_CALL_SLEEPING), until
 * the absolute CLOCK_MONOTONIC time abs (NULL: no limit) or a wake-up;
 * spurious returns happen. */
void net_call_sleep(struct net_call *call, const struct timespec *abs);
/** Wait until call is NET_CALL_DONE, rechecking every second. Used after a
 * backend was asked to tear the call's connection down. */
void net_call_wait_done(struct net_call *call);

/* Head of every backend's client. Immutable after creation except st. */
/*
 * A client's progress thread and how it is woken (net_call.c): an epoll
 * set whose key 0 (the epoll data, all zero) is an eventfd that
 * net_progress_kick writes; the backend adds its own fds under nonzero
 * keys and runs its thread on net_progress_wait until
 * net_progress_stopping. Immutable after net_progress_init, except stop.
 */
struct net_progress {
	int epfd, evfd;
	pthread_t thr;
	int started;  /* thr runs (net_progress_start succeeded) */
	int stop;     /* atomic; set by net_progress_fini */
};

struct net_client {
	const struct net_client_ops *ops;
	struct net_opts opts;
	struct net_stats st; /* atomics (NET_STAT_ADD) */
	struct metrics_ops *opstats; /* per-op metrics or NULL; atomic pointer */
	uint64_t calls_timed; /* atomic: calls submitted while opstats was set,
			       * not yet waited for */
	struct net_progress pg; /* the backend's progress thread */
};

/** Make p's epoll set and its eventfd (key 0); no thread yet.
 * @return 0, -errno of epoll_create1, eventfd or epoll_ctl */
int net_progress_init(struct net_progress *p);
/** Start p's thread on fn(arg). @return 0, -errno of pthread_create */
int net_progress_start(struct net_progress *p, void *(*fn)(void *), void *arg);
/** Wake p's thread (its next net_progress_wait returns key 0). Any
 * thread; cost: one write. */
void net_progress_kick(struct net_progress *p);
/** Whether p's thread should return. @return 1 or 0 */
int net_progress_stopping(struct net_progress *p);
/** Wait for events of p's set, at most max; an event of key 0 is a kick,
 * already consumed (its data is all zero). Errors other than EINTR are
 * logged. @return the events in ev (0: none, look again) */
int net_progress_wait(struct net_progress *p, struct epoll_event *ev, int max);
/** Stop and join p's thread if it runs, and close its fds. What
 * net_progress_init set up may be torn down half made (fds -1). */
void net_progress_fini(struct net_progress *p);
/** The kick hook both client backends use: wake c's client's progress
 * thread, which serves c's kill request. */
void net_conn_kick(struct net_conn *c);

/* Head of every backend's client connection (tcp: of every lane). cl and
 * head are immutable after creation; the rest as marked. */
struct net_conn {
	struct net_client *cl;
	struct net_conn *head; /* the connection the caller holds: NULL for
				* itself, or (tcp) the first of its lanes */
	uint64_t calls_open;   /* atomic (net.c): calls submitted, not waited */
	uint64_t reconnects;   /* atomic: set up again after the first time,
				* any lane (net_conn_reconnected) */
	/* the call core's state (net_call.c); the backend's own fields
	 * say which of them lock protects too */
	pthread_mutex_t lock;  /* the fields below */
	pthread_cond_t cv;     /* lock; credits returned / connection state
				* changed (CLOCK_MONOTONIC) */
	int up;                /* lock; connected */
	int kill;              /* lock; teardown requested (progress thread,
				* or the receive side's owner, serves it) */
	uint64_t gen;          /* lock; ++ on every (re)connect */
};

/* What one wait keeps between the core's steps and the backend's hooks
 * (on the waiter's stack). */
struct net_wait {
	int lead;  /* net_call.lead as submit left it (cleared in the call) */
	int held;  /* verbs: this wait holds a lead of the channel; starts
		    * as lead */
	int bad;   /* the call was not in flight: the wait returns -EINVAL */
};

/** Count a reconnection of c (a lane) in the connection the caller holds
 * and in the client's net_stats. Any thread. */
void net_conn_reconnected(struct net_conn *c);

/*
 * The call core (net_call.c). A backend's submit checks the call, takes
 * admission (net_conn_admit), sets the call up (net_call_start) and posts
 * it; its wait is net_call_await. Both follow the hooks in c->cl->ops.
 */
/** Set up c's call-core state (lock, cv on CLOCK_MONOTONIC, down) and
 * its client. */
void net_conn_init(struct net_conn *c, struct net_client *cl);
/** Free what net_conn_init set up. */
void net_conn_fini(struct net_conn *c);
/** Take a backend's connect lock (the one that serialises connection
 * setup) by deadline.
 * @param m the mutex
 * @param deadline absolute CLOCK_MONOTONIC ns
 * @return 0 (held), -ETIMEDOUT, -errno of pthread_mutex_timedlock */
int net_conn_connect_lock(pthread_mutex_t *m, uint64_t deadline);
/** Admit a call on c by deadline: connect while c is down, take a credit
 * when it is up, else wait for one (counted in credit_waits once).
 * @param c the connection (lock not held)
 * @param deadline absolute CLOCK_MONOTONIC ns
 * @return what ops->credit_take returned (>= 0) with c->lock held; or,
 *	with it released: -ETIMEDOUT (counted in timeouts), -errno of
 *	ops->connect */
int net_conn_admit(struct net_conn *c, uint64_t deadline);
/** Set a call's shared fields as it is admitted on c: tag, conn, no
 * error, status, reply or read bytes yet; its deadline and state.
 * Caller holds c->lock. */
void net_call_start(struct net_call *call, struct net_conn *c, uint64_t tag,
		    uint64_t deadline, enum net_call_state state);
/** Fail a call its waiter gives up on: mark it err (unless it has an
 * error or is done), ask for its connection's teardown (kill and
 * ops->kick), and wait until it is done: no byte lands in its memory
 * after. Cost: a round trip through whoever tears down. */
void net_call_abort(struct net_call *call, int err);
/** A connection going down fails call p: culprit gets cerr, a call its
 * waiter marked keeps its error, the rest -EIO; then completes it. The
 * tearing thread, c->lock held. */
void net_call_fail(struct net_call *p, struct net_call *culprit, int cerr);
/** A submit that admitted call failed after: count a timeout, set it idle.
 * @param rc the failure (-errno)
 * @return rc */
int net_call_unsent(struct net_call *call, int rc);
/** Wait for a submitted call until its deadline, leading through
 * ops->lead; at the deadline, net_call_abort(-ETIMEDOUT).
 * @return the call's error: 0, -ETIMEDOUT (counted in timeouts), -EIO,
 *	-EPROTO, ...; -EINVAL when it was not in flight */
int net_call_await(struct net_call *call);

/* A deferred completion: a backend's item (embedded in its op or frame)
 * run later from the server's kick watcher, never from inside the call
 * that queued it. Loop thread. */
struct net_srv_done {
	STAILQ_ENTRY(net_srv_done) link; /* the server's queue */
	int rc;                          /* the result to deliver */
};
STAILQ_HEAD(net_srv_done_q, net_srv_done);

struct net_server;
/* The backend's delivery of one deferred completion, and its other
 * deferred work run after the queue is empty (optional). */
typedef void (*net_srv_run_fn)(struct net_srv_done *d);
typedef void (*net_srv_more_fn)(struct net_server *s);

/* Head of every backend's server. Loop thread only, except st (atomics). */
struct net_server {
	const struct net_server_ops *ops;
	struct net_opts opts;
	struct net_stats st;
	/* the program's handler, called through net.c's net_srv_dispatch,
	 * which notes each request's start for opstats (loop thread) */
	net_req_fn user_fn;
	void *user_arg;
	struct metrics_ops *opstats; /* per-op metrics or NULL (loop thread) */
	/* deferred work (net_srv_defer), loop thread: */
	struct ev_loop *kick_loop;
	ev_idle kick;                /* never started; fed to run the queue */
	struct net_srv_done_q done;  /* completions, in the order queued */
	net_srv_run_fn done_run;
	net_srv_more_fn kick_more;   /* or NULL */
};

/**
 * Set up s's deferred work: its queue and its kick watcher on loop.
 * @param run delivers one completion (the backend frees its item there)
 * @param more runs the backend's other deferred work after the queue, or
 *	NULL
 */
void net_srv_kick_init(struct net_server *s, struct ev_loop *loop,
		       net_srv_run_fn run, net_srv_more_fn more);
/** Queue completion d with result rc and have the loop run it. */
void net_srv_defer(struct net_server *s, struct net_srv_done *d, int rc);
/** Have the loop run s's deferred work (its queue, then more). */
void net_srv_kick(struct net_server *s);
/** Server teardown: forget a fed kick and hand every queued completion,
 * undelivered, to drop (which frees it). */
void net_srv_kick_drop(struct net_server *s, void (*drop)(struct net_srv_done *d));

/* What happens to a server request; net_sreq_advance moves its state. */
enum net_sreq_event {
	NET_SREQ_EV_NONE = 0, /* nothing (a deferred completion of no transfer) */
	NET_SREQ_EV_ARRIVE,   /* FREE/DONE -> QUEUED: received whole */
	NET_SREQ_EV_PARTIAL,  /* FREE/DONE -> ARRIVING: received, more to come */
	NET_SREQ_EV_DATA,     /* ARRIVING -> QUEUED: the rest is in */
	NET_SREQ_EV_DISPATCH, /* QUEUED -> HANDLER: its turn came */
	NET_SREQ_EV_PULL,     /* with the handler -> PULLING */
	NET_SREQ_EV_PULLED,   /* a pull completed (or was undone) */
	NET_SREQ_EV_PUSH,     /* with the handler -> PUSHING unless pulling */
	NET_SREQ_EV_PUSHED,   /* a push completed (or was undone) */
	NET_SREQ_EV_REPLY,    /* with the handler -> DONE */
	NET_SREQ_EV_REJECT,   /* with the handler -> DONE */
	NET_SREQ_EV_DROP,     /* any -> FREE: finished, or its connection went */
};

/**
 * Advance r's state by ev, checking the transition is legal (the table in
 * net_srv.c). A completion (PULLED, PUSHED) with none of its kind in
 * flight is one of an earlier request that has since been answered: it
 * changes nothing. Loop thread.
 * @param r the request
 * @param ev what happened
 * @return 0, or -EINVAL (illegal in r's state; logged, nothing changed)
 */
int net_sreq_advance(struct net_sreq *r, enum net_sreq_event ev);

/**
 * Check a pull's arguments for any backend: at most NET_MAX_IOV iovecs, a
 * callback, r with the handler, no more than the write bytes not pulled
 * yet.
 * @param total set to the bytes iov describes
 * @return 0, -EINVAL
 */
int net_sreq_pull_check(const struct net_sreq *r, const struct iovec *iov,
			int cnt, net_xfer_fn cb, uint64_t *total);
/**
 * Check a push's arguments for any backend: as net_sreq_pull_check, with
 * [off, off + total) inside the client's read memory (aux).
 * @return 0, -EINVAL
 */
int net_sreq_push_check(const struct net_sreq *r, uint64_t off,
			const struct iovec *iov, int cnt, net_xfer_fn cb,
			uint64_t *total);

/** Whether r is with the handler (HANDLER, PULLING or PUSHING).
 * @return 1 or 0 */
int net_sreq_with_handler(const struct net_sreq *r);

/* Where a server connection's handshake is. */
enum net_sconn_hs {
	NET_HS_HELLO = 0, /* HELLO expected (tcp; verbs says it at connect) */
	NET_HS_AUTH,      /* AUTH expected: the client's proof of its key */
	NET_HS_OPEN,      /* through (or no key here): requests are served */
};

/* Head of every backend's server connection. Loop thread only. */
struct net_sconn {
	struct net_server *srv;
	char peer[64]; /* "host:port" for log lines */
	int privileged; /* set when the handshake ends (net_auth_server_key) */
	int sealed;     /* its stream is sealed (net_seal.h): no push_fd */
	enum net_sconn_hs hs; /* net_sconn_open, net_sconn_authed; the
			       * backend moves HELLO to AUTH */
	int holds;      /* users on the stack or queued (net_sconn_hold) */
	int dead;       /* closed (net_sconn_close); the backend frees it
			 * once nothing holds it (net_sconn_release) */
	void (*reap)(struct net_sconn *c); /* the backend: free c if dead
					    * and nothing of its own holds
					    * it either */
	/* ordered dispatch (net_sconn_next): requests received and not yet
	 * served, in arrival order, and the one being served */
	STAILQ_HEAD(net_sreq_q, net_sreq) rq;
	struct net_sreq *active;
};

/**
 * A connection is accepted: count it open (conns_open) and, until its
 * handshake is through, unauthenticated (unauth_open).
 * @param c the connection, its srv and peer set
 * @param hs where its handshake starts (NET_HS_OPEN: nothing to prove)
 * @param reap the backend's free-when-unused (net_sconn_release)
 */
void net_sconn_open(struct net_sconn *c, enum net_sconn_hs hs,
		    void (*reap)(struct net_sconn *c));
/** The handshake is through: serve requests, with the privilege of the key
 * proved (1 when the server has no key). */
void net_sconn_authed(struct net_sconn *c, int privileged);
/**
 * Close c for why: one log line naming the peer (a warning when warn, else
 * debug), and the counters of an open connection come down. The backend
 * then tears its transport down and lets go (net_sconn_release).
 * @return 0, or -EALREADY (closed before: nothing done)
 */
int net_sconn_close(struct net_sconn *c, int warn, const char *why);
/**
 * Check the client's proof of key (AUTH, net_auth.h) on c, counting it
 * (auth_ok, auth_fail); a wrong one gets a warning naming the peer.
 * @return 0 proved, -EACCES (the caller refuses and closes c)
 */
int net_sconn_auth_check(struct net_sconn *c, const uint8_t *key,
			 const uint8_t *cn, const uint8_t *sn, const uint8_t *mac);
/** c's handshake deadline passed: count it (unauth_closes) and say so (a
 * notice naming the peer); why gets the reason the caller closes c with. */
void net_sconn_hs_late(struct net_sconn *c, char *why, size_t cap);
/** Queue r, just received, behind c's earlier requests. */
void net_sconn_enqueue(struct net_sconn *c, struct net_sreq *r);
/** Put r, taken by net_sconn_next, back at the head of c's queue (verbs:
 * its message had to be fetched first; net_sconn_finished before). */
void net_sconn_requeue(struct net_sconn *c, struct net_sreq *r);
/** Whether c has a request waiting and none being served. @return 1, 0 */
int net_sconn_ready(const struct net_sconn *c);
/** c's next request in arrival order, now the one being served; NULL
 * while one is served or none waits. One at a time, in order. */
struct net_sreq *net_sconn_next(struct net_sconn *c);
/** r is no longer served (answered, dropped, or requeued next): the next
 * request may go. */
void net_sconn_finished(struct net_sconn *c, struct net_sreq *r);
/** Hand c's waiting requests to drop, oldest first (a close). */
void net_sconn_drain(struct net_sconn *c, void (*drop)(struct net_sreq *r));
/** Keep c from being freed while the caller uses it. */
void net_sconn_hold(struct net_sconn *c);
/** Let go of c; a dead one nothing holds goes to its backend's reap. */
void net_sconn_release(struct net_sconn *c);

/*
 * Shared by net.c and the server core (net_srv.c): option checks, the
 * backend choice, the encryption warning and counter snapshots.
 */
/** Copy o (the defaults when NULL) into out and check its ranges.
 * @return 0, -EINVAL */
int net_opts_check(const struct net_opts *o, struct net_opts *out);
/** The client and server ops of transport t (auto: verbs when an RDMA
 * device is there). @return 0, -EPROTONOSUPPORT (verbs not built in) */
int net_backend(enum net_transport t, const struct net_client_ops **c,
		const struct net_server_ops **s);
/** Warn once that [net] encrypt is void on a backend that does not seal
 * (what: "client" or "server"). */
void net_encrypt_check(const struct net_opts *o,
		       const struct net_client_ops *co, const char *what);
/** Snapshot a counter block field by field (relaxed loads). */
void net_stats_snapshot(const struct net_stats *in, struct net_stats *out);

extern const struct net_client_ops tcp_client_ops;
extern const struct net_server_ops tcp_server_ops;
#if RPFS_HAVE_VERBS
extern const struct net_client_ops vb_client_ops;
extern const struct net_server_ops vb_server_ops;
#endif

/* CLOCK_MONOTONIC now, in nanoseconds. */
uint64_t net_now_ns(void);
/* An absolute time in ns as a timespec (of whichever clock it was read on). */
struct timespec net_ns_to_ts(uint64_t ns);
/* Milliseconds from now until deadline, 0 if past, capped at INT_MAX. */
int net_ms_left(uint64_t deadline_ns);
/* Check a call's "in" fields for a backend, the same for all: counts,
 * pointers, sizes, no transport control op; rd_pipe only where the
 * backend reads into pipes (pipe_ok), non-blocking and twice the read
 * length. Sets *wr and *rd to the write and read byte totals.
 * @return 0 or -EINVAL */
int net_call_check(const struct net_call *call, int pipe_ok, uint64_t *wr,
		   uint64_t *rd);
/* How long call may take, in ns: its own timeout_ms, else the client's. */
uint64_t net_call_timeout_ns(const struct net_call *call, const struct net_opts *o);
/* Sum of iovec lengths; UINT64_MAX if it overflows. */
uint64_t net_iov_total(const struct iovec *iov, int cnt);
/* Copy n bytes from src into the memory described by iov at offset off.
 * The caller has checked that off + n fits. */
void net_iov_copy_in(const struct iovec *iov, int cnt, uint64_t off,
		     const void *src, size_t n);
/* Describe bytes [off, off + len) of iov in out (at most max entries).
 * @return entries used (may cover less than len when max is reached) */
int net_iov_slice(const struct iovec *iov, int cnt, uint64_t off, uint64_t len,
		  struct iovec *out, int max);
/* Format a sockaddr as "host:port" ("[v6]:port"). */
void net_addr_format(const void *sa, char *buf, size_t cap);
/* Do two sockaddrs name the same host, ports aside? @return 1 or 0 */
int net_addr_same_host(const void *a, const void *b);

/* The handshake caps (NET_UNAUTH_MAX, NET_UNAUTH_PER_SOURCE): a server walks
 * its connections in the handshake through net_evict_see, then asks
 * net_evict_pick which one a newcomer evicts. Loop thread, on the stack. */
struct net_evict {
	const struct sockaddr *src;  /* the newcomer's address */
	void *oldest, *oldest_same;  /* of all, of the newcomer's host */
	double born, born_same;      /* their accept times */
	int n, same;                 /* connections seen, of them its host's */
};
/* Count connection c (accepted at born, from address addr). */
void net_evict_see(struct net_evict *e, void *c, double born, const void *addr);
/* The connection to evict: its host's oldest once that host has
 * NET_UNAUTH_PER_SOURCE, else the oldest of all once there are
 * NET_UNAUTH_MAX or the server is full; NULL for none. The count it went
 * by, for the log line, in *count. */
void *net_evict_pick(const struct net_evict *e, int full, int *count);

#endif
