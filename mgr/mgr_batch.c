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
	struct mgr_db *db;          /* immutable */
	struct ev_loop *loop;       /* immutable */
	struct mgr_batch_ops ops;   /* immutable */
	uint32_t delay_ms;          /* immutable */
	struct mgr_txn *txn;        /* writer thread: the open batch (NULL
				     * between batches) */
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

/* Batches committed and the ops in them (relaxed atomics; mgr_batch_stats). */
static uint64_t batch_count, batch_op_count;

/* May an op in state from go to state to? Each state leads to the next;
 * a queued op also goes straight to COMMITTED when no batch could be
 * opened for it (it never ran; commit_rc says why). */
static int mb_legal(enum mgr_batch_state from, enum mgr_batch_state to)
{
	return to == from + 1 ||
	       (from == MGR_BATCH_QUEUED && to == MGR_BATCH_COMMITTED);
}

/*
 * The one place an op's state changes: move it to state to and do what
 * reaching that state means.
 *   QUEUED: nothing more (the caller puts it on the queue; loop thread)
 *   RUN: ops.run runs it in the open batch (writer thread)
 *   COMMITTED: rc, the batch's result, becomes its commit_rc (writer)
 *   ANSWERED: ops.done answers and frees it (loop thread)
 * @return RUN: ops.run's result (0, or -errno: the batch cannot go on);
 *	else 0; -EINVAL an illegal move (a bug: logged, nothing changed)
 */
static int mb_advance(struct mgr_batch *b, struct mgr_batch_item *it,
		      enum mgr_batch_state to, int rc)
{
	if (!mb_legal(it->state, to)) {
		log_err("group commit: an op in state %d cannot go to %d",
			(int)it->state, (int)to);
		return -EINVAL;
	}
	it->state = to;
	switch (to) {
	case MGR_BATCH_RUN:
		it->bytes = 0;
		return b->ops.run(it, b->txn, b->ops.arg);
	case MGR_BATCH_COMMITTED:
		it->commit_rc = rc;
		return 0;
	case MGR_BATCH_ANSWERED:
		b->ops.done(it, b->ops.arg);
		return 0;
	default:
		return 0;
	}
}

/*
 * Writer thread: run the queued ops, one after another, in the open batch,
 * until none is queued or the batch reaches a cap. Ops submitted while it
 * runs join it. Returns how many it ran, in cur; *abort is set to run's
 * error when the batch cannot go on.
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
		*abort = mb_advance(b, it, MGR_BATCH_RUN, 0);
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

/* Writer thread: end the open batch: commit it (one sync) and count it,
 * or, when abort is set or this mgr may no longer commit as the active
 * one (-ESTALE), abort it: none of its n ops lands. Cost: the store's
 * commit. */
static int mb_end(struct mgr_batch *b, uint32_t n, int abort)
{
	struct mgr_txn *txn = b->txn;
	int rc;

	b->txn = NULL;
	if (!abort && b->delay_ms) {
		struct timespec ts = { b->delay_ms / 1000,
				       (long)(b->delay_ms % 1000) * 1000000 };

		nanosleep(&ts, NULL);
	}
	if (!abort && b->ops.serving && !b->ops.serving(b->ops.arg))
		abort = -ESTALE;
	if (abort) {
		mgr_db_abort(txn);
		return abort;
	}
	rc = mgr_db_commit(txn);
	if (!rc) {
		__atomic_add_fetch(&batch_count, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&batch_op_count, n, __ATOMIC_RELAXED);
	}
	return rc;
}

/* Writer thread: the n ops of cur, whose batch ended with rc, become
 * COMMITTED and go on the done list; wake the loop to answer them. */
static void mb_hand_back(struct mgr_batch *b, struct mb_list *cur, uint32_t n,
			 int rc)
{
	struct mgr_batch_item *it;

	STAILQ_FOREACH(it, cur, link) {
		mb_advance(b, it, MGR_BATCH_COMMITTED, rc);
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
	int rc = mgr_db_begin(b->db, 0, &b->txn), abort = 0;
	uint32_t n;

	if (rc) {
		b->txn = NULL;
		n = mb_take_unrun(b, &cur);
	} else {
		n = mb_fill(b, &cur, &abort);
		rc = mb_end(b, n, abort);
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
		mb_advance(b, it, MGR_BATCH_ANSWERED, 0);
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
	it->state = MGR_BATCH_NEW; /* the owner hands over a fresh item */
	mb_advance(b, it, MGR_BATCH_QUEUED, 0);
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

/* See mgr_batch.h. */
void mgr_batch_stats(uint64_t *batches, uint64_t *ops)
{
	*batches = __atomic_load_n(&batch_count, __ATOMIC_RELAXED);
	*ops = __atomic_load_n(&batch_op_count, __ATOMIC_RELAXED);
}
