/*
 * cli_inode.c - the inode table: a chained hash of inode number to entry,
 * protected by one mutex. Entries live while the kernel holds a lookup
 * reference or the file is open.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli_inode.h"

/* One inode known to this client. All fields: protected by itab.lock. */
struct cli_inode {
	struct cli_inode *next;    /* hash chain */
	uint64_t ino;
	uint64_t nlookup;          /* kernel references */
	uint32_t nopen;            /* open file handles */
	int dirty;                 /* written since the last SETSIZE */
	int removed;               /* last link gone: remove at last release */
	uint64_t mgr_size;         /* size last reported by the mgr */
	uint64_t wsize;            /* highest byte written here and not yet
				    * acknowledged by the mgr, exclusive; 0 once
				    * the mgr's size covers it */
	struct proto_time wtime;   /* when the last write completed */
	struct proto_layout layout;/* zero unless a regular file */
	struct proto_attr attr;    /* last attributes from the mgr */
	uint64_t gen;              /* FUSE generation of the kernel inode */
	uint64_t ksize;            /* size the kernel inode holds (writeback
				    * cache: it ignores sizes in replies) */
	uint64_t size_clock;       /* itab clock at the last local size event
				    * (SETSIZE acknowledged, truncate): a mgr
				    * reply to a request sent before it
				    * carries a stale size */
	uint64_t attr_ns;          /* CLOCK_MONOTONIC when attr came from a
				    * mgr reply; 0: attr is not to be served
				    * from here (cli_inode_fresh_attr) */
	uint64_t attr_epoch;       /* itab epoch then: attr holds only while
				    * it is the table's */
	uint64_t attr_clock;       /* itab clock at the last change of this
				    * mount's own folded into attr
				    * (cli_inode_dir_created) */
	uint64_t attr_since;       /* itab clock when the request that
				    * brought attr was sent */
};

struct cli_itab {
	pthread_mutex_t lock;
	struct cli_inode **buckets;/* protected by lock */
	size_t nbuckets;           /* power of two; protected by lock */
	size_t count;              /* protected by lock */
	int wb;                    /* kernel writeback cache on; set before
				    * the mount serves requests */
	uint64_t clock;            /* counts local size events and the
				    * directory changes of cli_inode_dir_created;
				    * protected by lock */
	uint64_t epoch;            /* moved by every change of this mount
				    * that cached attributes do not follow
				    * (cli_itab_attr_changed); protected by lock */
	uint64_t attr_ttl_ns;      /* how long a directory's attributes may be
				    * served from here (attr_timeout); set
				    * before the mount serves requests */
};

#define ITAB_INIT_BUCKETS 1024

/* Bucket of ino (Fibonacci hashing spreads sequential inode numbers). */
static size_t hash_ino(const struct cli_itab *t, uint64_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) >> 20) & (t->nbuckets - 1);
}

/* Create the table: see cli_inode.h. */
int cli_itab_new(struct cli_itab **out)
{
	struct cli_itab *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->nbuckets = ITAB_INIT_BUCKETS;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	if (!t->buckets) {
		free(t);
		return -ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return 0;
}

/* Free the table: see cli_inode.h. */
void cli_itab_free(struct cli_itab *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct cli_inode *e = t->buckets[i], *n;

		for (; e; e = n) {
			n = e->next;
			free(e);
		}
	}
	pthread_mutex_destroy(&t->lock);
	free(t->buckets);
	free(t);
}

/* Find ino. Caller holds the lock. */
static struct cli_inode *find(struct cli_itab *t, uint64_t ino)
{
	struct cli_inode *e = t->buckets[hash_ino(t, ino)];

	while (e && e->ino != ino)
		e = e->next;
	return e;
}

/* Double the bucket array when the load passes 2; on allocation failure
 * keep the old one (longer chains, still correct). Caller holds the lock. */
static void grow(struct cli_itab *t)
{
	size_t nb = t->nbuckets * 2;
	struct cli_inode **b = calloc(nb, sizeof(*b));
	struct cli_inode **old = t->buckets;
	size_t onb = t->nbuckets;

	if (!b)
		return;
	t->buckets = b;
	t->nbuckets = nb;
	for (size_t i = 0; i < onb; i++) {
		struct cli_inode *e = old[i], *n;

		for (; e; e = n) {
			size_t h = hash_ino(t, e->ino);

			n = e->next;
			e->next = b[h];
			b[h] = e;
		}
	}
	free(old);
}

/* Find or create ino. Caller holds the lock. @return entry or NULL (ENOMEM) */
static struct cli_inode *get(struct cli_itab *t, uint64_t ino)
{
	struct cli_inode *e = find(t, ino);
	size_t h;

	if (e)
		return e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->ino = ino;
	e->gen = 1;
	if (t->count >= t->nbuckets * 2)
		grow(t);
	h = hash_ino(t, ino);
	e->next = t->buckets[h];
	t->buckets[h] = e;
	t->count++;
	return e;
}

/* Unlink and free e if nothing references it any more. Caller holds lock. */
static void maybe_drop(struct cli_itab *t, struct cli_inode *e)
{
	struct cli_inode **pp;

	if (e->nlookup || e->nopen)
		return;
	pp = &t->buckets[hash_ino(t, e->ino)];
	while (*pp != e)
		pp = &(*pp)->next;
	*pp = e->next;
	t->count--;
	free(e);
}

/* The size this client reports: max(mgr size, written size). */
static uint64_t view_size(const struct cli_inode *e)
{
	return e->wsize > e->mgr_size ? e->wsize : e->mgr_size;
}

/* CLOCK_MONOTONIC in nanoseconds. */
static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Take mgr attributes into e and adjust attr->size. The size is taken only
 * if the request was sent (clock value since) after e's last local size
 * event: a GETATTR sent before a SETSIZE of ours can be answered after it,
 * and its older size would otherwise shrink what reads see below what
 * the kernel already holds (it then zero-fills and shrinks its own size,
 * and the next append lands at the wrong offset). Likewise the attributes
 * may be served from here (cli_inode_fresh_attr) only if the request was
 * sent after the last change this mount folded into them. Caller holds
 * lock.
 */
static void merge(struct cli_itab *t, struct cli_inode *e,
		  struct proto_attr *attr, uint64_t since)
{
	if (since >= e->size_clock)
		e->mgr_size = attr->size;
	e->layout = attr->layout;
	e->attr = *attr;
	e->attr_ns = since >= e->attr_clock ? mono_ns() : 0;
	e->attr_since = since;
	e->attr_epoch = t->epoch;
	attr->size = view_size(e);
}

/* Merge attributes: see cli_inode.h. */
int cli_inode_update(struct cli_itab *t, struct proto_attr *attr,
		     uint64_t nlookup, uint64_t since)
{
	struct cli_inode *e;
	int rc = 0;

	pthread_mutex_lock(&t->lock);
	e = nlookup ? get(t, attr->ino) : find(t, attr->ino);
	if (e) {
		int fresh = !e->nlookup && !e->nopen;

		e->nlookup += nlookup;
		merge(t, e, attr, since);
		if (nlookup && t->wb && S_ISREG(attr->mode)) {
			if (!fresh && !e->nopen && e->ksize != attr->size)
				e->gen++; /* the kernel makes a new inode */
			if (fresh || e->ksize != attr->size)
				e->ksize = attr->size;
		}
	} else if (nlookup) {
		rc = -ENOMEM;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* Pin: see cli_inode.h. */
int cli_inode_pin(struct cli_itab *t, uint64_t ino)
{
	struct cli_inode *e;

	pthread_mutex_lock(&t->lock);
	e = get(t, ino);
	if (e)
		e->nlookup++;
	pthread_mutex_unlock(&t->lock);
	return e ? 0 : -ENOMEM;
}

/* Forget: see cli_inode.h. */
void cli_inode_forget(struct cli_itab *t, uint64_t ino, uint64_t nlookup)
{
	struct cli_inode *e;

	pthread_mutex_lock(&t->lock);
	e = find(t, ino);
	if (e) {
		e->nlookup = e->nlookup > nlookup ? e->nlookup - nlookup : 0;
		maybe_drop(t, e);
	}
	pthread_mutex_unlock(&t->lock);
}

/* Open: see cli_inode.h. */
int cli_inode_open(struct cli_itab *t, struct proto_attr *attr,
		   uint64_t since)
{
	struct cli_inode *e;
	int rc = 0;

	pthread_mutex_lock(&t->lock);
	e = get(t, attr->ino);
	if (e) {
		e->nopen++;
		merge(t, e, attr, since);
	} else {
		rc = -ENOMEM;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* Release: see cli_inode.h. */
int cli_inode_release(struct cli_itab *t, uint64_t ino,
		      struct proto_layout *rm)
{
	struct cli_inode *e;
	int ret = 0;

	pthread_mutex_lock(&t->lock);
	e = find(t, ino);
	if (e) {
		if (e->nopen)
			e->nopen--;
		if (e->nopen == 0 && e->removed) {
			e->removed = 0;
			*rm = e->layout;
			ret = 1;
		}
		maybe_drop(t, e);
	}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/* I/O parameters: see cli_inode.h. */
int cli_inode_io(struct cli_itab *t, uint64_t ino, struct proto_layout *l,
		 uint64_t *size)
{
	struct cli_inode *e;
	int rc = -ENOENT;

	pthread_mutex_lock(&t->lock);
	e = find(t, ino);
	if (e && e->layout.unit) {
		*l = e->layout;
		*size = view_size(e);
		rc = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* Wrote: see cli_inode.h. */
void cli_inode_wrote(struct cli_itab *t, uint64_t ino, uint64_t end,
		     const struct proto_time *when)
{
	struct cli_inode *e;

	pthread_mutex_lock(&t->lock);
	e = find(t, ino);
	if (e) {
		if (end > e->wsize)
			e->wsize = end;
		if (end > e->ksize)
			e->ksize = end;
		e->wtime = *when;
		e->dirty = 1;
	}
	pthread_mutex_unlock(&t->lock);
}

/* Take dirty: see cli_inode.h. */
int cli_inode_take_dirty(struct cli_itab *t, uint64_t ino, uint64_t *size,
			 struct proto_time *mtime)
{
	struct cli_inode *e;
	int ret = 0;

	pthread_mutex_lock(&t->lock);
	e = find(t, ino);
	if (e && e->dirty) {
		e->dirty = 0;
		*size = e->wsize;
		*mtime = e->wtime;
		ret = 1;
	}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/* Pushed: see cli_inode.h. */
void cli_inode_pushed(struct cli_itab *t, struct proto_attr *attr,
		      uint64_t size, uint64_t since)
{
	struct cli_inode *e;

	pthread_mutex_lock(&t->lock);
	e = find(t, attr->ino);
	if (e) {
		merge(t, e, attr, since);
		if (!e->dirty && e->wsize <= size)
			e->wsize = 0;
		e->size_clock = ++t->clock;
	}
	pthread_mutex_unlock(&t->lock);
}

/* Push failed: see cli_inode.h. */
void cli_inode_push_failed(struct cli_itab *t, uint64_t ino)
{
	struct cli_inode *e;

	pthread_mutex_lock(&t->lock);
	e = find(t, ino);
	if (e)
		e->dirty = 1;
	pthread_mutex_unlock(&t->lock);
}

/* Truncated: see cli_inode.h. */
void cli_inode_truncated(struct cli_itab *t, uint64_t ino, uint64_t size)
{
	struct cli_inode *e;

	pthread_mutex_lock(&t->lock);
	e = find(t, ino);
	if (e) {
		e->mgr_size = size;
		e->attr.size = size;
		e->ksize = size;
		e->wsize = 0;
		e->dirty = 0;
		e->size_clock = ++t->clock;
	}
	pthread_mutex_unlock(&t->lock);
}

/* Set layout: see cli_inode.h. */
void cli_inode_set_layout(struct cli_itab *t, uint64_t ino,
			  const struct proto_layout *l)
{
	struct cli_inode *e;

	pthread_mutex_lock(&t->lock);
	e = find(t, ino);
	if (e)
		e->layout = *l;
	pthread_mutex_unlock(&t->lock);
}

/* Unlinked: see cli_inode.h. */
int cli_inode_unlinked(struct cli_itab *t, uint64_t ino,
		       const struct proto_layout *l)
{
	struct cli_inode *e;
	int ret = 1;

	pthread_mutex_lock(&t->lock);
	e = find(t, ino);
	if (e) {
		e->attr.nlink = 0;
		if (e->nopen) {
			e->removed = 1;
			e->layout = *l;
			ret = 0;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/* Cached attributes: see cli_inode.h. */
int cli_inode_cached_attr(struct cli_itab *t, uint64_t ino,
			  struct proto_attr *attr)
{
	struct cli_inode *e;
	int rc = -ENOENT;

	pthread_mutex_lock(&t->lock);
	e = find(t, ino);
	if (e && e->attr.ino) {
		*attr = e->attr;
		attr->size = view_size(e);
		if (e->removed)
			attr->nlink = 0;
		rc = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* Clock: see cli_inode.h. */
uint64_t cli_itab_clock(struct cli_itab *t)
{
	uint64_t c;

	pthread_mutex_lock(&t->lock);
	c = t->clock;
	pthread_mutex_unlock(&t->lock);
	return c;
}

/* See cli_inode.h. */
uint64_t cli_itab_tick(struct cli_itab *t)
{
	uint64_t c;

	pthread_mutex_lock(&t->lock);
	c = ++t->clock;
	pthread_mutex_unlock(&t->lock);
	return c;
}

/* Writeback mode: see cli_inode.h. */
void cli_itab_set_writeback(struct cli_itab *t, int on)
{
	pthread_mutex_lock(&t->lock);
	t->wb = on;
	pthread_mutex_unlock(&t->lock);
}

/* Writeback mode: see cli_inode.h. */
int cli_itab_writeback(struct cli_itab *t)
{
	int on;

	pthread_mutex_lock(&t->lock);
	on = t->wb;
	pthread_mutex_unlock(&t->lock);
	return on;
}

/* Generation: see cli_inode.h. */
uint64_t cli_inode_gen(struct cli_itab *t, uint64_t ino)
{
	struct cli_inode *e;
	uint64_t gen = 1;

	pthread_mutex_lock(&t->lock);
	e = find(t, ino);
	if (e)
		gen = e->gen;
	pthread_mutex_unlock(&t->lock);
	return gen;
}

/* Attribute time to live: see cli_inode.h. */
void cli_itab_set_attr_ttl(struct cli_itab *t, double seconds)
{
	pthread_mutex_lock(&t->lock);
	t->attr_ttl_ns = seconds > 0 ? (uint64_t)(seconds * 1e9) : 0;
	pthread_mutex_unlock(&t->lock);
}

/* Whether e's attributes are the mgr's as of less than the TTL ago, plus
 * this mount's own changes since, and the table has seen no change they do
 * not follow. Caller holds lock. */
static int attr_trusted(const struct cli_itab *t, const struct cli_inode *e,
			uint64_t now)
{
	return e->attr_ns && e->attr_epoch == t->epoch &&
	       now - e->attr_ns < t->attr_ttl_ns;
}

/* A name created in a directory: see cli_inode.h. */
void cli_inode_dir_created(struct cli_itab *t, uint64_t parent,
			   const struct proto_attr *child)
{
	struct cli_inode *e;

	pthread_mutex_lock(&t->lock);
	e = find(t, parent);
	if (e && S_ISDIR(e->attr.mode) && attr_trusted(t, e, mono_ns())) {
		struct proto_time *m = &e->attr.mtime;

		if (child->ctime.sec > m->sec ||
		    (child->ctime.sec == m->sec && child->ctime.nsec > m->nsec))
			*m = child->ctime;
		e->attr.ctime = *m;
		if (S_ISDIR(child->mode))
			e->attr.nlink++;
		e->attr_clock = ++t->clock;
	}
	pthread_mutex_unlock(&t->lock);
}

/* A change cached attributes do not follow: see cli_inode.h. */
void cli_itab_attr_changed(struct cli_itab *t)
{
	pthread_mutex_lock(&t->lock);
	t->epoch++;
	pthread_mutex_unlock(&t->lock);
}

/* Fresh directory attributes: see cli_inode.h. */
int cli_inode_leased_attr(struct cli_itab *t, uint64_t ino, uint64_t since,
			  struct proto_attr *attr)
{
	struct cli_inode *e;
	int rc = -ENOENT;

	pthread_mutex_lock(&t->lock);
	e = find(t, ino);
	if (e && S_ISDIR(e->attr.mode) && e->attr_ns &&
	    e->attr_epoch == t->epoch && e->attr_since >= since) {
		*attr = e->attr;
		rc = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* See cli_inode.h. */
int cli_inode_fresh_attr(struct cli_itab *t, uint64_t ino,
			 struct proto_attr *attr, double *ttl)
{
	struct cli_inode *e;
	uint64_t now = mono_ns();
	int rc = -ENOENT;

	pthread_mutex_lock(&t->lock);
	e = find(t, ino);
	if (e && S_ISDIR(e->attr.mode) && attr_trusted(t, e, now)) {
		*attr = e->attr;
		*ttl = (double)(t->attr_ttl_ns - (now - e->attr_ns)) / 1e9;
		rc = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}
