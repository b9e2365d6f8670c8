/*
 * iod_buf.h - the iod's bulk buffer pool, after PVFS over InfiniBand 3.3.2.
 *
 * Buffers live in zones, one zone per size: 64 KiB, 128 KiB, ... 2 MiB.
 * Each zone is one mmap'd region carved into equal buffers, so a future
 * verbs backend can register every zone with the HCA once, at start-up.
 * A request asks for the transfer size it wants; it gets a buffer from the
 * matching zone, else from the next larger zone, else (chopping) from the
 * largest smaller zone that has one. Buffers never split or merge, so the
 * pool cannot fragment. When nothing is free the caller queues a waiter and
 * a released buffer is handed straight to the oldest waiter (FIFO).
 *
 * Not thread-safe: loop thread only.
 */
#ifndef RPFS_IOD_BUF_H
#define RPFS_IOD_BUF_H

#include <stddef.h>
#include <stdint.h>

#define IOD_BUF_NZONES 6
#define IOD_BUF_MIN_SHIFT 16 /* 64 KiB */
#define IOD_BUF_MIN ((size_t)1 << IOD_BUF_MIN_SHIFT)
#define IOD_BUF_MAX (IOD_BUF_MIN << (IOD_BUF_NZONES - 1)) /* 2 MiB */

/* A buffer handed out by the pool. Valid until released. */
struct iod_buf {
	void *p;        /* start of the buffer */
	size_t size;    /* its capacity: the zone's buffer size */
	uint8_t zone;   /* zone index, 0 = 64 KiB */
	uint32_t idx;   /* index within the zone */
};

struct iod_buf_waiter;
/* Called when a released buffer was handed to w (see w->buf). */
typedef void (*iod_buf_wake_fn)(struct iod_buf_waiter *w);

/* A queued request for a buffer; embed it in the request state. */
struct iod_buf_waiter {
	struct iod_buf_waiter *next; /* FIFO link (loop thread only) */
	iod_buf_wake_fn fn;          /* set by the caller */
	void *arg;                   /* free for the caller */
	struct iod_buf buf;          /* the buffer handed over on wake */
	int queued;                  /* 1 while in the FIFO */
};

/* Buffer counts per zone, index 0 = 64 KiB. */
struct iod_buf_config {
	unsigned count[IOD_BUF_NZONES];
};

struct iod_buf_pool;

/** Default counts: a few buffers per zone (about 16 MiB in total). */
void iod_buf_config_default(struct iod_buf_config *c);

/**
 * Create a pool: one mmap(MAP_POPULATE) region per non-empty zone, so all
 * pages are touched once now and never again. Cost: the total size in
 * fresh pages, once.
 * @param[out] out the pool
 * @param[in] c counts per zone (at least one buffer in total, each count
 *	<= 65536)
 * @return 0, -EINVAL bad counts, -ENOMEM
 */
int iod_buf_pool_new(struct iod_buf_pool **out, const struct iod_buf_config *c);

/** Unmap every zone. All buffers must have been released. */
void iod_buf_pool_free(struct iod_buf_pool *pool);

/**
 * Take a buffer for a transfer of want bytes: the matching zone (smallest
 * size >= want, capped at 2 MiB), else a larger zone, else the largest
 * smaller zone with a free buffer (the caller chops the transfer to
 * b->size). Fails while waiters are queued, so nobody jumps the FIFO.
 * Cost: O(zones).
 * @param[out] b the buffer
 * @return 0, -EAGAIN nothing free (queue with iod_buf_wait), -EINVAL want 0
 */
int iod_buf_get(struct iod_buf_pool *pool, size_t want, struct iod_buf *b);

/**
 * Give a buffer back. If a waiter is queued, the buffer goes to the oldest
 * one and its fn runs before this returns (the callee should defer heavy
 * work). Cost: O(1).
 */
void iod_buf_put(struct iod_buf_pool *pool, const struct iod_buf *b);

/** Queue w (fn set) for the next released buffer. */
void iod_buf_wait(struct iod_buf_pool *pool, struct iod_buf_waiter *w);

/** Remove w from the queue if it is still queued (request abandoned). */
void iod_buf_cancel(struct iod_buf_pool *pool, struct iod_buf_waiter *w);

/** Free buffers in zone z (for tests and stats). */
unsigned iod_buf_nfree(const struct iod_buf_pool *pool, unsigned z);

/** Base address and length of zone z's region (for registration). */
void iod_buf_zone_region(const struct iod_buf_pool *pool, unsigned z,
			 void **base, size_t *len);

#endif
