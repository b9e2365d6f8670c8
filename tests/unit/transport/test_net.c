/*
 * test_net.c - the TCP transport end to end on loopback: a net_server in
 * its own thread and libev loop with a test handler, driven by net_client
 * calls. Covers echo, bulk pull/push integrity with scattered memory,
 * many threads on one credit-limited connection, timeouts and reconnect,
 * rejects, malformed input from raw sockets, a server going away and the
 * client's data counters (data_ops, client_copy_bytes) and their JSON.
 * Every wait is bounded; alarm() guards the whole run.
 */
#include "net.h"
#include "net_auth.h"
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#define OP_ECHO 100
#define OP_WRITE 101
#define OP_READ 102
#define OP_SLOW 103
#define OP_REJECT 104
#define OP_PEER 105 /* replies with the client's address as the server sees it */
#define OP_READ_SEQ 106 /* OP_READ, its chunks pushed in order */
#define OP_PRIV 107 /* replies with net_sconn_privileged() as the status */

#define CHECK(c)                                                              \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__,   \
				__LINE__, #c);                                \
			return -1;                                            \
		}                                                             \
	} while (0)

/* The TCP client's epoll_ctl calls, counted: this test links with
 * -Wl,--wrap=epoll_ctl, which reaches the calls in libcommon (static) but
 * not libev's own (a shared library). */
static int epoll_ctl_calls;
int __real_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);

int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	__atomic_add_fetch(&epoll_ctl_calls, 1, __ATOMIC_RELAXED);
	return __real_epoll_ctl(epfd, op, fd, ev);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* FNV-1a over a buffer: the write handler's checksum. */
static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* The byte the read handler puts at offset i for seed. */
static uint8_t pattern(uint64_t seed, uint64_t i)
{
	return (uint8_t)(seed * 7 + i * 131 + (i >> 11));
}

/* ------------------------------------------------------------ test server */

struct xfer_ctx {
	uint8_t *buf;
	uint64_t len;
	int step, outstanding, failed;
	struct iovec iov[4];
};

static void write_step(struct net_sreq *r, int rc, void *arg);

/* Pull the request's write data in three pieces (the second as two
 * iovecs), then reply with checksum and length. */
static void write_step(struct net_sreq *r, int rc, void *arg)
{
	struct xfer_ctx *x = arg;
	uint64_t third = x->len / 3, rep[2];

	if (rc) {
		free(x->buf);
		free(x);
		net_sreq_reply(r, rc, NULL, 0);
		return;
	}
	if (x->step == 0) {
		x->step = 1;
		x->iov[0] = (struct iovec){ x->buf, third };
		if (net_sreq_pull(r, x->iov, 1, write_step, x) == 0)
			return;
	} else if (x->step == 1) {
		x->step = 2;
		x->iov[0] = (struct iovec){ x->buf + third, third / 2 };
		x->iov[1] = (struct iovec){ x->buf + third + third / 2, third - third / 2 };
		if (net_sreq_pull(r, x->iov, 2, write_step, x) == 0)
			return;
	} else if (x->step == 2) {
		x->step = 3;
		x->iov[0] = (struct iovec){ x->buf + 2 * third, x->len - 2 * third };
		if (net_sreq_pull(r, x->iov, 1, write_step, x) == 0)
			return;
	}
	rep[0] = fnv(x->buf, x->len);
	rep[1] = r->pulled;
	free(x->buf);
	free(x);
	net_sreq_reply(r, 0, rep, sizeof(rep));
}

static void read_done(struct net_sreq *r, int rc, void *arg)
{
	struct xfer_ctx *x = arg;

	if (rc)
		x->failed = rc;
	if (--x->outstanding > 0)
		return;
	rc = x->failed;
	free(x->buf);
	free(x);
	net_sreq_reply(r, rc, NULL, 0);
}

/* Push the pattern into the client's read memory in five chunks, out of
 * order unless in_order, each as two iovecs; reply when all are written. */
static void read_start(struct net_sreq *r, int in_order)
{
	static const int shuffled[5] = { 4, 0, 2, 1, 3 }, seq[5] = { 0, 1, 2, 3, 4 };
	const int *order = in_order ? seq : shuffled;
	struct xfer_ctx *x = calloc(1, sizeof(*x));
	uint64_t seed = 0, len = r->hdr.aux;

	if (r->body_len == sizeof(seed))
		memcpy(&seed, r->body, sizeof(seed));
	if (!x || len == 0 || !(x->buf = malloc(len))) {
		free(x);
		net_sreq_reply(r, len ? -ENOMEM : 0, NULL, 0);
		return;
	}
	x->len = len;
	for (uint64_t i = 0; i < len; i++)
		x->buf[i] = pattern(seed, i);
	x->outstanding = 5;
	for (int k = 0; k < 5; k++) {
		uint64_t a = len * order[k] / 5, b = len * (order[k] + 1) / 5;
		uint64_t mid = a + (b - a) / 2;
		struct iovec v[2] = { { x->buf + a, mid - a }, { x->buf + mid, b - mid } };
		if (net_sreq_push(r, a, v, 2, read_done, x) != 0) {
			fprintf(stderr, "push failed\n");
			abort();
		}
	}
}

static void test_handler(struct net_sreq *r, void *arg)
{
	switch (r->hdr.op) {
	case OP_ECHO:
		net_sreq_reply(r, 7, r->body, r->body_len);
		break;
	case OP_PRIV:
		net_sreq_reply(r, net_sconn_privileged(r->conn), NULL, 0);
		break;
	case OP_WRITE: {
		struct xfer_ctx *x = calloc(1, sizeof(*x));
		if (!x || !(x->buf = malloc(r->hdr.bulk_len ? r->hdr.bulk_len : 1))) {
			free(x);
			net_sreq_reply(r, -ENOMEM, NULL, 0);
			break;
		}
		x->len = r->hdr.bulk_len;
		write_step(r, 0, x);
		break;
	}
	case OP_READ:
	case OP_READ_SEQ:
		read_start(r, r->hdr.op == OP_READ_SEQ);
		break;
	case OP_SLOW:
		break; /* never answered; dropped by net_server_free */
	case OP_REJECT:
		net_sreq_reject(r, "test reject");
		break;
	case OP_PEER: {
		const char *p = net_sconn_peer(r->conn);
		net_sreq_reply(r, 0, p, (uint32_t)strlen(p));
		break;
	}
	default:
		net_sreq_reject(r, "unknown op");
	}
}

struct srv_thread {
	pthread_t t;
	struct ev_loop *loop;
	ev_async stop_w;
	struct net_server *srv;
	uint16_t port;
	int credits;
	const uint8_t *key; /* cluster key, NULL = none */
	const uint8_t *srv_key; /* servers' key, NULL = none */
	int state; /* 0 starting, 1 running, -1 failed */
	pthread_mutex_t m;
	pthread_cond_t cv;
};

/* Request deadline for the next server started (0 = default); set only
 * while no server thread is starting. */
static int srv_request_timeout_ms;

static void srv_stop_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct srv_thread *st = w->data;

	net_server_free(st->srv);
	st->srv = NULL;
	ev_async_stop(loop, w);
	ev_break(loop, EVBREAK_ALL);
}

static void *srv_main(void *arg)
{
	struct srv_thread *st = arg;
	struct net_opts o;
	int rc;

	net_opts_default(&o);
	o.credits = st->credits;
	o.request_timeout_ms = srv_request_timeout_ms;
	if (st->key) {
		o.has_key = 1;
		memcpy(o.key, st->key, NET_KEY_LEN);
	}
	if (st->srv_key) {
		o.has_srv_key = 1;
		memcpy(o.srv_key, st->srv_key, NET_KEY_LEN);
	}
	st->loop = ev_loop_new(EVFLAG_AUTO);
	rc = st->loop ? net_server_new(&st->srv, st->loop, "127.0.0.1", st->port,
				       test_handler, NULL, &o) : -ENOMEM;
	if (!rc) {
		st->port = net_server_port(st->srv);
		ev_async_init(&st->stop_w, srv_stop_cb);
		st->stop_w.data = st;
		ev_async_start(st->loop, &st->stop_w);
	}
	pthread_mutex_lock(&st->m);
	st->state = rc ? -1 : 1;
	pthread_cond_signal(&st->cv);
	pthread_mutex_unlock(&st->m);
	if (rc)
		return NULL;
	ev_run(st->loop, 0);
	ev_loop_destroy(st->loop);
	return NULL;
}

/* Start a server thread listening on 127.0.0.1:port (0: any port; the
 * port is in st->port once it runs). @return 0 or -1 */
static int srv_start_keys_at(struct srv_thread *st, int credits,
			     const uint8_t *key, const uint8_t *srv_key,
			     uint16_t port)
{
	memset(st, 0, sizeof(*st));
	st->credits = credits;
	st->key = key;
	st->srv_key = srv_key;
	st->port = port;
	pthread_mutex_init(&st->m, NULL);
	pthread_cond_init(&st->cv, NULL);
	if (pthread_create(&st->t, NULL, srv_main, st))
		return -1;
	pthread_mutex_lock(&st->m);
	while (st->state == 0)
		pthread_cond_wait(&st->cv, &st->m);
	pthread_mutex_unlock(&st->m);
	return st->state == 1 ? 0 : -1;
}

static int srv_start_at(struct srv_thread *st, int credits, const uint8_t *key,
			uint16_t port)
{
	return srv_start_keys_at(st, credits, key, NULL, port);
}

static int srv_start_key(struct srv_thread *st, int credits, const uint8_t *key)
{
	return srv_start_at(st, credits, key, 0);
}

static int srv_start(struct srv_thread *st, int credits)
{
	return srv_start_key(st, credits, NULL);
}

/* Wake the loop (ev_async_send is the thread-safe entry), join. */
static void srv_stop(struct srv_thread *st)
{
	ev_async_send(st->loop, &st->stop_w);
	pthread_join(st->t, NULL);
	pthread_cond_destroy(&st->cv);
	pthread_mutex_destroy(&st->m);
}

/* --------------------------------------------------------------- helpers */

static int echo(struct net_conn *c, const char *msg)
{
	char rep[256];
	struct net_call call = { .op = OP_ECHO, .body = msg,
				 .body_len = (uint32_t)strlen(msg),
				 .rep_buf = rep, .rep_cap = sizeof(rep) };
	int rc = net_call_run(c, &call);

	if (rc)
		return rc;
	if (call.status != 7 || call.rep_len != strlen(msg) ||
	    memcmp(rep, msg, call.rep_len) != 0)
		return -EBADMSG;
	return 0;
}

/* ------------------------------------------------------------------ tests */

static int t_echo(struct net_conn *c)
{
	static uint8_t big[100000], rep[PROTO_MAX_BODY];
	struct net_call call = { .op = OP_ECHO, .body = big, .body_len = sizeof(big),
				 .rep_buf = rep, .rep_cap = sizeof(rep) };

	CHECK(echo(c, "hello rpfs") == 0);
	CHECK(echo(c, "") == 0);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 13 + 5);
	CHECK(net_call_run(c, &call) == 0);
	CHECK(call.status == 7 && call.rep_len == sizeof(big));
	CHECK(memcmp(big, rep, sizeof(big)) == 0);
	CHECK(call.state == NET_CALL_IDLE);
	return 0;
}

static int t_invalid(struct net_conn *c)
{
	static struct iovec many[NET_MAX_IOV + 1];
	struct net_call call = { .op = OP_ECHO, .wr_iov = many,
				 .wr_cnt = NET_MAX_IOV + 1 };

	CHECK(net_call_submit(c, &call) == -EINVAL);
	call = (struct net_call){ .op = OP_ECHO, .body_len = PROTO_MAX_BODY + 1,
				  .body = many };
	CHECK(net_call_submit(c, &call) == -EINVAL);
	call = (struct net_call){ .op = PROTO_OP_NET_HELLO };
	CHECK(net_call_submit(c, &call) == -EINVAL);
	call = (struct net_call){ .op = PROTO_OP_NET_AUTH };
	CHECK(net_call_submit(c, &call) == -EINVAL);
	return 0;
}

#define BULK (4u << 20)
#define NPIECE_W 7
#define NPIECE_R 13
#define GAP 16

/* Split [0, BULK) into n uneven pieces placed in buf with GAP guard bytes
 * between them. */
static void scatter(uint8_t *buf, struct iovec *iov, int n)
{
	size_t off = 0, pos = 0;

	for (int i = 0; i < n; i++) {
		size_t len = (i == n - 1) ? BULK - off : (BULK / n) + (i % 3) * 777 - 777;
		iov[i].iov_base = buf + pos;
		iov[i].iov_len = len;
		off += len;
		pos += len + GAP;
	}
}

static int t_bulk(struct net_conn *c)
{
	size_t cap = BULK + GAP * NPIECE_R;
	uint8_t *w = malloc(cap), *r = malloc(cap), *flat = malloc(BULK);
	struct iovec wi[NPIECE_W], ri[NPIECE_R];
	uint64_t rep[2], seed = 42;
	size_t off = 0;
	int rc = -1;

	if (!w || !r || !flat)
		goto out_free;
	scatter(w, wi, NPIECE_W);
	for (int i = 0; i < NPIECE_W; i++)
		for (size_t k = 0; k < wi[i].iov_len; k++, off++) {
			((uint8_t *)wi[i].iov_base)[k] = (uint8_t)(off * 2654435761u >> 7);
			flat[off] = ((uint8_t *)wi[i].iov_base)[k];
		}
	struct net_call wc = { .op = OP_WRITE, .wr_iov = wi, .wr_cnt = NPIECE_W,
			       .rep_buf = rep, .rep_cap = sizeof(rep) };
	if (net_call_run(c, &wc) != 0 || wc.status != 0 || wc.rep_len != sizeof(rep) ||
	    rep[1] != BULK || rep[0] != fnv(flat, BULK)) {
		fprintf(stderr, "bulk write: status %d len %u pulled %llu\n", wc.status,
			wc.rep_len, (unsigned long long)rep[1]);
		goto out_free;
	}

	memset(r, 0xEE, cap);
	scatter(r, ri, NPIECE_R);
	struct net_call rcall = { .op = OP_READ, .body = &seed, .body_len = sizeof(seed),
				  .rd_iov = ri, .rd_cnt = NPIECE_R };
	if (net_call_run(c, &rcall) != 0 || rcall.status != 0 ||
	    rcall.rd_bytes != BULK) {
		fprintf(stderr, "bulk read: status %d rd_bytes %llu\n", rcall.status,
			(unsigned long long)rcall.rd_bytes);
		goto out_free;
	}
	off = 0;
	for (int i = 0; i < NPIECE_R; i++) {
		const uint8_t *p = ri[i].iov_base;
		for (size_t k = 0; k < ri[i].iov_len; k++, off++)
			if (p[k] != pattern(seed, off)) {
				fprintf(stderr, "bulk read: byte %zu wrong\n", off);
				goto out_free;
			}
		if (i < NPIECE_R - 1)
			for (int g = 0; g < GAP; g++)
				if (p[ri[i].iov_len + g] != 0xEE) {
					fprintf(stderr, "bulk read: gap %d touched\n", i);
					goto out_free;
				}
	}
	rc = 0;
out_free:
	free(w);
	free(r);
	free(flat);
	return rc;
}

/*
 * The client's data counters: data_ops counts only calls that carry data,
 * client_copy_bytes never exceeds the read bytes (tcp copies only what it
 * staged), and both appear in net_stats_json.
 */
static int t_counters(uint16_t port)
{
	struct net_client *cl;
	struct net_conn *c;
	struct net_opts o;
	struct net_stats s, z = { 0 };
	static uint8_t w[1000], r[20000];
	struct iovec wi = { w, sizeof(w) }, ri = { r, sizeof(r) }, empty = { w, 0 };
	uint64_t rep[2], seed = 3;
	char js[4096];
	int rc = -1;

	net_opts_default(&o);
	o.transport = NET_TRANSPORT_TCP;
	CHECK(net_client_new(&cl, &o) == 0);
	if (net_conn_new(cl, "127.0.0.1", port, &c) != 0)
		goto out_free_client;
	struct net_call wc = { .op = OP_WRITE, .wr_iov = &wi, .wr_cnt = 1,
			       .rep_buf = rep, .rep_cap = sizeof(rep) };
	struct net_call rcall = { .op = OP_READ, .body = &seed, .body_len = sizeof(seed),
				  .rd_iov = &ri, .rd_cnt = 1 };
	struct net_call ec = { .op = OP_ECHO, .body = "x", .body_len = 1,
			       .wr_iov = &empty, .wr_cnt = 1, .rep_buf = rep,
			       .rep_cap = sizeof(rep) };
	if (net_call_run(c, &ec) || net_call_run(c, &wc) || wc.status ||
	    net_call_run(c, &rcall) || rcall.status || rcall.rd_bytes != sizeof(r))
		goto out_free_client;
	net_client_stats(cl, &s);
	if (s.data_ops != 2 || s.client_copy_bytes > sizeof(r)) {
		fprintf(stderr, "counters: data_ops %llu client_copy_bytes %llu\n",
			(unsigned long long)s.data_ops,
			(unsigned long long)s.client_copy_bytes);
		goto out_free_client;
	}
	if (net_stats_json(&s, "tcp", js, sizeof(js)) < 0 ||
	    !strstr(js, ",\"data_ops\":2") || !strstr(js, "\"client_copy_bytes\":"))
		goto out_free_client;
	z.client_copy_bytes = 12345;
	z.data_ops = 678;
	if (net_stats_json(&z, "verbs", js, sizeof(js)) < 0 ||
	    !strstr(js, ",\"client_copy_bytes\":12345,") ||
	    !strstr(js, ",\"data_ops\":678,") ||
	    net_stats_json(&z, "verbs", js, strlen(js)) != -ERANGE)
		goto out_free_client;
	rc = 0;
out_free_client:
	net_client_free(cl);
	return rc;
}

/*
 * Read data into a pipe (net_call rd_pipe): a pipe without room for twice
 * the data, or a blocking one, is refused at submit; an in-order read lands in the pipe byte
 * for byte (rd_iov untouched); a read whose frames come out of order fails
 * with -EPROTO and the connection recovers.
 */
static int t_pipe(struct net_conn *c)
{
	uint64_t seed = 7, len = BULK / 8; /* a 1 MiB pipe: the default limit */
	uint8_t *mem = malloc(len), *got = malloc(len);
	struct iovec ri = { mem, len };
	int p[2], rc = -1;
	size_t have = 0;

	if (!mem || !got || pipe2(p, O_NONBLOCK | O_CLOEXEC))
		goto out_free;
	memset(mem, 0xEE, len);
	struct net_call call = { .op = OP_READ_SEQ, .body = &seed,
				 .body_len = sizeof(seed), .rd_iov = &ri,
				 .rd_cnt = 1, .rd_pipe = 1, .rd_pipe_fd = p[1] };
	if (fcntl(p[0], F_SETPIPE_SZ, 4096) < 0 ||
	    net_call_submit(c, &call) != -EINVAL) {
		fprintf(stderr, "pipe: a 4 KiB pipe was not refused\n");
		goto out_close;
	}
	if (fcntl(p[0], F_SETPIPE_SZ, (int)(2 * len)) < 0) {
		fprintf(stderr, "pipe: F_SETPIPE_SZ: %s\n", strerror(errno));
		goto out_close;
	}
	if (fcntl(p[1], F_SETFL, 0) < 0 || net_call_submit(c, &call) != -EINVAL ||
	    fcntl(p[1], F_SETFL, O_NONBLOCK) < 0) {
		fprintf(stderr, "pipe: a blocking pipe was not refused\n");
		goto out_close;
	}
	if (net_call_run(c, &call) != 0 || call.status != 0 || call.rd_bytes != len) {
		fprintf(stderr, "pipe: in-order read: status %d rd_bytes %llu\n",
			call.status, (unsigned long long)call.rd_bytes);
		goto out_close;
	}
	while (have < len) {
		ssize_t n = read(p[0], got + have, len - have);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	if (have != len || read(p[0], got, 1) != -1) {
		fprintf(stderr, "pipe: %zu bytes in the pipe, want %llu\n", have,
			(unsigned long long)len);
		goto out_close;
	}
	for (uint64_t i = 0; i < len; i++)
		if (got[i] != pattern(seed, i) || mem[i] != 0xEE) {
			fprintf(stderr, "pipe: byte %llu wrong\n", (unsigned long long)i);
			goto out_close;
		}
	call.op = OP_READ; /* chunks out of order */
	if (net_call_run(c, &call) != -EPROTO || echo(c, "after pipe") != 0) {
		fprintf(stderr, "pipe: out-of-order frames not refused\n");
		goto out_close;
	}
	rc = 0;
out_close:
	close(p[0]);
	close(p[1]);
out_free:
	free(mem);
	free(got);
	return rc;
}

struct worker {
	pthread_t t;
	struct net_conn *c;
	int id, failures;
};

/* 200 calls: echo, small read and small write in turn. */
static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	uint8_t buf[5000], rb[3000];
	char msg[64];

	for (int i = 0; i < 200; i++) {
		int rc;
		if (i % 3 == 0) {
			snprintf(msg, sizeof(msg), "worker %d call %d", wk->id, i);
			rc = echo(wk->c, msg);
		} else if (i % 3 == 1) {
			uint64_t seed = (uint64_t)wk->id * 1000 + (uint64_t)i;
			struct iovec v = { rb, sizeof(rb) };
			struct net_call call = { .op = OP_READ, .body = &seed,
						 .body_len = sizeof(seed), .rd_iov = &v,
						 .rd_cnt = 1 };
			rc = net_call_run(wk->c, &call);
			if (!rc && (call.status || call.rd_bytes != sizeof(rb)))
				rc = -EBADMSG;
			for (size_t k = 0; !rc && k < sizeof(rb); k++)
				if (rb[k] != pattern(seed, k))
					rc = -EBADMSG;
		} else {
			uint64_t rep[2];
			for (size_t k = 0; k < sizeof(buf); k++)
				buf[k] = (uint8_t)(k + (size_t)i + (size_t)wk->id);
			struct iovec v = { buf, sizeof(buf) };
			struct net_call call = { .op = OP_WRITE, .wr_iov = &v, .wr_cnt = 1,
						 .rep_buf = rep, .rep_cap = sizeof(rep) };
			rc = net_call_run(wk->c, &call);
			if (!rc && (call.status || rep[0] != fnv(buf, sizeof(buf))))
				rc = -EBADMSG;
		}
		if (rc) {
			fprintf(stderr, "worker %d call %d: %d\n", wk->id, i, rc);
			wk->failures++;
		}
	}
	return NULL;
}

static int t_concurrent(void)
{
	struct srv_thread st;
	struct net_client *cl;
	struct net_conn *c;
	struct net_opts o;
	struct net_stats s;
	struct worker wk[16];
	int failures = 0;

	CHECK(srv_start(&st, 4) == 0);
	net_opts_default(&o);
	o.timeout_ms = 30000;
	o.tcp_lanes = 1; /* one socket: 16 threads on its 4 credits */
	CHECK(net_client_new(&cl, &o) == 0);
	CHECK(net_conn_new(cl, "127.0.0.1", st.port, &c) == 0);
	for (int i = 0; i < 16; i++) {
		wk[i] = (struct worker){ .c = c, .id = i };
		CHECK(pthread_create(&wk[i].t, NULL, worker_main, &wk[i]) == 0);
	}
	for (int i = 0; i < 16; i++) {
		pthread_join(wk[i].t, NULL);
		failures += wk[i].failures;
	}
	net_client_stats(cl, &s);
	fprintf(stderr, "concurrent: msgs_tx %llu credit_waits %llu data_frames %llu\n",
		(unsigned long long)s.msgs_tx, (unsigned long long)s.credit_waits,
		(unsigned long long)s.data_frames);
	net_client_free(cl);
	srv_stop(&st);
	CHECK(failures == 0);
	CHECK(s.credit_waits > 0);
	CHECK(s.msgs_tx >= 16 * 200);
	return 0;
}

/*
 * Lanes: calls in flight at once go out on distinct sockets (the server
 * sees distinct peers), a call stuck on one lane does not hold up the
 * others, and one lane carries everything when there is one.
 */
static int t_lanes(uint16_t port)
{
	for (int lanes = 1; lanes <= 4; lanes += 3) {
		struct net_client *cl;
		struct net_conn *c;
		struct net_opts o;
		struct net_call call[4], slow = { .op = OP_SLOW };
		char rep[4][64];
		int distinct = 0;

		net_opts_default(&o);
		o.tcp_lanes = lanes;
		o.timeout_ms = 1000;
		CHECK(net_client_new(&cl, &o) == 0);
		CHECK(net_conn_new(cl, "127.0.0.1", port, &c) == 0);
		for (int i = 0; i < 4; i++) {
			call[i] = (struct net_call){ .op = OP_PEER, .rep_buf = rep[i],
						     .rep_cap = sizeof(rep[i]) - 1 };
			CHECK(net_call_submit(c, &call[i]) == 0);
		}
		for (int i = 0; i < 4; i++) {
			CHECK(net_call_wait(&call[i]) == 0);
			rep[i][call[i].rep_len] = 0;
			int seen = 0;
			for (int j = 0; j < i; j++)
				seen |= !strcmp(rep[i], rep[j]);
			distinct += !seen;
		}
		CHECK(distinct == lanes);
		if (lanes > 1) {
			/* a slow call occupies one lane; an echo meanwhile takes
			 * another and completes */
			CHECK(net_call_submit(c, &slow) == 0);
			CHECK(echo(c, "beside the slow call") == 0);
			CHECK(net_call_wait(&slow) == -ETIMEDOUT);
		}
		net_client_free(cl);
	}
	return 0;
}

static int t_rep_too_large(struct net_conn *c)
{
	char rep[4];
	const char *msg = "this reply does not fit";
	struct net_call call = { .op = OP_ECHO, .body = msg,
				 .body_len = (uint32_t)strlen(msg),
				 .rep_buf = rep, .rep_cap = sizeof(rep) };

	CHECK(net_call_run(c, &call) == -EPROTO);
	CHECK(echo(c, "after eproto") == 0);
	return 0;
}

static int t_timeout(uint16_t port)
{
	struct net_client *cl;
	struct net_conn *c;
	struct net_opts o;
	struct net_stats s;
	struct net_call slow = { .op = OP_SLOW }, e;
	const char *msg = "queued behind slow";
	uint64_t t0;
	int rc;

	net_opts_default(&o);
	o.timeout_ms = 300;
	o.tcp_lanes = 1; /* the echo queues on the slow call's socket */
	CHECK(net_client_new(&cl, &o) == 0);
	CHECK(net_conn_new(cl, "127.0.0.1", port, &c) == 0);
	CHECK(echo(c, "warm up") == 0);
	t0 = now_ms();
	CHECK(net_call_submit(c, &slow) == 0);
	e = (struct net_call){ .op = OP_ECHO, .body = msg, .body_len = (uint32_t)strlen(msg) };
	CHECK(net_call_submit(c, &e) == 0);
	rc = net_call_wait(&slow);
	uint64_t dt = now_ms() - t0;
	CHECK(rc == -ETIMEDOUT);
	CHECK(dt >= 250 && dt < 3000);
	rc = net_call_wait(&e);
	CHECK(rc == -EIO || rc == -ETIMEDOUT);
	CHECK(echo(c, "after timeout") == 0);
	/* a call's own timeout_ms replaces the client's (300 ms) */
	slow = (struct net_call){ .op = OP_SLOW, .timeout_ms = 900 };
	t0 = now_ms();
	CHECK(net_call_submit(c, &slow) == 0);
	CHECK(net_call_wait(&slow) == -ETIMEDOUT);
	CHECK(now_ms() - t0 >= 850);
	CHECK(echo(c, "after the call's own timeout") == 0);
	net_client_stats(cl, &s);
	CHECK(s.timeouts >= 2);
	CHECK(s.reconnects >= 1);
	net_client_free(cl);
	return 0;
}

static int t_reject(struct net_conn *c, struct net_server *srv)
{
	struct net_call call = { .op = OP_REJECT };
	struct net_stats before, after;

	net_server_stats(srv, &before);
	CHECK(net_call_run(c, &call) == -EIO);
	net_server_stats(srv, &after);
	CHECK(after.rejects == before.rejects + 1);
	CHECK(echo(c, "after reject") == 0);
	return 0;
}

/* Connect a raw socket, send bytes, and expect the server to close it. */
static int raw_expect_close(uint16_t port, const void *buf, size_t len)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	char tmp[256];
	int fd, rc = -1;
	uint64_t t0 = now_ms();

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len)
		goto out_close_fd;
	while (now_ms() - t0 < 3000) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
		if (n <= 0) {
			rc = 0;
			break;
		}
		/* the handshake reply may come first; keep reading */
	}
out_close_fd:
	close(fd);
	return rc;
}

static int t_malformed(uint16_t port, struct net_server *srv, struct net_conn *c)
{
	uint8_t buf[3 * PROTO_HDR_LEN];
	struct proto_hdr hello = { .op = PROTO_OP_NET_HELLO, .tag = 1, .flags = PROTO_F_CTRL };
	struct proto_hdr req = { .op = OP_ECHO, .tag = 2 };
	struct net_stats before, after;

	net_server_stats(srv, &before);
	memset(buf, 0xA5, PROTO_HDR_LEN);
	CHECK(raw_expect_close(port, buf, PROTO_HDR_LEN) == 0);

	/* a request before the handshake */
	proto_hdr_encode(buf, &req);
	CHECK(raw_expect_close(port, buf, PROTO_HDR_LEN) == 0);

	/* a request carrying the reply flag */
	proto_hdr_encode(buf, &hello);
	req.flags = PROTO_F_REPLY;
	proto_hdr_encode(buf + PROTO_HDR_LEN, &req);
	CHECK(raw_expect_close(port, buf, 2 * PROTO_HDR_LEN) == 0);

	/* a body over the limit */
	req.flags = 0;
	req.body_len = PROTO_MAX_BODY;
	proto_hdr_encode(buf + PROTO_HDR_LEN, &req);
	buf[PROTO_HDR_LEN + 24 + 2] = 0x10; /* body_len -> 0x100000+ */
	CHECK(raw_expect_close(port, buf, 2 * PROTO_HDR_LEN) == 0);

	/* an unknown op the handler rejects */
	req.op = 999;
	req.body_len = 0;
	proto_hdr_encode(buf + PROTO_HDR_LEN, &req);
	CHECK(raw_expect_close(port, buf, 2 * PROTO_HDR_LEN) == 0);

	net_server_stats(srv, &after);
	CHECK(after.rejects == before.rejects + 5);
	CHECK(echo(c, "still serving") == 0);
	return 0;
}

/* Connect a raw socket to 127.0.0.1:port and do the HELLO handshake.
 * @return the fd, or -1 */
static int raw_hello(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct proto_hdr hello = { .op = PROTO_OP_NET_HELLO, .flags = PROTO_F_CTRL };
	uint8_t buf[PROTO_HDR_LEN];
	size_t got = 0;
	int fd;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	proto_hdr_encode(buf, &hello);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(fd, buf, sizeof(buf), MSG_NOSIGNAL) != (ssize_t)sizeof(buf))
		goto out_close_fd;
	while (got < sizeof(buf)) {
		ssize_t n = recv(fd, buf + got, sizeof(buf) - got, 0);
		if (n <= 0)
			goto out_close_fd;
		got += (size_t)n;
	}
	return fd;

out_close_fd:
	close(fd);
	return -1;
}

/* Wait up to ms for the server to close fd (recv returns 0 or an error).
 * @return 0 closed, -1 still open */
static int raw_wait_close(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char tmp[4096];

	for (uint64_t t0 = now_ms(); now_ms() - t0 < (uint64_t)ms;) {
		if (poll(&p, 1, 50) <= 0)
			continue;
		if (recv(fd, tmp, sizeof(tmp), MSG_DONTWAIT) <= 0)
			return 0;
	}
	return -1;
}

/*
 * TCP server limits, on a server with a 300 ms request deadline: a write
 * header whose data never comes is not given to the handler and is closed
 * by the deadline; so is one whose data stops part way (its pull fails);
 * a peer that sends many requests and reads no reply is not read further
 * once its replies back up. The server goes on serving others.
 */
static int t_limits(void)
{
	struct proto_hdr wr = { .op = OP_WRITE, .tag = 1, .bulk_len = 65536 };
	struct proto_hdr ec = { .op = OP_ECHO, .body_len = 1024 };
	struct net_stats before, after;
	struct srv_thread st;
	struct net_client *cl;
	struct net_conn *c;
	struct net_opts o;
	uint8_t buf[PROTO_HDR_LEN + 1024];
	uint64_t t0;
	int fd, rc = -1, sent = 0;

	srv_request_timeout_ms = 300;
	if (srv_start(&st, NET_DEFAULT_CREDITS) != 0) {
		srv_request_timeout_ms = 0;
		return -1;
	}
	srv_request_timeout_ms = 0;
	net_opts_default(&o);
	o.tcp_lanes = 1; /* one server connection, for conns_open */
	if (net_client_new(&cl, &o))
		goto out_stop;
	if (net_conn_new(cl, "127.0.0.1", st.port, &c))
		goto out_client;
	CHECK(echo(c, "connected") == 0);

	/* header only: nothing dispatched, closed by the deadline */
	net_server_stats(st.srv, &before);
	CHECK(before.conns_open == 1);
	fd = raw_hello(st.port);
	CHECK(fd >= 0);
	proto_hdr_encode(buf, &wr);
	CHECK(send(fd, buf, PROTO_HDR_LEN, MSG_NOSIGNAL) == PROTO_HDR_LEN);
	t0 = now_ms();
	CHECK(echo(c, "beside a stalled writer") == 0);
	CHECK(raw_wait_close(fd, 5000) == 0);
	CHECK(now_ms() - t0 >= 250);
	close(fd);
	net_server_stats(st.srv, &after);
	CHECK(after.msgs_rx == before.msgs_rx + 1); /* the echo only */
	CHECK(after.conn_errors == before.conn_errors + 1);

	/* data stops part way: the pull fails, the connection is closed */
	fd = raw_hello(st.port);
	CHECK(fd >= 0);
	memset(buf + PROTO_HDR_LEN, 0x5a, 1000);
	CHECK(send(fd, buf, PROTO_HDR_LEN + 1000, MSG_NOSIGNAL) == PROTO_HDR_LEN + 1000);
	CHECK(raw_wait_close(fd, 5000) == 0);
	close(fd);
	net_server_stats(st.srv, &after);
	CHECK(after.msgs_rx == before.msgs_rx + 2);
	CHECK(after.conn_errors == before.conn_errors + 2);
	CHECK(after.deadline_closes == before.deadline_closes + 2);
	CHECK(after.conns_open == before.conns_open);

	/* unread replies: 20000 echoes of 1 KiB offered, replies never read;
	 * the server stops taking them long before all are in */
	fd = raw_hello(st.port);
	CHECK(fd >= 0);
	proto_hdr_encode(buf, &ec);
	memset(buf + PROTO_HDR_LEN, 0x33, 1024);
	for (t0 = now_ms(); sent < 20000 && now_ms() - t0 < 3000;) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		if (poll(&p, 1, 500) <= 0)
			break; /* the server stopped reading */
		if (send(fd, buf, sizeof(buf), MSG_NOSIGNAL | MSG_DONTWAIT) !=
		    (ssize_t)sizeof(buf))
			break;
		sent++;
	}
	usleep(200 * 1000);
	net_server_stats(st.srv, &before);
	fprintf(stderr, "t_limits: %d echoes sent, %llu taken\n", sent,
		(unsigned long long)(before.msgs_rx - after.msgs_rx));
	CHECK(before.msgs_rx - after.msgs_rx < 20000);
	close(fd);
	CHECK(echo(c, "after the flood") == 0);
	rc = 0;

out_client:
	net_client_free(cl);
out_stop:
	srv_stop(&st);
	return rc;
}

/*
 * Epoll arming (tcp_client.c, enum tcp_arm): a lone caller's calls change
 * no epoll state; a call nobody waits for at once arms its socket, and the
 * progress thread completes it; an idle connection whose server goes away
 * is noticed while idle (its socket stays armed for a close), so the first
 * call to the server started again on the same port connects afresh.
 */
static int t_arm(void)
{
	struct srv_thread st;
	struct net_client *cl;
	struct net_conn *c;
	struct net_opts o;
	struct net_stats s0, s1;
	char rep[64];
	struct net_call later = { .op = OP_ECHO, .body = "later", .body_len = 5,
				  .rep_buf = rep, .rep_cap = sizeof(rep) };
	uint16_t port;
	int n0, rc = -1, srv_up = 1;

	CHECK(srv_start(&st, 4) == 0);
	port = st.port;
	net_opts_default(&o);
	o.timeout_ms = 10000;
	o.tcp_lanes = 1;
	CHECK(net_client_new(&cl, &o) == 0);
	CHECK(net_conn_new(cl, "127.0.0.1", port, &c) == 0);
	if (echo(c, "connect") != 0)
		goto out_free_client;
	n0 = __atomic_load_n(&epoll_ctl_calls, __ATOMIC_RELAXED);
	for (int i = 0; i < 50; i++)
		if (echo(c, "lone caller") != 0)
			goto out_free_client;
	if (__atomic_load_n(&epoll_ctl_calls, __ATOMIC_RELAXED) != n0) {
		fprintf(stderr, "arm: 50 lone calls made %d epoll_ctl calls\n",
			__atomic_load_n(&epoll_ctl_calls, __ATOMIC_RELAXED) - n0);
		goto out_free_client;
	}
	/* wait_now 0: the progress thread reads this reply; the test looks at
	 * the call's private state to see it completed before anyone waits. */
	if (net_call_submit(c, &later) != 0 ||
	    __atomic_load_n(&epoll_ctl_calls, __ATOMIC_RELAXED) == n0)
		goto out_free_client;
	for (int i = 0; i < 500 && __atomic_load_n(&later.state, __ATOMIC_ACQUIRE) !=
	     NET_CALL_DONE; i++)
		usleep(10000);
	if (__atomic_load_n(&later.state, __ATOMIC_ACQUIRE) != NET_CALL_DONE ||
	    net_call_wait(&later) != 0 || later.rep_len != 5)
		goto out_free_client;
	/* Idle, no call in flight: the server goes away. */
	net_client_stats(cl, &s0);
	srv_stop(&st);
	srv_up = 0;
	for (int i = 0; i < 500; i++) {
		net_client_stats(cl, &s1);
		if (s1.conn_errors > s0.conn_errors)
			break;
		usleep(10000);
	}
	if (s1.conn_errors != s0.conn_errors + 1) {
		fprintf(stderr, "arm: the idle connection's close went unnoticed\n");
		goto out_free_client;
	}
	if (srv_start_at(&st, 4, NULL, port) != 0)
		goto out_free_client;
	srv_up = 1;
	if (echo(c, "again") == 0) {
		net_client_stats(cl, &s1);
		rc = s1.reconnects == s0.reconnects + 1 ? 0 : -1;
	}
out_free_client:
	net_client_free(cl);
	if (srv_up)
		srv_stop(&st);
	return rc;
}

static int t_server_gone(struct srv_thread *st, struct net_conn *c)
{
	struct net_call slow = { .op = OP_SLOW };
	uint64_t t0;
	int rc;

	CHECK(net_call_submit(c, &slow) == 0);
	usleep(50000);
	t0 = now_ms();
	srv_stop(st);
	rc = net_call_wait(&slow);
	CHECK(rc == -EIO);
	CHECK(now_ms() - t0 < 3000);
	rc = echo(c, "nobody home");
	CHECK(rc == -ECONNREFUSED);
	return 0;
}

/* Echo through a fresh client with the given keys (NULL = none) to port,
 * then ask the server whether the connection is privileged.
 * @return 0 or 1 (privileged), or echo()'s error (-EACCES when the
 *	handshake refused) */
static int auth_echo2(uint16_t port, const uint8_t *key, const uint8_t *srv_key)
{
	struct net_call call = { .op = OP_PRIV };
	struct net_client *cl;
	struct net_conn *c;
	struct net_opts o;
	int rc;

	net_opts_default(&o);
	o.timeout_ms = 5000;
	if (key) {
		o.has_key = 1;
		memcpy(o.key, key, NET_KEY_LEN);
	}
	if (srv_key) {
		o.has_srv_key = 1;
		memcpy(o.srv_key, srv_key, NET_KEY_LEN);
	}
	if (net_client_new(&cl, &o))
		return -ENOMEM;
	rc = net_conn_new(cl, "127.0.0.1", port, &c);
	if (rc == 0)
		rc = echo(c, "authenticated");
	if (rc == 0)
		rc = net_call_run(c, &call);
	if (rc == 0)
		rc = call.status;
	net_client_free(cl);
	return rc;
}

/* auth_echo2 with the clients' key alone. */
static int auth_echo(uint16_t port, const uint8_t *key)
{
	return auth_echo2(port, key, NULL);
}

/* Cluster key: right key served, wrong or missing key refused in both
 * directions; a client never sends its proof to a server that failed to
 * prove its own (the server sees no AUTH, so counts no failure for it);
 * the server counts proofs and failures. */
static int t_auth(uint16_t open_port)
{
	uint8_t ka[NET_KEY_LEN], kb[NET_KEY_LEN];
	struct srv_thread ks;
	struct net_stats s;
	int rc = 0;

	CHECK(net_auth_init() == 0);
	net_auth_nonce(ka);
	net_auth_nonce(kb);
	CHECK(srv_start_key(&ks, NET_DEFAULT_CREDITS, ka) == 0);
	if (auth_echo(ks.port, ka) != 1)
		rc = -1, fprintf(stderr, "right key not served as one-key privileged\n");
	if (auth_echo(ks.port, kb) != -EACCES)
		rc = -1, fprintf(stderr, "wrong key not refused\n");
	if (auth_echo(ks.port, NULL) != -EACCES)
		rc = -1, fprintf(stderr, "missing client key not refused\n");
	if (auth_echo2(ks.port, ka, kb) != -EACCES)
		rc = -1, fprintf(stderr, "servers' key offered to a one-key server "
			"not refused\n");
	if (auth_echo(open_port, ka) != -EACCES)
		rc = -1, fprintf(stderr, "keyless server not refused\n");
	if (auth_echo(open_port, NULL) != 1)
		rc = -1, fprintf(stderr, "keyless pair not served as privileged\n");
	net_server_stats(ks.srv, &s);
	if (s.auth_ok != 1 || s.auth_fail != 2)
		rc = -1, fprintf(stderr, "auth counters %llu/%llu (a proof sent "
				 "after the server's failed?)\n",
				 (unsigned long long)s.auth_ok,
				 (unsigned long long)s.auth_fail);
	srv_stop(&ks);
	CHECK(rc == 0);
	return 0;
}

/* Read exactly n bytes of fd into buf (the socket's receive timeout
 * bounds each wait). @return 0, -1 (closed, failed or timed out) */
static int raw_recv_all(int fd, void *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t k = recv(fd, (uint8_t *)buf + got, n - got, 0);
		if (k <= 0)
			return -1;
		got += (size_t)k;
	}
	return 0;
}

/* Send one handshake frame (op, body) on fd and read the server's reply
 * header into h and its body (at most cap bytes) into rep.
 * @return 0, -1 (socket or framing failure) */
static int raw_hs(int fd, uint16_t op, const void *body, uint32_t len,
		  struct proto_hdr *h, uint8_t *rep, uint32_t cap)
{
	struct proto_hdr q = { .op = op, .flags = PROTO_F_CTRL, .body_len = len };
	uint8_t buf[PROTO_HDR_LEN + 64];
	const char *why;

	if (len > sizeof(buf) - PROTO_HDR_LEN)
		return -1;
	proto_hdr_encode(buf, &q);
	memcpy(buf + PROTO_HDR_LEN, body, len);
	if (send(fd, buf, PROTO_HDR_LEN + len, MSG_NOSIGNAL) != (ssize_t)(PROTO_HDR_LEN + len) ||
	    raw_recv_all(fd, buf, PROTO_HDR_LEN) || proto_hdr_decode(buf, h, &why) ||
	    h->op != op || h->body_len > cap)
		return -1;
	return h->body_len ? raw_recv_all(fd, rep, h->body_len) : 0;
}

/* A raw client on 127.0.0.1:port that names key class cls, takes the
 * server's proof without checking it and answers with a proof made with
 * key: what a client whose key differs from the server's would send if it
 * did not refuse the server first. The server must count it (auth_fail).
 * @return the status the server answers the proof with (-EACCES), or -1
 *	(socket or framing failure) */
static int raw_wrong_proof(uint16_t port, uint8_t cls, const uint8_t *key)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct timeval tv = { .tv_sec = 5 };
	uint8_t hello[NET_AUTH_HELLO_LEN], rep[64], mac[NET_AUTH_MAC_LEN];
	struct proto_hdr h;
	int fd, rc = -1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	net_auth_nonce(hello);
	hello[NET_AUTH_NONCE_LEN] = cls;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    raw_hs(fd, PROTO_OP_NET_HELLO, hello, sizeof(hello), &h, rep, sizeof(rep)) ||
	    h.status != 0 || h.body_len != NET_AUTH_NONCE_LEN + NET_AUTH_MAC_LEN)
		goto out_close_fd;
	net_auth_mac(key, NET_AUTH_ROLE_CLIENT, hello, rep, mac);
	if (raw_hs(fd, PROTO_OP_NET_AUTH, mac, sizeof(mac), &h, rep, 0) == 0)
		rc = h.status;
out_close_fd:
	close(fd);
	return rc;
}

/* Two keys: the clients' key is served unprivileged, the servers' key
 * privileged; a wrong servers' key is refused, by the client, which sends
 * no proof to a server that failed its own: the server counts the three
 * proofs it checked and no failure. The control: a wrong proof sent
 * anyway is counted (so the zero is a count, not a counter never moved). */
static int t_auth_two_keys(void)
{
	uint8_t ka[NET_KEY_LEN], kc[NET_KEY_LEN], kd[NET_KEY_LEN];
	struct srv_thread ks;
	struct net_stats s;
	int rc = 0;

	net_auth_nonce(ka);
	net_auth_nonce(kc);
	net_auth_nonce(kd);
	CHECK(srv_start_keys_at(&ks, NET_DEFAULT_CREDITS, ka, kc, 0) == 0);
	if (auth_echo(ks.port, ka) != 0)
		rc = -1, fprintf(stderr, "clients' key not served unprivileged\n");
	if (auth_echo2(ks.port, NULL, kc) != 1)
		rc = -1, fprintf(stderr, "servers' key not served privileged\n");
	if (auth_echo2(ks.port, ka, kc) != 1)
		rc = -1, fprintf(stderr, "a holder of both keys not privileged\n");
	if (auth_echo2(ks.port, ka, kd) != -EACCES)
		rc = -1, fprintf(stderr, "wrong servers' key not refused\n");
	net_server_stats(ks.srv, &s);
	if (s.auth_ok != 3 || s.auth_fail != 0)
		rc = -1, fprintf(stderr, "auth counters %llu/%llu, not 3/0 (a proof "
				 "sent after the server's failed?)\n",
				 (unsigned long long)s.auth_ok,
				 (unsigned long long)s.auth_fail);
	if (raw_wrong_proof(ks.port, NET_AUTH_KEY_SERVERS, kd) != -EACCES)
		rc = -1, fprintf(stderr, "a wrong proof not answered -EACCES\n");
	net_server_stats(ks.srv, &s);
	if (s.auth_ok != 3 || s.auth_fail != 1)
		rc = -1, fprintf(stderr, "auth counters %llu/%llu after a wrong "
				 "proof, not 3/1\n", (unsigned long long)s.auth_ok,
				 (unsigned long long)s.auth_fail);
	srv_stop(&ks);
	CHECK(rc == 0);
	return 0;
}

/* Key files: generated 0600 and loadable; too open is refused; a shared
 * (clients') key may be root's and group-readable. */
static int t_key_files(void)
{
	char path[] = "/tmp/test_net_keyXXXXXX";
	uint8_t kl[NET_KEY_LEN];
	const char *why;
	struct stat sb;
	int fd;

	/* key files: generated 0600 and loadable; too open is refused */
	fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	CHECK(net_key_generate(path, 0) == -EEXIST);
	CHECK(net_key_generate(path, 1) == 0);
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
	CHECK(net_key_load(path, 0, kl, &why) == 0);
	CHECK(net_key_load(path, 1, kl, &why) == 0);
	CHECK(chmod(path, 0644) == 0);
	CHECK(net_key_load(path, 0, kl, &why) == -EPERM);
	CHECK(net_key_load(path, 1, kl, &why) == -EPERM);
	/* group-readable: a shared (clients') key of root's only */
	CHECK(chmod(path, 0640) == 0);
	CHECK(net_key_load(path, 0, kl, &why) == -EPERM);
	CHECK(net_key_load(path, 1, kl, &why) == (geteuid() == 0 ? 0 : -EPERM));
	CHECK(chmod(path, 0660) == 0);
	CHECK(net_key_load(path, 1, kl, &why) == -EPERM);
	unlink(path);
	CHECK(net_key_load(path, 0, kl, &why) == -ENOENT);
	return 0;
}

int main(void)
{
	struct srv_thread st;
	struct net_client *cl;
	struct net_conn *c;
	struct net_opts o;
	struct net_stats s;
	int fails = 0;

	alarm(120);
	log_init("test_net", LOG_INFO);
	if (srv_start(&st, NET_DEFAULT_CREDITS) != 0) {
		fprintf(stderr, "server start failed\n");
		return 1;
	}
	net_opts_default(&o);
	o.timeout_ms = 10000;
	if (net_client_new(&cl, &o) || net_conn_new(cl, "127.0.0.1", st.port, &c)) {
		fprintf(stderr, "client setup failed\n");
		return 1;
	}
#define RUN(expr)                                                   \
	do {                                                        \
		uint64_t t0_ = now_ms();                            \
		int rc_ = (expr);                                   \
		fprintf(stderr, "%-40s %s (%llu ms)\n", #expr,      \
			rc_ ? "FAIL" : "ok",                        \
			(unsigned long long)(now_ms() - t0_));      \
		fails += rc_ != 0;                                  \
	} while (0)
	RUN(t_echo(c));
	RUN(t_invalid(c));
	RUN(t_bulk(c));
	RUN(t_pipe(c));
	RUN(t_rep_too_large(c));
	RUN(t_reject(c, st.srv));
	RUN(t_malformed(st.port, st.srv, c));
	RUN(t_timeout(st.port));
	RUN(t_lanes(st.port));
	RUN(t_auth(st.port));
	RUN(t_auth_two_keys());
	RUN(t_key_files());
	RUN(t_counters(st.port));
	RUN(t_concurrent());
	RUN(t_arm());
	RUN(t_limits());
	RUN(t_server_gone(&st, c));
	net_client_stats(cl, &s);
	fprintf(stderr, "client: tx %llu rx %llu bytes_tx %llu bytes_rx %llu "
		"reconnects %llu conn_errors %llu\n",
		(unsigned long long)s.msgs_tx, (unsigned long long)s.msgs_rx,
		(unsigned long long)s.bytes_tx, (unsigned long long)s.bytes_rx,
		(unsigned long long)s.reconnects, (unsigned long long)s.conn_errors);
	net_client_free(cl);
	return fails ? 1 : 0;
}
