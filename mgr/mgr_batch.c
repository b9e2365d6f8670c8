/*
 * mgr_batch.c - the mgr's writer thread (mgr_batch.h): write ops queued by
 * the loop run in batches, one commit each, and go back to the loop to be
 * answered.
 *
 * Why a thread: a commit waits for the disk (LMDB: fdatasync, 0.1 to 1 ms
 * on these machines) or for the database (PostgreSQL: a round trip and its
 * WAL flush). Done on the loop, that wait stalled every read behind it (a
 * LOOKUP that the mgr runs in 5 us waited 0.5 ms for the sync before it), and a
 * batch held only the ops of one loop iteration. On its own thread, the
 * loop answers reads during the commit, and the write ops that arrive
 * meanwhile make the next batch. The thread that opens a batch commits it:
 * LMDB's and the PostgreSQL store's writer locks belong to one thread.
 */
#include "mgr_batch.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

STAILQ_HEAD(mb_list, mgr_batch_item);

struct mgr_batch {
	struct mgr_db *db;          /* immutable; its batch: writer thread */
	struct ev_loop *loop;       /* immutable */
	struct mgr_batch_ops ops;   /* immutable */
	uint32_t delay_ms;          /* immutable */
	pthread_t thr;              /* loop thread */
	ev_async done_w;            /* loop thread (ev_async_send: any) */
	pthread_mutex_t mu;
	pthread_cond_t work;        /* mu: todo not empty, or stop */
	pthread_cond_t idle;        /* mu: a batch went to done */
	struct mb_list todo;        /* mu: submitted, not yet taken */
	struct mb_list done;        /* mu: committed or failed, not answered */
	uint64_t submitted;         /* mu: ops submitted so far */
	uint64_t finished;          /* mu: ops put on done so far */
	int stop;                   /* mu: the thread ends once todo is empty */
};

/*
 * Writer thread: run the queued ops, one after another, each as a child of
 * the open batch, until none is queued or the batch reaches a cap. Ops
 * submitted while it runs join it. Returns how many it ran, in cur; *abort
 * is set to run's error when one asks to abort the batch.
 */
static uint32_t mb_fill(struct mgr_batch *b, struct mb_list *cur, int *abort)
{
	struct mgr_batch_item *it;
	size_t bytes = 0;
	uint32_t n = 0;

	pthread_mutex_lock(&b->mu);
	while (n < MGR_BATCH_MAX_OPS && bytes < MGR_BATCH_MAX_BYTES &&
	       (it = STAILQ_FIRST(&b->todo))) {
		STAILQ_REMOVE_HEAD(&b->todo, link);
		pthread_mutex_unlock(&b->mu);
		it->bytes = 0;
		mgr_db_batch_enter(b->db);
		*abort = b->ops.run(it, b->ops.arg);
		mgr_db_batch_leave(b->db);
		bytes += it->bytes;
		STAILQ_INSERT_TAIL(cur, it, link);
		n++;
		pthread_mutex_lock(&b->mu);
		if (*abort)
			break;
	}
	pthread_mutex_unlock(&b->mu);
	return n;
}

/* Writer thread: when no batch can be opened, take the queued ops (up to
 * the cap) without running them; they are answered with the error. */
static uint32_t mb_take_unrun(struct mgr_batch *b, struct mb_list *cur)
{
	struct mgr_batch_item *it;
	uint32_t n = 0;

	pthread_mutex_lock(&b->mu);
	while (n < MGR_BATCH_MAX_OPS && (it = STAILQ_FIRST(&b->todo))) {
		STAILQ_REMOVE_HEAD(&b->todo, link);
		STAILQ_INSERT_TAIL(cur, it, link);
		n++;
	}
	pthread_mutex_unlock(&b->mu);
	return n;
}

/* Writer thread: commit the open batch (one sync), or abort it when this
 * mgr may no longer commit as the active one (-ESTALE: nothing lands).
 * Cost: the store's commit. */
static int mb_commit(struct mgr_batch *b)
{
	if (b->delay_ms) {
		struct timespec ts = { b->delay_ms / 1000,
				       (long)(b->delay_ms % 1000) * 1000000 };

		nanosleep(&ts, NULL);
	}
	if (b->ops.serving && !b->ops.serving(b->ops.arg)) {
		mgr_db_batch_abort(b->db);
		return -ESTALE;
	}
	return mgr_db_batch_commit(b->db, NULL);
}

/* Writer thread: put the n ops of cur, whose batch ended with rc, on the
 * done list and wake the loop to answer them. */
static void mb_hand_back(struct mgr_batch *b, struct mb_list *cur, uint32_t n,
			 int rc)
{
	struct mgr_batch_item *it;

	STAILQ_FOREACH(it, cur, link) {
		it->commit_rc = rc;
		it->batch_n = 0;
	}
	if ((it = STAILQ_FIRST(cur)))
		it->batch_n = n;
	pthread_mutex_lock(&b->mu);
	STAILQ_CONCAT(&b->done, cur);
	b->finished += n;
	pthread_cond_broadcast(&b->idle);
	pthread_mutex_unlock(&b->mu);
	ev_async_send(b->loop, &b->done_w);
}

/* Writer thread: one batch, from open to hand-back. An -EIO of a batch
 * during which the store's server was out of reach becomes -EHOSTUNREACH
 * (mgr_kv_unreachable_since: judged against a mark taken first, as another
 * thread may end the outage before the batch's failure is looked at). */
static void mb_one(struct mgr_batch *b)
{
	struct mb_list cur = STAILQ_HEAD_INITIALIZER(cur);
	uint64_t mark = mgr_kv_reach_mark(b->db->kv);
	int rc = mgr_db_batch_open(b->db), abort = 0;
	uint32_t n;

	if (rc) {
		n = mb_take_unrun(b, &cur);
	} else {
		n = mb_fill(b, &cur, &abort);
		if (abort) {
			mgr_db_batch_abort(b->db);
			rc = abort;
		} else {
			rc = mb_commit(b);
		}
	}
	if (rc == -EIO && mgr_kv_unreachable_since(b->db->kv, mark))
		rc = -EHOSTUNREACH;
	mb_hand_back(b, &cur, n, rc);
}

/* The writer thread: a batch whenever ops are queued, until stopped with
 * none left. */
static void *mb_main(void *arg)
{
	struct mgr_batch *b = arg;

	pthread_mutex_lock(&b->mu);
	for (;;) {
		while (STAILQ_EMPTY(&b->todo) && !b->stop)
			pthread_cond_wait(&b->work, &b->mu);
		if (STAILQ_EMPTY(&b->todo))
			break;
		pthread_mutex_unlock(&b->mu);
		mb_one(b);
		pthread_mutex_lock(&b->mu);
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}

/* Loop thread: answer every op on the done list, in order. */
static void mb_deliver(struct mgr_batch *b)
{
	struct mb_list l = STAILQ_HEAD_INITIALIZER(l);
	struct mgr_batch_item *it;

	pthread_mutex_lock(&b->mu);
	STAILQ_CONCAT(&l, &b->done);
	pthread_mutex_unlock(&b->mu);
	while ((it = STAILQ_FIRST(&l))) {
		STAILQ_REMOVE_HEAD(&l, link);
		b->ops.done(it, b->ops.arg);
	}
}

/* ev_async: the writer handed ops back. */
static void mb_on_done(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop;
	(void)revents;
	mb_deliver(w->data);
}

/* See mgr_batch.h. */
int mgr_batch_new(struct mgr_batch **out, struct mgr_db *db,
		  struct ev_loop *loop, const struct mgr_batch_ops *bops,
		  uint32_t commit_delay_ms)
{
	struct mgr_batch *b;
	int rc;

	if (commit_delay_ms > MGR_BATCH_MAX_DELAY_MS)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->db = db;
	b->loop = loop;
	b->ops = *bops;
	b->delay_ms = commit_delay_ms;
	STAILQ_INIT(&b->todo);
	STAILQ_INIT(&b->done);
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->work, NULL);
	pthread_cond_init(&b->idle, NULL);
	ev_async_init(&b->done_w, mb_on_done);
	b->done_w.data = b;
	ev_async_start(loop, &b->done_w);
	ev_unref(loop); /* the watcher alone does not keep the loop running */
	rc = pthread_create(&b->thr, NULL, mb_main, b);
	if (rc) {
		log_err("cannot start the mgr's writer thread: %s", strerror(rc));
		goto out_stop_async;
	}
	*out = b;
	return 0;

out_stop_async:
	ev_ref(loop);
	ev_async_stop(loop, &b->done_w);
	pthread_cond_destroy(&b->idle);
	pthread_cond_destroy(&b->work);
	pthread_mutex_destroy(&b->mu);
	free(b);
	return -EAGAIN;
}

/* See mgr_batch.h. */
void mgr_batch_submit(struct mgr_batch *b, struct mgr_batch_item *it)
{
	pthread_mutex_lock(&b->mu);
	STAILQ_INSERT_TAIL(&b->todo, it, link);
	b->submitted++;
	pthread_cond_signal(&b->work);
	pthread_mutex_unlock(&b->mu);
}

/* See mgr_batch.h. */
void mgr_batch_drain(struct mgr_batch *b)
{
	uint64_t want;

	pthread_mutex_lock(&b->mu);
	want = b->submitted;
	while (b->finished < want)
		pthread_cond_wait(&b->idle, &b->mu);
	pthread_mutex_unlock(&b->mu);
	mb_deliver(b);
}

/* See mgr_batch.h. */
void mgr_batch_free(struct mgr_batch *b)
{
	if (!b)
		return;
	mgr_batch_drain(b);
	pthread_mutex_lock(&b->mu);
	b->stop = 1;
	pthread_cond_signal(&b->work);
	pthread_mutex_unlock(&b->mu);
	pthread_join(b->thr, NULL);
	ev_ref(b->loop);
	ev_async_stop(b->loop, &b->done_w);
	pthread_cond_destroy(&b->idle);
	pthread_cond_destroy(&b->work);
	pthread_mutex_destroy(&b->mu);
	free(b);
}
