/* iod_buf.c - zone allocator for the iod's bulk buffers (see iod_buf.h). */
#include "iod_buf.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

struct iod_zone {
	uint8_t *base;     /* mmap'd region, count * size bytes (loop thread only) */
	size_t size;       /* buffer size of this zone */
	unsigned count;    /* buffers in the zone */
	unsigned nfree;    /* entries on the free stack */
	uint32_t *free;    /* stack of free buffer indices */
};

struct iod_buf_pool {
	struct iod_zone zone[IOD_BUF_NZONES]; /* loop thread only */
	struct iod_buf_waiter *wait_head;     /* FIFO of waiters (loop thread only) */
	struct iod_buf_waiter *wait_tail;
};

/* A few buffers per zone: 8x64K 8x128K 4x256K 4x512K 4x1M 4x2M = 16.5 MiB,
 * enough for a handful of double-buffered large requests at once. */
void iod_buf_config_default(struct iod_buf_config *c)
{
	static const unsigned def[IOD_BUF_NZONES] = { 8, 8, 4, 4, 4, 4 };

	for (int z = 0; z < IOD_BUF_NZONES; z++)
		c->count[z] = def[z];
}

/* Map each zone's region populated up front, so buffers never fault later
 * and a verbs backend can register one region per zone. */
int iod_buf_pool_new(struct iod_buf_pool **out, const struct iod_buf_config *c)
{
	struct iod_buf_pool *pool;
	unsigned total = 0;
	int rc;

	for (int z = 0; z < IOD_BUF_NZONES; z++) {
		if (c->count[z] > 65536)
			return -EINVAL;
		total += c->count[z];
	}
	if (total == 0)
		return -EINVAL;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	for (int z = 0; z < IOD_BUF_NZONES; z++) {
		struct iod_zone *zn = &pool->zone[z];

		zn->size = IOD_BUF_MIN << z;
		zn->count = c->count[z];
		if (!zn->count)
			continue;
		zn->free = malloc(sizeof(*zn->free) * zn->count);
		if (!zn->free) {
			rc = -ENOMEM;
			goto out_free_zones;
		}
		void *m = mmap(NULL, zn->size * zn->count, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (m == MAP_FAILED) {
			rc = -ENOMEM;
			goto out_free_zones;
		}
		zn->base = m;
		/* Lowest index on top of the stack: reuse the same warm buffers. */
		for (unsigned i = 0; i < zn->count; i++)
			zn->free[i] = zn->count - 1 - i;
		zn->nfree = zn->count;
	}
	*out = pool;
	return 0;

out_free_zones:
	iod_buf_pool_free(pool);
	return rc;
}

/* Unmap the regions and free the free stacks. */
void iod_buf_pool_free(struct iod_buf_pool *pool)
{
	if (!pool)
		return;
	for (int z = 0; z < IOD_BUF_NZONES; z++) {
		struct iod_zone *zn = &pool->zone[z];

		if (zn->base)
			munmap(zn->base, zn->size * zn->count);
		free(zn->free);
	}
	free(pool);
}

/* Pop a buffer off zone z into b. Returns 0 or -EAGAIN when it is empty. */
static int zone_take(struct iod_buf_pool *pool, unsigned z, struct iod_buf *b)
{
	struct iod_zone *zn = &pool->zone[z];
	uint32_t i;

	if (!zn->nfree)
		return -EAGAIN;
	i = zn->free[--zn->nfree];
	b->p = zn->base + (size_t)i * zn->size;
	b->size = zn->size;
	b->zone = (uint8_t)z;
	b->idx = i;
	return 0;
}

/* Matching zone, then larger ones, then the largest smaller one (chop). */
int iod_buf_get(struct iod_buf_pool *pool, size_t want, struct iod_buf *b)
{
	unsigned match = 0;

	if (want == 0)
		return -EINVAL;
	if (pool->wait_head)
		return -EAGAIN;
	while (match < IOD_BUF_NZONES - 1 && pool->zone[match].size < want)
		match++;
	for (unsigned z = match; z < IOD_BUF_NZONES; z++)
		if (zone_take(pool, z, b) == 0)
			return 0;
	for (unsigned z = match; z-- > 0;)
		if (zone_take(pool, z, b) == 0)
			return 0;
	return -EAGAIN;
}

/* Hand b to the oldest waiter, or push it back on its zone's stack. */
void iod_buf_put(struct iod_buf_pool *pool, const struct iod_buf *b)
{
	struct iod_buf_waiter *w = pool->wait_head;

	if (w) {
		pool->wait_head = w->next;
		if (!pool->wait_head)
			pool->wait_tail = NULL;
		w->next = NULL;
		w->queued = 0;
		w->buf = *b;
		w->fn(w);
		return;
	}
	struct iod_zone *zn = &pool->zone[b->zone];
	zn->free[zn->nfree++] = b->idx;
}

/* Append w to the FIFO. */
void iod_buf_wait(struct iod_buf_pool *pool, struct iod_buf_waiter *w)
{
	w->next = NULL;
	w->queued = 1;
	if (pool->wait_tail)
		pool->wait_tail->next = w;
	else
		pool->wait_head = w;
	pool->wait_tail = w;
}

/* Unlink w from the FIFO; O(waiters), only on abandoned requests. */
void iod_buf_cancel(struct iod_buf_pool *pool, struct iod_buf_waiter *w)
{
	struct iod_buf_waiter **pp = &pool->wait_head, *prev = NULL;

	if (!w->queued)
		return;
	while (*pp && *pp != w) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (*pp) {
		*pp = w->next;
		if (pool->wait_tail == w)
			pool->wait_tail = prev;
	}
	w->next = NULL;
	w->queued = 0;
}

/* Free buffers left in zone z. */
unsigned iod_buf_nfree(const struct iod_buf_pool *pool, unsigned z)
{
	return z < IOD_BUF_NZONES ? pool->zone[z].nfree : 0;
}

/* Region of zone z, for memory registration. */
void iod_buf_zone_region(const struct iod_buf_pool *pool, unsigned z,
			 void **base, size_t *len)
{
	if (z >= IOD_BUF_NZONES) {
		*base = NULL;
		*len = 0;
		return;
	}
	*base = pool->zone[z].base;
	*len = pool->zone[z].size * pool->zone[z].count;
}
