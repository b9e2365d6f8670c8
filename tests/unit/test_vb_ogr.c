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
 */
#include <unistd.h>

#include "vb_stub.h"

#include "../../common/vb_mr.c"

#define PG 4096

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

/* Calibration from the environment. */
static int test_calibrate(void)
{
	struct net_stats st = { 0 };
	struct vb_rcache rc;

	vb_rcache_init(&rc, 1 << 20, &st);
	setenv("RPFS_OGR_COST", "250,4000", 1);
	vb_rcache_calibrate(&rc);
	CHECK(rc.cost_a == 250 && rc.cost_b == 4000);
	unsetenv("RPFS_OGR_COST");
	vb_rcache_init(&rc, 1 << 20, &st);
	rc.pd = &pd;
	vb_rcache_calibrate(&rc); /* stubbed verbs: some positive numbers */
	CHECK(rc.cost_a >= 1 && rc.cost_b >= rc.cost_a);
	return 0;
}

int main(void)
{
	int bad;

	stub_check_mapped = 1;
	bad = test_group() | test_hole() | test_calibrate();

	if (!bad)
		printf("test_vb_ogr: ok\n");
	return bad;
}
