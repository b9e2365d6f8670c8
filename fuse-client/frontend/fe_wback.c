/*
 * fe_wback.c - write-behind for the FUSE client (see fe_wback.h): per inode, a
 * list of writes in flight, in a hash table.
 *
 * Locks, in order: wb->lock (the table, entries' refs) -> e->lock (one
 * inode's list and error). Waiting for writes happens under e->lock only,
 * so writers and drainers of other inodes never wait for it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cli_io.h"
#include "fe_wback.h"
#include "log.h"

#define WBACK_HASH 256 /* buckets; entries live only while writes are in flight */

/* One write in flight. */
struct wback_op {
	struct wback_op *next;        /* e->lock */
	uint64_t off, len;            /* immutable */
	struct cli_io_pending *p;     /* immutable */
};

/* One inode with writes in flight, a deferred error, or a user. */
struct wback_ino {
	struct wback_ino *hnext;      /* wb->lock */
	uint64_t ino;                 /* immutable */
	int refs;                     /* wb->lock; threads using the entry */
	pthread_mutex_t lock;
	struct wback_op *head, *tail; /* lock; oldest first */
	int nops;                     /* lock */
	int err;                      /* lock; first deferred failure, or 0 */
};

struct fe_wback {
	struct cli_fs *fs;            /* immutable */
	pthread_mutex_t lock;
	struct wback_ino *tab[WBACK_HASH]; /* lock */
	int nents;                    /* atomic, written under lock: entries in
				       * tab; 0 lets drains skip the lock */
};

/* Bucket of an inode. */
static unsigned wback_hash(uint64_t ino)
{
	return (unsigned)((ino * 0x9e3779b97f4a7c15ull) >> 56) % WBACK_HASH;
}

/* Find ino's entry and take a reference; create it when create is set.
 * @return the entry, or NULL (not found, or out of memory) */
static struct wback_ino *wback_get(struct fe_wback *wb, uint64_t ino, int create)
{
	struct wback_ino *e;
	unsigned h = wback_hash(ino);

	pthread_mutex_lock(&wb->lock);
	for (e = wb->tab[h]; e; e = e->hnext)
		if (e->ino == ino)
			break;
	if (!e && create) {
		e = calloc(1, sizeof(*e));
		if (e) {
			e->ino = ino;
			pthread_mutex_init(&e->lock, NULL);
			e->hnext = wb->tab[h];
			wb->tab[h] = e;
			__atomic_add_fetch(&wb->nents, 1, __ATOMIC_SEQ_CST);
		}
	}
	if (e)
		e->refs++;
	pthread_mutex_unlock(&wb->lock);
	return e;
}

/* Drop a reference; free the entry once unused and empty. */
static void wback_put(struct fe_wback *wb, struct wback_ino *e)
{
	struct wback_ino **pp;
	int idle;

	pthread_mutex_lock(&wb->lock);
	if (--e->refs > 0) {
		pthread_mutex_unlock(&wb->lock);
		return;
	}
	pthread_mutex_lock(&e->lock);
	idle = !e->head && !e->err;
	pthread_mutex_unlock(&e->lock);
	if (idle) {
		for (pp = &wb->tab[wback_hash(e->ino)]; *pp != e; pp = &(*pp)->hnext)
			;
		*pp = e->hnext;
		__atomic_sub_fetch(&wb->nents, 1, __ATOMIC_SEQ_CST);
		pthread_mutex_destroy(&e->lock);
		free(e);
	}
	pthread_mutex_unlock(&wb->lock);
}

/* Wait for op (already unlinked) and keep its failure as e's deferred
 * error. Caller holds e->lock. */
static void wback_finish(struct fe_wback *wb, struct wback_ino *e, struct wback_op *op)
{
	int rc = cli_io_pending_wait(wb->fs, op->p);

	if (rc && !e->err) {
		log_warn("inode %llu: a write of %llu bytes at %llu acknowledged "
			 "earlier failed: %s (reported at the next write, close or fsync)",
			 (unsigned long long)e->ino, (unsigned long long)op->len,
			 (unsigned long long)op->off, strerror(-rc));
		e->err = rc;
	}
	free(op);
	e->nops--;
}

/* Wait for the writes of e that overlap [off, off + len), or all of them
 * when len is 0, oldest first. Caller holds e->lock. */
static void wback_wait_range(struct fe_wback *wb, struct wback_ino *e, uint64_t off, uint64_t len)
{
	struct wback_op **pp = &e->head, *prev = NULL;

	while (*pp) {
		struct wback_op *op = *pp;

		if (len && (op->off >= off + len || off >= op->off + op->len)) {
			prev = op;
			pp = &op->next;
			continue;
		}
		*pp = op->next;
		if (e->tail == op)
			e->tail = prev;
		wback_finish(wb, e, op);
	}
}

/* See fe_wback.h. */
int fe_wback_new(struct fe_wback **out, struct cli_fs *fs)
{
	struct fe_wback *wb = calloc(1, sizeof(*wb));

	if (!wb)
		return -ENOMEM;
	wb->fs = fs;
	pthread_mutex_init(&wb->lock, NULL);
	*out = wb;
	return 0;
}

/* See fe_wback.h. Called when no FUSE request runs any more. */
void fe_wback_free(struct fe_wback *wb)
{
	if (!wb)
		return;
	for (unsigned h = 0; h < WBACK_HASH; h++) {
		while (wb->tab[h]) {
			struct wback_ino *e = wb->tab[h];

			wb->tab[h] = e->hnext;
			wback_wait_range(wb, e, 0, 0);
			pthread_mutex_destroy(&e->lock);
			free(e);
		}
	}
	pthread_mutex_destroy(&wb->lock);
	free(wb);
}

/* See fe_wback.h. Cost: the waits it must make, plus one list walk. */
int fe_wback_write(struct fe_wback *wb, uint64_t ino, const struct proto_layout *l,
		   uint64_t off, size_t len, const void *buf)
{
	struct cli_io_pending *p;
	struct wback_ino *e;
	struct wback_op *op;
	int rc;

	if (len == 0)
		return 0;
	e = wback_get(wb, ino, 1);
	if (!e)
		return cli_io_write(wb->fs, ino, l, off, len, buf);
	pthread_mutex_lock(&e->lock);
	wback_wait_range(wb, e, off, len);
	while (e->nops >= FE_WBACK_MAX_OPS) {
		op = e->head;
		e->head = op->next;
		if (!e->head)
			e->tail = NULL;
		wback_finish(wb, e, op);
	}
	if (e->err) {
		rc = e->err;
		e->err = 0;
		goto out_unlock;
	}
	op = malloc(sizeof(*op));
	if (!op) {
		rc = cli_io_write(wb->fs, ino, l, off, len, buf);
		goto out_unlock;
	}
	rc = cli_io_write_start(wb->fs, ino, l, off, len, buf, &p);
	if (rc == -EAGAIN) {
		free(op);
		rc = cli_io_write(wb->fs, ino, l, off, len, buf);
		goto out_unlock;
	}
	if (rc) {
		free(op);
		goto out_unlock;
	}
	*op = (struct wback_op){ .off = off, .len = len, .p = p };
	if (e->tail)
		e->tail->next = op;
	else
		e->head = op;
	e->tail = op;
	e->nops++;
out_unlock:
	pthread_mutex_unlock(&e->lock);
	wback_put(wb, e);
	return rc;
}

/* See fe_wback.h. Cost: one atomic load when no inode has writes in flight
 * (a write answered before our caller started made its entry visible
 * first), else one locked hash lookup. */
int fe_wback_drain(struct fe_wback *wb, uint64_t ino, int take_err)
{
	struct wback_ino *e;
	int rc = 0;

	if (__atomic_load_n(&wb->nents, __ATOMIC_SEQ_CST) == 0)
		return 0;
	e = wback_get(wb, ino, 0);
	if (!e)
		return 0;
	pthread_mutex_lock(&e->lock);
	wback_wait_range(wb, e, 0, 0);
	if (take_err) {
		rc = e->err;
		e->err = 0;
	}
	pthread_mutex_unlock(&e->lock);
	wback_put(wb, e);
	return rc;
}
