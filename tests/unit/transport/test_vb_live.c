/*
 * test_vb_live.c - the verbs transport end to end on real kernel verbs
 * (run inside scripts/rdma-vm.sh; skipped, exit 77, without
 * $RPFS_RDMA_ADDR). A net_server in its own libev thread, driven by
 * net_client calls over RPFS_TRANSPORT=verbs: echo (small and big bodies),
 * write/read integrity by mechanism (inline, fast, server-based) with
 * scattered memory and the counters each one moves, declared memory in the
 * pin-down cache, 16 threads x 200 calls on 4 credits, timeout and
 * reconnect, server stop -> EIO, the cluster key and the two keys, repeated
 * wrong-key clients (the server must survive every order of proof and
 * disconnect), idle connects that never prove their key, a client
 * that lets no reply complete (the server's reply memory stays within its
 * credits), a leader whose connect to a hung server blocks (the
 * replies of calls already sent still complete), and remote write
 * outside the fast slots.
 * RPFS_VB_ONLY=NAME runs one subtest.
 */
#include "net.h"
#include "net_auth.h"
#include "vb_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "check_return.h"

#define OP_ECHO 100
#define OP_WRITE 101
#define OP_READ 102
#define OP_SLOW 103
#define OP_PRIV 104 /* status: net_sconn_privileged() */
#define OP_LATE 105 /* OP_WRITE whose pulls start at the test's word */

static const char *addr;
/* The key of the servers and clients of mechanisms, listio, threads and
 * mixed: NULL, or (their "+key" runs) a key, so every mechanism also runs
 * sealed (vb_seal.h). */
static const uint8_t *live_key;

static uint8_t pat(uint64_t seed, uint64_t i)
{
	return (uint8_t)((i * 131 + seed * 7 + (i >> 9)) & 0xff);
}

/* Server side: write pulls in 256 KiB units into a heap buffer then checks
 * the pattern; read pushes the pattern in units from two buffers. */
struct xfer {
	uint8_t *buf;
	uint64_t len, off, seed;
	int inflight;
};

static void wr_step(struct net_sreq *r, int rc, void *arg);

static void wr_pull_next(struct net_sreq *r, struct xfer *x)
{
	uint64_t n = x->len - x->off;
	if (n > 256 * 1024)
		n = 256 * 1024;
	struct iovec v[2] = { { x->buf + x->off, n / 2 }, { x->buf + x->off + n / 2, n - n / 2 } };
	x->off += n;
	if (net_sreq_pull(r, v, 2, wr_step, x))
		abort();
}

static void wr_step(struct net_sreq *r, int rc, void *arg)
{
	struct xfer *x = arg;

	if (rc) {
		free(x->buf);
		free(x);
		net_sreq_reply(r, rc, NULL, 0);
		return;
	}
	if (x->off < x->len) {
		wr_pull_next(r, x);
		return;
	}
	int ok = 1;
	for (uint64_t i = 0; i < x->len && ok; i++)
		ok = x->buf[i] == pat(x->seed, i);
	free(x->buf);
	free(x);
	net_sreq_reply(r, ok ? 0 : -EBADMSG, NULL, 0);
}

static void rd_step(struct net_sreq *r, int rc, void *arg)
{
	struct xfer *x = arg;

	x->inflight--;
	if (rc)
		x->seed = (uint64_t)-1;
	while (x->off < x->len && x->inflight < 2 && x->seed != (uint64_t)-1) {
		uint64_t n = x->len - x->off;
		if (n > 512 * 1024)
			n = 512 * 1024;
		uint8_t *b = x->buf + (x->off % (1024 * 1024));
		for (uint64_t i = 0; i < n; i++)
			b[i] = pat(x->seed, x->off + i);
		struct iovec v = { b, n };
		uint64_t off = x->off;
		x->off += n;
		x->inflight++;
		if (net_sreq_push(r, off, &v, 1, rd_step, x))
			abort();
	}
	if (x->inflight == 0) {
		int st = x->seed == (uint64_t)-1 ? -EIO : 0;
		free(x->buf);
		free(x);
		net_sreq_reply(r, st, "rd", 2);
	}
}

/* OP_LATE: the request waits in late_r (server loop) until the test
 * sends late_w; late_arrived tells the test it is there. */
static struct net_sreq *late_r;
static int late_arrived;

/* late_w (server loop): start the pulls of the waiting OP_LATE write. */
static void late_go_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct net_sreq *r = late_r;
	struct xfer *x;

	(void)loop;
	(void)w;
	(void)revents;
	late_r = NULL;
	if (!r)
		return;
	x = calloc(1, sizeof(*x));
	x->len = r->hdr.bulk_len;
	x->buf = malloc(x->len);
	memcpy(&x->seed, r->body, sizeof(x->seed));
	wr_pull_next(r, x);
}

/* ECHOs with the body "flood" (test_unacked_replies' raw client) the
 * server handed its handler: the server loop adds, the test reads. */
static int flood_handled;

static void handler(struct net_sreq *r, void *arg)
{
	(void)arg;
	switch (r->hdr.op) {
	case OP_ECHO:
		if (r->body_len == 5 && !memcmp(r->body, "flood", 5))
			__atomic_add_fetch(&flood_handled, 1, __ATOMIC_RELAXED);
		net_sreq_reply(r, 7, r->body, r->body_len);
		break;
	case OP_PRIV:
		net_sreq_reply(r, net_sconn_privileged(r->conn), NULL, 0);
		break;
	case OP_WRITE: {
		struct xfer *x = calloc(1, sizeof(*x));
		x->len = r->hdr.bulk_len;
		x->buf = malloc(x->len ? x->len : 1);
		memcpy(&x->seed, r->body, sizeof(x->seed));
		if (x->len)
			wr_pull_next(r, x);
		else
			wr_step(r, 0, x);
		break;
	}
	case OP_READ: {
		struct xfer *x = calloc(1, sizeof(*x));
		x->len = r->hdr.aux;
		x->buf = malloc(1024 * 1024);
		memcpy(&x->seed, r->body, sizeof(x->seed));
		x->inflight = 1;
		rd_step(r, 0, x);
		break;
	}
	case OP_SLOW:
		break;
	case OP_LATE:
		late_r = r;
		__atomic_store_n(&late_arrived, 1, __ATOMIC_RELEASE);
		break;
	default:
		net_sreq_reject(r, "unknown op");
	}
}

struct srv {
	pthread_t t;
	struct ev_loop *loop;
	ev_async stop_w, late_w;
	struct net_server *s;
	uint16_t port;
	int credits, has_key, has_srv_key, state;
	uint8_t key[NET_KEY_LEN], srv_key[NET_KEY_LEN];
	pthread_mutex_t m;
	pthread_cond_t cv;
	struct net_stats st;
};

/* Request (and handshake) deadline of the next server started, 0 = the
 * default; set only while no server is starting. */
static int srv_request_timeout_ms;

static void stop_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct srv *sv = w->data;
	(void)revents;
	net_server_stats(sv->s, &sv->st);
	net_server_free(sv->s);
	ev_async_stop(loop, w);
	ev_async_stop(loop, &sv->late_w);
	ev_break(loop, EVBREAK_ALL);
}

static void *srv_main(void *arg)
{
	struct srv *sv = arg;
	struct net_opts o;
	int rc;

	net_opts_default(&o);
	o.credits = sv->credits;
	o.has_key = sv->has_key;
	memcpy(o.key, sv->key, NET_KEY_LEN);
	o.has_srv_key = sv->has_srv_key;
	memcpy(o.srv_key, sv->srv_key, NET_KEY_LEN);
	if (srv_request_timeout_ms)
		o.request_timeout_ms = srv_request_timeout_ms;
	sv->loop = ev_loop_new(EVFLAG_AUTO);
	rc = net_server_new(&sv->s, sv->loop, addr, sv->port, handler, NULL, &o);
	if (!rc) {
		sv->port = net_server_port(sv->s);
		if (strcmp(net_server_transport(sv->s), "verbs"))
			rc = -1;
		ev_async_init(&sv->stop_w, stop_cb);
		sv->stop_w.data = sv;
		ev_async_start(sv->loop, &sv->stop_w);
		ev_async_init(&sv->late_w, late_go_cb);
		ev_async_start(sv->loop, &sv->late_w);
	}
	pthread_mutex_lock(&sv->m);
	sv->state = rc ? -1 : 1;
	pthread_cond_signal(&sv->cv);
	pthread_mutex_unlock(&sv->m);
	if (!rc)
		ev_run(sv->loop, 0);
	ev_loop_destroy(sv->loop);
	return NULL;
}

/* Start a server with the clients' key key and the servers' key srv_key
 * (NULL: none). */
static int srv_start_keys(struct srv *sv, int credits, uint16_t port,
			  const uint8_t *key, const uint8_t *srv_key)
{
	memset(sv, 0, sizeof(*sv));
	sv->credits = credits;
	sv->port = port;
	if (key) {
		sv->has_key = 1;
		memcpy(sv->key, key, NET_KEY_LEN);
	}
	if (srv_key) {
		sv->has_srv_key = 1;
		memcpy(sv->srv_key, srv_key, NET_KEY_LEN);
	}
	pthread_mutex_init(&sv->m, NULL);
	pthread_cond_init(&sv->cv, NULL);
	pthread_create(&sv->t, NULL, srv_main, sv);
	pthread_mutex_lock(&sv->m);
	while (!sv->state)
		pthread_cond_wait(&sv->cv, &sv->m);
	pthread_mutex_unlock(&sv->m);
	return sv->state == 1 ? 0 : -1;
}

static int srv_start(struct srv *sv, int credits, uint16_t port, const uint8_t *key)
{
	return srv_start_keys(sv, credits, port, key, NULL);
}

static void srv_stop(struct srv *sv)
{
	ev_async_send(sv->loop, &sv->stop_w);
	pthread_join(sv->t, NULL);
}

/* A client holding the clients' key key and the servers' key srv_key
 * (NULL: none). */
static struct net_client *mkclient_keys(int credits, int timeout_ms,
					const uint8_t *key, const uint8_t *srv_key)
{
	struct net_opts o;
	struct net_client *cl = NULL;

	net_opts_default(&o);
	o.credits = credits;
	o.timeout_ms = timeout_ms;
	if (key) {
		o.has_key = 1;
		memcpy(o.key, key, NET_KEY_LEN);
	}
	if (srv_key) {
		o.has_srv_key = 1;
		memcpy(o.srv_key, srv_key, NET_KEY_LEN);
	}
	if (net_client_new(&cl, &o))
		return NULL;
	return cl;
}

static struct net_client *mkclient(int credits, int timeout_ms, const uint8_t *key)
{
	return mkclient_keys(credits, timeout_ms, key, NULL);
}

/* Write len bytes of pattern seed from memory split in nv pieces. */
static int do_write(struct net_conn *c, uint64_t len, uint64_t seed, int nv, uint8_t *mem)
{
	struct iovec v[64];
	struct net_call call = { .op = OP_WRITE, .body = &seed, .body_len = sizeof(seed) };
	uint64_t off = 0;

	for (uint64_t i = 0; i < len; i++)
		mem[i] = pat(seed, i);
	for (int i = 0; i < nv; i++) {
		uint64_t n = i == nv - 1 ? len - off : len / (uint64_t)nv;
		v[i] = (struct iovec){ mem + off, n };
		off += n;
	}
	call.wr_iov = v;
	call.wr_cnt = nv;
	CHECK(net_call_run(c, &call) == 0);
	CHECK(call.status == 0);
	return 0;
}

static int do_read(struct net_conn *c, uint64_t len, uint64_t seed, int nv, uint8_t *mem)
{
	struct iovec v[64];
	char rep[16];
	struct net_call call = { .op = OP_READ, .body = &seed, .body_len = sizeof(seed),
				 .rep_buf = rep, .rep_cap = sizeof(rep) };
	uint64_t off = 0;

	memset(mem, 0xee, len);
	for (int i = 0; i < nv; i++) {
		uint64_t n = i == nv - 1 ? len - off : len / (uint64_t)nv;
		v[i] = (struct iovec){ mem + off, n };
		off += n;
	}
	call.rd_iov = v;
	call.rd_cnt = nv;
	CHECK(net_call_run(c, &call) == 0);
	CHECK(call.status == 0 && call.rep_len == 2 && call.rd_bytes == len);
	for (uint64_t i = 0; i < len; i++)
		if (mem[i] != pat(seed, i)) {
			fprintf(stderr, "read mismatch at %llu of %llu\n",
				(unsigned long long)i, (unsigned long long)len);
			return -1;
		}
	return 0;
}

#define D(f) (b.f - a.f)

static int test_mechanisms(void)
{
	struct srv sv;
	struct net_client *cl;
	struct net_conn *c;
	struct net_stats a, b;
	static uint8_t body[100000], rep[PROTO_MAX_BODY];
	uint8_t *mem = malloc(8 << 20);

	CHECK(srv_start(&sv, 32, 0, live_key) == 0);
	CHECK((cl = mkclient(32, 10000, live_key)) != NULL);
	CHECK(!strcmp(net_client_transport(cl), "verbs"));
	CHECK(net_conn_new(cl, addr, sv.port, &c) == 0);
	/* echo, small and big (big request and big reply) */
	for (size_t n = 0; n <= sizeof(body); n = n ? n * 4 : 100) {
		struct net_call call = { .op = OP_ECHO, .body = body, .body_len = (uint32_t)n,
					 .rep_buf = rep, .rep_cap = sizeof(rep) };
		for (size_t i = 0; i < n; i++)
			body[i] = (uint8_t)(i * 7 + n);
		CHECK(net_call_run(c, &call) == 0);
		CHECK(call.status == 7 && call.rep_len == n && !memcmp(rep, body, n));
	}
	/* inline */
	net_client_stats(cl, &a);
	CHECK(do_write(c, 1024, 1, 3, mem) == 0);
	CHECK(do_read(c, 1024, 2, 3, mem) == 0);
	net_client_stats(cl, &b);
	CHECK(D(inline_msgs) == 2 && D(inline_bytes) == 2048 && D(fast_msgs) == 0 &&
	      D(rdma_read_ops) == 0 && D(rdma_write_ops) == 0);
	CHECK(D(client_copy_bytes) == 2048 && D(data_ops) == 2); /* gather, copy-out */
	/* fast: unregistered memory, copied through the fast buffer */
	a = b;
	CHECK(do_write(c, 32768, 3, 4, mem) == 0);
	CHECK(do_read(c, 32768, 4, 4, mem) == 0);
	net_client_stats(cl, &b);
	CHECK(D(fast_msgs) == 2 && D(fast_bytes) == 65536 && D(inline_msgs) == 0 &&
	      D(reg_count) == 0);
	CHECK(D(client_copy_bytes) == 65536);
	/* server-based, per-call registration (misses) */
	a = b;
	CHECK(do_write(c, 1 << 20, 5, 5, mem) == 0);
	CHECK(do_read(c, 1 << 20, 6, 5, mem) == 0);
	CHECK(do_write(c, 4 << 20, 7, 64, mem) == 0);
	CHECK(do_read(c, 4 << 20, 8, 64, mem) == 0);
	net_client_stats(cl, &b);
	CHECK(D(rdma_read_ops) == 2 && D(rdma_read_bytes) == 5 << 20 &&
	      D(rdma_write_ops) == 2 && D(rdma_write_bytes) == 5 << 20);
	/* contiguous pieces share pages: one group registration per call */
	CHECK(D(reg_cache_misses) == 4 && D(reg_count) == 4 && D(reg_count) == D(dereg_count));
	CHECK(D(reg_cache_hits) == 0 && b.pinned_bytes == a.pinned_bytes);
	/* declared memory: first use fills the cache, then hits; fast writes go
	 * straight from it */
	CHECK(net_client_register_mem(cl, mem, 8 << 20) == 0);
	a = b;
	CHECK(do_write(c, 1 << 20, 9, 4, mem) == 0);
	CHECK(do_read(c, 1 << 20, 10, 4, mem) == 0);
	CHECK(do_write(c, 32768, 11, 2, mem) == 0);
	CHECK(do_read(c, 32768, 12, 2, mem) == 0);
	net_client_stats(cl, &b);
	CHECK(D(reg_cache_misses) == 1 && D(reg_count) == 1 && D(reg_cache_hits) >= 8);
	CHECK(b.pinned_bytes - a.pinned_bytes == 8 << 20);
	CHECK(D(client_copy_bytes) == 0);
	/* declared memory is never copied, whatever the size: inline-size and
	 * fast-size reads are RDMA Written into it, writes leave from it */
	a = b;
	CHECK(do_write(c, 1024, 13, 3, mem) == 0);
	CHECK(do_read(c, 1024, 14, 3, mem) == 0);
	CHECK(do_write(c, 32768, 15, 4, mem) == 0);
	CHECK(do_read(c, 32768, 16, 4, mem) == 0);
	net_client_stats(cl, &b);
	CHECK(D(client_copy_bytes) == 0 && D(reg_count) == 0 && D(reg_cache_misses) == 0 &&
	      D(inline_msgs) == 0 && D(fast_msgs) == 4 && D(data_ops) == 4);
	/* a fresh declared region: registered at its first (small) use, one
	 * miss, then hit */
	uint8_t *mem2 = aligned_alloc(4096, 65536);
	CHECK(mem2 && net_client_register_mem(cl, mem2, 65536) == 0);
	a = b;
	CHECK(do_read(c, 1000, 17, 2, mem2) == 0);
	net_client_stats(cl, &b);
	CHECK(D(reg_cache_misses) == 1 && D(reg_count) == 1 && D(client_copy_bytes) == 0);
	a = b;
	CHECK(do_write(c, 1000, 18, 1, mem2) == 0);
	CHECK(do_read(c, 4000, 19, 1, mem2) == 0);
	net_client_stats(cl, &b);
	CHECK(D(reg_cache_misses) == 0 && D(reg_count) == 0 && D(reg_cache_hits) == 2 &&
	      D(client_copy_bytes) == 0);
	CHECK(net_client_unregister_mem(cl, mem2) == 0);
	free(mem2);
	net_client_stats(cl, &b);
	CHECK(net_client_unregister_mem(cl, mem) == 0);
	net_client_stats(cl, &a);
	CHECK(a.pinned_bytes == b.pinned_bytes - (8 << 20));
	net_client_free(cl);
	srv_stop(&sv);
	fprintf(stderr, "server: inline %llu/%llu fast %llu/%llu rdma_read %llu/%llu "
		"rdma_write %llu/%llu units %llu sge_max %llu reg %llu srq %llu\n",
		(unsigned long long)sv.st.inline_msgs, (unsigned long long)sv.st.inline_bytes,
		(unsigned long long)sv.st.fast_msgs, (unsigned long long)sv.st.fast_bytes,
		(unsigned long long)sv.st.rdma_read_ops, (unsigned long long)sv.st.rdma_read_bytes,
		(unsigned long long)sv.st.rdma_write_ops, (unsigned long long)sv.st.rdma_write_bytes,
		(unsigned long long)sv.st.pipeline_units, (unsigned long long)sv.st.sge_max,
		(unsigned long long)sv.st.reg_count, (unsigned long long)sv.st.srq_posted);
	/* server-based: 1 + 4 MiB unregistered, 1 MiB declared, each way */
	CHECK(sv.st.rdma_read_bytes == 6u << 20 && sv.st.rdma_write_bytes == 6u << 20);
	CHECK(sv.st.inline_msgs == 2 && sv.st.inline_bytes == 2048);
	/* fast: 2 undeclared, 2 declared, then 1 KiB and 32 KiB each way from
	 * declared memory, then mem2's 1000, 1000 and 4000 bytes */
	CHECK(sv.st.fast_msgs == 4 + 4 + 3 &&
	      sv.st.fast_bytes == 6 * 32768 + 2 * 1024 + 2 * 1000 + 4000);
	free(mem);
	return 0;
}

/* Write (or read and check) the pattern of seed through the noncontiguous
 * list v, with allocation bounds al (or NULL). */
static int do_list(struct net_conn *c, int write, uint64_t seed, struct iovec *v, int nv,
		   const struct iovec *al)
{
	char rep[16];
	struct net_call call = { .op = write ? OP_WRITE : OP_READ, .body = &seed,
				 .body_len = sizeof(seed), .rep_buf = rep, .rep_cap = sizeof(rep) };
	uint64_t off = 0;

	for (int i = 0; i < nv; i++) {
		uint8_t *b = v[i].iov_base;
		for (uint64_t j = 0; j < v[i].iov_len; j++)
			b[j] = write ? pat(seed, off + j) : 0xee;
		off += v[i].iov_len;
	}
	if (write) {
		call.wr_iov = v;
		call.wr_cnt = nv;
		call.wr_alloc = al;
	} else {
		call.rd_iov = v;
		call.rd_cnt = nv;
		call.rd_alloc = al;
	}
	CHECK(net_call_run(c, &call) == 0);
	CHECK(call.status == 0);
	off = 0;
	for (int i = 0; i < nv && !write; i++) {
		uint8_t *b = v[i].iov_base;
		for (uint64_t j = 0; j < v[i].iov_len; j++)
			CHECK(b[j] == pat(seed, off + j));
		off += v[i].iov_len;
	}
	return 0;
}

/*
 * List I/O over verbs: 64 segments of 16 KiB, 32 KiB apart, each way.
 * Optimistic Group Registration (cost model fixed by $RPFS_OGR_COST):
 * one registration per call; with allocation bounds the same; with an
 * unmapped page between two halves the group fails once and the maps
 * split it in two; individual mode: one per segment. The server moves a
 * client segment per RDMA operation; gather/scatter signals one WR per
 * pull/push, multiple message ($RPFS_LIST_MODE=multi) every one.
 */
static int test_listio(void)
{
	struct srv sv;
	struct net_client *cl;
	struct net_conn *c;
	struct net_stats a, b;
	struct iovec v[64], al[64];
	const char *lm = getenv("RPFS_LIST_MODE");
	size_t len = 64 * 32768;
	uint8_t *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);

	CHECK(mem != MAP_FAILED);
	setenv("RPFS_OGR_COST", "1000,8520", 1);
	CHECK(srv_start(&sv, 32, 0, live_key) == 0);
	CHECK((cl = mkclient(32, 10000, live_key)) != NULL);
	CHECK(net_conn_new(cl, addr, sv.port, &c) == 0);
	for (int i = 0; i < 64; i++) {
		v[i] = (struct iovec){ mem + (size_t)i * 32768, 16384 };
		al[i] = (struct iovec){ mem, len };
	}
	CHECK(do_list(c, 1, 1, v, 64, NULL) == 0); /* connects, calibrates */
	net_client_stats(cl, &a);
	CHECK(do_list(c, 1, 2, v, 64, NULL) == 0);
	CHECK(do_list(c, 0, 3, v, 64, NULL) == 0);
	net_client_stats(cl, &b);
	CHECK(D(reg_count) == 2 && D(ogr_groups) == 2 && D(dereg_count) == 2);
	CHECK(D(ogr_fallbacks) == 0 && D(reg_ns) > 0);
	a = b;
	CHECK(do_list(c, 1, 4, v, 64, al) == 0);
	CHECK(do_list(c, 0, 5, v, 64, al) == 0);
	net_client_stats(cl, &b);
	CHECK(D(reg_count) == 2 && D(ogr_fallbacks) == 0);
	/* an unmapped page between segments 31 and 32 */
	CHECK(munmap(mem + 31 * 32768 + 20480, 4096) == 0);
	a = b;
	CHECK(do_list(c, 1, 6, v, 64, NULL) == 0);
	CHECK(do_list(c, 0, 7, v, 64, NULL) == 0);
	net_client_stats(cl, &b);
	CHECK(D(ogr_fallbacks) == 2 && D(reg_count) == 4 && D(dereg_count) == 4);
	net_client_free(cl);
	/* individual registration */
	setenv("RPFS_REG_MODE", "indiv", 1);
	CHECK((cl = mkclient(32, 10000, live_key)) != NULL);
	unsetenv("RPFS_REG_MODE");
	CHECK(net_conn_new(cl, addr, sv.port, &c) == 0);
	CHECK(do_list(c, 1, 8, v, 64, NULL) == 0);
	net_client_stats(cl, &a);
	CHECK(do_list(c, 1, 9, v, 64, NULL) == 0);
	CHECK(do_list(c, 0, 10, v, 64, NULL) == 0);
	net_client_stats(cl, &b);
	CHECK(D(reg_count) == 128 && D(ogr_groups) == 0 && b.pinned_bytes == a.pinned_bytes);
	net_client_free(cl);
	srv_stop(&sv);
	unsetenv("RPFS_OGR_COST");
	uint64_t ops = sv.st.rdma_read_ops + sv.st.rdma_write_ops;
	fprintf(stderr, "server (%s): rdma ops %llu signaled %llu sge_max %llu\n",
		lm ? lm : "gather", (unsigned long long)ops,
		(unsigned long long)sv.st.rdma_signaled, (unsigned long long)sv.st.sge_max);
	/* 10 calls x 64 segments each, every segment its own RDMA operation */
	CHECK(ops == 640 && sv.st.sge_max <= 32);
	if (lm && !strcmp(lm, "multi"))
		CHECK(sv.st.rdma_signaled == ops);
	else
		CHECK(sv.st.rdma_signaled < ops / 8);
	munmap(mem, len);
	return 0;
}

struct worker {
	struct net_conn *c;
	int id, fails;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char body[64], rep[64];

	for (int i = 0; i < 200; i++) {
		int n = snprintf(body, sizeof(body), "w%d-%d", w->id, i);
		struct net_call call = { .op = OP_ECHO, .body = body, .body_len = (uint32_t)n,
					 .rep_buf = rep, .rep_cap = sizeof(rep) };
		if (net_call_run(w->c, &call) || call.rep_len != (uint32_t)n ||
		    memcmp(rep, body, (size_t)n))
			w->fails++;
	}
	return NULL;
}

static int test_threads(void)
{
	struct srv sv;
	struct net_client *cl;
	struct net_conn *c;
	struct worker w[16];
	pthread_t t[16];
	struct net_stats st;

	CHECK(srv_start(&sv, 4, 0, live_key) == 0);
	CHECK((cl = mkclient(32, 20000, live_key)) != NULL);
	CHECK(net_conn_new(cl, addr, sv.port, &c) == 0);
	for (int i = 0; i < 16; i++) {
		w[i] = (struct worker){ .c = c, .id = i };
		pthread_create(&t[i], NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < 16; i++) {
		pthread_join(t[i], NULL);
		CHECK(w[i].fails == 0);
	}
	net_client_stats(cl, &st);
	/* keyed, the grant of the fast slots is one message more */
	CHECK(st.msgs_rx == 3200 + (live_key != NULL) && st.credit_waits > 0);
	net_client_free(cl);
	srv_stop(&sv);
	return 0;
}

/* Many replies in flight at once, small and big (> VB_MSG_SIZE) mixed:
 * more than the server's reply send buffers and several waiting for the
 * client's landing buffer. Every reply must carry its own call's bytes
 * (regression: queued replies used to share one server buffer). */
static void *mixed_main(void *arg)
{
	struct worker *w = arg;
	static __thread uint8_t body[20000], rep[20000];

	for (int i = 0; i < 60; i++) {
		uint32_t n = (i + w->id) % 3 == 0 ? 9000 + (uint32_t)(w->id * 311 + i) % 9000 :
			     16 + (uint32_t)(w->id * 7 + i) % 900;
		for (uint32_t j = 0; j < n; j++)
			body[j] = pat((uint64_t)w->id << 16 | (uint64_t)i, j);
		struct net_call call = { .op = OP_ECHO, .body = body, .body_len = n,
					 .rep_buf = rep, .rep_cap = sizeof(rep) };
		if (net_call_run(w->c, &call) || call.status != 7 || call.rep_len != n ||
		    memcmp(rep, body, n))
			w->fails++;
	}
	return NULL;
}

static int test_mixed(void)
{
	struct srv sv;
	struct net_client *cl;
	struct net_conn *c;
	struct worker w[32];
	pthread_t t[32];
	struct net_stats st;

	CHECK(srv_start(&sv, 32, 0, live_key) == 0);
	CHECK((cl = mkclient(32, 20000, live_key)) != NULL);
	CHECK(net_conn_new(cl, addr, sv.port, &c) == 0);
	for (int i = 0; i < 32; i++) {
		w[i] = (struct worker){ .c = c, .id = i };
		pthread_create(&t[i], NULL, mixed_main, &w[i]);
	}
	int fails = 0;
	for (int i = 0; i < 32; i++) {
		pthread_join(t[i], NULL);
		fails += w[i].fails;
	}
	CHECK(fails == 0);
	net_client_stats(cl, &st);
	CHECK(st.msgs_rx == 32 * 60 + (live_key != NULL) && st.reconnects == 0);
	net_client_free(cl);
	srv_stop(&sv);
	return 0;
}

static int test_failures(void)
{
	struct srv sv;
	struct net_client *cl;
	struct net_conn *c;
	struct net_stats st;
	char rep[16];
	uint16_t port;

	CHECK(srv_start(&sv, 8, 0, NULL) == 0);
	port = sv.port;
	CHECK((cl = mkclient(8, 1000, NULL)) != NULL);
	CHECK(net_conn_new(cl, addr, port, &c) == 0);
	struct net_call slow = { .op = OP_SLOW };
	CHECK(net_call_run(c, &slow) == -ETIMEDOUT);
	struct net_call e = { .op = OP_ECHO, .body = "x", .body_len = 1, .rep_buf = rep,
			      .rep_cap = sizeof(rep) };
	CHECK(net_call_run(c, &e) == 0 && e.rep_len == 1);
	net_client_stats(cl, &st);
	CHECK(st.reconnects == 1 && st.timeouts >= 1);
	/* the shared call check (net_call_check): no transport control op, no
	 * read pipe on verbs (it cannot fill one) */
	struct net_call bad = { .op = PROTO_OP_NET_AUTH };
	CHECK(net_call_submit(c, &bad) == -EINVAL);
	int pfd[2];
	CHECK(pipe2(pfd, O_NONBLOCK) == 0);
	bad = (struct net_call){ .op = OP_ECHO, .rd_iov = &(struct iovec){ rep, 4 },
				 .rd_cnt = 1, .rd_pipe = 1, .rd_pipe_fd = pfd[1] };
	CHECK(net_call_submit(c, &bad) == -EINVAL);
	close(pfd[0]);
	close(pfd[1]);
	/* server stops with a call in flight: EIO */
	struct net_call slow2 = { .op = OP_SLOW };
	CHECK(net_call_submit(c, &slow2) == 0);
	usleep(200000);
	srv_stop(&sv);
	int rc = net_call_wait(&slow2);
	CHECK(rc == -EIO);
	net_client_free(cl);
	return 0;
}

static int test_key(void)
{
	struct srv sv;
	struct net_client *cl;
	struct net_conn *c;
	uint8_t k1[NET_KEY_LEN], k2[NET_KEY_LEN];
	char rep[16];

	memset(k1, 1, sizeof(k1));
	memset(k2, 2, sizeof(k2));
	CHECK(srv_start(&sv, 8, 0, k1) == 0);
	CHECK((cl = mkclient(8, 2000, k1)) != NULL);
	CHECK(net_conn_new(cl, addr, sv.port, &c) == 0);
	struct net_call e = { .op = OP_ECHO, .body = "k", .body_len = 1, .rep_buf = rep,
			      .rep_cap = sizeof(rep) };
	CHECK(net_call_run(c, &e) == 0 && e.status == 7);
	/* a fast write: the slots came in the grant after the proof */
	struct net_stats a, b;
	uint8_t *mem = malloc(32768);
	CHECK(mem != NULL);
	net_client_stats(cl, &a);
	CHECK(do_write(c, 32768, 3, 4, mem) == 0);
	net_client_stats(cl, &b);
	free(mem);
	CHECK(D(fast_msgs) == 1 && D(inline_msgs) == 0 && D(rdma_read_ops) == 0);
	net_client_free(cl);
	/* keyless client refused; wrong key fails */
	CHECK((cl = mkclient(8, 2000, NULL)) != NULL);
	CHECK(net_conn_new(cl, addr, sv.port, &c) == 0);
	CHECK(net_call_run(c, &e) < 0);
	net_client_free(cl);
	CHECK((cl = mkclient(8, 2000, k2)) != NULL);
	CHECK(net_conn_new(cl, addr, sv.port, &c) == 0);
	CHECK(net_call_run(c, &e) == -EACCES);
	net_client_free(cl);
	srv_stop(&sv);
	/* the wrong key's client refused the server's proof and sent none */
	CHECK(sv.st.auth_fail == 1 && sv.st.auth_ok == 1);
	/* keyed client refuses a keyless server */
	CHECK(srv_start(&sv, 8, 0, NULL) == 0);
	CHECK((cl = mkclient(8, 2000, k1)) != NULL);
	CHECK(net_conn_new(cl, addr, sv.port, &c) == 0);
	CHECK(net_call_run(c, &e) == -EACCES);
	net_client_free(cl);
	srv_stop(&sv);
	return 0;
}

/* OP_PRIV through a fresh client with these keys to port: 0 or 1 (the
 * connection is privileged), or the call's error. */
static int priv_call(uint16_t port, const uint8_t *key, const uint8_t *srv_key)
{
	struct net_call e = { .op = OP_PRIV };
	struct net_client *cl = mkclient_keys(8, 2000, key, srv_key);
	struct net_conn *c;
	int rc;

	if (!cl)
		return -ENOMEM;
	rc = net_conn_new(cl, addr, port, &c);
	if (rc == 0)
		rc = net_call_run(c, &e);
	net_client_free(cl);
	return rc ? rc : e.status;
}

/* Two keys over verbs: the class named in the connect data picks the key;
 * the clients' key is unprivileged, the servers' key privileged, a wrong
 * servers' key or one the server does not hold refused (the server counts
 * no failed proof for the wrong one: its client sends none); one key (or
 * none) is privileged. */
static int test_two_keys(void)
{
	uint8_t k1[NET_KEY_LEN], k3[NET_KEY_LEN], k4[NET_KEY_LEN];
	struct srv sv;

	memset(k1, 1, sizeof(k1));
	memset(k3, 3, sizeof(k3));
	memset(k4, 4, sizeof(k4));
	CHECK(srv_start_keys(&sv, 8, 0, k1, k3) == 0);
	CHECK(priv_call(sv.port, k1, NULL) == 0);
	CHECK(priv_call(sv.port, NULL, k3) == 1);
	CHECK(priv_call(sv.port, k1, k3) == 1);
	CHECK(priv_call(sv.port, k1, k4) == -EACCES);
	srv_stop(&sv);
	/* three proofs checked; the wrong servers' key's client refused the
	 * server's proof and sent none */
	CHECK(sv.st.auth_ok == 3 && sv.st.auth_fail == 0);
	CHECK(srv_start(&sv, 8, 0, k1) == 0);
	CHECK(priv_call(sv.port, k1, NULL) == 1);
	CHECK(priv_call(sv.port, k1, k3) == -EACCES);
	srv_stop(&sv);
	/* a key class the server does not hold is counted (the counters are
	 * read) */
	CHECK(sv.st.auth_ok == 1 && sv.st.auth_fail == 1);
	CHECK(srv_start(&sv, 8, 0, NULL) == 0);
	CHECK(priv_call(sv.port, NULL, NULL) == 1);
	srv_stop(&sv);
	return 0;
}

/* A raw verbs connect to port asking for 8 credits, naming key class
 * has_nonce (0: keyless) with a dummy nonce; it posts no receive buffers
 * (synchronous rdma_cm, every send signaled). @return the id or NULL */
static struct rdma_cm_id *raw_connect(uint16_t port, uint8_t has_nonce)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC, .sq_sig_all = 1 };
	struct vb_cpriv cp = { .credits = 8, .has_nonce = has_nonce };
	uint8_t cpb[VB_CPRIV_LEN];
	struct rdma_conn_param par = { .private_data = cpb,
				       .private_data_len = VB_CPRIV_LEN,
				       .responder_resources = 1, .initiator_depth = 1,
				       .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_id *id;
	char ps[8];

	snprintf(ps, sizeof(ps), "%u", port);
	if (rdma_getaddrinfo(addr, ps, &hints, &res))
		return NULL;
	if (rdma_create_ep(&id, res, NULL, &qa)) {
		rdma_freeaddrinfo(res);
		return NULL;
	}
	rdma_freeaddrinfo(res);
	memset(cp.cn, 9, sizeof(cp.cn));
	vb_cpriv_encode(cpb, &cp);
	if (rdma_connect(id, &par)) {
		rdma_destroy_ep(id);
		return NULL;
	}
	return id;
}

/* A raw verbs connect to port that names the clients' key and a nonce and
 * then never proves it. @return the id or NULL */
static struct rdma_cm_id *idle_connect(uint16_t port)
{
	return raw_connect(port, NET_AUTH_KEY_CLIENTS);
}

/* Did the server disconnect id within ms (0: has it already)? */
static int idle_closed(struct rdma_cm_id *id, int ms)
{
	struct pollfd p = { .fd = id->channel->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int gone;

	if (poll(&p, 1, ms) != 1 || rdma_get_cm_event(id->channel, &ev))
		return 0;
	gone = ev->event == RDMA_CM_EVENT_DISCONNECTED;
	rdma_ack_cm_event(ev);
	return gone;
}

/*
 * Idle verbs connects that name a key and never prove it: 70 of them from
 * one host (more than max_clients, 64, which they all filled before) keep
 * at most 16 at a time (each new one evicts its host's oldest), a genuine
 * client still gets in, and the handshake deadline closes the rest.
 */
static int test_idle_connects(void)
{
	struct rdma_cm_id *ids[70];
	uint8_t k1[NET_KEY_LEN];
	struct net_client *cl;
	struct net_conn *c;
	struct srv sv;
	char rep[16];
	int n, rc = 0;

	memset(k1, 1, sizeof(k1));
	srv_request_timeout_ms = 3000;
	rc = srv_start(&sv, 8, 0, k1);
	srv_request_timeout_ms = 0;
	CHECK(rc == 0);
	for (n = 0; n < 70; n++) {
		ids[n] = idle_connect(sv.port);
		if (!ids[n])
			break;
	}
	if (n < 70)
		rc = -1, fprintf(stderr, "idle connect %d refused\n", n);
	for (int i = 0; i < n - 16 && !rc; i++)
		if (!idle_closed(ids[i], 2000))
			rc = -1, fprintf(stderr, "idle connect %d not evicted\n", i);
	for (int i = n - 16; i < n && !rc; i++)
		if (idle_closed(ids[i], 0))
			rc = -1, fprintf(stderr, "idle connect %d closed early\n", i);
	struct net_call e = { .op = OP_ECHO, .body = "k", .body_len = 1,
			      .rep_buf = rep, .rep_cap = sizeof(rep) };
	if (!rc && (!(cl = mkclient(8, 5000, k1)) ||
		    net_conn_new(cl, addr, sv.port, &c) || net_call_run(c, &e) ||
		    e.status != 7))
		rc = -1, fprintf(stderr, "a keyed client was locked out\n");
	else if (!rc)
		net_client_free(cl);
	for (int i = n - 15; i < n && !rc; i++)
		if (!idle_closed(ids[i], 6000))
			rc = -1, fprintf(stderr, "idle connect %d outlived the deadline\n", i);
	for (int i = 0; i < n; i++)
		rdma_destroy_ep(ids[i]);
	srv_stop(&sv);
	CHECK(rc == 0);
	CHECK(sv.st.unauth_closes == 70 && sv.st.unauth_open == 0);
	return 0;
}

/*
 * A daemon must survive clients that fail the key check in every order of
 * events: a client with the wrong key disconnects as soon as the server's
 * proof fails (it sends none of its own; a hostile one might, and then
 * disconnect at once, so the server may see the disconnect before or
 * after a proof). Repeated to
 * catch the interleavings (RPFS_VB_KEY_ROUNDS, default 40); the echo
 * afterwards shows the server still serves.
 */
static int test_key_stress(void)
{
	struct srv sv;
	struct net_client *cl;
	struct net_conn *c;
	uint8_t k1[NET_KEY_LEN], k2[NET_KEY_LEN];
	const char *env = getenv("RPFS_VB_KEY_ROUNDS");
	int rounds = env ? atoi(env) : 40;
	char rep[16];

	memset(k1, 1, sizeof(k1));
	memset(k2, 2, sizeof(k2));
	CHECK(srv_start(&sv, 8, 0, k1) == 0);
	struct net_call e = { .op = OP_ECHO, .body = "k", .body_len = 1, .rep_buf = rep,
			      .rep_cap = sizeof(rep) };
	for (int i = 0; i < rounds; i++) {
		CHECK((cl = mkclient(8, 2000, k2)) != NULL);
		CHECK(net_conn_new(cl, addr, sv.port, &c) == 0);
		CHECK(net_call_run(c, &e) == -EACCES);
		net_client_free(cl);
	}
	CHECK((cl = mkclient(8, 2000, k1)) != NULL);
	CHECK(net_conn_new(cl, addr, sv.port, &c) == 0);
	CHECK(net_call_run(c, &e) == 0 && e.status == 7);
	net_client_free(cl);
	srv_stop(&sv);
	return 0;
}

/* Wait up to 2 s for raw id's next send completion, into wc.
 * @return 1, 0 (none came), <0 (the poll failed) */
static int raw_send_done(struct rdma_cm_id *id, struct ibv_wc *wc)
{
	int n = 0;

	for (int i = 0; i < 2000 && n == 0; i++) {
		n = ibv_poll_cq(id->send_cq, 1, wc);
		if (n == 0)
			usleep(1000);
	}
	return n;
}

/* Send one small ECHO request (tag, body "flood") from buf, registered as
 * mr, as vb_client.c formats it: proto header, vb header (a request, no
 * fast slot), body inline; wait up to 2 s for its send to complete.
 * @return 0, -EIO (send failed: the connection is gone), -ETIMEDOUT */
static int raw_echo_send(struct rdma_cm_id *id, uint8_t *buf, struct ibv_mr *mr,
			 uint64_t tag)
{
	struct proto_hdr h = { .op = OP_ECHO, .tag = tag, .body_len = 5 };
	struct vb_mhdr m = { .kind = VB_K_REQ, .fslot = 0xffff };
	struct ibv_wc wc;
	int n;

	proto_hdr_encode(buf, &h);
	vb_mhdr_encode(buf + PROTO_HDR_LEN, &m);
	memcpy(buf + VB_HDRS, "flood", 5);
	if (rdma_post_send(id, NULL, buf, VB_HDRS + 5, mr, IBV_SEND_SIGNALED))
		return -EIO;
	n = raw_send_done(id, &wc);
	if (n <= 0)
		return n ? -EIO : -ETIMEDOUT;
	return wc.status == IBV_WC_SUCCESS ? 0 : -EIO;
}

/* One ECHO through a real client: 0 when answered. */
static int echo_ok(struct net_conn *c)
{
	char rep[16];
	struct net_call e = { .op = OP_ECHO, .body = "n", .body_len = 1,
			      .rep_buf = rep, .rep_cap = sizeof(rep) };

	return net_call_run(c, &e) == 0 && e.status == 7 && e.rep_len == 1 ? 0 : -1;
}

/*
 * A client that never lets its replies complete (issue 19): a raw keyless
 * connection with 8 credits posts no receive buffers, so every reply the
 * server SENDs waits in RNR retry, and sends up to 200 small ECHO requests
 * 5 ms apart (the server answers each it takes before the next comes: the
 * client never has 8 unanswered). Each reply past the connection's 4 send
 * buffers takes a pooled VB_BIG_SIZE buffer until its send completes; the
 * server must keep that within the credits: it hands exactly `credits` (8)
 * requests to its handler (then `credits` replies are unfinished), queues
 * the next 8 on their credits and closes the connection at the one after
 * (a reject: more requests than credits; vb_server.c's header comment),
 * while it still serves a normal client, and frees everything when the
 * connection goes.
 */
static int test_unacked_replies(void)
{
	struct srv sv;
	struct net_client *cl;
	struct net_conn *c;
	struct net_stats st, before, base;
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	static uint8_t buf[256];
	uint64_t pin_max = 0, regs = 0, bound = 8ull * VB_BIG_SIZE;
	int sent = 0, rc = 0, closed = 0, handled;

	CHECK(srv_start(&sv, 8, 0, NULL) == 0);
	CHECK((cl = mkclient(8, 5000, NULL)) != NULL);
	CHECK(net_conn_new(cl, addr, sv.port, &c) == 0);
	CHECK(echo_ok(c) == 0);
	net_server_stats(sv.s, &before);
	CHECK((id = raw_connect(sv.port, 0)) != NULL);
	CHECK((mr = rdma_reg_msgs(id, buf, sizeof(buf))) != NULL);
	net_server_stats(sv.s, &base);
	__atomic_store_n(&flood_handled, 0, __ATOMIC_RELAXED);
	for (sent = 0; sent < 200 && !rc; sent++) {
		if (raw_echo_send(id, buf, mr, 1000 + (uint64_t)sent)) {
			closed = 1;
			break;
		}
		usleep(5000);
		net_server_stats(sv.s, &st);
		if (st.pinned_bytes > base.pinned_bytes &&
		    st.pinned_bytes - base.pinned_bytes > pin_max)
			pin_max = st.pinned_bytes - base.pinned_bytes;
		regs = st.reg_count - base.reg_count;
		if (sent % 20 == 0 && echo_ok(c))
			rc = -1, fprintf(stderr, "normal client not served at %d\n", sent);
	}
	closed = closed || idle_closed(id, 500);
	handled = __atomic_load_n(&flood_handled, __ATOMIC_RELAXED);
	net_server_stats(sv.s, &st);
	fprintf(stderr, "unacked_replies: %d requests sent, %d handled, connection %s; "
		"server registrations +%llu, pinned +%llu bytes at most (bound %llu = 8 x "
		"VB_BIG_SIZE)\n", sent, handled, closed ? "closed" : "stalled",
		(unsigned long long)regs, (unsigned long long)pin_max,
		(unsigned long long)bound);
	/* 8 handed over, 8 queued, the 17th closed it: the client's sends
	 * of those 17 completed (the SRQ took them), and later ones may have
	 * too before the close took effect */
	if (!closed || st.rejects != base.rejects + 1)
		rc = -1, fprintf(stderr, "flooding connection not closed as a reject "
				 "(rejects +%llu)\n",
				 (unsigned long long)(st.rejects - base.rejects));
	if (handled != 8)
		rc = -1, fprintf(stderr, "%d flood requests handled, not the 8 credits\n",
				 handled);
	if (sent < 2 * 8 + 1)
		rc = -1, fprintf(stderr, "closed after %d requests, before 8 more "
				 "queued on their credits\n", sent);
	if (!rc && echo_ok(c))
		rc = -1, fprintf(stderr, "normal client not served after the flood\n");
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	/* the flooding connection's memory all goes, replies in flight or not */
	for (int i = 0; i < 500; i++) {
		net_server_stats(sv.s, &st);
		if (st.pinned_bytes == before.pinned_bytes)
			break;
		usleep(10000);
	}
	if (st.pinned_bytes != before.pinned_bytes)
		rc = -1, fprintf(stderr, "server still pins %llu bytes more after the close\n",
				 (unsigned long long)(st.pinned_bytes - before.pinned_bytes));
	net_client_free(cl);
	srv_stop(&sv);
	CHECK(rc == 0);
	CHECK(regs <= 8 && pin_max <= bound);
	return 0;
}

/* RDMA Write 8 bytes of buf to (raddr, rkey) over raw id; wait up to 2 s
 * for the completion. @return its status (-1 none came) */
static int raw_write(struct rdma_cm_id *id, uint8_t *buf, struct ibv_mr *mr,
		     uint64_t raddr, uint32_t rkey)
{
	struct ibv_wc wc;

	if (rdma_post_write(id, NULL, buf, 8, mr, IBV_SEND_SIGNALED, raddr, rkey))
		return -1;
	return raw_send_done(id, &wc) == 1 ? (int)wc.status : -1;
}

/* The accept data of raw connect id. @return 0, -1 */
static int raw_spriv(struct rdma_cm_id *id, struct vb_spriv *sp)
{
	if (!id->event)
		return -1;
	return vb_spriv_decode(id->event->param.conn.private_data,
			       id->event->param.conn.private_data_len, sp) ? -1 : 0;
}

/*
 * Remote write is granted on the fast slots only (issue 19): the rkey of
 * the accept data writes a fast slot, but not the reply send buffers that
 * follow the slots in the same mapping (a peer could change a reply after
 * the server built it), which fails with a remote access error. A server
 * with a key names no fast slots (nothing remotely writable) before the
 * client's proof; test_key's fast write uses the grant that follows it.
 */
static int test_fast_only(void)
{
	struct srv sv;
	struct net_client *cl;
	struct net_conn *c;
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	struct vb_spriv sp;
	static uint8_t buf[64];
	uint8_t k1[NET_KEY_LEN];
	int in, out;

	memset(k1, 1, sizeof(k1));
	CHECK(srv_start(&sv, 8, 0, k1) == 0);
	CHECK((id = idle_connect(sv.port)) != NULL);
	in = raw_spriv(id, &sp);
	rdma_destroy_ep(id);
	srv_stop(&sv);
	fprintf(stderr, "fast_only: a keyed server's accept data: %u fast slots, "
		"rkey %#x\n", sp.nslots, sp.fast_rkey);
	CHECK(in == 0 && sp.nslots == 0 && sp.fast_addr == 0 && sp.fast_rkey == 0);

	CHECK(srv_start(&sv, 8, 0, NULL) == 0);
	CHECK((id = raw_connect(sv.port, 0)) != NULL);
	CHECK(raw_spriv(id, &sp) == 0 && sp.nslots == VB_FAST_SLOTS);
	CHECK((mr = rdma_reg_msgs(id, buf, sizeof(buf))) != NULL);
	in = raw_write(id, buf, mr, sp.fast_addr + sp.slot_size, sp.fast_rkey);
	out = raw_write(id, buf, mr, sp.fast_addr + (uint64_t)sp.nslots * sp.slot_size,
			sp.fast_rkey);
	fprintf(stderr, "fast_only: a write to slot 1: %s; to the first send "
		"buffer: %s\n", in >= 0 ? ibv_wc_status_str(in) : "no completion",
		out >= 0 ? ibv_wc_status_str(out) : "no completion");
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	CHECK(in == IBV_WC_SUCCESS);
	CHECK(out == IBV_WC_REM_ACCESS_ERR);
	/* the server goes on serving */
	CHECK((cl = mkclient(8, 5000, NULL)) != NULL);
	CHECK(net_conn_new(cl, addr, sv.port, &c) == 0);
	CHECK(echo_ok(c) == 0);
	net_client_free(cl);
	srv_stop(&sv);
	return 0;
}

/* A verbs listener on addr that never accepts: a connect to it waits for
 * the whole timeout, as one to a hung (SIGSTOPped) server does. Its
 * channel is non-blocking. @return 0, -1 */
static int silent_listen(struct rdma_event_channel **ch, struct rdma_cm_id **id,
			 uint16_t *port)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE,
				       .ai_port_space = RDMA_PS_TCP }, *res;

	*ch = rdma_create_event_channel();
	if (!*ch)
		return -1;
	fcntl((*ch)->fd, F_SETFL, fcntl((*ch)->fd, F_GETFL) | O_NONBLOCK);
	if (rdma_getaddrinfo(addr, "0", &hints, &res))
		goto out_destroy_ch;
	if (rdma_create_id(*ch, id, NULL, RDMA_PS_TCP))
		goto out_free_res;
	if (rdma_bind_addr(*id, res->ai_src_addr) || rdma_listen(*id, 8))
		goto out_destroy_id;
	rdma_freeaddrinfo(res);
	*port = ntohs(rdma_get_src_port(*id));
	return 0;

out_destroy_id:
	rdma_destroy_id(*id);
out_free_res:
	rdma_freeaddrinfo(res);
out_destroy_ch:
	rdma_destroy_event_channel(*ch);
	return -1;
}

/* Reject the connect requests that waited and close the listener. */
static void silent_close(struct rdma_event_channel *ch, struct rdma_cm_id *id)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(ch, &ev) == 0) {
		struct rdma_cm_id *req = ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ?
			ev->id : NULL;
		if (req)
			rdma_reject(req, NULL, 0);
		rdma_ack_cm_event(ev);
		if (req)
			rdma_destroy_id(req);
	}
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

struct late_call {
	struct net_conn *c;
	int rc;
};

/* 100 ms in, an echo with a 400 ms timeout from a thread that cannot lead
 * (the main thread does): its reply must be taken by the leader. */
static void *late_echo(void *arg)
{
	struct late_call *l = arg;
	char rep[16];
	struct net_call e = { .op = OP_ECHO, .body = "y", .body_len = 1, .rep_buf = rep,
			      .rep_cap = sizeof(rep), .timeout_ms = 400 };

	usleep(100000);
	l->rc = net_call_run(l->c, &e);
	if (!l->rc && (e.status != 7 || e.rep_len != 1 || rep[0] != 'y'))
		l->rc = -EBADMSG;
	return NULL;
}

/* A thread that leads the completion channel (it sent a call and has not
 * waited for it yet) and then connects to a hung server blocks for the
 * client timeout (1 s): meanwhile it must take the channel's events, or
 * the reply of its own call, already in, counts as a timeout, and so does
 * another thread's call (400 ms) to the live server. The mirrored fsync of
 * test_mirror's test_fence_stopped_iod_lease failed that way. */
static int test_connect_hung(void)
{
	struct srv sv;
	struct net_client *cl;
	struct net_conn *c1, *c2;
	struct rdma_event_channel *lch;
	struct rdma_cm_id *lid;
	struct late_call late = { 0 };
	pthread_t thr;
	uint16_t port;
	char rep[16];

	CHECK(srv_start(&sv, 8, 0, NULL) == 0);
	CHECK(silent_listen(&lch, &lid, &port) == 0);
	CHECK((cl = mkclient(8, 1000, NULL)) != NULL);
	CHECK(net_conn_new(cl, addr, sv.port, &c1) == 0);
	CHECK(net_conn_new(cl, addr, port, &c2) == 0);
	struct net_call a = { .op = OP_ECHO, .body = "a", .body_len = 1, .rep_buf = rep,
			      .rep_cap = sizeof(rep) };
	CHECK(net_call_run(c1, &a) == 0); /* c1 is up */
	a.wait_now = 1;
	CHECK(net_call_submit(c1, &a) == 0);
	late.c = c1;
	CHECK(pthread_create(&thr, NULL, late_echo, &late) == 0);
	struct net_call x = { .op = OP_ECHO, .body = "x", .body_len = 1 };
	x.wait_now = 1;
	int rc = net_call_submit(c2, &x);
	CHECK(rc == -ETIMEDOUT);
	CHECK(net_call_wait(&a) == 0);
	CHECK(a.status == 7 && a.rep_len == 1 && rep[0] == 'a');
	pthread_join(thr, NULL);
	if (late.rc)
		fprintf(stderr, "connect_hung: the other thread's call: %s\n",
			strerror(-late.rc));
	CHECK(late.rc == 0);
	net_client_free(cl);
	silent_close(lch, lid);
	srv_stop(&sv);
	return 0;
}

/* The mechanism tests again, keyed: every message sealed, bulk data
 * MACed (vb_seal.h), on the same paths and counters. */
static int with_key(int (*fn)(void))
{
	static uint8_t k[NET_KEY_LEN];
	int rc;

	memset(k, 5, sizeof(k));
	live_key = k;
	rc = fn();
	live_key = NULL;
	return rc;
}

static int test_mechanisms_key(void) { return with_key(test_mechanisms); }
static int test_listio_key(void) { return with_key(test_listio); }
static int test_threads_key(void) { return with_key(test_threads); }
static int test_mixed_key(void) { return with_key(test_mixed); }

/*
 * Write data altered after its tag was taken, as a relay on the wire
 * would: a 1 MiB write (RDMA Read by the server) waits at the server
 * until the client has flipped one byte of it, then is pulled. Keyed, the
 * server finds the data fails its MAC and closes the connection (the call
 * fails, one reject). Without a key the transport delivers the altered
 * bytes (the handler's own pattern check answers -EBADMSG), which is what
 * the keyed run must not do. Unaltered, both succeed.
 */
static int late_write(const uint8_t *key, int flip)
{
	const uint64_t len = 1 << 20;
	uint64_t seed = 11 + (uint64_t)flip;
	struct srv sv;
	struct net_client *cl;
	struct net_conn *c;
	uint8_t *mem = malloc(len);
	struct iovec v = { mem, len };
	struct net_call call = { .op = OP_LATE, .body = &seed, .body_len = sizeof(seed),
				 .wr_iov = &v, .wr_cnt = 1 };
	int rc;

	CHECK(mem != NULL);
	for (uint64_t i = 0; i < len; i++)
		mem[i] = pat(seed, i);
	CHECK(srv_start(&sv, 8, 0, key) == 0);
	CHECK((cl = mkclient(8, 5000, key)) != NULL);
	CHECK(net_conn_new(cl, addr, sv.port, &c) == 0);
	__atomic_store_n(&late_arrived, 0, __ATOMIC_RELEASE);
	CHECK(net_call_submit(c, &call) == 0);
	while (!__atomic_load_n(&late_arrived, __ATOMIC_ACQUIRE))
		usleep(1000);
	if (flip)
		mem[len / 2 + 1] ^= 0x10;
	ev_async_send(sv.loop, &sv.late_w);
	rc = net_call_wait(&call);
	net_client_free(cl);
	srv_stop(&sv);
	free(mem);
	if (!flip) {
		CHECK(rc == 0 && call.status == 0);
		CHECK(sv.st.rejects == 0);
	} else if (key) {
		CHECK(rc < 0);
		CHECK(sv.st.rejects == 1);
	} else {
		CHECK(rc == 0 && call.status == -EBADMSG);
	}
	return 0;
}

static int test_tamper(void)
{
	uint8_t k[NET_KEY_LEN];

	memset(k, 6, sizeof(k));
	CHECK(late_write(k, 0) == 0);
	CHECK(late_write(k, 1) == 0);
	CHECK(late_write(NULL, 0) == 0);
	CHECK(late_write(NULL, 1) == 0);
	return 0;
}

int main(void)
{
	addr = getenv("RPFS_RDMA_ADDR");
	if (!addr || !addr[0]) {
		fprintf(stderr, "test_vb_live: no RPFS_RDMA_ADDR; skipped (run in the VM)\n");
		return 77;
	}
	setenv("RPFS_TRANSPORT", "verbs", 1);
	if (net_auth_init())
		return 1;
	alarm(300);
	struct {
		const char *name;
		int (*fn)(void);
	} t[] = { { "mechanisms", test_mechanisms }, { "listio", test_listio },
		  { "threads", test_threads }, { "mixed", test_mixed },
		  { "failures", test_failures }, { "key", test_key },
		  { "key_stress", test_key_stress }, { "two_keys", test_two_keys },
		  { "idle_connects", test_idle_connects },
		  { "unacked_replies", test_unacked_replies },
		  { "connect_hung", test_connect_hung },
		  { "fast_only", test_fast_only },
		  { "mechanisms+key", test_mechanisms_key },
		  { "listio+key", test_listio_key }, { "threads+key", test_threads_key },
		  { "mixed+key", test_mixed_key }, { "tamper", test_tamper } };
	const char *only = getenv("RPFS_VB_ONLY"); /* run one subtest */
	int bad = 0;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (only && strcmp(only, t[i].name))
			continue;
		int rc = t[i].fn();
		fprintf(stderr, "%s: %s\n", t[i].name, rc ? "FAIL" : "ok");
		bad |= rc != 0;
	}
	return bad;
}
