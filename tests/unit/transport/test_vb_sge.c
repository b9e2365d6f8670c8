/*
 * test_vb_sge.c - the verbs server's RDMA work request building without
 * RDMA: vb_server.c is included (ibv_reg_mr stubbed) and vb_build_rdma is
 * driven with fake connections. Covers gather/scatter (local pieces
 * gathered up to max_sge per WR, split beyond; one WR per client segment;
 * one signaled WR per transfer), multiple message mode (one signaled WR
 * per piece) and that a multiple-message op completes only with its last
 * completion.
 */
#include "vb_stub.h"

#include "../../../common/transport/vb_mr.c"
#include "../../../common/transport/vb_wire.c"
#include "../../../common/transport/vb_server.c"

static char local[256 * 1024];
static struct ibv_pd pd;
static int cb_calls, cb_rc;

static void xfer_cb(struct net_sreq *r, int rc, void *arg)
{
	(void)r;
	(void)arg;
	cb_calls++;
	cb_rc = rc;
}

/* Encode n remote segments of len bytes each, 8 KiB apart. */
static void segs(uint8_t *out, int n, uint32_t len)
{
	for (int i = 0; i < n; i++) {
		struct vb_seg sg = { 0x100000 + (uint64_t)i * 8192, len, 77 };
		vb_seg_encode(out + (size_t)i * VB_SEG_LEN, &sg);
	}
}

/* Signaled WRs of an op, and that each WR's local bytes fit its segment. */
static int nsignaled(const struct vb_op *op)
{
	int n = 0;

	for (int i = 0; i < op->nwr; i++)
		n += (op->wr[i].send_flags & IBV_SEND_SIGNALED) != 0;
	return n;
}

static int run(struct vb_server *s, int mode)
{
	struct vb_sconn c = { .srv = s };
	struct vb_sreq q = { 0 };
	uint8_t sg[64 * VB_SEG_LEN];
	struct iovec iov[64];
	struct vb_op *op;

	s->list_mode = mode;
	/* server side noncontiguous: 40 local pieces of 1 KiB into one 40 KiB
	 * client segment; max_sge 32 */
	segs(sg, 1, 40 * 1024);
	for (int i = 0; i < 40; i++)
		iov[i] = (struct iovec){ local + (size_t)i * 2048, 1024 };
	op = vb_op_new(&c, &q, VB_OP_PUSH, xfer_cb, NULL);
	CHECK(vb_build_rdma(&c, op, sg, 1, 0, iov, 40, 0) == 0);
	if (mode == 0) {
		CHECK(op->nwr == 2 && op->wr[0].num_sge == 32 && op->wr[1].num_sge == 8);
		CHECK(op->pending == 1 && nsignaled(op) == 1);
		CHECK(op->wr[0].next == &op->wr[1] && op->wr[1].wr.rdma.remote_addr ==
		      0x100000 + 32 * 1024);
	} else {
		CHECK(op->nwr == 40 && op->pending == 40 && nsignaled(op) == 40);
		for (int i = 0; i < 40; i++)
			CHECK(op->wr[i].num_sge == 1 &&
			      op->wr[i].wr.rdma.remote_addr == 0x100000 + (uint64_t)i * 1024);
	}
	vb_op_free(op);

	/* client side noncontiguous: 10 client segments of 4 KiB from one
	 * local 40 KiB buffer, starting 1 KiB into the remote bytes */
	segs(sg, 10, 4096);
	iov[0] = (struct iovec){ local, 39 * 1024 };
	op = vb_op_new(&c, &q, VB_OP_PULL, xfer_cb, NULL);
	CHECK(vb_build_rdma(&c, op, sg, 10, 1024, iov, 1, 1) == 0);
	CHECK(op->nwr == 10 && op->wr[0].wr.rdma.remote_addr == 0x100000 + 1024);
	CHECK(op->wr[0].sg_list[0].length == 3072 && op->wr[9].sg_list[0].length == 4096);
	CHECK(op->wr[0].opcode == IBV_WR_RDMA_READ);
	CHECK(nsignaled(op) == (mode ? 10 : 1));
	/* beyond the segments */
	struct vb_op *op2 = vb_op_new(&c, &q, VB_OP_PULL, xfer_cb, NULL);
	iov[0] = (struct iovec){ local, 40 * 1024 };
	CHECK(vb_build_rdma(&c, op2, sg, 10, 1024, iov, 1, 1) == -EINVAL);
	vb_op_free(op2);

	/* completions: the op finishes with its last signaled WR only */
	c.inflight = 1;
	c.sq_free = (int)VB_SQ_DEPTH - op->nwr;
	cb_calls = 0;
	int n = op->pending;
	for (int i = 0; i < n; i++) {
		struct ibv_wc wc = { .wr_id = (uintptr_t)&op->tag, .status = IBV_WC_SUCCESS };
		CHECK(cb_calls == 0);
		vb_on_send(s, &wc); /* the last one frees op */
	}
	CHECK(cb_calls == 1 && cb_rc == 0 && c.inflight == 0 && c.sq_free == (int)VB_SQ_DEPTH);
	return 0;
}

int main(void)
{
	struct vb_server s = { 0 };
	int bad;

	s.max_sge = s.max_sge_rd = 32;
	s.pd = &pd;
	if (vb_zones_add(&s.zones, &pd, local, sizeof(local), &s.base.st)) {
		fprintf(stderr, "zones_add failed\n");
		return 1;
	}
	bad = run(&s, 0) | run(&s, 1);
	CHECK(s.base.st.sge_max == 32);
	vb_zones_fini(&s.zones, &s.base.st);
	if (!bad)
		printf("test_vb_sge: ok\n");
	return bad;
}
