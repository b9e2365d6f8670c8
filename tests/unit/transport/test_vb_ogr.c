/*
 * test_vb_ogr.c - Optimistic Group Registration without RDMA: vb_mr.c is
 * included with ibv_reg_mr/ibv_dereg_mr stubbed. The stubbed ibv_reg_mr
 * fails with EFAULT, as the kernel does, when the range holds an unmapped
 * page (checked with mincore). Covers the cost-model grouping (merging
 * wins / loses, pages that overlap always merge), sorting, allocation
 * bounds (never grouped across allocations), the fallback after a failed
 * group (segment by segment for few segments, by /proc/self/maps for
 * many) with a real unmapped hole, individual mode, declared memory still
 * going through the cache, and that nothing stays registered after put.
 * The calibration of the cost model: the pure fit (robust to a disturbed
 * size, clamped, rejecting nonsense) and whole calibrations on a virtual
 * clock of a noisy machine, after which the listio benchmark's subarray
 * request must be one registration.
 */
#include <unistd.h>

#include "vb_stub.h"

#define PG 4096

/* A noisy machine for the calibration, on a virtual clock: registering and
 * deregistering p pages costs TRUE_A * p + TRUE_B ns (what soft-RoCE under
 * qemu TCG measures) plus up to 2 us of jitter, and noise_pct percent of
 * the timings are disturbed by up to 2 ms more (the process lost the CPU:
 * four benchmark processes calibrate at once on two vCPUs). */
#define TRUE_A 240.0
#define TRUE_B 32000.0
static uint64_t vt;         /* virtual clock, ns */
static size_t last_len;     /* registered since the clock was last read */
static uint64_t rng = 1;    /* xorshift64 state */
static int noise_pct;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* The stub, noting the length for the clock. */
static struct ibv_mr *cal_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int acc)
{
	last_len = len;
	return stub_reg_mr(pd, addr, len, acc);
}

#undef ibv_reg_mr
#define ibv_reg_mr cal_reg_mr

/* The virtual clock: advances by the cost of what was registered since the
 * last reading (100 ns if nothing). */
static uint64_t noisy_now(void)
{
	double t = 100;

	if (last_len) {
		t = TRUE_A * (double)(last_len / PG) + TRUE_B + (double)(rnd() % 2000);
		if ((int)(rnd() % 100) < noise_pct)
			t += (double)(rnd() % 2000000);
		last_len = 0;
	}
	vt += (uint64_t)t;
	return vt;
}

#include "../../../common/transport/vb_mr.c"

static struct ibv_pd pd;

/* Each mrs[i] covers iov[i]. */
static int covers(const struct iovec *iov, int n, struct ibv_mr **mrs)
{
	for (int i = 0; i < n; i++) {
		if (!iov[i].iov_len)
			continue;
		uintptr_t a = (uintptr_t)iov[i].iov_base, m = (uintptr_t)mrs[i]->addr;
		CHECK(m <= a && a + iov[i].iov_len <= m + mrs[i]->length);
	}
	return 0;
}

static void put_all(struct vb_rcache *rc, struct vb_rref *refs, int n)
{
	for (int i = 0; i < n; i++)
		vb_rcache_put(rc, &refs[i]);
}

/* Grouping by the cost model, sorting, allocation bounds. */
static int test_group(void)
{
	static char mem[64 * PG] __attribute__((aligned(PG)));
	struct net_stats st = { 0 };
	struct vb_rcache rc;
	struct iovec iov[8], al[8];
	int idx[8], grp[8];

	vb_rcache_init(&rc, 1 << 20, &st);
	rc.cost_a = 1000;  /* 1 us per page */
	rc.cost_b = 8520;  /* 8.5 us per call: holes under 8.5 pages merge */
	/* four 4 KiB rows, one page apart, given in reverse order */
	for (int i = 0; i < 4; i++) {
		iov[i] = (struct iovec){ mem + (size_t)(3 - i) * 2 * PG, PG };
		idx[i] = i;
	}
	CHECK(vb_ogr_group(&rc, iov, NULL, idx, 4, grp) == 1);
	CHECK(idx[0] == 3 && idx[1] == 2 && idx[2] == 1 && idx[3] == 0); /* sorted */
	/* merging loses when a registration is cheap against a hole page */
	rc.cost_b = 500;
	for (int i = 0; i < 4; i++)
		idx[i] = i;
	CHECK(vb_ogr_group(&rc, iov, NULL, idx, 4, grp) == 4);
	/* pieces sharing pages always merge, even with b = 0 */
	rc.cost_b = 0;
	iov[0] = (struct iovec){ mem + 10, 100 };
	iov[1] = (struct iovec){ mem + 200, 100 };
	iov[2] = (struct iovec){ mem + PG - 10, 20 }; /* straddles into page 1 */
	iov[3] = (struct iovec){ mem + PG + 50, 10 };
	for (int i = 0; i < 4; i++)
		idx[i] = i;
	CHECK(vb_ogr_group(&rc, iov, NULL, idx, 4, grp) == 1);
	/* a large hole splits, a small one not: 2 rows, 20 pages, 2 rows */
	rc.cost_b = 8520;
	iov[0] = (struct iovec){ mem, 100 };
	iov[1] = (struct iovec){ mem + 2 * PG, 100 };
	iov[2] = (struct iovec){ mem + 23 * PG, 100 };
	iov[3] = (struct iovec){ mem + 25 * PG, 100 };
	for (int i = 0; i < 4; i++)
		idx[i] = i;
	CHECK(vb_ogr_group(&rc, iov, NULL, idx, 4, grp) == 2);
	CHECK(grp[0] == 0 && grp[1] == 0 && grp[2] == 1 && grp[3] == 1);
	/* allocation bounds: 0,1 in one array, 2,3 in another right after it;
	 * never grouped across, even though the hole is small */
	iov[2] = (struct iovec){ mem + 4 * PG, 100 };
	iov[3] = (struct iovec){ mem + 5 * PG, 100 };
	al[0] = al[1] = (struct iovec){ mem, 4 * PG };
	al[2] = al[3] = (struct iovec){ mem + 4 * PG, 4 * PG };
	for (int i = 0; i < 4; i++)
		idx[i] = i;
	CHECK(vb_ogr_group(&rc, iov, NULL, idx, 4, grp) == 1);
	for (int i = 0; i < 4; i++)
		idx[i] = i;
	CHECK(vb_ogr_group(&rc, iov, al, idx, 4, grp) == 2);

	/* registration: the subarray case is one registration */
	struct ibv_mr *mrs[8];
	struct vb_rref refs[8];
	int nrefs = 0;
	rc.pd = &pd;
	for (int i = 0; i < 8; i++)
		iov[i] = (struct iovec){ mem + (size_t)(7 - i) * 2 * PG + 64, PG - 128 };
	CHECK(vb_rcache_get_list(&rc, iov, 8, NULL, 0, mrs, refs, &nrefs) == 0);
	CHECK(nrefs == 1 && st.reg_count == 1 && st.ogr_groups == 1);
	CHECK(covers(iov, 8, mrs) == 0);
	CHECK(st.pinned_bytes == 15 * PG);
	put_all(&rc, refs, nrefs);
	CHECK(st.pinned_bytes == 0 && st.dereg_count == 1);
	/* with allocation bounds: one registration per allocation */
	for (int i = 0; i < 8; i++)
		al[i] = i < 4 ? (struct iovec){ mem + 8 * PG, 8 * PG }
			      : (struct iovec){ mem, 8 * PG };
	nrefs = 0;
	CHECK(vb_rcache_get_list(&rc, iov, 8, al, 0, mrs, refs, &nrefs) == 0);
	CHECK(nrefs == 2 && st.reg_count == 3 && covers(iov, 8, mrs) == 0);
	put_all(&rc, refs, nrefs);
	/* individual mode: one registration per segment */
	rc.mode = VB_REG_INDIV;
	nrefs = 0;
	CHECK(vb_rcache_get_list(&rc, iov, 8, NULL, 0, mrs, refs, &nrefs) == 0);
	CHECK(nrefs == 8 && st.reg_count == 11 && st.ogr_groups == 3 &&
	      covers(iov, 8, mrs) == 0);
	put_all(&rc, refs, nrefs);
	rc.mode = VB_REG_OGR;
	/* declared memory keeps using the cache (and stays registered) */
	CHECK(vb_rcache_declare(&rc, mem, 8 * PG) == 0);
	nrefs = 0;
	CHECK(vb_rcache_get_list(&rc, iov, 8, NULL, 0, mrs, refs, &nrefs) == 0);
	CHECK(nrefs == 5 && covers(iov, 8, mrs) == 0); /* 4 cached + 1 group */
	CHECK(mrs[4] == mrs[7] && mrs[0] == mrs[3] && mrs[0] != mrs[4]);
	put_all(&rc, refs, nrefs);
	CHECK(st.pinned_bytes == 8 * PG); /* only the declared region */
	vb_rcache_fini(&rc);
	CHECK(st.pinned_bytes == 0 && stub_regs == stub_deregs);
	return 0;
}

/* A real unmapped hole: the optimistic registration fails, the fallback
 * registers the mapped parts. */
static int test_hole(void)
{
	struct net_stats st = { 0 };
	struct vb_rcache rc;
	struct iovec iov[12];
	struct ibv_mr *mrs[12];
	struct vb_rref refs[12];
	int nrefs = 0;
	char *p;

	vb_rcache_init(&rc, 1 << 20, &st);
	rc.pd = &pd;
	rc.cost_a = 1000;
	rc.cost_b = 8520;
	/* 3 pages, the middle one unmapped; one segment on each side: few
	 * segments, so they are registered one by one */
	p = mmap(NULL, 3 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	CHECK(munmap(p + PG, PG) == 0);
	iov[0] = (struct iovec){ p + 2 * PG + 8, 100 };
	iov[1] = (struct iovec){ p + 100, 200 };
	int f0 = stub_fails;
	CHECK(vb_rcache_get_list(&rc, iov, 2, NULL, 0, mrs, refs, &nrefs) == 0);
	CHECK(stub_fails == f0 + 1 && st.ogr_fallbacks == 1);
	CHECK(nrefs == 2 && st.reg_count == 2 && covers(iov, 2, mrs) == 0);
	CHECK(mrs[0]->addr == iov[0].iov_base && mrs[0]->length == 100);
	put_all(&rc, refs, nrefs);
	munmap(p, PG);
	munmap(p + 2 * PG, PG);

	/* 12 pages, pages 5 and 6 unmapped, 10 segments: the maps are
	 * queried and each mapped part gets one registration */
	p = mmap(NULL, 12 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	CHECK(munmap(p + 5 * PG, 2 * PG) == 0);
	int n = 0;
	for (int pg = 11; pg >= 0; pg--)
		if (pg != 5 && pg != 6)
			iov[n++] = (struct iovec){ p + (size_t)pg * PG + 16, 1000 };
	f0 = stub_fails;
	nrefs = 0;
	uint64_t r0 = st.reg_count;
	CHECK(vb_rcache_get_list(&rc, iov, n, NULL, IBV_ACCESS_LOCAL_WRITE, mrs, refs,
				 &nrefs) == 0);
	CHECK(stub_fails == f0 + 1 && st.ogr_fallbacks == 2);
	CHECK(nrefs == 2 && st.reg_count == r0 + 2 && covers(iov, n, mrs) == 0);
	CHECK(mrs[0] == mrs[4] && mrs[5] == mrs[9] && mrs[0] != mrs[5]);
	put_all(&rc, refs, nrefs);
	/* with allocation bounds nothing fails: grouped within each part */
	struct iovec al[12];
	for (int i = 0; i < n; i++)
		al[i] = i < 5 ? (struct iovec){ p + 7 * PG, 5 * PG }
			      : (struct iovec){ p, 5 * PG };
	f0 = stub_fails;
	nrefs = 0;
	CHECK(vb_rcache_get_list(&rc, iov, n, al, 0, mrs, refs, &nrefs) == 0);
	CHECK(stub_fails == f0 && nrefs == 2 && covers(iov, n, mrs) == 0);
	put_all(&rc, refs, nrefs);
	/* a segment that is itself unmapped is an error, and what was
	 * registered before it is still handed back for release */
	iov[n] = (struct iovec){ p + 5 * PG, 10 };
	nrefs = 0;
	CHECK(vb_rcache_get_list(&rc, iov, n + 1, NULL, 0, mrs, refs, &nrefs) == -EFAULT);
	put_all(&rc, refs, nrefs);
	munmap(p, 5 * PG);
	munmap(p + 7 * PG, 5 * PG);
	vb_rcache_fini(&rc);
	CHECK(st.pinned_bytes == 0 && stub_regs == stub_deregs);
	return 0;
}

/* Whether x is within pct percent of want. */
static int near(double x, double want, double pct)
{
	return x >= want * (1 - pct / 100) && x <= want * (1 + pct / 100);
}

/* n samples of the exact line a * pages + b over the calibration sizes,
 * every sample of size index bad (or none: -1) disturbed by extra ns. */
static int line_samples(struct vb_cal_sample *s, double a, double b, int bad, double extra)
{
	int n = 0;

	for (int r = 0; r < VB_CAL_ROUNDS; r++)
		for (int i = 0; i < VB_CAL_NSIZES; i++, n++) {
			s[n].pages = vb_cal_pages[i];
			s[n].ns = a * vb_cal_pages[i] + b + (i == bad ? extra : 0) + r * 10;
		}
	return n;
}

/* The pure fit: exact, robust to a disturbed size, bounded, rejecting. */
static int test_fit(void)
{
	struct vb_cal_sample s[VB_CAL_ROUNDS * VB_CAL_NSIZES + 4];
	double a, b;
	int n;

	/* exact samples (each round 10 ns slower: the minimum is the first) */
	n = line_samples(s, 240, 32000, -1, 0);
	CHECK(vb_ogr_fit(s, n, &a, &b) == 0 && near(a, 240, 0.1) && near(b, 32000, 0.1));
	/* every sample of one size disturbed: the others outvote it */
	for (int bad = 0; bad < VB_CAL_NSIZES; bad++) {
		n = line_samples(s, 240, 32000, bad, 500000);
		CHECK(vb_ogr_fit(s, n, &a, &b) == 0 && near(a, 240, 5) && near(b, 32000, 5));
	}
	/* failed, zero, infinite and NaN samples are ignored */
	n = line_samples(s, 240, 32000, -1, 0);
	s[n++] = (struct vb_cal_sample){ 4, -1 };
	s[n++] = (struct vb_cal_sample){ 32, 0 };
	s[n++] = (struct vb_cal_sample){ 128, INFINITY };
	s[n++] = (struct vb_cal_sample){ 512, NAN };
	CHECK(vb_ogr_fit(s, n, &a, &b) == 0 && near(a, 240, 0.1) && near(b, 32000, 0.1));
	/* clamped to the sane limits */
	n = line_samples(s, 50000, 5e6, -1, 0);
	CHECK(vb_ogr_fit(s, n, &a, &b) == 0 && a == VB_OGR_A_MAX && b == VB_OGR_B_MAX);
	n = line_samples(s, 1, 200, -1, 0);
	CHECK(vb_ogr_fit(s, n, &a, &b) == 0 && a == VB_OGR_A_MIN && b == VB_OGR_B_MIN);
	/* implausible: the defaults and -EINVAL */
	n = line_samples(s, -100, 100000, -1, 0); /* more pages, faster */
	CHECK(vb_ogr_fit(s, n, &a, &b) == -EINVAL && a == VB_OGR_DEF_A && b == VB_OGR_DEF_B);
	n = line_samples(s, 1000, 500, -1, 0); /* a call cheaper than a page */
	CHECK(vb_ogr_fit(s, n, &a, &b) == -EINVAL && a == VB_OGR_DEF_A && b == VB_OGR_DEF_B);
	for (int i = 0; i < n; i++) /* one size left */
		if (s[i].pages != 4)
			s[i].ns = -1;
	CHECK(vb_ogr_fit(s, n, &a, &b) == -EINVAL && a == VB_OGR_DEF_A && b == VB_OGR_DEF_B);
	CHECK(vb_ogr_fit(s, 0, &a, &b) == -EINVAL);
	return 0;
}

/* The memory list of process 0's request to iod 0 in the listio
 * benchmark's subarray case: its block's rows are 4 KiB, 8 KiB apart, 16
 * rows per 64 KiB stripe unit, and iod 0 gets every 4th unit of 4 MiB:
 * 256 rows, 1-page holes inside a unit, 97-page holes between units. */
static int subarray_iod_req(char *base, struct iovec *iov)
{
	int n = 0;

	for (int u = 0; u < 64; u += 4)
		for (int r = 0; r < 16; r++)
			iov[n++] = (struct iovec){ base + (size_t)(u * 16 + r) * 2 * PG, PG };
	return n;
}

/* Calibration on the noisy virtual machine, 200 times: every fit is near
 * the true cost and inside the limits, and with it the subarray request
 * is one group and one registration, as OGR intends (the old two-point
 * fit of best-of-3 timings split it into 16 or 256 in some runs). */
static int test_calibrate_noisy(void)
{
	size_t len = 8u << 20;
	char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct iovec iov[256];
	struct ibv_mr *mrs[256];
	struct vb_rref refs[256];
	int idx[256], grp[256], n;
	double amin = 1e9, amax = 0, bmin = 1e9, bmax = 0;

	CHECK(mem != MAP_FAILED);
	n = subarray_iod_req(mem, iov);
	noise_pct = 40;
	for (int run = 0; run < 200; run++) {
		struct net_stats st = { 0 };
		struct vb_rcache rc;
		int nrefs = 0;

		vb_rcache_init(&rc, 1 << 20, &st);
		rc.pd = &pd;
		rc.now = noisy_now;
		vb_rcache_calibrate(&rc);
		if (!near(rc.cost_a, TRUE_A, 10) || !near(rc.cost_b, TRUE_B, 10))
			fprintf(stderr, "run %d: a %.0f b %.0f\n", run, rc.cost_a, rc.cost_b);
		CHECK(near(rc.cost_a, TRUE_A, 10) && near(rc.cost_b, TRUE_B, 10));
		CHECK(rc.cost_a >= VB_OGR_A_MIN && rc.cost_a <= VB_OGR_A_MAX);
		CHECK(rc.cost_b >= VB_OGR_B_MIN && rc.cost_b <= VB_OGR_B_MAX);
		CHECK(st.ogr_cost_a_ns == (uint64_t)(rc.cost_a + 0.5) &&
		      st.ogr_cost_b_ns == (uint64_t)(rc.cost_b + 0.5) && st.ogr_cal_ns > 0);
		amin = rc.cost_a < amin ? rc.cost_a : amin;
		amax = rc.cost_a > amax ? rc.cost_a : amax;
		bmin = rc.cost_b < bmin ? rc.cost_b : bmin;
		bmax = rc.cost_b > bmax ? rc.cost_b : bmax;
		for (int i = 0; i < n; i++)
			idx[i] = i;
		CHECK(vb_ogr_group(&rc, iov, NULL, idx, n, grp) == 1);
		uint64_t r0 = st.reg_count;
		CHECK(vb_rcache_get_list(&rc, iov, n, NULL, 0, mrs, refs, &nrefs) == 0);
		CHECK(nrefs == 1 && st.reg_count == r0 + 1 && covers(iov, n, mrs) == 0);
		put_all(&rc, refs, nrefs);
		vb_rcache_fini(&rc);
	}
	printf("test_vb_ogr: 200 noisy calibrations: a %.0f..%.0f ns/page, "
	       "b %.0f..%.0f ns/call\n", amin, amax, bmin, bmax);
	/* the seed's default model would split the request at every unit */
	struct vb_rcache rc;
	struct net_stats st = { 0 };
	vb_rcache_init(&rc, 1 << 20, &st);
	for (int i = 0; i < n; i++)
		idx[i] = i;
	CHECK(vb_ogr_group(&rc, iov, NULL, idx, n, grp) == 16);
	munmap(mem, len);
	return 0;
}

/* Calibration from the environment; bad values are refused (calibrated
 * instead); no device keeps the defaults. */
static int test_calibrate(void)
{
	struct net_stats st = { 0 };
	struct vb_rcache rc;

	vb_rcache_init(&rc, 1 << 20, &st);
	setenv("RPFS_OGR_COST", "250,4000", 1);
	vb_rcache_calibrate(&rc);
	CHECK(rc.cost_a == 250 && rc.cost_b == 4000);
	CHECK(st.ogr_cost_a_ns == 250 && st.ogr_cost_b_ns == 4000 && st.ogr_cal_ns == 0);
	const char *bad[] = { "250,4000x", "-1,4000", "250", "250;4000", "nan,4000", "" };
	noise_pct = 0;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("RPFS_OGR_COST", bad[i], 1);
		vb_rcache_init(&rc, 1 << 20, &st);
		rc.pd = &pd;
		rc.now = noisy_now;
		vb_rcache_calibrate(&rc);
		CHECK(near(rc.cost_a, TRUE_A, 10) && near(rc.cost_b, TRUE_B, 10));
	}
	unsetenv("RPFS_OGR_COST");
	vb_rcache_init(&rc, 1 << 20, &st);
	vb_rcache_calibrate(&rc); /* no pd */
	CHECK(rc.cost_a == VB_OGR_DEF_A && rc.cost_b == VB_OGR_DEF_B);
	CHECK(st.ogr_cost_a_ns == 1000 && st.ogr_cost_b_ns == 8520);
	return 0;
}

int main(void)
{
	int bad;

	stub_check_mapped = 1;
	log_init("test_vb_ogr", LOG_NOTICE); /* not a line per calibration */
	bad = test_group() | test_hole() | test_fit() | test_calibrate_noisy() |
	      test_calibrate();

	if (!bad)
		printf("test_vb_ogr: ok\n");
	return bad;
}
