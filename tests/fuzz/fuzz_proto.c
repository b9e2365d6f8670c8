/*
 * fuzz_proto.c - libFuzzer target for every decoder in common/proto/proto.c.
 *
 * Input: one selector byte, then a 48-byte frame header, then the body.
 * The header is decoded (and, when valid, re-encoded and compared); its op,
 * bulk_len and aux fields are then used raw, valid or not, to drive the
 * decoder the selector picks. Every successful body decode is re-encoded
 * and must reproduce the input bytes exactly (the encoding is canonical),
 * which also checks that the encoders accept whatever the decoders accept.
 * Any mismatch aborts; memory errors are caught by ASan/UBSan.
 * Seeds: tests/fuzz/corpus/ (written by `test_proto --write-corpus DIR`).
 */
#include "proto.h"
#include "stripe.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint8_t out[PROTO_MAX_BODY + 1024];

/* Abort (a fuzzer finding) unless w holds exactly len bytes equal to in. */
static void same(const struct wbuf *w, int rc, const uint8_t *in, size_t len)
{
	if (rc != 0 || w->err || w->len != len || (len && memcmp(out, in, len)))
		abort();
}

/* Metadata request: decode, re-encode. */
static void fuzz_mreq(uint16_t op, const uint8_t *b, size_t len)
{
	struct proto_mreq m;
	struct wbuf w;
	const char *why;

	if (proto_mreq_decode(b, len, op, &m, &why))
		return;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_mreq_encode(&w, op, &m), b, len);
}

/* Metadata reply: decode, walk the dirents, re-encode. */
static void fuzz_mrep(uint16_t op, const uint8_t *b, size_t len)
{
	struct proto_mrep m;
	struct proto_dirent d;
	struct wbuf w;
	struct rbuf r;
	const char *why;
	uint32_t n = 0;
	int rc;

	if (proto_mrep_decode(b, len, op, &m, &why))
		return;
	rb_init(&r, m.dirents.p, m.dirents.len);
	while ((rc = proto_dirent_next(&r, &d)) == 1) {
		/* a valid entry re-encodes to the bytes it came from */
		struct wbuf dw;

		wb_init(&dw, out, sizeof(out));
		proto_dirent_put(&dw, d.cookie, d.name.p, d.name.len, &d.attr);
		if (dw.err || dw.len != proto_dirent_size(d.name.len) ||
		    memcmp(out, r.p + r.off - dw.len, dw.len))
			abort();
		n++;
	}
	if (rc < 0 && r.err == 0)
		abort();
	(void)n;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_mrep_encode(&w, op, &m), b, len);
}

/* MOUNT reply: decode, check the table, re-encode. */
static void fuzz_mount(const uint8_t *b, size_t len)
{
	static struct proto_mount m;
	struct wbuf w;
	const char *why;

	if (proto_mount_decode(b, len, &m, &why))
		return;
	if (m.niods < 1 || m.niods > PROTO_MAX_IODS)
		abort();
	wb_init(&w, out, sizeof(out));
	same(&w, proto_mount_encode(&w, &m), b, len);
}

/* iod request: decode, check segs, map them, re-encode. */
static void fuzz_ioreq(uint16_t op, uint64_t expect, const uint8_t *b, size_t len)
{
	static struct proto_seg segs[PROTO_MAX_SEGS];
	static struct stripe_piece pieces[64];
	struct proto_ioreq q;
	struct proto_layout l = { 4096, 3, 1 };
	struct wbuf w;
	const char *why;
	uint64_t sum = 0;
	size_t n;

	if (proto_ioreq_decode(b, len, op, expect, &q, segs, &why))
		return;
	if (q.nsegs > PROTO_MAX_SEGS)
		abort();
	for (uint32_t i = 0; i < q.nsegs; i++) {
		if (segs[i].len == 0 || segs[i].off + segs[i].len > (1ull << 62))
			abort();
		sum += segs[i].len;
		(void)stripe_map(&l, 4, segs[i].off, segs[i].len, pieces, 64, &n);
		(void)stripe_local_size(&l, (uint16_t)(i % 3), segs[i].off);
	}
	if (q.nsegs && sum != expect)
		abort();
	wb_init(&w, out, sizeof(out));
	same(&w, proto_ioreq_encode(&w, op, &q), b, len);
}

/* IO_STATFS reply. */
static void fuzz_statfs(const uint8_t *b, size_t len)
{
	struct proto_statfs s;
	struct wbuf w;
	const char *why;

	if (proto_statfs_decode(b, len, &s, &why))
		return;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_statfs_encode(&w, &s), b, len);
}

/* IO_SEEK / IO_BLOCKS reply: one u64. */
static void fuzz_ioval(const uint8_t *b, size_t len)
{
	struct wbuf w;
	const char *why;
	uint64_t v;

	if (proto_ioval_decode(b, len, &v, &why))
		return;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_ioval_encode(&w, v), b, len);
}

/* STATUS reply. */
static void fuzz_status(const uint8_t *b, size_t len)
{
	struct proto_status s;
	struct wbuf w;
	const char *why;

	if (proto_status_decode(b, len, &s, &why))
		return;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_status_encode(&w, &s), b, len);
}

/* Lock request of op: decode, re-encode. */
static void fuzz_lock(uint16_t op, const uint8_t *b, size_t len)
{
	struct proto_lock l;
	struct wbuf w;
	const char *why;

	if (proto_lock_decode(b, len, op, &l, &why))
		return;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_lock_encode(&w, op, &l), b, len);
}

/* Lock reply: decode, re-encode. */
static void fuzz_lockrep(const uint8_t *b, size_t len)
{
	struct proto_lockrep r;
	struct wbuf w;
	const char *why;

	if (proto_lockrep_decode(b, len, &r, &why))
		return;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_lockrep_encode(&w, &r), b, len);
}

/* CB_WAIT request: decode, re-encode. */
static void fuzz_cbwait(const uint8_t *b, size_t len)
{
	struct proto_cbwait q;
	struct wbuf w;
	const char *why;

	if (proto_cbwait_decode(b, len, &q, &why))
		return;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_cbwait_encode(&w, &q), b, len);
}

/* CB_WAIT reply: decode, re-encode. */
static void fuzz_cbrep(const uint8_t *b, size_t len)
{
	static struct proto_cbrep r;
	struct wbuf w;
	const char *why;

	if (proto_cbrep_decode(b, len, &r, &why))
		return;
	if (r.nev > PROTO_CB_MAX_EVENTS)
		abort();
	wb_init(&w, out, sizeof(out));
	same(&w, proto_cbrep_encode(&w, &r), b, len);
}

/* IO_LIST reply: decode, re-encode. */
static void fuzz_iolist(const uint8_t *b, size_t len)
{
	static struct proto_iolist l;
	struct wbuf w;
	const char *why;

	if (proto_iolist_decode(b, len, &l, &why))
		return;
	if (l.n > PROTO_MAX_LIST)
		abort();
	wb_init(&w, out, sizeof(out));
	same(&w, proto_iolist_encode(&w, &l), b, len);
}

/* IO_CSUM reply: decode, re-encode. */
static void fuzz_csum(const uint8_t *b, size_t len)
{
	struct proto_csum c;
	struct wbuf w;
	const char *why;

	if (proto_csum_decode(b, len, &c, &why))
		return;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_csum_encode(&w, &c), b, len);
}

/* Scrub request of op: decode, re-encode. */
static void fuzz_scrubq(uint16_t op, const uint8_t *b, size_t len)
{
	struct proto_scrubq q;
	struct wbuf w;
	const char *why;

	if (proto_scrubq_decode(b, len, op, &q, &why))
		return;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_scrubq_encode(&w, op, &q), b, len);
}

/* SCRUB_INOS reply: decode, re-encode. */
static void fuzz_inostate(const uint8_t *b, size_t len)
{
	struct proto_inostate s;
	struct wbuf w;
	const char *why;

	if (proto_inostate_decode(b, len, &s, &why))
		return;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_inostate_encode(&w, &s), b, len);
}

/* SCRUB_ORPHANS reply: decode, re-encode. */
static void fuzz_orphans(const uint8_t *b, size_t len)
{
	static struct proto_orphans o;
	struct wbuf w;
	const char *why;

	if (proto_orphans_decode(b, len, &o, &why))
		return;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_orphans_encode(&w, &o), b, len);
}

/* STALE_MARK request: decode, re-encode to the same bytes. */
static void fuzz_stale(const uint8_t *b, size_t len)
{
	struct proto_stale s;
	struct wbuf w;
	const char *why;

	if (proto_stale_decode(b, len, &s, &why))
		return;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_stale_encode(&w, &s), b, len);
}

/* STALE_COUNT reply: decode, re-encode to the same bytes. */
static void fuzz_stalecnt(const uint8_t *b, size_t len)
{
	static struct proto_stalecnt c;
	struct wbuf w;
	const char *why;

	if (proto_stalecnt_decode(b, len, &c, &why))
		return;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_stalecnt_encode(&w, &c), b, len);
}

/* IO_FENCE request: decode, check the lists, re-encode to the same bytes. */
static void fuzz_fence(const uint8_t *b, size_t len)
{
	struct proto_fence f;
	struct wbuf w;
	const char *why;

	if (proto_fence_decode(b, len, &f, &why))
		return;
	if (f.seq == 0 || f.add.n > PROTO_MAX_INOS || f.del.n > PROTO_MAX_INOS)
		abort();
	for (uint32_t i = 0; i < f.add.n; i++)
		if (proto_inos_at(&f.add, i) == 0)
			abort();
	for (uint32_t i = 0; i < f.del.n; i++)
		if (proto_inos_at(&f.del, i) == 0)
			abort();
	wb_init(&w, out, sizeof(out));
	same(&w, proto_fence_encode(&w, &f), b, len);
}

/* IO_FENCE reply: decode, re-encode to the same bytes. */
static void fuzz_fencestate(const uint8_t *b, size_t len)
{
	struct proto_fencestate s;
	struct wbuf w;
	const char *why;

	if (proto_fencestate_decode(b, len, &s, &why))
		return;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_fencestate_encode(&w, &s), b, len);
}

/* BATCH request: decode, walk the ops, re-encode from them. */
static void fuzz_batch(const uint8_t *b, size_t len)
{
	static struct proto_bop ops[PROTO_MAX_BATCH];
	struct proto_batch q;
	struct wbuf w;
	const char *why;
	uint32_t pos = 0, n = 0;
	int rc;

	if (proto_batch_decode(b, len, &q, &why))
		return;
	if (q.n > PROTO_MAX_BATCH || q.cred.session == 0)
		abort();
	while ((rc = proto_bop_next(&q, &pos, &ops[n])) == 0)
		if (++n > q.n)
			abort();
	if (rc != -ENOENT || n != q.n || pos != q.wire_len)
		abort();
	q.host = ops;
	wb_init(&w, out, sizeof(out));
	same(&w, proto_batch_encode(&w, &q), b, len);
}

/* BATCH reply: decode, re-encode. */
static void fuzz_batchrep(const uint8_t *b, size_t len)
{
	static struct proto_batchrep r;
	struct wbuf w;
	const char *why;

	if (proto_batchrep_decode(b, len, &r, &why))
		return;
	if (r.n > PROTO_MAX_BATCH || r.range % PROTO_INO_RANGE)
		abort();
	wb_init(&w, out, sizeof(out));
	same(&w, proto_batchrep_encode(&w, &r), b, len);
}

/* Layout text: parse, format, parse again to the same layout. */
static void fuzz_layout(const uint8_t *b, size_t len)
{
	struct proto_layout l, l2;
	char txt[64];

	if (proto_layout_parse((const char *)b, len, &l))
		return;
	if (proto_layout_format(txt, sizeof(txt), &l) ||
	    proto_layout_parse(txt, strlen(txt), &l2) ||
	    l.unit != l2.unit || l.count != l2.count || l.first != l2.first ||
	    l.mirror != l2.mirror)
		abort();
	if (stripe_layout_check(&l, PROTO_MAX_IODS))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_hdr h;
	const char *why;
	const uint8_t *hb, *body;
	uint8_t re[PROTO_HDR_LEN];
	size_t blen;
	uint16_t op;
	uint64_t bulk, aux;

	if (size < 1 + PROTO_HDR_LEN)
		return 0;
	hb = data + 1;
	body = data + 1 + PROTO_HDR_LEN;
	blen = size - 1 - PROTO_HDR_LEN;
	if (proto_hdr_decode(hb, &h, &why) == 0) {
		proto_hdr_encode(re, &h);
		if (memcmp(re, hb, PROTO_HDR_LEN))
			abort();
	}
	/* raw little-endian fields, valid header or not */
	op = (uint16_t)(hb[6] | hb[7] << 8);
	bulk = aux = 0;
	for (int i = 7; i >= 0; i--) {
		bulk = bulk << 8 | hb[32 + i];
		aux = aux << 8 | hb[40 + i];
	}
	(void)proto_op_name(op);
	switch (data[0] % 23) {
	case 0: fuzz_mreq(op, body, blen); break;
	case 1: fuzz_mrep(op, body, blen); break;
	case 2: fuzz_mount(body, blen); break;
	case 3: fuzz_ioreq(op, op == PROTO_OP_IO_READ ? aux : bulk, body, blen); break;
	case 4: fuzz_statfs(body, blen); break;
	case 5: fuzz_layout(body, blen); break;
	case 6: fuzz_status(body, blen); break;
	case 7: fuzz_ioval(body, blen); break;
	case 8: fuzz_lock(op, body, blen); break;
	case 9: fuzz_lockrep(body, blen); break;
	case 10: fuzz_iolist(body, blen); break;
	case 11: fuzz_csum(body, blen); break;
	case 12: fuzz_scrubq(op, body, blen); break;
	case 13: fuzz_inostate(body, blen); break;
	case 14: fuzz_orphans(body, blen); break;
	case 15: fuzz_stale(body, blen); break;
	case 16: fuzz_stalecnt(body, blen); break;
	case 17: fuzz_fence(body, blen); break;
	case 18: fuzz_fencestate(body, blen); break;
	case 19: fuzz_cbwait(body, blen); break;
	case 20: fuzz_cbrep(body, blen); break;
	case 21: fuzz_batch(body, blen); break;
	case 22: fuzz_batchrep(body, blen); break;
	}
	return 0;
}
