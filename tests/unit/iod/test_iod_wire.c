/*
 * test_iod_wire.c - end-to-end test of rpfs-iod over the real transport.
 *
 * Spawns the built rpfs-iod (path in argv[1]) on 127.0.0.1:0 with a fresh
 * data directory, learns its port from the ready line, and drives it with
 * net_client: multi-segment and 8 MiB (pipelined) writes read back and
 * verified, holes, truncate, fsync, remove, statfs, unknown ops, concurrent
 * large requests (buffer pool exhaustion), a malformed request and raw
 * garbage (the connection is closed, the iod keeps serving), the data
 * directory lock, argument validation, ENOSPC on a small tmpfs, fencing
 * (IO_FENCE lease and fence set; mirrored IO_READ / IO_SEEK refused with
 * -ESTALE unless leased, complete and not fenced; a malformed IO_FENCE
 * closes the connection), a clean SIGTERM shutdown, and, on a second iod
 * with the fsync test hook, an fsync held on a worker: reads go on
 * meanwhile, its connection may close before the reply, and SIGTERM while
 * one is held still exits cleanly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "proto.h"

#include "check_cond.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

static const char *iod_bin;

/* A running iod and the thread that drains its stderr. */
struct iod_proc {
	pid_t pid;
	int errfd;
	uint16_t port;
	pthread_t reader;
	int nerr, nwarn; /* "<3>" / "<4>" lines seen (reader thread writes) */
	int nfence_rej;  /* "<4>" lines naming a bad IO_FENCE body (same) */
	int nheld;       /* fsyncs the test hook started holding (same) */
};

/* Echo the iod's stderr and count error/warning lines. */
static void *drain_stderr(void *arg)
{
	struct iod_proc *p = arg;
	char buf[4096];
	FILE *f = fdopen(p->errfd, "r");

	if (!f)
		return NULL;
	while (fgets(buf, sizeof(buf), f)) {
		fprintf(stderr, "  [iod %d] %s", (int)p->pid, buf);
		if (!strncmp(buf, "<3>", 3))
			__atomic_add_fetch(&p->nerr, 1, __ATOMIC_RELAXED);
		if (!strncmp(buf, "<4>", 3))
			__atomic_add_fetch(&p->nwarn, 1, __ATOMIC_RELAXED);
		if (!strncmp(buf, "<4>", 3) && strstr(buf, "bad IO_FENCE body (seq)"))
			__atomic_add_fetch(&p->nfence_rej, 1, __ATOMIC_RELAXED);
		if (strstr(buf, "test hook: holding IO_FSYNC of ino"))
			__atomic_add_fetch(&p->nheld, 1, __ATOMIC_RELAXED);
	}
	fclose(f);
	return NULL;
}

/* Fork/exec rpfs-iod with argv; stderr goes to a pipe we return. */
static pid_t spawn(char *const argv[], int *errfd)
{
	int pfd[2];
	pid_t pid;

	if (pipe(pfd) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(pfd[1], 2);
		close(pfd[0]);
		close(pfd[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	*errfd = pfd[0];
	return pid;
}

/* Start an iod on data dir and wait for its ready line (port from it). */
static int iod_start(struct iod_proc *p, const char *data)
{
	char *argv[] = { (char *)iod_bin, "--listen", "127.0.0.1:0", "--data",
			 (char *)data, "--log-level", getenv("IOD_LOG") ? getenv("IOD_LOG") : "info", NULL };
	char line[512];
	size_t n = 0;

	memset(p, 0, sizeof(*p));
	p->pid = spawn(argv, &p->errfd);
	if (p->pid < 0)
		return -1;
	for (;;) {
		char c;
		ssize_t r = read(p->errfd, &c, 1);
		if (r <= 0) {
			fprintf(stderr, "iod exited before ready\n");
			return -1;
		}
		if (c != '\n') {
			if (n < sizeof(line) - 1)
				line[n++] = c;
			continue;
		}
		line[n] = '\0';
		n = 0;
		fprintf(stderr, "  [iod %d] %s\n", (int)p->pid, line);
		const char *k = strstr(line, "ready: listening on 127.0.0.1:");
		if (k) {
			p->port = (uint16_t)atoi(k + strlen("ready: listening on 127.0.0.1:"));
			CHECK(strncmp(line, "<5>rpfs-iod: ready: listening on ", 33) == 0);
			CHECK(strstr(line, data) != NULL);
			break;
		}
	}
	pthread_create(&p->reader, NULL, drain_stderr, p);
	return p->port ? 0 : -1;
}

/* SIGTERM the iod and return its exit status (or -1). */
static int iod_stop(struct iod_proc *p)
{
	int st;

	kill(p->pid, SIGTERM);
	if (waitpid(p->pid, &st, 0) < 0)
		return -1;
	pthread_join(p->reader, NULL);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static uint8_t body_buf[PROTO_MAX_BODY];

/* Run one IO request; returns the transport error or the server status. */
static int io_call(struct net_conn *c, uint16_t op, const struct proto_ioreq *q,
		   const struct iovec *wr, int wrcnt, const struct iovec *rd,
		   int rdcnt, void *rep, uint32_t repcap, uint32_t *replen)
{
	struct net_call call;
	struct wbuf w;
	int rc;

	wb_init(&w, body_buf, sizeof(body_buf));
	rc = proto_ioreq_encode(&w, op, q);
	if (rc < 0 || w.err)
		return rc < 0 ? rc : w.err;
	memset(&call, 0, sizeof(call));
	call.op = op;
	call.body = body_buf;
	call.body_len = (uint32_t)w.len;
	call.wr_iov = wr;
	call.wr_cnt = wrcnt;
	call.rd_iov = rd;
	call.rd_cnt = rdcnt;
	call.rep_buf = rep;
	call.rep_cap = repcap;
	rc = net_call_run(c, &call);
	if (rc < 0)
		return rc;
	if (replen)
		*replen = call.rep_len;
	if (rd && call.status == 0) {
		uint64_t want = 0;
		for (int i = 0; i < rdcnt; i++)
			want += rd[i].iov_len;
		CHECK_EQ(call.rd_bytes, want);
	}
	return call.status;
}

/* Write one contiguous buffer as the given segments. */
static int io_write(struct net_conn *c, uint64_t ino, struct proto_seg *segs,
		    uint32_t nsegs, const void *buf, size_t len)
{
	struct proto_ioreq q = { .ino = ino, .nsegs = nsegs, .segs = segs };
	struct iovec iov = { (void *)buf, len };

	return io_call(c, PROTO_OP_IO_WRITE, &q, &iov, 1, NULL, 0, NULL, 0, NULL);
}

/* Read the given segments into one contiguous buffer. */
static int io_read(struct net_conn *c, uint64_t ino, struct proto_seg *segs,
		   uint32_t nsegs, void *buf, size_t len)
{
	struct proto_ioreq q = { .ino = ino, .nsegs = nsegs, .segs = segs };
	struct iovec iov = { buf, len };

	return io_call(c, PROTO_OP_IO_READ, &q, NULL, 0, &iov, 1, NULL, 0, NULL);
}

static int io_simple(struct net_conn *c, uint16_t op, uint64_t ino,
		     uint64_t size, uint32_t flags)
{
	struct proto_ioreq q = { .ino = ino, .size = size, .flags = flags };

	return io_call(c, op, &q, NULL, 0, NULL, 0, NULL, 0, NULL);
}

/* Deterministic byte pattern depending on (seed, position). */
static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

static int all_zero(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return 0;
	return 1;
}

/* Path of object ino under data dir. */
static void obj_path(char *buf, size_t cap, const char *data, uint64_t ino)
{
	snprintf(buf, cap, "%s/objects/%02x/%02x/%016llx", data,
		 (unsigned)(ino & 0xff), (unsigned)((ino >> 8) & 0xff),
		 (unsigned long long)ino);
}

static long long file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) < 0 ? -1 : (long long)sb.st_size;
}

/* Multi-segment write whose memory split differs from the file split. */
static void test_multiseg(struct net_conn *c, const char *data)
{
	struct proto_seg segs[3] = { { 0, 4096 }, { 8192, 10000 }, { 100000, 70000 } };
	size_t len = 4096 + 10000 + 70000;
	uint8_t *src = malloc(len), *dst = malloc(len);
	struct iovec wr[2] = { { src, 3000 }, { src + 3000, len - 3000 } };
	struct proto_ioreq q = { .ino = 42, .nsegs = 3, .segs = segs };
	char path[512];

	fill(src, len, 1);
	CHECK_EQ(io_call(c, PROTO_OP_IO_WRITE, &q, wr, 2, NULL, 0, NULL, 0, NULL), 0);
	memset(dst, 0xee, len);
	CHECK_EQ(io_read(c, 42, segs, 3, dst, len), 0);
	CHECK(memcmp(src, dst, len) == 0);
	obj_path(path, sizeof(path), data, 42);
	CHECK_EQ(file_size(path), 170000);

	/* The gap between segments reads as zeros; past the end too. */
	struct proto_seg hole[2] = { { 4096, 4096 }, { 170000, 30000 } };
	uint8_t *z = malloc(34096);
	memset(z, 0xee, 34096);
	CHECK_EQ(io_read(c, 42, hole, 2, z, 34096), 0);
	CHECK(all_zero(z, 34096));
	free(z);
	free(src);
	free(dst);
}

/* 8 MiB in one request: pipelined through several transfer units. Then
 * read it back whole and as a noncontiguous list. */
static void test_large(struct net_conn *c)
{
	size_t len = 8 * MiB;
	uint8_t *src = malloc(len), *dst = malloc(len);
	struct proto_seg seg = { MiB, len };

	fill(src, len, 2);
	CHECK_EQ(io_write(c, 43, &seg, 1, src, len), 0);
	memset(dst, 0xee, len);
	CHECK_EQ(io_read(c, 43, &seg, 1, dst, len), 0);
	CHECK(memcmp(src, dst, len) == 0);

	/* Read 1000 strided pieces of 3000 bytes, into 7 iovecs. */
	struct proto_seg *ls = calloc(1000, sizeof(*ls));
	size_t tot = 0;
	for (int i = 0; i < 1000; i++) {
		ls[i].off = MiB + (uint64_t)i * 8000 + 17;
		ls[i].len = 3000;
		tot += 3000;
	}
	memset(dst, 0xee, tot);
	struct iovec rd[7];
	size_t per = tot / 7;
	for (int i = 0; i < 7; i++) {
		rd[i].iov_base = dst + i * per;
		rd[i].iov_len = i == 6 ? tot - 6 * per : per;
	}
	struct proto_ioreq q = { .ino = 43, .nsegs = 1000, .segs = ls };
	CHECK_EQ(io_call(c, PROTO_OP_IO_READ, &q, NULL, 0, rd, 7, NULL, 0, NULL), 0);
	int bad = 0;
	for (int i = 0; i < 1000; i++)
		bad += memcmp(dst + (size_t)i * 3000, src + (size_t)i * 8000 + 17, 3000) != 0;
	CHECK_EQ(bad, 0);

	/* Hole before the data, and a never-written object. */
	struct proto_seg h = { 0, MiB };
	memset(dst, 0xee, MiB);
	CHECK_EQ(io_read(c, 43, &h, 1, dst, MiB), 0);
	CHECK(all_zero(dst, MiB));
	memset(dst, 0xee, 3 * MiB);
	h.len = 3 * MiB;
	CHECK_EQ(io_read(c, 999999, &h, 1, dst, 3 * MiB), 0);
	CHECK(all_zero(dst, 3 * MiB));
	free(ls);
	free(src);
	free(dst);
}

/* Truncate (shrink, create), fsync, remove, statfs, unknown ops. */
static void test_small_ops(struct net_conn *c, const char *data)
{
	char path[512];
	uint8_t *src = malloc(2 * MiB), *dst = malloc(2 * MiB);
	struct proto_seg seg = { MiB, 2 * MiB };

	/* Shrink 43 to 2 MiB: [1M,2M) keeps data, [2M,3M) reads zeros. */
	fill(src, 2 * MiB, 2);
	CHECK_EQ(io_simple(c, PROTO_OP_IO_TRUNCATE, 43, 2 * MiB, 0), 0);
	obj_path(path, sizeof(path), data, 43);
	CHECK_EQ(file_size(path), 2 * MiB);
	CHECK_EQ(io_read(c, 43, &seg, 1, dst, 2 * MiB), 0);
	CHECK(memcmp(dst, src, MiB) == 0);
	CHECK(all_zero(dst + MiB, MiB));

	/* Truncate of a missing object creates it. */
	CHECK_EQ(io_simple(c, PROTO_OP_IO_TRUNCATE, 0x1234577, 5000, 0), 0);
	obj_path(path, sizeof(path), data, 0x1234577);
	CHECK_EQ(file_size(path), 5000);

	CHECK_EQ(io_simple(c, PROTO_OP_IO_FSYNC, 43, 0, 0), 0);
	CHECK_EQ(io_simple(c, PROTO_OP_IO_FSYNC, 43, 0, 1), 0);
	CHECK_EQ(io_simple(c, PROTO_OP_IO_FSYNC, 777777, 0, 0), 0);

	obj_path(path, sizeof(path), data, 43);
	CHECK_EQ(io_simple(c, PROTO_OP_IO_REMOVE, 43, 0, 0), 0);
	CHECK_EQ(file_size(path), -1);
	CHECK_EQ(io_simple(c, PROTO_OP_IO_REMOVE, 43, 0, 0), 0);
	memset(dst, 0xee, MiB);
	seg.len = MiB;
	CHECK_EQ(io_read(c, 43, &seg, 1, dst, MiB), 0);
	CHECK(all_zero(dst, MiB));
	/* Rewrite after remove: a fresh object, not a stale cached fd. */
	struct proto_seg head = { 0, 4096 };
	CHECK_EQ(io_write(c, 43, &head, 1, src, 4096), 0);
	CHECK_EQ(file_size(path), 4096);

	/* Remove many: every listed object goes, missing ones are fine,
	 * unlisted ones stay. */
	{
		static const uint64_t many[] = { 501, 502, 999999, 503 };
		struct proto_ioreq mq = { .inos = { 4, many, NULL } };
		char p2[512];

		for (int i = 0; i < 4; i++)
			CHECK_EQ(io_write(c, 500 + (uint64_t)i, &head, 1, src, 4096), 0);
		CHECK_EQ(io_call(c, PROTO_OP_IO_REMOVE_MANY, &mq, NULL, 0, NULL,
				 0, NULL, 0, NULL), 0);
		for (int i = 0; i < 4; i++) {
			obj_path(p2, sizeof(p2), data, 500 + (uint64_t)i);
			CHECK_EQ(file_size(p2), i == 0 ? 4096 : -1);
		}
		CHECK_EQ(file_size(path), 4096);
	}

	uint8_t rep[256];
	uint32_t replen = 0;
	struct proto_statfs sf;
	const char *why = NULL;
	struct proto_ioreq q = { 0 };
	CHECK_EQ(io_call(c, PROTO_OP_IO_STATFS, &q, NULL, 0, NULL, 0, rep,
			 sizeof(rep), &replen), 0);
	CHECK_EQ(proto_statfs_decode(rep, replen, &sf, &why), 0);
	CHECK(sf.bsize > 0 && sf.blocks > 0 && sf.bavail <= sf.blocks);
	CHECK(sf.namemax > 0);

	/* Not an iod op: -EOPNOTSUPP, and the connection stays up. */
	struct net_call call = { .op = PROTO_OP_GETATTR, .body = "", .body_len = 0 };
	CHECK_EQ(net_call_run(c, &call), 0);
	CHECK_EQ(call.status, -EOPNOTSUPP);
	struct net_call call2 = { .op = 99, .body = "", .body_len = 0 };
	CHECK_EQ(net_call_run(c, &call2), 0);
	CHECK_EQ(call2.status, -EOPNOTSUPP);
	free(src);
	free(dst);
}

struct conc {
	struct net_conn *c;
	uint64_t ino;
	const uint8_t *src;
	uint8_t *dst;
	size_t len;
	int wrc, rrc;
};

static void *conc_thread(void *arg)
{
	struct conc *k = arg;
	struct proto_seg seg = { 0, k->len };
	struct proto_ioreq q = { .ino = k->ino, .nsegs = 1, .segs = &seg };
	struct iovec wr = { (void *)k->src, k->len }, rd = { k->dst, k->len };
	struct net_call call;
	uint8_t body[64], rbody[64];
	struct wbuf w, rw;

	wb_init(&w, body, sizeof(body));
	proto_ioreq_encode(&w, PROTO_OP_IO_WRITE, &q);
	wb_init(&rw, rbody, sizeof(rbody)); /* IO_READ's body ends in flags */
	proto_ioreq_encode(&rw, PROTO_OP_IO_READ, &q);
	memset(&call, 0, sizeof(call));
	call.op = PROTO_OP_IO_WRITE;
	call.body = body;
	call.body_len = (uint32_t)w.len;
	call.wr_iov = &wr;
	call.wr_cnt = 1;
	k->wrc = net_call_run(k->c, &call);
	if (!k->wrc)
		k->wrc = call.status;
	memset(&call, 0, sizeof(call));
	call.op = PROTO_OP_IO_READ;
	call.body = rbody;
	call.body_len = (uint32_t)rw.len;
	call.rd_iov = &rd;
	call.rd_cnt = 1;
	k->rrc = net_call_run(k->c, &call);
	if (!k->rrc)
		k->rrc = call.status;
	return NULL;
}

/* 12 threads over 4 connections, 6 MiB each: more than the buffer pool
 * holds at once, so requests chop, wait for buffers and resume. */
static void test_concurrent(struct net_client *cl, uint16_t port)
{
	enum { NT = 12, NC = 4 };
	size_t len = 6 * MiB;
	uint8_t *src = malloc(len);
	struct net_conn *conns[NC];
	struct conc k[NT];
	pthread_t th[NT];

	fill(src, len, 3);
	for (int i = 0; i < NC; i++)
		CHECK_EQ(net_conn_new(cl, "127.0.0.1", port, &conns[i]), 0);
	for (int i = 0; i < NT; i++) {
		k[i] = (struct conc){ .c = conns[i % NC], .ino = 500 + i, .src = src,
				      .dst = malloc(len), .len = len };
		pthread_create(&th[i], NULL, conc_thread, &k[i]);
	}
	for (int i = 0; i < NT; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(k[i].wrc, 0);
		CHECK_EQ(k[i].rrc, 0);
		CHECK(memcmp(k[i].dst, src, len) == 0);
		free(k[i].dst);
	}
	free(src);
}

/* A write whose body is garbage: the iod rejects it and closes that
 * connection; the client's next call reconnects. Then raw garbage bytes
 * on a plain socket get the socket closed. */
static void test_malformed(struct net_conn *c, uint16_t port)
{
	uint8_t junk[40];
	struct net_call call;

	memset(junk, 0xff, sizeof(junk));
	memset(&call, 0, sizeof(call));
	call.op = PROTO_OP_IO_WRITE;
	call.body = junk;
	call.body_len = sizeof(junk);
	int rc = net_call_run(c, &call);
	CHECK(rc == -EIO || rc == -EPROTO || (rc == 0 && call.status < 0));

	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	CHECK_EQ(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	uint8_t garbage[200];
	fill(garbage, sizeof(garbage), 9);
	CHECK(write(s, garbage, sizeof(garbage)) == (ssize_t)sizeof(garbage));
	struct timeval tv = { .tv_sec = 5 };
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	char b[256];
	ssize_t n;
	while ((n = read(s, b, sizeof(b))) > 0)
		;
	CHECK(n == 0 || (n < 0 && errno == ECONNRESET)); /* closed, not timed out */
	close(s);

	/* Still serving on the same handle (reconnects). */
	struct proto_ioreq q = { 0 };
	uint8_t rep[256];
	CHECK_EQ(io_call(c, PROTO_OP_IO_STATFS, &q, NULL, 0, NULL, 0, rep,
			 sizeof(rep), NULL), 0);
}

/* Raw connection that has done the transport handshake. */
static int raw_connect(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct proto_hdr h = { .op = PROTO_OP_NET_HELLO, .tag = 1, .flags = PROTO_F_CTRL };
	uint8_t hb[PROTO_HDR_LEN];
	int s = socket(AF_INET, SOCK_STREAM, 0);
	size_t got = 0;

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(s);
		return -1;
	}
	proto_hdr_encode(hb, &h);
	if (write(s, hb, sizeof(hb)) != (ssize_t)sizeof(hb))
		CHECK(!"hello write");
	while (got < sizeof(hb)) {
		ssize_t n = read(s, hb + got, sizeof(hb) - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	CHECK_EQ(got, sizeof(hb));
	return s;
}

/* Send an IO request header + body on a raw socket. */
static void raw_request(int s, uint16_t op, uint64_t ino, uint64_t len)
{
	struct proto_seg seg = { 0, len };
	struct proto_ioreq q = { .ino = ino, .nsegs = 1, .segs = &seg };
	uint8_t buf[PROTO_HDR_LEN + 64];
	struct wbuf w;

	wb_init(&w, buf + PROTO_HDR_LEN, sizeof(buf) - PROTO_HDR_LEN);
	proto_ioreq_encode(&w, op, &q);
	struct proto_hdr h = { .op = op, .tag = 2, .body_len = (uint32_t)w.len,
			       .bulk_len = op == PROTO_OP_IO_WRITE ? len : 0,
			       .aux = op == PROTO_OP_IO_READ ? len : 0 };
	proto_hdr_encode(buf, &h);
	if (write(s, buf, PROTO_HDR_LEN + w.len) != (ssize_t)(PROTO_HDR_LEN + w.len))
		CHECK(!"request write");
}

/* Clients that die in the middle of a large write (after 3 of 8 MiB) and
 * of a large read: the iod fails those requests, gives their buffers back
 * and keeps serving large requests. */
static void test_abort(struct net_client *cl, uint16_t port)
{
	uint8_t *junk = calloc(1, 3 * MiB);

	for (int i = 0; i < 4; i++) {
		int s = raw_connect(port);
		raw_request(s, PROTO_OP_IO_WRITE, 600 + i, 8 * MiB);
		if (write(s, junk, 3 * MiB) != (ssize_t)(3 * MiB))
			CHECK(!"partial data write");
		close(s);
		s = raw_connect(port);
		raw_request(s, PROTO_OP_IO_READ, 500, 6 * MiB);
		close(s);
	}
	free(junk);
	usleep(100 * 1000);
	test_concurrent(cl, port);
}

/* Wait until the iod's hook holds n fsyncs in all (10 s at most). */
static void wait_held(struct iod_proc *p, int n)
{
	for (int i = 0; i < 10000; i++) {
		if (__atomic_load_n(&p->nheld, __ATOMIC_RELAXED) >= n)
			return;
		usleep(1000);
	}
	CHECK(!"the hook never held the fsync");
}

/* Whether a reply is waiting on raw socket s (no wait). */
static int raw_readable(int s)
{
	struct pollfd pf = { .fd = s, .events = POLLIN };

	return poll(&pf, 1, 0) > 0;
}

/* Read one reply header from raw socket s (10 s at most); its status. */
static int raw_reply_status(int s)
{
	struct pollfd pf = { .fd = s, .events = POLLIN };
	uint8_t hb[PROTO_HDR_LEN];
	struct proto_hdr h;
	const char *why;
	size_t got = 0;

	while (got < sizeof(hb) && poll(&pf, 1, 10000) > 0) {
		ssize_t n = read(s, hb + got, sizeof(hb) - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < sizeof(hb) || proto_hdr_decode(hb, &h, &why) < 0)
		return -EPROTO;
	return h.status;
}

/*
 * An iod whose hook holds IO_FSYNC of ino 77 for 1 s. Two fsyncs of 77 go
 * out on raw connections, one of which closes at once; while both are
 * held, a write and read of another object and a statfs are served (the
 * kept connection has no reply yet when they finish). The held fsync then
 * answers 0, the closed one's completion finds its connection gone (the
 * iod must not touch freed state: ASan). A third fsync is held when
 * SIGTERM comes: the iod still exits 0.
 */
static void test_held_fsync(const char *tmp)
{
	char data[256];
	struct iod_proc p;
	struct net_client *cl;
	struct net_conn *c;
	struct net_opts o;
	struct proto_seg seg = { 0, 4096 };
	uint8_t src[4096], dst[4096];
	int a, b, d;

	snprintf(data, sizeof(data), "%s/held", tmp);
	setenv("RPFS_IOD_TEST_FSYNC_DELAY_MS", "1000", 1);
	setenv("RPFS_IOD_TEST_FSYNC_INO", "77", 1);
	int rc = iod_start(&p, data);
	unsetenv("RPFS_IOD_TEST_FSYNC_DELAY_MS");
	unsetenv("RPFS_IOD_TEST_FSYNC_INO");
	if (rc < 0) {
		CHECK(!"iod with the hook did not start");
		return;
	}
	net_opts_default(&o);
	o.timeout_ms = 20000;
	CHECK_EQ(net_client_new(&cl, &o), 0);
	CHECK_EQ(net_conn_new(cl, "127.0.0.1", p.port, &c), 0);
	fill(src, sizeof(src), 77);
	CHECK_EQ(io_write(c, 77, &seg, 1, src, sizeof(src)), 0);

	a = raw_connect(p.port);
	b = raw_connect(p.port);
	raw_request(a, PROTO_OP_IO_FSYNC, 77, 0);
	raw_request(b, PROTO_OP_IO_FSYNC, 77, 0);
	close(a);
	wait_held(&p, 2);
	CHECK_EQ(io_write(c, 78, &seg, 1, src, sizeof(src)), 0);
	CHECK_EQ(io_read(c, 78, &seg, 1, dst, sizeof(dst)), 0);
	CHECK(memcmp(src, dst, sizeof(dst)) == 0);
	CHECK_EQ(io_call(c, PROTO_OP_IO_STATFS, &(struct proto_ioreq){ 0 }, NULL,
			 0, NULL, 0, body_buf, sizeof(body_buf), NULL), 0);
	CHECK(!raw_readable(b)); /* all of the above while the fsync was held */
	CHECK_EQ(raw_reply_status(b), 0);
	close(b);

	d = raw_connect(p.port);
	raw_request(d, PROTO_OP_IO_FSYNC, 77, 0);
	wait_held(&p, 3);
	net_client_free(cl);
	CHECK_EQ(iod_stop(&p), 0);
	close(d);
	CHECK_EQ(p.nerr, 0);
	CHECK_EQ(p.nwarn, 0); /* (the hook's warning came before ready) */
}

/* Run iod_bin with extra args; return its exit status. */
static int run_status(char *const argv[])
{
	int errfd = -1, st;
	char buf[1024];
	pid_t pid = spawn(argv, &errfd);
	ssize_t n;

	if (pid < 0)
		return -1;
	while ((n = read(errfd, buf, sizeof(buf) - 1)) > 0) {
		buf[n] = '\0';
		fprintf(stderr, "  [iod expected failure] %s", buf);
	}
	close(errfd);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Bad arguments exit 2; a second iod on a locked data dir exits 1. */
static void test_cli(const char *data)
{
	char *a1[] = { (char *)iod_bin, "--listen", "x", "--data", (char *)data, NULL };
	char *a2[] = { (char *)iod_bin, "--listen", "127.0.0.1:0", NULL };
	char *a3[] = { (char *)iod_bin, "--listen", "127.0.0.1:99999", "--data", "/tmp/x", NULL };
	char *a4[] = { (char *)iod_bin, "--listen", "127.0.0.1:0", "--data", (char *)data,
		       "--credits", "0", NULL };
	char *a5[] = { (char *)iod_bin, "--listen", "127.0.0.1:0", "--data", (char *)data,
		       "--bogus", NULL };
	char *a6[] = { (char *)iod_bin, "--listen", "127.0.0.1:0", "--data", (char *)data,
		       "--log-level", "loud", NULL };
	char *a7[] = { (char *)iod_bin, "--listen", "127.0.0.1:0", "--data", (char *)data,
		       "--io-threads", "0", NULL };
	char *a8[] = { (char *)iod_bin, "--listen", "127.0.0.1:0", "--data", (char *)data,
		       "--io-threads", "65", NULL };
	char *lk[] = { (char *)iod_bin, "--listen", "127.0.0.1:0", "--data", (char *)data, NULL };
	char other[300];
	char *ev[] = { (char *)iod_bin, "--listen", "127.0.0.1:0", "--data", other, NULL };
	static const char *const bad_env[][2] = {
		{ "RPFS_IOD_TEST_FSYNC_DELAY_MS", "abc" },
		{ "RPFS_IOD_TEST_FSYNC_DELAY_MS", "0" },
		{ "RPFS_IOD_TEST_FSYNC_DELAY_MS", "60001" },
		{ "RPFS_IOD_TEST_FSYNC_INO", "5" }, /* without the delay */
	};

	CHECK_EQ(run_status(a1), 2);
	CHECK_EQ(run_status(a2), 2);
	CHECK_EQ(run_status(a3), 2);
	CHECK_EQ(run_status(a4), 2);
	CHECK_EQ(run_status(a5), 2);
	CHECK_EQ(run_status(a6), 2);
	CHECK_EQ(run_status(a7), 2);
	CHECK_EQ(run_status(a8), 2);
	CHECK_EQ(run_status(lk), 1);
	/* the test hook's variables are checked too (another data dir: the
	 * running iod holds this one's lock) */
	snprintf(other, sizeof(other), "%s-env", data);
	for (size_t i = 0; i < sizeof(bad_env) / sizeof(bad_env[0]); i++) {
		setenv(bad_env[i][0], bad_env[i][1], 1);
		CHECK_EQ(run_status(ev), 2);
		unsetenv(bad_env[i][0]);
	}
}

/* A full disk: -ENOSPC to the writer; other requests carry on. Needs a
 * tmpfs mount, so the test runs as root (as CI does); failing to mount is a
 * failure, not a skip. */
static void test_enospc(const char *tmp, struct net_client *cl)
{
	char mnt[128], data[256];
	struct iod_proc p;
	struct net_conn *c;

	snprintf(mnt, sizeof(mnt), "%s/small", tmp);
	mkdir(mnt, 0700);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") < 0) {
		CHECK(0 && "mount tmpfs for the ENOSPC check");
		fprintf(stderr, "mount tmpfs: %s\n", strerror(errno));
		return;
	}
	snprintf(data, sizeof(data), "%s/data", mnt);
	if (iod_start(&p, data) < 0) {
		CHECK(!"iod on tmpfs did not start");
		goto out_umount;
	}
	CHECK_EQ(net_conn_new(cl, "127.0.0.1", p.port, &c), 0);
	size_t len = 4 * MiB;
	uint8_t *src = malloc(len);
	struct proto_seg seg = { 0, len };
	fill(src, len, 4);
	CHECK_EQ(io_write(c, 7, &seg, 1, src, len), -ENOSPC);
	/* The connection and the iod still work. */
	seg.len = 4096;
	CHECK_EQ(io_simple(c, PROTO_OP_IO_REMOVE, 7, 0, 0), 0);
	CHECK_EQ(io_write(c, 8, &seg, 1, src, 4096), 0);
	uint8_t back[4096];
	CHECK_EQ(io_read(c, 8, &seg, 1, back, 4096), 0);
	CHECK(memcmp(back, src, 4096) == 0);
	free(src);
	CHECK_EQ(iod_stop(&p), 0);
	CHECK_EQ(p.nerr, 0);
out_umount:
	umount2(mnt, MNT_DETACH);
}

/* IO_SEEK or IO_BLOCKS: the status, with the reply's value in *v. */
static int io_value(struct net_conn *c, uint16_t op, uint64_t ino,
		    uint64_t size, uint32_t flags, uint64_t *v)
{
	struct proto_ioreq q = { .ino = ino, .size = size, .flags = flags };
	uint8_t rep[64];
	uint32_t replen = 0;
	const char *why = NULL;
	int rc = io_call(c, op, &q, NULL, 0, NULL, 0, rep, sizeof(rep), &replen);

	if (rc)
		return rc;
	CHECK_EQ(proto_ioval_decode(rep, replen, v, &why), 0);
	return 0;
}

static int io_falloc(struct net_conn *c, uint64_t ino, uint32_t mode,
		     uint64_t off, uint64_t len)
{
	struct proto_ioreq q = { .ino = ino, .mode = mode, .off = off, .len = len };

	return io_call(c, PROTO_OP_IO_FALLOCATE, &q, NULL, 0, NULL, 0, NULL, 0,
		       NULL);
}

/* Fallocate modes, blocks and seek on one object; missing objects. */
static void test_space_ops(struct net_conn *c, const char *data)
{
	const uint32_t keep = PROTO_FALLOC_KEEP_SIZE;
	uint8_t *src = malloc(MiB), *dst = malloc(MiB);
	struct proto_seg seg = { 0, MiB };
	char path[512];
	uint64_t v, b0;

	/* allocate 1 MiB: size and blocks grow, zeros read back */
	obj_path(path, sizeof(path), data, 61);
	CHECK_EQ(io_falloc(c, 61, 0, 0, MiB), 0);
	CHECK_EQ(file_size(path), MiB);
	CHECK_EQ(io_value(c, PROTO_OP_IO_BLOCKS, 61, 0, 0, &b0), 0);
	CHECK(b0 >= MiB / 512);
	/* keep size: blocks beyond the end, size unchanged */
	CHECK_EQ(io_falloc(c, 61, keep, MiB, MiB), 0);
	CHECK_EQ(file_size(path), MiB);
	CHECK_EQ(io_value(c, PROTO_OP_IO_BLOCKS, 61, 0, 0, &v), 0);
	CHECK(v >= b0 + MiB / 512);
	/* data, then a punched hole inside it reads zeros */
	fill(src, MiB, 61);
	CHECK_EQ(io_write(c, 61, &seg, 1, src, MiB), 0);
	CHECK_EQ(io_falloc(c, 61, PROTO_FALLOC_PUNCH_HOLE | keep, 65536, 131072), 0);
	memset(src + 65536, 0, 131072);
	CHECK_EQ(io_read(c, 61, &seg, 1, dst, MiB), 0);
	CHECK(memcmp(src, dst, MiB) == 0);
	CHECK_EQ(file_size(path), MiB);
	/* seek: the hole is at [64 KiB, 192 KiB) */
	CHECK_EQ(io_value(c, PROTO_OP_IO_SEEK, 61, 0, PROTO_SEEK_HOLE, &v), 0);
	CHECK_EQ(v, 65536);
	CHECK_EQ(io_value(c, PROTO_OP_IO_SEEK, 61, 65536, PROTO_SEEK_DATA, &v), 0);
	CHECK_EQ(v, 196608);
	CHECK_EQ(io_value(c, PROTO_OP_IO_SEEK, 61, 100, PROTO_SEEK_DATA, &v), 0);
	CHECK_EQ(v, 100);
	CHECK_EQ(io_value(c, PROTO_OP_IO_SEEK, 61, MiB, PROTO_SEEK_DATA, &v), -ENXIO);
	CHECK_EQ(io_value(c, PROTO_OP_IO_SEEK, 61, MiB, PROTO_SEEK_HOLE, &v), -ENXIO);
	/* zero range, keeping and growing the size */
	CHECK_EQ(io_falloc(c, 61, PROTO_FALLOC_ZERO_RANGE | keep, 0, 4096), 0);
	memset(src, 0, 4096);
	CHECK_EQ(io_read(c, 61, &seg, 1, dst, MiB), 0);
	CHECK(memcmp(src, dst, MiB) == 0);
	CHECK_EQ(io_falloc(c, 61, PROTO_FALLOC_ZERO_RANGE, MiB - 10, 4106), 0);
	CHECK_EQ(file_size(path), MiB + 4096);

	/* missing object: no blocks, no data, a hole everywhere; punching
	 * and keep-size zeroing leave it missing, allocating creates it */
	obj_path(path, sizeof(path), data, 62);
	CHECK_EQ(io_value(c, PROTO_OP_IO_BLOCKS, 62, 0, 0, &v), 0);
	CHECK_EQ(v, 0);
	CHECK_EQ(io_value(c, PROTO_OP_IO_SEEK, 62, 5, PROTO_SEEK_DATA, &v), -ENXIO);
	CHECK_EQ(io_value(c, PROTO_OP_IO_SEEK, 62, 5, PROTO_SEEK_HOLE, &v), 0);
	CHECK_EQ(v, 5);
	CHECK_EQ(io_falloc(c, 62, PROTO_FALLOC_PUNCH_HOLE | keep, 0, 4096), 0);
	CHECK_EQ(io_falloc(c, 62, PROTO_FALLOC_ZERO_RANGE | keep, 0, 4096), 0);
	CHECK_EQ(file_size(path), -1);
	CHECK_EQ(io_falloc(c, 62, keep, 0, 4096), 0);
	CHECK_EQ(file_size(path), 0);
	free(src);
	free(dst);
}

/* A mirrored (PROTO_IO_MIRROR) read of the segment into buf. */
static int io_read_mirror(struct net_conn *c, uint64_t ino,
			  struct proto_seg *seg, void *buf, size_t len)
{
	struct proto_ioreq q = { .ino = ino, .nsegs = 1, .segs = seg,
				 .flags = PROTO_IO_MIRROR };
	struct iovec iov = { buf, len };

	return io_call(c, PROTO_OP_IO_READ, &q, NULL, 0, &iov, 1, NULL, 0, NULL);
}

/*
 * Send one IO_FENCE. @return the transport error or the iod's status; the
 * reply's state is decoded into *st (cleared first) when a body came back.
 */
static int io_fence(struct net_conn *c, uint64_t seq, uint64_t confirm,
		    uint32_t lease_ms, uint32_t flags, const uint64_t *add,
		    uint32_t nadd, struct proto_fencestate *st)
{
	struct proto_fence m = { .seq = seq, .confirm = confirm,
				 .lease_ms = lease_ms, .flags = flags,
				 .add = { nadd, add, NULL } };
	struct net_call call;
	uint8_t rep[64];
	const char *why = NULL;
	struct wbuf w;
	int rc;

	memset(st, 0, sizeof(*st));
	wb_init(&w, body_buf, sizeof(body_buf));
	if (proto_fence_encode(&w, &m) < 0 || w.err)
		return -EINVAL;
	memset(&call, 0, sizeof(call));
	call.op = PROTO_OP_IO_FENCE;
	call.body = body_buf;
	call.body_len = (uint32_t)w.len;
	call.rep_buf = rep;
	call.rep_cap = sizeof(rep);
	rc = net_call_run(c, &call);
	if (rc < 0)
		return rc;
	CHECK_EQ(call.rep_len, 11);
	CHECK_EQ(proto_fencestate_decode(rep, call.rep_len, st, &why), 0);
	return call.status;
}

/* Mirrored reads before any IO_FENCE, and the lease by confirmation. */
static void fence_lease(struct net_conn *c, const uint8_t *src, uint8_t *dst,
			size_t len)
{
	struct proto_seg seg = { 0, len };
	struct proto_fencestate st;

	/* a fresh iod: no lease, no set; unflagged reads are served */
	CHECK_EQ(io_read_mirror(c, 70, &seg, dst, len), -ESTALE);
	memset(dst, 0xee, len);
	CHECK_EQ(io_read(c, 70, &seg, 1, dst, len), 0);
	CHECK(memcmp(dst, src, len) == 0);
	/* a whole (empty) set, not confirmed yet: still refused */
	CHECK_EQ(io_fence(c, 1, 0, 60000, PROTO_FENCE_RESET | PROTO_FENCE_COMPLETE,
			  NULL, 0, &st), 0);
	CHECK(!st.leased && st.complete && !st.loading);
	CHECK_EQ(st.nfenced, 0);
	CHECK_EQ(st.lease_left_ms, 0);
	CHECK_EQ(io_read_mirror(c, 70, &seg, dst, len), -ESTALE);
	/* seq 2 confirms 1: leased, and the mirrored read is served */
	CHECK_EQ(io_fence(c, 2, 1, 60000, 0, NULL, 0, &st), 0);
	CHECK(st.leased && st.complete && !st.loading);
	CHECK_EQ(st.nfenced, 0);
	CHECK(st.lease_left_ms > 50000 && st.lease_left_ms <= 60000);
	memset(dst, 0xee, len);
	CHECK_EQ(io_read_mirror(c, 70, &seg, dst, len), 0);
	CHECK(memcmp(dst, src, len) == 0);
}

/* A fenced inode is refused, its neighbour and unflagged reads are not;
 * IO_SEEK alike (the flag does not turn a data seek into a hole seek). */
static void fence_set(struct net_conn *c, const uint8_t *src, uint8_t *dst,
		      size_t len)
{
	struct proto_seg seg = { 0, len };
	struct proto_fencestate st;
	uint64_t v = 1;

	CHECK_EQ(io_fence(c, 3, 2, 60000, 0, (const uint64_t[]){ 70 }, 1, &st), 0);
	CHECK(st.leased && st.complete && !st.loading);
	CHECK_EQ(st.nfenced, 1);
	CHECK_EQ(io_read_mirror(c, 70, &seg, dst, len), -ESTALE);
	memset(dst, 0xee, len);
	CHECK_EQ(io_read_mirror(c, 71, &seg, dst, len), 0);
	CHECK(memcmp(dst, src, len) == 0);
	memset(dst, 0xee, len);
	CHECK_EQ(io_read(c, 70, &seg, 1, dst, len), 0);
	CHECK(memcmp(dst, src, len) == 0);
	CHECK_EQ(io_value(c, PROTO_OP_IO_SEEK, 70, 0, PROTO_IO_MIRROR, &v), -ESTALE);
	CHECK_EQ(io_value(c, PROTO_OP_IO_SEEK, 70, 0,
			  PROTO_IO_MIRROR | PROTO_SEEK_HOLE, &v), -ESTALE);
	CHECK_EQ(io_value(c, PROTO_OP_IO_SEEK, 70, 0, PROTO_SEEK_HOLE, &v), 0);
	CHECK_EQ(v, len);
	CHECK_EQ(io_value(c, PROTO_OP_IO_SEEK, 71, 0, PROTO_IO_MIRROR, &v), 0);
	CHECK_EQ(v, 0);
	CHECK_EQ(io_value(c, PROTO_OP_IO_SEEK, 71, 0,
			  PROTO_IO_MIRROR | PROTO_SEEK_HOLE, &v), 0);
	CHECK_EQ(v, len);
	/* a new set loads beside the one in force, which serves until COMPLETE */
	CHECK_EQ(io_fence(c, 4, 3, 60000, PROTO_FENCE_RESET,
			  (const uint64_t[]){ 71 }, 1, &st), 0);
	CHECK(st.leased && st.complete && st.loading);
	CHECK_EQ(st.nfenced, 1);
	CHECK_EQ(io_read_mirror(c, 71, &seg, dst, len), 0);
	CHECK_EQ(io_read_mirror(c, 70, &seg, dst, len), -ESTALE);
	CHECK_EQ(io_fence(c, 5, 4, 60000, PROTO_FENCE_COMPLETE, NULL, 0, &st), 0);
	CHECK(st.leased && st.complete && !st.loading);
	CHECK_EQ(st.nfenced, 1);
	CHECK_EQ(io_read_mirror(c, 71, &seg, dst, len), -ESTALE);
	CHECK_EQ(io_read_mirror(c, 70, &seg, dst, len), 0);
	/* COMPLETE with nothing loading: -EINVAL with the state, nothing changes */
	CHECK_EQ(io_fence(c, 6, 5, 60000, PROTO_FENCE_COMPLETE,
			  (const uint64_t[]){ 70 }, 1, &st), -EINVAL);
	CHECK(st.leased && st.complete && !st.loading);
	CHECK_EQ(st.nfenced, 1);
	CHECK_EQ(io_read_mirror(c, 70, &seg, dst, len), 0);
}

/* A malformed IO_FENCE (seq 0) closes the connection with a warning; the
 * fence state lives on (it is the iod's, not the connection's). */
static void fence_malformed(struct iod_proc *p, struct net_conn *c,
			    uint8_t *dst, size_t len)
{
	uint8_t bad[36] = { 0 }; /* seq 0, confirm 0, lease 0, flags 0, 0, 0 */
	struct proto_seg seg = { 0, len };
	struct net_call call;
	int rc;

	memset(&call, 0, sizeof(call));
	call.op = PROTO_OP_IO_FENCE;
	call.body = bad;
	call.body_len = 32;
	rc = net_call_run(c, &call);
	CHECK(rc == -EIO || rc == -EPROTO || rc == -ECONNRESET);
	for (int i = 0; i < 200 && !__atomic_load_n(&p->nfence_rej, __ATOMIC_RELAXED); i++)
		usleep(10000);
	CHECK_EQ(__atomic_load_n(&p->nfence_rej, __ATOMIC_RELAXED), 1);
	CHECK_EQ(io_read_mirror(c, 70, &seg, dst, len), 0);
	CHECK_EQ(io_read_mirror(c, 71, &seg, dst, len), -ESTALE);
}

/* Fencing of mirrored reads over the wire (inodes 70 and 71, 128 KiB each:
 * reads that size go by sendfile on tcp, so the refusal must come before
 * the object is opened). */
static void test_fence(struct iod_proc *p, struct net_conn *c)
{
	size_t len = 128 * KiB;
	uint8_t *src = malloc(len), *dst = malloc(len);
	struct proto_seg seg = { 0, len };

	fill(src, len, 70);
	CHECK_EQ(io_write(c, 70, &seg, 1, src, len), 0);
	CHECK_EQ(io_write(c, 71, &seg, 1, src, len), 0);
	fence_lease(c, src, dst, len);
	fence_set(c, src, dst, len);
	fence_malformed(p, c, dst, len);
	free(src);
	free(dst);
}

int main(int argc, char **argv)
{
	char tmp[] = "/tmp/test_iod_wire.XXXXXX";
	char data[256], cmd[512];
	struct iod_proc p;
	struct net_client *cl;
	struct net_conn *c;
	struct net_opts o;

	if (argc < 2) {
		fprintf(stderr, "usage: test_iod_wire PATH-TO-rpfs-iod\n");
		return 2;
	}
	iod_bin = argv[1];
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(data, sizeof(data), "%s/data/sub", tmp);
	if (iod_start(&p, data) < 0)
		return 1;
	net_opts_default(&o);
	o.timeout_ms = 20000;
	if (net_client_new(&cl, &o) < 0)
		return 1;
	CHECK_EQ(net_conn_new(cl, "127.0.0.1", p.port, &c), 0);

	fprintf(stderr, "multiseg\n");
	test_multiseg(c, data);
	fprintf(stderr, "large\n");
	test_large(c);
	fprintf(stderr, "small ops\n");
	test_small_ops(c, data);
	fprintf(stderr, "space ops\n");
	test_space_ops(c, data);
	fprintf(stderr, "fence\n");
	test_fence(&p, c);
	fprintf(stderr, "concurrent\n");
	test_concurrent(cl, p.port);
	fprintf(stderr, "abort\n");
	test_abort(cl, p.port);
	fprintf(stderr, "malformed\n");
	test_malformed(c, p.port);
	fprintf(stderr, "cli\n");
	test_cli(data);
	CHECK_EQ(kill(p.pid, 0), 0);
	fprintf(stderr, "enospc\n");
	test_enospc(tmp, cl);

	net_client_free(cl);
	CHECK_EQ(iod_stop(&p), 0);
	CHECK_EQ(p.nerr, 0);
	CHECK(p.nwarn >= 1); /* the rejected connections */
	fprintf(stderr, "held fsync\n");
	test_held_fsync(tmp);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "note: could not remove %s\n", tmp);
	if (failures) {
		fprintf(stderr, "test_iod_wire: %d failures\n", failures);
		return 1;
	}
	printf("test_iod_wire: ok\n");
	return 0;
}
