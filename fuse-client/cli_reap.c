/*
 * cli_reap.c - background removal of freed files' data (cli_reap.h): a
 * FIFO of freed inodes and one worker thread that removes each one's
 * stripe objects from every iod (one parallel round trip), then purges it
 * at the mgr (one round trip).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cli_io.h"
#include "cli_meta.h"
#include "cli_reap.h"
#include "log.h"

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
	pthread_cond_t cv;            /* lock; work queued, or stop */
	struct reap_item *head, *tail; /* lock; oldest first */
	int n;                        /* lock; queued */
	int stop;                     /* lock; finish the queue and exit */
};

/* Remove ino's objects from its iods, then purge it at the mgr; a failure
 * leaves an orphan for a scrub and is only logged. Cost: two round trips. */
static void reap_one(struct cli_fs *fs, const struct proto_cred *c, uint64_t ino,
		     const struct proto_layout *l)
{
	int rc = cli_io_remove(fs, ino, l);

	if (rc == 0)
		rc = cli_meta_purge(fs, c, ino);
	if (rc)
		log_warn("inode %llu: removing data failed (%s), left as orphan",
			 (unsigned long long)ino, strerror(-rc));
}

/* The worker: take the oldest item, remove it, until stopped and empty. */
static void *reap_main(void *arg)
{
	struct cli_reap *r = arg;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		struct reap_item *it = r->head;

		if (!it) {
			if (r->stop)
				break;
			pthread_cond_wait(&r->cv, &r->lock);
			continue;
		}
		r->head = it->next;
		if (!r->head)
			r->tail = NULL;
		r->n--;
		pthread_mutex_unlock(&r->lock);
		reap_one(r->fs, &it->cred, it->ino, &it->layout);
		free(it);
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* See cli_reap.h. */
int cli_reap_new(struct cli_reap **out, struct cli_fs *fs)
{
	struct cli_reap *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	r->fs = fs;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cv, NULL);
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
			pthread_cond_signal(&r->cv);
		}
		pthread_mutex_unlock(&r->lock);
	}
	if (!it)
		reap_one(fs, c, ino, l);
}
