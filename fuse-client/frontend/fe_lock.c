/*
 * fe_lock.c - FUSE lock operations on cli_lock: struct flock and
 * flock(2) operations to cli_lk, blocking requests on threads of their
 * own, interrupts to cancellations. See fe_lock.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/file.h>

#include "fe_lock.h"
#include "cli_lock.h"
#include "fe_loop.h"
#include "log.h"

/* A blocking request on its own thread. */
struct lkw {
	fuse_req_t req;
	struct cli_lock *lk;
	uint64_t ino, owner, fh;
	struct cli_lk want;
	struct cli_lock_wait w;
	int fd;           /* /dev/fuse fd to reply on (fe_loop_req_fd) */
};

/* Threads of blocking requests still running (lkw_mu). */
static pthread_mutex_t lkw_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lkw_cv = PTHREAD_COND_INITIALIZER;
static int lkw_threads;

/* The lock client of a request. */
static struct cli_lock *lk_of(fuse_req_t req)
{
	return ((struct fe_fuse *)fuse_req_userdata(req))->lock;
}

/* F_RDLCK/F_WRLCK/F_UNLCK to the wire type. @return 0, -EINVAL */
static int type_from_flock(short t, uint8_t *out)
{
	switch (t) {
	case F_RDLCK: *out = PROTO_LK_RDLCK; return 0;
	case F_WRLCK: *out = PROTO_LK_WRLCK; return 0;
	case F_UNLCK: *out = PROTO_LK_UNLCK; return 0;
	default: return -EINVAL;
	}
}

/* A struct flock (libfuse gives SEEK_SET, l_len 0 = to EOF) as a cli_lk.
 * @return 0, -EINVAL (negative start or length, range past 2^63) */
static int lk_from_flock(const struct flock *fl, struct cli_lk *l)
{
	if (fl->l_whence != SEEK_SET || fl->l_start < 0 || fl->l_len < 0 ||
	    type_from_flock(fl->l_type, &l->type))
		return -EINVAL;
	l->start = (uint64_t)fl->l_start;
	if (fl->l_len == 0)
		l->end = PROTO_LK_EOF;
	else if (fl->l_len - 1 > INT64_MAX - fl->l_start)
		return -EINVAL;
	else
		l->end = l->start + (uint64_t)fl->l_len - 1;
	l->pid = fl->l_pid > 0 ? (uint32_t)fl->l_pid : 0;
	l->kind = PROTO_LK_POSIX;
	return 0;
}

/* FUSE interrupt callback of a non-blocking call: stop its retries
 * through a grace period (nothing waits at the mgr). */
static void nb_interrupt(fuse_req_t req, void *data)
{
	atomic_store(&((struct cli_lock_wait *)data)->cancelled, 1);
}

/* Make w, a non-blocking call's, cancelled by an interrupt of req (a
 * signal to the caller, SIGKILL included), so that a call retried through
 * the mgr's grace period never outlives its process. */
static void nb_begin(fuse_req_t req, struct cli_lock_wait *w)
{
	cli_lock_wait_init(lk_of(req), w);
	w->nonblock = 1;
	fuse_req_interrupt_func(req, nb_interrupt, w);
}

/* Unregister the callback (waits out one that runs) before w goes. */
static void nb_end(fuse_req_t req)
{
	fuse_req_interrupt_func(req, NULL, NULL);
}

/* GETLK: ask the mgr for a conflicting lock of another owner. */
void fe_lock_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		   struct flock *lock)
{
	struct cli_lock_wait w;
	struct cli_lk l;
	int rc = lk_from_flock(lock, &l);

	if (rc || l.type == PROTO_LK_UNLCK)
		return (void) fuse_reply_err(req, EINVAL);
	nb_begin(req, &w);
	rc = cli_lock_get(lk_of(req), ino, fi->lock_owner, &l, &w);
	nb_end(req);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	if (l.type == PROTO_LK_UNLCK) {
		lock->l_type = F_UNLCK;
		return (void) fuse_reply_lock(req, lock);
	}
	lock->l_type = l.type == PROTO_LK_WRLCK ? F_WRLCK : F_RDLCK;
	lock->l_whence = SEEK_SET;
	lock->l_start = (off_t)l.start;
	lock->l_len = l.end == PROTO_LK_EOF ? 0 : (off_t)(l.end - l.start + 1);
	lock->l_pid = (pid_t)l.pid;
	fuse_reply_lock(req, lock);
}

/* FUSE interrupt callback: cancel the wait at the mgr. */
static void lkw_interrupt(fuse_req_t req, void *data)
{
	struct lkw *k = data;

	cli_lock_cancel(k->lk, &k->w);
}

/* Record a granted POSIX lock's handle, for RELEASE (OFD locks). */
static void lk_note(struct cli_lock *lk, const struct cli_lk *l, uint64_t fh,
		    uint64_t ino, uint64_t owner)
{
	if (l->kind == PROTO_LK_POSIX && l->type != PROTO_LK_UNLCK &&
	    cli_lock_note_handle(lk, fh, ino, owner))
		log_warn("inode %llu: out of memory noting a lock's handle",
			 (unsigned long long)ino);
}

/* Thread of a blocking request: wait (interruptibly), reply, go. */
static void *lkw_main(void *arg)
{
	struct lkw *k = arg;
	int rc;

	fe_loop_set_reply_fd(k->fd); /* the fd the request came from */
	fuse_req_interrupt_func(k->req, lkw_interrupt, k);
	rc = cli_lock_set(k->lk, k->ino, k->owner, &k->want, &k->w);
	fuse_req_interrupt_func(k->req, NULL, NULL); /* waits out a callback */
	if (rc == 0)
		lk_note(k->lk, &k->want, k->fh, k->ino, k->owner);
	fuse_reply_err(k->req, -rc);
	free(k);
	pthread_mutex_lock(&lkw_mu);
	if (--lkw_threads == 0)
		pthread_cond_broadcast(&lkw_cv);
	pthread_mutex_unlock(&lkw_mu);
	return NULL;
}

/* Start the blocking request on a detached thread of its own.
 * @return 0 (the thread replies), -ENOMEM, -EAGAIN (no thread) */
static int lkw_start(fuse_req_t req, uint64_t ino, uint64_t owner,
		     uint64_t fh, const struct cli_lk *l)
{
	struct lkw *k = calloc(1, sizeof(*k));
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (!k)
		return -ENOMEM;
	*k = (struct lkw){ req, lk_of(req), ino, owner, fh, *l, { 0 },
			   fe_loop_req_fd() };
	cli_lock_wait_init(k->lk, &k->w);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&lkw_mu);
	rc = -pthread_create(&t, &attr, lkw_main, k);
	if (rc == 0)
		lkw_threads++;
	pthread_mutex_unlock(&lkw_mu);
	pthread_attr_destroy(&attr);
	if (rc)
		free(k);
	return rc;
}

/* Set, or block on a thread of its own when asked to wait. */
static void lk_set(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		   uint64_t owner, const struct cli_lk *l, int sleep)
{
	struct cli_lock *lk = lk_of(req);
	struct cli_lock_wait w;
	int rc;

	if (sleep && l->type != PROTO_LK_UNLCK) {
		rc = lkw_start(req, ino, owner, fi->fh, l);
		if (rc == 0)
			return;
		return (void) fuse_reply_err(req, -rc);
	}
	nb_begin(req, &w);
	rc = cli_lock_set(lk, ino, owner, l, &w);
	nb_end(req);
	if (rc == 0)
		lk_note(lk, l, fi->fh, ino, owner);
	fuse_reply_err(req, -rc);
}

/* SETLK / SETLKW. */
void fe_lock_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		   struct flock *lock, int sleep)
{
	struct cli_lk l;

	if (lk_from_flock(lock, &l))
		return (void) fuse_reply_err(req, EINVAL);
	lk_set(req, ino, fi, fi->lock_owner, &l, sleep);
}

/* FLOCK: a whole-file lock of the open file (owner fi->lock_owner). */
void fe_lock_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		   int op)
{
	struct cli_lk l = { 0, PROTO_LK_EOF, 0, PROTO_LK_UNLCK, PROTO_LK_FLOCK };

	switch (op & ~LOCK_NB) {
	case LOCK_SH: l.type = PROTO_LK_RDLCK; break;
	case LOCK_EX: l.type = PROTO_LK_WRLCK; break;
	case LOCK_UN: l.type = PROTO_LK_UNLCK; break;
	default: return (void) fuse_reply_err(req, EINVAL);
	}
	l.pid = (uint32_t)fuse_req_ctx(req)->pid;
	lk_set(req, ino, fi, fi->lock_owner, &l, !(op & LOCK_NB));
}

/* FLUSH: a close drops the closing process's POSIX locks on the file. */
int fe_lock_flush(struct fe_fuse *cf, fuse_ino_t ino,
		  struct fuse_file_info *fi)
{
	if (!cf->lock)
		return 0;
	return cli_lock_flush(cf->lock, ino, fi->lock_owner);
}

/* RELEASE: the handle's flock, and the OFD locks taken through it. */
int fe_lock_release(struct fe_fuse *cf, fuse_ino_t ino,
		    struct fuse_file_info *fi)
{
	if (!cf->lock)
		return 0;
	return cli_lock_release_handle(cf->lock, fi->fh, ino,
				       fi->flock_release ? fi->lock_owner : 0);
}

/* End the waits, then wait for their threads to reply and exit. */
void fe_lock_drain(struct fe_fuse *cf)
{
	if (!cf->lock)
		return;
	cli_lock_stop(cf->lock);
	pthread_mutex_lock(&lkw_mu);
	while (lkw_threads)
		pthread_cond_wait(&lkw_cv, &lkw_mu);
	pthread_mutex_unlock(&lkw_mu);
}
