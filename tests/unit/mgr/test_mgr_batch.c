/*
 * test_mgr_batch.c - the mgr's writer thread (mgr_batch.c) on a real LMDB
 * store and a real libev loop: ops queued together share a batch and are
 * answered on the loop thread, in order, after their commit, each run and
 * answered in the state it should be in; an op that asks to abort drops
 * its whole batch; a mgr that no longer serves commits
 * nothing; drain waits for every op.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ev.h>

#include "log.h"
#include "mgr_batch.h"
#include "mgr_db.h"
#include "mgr_kv.h"

#include "check_cond.h"

#define NOPS 40

/* One test op: writes key "k<i>" in a child of the batch. */
struct top {
	struct mgr_batch_item it;
	int i;
	int run_rc;          /* what run returns (0, or -errno: abort) */
	pthread_t run_thr;   /* the thread run ran on */
	int commit_rc;       /* seen by done */
	uint32_t batch_n;
};

struct env {
	struct mgr_db *db;
	pthread_t loop_thr;
	int serving;         /* __atomic */
	int done[NOPS];      /* order of done calls: indices */
	int ndone;
	int off_loop;        /* done ran on another thread */
	int bad_state;       /* run or done saw an op in the wrong state */
	uint32_t batches;    /* first items seen */
};

/* run: put k<i> in a child txn of the batch. */
static int t_run(struct mgr_batch_item *it, struct mgr_txn *batch, void *arg)
{
	struct env *e = arg;
	struct top *o = container_of(it, struct top, it);
	struct mgr_txn *t;
	char k[16];

	o->run_thr = pthread_self();
	if (it->state != MGR_BATCH_RUN)
		e->bad_state = 1;
	if (mgr_db_begin_child(batch, &t) == 0) {
		snprintf(k, sizeof(k), "k%d", o->i);
		if (mgr_kv_put(mgr_db_txn_kv(t), MGR_KV_META, k, strlen(k), "v",
			       1, 0) == 0)
			mgr_db_commit(t);
		else
			mgr_db_abort(t);
	}
	it->bytes = 1;
	return o->run_rc;
}

/* done: record the order and the outcome (loop thread). */
static void t_done(struct mgr_batch_item *it, void *arg)
{
	struct env *e = arg;
	struct top *o = container_of(it, struct top, it);

	if (!pthread_equal(pthread_self(), e->loop_thr))
		e->off_loop = 1;
	if (it->state != MGR_BATCH_ANSWERED)
		e->bad_state = 1;
	o->commit_rc = it->commit_rc;
	o->batch_n = it->batch_n;
	if (it->batch_n)
		e->batches++;
	if (e->ndone < NOPS)
		e->done[e->ndone++] = o->i;
}

static int t_serving(void *arg)
{
	struct env *e = arg;

	return __atomic_load_n(&e->serving, __ATOMIC_ACQUIRE);
}

/* Is k<i> in the store (a read txn of its own)? */
static int has_key(struct mgr_db *db, int i)
{
	struct mgr_txn *t;
	const void *v;
	size_t vlen;
	char k[16];
	int rc;

	if (mgr_db_begin(db, 1, &t))
		return -1;
	snprintf(k, sizeof(k), "k%d", i);
	rc = mgr_kv_get(mgr_db_txn_kv(t), MGR_KV_META, k, strlen(k), &v, &vlen);
	mgr_db_abort(t);
	return rc == 0;
}

/* Submit ops [from, to) with run_rc as given; drain. */
static void submit_all(struct mgr_batch *b, struct top *ops, int from, int to)
{
	for (int i = from; i < to; i++)
		mgr_batch_submit(b, &ops[i].it);
	mgr_batch_drain(b);
}

int main(void)
{
	char dir[] = "/tmp/test_mgr_batch.XXXXXX";
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	const struct mgr_batch_ops bops_tmpl = {
		.run = t_run, .done = t_done, .serving = t_serving,
	};
	struct mgr_batch_ops bops = bops_tmpl;
	struct top ops[NOPS];
	struct env e;
	struct mgr_batch *b;
	int in_order = 1, rest;

	log_init("test_mgr_batch", LOG_WARNING);
	if (!loop || !mkdtemp(dir)) {
		perror("setup");
		return 1;
	}
	memset(&e, 0, sizeof(e));
	memset(ops, 0, sizeof(ops));
	e.loop_thr = pthread_self();
	e.serving = 1;
	CHECK_RC(mgr_db_open(&e.db, dir), 0);
	bops.arg = &e;
	CHECK_RC(mgr_batch_new(&b, e.db, loop, &bops, MGR_BATCH_MAX_DELAY_MS + 1),
		 -EINVAL);
	/* a 50 ms commit delay: ops submitted together pile into few batches */
	CHECK_RC(mgr_batch_new(&b, e.db, loop, &bops, 50), 0);
	for (int i = 0; i < NOPS; i++)
		ops[i].i = i;

	/* 1. 20 ops at once: answered in order, on this thread, committed */
	submit_all(b, ops, 0, 20);
	CHECK_EQ(e.ndone, 20);
	for (int i = 0; i < e.ndone; i++)
		in_order &= e.done[i] == i;
	CHECK(in_order);
	CHECK(!e.off_loop);
	CHECK(e.batches >= 1 && e.batches < 20);
	for (int i = 0; i < 20; i++) {
		CHECK_RC(ops[i].commit_rc, 0);
		CHECK(!pthread_equal(ops[i].run_thr, e.loop_thr));
		CHECK(has_key(e.db, i) == 1);
	}

	/* 2. an op that asks to abort drops the ops of its batch, and only
	 * those: each of 20..24 either got the error and did not land, or was
	 * in another batch and did */
	ops[22].run_rc = -ENOMEM;
	e.batches = 0;
	submit_all(b, ops, 20, 25);
	CHECK_EQ(e.ndone, 25);
	rest = 0;
	for (int i = 20; i < 25; i++) {
		if (ops[i].commit_rc == -ENOMEM) {
			CHECK(has_key(e.db, i) == 0);
		} else {
			CHECK_RC(ops[i].commit_rc, 0);
			CHECK(has_key(e.db, i) == 1);
			rest++;
		}
	}
	CHECK_RC(ops[22].commit_rc, -ENOMEM);
	CHECK(rest < 5);

	/* 3. a mgr that no longer serves: -ESTALE, nothing lands */
	__atomic_store_n(&e.serving, 0, __ATOMIC_RELEASE);
	submit_all(b, ops, 25, 30);
	CHECK_EQ(e.ndone, 30);
	for (int i = 25; i < 30; i++) {
		CHECK_RC(ops[i].commit_rc, -ESTALE);
		CHECK(has_key(e.db, i) == 0);
	}

	/* 4. free drains what is still queued */
	__atomic_store_n(&e.serving, 1, __ATOMIC_RELEASE);
	for (int i = 30; i < NOPS; i++)
		mgr_batch_submit(b, &ops[i].it);
	mgr_batch_free(b);
	CHECK_EQ(e.ndone, NOPS);
	for (int i = 30; i < NOPS; i++)
		CHECK(has_key(e.db, i) == 1);
	/* every op went QUEUED -> RUN -> COMMITTED -> ANSWERED */
	CHECK(!e.bad_state);

	mgr_db_close(e.db);
	ev_loop_destroy(loop);
	{
		char cmd[64];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", dir);
	}
	fprintf(stderr, "%d failures\n", failures);
	return failures != 0;
}
