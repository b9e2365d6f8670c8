/*
 * test_mgr_kv.c - the contract of a namespace store backend (mgr_kv.h),
 * the same checks on every backend built: get/put/del, NOOVERWRITE, scans
 * with prefix bounds and byte order (0x00 and 0xff bytes, a key that is a
 * prefix of another), del_prefix, count, read-your-writes and scans that
 * merge a transaction's writes, child transactions, snapshots of read
 * transactions, durability across a reopen, -EINVAL for writes in a read
 * transaction. Then the PostgreSQL store's own: each error at open, and a
 * lost connection.
 *
 * PostgreSQL runs on a cluster of the test's own, started with the
 * pg-temp.sh given as argv[1] (meson passes scripts/pg-temp.sh), or on
 * $RPFS_PG_URI if set: a role with CREATEDB there; the test creates and
 * drops databases rpfs_kvt_PID_N and touches nothing else.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>
#ifdef RPFS_HAVE_PG
#include <libpq-fe.h>

#include "test_pg.h"
#endif

#include "log.h"
#include "mgr_kv_int.h"

#include "check_cond.h"

/* A key or value literal: pointer, length. */
#define K(...) (const unsigned char[]){ __VA_ARGS__ }, \
	sizeof((const unsigned char[]){ __VA_ARGS__ })
#define S(x) x, strlen(x)

/* A backend under test: how to make a fresh empty store and open it. */
struct backend {
	enum mgr_kv_kind kind;
	const char *name;
	int (*open)(const struct mgr_kv_conf *conf, int create,
		    struct mgr_kv **out, char *msg, size_t msgcap);
};

/* Adding a backend is one line here. */
static const struct backend backends[] = {
#ifdef RPFS_HAVE_PG
	{ MGR_KV_POSTGRESQL, "postgresql", mgr_kv_pg_open },
#endif
	{ MGR_KV_LMDB, "lmdb", mgr_kv_lmdb_open },
};

/* The calls of mgr_kv.h (the public dispatch, so its checks are tested too). */
static int k_begin(struct mgr_kv *kv, struct mgr_kv_txn *p, int ro,
		   struct mgr_kv_txn **t)
{
	return mgr_kv_begin(kv, p, ro, t);
}

static int k_commit(struct mgr_kv_txn *t)
{
	return mgr_kv_commit(t);
}

static void k_abort(struct mgr_kv_txn *t)
{
	mgr_kv_abort(t);
}

static int k_get(struct mgr_kv_txn *t, int tbl, const void *k, size_t kl,
		 const void **v, size_t *vl)
{
	return mgr_kv_get(t, tbl, k, kl, v, vl);
}

static int k_put(struct mgr_kv_txn *t, int tbl, const void *k, size_t kl,
		 const void *v, size_t vl, unsigned flags)
{
	return mgr_kv_put(t, tbl, k, kl, v, vl, flags);
}

static int k_del(struct mgr_kv_txn *t, int tbl, const void *k, size_t kl)
{
	return mgr_kv_del(t, tbl, k, kl);
}

static int k_delp(struct mgr_kv_txn *t, int tbl, const void *p, size_t pl)
{
	return mgr_kv_del_prefix(t, tbl, p, pl);
}

static int k_scan(struct mgr_kv_txn *t, int tbl, const void *f, size_t fl,
		  size_t pl, mgr_kv_scan_fn fn, void *arg)
{
	return mgr_kv_scan(t, tbl, f, fl, pl, fn, arg);
}

static uint64_t k_count(struct mgr_kv_txn *t, int tbl)
{
	uint64_t n = UINT64_MAX;

	CHECK_RC(mgr_kv_count(t, tbl, &n), 0);
	return n;
}

/* get k and compare its value with want (NULL: expect -ENOENT); k may be
 * K(...) or S(...), which expand to two arguments. */
#define CHECK_VAL(t, tbl, ...) CHECK_VAL_(t, tbl, __VA_ARGS__)
#define CHECK_VAL_(t, tbl, k, kl, want)                                     \
	do {                                                                 \
		const void *v_;                                              \
		size_t vl_;                                                  \
		const char *w_ = (want);                                     \
		int r_ = k_get(t, tbl, k, kl, &v_, &vl_);                    \
		if (!w_) {                                                   \
			CHECK_RC(r_, -ENOENT);                               \
		} else {                                                     \
			CHECK_RC(r_, 0);                                     \
			CHECK(r_ == 0 && vl_ == strlen(w_) &&                \
			      !memcmp(v_, w_, vl_));                         \
		}                                                            \
	} while (0)

/* ------------------------------------------------------------------ */
/* Scans                                                               */

#define COLL_MAX 64

/* What a scan handed out. */
struct coll {
	int n, stop_at, rc_stop;
	unsigned char k[COLL_MAX][16];
	size_t kl[COLL_MAX];
	char v[COLL_MAX][16];
};

static int coll_fn(void *arg, const void *k, size_t kl, const void *v,
		   size_t vl)
{
	struct coll *c = arg;

	if (c->n >= COLL_MAX || kl > 16 || vl > 15)
		return -E2BIG;
	memcpy(c->k[c->n], k, kl);
	c->kl[c->n] = kl;
	memcpy(c->v[c->n], v, vl);
	c->v[c->n][vl] = '\0';
	c->n++;
	if (c->stop_at && c->n == c->stop_at)
		return c->rc_stop;
	return 0;
}

/* Whether the i-th collected key is k. */
static int coll_is(const struct coll *c, int i, const unsigned char *k,
		   size_t kl)
{
	return i < c->n && c->kl[i] == kl && !memcmp(c->k[i], k, kl);
}

/* Keys compare as unsigned bytes, then length (the reference). */
static int ref_cmp(const void *a, size_t al, const void *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	return c ? c : (al > bl) - (al < bl);
}

/* ------------------------------------------------------------------ */
/* The contract                                                        */

struct store {
	const struct backend *be;
	struct mgr_kv_conf conf;
	struct mgr_kv *kv;
	char uri[1024];
	char dir[64];
};

static int fresh_store(const struct backend *be, struct store *s);
static void drop_store(struct store *s);

/* nftw callback: remove one entry. */
static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	return remove(path);
}

/* Open (create = 1) s. */
static int store_open(struct store *s, int create)
{
	char msg[600] = "";
	int rc = s->be->open(&s->conf, create, &s->kv, msg, sizeof(msg));

	if (rc)
		fprintf(stderr, "%s: open: %s\n", s->be->name, msg);
	return rc;
}

/* get/put/del, NOOVERWRITE, a read txn refusing writes, tables apart. */
static void test_basic(struct mgr_kv *kv)
{
	struct mgr_kv_txn *t, *r;

	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_VAL(t, MGR_KV_META, S("a"), NULL);
	CHECK_RC(k_put(t, MGR_KV_META, S("a"), S("one"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_META, S("a"), S("two"), MGR_KV_NOOVERWRITE), -EEXIST);
	CHECK_RC(k_put(t, MGR_KV_META, S("b"), S("bee"), MGR_KV_NOOVERWRITE), 0);
	CHECK_RC(k_put(t, MGR_KV_INODES, S("a"), S("other"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_META, S("e"), "", 0, 0), 0);
	CHECK_RC(k_put(t, MGR_KV_META, S("x"), S("v"), 0x80), -EINVAL);
	CHECK_RC(k_put(t, MGR_KV_NTABLES, S("x"), S("v"), 0), -EINVAL);
	CHECK_VAL(t, MGR_KV_META, S("a"), "one");
	CHECK_RC(k_del(t, MGR_KV_META, S("nope")), -ENOENT);
	CHECK_RC(k_commit(t), 0);

	CHECK_RC(k_begin(kv, NULL, 1, &r), 0);
	CHECK_VAL(r, MGR_KV_META, S("a"), "one");
	CHECK_VAL(r, MGR_KV_META, S("b"), "bee");
	CHECK_VAL(r, MGR_KV_META, S("e"), "");
	CHECK_VAL(r, MGR_KV_INODES, S("a"), "other");
	CHECK_VAL(r, MGR_KV_DIRENTS, S("a"), NULL);
	CHECK_RC(k_put(r, MGR_KV_META, S("c"), S("x"), 0), -EINVAL);
	CHECK_RC(k_del(r, MGR_KV_META, S("a")), -EINVAL);
	CHECK_RC(k_delp(r, MGR_KV_META, S("a")), -EINVAL);
	CHECK_EQ(k_count(r, MGR_KV_META), 3);
	k_abort(r);

	/* an existing key: overwrite, NOOVERWRITE, delete, abort */
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_META, S("b"), S("x"), MGR_KV_NOOVERWRITE), -EEXIST);
	CHECK_RC(k_put(t, MGR_KV_META, S("b"), S("bee2"), 0), 0);
	CHECK_RC(k_del(t, MGR_KV_META, S("a")), 0);
	CHECK_VAL(t, MGR_KV_META, S("a"), NULL);
	CHECK_RC(k_del(t, MGR_KV_META, S("a")), -ENOENT);
	CHECK_RC(k_put(t, MGR_KV_META, S("a"), S("back"), MGR_KV_NOOVERWRITE), 0);
	CHECK_VAL(t, MGR_KV_META, S("a"), "back");
	k_abort(t);
	CHECK_RC(k_begin(kv, NULL, 1, &r), 0);
	CHECK_VAL(r, MGR_KV_META, S("a"), "one");
	CHECK_VAL(r, MGR_KV_META, S("b"), "bee");
	k_abort(r);

	/* a write txn with no writes commits as nothing */
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_VAL(t, MGR_KV_META, S("a"), "one");
	CHECK_RC(k_commit(t), 0);
	/* a read txn may be committed too */
	CHECK_RC(k_begin(kv, NULL, 1, &r), 0);
	CHECK_VAL(r, MGR_KV_META, S("a"), "one");
	CHECK_RC(k_commit(r), 0);
}

/* The keys of the order checks: 0x00 and 0xff bytes, prefixes of others,
 * bytes above 0x7f (signed-char comparisons get these wrong). */
static const struct {
	unsigned char k[4];
	size_t kl;
} order_keys[] = {
	{ { 0x01 }, 1 }, { { 0x01, 0x00 }, 2 }, { { 0x01, 0xff }, 2 },
	{ { 0x01, 0xff, 0xff }, 3 }, { { 0x02 }, 1 }, { { 0x00 }, 1 },
	{ { 0xff }, 1 }, { { 0xff, 0x00 }, 2 }, { { 0x7f }, 1 },
	{ { 0x80 }, 1 }, { { 0x01, 0x7f }, 2 }, { { 0x01, 0x80 }, 2 },
	{ { 0x00, 0x00 }, 2 }, { { 0xff, 0xff }, 2 },
};
#define NORDER (sizeof(order_keys) / sizeof(order_keys[0]))

/* Whether c holds, in order, exactly the keys of order_keys that start
 * with p[0..pl) and are >= from[0..fl). */
static int order_ok(const struct coll *c, const unsigned char *from, size_t fl,
		    const unsigned char *p, size_t pl)
{
	int idx[NORDER], n = 0;

	for (size_t i = 0; i < NORDER; i++)
		if (order_keys[i].kl >= pl && !memcmp(order_keys[i].k, p, pl) &&
		    ref_cmp(order_keys[i].k, order_keys[i].kl, from, fl) >= 0)
			idx[n++] = (int)i;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && ref_cmp(order_keys[idx[j]].k, order_keys[idx[j]].kl,
						 order_keys[idx[j - 1]].k,
						 order_keys[idx[j - 1]].kl) < 0; j--) {
			int x = idx[j];

			idx[j] = idx[j - 1];
			idx[j - 1] = x;
		}
	if (c->n != n)
		return 0;
	for (int i = 0; i < n; i++)
		if (!coll_is(c, i, order_keys[idx[i]].k, order_keys[idx[i]].kl))
			return 0;
	return 1;
}

/* Run the order and prefix checks on t's view of MGR_KV_DIRENTS. */
static void order_checks(struct mgr_kv_txn *t)
{
	struct coll c;

	memset(&c, 0, sizeof(c));
	CHECK_RC(k_scan(t, MGR_KV_DIRENTS, "", 0, 0, coll_fn, &c), 0);
	CHECK(order_ok(&c, (const unsigned char *)"", 0, (const unsigned char *)"", 0));
	memset(&c, 0, sizeof(c));
	CHECK_RC(k_scan(t, MGR_KV_DIRENTS, K(0x01), 1, coll_fn, &c), 0);
	CHECK(order_ok(&c, K(0x01), (const unsigned char[]){ 0x01 }, 1));
	memset(&c, 0, sizeof(c));
	CHECK_RC(k_scan(t, MGR_KV_DIRENTS, K(0x01, 0xff), 2, coll_fn, &c), 0);
	CHECK(order_ok(&c, K(0x01, 0xff), (const unsigned char[]){ 0x01, 0xff }, 2));
	memset(&c, 0, sizeof(c));
	CHECK_RC(k_scan(t, MGR_KV_DIRENTS, K(0xff), 1, coll_fn, &c), 0);
	CHECK(order_ok(&c, K(0xff), (const unsigned char[]){ 0xff }, 1));
	memset(&c, 0, sizeof(c));
	CHECK_RC(k_scan(t, MGR_KV_DIRENTS, K(0x00), 1, coll_fn, &c), 0);
	CHECK(order_ok(&c, K(0x00), (const unsigned char[]){ 0x00 }, 1));
	/* from inside the prefix: starts there */
	memset(&c, 0, sizeof(c));
	CHECK_RC(k_scan(t, MGR_KV_DIRENTS, K(0x01, 0x01), 1, coll_fn, &c), 0);
	CHECK(order_ok(&c, K(0x01, 0x01), (const unsigned char[]){ 0x01 }, 1));
	/* no match */
	memset(&c, 0, sizeof(c));
	CHECK_RC(k_scan(t, MGR_KV_DIRENTS, K(0x03), 1, coll_fn, &c), 0);
	CHECK_EQ(c.n, 0);
	/* the callback's nonzero value stops the walk and is returned */
	memset(&c, 0, sizeof(c));
	c.stop_at = 2;
	c.rc_stop = 42;
	CHECK_RC(k_scan(t, MGR_KV_DIRENTS, "", 0, 0, coll_fn, &c), 42);
	CHECK_EQ(c.n, 2);
	/* plen > flen */
	CHECK_RC(k_scan(t, MGR_KV_DIRENTS, K(0x01), 2, coll_fn, &c), -EINVAL);
	/* other tables are not in it */
	memset(&c, 0, sizeof(c));
	CHECK_RC(k_scan(t, MGR_KV_DIRSEQ, "", 0, 0, coll_fn, &c), 0);
	CHECK_EQ(c.n, 0);
}

/* Byte order and prefix bounds: buffered (before commit), committed, and
 * half and half. */
static void test_order(struct mgr_kv *kv)
{
	struct mgr_kv_txn *t;

	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	for (size_t i = 0; i < NORDER; i++)
		CHECK_RC(k_put(t, MGR_KV_DIRENTS, order_keys[i].k, order_keys[i].kl,
			       S("v"), 0), 0);
	order_checks(t);
	k_abort(t);

	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	for (size_t i = 0; i < NORDER; i += 2)
		CHECK_RC(k_put(t, MGR_KV_DIRENTS, order_keys[i].k, order_keys[i].kl,
			       S("v"), 0), 0);
	CHECK_RC(k_commit(t), 0);
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	for (size_t i = 1; i < NORDER; i += 2)
		CHECK_RC(k_put(t, MGR_KV_DIRENTS, order_keys[i].k, order_keys[i].kl,
			       S("v"), 0), 0);
	order_checks(t);
	CHECK_RC(k_commit(t), 0);

	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	order_checks(t);
	CHECK_EQ(k_count(t, MGR_KV_DIRENTS), NORDER);
	k_abort(t);

	/* every key starts with one of these bytes */
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	for (size_t i = 0; i < NORDER; i++)
		CHECK_RC(k_delp(t, MGR_KV_DIRENTS, order_keys[i].k, 1), 0);
	CHECK_EQ(k_count(t, MGR_KV_DIRENTS), 0);
	CHECK_RC(k_commit(t), 0);
}

/* Scans and counts that merge a transaction's writes with the store's. */
static void test_merge(struct mgr_kv *kv)
{
	struct mgr_kv_txn *t;
	struct coll c;

	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("a"), S("A"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("c"), S("C"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("e"), S("E"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("g"), S("G"), 0), 0);
	CHECK_RC(k_commit(t), 0);

	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("b"), S("B"), 0), 0);
	CHECK_RC(k_del(t, MGR_KV_XATTRS, S("c")), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("e"), S("E2"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("f"), S("F"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("h"), S("H"), 0), 0);
	memset(&c, 0, sizeof(c));
	CHECK_RC(k_scan(t, MGR_KV_XATTRS, "", 0, 0, coll_fn, &c), 0);
	CHECK_EQ(c.n, 6);
	CHECK(coll_is(&c, 0, (const unsigned char *)"a", 1) && !strcmp(c.v[0], "A"));
	CHECK(coll_is(&c, 1, (const unsigned char *)"b", 1) && !strcmp(c.v[1], "B"));
	CHECK(coll_is(&c, 2, (const unsigned char *)"e", 1) && !strcmp(c.v[2], "E2"));
	CHECK(coll_is(&c, 3, (const unsigned char *)"f", 1) && !strcmp(c.v[3], "F"));
	CHECK(coll_is(&c, 4, (const unsigned char *)"g", 1) && !strcmp(c.v[4], "G"));
	CHECK(coll_is(&c, 5, (const unsigned char *)"h", 1) && !strcmp(c.v[5], "H"));
	CHECK_EQ(k_count(t, MGR_KV_XATTRS), 6);
	CHECK_RC(k_commit(t), 0);

	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	memset(&c, 0, sizeof(c));
	CHECK_RC(k_scan(t, MGR_KV_XATTRS, "", 0, 0, coll_fn, &c), 0);
	CHECK_EQ(c.n, 6);
	CHECK(coll_is(&c, 2, (const unsigned char *)"e", 1) && !strcmp(c.v[2], "E2"));
	CHECK_EQ(k_count(t, MGR_KV_XATTRS), 6);
	k_abort(t);
}

/* del_prefix: on stored rows, on buffered ones, a put after it, prefixes
 * nested in each other, count through it. */
static void test_del_prefix(struct mgr_kv *kv)
{
	struct mgr_kv_txn *t;
	struct coll c;

	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_ORPHANS, S("p1a"), S("1"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_ORPHANS, S("p1b"), S("2"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_ORPHANS, S("p2a"), S("3"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_ORPHANS, S("p"), S("4"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_ORPHANS, S("q"), S("5"), 0), 0);
	CHECK_RC(k_commit(t), 0);

	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_ORPHANS, S("p1c"), S("6"), 0), 0);
	CHECK_RC(k_delp(t, MGR_KV_ORPHANS, S("p1")), 0);
	CHECK_VAL(t, MGR_KV_ORPHANS, S("p1a"), NULL);
	CHECK_VAL(t, MGR_KV_ORPHANS, S("p1c"), NULL);
	CHECK_VAL(t, MGR_KV_ORPHANS, S("p2a"), "3");
	CHECK_RC(k_del(t, MGR_KV_ORPHANS, S("p1b")), -ENOENT);
	CHECK_RC(k_put(t, MGR_KV_ORPHANS, S("p1z"), S("7"), MGR_KV_NOOVERWRITE), 0);
	CHECK_EQ(k_count(t, MGR_KV_ORPHANS), 4); /* p, p1z, p2a, q */
	memset(&c, 0, sizeof(c));
	CHECK_RC(k_scan(t, MGR_KV_ORPHANS, S("p"), 1, coll_fn, &c), 0);
	CHECK_EQ(c.n, 3);
	CHECK(coll_is(&c, 0, (const unsigned char *)"p", 1));
	CHECK(coll_is(&c, 1, (const unsigned char *)"p1z", 3));
	CHECK(coll_is(&c, 2, (const unsigned char *)"p2a", 3));
	CHECK_RC(k_commit(t), 0);

	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	CHECK_VAL(t, MGR_KV_ORPHANS, S("p1a"), NULL);
	CHECK_VAL(t, MGR_KV_ORPHANS, S("p1z"), "7");
	CHECK_EQ(k_count(t, MGR_KV_ORPHANS), 4);
	k_abort(t);

	/* a wider prefix over a narrower one, then a put under both; a
	 * prefix that matches nothing */
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_delp(t, MGR_KV_ORPHANS, S("p2")), 0);
	CHECK_RC(k_delp(t, MGR_KV_ORPHANS, S("p")), 0);
	CHECK_RC(k_delp(t, MGR_KV_ORPHANS, S("p1")), 0);
	CHECK_RC(k_delp(t, MGR_KV_ORPHANS, S("zz")), 0);
	CHECK_RC(k_put(t, MGR_KV_ORPHANS, S("p2b"), S("8"), 0), 0);
	CHECK_EQ(k_count(t, MGR_KV_ORPHANS), 2); /* p2b, q */
	CHECK_RC(k_commit(t), 0);
	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	memset(&c, 0, sizeof(c));
	CHECK_RC(k_scan(t, MGR_KV_ORPHANS, "", 0, 0, coll_fn, &c), 0);
	CHECK_EQ(c.n, 2);
	CHECK(coll_is(&c, 0, (const unsigned char *)"p2b", 3));
	CHECK(coll_is(&c, 1, (const unsigned char *)"q", 1));
	k_abort(t);

	/* prefixes with 0xff bytes (no upper bound) */
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_STALE, K(0xff, 0x01), S("a"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_STALE, K(0xff, 0xff), S("b"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_STALE, K(0xfe, 0xff), S("c"), 0), 0);
	CHECK_RC(k_commit(t), 0);
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_delp(t, MGR_KV_STALE, K(0xff)), 0);
	CHECK_EQ(k_count(t, MGR_KV_STALE), 1);
	CHECK_RC(k_commit(t), 0);
	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	CHECK_EQ(k_count(t, MGR_KV_STALE), 1);
	CHECK_VAL(t, MGR_KV_STALE, "\xfe\xff", 2, "c");
	k_abort(t);
}

/* Child transactions: they see the parent's writes; commit folds into
 * the parent, abort drops only the child's; nesting; misuse. */
static void test_child(struct mgr_kv *kv)
{
	struct mgr_kv_txn *t, *c, *g, *r;

	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_INODES, S("base"), S("b"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_INODES, S("pre/1"), S("1"), 0), 0);
	CHECK_RC(k_commit(t), 0);

	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_INODES, S("p"), S("parent"), 0), 0);
	/* an aborted child */
	CHECK_RC(k_begin(kv, t, 0, &c), 0);
	CHECK_VAL(c, MGR_KV_INODES, S("p"), "parent");
	/* the parent is busy while its child is open (PostgreSQL -EINVAL,
	 * LMDB -EIO: mgr_kv.h names no errno) */
	CHECK(k_put(t, MGR_KV_INODES, S("x"), S("x"), 0) < 0);
	CHECK_RC(k_put(c, MGR_KV_INODES, S("p"), S("child"), 0), 0);
	CHECK_RC(k_put(c, MGR_KV_INODES, S("c1"), S("c1"), 0), 0);
	CHECK_RC(k_del(c, MGR_KV_INODES, S("base")), 0);
	CHECK_RC(k_delp(c, MGR_KV_INODES, S("pre/")), 0);
	CHECK_VAL(c, MGR_KV_INODES, S("p"), "child");
	CHECK_VAL(c, MGR_KV_INODES, S("base"), NULL);
	CHECK_VAL(c, MGR_KV_INODES, S("pre/1"), NULL);
	CHECK_EQ(k_count(c, MGR_KV_INODES), 3); /* a (test_basic), p, c1 */
	k_abort(c);
	CHECK_VAL(t, MGR_KV_INODES, S("p"), "parent");
	CHECK_VAL(t, MGR_KV_INODES, S("c1"), NULL);
	CHECK_VAL(t, MGR_KV_INODES, S("base"), "b");
	CHECK_VAL(t, MGR_KV_INODES, S("pre/1"), "1");
	CHECK_EQ(k_count(t, MGR_KV_INODES), 4); /* a, base, pre/1, p */

	/* a committed child with a grandchild, one committed, one aborted */
	CHECK_RC(k_begin(kv, t, 0, &c), 0);
	CHECK(k_begin(kv, t, 0, &g) < 0); /* one child at a time */
	CHECK_RC(k_put(c, MGR_KV_INODES, S("c2"), S("c2"), 0), 0);
	CHECK_RC(k_delp(c, MGR_KV_INODES, S("pre/")), 0);
	CHECK_RC(k_put(c, MGR_KV_INODES, S("pre/2"), S("2"), 0), 0);
	CHECK_RC(k_begin(kv, c, 0, &g), 0);
	CHECK_RC(k_del(g, MGR_KV_INODES, S("p")), 0);
	CHECK_RC(k_put(g, MGR_KV_INODES, S("g"), S("g"), 0), 0);
	CHECK_RC(k_commit(g), 0);
	CHECK_RC(k_begin(kv, c, 0, &g), 0);
	CHECK_RC(k_put(g, MGR_KV_INODES, S("lost"), S("l"), 0), 0);
	k_abort(g);
	CHECK_VAL(c, MGR_KV_INODES, S("p"), NULL);
	CHECK_VAL(c, MGR_KV_INODES, S("lost"), NULL);
	CHECK_RC(k_commit(c), 0);
	CHECK_VAL(t, MGR_KV_INODES, S("c2"), "c2");
	CHECK_VAL(t, MGR_KV_INODES, S("g"), "g");
	CHECK_VAL(t, MGR_KV_INODES, S("p"), NULL);
	CHECK_VAL(t, MGR_KV_INODES, S("pre/1"), NULL);
	CHECK_VAL(t, MGR_KV_INODES, S("pre/2"), "2");
	CHECK_RC(k_begin(kv, t, 0, &c), 0);
	CHECK_RC(k_put(c, MGR_KV_INODES, S("c3"), S("c3"), 0), 0);
	CHECK_RC(k_commit(c), 0);
	CHECK_RC(k_commit(t), 0);

	CHECK_RC(k_begin(kv, NULL, 1, &r), 0);
	CHECK_RC(k_begin(kv, r, 0, &c), -EINVAL); /* a read txn has no child */
	CHECK_VAL(r, MGR_KV_INODES, S("base"), "b");
	CHECK_VAL(r, MGR_KV_INODES, S("c2"), "c2");
	CHECK_VAL(r, MGR_KV_INODES, S("c3"), "c3");
	CHECK_VAL(r, MGR_KV_INODES, S("g"), "g");
	CHECK_VAL(r, MGR_KV_INODES, S("pre/1"), NULL);
	CHECK_VAL(r, MGR_KV_INODES, S("pre/2"), "2");
	CHECK_VAL(r, MGR_KV_INODES, S("p"), NULL);
	CHECK_EQ(k_count(r, MGR_KV_INODES), 6); /* a, base, c2, c3, g, pre/2 */
	k_abort(r);
}

/* Scan over many rows (several pages) with writes in between and from the
 * callback; a value stays valid after later reads. */
#define NBIG 3000

struct big {
	struct mgr_kv_txn *t;
	int n, bad;
	unsigned last;
};

static int big_fn(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct big *b = arg;
	unsigned char kb[4];
	unsigned key;

	if (kl != 4)
		return b->bad = 1;
	memcpy(kb, k, 4);
	key = (unsigned)kb[0] << 24 | (unsigned)kb[1] << 16 | kb[2] << 8 | kb[3];
	if (b->n && key <= b->last)
		b->bad = 1;
	b->last = key;
	b->n++;
	/* delete a row ahead: the walk must not show it */
	if (key % 100 == 2)
		b->bad = 1; /* deleted */
	if (key % 100 == 0 && !b->t->rdonly) {
		unsigned nk = key + 2;
		unsigned char nb[4] = { nk >> 24, nk >> 16, nk >> 8, nk };

		if (k_del(b->t, MGR_KV_DIRSEQ, nb, 4) != 0)
			b->bad = 1;
	}
	return 0;
}

static void big_key(unsigned i, unsigned char kb[4])
{
	kb[0] = (unsigned char)(i >> 24);
	kb[1] = (unsigned char)(i >> 16);
	kb[2] = (unsigned char)(i >> 8);
	kb[3] = (unsigned char)i;
}

static void test_big(struct mgr_kv *kv)
{
	struct mgr_kv_txn *t;
	unsigned char kb[4];
	struct big b = { 0 };
	const void *v1, *v2;
	size_t l1, l2;
	char val[32];

	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	for (unsigned i = 0; i < NBIG; i++) {
		big_key(i * 2, kb);
		snprintf(val, sizeof(val), "v%u", i * 2);
		CHECK_RC(k_put(t, MGR_KV_DIRSEQ, kb, 4, val, strlen(val), 0), 0);
	}
	CHECK_RC(k_commit(t), 0);

	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	for (unsigned i = 0; i < NBIG; i += 10) { /* odd keys between them */
		big_key(i * 2 + 1, kb);
		CHECK_RC(k_put(t, MGR_KV_DIRSEQ, kb, 4, S("odd"), 0), 0);
	}
	b.t = t;
	CHECK_RC(k_scan(t, MGR_KV_DIRSEQ, "", 0, 0, big_fn, &b), 0);
	CHECK_EQ(b.bad, 0);
	/* NBIG even keys, NBIG / 10 odd ones, minus key + 2 for every key %
	 * 100 == 0 (deleted from the callback) */
	CHECK_EQ(b.n, NBIG + NBIG / 10 - NBIG * 2 / 100);
	CHECK_EQ(k_count(t, MGR_KV_DIRSEQ), (uint64_t)b.n);
	big_key(4, kb);
	CHECK_RC(k_get(t, MGR_KV_DIRSEQ, kb, 4, &v1, &l1), 0);
	big_key(6, kb);
	CHECK_RC(k_get(t, MGR_KV_DIRSEQ, kb, 4, &v2, &l2), 0);
	CHECK(l1 == 2 && !memcmp(v1, "v4", 2));
	CHECK(l2 == 2 && !memcmp(v2, "v6", 2));
	CHECK_RC(k_commit(t), 0);

	memset(&b, 0, sizeof(b));
	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	b.t = t;
	CHECK_RC(k_scan(t, MGR_KV_DIRSEQ, "", 0, 0, big_fn, &b), 0);
	CHECK_EQ(b.bad, 0);
	CHECK_EQ(b.n, NBIG + NBIG / 10 - NBIG * 2 / 100);
	CHECK_EQ(k_count(t, MGR_KV_DIRSEQ), (uint64_t)b.n);
	k_abort(t);
}

/* A read txn is a snapshot: a commit after its first read is not seen;
 * write txns of two threads take turns. */
struct writer {
	struct mgr_kv *kv;
	int rc;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct mgr_kv_txn *t;

	w->rc = k_begin(w->kv, NULL, 0, &t);
	if (w->rc)
		return NULL;
	w->rc = k_put(t, MGR_KV_META, S("snap"), S("new"), 0);
	if (!w->rc)
		w->rc = k_commit(t);
	else
		k_abort(t);
	return NULL;
}

static void test_snapshot(struct mgr_kv *kv)
{
	struct mgr_kv_txn *r, *t;
	struct writer w = { kv, -1 };
	pthread_t th;

	CHECK_RC(k_begin(kv, NULL, 1, &r), 0);
	CHECK_VAL(r, MGR_KV_META, S("a"), "one");
	CHECK(pthread_create(&th, NULL, writer_main, &w) == 0);
	pthread_join(th, NULL);
	CHECK_RC(w.rc, 0);
	CHECK_VAL(r, MGR_KV_META, S("snap"), NULL);
	k_abort(r);
	CHECK_RC(k_begin(kv, NULL, 1, &r), 0);
	CHECK_VAL(r, MGR_KV_META, S("snap"), "new");
	k_abort(r);

	/* a writer of another thread waits for ours */
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_META, S("snap"), S("ours"), 0), 0);
	w.rc = -1;
	CHECK(pthread_create(&th, NULL, writer_main, &w) == 0);
	usleep(100 * 1000);
	CHECK_VAL(t, MGR_KV_META, S("snap"), "ours");
	CHECK_RC(k_commit(t), 0);
	pthread_join(th, NULL);
	CHECK_RC(w.rc, 0);
	CHECK_RC(k_begin(kv, NULL, 1, &r), 0);
	CHECK_VAL(r, MGR_KV_META, S("snap"), "new"); /* theirs came second */
	k_abort(r);
}

/* The whole contract on a fresh store of be, and a reopen. */
static void run_contract(const struct backend *be)
{
	struct store s;
	struct mgr_kv_txn *r;

	fprintf(stderr, "== %s\n", be->name);
	if (fresh_store(be, &s)) {
		CHECK(!"cannot make a fresh store");
		return;
	}
	if (store_open(&s, 1)) {
		CHECK(!"cannot open the store");
		goto out_drop;
	}
	CHECK(s.kv->kind == be->kind);
	if (be->kind == MGR_KV_LMDB) /* one mgr, no shared lease */
		CHECK_RC(mgr_kv_set_token(s.kv, 3), -EOPNOTSUPP);
	test_basic(s.kv);
	test_order(s.kv);
	test_merge(s.kv);
	test_del_prefix(s.kv);
	test_child(s.kv);
	test_big(s.kv);
	test_snapshot(s.kv);
	mgr_kv_close(s.kv);
	s.kv = NULL;

	/* durable across a reopen (without create) */
	if (store_open(&s, 0)) {
		CHECK(!"cannot reopen the store");
		goto out_drop;
	}
	CHECK_RC(k_begin(s.kv, NULL, 1, &r), 0);
	CHECK_VAL(r, MGR_KV_META, S("a"), "one");
	CHECK_VAL(r, MGR_KV_INODES, S("c3"), "c3");
	CHECK_VAL(r, MGR_KV_ORPHANS, S("p2b"), "8");
	k_abort(r);
	mgr_kv_close(s.kv);
	s.kv = NULL;
out_drop:
	drop_store(&s);
}

/* ------------------------------------------------------------------ */
/* PostgreSQL                                                          */

#ifdef RPFS_HAVE_PG
static char pg_admin[1024]; /* the URI of the cluster (a CREATEDB role) */
static char pg_dir[64];     /* our pg-temp.sh cluster, "" if none */
static const char *pg_script;
static int pg_ndb;

/* Run sql on the database of uri. @return 0, -1 (printed) */
static int pg_sql(const char *uri, const char *sql)
{
	PGconn *pc = PQconnectdb(uri);
	PGresult *r;
	int rc = 0;

	if (PQstatus(pc) != CONNECTION_OK) {
		fprintf(stderr, "pg_sql: connect: %s", PQerrorMessage(pc));
		PQfinish(pc);
		return -1;
	}
	r = PQexec(pc, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK &&
	    PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "pg_sql: %s: %s", sql, PQresultErrorMessage(r));
		rc = -1;
	}
	PQclear(r);
	PQfinish(pc);
	return rc;
}

/* The integer the query sql answers on uri's database, -1 on error. */
static long pg_sql_int(const char *uri, const char *sql)
{
	PGconn *pc = PQconnectdb(uri);
	PGresult *r = PQstatus(pc) == CONNECTION_OK ? PQexec(pc, sql) : NULL;
	long v = -1;

	if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		v = atol(PQgetvalue(r, 0, 0));
	else
		fprintf(stderr, "pg_sql_int: %s: %s", sql, PQerrorMessage(pc));
	PQclear(r);
	PQfinish(pc);
	return v;
}

/* A fresh database rpfs_kvt_PID_N; its URI in s->uri. */
static int pg_fresh_db(char *name, size_t ncap, char *uri, size_t ucap)
{
	char sql[128];

	snprintf(name, ncap, "rpfs_kvt_%d_%d", (int)getpid(), pg_ndb++);
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
	if (pg_sql(pg_admin, sql))
		return -1;
	return pg_uri_with(pg_admin, name, NULL, uri, ucap);
}

static void pg_drop_db(const char *name)
{
	char sql[128];

	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
	(void)pg_sql(pg_admin, sql);
}

/* A fresh database (pg_fresh_db) with the schema in it, opened: the start
 * of the PostgreSQL-only tests. On failure the test is failed and nothing
 * is left behind. @return 0, -1 */
static int pg_fresh_open(char *name, size_t ncap, char *uri, size_t ucap,
			 struct mgr_kv **kv)
{
	struct mgr_kv_conf conf = { .kind = MGR_KV_POSTGRESQL, .uri = uri };
	char msg[600];

	if (pg_fresh_db(name, ncap, uri, ucap)) {
		CHECK(!"cannot create a database");
		return -1;
	}
	if (mgr_kv_pg_open(&conf, 1, kv, msg, sizeof(msg))) {
		CHECK(!"cannot open");
		fprintf(stderr, "%s\n", msg);
		pg_drop_db(name);
		return -1;
	}
	return 0;
}

/* Stop our cluster and remove its directory (atexit). */
static void pg_env_stop(void)
{
	char cmd[512];

	if (!pg_dir[0])
		return;
	snprintf(cmd, sizeof(cmd), "'%s' stop '%s' >&2", pg_script, pg_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "pg-temp.sh stop %s failed\n", pg_dir);
	nftw(pg_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	pg_dir[0] = '\0';
}

/*
 * A watchdog for a test that dies (a meson timeout's SIGTERM, a crash):
 * a child in a session of its own waits for EOF on a pipe only we hold
 * (close-on-exec, so the server does not inherit it) and then stops the
 * cluster if its directory is still there (pg_env_stop removes it).
 */
static void pg_watchdog(void)
{
	int p[2];
	pid_t pid;
	char c;

	if (pipe2(p, O_CLOEXEC))
		return;
	pid = fork();
	if (pid == 0) {
		close(p[1]);
		setsid();
		for (;;) {
			ssize_t n = read(p[0], &c, 1);

			if (n == 0 || (n < 0 && errno != EINTR))
				break;
		}
		if (access(pg_dir, F_OK) == 0)
			pg_env_stop();
		_exit(0);
	}
	close(p[0]);
	if (pid < 0)
		close(p[1]);
}

/* $RPFS_PG_URI, else a cluster of our own from pg-temp.sh. @return 0, -1 */
static int pg_env_start(const char *script)
{
	const char *env = getenv("RPFS_PG_URI");
	char cmd[512];
	FILE *f;

	if (env && env[0]) {
		snprintf(pg_admin, sizeof(pg_admin), "%s", env);
		return 0;
	}
	if (!script) {
		fprintf(stderr, "usage: test_mgr_kv PATH/pg-temp.sh (or set RPFS_PG_URI)\n");
		return -1;
	}
	pg_script = script;
	snprintf(pg_dir, sizeof(pg_dir), "/tmp/rpfs-kvtest.XXXXXX");
	if (!mkdtemp(pg_dir)) {
		perror("mkdtemp");
		pg_dir[0] = '\0';
		return -1;
	}
	atexit(pg_env_stop);
	pg_watchdog();
	snprintf(cmd, sizeof(cmd), "'%s' start '%s'", script, pg_dir);
	f = popen(cmd, "r");
	if (!f || !fgets(pg_admin, sizeof(pg_admin), f)) {
		fprintf(stderr, "%s start %s: no URI\n", script, pg_dir);
		if (f)
			pclose(f);
		return -1;
	}
	pg_admin[strcspn(pg_admin, "\n")] = '\0';
	return pclose(f) == 0 ? 0 : -1;
}

/* Open conf's store expecting want; msg must name store_uri and not hold
 * secret. */
static void pg_open_fails(const char *uri, int create, int want,
			  const char *must, const char *secret)
{
	struct mgr_kv_conf conf = { .kind = MGR_KV_POSTGRESQL, .uri = uri };
	struct mgr_kv *kv = NULL;
	char msg[600] = "";
	int rc = mgr_kv_pg_open(&conf, create, &kv, msg, sizeof(msg));

	fprintf(stderr, "  open: %d %s\n", rc, msg);
	CHECK_RC(rc, want);
	if (want)
		CHECK(strstr(msg, "store_uri") != NULL);
	CHECK(!strchr(msg, '\n'));
	if (must)
		CHECK(strstr(msg, must) != NULL);
	if (secret)
		CHECK(strstr(msg, secret) == NULL);
	if (!rc)
		mgr_kv_close(kv);
}

/* A port nothing listens on (bound, then closed). */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = 1;

	if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    !getsockname(fd, (struct sockaddr *)&a, &al))
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Each error at open: -errno and one line naming store_uri, never the
 * password. */
static void test_pg_open_errors(void)
{
	char name[64], uri[1024], bad[1200], sql[200];
	PQconninfoOption *o = PQconninfoParse(pg_admin, NULL);
	const char *pass = NULL;

	fprintf(stderr, "== postgresql: errors at open\n");
	for (PQconninfoOption *p = o; p && p->keyword; p++)
		if (!strcmp(p->keyword, "password"))
			pass = p->val;
	/* not set, unparseable */
	pg_open_fails("", 0, -EINVAL, "not set", NULL);
	pg_open_fails("postgresql://u:sekrit1@127.0.0.1/x?nosuchparam=1", 0, -EINVAL,
		      "nosuchparam", "sekrit1");
	pg_open_fails("host=127.0.0.1 password=sekrit2 port", 0, -EINVAL, NULL, "sekrit2");
	pg_open_fails("postgresql://u@127.0.0.1/x?password=sekrit5&sslpassword=sekrit6"
		      "&nosuchparam=1", 0, -EINVAL, "nosuchparam", "sekrit");
	/* unreachable */
	snprintf(bad, sizeof(bad), "postgresql://u:sekrit3@127.0.0.1:%d/rpfs",
		 free_port());
	pg_open_fails(bad, 0, -EHOSTUNREACH, "cannot reach", "sekrit3");
	/* wrong password */
	if (pg_uri_with(pg_admin, "rpfs", "wrong-sekrit4", uri, sizeof(uri)) == 0)
		pg_open_fails(uri, 0, -EACCES, "authentication", "sekrit4");
	/* missing database */
	if (pg_uri_with(pg_admin, "rpfs_no_such_db", NULL, uri, sizeof(uri)) == 0)
		pg_open_fails(uri, 0, -ENOENT, "does not exist", pass);
	/* no schema; then mkfs (create) twice; then the wrong version */
	if (pg_fresh_db(name, sizeof(name), uri, sizeof(uri)) == 0) {
		pg_open_fails(uri, 0, -ENOENT, "rpfs mkfs", pass);
		pg_open_fails(uri, 1, 0, NULL, NULL);
		pg_open_fails(uri, 1, 0, NULL, NULL);
		pg_open_fails(uri, 0, 0, NULL, NULL);
		snprintf(sql, sizeof(sql), "UPDATE rpfs_schema SET version = 99");
		CHECK(pg_sql(uri, sql) == 0);
		pg_open_fails(uri, 0, -EPROTO, "schema version 99", pass);
		pg_open_fails(uri, 1, -EPROTO, "schema version 99", pass);
		pg_drop_db(name);
	} else {
		CHECK(!"cannot create a database");
	}
	PQconninfoFree(o);
}

/* A trigger that fails the commit: key "boom" with a plain error, key
 * "retry" with serialization failures for its first 3 attempts, key
 * "never" with deadlocks every time. nextval() is not rolled back, so the
 * sequences count the attempts. */
static const char pg_fault_sql[] =
	"CREATE SEQUENCE retry_seq; CREATE SEQUENCE never_seq;"
	"CREATE FUNCTION rpfs_fault() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
	" IF NEW.k = 'boom'::bytea THEN RAISE EXCEPTION 'boom'; END IF;"
	" IF NEW.k = 'retry'::bytea AND nextval('retry_seq') <= 3 THEN"
	"  RAISE EXCEPTION 'conflict' USING ERRCODE = 'serialization_failure'; END IF;"
	" IF NEW.k = 'never'::bytea AND nextval('never_seq') > 0 THEN"
	"  RAISE EXCEPTION 'deadlock' USING ERRCODE = 'deadlock_detected'; END IF;"
	" RETURN NEW; END $$;"
	"CREATE TRIGGER rpfs_fault BEFORE INSERT OR UPDATE ON rpfs_kv"
	" FOR EACH ROW EXECUTE FUNCTION rpfs_fault()";

/* A commit is all or nothing (a failing upsert undoes the prefix delete
 * and the point delete before it in the same batch); conflicts are sent
 * again, a bounded number of times, then -EAGAIN. */
static void test_pg_commit_faults(void)
{
	char name[64], uri[1024];
	struct mgr_kv *kv;
	struct mgr_kv_txn *t;

	fprintf(stderr, "== postgresql: failing commits\n");
	if (pg_fresh_open(name, sizeof(name), uri, sizeof(uri), &kv))
		return;
	CHECK(pg_sql(uri, pg_fault_sql) == 0);
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("p/1"), S("1"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("p/2"), S("2"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("q"), S("q"), 0), 0);
	CHECK_RC(k_commit(t), 0);

	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_delp(t, MGR_KV_XATTRS, S("p/")), 0);
	CHECK_RC(k_del(t, MGR_KV_XATTRS, S("q")), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("ok"), S("ok"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("boom"), S("b"), 0), 0);
	CHECK_RC(k_commit(t), -EIO);
	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	CHECK_VAL(t, MGR_KV_XATTRS, S("p/1"), "1");
	CHECK_VAL(t, MGR_KV_XATTRS, S("p/2"), "2");
	CHECK_VAL(t, MGR_KV_XATTRS, S("q"), "q");
	CHECK_VAL(t, MGR_KV_XATTRS, S("ok"), NULL);
	CHECK_EQ(k_count(t, MGR_KV_XATTRS), 3);
	k_abort(t);

	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_del(t, MGR_KV_XATTRS, S("q")), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("retry"), S("r"), 0), 0);
	CHECK_RC(k_commit(t), 0);
	CHECK_EQ(pg_sql_int(uri, "SELECT last_value FROM retry_seq"), 4);
	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	CHECK_VAL(t, MGR_KV_XATTRS, S("q"), NULL);
	CHECK_VAL(t, MGR_KV_XATTRS, S("retry"), "r");
	k_abort(t);

	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("never"), S("n"), 0), 0);
	CHECK_RC(k_commit(t), -EAGAIN);
	/* the first attempt and 5 retries */
	CHECK_EQ(pg_sql_int(uri, "SELECT last_value FROM never_seq"), 6);
	mgr_kv_close(kv);
	pg_drop_db(name);
}

/* The leadership fence (mgr_kv_set_token): a commit runs only while the
 * lease row holds the store's token; once another mgr took the lease
 * (token + 1), a commit is refused with -ESTALE and nothing of it lands.
 * Reads and empty commits need no token. LMDB has no fence. */
static void test_pg_fence(void)
{
	char name[64], uri[1024];
	struct mgr_kv *kv;
	struct mgr_kv_txn *t;

	fprintf(stderr, "== postgresql: the leadership fence\n");
	if (pg_fresh_open(name, sizeof(name), uri, sizeof(uri), &kv))
		return;
	CHECK(pg_sql(uri, "UPDATE rpfs_lease SET token = 7") == 0);
	CHECK_RC(mgr_kv_set_token(kv, -1), -EINVAL);
	CHECK_RC(mgr_kv_set_token(kv, 7), 0);
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("a"), S("1"), 0), 0);
	CHECK_RC(k_commit(t), 0);
	/* another mgr takes the lease */
	CHECK(pg_sql(uri, "UPDATE rpfs_lease SET token = 8") == 0);
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("b"), S("2"), 0), 0);
	CHECK_RC(k_del(t, MGR_KV_XATTRS, S("a")), 0);
	CHECK_RC(k_commit(t), -ESTALE);
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0); /* nothing to send: no fence */
	CHECK_RC(k_commit(t), 0);
	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	CHECK_VAL(t, MGR_KV_XATTRS, S("a"), "1");
	CHECK_VAL(t, MGR_KV_XATTRS, S("b"), NULL);
	k_abort(t);
	/* the new holder's token commits; 0 turns the fence off */
	CHECK_RC(mgr_kv_set_token(kv, 8), 0);
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("c"), S("3"), 0), 0);
	CHECK_RC(k_commit(t), 0);
	CHECK_RC(mgr_kv_set_token(kv, 0), 0);
	CHECK(pg_sql(uri, "UPDATE rpfs_lease SET token = 9") == 0);
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_XATTRS, S("d"), S("4"), 0), 0);
	CHECK_RC(k_commit(t), 0);
	mgr_kv_close(kv);
	pg_drop_db(name);
}

/* Set key K (a text) of every table to V, or delete it (V NULL), behind
 * the store's back: as another writer would. */
static void pg_behind(const char *uri, const char *k, const char *v)
{
	char sql[300];

	if (v)
		snprintf(sql, sizeof(sql), "UPDATE rpfs_kv SET v = '%s'::bytea "
			 "WHERE k = '%s'::bytea", v, k);
	else
		snprintf(sql, sizeof(sql), "DELETE FROM rpfs_kv WHERE k = '%s'::bytea", k);
	CHECK(pg_sql(uri, sql) == 0);
}

/* A write txn's commit of sc=c on a thread of its own (pg_shared_readers). */
struct pg_committer {
	struct mgr_kv *kv;
	int rc;
	int done; /* __atomic */
};

static void *pg_committer_main(void *arg)
{
	struct pg_committer *c = arg;
	struct mgr_kv_txn *t;

	c->rc = k_begin(c->kv, NULL, 0, &t);
	if (!c->rc) {
		c->rc = k_put(t, MGR_KV_META, S("sc"), S("c"), 0);
		c->rc = c->rc ? c->rc : k_commit(t);
	}
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * Readers and a commit (the cache holds sa=1, the server sa=2): a commit
 * waits for a read txn that uses the cache; a read txn begun while that
 * commit waits reads the server, not the cache; once the first reader
 * ends, the commit lands, and the cache has its row.
 */
static void pg_shared_readers(struct mgr_kv *kv)
{
	struct pg_committer c = { .kv = kv };
	struct mgr_kv_txn *r1, *r2;
	pthread_t th;

	CHECK_RC(k_begin(kv, NULL, 1, &r1), 0);
	CHECK_VAL(r1, MGR_KV_META, S("sa"), "1");
	CHECK(pthread_create(&th, NULL, pg_committer_main, &c) == 0);
	usleep(300 * 1000);
	CHECK(!__atomic_load_n(&c.done, __ATOMIC_ACQUIRE));
	CHECK_RC(k_begin(kv, NULL, 1, &r2), 0);
	CHECK_VAL(r2, MGR_KV_META, S("sa"), "2");
	k_abort(r2);
	CHECK(!__atomic_load_n(&c.done, __ATOMIC_ACQUIRE));
	k_abort(r1);
	pthread_join(th, NULL);
	CHECK_RC(c.rc, 0);
	CHECK_RC(k_begin(kv, NULL, 1, &r1), 0);
	CHECK_VAL(r1, MGR_KV_META, S("sc"), "c");
	CHECK_VAL(r1, MGR_KV_META, S("sa"), "1");
	k_abort(r1);
}

/*
 * The shared row cache (mgr_kv_pg.c "Shared row cache"): while a token is
 * set, txns take the rows this process committed or read (found or
 * missing) from it, so a change made behind its back (which the fence
 * rules out in a cluster) stays unseen, except by a read txn begun while a
 * commit is in flight or waiting (pg_shared_readers); a new token, a
 * failed commit and token 0 drop it.
 */
static void test_pg_shared_cache(void)
{
	char name[64], uri[1024];
	struct mgr_kv *kv;
	struct mgr_kv_txn *t;

	fprintf(stderr, "== postgresql: the shared row cache\n");
	if (pg_fresh_open(name, sizeof(name), uri, sizeof(uri), &kv))
		return;
	CHECK(pg_sql(uri, "UPDATE rpfs_lease SET token = 7") == 0);
	CHECK_RC(mgr_kv_set_token(kv, 7), 0);
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_META, S("sa"), S("1"), 0), 0);
	CHECK_RC(k_put(t, MGR_KV_META, S("sd"), S("x"), 0), 0);
	CHECK_RC(k_commit(t), 0);
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_VAL(t, MGR_KV_META, S("sm"), NULL); /* read: no such row */
	CHECK_RC(k_del(t, MGR_KV_META, S("sd")), 0);
	CHECK_RC(k_commit(t), 0);
	pg_behind(uri, "sa", "2");
	CHECK(pg_sql(uri, "INSERT INTO rpfs_kv VALUES (5, 'sm'::bytea, 'y'::bytea), "
		     "(5, 'sd'::bytea, 'z'::bytea)") == 0);
	/* write txns: the rows as committed or read, a child's view too */
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_VAL(t, MGR_KV_META, S("sa"), "1");
	CHECK_VAL(t, MGR_KV_META, S("sm"), NULL);
	CHECK_VAL(t, MGR_KV_META, S("sd"), NULL);
	k_abort(t);
	/* read txns too, and what they fetch goes in (sr: no row, then one) */
	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	CHECK_VAL(t, MGR_KV_META, S("sa"), "1");
	CHECK_VAL(t, MGR_KV_META, S("sm"), NULL);
	CHECK_VAL(t, MGR_KV_META, S("sr"), NULL);
	k_abort(t);
	CHECK(pg_sql(uri, "INSERT INTO rpfs_kv VALUES (5, 'sr'::bytea, 'r'::bytea)") == 0);
	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	CHECK_VAL(t, MGR_KV_META, S("sr"), NULL);
	k_abort(t);
	pg_shared_readers(kv);
	/* a new token drops it */
	CHECK(pg_sql(uri, "UPDATE rpfs_lease SET token = 8") == 0);
	CHECK_RC(mgr_kv_set_token(kv, 8), 0);
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_VAL(t, MGR_KV_META, S("sa"), "2");
	CHECK_VAL(t, MGR_KV_META, S("sd"), "z");
	k_abort(t);
	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	CHECK_VAL(t, MGR_KV_META, S("sr"), "r");
	k_abort(t);
	/* a refused commit drops it */
	CHECK(pg_sql(uri, "UPDATE rpfs_lease SET token = 9") == 0);
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_META, S("sb"), S("b"), 0), 0);
	CHECK_RC(k_commit(t), -ESTALE);
	pg_behind(uri, "sa", "3");
	CHECK(pg_sql(uri, "UPDATE rpfs_lease SET token = 8") == 0);
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_VAL(t, MGR_KV_META, S("sa"), "3");
	CHECK_VAL(t, MGR_KV_META, S("sb"), NULL);
	k_abort(t);
	/* no token: no cache */
	CHECK_RC(mgr_kv_set_token(kv, 0), 0);
	pg_behind(uri, "sa", "4");
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_VAL(t, MGR_KV_META, S("sa"), "4");
	k_abort(t);
	pg_behind(uri, "sa", "5");
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_VAL(t, MGR_KV_META, S("sa"), "5");
	k_abort(t);
	mgr_kv_close(kv);
	pg_drop_db(name);
}

/* A lost connection: the next call reconnects (once) and succeeds; if the
 * server refuses the new connection, the call fails with -EIO. */
static void test_pg_reconnect(void)
{
	char name[64], uri[1024], sql[300];
	struct mgr_kv *kv;
	uint64_t mark;
	struct mgr_kv_txn *t;

	fprintf(stderr, "== postgresql: lost connections\n");
	if (pg_fresh_open(name, sizeof(name), uri, sizeof(uri), &kv))
		return;
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_META, S("k"), S("v"), 0), 0);
	{
		uint64_t used, limit;

		/* no fixed size: the database's own disk-full is the limit */
		CHECK_RC(mgr_kv_usage(t, &used, &limit), -EOPNOTSUPP);
	}
	CHECK_RC(k_commit(t), 0);
	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(pid) FROM "
		 "pg_stat_activity WHERE datname = '%s' AND pid <> pg_backend_pid()",
		 name);
	CHECK(pg_sql(pg_admin, sql) == 0);
	usleep(200 * 1000);
	/* a write txn: the read and the commit go through a new connection */
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_VAL(t, MGR_KV_META, S("k"), "v");
	CHECK_RC(k_put(t, MGR_KV_META, S("k2"), S("v2"), 0), 0);
	CHECK_RC(k_commit(t), 0);
	/* a read txn, lost before its first read and again inside */
	CHECK(pg_sql(pg_admin, sql) == 0);
	usleep(200 * 1000);
	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	CHECK_VAL(t, MGR_KV_META, S("k2"), "v2");
	CHECK(pg_sql(pg_admin, sql) == 0);
	usleep(200 * 1000);
	CHECK_VAL(t, MGR_KV_META, S("k"), "v");
	k_abort(t);
	/* lost, and no new connection allowed: -EIO (one log line) */
	snprintf(sql, sizeof(sql), "ALTER DATABASE %s ALLOW_CONNECTIONS false", name);
	CHECK(pg_sql(pg_admin, sql) == 0);
	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(pid) FROM "
		 "pg_stat_activity WHERE datname = '%s' AND pid <> pg_backend_pid()",
		 name);
	CHECK(pg_sql(pg_admin, sql) == 0);
	usleep(200 * 1000);
	CHECK(mgr_kv_unreachable(kv) == 0);
	mark = mgr_kv_reach_mark(kv);
	CHECK(mgr_kv_unreachable_since(kv, mark) == 0);
	CHECK_RC(k_begin(kv, NULL, 0, &t), 0);
	CHECK_RC(k_put(t, MGR_KV_META, S("k3"), S("v3"), 0), 0);
	CHECK_RC(k_commit(t), -EIO);
	CHECK(mgr_kv_unreachable(kv) == 1); /* the mgr answers "retry later" */
	CHECK(mgr_kv_unreachable_since(kv, mark) == 1);
	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	{
		const void *v;
		size_t vl;

		CHECK_RC(k_get(t, MGR_KV_META, S("k"), &v, &vl), -EIO);
	}
	k_abort(t);
	/* connections allowed again: after the pause between tries, the
	 * next call reconnects and the store is reachable again */
	snprintf(sql, sizeof(sql), "ALTER DATABASE %s ALLOW_CONNECTIONS true", name);
	CHECK(pg_sql(pg_admin, sql) == 0);
	usleep(600 * 1000);
	CHECK_RC(k_begin(kv, NULL, 1, &t), 0);
	CHECK_VAL(t, MGR_KV_META, S("k"), "v");
	k_abort(t);
	CHECK(mgr_kv_unreachable(kv) == 0);
	/* the outage is over, but the commit above failed during it: judged
	 * by its mark, it is still "retry later"; a call after is not */
	CHECK(mgr_kv_unreachable_since(kv, mark) == 1);
	CHECK(mgr_kv_unreachable_since(kv, mgr_kv_reach_mark(kv)) == 0);
	mgr_kv_close(kv);
	pg_drop_db(name);
}
#endif

/* A fresh, empty store of be in s. @return 0, -1 */
static int fresh_store(const struct backend *be, struct store *s)
{
	memset(s, 0, sizeof(*s));
	s->be = be;
	s->conf.kind = be->kind;
	switch (be->kind) {
	case MGR_KV_LMDB:
		snprintf(s->dir, sizeof(s->dir), "/tmp/rpfs-kvlmdb.XXXXXX");
		if (!mkdtemp(s->dir))
			return -1;
		s->conf.dir = s->dir;
		s->conf.map_size = 64ull << 20;
		return 0;
	case MGR_KV_POSTGRESQL:
#ifdef RPFS_HAVE_PG
		if (pg_fresh_db(s->dir, sizeof(s->dir), s->uri, sizeof(s->uri)))
			return -1;
		s->conf.uri = s->uri;
		return 0;
#endif
		break;
	}
	return -1;
}

/* Remove the store fresh_store made. */
static void drop_store(struct store *s)
{
	switch (s->be->kind) {
	case MGR_KV_LMDB:
		nftw(s->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
		break;
	case MGR_KV_POSTGRESQL:
#ifdef RPFS_HAVE_PG
		pg_drop_db(s->dir);
#endif
		break;
	}
}

int main(int argc, char **argv)
{
	size_t nbe = sizeof(backends) / sizeof(backends[0]);

	log_init("test_mgr_kv", LOG_INFO);
#ifdef RPFS_HAVE_PG
	if (pg_env_start(argc > 1 ? argv[1] : NULL)) {
		fprintf(stderr, "no PostgreSQL to test on\n");
		return 1;
	}
#endif
	for (size_t i = 0; i < nbe; i++)
		run_contract(&backends[i]);
#ifdef RPFS_HAVE_PG
	test_pg_open_errors();
	test_pg_commit_faults();
	test_pg_fence();
	test_pg_reconnect();
	test_pg_shared_cache();
#endif
	if (nbe == 0) {
		fprintf(stderr, "no backend built\n");
		return 1;
	}
	fprintf(stderr, "%d failures\n", failures);
	return failures != 0;
}
