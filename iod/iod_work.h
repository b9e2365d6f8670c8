/*
 * iod_work.h - a small fixed pool of worker threads for the iod's slow
 * disk calls (fsync, fallocate, checksums, listings), so that one slow disk
 * call never holds the libev loop, which serves every client and the mgr's
 * lease messages.
 *
 * A job is queued from the loop thread, run() on a worker, and handed back
 * to the loop through an ev_async watcher, where done() runs. The queue of
 * jobs not yet started is bounded: a submit beyond it fails with -EAGAIN
 * and the caller keeps the job until a completion makes room.
 *
 * Every function is for the loop thread only; run() is the only code that
 * runs on a worker.
 */
#ifndef RPFS_IOD_WORK_H
#define RPFS_IOD_WORK_H

#include <stdint.h>

struct ev_loop;
struct iod_work;

#define IOD_WORK_THREADS 4   /* default workers */
#define IOD_WORK_QUEUE 256   /* default bound on jobs waiting for a worker */
#define IOD_WORK_MAX_THREADS 64

/* A unit of work. The owner embeds it and keeps it alive until done() ran
 * (or until iod_work_free() returned). */
struct iod_job {
	void (*run)(struct iod_job *j);  /* on a worker: the blocking call */
	void (*done)(struct iod_job *j); /* in the loop thread, after run() */
	struct iod_job *next;            /* queue link (the pool's lock) */
};

/**
 * Start nthreads workers and the completion watcher on loop.
 * @param[in] loop the loop where done() runs
 * @param[in] nthreads workers, 1..IOD_WORK_MAX_THREADS
 * @param[in] qmax jobs that may wait for a worker, >= 1
 * @return 0, -EINVAL (nthreads or qmax out of range), -ENOMEM, -errno from
 *	pthread_create (the workers already started are stopped)
 */
int iod_work_new(struct iod_work **out, struct ev_loop *loop,
		 unsigned nthreads, unsigned qmax);

/**
 * Queue j (run and done set) for a worker. done() runs later, from the
 * loop, never inside this call.
 * @return 0 queued; -EAGAIN qmax jobs already wait (j is not queued);
 *	-EINVAL run or done missing
 */
int iod_work_submit(struct iod_work *w, struct iod_job *j);

/**
 * The jobs of every pool of the process: waiting for a worker, being run,
 * and submits refused because the queue was full (-EAGAIN) since the
 * start. Any thread (relaxed atomics), for the metrics.
 */
void iod_work_counts(uint64_t *waiting, uint64_t *running, uint64_t *refused);

/**
 * Stop the pool: jobs being run are finished, queued ones are never run,
 * and done() is called for none of them (the owner reclaims its jobs
 * after this returns). Waits for the workers to exit; NULL is a no-op.
 */
void iod_work_free(struct iod_work *w);

#endif
