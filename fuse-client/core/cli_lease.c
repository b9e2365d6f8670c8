/* cli_lease.c - the mount's record of its READ leases; see cli_lease.h. */
#include "cli_lease.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LT_BUCKETS 65536 /* names, and directories, hashed */

/* A name given to the kernel with a long timeout. */
struct lt_name {
	uint64_t dir;
	struct lt_name *next;  /* hash chain, or a detached list */
	struct lt_name *dnext, **dprev; /* its directory's list */
	uint16_t len;
	char name[];
};

/* A directory with names recorded, or an invalidation handled. */
struct lt_dir {
	uint64_t ino;
	uint64_t inval_seq;    /* the last invalidation's event number */
	uint64_t held_since;   /* the caller's clock when the lease began
				* (cli_lease_take); 0: not held */
	struct lt_name *names; /* the names recorded in it */
	struct lt_dir *next;
};

struct cli_lease {
	pthread_mutex_t mu;
	uint64_t gen;                       /* mu */
	size_t nnames, max_names;           /* mu; max_names read-only */
	struct lt_name *names[LT_BUCKETS];  /* mu */
	struct lt_dir *dirs[LT_BUCKETS];    /* mu */
};

/* FNV-1a of dir and name, into a bucket. */
static size_t lt_hash(uint64_t dir, const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ dir;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)name[i]) * 0x100000001b3ull;
	return (size_t)(h ^ (h >> 32)) % LT_BUCKETS;
}

/* The bucket of a directory. */
static size_t lt_dhash(uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 48) % LT_BUCKETS;
}

/* See cli_lease.h. */
int cli_lease_new(struct cli_lease **out, size_t max_names)
{
	struct cli_lease *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->mu, NULL);
	t->gen = 1;
	t->max_names = max_names ? max_names : CLI_LEASE_MAX_NAMES;
	*out = t;
	return 0;
}

/* A detached record: a directory whose lease was held (name empty). */
static struct lt_name *lt_held_dir(uint64_t ino, struct lt_name *next)
{
	struct lt_name *n = calloc(1, sizeof(*n));

	if (n) {
		n->dir = ino;
		n->next = next;
	}
	return n;
}

/* Detach every name into one list, with a record for each directory whose
 * lease was held, and free every directory (mu held). Without memory for
 * a directory's record, its attributes keep their kernel timeout. */
static struct lt_name *lt_detach(struct cli_lease *t)
{
	struct lt_name *all = NULL, *n;
	struct lt_dir *d;

	for (size_t b = 0; b < LT_BUCKETS; b++) {
		while ((n = t->names[b])) {
			t->names[b] = n->next;
			n->next = all;
			all = n;
		}
		while ((d = t->dirs[b])) {
			t->dirs[b] = d->next;
			if (d->held_since && (n = lt_held_dir(d->ino, all)))
				all = n;
			free(d);
		}
	}
	t->nnames = 0;
	return all;
}

/* Call fn (unless NULL) for each name of a detached list (a directory's
 * own record has no name: its attributes), and free them. Without the
 * lock: fn invalidates the kernel's entries. */
static void lt_hand_back(struct lt_name *all, cli_lease_each_fn fn, void *arg)
{
	struct lt_name *n;

	for (; all; all = n) {
		n = all->next;
		if (fn)
			fn(all->dir, all->len ? all->name : NULL, all->len, arg);
		free(all);
	}
}

/* See cli_lease.h. */
void cli_lease_free(struct cli_lease *t)
{
	if (!t)
		return;
	lt_hand_back(lt_detach(t), NULL, NULL);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

/* See cli_lease.h. */
uint64_t cli_lease_gen(struct cli_lease *t)
{
	uint64_t g;

	pthread_mutex_lock(&t->mu);
	g = t->gen;
	pthread_mutex_unlock(&t->mu);
	return g;
}

/* The directory record of ino, or NULL (mu held). */
static struct lt_dir *lt_dir_find(struct cli_lease *t, uint64_t ino)
{
	struct lt_dir *d = t->dirs[lt_dhash(ino)];

	while (d && d->ino != ino)
		d = d->next;
	return d;
}

/* The directory record of ino, made if missing; NULL without memory
 * (mu held). */
static struct lt_dir *lt_dir_get(struct cli_lease *t, uint64_t ino)
{
	struct lt_dir *d = lt_dir_find(t, ino);
	size_t b = lt_dhash(ino);

	if (d || !(d = calloc(1, sizeof(*d))))
		return d;
	d->ino = ino;
	d->next = t->dirs[b];
	t->dirs[b] = d;
	return d;
}

/* Unlink name n from its hash chain (at pp) and its directory's list, and
 * free it (mu held). */
static void lt_name_drop(struct cli_lease *t, struct lt_name **pp)
{
	struct lt_name *n = *pp;

	*pp = n->next;
	if (n->dnext)
		n->dnext->dprev = n->dprev;
	*n->dprev = n->dnext;
	t->nnames--;
	free(n);
}

/* The link to the name's record, or to the NULL ending its chain (mu). */
static struct lt_name **lt_name_find(struct cli_lease *t, uint64_t dir,
				     const char *name, size_t len)
{
	struct lt_name **pp = &t->names[lt_hash(dir, name, len)];

	while (*pp && ((*pp)->dir != dir || (*pp)->len != len ||
		       memcmp((*pp)->name, name, len)))
		pp = &(*pp)->next;
	return pp;
}

/* See cli_lease.h. */
int cli_lease_take(struct cli_lease *t, uint64_t gen, int live,
		   const struct proto_grant *g, uint64_t dir,
		   const char *name, size_t len, uint64_t clock)
{
	struct lt_name **pp, *n;
	struct lt_dir *d;
	int ok = 0;

	if (!live || !g || g->ino != dir || !dir || len == 0 ||
	    len > PROTO_MAX_NAME)
		return 0;
	pthread_mutex_lock(&t->mu);
	d = lt_dir_find(t, dir);
	if (t->gen != gen || (d && d->inval_seq > g->evseq))
		goto out_unlock;
	if (!d && !(d = lt_dir_get(t, dir)))
		goto out_unlock;
	if (!d->held_since)
		d->held_since = clock ? clock : 1;
	pp = lt_name_find(t, dir, name, len);
	if (*pp) {
		ok = 1;
		goto out_unlock;
	}
	if (t->nnames >= t->max_names)
		goto out_unlock;
	n = malloc(sizeof(*n) + len);
	if (!n)
		goto out_unlock;
	n->dir = dir;
	n->len = (uint16_t)len;
	memcpy(n->name, name, len);
	n->next = NULL;
	*pp = n;
	n->dnext = d->names;
	if (d->names)
		d->names->dprev = &n->dnext;
	n->dprev = &d->names;
	d->names = n;
	t->nnames++;
	ok = 1;
out_unlock:
	pthread_mutex_unlock(&t->mu);
	return ok;
}

/* See cli_lease.h. */
void cli_lease_inval(struct cli_lease *t, uint64_t dir, const char *name,
		     size_t len, uint64_t seq)
{
	struct lt_name **pp;
	struct lt_dir *d;

	pthread_mutex_lock(&t->mu);
	d = lt_dir_get(t, dir);
	if (d && seq > d->inval_seq)
		d->inval_seq = seq;
	if (!d) /* no memory to remember it: void every grant instead */
		t->gen++;
	pp = lt_name_find(t, dir, name, len);
	if (*pp)
		lt_name_drop(t, pp);
	pthread_mutex_unlock(&t->mu);
}

/* See cli_lease.h. */
void cli_lease_recall(struct cli_lease *t, uint64_t dir, uint64_t seq,
		      cli_lease_each_fn fn, void *arg)
{
	struct lt_name *all = NULL, *n;
	struct lt_dir *d;

	pthread_mutex_lock(&t->mu);
	d = lt_dir_get(t, dir);
	if (d && seq > d->inval_seq)
		d->inval_seq = seq;
	if (!d)
		t->gen++;
	if (d && d->held_since && (n = lt_held_dir(dir, all)))
		all = n; /* its attributes go too */
	if (d)
		d->held_since = 0;
	while (d && (n = d->names)) {
		struct lt_name **pp = lt_name_find(t, dir, n->name, n->len);

		*pp = n->next; /* off the hash chain, then off d's list */
		d->names = n->dnext;
		if (n->dnext)
			n->dnext->dprev = &d->names;
		t->nnames--;
		n->next = all;
		all = n;
	}
	pthread_mutex_unlock(&t->mu);
	lt_hand_back(all, fn, arg);
}

/* See cli_lease.h. */
void cli_lease_reset(struct cli_lease *t, cli_lease_each_fn fn, void *arg)
{
	struct lt_name *all;

	pthread_mutex_lock(&t->mu);
	t->gen++;
	all = lt_detach(t);
	pthread_mutex_unlock(&t->mu);
	lt_hand_back(all, fn, arg);
}

/* See cli_lease.h. */
int cli_lease_dir_held(struct cli_lease *t, uint64_t dir, int live,
		       uint64_t *since)
{
	struct lt_dir *d;
	int held = 0;

	if (!live)
		return 0;
	pthread_mutex_lock(&t->mu);
	d = lt_dir_find(t, dir);
	if (d && d->held_since) {
		*since = d->held_since;
		held = 1;
	}
	pthread_mutex_unlock(&t->mu);
	return held;
}

/* See cli_lease.h. */
size_t cli_lease_names(struct cli_lease *t)
{
	size_t n;

	pthread_mutex_lock(&t->mu);
	n = t->nnames;
	pthread_mutex_unlock(&t->mu);
	return n;
}
