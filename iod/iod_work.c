/*
 * iod_work.c - the iod's worker pool: a fixed set of threads taking jobs
 * from one bounded FIFO, and an ev_async watcher that hands finished jobs
 * back to the loop thread (see iod_work.h).
 */
#include "iod_work.h"

#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>


struct iod_work {
	struct ev_loop *loop;      /* set at creation, then read-only */
	ev_async done_w;           /* completions pending (loop thread) */
	pthread_mutex_t mu;
	pthread_cond_t cv;         /* workers wait for a job or stop (mu) */
	struct iod_job *q_head, *q_tail; /* waiting for a worker (mu) */
	unsigned nq;               /* jobs in q (mu) */
	unsigned qmax;             /* bound on nq (read-only) */
	struct iod_job *d_head, *d_tail; /* run, done() not yet called (mu) */
	int stop;                  /* workers exit (mu) */
	unsigned nthreads;         /* threads started (loop thread) */
	pthread_t tid[];           /* IOD_WORK_MAX_THREADS at most */
};

/* The jobs of every pool, for iod_work_counts (relaxed atomics). */
static uint64_t work_waiting, work_running, work_refused;

/* See iod_work.h. */
void iod_work_counts(uint64_t *waiting, uint64_t *running, uint64_t *refused)
{
	*waiting = __atomic_load_n(&work_waiting, __ATOMIC_RELAXED);
	*running = __atomic_load_n(&work_running, __ATOMIC_RELAXED);
	*refused = __atomic_load_n(&work_refused, __ATOMIC_RELAXED);
}

/* Append j to a singly linked FIFO. Caller holds mu. */
static void fifo_push(struct iod_job **head, struct iod_job **tail,
		      struct iod_job *j)
{
	j->next = NULL;
	if (*tail)
		(*tail)->next = j;
	else
		*head = j;
	*tail = j;
}

/* A worker: take the oldest job, run it without the lock, queue it as
 * done and wake the loop. Exits when the pool stops. */
static void *work_main(void *arg)
{
	struct iod_work *w = arg;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		struct iod_job *j;

		while (!w->stop && !w->q_head)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->stop)
			break;
		j = w->q_head;
		w->q_head = j->next;
		if (!w->q_head)
			w->q_tail = NULL;
		w->nq--;
		__atomic_fetch_sub(&work_waiting, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&work_running, 1, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&w->mu);
		j->run(j);
		__atomic_fetch_sub(&work_running, 1, __ATOMIC_RELAXED);
		pthread_mutex_lock(&w->mu);
		fifo_push(&w->d_head, &w->d_tail, j);
		/* under mu, so iod_work_free (which takes mu to stop us and
		 * joins before it stops the watcher) never races this send */
		ev_async_send(w->loop, &w->done_w);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* Loop thread: take every finished job and call its done(), oldest
 * first. done() may submit more jobs: the lock is not held. */
static void work_done_cb(struct ev_loop *loop, ev_async *a, int revents)
{
	struct iod_work *w = a->data;
	struct iod_job *j, *n;

	pthread_mutex_lock(&w->mu);
	j = w->d_head;
	w->d_head = w->d_tail = NULL;
	pthread_mutex_unlock(&w->mu);
	for (; j; j = n) {
		n = j->next;
		j->done(j);
	}
}

/* Stop and join the first n workers. */
static void work_join(struct iod_work *w, unsigned n)
{
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	for (unsigned i = 0; i < n; i++)
		pthread_join(w->tid[i], NULL);
}

/* See iod_work.h. Workers start with every signal blocked, so signals
 * stay the loop's (ev_signal). Cost: nthreads thread creations. */
int iod_work_new(struct iod_work **out, struct ev_loop *loop,
		 unsigned nthreads, unsigned qmax)
{
	struct iod_work *w;
	sigset_t all, old;
	int rc = 0;

	if (nthreads < 1 || nthreads > IOD_WORK_MAX_THREADS || qmax < 1)
		return -EINVAL;
	w = calloc(1, sizeof(*w) + nthreads * sizeof(pthread_t));
	if (!w)
		return -ENOMEM;
	w->loop = loop;
	w->qmax = qmax;
	rc = -pthread_mutex_init(&w->mu, NULL);
	if (rc)
		goto out_free;
	rc = -pthread_cond_init(&w->cv, NULL);
	if (rc)
		goto out_destroy_mu;
	ev_async_init(&w->done_w, work_done_cb);
	w->done_w.data = w;
	ev_async_start(loop, &w->done_w);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (; w->nthreads < nthreads; w->nthreads++) {
		rc = -pthread_create(&w->tid[w->nthreads], NULL, work_main, w);
		if (rc)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		goto out_join;
	*out = w;
	return 0;

out_join:
	work_join(w, w->nthreads);
	ev_async_stop(loop, &w->done_w);
	pthread_cond_destroy(&w->cv);
out_destroy_mu:
	pthread_mutex_destroy(&w->mu);
out_free:
	free(w);
	return rc;
}

/* See iod_work.h. Cost: a lock round and a condition signal. */
int iod_work_submit(struct iod_work *w, struct iod_job *j)
{
	if (!j->run || !j->done)
		return -EINVAL;
	pthread_mutex_lock(&w->mu);
	if (w->nq >= w->qmax) {
		pthread_mutex_unlock(&w->mu);
		__atomic_fetch_add(&work_refused, 1, __ATOMIC_RELAXED);
		return -EAGAIN;
	}
	fifo_push(&w->q_head, &w->q_tail, j);
	w->nq++;
	__atomic_fetch_add(&work_waiting, 1, __ATOMIC_RELAXED);
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

/* See iod_work.h: a job being run delays this until its call returns. */
void iod_work_free(struct iod_work *w)
{
	if (!w)
		return;
	work_join(w, w->nthreads);
	/* the queued jobs are never run: no longer waiting */
	__atomic_fetch_sub(&work_waiting, w->nq, __ATOMIC_RELAXED);
	ev_async_stop(w->loop, &w->done_w);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
