/*
 * vb_mech.c - rpfs-vb-mech: drive a real iod request handler over the real
 * transport and print, as one JSON object, how the transport counters of
 * the client and of the server moved. tests/integration/test_verbs.py runs
 * it inside the RDMA VM (RPFS_TRANSPORT=verbs) and asserts which mechanism
 * was taken: inline, fast RDMA, RDMA Read, RDMA Write, pipelining, credits,
 * the SRQ limit.
 *
 * The iod runs in this process (its handler, store and buffer zones, like
 * rpfs-iod sets them up) on a loop thread, so the server counters are read
 * directly (net_server_stats) and every case is deterministic: nothing else
 * talks to this server.
 *
 *   rpfs-vb-mech HOST DIR rw BYTES          one IO_WRITE of BYTES, then one
 *                                           IO_READ of them (verified)
 *   rpfs-vb-mech HOST DIR credits THREADS N server credits 4; THREADS
 *                                           threads x N 1 KiB writes on one
 *                                           connection
 *   rpfs-vb-mech HOST DIR srq MAXCLIENTS    server max_clients MAXCLIENTS;
 *                                           MAXCLIENTS + 1 clients connect
 *
 * The transport is $RPFS_TRANSPORT (net_opts_default). Exit 0 when the I/O
 * itself went as described in the JSON (the caller judges the counters), 1
 * on a failure, 2 on bad arguments, 3 if the case did not finish within
 * the watchdog (a deadlock).
 */
#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "iod_buf.h"
#include "iod_ops.h"
#include "iod_store.h"
#include "log.h"
#include "net.h"
#include "proto.h"

/* Watchdogs (s): a case past these is hung. TCG moves ~30 MB/s. */
#define VBM_WATCHDOG_RW_S 600
#define VBM_WATCHDOG_CREDITS_S 300
#define VBM_WATCHDOG_SRQ_S 120
#define VBM_CREDITS_SMALL 4

/* The in-process iod. Set up and torn down by main; loop thread between. */
struct vbm_iod {
	struct ev_loop *loop;
	ev_async stop_w;
	pthread_t thread;
	struct iod_buf_pool *pool;
	struct iod_store *st;
	struct iod_ops *ops;
	struct net_server *srv;
	uint16_t port;
};

static const char *vbm_host;

/* Stop the loop from another thread (ev_async callback). */
static void vbm_on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

/* Loop thread: serve until vbm_on_stop. */
static void *vbm_loop_main(void *arg)
{
	struct vbm_iod *d = arg;

	ev_run(d->loop, 0);
	return NULL;
}

/* Start the iod on host:0 with data in dir, credits and max_clients as
 * given (0 = default). Registers the buffer zones like rpfs-iod does. */
static int vbm_iod_start(struct vbm_iod *d, const char *dir, int credits,
			 int max_clients)
{
	struct iod_buf_config bc;
	struct net_opts no;
	int rc;

	memset(d, 0, sizeof(*d));
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	d->loop = ev_loop_new(EVFLAG_AUTO);
	if (!d->loop)
		return -ENOMEM;
	iod_buf_config_default(&bc);
	rc = iod_buf_pool_new(&d->pool, &bc);
	if (rc < 0)
		goto out_destroy_loop;
	rc = iod_store_open(&d->st, dir, 64);
	if (rc < 0)
		goto out_free_pool;
	rc = iod_ops_new(&d->ops, d->loop, d->st, d->pool);
	if (rc < 0)
		goto out_close_store;
	net_opts_default(&no);
	if (credits)
		no.credits = credits;
	if (max_clients)
		no.max_clients = max_clients;
	rc = net_server_new(&d->srv, d->loop, vbm_host, 0, iod_ops_handle, d->ops, &no);
	if (rc < 0)
		goto out_free_ops;
	for (unsigned z = 0; z < IOD_BUF_NZONES; z++) {
		void *base;
		size_t len;

		iod_buf_zone_region(d->pool, z, &base, &len);
		if (!len)
			continue;
		rc = net_server_register_mem(d->srv, base, len);
		if (rc < 0)
			goto out_free_server;
	}
	d->port = net_server_port(d->srv);
	ev_async_init(&d->stop_w, vbm_on_stop);
	ev_async_start(d->loop, &d->stop_w);
	rc = -pthread_create(&d->thread, NULL, vbm_loop_main, d);
	if (rc < 0)
		goto out_free_server;
	return 0;

out_free_server:
	net_server_free(d->srv);
out_free_ops:
	iod_ops_free(d->ops);
out_close_store:
	iod_store_close(d->st);
out_free_pool:
	iod_buf_pool_free(d->pool);
out_destroy_loop:
	ev_loop_destroy(d->loop);
	return rc;
}

/* Stop the loop thread and free the iod in reverse order of setup. */
static void vbm_iod_stop(struct vbm_iod *d)
{
	ev_async_send(d->loop, &d->stop_w);
	pthread_join(d->thread, NULL);
	ev_async_stop(d->loop, &d->stop_w);
	net_server_free(d->srv);
	iod_ops_free(d->ops);
	iod_store_close(d->st);
	iod_buf_pool_free(d->pool);
	ev_loop_destroy(d->loop);
}

/* One IO_WRITE or IO_READ of one segment [off, off + len) of ino from or
 * into buf. Returns the transport error or the server's status. */
static int vbm_io(struct net_conn *c, uint16_t op, uint64_t ino, uint64_t off,
		  void *buf, size_t len)
{
	uint8_t body[256];
	struct proto_seg seg = { off, len };
	struct proto_ioreq q = { .ino = ino, .nsegs = 1, .segs = &seg };
	struct iovec iov = { buf, len };
	struct net_call call;
	struct wbuf w;
	int rc;

	wb_init(&w, body, sizeof(body));
	rc = proto_ioreq_encode(&w, op, &q);
	if (rc < 0 || w.err)
		return rc < 0 ? rc : w.err;
	memset(&call, 0, sizeof(call));
	call.op = op;
	call.body = body;
	call.body_len = (uint32_t)w.len;
	if (op == PROTO_OP_IO_WRITE) {
		call.wr_iov = &iov;
		call.wr_cnt = 1;
	} else {
		call.rd_iov = &iov;
		call.rd_cnt = 1;
	}
	rc = net_call_run(c, &call);
	if (rc < 0)
		return rc;
	if (call.status == 0 && op == PROTO_OP_IO_READ && call.rd_bytes != len)
		return -EPROTO;
	return call.status;
}

/* Print "name":{counter deltas b - a} (every counter, gauges as after). */
static void vbm_print_delta(const char *name, const struct net_stats *a,
			    const struct net_stats *b)
{
	const uint64_t *pa = (const uint64_t *)a, *pb = (const uint64_t *)b;
	struct net_stats d;
	uint64_t *pd = (uint64_t *)&d;
	char json[4096];

	/* struct net_stats is all uint64_t counters (net.h). */
	_Static_assert(sizeof(struct net_stats) % sizeof(uint64_t) == 0,
		       "net_stats is not all uint64_t");
	for (size_t i = 0; i < sizeof(d) / sizeof(uint64_t); i++)
		pd[i] = pb[i] - pa[i];
	d.pinned_bytes = b->pinned_bytes;
	d.srq_posted = b->srq_posted;
	d.sge_max = b->sge_max;
	if (net_stats_json(&d, "delta", json, sizeof(json)) < 0)
		snprintf(json, sizeof(json), "{}");
	printf("\"%s\":%s", name, json);
}

/* Deterministic bytes for (seed, position). */
static void vbm_fill(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

/* Case rw: one write of len bytes, counters; one read back, counters. */
static int vbm_case_rw(struct vbm_iod *d, size_t len)
{
	struct net_stats c0, c1, c2, s0, s1, s2;
	struct net_client *cl;
	struct net_conn *c;
	struct net_opts no;
	uint8_t *src, *dst;
	int rc, wrc, rrc = -1, same = 0;

	src = malloc(len);
	dst = malloc(len);
	if (!src || !dst) {
		rc = -ENOMEM;
		goto out_free_bufs;
	}
	vbm_fill(src, len, (uint32_t)len);
	memset(dst, 0xee, len);
	net_opts_default(&no);
	rc = net_client_new(&cl, &no);
	if (rc < 0)
		goto out_free_bufs;
	rc = net_conn_new(cl, vbm_host, d->port, &c);
	if (rc < 0)
		goto out_free_client;
	/* Connect first (a tiny read) so the handshake is outside the windows. */
	(void)vbm_io(c, PROTO_OP_IO_READ, 1, 0, dst, 1);
	net_client_stats(cl, &c0);
	net_server_stats(d->srv, &s0);
	wrc = vbm_io(c, PROTO_OP_IO_WRITE, 77, 0, src, len);
	net_client_stats(cl, &c1);
	net_server_stats(d->srv, &s1);
	if (wrc == 0) {
		rrc = vbm_io(c, PROTO_OP_IO_READ, 77, 0, dst, len);
		same = rrc == 0 && memcmp(src, dst, len) == 0;
	}
	net_client_stats(cl, &c2);
	net_server_stats(d->srv, &s2);
	printf("{\"case\":\"rw\",\"bytes\":%zu,\"transport\":\"%s\",\"write_rc\":%d,"
	       "\"read_rc\":%d,\"verified\":%s,\"write\":{", len,
	       net_client_transport(cl), wrc, rrc, same ? "true" : "false");
	vbm_print_delta("client", &c0, &c1);
	printf(",");
	vbm_print_delta("server", &s0, &s1);
	printf("},\"read\":{");
	vbm_print_delta("client", &c1, &c2);
	printf(",");
	vbm_print_delta("server", &s1, &s2);
	printf("}}\n");
	rc = same ? 0 : -EIO;
out_free_client:
	net_client_free(cl);
out_free_bufs:
	free(src);
	free(dst);
	return rc;
}

/* One thread of the credits case: n 1 KiB writes, each its own offset. */
struct vbm_worker {
	pthread_t t;
	struct net_conn *c;
	int idx, n, errors, first_err;
};

static void *vbm_worker_main(void *arg)
{
	struct vbm_worker *w = arg;
	uint8_t buf[1024];

	for (int i = 0; i < w->n; i++) {
		int rc;

		memset(buf, w->idx + i, sizeof(buf));
		rc = vbm_io(w->c, PROTO_OP_IO_WRITE, 1000 + (uint64_t)w->idx,
			    (uint64_t)i * sizeof(buf), buf, sizeof(buf));
		if (rc != 0) {
			if (!w->errors)
				w->first_err = rc;
			w->errors++;
		}
	}
	return NULL;
}

/* Case credits: many threads on one connection to a server that grants
 * only VBM_CREDITS_SMALL credits; every call must complete. */
static int vbm_case_credits(struct vbm_iod *d, int nthreads, int n)
{
	struct net_stats c0, c1, s0, s1;
	struct vbm_worker *w;
	struct net_client *cl;
	struct net_conn *c;
	struct net_opts no;
	uint8_t one;
	int rc, errors = 0, first_err = 0;

	w = calloc((size_t)nthreads, sizeof(*w));
	if (!w)
		return -ENOMEM;
	net_opts_default(&no);
	rc = net_client_new(&cl, &no);
	if (rc < 0)
		goto out_free_workers;
	rc = net_conn_new(cl, vbm_host, d->port, &c);
	if (rc < 0)
		goto out_free_client;
	(void)vbm_io(c, PROTO_OP_IO_READ, 1, 0, &one, 1);
	net_client_stats(cl, &c0);
	net_server_stats(d->srv, &s0);
	for (int i = 0; i < nthreads; i++) {
		w[i].c = c;
		w[i].idx = i;
		w[i].n = n;
		if (pthread_create(&w[i].t, NULL, vbm_worker_main, &w[i]) != 0) {
			nthreads = i;
			rc = -EAGAIN;
			break;
		}
	}
	for (int i = 0; i < nthreads; i++) {
		pthread_join(w[i].t, NULL);
		if (w[i].errors && !first_err)
			first_err = w[i].first_err;
		errors += w[i].errors;
	}
	net_client_stats(cl, &c1);
	net_server_stats(d->srv, &s1);
	printf("{\"case\":\"credits\",\"transport\":\"%s\",\"threads\":%d,\"per_thread\":%d,"
	       "\"server_credits\":%d,\"errors\":%d,\"first_error\":%d,",
	       net_client_transport(cl), nthreads, n, VBM_CREDITS_SMALL, errors,
	       first_err);
	vbm_print_delta("client", &c0, &c1);
	printf(",");
	vbm_print_delta("server", &s0, &s1);
	printf("}\n");
	if (rc == 0 && errors)
		rc = -EIO;
out_free_client:
	net_client_free(cl);
out_free_workers:
	free(w);
	return rc;
}

/* Case srq: max_clients + 1 clients each try one write; then the first
 * max_clients write again. Reports every result and the SRQ gauge. */
static int vbm_case_srq(struct vbm_iod *d, int max_clients)
{
	int n = max_clients + 1, rc = 0;
	struct net_client **cl;
	struct net_conn **c;
	int *first, *again;
	struct net_stats s;
	uint8_t buf[1024];

	cl = calloc((size_t)n, sizeof(*cl));
	c = calloc((size_t)n, sizeof(*c));
	first = calloc((size_t)n, sizeof(*first));
	again = calloc((size_t)n, sizeof(*again));
	if (!cl || !c || !first || !again) {
		rc = -ENOMEM;
		goto out_free_arrays;
	}
	memset(buf, 'q', sizeof(buf));
	for (int i = 0; i < n; i++) {
		struct net_opts no;

		net_opts_default(&no);
		no.timeout_ms = 5000;
		rc = net_client_new(&cl[i], &no);
		if (rc == 0)
			rc = net_conn_new(cl[i], vbm_host, d->port, &c[i]);
		if (rc < 0) {
			n = i;
			goto out_free_clients;
		}
		first[i] = vbm_io(c[i], PROTO_OP_IO_WRITE, 2000 + (uint64_t)i, 0, buf,
				  sizeof(buf));
	}
	net_server_stats(d->srv, &s);
	for (int i = 0; i < n; i++)
		again[i] = vbm_io(c[i], PROTO_OP_IO_WRITE, 2000 + (uint64_t)i, 4096, buf,
				  sizeof(buf));
	printf("{\"case\":\"srq\",\"transport\":\"%s\",\"max_clients\":%d,"
	       "\"credits\":%d,\"first\":[", net_client_transport(cl[0]), max_clients,
	       NET_DEFAULT_CREDITS);
	for (int i = 0; i < n; i++)
		printf("%s%d", i ? "," : "", first[i]);
	printf("],\"again\":[");
	for (int i = 0; i < n; i++)
		printf("%s%d", i ? "," : "", again[i]);
	printf("],\"srq_posted\":%llu,\"server_rejects\":%llu}\n",
	       (unsigned long long)s.srq_posted, (unsigned long long)s.rejects);
out_free_clients:
	for (int i = 0; i < n; i++)
		net_client_free(cl[i]);
out_free_arrays:
	free(again);
	free(first);
	free(c);
	free(cl);
	return rc;
}

/* Watchdog: a case that hangs is a deadlock; say so and exit 3. */
static void vbm_on_alarm(int sig)
{
	static const char msg[] = "rpfs-vb-mech: watchdog: case did not finish (deadlock?)\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	_exit(3);
}

static int vbm_usage(void)
{
	fprintf(stderr, "usage: rpfs-vb-mech HOST DIR rw BYTES | credits THREADS N | "
		"srq MAXCLIENTS\n");
	return 2;
}

/* Parse a positive number argument; 0 on error. */
static long vbm_num(const char *s, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > max)
		return 0;
	return v;
}

int main(int argc, char **argv)
{
	struct vbm_iod d;
	int rc, credits = 0, max_clients = 0;
	unsigned watchdog = VBM_WATCHDOG_RW_S;
	long a = 0, b = 0;

	if (argc < 5)
		return vbm_usage();
	vbm_host = argv[1];
	log_init("rpfs-vb-mech", getenv("RPFS_LOG_LEVEL") ?
		 log_level_parse(getenv("RPFS_LOG_LEVEL")) : LOG_NOTICE);
	if (!strcmp(argv[3], "rw") && argc == 5) {
		a = vbm_num(argv[4], (long)PROTO_MAX_BULK);
	} else if (!strcmp(argv[3], "credits") && argc == 6) {
		a = vbm_num(argv[4], 1024);
		b = vbm_num(argv[5], 100000);
		credits = VBM_CREDITS_SMALL;
		watchdog = VBM_WATCHDOG_CREDITS_S;
		if (!b)
			a = 0;
	} else if (!strcmp(argv[3], "srq") && argc == 5) {
		a = vbm_num(argv[4], 64);
		max_clients = (int)a;
		watchdog = VBM_WATCHDOG_SRQ_S;
	}
	if (!a) {
		fprintf(stderr, "rpfs-vb-mech: bad arguments for case \"%s\"\n", argv[3]);
		return vbm_usage();
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, vbm_on_alarm);
	alarm(watchdog);
	rc = vbm_iod_start(&d, argv[2], credits, max_clients);
	if (rc < 0) {
		fprintf(stderr, "rpfs-vb-mech: cannot start the iod on %s: %s\n",
			vbm_host, strerror(-rc));
		return 1;
	}
	if (!strcmp(argv[3], "rw"))
		rc = vbm_case_rw(&d, (size_t)a);
	else if (!strcmp(argv[3], "credits"))
		rc = vbm_case_credits(&d, (int)a, (int)b);
	else
		rc = vbm_case_srq(&d, (int)a);
	fflush(stdout);
	vbm_iod_stop(&d);
	if (rc < 0)
		fprintf(stderr, "rpfs-vb-mech: %s: %s\n", argv[3], strerror(-rc));
	return rc < 0 ? 1 : 0;
}
