/*
 * fuzz_vbintake.c - libFuzzer target for the verbs server's intake:
 * vb_parse_req (a request message as it lies in a receive buffer or a fast
 * slot) and the vb_wire decoders of the connect data and headers.
 *
 * vb_server.c is included with ibv_reg_mr stubbed (tests/unit/transport/vb_stub.h),
 * as the verbs unit tests do, so no RDMA device is needed.
 * Input: one selector byte, then the message.
 *  - 0: a request message in a receive buffer; 1: in a fast slot (its
 *    data after it). On success every part vb_parse_req points at must lie
 *    inside the message (or, for fast data, right after it), the segments
 *    must add up to the header's byte counts, and an inline read buffer
 *    must be no larger than inline_max.
 *  - 2..4: vb_cpriv_decode, vb_spriv_decode (and vb_grant_decode, the
 *    client's intake of a grant), vb_mhdr_decode; a decoded value must
 *    encode and decode back to itself.
 *  - high bit set: the keyed intake (vb_seal.h). The message as it came
 *    must be refused by vb_seal_open (it carries no valid tag); sealed by
 *    the client's direction it must open to itself, and is then parsed as
 *    in 0 or 1 (the selector's low bit).
 * The selectors above are the input's first byte modulo 5.
 * Any violation aborts; memory errors are caught by ASan/UBSan.
 */
#include "vb_stub.h"

#include "../../common/transport/vb_mr.c"
#include "../../common/transport/vb_wire.c"
#include "../../common/transport/vb_server.c"
#include "../../common/transport/vb_seal.c"

#define FUZZ_DATA_AFTER 4096 /* bytes a fast slot holds after the message */

static struct vb_server srv;
static struct vb_sconn conn;
static struct vb_sreq sreq;

/* Abort unless [p, p + n) lies inside [lo, hi). */
static void inside(const uint8_t *p, uint64_t n, const uint8_t *lo,
		   const uint8_t *hi)
{
	if (p < lo || p > hi || n > (uint64_t)(hi - p))
		abort();
}

/* Sum of n segments' lengths at segs. */
static uint64_t seg_sum(const uint8_t *segs, int n)
{
	struct vb_seg sg;
	uint64_t sum = 0;

	for (int i = 0; i < n; i++) {
		vb_seg_decode(segs + (size_t)i * VB_SEG_LEN, &sg);
		sum += sg.len;
	}
	return sum;
}

/* Parse msg as a request; check what a success claims. */
static void fuzz_req(const uint8_t *msg, size_t len, int fast)
{
	static uint8_t after[FUZZ_DATA_AFTER];
	const uint8_t *end = msg + len;
	struct vb_sreq *q = &sreq;
	const struct vb_mhdr *m;

	free(q->rdinl);
	memset(q, 0, sizeof(*q));
	if (len > UINT32_MAX ||
	    vb_parse_req(&conn, q, msg, (uint32_t)len, fast ? after : NULL))
		return;
	m = &q->m;
	inside(q->segs, (uint64_t)(m->nwr + m->nrd) * VB_SEG_LEN, msg, end);
	inside(q->r.body, q->r.body_len, msg, end);
	if (m->flags & VB_F_WR_INLINE)
		inside(q->inl, m->inl, msg, end);
	if (m->flags & VB_F_WR_FAST) {
		if (q->inl != after)
			abort();
	}
	if ((m->flags & VB_F_WR_RDMA) && seg_sum(q->segs, m->nwr) != q->r.hdr.bulk_len)
		abort();
	if ((m->flags & VB_F_RD_RDMA) &&
	    seg_sum(q->segs + (size_t)m->nwr * VB_SEG_LEN, m->nrd) != q->r.hdr.aux)
		abort();
	if ((m->flags & VB_F_RD_INLINE) && q->r.hdr.aux > srv.base.opts.inline_max)
		abort();
	if (q->r.conn != &conn.base)
		abort();
}

/* Connect data, accept data and the vb header: decode, encode, decode. */
static void fuzz_wire(int sel, const uint8_t *b, size_t len)
{
	uint8_t out[VB_SPRIV_LEN];

	if (sel == 2) {
		struct vb_cpriv p, p2;

		memset(&p, 0, sizeof(p)); /* padding too: compared below */
		memset(&p2, 0, sizeof(p2));
		if (vb_cpriv_decode(b, len, &p))
			return;
		vb_cpriv_encode(out, &p);
		if (vb_cpriv_decode(out, VB_CPRIV_LEN, &p2) || memcmp(&p, &p2, sizeof(p)))
			abort();
	} else if (sel == 3) {
		struct vb_spriv p, p2;
		struct vb_grant g, g2;

		memset(&g, 0, sizeof(g));
		memset(&g2, 0, sizeof(g2));
		if (!vb_grant_decode(b, len, &g)) {
			vb_grant_encode(out, &g);
			if (vb_grant_decode(out, VB_GRANT_LEN, &g2) ||
			    memcmp(&g, &g2, sizeof(g)))
				abort();
		}
		memset(&p, 0, sizeof(p));
		memset(&p2, 0, sizeof(p2));
		if (vb_spriv_decode(b, len, &p))
			return;
		vb_spriv_encode(out, &p);
		if (vb_spriv_decode(out, VB_SPRIV_LEN, &p2) || memcmp(&p, &p2, sizeof(p)))
			abort();
	} else if (len >= VB_MHDR_LEN) {
		struct vb_mhdr m, m2;

		memset(&m, 0, sizeof(m));
		memset(&m2, 0, sizeof(m2));
		if (vb_mhdr_decode(b, &m))
			return;
		vb_mhdr_encode(out, &m);
		if (vb_mhdr_decode(out, &m2) || memcmp(&m, &m2, sizeof(m)) ||
		    memcmp(out, b, VB_MHDR_LEN))
			abort();
	}
}

/* The keyed intake: a message as it came is refused; sealed, it opens to
 * itself and is parsed. */
static void fuzz_sealed(const uint8_t *b, size_t len, int fast)
{
	static const uint8_t key[NET_KEY_LEN] = { 9 }, cn[32] = { 1 }, sn[32] = { 2 };
	struct net_seal tx, rx;
	uint32_t plen, sl;
	uint8_t *m;

	if (len > VB_MSG_SIZE)
		return;
	net_seal_init(&tx, key, NET_AUTH_ROLE_CLIENT, NET_SEAL_MAC, cn, sn);
	net_seal_init(&rx, key, NET_AUTH_ROLE_CLIENT, NET_SEAL_MAC, cn, sn);
	if (vb_seal_open(&rx, b, (uint32_t)len, NULL, VB_SEAL_MSG, 0, &plen) == 0 ||
	    rx.seq != 0)
		abort();
	m = malloc(len + VB_SEAL_TRAILER);
	if (!m)
		return;
	memcpy(m, b, len);
	sl = vb_seal_put(&tx, m, (uint32_t)len, NULL, VB_SEAL_MSG, 0);
	if (sl != len + VB_SEAL_TRAILER ||
	    vb_seal_open(&rx, m, sl, NULL, VB_SEAL_MSG, 0, &plen) || plen != len ||
	    memcmp(m, b, len) || rx.seq != 1)
		abort();
	fuzz_req(m, plen, fast);
	free(m);
}

/* A server and a connection, as vb_parse_req sees them. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	net_opts_default(&srv.base.opts);
	conn.srv = &srv;
	conn.base.srv = &srv.base;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	if (size < 1)
		return 0;
	/* an exact-size copy, so a read past the message is an ASan report */
	copy = malloc(size - 1 ? size - 1 : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size - 1);
	if (data[0] & 0x80)
		fuzz_sealed(copy, size - 1, data[0] & 1);
	else if (data[0] % 5 < 2)
		fuzz_req(copy, size - 1, data[0] % 5 == 1);
	else
		fuzz_wire(data[0] % 5, copy, size - 1);
	free(copy);
	return 0;
}
