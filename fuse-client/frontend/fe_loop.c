/*
 * fe_loop.c - rpfs-fuse's FUSE worker loop on registered buffers
 * (fe_loop.h). Only libfuse's public API is used: fuse_session_receive_buf
 * reads into the worker's preset buf.mem (libfuse allocates only when mem
 * is NULL, and splice reading is never negotiated: fe_init clears
 * FUSE_CAP_SPLICE_READ), fuse_session_process_buf dispatches with the data
 * in place, and a fuse_custom_io routes every read and reply through the
 * calling thread's cloned fd.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "fe_loop.h"
#include "log.h"

/* libfuse 3.14 reads requests of se->bufsize bytes, FUSE_MAX_MAX_PAGES
 * (256, the kernel's limit) pages plus a 4 KiB header allowance; after INIT
 * it shrinks to max_write + 4 KiB. Our request buffers hold the initial. */
#define LOOP_MAX_PAGES 256
#define LOOP_HDR_SIZE 0x1000
#define LOOP_REPLY_SIZE (1u << 20) /* FE_MAX_IO: max_read/max_readahead */

/* One worker. Fields are set before its thread starts and read-only
 * after, except those noted. */
struct loop_worker {
	struct fe_loop *lp;
	pthread_t thr;
	int started;           /* thr is joinable (main thread only) */
	int fd;                /* its cloned /dev/fuse fd */
	char *req;             /* request buffer, lp->req_cap bytes, in the pool */
	char *reply;           /* reply buffer, LOOP_REPLY_SIZE bytes, in the pool */
	uint64_t read_unique;  /* READ being processed, 0 if none (own thread) */
	struct fuse_buf buf;   /* the request read (own thread); here, not on
				  the worker's stack: see worker_main */
	int rc;                /* 0 or the -errno it stopped on (own thread,
				  read by main after join) */
};

struct fe_loop {
	struct fuse_session *se;
	struct net_client *net;
	unsigned n;                 /* workers */
	size_t req_cap;             /* each request buffer */
	void *pool;                 /* mmap'd: n * (req_cap + reply) */
	size_t pool_len;
	int declared;               /* pool declared to net */
	int evfd;                   /* workers post here when they stop */
	atomic_uint_least64_t copy_bytes; /* payload through /dev/fuse, written
					   * or spliced (atomic) */
	atomic_uint_least64_t max_req;    /* largest READ/WRITE payload */
	atomic_int bufsize_warned;        /* once: libfuse's bufsize too big */
	atomic_int ownbuf_warned;         /* once: libfuse used its own buffer */
	struct loop_worker w[];
};

/* FUSE requests read, by opcode (FE_LOOP_FUSE_OPS and above in the last
 * slot): process-wide, as rpfs-fuse runs one session; relaxed atomics,
 * added by the workers, read by the metrics thread (fe_loop_fuse_count). */
static atomic_uint_least64_t fuse_ops[FE_LOOP_FUSE_OPS + 1];

/* Opcode names for /metrics, as the kernel's enum fuse_opcode spells them
 * without FUSE_; NULL for the numbers it leaves unused. */
static const char *const fuse_op_names[FE_LOOP_FUSE_OPS] = {
	[FUSE_LOOKUP] = "LOOKUP", [FUSE_FORGET] = "FORGET",
	[FUSE_GETATTR] = "GETATTR", [FUSE_SETATTR] = "SETATTR",
	[FUSE_READLINK] = "READLINK", [FUSE_SYMLINK] = "SYMLINK",
	[FUSE_MKNOD] = "MKNOD", [FUSE_MKDIR] = "MKDIR",
	[FUSE_UNLINK] = "UNLINK", [FUSE_RMDIR] = "RMDIR",
	[FUSE_RENAME] = "RENAME", [FUSE_LINK] = "LINK", [FUSE_OPEN] = "OPEN",
	[FUSE_READ] = "READ", [FUSE_WRITE] = "WRITE", [FUSE_STATFS] = "STATFS",
	[FUSE_RELEASE] = "RELEASE", [FUSE_FSYNC] = "FSYNC",
	[FUSE_SETXATTR] = "SETXATTR", [FUSE_GETXATTR] = "GETXATTR",
	[FUSE_LISTXATTR] = "LISTXATTR", [FUSE_REMOVEXATTR] = "REMOVEXATTR",
	[FUSE_FLUSH] = "FLUSH", [FUSE_INIT] = "INIT",
	[FUSE_OPENDIR] = "OPENDIR", [FUSE_READDIR] = "READDIR",
	[FUSE_RELEASEDIR] = "RELEASEDIR", [FUSE_FSYNCDIR] = "FSYNCDIR",
	[FUSE_GETLK] = "GETLK", [FUSE_SETLK] = "SETLK",
	[FUSE_SETLKW] = "SETLKW", [FUSE_ACCESS] = "ACCESS",
	[FUSE_CREATE] = "CREATE", [FUSE_INTERRUPT] = "INTERRUPT",
	[FUSE_BMAP] = "BMAP", [FUSE_DESTROY] = "DESTROY",
	[FUSE_IOCTL] = "IOCTL", [FUSE_POLL] = "POLL",
	[FUSE_NOTIFY_REPLY] = "NOTIFY_REPLY",
	[FUSE_BATCH_FORGET] = "BATCH_FORGET", [FUSE_FALLOCATE] = "FALLOCATE",
	[FUSE_READDIRPLUS] = "READDIRPLUS", [FUSE_RENAME2] = "RENAME2",
	[FUSE_LSEEK] = "LSEEK", [FUSE_COPY_FILE_RANGE] = "COPY_FILE_RANGE",
	[FUSE_SETUPMAPPING] = "SETUPMAPPING",
	[FUSE_REMOVEMAPPING] = "REMOVEMAPPING", [FUSE_SYNCFS] = "SYNCFS",
	[FUSE_TMPFILE] = "TMPFILE",
};

/* The worker running on this thread, NULL elsewhere. */
static __thread struct loop_worker *cur;
/* A non-worker thread's reply fd (fe_loop_set_reply_fd), -1 if none. */
static __thread int reply_fd = -1;
/* Run once after this thread's next reply is written (fe_loop_after_reply). */
static __thread void (*after_fn)(void *);
static __thread void *after_arg;

/* The fd this thread reads and replies on: its worker's clone, the fd set
 * for it, or what libfuse passed (the session fd). */
static int thread_fd(int fallback)
{
	if (cur)
		return cur->fd;
	return reply_fd >= 0 ? reply_fd : fallback;
}

/* Raise max_req to v (lock-free). */
static void note_max(struct fe_loop *lp, uint64_t v)
{
	uint_least64_t m = atomic_load_explicit(&lp->max_req, memory_order_relaxed);

	while (v > m && !atomic_compare_exchange_weak_explicit(&lp->max_req, &m, v,
			memory_order_relaxed, memory_order_relaxed))
		;
}

/* Count a request just read: WRITE data was copied in by the kernel; a
 * READ's reply is counted when it is written (io_writev) or spliced
 * (io_splice_send). */
static void note_request(struct loop_worker *w, const void *buf, size_t n)
{
	const struct fuse_in_header *in = buf;
	const char *arg = (const char *)buf + sizeof(*in);

	w->read_unique = 0;
	if (n < sizeof(*in))
		return;
	atomic_fetch_add_explicit(&fuse_ops[in->opcode < FE_LOOP_FUSE_OPS ?
					    in->opcode : FE_LOOP_FUSE_OPS],
				  1, memory_order_relaxed);
	if (in->opcode == FUSE_WRITE && n >= sizeof(*in) + sizeof(struct fuse_write_in)) {
		const struct fuse_write_in *wi = (const void *)arg;

		atomic_fetch_add_explicit(&w->lp->copy_bytes, wi->size,
					  memory_order_relaxed);
		note_max(w->lp, wi->size);
	} else if (in->opcode == FUSE_READ &&
		   n >= sizeof(*in) + sizeof(struct fuse_read_in)) {
		const struct fuse_read_in *ri = (const void *)arg;

		note_max(w->lp, ri->size);
		w->read_unique = in->unique;
	}
}

/* custom io read: from the calling worker's clone into its buffer. libfuse
 * asks for se->bufsize bytes; more than the buffer holds would overrun it,
 * so the read is clipped and that logged once (the kernel then refuses
 * requests that do not fit, rather than memory being overwritten). A read
 * into another buffer (a libfuse that ignores the preset buf.mem) works but
 * loses the zero-copy path: logged once too, so tests notice. */
static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	struct loop_worker *w = cur;
	ssize_t n;

	(void)userdata;
	if (w && buf == w->req && len > w->lp->req_cap) {
		if (!atomic_exchange(&w->lp->bufsize_warned, 1))
			log_err("libfuse reads %zu-byte requests, the loop's buffers "
				"hold %zu", len, w->lp->req_cap);
		len = w->lp->req_cap;
	}
	if (w && buf != w->req && !atomic_exchange(&w->lp->ownbuf_warned, 1))
		log_warn("libfuse reads requests into its own buffer: FUSE data "
			 "is not in the registered pool");
	n = read(thread_fd(fd), buf, len);
	if (n > 0 && w)
		note_request(w, buf, (size_t)n);
	return n;
}

/* custom io writev: a reply (or notification) on the thread's fd; a READ's
 * payload is counted as copied; then the thread's after-reply hook, if any. */
static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct loop_worker *w = cur;
	const struct fuse_out_header *out = iov[0].iov_base;
	ssize_t n;

	(void)userdata;
	n = writev(thread_fd(fd), iov, count);
	if (after_fn) {
		void (*fn)(void *) = after_fn;

		after_fn = NULL;
		fn(after_arg);
	}
	if (n > (ssize_t)sizeof(*out) && w && w->read_unique &&
	    out->unique == w->read_unique && out->error == 0) {
		atomic_fetch_add_explicit(&w->lp->copy_bytes,
					  (uint64_t)n - sizeof(*out),
					  memory_order_relaxed);
		w->read_unique = 0;
	}
	return n;
}

/* custom io splice_receive: /dev/fuse is the source (unused: fe_init never
 * negotiates splice reading), on the thread's fd. */
static ssize_t io_splice_receive(int fdin, off_t *offin, int fdout,
				 off_t *offout, size_t len, unsigned int flags,
				 void *userdata)
{
	(void)userdata;
	return splice(thread_fd(fdin), offin, fdout, offout, len, flags);
}

/* custom io splice_send: /dev/fuse is the target, on the thread's fd.
 * libfuse splices only replies with data from an fd (fe_splice.c's READ
 * replies): header and payload leave the pipe in one splice, and the
 * kernel copies the payload into the reader's pages (no SPLICE_F_MOVE for
 * a direct read), so a READ's payload counts in copy_bytes as it does
 * when written (io_writev). The header is in the pipe, not here, so the
 * reply is matched by the READ this worker is processing; a short or
 * failed splice is an error libfuse reports, and counts nothing. */
static ssize_t io_splice_send(int fdin, off_t *offin, int fdout,
			      off_t *offout, size_t len, unsigned int flags,
			      void *userdata)
{
	struct loop_worker *w = cur;
	ssize_t n;

	(void)userdata;
	n = splice(fdin, offin, thread_fd(fdout), offout, len, flags);
	if (n > (ssize_t)sizeof(struct fuse_out_header) && (size_t)n == len &&
	    w && w->read_unique) {
		atomic_fetch_add_explicit(&w->lp->copy_bytes,
					  (uint64_t)n - sizeof(struct fuse_out_header),
					  memory_order_relaxed);
		w->read_unique = 0;
	}
	return n;
}

static const struct fuse_custom_io loop_io = {
	.read = io_read,
	.writev = io_writev,
	.splice_receive = io_splice_receive,
	.splice_send = io_splice_send,
};

/* Open a clone of the session's /dev/fuse fd: requests read from it are
 * answered on it. @return the fd, or -errno */
static int clone_fd(int sessionfd)
{
	uint32_t master = (uint32_t)sessionfd;
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (ioctl(fd, FUSE_DEV_IOC_CLONE, &master) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

/* Map the pool and carve each worker's buffers; declare it to net (a
 * failure only costs registrations per call, so it is logged, not fatal).
 * @return 0, -errno from mmap */
static int pool_map(struct fe_loop *lp)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t per;
	int rc;

	lp->req_cap = LOOP_MAX_PAGES * page + LOOP_HDR_SIZE;
	per = lp->req_cap + LOOP_REPLY_SIZE;
	lp->pool_len = per * lp->n;
	lp->pool = mmap(NULL, lp->pool_len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (lp->pool == MAP_FAILED) {
		lp->pool = NULL;
		return -errno;
	}
	for (unsigned i = 0; i < lp->n; i++) {
		lp->w[i].req = (char *)lp->pool + i * per;
		lp->w[i].reply = lp->w[i].req + lp->req_cap;
	}
	rc = net_client_register_mem(lp->net, lp->pool, lp->pool_len);
	if (rc)
		log_warn("cannot declare the FUSE buffers to the transport: %s",
			 strerror(-rc));
	lp->declared = rc == 0;
	return 0;
}

int fe_loop_new(struct fe_loop **out, struct fuse_session *se,
		struct net_client *net, unsigned nworkers)
{
	struct fe_loop *lp;
	int rc;

	*out = NULL;
	if (nworkers < 1 || nworkers > FE_LOOP_MAX_WORKERS)
		return -EINVAL;
	lp = calloc(1, sizeof(*lp) + nworkers * sizeof(lp->w[0]));
	if (!lp)
		return -ENOMEM;
	lp->se = se;
	lp->net = net;
	lp->n = nworkers;
	for (unsigned i = 0; i < nworkers; i++) {
		lp->w[i].lp = lp;
		lp->w[i].fd = -1;
	}
	lp->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (lp->evfd < 0) {
		rc = -errno;
		goto out_free;
	}
	for (unsigned i = 0; i < nworkers; i++) {
		lp->w[i].fd = clone_fd(fuse_session_fd(se));
		if (lp->w[i].fd < 0) {
			rc = lp->w[i].fd;
			log_err("cannot clone /dev/fuse: %s", strerror(-rc));
			goto out_free;
		}
	}
	rc = pool_map(lp);
	if (rc) {
		log_err("cannot map %u FUSE buffers: %s", nworkers, strerror(-rc));
		goto out_free;
	}
	if (fuse_session_custom_io(se, &loop_io, fuse_session_fd(se)) != 0) {
		log_err("cannot install the FUSE worker io");
		rc = -EINVAL;
		goto out_free;
	}
	*out = lp;
	return 0;
out_free:
	fe_loop_free(lp);
	return rc;
}

/* Tell the main thread a worker stopped. */
static void post_stop(struct fe_loop *lp)
{
	uint64_t one = 1;

	if (write(lp->evfd, &one, sizeof(one)) != sizeof(one))
		(void)0; /* counter saturated: the main thread is awake anyway */
}

/*
 * Worker thread: receive into its buffer, process, until the session ends.
 * Cancellation is enabled only while blocked reading /dev/fuse (as
 * libfuse's own loop does), so a request is never left half processed.
 * No local of this function or of io_read may have its address taken: a
 * cancellation unwinds their frames without AddressSanitizer unpoisoning
 * the redzones of such locals, and the thread's exit would then trip over
 * them (hence w->buf).
 */
static void *worker_main(void *arg)
{
	struct loop_worker *w = arg;
	struct fuse_session *se = w->lp->se;
	int rc = 0;

	cur = w;
	(void)pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	while (!fuse_session_exited(se)) {
		memset(&w->buf, 0, sizeof(w->buf));
		w->buf.mem = w->req;
		w->buf.size = w->lp->req_cap;
		(void)pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		rc = fuse_session_receive_buf(se, &w->buf);
		(void)pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (rc == -EINTR || rc == -EAGAIN)
			continue;
		if (rc <= 0)
			break; /* 0: unmounted (ENODEV) or exited */
		fuse_session_process_buf(se, &w->buf);
		rc = 0;
	}
	w->rc = rc < 0 ? rc : 0;
	if (rc < 0) {
		log_err("reading /dev/fuse: %s", strerror(-rc));
		fuse_session_exit(se);
	}
	post_stop(w->lp);
	return NULL;
}

/* Start every worker with SIGINT/SIGTERM/SIGHUP blocked (inherited from
 * the caller's mask). @return 0, -errno from pthread_create */
static int workers_start(struct fe_loop *lp)
{
	for (unsigned i = 0; i < lp->n; i++) {
		int rc = -pthread_create(&lp->w[i].thr, NULL, worker_main, &lp->w[i]);

		if (rc) {
			log_err("cannot start FUSE worker %u: %s", i, strerror(-rc));
			return rc;
		}
		lp->w[i].started = 1;
	}
	return 0;
}

/* End the session and join every started worker: those blocked reading
 * are cancelled, the others finish their request and see the exit.
 * @return the first worker error, or 0 */
static int workers_stop(struct fe_loop *lp)
{
	int rc = 0;

	fuse_session_exit(lp->se);
	for (unsigned i = 0; i < lp->n; i++)
		if (lp->w[i].started)
			(void)pthread_cancel(lp->w[i].thr);
	for (unsigned i = 0; i < lp->n; i++) {
		if (!lp->w[i].started)
			continue;
		(void)pthread_join(lp->w[i].thr, NULL);
		lp->w[i].started = 0;
		if (!rc)
			rc = lp->w[i].rc;
	}
	return rc;
}

/* Wait (signals unblocked only inside ppoll, so none is lost between the
 * check and the wait) until the session has exited. @return 0, -errno */
static int wait_exit(struct fe_loop *lp)
{
	struct pollfd pfd = { .fd = lp->evfd, .events = POLLIN };
	sigset_t mask;
	uint64_t v;

	(void)pthread_sigmask(SIG_BLOCK, NULL, &mask);
	sigdelset(&mask, SIGINT);
	sigdelset(&mask, SIGTERM);
	sigdelset(&mask, SIGHUP);
	while (!fuse_session_exited(lp->se)) {
		if (ppoll(&pfd, 1, NULL, &mask) < 0 && errno != EINTR)
			return -errno;
		if (read(lp->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			return -errno;
	}
	return 0;
}

int fe_loop_run(struct fe_loop *lp)
{
	int rc = workers_start(lp);
	int rc2;

	if (rc == 0)
		rc = wait_exit(lp);
	rc2 = workers_stop(lp);
	return rc ? rc : rc2;
}

void fe_loop_free(struct fe_loop *lp)
{
	if (!lp)
		return;
	if (lp->declared)
		(void)net_client_unregister_mem(lp->net, lp->pool);
	if (lp->pool)
		munmap(lp->pool, lp->pool_len);
	for (unsigned i = 0; i < lp->n; i++)
		if (lp->w[i].fd >= 0)
			close(lp->w[i].fd);
	if (lp->evfd >= 0)
		close(lp->evfd);
	free(lp);
}

void *fe_loop_reply_buf(size_t len)
{
	return cur && len <= LOOP_REPLY_SIZE ? cur->reply : NULL;
}

int fe_loop_req_fd(void)
{
	return cur ? cur->fd : reply_fd;
}

void fe_loop_set_reply_fd(int fd)
{
	reply_fd = fd;
}

void fe_loop_counts(const struct fe_loop *lp, uint64_t *copy,
		    uint64_t *max_req)
{
	*copy = lp ? atomic_load(&((struct fe_loop *)lp)->copy_bytes) : 0;
	*max_req = lp ? atomic_load(&((struct fe_loop *)lp)->max_req) : 0;
}

/* See fe_loop.h. */
uint64_t fe_loop_fuse_count(unsigned op, const char **name)
{
	if (op > FE_LOOP_FUSE_OPS) {
		*name = NULL;
		return 0;
	}
	*name = op < FE_LOOP_FUSE_OPS ? fuse_op_names[op] : "OTHER";
	if (!*name)
		return 0;
	return atomic_load_explicit(&fuse_ops[op], memory_order_relaxed);
}

/* See fe_loop.h. */
void fe_loop_after_reply(void (*fn)(void *), void *arg)
{
	after_fn = fn;
	after_arg = arg;
}
