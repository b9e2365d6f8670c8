/*
 * cli_io.c - the client request engine for data: stripe a range, build one
 * list request per iod, submit to all, wait for all.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_io.h"
#include "log.h"
#include "stripe.h"

/* Pieces handled per pass: a 1 MiB FUSE request at a 4 KiB unit needs 257. */
#define IO_MAX_PIECES 512
#define IO_BODY_HDR 64 /* fixed part of an encoded ioreq, generously */
#define IO_REP_CAP 256

/* One iod's sub-request of a call. */
struct io_sub {
	struct net_call call;
	uint16_t iod;      /* iod table index */
	int submitted;     /* call is in flight and must be waited for */
	int rc;            /* 0 or -errno of this sub-request */
	uint32_t seg0, nsegs, iov0, niov;
	uint64_t bytes;    /* data bytes moved by this sub-request */
	uint8_t rep[IO_REP_CAP];
};

/* Per-thread engine state, allocated once per thread (about 90 KiB). */
struct io_tls {
	struct stripe_piece pieces[IO_MAX_PIECES];
	struct proto_seg segs[IO_MAX_PIECES];
	struct iovec iov[IO_MAX_PIECES];
	struct io_sub subs[PROTO_MAX_IODS];
	uint8_t body[IO_MAX_PIECES * sizeof(struct proto_seg) * 2 +
		     PROTO_MAX_IODS * IO_BODY_HDR];
};

static pthread_key_t io_key;
static pthread_once_t io_once = PTHREAD_ONCE_INIT;
static __thread struct io_tls *io_cur;

/* Thread-exit destructor of the engine state. */
static void io_tls_free(void *p)
{
	free(p);
}

/* Create the key whose destructor frees a thread's engine state. */
static void io_key_init(void)
{
	(void)pthread_key_create(&io_key, io_tls_free);
}

/* The calling thread's engine state, allocated on first use. */
static struct io_tls *io_tls_get(void)
{
	if (io_cur)
		return io_cur;
	pthread_once(&io_once, io_key_init);
	io_cur = malloc(sizeof(*io_cur));
	if (io_cur)
		(void)pthread_setspecific(io_key, io_cur);
	return io_cur;
}

/* Short verb of an op for log lines. */
static const char *op_verb(uint16_t op)
{
	switch (op) {
	case PROTO_OP_IO_READ: return "read";
	case PROTO_OP_IO_WRITE: return "write";
	case PROTO_OP_IO_TRUNCATE: return "truncate";
	case PROTO_OP_IO_REMOVE: return "remove";
	case PROTO_OP_IO_FSYNC: return "fsync";
	default: return proto_op_name(op);
	}
}

/* CLOCK_MONOTONIC in nanoseconds. */
static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whether an iod timed out recently enough that calls to it fail at once.
 * Cost: one atomic load while the iod is healthy. */
static int iod_held_down(struct cli_fs *fs, uint16_t iod)
{
	struct cli_iod *d = &fs->iods[iod];

	if (!atomic_load_explicit(&d->failing, memory_order_relaxed))
		return 0;
	return mono_ns() < atomic_load_explicit(&d->down_until_ns,
						 memory_order_relaxed);
}

/* Record a transport failure of an iod: log once per burst, return -EIO.
 * A timeout holds the iod down for one timeout period. */
static int iod_fail(struct cli_fs *fs, uint16_t iod, uint16_t op, int rc)
{
	struct cli_iod *d = &fs->iods[iod];

	if (rc == -ETIMEDOUT)
		atomic_store(&d->down_until_ns,
			     mono_ns() + (uint64_t)fs->timeout_ms * 1000000ull);
	if (atomic_exchange(&d->failing, 1) == 0)
		log_warn("iod %u (%s:%u): %s failed: %s", iod, d->host,
			 d->port, op_verb(op), strerror(-rc));
	return -EIO;
}

/* Record a success of an iod, ending a failure burst. */
static void iod_ok(struct cli_fs *fs, uint16_t iod)
{
	struct cli_iod *d = &fs->iods[iod];

	if (atomic_load_explicit(&d->failing, memory_order_relaxed) &&
	    atomic_exchange(&d->failing, 0))
		log_notice("iod %u (%s:%u): reachable again", iod, d->host,
			   d->port);
}

/* Turn an iod reply status into the call's result. */
static int status_rc(struct cli_fs *fs, uint16_t iod, uint16_t op, int32_t st)
{
	if (st > 0 || st < -4095) {
		log_warn("iod %u (%s:%u): %s: bad status %d", iod,
			 fs->iods[iod].host, fs->iods[iod].port, op_verb(op),
			 st);
		return -EIO;
	}
	return st;
}

/* Submit one prepared sub-request; a failure is recorded in s->rc. */
static void sub_submit(struct cli_fs *fs, struct io_sub *s)
{
	int rc;

	if (iod_held_down(fs, s->iod)) {
		s->rc = -EIO;
		return;
	}
	rc = net_call_submit(fs->iods[s->iod].conn, &s->call);
	if (rc) {
		s->rc = iod_fail(fs, s->iod, s->call.op, rc);
		return;
	}
	s->submitted = 1;
}

/* Wait for one submitted sub-request and record its result in s->rc. */
static void sub_wait(struct cli_fs *fs, struct io_sub *s)
{
	int rc = net_call_wait(&s->call);

	s->submitted = 0;
	if (rc) {
		s->rc = iod_fail(fs, s->iod, s->call.op, rc);
		return;
	}
	iod_ok(fs, s->iod);
	s->rc = status_rc(fs, s->iod, s->call.op, s->call.status);
}

/*
 * One pass of a read or write over a range that needs at most
 * IO_MAX_PIECES pieces. Cost: O(pieces) CPU, one round trip to every iod
 * involved, in parallel.
 */
static int rw_pass(struct cli_fs *fs, struct io_tls *t, uint16_t op,
		   uint64_t ino, const struct proto_layout *l, uint64_t off,
		   size_t len, uint8_t *buf)
{
	uint32_t cnt[PROTO_MAX_IODS];
	uint32_t run = 0;
	size_t n = 0, body_off = 0;
	int rc;

	rc = stripe_map(l, fs->niods, off, len, t->pieces, IO_MAX_PIECES, &n);
	if (rc)
		return rc;
	/* counting sort of the pieces by file-relative iod */
	memset(cnt, 0, sizeof(cnt[0]) * l->count);
	for (size_t i = 0; i < n; i++)
		cnt[t->pieces[i].k]++;
	for (uint16_t k = 0; k < l->count; k++) {
		struct io_sub *s = &t->subs[k];

		s->seg0 = s->iov0 = run;
		s->nsegs = s->niov = 0;
		s->bytes = 0;
		s->rc = 0;
		s->submitted = 0;
		s->iod = (uint16_t)((l->first + k) % fs->niods);
		run += cnt[k];
	}
	for (size_t i = 0; i < n; i++) {
		const struct stripe_piece *p = &t->pieces[i];
		struct io_sub *s = &t->subs[p->k];
		struct proto_seg *sg = &t->segs[s->seg0 + s->nsegs];
		struct iovec *v = &t->iov[s->iov0 + s->niov];
		uint8_t *mem = buf + p->buf_off;

		if (s->nsegs && sg[-1].off + sg[-1].len == p->local_off)
			sg[-1].len += p->len;
		else {
			sg->off = p->local_off;
			sg->len = p->len;
			s->nsegs++;
		}
		if (s->niov && (uint8_t *)v[-1].iov_base + v[-1].iov_len == mem)
			v[-1].iov_len += p->len;
		else {
			v->iov_base = mem;
			v->iov_len = p->len;
			s->niov++;
		}
		s->bytes += p->len;
	}
	/* encode and submit every sub-request before waiting for any */
	for (uint16_t k = 0; k < l->count; k++) {
		struct io_sub *s = &t->subs[k];
		struct proto_ioreq q = { .ino = ino };
		struct wbuf w;
		size_t cap = IO_BODY_HDR + s->nsegs * sizeof(struct proto_seg) * 2;

		if (!s->nsegs)
			continue;
		q.nsegs = s->nsegs;
		q.segs = &t->segs[s->seg0];
		wb_init(&w, t->body + body_off, cap);
		rc = proto_ioreq_encode(&w, op, &q);
		if (rc) {
			s->rc = rc;
			break;
		}
		memset(&s->call, 0, sizeof(s->call));
		s->call.op = op;
		s->call.body = t->body + body_off;
		s->call.body_len = (uint32_t)w.len;
		body_off += cap;
		if (op == PROTO_OP_IO_READ) {
			s->call.rd_iov = &t->iov[s->iov0];
			s->call.rd_cnt = (int)s->niov;
		} else {
			s->call.wr_iov = &t->iov[s->iov0];
			s->call.wr_cnt = (int)s->niov;
		}
		s->call.rep_buf = s->rep;
		s->call.rep_cap = IO_REP_CAP;
		sub_submit(fs, s);
	}
	rc = 0;
	for (uint16_t k = 0; k < l->count; k++) {
		struct io_sub *s = &t->subs[k];

		if (s->submitted)
			sub_wait(fs, s);
		if (op == PROTO_OP_IO_READ && s->nsegs && s->rc == 0 &&
		    s->call.rd_bytes != s->bytes) {
			log_warn("iod %u (%s:%u): read returned %llu of %llu bytes",
				 s->iod, fs->iods[s->iod].host,
				 fs->iods[s->iod].port,
				 (unsigned long long)s->call.rd_bytes,
				 (unsigned long long)s->bytes);
			s->rc = -EIO;
		}
		if (s->rc && !rc)
			rc = s->rc;
	}
	return rc;
}

/* Read or write a range of any length in passes of at most IO_MAX_PIECES. */
static int rw(struct cli_fs *fs, uint16_t op, uint64_t ino,
	      const struct proto_layout *l, uint64_t off, size_t len,
	      uint8_t *buf)
{
	struct io_tls *t;
	int rc;

	if (stripe_layout_check(l, fs->niods))
		return -EINVAL;
	if (off + len < off)
		return -EINVAL;
	t = io_tls_get();
	if (!t)
		return -ENOMEM;
	while (len > 0) {
		uint64_t maxlen = (uint64_t)(IO_MAX_PIECES - 1) * l->unit -
				  off % l->unit;
		size_t chunk = len < maxlen ? len : (size_t)maxlen;

		rc = rw_pass(fs, t, op, ino, l, off, chunk, buf);
		if (rc)
			return rc;
		off += chunk;
		buf += chunk;
		len -= chunk;
	}
	return 0;
}

/* Read: see cli_io.h. */
int cli_io_read(struct cli_fs *fs, uint64_t ino, const struct proto_layout *l,
		uint64_t off, size_t len, void *buf)
{
	return rw(fs, PROTO_OP_IO_READ, ino, l, off, len, buf);
}

/* Write: see cli_io.h. The buffer is only read (the iod pulls from it). */
int cli_io_write(struct cli_fs *fs, uint64_t ino, const struct proto_layout *l,
		 uint64_t off, size_t len, const void *buf)
{
	return rw(fs, PROTO_OP_IO_WRITE, ino, l, off, len, (uint8_t *)buf);
}

/*
 * Send op to every iod of the layout at once and wait for all. For
 * IO_TRUNCATE size is the file size (each iod gets its local share).
 * Cost: one parallel round trip.
 */
static int fanout(struct cli_fs *fs, uint16_t op, uint64_t ino,
		  const struct proto_layout *l, uint64_t size, uint32_t flags)
{
	struct io_tls *t;
	int rc = 0;

	if (stripe_layout_check(l, fs->niods))
		return -EINVAL;
	t = io_tls_get();
	if (!t)
		return -ENOMEM;
	for (uint16_t k = 0; k < l->count; k++) {
		struct io_sub *s = &t->subs[k];
		struct proto_ioreq q = { .ino = ino, .flags = flags };
		uint8_t *body = t->body + (size_t)k * IO_BODY_HDR;
		struct wbuf w;

		s->iod = (uint16_t)((l->first + k) % fs->niods);
		s->submitted = 0;
		s->rc = 0;
		if (op == PROTO_OP_IO_TRUNCATE)
			q.size = stripe_local_size(l, k, size);
		wb_init(&w, body, IO_BODY_HDR);
		s->rc = proto_ioreq_encode(&w, op, &q);
		if (s->rc)
			continue;
		memset(&s->call, 0, sizeof(s->call));
		s->call.op = op;
		s->call.body = body;
		s->call.body_len = (uint32_t)w.len;
		s->call.rep_buf = s->rep;
		s->call.rep_cap = IO_REP_CAP;
		sub_submit(fs, s);
	}
	for (uint16_t k = 0; k < l->count; k++) {
		struct io_sub *s = &t->subs[k];

		if (s->submitted)
			sub_wait(fs, s);
		if (op == PROTO_OP_IO_REMOVE && s->rc == -ENOENT)
			s->rc = 0;
		if (s->rc && !rc)
			rc = s->rc;
	}
	return rc;
}

/* Truncate: see cli_io.h. */
int cli_io_truncate(struct cli_fs *fs, uint64_t ino,
		    const struct proto_layout *l, uint64_t size)
{
	return fanout(fs, PROTO_OP_IO_TRUNCATE, ino, l, size, 0);
}

/* Remove: see cli_io.h. */
int cli_io_remove(struct cli_fs *fs, uint64_t ino,
		  const struct proto_layout *l)
{
	return fanout(fs, PROTO_OP_IO_REMOVE, ino, l, 0, 0);
}

/* Fsync: see cli_io.h. */
int cli_io_fsync(struct cli_fs *fs, uint64_t ino, const struct proto_layout *l,
		 int datasync)
{
	return fanout(fs, PROTO_OP_IO_FSYNC, ino, l, 0, datasync ? 1 : 0);
}
