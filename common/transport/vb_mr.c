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
#include <math.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

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

/* CLOCK_MONOTONIC in ns (local: the unit tests include this file alone). */
static uint64_t vb_mr_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ibv_reg_mr plus counters (calls, bytes, time, also of failed attempts).
 * Cost: a syscall pinning every page. */
struct ibv_mr *vb_reg(struct ibv_pd *pd, void *addr, size_t len, int acc,
		      struct net_stats *st)
{
	uint64_t t0 = vb_mr_now();
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, acc);
	int e = errno;

	NET_STAT_ADD(st, reg_ns, vb_mr_now() - t0);
	if (!mr) {
		errno = e;
		return NULL;
	}
	NET_STAT_ADD(st, reg_count, 1);
	NET_STAT_ADD(st, reg_bytes, len);
	vb_stat_gauge(&st->pinned_bytes, (int64_t)len);
	return mr;
}

/* ibv_dereg_mr plus counters. */
void vb_dereg(struct ibv_mr *mr, struct net_stats *st)
{
	size_t len = mr->length;
	uint64_t t0 = vb_mr_now();
	int rc = ibv_dereg_mr(mr);

	NET_STAT_ADD(st, reg_ns, vb_mr_now() - t0);
	if (rc == 0) {
		NET_STAT_ADD(st, dereg_count, 1);
		vb_stat_gauge(&st->pinned_bytes, -(int64_t)len);
	}
}

/* ------------------------------------------------------------ pin-down cache */

#define VB_ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		    IBV_ACCESS_REMOTE_READ)

/* An empty cache bounded to max pinned bytes, counting into st. Mode OGR
 * unless $RPFS_REG_MODE=indiv; the cost model keeps its defaults until
 * calibrated (first connect, or $RPFS_OGR_COST). */
void vb_rcache_init(struct vb_rcache *rc, uint64_t max, struct net_stats *st)
{
	const char *m = getenv("RPFS_REG_MODE");

	memset(rc, 0, sizeof(*rc));
	rc->max = max;
	rc->st = st;
	rc->mode = m && !strcmp(m, "indiv") ? VB_REG_INDIV : VB_REG_OGR;
	rc->cost_a = VB_OGR_DEF_A;
	rc->cost_b = VB_OGR_DEF_B;
	rc->now = vb_mr_now;
}

/* See vb_int.h. Cost: one deregistration per cached entry. */
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

/* See vb_int.h. addr must be the start of the region. Cost: a
 * deregistration when cached, and a memmove of the entries after it. */
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

/* Whether [addr, addr+len) lies in a declared region the cache can hold
 * (registered already or not yet): memory that is never copied. O(log n). */
int vb_rcache_declared(struct vb_rcache *rc, const void *addr, size_t len)
{
	struct vb_rent *e = vb_rc_find(rc, (uintptr_t)addr, len);

	return e && e->len <= rc->max;
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

/* ------------------------------------------- Optimistic Group Registration */

#define VB_PG 4096u
#define VB_OGR_QUERY_MIN 4 /* failed groups of more segments query the maps */

/* Address a rounded down to a page (VB_PG). */
static uintptr_t vb_pg_down(uintptr_t a) { return a & ~(uintptr_t)(VB_PG - 1); }
/* Address a rounded up to a page (VB_PG). */
static uintptr_t vb_pg_up(uintptr_t a) { return (a + VB_PG - 1) & ~(uintptr_t)(VB_PG - 1); }

/* Sizes timed by the calibration, in pages: the slope comes mostly from
 * the largest, the intercept from the smallest. The largest stays short
 * (about 100 us on soft-RoCE under TCG): the longer a timing, the fewer
 * undisturbed ones a loaded machine gives, and a disturbed largest size
 * raises a. */
static const uint32_t vb_cal_pages[VB_CAL_NSIZES] = { 1, 4, 32, 128, 256 };

/* Order two doubles (qsort). */
static int vb_dbl_cmp(const void *x, const void *y)
{
	double p = *(const double *)x, q = *(const double *)y;

	return p < q ? -1 : p > q;
}

/* Median of v[0..n), n >= 1 (sorts v). */
static double vb_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), vb_dbl_cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* v limited to [lo, hi]: keeps a fitted cost model plausible. */
static double vb_clamp(double v, double lo, double hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* See vb_int.h. Cost: O(n * sizes + sizes^2 log sizes). */
int vb_ogr_fit(const struct vb_cal_sample *s, int n, double *a, double *b)
{
	double x[VB_CAL_MAXSIZES], y[VB_CAL_MAXSIZES];
	double sl[VB_CAL_MAXSIZES * (VB_CAL_MAXSIZES - 1) / 2], res[VB_CAL_MAXSIZES];
	int m = 0, ns = 0;

	*a = VB_OGR_DEF_A;
	*b = VB_OGR_DEF_B;
	/* the fastest good sample of each size */
	for (int i = 0; i < n; i++) {
		int k = 0;
		if (!s[i].pages || !(s[i].ns > 0) || !isfinite(s[i].ns))
			continue;
		while (k < m && x[k] != (double)s[i].pages)
			k++;
		if (k == m) {
			if (m == VB_CAL_MAXSIZES)
				continue;
			x[m] = (double)s[i].pages;
			y[m++] = s[i].ns;
		} else if (s[i].ns < y[k]) {
			y[k] = s[i].ns;
		}
	}
	if (m < 2)
		return -EINVAL;
	/* Theil-Sen: median slope, then median intercept */
	for (int i = 0; i < m; i++)
		for (int j = i + 1; j < m; j++)
			sl[ns++] = (y[j] - y[i]) / (x[j] - x[i]);
	double fa = vb_median(sl, ns);
	for (int i = 0; i < m; i++)
		res[i] = y[i] - fa * x[i];
	double fb = vb_median(res, m);
	if (!isfinite(fa) || !isfinite(fb) || fa <= 0 || fb < fa)
		return -EINVAL;
	*a = vb_clamp(fa, VB_OGR_A_MIN, VB_OGR_A_MAX);
	*b = vb_clamp(fb, VB_OGR_B_MIN, VB_OGR_B_MAX);
	return 0;
}

/* Involuntary context switches of the calling thread so far (0 when
 * unknown): a change across a timing means the thread lost the CPU. */
static long vb_nivcsw(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) ? 0 : ru.ru_nivcsw;
}

/* Time one ibv_reg_mr + ibv_dereg_mr of len bytes at p with rc's clock;
 * a timing during which the thread was preempted is taken again (at most
 * VB_CAL_TRIES times, then the last one stands). Cost: two getrusage
 * calls per try, outside the timed part.
 * @return ns, or -1 if the registration failed */
static double vb_cal_one(struct vb_rcache *rc, void *p, size_t len)
{
	double t = -1;

	for (int i = 0; i < VB_CAL_TRIES; i++) {
		long cs = vb_nivcsw();
		uint64_t t0 = rc->now();
		struct ibv_mr *mr = ibv_reg_mr(rc->pd, p, len, IBV_ACCESS_LOCAL_WRITE);
		if (!mr)
			return -1;
		ibv_dereg_mr(mr);
		t = (double)(rc->now() - t0);
		if (vb_nivcsw() == cs)
			break;
	}
	return t;
}

/* Take VB_CAL_ROUNDS samples of every calibration size into s, in rounds
 * (each round times every size once, so a burst of load disturbs all sizes
 * alike rather than all samples of one). The region starts one page into a
 * larger mapping, so that registering it splits the mapping as registering
 * application memory does. @return samples taken, or -ENOMEM */
static int vb_cal_measure(struct vb_rcache *rc, struct vb_cal_sample *s)
{
	size_t maplen = (vb_cal_pages[VB_CAL_NSIZES - 1] + 2) * (size_t)VB_PG;
	char *p = mmap(NULL, maplen, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	int n = 0;

	if (p == MAP_FAILED)
		return -ENOMEM;
	(void)vb_cal_one(rc, p + VB_PG, VB_PG); /* first-call costs: untimed */
	for (int r = 0; r < VB_CAL_ROUNDS; r++)
		for (int i = 0; i < VB_CAL_NSIZES; i++, n++) {
			s[n].pages = vb_cal_pages[i];
			s[n].ns = vb_cal_one(rc, p + VB_PG, vb_cal_pages[i] * (size_t)VB_PG);
		}
	munmap(p, maplen);
	return n;
}

/*
 * See vb_int.h. Cost: VB_CAL_ROUNDS * VB_CAL_NSIZES = 75 timed
 * registrations (with deregistration) of 421 pages per round, 6315 pages
 * (25 MiB) in all, plus one untimed: 75 * b + 6315 * a, about 4 ms of work
 * on soft-RoCE under qemu TCG (a ~ 0.25 us, b ~ 33 us; more wall time when
 * other processes hold the CPU; timings retaken after a preemption add at
 * most twice that); the wall time is noted in ogr_cal_ns. Once per client,
 * at its first connect.
 */
void vb_rcache_calibrate(struct vb_rcache *rc)
{
	struct vb_cal_sample s[VB_CAL_ROUNDS * VB_CAL_NSIZES];
	const char *env = getenv("RPFS_OGR_COST");
	const char *how = "fitted";
	double a, b;
	uint64_t t0;
	int n, end = 0;

	if (rc->calibrated)
		return;
	rc->calibrated = 1;
	if (env && sscanf(env, "%lf,%lf%n", &a, &b, &end) == 2 && !env[end] &&
	    a >= 0 && b >= 0 && isfinite(a) && isfinite(b)) {
		rc->cost_a = a;
		rc->cost_b = b;
		how = "from RPFS_OGR_COST";
		goto out_publish;
	}
	if (env)
		log_warn("net: verbs: RPFS_OGR_COST \"%s\" is not \"a_ns,b_ns\" "
			 "(two numbers >= 0): calibrating instead", env);
	if (!rc->pd) {
		how = "defaults, no device";
		goto out_publish;
	}
	t0 = rc->now();
	n = vb_cal_measure(rc, s);
	if (n < 0 || vb_ogr_fit(s, n, &a, &b)) {
		how = "defaults, calibration failed";
		a = VB_OGR_DEF_A;
		b = VB_OGR_DEF_B;
	}
	NET_STAT_ADD(rc->st, ogr_cal_ns, rc->now() - t0);
	rc->cost_a = a;
	rc->cost_b = b;
out_publish:
	__atomic_store_n(&rc->st->ogr_cost_a_ns, (uint64_t)(rc->cost_a + 0.5),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&rc->st->ogr_cost_b_ns, (uint64_t)(rc->cost_b + 0.5),
			 __ATOMIC_RELAXED);
	log_info("net: verbs: OGR registration cost %.0f ns/page + %.0f ns/call (%s)",
		 rc->cost_a, rc->cost_b, how);
}

struct vb_ogr_key {
	uintptr_t a;
	int i;
};

/* Order segment keys by address (qsort); the key keeps the segment's
 * index for after the sort. */
static int vb_ogr_cmp(const void *x, const void *y)
{
	const struct vb_ogr_key *p = x, *q = y;

	return p->a < q->a ? -1 : p->a > q->a;
}

/* Whether segments i and j lie in the same declared allocation. */
static int vb_same_alloc(const struct iovec *alloc, int i, int j)
{
	return alloc[i].iov_base == alloc[j].iov_base && alloc[i].iov_len == alloc[j].iov_len;
}

/*
 * See vb_int.h. Greedy over the sorted segments: the next one joins the
 * current group when its pages overlap the group's, or when registering
 * the hole pages between them (a per page) costs less than one more
 * registration (b). With allocation bounds, never across allocations.
 * Cost: O(n log n).
 */
int vb_ogr_group(const struct vb_rcache *rc, const struct iovec *iov,
		 const struct iovec *alloc, int *idx, int n, int *grp)
{
	struct vb_ogr_key kbuf[64], *k = n <= 64 ? kbuf : malloc((size_t)n * sizeof(*k));
	int g = -1;
	uintptr_t gend = 0;

	if (!k) {
		/* no memory to sort: every segment its own group */
		for (int i = 0; i < n; i++)
			grp[i] = i;
		return n;
	}
	for (int i = 0; i < n; i++)
		k[i] = (struct vb_ogr_key){ (uintptr_t)iov[idx[i]].iov_base, idx[i] };
	qsort(k, (size_t)n, sizeof(*k), vb_ogr_cmp);
	for (int i = 0; i < n; i++) {
		uintptr_t s = vb_pg_down(k[i].a);
		uintptr_t e = vb_pg_up(k[i].a + iov[k[i].i].iov_len);
		int join = 0;
		idx[i] = k[i].i;
		if (i > 0 && (!alloc || vb_same_alloc(alloc, k[i].i, k[i - 1].i))) {
			if (s <= gend)
				join = 1;
			else if (rc->cost_a * (double)((s - gend) / VB_PG) < rc->cost_b)
				join = 1;
		}
		if (!join) {
			g++;
			gend = e;
		} else if (e > gend) {
			gend = e;
		}
		grp[i] = g;
	}
	if (k != kbuf)
		free(k);
	return g + 1;
}

/* The mapped interval (adjacent mappings merged) of /proc/self/maps that
 * contains [a, a+len). @return 1 found (*lo, *hi set), 0 not mapped */
static int vb_maps_find(FILE *f, uintptr_t a, size_t len, uintptr_t *lo, uintptr_t *hi)
{
	char line[512];
	unsigned long s, e;
	uintptr_t cl = 0, ch = 0;

	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		size_t l = strlen(line);
		if (l && line[l - 1] != '\n') { /* skip the rest of a long line */
			int c;
			while ((c = fgetc(f)) != EOF && c != '\n')
				;
		}
		if (sscanf(line, "%lx-%lx", &s, &e) != 2)
			continue;
		if (ch && s == ch) {
			ch = e; /* adjacent mapping: extend */
			continue;
		}
		if (ch && cl <= a && a + len <= ch)
			break;
		if (s > a) { /* sorted: nothing later can hold a */
			cl = ch = 0;
			break;
		}
		cl = s;
		ch = e;
	}
	if (ch && cl <= a && a + len <= ch) {
		*lo = cl;
		*hi = ch;
		return 1;
	}
	return 0;
}

/* Register [s, e) for the segments sorted[k0..k1) and point their mrs at
 * it. @return 0, -errno */
static int vb_ogr_reg(struct vb_rcache *rc, const struct iovec *iov, const int *sorted,
		      int k0, int k1, uintptr_t s, uintptr_t e, int acc,
		      struct ibv_mr **mrs, struct vb_rref *refs, int *nrefs)
{
	struct ibv_mr *mr = vb_reg(rc->pd, (void *)s, e - s, acc, rc->st);

	if (!mr)
		return errno ? -errno : -ENOMEM;
	refs[*nrefs] = (struct vb_rref){ .mr = mr };
	(*nrefs)++;
	for (int k = k0; k < k1; k++)
		mrs[sorted[k]] = mr;
	if (k1 - k0 > 1)
		NET_STAT_ADD(rc->st, ogr_groups, 1);
	return 0;
}

/* A group's registration failed: register its segments by the real
 * mappings (many segments) or one by one (few). @return 0, -errno */
static int vb_ogr_fallback(struct vb_rcache *rc, const struct iovec *iov,
			   const int *sorted, int k0, int k1, int acc,
			   struct ibv_mr **mrs, struct vb_rref *refs, int *nrefs)
{
	FILE *f = NULL;
	int rc2 = 0;

	NET_STAT_ADD(rc->st, ogr_fallbacks, 1);
	if (k1 - k0 > VB_OGR_QUERY_MIN)
		f = fopen("/proc/self/maps", "re");
	for (int k = k0; k < k1 && !rc2;) {
		uintptr_t a = (uintptr_t)iov[sorted[k]].iov_base;
		size_t l = iov[sorted[k]].iov_len;
		uintptr_t lo = 0, hi = 0;
		int k2 = k + 1;
		if (f && vb_maps_find(f, a, l, &lo, &hi)) {
			/* every following segment inside the same mapping joins */
			while (k2 < k1 && (uintptr_t)iov[sorted[k2]].iov_base >= lo &&
			       (uintptr_t)iov[sorted[k2]].iov_base + iov[sorted[k2]].iov_len <= hi)
				k2++;
		}
		uintptr_t e = 0;
		for (int j = k; j < k2; j++) {
			uintptr_t je = (uintptr_t)iov[sorted[j]].iov_base + iov[sorted[j]].iov_len;
			if (je > e)
				e = je;
		}
		if (k2 - k == 1)
			rc2 = vb_ogr_reg(rc, iov, sorted, k, k2, a, a + l, acc, mrs, refs, nrefs);
		else
			rc2 = vb_ogr_reg(rc, iov, sorted, k, k2, vb_pg_down(a),
					 vb_pg_up(e) < hi ? vb_pg_up(e) : hi, acc, mrs, refs, nrefs);
		k = k2;
	}
	if (f)
		fclose(f);
	return rc2;
}

/* See vb_int.h. Cost: sort + one ibv_reg_mr per group in the common case. */
int vb_rcache_get_list(struct vb_rcache *rc, const struct iovec *iov, int cnt,
		       const struct iovec *alloc, int acc, struct ibv_mr **mrs,
		       struct vb_rref *refs, int *nrefs)
{
	int ibuf[64], gbuf[64];
	int *idx = ibuf, *grp = gbuf, n = 0, rc2 = 0;

	if (!rc->pd)
		return -ENODEV;
	if (cnt > 64) {
		idx = malloc((size_t)cnt * sizeof(*idx));
		grp = malloc((size_t)cnt * sizeof(*grp));
		if (!idx || !grp) {
			rc2 = -ENOMEM;
			goto out_free;
		}
	}
	/* declared memory through the cache; the rest is grouped */
	for (int i = 0; i < cnt; i++) {
		mrs[i] = NULL;
		if (!iov[i].iov_len)
			continue;
		if (rc->mode == VB_REG_OGR &&
		    !vb_rc_find(rc, (uintptr_t)iov[i].iov_base, iov[i].iov_len)) {
			idx[n++] = i;
			continue;
		}
		rc2 = vb_rcache_get(rc, iov[i].iov_base, iov[i].iov_len, acc, &refs[*nrefs]);
		if (rc2)
			goto out_free;
		mrs[i] = refs[*nrefs].mr;
		(*nrefs)++;
	}
	if (n) {
		vb_ogr_group(rc, iov, alloc, idx, n, grp);
		for (int k = 0; k < n && !rc2;) {
			int k1 = k + 1;
			uintptr_t s = (uintptr_t)iov[idx[k]].iov_base, e = 0;
			while (k1 < n && grp[k1] == grp[k])
				k1++;
			for (int j = k; j < k1; j++) {
				uintptr_t je = (uintptr_t)iov[idx[j]].iov_base + iov[idx[j]].iov_len;
				if (je > e)
					e = je;
			}
			NET_STAT_ADD(rc->st, reg_cache_misses, 1);
			if (k1 - k == 1) {
				rc2 = vb_ogr_reg(rc, iov, idx, k, k1, s, e, acc, mrs, refs, nrefs);
			} else {
				rc2 = vb_ogr_reg(rc, iov, idx, k, k1, vb_pg_down(s),
						 vb_pg_up(e), acc, mrs, refs, nrefs);
				if (rc2)
					rc2 = vb_ogr_fallback(rc, iov, idx, k, k1, acc, mrs,
							      refs, nrefs);
			}
			k = k1;
		}
	}
out_free:
	if (idx != ibuf)
		free(idx);
	if (grp != gbuf)
		free(grp);
	return rc2;
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

/* Deregister and forget every zone. Cost: one deregistration each. */
void vb_zones_fini(struct vb_zones *zs, struct net_stats *st)
{
	for (int i = 0; i < zs->n; i++)
		vb_dereg(zs->z[i].mr, st);
	free(zs->z);
	memset(zs, 0, sizeof(*zs));
}
