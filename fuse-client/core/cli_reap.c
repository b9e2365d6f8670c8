/*
 * cli_reap.c - background removal of freed files' data (cli_reap.h): a
 * FIFO of freed inodes and one worker thread that takes up to
 * CLI_IO_REMOVE_MAX of them at a time, removes their stripe objects (one
 * IO_REMOVE_MANY per iod, in parallel), then purges them at the mgr (one
 * PURGE_MANY). A burst of unlinks thus costs the daemons one request per
 * batch instead of one per file. The worker lets a batch gather for up to
 * REAP_GATHER_MS after its first item (group commit): without that wait a
 * worker that keeps up would take every file alone.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_io.h"
#include "cli_meta.h"
#include "cli_reap.h"
#include "log.h"

#define REAP_GATHER_MS 10 /* longest wait for a batch to fill */

/* One freed inode waiting for removal. */
struct reap_item {
	struct reap_item *next;       /* r->lock */
	struct proto_cred cred;       /* immutable */
	uint64_t ino;                 /* immutable */
	struct proto_layout layout;   /* immutable */
};

struct cli_reap {
	struct cli_fs *fs;            /* immutable */
	pthread_t thr;
	pthread_mutex_t lock;
	pthread_cond_t cv;            /* lock; work queued, or stop
				       * (CLOCK_MONOTONIC) */
	struct reap_item *head, *tail; /* lock; oldest first */
	int n;                        /* lock; queued */
	int stop;                     /* lock; finish the queue and exit */
	uint64_t done, batches;       /* lock; cli_reap_counts() */
	uint64_t queued;              /* lock; items ever queued */
};

/* Log that ino stays an orphan at the mgr (for a scrub): what failed. */
static void orphan_warn(uint64_t ino, const char *what, int rc)
{
	log_warn("inode %llu: %s failed (%s), left as orphan",
		 (unsigned long long)ino, what, strerror(-rc));
}

/* Remove ino's objects from its iods, then purge it at the mgr; a failure
 * leaves an orphan for a scrub and is only logged. Cost: two round trips. */
static void reap_one(struct cli_fs *fs, const struct proto_cred *c, uint64_t ino,
		     const struct proto_layout *l)
{
	int rc = cli_io_remove(fs, ino, l);

	if (rc) {
		orphan_warn(ino, "removing data", rc);
		return;
	}
	rc = cli_meta_purge(fs, c, ino);
	if (rc)
		orphan_warn(ino, "purge", rc);
}

/*
 * Purge the m inodes of gone (items[idx[i]] freed gone[i]) at the mgr, one
 * PURGE_MANY per freeing user: the mgr lets a caller purge only what it
 * owns or freed. Cost: one round trip per distinct user (mostly one).
 */
static void reap_purge(struct cli_fs *fs, struct reap_item *const *items,
		       const uint32_t *idx, const uint64_t *gone, uint32_t m)
{
	uint64_t batch[CLI_IO_REMOVE_MAX];
	uint8_t done[CLI_IO_REMOVE_MAX] = { 0 };
	int rc;

	for (uint32_t i = 0; i < m; i++) {
		const struct proto_cred *c = &items[idx[i]]->cred;
		uint32_t k = 0;

		if (done[i])
			continue;
		for (uint32_t j = i; j < m; j++)
			if (!done[j] && items[idx[j]]->cred.uid == c->uid) {
				batch[k++] = gone[j];
				done[j] = 1;
			}
		rc = cli_meta_purge_many(fs, c, batch, k);
		if (rc == -EOPNOTSUPP) {
			for (uint32_t j = 0; j < k; j++) {
				rc = cli_meta_purge(fs, c, batch[j]);
				if (rc)
					orphan_warn(batch[j], "purge", rc);
			}
		} else if (rc) {
			log_warn("purge of %u freed inodes from %llu on: %s; any "
				 "not purged is left as orphan", k,
				 (unsigned long long)batch[0], strerror(-rc));
		}
	}
}

/*
 * Remove and purge n (1..CLI_IO_REMOVE_MAX) freed inodes together. Only
 * those whose objects are all gone are purged; the rest stay orphans and
 * are logged. Against daemons without the batch ops, falls back to one
 * inode at a time. Cost: two round trips for the batch (one more per
 * further user who freed some of it).
 */
static void reap_batch(struct cli_fs *fs, struct reap_item *const *items,
		       size_t n)
{
	uint64_t inos[CLI_IO_REMOVE_MAX], gone[CLI_IO_REMOVE_MAX];
	struct proto_layout ls[CLI_IO_REMOVE_MAX];
	uint8_t ok[CLI_IO_REMOVE_MAX];
	uint32_t idx[CLI_IO_REMOVE_MAX], m = 0;
	int rc;

	if (n == 1) {
		reap_one(fs, &items[0]->cred, items[0]->ino, &items[0]->layout);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		inos[i] = items[i]->ino;
		ls[i] = items[i]->layout;
	}
	rc = cli_io_remove_many(fs, n, inos, ls, ok);
	if (rc == -EOPNOTSUPP || rc == -ENOMEM) {
		for (size_t i = 0; i < n; i++)
			reap_one(fs, &items[i]->cred, inos[i], &ls[i]);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (ok[i]) {
			idx[m] = (uint32_t)i;
			gone[m++] = inos[i];
		} else {
			orphan_warn(inos[i], "removing data", rc);
		}
	}
	reap_purge(fs, items, idx, gone, m);
}

/* Wait (lock held) until the queue holds a full batch, the worker is
 * told to stop, or REAP_GATHER_MS have passed. */
static void reap_gather(struct cli_reap *r)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += REAP_GATHER_MS * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (r->n < CLI_IO_REMOVE_MAX && !r->stop &&
	       pthread_cond_timedwait(&r->cv, &r->lock, &until) == 0)
		;
}

/* The worker: take up to CLI_IO_REMOVE_MAX of the oldest items, remove
 * them, until stopped and empty. */
static void *reap_main(void *arg)
{
	struct cli_reap *r = arg;
	struct reap_item *batch[CLI_IO_REMOVE_MAX];

	pthread_mutex_lock(&r->lock);
	for (;;) {
		size_t n = 0;

		if (!r->head) {
			if (r->stop)
				break;
			pthread_cond_wait(&r->cv, &r->lock);
			continue;
		}
		reap_gather(r);
		while (r->head && n < CLI_IO_REMOVE_MAX) {
			batch[n++] = r->head;
			r->head = r->head->next;
			r->n--;
		}
		if (!r->head)
			r->tail = NULL;
		pthread_mutex_unlock(&r->lock);
		reap_batch(r->fs, batch, n);
		for (size_t i = 0; i < n; i++)
			free(batch[i]);
		pthread_mutex_lock(&r->lock);
		r->done += n;
		r->batches++;
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* See cli_reap.h. */
int cli_reap_new(struct cli_reap **out, struct cli_fs *fs)
{
	struct cli_reap *r = calloc(1, sizeof(*r));
	pthread_condattr_t ca;
	int rc;

	if (!r)
		return -ENOMEM;
	r->fs = fs;
	pthread_mutex_init(&r->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	rc = -pthread_create(&r->thr, NULL, reap_main, r);
	if (rc) {
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return rc;
	}
	*out = r;
	return 0;
}

/* See cli_reap.h. */
void cli_reap_free(struct cli_reap *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = 1;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thr, NULL);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* See cli_reap.h. Cost: a malloc and a signal, or the removal itself. */
void cli_reap_queue(struct cli_reap *r, struct cli_fs *fs, const struct proto_cred *c,
		    uint64_t ino, const struct proto_layout *l)
{
	struct reap_item *it = NULL;

	if (r) {
		pthread_mutex_lock(&r->lock);
		if (r->n < CLI_REAP_MAX_QUEUE && !r->stop)
			it = malloc(sizeof(*it));
		if (it) {
			*it = (struct reap_item){ .cred = *c, .ino = ino, .layout = *l };
			if (r->tail)
				r->tail->next = it;
			else
				r->head = it;
			r->tail = it;
			r->n++;
			r->queued++;
			pthread_cond_signal(&r->cv);
		}
		pthread_mutex_unlock(&r->lock);
	}
	if (!it)
		reap_one(fs, c, ino, l);
}

/* See cli_reap.h. */
void cli_reap_counts(struct cli_reap *r, uint64_t *inodes, uint64_t *batches,
		     uint64_t *queued)
{
	pthread_mutex_lock(&r->lock);
	*inodes = r->done;
	*batches = r->batches;
	*queued = r->queued;
	pthread_mutex_unlock(&r->lock);
}
