/*
 * iod_ops.c - the iod request handler.
 *
 * Each request gets a context from a free list (with room for
 * PROTO_MAX_SEGS file segments). IO_WRITE and IO_READ move their bulk data
 * in transfer units of min(2 MiB, max(64 KiB, half the request)), rounded
 * down to a power of two, through at most two pooled buffers ("slots"):
 * while one slot's unit is on the network the other's is on disk. Disk I/O
 * is synchronous in the loop thread (page cache). Pull and push completions
 * may run inside net_sreq_pull/push or later from the loop; the request is
 * driven by one re-entrancy-guarded function, req_advance(). IO_FENCE and
 * the fencing of mirrored reads are iod_fence.c's.
 *
 * The calls whose time a slow disk sets (IO_FSYNC, IO_FALLOCATE, IO_CSUM,
 * IO_LIST) run on the worker pool (iod_work.h): the loop opens the
 * object's private descriptor, a worker makes the call, and the reply goes
 * out from the loop when the completion comes back (iod/README.md "iod
 * threads" has the ordering rule).
 */
#include "iod_ops.h"

#include <errno.h>
#include <ev.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "iod_fence.h"
#include "iod_work.h"
#include "log.h"
#include "proto.h"

#define OPS_FREE_KEEP 64 /* idle contexts kept for reuse */
#define OPS_FD_MIN (64u << 10) /* reads from this size on go by push_fd */
#define OPS_ZERO_LEN 65536     /* static zeros pushed for holes */
#define OPS_ZERO_IOVS 16       /* ... up to 1 MiB per push */
#define OPS_SCRUB_BUF (64u << 10) /* IO_LIST body (<= 32 KiB + 17), CSUM reads */

static const uint8_t ops_zeros[OPS_ZERO_LEN];

/* Life of a request. */
enum req_state {
	REQ_RUNNING = 0, /* transferring: disk work or pulls/pushes under way */
	REQ_WAIT_BUF,    /* holds no buffer; queued in the pool for one */
	REQ_READY,       /* handed a buffer; queued for a deferred resume */
	REQ_DONE,        /* replied; the context is back on the free list */
};

/* Life of one of a request's two buffers. */
enum slot_state {
	SLOT_EMPTY = 0, /* no buffer attached */
	SLOT_IDLE,      /* buffer attached, not in use */
	SLOT_PULLING,   /* net_sreq_pull filling it (write) */
	SLOT_FULL,      /* pulled data waiting to go to disk (write) */
	SLOT_PUSHING,   /* net_sreq_push sending it (read) */
};

struct io_req;

/* Scratch of one IO_LIST or IO_CSUM (about 100 KiB), taken from the
 * handler's free list when it starts and put back at its reply; the list
 * is allocated lazily (an iod never scrubbed never pays for it) and keeps
 * OPS_SCRUB_KEEP. Owned by the request's loop side, or by its worker
 * between submit and done. */
struct scrub_job {
	struct proto_iolist list;    /* IO_LIST: the objects */
	struct iod_scan scan;        /* IO_LIST: the store's scratch (kept) */
	uint8_t body[OPS_SCRUB_BUF]; /* the reply body; IO_CSUM reads */
	struct scrub_job *next;      /* free list */
};

#define OPS_SCRUB_KEEP IOD_WORK_THREADS /* idle scrub scratches kept */

/* A transfer buffer of one request (loop thread only, as every field). */
struct slot {
	struct io_req *req;
	enum slot_state st;
	struct iod_buf buf;
	struct iovec iov;  /* what is being pulled/pushed; stays valid meanwhile */
	uint64_t off;      /* offset of this unit within the request's bulk */
	size_t len;        /* bytes of this unit */
};

/* Per-request state (loop thread only, as every field). */
struct io_req {
	struct iod_ops *ops;
	struct net_sreq *r;
	enum req_state state;
	uint16_t op;
	struct proto_ioreq q;
	uint64_t total;      /* bulk bytes: bulk_len (write) or aux (read) */
	size_t unit;         /* transfer unit */
	uint64_t net_off;    /* write: bytes asked of net_sreq_pull so far */
	uint64_t disk_off;   /* bytes done on disk (write) / read from disk (read) */
	uint32_t seg;        /* disk cursor: segment index ... */
	uint64_t seg_off;    /* ... and offset within it */
	int inflight;        /* pulls or pushes not yet completed */
	int err;             /* first error, 0 or -errno */
	int busy, again;     /* req_advance re-entrancy guard */
	int by_fd;           /* read sent from the file (net_sreq_push_fd) */
	int fd;              /* by_fd: private descriptor, -1 if no object */
	uint64_t fsize;      /* by_fd: object size when the read started */
	struct slot slot[2];
	struct iod_buf_waiter waiter;
	struct io_req *next, *prev; /* live list, or free list via next */
	struct io_req *ready_next;  /* deferred resume queue */
	/* An op on a worker. The loop fills these before the submit and
	 * reads them after done(); between the two only the worker. */
	struct iod_job job;
	int wfd;                    /* the object's private descriptor, or -1 */
	int wrc;                    /* the worker's result, 0 or -errno */
	uint32_t wlen;              /* reply body bytes in scrub->body */
	struct scrub_job *scrub;    /* IO_LIST / IO_CSUM scratch */
	struct io_req *wnext;       /* backlog (loop thread only) */
	struct proto_seg segs[PROTO_MAX_SEGS];
};

struct iod_ops {
	struct ev_loop *loop;
	struct iod_store *st;
	struct iod_buf_pool *pool;
	struct io_req *live;        /* requests in flight (loop thread only) */
	struct io_req *free;        /* idle contexts (loop thread only) */
	unsigned nfree;
	struct io_req *ready_head, *ready_tail; /* resumes to run from idle */
	ev_idle resume_w;           /* runs the deferred resumes */
	struct iod_work *work;      /* workers for the slow disk calls */
	struct io_req *backlog_head, *backlog_tail; /* worker ops the pool's
				     * queue had no room for (loop thread only) */
	struct scrub_job *scrub_free; /* idle scrub scratches (loop thread only,
				       * as the next) */
	unsigned nscrub_free;
	struct iod_fence *fence;    /* lease and fence set (loop thread only) */
	unsigned fsync_delay_ms;    /* test hook: hold IO_FSYNC this long ... */
	uint64_t fsync_delay_ino;   /* ... of this object (0 = any); both set
				     * before serving, then read-only */
};

static void req_advance(struct io_req *q);
static void resume_cb(struct ev_loop *loop, ev_idle *w, int revents);

/* Allocate the handler, its nthreads workers and its (high priority)
 * resume watcher. */
int iod_ops_new_threads(struct iod_ops **out, struct ev_loop *loop,
			struct iod_store *st, struct iod_buf_pool *pool,
			unsigned nthreads)
{
	struct iod_ops *ops = calloc(1, sizeof(*ops));
	int rc;

	if (!ops)
		return -ENOMEM;
	if (iod_fence_new(&ops->fence) < 0) {
		rc = -ENOMEM;
		goto out_free_ops;
	}
	rc = iod_work_new(&ops->work, loop, nthreads, IOD_WORK_QUEUE);
	if (rc < 0)
		goto out_free_fence;
	ops->loop = loop;
	ops->st = st;
	ops->pool = pool;
	ev_idle_init(&ops->resume_w, resume_cb);
	ev_set_priority(&ops->resume_w, EV_MAXPRI);
	ops->resume_w.data = ops;
	*out = ops;
	return 0;

out_free_fence:
	iod_fence_free(ops->fence);
out_free_ops:
	free(ops);
	return rc;
}

/* The handler with the default number of workers. */
int iod_ops_new(struct iod_ops **out, struct ev_loop *loop,
		struct iod_store *st, struct iod_buf_pool *pool)
{
	return iod_ops_new_threads(out, loop, st, pool, IOD_WORK_THREADS);
}

/* See iod_ops.h. */
int iod_ops_test_fsync_delay(struct iod_ops *ops, unsigned delay_ms,
			     uint64_t ino)
{
	if (delay_ms > IOD_OPS_MAX_TEST_DELAY_MS)
		return -EINVAL;
	ops->fsync_delay_ms = delay_ms;
	ops->fsync_delay_ino = ino;
	return 0;
}

/* Test hook: hold an IO_FSYNC of the chosen object for the delay set by
 * iod_ops_test_fsync_delay, as a slow disk would, in the thread that runs
 * the fsync. Costs nothing when the hook is off. */
static void fsync_hold(const struct iod_ops *ops, uint64_t ino)
{
	struct timespec ts;

	if (!ops->fsync_delay_ms ||
	    (ops->fsync_delay_ino && ops->fsync_delay_ino != ino))
		return;
	log_info("test hook: holding IO_FSYNC of ino %llu for %u ms",
		 (unsigned long long)ino, ops->fsync_delay_ms);
	ts.tv_sec = ops->fsync_delay_ms / 1000;
	ts.tv_nsec = (long)(ops->fsync_delay_ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Return every buffer a request holds to the pool (may wake waiters). */
static void req_release_bufs(struct io_req *q)
{
	for (int i = 0; i < 2; i++) {
		if (q->slot[i].st != SLOT_EMPTY) {
			q->slot[i].st = SLOT_EMPTY;
			iod_buf_put(q->ops->pool, &q->slot[i].buf);
		}
	}
}

/* A scrub scratch from the free list, or a new one. @return NULL: no memory */
static struct scrub_job *scrub_get(struct iod_ops *ops)
{
	struct scrub_job *sj = ops->scrub_free;

	if (sj) {
		ops->scrub_free = sj->next;
		ops->nscrub_free--;
		return sj;
	}
	sj = malloc(sizeof(*sj));
	if (sj)
		sj->scan = (struct iod_scan){ NULL, 0, 0 };
	return sj;
}

/* Keep a scrub scratch for reuse, or free it beyond OPS_SCRUB_KEEP. */
static void scrub_put(struct iod_ops *ops, struct scrub_job *sj)
{
	if (ops->nscrub_free >= OPS_SCRUB_KEEP) {
		iod_scan_release(&sj->scan);
		free(sj);
		return;
	}
	sj->next = ops->scrub_free;
	ops->scrub_free = sj;
	ops->nscrub_free++;
}

/* Close a worker op's descriptor and give back its scratch (loop thread,
 * once no worker has the op). */
static void work_release(struct io_req *q)
{
	if (q->wfd >= 0)
		close(q->wfd);
	q->wfd = -1;
	if (q->scrub) {
		scrub_put(q->ops, q->scrub);
		q->scrub = NULL;
	}
}

/* Abandon live requests (the server already dropped them), free contexts.
 * The workers stop first (waiting for the calls they are in), so no
 * worker touches a request freed here. */
void iod_ops_free(struct iod_ops *ops)
{
	struct io_req *q, *n;

	if (!ops)
		return;
	iod_work_free(ops->work);
	ev_idle_stop(ops->loop, &ops->resume_w);
	for (q = ops->live; q; q = q->next)
		iod_buf_cancel(ops->pool, &q->waiter);
	for (q = ops->live; q; q = n) {
		n = q->next;
		if (q->state == REQ_READY)
			iod_buf_put(ops->pool, &q->waiter.buf);
		req_release_bufs(q);
		if (q->by_fd && q->fd >= 0)
			close(q->fd);
		work_release(q);
		free(q);
	}
	for (q = ops->free; q; q = n) {
		n = q->next;
		free(q);
	}
	while (ops->scrub_free) {
		struct scrub_job *sj = ops->scrub_free;

		ops->scrub_free = sj->next;
		iod_scan_release(&sj->scan);
		free(sj);
	}
	iod_fence_free(ops->fence);
	free(ops);
}

/* Take a context from the free list (or malloc one: ~17 KiB, only until the
 * list covers the peak concurrency) and link it into the live list. */
static struct io_req *req_get(struct iod_ops *ops, struct net_sreq *r)
{
	struct io_req *q = ops->free;

	if (q) {
		ops->free = q->next;
		ops->nfree--;
	} else {
		q = malloc(sizeof(*q));
		if (!q)
			return NULL;
	}
	memset(q, 0, offsetof(struct io_req, segs));
	q->ops = ops;
	q->wfd = -1;
	q->r = r;
	q->slot[0].req = q;
	q->slot[1].req = q;
	q->next = ops->live;
	if (ops->live)
		ops->live->prev = q;
	ops->live = q;
	return q;
}

/* Unlink from the live list and keep the context for reuse. */
static void req_put(struct io_req *q)
{
	struct iod_ops *ops = q->ops;

	if (q->prev)
		q->prev->next = q->next;
	else
		ops->live = q->next;
	if (q->next)
		q->next->prev = q->prev;
	q->state = REQ_DONE;
	if (ops->nfree >= OPS_FREE_KEEP) {
		free(q);
		return;
	}
	q->next = ops->free;
	ops->free = q;
	ops->nfree++;
}

/* Release buffers, send the reply (or just free r after a transport
 * failure), recycle the context. */
static void req_finish(struct io_req *q, int32_t status, const void *body,
		       uint32_t len)
{
	struct net_sreq *r = q->r;

	req_release_bufs(q);
	if (q->by_fd && q->fd >= 0)
		close(q->fd);
	q->by_fd = 0;
	if (status < 0 && status != -ENOENT && status != -ENXIO)
		log_debug("%s ino %llu from %s: %s", proto_op_name(q->op),
			  (unsigned long long)q->q.ino, net_sconn_peer(r->conn),
			  strerror(-status));
	req_put(q);
	net_sreq_reply(r, status, body, len);
}

/* Pool hand-off: the buffer now belongs to the request; resume it from the
 * loop, not from inside whoever released the buffer. */
static void req_wake(struct iod_buf_waiter *w)
{
	struct io_req *q = w->arg;
	struct iod_ops *ops = q->ops;

	q->state = REQ_READY;
	q->ready_next = NULL;
	if (ops->ready_tail)
		ops->ready_tail->ready_next = q;
	else
		ops->ready_head = q;
	ops->ready_tail = q;
	ev_idle_start(ops->loop, &ops->resume_w);
}

/* Run the deferred resumes queued by req_wake. */
static void resume_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	struct iod_ops *ops = w->data;
	struct io_req *q;

	ev_idle_stop(loop, w);
	while ((q = ops->ready_head)) {
		ops->ready_head = q->ready_next;
		if (!ops->ready_head)
			ops->ready_tail = NULL;
		q->slot[0].buf = q->waiter.buf;
		q->slot[0].st = SLOT_IDLE;
		q->state = REQ_RUNNING;
		req_advance(q);
	}
}

/* Transfer unit for a request of total bytes: half of it, rounded down to a
 * power of two, within [64 KiB, 2 MiB]. */
static size_t unit_for(uint64_t total)
{
	size_t u = IOD_BUF_MIN;

	while (u < IOD_BUF_MAX && (uint64_t)u * 2 <= total / 2)
		u *= 2;
	return u;
}

/*
 * Find a slot ready to carry the next unit: an idle one, else an empty one
 * that gets a fresh buffer. When the request holds no buffer at all and the
 * pool is dry, it queues for one (REQ_WAIT_BUF) and returns NULL; when it
 * holds one that is busy, it just waits for that one. Cost: O(zones).
 */
static struct slot *slot_acquire(struct io_req *q, uint64_t left)
{
	struct slot *empty = NULL;
	int held = 0;
	size_t want = q->unit < left ? q->unit : (size_t)left;

	for (int i = 0; i < 2; i++) {
		if (q->slot[i].st == SLOT_IDLE)
			return &q->slot[i];
		if (q->slot[i].st == SLOT_EMPTY)
			empty = &q->slot[i];
		else
			held++;
	}
	if (!empty)
		return NULL;
	if (iod_buf_get(q->ops->pool, want, &empty->buf) == 0) {
		empty->st = SLOT_IDLE;
		return empty;
	}
	if (!held) {
		q->state = REQ_WAIT_BUF;
		q->waiter.fn = req_wake;
		q->waiter.arg = q;
		iod_buf_wait(q->ops->pool, &q->waiter);
	}
	return NULL;
}

/*
 * Move len bytes between buf and the object along the segment list,
 * starting at the disk cursor, and advance it. Units are consumed in bulk
 * order, so the cursor only moves forward. Cost: one pwrite/pread per
 * segment piece.
 */
static int disk_xfer(struct io_req *q, uint8_t *buf, size_t len, int write)
{
	while (len) {
		const struct proto_seg *sg = &q->segs[q->seg];
		uint64_t n = sg->len - q->seg_off;
		int rc;

		if (n > len)
			n = len;
		if (write)
			rc = iod_store_write(q->ops->st, q->q.ino, sg->off + q->seg_off,
					     buf, (size_t)n);
		else
			rc = iod_store_read(q->ops->st, q->q.ino, sg->off + q->seg_off,
					    buf, (size_t)n);
		if (rc < 0)
			return rc;
		buf += n;
		len -= (size_t)n;
		q->seg_off += n;
		if (q->seg_off == sg->len) {
			q->seg++;
			q->seg_off = 0;
		}
	}
	return 0;
}

/* Pull completion: the slot's unit is in (or the connection failed). */
static void pull_done(struct net_sreq *r, int rc, void *arg)
{
	struct slot *s = arg;
	struct io_req *q = s->req;

	q->inflight--;
	if (rc < 0) {
		s->st = SLOT_IDLE;
		if (!q->err)
			q->err = rc;
	} else {
		s->st = SLOT_FULL;
	}
	req_advance(q);
}

/* Push completion: the slot's buffer may be reused. */
static void push_done(struct net_sreq *r, int rc, void *arg)
{
	struct slot *s = arg;
	struct io_req *q = s->req;

	q->inflight--;
	s->st = SLOT_IDLE;
	if (rc < 0 && !q->err)
		q->err = rc;
	req_advance(q);
}

/*
 * One step of an IO_WRITE. Pulls go one at a time, in order; a new pull is
 * started before the previous unit is written, so the network fills one
 * slot while the disk drains the other.
 * @return 1 progress made, 0 nothing to do now, -1 request finished
 */
static int write_step(struct io_req *q)
{
	struct slot *s, *full = NULL;

	if (q->err) {
		if (q->inflight)
			return 0;
		req_finish(q, q->err, NULL, 0);
		return -1;
	}
	if (!q->inflight && q->net_off < q->total && q->state == REQ_RUNNING &&
	    (s = slot_acquire(q, q->total - q->net_off))) {
		uint64_t left = q->total - q->net_off;
		int rc;

		s->len = s->buf.size < q->unit ? s->buf.size : q->unit;
		if (s->len > left)
			s->len = (size_t)left;
		s->off = q->net_off;
		s->iov.iov_base = s->buf.p;
		s->iov.iov_len = s->len;
		s->st = SLOT_PULLING;
		q->net_off += s->len;
		q->inflight++;
		rc = net_sreq_pull(q->r, &s->iov, 1, pull_done, s);
		if (rc < 0) {
			q->inflight--;
			s->st = SLOT_IDLE;
			q->err = rc;
		}
		return 1;
	}
	for (int i = 0; i < 2; i++)
		if (q->slot[i].st == SLOT_FULL &&
		    (!full || q->slot[i].off < full->off))
			full = &q->slot[i];
	if (full) {
		int rc = disk_xfer(q, full->buf.p, full->len, 1);

		full->st = SLOT_IDLE;
		q->disk_off += full->len;
		if (rc < 0)
			q->err = rc;
		return 1;
	}
	if (q->disk_off == q->total && !q->inflight) {
		req_finish(q, 0, NULL, 0);
		return -1;
	}
	return 0;
}

/*
 * One step of an IO_READ: read the next unit from disk into an idle slot
 * and push it at its offset in the client's memory; up to two pushes are in
 * flight, so disk reads overlap the sending of the previous unit.
 * @return 1 progress made, 0 nothing to do now, -1 request finished
 */
static int read_step(struct io_req *q)
{
	struct slot *s;

	if (q->err) {
		if (q->inflight)
			return 0;
		req_finish(q, q->err, NULL, 0);
		return -1;
	}
	if (q->disk_off < q->total && q->state == REQ_RUNNING &&
	    (s = slot_acquire(q, q->total - q->disk_off))) {
		uint64_t left = q->total - q->disk_off;
		int rc;

		s->len = s->buf.size < q->unit ? s->buf.size : q->unit;
		if (s->len > left)
			s->len = (size_t)left;
		rc = disk_xfer(q, s->buf.p, s->len, 0);
		if (rc < 0) {
			q->err = rc;
			return 1;
		}
		s->off = q->disk_off;
		s->iov.iov_base = s->buf.p;
		s->iov.iov_len = s->len;
		s->st = SLOT_PUSHING;
		q->disk_off += s->len;
		q->inflight++;
		rc = net_sreq_push(q->r, s->off, &s->iov, 1, push_done, s);
		if (rc < 0) {
			q->inflight--;
			s->st = SLOT_IDLE;
			q->err = rc;
		}
		return 1;
	}
	if (q->disk_off == q->total && !q->inflight) {
		req_finish(q, 0, NULL, 0);
		return -1;
	}
	return 0;
}

/* Completion of a push_fd or zero push: one fewer in flight. */
static void fd_push_done(struct net_sreq *r, int rc, void *arg)
{
	struct io_req *q = arg;

	q->inflight--;
	if (rc < 0 && !q->err)
		q->err = rc;
	req_advance(q);
}

/*
 * An IO_READ without buffers (transport can push_fd): every segment piece
 * below the object's size goes from the file by sendfile, the rest (holes
 * past the end) as static zeros. All pushes are queued at once; they hold
 * no memory of ours, only the request's private descriptor, closed at the
 * reply. Cost: one frame per segment (more for holes over 1 MiB).
 * @return 1 progress made, 0 nothing to do now, -1 request finished
 */
static int read_step_fd(struct io_req *q)
{
	if (q->err) {
		if (q->inflight)
			return 0;
		req_finish(q, q->err, NULL, 0);
		return -1;
	}
	while (q->disk_off < q->total) {
		const struct proto_seg *sg = &q->segs[q->seg];
		uint64_t n = sg->len - q->seg_off, foff = sg->off + q->seg_off;
		int rc;

		if (n > q->total - q->disk_off)
			n = q->total - q->disk_off;
		q->inflight++;
		if (q->fd >= 0 && foff < q->fsize) {
			if (n > q->fsize - foff)
				n = q->fsize - foff;
			rc = net_sreq_push_fd(q->r, q->disk_off, q->fd, foff,
					      (size_t)n, fd_push_done, q);
		} else {
			struct iovec z[OPS_ZERO_IOVS];
			int cnt = 0;

			if (n > (uint64_t)OPS_ZERO_LEN * OPS_ZERO_IOVS)
				n = (uint64_t)OPS_ZERO_LEN * OPS_ZERO_IOVS;
			for (uint64_t left = n; left; cnt++) {
				size_t l = left < OPS_ZERO_LEN ? (size_t)left
							       : OPS_ZERO_LEN;

				z[cnt].iov_base = (void *)ops_zeros;
				z[cnt].iov_len = l;
				left -= l;
			}
			rc = net_sreq_push(q->r, q->disk_off, z, cnt,
					   fd_push_done, q);
		}
		if (rc < 0) {
			q->inflight--;
			q->err = rc;
			return 1;
		}
		q->disk_off += n;
		q->seg_off += n;
		if (q->seg_off == sg->len) {
			q->seg++;
			q->seg_off = 0;
		}
	}
	if (!q->inflight) {
		req_finish(q, 0, NULL, 0);
		return -1;
	}
	return 0;
}

/*
 * Drive a bulk request as far as it can go now. Completions that run while
 * we are inside (synchronous pull/push callbacks) only note their result
 * and ask for another pass, so the state is never changed under our feet.
 */
static void req_advance(struct io_req *q)
{
	if (q->busy) {
		q->again = 1;
		return;
	}
	q->busy = 1;
	for (;;) {
		int rc;

		q->again = 0;
		rc = q->op == PROTO_OP_IO_WRITE ? write_step(q) :
		     q->by_fd ? read_step_fd(q) : read_step(q);
		if (rc < 0)
			return; /* finished: q is recycled, don't touch it */
		if (rc == 0 && !q->again)
			break;
	}
	q->busy = 0;
}

/* Serve IO_SEEK and IO_BLOCKS, whose replies are one u64, and reply. */
static void req_value(struct io_req *q)
{
	uint8_t body[8];
	struct wbuf w;
	uint64_t v = 0;
	int rc;

	if (q->op == PROTO_OP_IO_SEEK)
		rc = iod_store_seek(q->ops->st, q->q.ino, q->q.size,
				    q->q.flags & PROTO_SEEK_HOLE, &v);
	else
		rc = iod_store_blocks(q->ops->st, q->q.ino, &v);
	if (rc == 0) {
		wb_init(&w, body, sizeof(body));
		rc = proto_ioval_encode(&w, v);
	}
	if (rc < 0) {
		req_finish(q, rc, NULL, 0);
		return;
	}
	req_finish(q, 0, body, (uint32_t)w.len);
}

/* IO_LIST on a worker: a batch of objects from the cursor, encoded into
 * the scratch's body. @return 0, -errno */
static int work_list(struct io_req *q)
{
	struct scrub_job *sj = q->scrub;
	struct wbuf w;
	int rc;

	rc = iod_store_list(q->ops->st, &sj->scan, q->q.cursor, q->q.max,
			    sj->list.objs, &sj->list.n, &sj->list.next);
	if (rc < 0)
		return rc;
	sj->list.eof = sj->list.next.bucket == PROTO_LIST_END;
	wb_init(&w, sj->body, sizeof(sj->body));
	rc = proto_iolist_encode(&w, &sj->list);
	q->wlen = (uint32_t)w.len;
	return rc;
}

/* IO_CSUM on a worker: CRC-32C of a range of at most PROTO_MAX_CSUM_LEN,
 * read in 64 KiB pieces, encoded into the scratch's body.
 * @return 0, -EFBIG (size beyond 2^62), -errno */
static int work_csum(struct io_req *q)
{
	struct scrub_job *sj = q->scrub;
	struct proto_csum cs;
	struct wbuf w;
	int rc;

	rc = iod_store_csum_fd(q->wfd, q->q.off, q->q.len, sj->body,
			       sizeof(sj->body), &cs.crc, &cs.size);
	if (rc < 0)
		return rc;
	if (cs.size > (1ull << 62))
		return -EFBIG;
	wb_init(&w, sj->body, sizeof(sj->body));
	rc = proto_csum_encode(&w, &cs);
	q->wlen = (uint32_t)w.len;
	return rc;
}

/* The request a worker job is embedded in. */
static struct io_req *req_of_job(struct iod_job *j)
{
	return (struct io_req *)((char *)j - offsetof(struct io_req, job));
}

/* iod_job run(), on a worker: the disk call of the op, on the private
 * descriptor (and, for IO_LIST, the store's objects directory only).
 * Touches nothing of the request but its worker fields and its decoded
 * body: the connection is the loop's. */
static void work_run(struct iod_job *j)
{
	struct io_req *q = req_of_job(j);

	switch (q->op) {
	case PROTO_OP_IO_FSYNC:
		fsync_hold(q->ops, q->q.ino);
		q->wrc = iod_store_fsync_fd(q->wfd, q->q.flags & 1);
		break;
	case PROTO_OP_IO_FALLOCATE:
		q->wrc = iod_store_fallocate_fd(q->wfd, q->q.mode, q->q.off,
						q->q.len);
		break;
	case PROTO_OP_IO_CSUM:
		q->wrc = work_csum(q);
		break;
	case PROTO_OP_IO_LIST:
		q->wrc = work_list(q);
		break;
	default:
		q->wrc = -EOPNOTSUPP;
		break;
	}
}

/* Hand backlogged ops to the pool, oldest first, while it has room. */
static void work_feed(struct iod_ops *ops)
{
	struct io_req *q;

	while ((q = ops->backlog_head)) {
		if (iod_work_submit(ops->work, &q->job) < 0)
			return;
		ops->backlog_head = q->wnext;
		if (!ops->backlog_head)
			ops->backlog_tail = NULL;
	}
}

/* iod_job done(), in the loop: a worker finished the op (room in the
 * queue for the backlog); release what it used and reply. The request is
 * still valid even if its connection closed meanwhile: the transport
 * keeps it until the reply, which then only frees it. */
static void work_done(struct iod_job *j)
{
	struct io_req *q = req_of_job(j);
	struct iod_ops *ops = q->ops;
	struct scrub_job *sj = q->scrub;
	int32_t rc = q->wrc;
	uint32_t len = rc == 0 && sj ? q->wlen : 0;

	work_feed(ops);
	q->scrub = NULL; /* the body must outlive the reply */
	work_release(q);
	req_finish(q, rc, len ? sj->body : NULL, len);
	if (sj)
		scrub_put(ops, sj);
}

/*
 * Start IO_FSYNC, IO_FALLOCATE, IO_CSUM or IO_LIST: here, in the loop, the
 * parts that use the store (the object's private descriptor, created when
 * a fallocate creates), then the disk call on a worker, or in the backlog
 * behind older ones when the pool's queue is full. What needs no disk call
 * (a missing object to flush, a punch of nothing) is answered at once.
 */
static void req_work(struct io_req *q)
{
	struct iod_ops *ops = q->ops;
	int rc = 0;

	switch (q->op) {
	case PROTO_OP_IO_FSYNC:
		rc = iod_store_open_fd(ops->st, q->q.ino, 0, &q->wfd);
		if (rc == -ENOENT)
			rc = 0; /* nothing to flush */
		break;
	case PROTO_OP_IO_FALLOCATE:
		rc = iod_store_fallocate_open(ops->st, q->q.ino, q->q.mode,
					      q->q.off, q->q.len, &q->wfd);
		break;
	case PROTO_OP_IO_CSUM:
		rc = iod_store_open_fd(ops->st, q->q.ino, 0, &q->wfd);
		/* fall through */
	case PROTO_OP_IO_LIST:
		if (rc == 0 && !(q->scrub = scrub_get(ops)))
			rc = -ENOMEM;
		break;
	}
	if (rc < 0 || (q->wfd < 0 && !q->scrub)) {
		work_release(q);
		req_finish(q, rc, NULL, 0);
		return;
	}
	q->job = (struct iod_job){ work_run, work_done, NULL };
	if (!ops->backlog_head && iod_work_submit(ops->work, &q->job) == 0)
		return;
	q->wnext = NULL;
	if (ops->backlog_tail)
		ops->backlog_tail->wnext = q;
	else
		ops->backlog_head = q;
	ops->backlog_tail = q;
}

/* Serve the small ops synchronously and reply; hand the slow ones to a
 * worker. */
static void req_simple(struct io_req *q)
{
	struct iod_ops *ops = q->ops;
	uint8_t body[128];
	struct wbuf w;
	struct proto_statfs sf;
	int rc;

	switch (q->op) {
	case PROTO_OP_IO_TRUNCATE:
		rc = iod_store_truncate(ops->st, q->q.ino, q->q.size);
		break;
	case PROTO_OP_IO_REMOVE:
		rc = iod_store_remove(ops->st, q->q.ino);
		break;
	case PROTO_OP_IO_REMOVE_MANY:
		/* every inode is tried; the status is the first failure */
		rc = 0;
		for (uint32_t i = 0; i < q->q.inos.n; i++) {
			int r = iod_store_remove(ops->st,
						 proto_inos_at(&q->q.inos, i));

			if (r && !rc)
				rc = r;
		}
		break;
	case PROTO_OP_IO_FSYNC:
	case PROTO_OP_IO_FALLOCATE:
	case PROTO_OP_IO_LIST:
	case PROTO_OP_IO_CSUM:
		req_work(q);
		return;
	case PROTO_OP_IO_SEEK:
	case PROTO_OP_IO_BLOCKS:
		req_value(q);
		return;
	case PROTO_OP_IO_STATFS:
		rc = iod_store_statfs(ops->st, &sf);
		if (rc < 0)
			break;
		wb_init(&w, body, sizeof(body));
		rc = proto_statfs_encode(&w, &sf);
		if (rc == 0 && w.err)
			rc = w.err;
		if (rc < 0)
			break;
		req_finish(q, 0, body, (uint32_t)w.len);
		return;
	default:
		rc = -EOPNOTSUPP;
		break;
	}
	req_finish(q, rc, NULL, 0);
}

/* An IO_READ of OPS_FD_MIN or more on a transport that can send from a
 * file goes by push_fd from a private descriptor of the object (none: all
 * zeros); on any other failure to open it, the buffered path reports it. */
static void req_try_fd(struct io_req *q)
{
	int rc;

	if (q->total < OPS_FD_MIN || !net_sreq_can_push_fd(q->r))
		return;
	rc = iod_store_read_fd(q->ops->st, q->q.ino, &q->fd, &q->fsize);
	if (rc == 0 || rc == -ENOENT) {
		q->by_fd = 1;
		if (rc == -ENOENT)
			q->fd = -1; /* no object: all zeros */
	}
}

/* The mgr's and the admin tool's ops, which a client's key may not send:
 * IO_FENCE (lease and fence set), IO_LIST and IO_CSUM (scrub and resync). */
static int ops_servers_only(uint16_t op)
{
	return op == PROTO_OP_IO_FENCE || op == PROTO_OP_IO_LIST ||
	       op == PROTO_OP_IO_CSUM;
}

/*
 * net_req_fn: decode the request and start it. Malformed bodies close the
 * connection (reject); unknown ops get -EOPNOTSUPP; a context allocation
 * failure gets -ENOMEM. IO_FENCE has a body of its own (iod_fence.c); a
 * mirrored IO_READ / IO_SEEK the fence refuses gets -ESTALE before any
 * object is opened or any data moves.
 */
void iod_ops_handle(struct net_sreq *r, void *arg)
{
	struct iod_ops *ops = arg;
	uint16_t op = r->hdr.op;
	const char *why = "malformed body";
	struct io_req *q;
	uint64_t expect;
	int rc;

	if (op < PROTO_OP_IO_READ || op >= PROTO_OP_IO_LAST) {
		log_debug("%s from %s: not an iod op", proto_op_name(op),
			  net_sconn_peer(r->conn));
		net_sreq_reply(r, -EOPNOTSUPP, NULL, 0);
		return;
	}
	if (ops_servers_only(op) && !net_sconn_privileged(r->conn)) {
		log_notice("%s from %s refused: it needs the servers' key",
			   proto_op_name(op), net_sconn_peer(r->conn));
		net_sreq_reply(r, -EPERM, NULL, 0);
		return;
	}
	if (op == PROTO_OP_IO_FENCE) {
		iod_fence_serve(ops->fence, r);
		return;
	}
	q = req_get(ops, r);
	if (!q) {
		net_sreq_reply(r, -ENOMEM, NULL, 0);
		return;
	}
	q->op = op;
	expect = op == PROTO_OP_IO_READ ? r->hdr.aux :
		 op == PROTO_OP_IO_WRITE ? r->hdr.bulk_len : 0;
	rc = proto_ioreq_decode(r->body, r->body_len, op, expect, &q->q,
				q->segs, &why);
	if (rc == -EOPNOTSUPP) {
		req_finish(q, -EOPNOTSUPP, NULL, 0);
		return;
	}
	if (rc < 0) {
		req_put(q);
		net_sreq_reject(r, why ? why : "malformed body");
		return;
	}
	if (iod_fence_gate(ops->fence, op, &q->q) < 0) {
		req_finish(q, -ESTALE, NULL, 0);
		return;
	}
	if (op != PROTO_OP_IO_READ && op != PROTO_OP_IO_WRITE) {
		req_simple(q);
		return;
	}
	q->total = expect;
	q->unit = unit_for(expect);
	if (op == PROTO_OP_IO_READ)
		req_try_fd(q);
	log_debug("%s ino %llu: %u segs, %llu bytes, unit %zu",
		  proto_op_name(op), (unsigned long long)q->q.ino, q->q.nsegs,
		  (unsigned long long)expect, q->unit);
	req_advance(q);
}
