/*
 * test_proto.c - unit tests of the wire codec (common/proto/proto.c).
 *
 * Every body is also built by an independent raw encoder written here from
 * the wire description, so the tests pin the byte layout, not just the
 * round trip. Malformed inputs are built with the raw encoder (which does
 * not validate) and must be rejected with the right error and field name.
 *
 * Run with no arguments: exits 0 when everything passes, 1 otherwise, and
 * prints each failed check. `test_proto --write-corpus DIR` writes seed
 * inputs for tests/fuzz/fuzz_proto.c into DIR instead.
 */
#include "proto.h"
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>



/* Check that a decode failed with err and named field why. */
#define CHECK_ERR(rc, err, why, field, ctx)                                  \
	CHECK((rc) == (err) && (why) && strcmp((why), (field)) == 0,         \
	      "%s: rc %d (want %d) why \"%s\" (want \"%s\")", (ctx), (rc),   \
	      (err), (why) ? (why) : "(null)", (field))

static struct proto_str S(const char *s)
{
	return (struct proto_str){ s, (uint32_t)strlen(s) };
}

static struct proto_str SL(const char *s, size_t len)
{
	return (struct proto_str){ s, (uint32_t)len };
}

static bool str_eq(struct proto_str a, struct proto_str b)
{
	return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

/* Decode from an exact-size heap copy so ASan catches any overread. */
static uint8_t *dup_exact(const uint8_t *p, size_t len)
{
	uint8_t *d = malloc(len ? len : 1);

	if (!d)
		abort();
	if (len)
		memcpy(d, p, len);
	return d;
}

/* Every strict prefix of the len bytes in gbuf fails to decode with
 * -EBADMSG (dec: a decoder of a body, 0 or -errno). */
#define CHECK_CUTS(len, ctx, dec)                                            \
	do {                                                                 \
		for (size_t k_ = 0; k_ < (len); k_++) {                      \
			uint8_t *c_ = dup_exact(gbuf, k_);                   \
			const uint8_t *cut = c_;                             \
			size_t cutlen = k_;                                  \
			int r_ = (dec);                                      \
			CHECK(r_ == -EBADMSG, "%s cut %zu: %d", (ctx), k_, r_); \
			free(c_);                                            \
			(void)cut;                                           \
			(void)cutlen;                                        \
		}                                                            \
	} while (0)

/* ---------------------------------------------------------------- header */

static void test_header(void)
{
	struct proto_hdr h = { .op = PROTO_OP_IO_READ, .tag = 0x0102030405060708ull,
			       .status = -5, .credits = 7, .flags = PROTO_F_REPLY,
			       .body_len = 1234, .bulk_len = 5555, .aux = 4096 };
	struct proto_hdr d;
	uint8_t b[PROTO_HDR_LEN], c[PROTO_HDR_LEN];
	const char *why;
	int rc;

	proto_hdr_encode(b, &h);
	/* exact bytes: magic "RPFS", little-endian fields */
	CHECK(memcmp(b, "RPFS", 4) == 0, "magic bytes");
	CHECK(b[4] == 1 && b[5] == 0, "version bytes");
	CHECK(b[6] == 40 && b[7] == 0, "op bytes");
	CHECK(b[8] == 8 && b[15] == 1, "tag bytes");
	CHECK(b[16] == 0xfb && b[19] == 0xff, "status bytes");
	CHECK(b[24] == 0xd2 && b[25] == 0x04, "body_len bytes");
	for (int i = 28; i < 32; i++)
		CHECK(b[i] == 0, "reserved byte %d", i);
	rc = proto_hdr_decode(b, &d, &why);
	CHECK(rc == 0, "decode rc %d", rc);
	CHECK(d.version == PROTO_VERSION && d.op == h.op && d.tag == h.tag &&
	      d.status == -5 && d.credits == 7 && d.flags == h.flags &&
	      d.body_len == 1234 && d.bulk_len == 5555 && d.aux == 4096,
	      "header round trip");

	/* limits are inclusive */
	h.body_len = PROTO_MAX_BODY;
	h.bulk_len = PROTO_MAX_BULK;
	h.aux = PROTO_MAX_BULK;
	h.flags = PROTO_F_ALL;
	proto_hdr_encode(b, &h);
	CHECK(proto_hdr_decode(b, &d, &why) == 0, "max limits accepted");

#define BAD(mutate, err, field)                                              \
	do {                                                                 \
		h = (struct proto_hdr){ .op = PROTO_OP_GETATTR, .tag = 9 };  \
		proto_hdr_encode(c, &h);                                     \
		mutate;                                                      \
		why = NULL;                                                  \
		rc = proto_hdr_decode(c, &d, &why);                          \
		CHECK_ERR(rc, err, why, field, #mutate);                     \
	} while (0)

	BAD(c[0] ^= 1, -EPROTO, "magic");
	BAD(c[3] = 0, -EPROTO, "magic");
	BAD(c[4] = 2, -EPROTONOSUPPORT, "version");
	BAD(c[5] = 1, -EPROTONOSUPPORT, "version");
	BAD(c[4] = 0, -EPROTONOSUPPORT, "version");
	BAD(c[22] = 0x8, -EPROTO, "flags");
	BAD(c[23] = 0x1, -EPROTO, "flags");
	BAD(c[28] = 1, -EPROTO, "reserved");
	BAD(c[31] = 0x80, -EPROTO, "reserved");
	/* body_len = PROTO_MAX_BODY + 1 */
	BAD((c[24] = 1, c[25] = 0, c[26] = 2), -EMSGSIZE, "body_len");
	BAD(c[27] = 0xff, -EMSGSIZE, "body_len");
	/* bulk_len = 2^28 + 1 */
	BAD((c[32] = 1, c[35] = 0x10), -EMSGSIZE, "bulk_len");
	BAD(c[39] = 0x80, -EMSGSIZE, "bulk_len");
	BAD((c[40] = 1, c[43] = 0x10), -EMSGSIZE, "aux");
	BAD(c[47] = 0xff, -EMSGSIZE, "aux");
#undef BAD

	/* on a data frame aux is an offset, not a length */
	h = (struct proto_hdr){ .op = PROTO_OP_IO_READ, .flags = PROTO_F_DATA,
				.bulk_len = 100, .aux = 1ull << 40 };
	proto_hdr_encode(c, &h);
	CHECK(proto_hdr_decode(c, &d, &why) == 0 && d.aux == 1ull << 40,
	      "data frame aux offset");
	/* but its bulk_len is still bounded */
	h.bulk_len = PROTO_MAX_BULK + 1;
	proto_hdr_encode(c, &h);
	CHECK(proto_hdr_decode(c, &d, &why) == -EMSGSIZE, "data frame bulk");
}

/* --------------------------------------------------------------- cursors */

static void test_cursors(void)
{
	uint8_t b[16];
	struct wbuf w;
	struct rbuf r;
	struct proto_str s;

	wb_init(&w, b, sizeof(b));
	wb_u8(&w, 0x11);
	wb_u16(&w, 0x2233);
	wb_u32(&w, 0x44556677);
	wb_u64(&w, 0x8899aabbccddeeffull);
	CHECK(w.err == 0 && w.len == 15, "wb len %zu err %d", w.len, w.err);
	CHECK(b[1] == 0x33 && b[2] == 0x22 && b[3] == 0x77 && b[6] == 0x44 &&
	      b[7] == 0xff && b[14] == 0x88, "wb little-endian");
	wb_u16(&w, 1);
	CHECK(w.err == -EMSGSIZE && w.len == 15, "wb overflow");
	wb_u8(&w, 1);
	CHECK(w.err == -EMSGSIZE && w.len == 15, "wb stays failed");

	rb_init(&r, b, 15);
	CHECK(rb_u8(&r) == 0x11 && rb_u16(&r) == 0x2233 &&
	      rb_u32(&r) == 0x44556677 && rb_u64(&r) == 0x8899aabbccddeeffull,
	      "rb values");
	CHECK(r.err == 0 && r.off == 15, "rb off");
	CHECK(rb_u8(&r) == 0 && r.err == -EBADMSG, "rb underflow");
	rb_init(&r, b + 1, 3);
	CHECK(rb_u32(&r) == 0 && r.err == -EBADMSG && r.off == 0,
	      "rb partial read");
	rb_init(&r, NULL, 0);
	CHECK(rb_u8(&r) == 0 && r.err == -EBADMSG, "rb empty");

	/* strings */
	wb_init(&w, b, sizeof(b));
	wb_str(&w, "abc", 3);
	wb_blob(&w, "x\0y", 3);
	CHECK(w.err == 0 && w.len == 12, "str/blob len");
	rb_init(&r, b, w.len);
	s = rb_str(&r, 3);
	CHECK(str_eq(s, S("abc")), "rb_str");
	s = rb_blob(&r, 3);
	CHECK(r.err == 0 && str_eq(s, SL("x\0y", 3)), "rb_blob with NUL");
	rb_init(&r, b, w.len);
	s = rb_str(&r, 2);
	CHECK(r.err == -EBADMSG && s.len == 0 && s.p, "rb_str max");
	/* a string with a NUL */
	wb_init(&w, b, sizeof(b));
	wb_str(&w, "a\0b", 3);
	rb_init(&r, b, w.len);
	s = rb_str(&r, 100);
	CHECK(r.err == -EBADMSG && s.len == 0, "rb_str NUL");
	/* a string whose length runs past the end */
	rb_init(&r, b, 4);
	s = rb_str(&r, 100);
	CHECK(r.err == -EBADMSG && s.len == 0, "rb_str truncated");
	/* wb_str too long for u16 */
	{
		static char big[70000];
		uint8_t bb[8];

		wb_init(&w, bb, sizeof(bb));
		wb_str(&w, big, sizeof(big));
		CHECK(w.err == -EMSGSIZE && w.len == 0, "wb_str > 65535");
	}
	/* a string that does not fit */
	wb_init(&w, b, 4);
	wb_str(&w, "abcdef", 6);
	CHECK(w.err == -EMSGSIZE, "wb_str no room");
}

/* ---------------------------------------------------- metadata requests */

/* Field bits as the protocol description lists them (test's own copy). */
enum {
	T_INO = 1 << 0, T_PARENT = 1 << 1, T_NAME = 1 << 2, T_NEWPARENT = 1 << 3,
	T_NEWNAME = 1 << 4, T_MODE = 1 << 5, T_RDEV = 1 << 6, T_FLAGS = 1 << 7,
	T_VALID = 1 << 8, T_UID = 1 << 9, T_GID = 1 << 10, T_SIZE = 1 << 11,
	T_ATIME = 1 << 12, T_MTIME = 1 << 13, T_TARGET = 1 << 14,
	T_XNAME = 1 << 15, T_XVALUE = 1 << 16, T_COOKIE = 1 << 17,
	T_MAX = 1 << 18, T_INOS = 1 << 19, T_BLOCKS = 1 << 20,
};

static const struct { uint16_t op; uint32_t f; } req_ops[] = {
	{ PROTO_OP_MOUNT, 0 },
	{ PROTO_OP_LOOKUP, T_PARENT | T_NAME },
	{ PROTO_OP_GETATTR, T_INO },
	{ PROTO_OP_SETATTR, T_INO | T_VALID | T_MODE | T_UID | T_GID | T_SIZE |
				    T_ATIME | T_MTIME },
	{ PROTO_OP_CREATE, T_PARENT | T_NAME | T_MODE | T_FLAGS },
	{ PROTO_OP_MKDIR, T_PARENT | T_NAME | T_MODE },
	{ PROTO_OP_MKNOD, T_PARENT | T_NAME | T_MODE | T_RDEV },
	{ PROTO_OP_UNLINK, T_PARENT | T_NAME },
	{ PROTO_OP_RMDIR, T_PARENT | T_NAME },
	{ PROTO_OP_RENAME, T_PARENT | T_NAME | T_NEWPARENT | T_NEWNAME | T_FLAGS },
	{ PROTO_OP_LINK, T_INO | T_NEWPARENT | T_NEWNAME },
	{ PROTO_OP_SYMLINK, T_PARENT | T_NAME | T_TARGET },
	{ PROTO_OP_READLINK, T_INO },
	{ PROTO_OP_READDIR, T_INO | T_COOKIE | T_MAX },
	{ PROTO_OP_STATFS, 0 },
	{ PROTO_OP_GETXATTR, T_INO | T_XNAME | T_MAX },
	{ PROTO_OP_SETXATTR, T_INO | T_XNAME | T_XVALUE | T_FLAGS },
	{ PROTO_OP_LISTXATTR, T_INO | T_MAX },
	{ PROTO_OP_REMOVEXATTR, T_INO | T_XNAME },
	{ PROTO_OP_OPEN, T_INO | T_FLAGS },
	{ PROTO_OP_ACCESS, T_INO | T_MODE },
	{ PROTO_OP_SETSIZE, T_INO | T_SIZE | T_MTIME },
	{ PROTO_OP_PURGE, T_INO },
	{ PROTO_OP_PURGE_MANY, T_INOS },
	{ PROTO_OP_SETBLOCKS, T_INO | T_FLAGS | T_SIZE | T_MTIME | T_BLOCKS },
};
#define N_REQ_OPS (sizeof(req_ops) / sizeof(req_ops[0]))

static uint32_t req_fields(uint16_t op)
{
	for (size_t i = 0; i < N_REQ_OPS; i++)
		if (req_ops[i].op == op)
			return req_ops[i].f;
	abort();
}

/* Independent, non-validating encoder: cred, then fields in struct order. */
static void raw_mreq(struct wbuf *w, uint32_t f, const struct proto_mreq *m,
		     unsigned ngroups_wire)
{
	wb_u32(w, m->cred.uid);
	wb_u32(w, m->cred.gid);
	wb_u16(w, (uint16_t)ngroups_wire);
	for (unsigned i = 0; i < ngroups_wire; i++)
		wb_u32(w, i < PROTO_MAX_GROUPS ? m->cred.groups[i] : i);
	if (f & T_INO) wb_u64(w, m->ino);
	if (f & T_PARENT) wb_u64(w, m->parent);
	if (f & T_NAME) wb_str(w, m->name.p, m->name.len);
	if (f & T_NEWPARENT) wb_u64(w, m->newparent);
	if (f & T_NEWNAME) wb_str(w, m->newname.p, m->newname.len);
	if (f & T_MODE) wb_u32(w, m->mode);
	if (f & T_RDEV) wb_u32(w, m->rdev);
	if (f & T_FLAGS) wb_u32(w, m->flags);
	if (f & T_VALID) wb_u32(w, m->valid);
	if (f & T_UID) wb_u32(w, m->uid);
	if (f & T_GID) wb_u32(w, m->gid);
	if (f & T_SIZE) wb_u64(w, m->size);
	if (f & T_ATIME) { wb_u64(w, (uint64_t)m->atime.sec); wb_u32(w, m->atime.nsec); }
	if (f & T_MTIME) { wb_u64(w, (uint64_t)m->mtime.sec); wb_u32(w, m->mtime.nsec); }
	if (f & T_TARGET) wb_str(w, m->target.p, m->target.len);
	if (f & T_XNAME) wb_str(w, m->xname.p, m->xname.len);
	if (f & T_XVALUE) wb_blob(w, m->xvalue.p, m->xvalue.len);
	if (f & T_COOKIE) wb_u64(w, m->cookie);
	if (f & T_MAX) wb_u32(w, m->max);
	if (f & T_INOS) {
		wb_u32(w, m->inos.n);
		for (uint32_t i = 0; i < m->inos.n; i++)
			wb_u64(w, m->inos.host[i]);
	}
	if (f & T_BLOCKS) wb_u64(w, m->blocks);
}

/* Three inode numbers for PURGE_MANY / IO_REMOVE_MANY. */
static const uint64_t some_inos[3] = { 1, 0x8877665544332211ull, UINT64_MAX };

/* A request with every field set to a valid, non-trivial value for op. */
static void full_mreq(uint16_t op, struct proto_mreq *m)
{
	static const char xval[] = "bin\0ary\xff value";

	memset(m, 0, sizeof(*m));
	m->cred.uid = 1000;
	m->cred.gid = 100;
	m->cred.ngroups = 3;
	m->cred.groups[0] = 4;
	m->cred.groups[1] = 24;
	m->cred.groups[2] = 0xfffffffeu;
	m->ino = 0x1122334455667788ull;
	m->parent = 0x99aabbccddeeff01ull;
	m->name = S("file name with spaces.txt");
	m->newparent = 42;
	m->newname = S("\xc3\xa9t\xc3\xa9");
	m->mode = op == PROTO_OP_ACCESS ? 5 : 0100644;
	m->rdev = 0x00080001;
	switch (op) {
	case PROTO_OP_CREATE: m->flags = PROTO_CREATE_EXCL; break;
	case PROTO_OP_RENAME: m->flags = PROTO_RENAME_EXCHANGE; break;
	case PROTO_OP_SETXATTR: m->flags = PROTO_XATTR_REPLACE; break;
	case PROTO_OP_OPEN: m->flags = 0x8002; break;
	case PROTO_OP_SETBLOCKS: m->flags = PROTO_SB_GROW | PROTO_SB_CTIME; break;
	default: m->flags = 0; break;
	}
	m->valid = PROTO_SA_MODE | PROTO_SA_SIZE | PROTO_SA_MTIME | PROTO_SA_CTIME;
	m->uid = 65534;
	m->gid = 65533;
	m->size = 1ull << 40;
	m->atime = (struct proto_time){ -1234567890123ll, 999999999 };
	m->mtime = (struct proto_time){ 1700000000, 123456789 };
	m->target = S("../some/where/else");
	m->xname = S("user.rpfs.layout");
	m->xvalue = SL(xval, sizeof(xval) - 1);
	m->cookie = 0xdeadbeefcafef00dull;
	m->max = 65536;
	m->inos = (struct proto_inos){ 3, some_inos, NULL };
	m->blocks = PROTO_MAX_BLOCKS;
}

/* Whether a decoded inode list (read in place) holds want's entries. */
static bool inos_eq(const struct proto_inos *got, const struct proto_inos *want)
{
	if (got->n != want->n || got->host || !got->wire)
		return false;
	for (uint32_t i = 0; i < got->n; i++)
		if (proto_inos_at(got, i) != proto_inos_at(want, i))
			return false;
	return true;
}

/* Compare a decoded request with the expected one, field by field. */
static void check_mreq_eq(const char *ctx, uint32_t f, const struct proto_mreq *want,
			  const struct proto_mreq *got)
{
	CHECK(got->cred.uid == want->cred.uid && got->cred.gid == want->cred.gid &&
	      got->cred.ngroups == want->cred.ngroups, "%s: cred", ctx);
	for (unsigned i = 0; i < want->cred.ngroups && i < PROTO_MAX_GROUPS; i++)
		CHECK(got->cred.groups[i] == want->cred.groups[i], "%s: group %u", ctx, i);
#define FLD(bit, expr) CHECK((f & (bit)) ? (expr) : true, "%s: %s", ctx, #bit)
#define ZERO(bit, expr) CHECK((f & (bit)) ? true : (expr), "%s: %s not zero", ctx, #bit)
	FLD(T_INO, got->ino == want->ino);
	ZERO(T_INO, got->ino == 0);
	FLD(T_PARENT, got->parent == want->parent);
	ZERO(T_PARENT, got->parent == 0);
	FLD(T_NAME, str_eq(got->name, want->name));
	ZERO(T_NAME, got->name.len == 0);
	FLD(T_NEWPARENT, got->newparent == want->newparent);
	ZERO(T_NEWPARENT, got->newparent == 0);
	FLD(T_NEWNAME, str_eq(got->newname, want->newname));
	ZERO(T_NEWNAME, got->newname.len == 0);
	FLD(T_MODE, got->mode == want->mode);
	ZERO(T_MODE, got->mode == 0);
	FLD(T_RDEV, got->rdev == want->rdev);
	ZERO(T_RDEV, got->rdev == 0);
	FLD(T_FLAGS, got->flags == want->flags);
	ZERO(T_FLAGS, got->flags == 0);
	FLD(T_VALID, got->valid == want->valid);
	ZERO(T_VALID, got->valid == 0);
	FLD(T_UID, got->uid == want->uid);
	ZERO(T_UID, got->uid == 0);
	FLD(T_GID, got->gid == want->gid);
	ZERO(T_GID, got->gid == 0);
	FLD(T_SIZE, got->size == want->size);
	ZERO(T_SIZE, got->size == 0);
	FLD(T_ATIME, got->atime.sec == want->atime.sec && got->atime.nsec == want->atime.nsec);
	ZERO(T_ATIME, got->atime.sec == 0 && got->atime.nsec == 0);
	FLD(T_MTIME, got->mtime.sec == want->mtime.sec && got->mtime.nsec == want->mtime.nsec);
	ZERO(T_MTIME, got->mtime.sec == 0 && got->mtime.nsec == 0);
	FLD(T_TARGET, str_eq(got->target, want->target));
	ZERO(T_TARGET, got->target.len == 0);
	FLD(T_XNAME, str_eq(got->xname, want->xname));
	ZERO(T_XNAME, got->xname.len == 0);
	FLD(T_XVALUE, str_eq(got->xvalue, want->xvalue));
	ZERO(T_XVALUE, got->xvalue.len == 0);
	FLD(T_COOKIE, got->cookie == want->cookie);
	ZERO(T_COOKIE, got->cookie == 0);
	FLD(T_MAX, got->max == want->max);
	ZERO(T_MAX, got->max == 0);
	FLD(T_INOS, inos_eq(&got->inos, &want->inos));
	ZERO(T_INOS, got->inos.n == 0);
	FLD(T_BLOCKS, got->blocks == want->blocks);
	ZERO(T_BLOCKS, got->blocks == 0);
#undef FLD
#undef ZERO
}

static uint8_t gbuf[PROTO_MAX_BODY + 64];
static uint8_t gbuf2[PROTO_MAX_BODY + 64];

/* Round-trip every mgr op, compare with the raw encoding, and truncate the
 * body at every byte offset. */
static void test_mreq_roundtrip(void)
{
	for (size_t i = 0; i < N_REQ_OPS; i++) {
		uint16_t op = req_ops[i].op;
		uint32_t f = req_ops[i].f;
		const char *ctx = proto_op_name(op);
		struct proto_mreq m, d;
		struct wbuf w, w2;
		const char *why = NULL;
		uint8_t *cp;
		int rc;

		full_mreq(op, &m);
		wb_init(&w, gbuf, sizeof(gbuf));
		rc = proto_mreq_encode(&w, op, &m);
		CHECK(rc == 0, "%s: encode rc %d", ctx, rc);
		wb_init(&w2, gbuf2, sizeof(gbuf2));
		raw_mreq(&w2, f, &m, m.cred.ngroups);
		CHECK(w.len == w2.len && memcmp(gbuf, gbuf2, w.len) == 0,
		      "%s: wire bytes differ from the description", ctx);

		cp = dup_exact(gbuf, w.len);
		rc = proto_mreq_decode(cp, w.len, op, &d, &why);
		CHECK(rc == 0, "%s: decode rc %d why %s", ctx, rc, rc ? why : "");
		if (rc == 0)
			check_mreq_eq(ctx, f, &m, &d);
		free(cp);

		/* every truncation fails, and cleanly */
		for (size_t n = 0; n < w.len; n++) {
			cp = dup_exact(gbuf, n);
			why = NULL;
			rc = proto_mreq_decode(cp, n, op, &d, &why);
			CHECK(rc == -EBADMSG && why, "%s: truncated at %zu: rc %d",
			      ctx, n, rc);
			free(cp);
		}
		/* a trailing byte fails */
		gbuf[w.len] = 0;
		cp = dup_exact(gbuf, w.len + 1);
		rc = proto_mreq_decode(cp, w.len + 1, op, &d, &why);
		CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", ctx);
		free(cp);

		/* minimal values too: no groups, empty xvalue, zero numbers,
		 * a one-entry inode list */
		memset(&m, 0, sizeof(m));
		m.name = m.newname = S("x");
		m.target = S("t");
		m.xname = S("n");
		m.inos = (struct proto_inos){ 1, some_inos, NULL };
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mreq_encode(&w, op, &m) == 0, "%s: minimal encode", ctx);
		rc = proto_mreq_decode(gbuf, w.len, op, &d, &why);
		CHECK(rc == 0, "%s: minimal decode rc %d", ctx, rc);
		if (rc == 0)
			check_mreq_eq(ctx, f, &m, &d);
	}
	/* full 32 groups */
	{
		struct proto_mreq m, d;
		struct wbuf w;
		const char *why;

		full_mreq(PROTO_OP_GETATTR, &m);
		m.cred.ngroups = PROTO_MAX_GROUPS;
		for (int i = 0; i < PROTO_MAX_GROUPS; i++)
			m.cred.groups[i] = 1000u + (unsigned)i;
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mreq_encode(&w, PROTO_OP_GETATTR, &m) == 0, "32 groups enc");
		CHECK(proto_mreq_decode(gbuf, w.len, PROTO_OP_GETATTR, &d, &why) == 0 &&
		      d.cred.ngroups == 32 && d.cred.groups[31] == 1031, "32 groups dec");
	}
	/* no room */
	{
		struct proto_mreq m;
		struct wbuf w;

		full_mreq(PROTO_OP_SYMLINK, &m);
		wb_init(&w, gbuf, 20);
		CHECK(proto_mreq_encode(&w, PROTO_OP_SYMLINK, &m) == -EMSGSIZE,
		      "encode no room");
	}
}

/* Build op's request with m (no validation), decode, expect failure. */
static void bad_mreq(int line, uint16_t op, const struct proto_mreq *m,
		     unsigned ngroups_wire, const char *field)
{
	struct proto_mreq d;
	struct wbuf w;
	const char *why = NULL;
	uint8_t *cp;
	char ctx[96];
	int rc;

	snprintf(ctx, sizeof(ctx), "line %d %s", line, proto_op_name(op));
	wb_init(&w, gbuf, sizeof(gbuf));
	raw_mreq(&w, req_fields(op), m, ngroups_wire);
	CHECK(w.err == 0, "%s: raw encode", ctx);
	cp = dup_exact(gbuf, w.len);
	rc = proto_mreq_decode(cp, w.len, op, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, field, ctx);
	free(cp);
	/* the encoder refuses the same values */
	if (ngroups_wire == m->cred.ngroups) {
		wb_init(&w, gbuf, sizeof(gbuf));
		rc = proto_mreq_encode(&w, op, m);
		CHECK(rc == -EINVAL && w.len == 0, "%s: encode rc %d", ctx, rc);
	}
}

#define BAD_REQ(op, field, ...)                                              \
	do {                                                                 \
		struct proto_mreq m_;                                        \
		full_mreq(op, &m_);                                          \
		__VA_ARGS__;                                                 \
		bad_mreq(__LINE__, op, &m_, m_.cred.ngroups, field);         \
	} while (0)

static void test_mreq_bad(void)
{
	static char longname[PROTO_MAX_NAME + 2];
	static char longtarget[PROTO_MAX_PATH + 2];
	static char bigvalue[PROTO_MAX_XATTR_VALUE + 2];
	struct proto_mreq m, d;
	const char *why;
	int rc;

	memset(longname, 'a', sizeof(longname) - 1);
	memset(longtarget, 'b', sizeof(longtarget) - 1);

	/* names, in every op that carries one */
	static const uint16_t name_ops[] = { PROTO_OP_LOOKUP, PROTO_OP_CREATE,
		PROTO_OP_MKDIR, PROTO_OP_MKNOD, PROTO_OP_UNLINK, PROTO_OP_RMDIR,
		PROTO_OP_RENAME, PROTO_OP_SYMLINK };
	for (size_t i = 0; i < sizeof(name_ops) / sizeof(name_ops[0]); i++) {
		uint16_t op = name_ops[i];

		BAD_REQ(op, "name", m_.name = S(""));
		BAD_REQ(op, "name", m_.name = S("."));
		BAD_REQ(op, "name", m_.name = S(".."));
		BAD_REQ(op, "name", m_.name = S("a/b"));
		BAD_REQ(op, "name", m_.name = S("/"));
		BAD_REQ(op, "name", m_.name = SL("a\0b", 3));
		BAD_REQ(op, "name", m_.name = SL(longname, PROTO_MAX_NAME + 1));
	}
	/* names that are fine */
	{
		struct wbuf w;
		static const char *const ok[] = { "...", ".a", "a.", "..b", " ", "\xff" };

		for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
			full_mreq(PROTO_OP_LOOKUP, &m);
			m.name = S(ok[i]);
			wb_init(&w, gbuf, sizeof(gbuf));
			CHECK(proto_mreq_encode(&w, PROTO_OP_LOOKUP, &m) == 0 &&
			      proto_mreq_decode(gbuf, w.len, PROTO_OP_LOOKUP, &d, &why) == 0,
			      "name \"%s\" accepted", ok[i]);
		}
		full_mreq(PROTO_OP_LOOKUP, &m);
		m.name = SL(longname, PROTO_MAX_NAME);
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mreq_encode(&w, PROTO_OP_LOOKUP, &m) == 0 &&
		      proto_mreq_decode(gbuf, w.len, PROTO_OP_LOOKUP, &d, &why) == 0 &&
		      d.name.len == PROTO_MAX_NAME, "255-byte name accepted");
		full_mreq(PROTO_OP_SYMLINK, &m);
		m.target = SL(longtarget, PROTO_MAX_PATH);
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mreq_encode(&w, PROTO_OP_SYMLINK, &m) == 0 &&
		      proto_mreq_decode(gbuf, w.len, PROTO_OP_SYMLINK, &d, &why) == 0 &&
		      d.target.len == PROTO_MAX_PATH, "4095-byte target accepted");
		full_mreq(PROTO_OP_SETXATTR, &m);
		m.xvalue = SL(bigvalue, PROTO_MAX_XATTR_VALUE);
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mreq_encode(&w, PROTO_OP_SETXATTR, &m) == 0 &&
		      proto_mreq_decode(gbuf, w.len, PROTO_OP_SETXATTR, &d, &why) == 0 &&
		      d.xvalue.len == PROTO_MAX_XATTR_VALUE, "64 KiB xvalue accepted");
		full_mreq(PROTO_OP_SETATTR, &m);
		m.valid = PROTO_SA_ALL;
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mreq_encode(&w, PROTO_OP_SETATTR, &m) == 0 &&
		      proto_mreq_decode(gbuf, w.len, PROTO_OP_SETATTR, &d, &why) == 0,
		      "valid ALL accepted");
		full_mreq(PROTO_OP_SETATTR, &m);
		m.valid = PROTO_SA_KILLPRIV;
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mreq_encode(&w, PROTO_OP_SETATTR, &m) == 0 &&
		      proto_mreq_decode(gbuf, w.len, PROTO_OP_SETATTR, &d, &why) == 0 &&
		      d.valid == PROTO_SA_KILLPRIV && d.ino == m.ino,
		      "valid KILLPRIV round trip");
		full_mreq(PROTO_OP_ACCESS, &m);
		m.mode = 7;
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mreq_encode(&w, PROTO_OP_ACCESS, &m) == 0 &&
		      proto_mreq_decode(gbuf, w.len, PROTO_OP_ACCESS, &d, &why) == 0,
		      "access 7 accepted");
	}
	BAD_REQ(PROTO_OP_RENAME, "newname", m_.newname = S(".."));
	BAD_REQ(PROTO_OP_RENAME, "newname", m_.newname = S("x/"));
	BAD_REQ(PROTO_OP_LINK, "newname", m_.newname = S(""));
	BAD_REQ(PROTO_OP_LINK, "newname", m_.newname = SL(longname, 256));

	/* symlink targets */
	BAD_REQ(PROTO_OP_SYMLINK, "target", m_.target = S(""));
	BAD_REQ(PROTO_OP_SYMLINK, "target", m_.target = SL("a\0", 2));
	BAD_REQ(PROTO_OP_SYMLINK, "target", m_.target = SL(longtarget, PROTO_MAX_PATH + 1));

	/* xattrs */
	BAD_REQ(PROTO_OP_GETXATTR, "xname", m_.xname = S(""));
	BAD_REQ(PROTO_OP_SETXATTR, "xname", m_.xname = SL("user.\0", 6));
	BAD_REQ(PROTO_OP_REMOVEXATTR, "xname", m_.xname = SL(longname, 256));
	BAD_REQ(PROTO_OP_SETXATTR, "xvalue", m_.xvalue = SL(bigvalue, PROTO_MAX_XATTR_VALUE + 1));

	/* flags */
	BAD_REQ(PROTO_OP_RENAME, "flags", m_.flags = 3);
	BAD_REQ(PROTO_OP_RENAME, "flags", m_.flags = 4);
	BAD_REQ(PROTO_OP_RENAME, "flags", m_.flags = 0x80000001u);
	BAD_REQ(PROTO_OP_CREATE, "flags", m_.flags = 2);
	BAD_REQ(PROTO_OP_CREATE, "flags", m_.flags = 0x41);
	BAD_REQ(PROTO_OP_SETXATTR, "flags", m_.flags = 3);
	BAD_REQ(PROTO_OP_SETXATTR, "flags", m_.flags = 8);
	BAD_REQ(PROTO_OP_ACCESS, "mode", m_.mode = 8);
	BAD_REQ(PROTO_OP_ACCESS, "mode", m_.mode = 0100007);
	BAD_REQ(PROTO_OP_SETATTR, "valid", m_.valid = 0x400);
	BAD_REQ(PROTO_OP_SETATTR, "valid", m_.valid = PROTO_SA_KILLPRIV | 0x800);
	BAD_REQ(PROTO_OP_SETATTR, "valid", m_.valid = 0xffffffffu);
	BAD_REQ(PROTO_OP_MKDIR, "mode", m_.mode = 0x10000);

	/* inode lists: 1..PROTO_MAX_INOS entries */
	{
		static uint64_t many[PROTO_MAX_INOS + 1];
		struct wbuf w;

		for (uint32_t i = 0; i <= PROTO_MAX_INOS; i++)
			many[i] = 1000 + i;
		BAD_REQ(PROTO_OP_PURGE_MANY, "inos", m_.inos.n = 0);
		BAD_REQ(PROTO_OP_PURGE_MANY, "inos",
			m_.inos = (struct proto_inos){ PROTO_MAX_INOS + 1, many, NULL });
		full_mreq(PROTO_OP_PURGE_MANY, &m);
		m.inos = (struct proto_inos){ PROTO_MAX_INOS, many, NULL };
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mreq_encode(&w, PROTO_OP_PURGE_MANY, &m) == 0 &&
		      proto_mreq_decode(gbuf, w.len, PROTO_OP_PURGE_MANY, &d, &why) == 0 &&
		      d.inos.n == PROTO_MAX_INOS &&
		      proto_inos_at(&d.inos, PROTO_MAX_INOS - 1) == 1000 + PROTO_MAX_INOS - 1,
		      "%u inodes accepted", PROTO_MAX_INOS);
	}

	/* times */
	BAD_REQ(PROTO_OP_SETATTR, "atime.nsec", m_.atime.nsec = 1000000000u);
	BAD_REQ(PROTO_OP_SETATTR, "mtime.nsec", m_.mtime.nsec = 0xffffffffu);
	BAD_REQ(PROTO_OP_SETSIZE, "mtime.nsec", m_.mtime.nsec = 1000000000u);

	/* SETBLOCKS: flags, blocks and size bounds */
	BAD_REQ(PROTO_OP_SETBLOCKS, "flags", m_.flags = 0x8);
	BAD_REQ(PROTO_OP_SETBLOCKS, "flags", m_.flags = 0x80000001u);
	BAD_REQ(PROTO_OP_SETBLOCKS, "blocks", m_.blocks = PROTO_MAX_BLOCKS + 1);
	BAD_REQ(PROTO_OP_SETBLOCKS, "blocks", m_.blocks = UINT64_MAX);
	BAD_REQ(PROTO_OP_SETBLOCKS, "size", m_.size = (uint64_t)INT64_MAX + 1);
	BAD_REQ(PROTO_OP_SETBLOCKS, "size", m_.size = UINT64_MAX);
	BAD_REQ(PROTO_OP_SETBLOCKS, "mtime.nsec", m_.mtime.nsec = 1000000000u);
	{
		struct wbuf w;

		full_mreq(PROTO_OP_SETBLOCKS, &m);
		m.flags = PROTO_SB_ALL;
		m.size = (uint64_t)INT64_MAX;
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mreq_encode(&w, PROTO_OP_SETBLOCKS, &m) == 0 &&
		      proto_mreq_decode(gbuf, w.len, PROTO_OP_SETBLOCKS, &d, &why) == 0 &&
		      d.flags == PROTO_SB_ALL && d.size == (uint64_t)INT64_MAX &&
		      d.blocks == PROTO_MAX_BLOCKS, "SETBLOCKS limits accepted");
	}

	/* too many groups: the decoder stops before reading them */
	full_mreq(PROTO_OP_GETATTR, &m);
	bad_mreq(__LINE__, PROTO_OP_GETATTR, &m, PROTO_MAX_GROUPS + 1, "cred.ngroups");
	bad_mreq(__LINE__, PROTO_OP_GETATTR, &m, 1000, "cred.ngroups");
	m.cred.ngroups = PROTO_MAX_GROUPS + 1;
	{
		struct wbuf w;

		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mreq_encode(&w, PROTO_OP_GETATTR, &m) == -EINVAL,
		      "encode 33 groups");
	}
	/* ngroups claims more than are there */
	{
		struct wbuf w;

		wb_init(&w, gbuf, sizeof(gbuf));
		wb_u32(&w, 1);
		wb_u32(&w, 1);
		wb_u16(&w, 5);
		wb_u32(&w, 1);
		rc = proto_mreq_decode(gbuf, w.len, PROTO_OP_STATFS, &d, &why);
		CHECK_ERR(rc, -EBADMSG, why, "cred.groups", "short groups");
	}

	/* unknown ops */
	static const uint16_t bad_ops[] = { 0, PROTO_OP_NET_HELLO, 9, 35, 36, 37,
		PROTO_OP_BATCH, PROTO_OP_MGR_LAST, PROTO_OP_IO_READ, PROTO_OP_IO_STATFS, 999, 0xffff };
	for (size_t i = 0; i < sizeof(bad_ops) / sizeof(bad_ops[0]); i++) {
		struct wbuf w;

		full_mreq(PROTO_OP_GETATTR, &m);
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mreq_encode(&w, bad_ops[i], &m) == -EINVAL && w.len == 0,
		      "encode op %u", bad_ops[i]);
		rc = proto_mreq_decode(gbuf, 10, bad_ops[i], &d, &why);
		CHECK(rc == -EOPNOTSUPP, "decode op %u: %d", bad_ops[i], rc);
	}
	/* NULL and empty input */
	rc = proto_mreq_decode(NULL, 0, PROTO_OP_STATFS, &d, &why);
	CHECK(rc == -EBADMSG, "empty body: %d", rc);
	rc = proto_mreq_decode(gbuf, 0, PROTO_OP_STATFS, &d, NULL);
	CHECK(rc == -EBADMSG, "NULL why: %d", rc);
}

/* ------------------------------------------------------ metadata replies */

enum { R_ATTR = 1, R_FREED = 2, R_TARGET = 4, R_XATTR = 8, R_STATFS = 16,
       R_DIRENTS = 32 };

static const struct { uint16_t op; uint32_t f; } rep_ops[] = {
	{ PROTO_OP_LOOKUP, R_ATTR }, { PROTO_OP_GETATTR, R_ATTR },
	{ PROTO_OP_SETATTR, R_ATTR }, { PROTO_OP_CREATE, R_ATTR },
	{ PROTO_OP_MKDIR, R_ATTR }, { PROTO_OP_MKNOD, R_ATTR },
	{ PROTO_OP_UNLINK, R_FREED }, { PROTO_OP_RMDIR, 0 },
	{ PROTO_OP_RENAME, R_FREED }, { PROTO_OP_LINK, R_ATTR },
	{ PROTO_OP_SYMLINK, R_ATTR }, { PROTO_OP_READLINK, R_TARGET },
	{ PROTO_OP_READDIR, R_DIRENTS }, { PROTO_OP_STATFS, R_STATFS },
	{ PROTO_OP_GETXATTR, R_XATTR }, { PROTO_OP_SETXATTR, 0 },
	{ PROTO_OP_LISTXATTR, R_XATTR }, { PROTO_OP_REMOVEXATTR, 0 },
	{ PROTO_OP_OPEN, R_ATTR }, { PROTO_OP_ACCESS, 0 },
	{ PROTO_OP_SETSIZE, R_ATTR }, { PROTO_OP_PURGE, 0 },
	{ PROTO_OP_SETBLOCKS, R_ATTR },
};
#define N_REP_OPS (sizeof(rep_ops) / sizeof(rep_ops[0]))

static void raw_time(struct wbuf *w, const struct proto_time *t)
{
	wb_u64(w, (uint64_t)t->sec);
	wb_u32(w, t->nsec);
}

static void raw_layout(struct wbuf *w, const struct proto_layout *l)
{
	wb_u32(w, l->unit);
	wb_u16(w, l->count);
	wb_u16(w, l->first);
	wb_u8(w, l->mirror);
	wb_u8(w, 0);
	wb_u16(w, 0);
}

static void raw_attr(struct wbuf *w, const struct proto_attr *a)
{
	wb_u64(w, a->ino);
	wb_u32(w, a->mode);
	wb_u32(w, a->nlink);
	wb_u32(w, a->uid);
	wb_u32(w, a->gid);
	wb_u32(w, a->rdev);
	wb_u64(w, a->size);
	wb_u64(w, a->blocks);
	raw_time(w, &a->atime);
	raw_time(w, &a->mtime);
	raw_time(w, &a->ctime);
	raw_layout(w, &a->layout);
}

static void raw_statfs(struct wbuf *w, const struct proto_statfs *s)
{
	wb_u64(w, s->bsize);
	wb_u64(w, s->blocks);
	wb_u64(w, s->bfree);
	wb_u64(w, s->bavail);
	wb_u64(w, s->files);
	wb_u64(w, s->ffree);
	wb_u32(w, s->namemax);
}

static void raw_mrep(struct wbuf *w, uint32_t f, const struct proto_mrep *m,
		     uint8_t eof_wire)
{
	if (f & R_ATTR) raw_attr(w, &m->attr);
	if (f & R_FREED) { wb_u64(w, m->freed.ino); raw_layout(w, &m->freed.layout); }
	if (f & R_TARGET) wb_str(w, m->target.p, m->target.len);
	if (f & R_XATTR) { wb_u32(w, m->xsize); wb_blob(w, m->xvalue.p, m->xvalue.len); }
	if (f & R_STATFS) raw_statfs(w, &m->st);
	if (f & R_DIRENTS) {
		wb_u32(w, m->ndirents);
		wb_u8(w, eof_wire);
		wb_blob(w, m->dirents.p, m->dirents.len);
	}
}

static void sample_attr(struct proto_attr *a, uint64_t ino)
{
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->mode = 0100640;
	a->nlink = 3;
	a->uid = 1000;
	a->gid = 0xfffffff0u;
	a->rdev = 0x1234;
	a->size = 0x123456789abull;
	a->blocks = 0x91a2b3c4ull;
	a->atime = (struct proto_time){ -5, 1 };
	a->mtime = (struct proto_time){ 1700000001, 999999999 };
	a->ctime = (struct proto_time){ INT64_MAX, 0 };
	a->layout = (struct proto_layout){ 65536, 4, 2, 1 };
}

static bool attr_eq(const struct proto_attr *a, const struct proto_attr *b)
{
	return a->ino == b->ino && a->mode == b->mode && a->nlink == b->nlink &&
	       a->uid == b->uid && a->gid == b->gid && a->rdev == b->rdev &&
	       a->size == b->size && a->blocks == b->blocks &&
	       a->atime.sec == b->atime.sec && a->atime.nsec == b->atime.nsec &&
	       a->mtime.sec == b->mtime.sec && a->mtime.nsec == b->mtime.nsec &&
	       a->ctime.sec == b->ctime.sec && a->ctime.nsec == b->ctime.nsec &&
	       a->layout.unit == b->layout.unit && a->layout.count == b->layout.count &&
	       a->layout.first == b->layout.first;
}

static uint8_t dirbuf[8192];
static const char *const dnames[] = { "a", "second entry", "\xe2\x98\x83 snow" };

/* Build a 3-entry dirent list into dirbuf. */
static size_t build_dirents(void)
{
	struct wbuf w;
	struct proto_attr a;

	wb_init(&w, dirbuf, sizeof(dirbuf));
	for (int i = 0; i < 3; i++) {
		size_t before = w.len;

		sample_attr(&a, 100u + (unsigned)i);
		if (i == 1)
			a.layout = (struct proto_layout){ 0, 0, 0 };
		proto_dirent_put(&w, 1000u + (unsigned)i, dnames[i], strlen(dnames[i]), &a);
		CHECK(w.len - before == proto_dirent_size(strlen(dnames[i])),
		      "dirent_size %d", i);
	}
	CHECK(w.err == 0, "dirent put");
	return w.len;
}

static void full_mrep(struct proto_mrep *m)
{
	static const char xv[] = "value\0with nul";

	memset(m, 0, sizeof(*m));
	sample_attr(&m->attr, 77);
	m->freed.ino = 0xabcdef;
	m->freed.layout = (struct proto_layout){ 1u << 26, 256, 255, 1 };
	m->target = S("/abs/target");
	m->xvalue = SL(xv, sizeof(xv) - 1);
	m->xsize = sizeof(xv) - 1;
	m->st = (struct proto_statfs){ 4096, 1ull << 40, 1ull << 39, 1ull << 38,
				       1000000, 999999, 255 };
	m->ndirents = 3;
	m->eof = 1;
	m->dirents = SL((const char *)dirbuf, build_dirents());
}

static void test_mrep(void)
{
	struct proto_mrep m, d;
	const char *why = NULL;
	int rc;

	for (size_t i = 0; i < N_REP_OPS; i++) {
		uint16_t op = rep_ops[i].op;
		uint32_t f = rep_ops[i].f;
		const char *ctx = proto_op_name(op);
		struct wbuf w, w2;
		uint8_t *cp;

		full_mrep(&m);
		wb_init(&w, gbuf, sizeof(gbuf));
		rc = proto_mrep_encode(&w, op, &m);
		CHECK(rc == 0, "%s: rep encode %d", ctx, rc);
		wb_init(&w2, gbuf2, sizeof(gbuf2));
		raw_mrep(&w2, f, &m, 1);
		CHECK(w.len == w2.len && memcmp(gbuf, gbuf2, w.len) == 0,
		      "%s: reply wire bytes differ", ctx);
		cp = dup_exact(gbuf, w.len);
		rc = proto_mrep_decode(cp, w.len, op, &d, &why);
		CHECK(rc == 0, "%s: rep decode %d %s", ctx, rc, rc ? why : "");
		CHECK((f & R_ATTR) ? attr_eq(&d.attr, &m.attr) : d.attr.ino == 0,
		      "%s: attr", ctx);
		CHECK((f & R_FREED) ? d.freed.ino == m.freed.ino &&
		      d.freed.layout.unit == m.freed.layout.unit &&
		      d.freed.layout.count == 256 && d.freed.layout.first == 255
				    : d.freed.ino == 0, "%s: freed", ctx);
		CHECK((f & R_TARGET) ? str_eq(d.target, m.target) : d.target.len == 0,
		      "%s: target", ctx);
		CHECK((f & R_XATTR) ? str_eq(d.xvalue, m.xvalue) && d.xsize == m.xsize
				    : d.xvalue.len == 0 && d.xsize == 0, "%s: xattr", ctx);
		CHECK((f & R_STATFS) ? memcmp(&d.st, &m.st, sizeof(d.st)) == 0
				     : d.st.bsize == 0, "%s: statfs", ctx);
		CHECK((f & R_DIRENTS) ? d.ndirents == 3 && d.eof == 1 &&
		      str_eq(d.dirents, m.dirents)
				      : d.ndirents == 0 && d.dirents.len == 0,
		      "%s: dirents", ctx);
		if ((f & R_DIRENTS) && rc == 0) {
			struct proto_dirent de;
			struct rbuf r;
			int n = 0;

			rb_init(&r, d.dirents.p, d.dirents.len);
			while ((rc = proto_dirent_next(&r, &de)) == 1) {
				struct proto_attr a;

				sample_attr(&a, 100u + (unsigned)n);
				if (n == 1)
					a.layout = (struct proto_layout){ 0, 0, 0 };
				CHECK(n < 3 && de.cookie == 1000u + (unsigned)n &&
				      str_eq(de.name, S(dnames[n])) && attr_eq(&de.attr, &a),
				      "dirent %d", n);
				n++;
			}
			CHECK(rc == 0 && n == 3, "dirent walk rc %d n %d", rc, n);
		}
		free(cp);
		for (size_t n = 0; n < w.len; n++) {
			cp = dup_exact(gbuf, n);
			why = NULL;
			rc = proto_mrep_decode(cp, n, op, &d, &why);
			CHECK(rc == -EBADMSG && why, "%s: rep truncated at %zu: %d",
			      ctx, n, rc);
			free(cp);
		}
		gbuf[w.len] = 0;
		rc = proto_mrep_decode(gbuf, w.len + 1, op, &d, &why);
		CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", ctx);
	}

	/* xattr size query: empty value, full size */
	{
		struct wbuf w;

		full_mrep(&m);
		m.xvalue = SL(NULL, 0);
		m.xsize = 65536;
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mrep_encode(&w, PROTO_OP_GETXATTR, &m) == 0, "size query enc");
		rc = proto_mrep_decode(gbuf, w.len, PROTO_OP_GETXATTR, &d, &why);
		CHECK(rc == 0 && d.xsize == 65536 && d.xvalue.len == 0, "size query dec");
	}

	/* malformed replies */
#define BAD_REP(op_, field, eofw, ...)                                        \
	do {                                                                 \
		struct wbuf w_;                                              \
		uint8_t *cp_;                                                \
		full_mrep(&m);                                               \
		__VA_ARGS__;                                                 \
		wb_init(&w_, gbuf, sizeof(gbuf));                            \
		for (size_t j_ = 0; j_ < N_REP_OPS; j_++)                    \
			if (rep_ops[j_].op == (op_))                          \
				raw_mrep(&w_, rep_ops[j_].f, &m, eofw);      \
		cp_ = dup_exact(gbuf, w_.len);                               \
		why = NULL;                                                  \
		rc = proto_mrep_decode(cp_, w_.len, op_, &d, &why);           \
		CHECK_ERR(rc, -EBADMSG, why, field, #__VA_ARGS__);           \
		free(cp_);                                                   \
		if ((eofw) <= 1) {                                           \
			wb_init(&w_, gbuf, sizeof(gbuf));                    \
			CHECK(proto_mrep_encode(&w_, op_, &m) == -EINVAL,     \
			      "encode %s", #__VA_ARGS__);                    \
		}                                                            \
	} while (0)

	BAD_REP(PROTO_OP_GETATTR, "attr.atime.nsec", 0, m.attr.atime.nsec = 1000000000u);
	BAD_REP(PROTO_OP_LOOKUP, "attr.mtime.nsec", 0, m.attr.mtime.nsec = 2000000000u);
	BAD_REP(PROTO_OP_CREATE, "attr.ctime.nsec", 0, m.attr.ctime.nsec = 0xffffffffu);
	BAD_REP(PROTO_OP_OPEN, "attr.layout", 0, m.attr.layout.unit = 4097);
	BAD_REP(PROTO_OP_OPEN, "attr.layout", 0, m.attr.layout.unit = 2048);
	BAD_REP(PROTO_OP_OPEN, "attr.layout", 0, m.attr.layout.unit = 1u << 27);
	BAD_REP(PROTO_OP_OPEN, "attr.layout", 0, m.attr.layout.count = 0);
	BAD_REP(PROTO_OP_OPEN, "attr.layout", 0, m.attr.layout = (struct proto_layout){ 0, 1, 0 });
	BAD_REP(PROTO_OP_OPEN, "attr.layout", 0, m.attr.layout = (struct proto_layout){ 0, 0, 1 });
	BAD_REP(PROTO_OP_OPEN, "attr.layout", 0, m.attr.layout.mirror = 0);
	BAD_REP(PROTO_OP_OPEN, "attr.layout", 0, m.attr.layout.mirror = 3);
	BAD_REP(PROTO_OP_OPEN, "attr.layout", 0, m.attr.layout = (struct proto_layout){ 0, 0, 0, 1 });
	BAD_REP(PROTO_OP_OPEN, "attr.layout", 0,
		m.attr.layout = (struct proto_layout){ 65536, 129, 0, 2 });
	BAD_REP(PROTO_OP_OPEN, "attr.layout", 0,
		m.attr.layout = (struct proto_layout){ 65536, 2, 128, 2 });
	BAD_REP(PROTO_OP_UNLINK, "freed.layout", 0, m.freed.layout.unit = 12345);
	BAD_REP(PROTO_OP_RENAME, "freed.layout", 0, m.freed.layout.count = 0);
	BAD_REP(PROTO_OP_READLINK, "target", 0, m.target = S(""));
	BAD_REP(PROTO_OP_READLINK, "target", 0, m.target = SL("a\0b", 3));
	BAD_REP(PROTO_OP_GETXATTR, "xsize", 0, m.xsize = m.xvalue.len - 1);
	BAD_REP(PROTO_OP_LISTXATTR, "xattr", 0, m.xvalue = SL((const char *)gbuf2, PROTO_MAX_XATTR_VALUE + 1); m.xsize = PROTO_MAX_XATTR_VALUE + 1);
	BAD_REP(PROTO_OP_READDIR, "ndirents", 0, m.ndirents = 100);
	BAD_REP(PROTO_OP_READDIR, "eof", 2, m.eof = 1);
	BAD_REP(PROTO_OP_READDIR, "eof", 0xff, m.eof = 1);
	BAD_REP(PROTO_OP_READDIR, "dirents", 0, m.dirents = SL((const char *)gbuf2, PROTO_MAX_BODY + 1));

	/* dirent entries are validated as they are walked */
	{
		static const struct { const char *name; size_t len; } bad[] = {
			{ "", 0 }, { "...\0", 4 }, { "a/b", 3 }, { "a\0b", 3 },
		};
		struct proto_attr a;
		struct proto_dirent de;
		struct wbuf w;
		struct rbuf r;

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			sample_attr(&a, 5);
			wb_init(&w, dirbuf, sizeof(dirbuf));
			proto_dirent_put(&w, 1, "ok", 2, &a);
			proto_dirent_put(&w, 2, bad[i].name, bad[i].len, &a);
			rb_init(&r, dirbuf, w.len);
			CHECK(proto_dirent_next(&r, &de) == 1, "good dirent first");
			CHECK(proto_dirent_next(&r, &de) == -EBADMSG, "bad dirent %zu", i);
			CHECK(proto_dirent_next(&r, &de) == -EBADMSG, "stays bad %zu", i);
		}
		/* every listing starts with "." and "..": those are entries */
		sample_attr(&a, 5);
		wb_init(&w, dirbuf, sizeof(dirbuf));
		proto_dirent_put(&w, 1, ".", 1, &a);
		proto_dirent_put(&w, 2, "..", 2, &a);
		rb_init(&r, dirbuf, w.len);
		CHECK(proto_dirent_next(&r, &de) == 1 && de.name.len == 1, "dot dirent");
		CHECK(proto_dirent_next(&r, &de) == 1 && de.name.len == 2, "dotdot dirent");
		CHECK(proto_dirent_next(&r, &de) == 0, "end after dotdot");
		sample_attr(&a, 5);
		a.layout.count = 0;
		wb_init(&w, dirbuf, sizeof(dirbuf));
		proto_dirent_put(&w, 1, "x", 1, &a);
		rb_init(&r, dirbuf, w.len);
		CHECK(proto_dirent_next(&r, &de) == -EBADMSG, "dirent bad layout");
		sample_attr(&a, 5);
		a.ctime.nsec = 1000000000u;
		wb_init(&w, dirbuf, sizeof(dirbuf));
		proto_dirent_put(&w, 1, "x", 1, &a);
		rb_init(&r, dirbuf, w.len);
		CHECK(proto_dirent_next(&r, &de) == -EBADMSG, "dirent bad nsec");
		/* truncated list */
		sample_attr(&a, 5);
		wb_init(&w, dirbuf, sizeof(dirbuf));
		proto_dirent_put(&w, 1, "xyz", 3, &a);
		for (size_t n = 1; n < w.len; n++) {
			uint8_t *cp = dup_exact(dirbuf, n);

			rb_init(&r, cp, n);
			CHECK(proto_dirent_next(&r, &de) == -EBADMSG, "dirent cut at %zu", n);
			free(cp);
		}
		/* a full buffer: put fails as a whole */
		wb_init(&w, dirbuf, proto_dirent_size(3) - 1);
		proto_dirent_put(&w, 1, "xyz", 3, &a);
		CHECK(w.err == -EMSGSIZE && w.len == 0, "dirent put no room");
		/* empty list */
		rb_init(&r, NULL, 0);
		CHECK(proto_dirent_next(&r, &de) == 0, "empty dirent list");
	}

	/* MOUNT and non-mgr ops are not mreps */
	static const uint16_t bad_ops[] = { PROTO_OP_MOUNT, 0, PROTO_OP_NET_CREDIT,
		PROTO_OP_BATCH, PROTO_OP_MGR_LAST, PROTO_OP_IO_WRITE, 0xffff };
	for (size_t i = 0; i < sizeof(bad_ops) / sizeof(bad_ops[0]); i++) {
		struct wbuf w;

		full_mrep(&m);
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mrep_encode(&w, bad_ops[i], &m) == -EINVAL, "rep enc op %u",
		      bad_ops[i]);
		CHECK(proto_mrep_decode(gbuf, 0, bad_ops[i], &d, &why) == -EOPNOTSUPP,
		      "rep dec op %u", bad_ops[i]);
	}
}

/* ----------------------------------------------------------------- mount */

static void sample_mount(struct proto_mount *m, uint16_t n)
{
	static const char *const hosts[] = { "127.0.0.1", "iod-1.example.org", "::1", "h" };

	memset(m, 0, sizeof(*m));
	m->fsid = 0x0123456789abcdefull;
	m->deflayout = (struct proto_layout){ 65536, n, 0, 1 };
	m->niods = n;
	for (uint16_t i = 0; i < n; i++) {
		m->iods[i].id = i;
		m->iods[i].host = S(hosts[i % 4]);
		m->iods[i].port = (uint16_t)(7401 + i);
	}
	m->ngroups = n / 2; /* {1, 0}, {2, 3}, {5, 4}, ...: order is free */
	for (uint16_t g = 0; g < n / 2; g++)
		m->groups[g] = (struct proto_group){ { (uint16_t)(2 * g + !(g & 1)),
						       (uint16_t)(2 * g + (g & 1)) } };
}

/* Append a mount's group table as the wire has it. */
static void raw_groups(struct wbuf *w, const struct proto_mount *m)
{
	wb_u16(w, m->ngroups);
	for (unsigned g = 0; g < m->ngroups && g < PROTO_MAX_IODS / 2; g++) {
		wb_u16(w, m->groups[g].iod[0]);
		wb_u16(w, m->groups[g].iod[1]);
	}
}

static void test_mount(void)
{
	static char longhost[PROTO_MAX_HOST + 2];
	struct proto_mount m, d;
	struct wbuf w, w2;
	const char *why;
	uint8_t *cp;
	int rc;

	memset(longhost, 'h', sizeof(longhost) - 1);
	sample_mount(&m, 4);
	m.deflayout.count = 3;
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_mount_encode(&w, &m) == 0, "mount encode");
	wb_init(&w2, gbuf2, sizeof(gbuf2));
	wb_u64(&w2, m.fsid);
	raw_layout(&w2, &m.deflayout);
	wb_u16(&w2, 4);
	for (int i = 0; i < 4; i++) {
		wb_u16(&w2, m.iods[i].id);
		wb_str(&w2, m.iods[i].host.p, m.iods[i].host.len);
		wb_u16(&w2, m.iods[i].port);
	}
	raw_groups(&w2, &m);
	CHECK(w.len == w2.len && memcmp(gbuf, gbuf2, w.len) == 0, "mount wire bytes");
	cp = dup_exact(gbuf, w.len);
	rc = proto_mount_decode(cp, w.len, &d, &why);
	CHECK(rc == 0 && d.fsid == m.fsid && d.niods == 4 && d.deflayout.unit == 65536 &&
	      d.deflayout.count == 3 && d.deflayout.mirror == 1, "mount decode %d", rc);
	CHECK(rc == 0 && d.ngroups == 2 && d.groups[0].iod[0] == 1 &&
	      d.groups[0].iod[1] == 0 && d.groups[1].iod[0] == 2 &&
	      d.groups[1].iod[1] == 3, "mount groups");
	free(cp);

	/* a mirrored default layout: count counts groups */
	m.deflayout = (struct proto_layout){ 4096, 2, 0, 2 };
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_mount_encode(&w, &m) == 0, "mount mirror encode");
	cp = dup_exact(gbuf, w.len);
	rc = proto_mount_decode(cp, w.len, &d, &why);
	CHECK(rc == 0 && d.deflayout.mirror == 2 && d.deflayout.count == 2,
	      "mount mirror decode %d", rc);
	m.deflayout = (struct proto_layout){ 65536, 3, 0, 1 };
	for (int i = 0; i < 4 && rc == 0; i++)
		CHECK(d.iods[i].id == i && str_eq(d.iods[i].host, m.iods[i].host) &&
		      d.iods[i].port == m.iods[i].port, "mount iod %d", i);
	free(cp);
	for (size_t n = 0; n < w.len; n++) {
		cp = dup_exact(gbuf, n);
		CHECK(proto_mount_decode(cp, n, &d, &why) == -EBADMSG, "mount cut %zu", n);
		free(cp);
	}
	gbuf[w.len] = 7;
	rc = proto_mount_decode(gbuf, w.len + 1, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "mount trailing");

	/* the largest table */
	sample_mount(&m, PROTO_MAX_IODS);
	m.iods[PROTO_MAX_IODS - 1].host = SL(longhost, PROTO_MAX_HOST);
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_mount_encode(&w, &m) == 0, "mount 256 enc");
	rc = proto_mount_decode(gbuf, w.len, &d, &why);
	CHECK(rc == 0 && d.niods == PROTO_MAX_IODS &&
	      d.iods[255].host.len == PROTO_MAX_HOST, "mount 256 dec %d", rc);

#define BAD_MOUNT(field, nwire, ...)                                         \
	do {                                                                 \
		sample_mount(&m, 4);                                         \
		__VA_ARGS__;                                                 \
		wb_init(&w, gbuf, sizeof(gbuf));                             \
		CHECK(proto_mount_encode(&w, &m) == -EINVAL, "mount enc %s", \
		      #__VA_ARGS__);                                         \
		wb_init(&w, gbuf, sizeof(gbuf));                             \
		wb_u64(&w, m.fsid);                                          \
		raw_layout(&w, &m.deflayout);                                \
		wb_u16(&w, nwire);                                           \
		for (unsigned i_ = 0, n_ = (nwire); i_ < n_ && i_ < PROTO_MAX_IODS; i_++) { \
			wb_u16(&w, m.iods[i_].id);                           \
			wb_str(&w, m.iods[i_].host.p, m.iods[i_].host.len);  \
			wb_u16(&w, m.iods[i_].port);                         \
		}                                                            \
		raw_groups(&w, &m);                                          \
		cp = dup_exact(gbuf, w.len);                                 \
		why = NULL;                                                  \
		rc = proto_mount_decode(cp, w.len, &d, &why);                \
		CHECK_ERR(rc, -EBADMSG, why, field, #__VA_ARGS__);           \
		free(cp);                                                    \
	} while (0)

	BAD_MOUNT("niods", 0, m.niods = 0);
	BAD_MOUNT("niods", 257, m.niods = 257);
	BAD_MOUNT("niods", 0xffff, m.niods = 0xffff);
	BAD_MOUNT("iod.id", 4, m.iods[2].id = 3);
	BAD_MOUNT("iod.port", 4, m.iods[3].port = 0);
	BAD_MOUNT("iod.host", 4, m.iods[0].host = S(""));
	BAD_MOUNT("iod", 4, m.iods[1].host = SL(longhost, PROTO_MAX_HOST + 1));
	BAD_MOUNT("iod", 4, m.iods[1].host = SL("a\0b", 3));
	BAD_MOUNT("deflayout.unit", 4, m.deflayout.unit = 1000);
	BAD_MOUNT("deflayout.count", 4, m.deflayout.count = 0);
	BAD_MOUNT("deflayout.count", 4, m.deflayout.count = 5);
	BAD_MOUNT("deflayout.mirror", 4, m.deflayout.mirror = 0);
	BAD_MOUNT("deflayout.mirror", 4, m.deflayout.mirror = 3);
	BAD_MOUNT("deflayout.count", 4, m.deflayout.mirror = 2; m.deflayout.count = 3);
	BAD_MOUNT("deflayout.count", 4, m.deflayout.mirror = 2; m.deflayout.count = 1;
		  m.ngroups = 0);
	BAD_MOUNT("ngroups", 4, m.ngroups = 3; m.groups[2] = m.groups[1]);
	BAD_MOUNT("group.iod", 4, m.groups[1].iod[1] = 4);
	BAD_MOUNT("group.iod", 4, m.groups[1].iod[1] = 2);
	BAD_MOUNT("group.iod", 4, m.groups[1].iod[0] = 0);
}

/* --------------------------------------------------------- iod requests */

static void test_ioreq(void)
{
	static struct proto_seg segs[PROTO_MAX_SEGS + 1], out[PROTO_MAX_SEGS];
	struct proto_ioreq q, d;
	struct wbuf w;
	const char *why;
	uint8_t *cp;
	uint64_t sum;
	int rc;

	/* read and write, with 1, 3 and 1024 segments */
	static const uint32_t counts[] = { 1, 3, PROTO_MAX_SEGS };
	for (int op = PROTO_OP_IO_READ; op <= PROTO_OP_IO_WRITE; op++) {
		for (size_t c = 0; c < 3; c++) {
			uint32_t n = counts[c];

			sum = 0;
			for (uint32_t i = 0; i < n; i++) {
				segs[i].off = (uint64_t)i * 1000003u + (i == 0 ? (1ull << 61) : 0);
				segs[i].len = 1 + i * 7u;
				sum += segs[i].len;
			}
			/* READ ends in u32 flags (0 or PROTO_IO_MIRROR); WRITE
			 * has none (its flags are not sent) */
			int rd = op == PROTO_OP_IO_READ;
			uint32_t fl = rd && c == 1 ? 0 : PROTO_IO_MIRROR;
			size_t want = 8 + 4 + 16 * (size_t)n + (rd ? 4 : 0);

			q = (struct proto_ioreq){ .ino = 0xfeedfacecafebeefull,
						  .nsegs = n, .segs = segs,
						  .size = 77, .flags = fl };
			wb_init(&w, gbuf, sizeof(gbuf));
			rc = proto_ioreq_encode(&w, (uint16_t)op, &q);
			CHECK(rc == 0 && w.len == want,
			      "io enc op %d n %u rc %d len %zu", op, n, rc, w.len);
			CHECK(gbuf[8] == (uint8_t)n && gbuf[9] == (uint8_t)(n >> 8),
			      "nsegs bytes");
			CHECK(!rd || (w.len == want && gbuf[want - 4] == 0 &&
				      gbuf[want - 3] == (uint8_t)(fl >> 8) &&
				      gbuf[want - 2] == 0 && gbuf[want - 1] == 0),
			      "read flags bytes");
			cp = dup_exact(gbuf, w.len);
			rc = proto_ioreq_decode(cp, w.len, (uint16_t)op, sum, &d, out, &why);
			CHECK(rc == 0 && d.ino == q.ino && d.nsegs == n && d.segs == out &&
			      d.size == 0 && d.flags == (rd ? fl : 0),
			      "io dec op %d n %u rc %d", op, n, rc);
			for (uint32_t i = 0; i < n && rc == 0; i++)
				CHECK(out[i].off == segs[i].off && out[i].len == segs[i].len,
				      "seg %u", i);
			rc = proto_ioreq_decode(cp, w.len, (uint16_t)op, sum + 1, &d, out, &why);
			CHECK_ERR(rc, -EBADMSG, why, "segs sum", "sum + 1");
			rc = proto_ioreq_decode(cp, w.len, (uint16_t)op, sum - 1, &d, out, &why);
			CHECK_ERR(rc, -EBADMSG, why, "segs sum", "sum - 1");
			free(cp);
			if (n <= 3) {
				for (size_t k = 0; k < w.len; k++) {
					cp = dup_exact(gbuf, k);
					rc = proto_ioreq_decode(cp, k, (uint16_t)op, sum, &d, out, &why);
					CHECK(rc == -EBADMSG, "io cut %zu: %d", k, rc);
					free(cp);
				}
				gbuf[w.len] = 0;
				rc = proto_ioreq_decode(gbuf, w.len + 1, (uint16_t)op, sum, &d,
							out, &why);
				CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "io trailing");
			}
		}
	}

	/* remove many: a list of inodes, 1..PROTO_MAX_INOS */
	{
		static uint64_t many[PROTO_MAX_INOS + 1];
		uint8_t raw[16];
		struct wbuf rw;

		q = (struct proto_ioreq){ .inos = { 3, some_inos, NULL } };
		wb_init(&w, gbuf, sizeof(gbuf));
		rc = proto_ioreq_encode(&w, PROTO_OP_IO_REMOVE_MANY, &q);
		CHECK(rc == 0 && w.len == 4 + 3 * 8, "remove many enc %d", rc);
		cp = dup_exact(gbuf, w.len);
		rc = proto_ioreq_decode(cp, w.len, PROTO_OP_IO_REMOVE_MANY, 0, &d, out, &why);
		CHECK(rc == 0 && inos_eq(&d.inos, &q.inos) && d.ino == 0,
		      "remove many dec %d", rc);
		free(cp);
		for (size_t k = 0; k < w.len; k++) {
			cp = dup_exact(gbuf, k);
			rc = proto_ioreq_decode(cp, k, PROTO_OP_IO_REMOVE_MANY, 0, &d, out, &why);
			CHECK_ERR(rc, -EBADMSG, why, "inos", "remove many cut");
			free(cp);
		}
		for (uint32_t i = 0; i <= PROTO_MAX_INOS; i++)
			many[i] = i;
		q.inos = (struct proto_inos){ PROTO_MAX_INOS + 1, many, NULL };
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_REMOVE_MANY, &q) == -EINVAL,
		      "remove many: too many refused");
		q.inos.n = 0;
		CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_REMOVE_MANY, &q) == -EINVAL,
		      "remove many: none refused");
		/* counts the decoder refuses before reading entries */
		wb_init(&rw, raw, sizeof(raw));
		wb_u32(&rw, 0);
		rc = proto_ioreq_decode(raw, rw.len, PROTO_OP_IO_REMOVE_MANY, 0, &d, out, &why);
		CHECK_ERR(rc, -EBADMSG, why, "inos", "remove many n 0");
		wb_init(&rw, raw, sizeof(raw));
		wb_u32(&rw, PROTO_MAX_INOS + 1);
		wb_u64(&rw, 5);
		rc = proto_ioreq_decode(raw, rw.len, PROTO_OP_IO_REMOVE_MANY, 0, &d, out, &why);
		CHECK_ERR(rc, -EBADMSG, why, "inos", "remove many n 257");
	}

	/* truncate, remove, fsync, statfs */
	{
		static const struct { uint16_t op; size_t len; } o[] = {
			{ PROTO_OP_IO_TRUNCATE, 16 }, { PROTO_OP_IO_REMOVE, 8 },
			{ PROTO_OP_IO_FSYNC, 12 }, { PROTO_OP_IO_STATFS, 0 },
		};
		for (size_t i = 0; i < 4; i++) {
			q = (struct proto_ioreq){ .ino = 12345, .size = 1ull << 62,
						  .flags = 1, .nsegs = 0 };
			wb_init(&w, gbuf, sizeof(gbuf));
			rc = proto_ioreq_encode(&w, o[i].op, &q);
			CHECK(rc == 0 && w.len == o[i].len, "%s enc", proto_op_name(o[i].op));
			cp = dup_exact(gbuf, w.len);
			rc = proto_ioreq_decode(cp, w.len, o[i].op, 0, &d, out, &why);
			CHECK(rc == 0, "%s dec %d", proto_op_name(o[i].op), rc);
			CHECK(d.ino == (o[i].len ? 12345u : 0u), "ino");
			CHECK(d.size == (o[i].op == PROTO_OP_IO_TRUNCATE ? 1ull << 62 : 0), "size");
			CHECK(d.flags == (o[i].op == PROTO_OP_IO_FSYNC ? 1u : 0u), "flags");
			free(cp);
			for (size_t k = 0; k < w.len; k++) {
				cp = dup_exact(gbuf, k);
				CHECK(proto_ioreq_decode(cp, k, o[i].op, 0, &d, out, &why) ==
				      -EBADMSG, "%s cut %zu", proto_op_name(o[i].op), k);
				free(cp);
			}
			gbuf[w.len] = 0;
			rc = proto_ioreq_decode(gbuf, w.len + 1, o[i].op, 0, &d, out, &why);
			CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", proto_op_name(o[i].op));
		}
	}

	/* fallocate, seek, blocks */
	{
		static const struct { uint16_t op; size_t len; } o[] = {
			{ PROTO_OP_IO_FALLOCATE, 28 }, { PROTO_OP_IO_SEEK, 20 },
			{ PROTO_OP_IO_BLOCKS, 8 },
		};
		static const uint32_t modes[] = { 0, PROTO_FALLOC_KEEP_SIZE,
			PROTO_FALLOC_PUNCH_HOLE | PROTO_FALLOC_KEEP_SIZE,
			PROTO_FALLOC_ZERO_RANGE,
			PROTO_FALLOC_ZERO_RANGE | PROTO_FALLOC_KEEP_SIZE };
		for (size_t i = 0; i < 3; i++) {
			uint16_t op = o[i].op;

			q = (struct proto_ioreq){ .ino = 777, .size = 1ull << 62,
						  .flags = PROTO_SEEK_HOLE,
						  .off = (1ull << 62) - 8192,
						  .len = 8192, .mode = modes[i + 2] };
			wb_init(&w, gbuf, sizeof(gbuf));
			rc = proto_ioreq_encode(&w, op, &q);
			CHECK(rc == 0 && w.len == o[i].len, "%s enc %d", proto_op_name(op), rc);
			cp = dup_exact(gbuf, w.len);
			rc = proto_ioreq_decode(cp, w.len, op, 0, &d, out, &why);
			CHECK(rc == 0 && d.ino == 777, "%s dec %d", proto_op_name(op), rc);
			CHECK(op == PROTO_OP_IO_FALLOCATE ?
			      d.off == q.off && d.len == q.len && d.mode == q.mode &&
			      d.size == 0 && d.flags == 0 :
			      op == PROTO_OP_IO_SEEK ?
			      d.size == q.size && d.flags == q.flags && d.len == 0 :
			      d.size == 0 && d.flags == 0 && d.len == 0,
			      "%s fields", proto_op_name(op));
			free(cp);
			for (size_t k = 0; k < w.len; k++) {
				cp = dup_exact(gbuf, k);
				CHECK(proto_ioreq_decode(cp, k, op, 0, &d, out, &why) ==
				      -EBADMSG, "%s cut %zu", proto_op_name(op), k);
				free(cp);
			}
			gbuf[w.len] = 0;
			rc = proto_ioreq_decode(gbuf, w.len + 1, op, 0, &d, out, &why);
			CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", proto_op_name(op));
		}
		for (size_t i = 0; i < 5; i++) {
			q = (struct proto_ioreq){ .ino = 1, .off = 0, .len = 1,
						  .mode = modes[i] };
			wb_init(&w, gbuf, sizeof(gbuf));
			CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_FALLOCATE, &q) == 0 &&
			      proto_ioreq_decode(gbuf, w.len, PROTO_OP_IO_FALLOCATE, 0,
						 &d, out, &why) == 0 &&
			      d.mode == modes[i], "fallocate mode %#x", modes[i]);
		}
		/* the encoder refuses what the decoder would */
		q = (struct proto_ioreq){ .ino = 1, .off = 0, .len = 0 };
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_FALLOCATE, &q) == -EINVAL,
		      "enc fallocate len 0");
		q.len = 1;
		q.mode = PROTO_FALLOC_PUNCH_HOLE;
		CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_FALLOCATE, &q) == -EINVAL,
		      "enc punch without keep size");
		q.mode = 0;
		q.off = 1ull << 62;
		CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_FALLOCATE, &q) == -EINVAL,
		      "enc fallocate past 2^62");
		q = (struct proto_ioreq){ .ino = 1, .flags = 2 };
		CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_SEEK, &q) == -EINVAL,
		      "enc seek flags");
		CHECK(w.len == 0, "nothing written on -EINVAL");
	}

	/* u64 replies of IO_SEEK / IO_BLOCKS */
	{
		uint64_t v = 0;

		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_ioval_encode(&w, 1ull << 62) == 0 && w.len == 8, "ioval enc");
		CHECK(proto_ioval_decode(gbuf, 8, &v, &why) == 0 && v == 1ull << 62,
		      "ioval dec");
		for (size_t k = 0; k < 8; k++) {
			cp = dup_exact(gbuf, k);
			rc = proto_ioval_decode(cp, k, &v, &why);
			CHECK_ERR(rc, -EBADMSG, why, "value", "ioval cut");
			free(cp);
		}
		rc = proto_ioval_decode(gbuf, 9, &v, &why);
		CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "ioval trailing");
		wb_init(&w, gbuf, sizeof(gbuf));
		proto_ioval_encode(&w, (1ull << 62) + 1);
		rc = proto_ioval_decode(gbuf, 8, &v, &why);
		CHECK_ERR(rc, -EBADMSG, why, "value", "ioval above 2^62");
		wb_init(&w, gbuf, 4);
		CHECK(proto_ioval_encode(&w, 1) == -EMSGSIZE, "ioval no room");
	}

	/* bad requests */
#define BAD_IO(op, expect, field, ...)                                       \
	do {                                                                 \
		wb_init(&w, gbuf, sizeof(gbuf));                             \
		__VA_ARGS__;                                                 \
		cp = dup_exact(gbuf, w.len);                                 \
		why = NULL;                                                  \
		rc = proto_ioreq_decode(cp, w.len, op, expect, &d, out, &why); \
		CHECK_ERR(rc, -EBADMSG, why, field, #__VA_ARGS__);           \
		free(cp);                                                    \
	} while (0)

	BAD_IO(PROTO_OP_IO_READ, 0, "nsegs", wb_u64(&w, 1); wb_u32(&w, 0));
	BAD_IO(PROTO_OP_IO_READ, 0, "nsegs", wb_u64(&w, 1); wb_u32(&w, PROTO_MAX_SEGS + 1));
	BAD_IO(PROTO_OP_IO_WRITE, 0, "nsegs", wb_u64(&w, 1); wb_u32(&w, 0xffffffffu));
	BAD_IO(PROTO_OP_IO_WRITE, 10, "segs", wb_u64(&w, 1); wb_u32(&w, 2);
	       wb_u64(&w, 0); wb_u64(&w, 10));
	BAD_IO(PROTO_OP_IO_READ, 0, "seg", wb_u64(&w, 1); wb_u32(&w, 1);
	       wb_u64(&w, 0); wb_u64(&w, 0));
	BAD_IO(PROTO_OP_IO_READ, 2, "seg", wb_u64(&w, 1); wb_u32(&w, 1);
	       wb_u64(&w, UINT64_MAX); wb_u64(&w, 2));
	BAD_IO(PROTO_OP_IO_READ, 1, "seg", wb_u64(&w, 1); wb_u32(&w, 1);
	       wb_u64(&w, 1ull << 62); wb_u64(&w, 1));
	BAD_IO(PROTO_OP_IO_READ, 1ull << 62, "seg", wb_u64(&w, 1); wb_u32(&w, 1);
	       wb_u64(&w, 1); wb_u64(&w, 1ull << 62));
	BAD_IO(PROTO_OP_IO_WRITE, 0, "seg", wb_u64(&w, 1); wb_u32(&w, 2);
	       wb_u64(&w, 0); wb_u64(&w, UINT64_MAX); wb_u64(&w, 0); wb_u64(&w, 1));
	BAD_IO(PROTO_OP_IO_WRITE, 1, "segs sum", wb_u64(&w, 1); wb_u32(&w, 2);
	       wb_u64(&w, 0); wb_u64(&w, 1ull << 61); wb_u64(&w, 0);
	       wb_u64(&w, 1ull << 61));
	BAD_IO(PROTO_OP_IO_TRUNCATE, 0, "size", wb_u64(&w, 1); wb_u64(&w, (1ull << 62) + 1));
	BAD_IO(PROTO_OP_IO_TRUNCATE, 0, "size", wb_u64(&w, 1); wb_u64(&w, UINT64_MAX));
	BAD_IO(PROTO_OP_IO_FSYNC, 0, "flags", wb_u64(&w, 1); wb_u32(&w, 2));
	BAD_IO(PROTO_OP_IO_FSYNC, 0, "flags", wb_u64(&w, 1); wb_u32(&w, 0x80000000u));
	BAD_IO(PROTO_OP_IO_SEEK, 0, "flags", wb_u64(&w, 1); wb_u64(&w, 0); wb_u32(&w, 2));
	BAD_IO(PROTO_OP_IO_SEEK, 0, "size", wb_u64(&w, 1); wb_u64(&w, UINT64_MAX);
	       wb_u32(&w, 0));
	BAD_IO(PROTO_OP_IO_FALLOCATE, 0, "range", wb_u64(&w, 1); wb_u64(&w, 0);
	       wb_u64(&w, 0); wb_u32(&w, 0));
	BAD_IO(PROTO_OP_IO_FALLOCATE, 0, "range", wb_u64(&w, 1);
	       wb_u64(&w, UINT64_MAX); wb_u64(&w, 2); wb_u32(&w, 0));
	BAD_IO(PROTO_OP_IO_FALLOCATE, 0, "range", wb_u64(&w, 1);
	       wb_u64(&w, (1ull << 62) - 1); wb_u64(&w, 2); wb_u32(&w, 0));
	BAD_IO(PROTO_OP_IO_FALLOCATE, 0, "range", wb_u64(&w, 1); wb_u64(&w, 1);
	       wb_u64(&w, INT64_MAX); wb_u32(&w, 0));
	BAD_IO(PROTO_OP_IO_FALLOCATE, 0, "mode", wb_u64(&w, 1); wb_u64(&w, 0);
	       wb_u64(&w, 1); wb_u32(&w, PROTO_FALLOC_PUNCH_HOLE));
	BAD_IO(PROTO_OP_IO_FALLOCATE, 0, "mode", wb_u64(&w, 1); wb_u64(&w, 0);
	       wb_u64(&w, 1); wb_u32(&w, 0x08));
	BAD_IO(PROTO_OP_IO_FALLOCATE, 0, "mode", wb_u64(&w, 1); wb_u64(&w, 0);
	       wb_u64(&w, 1); wb_u32(&w, PROTO_FALLOC_ZERO_RANGE | PROTO_FALLOC_PUNCH_HOLE |
				       PROTO_FALLOC_KEEP_SIZE));
	BAD_IO(PROTO_OP_IO_FALLOCATE, 0, "mode", wb_u64(&w, 1); wb_u64(&w, 0);
	       wb_u64(&w, 1); wb_u32(&w, 0xffffffffu));

	/* a segment ending exactly at 2^62 is fine */
	wb_init(&w, gbuf, sizeof(gbuf));
	wb_u64(&w, 1); wb_u32(&w, 1); wb_u64(&w, (1ull << 62) - 4096); wb_u64(&w, 4096);
	wb_u32(&w, 0);
	CHECK(proto_ioreq_decode(gbuf, w.len, PROTO_OP_IO_READ, 4096, &d, out, &why) == 0,
	      "seg at 2^62");

	/* IO_READ and IO_SEEK flags: PROTO_IO_MIRROR and (SEEK) the hole bit */
	{
		static const uint32_t ok_read[] = { 0, PROTO_IO_MIRROR };
		static const uint32_t ok_seek[] = { PROTO_SEEK_DATA, PROTO_SEEK_HOLE,
			PROTO_IO_MIRROR, PROTO_IO_MIRROR | PROTO_SEEK_HOLE };

		for (size_t i = 0; i < 2; i++) {
			wb_init(&w, gbuf, sizeof(gbuf));
			wb_u64(&w, 1); wb_u32(&w, 1); wb_u64(&w, 0); wb_u64(&w, 10);
			wb_u32(&w, ok_read[i]);
			rc = proto_ioreq_decode(gbuf, w.len, PROTO_OP_IO_READ, 10, &d, out, &why);
			CHECK(rc == 0 && d.flags == ok_read[i], "read flags %#x: %d",
			      ok_read[i], rc);
		}
		for (size_t i = 0; i < 4; i++) {
			q = (struct proto_ioreq){ .ino = 3, .size = 5, .flags = ok_seek[i] };
			wb_init(&w, gbuf, sizeof(gbuf));
			rc = proto_ioreq_encode(&w, PROTO_OP_IO_SEEK, &q);
			CHECK(rc == 0 && w.len == 20 && gbuf[16] == (uint8_t)ok_seek[i] &&
			      gbuf[17] == (uint8_t)(ok_seek[i] >> 8), "seek enc %#x", ok_seek[i]);
			rc = proto_ioreq_decode(gbuf, w.len, PROTO_OP_IO_SEEK, 0, &d, out, &why);
			CHECK(rc == 0 && d.flags == ok_seek[i] && d.size == 5,
			      "seek flags %#x: %d", ok_seek[i], rc);
		}
		q = (struct proto_ioreq){ .ino = 1, .nsegs = 1, .segs = segs };
		segs[0] = (struct proto_seg){ 0, 1 };
		static const uint32_t bad_read[] = { 1, 2, 0x200, PROTO_IO_MIRROR | 1,
						     0x80000000u };
		for (size_t i = 0; i < 5; i++) {
			q.flags = bad_read[i];
			wb_init(&w, gbuf, sizeof(gbuf));
			CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_READ, &q) == -EINVAL,
			      "enc read flags %#x", bad_read[i]);
		}
		q = (struct proto_ioreq){ .ino = 1, .flags = PROTO_IO_MIRROR | 2 };
		CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_SEEK, &q) == -EINVAL,
		      "enc seek flags mirror|2");
		q.flags = PROTO_IO_MIRROR;
		CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_FSYNC, &q) == -EINVAL,
		      "enc fsync flags mirror");
		CHECK(w.len == 0, "nothing written on -EINVAL");
	}
	BAD_IO(PROTO_OP_IO_READ, 10, "flags", wb_u64(&w, 1); wb_u32(&w, 1);
	       wb_u64(&w, 0); wb_u64(&w, 10));
	BAD_IO(PROTO_OP_IO_READ, 10, "flags", wb_u64(&w, 1); wb_u32(&w, 1);
	       wb_u64(&w, 0); wb_u64(&w, 10); wb_u16(&w, 0));
	BAD_IO(PROTO_OP_IO_READ, 10, "flags", wb_u64(&w, 1); wb_u32(&w, 1);
	       wb_u64(&w, 0); wb_u64(&w, 10); wb_u32(&w, 1));
	BAD_IO(PROTO_OP_IO_READ, 10, "flags", wb_u64(&w, 1); wb_u32(&w, 1);
	       wb_u64(&w, 0); wb_u64(&w, 10); wb_u32(&w, 0x200));
	BAD_IO(PROTO_OP_IO_READ, 10, "flags", wb_u64(&w, 1); wb_u32(&w, 1);
	       wb_u64(&w, 0); wb_u64(&w, 10); wb_u32(&w, PROTO_IO_MIRROR | 1));
	BAD_IO(PROTO_OP_IO_READ, 10, "trailing bytes", wb_u64(&w, 1); wb_u32(&w, 1);
	       wb_u64(&w, 0); wb_u64(&w, 10); wb_u32(&w, 0); wb_u8(&w, 0));
	BAD_IO(PROTO_OP_IO_SEEK, 0, "flags", wb_u64(&w, 1); wb_u64(&w, 0);
	       wb_u32(&w, PROTO_IO_MIRROR | 2));
	BAD_IO(PROTO_OP_IO_SEEK, 0, "flags", wb_u64(&w, 1); wb_u64(&w, 0);
	       wb_u32(&w, 0x201));
	BAD_IO(PROTO_OP_IO_FSYNC, 0, "flags", wb_u64(&w, 1); wb_u32(&w, PROTO_IO_MIRROR));
	BAD_IO(PROTO_OP_IO_WRITE, 10, "trailing bytes", wb_u64(&w, 1); wb_u32(&w, 1);
	       wb_u64(&w, 0); wb_u64(&w, 10); wb_u32(&w, 0));

	/* IO_FENCE has a body of its own: not an ioreq */
	wb_init(&w, gbuf, sizeof(gbuf));
	wb_u64(&w, 1);
	CHECK(proto_ioreq_decode(gbuf, w.len, PROTO_OP_IO_FENCE, 0, &d, out, &why) ==
	      -EOPNOTSUPP, "IO_FENCE is not an ioreq");
	q = (struct proto_ioreq){ .ino = 1 };
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_FENCE, &q) == -EINVAL && w.len == 0,
	      "enc IO_FENCE as an ioreq");

	/* encoder checks */
	segs[0] = (struct proto_seg){ 0, 1 };
	q = (struct proto_ioreq){ .ino = 1, .nsegs = 0, .segs = segs };
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_READ, &q) == -EINVAL, "enc 0 segs");
	q.nsegs = PROTO_MAX_SEGS + 1;
	CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_WRITE, &q) == -EINVAL, "enc 1025 segs");
	q.nsegs = 1;
	segs[0].len = 0;
	CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_WRITE, &q) == -EINVAL, "enc len 0");
	segs[0] = (struct proto_seg){ UINT64_MAX - 1, 5 };
	CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_WRITE, &q) == -EINVAL, "enc overflow");
	q.size = (1ull << 62) + 1;
	CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_TRUNCATE, &q) == -EINVAL, "enc size");
	q.flags = 2;
	CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_FSYNC, &q) == -EINVAL, "enc fsync flags");
	CHECK(proto_ioreq_encode(&w, PROTO_OP_GETATTR, &q) == -EINVAL, "enc mgr op");
	CHECK(w.len == 0, "nothing written on -EINVAL");
	segs[0] = (struct proto_seg){ 0, 100 };
	wb_init(&w, gbuf, 10);
	CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_WRITE, &q) == -EMSGSIZE, "enc no room");
	static const uint16_t bad_ops[] = { 0, PROTO_OP_NET_HELLO, PROTO_OP_LOOKUP,
		PROTO_OP_IO_LAST, 39, 0xffff };
	for (size_t i = 0; i < sizeof(bad_ops) / sizeof(bad_ops[0]); i++)
		CHECK(proto_ioreq_decode(gbuf, 8, bad_ops[i], 0, &d, out, &why) ==
		      -EOPNOTSUPP, "io op %u", bad_ops[i]);
}

/* ----------------------------------------------------------------- misc */

/* STATUS reply: round trip, every truncation, trailing bytes, limits. */
/* The standby answer's body: round trip, the empty body (no hint), and
 * each refusal of encode and decode; the fence message's optional token. */
static void test_standby(void)
{
	struct proto_standby s = { { "10.0.0.9", 8 }, 7400, 5 }, d;
	uint8_t buf[PROTO_MAX_HOST + 64];
	struct wbuf w;
	const char *why = NULL;
	size_t n;

	wb_init(&w, buf, sizeof(buf));
	CHECK(proto_standby_encode(&w, &s) == 0, "standby enc");
	n = w.len;
	CHECK(n == 2 + 8 + 2 + 8, "standby len %zu", n);
	CHECK(proto_standby_decode(buf, n, &d, &why) == 0, "standby dec");
	CHECK(d.host.len == 8 && !memcmp(d.host.p, "10.0.0.9", 8) &&
	      d.port == 7400 && d.token == 5, "standby fields");
	CHECK(proto_standby_decode(buf, 0, &d, &why) == 0 && d.host.len == 0 &&
	      d.port == 0, "standby empty: no hint");
	CHECK(proto_standby_decode(buf, n - 1, &d, &why) == -EBADMSG, "truncated");
	buf[n] = 0;
	CHECK(proto_standby_decode(buf, n + 1, &d, &why) == -EBADMSG &&
	      !strcmp(why, "trailing bytes"), "trailing");
	memcpy(buf + 2 + 8, "\0\0", 2);
	CHECK(proto_standby_decode(buf, n, &d, &why) == -EBADMSG &&
	      !strcmp(why, "standby port"), "port 0");
	struct proto_standby bad[] = {
		{ { "", 0 }, 1, 1 }, { { "h", 1 }, 0, 1 }, { { "h", 1 }, 1, 0 },
		{ { "h\0x", 3 }, 1, 1 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		wb_init(&w, buf, sizeof(buf));
		CHECK(proto_standby_encode(&w, &bad[i]) == -EINVAL, "standby bad %zu", i);
	}
	/* IO_FENCE: the token rides at the end only when not 0 */
	{
		static uint8_t fb[256];
		struct proto_fence f = { .seq = 3, .lease_ms = 100 }, g;
		size_t n0;

		wb_init(&w, fb, sizeof(fb));
		CHECK(proto_fence_encode(&w, &f) == 0, "fence enc");
		n0 = w.len;
		CHECK(proto_fence_decode(fb, n0, &g, &why) == 0 && g.token == 0,
		      "fence without token");
		f.token = 9;
		wb_init(&w, fb, sizeof(fb));
		CHECK(proto_fence_encode(&w, &f) == 0 && w.len == n0 + 8, "fence token enc");
		CHECK(proto_fence_decode(fb, w.len, &g, &why) == 0 && g.token == 9,
		      "fence token dec");
		memset(fb + n0, 0, 8);
		CHECK(proto_fence_decode(fb, n0 + 8, &g, &why) == -EBADMSG,
		      "fence token 0 on the wire");
		CHECK(proto_fence_decode(fb, n0 + 4, &g, &why) == -EBADMSG,
		      "fence 4 trailing bytes");
	}
}

static void test_status(void)
{
	static char json[PROTO_MAX_STATUS_JSON + 1];
	struct proto_status s, d;
	struct wbuf w;
	const char *why;
	uint8_t *cp;
	int rc;

	memset(&s, 0, sizeof(s));
	s.role = (struct proto_str){ "iod", 3 };
	s.version = (struct proto_str){ "0.1.0", 5 };
	s.id = 3;
	s.uptime_s = 12345;
	s.st = (struct proto_statfs){ 4096, 100, 50, 40, 1000, 900, 255 };
	s.stats = (struct proto_str){ "{\"msgs_tx\":1}", 13 };
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_status_encode(&w, &s) == 0, "status enc");
	rc = proto_status_decode(gbuf, w.len, &d, &why);
	CHECK(rc == 0 && d.role.len == 3 && !memcmp(d.role.p, "iod", 3) &&
	      d.version.len == 5 && d.id == 3 && d.uptime_s == 12345 &&
	      !memcmp(&d.st, &s.st, sizeof(s.st)) && d.stats.len == 13 &&
	      !memcmp(d.stats.p, s.stats.p, 13), "status dec");
	for (size_t n = 0; n < w.len; n++) {
		cp = dup_exact(gbuf, n);
		CHECK(proto_status_decode(cp, n, &d, &why) == -EBADMSG, "status cut %zu", n);
		free(cp);
	}
	rc = proto_status_decode(gbuf, w.len + 1, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "status trailing");
	memset(json, 'x', sizeof(json));
	s.stats = (struct proto_str){ json, sizeof(json) };
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_status_encode(&w, &s) == -EINVAL, "status json too long");
	s.stats = (struct proto_str){ json, 0 };
	s.role = (struct proto_str){ json, 33 };
	CHECK(proto_status_encode(&w, &s) == -EINVAL, "status role too long");
	CHECK(strcmp(proto_op_name(PROTO_OP_STATUS), "STATUS") == 0 &&
	      strcmp(proto_op_name(PROTO_OP_NET_AUTH), "NET_AUTH") == 0, "status names");
}

/* Field by field: the struct's tail padding is not set by an initializer. */
static int statfs_eq(const struct proto_statfs *a, const struct proto_statfs *b)
{
	return a->bsize == b->bsize && a->blocks == b->blocks &&
	       a->bfree == b->bfree && a->bavail == b->bavail &&
	       a->files == b->files && a->ffree == b->ffree &&
	       a->namemax == b->namemax;
}

static void test_statfs(void)
{
	struct proto_statfs s = { 4096, 100, 50, 40, 1000, 900, 255 }, d;
	struct wbuf w;
	const char *why;
	uint8_t *cp;
	int rc;

	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_statfs_encode(&w, &s) == 0 && w.len == 52, "statfs enc");
	rc = proto_statfs_decode(gbuf, w.len, &d, &why);
	CHECK(rc == 0 && statfs_eq(&s, &d), "statfs dec");
	for (size_t n = 0; n < w.len; n++) {
		cp = dup_exact(gbuf, n);
		CHECK(proto_statfs_decode(cp, n, &d, &why) == -EBADMSG, "statfs cut %zu", n);
		free(cp);
	}
	rc = proto_statfs_decode(gbuf, w.len + 1, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "statfs trailing");
	wb_init(&w, gbuf, 51);
	CHECK(proto_statfs_encode(&w, &s) == -EMSGSIZE, "statfs no room");
}

/* STALE_MARK request and STALE_COUNT reply: wire bytes, round trip,
 * rejected values. */
static void test_stale(void)
{
	static struct proto_stalecnt c, cd;
	struct proto_stale st = { 0x0102030405060708ull, 3 }, sd;
	struct wbuf w;
	const char *why;
	int rc;

	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_stale_encode(&w, &st) == 0 && w.len == 10 && gbuf[0] == 8 &&
	      gbuf[7] == 1 && gbuf[8] == 3 && gbuf[9] == 0, "stale wire");
	rc = proto_stale_decode(gbuf, w.len, &sd, &why);
	CHECK(rc == 0 && sd.ino == st.ino && sd.iod == 3, "stale decode %d", rc);
	rc = proto_stale_decode(gbuf, w.len - 1, &sd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "stale", "stale cut");
	rc = proto_stale_decode(gbuf, w.len + 1, &sd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "stale trailing");
	gbuf[9] = 1; /* iod 259 */
	rc = proto_stale_decode(gbuf, w.len, &sd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "iod", "stale iod");
	memset(gbuf, 0, 8);
	gbuf[9] = 0;
	rc = proto_stale_decode(gbuf, w.len, &sd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "ino", "stale ino 0");
	st.ino = 0;
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_stale_encode(&w, &st) == -EINVAL, "stale enc ino 0");
	st = (struct proto_stale){ 5, PROTO_MAX_IODS };
	CHECK(proto_stale_encode(&w, &st) == -EINVAL, "stale enc iod");

	/* STALE_COUNT: u16 n, then per iod u64 count, u64 done, u64 bytes */
	c.n = 4;
	c.count[0] = 0;
	c.count[2] = 7;
	c.done[2] = 0x0102;
	c.done[3] = 5;
	c.bytes[1] = 0x1122334455667788ull;
	c.bytes[3] = UINT64_MAX;
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_stalecnt_encode(&w, &c) == 0 && w.len == 2 + 4 * 24, "stalecnt enc");
	CHECK(gbuf[0] == 4 && gbuf[1] == 0 && gbuf[2 + 2 * 24] == 7 &&
	      gbuf[2 + 2 * 24 + 8] == 2 && gbuf[2 + 2 * 24 + 9] == 1 &&
	      gbuf[2 + 24 + 16] == 0x88 && gbuf[2 + 24 + 23] == 0x11 &&
	      gbuf[2 + 3 * 24 + 8] == 5 && gbuf[2 + 3 * 24 + 23] == 0xff,
	      "stalecnt wire bytes");
	uint8_t *cp = dup_exact(gbuf, w.len);
	rc = proto_stalecnt_decode(cp, w.len, &cd, &why);
	free(cp);
	CHECK(rc == 0 && cd.n == 4 && cd.count[2] == 7 && cd.count[0] == 0 &&
	      cd.done[2] == 0x0102 && cd.done[3] == 5 && cd.done[0] == 0 &&
	      cd.bytes[1] == c.bytes[1] && cd.bytes[3] == UINT64_MAX &&
	      cd.bytes[2] == 0, "stalecnt decode %d", rc);
	for (size_t k = 0; k < w.len; k++) {
		cp = dup_exact(gbuf, k);
		rc = proto_stalecnt_decode(cp, k, &cd, &why);
		CHECK_ERR(rc, -EBADMSG, why, "n", "stalecnt cut");
		free(cp);
	}
	rc = proto_stalecnt_decode(gbuf, w.len + 1, &cd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "n", "stalecnt trailing");
	/* the old layout (n x u64 count) is refused */
	wb_init(&w, gbuf, sizeof(gbuf));
	wb_u16(&w, 4);
	for (int i = 0; i < 4; i++)
		wb_u64(&w, (uint64_t)i);
	rc = proto_stalecnt_decode(gbuf, w.len, &cd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "n", "stalecnt old layout");
	/* one iod, and the most */
	c.n = 1;
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_stalecnt_encode(&w, &c) == 0 && w.len == 26, "stalecnt enc n 1");
	c.n = PROTO_MAX_IODS;
	c.bytes[PROTO_MAX_IODS - 1] = 9;
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_stalecnt_encode(&w, &c) == 0 && w.len == 2 + PROTO_MAX_IODS * 24,
	      "stalecnt enc n max");
	rc = proto_stalecnt_decode(gbuf, w.len, &cd, &why);
	CHECK(rc == 0 && cd.n == PROTO_MAX_IODS && cd.bytes[PROTO_MAX_IODS - 1] == 9,
	      "stalecnt dec n max %d", rc);
	gbuf[0] = 1; /* n 257 (u16 LE 0x0101) */
	gbuf[1] = 1;
	rc = proto_stalecnt_decode(gbuf, w.len, &cd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "n", "stalecnt n 257");
	gbuf[0] = 0;
	gbuf[1] = 0;
	rc = proto_stalecnt_decode(gbuf, 2, &cd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "n", "stalecnt n 0");
	c.n = 0;
	CHECK(proto_stalecnt_encode(&w, &c) == -EINVAL, "stalecnt enc n 0");
	c.n = PROTO_MAX_IODS + 1;
	CHECK(proto_stalecnt_encode(&w, &c) == -EINVAL, "stalecnt enc n 257");
}

/* Raw IO_FENCE body from the wire description (no validation). */
static size_t raw_fence(uint8_t *buf, size_t cap, uint64_t seq, uint64_t confirm,
			uint32_t lease_ms, uint32_t flags, const uint64_t *add,
			uint32_t nadd, const uint64_t *del, uint32_t ndel)
{
	struct wbuf w;

	wb_init(&w, buf, cap);
	wb_u64(&w, seq);
	wb_u64(&w, confirm);
	wb_u32(&w, lease_ms);
	wb_u32(&w, flags);
	wb_u32(&w, nadd);
	for (uint32_t i = 0; i < nadd; i++)
		wb_u64(&w, add[i]);
	wb_u32(&w, ndel);
	for (uint32_t i = 0; i < ndel; i++)
		wb_u64(&w, del[i]);
	return w.len;
}

/* Decode a raw IO_FENCE body from an exact-size copy; expect field why. */
static void bad_fence(const uint8_t *raw, size_t len, const char *field,
		      const char *ctx)
{
	struct proto_fence d;
	const char *why = NULL;
	uint8_t *cp = dup_exact(raw, len);
	int rc = proto_fence_decode(cp, len, &d, &why);

	CHECK_ERR(rc, -EBADMSG, why, field, ctx);
	free(cp);
}

/* IO_FENCE request: wire bytes, round trips, rejected bodies. */
static void test_fence(void)
{
	static const uint64_t add[2] = { 5, 0x8877665544332211ull };
	static const uint64_t del[1] = { UINT64_MAX };
	static uint64_t many[PROTO_MAX_INOS + 1];
	struct proto_fence f = { .seq = 0x0102030405060708ull, .confirm = 7,
				 .lease_ms = 8000, .flags = PROTO_FENCE_ALL,
				 .add = { 2, add, NULL }, .del = { 1, del, NULL } };
	struct proto_fence d;
	struct wbuf w;
	const char *why;
	uint8_t *cp;
	size_t n;
	int rc;

	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_fence_encode(&w, &f);
	n = raw_fence(gbuf2, sizeof(gbuf2), f.seq, 7, 8000, 3, add, 2, del, 1);
	CHECK(rc == 0 && w.len == 32 + 16 + 8 && n == w.len &&
	      memcmp(gbuf, gbuf2, n) == 0, "fence enc %d len %zu", rc, w.len);
	CHECK(gbuf[0] == 8 && gbuf[7] == 1 && gbuf[8] == 7 && gbuf[16] == 0x40 &&
	      gbuf[17] == 0x1f && gbuf[20] == 3 && gbuf[24] == 2 && gbuf[28] == 5 &&
	      gbuf[36 + 7] == 0x88 && gbuf[44] == 1 && gbuf[48] == 0xff, "fence bytes");
	cp = dup_exact(gbuf, w.len);
	rc = proto_fence_decode(cp, w.len, &d, &why);
	CHECK(rc == 0 && d.seq == f.seq && d.confirm == 7 && d.lease_ms == 8000 &&
	      d.flags == PROTO_FENCE_ALL && d.add.n == 2 && d.del.n == 1 &&
	      d.add.wire == cp + 28 && d.del.wire == cp + 48 &&
	      proto_inos_at(&d.add, 0) == 5 && proto_inos_at(&d.add, 1) == add[1] &&
	      proto_inos_at(&d.del, 0) == UINT64_MAX, "fence dec %d", rc);
	/* the decoded message re-encodes to the same bytes */
	wb_init(&w, gbuf2, sizeof(gbuf2));
	CHECK(proto_fence_encode(&w, &d) == 0 && w.len == n &&
	      memcmp(gbuf2, cp, n) == 0, "fence re-encode");
	free(cp);
	CHECK_CUTS(n, "fence", proto_fence_decode(cut, cutlen, &d, &why));
	gbuf[n] = 0;
	rc = proto_fence_decode(gbuf, n + 1, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "fence trailing");

	/* empty lists, each flag alone, the longest lease, the longest lists */
	static const uint32_t flags[] = { 0, PROTO_FENCE_RESET, PROTO_FENCE_COMPLETE };
	for (size_t i = 0; i < 3; i++) {
		n = raw_fence(gbuf, sizeof(gbuf), 1, 0, PROTO_MAX_LEASE_MS, flags[i],
			      NULL, 0, NULL, 0);
		cp = dup_exact(gbuf, n);
		rc = proto_fence_decode(cp, n, &d, &why);
		CHECK(rc == 0 && n == 32 && d.add.n == 0 && d.del.n == 0 &&
		      d.flags == flags[i] && d.lease_ms == PROTO_MAX_LEASE_MS,
		      "fence empty %#x: %d", flags[i], rc);
		free(cp);
	}
	for (uint32_t i = 0; i <= PROTO_MAX_INOS; i++)
		many[i] = i + 1;
	n = raw_fence(gbuf, sizeof(gbuf), 2, 1, 0, 0, many, PROTO_MAX_INOS, many,
		      PROTO_MAX_INOS);
	rc = proto_fence_decode(gbuf, n, &d, &why);
	CHECK(rc == 0 && d.add.n == PROTO_MAX_INOS && d.del.n == PROTO_MAX_INOS &&
	      proto_inos_at(&d.del, PROTO_MAX_INOS - 1) == PROTO_MAX_INOS,
	      "fence 256 + 256: %d", rc);

	/* rejected bodies */
	n = raw_fence(gbuf, sizeof(gbuf), 0, 0, 8000, 0, NULL, 0, NULL, 0);
	bad_fence(gbuf, n, "seq", "fence seq 0");
	n = raw_fence(gbuf, sizeof(gbuf), 1, 0, PROTO_MAX_LEASE_MS + 1, 0, NULL, 0,
		      NULL, 0);
	bad_fence(gbuf, n, "lease_ms", "fence lease too big");
	n = raw_fence(gbuf, sizeof(gbuf), 1, 0, UINT32_MAX, 0, NULL, 0, NULL, 0);
	bad_fence(gbuf, n, "lease_ms", "fence lease u32 max");
	n = raw_fence(gbuf, sizeof(gbuf), 1, 0, 8000, 4, NULL, 0, NULL, 0);
	bad_fence(gbuf, n, "fence flags", "fence flags 4");
	n = raw_fence(gbuf, sizeof(gbuf), 1, 0, 8000, 0x80000003u, NULL, 0, NULL, 0);
	bad_fence(gbuf, n, "fence flags", "fence flags high bit");
	n = raw_fence(gbuf, sizeof(gbuf), 1, 0, 8000, 0, many, PROTO_MAX_INOS + 1,
		      NULL, 0);
	bad_fence(gbuf, n, "fence add list", "fence add 257");
	n = raw_fence(gbuf, sizeof(gbuf), 1, 0, 8000, 0, NULL, 0, many,
		      PROTO_MAX_INOS + 1);
	bad_fence(gbuf, n, "fence del list", "fence del 257");
	n = raw_fence(gbuf, sizeof(gbuf), 1, 0, 8000, 0, many, 2, NULL, 0);
	bad_fence(gbuf, 32 + 8, "fence add list", "fence add short");
	bad_fence(gbuf, 24 + 4 + 16, "fence del list", "fence del count missing");
	n = raw_fence(gbuf, sizeof(gbuf), 1, 0, 8000, 0, NULL, 0, many, 3);
	bad_fence(gbuf, n - 1, "fence del list", "fence del short");
	bad_fence(gbuf, 20, "fence header", "fence header short");
	bad_fence(gbuf, 0, "fence header", "fence empty body");
	n = raw_fence(gbuf, sizeof(gbuf), 1, 0, 8000, 0, (const uint64_t[]){ 4, 0 },
		      2, NULL, 0);
	bad_fence(gbuf, n, "fence ino", "fence add ino 0");
	n = raw_fence(gbuf, sizeof(gbuf), 1, 0, 8000, 0, NULL, 0,
		      (const uint64_t[]){ 0 }, 1);
	bad_fence(gbuf, n, "fence ino", "fence del ino 0");

	/* the encoder refuses what the decoder would */
	struct proto_fence e = f;
	wb_init(&w, gbuf, sizeof(gbuf));
	e.seq = 0;
	CHECK(proto_fence_encode(&w, &e) == -EINVAL, "fence enc seq 0");
	e = f;
	e.lease_ms = PROTO_MAX_LEASE_MS + 1;
	CHECK(proto_fence_encode(&w, &e) == -EINVAL, "fence enc lease");
	e = f;
	e.flags = 4;
	CHECK(proto_fence_encode(&w, &e) == -EINVAL, "fence enc flags");
	e = f;
	e.add = (struct proto_inos){ PROTO_MAX_INOS + 1, many, NULL };
	CHECK(proto_fence_encode(&w, &e) == -EINVAL, "fence enc add 257");
	e = f;
	e.del = (struct proto_inos){ 2, (const uint64_t[]){ 3, 0 }, NULL };
	CHECK(proto_fence_encode(&w, &e) == -EINVAL, "fence enc del ino 0");
	e = f;
	e.add = (struct proto_inos){ 1, NULL, NULL };
	CHECK(proto_fence_encode(&w, &e) == -EINVAL, "fence enc no list");
	CHECK(w.len == 0, "nothing written on -EINVAL");
	wb_init(&w, gbuf, 40);
	CHECK(proto_fence_encode(&w, &f) == -EMSGSIZE, "fence enc no room");
}

/* IO_FENCE reply: wire bytes, round trip, rejected bodies. */
static void test_fencestate(void)
{
	static const uint8_t raw[11] = { 1, 1, 0, 0x39, 0x30, 0, 0, 0x3f, 0x1f, 0, 0 };
	struct proto_fencestate s = { 1, 1, 0, 12345, 7999 }, d;
	struct wbuf w;
	const char *why;
	int rc;

	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_fencestate_encode(&w, &s);
	CHECK(rc == 0 && w.len == 11 && memcmp(gbuf, raw, 11) == 0,
	      "fencestate enc %d", rc);
	uint8_t *cp = dup_exact(raw, 11);
	rc = proto_fencestate_decode(cp, 11, &d, &why);
	free(cp);
	CHECK(rc == 0 && d.leased == 1 && d.complete == 1 && d.loading == 0 &&
	      d.nfenced == 12345 && d.lease_left_ms == 7999, "fencestate dec %d", rc);
	CHECK_CUTS(11, "fencestate", proto_fencestate_decode(cut, cutlen, &d, &why));
	memcpy(gbuf, raw, 11);
	gbuf[11] = 0;
	rc = proto_fencestate_decode(gbuf, 12, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "fence state length", "fencestate trailing");
	for (int i = 0; i < 3; i++) {
		memcpy(gbuf, raw, 11);
		gbuf[i] = 2;
		rc = proto_fencestate_decode(gbuf, 11, &d, &why);
		CHECK_ERR(rc, -EBADMSG, why, "fence state flag", "fencestate flag 2");
	}
	/* every flag set, no lease left, the most inodes, the longest lease */
	s = (struct proto_fencestate){ 1, 1, 1, UINT32_MAX, PROTO_MAX_LEASE_MS };
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_fencestate_encode(&w, &s) == 0 &&
	      proto_fencestate_decode(gbuf, w.len, &d, &why) == 0 && d.loading == 1 &&
	      d.nfenced == UINT32_MAX && d.lease_left_ms == PROTO_MAX_LEASE_MS,
	      "fencestate max");
	gbuf[7] = (uint8_t)(PROTO_MAX_LEASE_MS + 1);
	rc = proto_fencestate_decode(gbuf, w.len, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "lease_left_ms", "fencestate lease_left too big");
	s.lease_left_ms = PROTO_MAX_LEASE_MS + 1;
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_fencestate_encode(&w, &s) == -EINVAL, "fencestate enc left");
	s.lease_left_ms = 0;
	s.complete = 2;
	CHECK(proto_fencestate_encode(&w, &s) == -EINVAL, "fencestate enc complete 2");
	CHECK(w.len == 0, "nothing written on -EINVAL");
	s.complete = 0;
	wb_init(&w, gbuf, 10);
	CHECK(proto_fencestate_encode(&w, &s) == -EMSGSIZE, "fencestate no room");
}

static void test_layout(void)
{
	struct proto_layout l = { 65536, 4, 2, 1 }, d;
	char buf[64];

	CHECK(proto_layout_format(buf, sizeof(buf), &l) == 0 &&
	      strcmp(buf, "unit=65536,count=4,first=2") == 0, "format: %s", buf);
	CHECK(proto_layout_format(buf, 10, &l) == -ERANGE, "format small");
	CHECK(proto_layout_format(buf, strlen("unit=65536,count=4,first=2"), &l) ==
	      -ERANGE, "format exact-1");
	CHECK(proto_layout_format(buf, strlen("unit=65536,count=4,first=2") + 1, &l) ==
	      0, "format exact");

	l.mirror = 2;
	CHECK(proto_layout_format(buf, sizeof(buf), &l) == 0 &&
	      strcmp(buf, "unit=65536,count=4,first=2,mirror=2") == 0, "format: %s", buf);
	l.mirror = 1;

	static const struct { const char *s; uint32_t u; uint16_t c, f; uint8_t m; } ok[] = {
		{ "unit=65536,count=4,first=2", 65536, 4, 2, 1 },
		{ "count=1,unit=4096", 4096, 1, 0, 1 },
		{ "first=255,count=256,unit=67108864", 1u << 26, 256, 255, 1 },
		{ "unit=1048576,count=3\n", 1u << 20, 3, 0, 1 },
		{ "unit=8192,count=2,first=0", 8192, 2, 0, 1 },
		{ "unit=0008192,count=02", 8192, 2, 0, 1 },
		{ "unit=65536,count=2,first=0,mirror=2", 65536, 2, 0, 2 },
		{ "mirror=1,unit=65536,count=2", 65536, 2, 0, 1 },
		{ "unit=65536,mirror=2,count=1", 65536, 1, 0, 2 },
		{ "unit=1M,count=2", 1u << 20, 2, 0, 1 },
		{ "unit=64k,count=1", 65536, 1, 0, 1 },
		{ "count=1,unit=4K", 4096, 1, 0, 1 },
		{ "unit=64M,count=1", 1u << 26, 1, 0, 1 },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		memset(&d, 0xee, sizeof(d));
		int rc = proto_layout_parse(ok[i].s, strlen(ok[i].s), &d);

		CHECK(rc == 0 && d.unit == ok[i].u && d.count == ok[i].c &&
		      d.first == ok[i].f && d.mirror == ok[i].m, "parse \"%s\": %d",
		      ok[i].s, rc);
	}
	/* with trailing NUL as some xattr tools send */
	CHECK(proto_layout_parse("unit=4096,count=1", 18, &d) == 0, "trailing NUL");
	static const char *const bad[] = {
		"", "unit=65536", "count=4", "unit=65536,count=0",
		"unit=65536,count=257", "unit=65537,count=1", "unit=2048,count=1",
		"unit=134217728,count=1", "unit=0,count=1", "unit=65536,count=4,",
		",unit=65536,count=4", "unit=65536,,count=4", "unit=65536,count=4,first=256",
		"unit=65536,count=4,bogus=1", "unit=65536,count=4,unit=4096",
		"unit=-4096,count=1", "unit=+4096,count=1", "unit= 4096,count=1",
		"unit=4096 ,count=1", "unit=4096,count=1x", "unit=99999999999,count=1",
		"unit=4294971392,count=1", "unit=4096,count", "unit=4096,count=",
		"unit==4096,count=1", "UNIT=4096,count=1", "unit=4096,count=1\n\n",
		"unit=4096;count=1", "unit", "=", ",",
		"unit=4096,count=1,mirror=0", "unit=4096,count=1,mirror=3",
		"unit=4096,count=1,mirror=", "unit=4096,count=1,mirror=2,mirror=2",
		"unit=4096,count=1,mirror=x",
		"unit=K,count=1", "unit=1MM,count=1", "unit=1G,count=1", "unit=128M,count=1",
		"unit=2K,count=1", "unit=3K,count=1", "unit=65536,count=1K",
		"unit=4096,count=1,first=1K", "unit=1m5,count=1", "unit=4194304K,count=1",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t len = strlen(bad[i]);
		char *cp = (char *)dup_exact((const uint8_t *)bad[i], len);

		CHECK(proto_layout_parse(cp, len, &d) == -EINVAL, "parse bad \"%s\"", bad[i]);
		free(cp);
	}
	/* an embedded NUL is no suffix */
	CHECK(proto_layout_parse("unit=64\0,count=1", 17, &d) == -EINVAL, "NUL suffix");
	/* not NUL-terminated: only len bytes count */
	CHECK(proto_layout_parse("unit=4096,count=12", 17, &d) == 0 && d.count == 1,
	      "parse respects len");
	CHECK(proto_layout_parse(NULL, 0, &d) == -EINVAL, "parse NULL");
}

static void test_op_names(void)
{
	CHECK(strcmp(proto_op_name(PROTO_OP_LOOKUP), "LOOKUP") == 0, "LOOKUP");
	CHECK(strcmp(proto_op_name(PROTO_OP_IO_READ), "IO_READ") == 0, "IO_READ");
	CHECK(strcmp(proto_op_name(PROTO_OP_PURGE), "PURGE") == 0, "PURGE");
	CHECK(strcmp(proto_op_name(PROTO_OP_NET_HELLO), "NET_HELLO") == 0, "HELLO");
	CHECK(strcmp(proto_op_name(77), "op#77") == 0, "op#77");
	CHECK(strcmp(proto_op_name(0), "op#0") == 0, "op#0");
	/* the mgr ops end where the iod's begin (40, IO_READ) */
	CHECK(PROTO_OP_MGR_LAST == PROTO_OP_IO_READ &&
	      strcmp(proto_op_name(PROTO_OP_MGR_LAST), "IO_READ") == 0, "MGR_LAST");
	CHECK(strcmp(proto_op_name(PROTO_OP_SETBLOCKS), "SETBLOCKS") == 0, "SETBLOCKS");
	CHECK(strcmp(proto_op_name(PROTO_OP_IO_SEEK), "IO_SEEK") == 0, "IO_SEEK");
	CHECK(strcmp(proto_op_name(65535), "op#65535") == 0, "op#65535");
	for (int op = PROTO_OP_MOUNT; op < PROTO_OP_MGR_LAST; op++)
		CHECK((op > PROTO_OP_PURGE_MANY && op < PROTO_OP_LOCK) ||
		      strncmp(proto_op_name((uint16_t)op), "op#", 3) != 0, "name %d", op);
	for (int op = PROTO_OP_IO_READ; op < PROTO_OP_IO_LAST; op++)
		CHECK(strncmp(proto_op_name((uint16_t)op), "IO_", 3) == 0, "name %d", op);
}

/* ------------------------------------------------------------------ locks */

/* A valid LOCK WAIT request. */
static struct proto_lock sample_lock(void)
{
	return (struct proto_lock){
		.session = 0x1122334455667788ull, .owner = 0xabcdefull,
		.ino = 42, .start = 100, .end = 199, .id = 7, .pid = 4321,
		.wait_ms = 5000, .lease_ms = 10000, .type = PROTO_LK_WRLCK,
		.kind = PROTO_LK_POSIX, .cmd = PROTO_LK_WAIT };
}

/* Encode l for op, expect the encoder to refuse it (-EINVAL), then put the
 * same bytes on the wire by hand and expect the decoder to name field. */
static void lock_bad(uint16_t op, struct proto_lock l, const char *field,
		     const char *ctx)
{
	struct proto_lock d;
	struct wbuf w;
	const char *why = NULL;
	uint8_t *cp;
	int rc;

	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_lock_encode(&w, op, &l) == -EINVAL, "%s: encoder accepts", ctx);
	wb_init(&w, gbuf, sizeof(gbuf));
	wb_u64(&w, l.session); wb_u64(&w, l.owner); wb_u64(&w, l.ino);
	wb_u64(&w, l.start); wb_u64(&w, l.end); wb_u64(&w, l.id);
	wb_u64(&w, l.boot); wb_u32(&w, l.pid); wb_u32(&w, l.wait_ms);
	wb_u32(&w, l.lease_ms); wb_u8(&w, l.type); wb_u8(&w, l.kind);
	wb_u8(&w, l.cmd); wb_u8(&w, l.flags);
	cp = dup_exact(gbuf, w.len);
	rc = proto_lock_decode(cp, w.len, op, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, field, ctx);
	free(cp);
}

/* Lock request and reply codecs: round trips, cuts, every check. */
static void test_lock(void)
{
	struct proto_lock l = sample_lock(), d, k;
	struct proto_lockrep r = { 0x99, 5, PROTO_LK_EOF, 77, PROTO_LK_RDLCK,
				   PROTO_LKR_NEWSESSION }, rd;
	struct wbuf w;
	const char *why;
	uint8_t *cp;
	int rc;

	/* round trips of every op */
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_lock_encode(&w, PROTO_OP_LOCK, &l) == 0 && w.len == 72,
	      "lock enc %zu", w.len);
	rc = proto_lock_decode(gbuf, w.len, PROTO_OP_LOCK, &d, &why);
	CHECK(rc == 0 && memcmp(&d, &l, sizeof(l)) == 0, "lock dec");
	for (size_t n = 0; n < w.len; n++) {
		cp = dup_exact(gbuf, n);
		CHECK(proto_lock_decode(cp, n, PROTO_OP_LOCK, &d, &why) == -EBADMSG,
		      "lock cut %zu", n);
		free(cp);
	}
	rc = proto_lock_decode(gbuf, w.len + 1, PROTO_OP_LOCK, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "lock trailing");
	rc = proto_lock_decode(gbuf, w.len, PROTO_OP_MOUNT, &d, &why);
	CHECK_ERR(rc, -EOPNOTSUPP, why, "op", "lock op MOUNT");
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_lock_encode(&w, PROTO_OP_IO_READ, &l) == -EINVAL, "lock enc op");
	k = (struct proto_lock){ .session = 9, .boot = 3, .lease_ms = 1000 };
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_lock_encode(&w, PROTO_OP_LOCK_KEEPALIVE, &k) == 0, "ka enc");
	CHECK(proto_lock_decode(gbuf, w.len, PROTO_OP_LOCK_KEEPALIVE, &d, &why) == 0 &&
	      memcmp(&d, &k, sizeof(k)) == 0, "ka dec");
	k = (struct proto_lock){ .session = 9, .id = 4, .lease_ms = 1000 };
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_lock_encode(&w, PROTO_OP_LOCK_CANCEL, &k) == 0, "cancel enc");
	CHECK(proto_lock_decode(gbuf, w.len, PROTO_OP_LOCK_CANCEL, &d, &why) == 0 &&
	      memcmp(&d, &k, sizeof(k)) == 0, "cancel dec");
	k = (struct proto_lock){ .session = 9, .ino = 3, .start = 0,
				 .end = PROTO_LK_EOF, .lease_ms = 1000,
				 .type = PROTO_LK_RDLCK, .kind = PROTO_LK_FLOCK,
				 .cmd = PROTO_LK_SET, .flags = PROTO_LKF_RECLAIM };
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_lock_encode(&w, PROTO_OP_LOCK, &k) == 0, "flock reclaim enc");

	/* every check */
	k = l; k.session = 0; lock_bad(PROTO_OP_LOCK, k, "session", "session 0");
	k = l; k.lease_ms = 999; lock_bad(PROTO_OP_LOCK, k, "lease_ms", "lease low");
	k = l; k.lease_ms = PROTO_LK_MAX_LEASE_MS + 1;
	lock_bad(PROTO_OP_LOCK, k, "lease_ms", "lease high");
	k = l; k.type = 3; lock_bad(PROTO_OP_LOCK, k, "type", "type 3");
	k = l; k.kind = 2; lock_bad(PROTO_OP_LOCK, k, "kind", "kind 2");
	k = l; k.cmd = 4; lock_bad(PROTO_OP_LOCK, k, "cmd", "cmd 4");
	k = l; k.flags = 2; lock_bad(PROTO_OP_LOCK, k, "flags", "flags 2");
	k = l; k.flags = PROTO_LKF_RECLAIM;
	lock_bad(PROTO_OP_LOCK, k, "flags", "reclaim on wait");
	k = l; k.start = 200; lock_bad(PROTO_OP_LOCK, k, "end", "start > end");
	k = l; k.start = (uint64_t)INT64_MAX + 1; k.end = PROTO_LK_EOF;
	lock_bad(PROTO_OP_LOCK, k, "start", "start past 2^63");
	k = l; k.end = (uint64_t)INT64_MAX + 1;
	lock_bad(PROTO_OP_LOCK, k, "end", "end past 2^63");
	k = l; k.kind = PROTO_LK_FLOCK; lock_bad(PROTO_OP_LOCK, k, "end", "flock range");
	k = l; k.type = PROTO_LK_UNLCK; lock_bad(PROTO_OP_LOCK, k, "type", "wait unlock");
	k = l; k.cmd = PROTO_LK_GET; k.wait_ms = 0; k.id = 0; k.type = PROTO_LK_UNLCK;
	lock_bad(PROTO_OP_LOCK, k, "type", "get unlock");
	k = l; k.wait_ms = 0; lock_bad(PROTO_OP_LOCK, k, "wait_ms", "wait 0");
	k = l; k.wait_ms = PROTO_LK_MAX_WAIT_MS + 1;
	lock_bad(PROTO_OP_LOCK, k, "wait_ms", "wait long");
	k = l; k.id = 0; lock_bad(PROTO_OP_LOCK, k, "id", "wait id 0");
	k = l; k.cmd = PROTO_LK_SET; lock_bad(PROTO_OP_LOCK, k, "unused field", "set with wait_ms");
	k = l; k.boot = 1; lock_bad(PROTO_OP_LOCK, k, "unused field", "lock boot");
	k = (struct proto_lock){ .session = 9, .lease_ms = 1000, .ino = 1 };
	lock_bad(PROTO_OP_LOCK_KEEPALIVE, k, "unused field", "keepalive ino");
	k = (struct proto_lock){ .session = 9, .lease_ms = 1000 };
	lock_bad(PROTO_OP_LOCK_CANCEL, k, "id", "cancel id 0");
	k.id = 1; k.owner = 1;
	lock_bad(PROTO_OP_LOCK_CANCEL, k, "unused field", "cancel owner");

	/* replies */
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_lockrep_encode(&w, &r) == 0 && w.len == 30, "rep enc");
	rc = proto_lockrep_decode(gbuf, w.len, &rd, &why);
	CHECK(rc == 0 && memcmp(&r, &rd, sizeof(r)) == 0, "rep dec");
	for (size_t n = 0; n < w.len; n++) {
		cp = dup_exact(gbuf, n);
		CHECK(proto_lockrep_decode(cp, n, &rd, &why) == -EBADMSG, "rep cut %zu", n);
		free(cp);
	}
	rc = proto_lockrep_decode(gbuf, w.len + 1, &rd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "rep trailing");
	gbuf[28] = 3; /* type */
	rc = proto_lockrep_decode(gbuf, w.len, &rd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "type", "rep type");
	gbuf[28] = 1;
	gbuf[29] = 2; /* flags */
	rc = proto_lockrep_decode(gbuf, w.len, &rd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "flags", "rep flags");
	r.start = 6; r.end = 5;
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_lockrep_encode(&w, &r) == -EINVAL, "rep start > end");
	CHECK(strcmp(proto_op_name(PROTO_OP_LOCK), "LOCK") == 0 &&
	      strcmp(proto_op_name(PROTO_OP_LOCK_CANCEL), "LOCK_CANCEL") == 0 &&
	      strcmp(proto_op_name(PROTO_OP_LOCK_KEEPALIVE), "LOCK_KEEPALIVE") == 0,
	      "lock names");
	/* not metadata requests: the mreq codec refuses them */
	CHECK(proto_mreq_decode(gbuf, 10, PROTO_OP_LOCK, &(struct proto_mreq){ 0 },
				&why) == -EOPNOTSUPP, "LOCK is not an mreq");
}

/* ------------------------------------------------------------------ scrub */


/* IO_LIST and IO_CSUM requests: bytes, round trip, limits. */
static void test_scrub_ioreq(void)
{
	static struct proto_seg out[PROTO_MAX_SEGS];
	struct proto_ioreq q, d;
	struct wbuf w;
	const char *why;
	int rc;

	q = (struct proto_ioreq){ .cursor = { 0x1234, 0xab0000001234ull },
				  .max = PROTO_MAX_LIST, .ino = 99 };
	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_ioreq_encode(&w, PROTO_OP_IO_LIST, &q);
	CHECK(rc == 0 && w.len == 16, "list enc rc %d len %zu", rc, w.len);
	CHECK(gbuf[0] == 0x34 && gbuf[1] == 0x12 && gbuf[4] == 0x34 &&
	      gbuf[9] == 0xab && gbuf[12] == 0x00 && gbuf[13] == 0x04,
	      "list bytes");
	rc = proto_ioreq_decode(gbuf, w.len, PROTO_OP_IO_LIST, 0, &d, out, &why);
	CHECK(rc == 0 && d.cursor.bucket == 0x1234 &&
	      d.cursor.after == 0xab0000001234ull && d.max == PROTO_MAX_LIST &&
	      d.ino == 0, "list dec rc %d", rc);
	CHECK_CUTS(w.len, "list", proto_ioreq_decode(cut, cutlen, PROTO_OP_IO_LIST,
						     0, &d, out, &why));
	gbuf[16] = 0;
	rc = proto_ioreq_decode(gbuf, 17, PROTO_OP_IO_LIST, 0, &d, out, &why);
	CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "list trailing");
	gbuf[12] = 0;
	gbuf[13] = 0; /* max 0 */
	rc = proto_ioreq_decode(gbuf, 16, PROTO_OP_IO_LIST, 0, &d, out, &why);
	CHECK_ERR(rc, -EBADMSG, why, "max", "list max 0");
	gbuf[12] = 1;
	gbuf[13] = 4; /* max 1025 */
	rc = proto_ioreq_decode(gbuf, 16, PROTO_OP_IO_LIST, 0, &d, out, &why);
	CHECK_ERR(rc, -EBADMSG, why, "max", "list max 1025");
	gbuf[12] = 1;
	gbuf[13] = 0;
	gbuf[0] = 1;
	gbuf[1] = 0;
	gbuf[2] = 1; /* bucket 65537 */
	rc = proto_ioreq_decode(gbuf, 16, PROTO_OP_IO_LIST, 0, &d, out, &why);
	CHECK_ERR(rc, -EBADMSG, why, "cursor", "list bucket");
	gbuf[0] = 0; /* bucket 65536: the end, valid */
	rc = proto_ioreq_decode(gbuf, 16, PROTO_OP_IO_LIST, 0, &d, out, &why);
	CHECK(rc == 0 && d.cursor.bucket == PROTO_LIST_END, "list end %d", rc);
	q.max = 0;
	CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_LIST, &q) == -EINVAL, "enc max 0");
	q.max = PROTO_MAX_LIST + 1;
	CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_LIST, &q) == -EINVAL, "enc max");
	q.max = 1;
	q.cursor.bucket = PROTO_LIST_END + 1;
	CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_LIST, &q) == -EINVAL, "enc bucket");

	q = (struct proto_ioreq){ .ino = 0x0102030405060708ull, .off = 1ull << 40,
				  .len = PROTO_MAX_CSUM_LEN };
	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_ioreq_encode(&w, PROTO_OP_IO_CSUM, &q);
	CHECK(rc == 0 && w.len == 24 && gbuf[0] == 8 && gbuf[13] == 1 &&
	      gbuf[18] == 0x40, "csum enc rc %d len %zu", rc, w.len);
	rc = proto_ioreq_decode(gbuf, w.len, PROTO_OP_IO_CSUM, 0, &d, out, &why);
	CHECK(rc == 0 && d.ino == q.ino && d.off == q.off && d.len == q.len,
	      "csum dec %d", rc);
	CHECK_CUTS(w.len, "csum", proto_ioreq_decode(cut, cutlen, PROTO_OP_IO_CSUM,
						     0, &d, out, &why));
	gbuf[16]++; /* len 4 MiB + 1 */
	rc = proto_ioreq_decode(gbuf, 24, PROTO_OP_IO_CSUM, 0, &d, out, &why);
	CHECK_ERR(rc, -EBADMSG, why, "range", "csum len");
	memset(gbuf + 16, 0, 8); /* len 0 */
	rc = proto_ioreq_decode(gbuf, 24, PROTO_OP_IO_CSUM, 0, &d, out, &why);
	CHECK_ERR(rc, -EBADMSG, why, "range", "csum len 0");
	q.len = PROTO_MAX_CSUM_LEN + 1;
	CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_CSUM, &q) == -EINVAL, "enc csum len");
	q.len = 1;
	q.off = UINT64_MAX;
	CHECK(proto_ioreq_encode(&w, PROTO_OP_IO_CSUM, &q) == -EINVAL, "enc csum off");
}

/* IO_LIST and IO_CSUM replies: bytes, round trip, every rejection. */
static void test_scrub_ioreps(void)
{
	static struct proto_iolist l, d;
	struct proto_csum cs = { 0xe3069283u, 12345 }, cd;
	struct wbuf w;
	const char *why;
	uint8_t *cp;
	int rc;

	memset(&l, 0, sizeof(l));
	l.n = 3;
	l.next = (struct proto_cursor){ 0x22, 0x10022 };
	l.objs[0] = (struct proto_obj){ 0x22, 0, 0, 1700000000 };
	l.objs[1] = (struct proto_obj){ 0x10022, 1ull << 62, PROTO_MAX_BLOCKS, -5 };
	l.objs[2] = (struct proto_obj){ 0x30022, 4096, 8, 0 };
	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_iolist_encode(&w, &l);
	CHECK(rc == 0 && w.len == 17 + 3 * 32, "iolist enc %d %zu", rc, w.len);
	CHECK(gbuf[0] == 3 && gbuf[4] == 0 && gbuf[5] == 0x22 && gbuf[9] == 0x22 &&
	      gbuf[11] == 1 && gbuf[17] == 0x22, "iolist bytes");
	cp = dup_exact(gbuf, w.len);
	rc = proto_iolist_decode(cp, w.len, &d, &why);
	CHECK(rc == 0 && d.n == 3 && !d.eof && d.next.bucket == 0x22 &&
	      d.next.after == 0x10022 && !memcmp(d.objs, l.objs, 3 * sizeof(l.objs[0])),
	      "iolist dec %d", rc);
	free(cp);
	CHECK_CUTS(w.len, "iolist", proto_iolist_decode(cut, cutlen, &d, &why));
	gbuf[w.len] = 0;
	rc = proto_iolist_decode(gbuf, w.len + 1, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "n", "iolist trailing");
	gbuf[4] = 1; /* eof with a cursor that is not the end */
	rc = proto_iolist_decode(gbuf, w.len, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "eof", "iolist eof");
	gbuf[4] = 2;
	rc = proto_iolist_decode(gbuf, w.len, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "next", "iolist eof 2");
	gbuf[4] = 0;
	gbuf[17] = 0; /* objs[0].ino 0x22 -> 0 */
	rc = proto_iolist_decode(gbuf, w.len, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "obj.ino", "iolist ino 0");
	gbuf[17] = 0x22;
	gbuf[17 + 32 + 8]++; /* objs[1].size 2^62 + 1 */
	rc = proto_iolist_decode(gbuf, w.len, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "obj.size", "iolist size");
	gbuf[17 + 32 + 8]--;
	gbuf[17 + 32 + 16]++; /* objs[1].blocks PROTO_MAX_BLOCKS + 1 */
	rc = proto_iolist_decode(gbuf, w.len, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "obj.blocks", "iolist blocks");
	l.n = PROTO_MAX_LIST + 1;
	CHECK(proto_iolist_encode(&w, &l) == -EINVAL, "iolist enc n");
	/* the end, empty; and a full batch of PROTO_MAX_LIST */
	memset(&l, 0, sizeof(l));
	l.eof = 1;
	l.next.bucket = PROTO_LIST_END;
	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_iolist_encode(&w, &l);
	CHECK(rc == 0 && w.len == 17, "iolist end enc");
	rc = proto_iolist_decode(gbuf, w.len, &d, &why);
	CHECK(rc == 0 && d.eof && d.n == 0, "iolist end dec %d", rc);
	l.eof = 0;
	CHECK(proto_iolist_encode(&w, &l) == -EINVAL, "iolist end without eof");
	l.eof = 1;
	l.n = PROTO_MAX_LIST;
	for (uint32_t i = 0; i < l.n; i++)
		l.objs[i] = (struct proto_obj){ i + 1, i, i, i };
	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_iolist_encode(&w, &l);
	CHECK(rc == 0 && w.len == 17 + 32 * PROTO_MAX_LIST, "iolist full %d", rc);
	rc = proto_iolist_decode(gbuf, w.len, &d, &why);
	CHECK(rc == 0 && d.n == PROTO_MAX_LIST && d.objs[1023].ino == 1024,
	      "iolist full dec %d", rc);
	gbuf[0] = 1; /* n 1025 */
	gbuf[1] = 4;
	rc = proto_iolist_decode(gbuf, w.len, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "n", "iolist n 1025");

	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_csum_encode(&w, &cs);
	CHECK(rc == 0 && w.len == 12 && gbuf[0] == 0x83 && gbuf[3] == 0xe3 &&
	      gbuf[4] == 0x39 && gbuf[5] == 0x30, "csum rep enc");
	rc = proto_csum_decode(gbuf, 12, &cd, &why);
	CHECK(rc == 0 && cd.crc == cs.crc && cd.size == cs.size, "csum rep dec");
	CHECK_CUTS(12, "csum rep", proto_csum_decode(cut, cutlen, &cd, &why));
	rc = proto_csum_decode(gbuf, 13, &cd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "csum rep trailing");
	cs.size = (1ull << 62) + 1;
	CHECK(proto_csum_encode(&w, &cs) == -EINVAL, "csum rep enc size");
	memset(gbuf + 4, 0xff, 8);
	rc = proto_csum_decode(gbuf, 12, &cd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "size", "csum rep size");
}

/* The mgr's scrub service: requests and replies. */
static void test_scrub_mgr(void)
{
	static struct proto_orphans o, od;
	static uint64_t many[PROTO_MAX_INOS + 1];
	struct proto_scrubq q, d;
	struct proto_inostate s, sd;
	struct wbuf w;
	const char *why;
	int rc;

	q = (struct proto_scrubq){ .inos = { 3, some_inos, NULL } };
	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_scrubq_encode(&w, PROTO_OP_SCRUB_INOS, &q);
	CHECK(rc == 0 && w.len == 4 + 24 && gbuf[0] == 3 && gbuf[12] == 0x11,
	      "inos enc %d", rc);
	rc = proto_scrubq_decode(gbuf, w.len, PROTO_OP_SCRUB_INOS, &d, &why);
	CHECK(rc == 0 && d.inos.n == 3 && proto_inos_at(&d.inos, 2) == UINT64_MAX &&
	      d.max == 0 && d.cookie == 0, "inos dec %d", rc);
	CHECK_CUTS(w.len, "inos", proto_scrubq_decode(cut, cutlen, PROTO_OP_SCRUB_INOS,
						      &d, &why));
	rc = proto_scrubq_decode(gbuf, w.len + 1, PROTO_OP_SCRUB_INOS, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "inos trailing");
	for (uint32_t i = 0; i <= PROTO_MAX_INOS; i++)
		many[i] = i + 1;
	q.inos = (struct proto_inos){ PROTO_MAX_INOS + 1, many, NULL };
	CHECK(proto_scrubq_encode(&w, PROTO_OP_SCRUB_INOS, &q) == -EINVAL, "inos 257");
	q.inos.n = 0;
	CHECK(proto_scrubq_encode(&w, PROTO_OP_SCRUB_INOS, &q) == -EINVAL, "inos 0");
	memset(gbuf, 0, 4);
	rc = proto_scrubq_decode(gbuf, 4, PROTO_OP_SCRUB_INOS, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "inos", "inos n 0");

	q = (struct proto_scrubq){ .cookie = 0x0807060504030201ull, .max = 256 };
	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_scrubq_encode(&w, PROTO_OP_SCRUB_ORPHANS, &q);
	CHECK(rc == 0 && w.len == 12 && gbuf[0] == 1 && gbuf[9] == 1, "orph enc %d", rc);
	rc = proto_scrubq_decode(gbuf, w.len, PROTO_OP_SCRUB_ORPHANS, &d, &why);
	CHECK(rc == 0 && d.cookie == q.cookie && d.max == 256 && d.inos.n == 0,
	      "orph dec %d", rc);
	CHECK_CUTS(w.len, "orph", proto_scrubq_decode(cut, cutlen,
						      PROTO_OP_SCRUB_ORPHANS, &d, &why));
	gbuf[8] = 1; /* max 257 */
	rc = proto_scrubq_decode(gbuf, 12, PROTO_OP_SCRUB_ORPHANS, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "max", "orph max 257");
	gbuf[8] = 0;
	gbuf[9] = 0; /* max 0 */
	rc = proto_scrubq_decode(gbuf, 12, PROTO_OP_SCRUB_ORPHANS, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "max", "orph max 0");
	q.max = 0;
	CHECK(proto_scrubq_encode(&w, PROTO_OP_SCRUB_ORPHANS, &q) == -EINVAL, "enc max 0");
	q.max = 1;
	CHECK(proto_scrubq_encode(&w, PROTO_OP_LOOKUP, &q) == -EINVAL, "enc op");
	CHECK(proto_scrubq_decode(gbuf, 12, PROTO_OP_IO_LIST, &d, &why) == -EOPNOTSUPP,
	      "dec op");
	CHECK(proto_mreq_decode(gbuf, 12, PROTO_OP_SCRUB_ORPHANS,
				&(struct proto_mreq){ 0 }, &why) == -EOPNOTSUPP,
	      "SCRUB_ORPHANS is not an mreq");

	s.n = 3;
	s.st[0] = PROTO_INO_NONE;
	s.st[1] = PROTO_INO_LIVE;
	s.st[2] = PROTO_INO_ORPHAN;
	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_inostate_encode(&w, &s);
	CHECK(rc == 0 && w.len == 7 && gbuf[0] == 3 && gbuf[4] == 0 && gbuf[5] == 1 &&
	      gbuf[6] == 2, "state enc %d", rc);
	rc = proto_inostate_decode(gbuf, 7, &sd, &why);
	CHECK(rc == 0 && sd.n == 3 && sd.st[2] == PROTO_INO_ORPHAN, "state dec %d", rc);
	CHECK_CUTS(7, "state", proto_inostate_decode(cut, cutlen, &sd, &why));
	rc = proto_inostate_decode(gbuf, 8, &sd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "n", "state trailing");
	/* the mirror states: 3 (mirrored) and 4 (mirrored, a replica stale) */
	s.n = 5;
	s.st[3] = PROTO_INO_MIRRORED;
	s.st[4] = PROTO_INO_MIRROR_STALE;
	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_inostate_encode(&w, &s);
	CHECK(rc == 0 && w.len == 9 && gbuf[0] == 5 && gbuf[7] == 3 && gbuf[8] == 4,
	      "state enc 3 4: %d", rc);
	rc = proto_inostate_decode(gbuf, 9, &sd, &why);
	CHECK(rc == 0 && sd.n == 5 && sd.st[3] == PROTO_INO_MIRRORED &&
	      sd.st[4] == PROTO_INO_MIRROR_STALE && sd.st[1] == PROTO_INO_LIVE,
	      "state dec 3 4: %d", rc);
	CHECK_CUTS(9, "state 3 4", proto_inostate_decode(cut, cutlen, &sd, &why));
	gbuf[8] = 5;
	rc = proto_inostate_decode(gbuf, 9, &sd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "state", "state 5");
	gbuf[8] = 0xff;
	rc = proto_inostate_decode(gbuf, 9, &sd, &why);
	CHECK_ERR(rc, -EBADMSG, why, "state", "state 255");
	s.st[4] = 5;
	CHECK(proto_inostate_encode(&w, &s) == -EINVAL, "state enc 5");
	s.n = 0;
	CHECK(proto_inostate_encode(&w, &s) == -EINVAL, "state enc n 0");

	memset(&o, 0, sizeof(o));
	o.boot_ns = 1700000000123456789ll;
	o.n = 2;
	o.eof = 1;
	o.o[0] = (struct proto_orphan){ 5, 100, 8, 1600000000000000000ll };
	o.o[1] = (struct proto_orphan){ 6, 0, PROTO_MAX_BLOCKS, -1 };
	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_orphans_encode(&w, &o);
	CHECK(rc == 0 && w.len == 13 + 64 && gbuf[0] == 0x15 && gbuf[8] == 2 &&
	      gbuf[12] == 1 && gbuf[13] == 5, "orphans enc %d %zu", rc, w.len);
	rc = proto_orphans_decode(gbuf, w.len, &od, &why);
	CHECK(rc == 0 && od.boot_ns == o.boot_ns && od.n == 2 && od.eof &&
	      !memcmp(od.o, o.o, 2 * sizeof(o.o[0])), "orphans dec %d", rc);
	CHECK_CUTS(w.len, "orphans", proto_orphans_decode(cut, cutlen, &od, &why));
	rc = proto_orphans_decode(gbuf, w.len + 1, &od, &why);
	CHECK_ERR(rc, -EBADMSG, why, "n", "orphans trailing");
	gbuf[12] = 2;
	rc = proto_orphans_decode(gbuf, w.len, &od, &why);
	CHECK_ERR(rc, -EBADMSG, why, "eof", "orphans eof 2");
	gbuf[12] = 1;
	gbuf[13 + 32] = 5; /* ino 6 -> 5: not ascending */
	rc = proto_orphans_decode(gbuf, w.len, &od, &why);
	CHECK_ERR(rc, -EBADMSG, why, "orphan.ino", "orphans order");
	gbuf[13 + 32] = 6;
	gbuf[13 + 32 + 16]++; /* blocks PROTO_MAX_BLOCKS + 1 */
	rc = proto_orphans_decode(gbuf, w.len, &od, &why);
	CHECK_ERR(rc, -EBADMSG, why, "orphan.blocks", "orphans blocks");
	o.o[0].ino = 0;
	CHECK(proto_orphans_encode(&w, &o) == -EINVAL, "orphans enc ino 0");
	o.o[0].ino = 5;
	o.n = PROTO_MAX_INOS + 1;
	CHECK(proto_orphans_encode(&w, &o) == -EINVAL, "orphans enc n");

	CHECK(strcmp(proto_op_name(PROTO_OP_IO_LIST), "IO_LIST") == 0 &&
	      strcmp(proto_op_name(PROTO_OP_IO_CSUM), "IO_CSUM") == 0 &&
	      strcmp(proto_op_name(PROTO_OP_SCRUB_INOS), "SCRUB_INOS") == 0 &&
	      strcmp(proto_op_name(PROTO_OP_SCRUB_ORPHANS), "SCRUB_ORPHANS") == 0 &&
	      strcmp(proto_op_name(PROTO_OP_IO_FENCE), "IO_FENCE") == 0 &&
	      strcmp(proto_op_name(PROTO_OP_IO_LAST), "op#53") == 0 &&
	      strcmp(proto_op_name(PROTO_OP_STALE_MARK), "STALE_MARK") == 0 &&
	      strcmp(proto_op_name(PROTO_OP_STALE_COUNT), "STALE_COUNT") == 0 &&
	      strcmp(proto_op_name(PROTO_OP_SCRUB_LAST), "op#64") == 0, "scrub names");
}

/* ----------------------------------------------------------------- BATCH */

#define BATCH_SESSION 0x5eed000000000007ull

/* The five ops a batch may carry, each with valid fields (own cred). */
static void sample_bops(struct proto_bop *o)
{
	static const uint16_t ops[5] = { PROTO_OP_CREATE, PROTO_OP_MKDIR,
		PROTO_OP_SYMLINK, PROTO_OP_SETATTR, PROTO_OP_SETBLOCKS };

	for (int i = 0; i < 5; i++) {
		memset(&o[i], 0, sizeof(o[i]));
		o[i].op = ops[i];
		full_mreq(ops[i], &o[i].m);
		o[i].m.cred.uid = 1000u + (unsigned)i;
		if (ops[i] == PROTO_OP_MKDIR)
			o[i].m.mode = 040755;
		if (i < 3)
			o[i].newino = 0x400u + (unsigned)i;
	}
	o[0].layout = (struct proto_layout){ 65536, 2, 1, 1 };
}

/* Independent, non-validating encoder of one batch op. */
static void raw_bop(struct wbuf *w, const struct proto_bop *o)
{
	uint32_t f = 0;

	for (size_t i = 0; i < N_REQ_OPS; i++)
		if (req_ops[i].op == o->op)
			f = req_ops[i].f;
	wb_u16(w, o->op);
	raw_mreq(w, f, &o->m, o->m.cred.ngroups);
	if (o->op == PROTO_OP_CREATE || o->op == PROTO_OP_MKDIR ||
	    o->op == PROTO_OP_SYMLINK)
		wb_u64(w, o->newino);
	if (o->op == PROTO_OP_CREATE)
		raw_layout(w, &o->layout);
}

/* Independent encoder of a whole batch: cred (session flag when session
 * != 0, one group), want, n, then the ops given (nops of them). */
static size_t raw_batch(uint64_t session, uint32_t want, uint32_t n,
			const struct proto_bop *o, uint32_t nops)
{
	struct wbuf w;

	wb_init(&w, gbuf2, sizeof(gbuf2));
	wb_u32(&w, 7);
	wb_u32(&w, 8);
	wb_u16(&w, (uint16_t)(1 | (session ? PROTO_CRED_SESSION : 0)));
	wb_u32(&w, 9);
	if (session)
		wb_u64(&w, session);
	wb_u32(&w, want);
	wb_u32(&w, n);
	for (uint32_t i = 0; i < nops; i++)
		raw_bop(&w, &o[i]);
	return w.len;
}

static struct proto_batch sample_batch(const struct proto_bop *o, uint32_t n)
{
	struct proto_batch b = { .cred = { .uid = 7, .gid = 8, .ngroups = 1,
					   .groups = { 9 },
					   .session = BATCH_SESSION },
				 .want = PROTO_INO_RANGE, .n = n, .host = o };

	return b;
}

/* Expect the encoder to refuse b (-EINVAL) and the decoder to refuse the
 * same batch put on the wire by hand, naming field. */
static void batch_bad(const struct proto_batch *b, const char *field,
		      const char *ctx)
{
	struct proto_batch d;
	struct wbuf w;
	const char *why = NULL;
	size_t len;
	uint8_t *cp;
	int rc;

	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_batch_encode(&w, b) == -EINVAL, "%s: encoder accepts", ctx);
	len = raw_batch(b->cred.session, b->want, b->n, b->host,
			b->n > PROTO_MAX_BATCH ? 0 : b->n);
	cp = dup_exact(gbuf2, len);
	rc = proto_batch_decode(cp, len, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, field, ctx);
	free(cp);
}

/* A decoded batch walks back to the ops it was made of. */
static void check_bops(const struct proto_batch *d, const struct proto_bop *o,
		       uint32_t n)
{
	struct proto_bop got;
	uint32_t pos = 0, i = 0;
	int rc;

	while ((rc = proto_bop_next(d, &pos, &got)) == 0) {
		uint32_t f = i < n ? req_fields(o[i].op) : 0;

		CHECK(i < n && got.op == o[i].op && got.newino == o[i].newino &&
		      memcmp(&got.layout, &o[i].layout, sizeof(got.layout)) == 0 &&
		      got.m.cred.uid == o[i].m.cred.uid &&
		      got.m.cred.session == 0 &&
		      ((f & T_NAME) ? str_eq(got.m.name, o[i].m.name) : true) &&
		      ((f & T_TARGET) ? str_eq(got.m.target, o[i].m.target) : true) &&
		      got.m.mode == ((f & T_MODE) ? o[i].m.mode : 0) &&
		      got.m.blocks == ((f & T_BLOCKS) ? o[i].m.blocks : 0),
		      "bop %u", i);
		i++;
	}
	CHECK(rc == -ENOENT && i == n && pos == d->wire_len,
	      "bop walk rc %d i %u n %u", rc, i, n);
}

/* BATCH request: bytes, round trip, walk, cuts, trailing bytes. */
static void test_batch_ok(void)
{
	struct proto_bop o[5];
	struct proto_batch b, d;
	struct wbuf w;
	const char *why = NULL;
	uint8_t *cp;
	size_t len;
	int rc;

	sample_bops(o);
	b = sample_batch(o, 5);
	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_batch_encode(&w, &b);
	len = raw_batch(BATCH_SESSION, PROTO_INO_RANGE, 5, o, 5);
	CHECK(rc == 0 && w.len == len && memcmp(gbuf, gbuf2, len) == 0,
	      "batch bytes rc %d len %zu/%zu", rc, w.len, len);
	cp = dup_exact(gbuf, w.len);
	rc = proto_batch_decode(cp, w.len, &d, &why);
	CHECK(rc == 0 && d.cred.session == BATCH_SESSION && d.cred.uid == 7 &&
	      d.cred.ngroups == 1 && d.cred.groups[0] == 9 &&
	      d.want == PROTO_INO_RANGE && d.n == 5 && d.host == NULL &&
	      d.wire == cp + 4 + 4 + 2 + 4 + 8 + 4 + 4,
	      "batch decode %d %s", rc, rc ? why : "");
	if (rc == 0)
		check_bops(&d, o, 5);
	free(cp);
	CHECK_CUTS(w.len, "batch", proto_batch_decode(cut, cutlen, &d, &why));
	gbuf[w.len] = 0;
	rc = proto_batch_decode(gbuf, w.len + 1, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "batch trailing");

	/* an empty batch asking only for a range; and want 0 */
	b = sample_batch(o, 0);
	b.host = NULL;
	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_batch_encode(&w, &b);
	cp = dup_exact(gbuf, w.len);
	CHECK(rc == 0 && proto_batch_decode(cp, w.len, &d, &why) == 0 &&
	      d.n == 0 && d.want == PROTO_INO_RANGE && d.wire_len == 0,
	      "empty batch");
	free(cp);
	if (rc == 0)
		check_bops(&d, o, 0);
	b = sample_batch(o, 1);
	b.want = 0;
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_batch_encode(&w, &b) == 0 &&
	      proto_batch_decode(gbuf, w.len, &d, &why) == 0 && d.want == 0 &&
	      d.n == 1, "want 0");
}

/* BATCH request: every check, in the encoder and the decoder. */
static void test_batch_bad(void)
{
	static struct proto_bop many[PROTO_MAX_BATCH + 1];
	struct proto_bop o[5], k[5];
	struct proto_batch b, d;
	struct wbuf w;
	const char *why = NULL;
	size_t len;
	int rc;

	sample_bops(o);
#define BB(field, ...)                                                       \
	do {                                                                 \
		memcpy(k, o, sizeof(k));                                     \
		b = sample_batch(k, 5);                                      \
		__VA_ARGS__;                                                 \
		batch_bad(&b, field, #__VA_ARGS__);                          \
	} while (0)
	BB("cred.session", b.cred.session = 0);
	BB("want", b.want = 1);
	BB("want", b.want = 2 * PROTO_INO_RANGE);
	BB("n", b.n = PROTO_MAX_BATCH + 1);
	BB("bop.op", k[3].op = PROTO_OP_LOOKUP);
	BB("bop.op", k[3].op = PROTO_OP_RENAME);
	BB("bop.op", k[3].op = PROTO_OP_BATCH);
	BB("bop.op", k[4].op = PROTO_OP_MKNOD);
	BB("bop.newino", k[0].newino = 0);
	BB("bop.newino", k[1].newino = 0);
	BB("bop.newino", k[2].newino = 0);
	BB("bop.layout", k[0].layout.unit = 1000);
	BB("bop.layout", k[0].layout.unit = 8192 + 4096);
	BB("bop.layout", k[0].layout.unit = 128u << 20);
	BB("bop.layout", k[0].layout.count = 0);
	BB("bop.layout", k[0].layout.mirror = 3);
	BB("bop.layout", k[0].layout.first = PROTO_MAX_IODS);
	BB("bop.layout", k[0].layout = (struct proto_layout){ 0, 0, 0, 0 });
	BB("name", k[1].m.name = S(".."));
	BB("name", k[0].m.name = S("a/b"));
	BB("target", k[2].m.target = SL("", 0));
	BB("mode", k[1].m.mode = 0x10000);
	BB("valid", k[3].m.valid = ~0u);
	BB("blocks", k[4].m.blocks = PROTO_MAX_BLOCKS + 1);
	BB("cred.ngroups", k[4].m.cred.ngroups = PROTO_MAX_GROUPS + 1);
#undef BB
	/* a layout of 128 groups mirrored is fine, first 127 of them too */
	memcpy(k, o, sizeof(k));
	k[0].layout = (struct proto_layout){ 1u << 26, 128, 127, 2 };
	b = sample_batch(k, 5);
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_batch_encode(&w, &b) == 0 &&
	      proto_batch_decode(gbuf, w.len, &d, &why) == 0, "mirror 128 groups");
	/* fewer ops than n: the missing op is cut short */
	len = raw_batch(BATCH_SESSION, 0, 3, o, 2);
	rc = proto_batch_decode(gbuf2, len, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "bop.op", "n 3, 2 ops");
	/* more ops than n */
	len = raw_batch(BATCH_SESSION, 0, 1, o, 2);
	rc = proto_batch_decode(gbuf2, len, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "n 1, 2 ops");
	/* the batch's own cred: too many groups */
	b = sample_batch(o, 5);
	b.cred.ngroups = PROTO_MAX_GROUPS + 1;
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_batch_encode(&w, &b) == -EINVAL, "batch cred.ngroups");
	/* ops but no host */
	b = sample_batch(NULL, 1);
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_batch_encode(&w, &b) == -EINVAL, "n 1 host NULL");
	/* the most ops allowed, and no room for them */
	for (uint32_t i = 0; i < PROTO_MAX_BATCH; i++) {
		many[i] = o[i % 5];
		if (many[i].newino)
			many[i].newino = 1024 + i;
	}
	b = sample_batch(many, PROTO_MAX_BATCH);
	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_batch_encode(&w, &b);
	CHECK(rc == 0 && proto_batch_decode(gbuf, w.len, &d, &why) == 0 &&
	      d.n == PROTO_MAX_BATCH, "max batch %d", rc);
	wb_init(&w, gbuf, 100);
	CHECK(proto_batch_encode(&w, &b) == -EMSGSIZE, "batch no room");
	/* a body shorter than the header */
	rc = proto_batch_decode(gbuf2, 14, &d, &why);
	CHECK(rc == -EBADMSG, "batch header cut");
}

/* BATCH reply: bytes, round trip, cuts, every check. */
static void test_batchrep(void)
{
	static struct proto_batchrep r, d, k;
	struct wbuf w, w2;
	const char *why = NULL;
	uint8_t *cp;
	int rc;

	memset(&r, 0, sizeof(r));
	r.evseq = 99;
	r.range = 0x7c00;
	r.n = 3;
	r.status[1] = -EEXIST;
	r.status[2] = -4095;
	r.flags[0] = PROTO_BOP_WRITE;
	wb_init(&w, gbuf, sizeof(gbuf));
	rc = proto_batchrep_encode(&w, &r);
	wb_init(&w2, gbuf2, sizeof(gbuf2));
	wb_u64(&w2, 99); wb_u64(&w2, 0x7c00); wb_u32(&w2, 3);
	wb_u32(&w2, 0); wb_u8(&w2, 1);
	wb_u32(&w2, (uint32_t)-EEXIST); wb_u8(&w2, 0);
	wb_u32(&w2, (uint32_t)-4095); wb_u8(&w2, 0);
	CHECK(rc == 0 && w.len == w2.len && memcmp(gbuf, gbuf2, w.len) == 0,
	      "batchrep bytes rc %d", rc);
	cp = dup_exact(gbuf, w.len);
	memset(&d, 0xff, sizeof(d));
	rc = proto_batchrep_decode(cp, w.len, &d, &why);
	CHECK(rc == 0 && d.evseq == 99 && d.range == 0x7c00 && d.n == 3 &&
	      d.status[0] == 0 && d.status[1] == -EEXIST &&
	      d.status[2] == -4095 && d.flags[0] == PROTO_BOP_WRITE &&
	      d.flags[1] == 0 && d.flags[2] == 0, "batchrep decode %d", rc);
	free(cp);
	CHECK_CUTS(w.len, "batchrep", proto_batchrep_decode(cut, cutlen, &d, &why));
	gbuf[w.len] = 0;
	rc = proto_batchrep_decode(gbuf, w.len + 1, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "batchrep trailing");

#define BR(field, ...)                                                       \
	do {                                                                 \
		k = r;                                                       \
		__VA_ARGS__;                                                 \
		wb_init(&w, gbuf, sizeof(gbuf));                             \
		CHECK(proto_batchrep_encode(&w, &k) == -EINVAL,              \
		      "%s: encoder accepts", #__VA_ARGS__);                  \
		wb_init(&w, gbuf, sizeof(gbuf));                             \
		wb_u64(&w, k.evseq); wb_u64(&w, k.range); wb_u32(&w, k.n);   \
		for (uint32_t i_ = 0; i_ < k.n && i_ < PROTO_MAX_BATCH; i_++) { \
			wb_u32(&w, (uint32_t)k.status[i_]);                  \
			wb_u8(&w, k.flags[i_]);                              \
		}                                                            \
		rc = proto_batchrep_decode(gbuf, w.len, &d, &why);           \
		CHECK_ERR(rc, -EBADMSG, why, field, #__VA_ARGS__);           \
	} while (0)
	BR("range", k.range = 1000);
	BR("range", k.range = 0x7c01);
	BR("range", k.range = 0x7e00);
	BR("n", k.n = PROTO_MAX_BATCH + 1);
	BR("status", k.status[2] = 1);
	BR("status", k.status[1] = -4096);
	BR("status", k.status[0] = INT32_MIN);
	BR("flags", k.flags[2] = 2);
	BR("flags", k.flags[0] = 0x80);
#undef BR
	/* n = PROTO_MAX_BATCH */
	k = r;
	k.n = PROTO_MAX_BATCH;
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_batchrep_encode(&w, &k) == 0 &&
	      proto_batchrep_decode(gbuf, w.len, &d, &why) == 0 &&
	      d.n == PROTO_MAX_BATCH, "batchrep max n");
}

/* BATCH is not a proto_mreq op; MKDIR replies carry a (WRITE) grant. */
static void test_batch_misc(void)
{
	struct proto_mreq m;
	struct proto_mrep r, d;
	struct wbuf w;
	const char *why = NULL;
	int rc;

	full_mreq(PROTO_OP_GETATTR, &m);
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_mreq_encode(&w, PROTO_OP_BATCH, &m) == -EINVAL && w.len == 0,
	      "mreq encode BATCH");
	CHECK(proto_mreq_decode(gbuf, 10, PROTO_OP_BATCH, &m, &why) == -EOPNOTSUPP,
	      "mreq decode BATCH");
	full_mrep(&r);
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_mrep_encode(&w, PROTO_OP_BATCH, &r) == -EINVAL, "mrep BATCH");
	CHECK(proto_mrep_decode(gbuf, 0, PROTO_OP_BATCH, &d, &why) == -EOPNOTSUPP,
	      "mrep decode BATCH");
	CHECK(strcmp(proto_op_name(PROTO_OP_BATCH), "BATCH") == 0, "BATCH name");

	/* grants: MKDIR (WRITE), LOOKUP and READDIR carry them, GETATTR not */
	static const uint16_t gops[3] = { PROTO_OP_MKDIR, PROTO_OP_LOOKUP,
					  PROTO_OP_READDIR };
	for (int i = 0; i < 3; i++) {
		size_t base;

		full_mrep(&r);
		wb_init(&w, gbuf, sizeof(gbuf));
		CHECK(proto_mrep_encode(&w, gops[i], &r) == 0, "no grant enc");
		base = w.len;
		r.grant = (struct proto_grant){ 0x4242, 17 };
		wb_init(&w, gbuf, sizeof(gbuf));
		rc = proto_mrep_encode(&w, gops[i], &r);
		CHECK(rc == 0 && w.len == base + 16, "%s grant enc %d",
		      proto_op_name(gops[i]), rc);
		rc = proto_mrep_decode(gbuf, w.len, gops[i], &d, &why);
		CHECK(rc == 0 && d.grant.ino == 0x4242 && d.grant.evseq == 17,
		      "%s grant dec %d", proto_op_name(gops[i]), rc);
	}
	full_mrep(&r);
	r.grant = (struct proto_grant){ 0x4242, 17 };
	wb_init(&w, gbuf, sizeof(gbuf));
	CHECK(proto_mrep_encode(&w, PROTO_OP_GETATTR, &r) == -EINVAL,
	      "GETATTR grant");
	r.grant.ino = 0;
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_mrep_encode(&w, PROTO_OP_GETATTR, &r);
	wb_u64(&w, 0x4242);
	wb_u64(&w, 17);
	rc = proto_mrep_decode(gbuf, w.len, PROTO_OP_GETATTR, &d, &why);
	CHECK_ERR(rc, -EBADMSG, why, "trailing bytes", "GETATTR grant dec");
}

/* ------------------------------------------------------ fuzz seed corpus */

/* One seed file: selector byte, 48-byte header, body (see fuzz_proto.c). */
static int write_seed(const char *dir, const char *name, uint8_t sel,
		      uint16_t op, uint64_t bulk, uint64_t aux,
		      const uint8_t *body, size_t len)
{
	struct proto_hdr h = { .op = op, .tag = 1, .body_len = (uint32_t)len,
			       .bulk_len = bulk, .aux = aux };
	uint8_t hb[PROTO_HDR_LEN];
	char path[4096];
	int fd;

	proto_hdr_encode(hb, &h);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, &sel, 1) != 1 || write(fd, hb, sizeof(hb)) != (ssize_t)sizeof(hb) ||
	    (len && write(fd, body, len) != (ssize_t)len)) {
		close(fd);
		return -EIO;
	}
	return close(fd) ? -errno : 0;
}

/* Seeds of the scrub and mirror bodies (selectors 10..16 of fuzz_proto.c). */
static int write_scrub_seeds(const char *dir)
{
	static struct proto_iolist l;
	static struct proto_orphans o;
	struct proto_csum cs = { 0xe3069283u, 1 << 20 };
	struct proto_inostate s = { 3, { 0, 1, 2 } };
	struct proto_scrubq qi = { .inos = { 3, some_inos, NULL } };
	struct proto_scrubq qo = { .cookie = 5, .max = 256 };
	struct wbuf w;
	int rc = 0;

	l.n = 2;
	l.next = (struct proto_cursor){ 0x22, 0x10022 };
	l.objs[0] = (struct proto_obj){ 0x22, 65536, 128, 1700000000 };
	l.objs[1] = (struct proto_obj){ 0x10022, 1, 8, 1700000001 };
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_iolist_encode(&w, &l);
	rc |= write_seed(dir, "iolist", 10, PROTO_OP_IO_LIST, 0, 0, gbuf, w.len);
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_csum_encode(&w, &cs);
	rc |= write_seed(dir, "csum", 11, PROTO_OP_IO_CSUM, 0, 0, gbuf, w.len);
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_scrubq_encode(&w, PROTO_OP_SCRUB_INOS, &qi);
	rc |= write_seed(dir, "scrubq-SCRUB_INOS", 12, PROTO_OP_SCRUB_INOS, 0, 0,
			 gbuf, w.len);
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_scrubq_encode(&w, PROTO_OP_SCRUB_ORPHANS, &qo);
	rc |= write_seed(dir, "scrubq-SCRUB_ORPHANS", 12, PROTO_OP_SCRUB_ORPHANS, 0,
			 0, gbuf, w.len);
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_inostate_encode(&w, &s);
	rc |= write_seed(dir, "inostate", 13, PROTO_OP_SCRUB_INOS, 0, 0, gbuf, w.len);
	o.boot_ns = 1700000000000000000ll;
	o.n = 1;
	o.eof = 1;
	o.o[0] = (struct proto_orphan){ 7, 4096, 8, 1600000000000000000ll };
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_orphans_encode(&w, &o);
	rc |= write_seed(dir, "orphans", 14, PROTO_OP_SCRUB_ORPHANS, 0, 0, gbuf, w.len);
	struct proto_stale st = { 0x1234, 3 };
	static struct proto_stalecnt sc = { 4, { 0, 2, 0, 1 }, { 5, 0, 1, 0 },
					    { 1 << 20, 0, 4096, 0 } };
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_stale_encode(&w, &st);
	rc |= write_seed(dir, "stale", 15, PROTO_OP_STALE_MARK, 0, 0, gbuf, w.len);
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_stalecnt_encode(&w, &sc);
	rc |= write_seed(dir, "stalecnt", 16, PROTO_OP_STALE_COUNT, 0, 0, gbuf, w.len);
	return rc;
}

/* Seeds of the IO_FENCE request and reply (selectors 17, 18). */
static int write_fence_seeds(const char *dir)
{
	static const uint64_t add[2] = { 0x22, 0x10022 }, del[1] = { 7 };
	struct proto_fence f = { .seq = 2, .confirm = 1, .lease_ms = 8000,
				 .flags = PROTO_FENCE_ALL, .add = { 2, add, NULL },
				 .del = { 1, del, NULL } };
	struct proto_fencestate fs = { 1, 1, 0, 2, 7998 };
	struct wbuf w;
	int rc = 0;

	wb_init(&w, gbuf, sizeof(gbuf));
	proto_fence_encode(&w, &f);
	rc |= write_seed(dir, "fence", 17, PROTO_OP_IO_FENCE, 0, 0, gbuf, w.len);
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_fencestate_encode(&w, &fs);
	rc |= write_seed(dir, "fencestate", 18, PROTO_OP_IO_FENCE, 0, 0, gbuf, w.len);
	return rc;
}

/* Seeds of the BATCH request and reply (selectors 21, 22). */
static int write_batch_seeds(const char *dir)
{
	static struct proto_batchrep r = { 5, 0x7c00, 2, { 0, -EEXIST },
					   { PROTO_BOP_WRITE, 0 } };
	struct proto_bop o[5];
	struct proto_batch b;
	struct wbuf w;
	int rc = 0;

	sample_bops(o);
	b = sample_batch(o, 5);
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_batch_encode(&w, &b);
	rc |= write_seed(dir, "batch", 21, PROTO_OP_BATCH, 0, 0, gbuf, w.len);
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_batchrep_encode(&w, &r);
	rc |= write_seed(dir, "batchrep", 22, PROTO_OP_BATCH, 0, 0, gbuf, w.len);
	return rc;
}

/* Write a valid message of every class into dir. */
static int write_corpus(const char *dir)
{
	struct proto_mreq m;
	struct proto_mrep r;
	struct proto_mount mt;
	struct proto_ioreq q;
	struct proto_seg segs[3] = { { 0, 4096 }, { 65536, 100 }, { 1 << 20, 1 } };
	struct wbuf w;
	char name[64];
	int rc = 0;

	for (size_t i = 0; i < N_REQ_OPS; i++) {
		full_mreq(req_ops[i].op, &m);
		wb_init(&w, gbuf, sizeof(gbuf));
		proto_mreq_encode(&w, req_ops[i].op, &m);
		snprintf(name, sizeof(name), "mreq-%s", proto_op_name(req_ops[i].op));
		rc |= write_seed(dir, name, 0, req_ops[i].op, 0, 0, gbuf, w.len);
	}
	for (size_t i = 0; i < N_REP_OPS; i++) {
		full_mrep(&r);
		wb_init(&w, gbuf, sizeof(gbuf));
		proto_mrep_encode(&w, rep_ops[i].op, &r);
		snprintf(name, sizeof(name), "mrep-%s", proto_op_name(rep_ops[i].op));
		rc |= write_seed(dir, name, 1, rep_ops[i].op, 0, 0, gbuf, w.len);
	}
	full_mreq(PROTO_OP_SETATTR, &m);
	m.valid = PROTO_SA_KILLPRIV | PROTO_SA_SIZE;
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_mreq_encode(&w, PROTO_OP_SETATTR, &m);
	rc |= write_seed(dir, "mreq-SETATTR-KILLPRIV", 0, PROTO_OP_SETATTR, 0, 0,
			 gbuf, w.len);
	sample_mount(&mt, 4);
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_mount_encode(&w, &mt);
	rc |= write_seed(dir, "mount", 2, PROTO_OP_MOUNT, 0, 0, gbuf, w.len);
	for (uint16_t op = PROTO_OP_IO_READ; op < PROTO_OP_IO_LAST; op++) {
		if (op == PROTO_OP_IO_FENCE)
			continue; /* not an ioreq: write_fence_seeds */
		q = (struct proto_ioreq){ .ino = 9, .size = 12345,
					  .flags = op == PROTO_OP_IO_READ ? PROTO_IO_MIRROR :
						   op == PROTO_OP_IO_SEEK ?
						   PROTO_IO_MIRROR | PROTO_SEEK_HOLE : 1,
					  .nsegs = 3, .segs = segs,
					  .inos = { 3, some_inos, NULL },
					  .off = 4096, .len = 65536,
					  .mode = PROTO_FALLOC_PUNCH_HOLE |
						  PROTO_FALLOC_KEEP_SIZE,
					  .cursor = { 0x22, 0x10022 }, .max = 256 };
		wb_init(&w, gbuf, sizeof(gbuf));
		proto_ioreq_encode(&w, op, &q);
		snprintf(name, sizeof(name), "ioreq-%s", proto_op_name(op));
		rc |= write_seed(dir, name, 3, op, op == PROTO_OP_IO_WRITE ? 4197 : 0,
				 op == PROTO_OP_IO_READ ? 4197 : 0, gbuf, w.len);
	}
	full_mrep(&r);
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_statfs_encode(&w, &r.st);
	rc |= write_seed(dir, "statfs", 4, PROTO_OP_IO_STATFS, 0, 0, gbuf, w.len);
	wb_init(&w, gbuf, sizeof(gbuf));
	proto_ioval_encode(&w, 123456789);
	rc |= write_seed(dir, "ioval", 7, PROTO_OP_IO_SEEK, 0, 0, gbuf, w.len);
	rc |= write_seed(dir, "layout", 5, 0, 0, 0,
			 (const uint8_t *)"unit=65536,count=4,first=2", 26);
	{
		struct proto_lock l = sample_lock();
		struct proto_lock ka = { .session = 9, .boot = 3, .lease_ms = 1000 };
		struct proto_lock cn = { .session = 9, .id = 4, .lease_ms = 1000 };
		struct proto_lockrep lr = { 0x99, 5, PROTO_LK_EOF, 77,
					    PROTO_LK_RDLCK, 0 };

		wb_init(&w, gbuf, sizeof(gbuf));
		proto_lock_encode(&w, PROTO_OP_LOCK, &l);
		rc |= write_seed(dir, "lock-LOCK", 8, PROTO_OP_LOCK, 0, 0, gbuf, w.len);
		wb_init(&w, gbuf, sizeof(gbuf));
		proto_lock_encode(&w, PROTO_OP_LOCK_CANCEL, &cn);
		rc |= write_seed(dir, "lock-LOCK_CANCEL", 8, PROTO_OP_LOCK_CANCEL, 0,
				 0, gbuf, w.len);
		wb_init(&w, gbuf, sizeof(gbuf));
		proto_lock_encode(&w, PROTO_OP_LOCK_KEEPALIVE, &ka);
		rc |= write_seed(dir, "lock-LOCK_KEEPALIVE", 8,
				 PROTO_OP_LOCK_KEEPALIVE, 0, 0, gbuf, w.len);
		wb_init(&w, gbuf, sizeof(gbuf));
		proto_lockrep_encode(&w, &lr);
		rc |= write_seed(dir, "lockrep", 9, PROTO_OP_LOCK, 0, 0, gbuf, w.len);
	}
	rc |= write_scrub_seeds(dir);
	rc |= write_fence_seeds(dir);
	rc |= write_batch_seeds(dir);
	return rc ? -EIO : 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) {
		int rc = write_corpus(argv[2]);

		if (rc)
			fprintf(stderr, "test_proto: writing corpus to %s: %s\n",
				argv[2], strerror(-rc));
		return rc ? 1 : 0;
	}
	test_header();
	test_cursors();
	test_mreq_roundtrip();
	test_mreq_bad();
	test_mrep();
	test_mount();
	test_stale();
	test_fence();
	test_fencestate();
	test_ioreq();
	test_statfs();
	test_status();
	test_standby();
	test_lock();
	test_layout();
	test_op_names();
	test_scrub_ioreq();
	test_scrub_ioreps();
	test_scrub_mgr();
	test_batch_ok();
	test_batch_bad();
	test_batchrep();
	test_batch_misc();
	return check_summary("test_proto");
}
