/*
 * test_iod_ops.c - unit test of the iod request handler against a fake
 * transport (net_sreq_* defined here), so pipelining can be checked with
 * transfers that complete synchronously, later in any interleaving, or
 * fail; with a tiny buffer pool that forces chopping and waiting.
 */
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "iod_buf.h"
#include "iod_crc.h"
#include "iod_ops.h"
#include "iod_store.h"
#include "iod_work.h"
#include "net.h"
#include "proto.h"

#include "check_cond.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

/* ---------------------------------------------------------- fake transport */

struct xfer {
	struct fake *f;
	int push;
	uint64_t off;
	struct iovec iov[4];
	int cnt;
	net_xfer_fn cb;
	void *arg;
};

/* A fake request: the client's write data and read memory live here. */
struct fake {
	struct net_sreq r;   /* first: the handler sees &f->r */
	uint8_t body[PROTO_MAX_BODY];
	const uint8_t *wdata;/* write data the server pulls */
	uint8_t *rmem;       /* read memory the server pushes into */
	int replied, rejected;
	int32_t status;
	uint8_t rep[256];
	uint32_t rep_len;
	int pulls_out, pushes_out, max_pushes_out;
	int fail_at;         /* fail the n-th transfer (1-based), 0 = never */
	int nxfer;
};

static int mode_sync;            /* complete transfers inside pull/push */
static struct xfer *pending[256];/* async transfers not yet completed */
static int npending;
static int bad_calls;            /* contract violations seen by the fake */

static struct net_sconn *fake_conn = (struct net_sconn *)(uintptr_t)0x1;

const char *net_sconn_peer(const struct net_sconn *c)
{
	return "fake:1";
}

static int fake_privileged = 1;  /* the fake peer proved the servers' key */

int net_sconn_privileged(const struct net_sconn *c)
{
	return fake_privileged;
}

/* Move the bytes of x and run its callback (the "completion"). */
static void xfer_complete(struct xfer *x)
{
	struct fake *f = x->f;
	int rc = 0;

	f->nxfer++;
	if (f->fail_at && f->nxfer >= f->fail_at)
		rc = -EIO;
	if (!rc) {
		uint64_t o = x->off;
		for (int i = 0; i < x->cnt; i++) {
			if (x->push)
				memcpy(f->rmem + o, x->iov[i].iov_base, x->iov[i].iov_len);
			else
				memcpy(x->iov[i].iov_base, f->wdata + o, x->iov[i].iov_len);
			o += x->iov[i].iov_len;
		}
	}
	if (x->push)
		f->pushes_out--;
	else
		f->pulls_out--;
	net_xfer_fn cb = x->cb;
	void *arg = x->arg;
	free(x);
	cb(&f->r, rc, arg);
}

static int start_xfer(struct net_sreq *r, int push, uint64_t off,
		      const struct iovec *iov, int cnt, net_xfer_fn cb, void *arg)
{
	struct fake *f = (struct fake *)r;
	struct xfer *x = calloc(1, sizeof(*x));
	uint64_t tot = 0;

	if (f->replied || cnt < 1 || cnt > 4) {
		bad_calls++;
		free(x);
		return -EINVAL;
	}
	x->f = f;
	x->push = push;
	x->off = off;
	x->cnt = cnt;
	x->cb = cb;
	x->arg = arg;
	memcpy(x->iov, iov, sizeof(*iov) * cnt);
	for (int i = 0; i < cnt; i++)
		tot += iov[i].iov_len;
	if (push) {
		if (off + tot > r->hdr.aux) {
			bad_calls++;
			free(x);
			return -EINVAL;
		}
		f->pushes_out++;
		if (f->pushes_out > f->max_pushes_out)
			f->max_pushes_out = f->pushes_out;
	} else {
		if (r->pulled + tot > r->hdr.bulk_len || f->pulls_out) {
			bad_calls++; /* beyond bulk, or two pulls at once */
			free(x);
			return -EINVAL;
		}
		x->off = r->pulled;
		r->pulled += tot;
		f->pulls_out++;
	}
	if (mode_sync)
		xfer_complete(x);
	else
		pending[npending++] = x;
	return 0;
}

int net_sreq_pull(struct net_sreq *r, const struct iovec *iov, int cnt,
		  net_xfer_fn cb, void *arg)
{
	return start_xfer(r, 0, 0, iov, cnt, cb, arg);
}

int net_sreq_push(struct net_sreq *r, uint64_t off, const struct iovec *iov,
		  int cnt, net_xfer_fn cb, void *arg)
{
	return start_xfer(r, 1, off, iov, cnt, cb, arg);
}

/* The fake has no sendfile: the handler keeps its buffered read path. */
int net_sreq_can_push_fd(const struct net_sreq *r)
{
	return 0;
}

int net_sreq_push_fd(struct net_sreq *r, uint64_t off, int fd,
		     uint64_t file_off, size_t len, net_xfer_fn cb, void *arg)
{
	bad_calls++;
	return -EOPNOTSUPP;
}

int net_sreq_reply(struct net_sreq *r, int32_t status, const void *body,
		   uint32_t len)
{
	struct fake *f = (struct fake *)r;

	if (f->replied || f->pulls_out || f->pushes_out)
		bad_calls++;
	f->replied = 1;
	f->status = status;
	if (len > sizeof(f->rep))
		len = sizeof(f->rep);
	if (len)
		memcpy(f->rep, body, len);
	f->rep_len = len;
	return 0;
}

void net_sreq_reject(struct net_sreq *r, const char *why)
{
	struct fake *f = (struct fake *)r;

	f->rejected = 1;
	f->replied = 1;
}

/* ---------------------------------------------------------------- helpers */

static struct iod_ops *ops;
static struct iod_buf_pool *pool;
static struct ev_loop *loop;

/* Build a request for op with segs, for the given data/memory. */
static struct fake *mkreq(uint16_t op, uint64_t ino, struct proto_seg *segs,
			  uint32_t nsegs, const uint8_t *wdata, uint8_t *rmem)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct proto_ioreq q = { .ino = ino, .nsegs = nsegs, .segs = segs };
	struct wbuf w;
	uint64_t tot = 0;

	for (uint32_t i = 0; i < nsegs; i++)
		tot += segs[i].len;
	wb_init(&w, f->body, sizeof(f->body));
	if (proto_ioreq_encode(&w, op, &q) < 0 || w.err)
		abort();
	f->r.conn = fake_conn;
	f->r.hdr.op = op;
	f->r.hdr.bulk_len = op == PROTO_OP_IO_WRITE ? tot : 0;
	f->r.hdr.aux = op == PROTO_OP_IO_READ ? tot : 0;
	f->r.body = f->body;
	f->r.body_len = (uint32_t)w.len;
	f->wdata = wdata;
	f->rmem = rmem;
	return f;
}

/* Run deferred resumes and complete pending transfers (pick: 0 = FIFO,
 * 1 = LIFO, 2 = random) until nothing is left. */
static void drain(int pick)
{
	for (;;) {
		ev_run(loop, EVRUN_NOWAIT);
		if (!npending) {
			ev_run(loop, EVRUN_NOWAIT);
			if (!npending)
				break;
		}
		int i = pick == 0 ? 0 : pick == 1 ? npending - 1 : rand() % npending;
		/* Keep per-request order: take the oldest of that request. */
		for (int j = 0; j < i; j++)
			if (pending[j]->f == pending[i]->f && pending[j]->push == pending[i]->push) {
				i = j;
				break;
			}
		struct xfer *x = pending[i];
		memmove(&pending[i], &pending[i + 1], sizeof(*pending) * (npending - i - 1));
		npending--;
		xfer_complete(x);
	}
}

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

static unsigned pool_free_total(void)
{
	unsigned n = 0;

	for (unsigned z = 0; z < IOD_BUF_NZONES; z++)
		n += iod_buf_nfree(pool, z);
	return n;
}

/* N concurrent write+read round trips of len bytes in 3 segments each. */
static void round_trips(int n, size_t len, int pick)
{
	struct proto_seg segs[3] = { { 5, len / 3 }, { len, len / 3 },
				     { 3 * len, len - 2 * (len / 3) } };
	uint8_t *src = malloc(len);
	struct fake *w[16], *r[16];
	uint8_t *dst[16];

	fill(src, len, (uint32_t)len + (uint32_t)pick);
	for (int i = 0; i < n; i++) {
		w[i] = mkreq(PROTO_OP_IO_WRITE, 100 + i, segs, 3, src, NULL);
		iod_ops_handle(&w[i]->r, ops);
	}
	if (!mode_sync && n > 3) {
		int waiting = 0;
		for (int i = 0; i < n; i++)
			waiting += !w[i]->pulls_out;
		CHECK(waiting > 0); /* the pool ran dry: some queued for buffers */
	}
	drain(pick);
	for (int i = 0; i < n; i++) {
		CHECK(w[i]->replied && w[i]->status == 0);
		dst[i] = calloc(1, len);
		r[i] = mkreq(PROTO_OP_IO_READ, 100 + i, segs, 3, NULL, dst[i]);
		iod_ops_handle(&r[i]->r, ops);
	}
	drain(pick);
	for (int i = 0; i < n; i++) {
		CHECK(r[i]->replied && r[i]->status == 0);
		CHECK(memcmp(dst[i], src, len) == 0);
		CHECK(r[i]->max_pushes_out <= 2);
		if (!mode_sync && n == 1 && len > 4 * MiB)
			CHECK(r[i]->max_pushes_out == 2); /* double buffered */
		free(dst[i]);
		free(w[i]);
		free(r[i]);
	}
	free(src);
}

/* The store's space calls on a file system without ZERO_RANGE: tmpfs
 * (/dev/shm) gets a punch plus an allocation, with ZERO_RANGE's result. */
static void test_store_space_tmpfs(void)
{
	char dir[] = "/dev/shm/test_iod_ops.XXXXXX", cmd[128];
	const uint32_t keep = PROTO_FALLOC_KEEP_SIZE;
	uint8_t src[65536], dst[65536];
	struct iod_store *st;
	uint64_t v, b0;

	if (!mkdtemp(dir) || iod_store_open(&st, dir, 4)) {
		CHECK(!"tmpfs store");
		return;
	}
	fill(src, sizeof(src), 5);
	CHECK(iod_store_write(st, 9, 0, src, sizeof(src)) == 0);
	CHECK(iod_store_blocks(st, 9, &b0) == 0 && b0 >= sizeof(src) / 512);
	/* zero 4 KiB inside, keeping the size: zeros, no size change */
	CHECK(iod_store_fallocate(st, 9, PROTO_FALLOC_ZERO_RANGE | keep, 8192,
				  4096) == 0);
	memset(src + 8192, 0, 4096);
	CHECK(iod_store_read(st, 9, 0, dst, sizeof(dst)) == 0);
	CHECK(memcmp(src, dst, sizeof(dst)) == 0);
	/* allocated, never written: tmpfs (like ext4) reports a hole */
	CHECK(iod_store_seek(st, 9, 0, 1, &v) == 0 && v == 8192);
	CHECK(iod_store_seek(st, 9, 8192, 0, &v) == 0 && v == 12288);
	/* zero past the end without KEEP_SIZE: the object grows, allocated */
	CHECK(iod_store_fallocate(st, 9, PROTO_FALLOC_ZERO_RANGE, 61440,
				  65536) == 0);
	CHECK(iod_store_blocks(st, 9, &v) == 0 && v >= 126976 / 512);
	CHECK(iod_store_read(st, 9, 0, dst, sizeof(dst)) == 0);
	memset(src + 61440, 0, 4096);
	CHECK(memcmp(src, dst, sizeof(dst)) == 0);
	/* punch: a hole that seek finds */
	CHECK(iod_store_fallocate(st, 9, PROTO_FALLOC_PUNCH_HOLE | keep, 16384,
				  8192) == 0);
	CHECK(iod_store_seek(st, 9, 12288, 1, &v) == 0 && v == 16384);
	CHECK(iod_store_seek(st, 9, 16384, 0, &v) == 0 && v == 24576);
	CHECK(iod_store_seek(st, 9, 1 << 20, 0, &v) == -ENXIO);
	iod_store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "note: could not remove %s\n", dir);
}

/* ------------------------------------------------------------------ scrub */

/* Send one IO_LIST / IO_CSUM (or other small) request to h through the
 * fake and return it replied (the caller frees it): worker ops reply from
 * the loop once their completion comes back, so run it until then. */
static struct fake *scrub_req(struct iod_ops *h, uint16_t op,
			      const struct proto_ioreq *q)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct wbuf w;

	wb_init(&w, f->body, sizeof(f->body));
	if (proto_ioreq_encode(&w, op, q) < 0)
		abort();
	f->r.conn = fake_conn;
	f->r.hdr.op = op;
	f->r.body = f->body;
	f->r.body_len = (uint32_t)w.len;
	iod_ops_handle(&f->r, h);
	for (int i = 0; i < 10000 && !f->replied; i++) {
		ev_run(loop, EVRUN_NOWAIT);
		if (!f->replied)
			usleep(1000);
	}
	CHECK(f->replied && !f->rejected);
	return f;
}

/* Put a file named name (relative to objects/) into the store's directory:
 * something that is not an object the listing must skip. */
static void put_foreign(const char *dir, const char *sub, const char *name)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/objects/%s", dir, sub);
	(void)mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/objects/%s/%s", dir, sub, name);
	FILE *fp = fopen(p, "w");
	if (fp)
		fclose(fp);
}

/* IO_LIST and IO_CSUM: the store's walk in cursor order with pagination,
 * foreign files skipped; the checksum against iod_crc32c with zeros past
 * the end; both through the handler too. */
static void test_scrub(void)
{
	/* in cursor order: bucket (ino & 0xffff), then ino */
	static const uint64_t want[] = { 1, 0x10001, 0x20001, 7, 0x100, 0x1ff,
					 0xffff, 0x5ffff };
	static const uint64_t put_order[] = { 0x10001, 0x5ffff, 1, 0x20001, 0x100,
					      0xffff, 0x1ff, 7 };
	static struct proto_obj objs[PROTO_MAX_LIST];
	static struct proto_iolist l;
	static uint8_t data[10000], buf[4096], exp[15000];
	struct iod_buf_config bc = { { 1, 1, 0, 0, 0, 1 } };
	char dir[] = "/tmp/test_iod_scrub.XXXXXX";
	struct proto_cursor cur = { 0, 0 }, next;
	struct iod_scan scan = { 0 };
	struct iod_buf_pool *p2;
	struct iod_store *st;
	struct iod_ops *h;
	uint64_t got[16], size;
	uint32_t n, ngot = 0, crc, calls = 0;
	const char *why;
	struct fake *f;

	CHECK(iod_crc32c(0, "123456789", 9) == 0xe3069283u);
	CHECK(iod_crc32c(iod_crc32c(0, "1234", 4), "56789", 5) == 0xe3069283u);
	CHECK(iod_crc32c(0, "", 0) == 0);
	if (!mkdtemp(dir) || iod_store_open(&st, dir, 4) ||
	    iod_buf_pool_new(&p2, &bc) || iod_ops_new(&h, loop, st, p2))
		abort();
	for (size_t i = 0; i < sizeof(put_order) / sizeof(put_order[0]); i++)
		CHECK(iod_store_write(st, put_order[i], 0, data,
				      (size_t)(put_order[i] % 5000) + 1) == 0);
	put_foreign(dir, "01/00", "notanobject");
	put_foreign(dir, "01/00", "0000000000000000");      /* ino 0 */
	put_foreign(dir, "02/00", "0000000000000001");      /* wrong bucket */
	put_foreign(dir, "01/00", "00000000000000010");     /* 17 digits */

	/* pages of 3: every object once, in order, with its size */
	do {
		CHECK(iod_store_list(st, &scan, cur, 3, objs, &n, &next) == 0);
		CHECK(n <= 3);
		for (uint32_t i = 0; i < n && ngot < 16; i++) {
			CHECK(objs[i].size == objs[i].ino % 5000 + 1);
			CHECK(objs[i].mtime > 0);
			got[ngot++] = objs[i].ino;
		}
		cur = next;
		calls++;
	} while (cur.bucket != PROTO_LIST_END && calls < 1000);
	CHECK(cur.after == 0);
	CHECK(ngot == 8 && !memcmp(got, want, sizeof(want)));
	/* one directory budget (4096 buckets) per call: 16 calls at least */
	CHECK(calls >= 16);
	/* resuming inside a bucket */
	cur = (struct proto_cursor){ 1, 1 };
	CHECK(iod_store_list(st, &scan, cur, 2, objs, &n, &next) == 0);
	CHECK(n == 2 && objs[0].ino == 0x10001 && objs[1].ino == 0x20001);
	CHECK(next.bucket == 2 && next.after == 0); /* bucket 1 is done */
	CHECK(iod_store_list(st, &scan, cur, 1, objs, &n, &next) == 0);
	CHECK(n == 1 && objs[0].ino == 0x10001);
	CHECK(next.bucket == 1 && next.after == 0x10001); /* 0x20001 is left */
	CHECK(iod_store_list(st, &scan, (struct proto_cursor){ PROTO_LIST_END + 1, 0 },
			     2, objs, &n, &next) == -EINVAL);

	/* checksums: whole object, a range past its end, chunked reads */
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 3);
	CHECK(iod_store_write(st, 42, 0, data, sizeof(data)) == 0);
	CHECK(iod_store_csum(st, 42, 0, sizeof(data), buf, sizeof(buf), &crc,
			     &size) == 0);
	CHECK(size == sizeof(data) && crc == iod_crc32c(0, data, sizeof(data)));
	memcpy(exp, data + 5000, 5000); /* exp[5000..] stays zero */
	CHECK(iod_store_csum(st, 42, 5000, sizeof(exp), buf, sizeof(buf), &crc,
			     &size) == 0);
	CHECK(crc == iod_crc32c(0, exp, sizeof(exp)));
	CHECK(iod_store_csum(st, 4242, 0, 10, buf, sizeof(buf), &crc, &size) ==
	      -ENOENT);
	iod_scan_release(&scan);

	/* through the handler */
	mode_sync = 1;
	f = scrub_req(h, PROTO_OP_IO_CSUM,
		      &(struct proto_ioreq){ .ino = 42, .off = 5000,
					     .len = sizeof(exp) });
	struct proto_csum cs;
	CHECK(f->status == 0 && proto_csum_decode(f->rep, f->rep_len, &cs, &why) == 0);
	CHECK(cs.crc == iod_crc32c(0, exp, sizeof(exp)) && cs.size == sizeof(data));
	free(f);
	f = scrub_req(h, PROTO_OP_IO_CSUM, &(struct proto_ioreq){ .ino = 4242,
								  .off = 0, .len = 1 });
	CHECK(f->status == -ENOENT && f->rep_len == 0);
	free(f);
	f = scrub_req(h, PROTO_OP_IO_LIST,
		      &(struct proto_ioreq){ .cursor = { 0, 0 }, .max = 3 });
	CHECK(f->status == 0 && proto_iolist_decode(f->rep, f->rep_len, &l, &why) == 0);
	CHECK(l.n == 3 && !l.eof && l.objs[0].ino == 1 && l.objs[2].ino == 0x20001);
	CHECK(l.next.bucket == 2 && l.next.after == 0);
	free(f);
	/* a client's key may not list, checksum or fence */
	fake_privileged = 0;
	f = scrub_req(h, PROTO_OP_IO_CSUM, &(struct proto_ioreq){ .ino = 42,
								  .off = 0, .len = 1 });
	CHECK(f->status == -EPERM && f->rep_len == 0);
	free(f);
	f = scrub_req(h, PROTO_OP_IO_LIST,
		      &(struct proto_ioreq){ .cursor = { 0, 0 }, .max = 3 });
	CHECK(f->status == -EPERM && f->rep_len == 0);
	free(f);
	f = calloc(1, sizeof(*f)); /* IO_FENCE: refused before its body is read */
	f->r.conn = fake_conn;
	f->r.hdr.op = PROTO_OP_IO_FENCE;
	f->r.body = f->body;
	iod_ops_handle(&f->r, h);
	CHECK(f->replied && f->status == -EPERM && f->rep_len == 0);
	free(f);
	fake_privileged = 1;
	CHECK(bad_calls == 0);

	iod_ops_free(h);
	iod_store_close(st);
	iod_buf_pool_free(p2);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "note: could not remove %s\n", dir);
}

/* ---------------------------------------------------------- worker ops */

/*
 * More worker ops at once than the pool's queue holds: IOD_WORK_THREADS
 * fsyncs of object 32, which the test hook holds 300 ms, so every worker
 * is busy; then 400 IO_FSYNC and 8 IO_CSUM of object 31. None is answered
 * inside the handler call (the disk call is a worker's); the ones the
 * queue has no room for wait in the backlog and all are answered, 0, once
 * the loop runs.
 */
static void test_worker_backlog(void)
{
	enum { NH = IOD_WORK_THREADS, NF = NH + 400, NC = 8 };
	static struct fake *f[NF + NC];
	uint8_t data[4096];
	struct proto_seg seg = { 0, sizeof(data) };
	struct fake *w;
	struct proto_csum cs;
	const char *why;
	int replied = 0, early = 0;

	CHECK(NF - NH > IOD_WORK_QUEUE);
	mode_sync = 1;
	fill(data, sizeof(data), 5);
	for (uint64_t ino = 31; ino <= 32; ino++) {
		w = mkreq(PROTO_OP_IO_WRITE, ino, &seg, 1, data, NULL);
		iod_ops_handle(&w->r, ops);
		CHECK(w->replied && w->status == 0);
		free(w);
	}
	CHECK(iod_ops_test_fsync_delay(ops, 300, 32) == 0);
	for (int i = 0; i < NF + NC; i++) {
		struct proto_ioreq q = { .ino = i < NH ? 32 : 31,
					 .len = sizeof(data) };
		uint16_t op = i < NF ? PROTO_OP_IO_FSYNC : PROTO_OP_IO_CSUM;
		struct wbuf wb;

		f[i] = calloc(1, sizeof(*f[i]));
		wb_init(&wb, f[i]->body, sizeof(f[i]->body));
		if (proto_ioreq_encode(&wb, op, &q) < 0)
			abort();
		f[i]->r.conn = fake_conn;
		f[i]->r.hdr.op = op;
		f[i]->r.body = f[i]->body;
		f[i]->r.body_len = (uint32_t)wb.len;
		iod_ops_handle(&f[i]->r, ops);
		early += f[i]->replied;
	}
	CHECK(early == 0);
	for (int k = 0; k < 20000 && replied < NF + NC; k++) {
		ev_run(loop, EVRUN_NOWAIT);
		replied = 0;
		for (int i = 0; i < NF + NC; i++)
			replied += f[i]->replied;
		if (replied < NF + NC)
			usleep(1000);
	}
	CHECK_EQ(replied, NF + NC);
	CHECK(iod_ops_test_fsync_delay(ops, 0, 0) == 0); /* workers idle */
	for (int i = 0; i < NF + NC; i++) {
		CHECK(f[i]->status == 0 && !f[i]->rejected);
		if (i >= NF) {
			CHECK(proto_csum_decode(f[i]->rep, f[i]->rep_len, &cs,
						&why) == 0);
			CHECK(cs.crc == iod_crc32c(0, data, sizeof(data)) &&
			      cs.size == sizeof(data));
		}
		free(f[i]);
	}
}

/* ----------------------------------------------------------------- fence */

/*
 * A fresh handler holds no lease: a mirrored IO_READ or IO_SEEK is answered
 * -ESTALE at once, with no buffer taken, nothing pushed and the memory
 * untouched; the same requests without the flag are served. IO_FENCE
 * bodies are iod_fence's: a malformed one is rejected.
 */
static void test_fence_gate(unsigned start_free)
{
	size_t len = 256 * KiB;
	uint8_t *src = malloc(len), *dst = malloc(len);
	struct proto_seg seg = { 0, len };
	struct fake *f;

	mode_sync = 1;
	fill(src, len, 11);
	f = mkreq(PROTO_OP_IO_WRITE, 900, &seg, 1, src, NULL);
	iod_ops_handle(&f->r, ops);
	CHECK(f->replied && f->status == 0);
	free(f);
	for (int flagged = 1; flagged >= 0; flagged--) {
		struct proto_ioreq q = { .ino = 900, .nsegs = 1, .segs = &seg,
					 .flags = flagged ? PROTO_IO_MIRROR : 0 };
		struct wbuf w;

		memset(dst, 0xee, len);
		f = mkreq(PROTO_OP_IO_READ, 900, &seg, 1, NULL, dst);
		wb_init(&w, f->body, sizeof(f->body));
		CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_READ, &q) == 0);
		f->r.body_len = (uint32_t)w.len;
		iod_ops_handle(&f->r, ops);
		CHECK(f->replied && !f->rejected);
		CHECK(f->status == (flagged ? -ESTALE : 0));
		CHECK(flagged ? f->nxfer == 0 : f->nxfer > 0);
		CHECK(flagged ? dst[0] == 0xee && dst[len - 1] == 0xee :
				memcmp(dst, src, len) == 0);
		CHECK(pool_free_total() == start_free);
		free(f);
		q = (struct proto_ioreq){ .ino = 900, .size = 0,
					  .flags = flagged ? PROTO_IO_MIRROR : 0 };
		f = scrub_req(ops, PROTO_OP_IO_SEEK, &q);
		CHECK(f->status == (flagged ? -ESTALE : 0));
		free(f);
	}
	f = calloc(1, sizeof(*f));
	f->r.conn = fake_conn;
	f->r.hdr.op = PROTO_OP_IO_FENCE;
	f->r.body = f->body; /* 32 zero bytes: seq 0 */
	f->r.body_len = 32;
	iod_ops_handle(&f->r, ops);
	CHECK(f->rejected);
	free(f);
	free(src);
	free(dst);
}

int main(void)
{
	char dir[] = "/tmp/test_iod_ops.XXXXXX";
	struct iod_buf_config bc = { { 1, 1, 0, 0, 0, 1 } };
	struct iod_store *st;
	unsigned start_free;

	if (!mkdtemp(dir))
		return 1;
	loop = ev_default_loop(0);
	if (iod_buf_pool_new(&pool, &bc) || iod_store_open(&st, dir, 4) ||
	    iod_ops_new(&ops, loop, st, pool))
		return 1;
	start_free = pool_free_total();

	/* Synchronous completions, one request and many (pool of 3). */
	mode_sync = 1;
	round_trips(1, 8 * MiB + 12345, 0);
	round_trips(6, 3 * MiB, 0);
	round_trips(3, 1000, 0);
	CHECK(pool_free_total() == start_free);

	/* Deferred completions, FIFO, LIFO and random interleavings. */
	mode_sync = 0;
	round_trips(1, 8 * MiB + 1, 0);
	round_trips(5, 2 * MiB + 7, 1);
	srand(3);
	for (int k = 0; k < 5; k++)
		round_trips(8, 300 * KiB + (size_t)k * 77777, 2);
	CHECK(pool_free_total() == start_free);

	/* A transfer fails mid-way: the handler replies (frees) and returns
	 * its buffers; the next request is fine. */
	for (int sync = 0; sync < 2; sync++) {
		mode_sync = sync;
		size_t len = 6 * MiB;
		uint8_t *src = malloc(len), *dst = malloc(len);
		struct proto_seg seg = { 0, len };
		fill(src, len, 9);
		struct fake *f = mkreq(PROTO_OP_IO_WRITE, 7, &seg, 1, src, NULL);
		f->fail_at = 2;
		iod_ops_handle(&f->r, ops);
		drain(0);
		CHECK(f->replied && f->status == -EIO);
		struct fake *g = mkreq(PROTO_OP_IO_READ, 7, &seg, 1, NULL, dst);
		g->fail_at = 2;
		iod_ops_handle(&g->r, ops);
		drain(0);
		CHECK(g->replied && g->status == -EIO);
		CHECK(pool_free_total() == start_free);
		free(f);
		free(g);
		free(src);
		free(dst);
	}

	/* Malformed body: rejected. Unknown op: -EOPNOTSUPP. */
	mode_sync = 1;
	struct fake *m = calloc(1, sizeof(*m));
	memset(m->body, 0xff, 32);
	m->r.conn = fake_conn;
	m->r.hdr.op = PROTO_OP_IO_WRITE;
	m->r.hdr.bulk_len = 100;
	m->r.body = m->body;
	m->r.body_len = 32;
	iod_ops_handle(&m->r, ops);
	CHECK(m->rejected);
	memset(m, 0, sizeof(*m));
	m->r.conn = fake_conn;
	m->r.hdr.op = PROTO_OP_LOOKUP;
	m->r.body = m->body;
	iod_ops_handle(&m->r, ops);
	CHECK(m->replied && !m->rejected && m->status == -EOPNOTSUPP);
	free(m);

	test_fence_gate(start_free);
	test_worker_backlog();
	test_scrub();
	iod_ops_free(ops);
	iod_store_close(st);
	iod_buf_pool_free(pool);
	CHECK(bad_calls == 0);
	test_store_space_tmpfs();
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "note: could not remove %s\n", dir);
	if (failures) {
		fprintf(stderr, "test_iod_ops: %d failures\n", failures);
		return 1;
	}
	printf("test_iod_ops: ok\n");
	return 0;
}
