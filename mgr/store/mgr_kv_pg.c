/*
 * mgr_kv_pg.c - the PostgreSQL backend of the namespace store (mgr_kv.h),
 * on libpq.
 *
 * Every table of mgr_kv.h is the rows of one SQL table with its number:
 *   rpfs_kv(tbl smallint, k bytea, v bytea, primary key (tbl, k))
 * bytea compares as memcmp, then length: the order mgr_kv.h wants. Beside
 * it rpfs_schema(version) (one row), rpfs_lease (one row: the leadership
 * of several mgrs, taken by mgr_lead.c) and rpfs_fence(token), which fails
 * a transaction whose token is no longer the lease's. See
 * mgr/store/README.md "PostgreSQL store" and mgr/ha/README.md "Several
 * mgrs, one active".
 *
 * Round trips. A top-level write transaction talks to the server only to
 * read: its writes go to an ordered buffer (point entries and deleted
 * prefixes; a child transaction has its own buffer over its parent's), and
 * the rows it read stay in a read cache, so a key is fetched at most once.
 * Commit sends the whole buffer as one pipeline (range deletes, one DELETE
 * and one INSERT .. ON CONFLICT over unnest() arrays) ending in one Sync:
 * one implicit transaction, one round trip, answered after the server's
 * COMMIT. A read transaction runs in a REPEATABLE READ snapshot whose BEGIN
 * rides with its first query, and whose ROLLBACK is sent without waiting
 * (its answer is read by the connection's next user).
 *
 * Connections: a pool of idle ones under pool_mu; a top-level transaction
 * takes one for its life (children share their root's), so each thread
 * using the store has its own while it uses it. Every statement is prepared
 * once per connection. Write transactions take turns on write_mu.
 *
 * Values returned by get and scan stay valid until the transaction ends
 * (they live in the cache, the buffer or a kept result page), except that
 * a write replaces a buffered value (mgr_kv.h's rule).
 */
#include <endian.h>
#include <errno.h>
#include <libpq-fe.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "mgr_kv_int.h"

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

#define PG_SCHEMA_VERSION 2 /* 2: rpfs_fence() */
#define PG_RETRIES 5        /* commit retries after 40001 / 40P01 */
#define PG_PAGE_MIN 32      /* scan page rows, doubling per page ... */
#define PG_PAGE_MAX 1024    /* ... up to this */
#define PG_SHOW_MAX 512     /* the URI as messages show it */

/* PostgreSQL type OIDs (pg_type.dat) of the binary parameters. */
#define OID_INT2 21
#define OID_INT8 20
#define OID_BYTEA 17
#define OID_INT2ARR 1005
#define OID_BYTEAARR 1001

/* ------------------------------------------------------------------ */
/* Statements                                                          */

enum pg_stmt {
	ST_GET, ST_SCAN, ST_SCAN_OPEN, ST_COUNT, ST_UPSERT, ST_DELKEYS,
	ST_DELRANGE, ST_DELRANGE_OPEN, ST_BEGIN_RO, ST_ROLLBACK, ST_FENCE,
	ST_NSTMT
};

static const struct {
	const char *name;
	const char *sql;
	int nparams;
	Oid types[4];
} pg_stmts[ST_NSTMT] = {
	[ST_GET] = { "rpfs_get",
		"SELECT v FROM rpfs_kv WHERE tbl = $1 AND k = $2",
		2, { OID_INT2, OID_BYTEA } },
	[ST_SCAN] = { "rpfs_scan",
		"SELECT k, v FROM rpfs_kv WHERE tbl = $1 AND k >= $2 AND k < $3 "
		"ORDER BY k LIMIT $4",
		4, { OID_INT2, OID_BYTEA, OID_BYTEA, OID_INT8 } },
	[ST_SCAN_OPEN] = { "rpfs_scan_open",
		"SELECT k, v FROM rpfs_kv WHERE tbl = $1 AND k >= $2 "
		"ORDER BY k LIMIT $3",
		3, { OID_INT2, OID_BYTEA, OID_INT8 } },
	[ST_COUNT] = { "rpfs_count",
		"SELECT count(*) FROM rpfs_kv WHERE tbl = $1 AND NOT (k = ANY ($2)) "
		"AND NOT EXISTS (SELECT 1 FROM unnest($3::bytea[]) AS p(x) "
		"WHERE substr(k, 1, length(p.x)) = p.x)",
		3, { OID_INT2, OID_BYTEAARR, OID_BYTEAARR } },
	[ST_UPSERT] = { "rpfs_upsert",
		"INSERT INTO rpfs_kv (tbl, k, v) SELECT * FROM "
		"unnest($1::smallint[], $2::bytea[], $3::bytea[]) "
		"ON CONFLICT (tbl, k) DO UPDATE SET v = excluded.v",
		3, { OID_INT2ARR, OID_BYTEAARR, OID_BYTEAARR } },
	[ST_DELKEYS] = { "rpfs_delkeys",
		"DELETE FROM rpfs_kv WHERE (tbl, k) IN "
		"(SELECT * FROM unnest($1::smallint[], $2::bytea[]))",
		2, { OID_INT2ARR, OID_BYTEAARR } },
	[ST_DELRANGE] = { "rpfs_delrange",
		"DELETE FROM rpfs_kv WHERE tbl = $1 AND k >= $2 AND k < $3",
		3, { OID_INT2, OID_BYTEA, OID_BYTEA } },
	[ST_DELRANGE_OPEN] = { "rpfs_delrange_open",
		"DELETE FROM rpfs_kv WHERE tbl = $1 AND k >= $2",
		2, { OID_INT2, OID_BYTEA } },
	[ST_BEGIN_RO] = { "rpfs_begin_ro",
		"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, { 0 } },
	[ST_ROLLBACK] = { "rpfs_rollback", "ROLLBACK", 0, { 0 } },
	[ST_FENCE] = { "rpfs_fence", "SELECT rpfs_fence($1)", 1, { OID_INT8 } },
};

/* The SQLSTATE rpfs_fence raises when the token is not the lease's. */
#define PG_STALE_STATE "RPF01"

/* The schema, created by rpfs mkfs (create = 1) in one transaction. */
static const char pg_schema_sql[] =
	"BEGIN;"
	"CREATE TABLE IF NOT EXISTS rpfs_schema (version int NOT NULL);"
	"CREATE TABLE IF NOT EXISTS rpfs_kv (tbl smallint NOT NULL, "
	"k bytea NOT NULL, v bytea NOT NULL, PRIMARY KEY (tbl, k));"
	"CREATE TABLE IF NOT EXISTS rpfs_lease (id int PRIMARY KEY, "
	"token bigint NOT NULL DEFAULT 0, holder text, expires timestamptz);"
	/* a commit's first statement: share-lock the lease row (a new
	 * holder's UPDATE waits for the commits of the old one to end) and
	 * fail the transaction unless the token is still the caller's */
	"CREATE OR REPLACE FUNCTION rpfs_fence(t bigint) RETURNS void "
	"LANGUAGE plpgsql AS $$ DECLARE cur bigint; BEGIN "
	"SELECT token INTO cur FROM rpfs_lease WHERE id = 1 FOR SHARE; "
	"IF cur IS DISTINCT FROM t THEN RAISE EXCEPTION "
	"'rpfs: leadership token % is not the lease''s (%): another mgr is "
	"active', t, cur USING ERRCODE = '" PG_STALE_STATE "'; END IF; END $$;"
	"INSERT INTO rpfs_schema (version) SELECT 2 "
	"WHERE NOT EXISTS (SELECT 1 FROM rpfs_schema);"
	"INSERT INTO rpfs_lease (id) VALUES (1) ON CONFLICT DO NOTHING;"
	"COMMIT";

/* ------------------------------------------------------------------ */
/* Types                                                               */

/* A buffered write, a cached read or a deleted prefix. */
enum pg_state {
	PG_PUT,  /* buffer: the key holds val; cache: the row exists */
	PG_DEL,  /* buffer: deleted (point or prefix); cache: no such row */
};

struct pg_ent {
	uint8_t tbl;
	uint8_t state;        /* enum pg_state */
	size_t klen, vlen;
	unsigned char *val;   /* data + klen */
	unsigned char data[]; /* key, then value */
};

/* Entries sorted by (tbl, key): O(log n) lookup, O(n) insert (a write
 * transaction holds a few rows per op). */
struct pg_map {
	struct pg_ent **v;
	size_t n, cap;
};

/* Entries hashed by (tbl, key), open addressing: the read cache. */
struct pg_cache {
	struct pg_ent **slot;
	size_t n, cap; /* cap: 0 or a power of two */
};

/* A connection. Owned by the pool (pool_mu) while idle, else by the
 * transaction that took it (its thread). */
struct pg_conn {
	PGconn *pc;
	struct pg_conn *next; /* pool_mu: the idle list */
	int pending;          /* owner: syncs whose answers are still unread */
	int broken;           /* owner: reset before the next use */
};

#define PG_UNREACH ": cannot reach the server: " /* pg_connect's words */

struct pg_kv {
	struct mgr_kv base;
	char *uri;                  /* as configured; immutable */
	char show[PG_SHOW_MAX];     /* the URI without the password */
	pthread_mutex_t pool_mu;
	struct pg_conn *idle;       /* pool_mu */
	pthread_mutex_t write_mu;   /* held by the top-level write txn */
	_Atomic int64_t token;      /* the leadership token commits are fenced
				     * with (0: none); set by mgr_kv_set_token */
	_Atomic uint64_t reach;     /* bit 0: the server is out of reach (no
				     * connection could be kept or made);
				     * above it: outages so far (the mark of
				     * mgr_kv_reach_mark) */
	_Atomic uint64_t next_try;  /* while down: no connect before this
				     * (monotonic ms) */
	/* The rows as this process's txns committed or read them, while it
	 * holds a leadership token ("Shared row cache" above pg_shared_ok).
	 * shared_mu, all three. */
	pthread_mutex_t shared_mu;
	struct pg_cache shared;
	size_t shared_bytes;
	int64_t shared_token;       /* the token it was filled under */
	pthread_rwlock_t commit_rw; /* write: a root write txn's commit, from
				     * its send to the shared cache's update;
				     * read: a read txn that uses the shared
				     * cache, for its life (writer-preferring) */
};

/* A transaction. Used only by the thread that began it. */
struct pg_txn {
	struct mgr_kv_txn base;
	struct pg_txn *up;       /* the parent, NULL: top-level */
	struct pg_txn *root;     /* the top-level one (self if top-level) */
	struct pg_txn *child;    /* the active child, NULL if none */
	struct pg_map pts;       /* this layer's puts and point deletes */
	struct pg_map rng;       /* this layer's deleted prefixes (PG_DEL);
				  * none is a prefix of another */
	/* root only: */
	struct pg_conn *conn;
	struct pg_cache cache;   /* rows read from the server */
	PGresult **keep;         /* scan pages whose values were handed out */
	size_t nkeep, capkeep;
	int snap;                /* rdonly: BEGIN sent on conn */
	int shared_rd;           /* rdonly: holds commit_rw to read, and so
				  * may use the shared cache */
};

/* One statement of a pipeline, with its binary parameters. */
struct pg_q {
	enum pg_stmt st;
	const char *vals[4];
	int lens[4];
	int fmts[4];
};

/* A growing byte buffer (binary array parameters). */
struct pg_buf {
	unsigned char *p;
	size_t n, cap;
	size_t count_at; /* offset of the array's element count */
	uint32_t count;
};

static struct pg_kv *kv_of(struct mgr_kv *kv)
{
	return container_of(kv, struct pg_kv, base);
}

static struct pg_txn *txn_of(struct mgr_kv_txn *t)
{
	return container_of(t, struct pg_txn, base);
}

/* ------------------------------------------------------------------ */
/* Entries, the sorted map, the cache                                  */

/* Order of (tbl, key): unsigned bytes, then length. */
static int key_cmp(int ta, const void *ka, size_t la, int tb, const void *kb,
		   size_t lb)
{
	size_t n = la < lb ? la : lb;
	int c;

	if (ta != tb)
		return ta < tb ? -1 : 1;
	c = n ? memcmp(ka, kb, n) : 0;
	if (c)
		return c;
	return la < lb ? -1 : la > lb;
}

/* Whether key starts with prefix. */
static int has_prefix(const void *key, size_t klen, const void *p, size_t plen)
{
	return klen >= plen && (plen == 0 || !memcmp(key, p, plen));
}

/* A new entry holding copies of key and val. @return it, NULL no memory */
static struct pg_ent *ent_new(int tbl, const void *key, size_t klen,
			      const void *val, size_t vlen, int state)
{
	struct pg_ent *e = malloc(sizeof(*e) + klen + vlen + 1);

	if (!e)
		return NULL;
	e->tbl = (uint8_t)tbl;
	e->state = (uint8_t)state;
	e->klen = klen;
	e->vlen = vlen;
	e->val = e->data + klen;
	if (klen)
		memcpy(e->data, key, klen);
	if (vlen)
		memcpy(e->val, val, vlen);
	return e;
}

/* Index of the first entry >= (tbl, key). Cost: O(log n). */
static size_t map_lower(const struct pg_map *m, int tbl, const void *key,
			size_t klen)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct pg_ent *e = m->v[mid];

		if (key_cmp(e->tbl, e->data, e->klen, tbl, key, klen) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The entry of (tbl, key), or NULL. */
static struct pg_ent *map_find(const struct pg_map *m, int tbl,
			       const void *key, size_t klen)
{
	size_t i = map_lower(m, tbl, key, klen);
	struct pg_ent *e = i < m->n ? m->v[i] : NULL;

	if (e && !key_cmp(e->tbl, e->data, e->klen, tbl, key, klen))
		return e;
	return NULL;
}

/* Insert e, replacing (and freeing) an entry of the same key. Cost: O(n)
 * to move the tail. @return 0, -ENOMEM (e is not taken) */
static int map_set(struct pg_map *m, struct pg_ent *e)
{
	size_t i = map_lower(m, e->tbl, e->data, e->klen);

	if (i < m->n && !key_cmp(m->v[i]->tbl, m->v[i]->data, m->v[i]->klen,
				 e->tbl, e->data, e->klen)) {
		free(m->v[i]);
		m->v[i] = e;
		return 0;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16;
		struct pg_ent **v = realloc(m->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		m->v = v;
		m->cap = cap;
	}
	memmove(m->v + i + 1, m->v + i, (m->n - i) * sizeof(*m->v));
	m->v[i] = e;
	m->n++;
	return 0;
}

/* Remove and free the entries of tbl whose key starts with prefix. */
static void map_del_prefix(struct pg_map *m, int tbl, const void *p,
			   size_t plen)
{
	size_t i = map_lower(m, tbl, p, plen), j = i;

	while (j < m->n && m->v[j]->tbl == tbl &&
	       has_prefix(m->v[j]->data, m->v[j]->klen, p, plen))
		free(m->v[j++]);
	if (j == i)
		return;
	memmove(m->v + i, m->v + j, (m->n - j) * sizeof(*m->v));
	m->n -= j - i;
}

/* Free every entry and the array. */
static void map_free(struct pg_map *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i]);
	free(m->v);
	memset(m, 0, sizeof(*m));
}

/* Whether a deleted prefix of rng covers (tbl, key): the only candidate is
 * the greatest prefix <= key, as no prefix in rng is a prefix of another. */
static int rng_covers(const struct pg_map *rng, int tbl, const void *key,
		      size_t klen)
{
	size_t i = map_lower(rng, tbl, key, klen);
	const struct pg_ent *e;

	if (i < rng->n && !key_cmp(rng->v[i]->tbl, rng->v[i]->data,
				   rng->v[i]->klen, tbl, key, klen))
		return 1;
	if (i == 0)
		return 0;
	e = rng->v[i - 1];
	return e->tbl == tbl && has_prefix(key, klen, e->data, e->klen);
}

/* FNV-1a of (tbl, key). */
static uint64_t key_hash(int tbl, const void *key, size_t klen)
{
	const unsigned char *p = key;
	uint64_t h = 1469598103934665603ull ^ (uint64_t)tbl;

	for (size_t i = 0; i < klen; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* The cached entry of (tbl, key), or NULL. Cost: O(1). */
static struct pg_ent *cache_find(const struct pg_cache *c, int tbl,
				 const void *key, size_t klen)
{
	size_t i;

	if (!c->cap)
		return NULL;
	for (i = key_hash(tbl, key, klen) & (c->cap - 1); c->slot[i];
	     i = (i + 1) & (c->cap - 1)) {
		const struct pg_ent *e = c->slot[i];

		if (!key_cmp(e->tbl, e->data, e->klen, tbl, key, klen))
			return c->slot[i];
	}
	return NULL;
}

/* Put e (a key not cached yet) into the cache, growing it at half full.
 * @return 0, -ENOMEM (e is not taken) */
static int cache_add(struct pg_cache *c, struct pg_ent *e)
{
	size_t i;

	if ((c->n + 1) * 2 > c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct pg_ent **s = calloc(cap, sizeof(*s));

		if (!s)
			return -ENOMEM;
		for (size_t j = 0; j < c->cap; j++) {
			struct pg_ent *o = c->slot[j];

			if (!o)
				continue;
			for (i = key_hash(o->tbl, o->data, o->klen) & (cap - 1);
			     s[i]; i = (i + 1) & (cap - 1))
				;
			s[i] = o;
		}
		free(c->slot);
		c->slot = s;
		c->cap = cap;
	}
	for (i = key_hash(e->tbl, e->data, e->klen) & (c->cap - 1); c->slot[i];
	     i = (i + 1) & (c->cap - 1))
		;
	c->slot[i] = e;
	c->n++;
	return 0;
}

/* Put e into the cache, replacing (and freeing) an entry of the same key.
 * @return the bytes of the entry replaced (0 if none), -ENOMEM (e is
 * not taken) */
static ssize_t cache_put(struct pg_cache *c, struct pg_ent *e)
{
	if (c->cap)
		for (size_t i = key_hash(e->tbl, e->data, e->klen) & (c->cap - 1);
		     c->slot[i]; i = (i + 1) & (c->cap - 1)) {
			struct pg_ent *o = c->slot[i];
			ssize_t n;

			if (key_cmp(o->tbl, o->data, o->klen, e->tbl, e->data,
				    e->klen))
				continue;
			n = (ssize_t)(sizeof(*o) + o->klen + o->vlen);
			free(o);
			c->slot[i] = e;
			return n;
		}
	return cache_add(c, e) ? -ENOMEM : 0;
}

/* Mark every entry under deleted prefix r (its tbl and key) as no row:
 * the server has none now. Cost: a walk of every slot. */
static void cache_del_prefix(struct pg_cache *c, const struct pg_ent *r)
{
	for (size_t i = 0; i < c->cap; i++) {
		struct pg_ent *e = c->slot[i];

		if (e && e->tbl == r->tbl &&
		    has_prefix(e->data, e->klen, r->data, r->klen))
			e->state = PG_DEL;
	}
}

/* Free every cached entry and the table. */
static void cache_free(struct pg_cache *c)
{
	for (size_t i = 0; i < c->cap; i++)
		free(c->slot[i]);
	free(c->slot);
	memset(c, 0, sizeof(*c));
}

/* ------------------------------------------------------------------ */
/* Binary parameters                                                   */

/* Append n bytes. @return 0, -ENOMEM */
static int buf_put(struct pg_buf *b, const void *d, size_t n)
{
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		unsigned char *p;

		while (cap < b->n + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->n, d, n);
	b->n += n;
	return 0;
}

/* Append a big-endian int32 (PostgreSQL's binary wire format). */
static int buf_u32(struct pg_buf *b, uint32_t v)
{
	v = htobe32(v);
	return buf_put(b, &v, 4);
}

/* Start a one-dimensional binary array of elemtype (array_recv's format:
 * ndim, has-nulls, element type, then per dimension size and lower bound). */
static int arr_start(struct pg_buf *b, Oid elemtype)
{
	b->n = 0;
	b->count = 0;
	if (buf_u32(b, 1) || buf_u32(b, 0) || buf_u32(b, elemtype))
		return -ENOMEM;
	b->count_at = b->n;
	return buf_u32(b, 0) || buf_u32(b, 1) ? -ENOMEM : 0;
}

/* Append one element (length, bytes). */
static int arr_add(struct pg_buf *b, const void *d, size_t n)
{
	if (n > INT32_MAX || buf_u32(b, (uint32_t)n) || buf_put(b, d, n))
		return -ENOMEM;
	b->count++;
	return 0;
}

/* Finish: patch the count in, or make it the empty array (ndim 0). */
static void arr_end(struct pg_buf *b)
{
	uint32_t be = htobe32(b->count);

	if (b->count == 0) {
		memset(b->p, 0, 4);
		b->n = 12;
		return;
	}
	memcpy(b->p + b->count_at, &be, 4);
}

/* Set parameter i of q to the bytes (binary format). */
static void q_param(struct pg_q *q, int i, const void *d, size_t n)
{
	q->vals[i] = n ? d : "";
	q->lens[i] = (int)n;
	q->fmts[i] = 1;
}

/* The smallest key greater than every key starting with p: p without its
 * trailing 0xff bytes, last byte plus one. @return its length, 0 if there
 * is none (p empty or all 0xff) */
static size_t prefix_next(const void *p, size_t plen, unsigned char *out)
{
	const unsigned char *b = p;

	while (plen && b[plen - 1] == 0xff)
		plen--;
	if (!plen)
		return 0;
	memcpy(out, b, plen);
	out[plen - 1]++;
	return plen;
}

/* ------------------------------------------------------------------ */
/* Connections                                                         */

/* libpq notices (CREATE TABLE IF NOT EXISTS's "skipping") go to debug. */
static void pg_notice(void *arg, const char *message)
{
	log_debug("postgresql: %.*s", (int)strcspn(message, "\n"), message);
}

/* Copy libpq's (possibly multi-line) message into out as one line. */
static void one_line(const char *in, char *out, size_t cap)
{
	size_t n = 0;
	int sep = 0;

	for (; *in && n + 4 < cap; in++) {
		if (*in == '\n' || *in == '\r' || *in == '\t') {
			sep = 1;
			continue;
		}
		if (sep && n) {
			out[n++] = ';';
			out[n++] = ' ';
		}
		sep = 0;
		out[n++] = *in;
	}
	out[n] = '\0';
}

/* Map a failed statement's SQLSTATE to -errno: -EAGAIN conflict (retry in
 * a new txn), -ENOTCONN the connection is gone or reaches a server that
 * cannot write (a standby after a failover: reconnect), -ENOSPC disk full
 * or a limit, -EACCES privileges, else -EIO. */
static int pg_errno(PGconn *pc, const PGresult *r)
{
	const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	if (PQstatus(pc) != CONNECTION_OK || !st)
		return -ENOTCONN;
	if (!strcmp(st, "40001") || !strcmp(st, "40P01"))
		return -EAGAIN;
	if (!strcmp(st, PG_STALE_STATE))
		return -ESTALE;
	if (!strncmp(st, "08", 2) || !strncmp(st, "57P", 3) ||
	    !strcmp(st, "25006"))
		return -ENOTCONN;
	if (!strcmp(st, "53100") || !strncmp(st, "54", 2))
		return -ENOSPC;
	if (!strcmp(st, "42501"))
		return -EACCES;
	return -EIO;
}

/* Append len bytes of s to out[n..cap) (truncating); @return the new n */
static size_t show_app(char *out, size_t cap, size_t n, const char *s,
		       size_t len)
{
	if (n + 1 >= cap)
		return n;
	if (len > cap - n - 1)
		len = cap - n - 1;
	memcpy(out + n, s, len);
	out[n + len] = '\0';
	return n + len;
}

/* A key=value conninfo as messages show it: rebuilt from its parsed
 * options, without password and sslpassword. */
static void conninfo_show(const char *uri, char *out, size_t cap)
{
	PQconninfoOption *o = PQconninfoParse(uri, NULL);
	size_t n = 0;

	out[0] = '\0';
	if (!o) {
		snprintf(out, cap, "(an unparseable conninfo)");
		return;
	}
	for (PQconninfoOption *p = o; p->keyword; p++) {
		if (!p->val || strstr(p->keyword, "password"))
			continue;
		if (n)
			n = show_app(out, cap, n, " ", 1);
		n = show_app(out, cap, n, p->keyword, strlen(p->keyword));
		n = show_app(out, cap, n, "=", 1);
		n = show_app(out, cap, n, p->val, strlen(p->val));
	}
	PQconninfoFree(o);
}

/*
 * The URI as messages show it: a postgres[ql]:// URI without the password
 * of its user part and without its password= and sslpassword= parameters;
 * a key=value conninfo as conninfo_show makes it.
 */
static void uri_show(const char *uri, char *out, size_t cap)
{
	const char *s = strstr(uri, "://"), *auth, *end, *at = NULL, *colon, *q;
	size_t n = 0;
	char sep = '?';

	out[0] = '\0';
	if (!s || (strncmp(uri, "postgresql://", 13) && strncmp(uri, "postgres://", 11))) {
		conninfo_show(uri, out, cap);
		return;
	}
	auth = s + 3;
	end = auth + strcspn(auth, "/?");
	for (const char *p = auth; p < end; p++)
		if (*p == '@')
			at = p;
	colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
	if (colon) {
		n = show_app(out, cap, n, uri, (size_t)(colon - uri));
		n = show_app(out, cap, n, at, (size_t)(end - at));
	} else {
		n = show_app(out, cap, n, uri, (size_t)(end - uri));
	}
	q = end + strcspn(end, "?");
	n = show_app(out, cap, n, end, (size_t)(q - end));
	while (*q) {
		const char *p = q + 1;
		size_t len = strcspn(p, "&");

		const char *eq = memchr(p, '=', len);
		size_t kl = eq ? (size_t)(eq - p) : len;

		if (!memmem(p, kl, "password", 8)) {
			n = show_app(out, cap, n, &sep, 1);
			n = show_app(out, cap, n, p, len);
			sep = '&';
		}
		q = p + len;
	}
}

/*
 * Classify a failed connection attempt: one line in msg naming store_uri
 * and what is wrong. libpq reports these in text only, so the message is
 * matched (the server's words in C/English; others fall back to
 * -EHOSTUNREACH with libpq's own text).
 */
static int pg_connect_err(struct pg_kv *kv, PGconn *pc, char *msg, size_t cap)
{
	char why[400];
	const char *e = PQerrorMessage(pc);

	one_line(e, why, sizeof(why));
	if (PQconnectionNeedsPassword(pc)) {
		snprintf(msg, cap, "store_uri %s: authentication failed: the server "
			 "wants a password and none is given", kv->show);
		return -EACCES;
	}
	if (strstr(e, "authentication failed") || strstr(e, "no pg_hba.conf entry") ||
	    (strstr(e, "role \"") && strstr(e, "does not exist"))) {
		snprintf(msg, cap, "store_uri %s: authentication failed: %s",
			 kv->show, why);
		return -EACCES;
	}
	if (strstr(e, "database \"") && strstr(e, "does not exist")) {
		snprintf(msg, cap, "store_uri %s: the database does not exist: %s",
			 kv->show, why);
		return -ENOENT;
	}
	snprintf(msg, cap, "store_uri %s" PG_UNREACH "%s", kv->show, why);
	return -EHOSTUNREACH;
}

/* Prepare every statement on pc in one pipeline and leave pc in pipeline
 * mode. Cost: one round trip. @return 0, -EIO (msg says why) */
static int pg_prepare(struct pg_kv *kv, PGconn *pc, char *msg, size_t cap)
{
	PGresult *r;
	int rc = 0, bad = 0;
	char why[300];

	if (!PQenterPipelineMode(pc))
		goto out_err;
	for (int i = 0; i < ST_NSTMT; i++)
		if (!PQsendPrepare(pc, pg_stmts[i].name, pg_stmts[i].sql,
				   pg_stmts[i].nparams, pg_stmts[i].types))
			goto out_err;
	if (!PQpipelineSync(pc))
		goto out_err;
	for (int i = 0; i < ST_NSTMT; i++) {
		r = PQgetResult(pc);
		if (!r)
			goto out_err;
		if (PQresultStatus(r) != PGRES_COMMAND_OK && !bad) {
			one_line(PQresultErrorMessage(r), why, sizeof(why));
			snprintf(msg, cap, "store_uri %s: cannot prepare %s: %s",
				 kv->show, pg_stmts[i].name, why);
			bad = 1;
		}
		PQclear(r);
		while ((r = PQgetResult(pc)))
			PQclear(r);
	}
	r = PQgetResult(pc);
	if (!r || PQresultStatus(r) != PGRES_PIPELINE_SYNC)
		rc = -EIO;
	PQclear(r);
	if (bad || rc)
		goto out_fail;
	return 0;

out_err:
	one_line(PQerrorMessage(pc), why, sizeof(why));
	snprintf(msg, cap, "store_uri %s: cannot prepare the statements: %s",
		 kv->show, why);
out_fail:
	return -EIO;
}

/*
 * Connect to the store: libpq's defaults for a mgr come first, so that the
 * URI's own settings win: a connect timeout, keepalives (an idle
 * connection to a lost host fails in about 11 s), tcp_user_timeout (so
 * does a call whose data the host stopped acknowledging, in 10 s, instead
 * of TCP's minutes of retries) and a read-write session (a multi-host URI
 * finds the primary).
 * @return 0, or pg_connect_err's error (msg set)
 */
static int pg_connect(struct pg_kv *kv, PGconn **out, char *msg, size_t cap)
{
	static const char *const kw[] = {
		"connect_timeout", "keepalives_idle", "keepalives_interval",
		"keepalives_count", "tcp_user_timeout", "target_session_attrs",
		"fallback_application_name", "dbname", NULL,
	};
	const char *vals[] = { "5", "5", "2", "3", "10000", "read-write", "rpfs",
			       kv->uri, NULL };
	PGconn *pc = PQconnectdbParams(kw, vals, 1);
	int rc;

	if (!pc) {
		snprintf(msg, cap, "store_uri %s: out of memory", kv->show);
		return -ENOMEM;
	}
	if (PQstatus(pc) != CONNECTION_OK) {
		rc = pg_connect_err(kv, pc, msg, cap);
		PQfinish(pc);
		return rc;
	}
	PQsetNoticeProcessor(pc, pg_notice, NULL);
	*out = pc;
	return 0;
}

/* Create the schema (create) and check its version.
 * @return 0, -ENOENT no schema, -EPROTO other version, -EACCES, -EIO */
static int pg_schema(struct pg_kv *kv, PGconn *pc, int create, char *msg,
		     size_t cap)
{
	char why[400];
	PGresult *r;
	int rc = 0;

	if (create) {
		r = PQexec(pc, pg_schema_sql);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			one_line(PQresultErrorMessage(r), why, sizeof(why));
			rc = pg_errno(pc, r) == -EACCES ? -EACCES : -EIO;
			snprintf(msg, cap, "store_uri %s: cannot create the schema: %s",
				 kv->show, why);
			PQclear(r);
			PQclear(PQexec(pc, "ROLLBACK"));
			return rc;
		}
		PQclear(r);
	}
	r = PQexec(pc, "SELECT version FROM rpfs_schema");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);

		one_line(PQresultErrorMessage(r), why, sizeof(why));
		if (st && !strcmp(st, "42P01")) {
			snprintf(msg, cap, "store_uri %s: the database holds no rpfs "
				 "schema (run rpfs mkfs)", kv->show);
			rc = -ENOENT;
		} else {
			snprintf(msg, cap, "store_uri %s: cannot read the schema "
				 "version: %s", kv->show, why);
			rc = -EIO;
		}
	} else if (PQntuples(r) != 1) {
		snprintf(msg, cap, "store_uri %s: table rpfs_schema holds %d rows, "
			 "expected 1", kv->show, PQntuples(r));
		rc = -EPROTO;
	} else if (atoi(PQgetvalue(r, 0, 0)) != PG_SCHEMA_VERSION) {
		snprintf(msg, cap, "store_uri %s: schema version %s, this rpfs-mgr "
			 "needs %d", kv->show, PQgetvalue(r, 0, 0), PG_SCHEMA_VERSION);
		rc = -EPROTO;
	}
	PQclear(r);
	return rc;
}

/* A ready connection (pipeline mode, statements prepared); the store's
 * first one (first) also creates (create) and checks the schema.
 * @return 0, -ENOMEM, pg_connect's or pg_schema's errors (msg set) */
static int conn_new(struct pg_kv *kv, int first, int create,
		    struct pg_conn **out, char *msg, size_t cap)
{
	struct pg_conn *c = calloc(1, sizeof(*c));
	int rc;

	if (!c) {
		snprintf(msg, cap, "store_uri %s: out of memory", kv->show);
		return -ENOMEM;
	}
	rc = pg_connect(kv, &c->pc, msg, cap);
	if (rc)
		goto out_free;
	if (first)
		rc = pg_schema(kv, c->pc, create, msg, cap);
	if (!rc)
		rc = pg_prepare(kv, c->pc, msg, cap);
	if (rc)
		goto out_finish;
	*out = c;
	return 0;

out_finish:
	PQfinish(c->pc);
out_free:
	free(c);
	return rc;
}

static void conn_free(struct pg_conn *c)
{
	if (!c)
		return;
	PQfinish(c->pc);
	free(c);
}

#define PG_DOWN_RETRY_MS 500 /* while down, one connect per this */

/* The monotonic clock in ms. */
static uint64_t pg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* While the server is out of reach, is it too soon to try a connection
 * again? (Each try may wait out a connect timeout, on the mgr's loop.) */
static int pg_too_soon(struct pg_kv *kv)
{
	return (kv->reach & 1) && pg_now_ms() < kv->next_try;
}

/* The server could not be reached (why: libpq's words): say so once per
 * outage, as a warning (a failover is an expected event; the mgr answers
 * "retry later" meanwhile), and hold off the next try. */
static void pg_mark_down(struct pg_kv *kv, const char *why)
{
	uint64_t r = kv->reach;

	kv->next_try = pg_now_ms() + PG_DOWN_RETRY_MS;
	/* a new outage: set the bit and count it, in one step */
	while (!(r & 1) && !atomic_compare_exchange_weak(&kv->reach, &r, r + 3))
		;
	if (!(r & 1))
		log_warn("store_uri %s: the server is out of reach: %s; requests "
			 "are answered \"retry later\" until it is back",
			 kv->show, why);
	else
		log_debug("store_uri %s: still out of reach: %s", kv->show, why);
}

/* A connection is good again: say so if the server was out of reach. */
static void pg_mark_up(struct pg_kv *kv)
{
	if ((kv->reach & 1) && (atomic_fetch_and(&kv->reach, ~(uint64_t)1) & 1))
		log_notice("store_uri %s: the server is back", kv->show);
}

/* Reconnect c (PQreset: the URI again, so a multi-host URI finds the new
 * primary) and prepare again. Cost: a connection setup (none while the
 * server is out of reach and the last try was less than
 * PG_DOWN_RETRY_MS ago).
 * @return 0, -EIO (the server is out of reach: pg_mark_down; or logged) */
static int conn_reset(struct pg_kv *kv, struct pg_conn *c)
{
	char msg[600], why[400];

	c->pending = 0;
	c->broken = 1;
	if (pg_too_soon(kv))
		return -EIO;
	PQreset(c->pc);
	if (PQstatus(c->pc) != CONNECTION_OK) {
		one_line(PQerrorMessage(c->pc), why, sizeof(why));
		pg_mark_down(kv, why);
		return -EIO;
	}
	PQsetNoticeProcessor(c->pc, pg_notice, NULL);
	if (pg_prepare(kv, c->pc, msg, sizeof(msg))) {
		log_err("%s", msg);
		return -EIO;
	}
	c->broken = 0;
	pg_mark_up(kv);
	log_notice("store_uri %s: reconnected", kv->show);
	return 0;
}

/* Take an idle connection, or make one. @return 0, -ENOMEM, -EIO (logged) */
static int pool_take(struct pg_kv *kv, struct pg_conn **out)
{
	char msg[600];
	int rc;

	pthread_mutex_lock(&kv->pool_mu);
	*out = kv->idle;
	if (*out)
		kv->idle = (*out)->next;
	pthread_mutex_unlock(&kv->pool_mu);
	if (*out)
		return 0;
	if (pg_too_soon(kv))
		return -EIO;
	rc = conn_new(kv, 0, 0, out, msg, sizeof(msg));
	if (rc == -EHOSTUNREACH) {
		const char *why = strstr(msg, PG_UNREACH);

		pg_mark_down(kv, why ? why + strlen(PG_UNREACH) : msg);
	} else if (rc)
		log_err("%s", msg);
	else
		pg_mark_up(kv);
	return rc == 0 || rc == -ENOMEM ? rc : -EIO;
}

/* Give c back to the pool. */
static void pool_put(struct pg_kv *kv, struct pg_conn *c)
{
	pthread_mutex_lock(&kv->pool_mu);
	c->next = kv->idle;
	kv->idle = c;
	pthread_mutex_unlock(&kv->pool_mu);
}

/* Read the answers of syncs sent without waiting (a read txn's ROLLBACK).
 * @return 0, -ENOTCONN */
static int conn_drain(struct pg_conn *c)
{
	int nulls = 0;

	while (c->pending) {
		PGresult *r = PQgetResult(c->pc);

		if (!r) {
			if (PQstatus(c->pc) != CONNECTION_OK || ++nulls > 2)
				return -ENOTCONN;
			continue;
		}
		nulls = 0;
		if (PQresultStatus(r) == PGRES_PIPELINE_SYNC)
			c->pending--;
		PQclear(r);
	}
	return 0;
}

/*
 * Read the answer of one statement of a pipeline: its rows into *res (if
 * res), its error into *rc and why (if it is the first).
 * @return 0, -ENOTCONN no answer (the connection is gone)
 */
static int conn_result(PGconn *pc, PGresult **res, int *rc, char *why,
		       size_t whycap)
{
	PGresult *r = PQgetResult(pc), *x;
	ExecStatusType s;

	if (!r)
		return -ENOTCONN;
	s = PQresultStatus(r);
	if (s == PGRES_FATAL_ERROR && !*rc) {
		*rc = pg_errno(pc, r);
		one_line(PQresultErrorMessage(r), why, whycap);
	} else if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK &&
		   s != PGRES_PIPELINE_ABORTED && s != PGRES_FATAL_ERROR && !*rc) {
		*rc = -EIO;
		snprintf(why, whycap, "unexpected answer %s", PQresStatus(s));
	}
	if (res && s == PGRES_TUPLES_OK)
		*res = r;
	else
		PQclear(r);
	while ((x = PQgetResult(pc)))
		PQclear(x);
	return PQstatus(pc) == CONNECTION_OK ? 0 : -ENOTCONN;
}

/*
 * Send qs[0..nq) as one pipeline ending in a Sync and read the answers: one
 * round trip. res[i] (if res) gets qs[i]'s result (caller PQclears).
 * @param[out] why the first error's text, for the log
 * @return 0, -EAGAIN, -ENOTCONN, -ENOSPC, -EACCES, -EIO
 */
static int conn_run(struct pg_conn *c, const struct pg_q *qs, int nq,
		    PGresult **res, char *why, size_t whycap)
{
	PGconn *pc = c->pc;
	int rc = 0;

	if (c->broken)
		return -ENOTCONN;
	if (conn_drain(c))
		return -ENOTCONN;
	for (int i = 0; i < nq; i++) {
		const struct pg_q *q = &qs[i];

		if (!PQsendQueryPrepared(pc, pg_stmts[q->st].name,
					 pg_stmts[q->st].nparams, q->vals, q->lens,
					 q->fmts, 1))
			goto out_lost;
	}
	if (!PQpipelineSync(pc))
		goto out_lost;
	for (int i = 0; i < nq; i++)
		if (conn_result(pc, res ? &res[i] : NULL, &rc, why, whycap))
			goto out_lost;
	{
		PGresult *r = PQgetResult(pc);

		if (!r || PQresultStatus(r) != PGRES_PIPELINE_SYNC) {
			PQclear(r);
			goto out_lost;
		}
		PQclear(r);
	}
	return rc;

out_lost:
	one_line(PQerrorMessage(pc), why, whycap);
	c->broken = 1;
	return -ENOTCONN;
}

/* Free results res[0..n). */
static void res_clear(PGresult **res, int n)
{
	for (int i = 0; i < n; i++) {
		PQclear(res[i]);
		res[i] = NULL;
	}
}

/*
 * Run qs[1..nq] for transaction t (qs[0] and res[0] are reserved: a read
 * txn's first call puts its BEGIN there). A lost connection is reset once
 * and the call sent again (a read txn then starts a new snapshot; a write
 * txn holds nothing on the server but its commit, which is idempotent:
 * final values and deletes). Errors other than -EAGAIN and -ESTALE are
 * logged once.
 * @return 0, -EAGAIN, -ESTALE, -ENOSPC, -EACCES, -EIO
 */
static int txn_run(struct pg_txn *t, struct pg_q *qs, int nq, PGresult **res,
		   const char *what)
{
	struct pg_txn *root = t->root;
	struct pg_kv *kv = kv_of(root->base.kv);
	char why[400] = "";
	int rc;

	for (int attempt = 0;; attempt++) {
		int first = root->base.rdonly && !root->snap ? 0 : 1;

		qs[0] = (struct pg_q){ .st = ST_BEGIN_RO };
		rc = conn_run(root->conn, qs + first, nq + 1 - first,
			      res ? res + first : NULL, why, sizeof(why));
		if (rc == 0 && root->base.rdonly)
			root->snap = 1;
		if (rc != -ENOTCONN || attempt > 0)
			break;
		if (res)
			res_clear(res, nq + 1);
		root->snap = 0;
		if (conn_reset(kv, root->conn))
			return -EIO;
	}
	if (rc && res)
		res_clear(res, nq + 1);
	if (rc == -ENOTCONN) { /* lost again at once: no server to keep */
		pg_mark_down(kv, why);
		rc = -EIO;
	} else if (rc && rc != -EAGAIN && rc != -ESTALE) {
		/* -ESTALE: a fenced commit of a mgr that lost the lease; its
		 * caller says so (mgr_ops) */
		log_err("store_uri %s: %s: %s", kv->show, what, why);
	}
	return rc;
}

/* ------------------------------------------------------------------ */
/* Shared row cache                                                    */

/*
 * While this process holds a leadership token (mgr_kv_set_token: the
 * active mgr), it is the only one that writes rpfs_kv: every other mgr's
 * commits are refused by the fence, and the other tools only read. Its own
 * write txns take turns on write_mu. So a row that a write txn read from
 * the server, or that a write txn committed, stays as it is on the server
 * until this process's next write txn changes it, and write txns can take
 * rows (found or missing) from a cache that outlives them instead of a
 * round trip each: the parent directory, the counters a create bumps.
 *
 * A write txn may commit nothing and still answer from what it read (an
 * open of an existing file): a mgr whose lease ran out could then answer
 * from rows another mgr has changed since. It never gets to: a mgr stops
 * serving at its local lease deadline, before the lease ends on the
 * database's clock and another mgr can take it (mgr/ha/README.md "Several
 * mgrs, one active"), the same rule that makes any answer of its safe.
 *
 * Read txns use it too, to answer a stat or a lookup with no round trip,
 * but only one that holds commit_rw for reading, which it tries once at
 * its begin (a read txn never waits: while a commit is in flight it reads
 * the server only). A root write txn holds commit_rw for writing from the
 * send of its commit to the shared cache's update. So while a reader
 * holds it, no commit is between those two points: the cache's rows are
 * the server's, and the reader's snapshot, whenever its first query takes
 * it, shows the same state, so cached and fetched rows never mix two
 * states; its fetched rows may go into the cache too. The lock prefers
 * writers: a waiting commit turns new readers to the server, so a stream
 * of readers cannot hold it off; a commit waits at most for the readers
 * already in (a round trip each at most).
 *
 * The cache's structure lives under shared_mu. It is emptied when the
 * token changes (0 and INT64_MAX, the lost leadership, keep it off), when
 * a commit fails (its outcome may be unknown), and when it passes
 * PG_SHARED_MAX bytes; a commit that deletes a prefix marks the entries
 * under it as no row. A hit is copied
 * into the txn's own cache, so what the txn hands out lives as long as the
 * txn.
 */
#define PG_SHARED_MAX (64u << 20)

/* Empty the shared cache. Caller holds shared_mu. */
static void pg_shared_clear(struct pg_kv *kv)
{
	cache_free(&kv->shared);
	kv->shared_bytes = 0;
}

/* May txns use the shared cache now? Empties it when the token it was
 * filled under is not the one in force. Caller holds shared_mu. */
static int pg_shared_ok(struct pg_kv *kv)
{
	int64_t tok = kv->token;

	if (tok != kv->shared_token) {
		pg_shared_clear(kv);
		kv->shared_token = tok;
	}
	return tok > 0 && tok != INT64_MAX;
}

/* Put a copy of e (a row as the server has it, or a tombstone: no row)
 * into the shared cache. Out of memory: the cache is emptied (a stale
 * entry must not stay). Caller holds shared_mu. */
static void pg_shared_put_locked(struct pg_kv *kv, const struct pg_ent *e)
{
	size_t n = sizeof(*e) + e->klen + e->vlen;
	struct pg_ent *c;
	ssize_t old;

	if (kv->shared_bytes + n > PG_SHARED_MAX)
		pg_shared_clear(kv);
	c = ent_new(e->tbl, e->data, e->klen, e->val,
		    e->state == PG_PUT ? e->vlen : 0, e->state);
	old = c ? cache_put(&kv->shared, c) : -ENOMEM;
	if (old < 0) {
		free(c);
		pg_shared_clear(kv);
		return;
	}
	kv->shared_bytes += n - (size_t)old;
}

/* A row t fetched from the server into the shared cache, when t may: a
 * write txn, or a read txn that holds commit_rw (its snapshot is the
 * cache's state). */
static void pg_shared_put(struct pg_txn *t, const struct pg_ent *e)
{
	struct pg_kv *kv = kv_of(t->base.kv);

	if (t->root->base.rdonly && !t->root->shared_rd)
		return;
	pthread_mutex_lock(&kv->shared_mu);
	if (pg_shared_ok(kv))
		pg_shared_put_locked(kv, e);
	pthread_mutex_unlock(&kv->shared_mu);
}

/* (tbl, key) from the shared cache into root's own cache, for a write
 * txn or a read txn that holds commit_rw. @return the txn's copy, or NULL
 * (not cached, or out of memory) */
static struct pg_ent *pg_shared_get(struct pg_txn *root, int tbl,
				    const void *key, size_t klen)
{
	struct pg_kv *kv = kv_of(root->base.kv);
	const struct pg_ent *e;
	struct pg_ent *c = NULL;

	if (root->base.rdonly && !root->shared_rd)
		return NULL;
	pthread_mutex_lock(&kv->shared_mu);
	e = pg_shared_ok(kv) ? cache_find(&kv->shared, tbl, key, klen) : NULL;
	if (e)
		c = ent_new(tbl, key, klen, e->val, e->vlen, e->state);
	pthread_mutex_unlock(&kv->shared_mu);
	if (c && cache_add(&root->cache, c)) {
		free(c);
		c = NULL;
	}
	return c;
}

/* Root write txn t committed (rc 0) or failed to: bring the shared cache
 * to the server's state (its deleted prefixes first, then its rows and
 * tombstones), or empty it. Caller holds commit_rw for writing. Cost: a
 * walk of the whole cache per deleted prefix (a purge deletes one). */
static void pg_shared_commit(struct pg_txn *t, int rc)
{
	struct pg_kv *kv = kv_of(t->base.kv);

	pthread_mutex_lock(&kv->shared_mu);
	if (rc)
		pg_shared_clear(kv);
	if (!rc && pg_shared_ok(kv)) {
		for (size_t i = 0; i < t->rng.n; i++)
			cache_del_prefix(&kv->shared, t->rng.v[i]);
		for (size_t i = 0; i < t->pts.n; i++)
			pg_shared_put_locked(kv, t->pts.v[i]);
	}
	pthread_mutex_unlock(&kv->shared_mu);
}

/* Read txns of the calling thread that hold commit_rw: a commit on a
 * thread that holds it would wait for itself. */
static __thread int pg_rd_held;

/* commit_rw, writer-preferring: a waiting commit turns new readers away
 * (their tryrdlock fails), so readers cannot starve it. */
static void pg_commit_rw_init(pthread_rwlock_t *rw)
{
	pthread_rwlockattr_t a;

	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a,
		PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(rw, &a);
	pthread_rwlockattr_destroy(&a);
}

/* Read txn t (a root) begins: may it use the shared cache? Only while the
 * cache is on and no commit is in flight or waiting (commit_rw). */
static void pg_shared_rd_begin(struct pg_kv *kv, struct pg_txn *t)
{
	int on;

	pthread_mutex_lock(&kv->shared_mu);
	on = pg_shared_ok(kv);
	pthread_mutex_unlock(&kv->shared_mu);
	if (on && pthread_rwlock_tryrdlock(&kv->commit_rw) == 0) {
		t->shared_rd = 1;
		pg_rd_held++;
	}
}

/* ------------------------------------------------------------------ */
/* Reads through the layers                                            */

/*
 * The buffered state of (tbl, key) seen from t: the nearest layer (t, its
 * parent, ...) with a point entry or a deleted prefix covering it decides.
 * @return PG_PUT (*e set), PG_DEL, or -1 if no layer knows the key
 */
static int layers_state(struct pg_txn *t, int tbl, const void *key,
			size_t klen, struct pg_ent **e)
{
	for (struct pg_txn *l = t; l; l = l->up) {
		struct pg_ent *p = map_find(&l->pts, tbl, key, klen);

		if (p) {
			*e = p;
			return p->state;
		}
		if (rng_covers(&l->rng, tbl, key, klen))
			return PG_DEL;
	}
	return -1;
}

/* Fetch (tbl, key) from the server into the root's cache. Cost: one round
 * trip. @return the entry (PG_PUT or PG_DEL), NULL with *rc set */
static struct pg_ent *fetch_row(struct pg_txn *t, int tbl, const void *key,
				size_t klen, int *rc)
{
	struct pg_q qs[2] = { { 0 } };
	PGresult *res[2] = { NULL, NULL };
	uint16_t tbl_be = htobe16((uint16_t)tbl);
	struct pg_ent *e;

	qs[1].st = ST_GET;
	q_param(&qs[1], 0, &tbl_be, 2);
	q_param(&qs[1], 1, key, klen);
	*rc = txn_run(t, qs, 1, res, "get");
	if (*rc)
		return NULL;
	if (!res[1] || PQntuples(res[1]) == 0)
		e = ent_new(tbl, key, klen, NULL, 0, PG_DEL);
	else
		e = ent_new(tbl, key, klen, PQgetvalue(res[1], 0, 0),
			    (size_t)PQgetlength(res[1], 0, 0), PG_PUT);
	res_clear(res, 2);
	if (!e || cache_add(&t->root->cache, e)) {
		free(e);
		*rc = -ENOMEM;
		return NULL;
	}
	return e;
}

/* The value of (tbl, key) in t's view: buffer, cache, then the server.
 * @return 0 (*e set), -ENOENT, -ENOMEM, -EIO */
static int read_key(struct pg_txn *t, int tbl, const void *key, size_t klen,
		    struct pg_ent **e)
{
	int rc, s = layers_state(t, tbl, key, klen, e);

	if (s == PG_PUT)
		return 0;
	if (s == PG_DEL)
		return -ENOENT;
	*e = cache_find(&t->root->cache, tbl, key, klen);
	if (!*e)
		*e = pg_shared_get(t->root, tbl, key, klen);
	if (!*e) {
		*e = fetch_row(t, tbl, key, klen, &rc);
		if (!*e)
			return rc;
		pg_shared_put(t, *e);
	}
	return (*e)->state == PG_PUT ? 0 : -ENOENT;
}

/* ------------------------------------------------------------------ */
/* The backend's calls                                                 */

/* Common checks of a call on t. @return 0, -EINVAL */
static int txn_check(struct pg_txn *t, int tbl, int write)
{
	if (tbl < 0 || tbl >= MGR_KV_NTABLES || t->child)
		return -EINVAL;
	if (write && t->base.rdonly)
		return -EINVAL;
	return 0;
}

/* See mgr_kv_get. Cost: 0 round trips if buffered or read before in this
 * txn, else 1. */
static int pg_get(struct mgr_kv_txn *t_, enum mgr_kv_table tbl,
		  const void *key, size_t klen, const void **val, size_t *vlen)
{
	struct pg_txn *t = txn_of(t_);
	struct pg_ent *e;
	int rc = txn_check(t, (int)tbl, 0);

	if (rc)
		return rc;
	rc = read_key(t, (int)tbl, key, klen, &e);
	if (rc)
		return rc == -ENOMEM ? -EIO : rc;
	*val = e->val;
	*vlen = e->vlen;
	return 0;
}

/* See mgr_kv_put: into t's buffer. Cost: NOOVERWRITE on a key not read
 * before, one round trip; else none. */
static int pg_put(struct mgr_kv_txn *t_, enum mgr_kv_table tbl,
		  const void *key, size_t klen, const void *val, size_t vlen,
		  unsigned flags)
{
	struct pg_txn *t = txn_of(t_);
	struct pg_ent *e;
	int rc = txn_check(t, (int)tbl, 1);

	if (rc)
		return rc;
	if (flags & ~MGR_KV_NOOVERWRITE)
		return -EINVAL;
	if (flags & MGR_KV_NOOVERWRITE) {
		rc = read_key(t, (int)tbl, key, klen, &e);
		if (rc == 0)
			return -EEXIST;
		if (rc != -ENOENT)
			return rc == -ENOMEM ? -ENOSPC : rc;
	}
	e = ent_new((int)tbl, key, klen, val, vlen, PG_PUT);
	if (!e || map_set(&t->pts, e)) {
		free(e);
		return -ENOSPC;
	}
	return 0;
}

/* See mgr_kv_del: a tombstone in t's buffer. Cost: one round trip if the
 * key was not read before in this txn. */
static int pg_del(struct mgr_kv_txn *t_, enum mgr_kv_table tbl,
		  const void *key, size_t klen)
{
	struct pg_txn *t = txn_of(t_);
	struct pg_ent *e;
	int rc = txn_check(t, (int)tbl, 1);

	if (rc)
		return rc;
	rc = read_key(t, (int)tbl, key, klen, &e);
	if (rc)
		return rc == -ENOMEM ? -EIO : rc;
	e = ent_new((int)tbl, key, klen, NULL, 0, PG_DEL);
	if (!e || map_set(&t->pts, e)) {
		free(e);
		return -EIO;
	}
	return 0;
}

/* See mgr_kv_del_prefix: drop t's buffered entries under prefix and
 * record the prefix (merged with t's others: none is a prefix of another).
 * Cost: no round trip; one DELETE in the commit's pipeline. */
static int pg_del_prefix(struct mgr_kv_txn *t_, enum mgr_kv_table tbl,
			 const void *prefix, size_t plen)
{
	struct pg_txn *t = txn_of(t_);
	struct pg_ent *e;
	int rc = txn_check(t, (int)tbl, 1);

	if (rc)
		return rc;
	map_del_prefix(&t->pts, (int)tbl, prefix, plen);
	if (rng_covers(&t->rng, (int)tbl, prefix, plen))
		return 0;
	map_del_prefix(&t->rng, (int)tbl, prefix, plen);
	e = ent_new((int)tbl, prefix, plen, NULL, 0, PG_DEL);
	if (!e || map_set(&t->rng, e)) {
		free(e);
		return -EIO;
	}
	return 0;
}

/*
 * The first buffered key of tbl under prefix, after (strict) or from
 * bound, that t's view holds (PG_PUT), over all layers.
 * Cost: O(layers x log n), plus the hidden entries skipped.
 */
static struct pg_ent *next_buffered(struct pg_txn *t, int tbl,
				    const void *prefix, size_t plen,
				    const void *bound, size_t blen, int strict)
{
	struct pg_ent *best = NULL;

	for (struct pg_txn *l = t; l; l = l->up) {
		size_t i = map_lower(&l->pts, tbl, bound, blen);

		for (; i < l->pts.n; i++) {
			struct pg_ent *e = l->pts.v[i], *top = NULL;

			if (e->tbl != tbl || !has_prefix(e->data, e->klen, prefix, plen))
				break;
			if (best && key_cmp(tbl, e->data, e->klen, tbl, best->data,
					    best->klen) >= 0)
				break;
			if (strict && !key_cmp(tbl, e->data, e->klen, tbl, bound, blen))
				continue;
			if (layers_state(t, tbl, e->data, e->klen, &top) == PG_PUT) {
				best = top;
				break;
			}
		}
	}
	return best;
}

/* Keep a scan page until the root ends (its values were handed out).
 * @return 0, -ENOMEM (r freed) */
static int keep_page(struct pg_txn *root, PGresult *r)
{
	if (root->nkeep == root->capkeep) {
		size_t cap = root->capkeep ? root->capkeep * 2 : 8;
		PGresult **k = realloc(root->keep, cap * sizeof(*k));

		if (!k) {
			PQclear(r);
			return -ENOMEM;
		}
		root->keep = k;
		root->capkeep = cap;
	}
	root->keep[root->nkeep++] = r;
	return 0;
}

/* The scan's server side: one page of rows at a time. */
struct scan_src {
	int tbl;
	unsigned char *lo;      /* the next page starts at lo ... */
	size_t lolen;
	unsigned char *hi;      /* ... and ends before hi (NULL: open) */
	size_t hilen;
	long long limit;        /* rows of the next page */
	PGresult *page;         /* kept by the root */
	int row, nrows, more;
};

/* Fetch the next page of s. Cost: one round trip. @return 0, -EIO */
static int scan_fetch(struct pg_txn *t, struct scan_src *s)
{
	struct pg_q qs[2] = { { 0 } };
	PGresult *res[2] = { NULL, NULL };
	uint16_t tbl_be = htobe16((uint16_t)s->tbl);
	uint64_t lim_be = htobe64((uint64_t)s->limit);
	int rc, n = 0;

	qs[1].st = s->hi ? ST_SCAN : ST_SCAN_OPEN;
	q_param(&qs[1], n++, &tbl_be, 2);
	q_param(&qs[1], n++, s->lo, s->lolen);
	if (s->hi)
		q_param(&qs[1], n++, s->hi, s->hilen);
	q_param(&qs[1], n, &lim_be, 8);
	rc = txn_run(t, qs, 1, res, "scan");
	if (rc)
		return rc == -EAGAIN ? -EIO : rc;
	s->page = res[1];
	s->row = 0;
	s->nrows = s->page ? PQntuples(s->page) : 0;
	s->more = s->nrows == s->limit;
	if (s->page && keep_page(t->root, s->page)) {
		s->page = NULL;
		return -EIO;
	}
	if (s->more) {
		/* the next page starts just after the last key: key + 0x00 */
		size_t kl = (size_t)PQgetlength(s->page, s->nrows - 1, 0);
		unsigned char *lo = realloc(s->lo, kl + 1);

		if (!lo)
			return -EIO;
		memcpy(lo, PQgetvalue(s->page, s->nrows - 1, 0), kl);
		lo[kl] = 0;
		s->lo = lo;
		s->lolen = kl + 1;
	}
	if (s->limit < PG_PAGE_MAX)
		s->limit *= 2;
	return 0;
}

/* A walk: the server's side, the bounds, the last key handed out (a copy:
 * a callback may free the buffered entry it came from). */
struct scan_walk {
	struct scan_src s;
	const void *from, *prefix;
	size_t flen, plen;
	unsigned char *last;
	size_t lastcap, lastlen;
	int started;
};

/* Remember key k as the walk's last. @return 0, -ENOMEM */
static int walk_last(struct scan_walk *w, const void *k, size_t kl)
{
	if (kl + 1 > w->lastcap) {
		unsigned char *p = realloc(w->last, kl + 1);

		if (!p)
			return -ENOMEM;
		w->last = p;
		w->lastcap = kl + 1;
	}
	if (kl)
		memcpy(w->last, k, kl);
	w->lastlen = kl;
	w->started = 1;
	return 0;
}

/*
 * The next record of the walk in t's view: the smaller of the next server
 * row (a page fetched when the last one is used up) and the next buffered
 * put (which wins over a server row of the same key); server rows that a
 * buffer deletes are skipped.
 * @return 1 (*k, *kl, *v, *vl set), 0 the walk is over, -EIO
 */
static int walk_next(struct pg_txn *t, struct scan_walk *w, const void **k,
		     size_t *kl, const void **v, size_t *vl)
{
	struct scan_src *s = &w->s;

	for (;;) {
		struct pg_ent *b, *top;
		int c;

		if (s->row == s->nrows && s->more && scan_fetch(t, s))
			return -EIO;
		b = w->started ? next_buffered(t, s->tbl, w->prefix, w->plen, w->last,
					       w->lastlen, 1)
			       : next_buffered(t, s->tbl, w->prefix, w->plen, w->from,
					       w->flen, 0);
		if (s->row < s->nrows) {
			*k = PQgetvalue(s->page, s->row, 0);
			*kl = (size_t)PQgetlength(s->page, s->row, 0);
			c = b ? key_cmp(0, b->data, b->klen, 0, *k, *kl) : 1;
		} else if (b) {
			c = -1;
		} else {
			return 0;
		}
		if (c <= 0) {
			s->row += c == 0;
			*k = b->data, *kl = b->klen, *v = b->val, *vl = b->vlen;
		} else {
			*v = PQgetvalue(s->page, s->row, 1);
			*vl = (size_t)PQgetlength(s->page, s->row, 1);
			s->row++;
			if (layers_state(t, s->tbl, *k, *kl, &top) >= 0)
				continue; /* deleted in a buffer */
		}
		return walk_last(w, *k, *kl) ? -EIO : 1;
	}
}

/*
 * See mgr_kv_scan: the server's rows (a page per query, pages growing from
 * PG_PAGE_MIN to PG_PAGE_MAX rows) merged with the buffered ones: buffered
 * puts appear, deletes and deleted prefixes hide. The callback may read
 * and write t; what it writes is seen by the rest of the walk.
 */
static int pg_scan(struct mgr_kv_txn *t_, enum mgr_kv_table tbl,
		   const void *from, size_t flen, size_t plen,
		   mgr_kv_scan_fn fn, void *arg)
{
	struct pg_txn *t = txn_of(t_);
	struct scan_walk w = {
		.s = { .tbl = (int)tbl, .limit = PG_PAGE_MIN, .more = 1 },
		.from = from, .flen = flen, .prefix = from, .plen = plen,
	};
	const void *k, *v;
	size_t kl, vl;
	int rc = txn_check(t, (int)tbl, 0);

	if (rc)
		return rc;
	if (plen > flen)
		return -EINVAL;
	w.s.lo = malloc(flen + 1);
	w.s.hi = malloc(plen + 1);
	if (!w.s.lo || !w.s.hi) {
		rc = -EIO;
		goto out_free;
	}
	if (flen)
		memcpy(w.s.lo, from, flen);
	w.s.lolen = flen;
	w.s.hilen = prefix_next(from, plen, w.s.hi);
	if (!w.s.hilen) {
		free(w.s.hi);
		w.s.hi = NULL;
	}
	while ((rc = walk_next(t, &w, &k, &kl, &v, &vl)) == 1) {
		rc = fn(arg, k, kl, v, vl);
		if (rc)
			break;
	}
out_free:
	free(w.last);
	free(w.s.hi);
	free(w.s.lo);
	return rc;
}

/* Collect, for count, the keys of tbl buffered in t's view into keys (the
 * server's rows of these are not counted) and the deleted prefixes into
 * pre; *plus is the number of those keys that t's view holds.
 * @return 0, -ENOMEM */
static int count_args(struct pg_txn *t, int tbl, struct pg_buf *keys,
		      struct pg_buf *pre, uint64_t *plus)
{
	*plus = 0;
	if (arr_start(keys, OID_BYTEA) || arr_start(pre, OID_BYTEA))
		return -ENOMEM;
	for (struct pg_txn *l = t; l; l = l->up) {
		for (size_t i = 0; i < l->pts.n; i++) {
			struct pg_ent *e = l->pts.v[i], *top = NULL;
			int seen = 0;

			if (e->tbl != tbl)
				continue;
			for (struct pg_txn *u = t; u != l && !seen; u = u->up)
				seen = map_find(&u->pts, tbl, e->data, e->klen) != NULL;
			if (seen)
				continue; /* a nearer layer has it */
			if (layers_state(t, tbl, e->data, e->klen, &top) == PG_PUT)
				(*plus)++;
			if (arr_add(keys, e->data, e->klen))
				return -ENOMEM;
		}
		for (size_t i = 0; i < l->rng.n; i++)
			if (l->rng.v[i]->tbl == tbl &&
			    arr_add(pre, l->rng.v[i]->data, l->rng.v[i]->klen))
				return -ENOMEM;
	}
	arr_end(keys);
	arr_end(pre);
	return 0;
}

/* See mgr_kv_count: one count query, minus the buffered keys and deleted
 * prefixes, plus the buffered puts. Cost: one round trip. */
static int pg_count(struct mgr_kv_txn *t_, enum mgr_kv_table tbl, uint64_t *n)
{
	struct pg_txn *t = txn_of(t_);
	struct pg_buf keys = { 0 }, pre = { 0 };
	struct pg_q qs[2] = { { 0 } };
	PGresult *res[2] = { NULL, NULL };
	uint16_t tbl_be = htobe16((uint16_t)tbl);
	uint64_t plus, be;
	int rc = txn_check(t, (int)tbl, 0);

	if (rc)
		return rc;
	rc = count_args(t, (int)tbl, &keys, &pre, &plus);
	if (rc) {
		rc = -EIO;
		goto out_free;
	}
	qs[1].st = ST_COUNT;
	q_param(&qs[1], 0, &tbl_be, 2);
	q_param(&qs[1], 1, keys.p, keys.n);
	q_param(&qs[1], 2, pre.p, pre.n);
	rc = txn_run(t, qs, 1, res, "count");
	if (rc) {
		rc = rc == -EAGAIN ? -EIO : rc;
		goto out_free;
	}
	if (!res[1] || PQntuples(res[1]) != 1 || PQgetlength(res[1], 0, 0) != 8) {
		log_err("store_uri %s: count: unexpected answer",
			kv_of(t->base.kv)->show);
		rc = -EIO;
		goto out_clear;
	}
	memcpy(&be, PQgetvalue(res[1], 0, 0), 8);
	*n = be64toh(be) + plus;
out_clear:
	res_clear(res, 2);
out_free:
	free(keys.p);
	free(pre.p);
	return rc;
}

/* See mgr_kv_usage: PostgreSQL has no fixed size. */
static int pg_usage(struct mgr_kv_txn *t, uint64_t *used, uint64_t *limit)
{
	return -EOPNOTSUPP;
}

/* ------------------------------------------------------------------ */
/* Transactions                                                        */

/* See mgr_kv_begin. A top-level write txn waits for write_mu; a top-level
 * txn takes a pooled connection (a new one costs a connection setup). */
static int pg_begin(struct mgr_kv *kv_, struct mgr_kv_txn *parent_,
		    int rdonly, struct mgr_kv_txn **out)
{
	struct pg_kv *kv = kv_of(kv_);
	struct pg_txn *parent = parent_ ? txn_of(parent_) : NULL;
	struct pg_txn *t;
	int rc;

	if (parent && (parent->base.rdonly || rdonly || parent->child ||
		       parent->base.kv != kv_))
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->base.kv = kv_;
	t->base.parent = parent_;
	t->base.rdonly = rdonly ? 1 : 0;
	if (parent) {
		t->up = parent;
		t->root = parent->root;
		parent->child = t;
		*out = &t->base;
		return 0;
	}
	t->root = t;
	if (!rdonly)
		pthread_mutex_lock(&kv->write_mu);
	rc = pool_take(kv, &t->conn);
	if (rc) {
		if (!rdonly)
			pthread_mutex_unlock(&kv->write_mu);
		free(t);
		return rc;
	}
	if (rdonly)
		pg_shared_rd_begin(kv, t);
	*out = &t->base;
	return 0;
}

/* End t's layer and free t; a root also ends its snapshot (ROLLBACK sent,
 * its answer read by the connection's next user), returns its connection
 * and lets the next writer in. */
static void txn_end(struct pg_txn *t)
{
	struct pg_kv *kv = kv_of(t->base.kv);

	map_free(&t->pts);
	map_free(&t->rng);
	if (t->up) {
		t->up->child = NULL;
		free(t);
		return;
	}
	if (t->snap && !t->conn->broken) {
		if (PQsendQueryPrepared(t->conn->pc, pg_stmts[ST_ROLLBACK].name, 0,
					NULL, NULL, NULL, 1) &&
		    PQpipelineSync(t->conn->pc))
			t->conn->pending++;
		else
			t->conn->broken = 1;
	}
	cache_free(&t->cache);
	for (size_t i = 0; i < t->nkeep; i++)
		PQclear(t->keep[i]);
	free(t->keep);
	pool_put(kv, t->conn);
	if (!t->base.rdonly)
		pthread_mutex_unlock(&kv->write_mu);
	if (t->shared_rd) {
		pthread_rwlock_unlock(&kv->commit_rw);
		pg_rd_held--;
	}
	free(t);
}

/* Fold child c's writes into its parent: its deleted prefixes first (they
 * are older than its point entries under them), then its points. The
 * entries move; nothing is copied. @return 0, -ENOSPC */
static int txn_fold(struct pg_txn *c)
{
	struct pg_txn *p = c->up;

	for (size_t i = 0; i < c->rng.n; i++) {
		struct pg_ent *r = c->rng.v[i];

		map_del_prefix(&p->pts, r->tbl, r->data, r->klen);
		if (rng_covers(&p->rng, r->tbl, r->data, r->klen))
			continue;
		map_del_prefix(&p->rng, r->tbl, r->data, r->klen);
		if (map_set(&p->rng, r))
			return -ENOSPC;
		c->rng.v[i] = NULL;
	}
	for (size_t i = 0; i < c->pts.n; i++) {
		if (map_set(&p->pts, c->pts.v[i]))
			return -ENOSPC;
		c->pts.v[i] = NULL;
	}
	return 0;
}

/* A commit's statements and the parameters they point into. */
struct commit_args {
	struct pg_q *qs;     /* [0] reserved (txn_run), then nq statements */
	int nq;
	uint16_t *tbls;      /* per deleted prefix, big-endian */
	unsigned char *his;  /* their upper bounds, packed */
	int64_t token_be;    /* the fence's token, big-endian */
	struct pg_buf dt, dk, ut, uk, uv; /* deleted tbl/key, upserted tbl/key/val */
};

static void commit_free(struct commit_args *a)
{
	free(a->qs);
	free(a->tbls);
	free(a->his);
	free(a->dt.p);
	free(a->dk.p);
	free(a->ut.p);
	free(a->uk.p);
	free(a->uv.p);
}

/* Add the points of root t to the arrays: puts to the upsert, deletes to
 * the DELETE (unless the cache knows the server has no such row). */
static int commit_points(struct pg_txn *t, struct commit_args *a)
{
	for (size_t i = 0; i < t->pts.n; i++) {
		struct pg_ent *e = t->pts.v[i], *c;
		uint16_t be = htobe16(e->tbl);

		if (e->state == PG_PUT) {
			if (arr_add(&a->ut, &be, 2) || arr_add(&a->uk, e->data, e->klen) ||
			    arr_add(&a->uv, e->val, e->vlen))
				return -ENOMEM;
			continue;
		}
		c = cache_find(&t->cache, e->tbl, e->data, e->klen);
		if (c && c->state == PG_DEL)
			continue;
		if (arr_add(&a->dt, &be, 2) || arr_add(&a->dk, e->data, e->klen))
			return -ENOMEM;
	}
	return 0;
}

/*
 * Build the commit of root t: the fence (fence_token != 0), a DELETE per
 * deleted prefix, then one DELETE of the deleted keys and one upsert of the
 * put ones, over arrays. Prefix deletes go first: t's points under a
 * prefix are newer than it.
 * @return 0, -ENOMEM
 */
static int commit_build(struct pg_txn *t, int64_t fence_token,
			struct commit_args *a)
{
	size_t hisz = 1, off = 0;

	memset(a, 0, sizeof(*a));
	for (size_t i = 0; i < t->rng.n; i++)
		hisz += t->rng.v[i]->klen;
	a->qs = calloc(t->rng.n + 4, sizeof(*a->qs));
	a->tbls = calloc(t->rng.n + 1, sizeof(*a->tbls));
	a->his = malloc(hisz);
	if (!a->qs || !a->tbls || !a->his)
		return -ENOMEM;
	if (fence_token) { /* first: a refused fence aborts all that follows */
		struct pg_q *q = &a->qs[1 + a->nq++];

		a->token_be = (int64_t)htobe64((uint64_t)fence_token);
		q->st = ST_FENCE;
		q_param(q, 0, &a->token_be, 8);
	}
	for (size_t i = 0; i < t->rng.n; i++) {
		struct pg_ent *r = t->rng.v[i];
		struct pg_q *q = &a->qs[1 + a->nq++];
		size_t hl = prefix_next(r->data, r->klen, a->his + off);

		a->tbls[i] = htobe16(r->tbl);
		q->st = hl ? ST_DELRANGE : ST_DELRANGE_OPEN;
		q_param(q, 0, &a->tbls[i], 2);
		q_param(q, 1, r->data, r->klen);
		if (hl)
			q_param(q, 2, a->his + off, hl);
		off += hl;
	}
	if (arr_start(&a->dt, OID_INT2) || arr_start(&a->dk, OID_BYTEA) ||
	    arr_start(&a->ut, OID_INT2) || arr_start(&a->uk, OID_BYTEA) ||
	    arr_start(&a->uv, OID_BYTEA) || commit_points(t, a))
		return -ENOMEM;
	arr_end(&a->dt);
	arr_end(&a->dk);
	arr_end(&a->ut);
	arr_end(&a->uk);
	arr_end(&a->uv);
	if (a->dk.count) {
		struct pg_q *q = &a->qs[1 + a->nq++];

		q->st = ST_DELKEYS;
		q_param(q, 0, a->dt.p, a->dt.n);
		q_param(q, 1, a->dk.p, a->dk.n);
	}
	if (a->uk.count) {
		struct pg_q *q = &a->qs[1 + a->nq++];

		q->st = ST_UPSERT;
		q_param(q, 0, a->ut.p, a->ut.n);
		q_param(q, 1, a->uk.p, a->uk.n);
		q_param(q, 2, a->uv.p, a->uv.n);
	}
	return 0;
}

/* Send root t's writes: one pipeline, one round trip, one implicit
 * transaction committed at its Sync. A conflict (40001, 40P01) is sent
 * again up to PG_RETRIES times, 1, 2, 4, ... ms apart. With a token set,
 * the pipeline starts with the fence: -ESTALE, nothing applied, when
 * another mgr took the lease.
 * @return 0, -EAGAIN, -ENOSPC, -ESTALE, -EIO */
static int commit_send(struct pg_txn *t)
{
	struct commit_args a;
	int64_t tok = kv_of(t->base.kv)->token;
	int rc = commit_build(t, tok, &a);

	if (rc) {
		rc = -ENOSPC;
		goto out_free;
	}
	if (a.nq <= (tok ? 1 : 0))
		goto out_free;
	for (int attempt = 0;; attempt++) {
		struct timespec ts = { 0, 1000000L << attempt };

		rc = txn_run(t, a.qs, a.nq, NULL, "commit");
		if (rc != -EAGAIN || attempt == PG_RETRIES)
			break;
		nanosleep(&ts, NULL);
	}
	if (rc == -EAGAIN)
		log_warn("store_uri %s: commit: still conflicting after %d retries",
			 kv_of(t->base.kv)->show, PG_RETRIES);
	if (rc == -EACCES)
		rc = -EIO;
out_free:
	commit_free(&a);
	return rc;
}

/*
 * Commit root write txn t's buffer, holding commit_rw for writing from the
 * send to the shared cache's update. A thread that also holds a cached
 * read txn cannot take it (a bug in the caller: mgr_db keeps one top-level
 * txn per thread): then the cache is emptied and the commit goes without,
 * with an error line. Cost: commit_send, and the wait for readers already
 * in (at most a round trip each).
 */
static int pg_commit_root(struct pg_txn *t)
{
	struct pg_kv *kv = kv_of(t->base.kv);
	int rc;

	if (pg_rd_held) {
		log_err("store_uri %s: a write commit on a thread that holds a "
			"cached read transaction; the shared cache is emptied",
			kv->show);
		pthread_mutex_lock(&kv->shared_mu);
		pg_shared_clear(kv);
		pthread_mutex_unlock(&kv->shared_mu);
		return commit_send(t);
	}
	pthread_rwlock_wrlock(&kv->commit_rw);
	rc = commit_send(t);
	pg_shared_commit(t, rc);
	pthread_rwlock_unlock(&kv->commit_rw);
	return rc;
}

/* See mgr_kv_commit. An active child is committed first (as LMDB does). */
static int pg_commit(struct mgr_kv_txn *t_)
{
	struct pg_txn *t = txn_of(t_);
	int rc = 0;

	if (t->child) {
		rc = pg_commit(&t->child->base);
		if (rc) {
			mgr_kv_pg_ops.abort(t_);
			return rc;
		}
	}
	if (t->up) {
		rc = txn_fold(t);
	} else if (!t->base.rdonly && (t->pts.n || t->rng.n)) {
		rc = pg_commit_root(t);
	}
	txn_end(t);
	return rc;
}

/* See mgr_kv_abort: an active child first. */
static void pg_abort(struct mgr_kv_txn *t_)
{
	struct pg_txn *t = txn_of(t_);

	if (t->child)
		pg_abort(&t->child->base);
	txn_end(t);
}

/* ------------------------------------------------------------------ */
/* Open and close                                                      */

/* See mgr_kv_close. */
static void pg_close(struct mgr_kv *kv_)
{
	struct pg_kv *kv;

	if (!kv_)
		return;
	kv = kv_of(kv_);
	while (kv->idle) {
		struct pg_conn *c = kv->idle;

		kv->idle = c->next;
		conn_free(c);
	}
	pg_shared_clear(kv);
	pthread_rwlock_destroy(&kv->commit_rw);
	pthread_mutex_destroy(&kv->shared_mu);
	pthread_mutex_destroy(&kv->write_mu);
	pthread_mutex_destroy(&kv->pool_mu);
	free(kv->uri);
	free(kv);
}

/* See mgr_kv_set_token. Read by commit_send of any thread. */
static int pg_set_token(struct mgr_kv *kv_, int64_t token)
{
	kv_of(kv_)->token = token;
	return 0;
}

/* See mgr_kv_int.h. Cost: one connection setup, the schema check and one
 * round trip of prepares. */
int mgr_kv_pg_open(const struct mgr_kv_conf *conf, int create,
		   struct mgr_kv **out, char *msg, size_t msgcap)
{
	PQconninfoOption *o;
	struct pg_kv *kv;
	struct pg_conn *c;
	char *err = NULL, why[300] = "out of memory";
	int rc;

	if (!conf || conf->kind != MGR_KV_POSTGRESQL || !conf->uri || !conf->uri[0]) {
		snprintf(msg, msgcap, "store_uri: not set (store = postgresql needs a "
			 "PostgreSQL URI)");
		return -EINVAL;
	}
	kv = calloc(1, sizeof(*kv));
	if (!kv) {
		snprintf(msg, msgcap, "store_uri: out of memory");
		return -ENOMEM;
	}
	kv->base.ops = &mgr_kv_pg_ops;
	kv->base.kind = MGR_KV_POSTGRESQL;
	pthread_mutex_init(&kv->pool_mu, NULL);
	pthread_mutex_init(&kv->write_mu, NULL);
	pthread_mutex_init(&kv->shared_mu, NULL);
	pg_commit_rw_init(&kv->commit_rw);
	uri_show(conf->uri, kv->show, sizeof(kv->show));
	o = PQconninfoParse(conf->uri, &err);
	if (!o) {
		if (err)
			one_line(err, why, sizeof(why));
		PQfreemem(err);
		snprintf(msg, msgcap, "store_uri %s: not a PostgreSQL URI or conninfo: "
			 "%s", kv->show, why);
		rc = err ? -EINVAL : -ENOMEM;
		goto out_close;
	}
	PQconninfoFree(o);
	kv->uri = strdup(conf->uri);
	if (!kv->uri) {
		snprintf(msg, msgcap, "store_uri %s: out of memory", kv->show);
		rc = -ENOMEM;
		goto out_close;
	}
	rc = conn_new(kv, 1, create, &c, msg, msgcap);
	if (rc)
		goto out_close;
	pool_put(kv, c);
	*out = &kv->base;
	return 0;

out_close:
	pg_close(&kv->base);
	return rc;
}

/* The server's reachability mark (mgr_kv.h: mgr_kv_reach_mark). */
static uint64_t pg_reach_mark(const struct mgr_kv *base)
{
	const struct pg_kv *kv = (const struct pg_kv *)base;

	return kv->reach;
}

const struct mgr_kv_ops mgr_kv_pg_ops = {
	.close = pg_close,
	.begin = pg_begin,
	.commit = pg_commit,
	.abort = pg_abort,
	.get = pg_get,
	.put = pg_put,
	.del = pg_del,
	.scan = pg_scan,
	.del_prefix = pg_del_prefix,
	.count = pg_count,
	.usage = pg_usage,
	.set_token = pg_set_token,
	.reach_mark = pg_reach_mark,
};
