/*
 * net_call.c - the client call core, shared by the client backends: the
 * public submit/wait wrappers (opstats timing, open-call counters), the
 * call check, call completion and sleeping (a futex on the call's state
 * word), and the machinery every backend's submit and wait run the same
 * way, driven by the hooks of struct net_client_ops.
 */
#include "net_int.h"
#include "metrics_op.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
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
