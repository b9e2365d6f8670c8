/*
 * cli_io.c - the client request engine for data: stripe a file list, build
 * one list request per iod (its file segments and its memory segments),
 * submit to all, wait for all; in rounds when the lists are long. The
 * contiguous read and write are its one-segment case.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_io.h"
#include "cli_mirror.h"
#include "log.h"
#include "stripe.h"

/*
 * Bounds of one round of a list call. A round stages at most IO_MAX_CHUNKS
 * file pieces and IO_MAX_IOV memory pieces over all iods, and at most
 * PROTO_MAX_SEGS / NET_MAX_IOV for any one iod (before merging); longer
 * lists take several rounds. A 1 MiB FUSE request at a 4 KiB unit needs 257
 * pieces: one round.
 */
#define IO_MAX_CHUNKS 2048
#define IO_MAX_IOV 2048
#define IO_MAP_PIECES 256 /* stripe_map() output per step */
#define IO_BODY_HDR 64 /* fixed part of an encoded ioreq, generously */
#define IO_REP_CAP 256

/* One iod's sub-request of a call. */
struct io_sub {
	struct net_call call;
	uint16_t iod;      /* iod table index */
	uint16_t alt;      /* mirror=2 read: the replica asked when iod fails */
	int submitted;     /* call is in flight and must be waited for */
	int rc;            /* 0 or -errno of this sub-request */
	uint32_t seg0, nsegs, iov0, niov;
	uint32_t cseg, ciov; /* staged (unmerged) pieces of this round */
	uint64_t bytes;    /* data bytes moved by this sub-request */
	uint8_t rep[IO_REP_CAP];
};

/* A staged file piece with its memory, in file-list order. */
struct io_chunk {
	uint16_t k;        /* file-relative iod */
	uint32_t iov0, niov; /* into io_tls.siov / salloc */
	uint64_t local_off, len;
};

/* Per-thread engine state, allocated once per thread (about 400 KiB, of
 * which a call touches only what it uses). */
struct io_tls {
	struct stripe_piece pieces[IO_MAP_PIECES];
	struct io_chunk chunks[IO_MAX_CHUNKS];
	struct iovec siov[IO_MAX_IOV];   /* staged memory, file-list order */
	struct iovec salloc[IO_MAX_IOV]; /* allocation of each siov */
	struct proto_seg segs[IO_MAX_CHUNKS]; /* grouped by iod, merged */
	struct iovec iov[IO_MAX_IOV];    /* grouped by iod, merged */
	struct iovec alloc[IO_MAX_IOV];  /* allocation of each iov */
	struct io_sub subs[2 * PROTO_MAX_IODS]; /* [count + k]: k's buddy */
	uint8_t body[IO_MAX_CHUNKS * sizeof(struct proto_seg) * 2 +
		     2 * PROTO_MAX_IODS * IO_BODY_HDR];
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
	case PROTO_OP_IO_REMOVE:
	case PROTO_OP_IO_REMOVE_MANY: return "remove";
	case PROTO_OP_IO_FSYNC: return "fsync";
	case PROTO_OP_IO_FALLOCATE: return "fallocate";
	case PROTO_OP_IO_SEEK: return "seek";
	case PROTO_OP_IO_BLOCKS: return "blocks";
	default: return proto_op_name(op);
	}
}

/* Record a transport failure of an iod: log once per burst, return -EIO.
 * A timeout holds the iod down for one timeout period. */
static int iod_fail(struct cli_fs *fs, uint16_t iod, uint16_t op, int rc)
{
	struct cli_iod *d = &fs->iods[iod];

	if (rc == -ETIMEDOUT)
		atomic_store(&d->down_until_ns,
			     cli_mono_ns() + (uint64_t)fs->timeout_ms * 1000000ull);
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

	if (cli_iod_held_down(fs, s->iod)) {
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

/* Cursor of a list call: where the next round starts in each list. */
struct io_cursor {
	size_t fi;         /* file segment index */
	uint64_t fo;       /* bytes of it done */
	size_t mi;         /* memory segment index */
	size_t mo;         /* bytes of it consumed */
};

/* Start a round: reset every sub-request of the layout (for mirror=2
 * also the buddies' subs[count + k]). */
static void round_reset(struct cli_fs *fs, struct io_tls *t,
			const struct proto_layout *l)
{
	for (uint32_t j = 0; j < (uint32_t)l->count * cli_mirror_n(l); j++) {
		struct io_sub *s = &t->subs[j];

		s->cseg = s->ciov = 0;
		s->nsegs = s->niov = 0;
		s->bytes = 0;
		s->rc = 0;
		s->submitted = 0;
		s->iod = cli_mirror_iod(fs, l, (uint16_t)(j % l->count),
					(int)(j / l->count));
	}
}

/*
 * The result of one piece written to both replicas (a, b: results and
 * iods). Both fine: 0. One failed with -EIO (the iod is down or lost the
 * data) and the other fine: the failed replica is recorded stale at the
 * mgr first, then 0; if that fails, -EIO. Any other error (-ENOSPC,
 * -EDQUOT, -EFBIG, -EINVAL) is the writer's even if the buddy has the data.
 * Both failed: the first error that is not -EIO, else -EIO.
 */
static int pair_rc(struct cli_fs *fs, uint64_t ino, int a, uint16_t a_iod,
		   int b, uint16_t b_iod)
{
	if (!a)
		cli_mirror_forget(fs, ino, a_iod);
	if (!b)
		cli_mirror_forget(fs, ino, b_iod);
	if (!a && !b)
		return 0;
	if (a && b)
		return a != -EIO ? a : b;
	if ((a ? a : b) != -EIO)
		return a ? a : b;
	return cli_mirror_mark_stale(fs, ino, a ? a_iod : b_iod) ? -EIO : 0;
}

/*
 * Stage one stripe piece: record it as a chunk and cut its memory out of
 * the memory list at the cursor. Stops early when an iovec budget (whole
 * round or this iod) runs out. Returns the bytes staged (0: none fit, the
 * round is full). Cost: O(memory segments spanned).
 */
static uint64_t stage_piece(struct io_tls *t, size_t *nchunks, size_t *nsiov,
			    const struct stripe_piece *p,
			    const struct iovec *mem, const struct iovec *allocs,
			    struct io_cursor *cur)
{
	struct io_sub *s = &t->subs[p->k];
	struct io_chunk *c;
	uint64_t done = 0;

	if (*nchunks >= IO_MAX_CHUNKS || s->cseg >= PROTO_MAX_SEGS)
		return 0;
	c = &t->chunks[*nchunks];
	c->k = p->k;
	c->local_off = p->local_off;
	c->iov0 = (uint32_t)*nsiov;
	c->niov = 0;
	while (done < p->len) {
		const struct iovec *m = &mem[cur->mi];
		size_t avail = m->iov_len - cur->mo;
		uint64_t want = p->len - done;
		size_t take = want < avail ? (size_t)want : avail;

		if (avail == 0) { /* zero-length or used up: next */
			cur->mi++;
			cur->mo = 0;
			continue;
		}
		if (*nsiov >= IO_MAX_IOV || s->ciov >= NET_MAX_IOV)
			break;
		t->siov[*nsiov].iov_base = (uint8_t *)m->iov_base + cur->mo;
		t->siov[*nsiov].iov_len = take;
		if (allocs)
			t->salloc[*nsiov] = allocs[cur->mi];
		(*nsiov)++;
		c->niov++;
		s->ciov++;
		cur->mo += take;
		done += take;
	}
	if (done == 0)
		return 0;
	c->len = done;
	s->cseg++;
	(*nchunks)++;
	return done;
}

/*
 * Stage file pieces from the cursor until the lists end or a budget runs
 * out. Cost: O(pieces + memory segments) of the round.
 * @return 0, or -EINVAL from stripe_map (bad layout, offset overflow)
 */
static int round_stage(struct cli_fs *fs, struct io_tls *t,
		       const struct proto_layout *l, const uint64_t *foff,
		       const uint64_t *flen, size_t nf, const struct iovec *mem,
		       const struct iovec *allocs, struct io_cursor *cur,
		       size_t *nchunks, size_t *nsiov)
{
	*nchunks = *nsiov = 0;
	while (cur->fi < nf) {
		uint64_t off = foff[cur->fi] + cur->fo;
		uint64_t left = flen[cur->fi] - cur->fo;
		uint64_t maxlen = (uint64_t)(IO_MAP_PIECES - 1) * l->unit -
				  off % l->unit;
		uint64_t step = left < maxlen ? left : maxlen;
		size_t n = 0;
		int rc;

		if (left == 0) {
			cur->fi++;
			cur->fo = 0;
			continue;
		}
		rc = stripe_map(l, cli_mirror_width(fs, l), off, step, t->pieces,
				IO_MAP_PIECES, &n);
		if (rc)
			return rc;
		for (size_t i = 0; i < n; i++) {
			uint64_t got = stage_piece(t, nchunks, nsiov,
						   &t->pieces[i], mem, allocs,
						   cur);

			cur->fo += got;
			if (got < t->pieces[i].len)
				return 0; /* round full */
		}
	}
	return 0;
}

/*
 * Group the staged chunks by iod (counting sort, stable, so each iod's
 * pieces stay in file-list order) and merge adjacent file ranges and
 * adjacent memory of the same allocation. Cost: O(chunks + iovecs).
 */
static void round_group(struct io_tls *t, const struct proto_layout *l,
			size_t nchunks, int with_allocs)
{
	uint32_t sr = 0, ir = 0;

	for (uint16_t k = 0; k < l->count; k++) {
		struct io_sub *s = &t->subs[k];

		s->seg0 = sr;
		s->iov0 = ir;
		sr += s->cseg;
		ir += s->ciov;
	}
	for (size_t i = 0; i < nchunks; i++) {
		const struct io_chunk *c = &t->chunks[i];
		struct io_sub *s = &t->subs[c->k];
		struct proto_seg *sg = &t->segs[s->seg0 + s->nsegs];

		if (s->nsegs && sg[-1].off + sg[-1].len == c->local_off)
			sg[-1].len += c->len;
		else {
			sg->off = c->local_off;
			sg->len = c->len;
			s->nsegs++;
		}
		for (uint32_t j = 0; j < c->niov; j++) {
			const struct iovec *m = &t->siov[c->iov0 + j];
			uint32_t at = s->iov0 + s->niov;
			struct iovec *v = &t->iov[at];

			if (s->niov &&
			    (uint8_t *)v[-1].iov_base + v[-1].iov_len ==
			    (uint8_t *)m->iov_base &&
			    (!with_allocs || t->alloc[at - 1].iov_base ==
			     t->salloc[c->iov0 + j].iov_base)) {
				v[-1].iov_len += m->iov_len;
				continue;
			}
			*v = *m;
			if (with_allocs)
				t->alloc[at] = t->salloc[c->iov0 + j];
			s->niov++;
		}
		s->bytes += c->len;
	}
}

/* Fill s's call: op, its encoded body, its memory (niov of them at iov). */
static void sub_prepare(struct io_sub *s, uint16_t op, const uint8_t *body,
			size_t body_len, const struct iovec *iov,
			const struct iovec *al)
{
	memset(&s->call, 0, sizeof(s->call));
	s->call.op = op;
	s->call.body = body;
	s->call.body_len = (uint32_t)body_len;
	if (op == PROTO_OP_IO_READ) {
		s->call.rd_iov = iov;
		s->call.rd_cnt = (int)s->niov;
		s->call.rd_alloc = al;
	} else {
		s->call.wr_iov = iov;
		s->call.wr_cnt = (int)s->niov;
		s->call.wr_alloc = al;
	}
	s->call.rep_buf = s->rep;
	s->call.rep_cap = IO_REP_CAP;
	s->call.wait_now = 1; /* a round waits right after its submits */
}

/* Bytes the encoded request body of s may take. */
static size_t sub_body_cap(const struct io_sub *s)
{
	return IO_BODY_HDR + s->nsegs * sizeof(struct proto_seg) * 2;
}

/* Encode s's request (its merged segments in t; flags: PROTO_IO_MIRROR for
 * a read of a mirrored file, else 0) into body, which holds
 * sub_body_cap(s) bytes, and fill its call with the memory at iov.
 * @return 0, or -EINVAL/-ERANGE from the encoder */
static int sub_encode(struct io_sub *s, struct io_tls *t, uint16_t op, uint64_t ino,
		      uint32_t flags, uint8_t *body, const struct iovec *iov,
		      const struct iovec *al)
{
	struct proto_ioreq q = { .ino = ino, .nsegs = s->nsegs,
				 .segs = &t->segs[s->seg0], .flags = flags };
	struct wbuf w;
	int rc;

	wb_init(&w, body, sub_body_cap(s));
	rc = proto_ioreq_encode(&w, op, &q);
	if (rc == 0)
		sub_prepare(s, op, body, w.len, iov, al);
	return rc;
}

/* Make b, the sub-request of k's other replica (iod), a copy of s: the
 * same body and memory, its own reply buffer. */
static void sub_buddy(struct io_sub *b, const struct io_sub *s, uint16_t iod)
{
	*b = *s;
	b->iod = iod;
	b->call.rep_buf = b->rep;
}

/* Point a read sub-request of mirror file iod k at the replica that
 * cli_mirror_read_order puts first, with the other as its alternative. */
static void sub_read_replica(struct cli_fs *fs, struct io_sub *s, uint64_t ino,
			     const struct proto_layout *l, uint16_t k,
			     unsigned turn)
{
	uint16_t order[2];

	cli_mirror_read_order(fs, ino, l, k, turn, order);
	s->iod = order[0];
	s->alt = order[1];
}

/* Whether a mirrored replica's answer sends the read to the buddy: the
 * iod is down or lost the data (-EIO), or it is fenced (-ESTALE: stale,
 * or no lease from the mgr). */
static int replica_failed(int rc)
{
	return rc == -EIO || rc == -ESTALE;
}

/*
 * Both replicas of a mirrored read are fenced (-ESTALE: e.g. neither holds
 * the mgr's lease yet, just after a start): sleep 100 ms and return 0 to
 * ask again, or -EIO once deadline_ns has passed. Cost: the sleep.
 */
static int fenced_wait(uint64_t deadline_ns)
{
	struct timespec ts = { 0, 100 * 1000000L };

	if (cli_mono_ns() >= deadline_ns)
		return -EIO;
	nanosleep(&ts, NULL);
	return 0;
}

/*
 * A read sub-request of a mirrored file failed with -EIO or -ESTALE: send
 * it again, same body and memory, to its other replica (s->alt, which
 * becomes the alternative in turn), and wait. Cost: one more round trip.
 */
static void sub_read_failover(struct cli_fs *fs, struct io_sub *s)
{
	struct net_call c = s->call;
	uint16_t other = s->alt;

	s->alt = s->iod;
	s->iod = other;
	s->rc = 0;
	sub_prepare(s, c.op, c.body, c.body_len, c.rd_iov, c.rd_alloc);
	s->call.rd_cnt = c.rd_cnt;
	sub_submit(fs, s);
	if (s->submitted)
		sub_wait(fs, s);
}

/* Check a read sub-request moved all its bytes; a short read is -EIO. */
static void sub_read_check(struct cli_fs *fs, struct io_sub *s)
{
	if (s->nsegs && s->rc == 0 && s->call.rd_bytes != s->bytes) {
		log_warn("iod %u (%s:%u): read returned %llu of %llu bytes",
			 s->iod, fs->iods[s->iod].host, fs->iods[s->iod].port,
			 (unsigned long long)s->call.rd_bytes,
			 (unsigned long long)s->bytes);
		s->rc = -EIO;
	}
}

/*
 * Whether a mirrored read that got rc from one replica after prev from the
 * other should ask again: both failed, and one of them is fenced (-ESTALE:
 * stale, or not yet leased or unfenced by the mgr), which may change
 * within seconds; two -EIO answers mean both replicas are down.
 */
static int replica_wait_fence(int rc, int prev)
{
	return replica_failed(rc) && (rc == -ESTALE || prev == -ESTALE);
}

/*
 * A mirrored read of file iod k failed on its replica (-EIO or -ESTALE):
 * ask the other one, and while one of them is fenced and neither answers
 * (replica_wait_fence) keep asking them in turn every 100 ms until the
 * client timeout. @return 0, or the error; never -ESTALE (-EIO).
 * Cost: a round trip per try.
 */
static int sub_read_retry(struct cli_fs *fs, struct io_sub *s, uint64_t ino,
			  uint16_t k)
{
	uint64_t deadline = cli_mono_ns() + (uint64_t)fs->timeout_ms * 1000000ull;
	int prev = s->rc;

	for (;;) {
		sub_read_failover(fs, s);
		sub_read_check(fs, s);
		if (!replica_wait_fence(s->rc, prev))
			return s->rc == -ESTALE ? -EIO : s->rc;
		prev = s->rc;
		if (fenced_wait(deadline))
			break;
	}
	log_warn("inode %llu: no replica of file iod %u may be read "
		 "(both fenced or down) within the timeout",
		 (unsigned long long)ino, k);
	s->rc = -EIO;
	return s->rc;
}

/*
 * Wait for file iod k's sub-request of a round (and its buddy's) and
 * return k's result: for mirror=2 writes both replicas judged by pair_rc,
 * for mirror=2 reads a failed replica retried on the other (or -EAGAIN
 * when reading into pipes), and the answer noted by cli_mirror_read_done.
 */
static int sub_finish(struct cli_fs *fs, struct io_tls *t, uint16_t op,
		      uint64_t ino, const struct proto_layout *l, uint16_t k,
		      int pipes)
{
	struct io_sub *s = &t->subs[k], *b = &t->subs[l->count + k];
	int mirror = cli_mirror_n(l) == 2;

	if (s->submitted)
		sub_wait(fs, s);
	if (op == PROTO_OP_IO_READ)
		sub_read_check(fs, s);
	if (!mirror || !s->nsegs)
		return s->rc;
	if (op == PROTO_OP_IO_WRITE) {
		if (b->submitted)
			sub_wait(fs, b);
		return pair_rc(fs, ino, s->rc, s->iod, b->rc, b->iod);
	}
	if (op != PROTO_OP_IO_READ)
		return s->rc;
	if (replica_failed(s->rc)) {
		if (pipes)
			return -EAGAIN;
		sub_read_retry(fs, s, ino, k);
	}
	cli_mirror_read_done(fs, ino, s->iod, s->rc);
	return s->rc;
}

/*
 * Encode and submit every sub-request of the round, then wait for all.
 * Mirror=2: a write goes to both replicas of each piece (results combined
 * by pair_rc); a read goes to one (cli_mirror_read_order) and fails over
 * to the other on -EIO or -ESTALE, except into pipes, where a failure returns -EAGAIN (the pipe may
 * hold part of the data: the caller reads again through a buffer).
 * Cost: one round trip to every iod involved, in parallel.
 */
static int round_run(struct cli_fs *fs, struct io_tls *t, uint16_t op,
		     uint64_t ino, const struct proto_layout *l,
		     int with_allocs, const int *pipes)
{
	int mirror = cli_mirror_n(l) == 2;
	unsigned turn = mirror ? atomic_fetch_add(&fs->read_turn, 1) : 0;
	size_t body_off = 0;
	int rc;

	for (uint16_t k = 0; k < l->count; k++) {
		struct io_sub *s = &t->subs[k];
		const struct iovec *al = with_allocs ? &t->alloc[s->iov0] : NULL;

		if (!s->nsegs)
			continue;
		if (mirror && op == PROTO_OP_IO_READ)
			sub_read_replica(fs, s, ino, l, k, turn);
		rc = sub_encode(s, t, op, ino, mirror && op == PROTO_OP_IO_READ ?
				PROTO_IO_MIRROR : 0, t->body + body_off,
				&t->iov[s->iov0], al);
		if (rc) {
			s->rc = rc;
			break;
		}
		if (pipes) {
			s->call.rd_pipe = 1;
			s->call.rd_pipe_fd = pipes[k];
		}
		body_off += sub_body_cap(s);
		if (mirror && op == PROTO_OP_IO_WRITE) {
			sub_buddy(&t->subs[l->count + k], s, t->subs[l->count + k].iod);
			sub_submit(fs, &t->subs[l->count + k]);
		}
		sub_submit(fs, s);
	}
	rc = 0;
	for (uint16_t k = 0; k < l->count; k++) {
		int src = sub_finish(fs, t, op, ino, l, k, pipes != NULL);

		if (src && !rc)
			rc = src;
	}
	return rc;
}

/*
 * Check a list call: non-negative counts, lists present, equal totals, no
 * offset overflow, each memory segment inside its allocation.
 * @return 0, -EINVAL
 */
static int list_check(const uint64_t *foff, const uint64_t *flen, size_t nf,
		      const struct iovec *mem, size_t nm,
		      const struct iovec *allocs, uint64_t *total)
{
	uint64_t ft = 0, mt = 0;

	if ((nf && (!foff || !flen)) || (nm && !mem))
		return -EINVAL;
	for (size_t i = 0; i < nf; i++) {
		if (foff[i] + flen[i] < foff[i] || ft + flen[i] < ft)
			return -EINVAL;
		ft += flen[i];
	}
	for (size_t i = 0; i < nm; i++) {
		uintptr_t b = (uintptr_t)mem[i].iov_base;

		if (mt + mem[i].iov_len < mt)
			return -EINVAL;
		mt += mem[i].iov_len;
		if (allocs && mem[i].iov_len &&
		    (b < (uintptr_t)allocs[i].iov_base ||
		     b + mem[i].iov_len < b ||
		     b + mem[i].iov_len > (uintptr_t)allocs[i].iov_base +
					  allocs[i].iov_len))
			return -EINVAL;
	}
	if (ft != mt || ft > (uint64_t)SSIZE_MAX)
		return -EINVAL;
	*total = ft;
	return 0;
}

/* List I/O: see cli_io.h. */
int cli_io_list(struct cli_fs *fs, uint64_t ino, const struct proto_layout *l,
		int dir, const uint64_t *foff, const uint64_t *flen, size_t nf,
		const struct iovec *mem, size_t nm, const struct iovec *allocs)
{
	uint16_t op = dir == CLI_IO_WRITE ? PROTO_OP_IO_WRITE : PROTO_OP_IO_READ;
	struct io_cursor cur = { 0, 0, 0, 0 };
	struct io_tls *t;
	uint64_t total, moved = 0;
	int rc;

	if (dir != CLI_IO_READ && dir != CLI_IO_WRITE)
		return -EINVAL;
	if (stripe_layout_check(l, cli_mirror_width(fs, l)))
		return -EINVAL;
	rc = list_check(foff, flen, nf, mem, nm, allocs, &total);
	if (rc)
		return rc;
	t = io_tls_get();
	if (!t)
		return -ENOMEM;
	while (moved < total) {
		size_t nchunks, nsiov;

		round_reset(fs, t, l);
		rc = round_stage(fs, t, l, foff, flen, nf, mem, allocs, &cur,
				 &nchunks, &nsiov);
		if (rc)
			return rc;
		if (nchunks == 0)
			return -EINVAL; /* cannot happen after list_check */
		round_group(t, l, nchunks, allocs != NULL);
		rc = round_run(fs, t, op, ino, l, allocs != NULL, NULL);
		if (rc)
			return rc;
		for (uint16_t k = 0; k < l->count; k++)
			moved += t->subs[k].bytes;
	}
	return 0;
}

/* Read: see cli_io.h. The contiguous case of the list engine. */
int cli_io_read(struct cli_fs *fs, uint64_t ino, const struct proto_layout *l,
		uint64_t off, size_t len, void *buf)
{
	uint64_t flen = len;
	struct iovec m = { .iov_base = buf, .iov_len = len };

	return cli_io_list(fs, ino, l, CLI_IO_READ, &off, &flen, 1, &m, 1,
			   NULL);
}

/*
 * Read into pipes: see cli_io.h. One round of the list engine whose calls
 * name a pipe per iod; the staged chunks, in file order, give the pieces.
 * Cost: as cli_io_read, minus the copy out of the socket.
 */
int cli_io_read_pipes(struct cli_fs *fs, uint64_t ino,
		      const struct proto_layout *l, uint64_t off, size_t len,
		      void *buf, const int *pipes, struct cli_io_piece *pieces,
		      size_t maxp, size_t *np)
{
	uint64_t flen = len, staged = 0;
	struct iovec m = { .iov_base = buf, .iov_len = len };
	struct io_cursor cur = { 0, 0, 0, 0 };
	size_t nchunks, nsiov, n = 0;
	struct io_tls *t;
	int rc;

	*np = 0;
	if (len == 0 || stripe_layout_check(l, cli_mirror_width(fs, l)))
		return -EINVAL;
	if (!net_client_rd_to_pipe(fs->net))
		return -EOPNOTSUPP;
	t = io_tls_get();
	if (!t)
		return -ENOMEM;
	round_reset(fs, t, l);
	rc = round_stage(fs, t, l, &off, &flen, 1, &m, NULL, &cur, &nchunks, &nsiov);
	if (rc)
		return rc;
	for (size_t i = 0; i < nchunks; i++) {
		const struct io_chunk *c = &t->chunks[i];

		staged += c->len;
		if (n && pieces[n - 1].k == c->k) {
			pieces[n - 1].len += c->len;
			continue;
		}
		if (n == maxp)
			return -E2BIG;
		pieces[n].k = c->k;
		pieces[n].len = c->len;
		n++;
	}
	if (staged != len)
		return -E2BIG; /* more than one round */
	round_group(t, l, nchunks, 0);
	rc = round_run(fs, t, PROTO_OP_IO_READ, ino, l, 0, pipes);
	if (rc)
		return rc;
	*np = n;
	return 0;
}

/* Write: see cli_io.h. The buffer is only read (the iod pulls from it). */
int cli_io_write(struct cli_fs *fs, uint64_t ino, const struct proto_layout *l,
		 uint64_t off, size_t len, const void *buf)
{
	uint64_t flen = len;
	struct iovec m = { .iov_base = (void *)buf, .iov_len = len };

	return cli_io_list(fs, ino, l, CLI_IO_WRITE, &off, &flen, 1, &m, 1,
			   NULL);
}

/*
 * A write in flight that its writer was told is done (write-behind): its
 * sub-requests, with their bodies and memory lists, in one allocation.
 * The data itself is on the wire already (net_client_wr_sent_at_submit).
 */
struct cli_io_pending {
	uint64_t ino;
	uint16_t count;      /* file iods of the layout */
	uint16_t nrep;       /* replicas: subs[count + k] is k's buddy if 2 */
	struct io_sub subs[]; /* then iovecs, bodies */
};

/* Start a write and return without waiting for the iods: see cli_io.h. */
int cli_io_write_start(struct cli_fs *fs, uint64_t ino,
		       const struct proto_layout *l, uint64_t off, size_t len,
		       const void *buf, struct cli_io_pending **out)
{
	uint64_t flen = len, staged = 0;
	struct iovec m = { .iov_base = (void *)buf, .iov_len = len };
	struct io_cursor cur = { 0, 0, 0, 0 };
	struct cli_io_pending *p;
	size_t nchunks, nsiov, niov = 0, bodies = 0, need;
	struct io_tls *t;
	int rc;

	*out = NULL;
	if (len == 0 || stripe_layout_check(l, cli_mirror_width(fs, l)))
		return -EINVAL;
	if (!net_client_wr_sent_at_submit(fs->net))
		return -EAGAIN; /* the iods would fetch buf after we return */
	t = io_tls_get();
	if (!t)
		return -ENOMEM;
	round_reset(fs, t, l);
	rc = round_stage(fs, t, l, &off, &flen, 1, &m, NULL, &cur, &nchunks, &nsiov);
	if (rc)
		return rc;
	round_group(t, l, nchunks, 0);
	for (uint16_t k = 0; k < l->count; k++) {
		staged += t->subs[k].bytes;
		niov += t->subs[k].niov;
		if (t->subs[k].nsegs)
			bodies += sub_body_cap(&t->subs[k]);
	}
	if (staged != len)
		return -EAGAIN; /* needs several rounds: write it synchronously */
	uint16_t nrep = (uint16_t)cli_mirror_n(l);
	need = sizeof(*p) + (size_t)l->count * nrep * sizeof(struct io_sub) +
	       niov * sizeof(struct iovec) + bodies;
	p = malloc(need);
	if (!p)
		return -ENOMEM;
	p->ino = ino;
	p->count = l->count;
	p->nrep = nrep;
	struct iovec *iov = (struct iovec *)&p->subs[l->count * nrep];
	uint8_t *body = (uint8_t *)(iov + niov);
	rc = 0;
	for (uint16_t k = 0; k < l->count; k++) {
		struct io_sub *s = &p->subs[k], *b = &p->subs[l->count + k];

		*s = t->subs[k];
		s->rc = 0;
		s->submitted = 0;
		if (nrep == 2) {
			b->nsegs = 0;
			b->rc = 0;
			b->submitted = 0;
		}
		if (!s->nsegs || rc)
			continue;
		memcpy(iov, &t->iov[s->iov0], s->niov * sizeof(*iov));
		rc = sub_encode(s, t, PROTO_OP_IO_WRITE, ino, 0, body, iov, NULL);
		s->call.wait_now = 0; /* waited for later, maybe by another thread */
		if (!rc && nrep == 2) {
			sub_buddy(b, s, cli_mirror_iod(fs, l, k, 1));
			sub_submit(fs, b);
		}
		if (!rc)
			sub_submit(fs, s);
		if (s->rc && (nrep == 1 || s->rc != -EIO) && !rc)
			rc = s->rc; /* mirrored -EIO: pair_rc decides at the wait */
		iov += s->niov;
		body += sub_body_cap(s);
	}
	if (rc) {
		/* part failed at once: finish what went out, report now */
		int rc2 = cli_io_pending_wait(fs, p);
		return rc2 ? rc2 : rc;
	}
	*out = p;
	return 0;
}

/* Wait for a started write and free it: see cli_io.h. */
int cli_io_pending_wait(struct cli_fs *fs, struct cli_io_pending *p)
{
	int rc = 0;

	for (uint16_t k = 0; k < p->count; k++) {
		struct io_sub *s = &p->subs[k], *b = &p->subs[p->count + k];
		int src;

		if (s->submitted)
			sub_wait(fs, s);
		src = s->rc;
		if (p->nrep == 2 && s->nsegs) {
			if (b->submitted)
				sub_wait(fs, b);
			src = pair_rc(fs, p->ino, s->rc, s->iod, b->rc, b->iod);
		}
		if (src && !rc)
			rc = src;
	}
	free(p);
	return rc;
}

/* Encode a request without data (q, into body of cap bytes) and submit
 * it as s's call; an encoding failure or refused submit is left in s->rc. */
static void sub_start_nodata(struct cli_fs *fs, struct io_sub *s, uint16_t op,
			     const struct proto_ioreq *q, uint8_t *body,
			     size_t cap)
{
	struct wbuf w;

	wb_init(&w, body, cap);
	s->rc = proto_ioreq_encode(&w, op, q);
	if (s->rc)
		return;
	s->niov = 0;
	sub_prepare(s, op, body, w.len, NULL, NULL);
	sub_submit(fs, s);
}

/*
 * Send op to every iod of the layout at once (both replicas of a mirrored
 * one) and wait for all. For IO_TRUNCATE size is the file size (each iod
 * gets its local share). A mirrored replica that fails with -EIO while its
 * buddy succeeds is recorded stale (pair_rc), except for IO_REMOVE, where
 * any failure stands: the inode then stays an orphan for the scrub.
 * Cost: one parallel round trip.
 */
static int fanout(struct cli_fs *fs, uint16_t op, uint64_t ino,
		  const struct proto_layout *l, uint64_t size, uint32_t flags)
{
	uint32_t nsub = (uint32_t)l->count * cli_mirror_n(l);
	struct io_tls *t;
	int rc = 0;

	if (stripe_layout_check(l, cli_mirror_width(fs, l)))
		return -EINVAL;
	t = io_tls_get();
	if (!t)
		return -ENOMEM;
	for (uint32_t j = 0; j < nsub; j++) {
		struct io_sub *s = &t->subs[j];
		struct proto_ioreq q = { .ino = ino, .flags = flags };
		uint16_t k = (uint16_t)(j % l->count);

		s->iod = cli_mirror_iod(fs, l, k, (int)(j / l->count));
		s->submitted = 0;
		s->rc = 0;
		if (op == PROTO_OP_IO_TRUNCATE)
			q.size = stripe_local_size(l, k, size);
		sub_start_nodata(fs, s, op, &q, t->body + (size_t)j * IO_BODY_HDR,
				 IO_BODY_HDR);
	}
	for (uint32_t j = 0; j < nsub; j++) {
		struct io_sub *s = &t->subs[j];

		if (s->submitted)
			sub_wait(fs, s);
		if (op == PROTO_OP_IO_REMOVE && s->rc == -ENOENT)
			s->rc = 0;
	}
	for (uint16_t k = 0; k < l->count; k++) {
		struct io_sub *s = &t->subs[k], *b = &t->subs[l->count + k];
		int src = s->rc;

		if (nsub > l->count && op == PROTO_OP_IO_REMOVE)
			src = s->rc ? s->rc : b->rc;
		else if (nsub > l->count)
			src = pair_rc(fs, ino, s->rc, s->iod, b->rc, b->iod);
		if (src && !rc)
			rc = src;
	}
	return rc;
}

/*
 * One parallel pass of requests without data: entry j goes to iod iods[j]
 * with request qs[ks[j]], its flags ORed with xflags (PROTO_IO_MIRROR for
 * a mirrored IO_SEEK); entries whose rcs[j] is nonzero are skipped.
 * Results in rcs[j] (and vals[j] for IO_SEEK and IO_BLOCKS; a value reply
 * that does not decode counts as -EIO). Cost: one parallel round trip.
 */
static void each_pass(struct cli_fs *fs, struct io_tls *t, uint16_t op,
		      uint64_t ino, uint32_t xflags, uint32_t n,
		      const uint16_t *ks, const uint16_t *iods,
		      const struct proto_ioreq *qs, int *rcs, uint64_t *vals)
{
	for (uint32_t j = 0; j < n; j++) {
		struct io_sub *s = &t->subs[j];
		struct proto_ioreq q = qs[ks[j]];

		q.ino = ino;
		q.flags |= xflags;
		s->iod = iods[j];
		s->submitted = 0;
		s->rc = rcs[j];
		if (s->rc)
			continue;
		sub_start_nodata(fs, s, op, &q, t->body + (size_t)j * IO_BODY_HDR,
				 IO_BODY_HDR);
	}
	for (uint32_t j = 0; j < n; j++) {
		struct io_sub *s = &t->subs[j];
		const char *why = NULL;

		if (s->submitted)
			sub_wait(fs, s);
		rcs[j] = s->rc;
		if (s->rc || !vals ||
		    (op != PROTO_OP_IO_SEEK && op != PROTO_OP_IO_BLOCKS))
			continue;
		if (proto_ioval_decode(s->rep, s->call.rep_len, &vals[j], &why)) {
			log_warn("iod %u: %s reply: bad %s", s->iod, op_verb(op),
				 why ? why : "body");
			rcs[j] = -EIO;
		}
	}
}

/*
 * cli_io_each of a mirrored layout for IO_SEEK and IO_BLOCKS: ask one
 * replica per file iod (cli_mirror_read_order; the replicas hold the same
 * bytes, so st_blocks counts one copy) and the other where that fails with
 * -EIO or -ESTALE (fenced: IO_SEEK carries PROTO_IO_MIRROR; IO_BLOCKS has
 * no flags and is never fenced); while both are fenced, ask them in turn
 * every 100 ms until the client timeout, then -EIO.
 * Cost: one parallel round trip, two when a replica fails.
 */
static void each_one_replica(struct cli_fs *fs, struct io_tls *t, uint16_t op,
			     uint64_t ino, const struct proto_layout *l,
			     const struct proto_ioreq *qs, int *rcs, uint64_t *vals)
{
	uint32_t xf = op == PROTO_OP_IO_SEEK ? PROTO_IO_MIRROR : 0;
	uint64_t deadline = cli_mono_ns() + (uint64_t)fs->timeout_ms * 1000000ull;
	uint16_t ks[PROTO_MAX_IODS], iods[PROTO_MAX_IODS], alts[PROTO_MAX_IODS];
	int retry[PROTO_MAX_IODS]; /* 0: ask the other replica; else skip */
	int live[PROTO_MAX_IODS];  /* k has no answer yet */
	int prev[PROTO_MAX_IODS];  /* k's answer before the last */
	unsigned turn = atomic_fetch_add(&fs->read_turn, 1);
	int again;

	for (uint16_t k = 0; k < l->count; k++) {
		uint16_t order[2];

		cli_mirror_read_order(fs, ino, l, k, turn, order);
		ks[k] = k;
		iods[k] = order[0];
		alts[k] = order[1];
	}
	each_pass(fs, t, op, ino, xf, l->count, ks, iods, qs, rcs, vals);
	for (uint16_t k = 0; k < l->count; k++)
		live[k] = replica_failed(rcs[k]);
	do {
		again = 0;
		for (uint16_t k = 0; k < l->count; k++) {
			uint16_t other = alts[k];

			retry[k] = !live[k];
			if (retry[k])
				continue;
			alts[k] = iods[k];
			iods[k] = other;
		}
		each_pass(fs, t, op, ino, xf, l->count, ks, iods, qs, retry, vals);
		for (uint16_t k = 0; k < l->count; k++) {
			if (!live[k])
				continue;
			prev[k] = rcs[k];
			rcs[k] = retry[k];
			live[k] = replica_wait_fence(rcs[k], prev[k]);
			again |= live[k];
		}
	} while (again && !fenced_wait(deadline));
	for (uint16_t k = 0; k < l->count; k++) {
		if (rcs[k] == -ESTALE)
			rcs[k] = -EIO;
		if (op == PROTO_OP_IO_SEEK)
			cli_mirror_read_done(fs, ino, iods[k], rcs[k]);
	}
}

/*
 * cli_io_each of a mirrored layout for ops that change the objects
 * (IO_FALLOCATE): both replicas of each file iod, results combined by
 * pair_rc. Cost: one parallel round trip.
 */
static void each_both_replicas(struct cli_fs *fs, struct io_tls *t, uint16_t op,
			       uint64_t ino, const struct proto_layout *l,
			       const struct proto_ioreq *qs, int *rcs)
{
	uint16_t ks[2 * PROTO_MAX_IODS], iods[2 * PROTO_MAX_IODS];
	int r2[2 * PROTO_MAX_IODS];
	uint16_t c = l->count;

	for (uint32_t j = 0; j < 2u * c; j++) {
		ks[j] = (uint16_t)(j % c);
		iods[j] = cli_mirror_iod(fs, l, ks[j], (int)(j / c));
		r2[j] = rcs[ks[j]];
	}
	each_pass(fs, t, op, ino, 0, 2u * c, ks, iods, qs, r2, NULL);
	for (uint16_t k = 0; k < c; k++)
		if (!rcs[k])
			rcs[k] = pair_rc(fs, ino, r2[k], iods[k], r2[c + k],
					 iods[c + k]);
}

/* Each: see cli_io.h. */
int cli_io_each(struct cli_fs *fs, uint16_t op, uint64_t ino,
		const struct proto_layout *l, const struct proto_ioreq *qs,
		int *rcs, uint64_t *vals)
{
	uint16_t ks[PROTO_MAX_IODS], iods[PROTO_MAX_IODS];
	struct io_tls *t;

	if (stripe_layout_check(l, cli_mirror_width(fs, l)))
		return -EINVAL;
	t = io_tls_get();
	if (!t)
		return -ENOMEM;
	if (cli_mirror_n(l) == 2 &&
	    (op == PROTO_OP_IO_SEEK || op == PROTO_OP_IO_BLOCKS)) {
		each_one_replica(fs, t, op, ino, l, qs, rcs, vals);
		return 0;
	}
	if (cli_mirror_n(l) == 2) {
		each_both_replicas(fs, t, op, ino, l, qs, rcs);
		return 0;
	}
	for (uint16_t k = 0; k < l->count; k++) {
		ks[k] = k;
		iods[k] = cli_mirror_iod(fs, l, k, 0);
	}
	each_pass(fs, t, op, ino, 0, l->count, ks, iods, qs, rcs, vals);
	return 0;
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

/* Bytes of an encoded IO_REMOVE_MANY body of at most CLI_IO_REMOVE_MAX. */
#define IO_REMOVE_BODY (4 + CLI_IO_REMOVE_MAX * 8)
_Static_assert(sizeof(((struct io_tls *)0)->body) >=
	       (size_t)PROTO_MAX_IODS * IO_REMOVE_BODY,
	       "engine body room for one remove list per iod");

/* Remove many: see cli_io.h. Cost: O(n x stripe count) to build the lists
 * and one IO_REMOVE_MANY per iod involved. */
int cli_io_remove_many(struct cli_fs *fs, size_t n, const uint64_t *inos,
		       const struct proto_layout *layouts, uint8_t *ok)
{
	struct io_tls *t;
	uint64_t *lists;   /* niods rows of n: the inodes of each iod */
	uint32_t *cnt;     /* entries per row */
	int rc = 0;

	if (n == 0 || n > CLI_IO_REMOVE_MAX)
		return -EINVAL;
	t = io_tls_get();
	lists = malloc((size_t)fs->niods * n * sizeof(*lists));
	cnt = calloc(fs->niods, sizeof(*cnt));
	if (!t || !lists || !cnt) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < n; i++) {
		const struct proto_layout *l = &layouts[i];

		ok[i] = stripe_layout_check(l, cli_mirror_width(fs, l)) == 0;
		if (!ok[i]) {
			rc = -EINVAL;
			continue;
		}
		for (uint32_t e = 0; e < (uint32_t)l->count * cli_mirror_n(l); e++) {
			uint16_t j = cli_mirror_iod(fs, l, (uint16_t)(e % l->count),
						    (int)(e / l->count));

			lists[(size_t)j * n + cnt[j]++] = inos[i];
		}
	}
	for (uint16_t j = 0; j < fs->niods; j++) {
		struct io_sub *s = &t->subs[j];
		struct proto_ioreq q = { .inos = { cnt[j], &lists[(size_t)j * n], NULL } };
		uint8_t *body = t->body + (size_t)j * IO_REMOVE_BODY;

		s->submitted = 0;
		s->rc = 0;
		if (!cnt[j])
			continue;
		s->iod = j;
		sub_start_nodata(fs, s, PROTO_OP_IO_REMOVE_MANY, &q, body,
				 IO_REMOVE_BODY);
	}
	for (uint16_t j = 0; j < fs->niods; j++) {
		struct io_sub *s = &t->subs[j];

		if (!cnt[j])
			continue;
		if (s->submitted)
			sub_wait(fs, s);
		if (s->rc == -ENOENT)
			s->rc = 0;
		if (!s->rc)
			continue;
		if (!rc || rc == -EINVAL)
			rc = s->rc;
		for (uint32_t e = 0; e < cnt[j]; e++)
			for (size_t i = 0; i < n; i++)
				if (inos[i] == lists[(size_t)j * n + e])
					ok[i] = 0;
	}
out_free:
	free(cnt);
	free(lists);
	return rc;
}

/* Fsync: see cli_io.h. */
int cli_io_fsync(struct cli_fs *fs, uint64_t ino, const struct proto_layout *l,
		 int datasync)
{
	return fanout(fs, PROTO_OP_IO_FSYNC, ino, l, 0, datasync ? 1 : 0);
}
