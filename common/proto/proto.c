/*
 * proto.c - the rpfs wire codec: frame headers, little-endian cursors and
 * every message body.
 *
 * This is the only file that converts byte order. Integers are assembled
 * byte by byte (no unaligned casts), so the code is correct on any host.
 * Metadata bodies are driven by per-op field tables: one encoder and one
 * decoder walk the table in a fixed field order, and one checker validates
 * the decoded (or to-be-encoded) values, so an encoder can never emit a body
 * its decoder rejects. Every decoder is safe on arbitrary input; it is
 * fuzzed by tests/fuzz/fuzz_proto.c.
 *
 * Wire layouts of the composite fields (all little-endian):
 *   time    i64 sec, u32 nsec                                    12 bytes
 *   layout  u32 unit, u16 count, u16 first, u8 mirror, 3 x u8 0  12 bytes
 *   attr    u64 ino, u32 mode nlink uid gid rdev, u64 size blocks,
 *           time atime mtime ctime, layout                       92 bytes
 *   cred    u32 uid, u32 gid, u16 ngroups, u32 groups[ngroups]
 *   dirent  u64 cookie, str name, attr
 *   statfs  u64 bsize blocks bfree bavail files ffree, u32 namemax
 *   mount   u64 fsid, layout deflayout, u16 niods,
 *           niods x (u16 id, str host, u16 port),
 *           u16 ngroups, ngroups x (u16 iod a, u16 iod b)
 *   segs    u32 nsegs, nsegs x (u64 off, u64 len)
 *   inos    u32 n, n x u64 ino                      (1 <= n <= 256)
 *
 * A metadata request is its cred followed by the fields its op carries, in
 * the order they are declared in struct proto_mreq (times as above, strings
 * u16-length, xvalue a u32-length blob). A metadata reply is the fields its
 * op carries in this order: attr; freed (u64 ino, layout); target (str);
 * u32 xsize + xvalue (blob); statfs; u32 ndirents + u8 eof + dirents (blob).
 * An iod request is u64 ino, then segs (READ, WRITE), u64 size (TRUNCATE)
 * or u32 flags (FSYNC, and READ after its segs); IO_STATFS has an empty body; IO_REMOVE_MANY is
 * inos alone. IO_FALLOCATE is u64 ino, u64 off, u64 len, u32 mode; IO_SEEK
 * u64 ino, u64 size (the local offset), u32 flags; IO_BLOCKS u64 ino. The
 * IO_SEEK and IO_BLOCKS replies are one u64. IO_LIST is u32 bucket, u64
 * after, u32 max; IO_CSUM u64 ino, u64 off, u64 len; IO_FENCE is
 * proto_fence. Their replies and the mgr's scrub and mirror service bodies
 * are laid out in proto.h.
 */
#include "proto.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define ATTR_WIRE_LEN 92u
#define MAX_IO_OFF (1ull << 62)  /* largest end offset of an iod range */
#define UNIT_MIN 4096u
#define UNIT_MAX (64u * 1024 * 1024)
#define MODE_MASK 0xffffu       /* S_IFMT | 07777 */

static const char empty_str[1] = "";

/* Record why a decode failed (if the caller wants to know) and return err. */
static int fail(const char **why, const char *field, int err)
{
	if (why)
		*why = field;
	return err;
}

/* ------------------------------------------------------------------ header */

/* Store v as 2 little-endian bytes at p. */
static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* Store v as 4 little-endian bytes at p. */
static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Store v as 8 little-endian bytes at p. */
static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Load 2 little-endian bytes from p. */
static uint16_t get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

/* Load 4 little-endian bytes from p. */
static uint32_t get_le32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Load 8 little-endian bytes from p. */
static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Write the 48-byte header; magic, version and reserved come from here,
 * not from h. */
void proto_hdr_encode(uint8_t *out, const struct proto_hdr *h)
{
	put_le32(out + 0, PROTO_MAGIC);
	put_le16(out + 4, PROTO_VERSION);
	put_le16(out + 6, h->op);
	put_le64(out + 8, h->tag);
	put_le32(out + 16, (uint32_t)h->status);
	put_le16(out + 20, h->credits);
	put_le16(out + 22, h->flags);
	put_le32(out + 24, h->body_len);
	put_le32(out + 28, 0);
	put_le64(out + 32, h->bulk_len);
	put_le64(out + 40, h->aux);
}

/* Parse a header and check every field that can be checked without knowing
 * the op: magic, version, flags, reserved, and the size limits. */
int proto_hdr_decode(const uint8_t *in, struct proto_hdr *h, const char **why)
{
	memset(h, 0, sizeof(*h));
	if (get_le32(in) != PROTO_MAGIC)
		return fail(why, "magic", -EPROTO);
	h->version = get_le16(in + 4);
	if (h->version != PROTO_VERSION)
		return fail(why, "version", -EPROTONOSUPPORT);
	h->op = get_le16(in + 6);
	h->tag = get_le64(in + 8);
	h->status = (int32_t)get_le32(in + 16);
	h->credits = get_le16(in + 20);
	h->flags = get_le16(in + 22);
	h->body_len = get_le32(in + 24);
	h->bulk_len = get_le64(in + 32);
	h->aux = get_le64(in + 40);
	if (h->flags & ~PROTO_F_ALL)
		return fail(why, "flags", -EPROTO);
	if (get_le32(in + 28) != 0)
		return fail(why, "reserved", -EPROTO);
	if (h->body_len > PROTO_MAX_BODY)
		return fail(why, "body_len", -EMSGSIZE);
	if (h->bulk_len > PROTO_MAX_BULK)
		return fail(why, "bulk_len", -EMSGSIZE);
	if (!(h->flags & PROTO_F_DATA) && h->aux > PROTO_MAX_BULK)
		return fail(why, "aux", -EMSGSIZE);
	return 0;
}

/* ----------------------------------------------------------------- cursors */

/* Start writing at buf, which has cap bytes. */
void wb_init(struct wbuf *w, void *buf, size_t cap)
{
	w->p = buf;
	w->len = 0;
	w->cap = buf ? cap : 0;
	w->err = 0;
}

/* Reserve n bytes at the end of w; NULL (and err set) if they do not fit. */
static uint8_t *wb_room(struct wbuf *w, size_t n)
{
	uint8_t *p;

	if (w->err)
		return NULL;
	if (n > w->cap - w->len) {
		w->err = -EMSGSIZE;
		return NULL;
	}
	p = w->p + w->len;
	w->len += n;
	return p;
}

/* Append one byte. */
void wb_u8(struct wbuf *w, uint8_t v)
{
	uint8_t *p = wb_room(w, 1);

	if (p)
		p[0] = v;
}

/* Append a little-endian u16. */
void wb_u16(struct wbuf *w, uint16_t v)
{
	uint8_t *p = wb_room(w, 2);

	if (p)
		put_le16(p, v);
}

/* Append a little-endian u32. */
void wb_u32(struct wbuf *w, uint32_t v)
{
	uint8_t *p = wb_room(w, 4);

	if (p)
		put_le32(p, v);
}

/* Append a little-endian u64. */
void wb_u64(struct wbuf *w, uint64_t v)
{
	uint8_t *p = wb_room(w, 8);

	if (p)
		put_le64(p, v);
}

/* Append raw bytes (s may be NULL when len is 0). */
static void wb_bytes(struct wbuf *w, const void *s, size_t len)
{
	uint8_t *p = wb_room(w, len);

	if (p && len)
		memcpy(p, s, len);
}

/* Append a u16-length string. A string longer than 65535 bytes cannot be
 * represented: it sets err to -EMSGSIZE. */
void wb_str(struct wbuf *w, const char *s, size_t len)
{
	if (len > UINT16_MAX) {
		if (!w->err)
			w->err = -EMSGSIZE;
		return;
	}
	wb_u16(w, (uint16_t)len);
	wb_bytes(w, s, len);
}

/* Append a u32-length blob. */
void wb_blob(struct wbuf *w, const void *p, size_t len)
{
	if (len > UINT32_MAX) {
		if (!w->err)
			w->err = -EMSGSIZE;
		return;
	}
	wb_u32(w, (uint32_t)len);
	wb_bytes(w, p, len);
}

/* Start reading len bytes at buf. A NULL buf reads as empty. */
void rb_init(struct rbuf *r, const void *buf, size_t len)
{
	r->p = buf ? buf : (const void *)empty_str;
	r->len = buf ? len : 0;
	r->off = 0;
	r->err = 0;
}

/* Consume n bytes; NULL (and err set) if fewer remain. */
static const uint8_t *rb_take(struct rbuf *r, size_t n)
{
	const uint8_t *p;

	if (r->err)
		return NULL;
	if (n > r->len - r->off) {
		r->err = -EBADMSG;
		return NULL;
	}
	p = r->p + r->off;
	r->off += n;
	return p;
}

/* Read one byte; 0 once err is set. */
uint8_t rb_u8(struct rbuf *r)
{
	const uint8_t *p = rb_take(r, 1);

	return p ? p[0] : 0;
}

/* Read a little-endian u16; 0 once err is set. */
uint16_t rb_u16(struct rbuf *r)
{
	const uint8_t *p = rb_take(r, 2);

	return p ? get_le16(p) : 0;
}

/* Read a little-endian u32; 0 once err is set. */
uint32_t rb_u32(struct rbuf *r)
{
	const uint8_t *p = rb_take(r, 4);

	return p ? get_le32(p) : 0;
}

/* Read a little-endian u64; 0 once err is set. */
uint64_t rb_u64(struct rbuf *r)
{
	const uint8_t *p = rb_take(r, 8);

	return p ? get_le64(p) : 0;
}

/* Entry i of an inode list: see proto.h. */
uint64_t proto_inos_at(const struct proto_inos *l, uint32_t i)
{
	return l->host ? l->host[i] : get_le64(l->wire + (size_t)i * 8);
}

/* Whether an inode list to encode is well formed. */
static bool inos_ok(const struct proto_inos *l)
{
	return l->n >= 1 && l->n <= PROTO_MAX_INOS && (l->host || l->wire);
}

/* Write an inode list (u32 n, n x u64). */
static void wb_inos(struct wbuf *w, const struct proto_inos *l)
{
	wb_u32(w, l->n);
	for (uint32_t i = 0; i < l->n; i++)
		wb_u64(w, proto_inos_at(l, i));
}

/* Read an inode list in place: 1..PROTO_MAX_INOS entries, all present.
 * Sets r->err (and returns an empty list) otherwise. */
static struct proto_inos rb_inos(struct rbuf *r)
{
	struct proto_inos l = { 0, NULL, NULL };
	uint32_t n = rb_u32(r);

	if (r->err)
		return l;
	if (n < 1 || n > PROTO_MAX_INOS) {
		r->err = -EBADMSG;
		return l;
	}
	l.wire = rb_take(r, (size_t)n * 8);
	if (l.wire)
		l.n = n;
	return l;
}

/* Read a u16-length string of at most max bytes without NULs. On error the
 * result is an empty (but non-NULL) string. Cost: one memchr. */
struct proto_str rb_str(struct rbuf *r, uint32_t max)
{
	struct proto_str s = { empty_str, 0 };
	uint16_t n = rb_u16(r);
	const uint8_t *p;

	if (r->err)
		return s;
	if (n > max) {
		r->err = -EBADMSG;
		return s;
	}
	p = rb_take(r, n);
	if (!p)
		return s;
	if (memchr(p, 0, n)) {
		r->err = -EBADMSG;
		return s;
	}
	s.p = (const char *)p;
	s.len = n;
	return s;
}

/* Read a u32-length blob of at most max bytes (any content). */
struct proto_str rb_blob(struct rbuf *r, uint32_t max)
{
	struct proto_str s = { empty_str, 0 };
	uint32_t n = rb_u32(r);
	const uint8_t *p;

	if (r->err)
		return s;
	if (n > max) {
		r->err = -EBADMSG;
		return s;
	}
	p = rb_take(r, n);
	if (!p)
		return s;
	s.p = (const char *)p;
	s.len = n;
	return s;
}

/* -------------------------------------------------------- field validation */

/* A path component: 1..PROTO_MAX_NAME bytes, no '/' or NUL, not . or .. */
static bool name_ok(struct proto_str s)
{
	if (s.len < 1 || s.len > PROTO_MAX_NAME || !s.p)
		return false;
	if (memchr(s.p, '/', s.len) || memchr(s.p, 0, s.len))
		return false;
	if (s.p[0] == '.' && (s.len == 1 || (s.len == 2 && s.p[1] == '.')))
		return false;
	return true;
}

/* A name in a READDIR reply: as name_ok(), but the "." and ".." entries
 * that lead every listing are allowed. */
static bool dirent_name_ok(struct proto_str s)
{
	if (s.len >= 1 && s.len <= 2 && s.p && !memcmp(s.p, "..", s.len))
		return true;
	return name_ok(s);
}

/* A string of 1..max bytes without NULs (symlink target, xattr name). */
static bool text_ok(struct proto_str s, uint32_t max)
{
	return s.len >= 1 && s.len <= max && s.p && !memchr(s.p, 0, s.len);
}

/* A blob of at most max bytes whose pointer is usable. */
static bool blob_ok(struct proto_str s, uint32_t max)
{
	return s.len <= max && (s.p || s.len == 0);
}

/* Nanoseconds must be below one second. */
static bool time_ok(const struct proto_time *t)
{
	return t->nsec < 1000000000u;
}

/* A stripe unit: a power of two in [4096, 64 MiB]. */
static bool unit_ok(uint32_t unit)
{
	return unit >= UNIT_MIN && unit <= UNIT_MAX && !(unit & (unit - 1));
}

/* A layout in an attr or freed record: all zero (no data) or real, with
 * 1 or 2 replicas (a mirrored layout indexes at most 128 groups). */
static bool layout_ok(const struct proto_layout *l)
{
	uint16_t width = l->mirror == 2 ? PROTO_MAX_IODS / 2 : PROTO_MAX_IODS;

	if (l->unit == 0 && l->count == 0 && l->first == 0 && l->mirror == 0)
		return true;
	return unit_ok(l->unit) && (l->mirror == 1 || l->mirror == 2) &&
	       l->count >= 1 && l->count <= width && l->first < width;
}

/* Check an attr's times and layout; NULL or the bad field's name. */
static const char *attr_check(const struct proto_attr *a)
{
	if (!time_ok(&a->atime))
		return "attr.atime.nsec";
	if (!time_ok(&a->mtime))
		return "attr.mtime.nsec";
	if (!time_ok(&a->ctime))
		return "attr.ctime.nsec";
	if (!layout_ok(&a->layout))
		return "attr.layout";
	return NULL;
}

/* --------------------------------------------------------- composite fields */

/* Append a time: i64 sec, u32 nsec. */
static void wb_time(struct wbuf *w, const struct proto_time *t)
{
	wb_u64(w, (uint64_t)t->sec);
	wb_u32(w, t->nsec);
}

/* Read a time written by wb_time(). */
static void rb_time(struct rbuf *r, struct proto_time *t)
{
	t->sec = (int64_t)rb_u64(r);
	t->nsec = rb_u32(r);
}

/* Append a layout: u32 unit, u16 count, u16 first, u8 mirror, 3 zero bytes. */
static void wb_layout(struct wbuf *w, const struct proto_layout *l)
{
	wb_u32(w, l->unit);
	wb_u16(w, l->count);
	wb_u16(w, l->first);
	wb_u8(w, l->mirror);
	wb_u8(w, 0);
	wb_u16(w, 0);
}

/* Read a layout written by wb_layout(). Nonzero padding makes the layout
 * invalid (mirror 0xff), so layout_ok() rejects it. */
static void rb_layout(struct rbuf *r, struct proto_layout *l)
{
	l->unit = rb_u32(r);
	l->count = rb_u16(r);
	l->first = rb_u16(r);
	l->mirror = rb_u8(r);
	if (rb_u8(r) != 0 || rb_u16(r) != 0)
		l->mirror = 0xff;
}

/* Append an attr (ATTR_WIRE_LEN bytes). */
static void wb_attr(struct wbuf *w, const struct proto_attr *a)
{
	wb_u64(w, a->ino);
	wb_u32(w, a->mode);
	wb_u32(w, a->nlink);
	wb_u32(w, a->uid);
	wb_u32(w, a->gid);
	wb_u32(w, a->rdev);
	wb_u64(w, a->size);
	wb_u64(w, a->blocks);
	wb_time(w, &a->atime);
	wb_time(w, &a->mtime);
	wb_time(w, &a->ctime);
	wb_layout(w, &a->layout);
}

/* Read an attr written by wb_attr(); validated by attr_check(). */
static void rb_attr(struct rbuf *r, struct proto_attr *a)
{
	a->ino = rb_u64(r);
	a->mode = rb_u32(r);
	a->nlink = rb_u32(r);
	a->uid = rb_u32(r);
	a->gid = rb_u32(r);
	a->rdev = rb_u32(r);
	a->size = rb_u64(r);
	a->blocks = rb_u64(r);
	rb_time(r, &a->atime);
	rb_time(r, &a->mtime);
	rb_time(r, &a->ctime);
	rb_layout(r, &a->layout);
}

/* Append a statfs record (52 bytes). */
static void wb_statfs(struct wbuf *w, const struct proto_statfs *s)
{
	wb_u64(w, s->bsize);
	wb_u64(w, s->blocks);
	wb_u64(w, s->bfree);
	wb_u64(w, s->bavail);
	wb_u64(w, s->files);
	wb_u64(w, s->ffree);
	wb_u32(w, s->namemax);
}

/* Read a statfs record written by wb_statfs(). */
static void rb_statfs(struct rbuf *r, struct proto_statfs *s)
{
	s->bsize = rb_u64(r);
	s->blocks = rb_u64(r);
	s->bfree = rb_u64(r);
	s->bavail = rb_u64(r);
	s->files = rb_u64(r);
	s->ffree = rb_u64(r);
	s->namemax = rb_u32(r);
}

/* ------------------------------------------------------ metadata requests */

/* mreq fields, in wire order (after the cred every request starts with). */
enum mreq_field {
	MF_INO, MF_PARENT, MF_NAME, MF_NEWPARENT, MF_NEWNAME, MF_MODE, MF_RDEV,
	MF_FLAGS, MF_VALID, MF_UID, MF_GID, MF_SIZE, MF_ATIME, MF_MTIME,
	MF_TARGET, MF_XNAME, MF_XVALUE, MF_COOKIE, MF_MAX, MF_INOS, MF_BLOCKS,
	MF_NFIELDS
};

#define Q(f) (1u << MF_##f)

static const char *const mreq_field_name[MF_NFIELDS] = {
	"ino", "parent", "name", "newparent", "newname", "mode", "rdev",
	"flags", "valid", "uid", "gid", "size", "atime", "mtime",
	"target", "xname", "xvalue", "cookie", "max", "inos", "blocks",
};

/* What one mgr op carries and which values its flags and mode may take. */
struct mreq_desc {
	uint32_t fields;     /* Q(...) bits */
	uint32_t flag_mask;  /* allowed flags bits */
	bool flags_excl;     /* flag_mask bits are mutually exclusive */
	uint32_t mode_mask;  /* allowed mode bits */
};

#define MREQ_NOPS (PROTO_OP_MGR_LAST - PROTO_OP_MOUNT)

static const struct mreq_desc mreq_desc[MREQ_NOPS] = {
	[PROTO_OP_MOUNT - PROTO_OP_MOUNT] = { 0, 0, false, 0 },
	[PROTO_OP_LOOKUP - PROTO_OP_MOUNT] = { Q(PARENT) | Q(NAME), 0, false, 0 },
	[PROTO_OP_GETATTR - PROTO_OP_MOUNT] = { Q(INO), 0, false, 0 },
	[PROTO_OP_SETATTR - PROTO_OP_MOUNT] = {
		Q(INO) | Q(VALID) | Q(MODE) | Q(UID) | Q(GID) | Q(SIZE) |
		Q(ATIME) | Q(MTIME), 0, false, MODE_MASK },
	[PROTO_OP_CREATE - PROTO_OP_MOUNT] = {
		Q(PARENT) | Q(NAME) | Q(MODE) | Q(FLAGS), PROTO_CREATE_EXCL,
		false, MODE_MASK },
	[PROTO_OP_MKDIR - PROTO_OP_MOUNT] = {
		Q(PARENT) | Q(NAME) | Q(MODE), 0, false, MODE_MASK },
	[PROTO_OP_MKNOD - PROTO_OP_MOUNT] = {
		Q(PARENT) | Q(NAME) | Q(MODE) | Q(RDEV), 0, false, MODE_MASK },
	[PROTO_OP_UNLINK - PROTO_OP_MOUNT] = { Q(PARENT) | Q(NAME), 0, false, 0 },
	[PROTO_OP_RMDIR - PROTO_OP_MOUNT] = { Q(PARENT) | Q(NAME), 0, false, 0 },
	[PROTO_OP_RENAME - PROTO_OP_MOUNT] = {
		Q(PARENT) | Q(NAME) | Q(NEWPARENT) | Q(NEWNAME) | Q(FLAGS),
		PROTO_RENAME_NOREPLACE | PROTO_RENAME_EXCHANGE, true, 0 },
	[PROTO_OP_LINK - PROTO_OP_MOUNT] = {
		Q(INO) | Q(NEWPARENT) | Q(NEWNAME), 0, false, 0 },
	[PROTO_OP_SYMLINK - PROTO_OP_MOUNT] = {
		Q(PARENT) | Q(NAME) | Q(TARGET), 0, false, 0 },
	[PROTO_OP_READLINK - PROTO_OP_MOUNT] = { Q(INO), 0, false, 0 },
	[PROTO_OP_READDIR - PROTO_OP_MOUNT] = {
		Q(INO) | Q(COOKIE) | Q(MAX), 0, false, 0 },
	[PROTO_OP_STATFS - PROTO_OP_MOUNT] = { 0, 0, false, 0 },
	[PROTO_OP_GETXATTR - PROTO_OP_MOUNT] = {
		Q(INO) | Q(XNAME) | Q(MAX), 0, false, 0 },
	[PROTO_OP_SETXATTR - PROTO_OP_MOUNT] = {
		Q(INO) | Q(XNAME) | Q(XVALUE) | Q(FLAGS),
		PROTO_XATTR_CREATE | PROTO_XATTR_REPLACE, true, 0 },
	[PROTO_OP_LISTXATTR - PROTO_OP_MOUNT] = { Q(INO) | Q(MAX), 0, false, 0 },
	[PROTO_OP_REMOVEXATTR - PROTO_OP_MOUNT] = {
		Q(INO) | Q(XNAME), 0, false, 0 },
	/* OPEN passes the caller's open flags through; the mgr looks at the
	 * access mode only, so no bit is rejected here. */
	[PROTO_OP_OPEN - PROTO_OP_MOUNT] = { Q(INO) | Q(FLAGS), UINT32_MAX,
					      false, 0 },
	[PROTO_OP_ACCESS - PROTO_OP_MOUNT] = { Q(INO) | Q(MODE), 0, false, 7 },
	[PROTO_OP_SETSIZE - PROTO_OP_MOUNT] = {
		Q(INO) | Q(SIZE) | Q(MTIME), 0, false, 0 },
	[PROTO_OP_PURGE - PROTO_OP_MOUNT] = { Q(INO), 0, false, 0 },
	[PROTO_OP_PURGE_MANY - PROTO_OP_MOUNT] = { Q(INOS), 0, false, 0 },
	[PROTO_OP_SETBLOCKS - PROTO_OP_MOUNT] = {
		Q(INO) | Q(FLAGS) | Q(SIZE) | Q(MTIME) | Q(BLOCKS), PROTO_SB_ALL,
		false, 0 },
};

/* Whether op is a mgr op of the proto_mreq codec: in range, and not 34
 * (CB_WAIT), one of the lock ops (35..37) or BATCH (39), which have their
 * own codecs (proto_cbwait, proto_lock, proto_batch). */
static bool mgr_op_known(uint16_t op)
{
	if (op < PROTO_OP_MOUNT || op >= PROTO_OP_MGR_LAST)
		return false;
	return op <= PROTO_OP_PURGE_MANY || op == PROTO_OP_SETBLOCKS;
}

/* The table entry of a mgr op, or NULL if op is not one. */
static const struct mreq_desc *mreq_desc_get(uint16_t op)
{
	if (!mgr_op_known(op))
		return NULL;
	return &mreq_desc[op - PROTO_OP_MOUNT];
}

/* Validate the fields op carries; NULL if all fine, else the bad field.
 * Shared by the encoder (-EINVAL) and the decoder (-EBADMSG). */
static const char *mreq_check(const struct mreq_desc *d,
			      const struct proto_mreq *m)
{
	uint32_t f = d->fields;

	if (m->cred.ngroups > PROTO_MAX_GROUPS)
		return "cred.ngroups";
	if ((f & Q(NAME)) && !name_ok(m->name))
		return "name";
	if ((f & Q(NEWNAME)) && !name_ok(m->newname))
		return "newname";
	if ((f & Q(MODE)) && (m->mode & ~d->mode_mask))
		return "mode";
	if (f & Q(FLAGS)) {
		if (m->flags & ~d->flag_mask)
			return "flags";
		if (d->flags_excl && (m->flags & d->flag_mask) == d->flag_mask)
			return "flags";
	}
	if ((f & Q(VALID)) && (m->valid & ~PROTO_SA_ALL))
		return "valid";
	if ((f & Q(ATIME)) && !time_ok(&m->atime))
		return "atime.nsec";
	if ((f & Q(MTIME)) && !time_ok(&m->mtime))
		return "mtime.nsec";
	if ((f & Q(TARGET)) && !text_ok(m->target, PROTO_MAX_PATH))
		return "target";
	if ((f & Q(XNAME)) && !text_ok(m->xname, PROTO_MAX_XATTR_NAME))
		return "xname";
	if ((f & Q(XVALUE)) && !blob_ok(m->xvalue, PROTO_MAX_XATTR_VALUE))
		return "xvalue";
	if ((f & Q(INOS)) && !inos_ok(&m->inos))
		return "inos";
	if ((f & Q(BLOCKS)) && m->blocks > PROTO_MAX_BLOCKS)
		return "blocks";
	if ((f & Q(SIZE)) && (f & Q(BLOCKS)) && m->size > (uint64_t)INT64_MAX)
		return "size";
	return NULL;
}

/* Append a cred: uid, gid, ngroups (| PROTO_CRED_SESSION), the groups,
 * the session when != 0. The caller checked ngroups. */
static void wb_cred(struct wbuf *w, const struct proto_cred *c)
{
	wb_u32(w, c->uid);
	wb_u32(w, c->gid);
	wb_u16(w, (uint16_t)(c->ngroups | (c->session ? PROTO_CRED_SESSION : 0)));
	for (unsigned i = 0; i < c->ngroups; i++)
		wb_u32(w, c->groups[i]);
	if (c->session)
		wb_u64(w, c->session);
}

/* Read a cred written by wb_cred(): 0, or -EBADMSG with *why naming the
 * bad part (truncated, too many groups, a session flag with session 0). */
static int rb_cred(struct rbuf *r, struct proto_cred *c, const char **why)
{
	int has_session;

	c->uid = rb_u32(r);
	c->gid = rb_u32(r);
	c->ngroups = rb_u16(r);
	if (r->err)
		return fail(why, "cred", -EBADMSG);
	has_session = c->ngroups & PROTO_CRED_SESSION;
	c->ngroups &= (uint16_t)~PROTO_CRED_SESSION;
	if (c->ngroups > PROTO_MAX_GROUPS)
		return fail(why, "cred.ngroups", -EBADMSG);
	for (unsigned i = 0; i < c->ngroups; i++)
		c->groups[i] = rb_u32(r);
	if (r->err)
		return fail(why, "cred.groups", -EBADMSG);
	if (has_session) {
		c->session = rb_u64(r);
		if (r->err || c->session == 0)
			return fail(why, "cred.session", -EBADMSG);
	}
	return 0;
}

/* Append the fields d carries, in enum order (after the cred). */
static void wb_mreq_fields(struct wbuf *w, const struct mreq_desc *d,
			   const struct proto_mreq *m)
{
	for (int f = 0; f < MF_NFIELDS; f++) {
		if (!(d->fields & (1u << f)))
			continue;
		switch ((enum mreq_field)f) {
		case MF_INO: wb_u64(w, m->ino); break;
		case MF_PARENT: wb_u64(w, m->parent); break;
		case MF_NAME: wb_str(w, m->name.p, m->name.len); break;
		case MF_NEWPARENT: wb_u64(w, m->newparent); break;
		case MF_NEWNAME: wb_str(w, m->newname.p, m->newname.len); break;
		case MF_MODE: wb_u32(w, m->mode); break;
		case MF_RDEV: wb_u32(w, m->rdev); break;
		case MF_FLAGS: wb_u32(w, m->flags); break;
		case MF_VALID: wb_u32(w, m->valid); break;
		case MF_UID: wb_u32(w, m->uid); break;
		case MF_GID: wb_u32(w, m->gid); break;
		case MF_SIZE: wb_u64(w, m->size); break;
		case MF_ATIME: wb_time(w, &m->atime); break;
		case MF_MTIME: wb_time(w, &m->mtime); break;
		case MF_TARGET: wb_str(w, m->target.p, m->target.len); break;
		case MF_XNAME: wb_str(w, m->xname.p, m->xname.len); break;
		case MF_XVALUE: wb_blob(w, m->xvalue.p, m->xvalue.len); break;
		case MF_COOKIE: wb_u64(w, m->cookie); break;
		case MF_MAX: wb_u32(w, m->max); break;
		case MF_INOS: wb_inos(w, &m->inos); break;
		case MF_BLOCKS: wb_u64(w, m->blocks); break;
		case MF_NFIELDS: break;
		}
	}
}

/* Encode cred and then the op's fields in enum order. Cost: O(body). */
int proto_mreq_encode(struct wbuf *w, uint16_t op, const struct proto_mreq *m)
{
	const struct mreq_desc *d = mreq_desc_get(op);

	if (!d || mreq_check(d, m))
		return -EINVAL;
	wb_cred(w, &m->cred);
	wb_mreq_fields(w, d, m);
	return w->err;
}

/* Clear m: fields an op does not carry read as zero, strings as "". */
static void mreq_clear(struct proto_mreq *m)
{
	memset(m, 0, sizeof(*m));
	m->name = m->newname = m->target = m->xname = m->xvalue =
		(struct proto_str){ empty_str, 0 };
}

/* Read cred and the fields d carries from r into a cleared m, without
 * validating them (mreq_check) or looking past them. Strings point into
 * r's buffer. @return 0, -EBADMSG (truncated: *why names the field). */
static int rb_mreq(struct rbuf *r, const struct mreq_desc *d,
		   struct proto_mreq *m, const char **why)
{
	int rc = rb_cred(r, &m->cred, why);

	if (rc)
		return rc;
	for (int f = 0; f < MF_NFIELDS; f++) {
		if (!(d->fields & (1u << f)))
			continue;
		switch ((enum mreq_field)f) {
		case MF_INO: m->ino = rb_u64(r); break;
		case MF_PARENT: m->parent = rb_u64(r); break;
		case MF_NAME: m->name = rb_str(r, PROTO_MAX_NAME); break;
		case MF_NEWPARENT: m->newparent = rb_u64(r); break;
		case MF_NEWNAME: m->newname = rb_str(r, PROTO_MAX_NAME); break;
		case MF_MODE: m->mode = rb_u32(r); break;
		case MF_RDEV: m->rdev = rb_u32(r); break;
		case MF_FLAGS: m->flags = rb_u32(r); break;
		case MF_VALID: m->valid = rb_u32(r); break;
		case MF_UID: m->uid = rb_u32(r); break;
		case MF_GID: m->gid = rb_u32(r); break;
		case MF_SIZE: m->size = rb_u64(r); break;
		case MF_ATIME: rb_time(r, &m->atime); break;
		case MF_MTIME: rb_time(r, &m->mtime); break;
		case MF_TARGET: m->target = rb_str(r, PROTO_MAX_PATH); break;
		case MF_XNAME:
			m->xname = rb_str(r, PROTO_MAX_XATTR_NAME);
			break;
		case MF_XVALUE:
			m->xvalue = rb_blob(r, PROTO_MAX_XATTR_VALUE);
			break;
		case MF_COOKIE: m->cookie = rb_u64(r); break;
		case MF_MAX: m->max = rb_u32(r); break;
		case MF_INOS: m->inos = rb_inos(r); break;
		case MF_BLOCKS: m->blocks = rb_u64(r); break;
		case MF_NFIELDS: break;
		}
		if (r->err)
			return fail(why, mreq_field_name[f], -EBADMSG);
	}
	return 0;
}

/* Decode cred and the op's fields, then validate them. Fields the op does
 * not carry are left zero. Cost: O(body). */
int proto_mreq_decode(const void *buf, size_t len, uint16_t op,
		      struct proto_mreq *m, const char **why)
{
	const struct mreq_desc *d = mreq_desc_get(op);
	const char *bad;
	struct rbuf r;
	int rc;

	mreq_clear(m);
	if (!d)
		return fail(why, "op", -EOPNOTSUPP);
	rb_init(&r, buf, len);
	rc = rb_mreq(&r, d, m, why);
	if (rc)
		return rc;
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	bad = mreq_check(d, m);
	if (bad)
		return fail(why, bad, -EBADMSG);
	return 0;
}

/* -------------------------------------------------------- metadata replies */

enum mrep_field { RF_ATTR, RF_FREED, RF_TARGET, RF_XATTR, RF_STATFS,
		  RF_DIRENTS, RF_NFIELDS };

#define P(f) (1u << RF_##f)
#define RF_NONE 0u
#define RF_RAW 0x80000000u /* body is not an mrep (MOUNT: proto_mount_*) */

#define R(op, f) [PROTO_OP_##op - PROTO_OP_MOUNT] = (f)
static const uint32_t mrep_fields[MREQ_NOPS] = {
	R(MOUNT, RF_RAW), R(LOOKUP, P(ATTR)), R(GETATTR, P(ATTR)),
	R(SETATTR, P(ATTR)), R(CREATE, P(ATTR)), R(MKDIR, P(ATTR)),
	R(MKNOD, P(ATTR)), R(UNLINK, P(FREED)), R(RMDIR, RF_NONE),
	R(RENAME, P(FREED)), R(LINK, P(ATTR)), R(SYMLINK, P(ATTR)),
	R(READLINK, P(TARGET)), R(READDIR, P(DIRENTS)), R(STATFS, P(STATFS)),
	R(GETXATTR, P(XATTR)), R(SETXATTR, RF_NONE), R(LISTXATTR, P(XATTR)),
	R(REMOVEXATTR, RF_NONE), R(OPEN, P(ATTR)), R(ACCESS, RF_NONE),
	R(SETSIZE, P(ATTR)), R(PURGE, RF_NONE), R(PURGE_MANY, RF_NONE),
	R(SETBLOCKS, P(ATTR)),
};
#undef R

/* Smallest encoded dirent (1-byte name): bounds ndirents against the blob. */
#define DIRENT_MIN (8u + 2u + 1u + ATTR_WIRE_LEN)

/* Validate the fields a reply carries; NULL or the bad field's name. */
static const char *mrep_check(uint32_t f, const struct proto_mrep *m)
{
	const char *bad;

	if (f & P(ATTR)) {
		bad = attr_check(&m->attr);
		if (bad)
			return bad;
	}
	if ((f & P(FREED)) && !layout_ok(&m->freed.layout))
		return "freed.layout";
	if ((f & P(TARGET)) && !text_ok(m->target, PROTO_MAX_PATH))
		return "target";
	if (f & P(XATTR)) {
		if (!blob_ok(m->xvalue, PROTO_MAX_XATTR_VALUE))
			return "xvalue";
		if (m->xvalue.len > m->xsize)
			return "xsize";
	}
	if (f & P(DIRENTS)) {
		if (!blob_ok(m->dirents, PROTO_MAX_BODY))
			return "dirents";
		if (m->ndirents > m->dirents.len / DIRENT_MIN)
			return "ndirents";
	}
	return NULL;
}

/* The field set of a reply to op; -EOPNOTSUPP for non-mgr ops and MOUNT. */
static int mrep_fields_get(uint16_t op, uint32_t *f)
{
	if (!mgr_op_known(op))
		return -EOPNOTSUPP;
	*f = mrep_fields[op - PROTO_OP_MOUNT];
	if (*f & RF_RAW)
		return -EOPNOTSUPP;
	return 0;
}

/* Whether op's reply may carry a lease grant (struct proto_grant): a READ
 * lease on LOOKUP and READDIR, a WRITE lease on the new directory on MKDIR. */
static int grant_op(uint16_t op)
{
	return op == PROTO_OP_LOOKUP || op == PROTO_OP_READDIR ||
	       op == PROTO_OP_MKDIR;
}

/* Encode the reply fields op carries, in enum order. MOUNT replies are
 * built with proto_mount_encode() instead (-EINVAL here). */

int proto_mrep_encode(struct wbuf *w, uint16_t op, const struct proto_mrep *m)
{
	uint32_t f;

	if (mrep_fields_get(op, &f) || mrep_check(f, m) ||
	    (m->grant.ino && !grant_op(op)))
		return -EINVAL;
	for (int i = 0; i < RF_NFIELDS; i++) {
		if (!(f & (1u << i)))
			continue;
		switch ((enum mrep_field)i) {
		case RF_ATTR: wb_attr(w, &m->attr); break;
		case RF_FREED:
			wb_u64(w, m->freed.ino);
			wb_layout(w, &m->freed.layout);
			break;
		case RF_TARGET: wb_str(w, m->target.p, m->target.len); break;
		case RF_XATTR:
			wb_u32(w, m->xsize);
			wb_blob(w, m->xvalue.p, m->xvalue.len);
			break;
		case RF_STATFS: wb_statfs(w, &m->st); break;
		case RF_DIRENTS:
			wb_u32(w, m->ndirents);
			wb_u8(w, m->eof ? 1 : 0);
			wb_blob(w, m->dirents.p, m->dirents.len);
			break;
		case RF_NFIELDS: break;
		}
	}
	if (m->grant.ino) {
		wb_u64(w, m->grant.ino);
		wb_u64(w, m->grant.evseq);
	}
	return w->err;
}

/* Decode and validate a reply body. Dirents are only bounded here; each
 * entry is validated as proto_dirent_next() reaches it. Cost: O(body). */
int proto_mrep_decode(const void *buf, size_t len, uint16_t op,
		      struct proto_mrep *m, const char **why)
{
	static const char *const names[RF_NFIELDS] = {
		"attr", "freed", "target", "xattr", "statfs", "dirents" };
	const char *bad;
	struct rbuf r;
	uint32_t f;
	uint8_t eof;

	memset(m, 0, sizeof(*m));
	m->target = m->xvalue = m->dirents = (struct proto_str){ empty_str, 0 };
	if (mrep_fields_get(op, &f))
		return fail(why, "op", -EOPNOTSUPP);
	rb_init(&r, buf, len);
	for (int i = 0; i < RF_NFIELDS; i++) {
		if (!(f & (1u << i)))
			continue;
		switch ((enum mrep_field)i) {
		case RF_ATTR: rb_attr(&r, &m->attr); break;
		case RF_FREED:
			m->freed.ino = rb_u64(&r);
			rb_layout(&r, &m->freed.layout);
			break;
		case RF_TARGET: m->target = rb_str(&r, PROTO_MAX_PATH); break;
		case RF_XATTR:
			m->xsize = rb_u32(&r);
			m->xvalue = rb_blob(&r, PROTO_MAX_XATTR_VALUE);
			break;
		case RF_STATFS: rb_statfs(&r, &m->st); break;
		case RF_DIRENTS:
			m->ndirents = rb_u32(&r);
			eof = rb_u8(&r);
			if (eof > 1)
				return fail(why, "eof", -EBADMSG);
			m->eof = eof;
			m->dirents = rb_blob(&r, PROTO_MAX_BODY);
			break;
		case RF_NFIELDS: break;
		}
		if (r.err)
			return fail(why, names[i], -EBADMSG);
	}
	if (grant_op(op) && r.len - r.off == 16) {
		m->grant.ino = rb_u64(&r);
		m->grant.evseq = rb_u64(&r);
		if (m->grant.ino == 0)
			return fail(why, "grant.ino", -EBADMSG);
	}
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	bad = mrep_check(f, m);
	if (bad)
		return fail(why, bad, -EBADMSG);
	return 0;
}

/* ----------------------------------------------------------------- dirents */

/* Append one entry; a full buffer sets w->err (check proto_dirent_size()
 * first to stop cleanly at the reply's max). */
void proto_dirent_put(struct wbuf *w, uint64_t cookie, const char *name,
		      size_t namelen, const struct proto_attr *a)
{
	if (w->err)
		return;
	if (w->cap - w->len < proto_dirent_size(namelen)) {
		w->err = -EMSGSIZE;
		return;
	}
	wb_u64(w, cookie);
	wb_str(w, name, namelen);
	wb_attr(w, a);
}

/* Encoded size of an entry with a namelen-byte name. */
size_t proto_dirent_size(size_t namelen)
{
	return 8 + 2 + namelen + ATTR_WIRE_LEN;
}

/* Read and validate the next entry (name rules as in requests, except that
 * "." and ".." are allowed; attr times and layout). A malformed entry
 * poisons the cursor. */
int proto_dirent_next(struct rbuf *r, struct proto_dirent *d)
{
	memset(d, 0, sizeof(*d));
	d->name = (struct proto_str){ empty_str, 0 };
	if (r->err)
		return -EBADMSG;
	if (r->off == r->len)
		return 0;
	d->cookie = rb_u64(r);
	d->name = rb_str(r, PROTO_MAX_NAME);
	rb_attr(r, &d->attr);
	if (!r->err && (!dirent_name_ok(d->name) || attr_check(&d->attr)))
		r->err = -EBADMSG;
	if (r->err)
		return -EBADMSG;
	return 1;
}

/* ------------------------------------------------------------------- mount */

/* Validate a MOUNT reply; NULL or the bad field's name. */
static const char *mount_check(const struct proto_mount *m)
{
	if (m->niods < 1 || m->niods > PROTO_MAX_IODS)
		return "niods";
	if (!unit_ok(m->deflayout.unit))
		return "deflayout.unit";
	if (m->deflayout.mirror != 1 && m->deflayout.mirror != 2)
		return "deflayout.mirror";
	if (m->deflayout.count < 1 ||
	    m->deflayout.count > (m->deflayout.mirror == 2 ? m->ngroups : m->niods))
		return "deflayout.count";
	for (unsigned i = 0; i < m->niods; i++) {
		if (m->iods[i].id != i)
			return "iod.id";
		if (!text_ok(m->iods[i].host, PROTO_MAX_HOST))
			return "iod.host";
		if (m->iods[i].port == 0)
			return "iod.port";
	}
	return proto_groups_check(m->groups, m->ngroups, m->niods);
}

/* Check a mirror group table; NULL or the bad field's name. Cost:
 * O(ngroups + niods). */
const char *proto_groups_check(const struct proto_group *g, uint16_t ngroups,
			       uint16_t niods)
{
	uint8_t used[PROTO_MAX_IODS] = { 0 };

	if (ngroups > niods / 2)
		return "ngroups";
	for (unsigned i = 0; i < ngroups; i++) {
		for (int r = 0; r < 2; r++) {
			if (g[i].iod[r] >= niods || used[g[i].iod[r]])
				return "group.iod";
			used[g[i].iod[r]] = 1;
		}
	}
	return NULL;
}

/* Encode the MOUNT reply: fs id, default layout and the iod table. */
int proto_mount_encode(struct wbuf *w, const struct proto_mount *m)
{
	if (mount_check(m))
		return -EINVAL;
	wb_u64(w, m->fsid);
	wb_layout(w, &m->deflayout);
	wb_u16(w, m->niods);
	for (unsigned i = 0; i < m->niods; i++) {
		wb_u16(w, m->iods[i].id);
		wb_str(w, m->iods[i].host.p, m->iods[i].host.len);
		wb_u16(w, m->iods[i].port);
	}
	wb_u16(w, m->ngroups);
	for (unsigned i = 0; i < m->ngroups; i++) {
		wb_u16(w, m->groups[i].iod[0]);
		wb_u16(w, m->groups[i].iod[1]);
	}
	return w->err;
}

/* Decode and validate a MOUNT reply; hosts point into buf. */
int proto_mount_decode(const void *buf, size_t len, struct proto_mount *m,
		       const char **why)
{
	const char *bad;
	struct rbuf r;

	memset(m, 0, sizeof(*m));
	rb_init(&r, buf, len);
	m->fsid = rb_u64(&r);
	rb_layout(&r, &m->deflayout);
	m->niods = rb_u16(&r);
	if (r.err)
		return fail(why, "mount", -EBADMSG);
	if (m->niods < 1 || m->niods > PROTO_MAX_IODS)
		return fail(why, "niods", -EBADMSG);
	for (unsigned i = 0; i < m->niods; i++) {
		m->iods[i].id = rb_u16(&r);
		m->iods[i].host = rb_str(&r, PROTO_MAX_HOST);
		m->iods[i].port = rb_u16(&r);
		if (r.err)
			return fail(why, "iod", -EBADMSG);
	}
	m->ngroups = rb_u16(&r);
	if (r.err || m->ngroups > m->niods / 2)
		return fail(why, "ngroups", -EBADMSG);
	for (unsigned i = 0; i < m->ngroups; i++) {
		m->groups[i].iod[0] = rb_u16(&r);
		m->groups[i].iod[1] = rb_u16(&r);
	}
	if (r.err)
		return fail(why, "group", -EBADMSG);
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	bad = mount_check(m);
	if (bad)
		return fail(why, bad, -EBADMSG);
	return 0;
}

/* ------------------------------------------------------------ iod requests */

enum io_field { IF_INO = 1, IF_SEGS = 2, IF_SIZE = 4, IF_FLAGS = 8, IF_INOS = 16,
		IF_RANGE = 32, IF_MODE = 64, IF_CURSOR = 128, IF_MAX = 256 };

/* Field sets of IO_READ .. IO_CSUM. */
static const uint16_t io_fields[PROTO_OP_IO_LAST - PROTO_OP_IO_READ] = {
	[PROTO_OP_IO_READ - PROTO_OP_IO_READ] = IF_INO | IF_SEGS | IF_FLAGS,
	[PROTO_OP_IO_WRITE - PROTO_OP_IO_READ] = IF_INO | IF_SEGS,
	[PROTO_OP_IO_TRUNCATE - PROTO_OP_IO_READ] = IF_INO | IF_SIZE,
	[PROTO_OP_IO_REMOVE - PROTO_OP_IO_READ] = IF_INO,
	[PROTO_OP_IO_FSYNC - PROTO_OP_IO_READ] = IF_INO | IF_FLAGS,
	[PROTO_OP_IO_STATFS - PROTO_OP_IO_READ] = 0,
	[PROTO_OP_IO_REMOVE_MANY - PROTO_OP_IO_READ] = IF_INOS,
	[PROTO_OP_IO_FALLOCATE - PROTO_OP_IO_READ] = IF_INO | IF_RANGE | IF_MODE,
	[PROTO_OP_IO_SEEK - PROTO_OP_IO_READ] = IF_INO | IF_SIZE | IF_FLAGS,
	[PROTO_OP_IO_BLOCKS - PROTO_OP_IO_READ] = IF_INO,
	[PROTO_OP_IO_LIST - PROTO_OP_IO_READ] = IF_CURSOR | IF_MAX,
	[PROTO_OP_IO_CSUM - PROTO_OP_IO_READ] = IF_INO | IF_RANGE,
};

/* The range of an IO_CSUM is bounded (the iod reads it in one go). */
static bool range_len_ok(uint16_t op, uint64_t len)
{
	return op != PROTO_OP_IO_CSUM || len <= PROTO_MAX_CSUM_LEN;
}

/* An IO_FALLOCATE mode is one of the five combinations rpfs serves. */
static bool falloc_mode_ok(uint32_t mode)
{
	switch (mode) {
	case 0:
	case PROTO_FALLOC_KEEP_SIZE:
	case PROTO_FALLOC_PUNCH_HOLE | PROTO_FALLOC_KEEP_SIZE:
	case PROTO_FALLOC_ZERO_RANGE:
	case PROTO_FALLOC_ZERO_RANGE | PROTO_FALLOC_KEEP_SIZE:
		return true;
	default:
		return false;
	}
}

/* The flags each op with IF_FLAGS accepts. */
static bool io_flags_ok(uint16_t op, uint32_t flags)
{
	switch (op) {
	case PROTO_OP_IO_READ:
		return (flags & ~PROTO_IO_MIRROR) == 0;
	case PROTO_OP_IO_SEEK:
		return (flags & ~(PROTO_SEEK_HOLE | PROTO_IO_MIRROR)) == 0;
	default:
		return (flags & ~1u) == 0;
	}
}

/* The field set of iod op; -EOPNOTSUPP for anything else (IO_FENCE has a
 * body of its own, proto_fence). */
static int io_fields_get(uint16_t op, unsigned *f)
{
	if (op < PROTO_OP_IO_READ || op >= PROTO_OP_IO_LAST ||
	    op == PROTO_OP_IO_FENCE)
		return -EOPNOTSUPP;
	*f = io_fields[op - PROTO_OP_IO_READ];
	return 0;
}

/* One segment is valid: non-empty and ends at or below 2^62. */
static bool seg_ok(const struct proto_seg *s)
{
	return s->len > 0 && s->off <= MAX_IO_OFF && s->len <= MAX_IO_OFF - s->off;
}

/* Encode an iod request. Segments are checked like the decoder does, except
 * for their sum, which only the header knows. */
int proto_ioreq_encode(struct wbuf *w, uint16_t op, const struct proto_ioreq *q)
{
	unsigned f;

	if (io_fields_get(op, &f))
		return -EINVAL;
	if (f & IF_SEGS) {
		if (q->nsegs < 1 || q->nsegs > PROTO_MAX_SEGS || !q->segs)
			return -EINVAL;
		for (uint32_t i = 0; i < q->nsegs; i++)
			if (!seg_ok(&q->segs[i]))
				return -EINVAL;
	}
	if ((f & IF_SIZE) && q->size > MAX_IO_OFF)
		return -EINVAL;
	if ((f & IF_FLAGS) && !io_flags_ok(op, q->flags))
		return -EINVAL;
	if ((f & IF_INOS) && !inos_ok(&q->inos))
		return -EINVAL;
	if ((f & IF_RANGE) && !seg_ok(&(struct proto_seg){ q->off, q->len }))
		return -EINVAL;
	if ((f & IF_MODE) && !falloc_mode_ok(q->mode))
		return -EINVAL;
	if ((f & IF_RANGE) && !range_len_ok(op, q->len))
		return -EINVAL;
	if ((f & IF_CURSOR) && q->cursor.bucket > PROTO_LIST_END)
		return -EINVAL;
	if ((f & IF_MAX) && (q->max < 1 || q->max > PROTO_MAX_LIST))
		return -EINVAL;
	if (f & IF_INO)
		wb_u64(w, q->ino);
	if (f & IF_SEGS) {
		wb_u32(w, q->nsegs);
		for (uint32_t i = 0; i < q->nsegs; i++) {
			wb_u64(w, q->segs[i].off);
			wb_u64(w, q->segs[i].len);
		}
	}
	if (f & IF_SIZE)
		wb_u64(w, q->size);
	if (f & IF_FLAGS)
		wb_u32(w, q->flags);
	if (f & IF_INOS)
		wb_inos(w, &q->inos);
	if (f & IF_RANGE) {
		wb_u64(w, q->off);
		wb_u64(w, q->len);
	}
	if (f & IF_MODE)
		wb_u32(w, q->mode);
	if (f & IF_CURSOR) {
		wb_u32(w, q->cursor.bucket);
		wb_u64(w, q->cursor.after);
	}
	if (f & IF_MAX)
		wb_u32(w, q->max);
	return w->err;
}

/* Decode an iod request's segment list into segs (room for
 * PROTO_MAX_SEGS): 1..PROTO_MAX_SEGS valid segments that add up to
 * expect_bytes. Cost: O(nsegs). */
static int ioreq_segs_get(struct rbuf *r, uint64_t expect_bytes,
			  struct proto_ioreq *q, struct proto_seg *segs,
			  const char **why)
{
	uint64_t sum = 0;

	q->nsegs = rb_u32(r);
	if (r->err)
		return fail(why, "nsegs", -EBADMSG);
	if (q->nsegs < 1 || q->nsegs > PROTO_MAX_SEGS)
		return fail(why, "nsegs", -EBADMSG);
	if ((size_t)q->nsegs * 16 > r->len - r->off)
		return fail(why, "segs", -EBADMSG);
	for (uint32_t i = 0; i < q->nsegs; i++) {
		segs[i].off = rb_u64(r);
		segs[i].len = rb_u64(r);
		if (!seg_ok(&segs[i]))
			return fail(why, "seg", -EBADMSG);
		/* each len <= 2^62 and at most 1024 of them: the sum
		 * cannot wrap, but check anyway */
		if (__builtin_add_overflow(sum, segs[i].len, &sum))
			return fail(why, "segs sum", -EBADMSG);
	}
	if (sum != expect_bytes)
		return fail(why, "segs sum", -EBADMSG);
	return 0;
}

/* Decode and check the fields of an iod request that follow its segments
 * (f: the op's IF_* fields, in wire order): size, flags, inode list,
 * range, fallocate mode, list cursor and maximum. Cost: O(inodes). */
static int ioreq_args_get(struct rbuf *r, uint16_t op, unsigned f,
			  struct proto_ioreq *q, const char **why)
{
	if (f & IF_SIZE) {
		q->size = rb_u64(r);
		if (r->err || q->size > MAX_IO_OFF)
			return fail(why, "size", -EBADMSG);
	}
	if (f & IF_FLAGS) {
		q->flags = rb_u32(r);
		if (r->err || !io_flags_ok(op, q->flags))
			return fail(why, "flags", -EBADMSG);
	}
	if (f & IF_INOS) {
		q->inos = rb_inos(r);
		if (r->err)
			return fail(why, "inos", -EBADMSG);
	}
	if (f & IF_RANGE) {
		q->off = rb_u64(r);
		q->len = rb_u64(r);
		if (r->err || !seg_ok(&(struct proto_seg){ q->off, q->len }) ||
		    !range_len_ok(op, q->len))
			return fail(why, "range", -EBADMSG);
	}
	if (f & IF_MODE) {
		q->mode = rb_u32(r);
		if (r->err || !falloc_mode_ok(q->mode))
			return fail(why, "mode", -EBADMSG);
	}
	if (f & IF_CURSOR) {
		q->cursor.bucket = rb_u32(r);
		q->cursor.after = rb_u64(r);
		if (r->err || q->cursor.bucket > PROTO_LIST_END)
			return fail(why, "cursor", -EBADMSG);
	}
	if (f & IF_MAX) {
		q->max = rb_u32(r);
		if (r->err || q->max < 1 || q->max > PROTO_MAX_LIST)
			return fail(why, "max", -EBADMSG);
	}
	return 0;
}

/* Decode and validate an iod request; segments go to segs (room for
 * PROTO_MAX_SEGS) and must add up to expect_bytes. Cost: O(nsegs). */
int proto_ioreq_decode(const void *buf, size_t len, uint16_t op,
		       uint64_t expect_bytes, struct proto_ioreq *q,
		       struct proto_seg *segs, const char **why)
{
	struct rbuf r;
	unsigned f;
	int rc;

	memset(q, 0, sizeof(*q));
	q->segs = segs;
	if (io_fields_get(op, &f))
		return fail(why, "op", -EOPNOTSUPP);
	rb_init(&r, buf, len);
	if (f & IF_INO) {
		q->ino = rb_u64(&r);
		if (r.err)
			return fail(why, "ino", -EBADMSG);
	}
	if (f & IF_SEGS) {
		rc = ioreq_segs_get(&r, expect_bytes, q, segs, why);
		if (rc)
			return rc;
	}
	rc = ioreq_args_get(&r, op, f, q, why);
	if (rc)
		return rc;
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	return 0;
}

/* ------------------------------------------------------------ u64 replies */

/* Encode an IO_SEEK / IO_BLOCKS reply body (8 bytes). */
int proto_ioval_encode(struct wbuf *w, uint64_t v)
{
	wb_u64(w, v);
	return w->err;
}

/* Decode an IO_SEEK / IO_BLOCKS reply body: one u64, at most 2^62 (an
 * offset or block count of an object that can hold no more). */
int proto_ioval_decode(const void *buf, size_t len, uint64_t *v,
		       const char **why)
{
	struct rbuf r;

	rb_init(&r, buf, len);
	*v = rb_u64(&r);
	if (r.err)
		return fail(why, "value", -EBADMSG);
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	if (*v > MAX_IO_OFF)
		return fail(why, "value", -EBADMSG);
	return 0;
}

/* ------------------------------------------------------------------- scrub */

#define LIST_OBJ_WIRE 32u  /* u64 ino, size, blocks, i64 mtime */
#define ORPHAN_WIRE 32u    /* u64 ino, size, blocks, i64 ctime_ns */

/* Validate an IO_LIST reply; NULL or the bad field's name. */
static const char *iolist_check(const struct proto_iolist *l)
{
	if (l->n > PROTO_MAX_LIST)
		return "n";
	if (l->eof > 1 || l->next.bucket > PROTO_LIST_END)
		return "next";
	if (l->eof != (l->next.bucket == PROTO_LIST_END && l->next.after == 0))
		return "eof";
	for (uint32_t i = 0; i < l->n; i++) {
		const struct proto_obj *o = &l->objs[i];

		if (o->ino == 0)
			return "obj.ino";
		if (o->size > MAX_IO_OFF)
			return "obj.size";
		if (o->blocks > PROTO_MAX_BLOCKS)
			return "obj.blocks";
	}
	return NULL;
}

/* Encode an IO_LIST reply (at most 17 + 32 KiB bytes). */
int proto_iolist_encode(struct wbuf *w, const struct proto_iolist *l)
{
	if (iolist_check(l))
		return -EINVAL;
	wb_u32(w, l->n);
	wb_u8(w, l->eof);
	wb_u32(w, l->next.bucket);
	wb_u64(w, l->next.after);
	for (uint32_t i = 0; i < l->n; i++) {
		wb_u64(w, l->objs[i].ino);
		wb_u64(w, l->objs[i].size);
		wb_u64(w, l->objs[i].blocks);
		wb_u64(w, (uint64_t)l->objs[i].mtime);
	}
	return w->err;
}

/* Decode and validate an IO_LIST reply. Cost: O(n). */
int proto_iolist_decode(const void *buf, size_t len, struct proto_iolist *l,
			const char **why)
{
	const char *bad;
	struct rbuf r;

	l->n = 0;
	rb_init(&r, buf, len);
	l->n = rb_u32(&r);
	l->eof = rb_u8(&r);
	l->next.bucket = rb_u32(&r);
	l->next.after = rb_u64(&r);
	if (r.err)
		return fail(why, "iolist", -EBADMSG);
	if (l->n > PROTO_MAX_LIST || (size_t)l->n * LIST_OBJ_WIRE != r.len - r.off) {
		l->n = 0;
		return fail(why, "n", -EBADMSG);
	}
	for (uint32_t i = 0; i < l->n; i++) {
		l->objs[i].ino = rb_u64(&r);
		l->objs[i].size = rb_u64(&r);
		l->objs[i].blocks = rb_u64(&r);
		l->objs[i].mtime = (int64_t)rb_u64(&r);
	}
	bad = iolist_check(l);
	if (bad)
		return fail(why, bad, -EBADMSG);
	return 0;
}

/* Encode an IO_CSUM reply (12 bytes). */
int proto_csum_encode(struct wbuf *w, const struct proto_csum *c)
{
	if (c->size > MAX_IO_OFF)
		return -EINVAL;
	wb_u32(w, c->crc);
	wb_u64(w, c->size);
	return w->err;
}

/* Decode and validate an IO_CSUM reply. */
int proto_csum_decode(const void *buf, size_t len, struct proto_csum *c,
		      const char **why)
{
	struct rbuf r;

	rb_init(&r, buf, len);
	c->crc = rb_u32(&r);
	c->size = rb_u64(&r);
	if (r.err)
		return fail(why, "csum", -EBADMSG);
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	if (c->size > MAX_IO_OFF)
		return fail(why, "size", -EBADMSG);
	return 0;
}

/* Validate a scrub request of op; NULL or the bad field's name. */
static const char *scrubq_check(uint16_t op, const struct proto_scrubq *q)
{
	if (op == PROTO_OP_SCRUB_INOS)
		return inos_ok(&q->inos) ? NULL : "inos";
	return q->max >= 1 && q->max <= PROTO_MAX_INOS ? NULL : "max";
}

/* Encode a scrub request. */
int proto_scrubq_encode(struct wbuf *w, uint16_t op,
			const struct proto_scrubq *q)
{
	if ((op != PROTO_OP_SCRUB_INOS && op != PROTO_OP_SCRUB_ORPHANS) ||
	    scrubq_check(op, q))
		return -EINVAL;
	if (op == PROTO_OP_SCRUB_INOS) {
		wb_inos(w, &q->inos);
	} else {
		wb_u64(w, q->cookie);
		wb_u32(w, q->max);
	}
	return w->err;
}

/* Decode and validate a scrub request; an inode list points into buf. */
int proto_scrubq_decode(const void *buf, size_t len, uint16_t op,
			struct proto_scrubq *q, const char **why)
{
	const char *bad;
	struct rbuf r;

	memset(q, 0, sizeof(*q));
	if (op != PROTO_OP_SCRUB_INOS && op != PROTO_OP_SCRUB_ORPHANS)
		return fail(why, "op", -EOPNOTSUPP);
	rb_init(&r, buf, len);
	if (op == PROTO_OP_SCRUB_INOS) {
		q->inos = rb_inos(&r);
		if (r.err)
			return fail(why, "inos", -EBADMSG);
	} else {
		q->cookie = rb_u64(&r);
		q->max = rb_u32(&r);
		if (r.err)
			return fail(why, "scrubq", -EBADMSG);
	}
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	bad = scrubq_check(op, q);
	if (bad)
		return fail(why, bad, -EBADMSG);
	return 0;
}

/* Validate a SCRUB_INOS reply; NULL or the bad field's name. */
static const char *inostate_check(const struct proto_inostate *s)
{
	if (s->n < 1 || s->n > PROTO_MAX_INOS)
		return "n";
	for (uint32_t i = 0; i < s->n; i++)
		if (s->st[i] > PROTO_INO_MIRROR_STALE)
			return "state";
	return NULL;
}

/* Encode a SCRUB_INOS reply. */
int proto_inostate_encode(struct wbuf *w, const struct proto_inostate *s)
{
	if (inostate_check(s))
		return -EINVAL;
	wb_u32(w, s->n);
	for (uint32_t i = 0; i < s->n; i++)
		wb_u8(w, s->st[i]);
	return w->err;
}

/* Decode and validate a SCRUB_INOS reply. */
int proto_inostate_decode(const void *buf, size_t len,
			  struct proto_inostate *s, const char **why)
{
	const char *bad;
	struct rbuf r;

	rb_init(&r, buf, len);
	s->n = rb_u32(&r);
	if (r.err)
		return fail(why, "n", -EBADMSG);
	if (s->n < 1 || s->n > PROTO_MAX_INOS || s->n != r.len - r.off) {
		s->n = 0;
		return fail(why, "n", -EBADMSG);
	}
	for (uint32_t i = 0; i < s->n; i++)
		s->st[i] = rb_u8(&r);
	bad = inostate_check(s);
	if (bad)
		return fail(why, bad, -EBADMSG);
	return 0;
}

/* Validate a SCRUB_ORPHANS reply; NULL or the bad field's name. */
static const char *orphans_check(const struct proto_orphans *o)
{
	if (o->n > PROTO_MAX_INOS)
		return "n";
	if (o->eof > 1)
		return "eof";
	for (uint32_t i = 0; i < o->n; i++) {
		if (o->o[i].ino == 0 || (i && o->o[i].ino <= o->o[i - 1].ino))
			return "orphan.ino";
		if (o->o[i].blocks > PROTO_MAX_BLOCKS)
			return "orphan.blocks";
	}
	return NULL;
}

/* Encode a SCRUB_ORPHANS reply (at most 13 + 8 KiB bytes). */
int proto_orphans_encode(struct wbuf *w, const struct proto_orphans *o)
{
	if (orphans_check(o))
		return -EINVAL;
	wb_u64(w, (uint64_t)o->boot_ns);
	wb_u32(w, o->n);
	wb_u8(w, o->eof);
	for (uint32_t i = 0; i < o->n; i++) {
		wb_u64(w, o->o[i].ino);
		wb_u64(w, o->o[i].size);
		wb_u64(w, o->o[i].blocks);
		wb_u64(w, (uint64_t)o->o[i].ctime_ns);
	}
	return w->err;
}

/* Decode and validate a SCRUB_ORPHANS reply. Cost: O(n). */
int proto_orphans_decode(const void *buf, size_t len, struct proto_orphans *o,
			 const char **why)
{
	const char *bad;
	struct rbuf r;

	rb_init(&r, buf, len);
	o->boot_ns = (int64_t)rb_u64(&r);
	o->n = rb_u32(&r);
	o->eof = rb_u8(&r);
	if (r.err) {
		o->n = 0;
		return fail(why, "orphans", -EBADMSG);
	}
	if (o->n > PROTO_MAX_INOS || (size_t)o->n * ORPHAN_WIRE != r.len - r.off) {
		o->n = 0;
		return fail(why, "n", -EBADMSG);
	}
	for (uint32_t i = 0; i < o->n; i++) {
		o->o[i].ino = rb_u64(&r);
		o->o[i].size = rb_u64(&r);
		o->o[i].blocks = rb_u64(&r);
		o->o[i].ctime_ns = (int64_t)rb_u64(&r);
	}
	bad = orphans_check(o);
	if (bad)
		return fail(why, bad, -EBADMSG);
	return 0;
}

/* ------------------------------------------------------------------ statfs */

/* Encode an IO_STATFS reply body (52 bytes). */
int proto_statfs_encode(struct wbuf *w, const struct proto_statfs *s)
{
	wb_statfs(w, s);
	return w->err;
}

/* Decode an IO_STATFS reply body; every value is acceptable. */
int proto_statfs_decode(const void *buf, size_t len, struct proto_statfs *s,
			const char **why)
{
	struct rbuf r;

	rb_init(&r, buf, len);
	rb_statfs(&r, s);
	if (r.err)
		return fail(why, "statfs", -EBADMSG);
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	return 0;
}

/* ------------------------------------------------------------------ status */

/* Encode a STATUS reply body. */
int proto_status_encode(struct wbuf *w, const struct proto_status *s)
{
	if (s->role.len > 32 || s->version.len > 32 ||
	    s->stats.len > PROTO_MAX_STATUS_JSON)
		return -EINVAL;
	wb_str(w, s->role.p, s->role.len);
	wb_str(w, s->version.p, s->version.len);
	wb_u16(w, s->id);
	wb_u64(w, s->uptime_s);
	wb_statfs(w, &s->st);
	wb_blob(w, s->stats.p, s->stats.len);
	return w->err;
}

/* Decode a STATUS reply body; strings point into buf. */
int proto_status_decode(const void *buf, size_t len, struct proto_status *s,
			const char **why)
{
	struct rbuf r;

	memset(s, 0, sizeof(*s));
	rb_init(&r, buf, len);
	s->role = rb_str(&r, 32);
	s->version = rb_str(&r, 32);
	s->id = rb_u16(&r);
	s->uptime_s = rb_u64(&r);
	rb_statfs(&r, &s->st);
	s->stats = rb_blob(&r, PROTO_MAX_STATUS_JSON);
	if (r.err)
		return fail(why, "status", -EBADMSG);
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	return 0;
}

/* Encode the hint of a standby answer (proto.h). */
int proto_standby_encode(struct wbuf *w, const struct proto_standby *s)
{
	if (!s->host.len || s->host.len > PROTO_MAX_HOST ||
	    memchr(s->host.p, '\0', s->host.len) || !s->port || !s->token)
		return -EINVAL;
	wb_str(w, s->host.p, s->host.len);
	wb_u16(w, s->port);
	wb_u64(w, s->token);
	return w->err;
}

/* Decode a standby answer's body: empty = no hint; the host points into
 * buf. */
int proto_standby_decode(const void *buf, size_t len, struct proto_standby *s,
			 const char **why)
{
	struct rbuf r;

	memset(s, 0, sizeof(*s));
	if (len == 0)
		return 0;
	rb_init(&r, buf, len);
	s->host = rb_str(&r, PROTO_MAX_HOST);
	s->port = rb_u16(&r);
	s->token = rb_u64(&r);
	if (r.err)
		return fail(why, "standby", -EBADMSG);
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	if (!s->host.len || memchr(s->host.p, '\0', s->host.len))
		return fail(why, "standby host", -EBADMSG);
	if (!s->port)
		return fail(why, "standby port", -EBADMSG);
	if (!s->token)
		return fail(why, "standby token", -EBADMSG);
	return 0;
}

/* ------------------------------------------------------------------- locks */

/* Validate a lock request for op; NULL or the bad field's name. */
static const char *lock_check(uint16_t op, const struct proto_lock *l)
{
	if (l->session == 0)
		return "session";
	if (l->lease_ms < PROTO_LK_MIN_LEASE_MS ||
	    l->lease_ms > PROTO_LK_MAX_LEASE_MS)
		return "lease_ms";
	if (op == PROTO_OP_LOCK_KEEPALIVE)
		return l->owner || l->ino || l->start || l->end || l->id ||
		       l->pid || l->wait_ms || l->type || l->kind || l->cmd ||
		       l->flags ? "unused field" : NULL;
	if (op == PROTO_OP_LOCK_CANCEL) {
		if (l->id == 0)
			return "id";
		return l->owner || l->ino || l->start || l->end || l->boot ||
		       l->pid || l->wait_ms || l->type || l->kind || l->cmd ||
		       l->flags ? "unused field" : NULL;
	}
	if (l->type > PROTO_LK_WRLCK)
		return "type";
	if (l->kind > PROTO_LK_FLOCK)
		return "kind";
	if (l->cmd > PROTO_LK_DROP)
		return "cmd";
	if (l->flags & ~PROTO_LKF_ALL)
		return "flags";
	if ((l->flags & PROTO_LKF_RECLAIM) && l->cmd != PROTO_LK_SET)
		return "flags";
	if (l->start > l->end)
		return "end";
	if (l->start > INT64_MAX)
		return "start";
	if (l->end > INT64_MAX && l->end != PROTO_LK_EOF)
		return "end";
	if (l->kind == PROTO_LK_FLOCK && (l->start || l->end != PROTO_LK_EOF))
		return "end";
	if ((l->cmd == PROTO_LK_GET || l->cmd == PROTO_LK_WAIT) &&
	    l->type == PROTO_LK_UNLCK)
		return "type";
	if (l->cmd == PROTO_LK_WAIT) {
		if (l->wait_ms == 0 || l->wait_ms > PROTO_LK_MAX_WAIT_MS)
			return "wait_ms";
		if (l->id == 0)
			return "id";
	} else if (l->wait_ms || l->id) {
		return "unused field";
	}
	if (l->boot)
		return "unused field";
	return NULL;
}

/* Encode a lock request: every field, fixed width. */
int proto_lock_encode(struct wbuf *w, uint16_t op, const struct proto_lock *l)
{
	if (op < PROTO_OP_LOCK || op > PROTO_OP_LOCK_KEEPALIVE ||
	    lock_check(op, l))
		return -EINVAL;
	wb_u64(w, l->session);
	wb_u64(w, l->owner);
	wb_u64(w, l->ino);
	wb_u64(w, l->start);
	wb_u64(w, l->end);
	wb_u64(w, l->id);
	wb_u64(w, l->boot);
	wb_u32(w, l->pid);
	wb_u32(w, l->wait_ms);
	wb_u32(w, l->lease_ms);
	wb_u8(w, l->type);
	wb_u8(w, l->kind);
	wb_u8(w, l->cmd);
	wb_u8(w, l->flags);
	return w->err;
}

/* Decode and validate a lock request of op. */
int proto_lock_decode(const void *buf, size_t len, uint16_t op,
		      struct proto_lock *l, const char **why)
{
	const char *bad;
	struct rbuf r;

	memset(l, 0, sizeof(*l));
	if (op < PROTO_OP_LOCK || op > PROTO_OP_LOCK_KEEPALIVE)
		return fail(why, "op", -EOPNOTSUPP);
	rb_init(&r, buf, len);
	l->session = rb_u64(&r);
	l->owner = rb_u64(&r);
	l->ino = rb_u64(&r);
	l->start = rb_u64(&r);
	l->end = rb_u64(&r);
	l->id = rb_u64(&r);
	l->boot = rb_u64(&r);
	l->pid = rb_u32(&r);
	l->wait_ms = rb_u32(&r);
	l->lease_ms = rb_u32(&r);
	l->type = rb_u8(&r);
	l->kind = rb_u8(&r);
	l->cmd = rb_u8(&r);
	l->flags = rb_u8(&r);
	if (r.err)
		return fail(why, "lock", -EBADMSG);
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	bad = lock_check(op, l);
	if (bad)
		return fail(why, bad, -EBADMSG);
	return 0;
}

/* Validate a lock reply; NULL or the bad field's name. */
static const char *lockrep_check(const struct proto_lockrep *r)
{
	if (r->type > PROTO_LK_WRLCK)
		return "type";
	if (r->start > r->end || r->start > INT64_MAX ||
	    (r->end > INT64_MAX && r->end != PROTO_LK_EOF))
		return "end";
	if (r->flags & ~PROTO_LKR_ALL)
		return "flags";
	return NULL;
}

/* Encode a lock reply. */
int proto_lockrep_encode(struct wbuf *w, const struct proto_lockrep *r)
{
	if (lockrep_check(r))
		return -EINVAL;
	wb_u64(w, r->boot);
	wb_u64(w, r->start);
	wb_u64(w, r->end);
	wb_u32(w, r->pid);
	wb_u8(w, r->type);
	wb_u8(w, r->flags);
	return w->err;
}

/* Decode and validate a lock reply. */
int proto_lockrep_decode(const void *buf, size_t len, struct proto_lockrep *r,
			 const char **why)
{
	const char *bad;
	struct rbuf b;

	memset(r, 0, sizeof(*r));
	rb_init(&b, buf, len);
	r->boot = rb_u64(&b);
	r->start = rb_u64(&b);
	r->end = rb_u64(&b);
	r->pid = rb_u32(&b);
	r->type = rb_u8(&b);
	r->flags = rb_u8(&b);
	if (b.err)
		return fail(why, "lockrep", -EBADMSG);
	if (b.off != b.len)
		return fail(why, "trailing bytes", -EBADMSG);
	bad = lockrep_check(r);
	if (bad)
		return fail(why, bad, -EBADMSG);
	return 0;
}

/* ---------------------------------------------------------- callbacks */

/* What is wrong with a CB_WAIT request, or NULL. */
static const char *cbwait_check(const struct proto_cbwait *q)
{
	if (q->session == 0)
		return "session";
	if (q->wait_ms == 0 || q->wait_ms > PROTO_CB_MAX_WAIT_MS)
		return "wait_ms";
	if (q->lease_ms < PROTO_LK_MIN_LEASE_MS ||
	    q->lease_ms > PROTO_LK_MAX_LEASE_MS)
		return "lease_ms";
	if (q->flags & ~PROTO_CBW_ALL)
		return "flags";
	return NULL;
}

/* Encode a CB_WAIT request. */
int proto_cbwait_encode(struct wbuf *w, const struct proto_cbwait *q)
{
	if (cbwait_check(q))
		return -EINVAL;
	wb_u64(w, q->session);
	wb_u64(w, q->boot);
	wb_u64(w, q->acked);
	wb_u32(w, q->wait_ms);
	wb_u32(w, q->lease_ms);
	wb_u32(w, q->flags);
	return w->err;
}

/* Decode and validate a CB_WAIT request. */
int proto_cbwait_decode(const void *buf, size_t len, struct proto_cbwait *q,
			const char **why)
{
	const char *bad;
	struct rbuf r;

	memset(q, 0, sizeof(*q));
	rb_init(&r, buf, len);
	q->session = rb_u64(&r);
	q->boot = rb_u64(&r);
	q->acked = rb_u64(&r);
	q->wait_ms = rb_u32(&r);
	q->lease_ms = rb_u32(&r);
	q->flags = rb_u32(&r);
	if (r.err)
		return fail(why, "cbwait", -EBADMSG);
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	bad = cbwait_check(q);
	return bad ? fail(why, bad, -EBADMSG) : 0;
}

/* What is wrong with event i of a CB_WAIT reply (prev: the seq before it,
 * 0 for the first), or NULL. */
static const char *cbev_check(const struct proto_cbev *e, uint64_t prev)
{
	if (e->seq <= prev)
		return "event seq";
	if (e->ino == 0)
		return "event ino";
	if (e->kind < PROTO_CB_RECALL || e->kind > PROTO_CB_RESET)
		return "event kind";
	if (e->kind == PROTO_CB_INVAL_ENTRY)
		return name_ok(e->name) ? NULL : "event name";
	return e->name.len ? "event name" : NULL;
}

/* What is wrong with a CB_WAIT reply, or NULL. */
static const char *cbrep_check(const struct proto_cbrep *r)
{
	const char *bad;

	if (r->boot == 0)
		return "boot";
	if (r->nev > PROTO_CB_MAX_EVENTS)
		return "nev";
	for (unsigned i = 0; i < r->nev; i++) {
		bad = cbev_check(&r->ev[i], i ? r->ev[i - 1].seq : 0);
		if (bad)
			return bad;
	}
	return NULL;
}

/* Encode a CB_WAIT reply. */
int proto_cbrep_encode(struct wbuf *w, const struct proto_cbrep *r)
{
	if (cbrep_check(r))
		return -EINVAL;
	wb_u64(w, r->boot);
	wb_u16(w, r->nev);
	for (unsigned i = 0; i < r->nev; i++) {
		wb_u64(w, r->ev[i].seq);
		wb_u64(w, r->ev[i].ino);
		wb_u8(w, r->ev[i].kind);
		wb_str(w, r->ev[i].name.p, r->ev[i].name.len);
	}
	return w->err;
}

/* Decode and validate a CB_WAIT reply; names point into buf. */
int proto_cbrep_decode(const void *buf, size_t len, struct proto_cbrep *r,
		       const char **why)
{
	const char *bad;
	struct rbuf b;

	r->nev = 0;
	rb_init(&b, buf, len);
	r->boot = rb_u64(&b);
	r->nev = rb_u16(&b);
	if (b.err || r->nev > PROTO_CB_MAX_EVENTS)
		return fail(why, b.err ? "cbrep" : "nev", -EBADMSG);
	for (unsigned i = 0; i < r->nev; i++) {
		r->ev[i].seq = rb_u64(&b);
		r->ev[i].ino = rb_u64(&b);
		r->ev[i].kind = rb_u8(&b);
		r->ev[i].name = rb_str(&b, PROTO_MAX_NAME);
	}
	if (b.err)
		return fail(why, "cbrep events", -EBADMSG);
	if (b.off != b.len)
		return fail(why, "trailing bytes", -EBADMSG);
	bad = cbrep_check(r);
	return bad ? fail(why, bad, -EBADMSG) : 0;
}

/* ------------------------------------------------------------------- batch */

/* Whether op may be sent in a BATCH. */
static bool bop_allowed(uint16_t op)
{
	return op == PROTO_OP_CREATE || op == PROTO_OP_MKDIR ||
	       op == PROTO_OP_SYMLINK || op == PROTO_OP_SETATTR ||
	       op == PROTO_OP_SETBLOCKS || op == PROTO_OP_UNLINK ||
	       op == PROTO_OP_RMDIR;
}

/* Whether op makes a node and so carries newino. */
static bool bop_makes(uint16_t op)
{
	return op == PROTO_OP_CREATE || op == PROTO_OP_MKDIR ||
	       op == PROTO_OP_SYMLINK;
}

/* What is wrong with one op of a batch (not its cred and fields: those
 * are mreq_check's), or NULL. A CREATE's layout must be a real one (not
 * the all-zero "no data" layout layout_ok() also takes). */
static const char *bop_check(const struct proto_bop *o)
{
	if (!bop_allowed(o->op))
		return "bop.op";
	if (bop_makes(o->op) && o->newino == 0)
		return "bop.newino";
	if (o->op == PROTO_OP_CREATE &&
	    (o->layout.mirror == 0 || !layout_ok(&o->layout)))
		return "bop.layout";
	return NULL;
}

/* What is wrong with a batch's header fields, or NULL. */
static const char *batch_check(const struct proto_batch *b)
{
	if (b->cred.session == 0)
		return "cred.session";
	if (b->cred.ngroups > PROTO_MAX_GROUPS)
		return "cred.ngroups";
	if (b->want != 0 && b->want != PROTO_INO_RANGE)
		return "want";
	if (b->n > PROTO_MAX_BATCH)
		return "n";
	return NULL;
}

/* Encode a BATCH request from b->host (n ops). Cost: O(body). */
int proto_batch_encode(struct wbuf *w, const struct proto_batch *b)
{
	const struct proto_bop *o;

	if (batch_check(b) || (b->n && !b->host))
		return -EINVAL;
	for (uint32_t i = 0; i < b->n; i++)
		if (bop_check(&b->host[i]) ||
		    mreq_check(mreq_desc_get(b->host[i].op), &b->host[i].m))
			return -EINVAL;
	wb_cred(w, &b->cred);
	wb_u32(w, b->want);
	wb_u32(w, b->n);
	for (uint32_t i = 0; i < b->n; i++) {
		o = &b->host[i];
		wb_u16(w, o->op);
		wb_cred(w, &o->m.cred);
		wb_mreq_fields(w, mreq_desc_get(o->op), &o->m);
		if (bop_makes(o->op))
			wb_u64(w, o->newino);
		if (o->op == PROTO_OP_CREATE)
			wb_layout(w, &o->layout);
	}
	return w->err;
}

/* Read and validate one op of a batch from r. Strings point into r's
 * buffer. @return 0, or -EBADMSG with *why naming the field. */
static int rb_bop(struct rbuf *r, struct proto_bop *o, const char **why)
{
	const struct mreq_desc *d;
	const char *bad;
	int rc;

	memset(o, 0, sizeof(*o));
	mreq_clear(&o->m);
	o->op = rb_u16(r);
	if (r->err)
		return fail(why, "bop.op", -EBADMSG);
	if (!bop_allowed(o->op))
		return fail(why, "bop.op", -EBADMSG);
	d = mreq_desc_get(o->op);
	rc = rb_mreq(r, d, &o->m, why);
	if (rc)
		return rc;
	bad = mreq_check(d, &o->m);
	if (bad)
		return fail(why, bad, -EBADMSG);
	if (bop_makes(o->op))
		o->newino = rb_u64(r);
	if (o->op == PROTO_OP_CREATE)
		rb_layout(r, &o->layout);
	if (r->err)
		return fail(why, bop_makes(o->op) ? "bop.newino" : "bop", -EBADMSG);
	bad = bop_check(o);
	return bad ? fail(why, bad, -EBADMSG) : 0;
}

/* Decode a BATCH request: its header, then every op once to validate it
 * (the caller walks them again with proto_bop_next). Cost: O(body). */
int proto_batch_decode(const void *buf, size_t len, struct proto_batch *b,
		       const char **why)
{
	struct proto_bop o;
	const char *bad;
	struct rbuf r;
	int rc;

	memset(b, 0, sizeof(*b));
	rb_init(&r, buf, len);
	rc = rb_cred(&r, &b->cred, why);
	if (rc)
		return rc;
	b->want = rb_u32(&r);
	b->n = rb_u32(&r);
	if (r.err)
		return fail(why, "batch", -EBADMSG);
	bad = batch_check(b);
	if (bad)
		return fail(why, bad, -EBADMSG);
	b->wire = r.p + r.off;
	b->wire_len = (uint32_t)(r.len - r.off);
	for (uint32_t i = 0; i < b->n; i++) {
		rc = rb_bop(&r, &o, why);
		if (rc)
			return rc;
	}
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	return 0;
}

/* The op at *pos of a decoded batch; -ENOENT at the end. */
int proto_bop_next(const struct proto_batch *b, uint32_t *pos,
		   struct proto_bop *op)
{
	const char *why;
	struct rbuf r;
	int rc;

	if (*pos >= b->wire_len)
		return -ENOENT;
	rb_init(&r, b->wire, b->wire_len);
	r.off = *pos;
	rc = rb_bop(&r, op, &why);
	if (rc)
		return rc;
	*pos = (uint32_t)r.off;
	return 0;
}

/* What is wrong with a BATCH reply, or NULL. */
static const char *batchrep_check(const struct proto_batchrep *r)
{
	if (r->range % PROTO_INO_RANGE)
		return "range";
	if (r->n > PROTO_MAX_BATCH)
		return "n";
	for (uint32_t i = 0; i < r->n; i++) {
		if (r->status[i] > 0 || r->status[i] < -4095)
			return "status";
		if (r->flags[i] & ~PROTO_BOP_WRITE)
			return "flags";
	}
	return NULL;
}

/* Encode a BATCH reply. */
int proto_batchrep_encode(struct wbuf *w, const struct proto_batchrep *r)
{
	if (batchrep_check(r))
		return -EINVAL;
	wb_u64(w, r->evseq);
	wb_u64(w, r->range);
	wb_u32(w, r->n);
	for (uint32_t i = 0; i < r->n; i++) {
		wb_u32(w, (uint32_t)r->status[i]);
		wb_u8(w, r->flags[i]);
	}
	return w->err;
}

/* Decode and validate a BATCH reply. */
int proto_batchrep_decode(const void *buf, size_t len,
			  struct proto_batchrep *r, const char **why)
{
	const char *bad;
	struct rbuf b;

	r->n = 0;
	rb_init(&b, buf, len);
	r->evseq = rb_u64(&b);
	r->range = rb_u64(&b);
	r->n = rb_u32(&b);
	if (b.err || r->n > PROTO_MAX_BATCH) {
		r->n = 0;
		return fail(why, b.err ? "batchrep" : "n", -EBADMSG);
	}
	for (uint32_t i = 0; i < r->n; i++) {
		r->status[i] = (int32_t)rb_u32(&b);
		r->flags[i] = rb_u8(&b);
	}
	if (b.err)
		return fail(why, "batchrep ops", -EBADMSG);
	if (b.off != b.len)
		return fail(why, "trailing bytes", -EBADMSG);
	bad = batchrep_check(r);
	return bad ? fail(why, bad, -EBADMSG) : 0;
}

/* ------------------------------------------------------------------ mirror */

/* Encode a STALE_MARK request. */
int proto_stale_encode(struct wbuf *w, const struct proto_stale *s)
{
	if (s->ino == 0 || s->iod >= PROTO_MAX_IODS)
		return -EINVAL;
	wb_u64(w, s->ino);
	wb_u16(w, s->iod);
	return w->err;
}

/* Decode and validate a STALE_MARK request. */
int proto_stale_decode(const void *buf, size_t len, struct proto_stale *s,
		       const char **why)
{
	struct rbuf r;

	rb_init(&r, buf, len);
	s->ino = rb_u64(&r);
	s->iod = rb_u16(&r);
	if (r.err)
		return fail(why, "stale", -EBADMSG);
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	if (s->ino == 0)
		return fail(why, "ino", -EBADMSG);
	if (s->iod >= PROTO_MAX_IODS)
		return fail(why, "iod", -EBADMSG);
	return 0;
}

/* Encode a STALE_COUNT reply. */
int proto_stalecnt_encode(struct wbuf *w, const struct proto_stalecnt *c)
{
	if (c->n < 1 || c->n > PROTO_MAX_IODS)
		return -EINVAL;
	wb_u16(w, c->n);
	for (uint16_t i = 0; i < c->n; i++) {
		wb_u64(w, c->count[i]);
		wb_u64(w, c->done[i]);
		wb_u64(w, c->bytes[i]);
	}
	return w->err;
}

/* Decode and validate a STALE_COUNT reply. */
int proto_stalecnt_decode(const void *buf, size_t len,
			  struct proto_stalecnt *c, const char **why)
{
	struct rbuf r;

	rb_init(&r, buf, len);
	c->n = rb_u16(&r);
	if (r.err || c->n < 1 || c->n > PROTO_MAX_IODS ||
	    (size_t)c->n * 24 != r.len - r.off) {
		c->n = 0;
		return fail(why, "n", -EBADMSG);
	}
	for (uint16_t i = 0; i < c->n; i++) {
		c->count[i] = rb_u64(&r);
		c->done[i] = rb_u64(&r);
		c->bytes[i] = rb_u64(&r);
	}
	return 0;
}

/* ------------------------------------------------------------------- fence */

/* Whether a fence list to encode is well formed: 0..PROTO_MAX_INOS
 * entries, none 0. */
static bool fence_list_ok(const struct proto_inos *l)
{
	if (l->n > PROTO_MAX_INOS || (l->n && !l->host && !l->wire))
		return false;
	for (uint32_t i = 0; i < l->n; i++)
		if (proto_inos_at(l, i) == 0)
			return false;
	return true;
}

/* Read a fence list in place (u32 n, n x u64; n may be 0). Sets r->err on
 * a bad count or a short body; inode 0 is checked by the caller. */
static struct proto_inos rb_fence_list(struct rbuf *r)
{
	struct proto_inos l = { 0, NULL, NULL };
	uint32_t n = rb_u32(r);

	if (r->err)
		return l;
	if (n > PROTO_MAX_INOS) {
		r->err = -EBADMSG;
		return l;
	}
	l.wire = n ? rb_take(r, (size_t)n * 8) : NULL;
	if (!n || l.wire)
		l.n = n;
	return l;
}

/* Encode an IO_FENCE request. */
int proto_fence_encode(struct wbuf *w, const struct proto_fence *f)
{
	if (f->seq == 0 || f->lease_ms > PROTO_MAX_LEASE_MS ||
	    (f->flags & ~PROTO_FENCE_ALL) || !fence_list_ok(&f->add) ||
	    !fence_list_ok(&f->del))
		return -EINVAL;
	wb_u64(w, f->seq);
	wb_u64(w, f->confirm);
	wb_u32(w, f->lease_ms);
	wb_u32(w, f->flags);
	wb_u32(w, f->add.n);
	for (uint32_t i = 0; i < f->add.n; i++)
		wb_u64(w, proto_inos_at(&f->add, i));
	wb_u32(w, f->del.n);
	for (uint32_t i = 0; i < f->del.n; i++)
		wb_u64(w, proto_inos_at(&f->del, i));
	if (f->token)
		wb_u64(w, f->token);
	return w->err;
}

/* Decode and validate an IO_FENCE request. Cost: O(inodes). */
int proto_fence_decode(const void *buf, size_t len, struct proto_fence *f,
		       const char **why)
{
	struct rbuf r;

	memset(f, 0, sizeof(*f));
	rb_init(&r, buf, len);
	f->seq = rb_u64(&r);
	f->confirm = rb_u64(&r);
	f->lease_ms = rb_u32(&r);
	f->flags = rb_u32(&r);
	if (r.err)
		return fail(why, "fence header", -EBADMSG);
	if (f->seq == 0)
		return fail(why, "seq", -EBADMSG);
	if (f->lease_ms > PROTO_MAX_LEASE_MS)
		return fail(why, "lease_ms", -EBADMSG);
	if (f->flags & ~PROTO_FENCE_ALL)
		return fail(why, "fence flags", -EBADMSG);
	f->add = rb_fence_list(&r);
	if (r.err)
		return fail(why, "fence add list", -EBADMSG);
	f->del = rb_fence_list(&r);
	if (r.err)
		return fail(why, "fence del list", -EBADMSG);
	if (r.len - r.off == 8) {
		f->token = rb_u64(&r);
		if (!f->token)
			return fail(why, "fence token", -EBADMSG);
	}
	if (r.off != r.len)
		return fail(why, "trailing bytes", -EBADMSG);
	if (!fence_list_ok(&f->add) || !fence_list_ok(&f->del))
		return fail(why, "fence ino", -EBADMSG);
	return 0;
}

/* Encode an IO_FENCE reply. */
int proto_fencestate_encode(struct wbuf *w, const struct proto_fencestate *s)
{
	if (s->leased > 1 || s->complete > 1 || s->loading > 1 ||
	    s->lease_left_ms > PROTO_MAX_LEASE_MS)
		return -EINVAL;
	wb_u8(w, s->leased);
	wb_u8(w, s->complete);
	wb_u8(w, s->loading);
	wb_u32(w, s->nfenced);
	wb_u32(w, s->lease_left_ms);
	return w->err;
}

/* Decode and validate an IO_FENCE reply. */
int proto_fencestate_decode(const void *buf, size_t len,
			    struct proto_fencestate *s, const char **why)
{
	struct rbuf r;

	rb_init(&r, buf, len);
	s->leased = rb_u8(&r);
	s->complete = rb_u8(&r);
	s->loading = rb_u8(&r);
	s->nfenced = rb_u32(&r);
	s->lease_left_ms = rb_u32(&r);
	if (r.err || r.off != r.len)
		return fail(why, "fence state length", -EBADMSG);
	if (s->leased > 1 || s->complete > 1 || s->loading > 1)
		return fail(why, "fence state flag", -EBADMSG);
	if (s->lease_left_ms > PROTO_MAX_LEASE_MS)
		return fail(why, "lease_left_ms", -EBADMSG);
	return 0;
}

/* ------------------------------------------------------------------ layout */

/* Format l as "unit=U,count=C,first=F[,mirror=2]" (NUL-terminated).
 * @return 0, or -ERANGE if cap is too small. */
int proto_layout_format(char *buf, size_t cap, const struct proto_layout *l)
{
	int n = snprintf(buf, cap, "unit=%u,count=%u,first=%u%s",
			 (unsigned)l->unit, (unsigned)l->count,
			 (unsigned)l->first, l->mirror == 2 ? ",mirror=2" : "");

	if (n < 0 || (size_t)n >= cap)
		return -ERANGE;
	return 0;
}

/* Parse a decimal number of 1..10 digits, no sign or spaces, <= max. */
static int parse_num(const char *s, size_t len, uint32_t max, uint32_t *out)
{
	uint64_t v = 0;

	if (len < 1 || len > 10)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* Parse "unit=U,count=C[,first=F][,mirror=M]" in any key order; U may end
 * in K or M (KiB, MiB), as sizes in rpfs.conf do. Trailing NULs and one
 * trailing newline (as xattr tools may send) are ignored. unit and count
 * are required, each key at most once. Cost: O(len). */
int proto_layout_parse(const char *s, size_t len, struct proto_layout *l)
{
	static const char *const keys[4] = { "unit", "count", "first", "mirror" };
	static const uint32_t maxv[4] = { UNIT_MAX, PROTO_MAX_IODS,
					  PROTO_MAX_IODS - 1, 2 };
	uint32_t val[4] = { 0, 0, 0, 1 };
	bool seen[4] = { false, false, false, false };
	size_t pos = 0;

	if (!s)
		return -EINVAL;
	while (len > 0 && s[len - 1] == '\0')
		len--;
	if (len > 0 && s[len - 1] == '\n')
		len--;
	while (pos <= len) {
		const char *tok = s + pos, *eq, *comma;
		size_t toklen, klen, vlen;
		int k, shift;

		comma = memchr(tok, ',', len - pos);
		toklen = comma ? (size_t)(comma - tok) : len - pos;
		eq = memchr(tok, '=', toklen);
		if (!eq)
			return -EINVAL;
		klen = (size_t)(eq - tok);
		for (k = 0; k < 4; k++)
			if (strlen(keys[k]) == klen &&
			    memcmp(keys[k], tok, klen) == 0)
				break;
		if (k == 4 || seen[k])
			return -EINVAL;
		vlen = toklen - klen - 1;
		shift = 0;
		if (k == 0 && vlen > 1 && (eq[vlen] == 'k' || eq[vlen] == 'K'))
			shift = 10;
		else if (k == 0 && vlen > 1 && (eq[vlen] == 'm' || eq[vlen] == 'M'))
			shift = 20;
		vlen -= shift ? 1 : 0;
		if (parse_num(eq + 1, vlen, maxv[k] >> shift, &val[k]))
			return -EINVAL;
		val[k] <<= shift;
		seen[k] = true;
		pos += toklen + 1;
	}
	if (!seen[0] || !seen[1] || !unit_ok(val[0]) || val[1] < 1 || val[3] < 1)
		return -EINVAL;
	l->unit = val[0];
	l->count = (uint16_t)val[1];
	l->first = (uint16_t)val[2];
	l->mirror = (uint8_t)val[3];
	return 0;
}

/* ---------------------------------------------------------------- op names */

#define N(x) [PROTO_OP_##x] = #x
static const char *const op_names[PROTO_OP_SCRUB_LAST] = {
	N(NET_HELLO), N(NET_CREDIT), N(NET_AUTH), N(STATUS), N(MOUNT), N(LOOKUP), N(GETATTR),
	N(SETATTR), N(CREATE), N(MKDIR), N(MKNOD), N(UNLINK), N(RMDIR),
	N(RENAME), N(LINK), N(SYMLINK), N(READLINK), N(READDIR), N(STATFS),
	N(GETXATTR), N(SETXATTR), N(LISTXATTR), N(REMOVEXATTR), N(OPEN),
	N(ACCESS), N(SETSIZE), N(PURGE), N(PURGE_MANY), N(CB_WAIT), N(LOCK),
	N(LOCK_CANCEL), N(LOCK_KEEPALIVE), N(IO_READ),
	N(IO_WRITE), N(IO_TRUNCATE), N(IO_REMOVE), N(IO_FSYNC), N(IO_STATFS),
	N(IO_REMOVE_MANY), N(SETBLOCKS), N(IO_FALLOCATE), N(IO_SEEK),
	N(IO_BLOCKS), N(IO_LIST), N(IO_CSUM), N(IO_FENCE), N(SCRUB_INOS), N(SCRUB_ORPHANS),
	N(STALE_MARK), N(STALE_COUNT), N(BATCH),
};
#undef N

/* Name of op; unknown ops are formatted into a per-thread buffer. */
const char *proto_op_name(uint16_t op)
{
	static __thread char unknown[16];

	if (op < PROTO_OP_SCRUB_LAST && op_names[op])
		return op_names[op];
	snprintf(unknown, sizeof(unknown), "op#%u", (unsigned)op);
	return unknown;
}
