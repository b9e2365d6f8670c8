/*
 * test_iod_work.c - unit test of the iod's worker pool (iod_work.c): jobs
 * run on workers and complete in the loop thread, in order for one worker;
 * the queue of waiting jobs is bounded (-EAGAIN) and frees up as workers
 * take jobs; done() may submit again; freeing the pool finishes the job
 * being run, never runs the queued ones and calls no done().
 */
#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "iod_work.h"

#include "check_cond.h"

struct tjob {
	struct iod_job job;          /* first: the pool hands back &job */
	atomic_int ran;              /* run() calls (worker) */
	int done;                    /* done() calls (loop) */
	int order;                   /* completion rank (loop) */
	int ran_in_loop;             /* run() saw the loop thread (worker) */
	int done_off_loop;           /* done() saw another thread (loop) */
	int resubmit;                /* done() submits this job once more */
};

static pthread_t loop_thread;
static struct iod_work *pool;
static int ndone;                    /* done() calls so far (loop) */
static atomic_int gate_open = 1;     /* 0: gated jobs wait in run() */
static atomic_int gated_running;     /* gated jobs inside run() */

/* run(): note the call; a gated job (order -1 marks it) spins until the
 * gate opens, holding its worker. */
static void tjob_run(struct iod_job *j)
{
	struct tjob *t = (struct tjob *)j;

	if (pthread_equal(pthread_self(), loop_thread))
		t->ran_in_loop = 1;
	if (t->order == -1) {
		atomic_fetch_add(&gated_running, 1);
		while (!atomic_load(&gate_open))
			usleep(1000);
		atomic_fetch_sub(&gated_running, 1);
	}
	atomic_fetch_add(&t->ran, 1);
}

/* done(): note the call and its rank; resubmit once if asked. */
static void tjob_done(struct iod_job *j)
{
	struct tjob *t = (struct tjob *)j;

	if (!pthread_equal(pthread_self(), loop_thread))
		t->done_off_loop = 1;
	t->done++;
	t->order = ++ndone;
	if (t->resubmit) {
		t->resubmit = 0;
		CHECK(iod_work_submit(pool, &t->job) == 0);
	}
}

static void tjob_init(struct tjob *t, int gated)
{
	*t = (struct tjob){ .job = { tjob_run, tjob_done, NULL },
			    .order = gated ? -1 : 0 };
}

/* Run the loop until want done() calls in all, for at most ~10 s. */
static void run_until(struct ev_loop *loop, int want)
{
	for (int i = 0; i < 10000 && ndone < want; i++) {
		ev_run(loop, EVRUN_NOWAIT);
		if (ndone < want)
			usleep(1000);
	}
}

/* Wait (without running the loop) until n gated jobs are inside run(). */
static void wait_gated(int n)
{
	for (int i = 0; i < 10000 && atomic_load(&gated_running) < n; i++)
		usleep(1000);
	CHECK(atomic_load(&gated_running) == n);
}

/* Many jobs over 4 workers: each runs once, off the loop; each done()
 * runs once, in the loop; a done() may submit again. */
static void test_basic(struct ev_loop *loop)
{
	enum { N = 40 };
	struct tjob t[N];

	CHECK(iod_work_new(&pool, loop, 4, N) == 0);
	ndone = 0;
	for (int i = 0; i < N; i++) {
		tjob_init(&t[i], 0);
		t[i].resubmit = i == 7;
		CHECK(iod_work_submit(pool, &t[i].job) == 0);
	}
	CHECK(ndone == 0); /* done() never inside submit */
	run_until(loop, N + 1);
	CHECK(ndone == N + 1);
	for (int i = 0; i < N; i++) {
		CHECK(atomic_load(&t[i].ran) == (i == 7 ? 2 : 1));
		CHECK(t[i].done == (i == 7 ? 2 : 1));
		CHECK(!t[i].ran_in_loop && !t[i].done_off_loop);
	}
	iod_work_free(pool);
}

/* One worker, queue of 2: with the worker held by a gated job, two more
 * queue and the next gets -EAGAIN; once the gate opens all complete in
 * submit order and the queue takes jobs again. */
static void test_bound(struct ev_loop *loop)
{
	struct tjob g, a, b, c;

	CHECK(iod_work_new(&pool, loop, 1, 2) == 0);
	ndone = 0;
	atomic_store(&gate_open, 0);
	tjob_init(&g, 1);
	tjob_init(&a, 0);
	tjob_init(&b, 0);
	tjob_init(&c, 0);
	CHECK(iod_work_submit(pool, &g.job) == 0);
	wait_gated(1); /* the worker holds g: the queue is empty again */
	CHECK(iod_work_submit(pool, &a.job) == 0);
	CHECK(iod_work_submit(pool, &b.job) == 0);
	CHECK(iod_work_submit(pool, &c.job) == -EAGAIN);
	CHECK(atomic_load(&c.ran) == 0);
	atomic_store(&gate_open, 1);
	run_until(loop, 3);
	CHECK(ndone == 3 && g.order == 1 && a.order == 2 && b.order == 3);
	CHECK(iod_work_submit(pool, &c.job) == 0);
	run_until(loop, 4);
	CHECK(c.done == 1 && c.order == 4);
	iod_work_free(pool);
}

/* Open the gate after a while, from another thread. */
static void *open_gate_later(void *arg)
{
	usleep(100 * 1000);
	atomic_store(&gate_open, 1);
	return NULL;
}

/* Free while a job runs and two wait: free waits for the running one
 * (which completes its run()), the waiting ones never run, and no done()
 * is called, even for the finished job. */
static void test_free_busy(struct ev_loop *loop)
{
	struct tjob g, a, b;
	pthread_t th;

	CHECK(iod_work_new(&pool, loop, 1, 4) == 0);
	ndone = 0;
	atomic_store(&gate_open, 0);
	tjob_init(&g, 1);
	tjob_init(&a, 0);
	tjob_init(&b, 0);
	CHECK(iod_work_submit(pool, &g.job) == 0);
	wait_gated(1);
	CHECK(iod_work_submit(pool, &a.job) == 0);
	CHECK(iod_work_submit(pool, &b.job) == 0);
	CHECK(pthread_create(&th, NULL, open_gate_later, NULL) == 0);
	iod_work_free(pool);
	pthread_join(th, NULL);
	CHECK(atomic_load(&g.ran) == 1);
	CHECK(atomic_load(&a.ran) == 0 && atomic_load(&b.ran) == 0);
	ev_run(loop, EVRUN_NOWAIT);
	CHECK(ndone == 0 && g.done == 0);
}

/* Arguments out of range. */
static void test_args(struct ev_loop *loop)
{
	struct iod_work *w = NULL;
	struct iod_job bad = { tjob_run, NULL, NULL };

	CHECK(iod_work_new(&w, loop, 0, 1) == -EINVAL);
	CHECK(iod_work_new(&w, loop, IOD_WORK_MAX_THREADS + 1, 1) == -EINVAL);
	CHECK(iod_work_new(&w, loop, 1, 0) == -EINVAL);
	CHECK(w == NULL);
	CHECK(iod_work_new(&w, loop, 1, 1) == 0);
	CHECK(iod_work_submit(w, &bad) == -EINVAL);
	bad = (struct iod_job){ NULL, tjob_done, NULL };
	CHECK(iod_work_submit(w, &bad) == -EINVAL);
	iod_work_free(w);
	iod_work_free(NULL);
}

int main(void)
{
	struct ev_loop *loop = ev_default_loop(0);

	if (!loop)
		return 1;
	loop_thread = pthread_self();
	test_args(loop);
	test_basic(loop);
	test_bound(loop);
	test_free_busy(loop);
	if (failures) {
		fprintf(stderr, "test_iod_work: %d failures\n", failures);
		return 1;
	}
	printf("test_iod_work: ok\n");
	return 0;
}
