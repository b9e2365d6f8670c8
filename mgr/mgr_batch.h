/*
 * mgr_batch.h - the mgr's writer thread: group commit off the loop
 * (mgr/README.md "Group commit").
 *
 * The loop thread submits write ops; the writer thread runs every op
 * queued at the time in one batch (a top-level write txn that mgr_batch
 * owns; each op runs in a child of it), commits the batch with one sync,
 * and hands the ops back to the loop thread, which answers them. Each op
 * goes QUEUED -> RUN -> COMMITTED -> ANSWERED (enum mgr_batch_state).
 * While a batch commits, the loop keeps answering reads, and the write ops
 * that arrive queue up for the next batch: the slower the sync, the larger
 * the batch.
 */
#ifndef RPFS_MGR_BATCH_H
#define RPFS_MGR_BATCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <ev.h>

#include "mgr_db.h"

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

#define MGR_BATCH_MAX_OPS 256          /* a batch commits at this many ops */
#define MGR_BATCH_MAX_BYTES (4u << 20) /* or this many reply bytes held */
#define MGR_BATCH_MAX_DELAY_MS 5000

/* Where one op is on its way through group commit. mgr_batch.c's
 * mb_advance moves it, one state at a time, in this order. */
enum mgr_batch_state {
	MGR_BATCH_NEW = 0,   /* not submitted yet (its owner fills it) */
	MGR_BATCH_QUEUED,    /* submitted by the loop thread; waits on the
			      * queue for the writer's next batch */
	MGR_BATCH_RUN,       /* run by the writer thread in the open batch
			      * (ops.run); its writes and its answer are
			      * held, not yet durable */
	MGR_BATCH_COMMITTED, /* its batch's commit ended (commit_rc: 0, its
			      * writes are durable; else none of the batch's
			      * ops landed); waits for the loop thread */
	MGR_BATCH_ANSWERED,  /* the loop thread answered it (ops.done);
			      * done freed it */
};

/* One op, embedded in its owner's request (container_of). Every field but
 * bytes belongs to mgr_batch; run sets bytes. */
struct mgr_batch_item {
	STAILQ_ENTRY(mgr_batch_item) link; /* the queue it is on (mgr_batch's
					    * mutex; the writer's own while it
					    * runs) */
	enum mgr_batch_state state; /* mb_advance only: the loop thread's
				     * until QUEUED, the writer's until
				     * COMMITTED, then the loop's again */
	size_t bytes;      /* run: reply bytes it holds (the batch's cap) */
	int commit_rc;     /* the batch's commit: 0 or -errno; -ESTALE also
			    * when it was not committed because this mgr no
			    * longer serves; -EHOSTUNREACH for an -EIO while
			    * the store's server was out of reach (set on
			    * COMMITTED) */
	uint32_t batch_n;  /* first op of a batch: its ops; else 0 */
};

struct mgr_batch_ops {
	/* Writer thread: run the op in the open batch, whose transaction is
	 * batch (the op begins a child of it, mgr_db_begin_child, and ends
	 * the child itself), and keep its answer in the item. Must not touch
	 * loop-thread state. 0, or -errno when the batch cannot go on (a
	 * child's commit failed): then none of its ops is applied and each
	 * gets commit_rc -errno. */
	int (*run)(struct mgr_batch_item *it, struct mgr_txn *batch, void *arg);
	/* Loop thread, in submission order, once the op's batch committed or
	 * failed (it->commit_rc): answer the op and free the item. */
	void (*done)(struct mgr_batch_item *it, void *arg);
	/* Writer thread, before each commit: may this mgr still commit as
	 * the active one? NULL: always. If not, the batch is aborted and its
	 * ops get commit_rc -ESTALE. Must be thread-safe. */
	int (*serving)(void *arg);
	void *arg;
};

struct mgr_batch;

/**
 * Start the writer thread and the loop's completion watcher.
 * @param db the store (its batch is opened by the writer thread only)
 * @param loop the loop thread's loop: done runs there
 * @param commit_delay_ms testing: the writer sleeps this long before each
 *	commit (0..MGR_BATCH_MAX_DELAY_MS), so a kill -9 lands between an op
 *	and its commit
 * @return 0, -EINVAL delay out of range, -ENOMEM, -EAGAIN (no thread)
 */
int mgr_batch_new(struct mgr_batch **out, struct mgr_db *db,
		  struct ev_loop *loop, const struct mgr_batch_ops *bops,
		  uint32_t commit_delay_ms);

/** Queue one op for the next batch (loop thread). */
void mgr_batch_submit(struct mgr_batch *b, struct mgr_batch_item *it);

/** Wait until every op submitted so far is committed and answered (loop
 * thread; blocks for up to one batch per op queued). */
void mgr_batch_drain(struct mgr_batch *b);

/** Drain, stop the writer thread and free (loop thread; NULL: nothing). */
void mgr_batch_free(struct mgr_batch *b);

/**
 * Batches committed by the process and the ops in them (relaxed atomics;
 * any thread).
 */
void mgr_batch_stats(uint64_t *batches, uint64_t *ops);

#endif
