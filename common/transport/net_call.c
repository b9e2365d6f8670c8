/*
 * net_call.c - the client call core, shared by the client backends: the
 * public submit/wait wrappers (opstats timing, open-call counters), the
 * call check, call completion and sleeping (a futex on the call's state
 * word), the machinery every backend's submit and wait run the same
 * way, driven by the hooks of struct net_client_ops, and the progress
 * thread's epoll set and kick (net_progress) both backends run on.
 */
#include "net_int.h"
#include "log.h"
#include "metrics_op.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ------------------------------------------------------------ completion */

_Static_assert(sizeof(enum net_call_state) == sizeof(int), "futex word");

/* Publish and wake the waiter if it sleeps; see net_int.h. Cost: one
 * atomic exchange, plus a futex syscall only when the waiter sleeps (a
 * caller that reads its own reply never does). The call is not touched
 * after DONE is published: its owner may free it at once. */
void net_call_done(struct net_call *call)
{
	int old = __atomic_exchange_n((int *)&call->state, NET_CALL_DONE, __ATOMIC_ACQ_REL);

	if (old == NET_CALL_SLEEPING)
		syscall(SYS_futex, (int *)&call->state, FUTEX_WAKE_PRIVATE, 1, NULL,
			NULL, 0);
}

/* Mark the call SLEEPING (so its completer wakes us), then sleep while it
 * stays so. FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline. */
void net_call_sleep(struct net_call *call, const struct timespec *abs)
{
	int exp = NET_CALL_SENT;

	if (!__atomic_compare_exchange_n((int *)&call->state, &exp, NET_CALL_SLEEPING, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
	    exp != NET_CALL_SLEEPING)
		return; /* DONE meanwhile */
	syscall(SYS_futex, (int *)&call->state, FUTEX_WAIT_BITSET_PRIVATE,
		NET_CALL_SLEEPING, abs, NULL, FUTEX_BITSET_MATCH_ANY);
}

/* Wait for DONE in one-second slices; see net_int.h. */
void net_call_wait_done(struct net_call *call)
{
	while (__atomic_load_n(&call->state, __ATOMIC_ACQUIRE) != NET_CALL_DONE) {
		struct timespec ts = net_ns_to_ts(net_now_ns() + 1000000000ull);

		net_call_sleep(call, &ts);
	}
}

/* ----------------------------------------------------------------- checks */

/* See net_int.h. Cost: a pass over the iovecs; with rd_pipe, two fcntl. */
int net_call_check(const struct net_call *call, int pipe_ok, uint64_t *wr,
		   uint64_t *rd)
{
	if (call->wr_cnt < 0 || call->wr_cnt > NET_MAX_IOV || call->rd_cnt < 0 ||
	    call->rd_cnt > NET_MAX_IOV || call->body_len > PROTO_MAX_BODY ||
	    (call->body_len && !call->body) || (call->wr_cnt && !call->wr_iov) ||
	    (call->rd_cnt && !call->rd_iov) || (call->rep_cap && !call->rep_buf) ||
	    call->op == PROTO_OP_NET_HELLO || call->op == PROTO_OP_NET_CREDIT ||
	    call->op == PROTO_OP_NET_AUTH)
		return -EINVAL;
	*wr = net_iov_total(call->wr_iov, call->wr_cnt);
	*rd = net_iov_total(call->rd_iov, call->rd_cnt);
	if (*wr > PROTO_MAX_BULK || *rd > PROTO_MAX_BULK)
		return -EINVAL;
	if (call->rd_pipe) {
		/* room for twice the data (pipe buffers are pages; socket
		 * pieces may not fill them), and a full pipe must not block
		 * the receive side */
		int psz = fcntl(call->rd_pipe_fd, F_GETPIPE_SZ);
		int fl = fcntl(call->rd_pipe_fd, F_GETFL);

		if (!pipe_ok || call->rd_pipe != 1 || psz < 0 || (uint64_t)psz < 2 * *rd ||
		    fl < 0 || !(fl & O_NONBLOCK))
			return -EINVAL;
	}
	return 0;
}

/* See net_int.h: the call's own limit, else the client's. */
uint64_t net_call_timeout_ns(const struct net_call *call, const struct net_opts *o)
{
	uint64_t ms = call->timeout_ms ? call->timeout_ms : (uint64_t)o->timeout_ms;

	return ms * 1000000ull;
}

/* --------------------------------------------------------- connection */

/* See net_int.h. The cv runs on CLOCK_MONOTONIC, the clock of every
 * deadline here. */
void net_conn_init(struct net_conn *c, struct net_client *cl)
{
	pthread_condattr_t ca;

	c->cl = cl;
	c->up = 0;
	c->kill = 0;
	c->gen = 0;
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
}

/* See net_int.h. */
void net_conn_fini(struct net_conn *c)
{
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->lock);
}

/* See net_int.h. pthread_mutex_timedlock wants CLOCK_REALTIME
 * (clocklock is not known to tsan), so the monotonic deadline is moved
 * onto it; a clock step meanwhile stretches or shortens the wait. */
int net_conn_connect_lock(pthread_mutex_t *m, uint64_t deadline)
{
	struct timespec ts;
	uint64_t now, rt;
	int rc;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = net_now_ns();
	rt = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
	     (deadline > now ? deadline - now : 0);
	ts = net_ns_to_ts(rt);
	rc = pthread_mutex_timedlock(m, &ts);
	return rc == ETIMEDOUT ? -ETIMEDOUT : -rc;
}

/*
 * Submit's admission (see net_int.h): connect while down (lock let go,
 * the connect may take until the deadline), take a credit once up, wait
 * for one otherwise. Why one loop: a connection may go down while we
 * wait, and a connect may find it up already. Cost: nothing beyond the
 * lock when a credit is free.
 */
int net_conn_admit(struct net_conn *c, uint64_t deadline)
{
	const struct net_client_ops *o = c->cl->ops;
	int rc, waited = 0;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		if (!c->up) {
			pthread_mutex_unlock(&c->lock);
			rc = o->connect(c, deadline);
			if (rc)
				return rc;
			pthread_mutex_lock(&c->lock);
			continue;
		}
		rc = o->credit_take(c);
		if (rc >= 0)
			return rc;
		if (!waited) {
			waited = 1;
			NET_STAT_ADD(&c->cl->st, credit_waits, 1);
		}
		if (o->credit_wait(c, deadline)) {
			pthread_mutex_unlock(&c->lock);
			NET_STAT_ADD(&c->cl->st, timeouts, 1);
			return -ETIMEDOUT;
		}
	}
}

/* The fields every backend sets as a call is admitted; see net_int.h. */
void net_call_start(struct net_call *call, struct net_conn *c, uint64_t tag,
		    uint64_t deadline, enum net_call_state state)
{
	call->tag = tag;
	call->conn = c;
	call->err = 0;
	call->status = 0;
	call->rep_len = 0;
	call->rd_bytes = 0;
	call->deadline_ns = deadline;
	__atomic_store_n(&call->state, state, __ATOMIC_RELAXED);
}

/* Mark, ask for the teardown, wait for it; see net_int.h. Only the
 * thread that tears down may complete the call, so the caller's memory
 * is safe once it is done. */
void net_call_abort(struct net_call *call, int err)
{
	struct net_conn *c = call->conn;
	int need_kick = 0;

	pthread_mutex_lock(&c->lock);
	if (__atomic_load_n(&call->state, __ATOMIC_ACQUIRE) != NET_CALL_DONE) {
		if (!call->err)
			call->err = err;
		c->kill = 1;
		need_kick = 1;
	}
	pthread_mutex_unlock(&c->lock);
	if (need_kick)
		c->cl->ops->kick(c);
	net_call_wait_done(call);
}

/* One call of a connection going down; see net_int.h. */
void net_call_fail(struct net_call *p, struct net_call *culprit, int cerr)
{
	if (p == culprit)
		p->err = cerr;
	else if (!p->err)
		p->err = -EIO;
	net_call_done(p);
}

/* Undo the call's side of an admitted submit; see net_int.h. */
int net_call_unsent(struct net_call *call, int rc)
{
	if (rc == -ETIMEDOUT)
		NET_STAT_ADD(&call->conn->cl->st, timeouts, 1);
	__atomic_store_n(&call->state, NET_CALL_IDLE, __ATOMIC_RELAXED);
	return rc;
}

/*
 * The wait loop (see net_int.h): done -> collect; else lead through the
 * backend when it lets us (its reply then wakes nobody: we read it);
 * else, past the deadline, abort the call, which tears the connection
 * down before we return, so no late reply lands in the caller's memory;
 * else sleep on the call's futex until its completer wakes us. Cost:
 * one atomic load when the call is done already.
 */
int net_call_await(struct net_call *call)
{
	const struct net_client_ops *o = call->conn->cl->ops;
	struct timespec ts = net_ns_to_ts(call->deadline_ns);
	struct net_wait w = { .lead = call->lead, .held = call->lead };
	int rc, s;

	call->lead = 0;
	for (;;) {
		s = __atomic_load_n(&call->state, __ATOMIC_ACQUIRE);
		if (s == NET_CALL_DONE)
			break;
		if (s != NET_CALL_SENT && s != NET_CALL_SLEEPING) {
			w.bad = 1;
			o->wait_end(call, &w);
			return -EINVAL;
		}
		rc = o->lead(call, &w);
		if (rc > 0)
			continue;
		if (rc < 0 || net_now_ns() >= call->deadline_ns) {
			net_call_abort(call, -ETIMEDOUT);
			break;
		}
		net_call_sleep(call, &ts);
	}
	rc = call->err;
	if (rc == -ETIMEDOUT)
		NET_STAT_ADD(&call->conn->cl->st, timeouts, 1);
	__atomic_store_n(&call->state, NET_CALL_IDLE, __ATOMIC_RELAXED);
	o->wait_end(call, &w);
	return rc;
}

/* ------------------------------------------------------- progress thread */

/* See net_int.h. */
int net_progress_init(struct net_progress *p)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0 };
	int rc;

	*p = (struct net_progress){ .epfd = -1, .evfd = -1 };
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (p->epfd < 0)
		return -errno;
	p->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (p->evfd < 0) {
		rc = -errno;
		goto out_close_epfd;
	}
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->evfd, &ev) < 0) {
		rc = -errno;
		goto out_close_evfd;
	}
	return 0;

out_close_evfd:
	close(p->evfd);
	p->evfd = -1;
out_close_epfd:
	close(p->epfd);
	p->epfd = -1;
	return rc;
}

/* See net_int.h. */
int net_progress_start(struct net_progress *p, void *(*fn)(void *), void *arg)
{
	int rc = -pthread_create(&p->thr, NULL, fn, arg);

	p->started = rc == 0;
	return rc;
}

/* See net_int.h. */
void net_progress_kick(struct net_progress *p)
{
	(void)eventfd_write(p->evfd, 1);
}

/* See net_int.h. */
int net_progress_stopping(struct net_progress *p)
{
	return __atomic_load_n(&p->stop, __ATOMIC_ACQUIRE);
}

/* See net_int.h. Cost: one epoll_wait, and a read of the eventfd when
 * it fired. */
int net_progress_wait(struct net_progress *p, struct epoll_event *ev, int max)
{
	int n = epoll_wait(p->epfd, ev, max, -1);

	if (n < 0) {
		if (errno != EINTR)
			log_err("net: epoll_wait: %s", strerror(errno));
		return 0;
	}
	for (int i = 0; i < n; i++)
		if (ev[i].data.u64 == 0) {
			eventfd_t v;

			(void)eventfd_read(p->evfd, &v);
		}
	return n;
}

/* See net_int.h. */
void net_progress_fini(struct net_progress *p)
{
	if (p->started) {
		__atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
		net_progress_kick(p);
		pthread_join(p->thr, NULL);
		p->started = 0;
	}
	if (p->evfd >= 0)
		close(p->evfd);
	if (p->epfd >= 0)
		close(p->epfd);
	p->evfd = p->epfd = -1;
}

/* See net_int.h. */
void net_conn_kick(struct net_conn *c)
{
	net_progress_kick(&c->cl->pg);
}

/* --------------------------------------------------------- public wrappers */

/* Send a call through the connection's backend; count it in data_ops when
 * it carries data (the denominator of registrations per operation). */
int net_call_submit(struct net_conn *c, struct net_call *call)
{
	struct metrics_ops *m;
	int rc;

	if (!c || !call)
		return -EINVAL;
	m = __atomic_load_n(&c->cl->opstats, __ATOMIC_RELAXED);
	call->t0_ns = m ? net_now_ns() : 0;
	call->counted = NULL;
	rc = c->cl->ops->submit(c, call);
	if (rc == 0) {
		call->counted = c;
		NET_STAT_ADD(c, calls_open, 1);
	}
	if (rc && m) {
		metrics_op_record(m, call->op, rc, net_now_ns() - call->t0_ns);
		call->t0_ns = 0;
	} else if (m) {
		__atomic_fetch_add(&c->cl->calls_timed, 1, __ATOMIC_RELAXED);
	}
	if (rc == 0 && ((call->wr_cnt > 0 && net_iov_total(call->wr_iov, call->wr_cnt)) ||
			(call->rd_cnt > 0 && net_iov_total(call->rd_iov, call->rd_cnt))))
		NET_STAT_ADD(&c->cl->st, data_ops, 1);
	return rc;
}

/* Wait for a submitted call through its connection's backend; a timed
 * call's latency and outcome (transport error, else the server's status)
 * go to the client's opstats. */
int net_call_wait(struct net_call *call)
{
	struct metrics_ops *m;
	int rc;

	if (!call || !call->conn)
		return -EINVAL;
	rc = call->conn->cl->ops->wait(call);
	if (call->counted) {
		NET_STAT_ADD(call->counted, calls_open, -1);
		call->counted = NULL;
	}
	m = __atomic_load_n(&call->conn->cl->opstats, __ATOMIC_RELAXED);
	if (call->t0_ns) {
		if (m)
			metrics_op_record(m, call->op, rc ? rc : call->status,
					  net_now_ns() - call->t0_ns);
		__atomic_fetch_sub(&call->conn->cl->calls_timed, 1, __ATOMIC_RELAXED);
		call->t0_ns = 0;
	}
	return rc;
}

/* submit + wait, the common synchronous case. */
int net_call_run(struct net_conn *c, struct net_call *call)
{
	int rc;

	call->wait_now = 1;
	rc = net_call_submit(c, call);

	if (rc)
		return rc;
	return net_call_wait(call);
}
