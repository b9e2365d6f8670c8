/*
 * vb_mr.c - memory registration for the verbs backend: counted
 * ibv_reg_mr/ibv_dereg_mr wrappers, the client's pin-down cache and the
 * server's table of pre-registered buffer zones.
 *
 * Staleness rule of the pin-down cache: a registration pins the physical
 * pages behind a virtual range; if that range were unmapped and reused, a
 * cached registration would silently point at the old pages. Intercepting
 * every munmap/brk is not possible in general (glibc calls the syscalls
 * directly), so the cache only ever caches regions its owner declared
 * long-lived with net_client_register_mem() (e.g. the client core's
 * per-thread FUSE buffers), which the owner promises stay mapped until
 * net_client_unregister_mem(), and that call deregisters them. Any other
 * memory is registered for the one call and deregistered when the call
 * completes (counted as a miss). Nothing else is ever looked up in the
 * cache, so a stale hit cannot happen.
 *
 * The cache is not thread-safe: the client serialises it with its lock.
 */
#include "vb_int.h"
#include "log.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>

/* Add d to a gauge counter (relaxed). */
void vb_stat_gauge(uint64_t *g, int64_t d)
{
	__atomic_fetch_add(g, (uint64_t)d, __ATOMIC_RELAXED);
}

/* Raise sge_max to v if larger. */
void vb_stat_max(struct net_stats *st, uint64_t v)
{
	uint64_t cur = __atomic_load_n(&st->sge_max, __ATOMIC_RELAXED);

	while (v > cur && !__atomic_compare_exchange_n(&st->sge_max, &cur, v, 0,
						       __ATOMIC_RELAXED,
						       __ATOMIC_RELAXED))
		;
}

/* ibv_reg_mr plus counters. Cost: a syscall pinning every page. */
struct ibv_mr *vb_reg(struct ibv_pd *pd, void *addr, size_t len, int acc,
		      struct net_stats *st)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, acc);

	if (!mr)
		return NULL;
	NET_STAT_ADD(st, reg_count, 1);
	NET_STAT_ADD(st, reg_bytes, len);
	vb_stat_gauge(&st->pinned_bytes, (int64_t)len);
	return mr;
}

/* ibv_dereg_mr plus counters. */
void vb_dereg(struct ibv_mr *mr, struct net_stats *st)
{
	size_t len = mr->length;

	if (ibv_dereg_mr(mr) == 0) {
		NET_STAT_ADD(st, dereg_count, 1);
		vb_stat_gauge(&st->pinned_bytes, -(int64_t)len);
	}
}

/* ------------------------------------------------------------ pin-down cache */

#define VB_ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		    IBV_ACCESS_REMOTE_READ)

void vb_rcache_init(struct vb_rcache *rc, uint64_t max, struct net_stats *st)
{
	memset(rc, 0, sizeof(*rc));
	rc->max = max;
	rc->st = st;
}

void vb_rcache_fini(struct vb_rcache *rc)
{
	for (int i = 0; i < rc->n; i++)
		if (rc->ent[i].mr)
			vb_dereg(rc->ent[i].mr, rc->st);
	free(rc->ent);
	rc->ent = NULL;
	rc->n = rc->cap = 0;
	rc->pinned = 0;
}

/* Index of the first entry with base > a (binary search). */
static int vb_rc_upper(const struct vb_rcache *rc, uintptr_t a)
{
	int lo = 0, hi = rc->n;

	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (rc->ent[mid].base <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The declared entry containing [a, a+len), or NULL. O(log n). */
static struct vb_rent *vb_rc_find(struct vb_rcache *rc, uintptr_t a, size_t len)
{
	int i = vb_rc_upper(rc, a) - 1;

	if (i < 0 || len == 0)
		return NULL;
	struct vb_rent *e = &rc->ent[i];
	if (a >= e->base && a - e->base <= e->len && len <= e->len - (a - e->base))
		return e;
	return NULL;
}

/* Declare a long-lived region: inserted sorted, not registered yet. */
int vb_rcache_declare(struct vb_rcache *rc, void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	int i;

	if (!addr || !len || a + len < a)
		return -EINVAL;
	i = vb_rc_upper(rc, a);
	if (i > 0 && rc->ent[i - 1].base + rc->ent[i - 1].len > a)
		return -EINVAL;
	if (i < rc->n && a + len > rc->ent[i].base)
		return -EINVAL;
	if (rc->n == rc->cap) {
		int nc = rc->cap ? rc->cap * 2 : 16;
		struct vb_rent *ne = realloc(rc->ent, (size_t)nc * sizeof(*ne));
		if (!ne)
			return -ENOMEM;
		rc->ent = ne;
		rc->cap = nc;
	}
	memmove(&rc->ent[i + 1], &rc->ent[i], (size_t)(rc->n - i) * sizeof(*rc->ent));
	rc->ent[i] = (struct vb_rent){ .base = a, .len = len };
	rc->n++;
	return 0;
}

/* Drop an entry's registration (it stays declared). */
static void vb_rc_unpin(struct vb_rcache *rc, struct vb_rent *e)
{
	if (!e->mr)
		return;
	vb_dereg(e->mr, rc->st);
	e->mr = NULL;
	rc->pinned -= e->len;
}

int vb_rcache_undeclare(struct vb_rcache *rc, void *addr)
{
	struct vb_rent *e = vb_rc_find(rc, (uintptr_t)addr, 1);
	int i;

	if (!e || e->base != (uintptr_t)addr)
		return -ENOENT;
	if (e->refs)
		return -EBUSY;
	vb_rc_unpin(rc, e);
	i = (int)(e - rc->ent);
	memmove(&rc->ent[i], &rc->ent[i + 1], (size_t)(rc->n - i - 1) * sizeof(*e));
	rc->n--;
	return 0;
}

/* check_if_registered: a registered declared region covering the range. */
struct ibv_mr *vb_rcache_check(struct vb_rcache *rc, const void *addr, size_t len)
{
	struct vb_rent *e = vb_rc_find(rc, (uintptr_t)addr, len);

	if (!e || !e->mr)
		return NULL;
	e->lru = ++rc->tick;
	return e->mr;
}

/* Evict least recently used idle registrations until need more bytes fit
 * under the bound. O(n) per eviction. @return 0 fits, -ENOSPC cannot */
static int vb_rc_make_room(struct vb_rcache *rc, size_t need)
{
	while (rc->pinned + need > rc->max) {
		struct vb_rent *victim = NULL;
		for (int i = 0; i < rc->n; i++) {
			struct vb_rent *e = &rc->ent[i];
			if (e->mr && !e->refs && (!victim || e->lru < victim->lru))
				victim = e;
		}
		if (!victim)
			return -ENOSPC;
		vb_rc_unpin(rc, victim);
		NET_STAT_ADD(rc->st, reg_cache_evictions, 1);
	}
	return 0;
}

/* Hit, fill (declared region) or per-call registration; see vb_int.h. */
int vb_rcache_get(struct vb_rcache *rc, void *addr, size_t len, int acc,
		  struct vb_rref *out)
{
	struct vb_rent *e = vb_rc_find(rc, (uintptr_t)addr, len);

	memset(out, 0, sizeof(*out));
	if (!rc->pd)
		return -ENODEV;
	if (e && e->mr) {
		e->lru = ++rc->tick;
		e->refs++;
		out->mr = e->mr;
		out->ent = e;
		out->base = e->base;
		NET_STAT_ADD(rc->st, reg_cache_hits, 1);
		return 0;
	}
	NET_STAT_ADD(rc->st, reg_cache_misses, 1);
	if (e && e->len <= rc->max && vb_rc_make_room(rc, e->len) == 0) {
		/* Declared regions are registered whole, for every access. */
		e->mr = vb_reg(rc->pd, (void *)e->base, e->len, VB_ACC_ALL, rc->st);
		if (e->mr) {
			rc->pinned += e->len;
			e->lru = ++rc->tick;
			e->refs++;
			out->mr = e->mr;
			out->ent = e;
			out->base = e->base;
			return 0;
		}
	}
	out->mr = vb_reg(rc->pd, addr, len, acc, rc->st);
	if (!out->mr)
		return errno ? -errno : -ENOMEM;
	return 0;
}

/* Release what vb_rcache_get gave: unref a cached entry or deregister a
 * per-call registration. */
void vb_rcache_put(struct vb_rcache *rc, struct vb_rref *ref)
{
	if (!ref->mr)
		return;
	if (ref->ent) {
		struct vb_rent *e = vb_rc_find(rc, ref->base, 1);
		if (e && e->refs > 0)
			e->refs--;
	} else {
		vb_dereg(ref->mr, rc->st);
	}
	ref->mr = NULL;
	ref->ent = NULL;
}

/* --------------------------------------------------------------- zone table */

/* Register a server zone and keep the table sorted. */
int vb_zones_add(struct vb_zones *zs, struct ibv_pd *pd, void *addr, size_t len,
		 struct net_stats *st)
{
	uintptr_t a = (uintptr_t)addr;
	struct ibv_mr *mr;
	int i = 0;

	if (!addr || !len || a + len < a)
		return -EINVAL;
	while (i < zs->n && zs->z[i].base < a)
		i++;
	if ((i > 0 && zs->z[i - 1].base + zs->z[i - 1].len > a) ||
	    (i < zs->n && a + len > zs->z[i].base))
		return -EINVAL;
	if (zs->n == zs->cap) {
		int nc = zs->cap ? zs->cap * 2 : 8;
		struct vb_zone *nz = realloc(zs->z, (size_t)nc * sizeof(*nz));
		if (!nz)
			return -ENOMEM;
		zs->z = nz;
		zs->cap = nc;
	}
	mr = vb_reg(pd, addr, len, IBV_ACCESS_LOCAL_WRITE, st);
	if (!mr)
		return errno ? -errno : -ENOMEM;
	memmove(&zs->z[i + 1], &zs->z[i], (size_t)(zs->n - i) * sizeof(*zs->z));
	zs->z[i] = (struct vb_zone){ .base = a, .len = len, .mr = mr };
	zs->n++;
	return 0;
}

/* Binary search for the zone holding the whole range. */
struct ibv_mr *vb_zones_find(const struct vb_zones *zs, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	int lo = 0, hi = zs->n;

	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (zs->z[mid].base <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || len == 0)
		return NULL;
	const struct vb_zone *z = &zs->z[lo - 1];
	if (a - z->base < z->len && len <= z->len - (a - z->base))
		return z->mr;
	return NULL;
}

void vb_zones_fini(struct vb_zones *zs, struct net_stats *st)
{
	for (int i = 0; i < zs->n; i++)
		vb_dereg(zs->z[i].mr, st);
	free(zs->z);
	memset(zs, 0, sizeof(*zs));
}
