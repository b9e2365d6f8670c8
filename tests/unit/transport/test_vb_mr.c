/*
 * test_vb_mr.c - the verbs backend's registration logic and credit
 * accounting without RDMA: vb_mr.c and vb_wire.c are included with the
 * ibv_* calls they make stubbed (as SPDK tests do). Covers the pin-down
 * cache (check_if_registered, per-call misses, LRU eviction under the
 * bound, busy entries never evicted, the staleness rule: only declared
 * regions are cached and undeclaring drops the registration), zone lookup
 * by address, credit take/give clamping and the wire encodings.
 */
#include "vb_stub.h"

#include "../../../common/transport/vb_mr.c"
#include "../../../common/transport/vb_wire.c"

static int test_rcache(void)
{
	static char mem[1 << 20];
	struct net_stats st = { 0 };
	struct vb_rcache rc;
	struct vb_rref r1, r2, r3;
	struct ibv_pd pd;

	vb_rcache_init(&rc, 256 * 1024, &st);
	CHECK(vb_rcache_get(&rc, mem, 10, 0, &r1) == -ENODEV); /* no pd yet */
	rc.pd = &pd;
	/* undeclared memory: registered per call, never cached */
	CHECK(vb_rcache_get(&rc, mem, 4096, 0, &r1) == 0 && r1.ent == NULL);
	CHECK(st.reg_cache_misses == 1 && st.reg_count == 1 && st.pinned_bytes == 4096);
	CHECK(vb_rcache_check(&rc, mem, 4096) == NULL);
	vb_rcache_put(&rc, &r1);
	CHECK(st.dereg_count == 1 && st.pinned_bytes == 0);
	/* declare three 128 KiB regions; bound 256 KiB */
	CHECK(vb_rcache_declare(&rc, mem, 128 * 1024) == 0);
	CHECK(vb_rcache_declare(&rc, mem + 256 * 1024, 128 * 1024) == 0);
	CHECK(vb_rcache_declare(&rc, mem + 128 * 1024, 128 * 1024) == 0);
	CHECK(vb_rcache_declare(&rc, mem + 100, 10) == -EINVAL); /* overlap */
	CHECK(vb_rcache_check(&rc, mem, 10) == NULL); /* declared, not registered */
	CHECK(vb_rcache_get(&rc, mem + 10, 100, 0, &r1) == 0 && r1.ent);
	CHECK(st.reg_cache_misses == 2 && vb_rcache_check(&rc, mem, 128 * 1024) == r1.mr);
	CHECK(vb_rcache_check(&rc, mem + 1, 128 * 1024) == NULL); /* runs past */
	vb_rcache_put(&rc, &r1);
	CHECK(vb_rcache_get(&rc, mem + 5, 5, 0, &r1) == 0 && st.reg_cache_hits == 1);
	vb_rcache_put(&rc, &r1);
	CHECK(vb_rcache_get(&rc, mem + 128 * 1024, 64, 0, &r2) == 0);
	CHECK(rc.pinned == 256 * 1024 && st.reg_cache_evictions == 0);
	vb_rcache_put(&rc, &r2);
	/* touch region 0 so region 1 is the LRU one, then fill region 2 */
	CHECK(vb_rcache_check(&rc, mem, 1) != NULL);
	CHECK(vb_rcache_get(&rc, mem + 256 * 1024, 64, 0, &r3) == 0 && r3.ent);
	CHECK(st.reg_cache_evictions == 1 && rc.pinned == 256 * 1024);
	CHECK(vb_rcache_check(&rc, mem + 128 * 1024, 1) == NULL);
	CHECK(vb_rcache_check(&rc, mem, 1) != NULL);
	/* busy entries are never evicted: with 0 and 2 held, 1 goes per call */
	CHECK(vb_rcache_get(&rc, mem, 1, 0, &r1) == 0 && r1.ent);
	CHECK(vb_rcache_get(&rc, mem + 128 * 1024, 1, 0, &r2) == 0 && r2.ent == NULL);
	CHECK(rc.pinned == 256 * 1024);
	CHECK(vb_rcache_undeclare(&rc, mem) == -EBUSY);
	vb_rcache_put(&rc, &r2);
	vb_rcache_put(&rc, &r1);
	vb_rcache_put(&rc, &r3);
	/* staleness: undeclaring drops the registration at once */
	uint64_t d = st.dereg_count;
	CHECK(vb_rcache_undeclare(&rc, mem) == 0 && st.dereg_count == d + 1);
	CHECK(vb_rcache_check(&rc, mem, 1) == NULL && rc.pinned == 128 * 1024);
	CHECK(vb_rcache_get(&rc, mem, 1, 0, &r1) == 0 && r1.ent == NULL);
	vb_rcache_put(&rc, &r1);
	CHECK(vb_rcache_undeclare(&rc, mem) == -ENOENT);
	vb_rcache_fini(&rc);
	CHECK(st.pinned_bytes == 0 && stub_regs == stub_deregs);
	return 0;
}

static int test_zones(void)
{
	static char z[6][4096];
	struct net_stats st = { 0 };
	struct vb_zones zs = { 0 };
	struct ibv_pd pd;
	int order[6] = { 3, 0, 5, 1, 4, 2 };

	for (int i = 0; i < 6; i++)
		CHECK(vb_zones_add(&zs, &pd, z[order[i]], 1024, &st) == 0);
	CHECK(vb_zones_add(&zs, &pd, z[0] + 512, 1024, &st) == -EINVAL);
	for (int i = 0; i < 6; i++) {
		struct ibv_mr *mr = vb_zones_find(&zs, z[i] + 100, 900);
		CHECK(mr && mr->addr == z[i]);
		CHECK(vb_zones_find(&zs, z[i] + 100, 925) == NULL);
		CHECK(vb_zones_find(&zs, z[i] + 1024, 1) == NULL);
	}
	CHECK(vb_zones_find(&zs, (void *)((uintptr_t)z - 1), 1) == NULL);
	CHECK(st.reg_bytes == 6 * 1024);
	vb_zones_fini(&zs, &st);
	CHECK(st.pinned_bytes == 0);
	return 0;
}

static int test_credits_wire(void)
{
	struct vb_credits c = { .avail = 4, .max = 4 };
	uint8_t b[VB_SPRIV_LEN];

	for (int i = 0; i < 4; i++)
		CHECK(vb_credit_take(&c) == 0);
	CHECK(vb_credit_take(&c) == -EAGAIN);
	CHECK(vb_credit_give(&c, 1) == 1 && c.avail == 1);
	CHECK(vb_credit_give(&c, 10) == 3 && c.avail == 4); /* clamped at max */
	CHECK(vb_credit_give(&c, -1) == 0 && c.avail == 4);

	struct vb_cpriv cp = { .credits = 32, .has_nonce = 1, .land_addr = 0x1122334455667788ull,
			       .land_rkey = 0xabcdef01u }, cq;
	cp.cn[31] = 9;
	vb_cpriv_encode(b, &cp);
	CHECK(b[8] == 0x88 && b[15] == 0x11); /* little endian */
	CHECK(vb_cpriv_decode(b, VB_CPRIV_LEN, &cq) == 0 && cq.credits == 32 &&
	      cq.land_addr == cp.land_addr && cq.land_rkey == cp.land_rkey && cq.cn[31] == 9);
	CHECK(vb_cpriv_decode(b, VB_CPRIV_LEN - 1, &cq) == -EPROTO);
	b[0] ^= 1;
	CHECK(vb_cpriv_decode(b, VB_CPRIV_LEN, &cq) == -EPROTO);
	struct vb_spriv sp = { .credits = 8, .nslots = 4, .slot_size = 73728, .fast_addr = 42,
			       .fast_rkey = 7, .has_mac = 1 }, sq;
	vb_spriv_encode(b, &sp);
	CHECK(vb_spriv_decode(b, VB_SPRIV_LEN, &sq) == 0 && sq.nslots == 4 &&
	      sq.slot_size == 73728 && sq.fast_addr == 42 && sq.has_mac == 1);
	struct vb_mhdr m = { .kind = VB_K_REQ, .flags = VB_F_WR_FAST, .nwr = 3, .nrd = 1024,
			     .fslot = 2, .inl = 65536 }, mm;
	vb_mhdr_encode(b, &m);
	CHECK(vb_mhdr_decode(b, &mm) == 0 && mm.nrd == 1024 && mm.inl == 65536 && mm.fslot == 2);
	b[0] = 9;
	CHECK(vb_mhdr_decode(b, &mm) == -EPROTO);
	unsigned slot;
	uint32_t len;
	vb_imm_decode(vb_imm_encode(VB_IMM_BIG, 196000), &slot, &len);
	CHECK(slot == VB_IMM_BIG && len == 196000);
	return 0;
}

int main(void)
{
	int bad = test_rcache() | test_zones() | test_credits_wire();

	if (!bad)
		printf("test_vb_mr: ok\n");
	return bad;
}
