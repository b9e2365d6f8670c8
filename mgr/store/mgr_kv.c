/* mgr_kv.c - the store interface's dispatch: validate, then call the
 * backend's op (mgr_kv_int.h). */
#include "mgr_kv_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Parse "lmdb" or "postgresql"; see mgr_kv.h. */
int mgr_kv_kind_parse(const char *s, enum mgr_kv_kind *kind)
{
	if (!s)
		return -EINVAL;
	if (strcmp(s, "lmdb") == 0)
		*kind = MGR_KV_LMDB;
	else if (strcmp(s, "postgresql") == 0)
		*kind = MGR_KV_POSTGRESQL;
	else
		return -EINVAL;
	return 0;
}

/* The name of a backend, as mgr_kv_kind_parse takes it. */
const char *mgr_kv_kind_name(enum mgr_kv_kind kind)
{
	switch (kind) {
	case MGR_KV_LMDB:
		return "lmdb";
	case MGR_KV_POSTGRESQL:
		return "postgresql";
	}
	return "unknown";
}

/* Open the backend conf->kind names; a PostgreSQL store in a build
 * without it is refused with a message that says how to get it. */
int mgr_kv_open(const struct mgr_kv_conf *conf, int create,
		struct mgr_kv **out, char *msg, size_t msgcap)
{
	if (msgcap)
		msg[0] = '\0';
	if (!conf || !out) {
		snprintf(msg, msgcap, "store: no configuration");
		return -EINVAL;
	}
	switch (conf->kind) {
	case MGR_KV_LMDB:
		return mgr_kv_lmdb_open(conf, create, out, msg, msgcap);
	case MGR_KV_POSTGRESQL:
#ifdef RPFS_HAVE_PG
		return mgr_kv_pg_open(conf, create, out, msg, msgcap);
#else
		snprintf(msg, msgcap, "store = postgresql: this rpfs-mgr was "
			 "built without PostgreSQL support (meson "
			 "-Dpostgresql=enabled)");
		return -EOPNOTSUPP;
#endif
	}
	snprintf(msg, msgcap, "store: unknown kind %d", (int)conf->kind);
	return -EINVAL;
}

/* Close the store (NULL: nothing). */
void mgr_kv_close(struct mgr_kv *kv)
{
	if (kv)
		kv->ops->close(kv);
}

/* The backend of kv. */
enum mgr_kv_kind mgr_kv_kind(const struct mgr_kv *kv)
{
	return kv->kind;
}

/* Fence later commits with token, if the backend can (mgr_kv.h). */
int mgr_kv_set_token(struct mgr_kv *kv, int64_t token)
{
	if (!kv || token < 0)
		return -EINVAL;
	if (!kv->ops->set_token)
		return -EOPNOTSUPP;
	return kv->ops->set_token(kv, token);
}

/* The store's reachability mark (mgr_kv.h): bit 0 out of reach now, the
 * bits above count the outages so far. */
uint64_t mgr_kv_reach_mark(const struct mgr_kv *kv)
{
	return kv && kv->ops->reach_mark ? kv->ops->reach_mark(kv) : 0;
}

/* Is the store's server out of reach for now (mgr_kv.h)? */
int mgr_kv_unreachable(const struct mgr_kv *kv)
{
	return (int)(mgr_kv_reach_mark(kv) & 1);
}

/* Out of reach at the mark, now, or in an outage between (mgr_kv.h)? */
int mgr_kv_unreachable_since(const struct mgr_kv *kv, uint64_t mark)
{
	uint64_t now = mgr_kv_reach_mark(kv);

	return (mark & 1) || (now & 1) || (now >> 1) != (mark >> 1);
}

/* Is tbl one of the tables? */
static int kv_table_ok(enum mgr_kv_table tbl)
{
	return (unsigned)tbl < MGR_KV_NTABLES;
}

/* Is key a valid key: present, 1..MGR_KV_KEY_MAX bytes? */
static int kv_key_ok(const void *key, size_t klen)
{
	return key && klen > 0 && klen <= MGR_KV_KEY_MAX;
}

/* A top-level txn, or a child of a write txn of the same store. */
int mgr_kv_begin(struct mgr_kv *kv, struct mgr_kv_txn *parent, int rdonly,
		 struct mgr_kv_txn **out)
{
	if (!kv || !out)
		return -EINVAL;
	if (parent && (parent->rdonly || parent->kv != kv))
		return -EINVAL;
	return kv->ops->begin(kv, parent, rdonly, out);
}

/* Commit and end t. */
int mgr_kv_commit(struct mgr_kv_txn *t)
{
	return t->kv->ops->commit(t);
}

/* Abort and end t (NULL: nothing). */
void mgr_kv_abort(struct mgr_kv_txn *t)
{
	if (t)
		t->kv->ops->abort(t);
}

/* Read one record. */
int mgr_kv_get(struct mgr_kv_txn *t, enum mgr_kv_table tbl, const void *key,
	       size_t klen, const void **val, size_t *vlen)
{
	if (!kv_table_ok(tbl) || !kv_key_ok(key, klen) || !val || !vlen)
		return -EINVAL;
	return t->kv->ops->get(t, tbl, key, klen, val, vlen);
}

/* Write one record. */
int mgr_kv_put(struct mgr_kv_txn *t, enum mgr_kv_table tbl, const void *key,
	       size_t klen, const void *val, size_t vlen, unsigned flags)
{
	if (t->rdonly || !kv_table_ok(tbl) || !kv_key_ok(key, klen) ||
	    (vlen && !val) || (flags & ~MGR_KV_NOOVERWRITE))
		return -EINVAL;
	return t->kv->ops->put(t, tbl, key, klen, val, vlen, flags);
}

/* Delete one record. */
int mgr_kv_del(struct mgr_kv_txn *t, enum mgr_kv_table tbl, const void *key,
	       size_t klen)
{
	if (t->rdonly || !kv_table_ok(tbl) || !kv_key_ok(key, klen))
		return -EINVAL;
	return t->kv->ops->del(t, tbl, key, klen);
}

/* Walk a prefix in key order. from may be empty (flen 0: the table's
 * start, then plen must be 0 too). */
int mgr_kv_scan(struct mgr_kv_txn *t, enum mgr_kv_table tbl, const void *from,
		size_t flen, size_t plen, mgr_kv_scan_fn fn, void *arg)
{
	if (!kv_table_ok(tbl) || !fn || (flen && !from) ||
	    flen > MGR_KV_KEY_MAX || plen > flen)
		return -EINVAL;
	return t->kv->ops->scan(t, tbl, from, flen, plen, fn, arg);
}

/* Delete every record under a prefix. */
int mgr_kv_del_prefix(struct mgr_kv_txn *t, enum mgr_kv_table tbl,
		      const void *prefix, size_t plen)
{
	if (t->rdonly || !kv_table_ok(tbl) || !kv_key_ok(prefix, plen))
		return -EINVAL;
	return t->kv->ops->del_prefix(t, tbl, prefix, plen);
}

/* Count a table's records. */
int mgr_kv_count(struct mgr_kv_txn *t, enum mgr_kv_table tbl, uint64_t *n)
{
	if (!kv_table_ok(tbl) || !n)
		return -EINVAL;
	return t->kv->ops->count(t, tbl, n);
}

/* Space in use (-EOPNOTSUPP: the backend has no fixed size). */
int mgr_kv_usage(struct mgr_kv_txn *t, uint64_t *used, uint64_t *limit)
{
	if (!used)
		return -EINVAL;
	return t->kv->ops->usage(t, used, limit);
}
