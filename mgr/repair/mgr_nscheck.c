/*
 * mgr_nscheck.c - the namespace consistency check (mgr_nscheck.h;
 * mgr/repair/README.md "Namespace check"). Passes, all in one read
 * transaction:
 *  1. inodes: decode every record into a sorted array (key order is inode
 *     order), 48 bytes each;
 *  2. per directory: its dirents (name order) and its dirseq records (seq
 *     order), each one range read; entries are counted into their children
 *     (links, subdirectories, the directory holding a directory's entry)
 *     and matched with the dirseq records by seq;
 *  3. reachability of directories: each follows the directory holding its
 *     entry up to the root (a functional graph: O(directories));
 *  4. every dirent and dirseq record: its parent must be a directory; the
 *     children of reachable directories are reachable;
 *  5. orphan marks; then each inode's rules; then xattrs, stale records
 *     and the meta counters.
 */
#include "mgr_nscheck.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mgr_kv.h"

/* Reachability of a directory (pass 3). */
enum { NS_UNKNOWN, NS_ON_PATH, NS_REACH, NS_UNREACH };

/* One inode as the check counts it. */
struct ns_ino {
	uint64_t ino;
	uint64_t parent;   /* dirs: the parent field */
	uint64_t next_seq; /* dirs */
	uint64_t eparent;  /* dirs: the directory holding its first entry */
	uint32_t nlink;
	uint32_t links;    /* entries pointing to it, in directories */
	uint32_t subdirs;  /* dirs: entries of directories in it */
	uint8_t isdir;
	uint8_t orphan;    /* has an orphan mark */
	uint8_t state;     /* dirs: NS_* */
	uint8_t cycle;     /* dirs: on a cycle (reported as one) */
	uint8_t reached;   /* non-dirs: an entry in a reachable dir */
};

/* One entry or dirseq record of the directory being checked. */
struct ns_ent {
	uint64_t seq, child; /* child 0: an older dirseq record */
	size_t name_off;     /* in ns_ctx.names */
	size_t name_len;
};

/* A growing array of ns_ent. */
struct ns_ents {
	struct ns_ent *v;
	size_t n, cap;
};

/* The check's state (one thread, one call). */
struct ns_ctx {
	struct mgr_kv_txn *kt;
	mgr_nscheck_fn fn;
	void *arg;
	struct mgr_nscheck_result *res;
	struct ns_ino *inos; /* sorted by ino */
	size_t n, cap;
	uint64_t nrec;       /* inode records, decodable or not */
	uint64_t max_ino;
	int err;             /* -ENOMEM in a scan callback */
	struct ns_ents ents, seqs; /* the directory of pass 2 */
	char *names;         /* their names */
	size_t nnames, cnames;
	uint64_t stray_ino;  /* pass 5: the last xattr stray reported */
};

/* Report one problem: count it and hand it to the caller. */
static void ns_report(struct ns_ctx *x, const struct mgr_nscheck_problem *p)
{
	x->res->problems++;
	if (x->fn)
		x->fn(x->arg, p);
}

/* Report a record of tbl that does not decode (ino from its key, or 0). */
static void ns_bad(struct ns_ctx *x, enum mgr_kv_table tbl, uint64_t ino)
{
	struct mgr_nscheck_problem p = { .kind = MGR_NSCHECK_BAD_RECORD,
					 .table = tbl, .ino = ino };

	ns_report(x, &p);
}

/* The first 8 bytes of a key as an inode number (big-endian). */
static uint64_t ns_key_ino(const void *key)
{
	uint64_t be;

	memcpy(&be, key, 8);
	return be64toh(be);
}

/* The inode ino in the sorted array, or NULL. Cost: O(log n). */
static struct ns_ino *ns_find(const struct ns_ctx *x, uint64_t ino)
{
	size_t lo = 0, hi = x->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (x->inos[mid].ino == ino)
			return &x->inos[mid];
		if (x->inos[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Pass 1, per inode record: decode it into the array. */
static int ns_inode_one(void *arg, const void *key, size_t klen,
			const void *val, size_t vlen)
{
	struct ns_ctx *x = arg;
	struct mgr_inode in;
	uint64_t ino = klen == 8 ? ns_key_ino(key) : 0;

	x->nrec++;
	if (ino > x->max_ino)
		x->max_ino = ino;
	if (ino == 0 || mgr_db_inode_decode(val, vlen, &in)) {
		ns_bad(x, MGR_KV_INODES, ino);
		return 0;
	}
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 1024;
		struct ns_ino *v = realloc(x->inos, cap * sizeof(*v));

		if (!v) {
			x->err = -ENOMEM;
			return 1;
		}
		x->inos = v;
		x->cap = cap;
	}
	x->inos[x->n++] = (struct ns_ino){
		.ino = ino, .parent = in.parent, .next_seq = in.next_seq,
		.nlink = in.nlink, .isdir = S_ISDIR(in.mode) ? 1 : 0,
	};
	x->res->inodes++;
	return 0;
}

/* Append an entry (name copied) to a; @return 0, -ENOMEM */
static int ns_ents_add(struct ns_ctx *x, struct ns_ents *a, uint64_t seq,
		       uint64_t child, const void *name, size_t len)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 256;
		struct ns_ent *v = realloc(a->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		a->v = v;
		a->cap = cap;
	}
	if (x->nnames + len > x->cnames) {
		size_t cap = x->cnames ? x->cnames * 2 : 16384;
		char *v;

		while (cap < x->nnames + len)
			cap *= 2;
		v = realloc(x->names, cap);
		if (!v)
			return -ENOMEM;
		x->names = v;
		x->cnames = cap;
	}
	memcpy(x->names + x->nnames, name, len);
	a->v[a->n++] = (struct ns_ent){ seq, child, x->nnames, len };
	x->nnames += len;
	return 0;
}

/* Pass 2, per dirent of the directory: keep it (a record that does not
 * decode is skipped here and reported by pass 4). */
static int ns_dirent_one(void *arg, const void *key, size_t klen,
			 const void *val, size_t vlen)
{
	struct ns_ctx *x = arg;
	uint64_t dv[2];

	if (klen <= 8 || klen > 8 + PROTO_MAX_NAME || vlen != sizeof(dv))
		return 0;
	memcpy(dv, val, sizeof(dv));
	x->err = ns_ents_add(x, &x->ents, dv[1], dv[0],
			     (const char *)key + 8, klen - 8);
	return x->err ? 1 : 0;
}

/* Decode a dirseq value: the new format (tag 0, child, name) or an older
 * one (the name alone: *child = 0). @return 0, -EIO */
static int ns_dirseq_decode(const uint8_t *v, size_t vlen, uint64_t *child,
			    const uint8_t **name, size_t *len)
{
	if (vlen > 9 && v[0] == 0) {
		memcpy(child, v + 1, 8);
		*name = v + 9;
		*len = vlen - 9;
	} else if (vlen > 0 && v[0] != 0) {
		*child = 0;
		*name = v;
		*len = vlen;
	} else {
		return -EIO;
	}
	return *len <= PROTO_MAX_NAME ? 0 : -EIO;
}

/* Pass 2, per dirseq record of the directory: keep it (bad ones: pass 4). */
static int ns_dirseq_one(void *arg, const void *key, size_t klen,
			 const void *val, size_t vlen)
{
	struct ns_ctx *x = arg;
	const uint8_t *name;
	uint64_t child;
	size_t len;

	if (klen != 16 || ns_dirseq_decode(val, vlen, &child, &name, &len))
		return 0;
	x->err = ns_ents_add(x, &x->seqs, ns_key_ino((const uint8_t *)key + 8),
			     child, name, len);
	return x->err ? 1 : 0;
}

/* Order entries by seq, then name (qsort_r; arg: the names). */
static int ns_ent_cmp(const void *a, const void *b, void *arg)
{
	const struct ns_ent *ea = a, *eb = b;
	const char *names = arg;
	size_t l = ea->name_len < eb->name_len ? ea->name_len : eb->name_len;
	int c;

	if (ea->seq != eb->seq)
		return ea->seq < eb->seq ? -1 : 1;
	c = memcmp(names + ea->name_off, names + eb->name_off, l);
	if (c)
		return c;
	return (ea->name_len > eb->name_len) - (ea->name_len < eb->name_len);
}

/* An entry-shaped problem of directory d. */
static void ns_report_ent(struct ns_ctx *x, enum mgr_nscheck_kind kind,
			  uint64_t d, const struct ns_ent *e, uint64_t expected,
			  uint64_t found)
{
	struct mgr_nscheck_problem p = {
		.kind = kind, .ino = e->child, .parent = d,
		.name = x->names + e->name_off, .name_len = e->name_len,
		.seq = e->seq, .expected = expected, .found = found,
	};

	ns_report(x, &p);
}

/* Pass 2, after the dirents of d were read: count each into its child
 * (report those without one) and check its seq. In name order. */
static void ns_dir_count(struct ns_ctx *x, struct ns_ino *d)
{
	for (size_t i = 0; i < x->ents.n; i++) {
		const struct ns_ent *e = &x->ents.v[i];
		struct ns_ino *c = ns_find(x, e->child);

		if (!c) {
			ns_report_ent(x, MGR_NSCHECK_DANGLING, d->ino, e, 0, 0);
		} else {
			if (c->links < UINT32_MAX)
				c->links++;
			if (c->isdir) {
				d->subdirs++;
				if (!c->eparent)
					c->eparent = d->ino;
			}
		}
		if (e->seq < MGR_SEQ_FIRST || e->seq >= d->next_seq)
			ns_report_ent(x, MGR_NSCHECK_SEQ_RANGE, d->ino, e,
				      d->next_seq, e->seq);
	}
}

/* Pass 2: match d's entries and dirseq records by seq (both sorted). */
static void ns_dir_match(struct ns_ctx *x, const struct ns_ino *d)
{
	size_t i = 0, j = 0;

	if (x->ents.n > 1)
		qsort_r(x->ents.v, x->ents.n, sizeof(*x->ents.v), ns_ent_cmp,
			x->names);
	while (i < x->ents.n || j < x->seqs.n) {
		const struct ns_ent *e = i < x->ents.n ? &x->ents.v[i] : NULL;
		const struct ns_ent *s = j < x->seqs.n ? &x->seqs.v[j] : NULL;

		if (e && (!s || e->seq < s->seq)) {
			ns_report_ent(x, MGR_NSCHECK_NO_DIRSEQ, d->ino, e, 0, 0);
			i++;
		} else if (!e || s->seq < e->seq) {
			ns_report_ent(x, MGR_NSCHECK_DIRSEQ_STRAY, d->ino, s, 0, 0);
			j++;
		} else {
			if (e->name_len != s->name_len ||
			    memcmp(x->names + e->name_off, x->names + s->name_off,
				   e->name_len) ||
			    (s->child && s->child != e->child)) {
				struct mgr_nscheck_problem p = {
					.kind = MGR_NSCHECK_DIRSEQ_DIFFERS,
					.ino = e->child, .parent = d->ino,
					.name = x->names + e->name_off,
					.name_len = e->name_len,
					.other = x->names + s->name_off,
					.other_len = s->name_len,
					.seq = e->seq, .expected = e->child,
					.found = s->child,
				};

				ns_report(x, &p);
			}
			i++;
			j++;
		}
	}
}

/* Pass 2 for directory d: two range reads, then count and match.
 * @return 0, -ENOMEM, -EIO */
static int ns_dir(struct ns_ctx *x, struct ns_ino *d)
{
	uint64_t be = htobe64(d->ino);
	int rc;

	x->ents.n = x->seqs.n = x->nnames = 0;
	rc = mgr_kv_scan(x->kt, MGR_KV_DIRENTS, &be, 8, 8, ns_dirent_one, x);
	if (rc >= 0 && !x->err)
		rc = mgr_kv_scan(x->kt, MGR_KV_DIRSEQ, &be, 8, 8, ns_dirseq_one, x);
	if (x->err)
		return x->err;
	if (rc < 0)
		return rc;
	ns_dir_count(x, d);
	ns_dir_match(x, d);
	return 0;
}

/* Pass 3: the cycle at the end of path (from index from): one report
 * naming its least inode, every member marked. */
static void ns_cycle(struct ns_ctx *x, struct ns_ino **path, size_t from,
		     size_t n)
{
	struct mgr_nscheck_problem p = { .kind = MGR_NSCHECK_CYCLE,
					 .ino = UINT64_MAX, .found = n - from };

	for (size_t k = from; k < n; k++) {
		path[k]->cycle = 1;
		if (path[k]->ino < p.ino)
			p.ino = path[k]->ino;
	}
	ns_report(x, &p);
}

/* Pass 3 from directory start: follow the directories holding the entries
 * up to the root, a known directory, one without an entry, or a cycle; the
 * whole path gets the answer. path has room for every inode. */
static void ns_reach(struct ns_ctx *x, struct ns_ino *start,
		     struct ns_ino **path)
{
	struct ns_ino *cur = start;
	size_t n = 0;
	uint8_t res = NS_UNREACH;

	for (;;) {
		if (cur->state == NS_REACH || cur->state == NS_UNREACH) {
			res = cur->state;
			break;
		}
		if (cur->state == NS_ON_PATH) {
			size_t k = 0;

			while (path[k] != cur)
				k++;
			ns_cycle(x, path, k, n);
			break;
		}
		if (cur->ino == MGR_ROOT_INO) {
			res = NS_REACH;
			break;
		}
		cur->state = NS_ON_PATH;
		path[n++] = cur;
		cur = cur->eparent ? ns_find(x, cur->eparent) : NULL;
		if (!cur) /* no entry: not reachable */
			break;
	}
	if (cur && cur->ino == MGR_ROOT_INO)
		cur->state = NS_REACH;
	for (size_t k = 0; k < n; k++)
		path[k]->state = res;
}

/* Pass 4, per dirent: its parent must be a directory; children of
 * reachable directories are reachable. */
static int ns_gdirent_one(void *arg, const void *key, size_t klen,
			  const void *val, size_t vlen)
{
	struct ns_ctx *x = arg;
	struct ns_ino *p, *c;
	uint64_t dv[2];

	x->res->entries++;
	if (klen <= 8 || klen > 8 + PROTO_MAX_NAME || vlen != sizeof(dv)) {
		ns_bad(x, MGR_KV_DIRENTS, klen >= 8 ? ns_key_ino(key) : 0);
		return 0;
	}
	memcpy(dv, val, sizeof(dv));
	p = ns_find(x, ns_key_ino(key));
	if (!p || !p->isdir) {
		struct mgr_nscheck_problem pr = {
			.kind = MGR_NSCHECK_ENTRY_PARENT, .ino = dv[0],
			.table = MGR_KV_DIRENTS,
			.parent = ns_key_ino(key), .name = (const char *)key + 8,
			.name_len = klen - 8, .seq = dv[1],
		};

		ns_report(x, &pr);
		return 0;
	}
	c = ns_find(x, dv[0]);
	if (c && !c->isdir && p->state == NS_REACH)
		c->reached = 1;
	return 0;
}

/* Pass 4, per dirseq record: it must decode and its parent be a directory. */
static int ns_gdirseq_one(void *arg, const void *key, size_t klen,
			  const void *val, size_t vlen)
{
	struct ns_ctx *x = arg;
	const uint8_t *name;
	uint64_t child;
	size_t len;
	struct ns_ino *p;

	if (klen != 16 || ns_dirseq_decode(val, vlen, &child, &name, &len)) {
		ns_bad(x, MGR_KV_DIRSEQ, klen >= 8 ? ns_key_ino(key) : 0);
		return 0;
	}
	p = ns_find(x, ns_key_ino(key));
	if (!p || !p->isdir) {
		struct mgr_nscheck_problem pr = {
			.kind = MGR_NSCHECK_ENTRY_PARENT, .ino = child,
			.table = MGR_KV_DIRSEQ,
			.parent = ns_key_ino(key), .name = (const char *)name,
			.name_len = len,
			.seq = ns_key_ino((const uint8_t *)key + 8),
		};

		ns_report(x, &pr);
	}
	return 0;
}

/* Pass 5, per orphan mark: it must name an inode; mark it. */
static int ns_orphan_one(void *arg, const void *key, size_t klen,
			 const void *val, size_t vlen)
{
	struct ns_ctx *x = arg;
	struct ns_ino *i;

	(void)val;
	(void)vlen;
	if (klen != 8) {
		ns_bad(x, MGR_KV_ORPHANS, 0);
		return 0;
	}
	i = ns_find(x, ns_key_ino(key));
	if (i) {
		i->orphan = 1;
	} else {
		struct mgr_nscheck_problem p = { .kind = MGR_NSCHECK_ORPHAN_MISSING,
						 .ino = ns_key_ino(key) };

		ns_report(x, &p);
	}
	return 0;
}

/* Report kind for inode i with expected and found. */
static void ns_report_ino(struct ns_ctx *x, enum mgr_nscheck_kind kind,
			  const struct ns_ino *i, uint64_t expected,
			  uint64_t found)
{
	struct mgr_nscheck_problem p = { .kind = kind, .ino = i->ino,
					 .expected = expected, .found = found };

	ns_report(x, &p);
}

/* Pass 5: the rules of directory d. */
static void ns_check_dir(struct ns_ctx *x, const struct ns_ino *d)
{
	int root = d->ino == MGR_ROOT_INO;

	if ((uint64_t)d->nlink != 2 + (uint64_t)d->subdirs)
		ns_report_ino(x, MGR_NSCHECK_DIR_NLINK, d, 2 + (uint64_t)d->subdirs,
			      d->nlink);
	if (root ? d->links != 0 : d->links > 1)
		ns_report_ino(x, MGR_NSCHECK_DIR_LINKS, d, root ? 0 : 1, d->links);
	if (root ? d->parent != MGR_ROOT_INO :
		   d->eparent && d->parent != d->eparent)
		ns_report_ino(x, MGR_NSCHECK_DIR_PARENT, d,
			      root ? MGR_ROOT_INO : d->eparent, d->parent);
	if (d->orphan)
		ns_report_ino(x, MGR_NSCHECK_ORPHAN_DIR, d, 0, 0);
	else if (d->state != NS_REACH && !d->cycle)
		ns_report_ino(x, MGR_NSCHECK_LEAKED, d, 0, 0);
}

/* Pass 5: the rules of every inode, in inode order. */
static void ns_check_inodes(struct ns_ctx *x)
{
	for (size_t k = 0; k < x->n; k++) {
		const struct ns_ino *i = &x->inos[k];

		if (i->isdir) {
			ns_check_dir(x, i);
			continue;
		}
		if (i->nlink != i->links)
			ns_report_ino(x, MGR_NSCHECK_NLINK, i, i->links, i->nlink);
		if (i->orphan && i->nlink != 0)
			ns_report_ino(x, MGR_NSCHECK_ORPHAN_LINKED, i, 0, i->nlink);
		if (!i->reached && !i->orphan)
			ns_report_ino(x, MGR_NSCHECK_LEAKED, i, 0, 0);
	}
}

/* Pass 5, per xattr: its inode must exist (one report per inode). */
static int ns_xattr_one(void *arg, const void *key, size_t klen,
			const void *val, size_t vlen)
{
	struct ns_ctx *x = arg;
	uint64_t ino;

	(void)val;
	(void)vlen;
	if (klen <= 8) {
		ns_bad(x, MGR_KV_XATTRS, 0);
		return 0;
	}
	ino = ns_key_ino(key);
	if (ino != x->stray_ino && !ns_find(x, ino)) {
		struct mgr_nscheck_problem p = { .kind = MGR_NSCHECK_XATTR_STRAY,
						 .ino = ino };

		x->stray_ino = ino;
		ns_report(x, &p);
	}
	return 0;
}

/* Pass 5, per stale record: its inode must exist. */
static int ns_stale_one(void *arg, const void *key, size_t klen,
			const void *val, size_t vlen)
{
	struct ns_ctx *x = arg;
	const uint8_t *k = key;
	uint64_t ino;

	(void)val;
	(void)vlen;
	if (klen != 10) {
		ns_bad(x, MGR_KV_STALE, 0);
		return 0;
	}
	ino = ns_key_ino(k + 2);
	if (!ns_find(x, ino)) {
		struct mgr_nscheck_problem p = { .kind = MGR_NSCHECK_STALE_STRAY,
						 .ino = ino,
						 .iod = (uint16_t)(k[0] << 8 | k[1]) };

		ns_report(x, &p);
	}
	return 0;
}

/* A u64 of meta (def when missing). @return 0, -EIO (reported when the
 * record does not decode: then *v = def) */
static int ns_meta(struct ns_ctx *x, const char *key, uint64_t def,
		   uint64_t *v)
{
	const void *d;
	size_t dl;
	int rc = mgr_kv_get(x->kt, MGR_KV_META, key, strlen(key), &d, &dl);

	*v = def;
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (dl != 8)
		ns_bad(x, MGR_KV_META, 0);
	else
		memcpy(v, d, 8);
	return 0;
}

/* Pass 5: the counters in meta. @return 0, -EIO */
static int ns_check_meta(struct ns_ctx *x)
{
	uint64_t ninodes, next;
	int rc = ns_meta(x, "ninodes", 1, &ninodes);

	if (!rc)
		rc = ns_meta(x, "next_ino", MGR_ROOT_INO + 1, &next);
	if (rc)
		return rc;
	if (ninodes != x->nrec) {
		struct mgr_nscheck_problem p = { .kind = MGR_NSCHECK_NINODES,
						 .expected = x->nrec,
						 .found = ninodes };

		ns_report(x, &p);
	}
	if (next <= x->max_ino) {
		struct mgr_nscheck_problem p = { .kind = MGR_NSCHECK_NEXT_INO,
						 .ino = x->max_ino,
						 .expected = x->max_ino + 1,
						 .found = next };

		ns_report(x, &p);
	}
	return 0;
}

/* Walk every record of tbl with fn. @return 0, -ENOMEM, -EIO */
static int ns_walk(struct ns_ctx *x, enum mgr_kv_table tbl, mgr_kv_scan_fn fn)
{
	static const uint8_t none; /* from with flen 0: the first record (a
				    * non-NULL pointer for the backend's memcmp) */
	int rc = mgr_kv_scan(x->kt, tbl, &none, 0, 0, fn, x);

	if (x->err)
		return x->err;
	return rc < 0 ? rc : 0;
}

/* Passes 2 to 5 (pass 1 done). @return 0, -ENOMEM, -EIO */
static int ns_passes(struct ns_ctx *x)
{
	struct ns_ino *root = ns_find(x, MGR_ROOT_INO), **path;
	int rc = 0;

	if (!root || !root->isdir) {
		struct mgr_nscheck_problem p = { .kind = MGR_NSCHECK_NO_ROOT,
						 .ino = MGR_ROOT_INO };

		ns_report(x, &p);
	}
	for (size_t k = 0; k < x->n && !rc; k++)
		if (x->inos[k].isdir)
			rc = ns_dir(x, &x->inos[k]);
	if (rc)
		return rc;
	path = malloc((x->n ? x->n : 1) * sizeof(*path));
	if (!path)
		return -ENOMEM;
	for (size_t k = 0; k < x->n; k++)
		if (x->inos[k].isdir && x->inos[k].state == NS_UNKNOWN)
			ns_reach(x, &x->inos[k], path);
	free(path);
	rc = ns_walk(x, MGR_KV_DIRENTS, ns_gdirent_one);
	if (!rc)
		rc = ns_walk(x, MGR_KV_DIRSEQ, ns_gdirseq_one);
	if (!rc)
		rc = ns_walk(x, MGR_KV_ORPHANS, ns_orphan_one);
	if (rc)
		return rc;
	ns_check_inodes(x);
	rc = ns_walk(x, MGR_KV_XATTRS, ns_xattr_one);
	if (!rc)
		rc = ns_walk(x, MGR_KV_STALE, ns_stale_one);
	return rc ? rc : ns_check_meta(x);
}

/* See mgr_nscheck.h. */
int mgr_nscheck_txn(struct mgr_txn *txn, mgr_nscheck_fn fn, void *arg,
		    struct mgr_nscheck_result *res)
{
	struct ns_ctx x = { .fn = fn, .arg = arg, .res = res };
	int rc;

	memset(res, 0, sizeof(*res));
	x.kt = mgr_db_txn_kv(txn);
	rc = ns_walk(&x, MGR_KV_INODES, ns_inode_one);
	if (!rc)
		rc = ns_passes(&x);
	free(x.inos);
	free(x.ents.v);
	free(x.seqs.v);
	free(x.names);
	return rc;
}

/* See mgr_nscheck.h. */
int mgr_nscheck_run(struct mgr_db *db, mgr_nscheck_fn fn, void *arg,
		    struct mgr_nscheck_result *res)
{
	struct mgr_txn *txn;
	int rc = mgr_db_begin(db, 1, &txn);

	if (rc) {
		memset(res, 0, sizeof(*res));
		return rc;
	}
	rc = mgr_nscheck_txn(txn, fn, arg, res);
	mgr_db_abort(txn);
	return rc;
}

/* See mgr_nscheck.h. */
const char *mgr_nscheck_kind_name(enum mgr_nscheck_kind kind)
{
	static const char *const names[MGR_NSCHECK_NKINDS] = {
		[MGR_NSCHECK_BAD_RECORD] = "bad_record",
		[MGR_NSCHECK_NO_ROOT] = "no_root",
		[MGR_NSCHECK_DANGLING] = "dangling_entry",
		[MGR_NSCHECK_NO_DIRSEQ] = "missing_dirseq",
		[MGR_NSCHECK_DIRSEQ_DIFFERS] = "dirseq_differs",
		[MGR_NSCHECK_DIRSEQ_STRAY] = "stray_dirseq",
		[MGR_NSCHECK_SEQ_RANGE] = "seq_out_of_range",
		[MGR_NSCHECK_ENTRY_PARENT] = "entry_under_non_directory",
		[MGR_NSCHECK_DIR_NLINK] = "dir_nlink",
		[MGR_NSCHECK_DIR_LINKS] = "dir_linked_twice",
		[MGR_NSCHECK_DIR_PARENT] = "dir_parent",
		[MGR_NSCHECK_CYCLE] = "dir_cycle",
		[MGR_NSCHECK_NLINK] = "nlink",
		[MGR_NSCHECK_LEAKED] = "leaked_inode",
		[MGR_NSCHECK_ORPHAN_LINKED] = "orphan_mark_on_linked_inode",
		[MGR_NSCHECK_ORPHAN_DIR] = "orphan_mark_on_directory",
		[MGR_NSCHECK_ORPHAN_MISSING] = "orphan_mark_without_inode",
		[MGR_NSCHECK_XATTR_STRAY] = "xattrs_without_inode",
		[MGR_NSCHECK_STALE_STRAY] = "stale_record_without_inode",
		[MGR_NSCHECK_NINODES] = "ninodes",
		[MGR_NSCHECK_NEXT_INO] = "next_ino",
	};

	return (unsigned)kind < MGR_NSCHECK_NKINDS ? names[kind] : "unknown";
}

/* Quote name into buf as "..." with '"', '\\' and bytes outside printable
 * ASCII as \xHH. @return buf */
static const char *ns_quote(const char *name, size_t len, char *buf,
			    size_t cap)
{
	size_t o = 0;

	buf[o++] = '"';
	for (size_t i = 0; i < len && o + 6 < cap; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
			o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
		else
			buf[o++] = (char)c;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

/* The table names for BAD_RECORD. */
static const char *ns_table_name(enum mgr_kv_table t)
{
	static const char *const names[MGR_KV_NTABLES] = {
		"inodes", "dirents", "dirseq", "xattrs", "orphans", "meta",
		"stale",
	};

	return (unsigned)t < MGR_KV_NTABLES ? names[t] : "?";
}

/* Describe an entry's, a record's or the root's problem p; name quoted
 * in q. @return snprintf's, or -1: not one of those kinds */
static int ns_format_entry(const struct mgr_nscheck_problem *p,
			   const char *q, char *buf, size_t cap)
{
	char o[4 * PROTO_MAX_NAME + 8];
	unsigned long long ino = p->ino, par = p->parent, seq = p->seq,
			   exp = p->expected, fnd = p->found;

	switch (p->kind) {
	case MGR_NSCHECK_BAD_RECORD:
		return snprintf(buf, cap, "bad record: table %s, inode %llu: "
				"does not decode", ns_table_name(p->table), ino);
	case MGR_NSCHECK_NO_ROOT:
		return snprintf(buf, cap, "no root: inode 1 is missing or not a "
				"directory");
	case MGR_NSCHECK_DANGLING:
		return snprintf(buf, cap, "dangling entry: %llu/%s -> inode %llu: "
				"no such inode", par, q, ino);
	case MGR_NSCHECK_NO_DIRSEQ:
		return snprintf(buf, cap, "missing dirseq: entry %llu/%s (seq %llu) "
				"-> inode %llu has no dirseq record", par, q, seq, ino);
	case MGR_NSCHECK_DIRSEQ_DIFFERS:
		ns_quote(p->other, p->other_len, o, sizeof(o));
		return snprintf(buf, cap, "dirseq differs: dirseq %llu/seq %llu: "
				"expected %s -> inode %llu, found %s -> inode %llu%s",
				par, seq, q, exp, o, fnd, fnd ? "" : " (older record)");
	case MGR_NSCHECK_DIRSEQ_STRAY:
		if (!ino) /* an older record: the name alone */
			return snprintf(buf, cap, "stray dirseq: dirseq %llu/seq %llu "
					"-> %s: no entry has that seq", par, seq, q);
		return snprintf(buf, cap, "stray dirseq: dirseq %llu/seq %llu -> "
				"%s (inode %llu): no entry has that seq", par, seq, q,
				ino);
	case MGR_NSCHECK_SEQ_RANGE:
		return snprintf(buf, cap, "seq out of range: entry %llu/%s -> inode "
				"%llu: expected seq 3..%llu, found %llu", par, q, ino,
				exp ? exp - 1 : 0, fnd);
	case MGR_NSCHECK_ENTRY_PARENT:
		return snprintf(buf, cap, "entry under a non-directory: %s %llu/%s "
				"(seq %llu) -> inode %llu: inode %llu is missing or "
				"not a directory", p->table == MGR_KV_DIRSEQ ? "dirseq" :
				"entry", par, q, seq, ino, par);
	default:
		return -1;
	}
}

/* Describe an inode's, a mark's or a counter's problem p.
 * @return snprintf's */
static int ns_format_inode(const struct mgr_nscheck_problem *p, char *buf,
			   size_t cap)
{
	unsigned long long ino = p->ino, exp = p->expected, fnd = p->found;

	switch (p->kind) {
	case MGR_NSCHECK_DIR_NLINK:
		return snprintf(buf, cap, "dir nlink: directory %llu: expected "
				"nlink %llu (2 + subdirectories), found %llu", ino,
				exp, fnd);
	case MGR_NSCHECK_DIR_LINKS:
		return snprintf(buf, cap, "directory linked twice: directory %llu: "
				"expected %llu entries, found %llu", ino, exp, fnd);
	case MGR_NSCHECK_DIR_PARENT:
		return snprintf(buf, cap, "dir parent: directory %llu: expected "
				"parent %llu (the directory holding its entry), "
				"found %llu", ino, exp, fnd);
	case MGR_NSCHECK_CYCLE:
		return snprintf(buf, cap, "directory cycle: %llu directories, "
				"least inode %llu: not reachable from the root", fnd,
				ino);
	case MGR_NSCHECK_NLINK:
		return snprintf(buf, cap, "nlink: inode %llu: expected nlink %llu "
				"(its entries), found %llu", ino, exp, fnd);
	case MGR_NSCHECK_LEAKED:
		return snprintf(buf, cap, "leaked inode: inode %llu: not reachable "
				"from the root and no orphan mark", ino);
	case MGR_NSCHECK_ORPHAN_LINKED:
		return snprintf(buf, cap, "orphan mark on a linked inode: inode %llu:"
				" expected nlink 0, found %llu", ino, fnd);
	case MGR_NSCHECK_ORPHAN_DIR:
		return snprintf(buf, cap, "orphan mark on a directory: inode %llu",
				ino);
	case MGR_NSCHECK_ORPHAN_MISSING:
		return snprintf(buf, cap, "orphan mark without inode: inode %llu: "
				"no such inode", ino);
	case MGR_NSCHECK_XATTR_STRAY:
		return snprintf(buf, cap, "xattrs without inode: inode %llu: no such "
				"inode", ino);
	case MGR_NSCHECK_STALE_STRAY:
		return snprintf(buf, cap, "stale record without inode: iod %u, "
				"inode %llu: no such inode", p->iod, ino);
	case MGR_NSCHECK_NINODES:
		return snprintf(buf, cap, "ninodes: meta ninodes: expected %llu (the "
				"inodes counted), found %llu", exp, fnd);
	case MGR_NSCHECK_NEXT_INO:
		return snprintf(buf, cap, "next_ino: meta next_ino: expected at least "
				"%llu (above inode %llu), found %llu", exp, ino, fnd);
	default:
		break;
	}
	return snprintf(buf, cap, "unknown problem %d", (int)p->kind);
}

/* See mgr_nscheck.h. */
int mgr_nscheck_format(const struct mgr_nscheck_problem *p, char *buf,
		       size_t cap)
{
	char q[4 * PROTO_MAX_NAME + 8];
	int n;

	if (p->name)
		ns_quote(p->name, p->name_len, q, sizeof(q));
	else
		q[0] = '\0';
	n = ns_format_entry(p, q, buf, cap);
	return n >= 0 ? n : ns_format_inode(p, buf, cap);
}
