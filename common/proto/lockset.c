/* lockset.c - byte-range lock sets with POSIX split/merge semantics,
 * indexed by owner and, per file, by range (treaps). See lockset.h. */
#include "lockset.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define LS_HASH_MIN 64 /* buckets of a hash's first table */

/* A hash chain link; first member of struct ls_file and struct ls_owner. */
struct ls_hnode {
	struct ls_hnode *next;
	uint64_t h;                /* the key's hash */
};

/* The locks of one kind on one inode (of every owner). */
struct ls_file {
	struct ls_hnode hn;        /* in lockset.files */
	uint64_t ino;
	uint8_t kind;
	struct lockset_lock *tree[2]; /* range trees: [0] read, [1] write locks */
	size_t nowners;            /* owners with locks here; freed at 0 */
	size_t nlocks;             /* locks in the trees */
	size_t ngone;              /* of which marked gone (a drop runs) */
	struct lockset_lock *gone; /* those, onext list */
	struct ls_file *gnext;     /* list of files with locks marked gone */
};

/* The locks of one owner of one kind on one inode (disjoint ranges). */
struct ls_owner {
	struct ls_hnode hn;        /* in lockset.owners */
	uint64_t ino, session, owner;
	uint8_t kind;
	struct ls_file *file;
	struct lockset_lock *locks; /* onext list, unordered */
	size_t n;                  /* locks in it; freed at 0 */
};

/* ------------------------------------------------------------ hashing */

/* A 64-bit mix (splitmix64's finalizer): every key bit moves every bit. */
static uint64_t ls_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Hash of a file key. */
static uint64_t ls_hfile(uint64_t ino, uint8_t kind)
{
	return ls_mix(ino ^ ((uint64_t)kind << 56));
}

/* Hash of an owner key. */
static uint64_t ls_howner(uint64_t ino, uint8_t kind, uint64_t session,
			  uint64_t owner)
{
	return ls_mix(ls_mix(ls_hfile(ino, kind) ^ session) ^ owner);
}

/* The first node of h's chain for hash v (NULL: empty or no table). */
static struct ls_hnode *ls_chain(const struct ls_hash *h, uint64_t v)
{
	return h->nb ? h->bucket[v & (h->nb - 1)] : NULL;
}

/*
 * Make room for one more node: the first table, or a table twice the size
 * once there are as many nodes as buckets. A failed doubling is no error
 * (chains grow longer); only a failed first table is.
 * @return 0, -ENOMEM
 */
static int ls_hash_reserve(struct ls_hash *h)
{
	size_t nb = h->nb ? h->nb * 2 : LS_HASH_MIN;
	struct ls_hnode **nbk;

	if (h->nb && h->n < h->nb)
		return 0;
	nbk = calloc(nb, sizeof(*nbk));
	if (!nbk)
		return h->nb ? 0 : -ENOMEM;
	for (size_t b = 0; b < h->nb; b++) {
		struct ls_hnode *e = h->bucket[b], *nx;

		for (; e; e = nx) {
			nx = e->next;
			e->next = nbk[e->h & (nb - 1)];
			nbk[e->h & (nb - 1)] = e;
		}
	}
	free(h->bucket);
	h->bucket = nbk;
	h->nb = nb;
	return 0;
}

/* Link e (its hash set) into h, which has a table (ls_hash_reserve). */
static void ls_hash_insert(struct ls_hash *h, struct ls_hnode *e)
{
	struct ls_hnode **b = &h->bucket[e->h & (h->nb - 1)];

	e->next = *b;
	*b = e;
	h->n++;
}

/* Unlink e from h. Cost: its chain. */
static void ls_hash_remove(struct ls_hash *h, struct ls_hnode *e)
{
	struct ls_hnode **pp = &h->bucket[e->h & (h->nb - 1)];

	while (*pp && *pp != e)
		pp = &(*pp)->next;
	if (*pp) {
		*pp = e->next;
		h->n--;
	}
}

/* ------------------------------------------------------------- treaps */

/* Tree order: by start, ties by address (every node has its own key). */
static bool ls_less(const struct lockset_lock *a, const struct lockset_lock *b)
{
	return a->start < b->start ||
	       (a->start == b->start && (uintptr_t)a < (uintptr_t)b);
}

/* Recompute n's largest end from its children. */
static void ls_upd(struct lockset_lock *n)
{
	uint64_t m = n->end;

	if (n->left && n->left->max_end > m)
		m = n->left->max_end;
	if (n->right && n->right->max_end > m)
		m = n->right->max_end;
	n->max_end = m;
}

/* Split t into the nodes before key (*l) and the rest (*r). */
static void ls_split(struct lockset_lock *t, const struct lockset_lock *key,
		     struct lockset_lock **l, struct lockset_lock **r)
{
	if (!t) {
		*l = *r = NULL;
		return;
	}
	if (ls_less(t, key)) {
		ls_split(t->right, key, &t->right, r);
		*l = t;
	} else {
		ls_split(t->left, key, l, &t->left);
		*r = t;
	}
	ls_upd(t);
}

/* Join a and b, every node of a before every node of b. */
static struct lockset_lock *ls_merge(struct lockset_lock *a,
				     struct lockset_lock *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (a->prio > b->prio) {
		a->right = ls_merge(a->right, b);
		ls_upd(a);
		return a;
	}
	b->left = ls_merge(a, b->left);
	ls_upd(b);
	return b;
}

/* Insert n (prio set) into root. @return the new root. Cost: O(log n). */
static struct lockset_lock *ls_tree_insert(struct lockset_lock *root,
					   struct lockset_lock *n)
{
	if (!root || n->prio > root->prio) {
		ls_split(root, n, &n->left, &n->right);
		ls_upd(n);
		return n;
	}
	if (ls_less(n, root))
		root->left = ls_tree_insert(root->left, n);
	else
		root->right = ls_tree_insert(root->right, n);
	ls_upd(root);
	return root;
}

/* Remove n from root. @return the new root. Cost: O(log n). */
static struct lockset_lock *ls_tree_remove(struct lockset_lock *root,
					   struct lockset_lock *n)
{
	if (!root)
		return NULL;
	if (root == n)
		return ls_merge(n->left, n->right);
	if (ls_less(n, root))
		root->left = ls_tree_remove(root->left, n);
	else
		root->right = ls_tree_remove(root->right, n);
	ls_upd(root);
	return root;
}

/* A conflict search: want, the callback, the visit count. */
struct ls_query {
	const struct lockset_lock *want;
	int (*fn)(const struct lockset_lock *l, void *arg);
	void *arg;
	uint64_t visits;
};

/*
 * Call q->fn for the locks of tree n that overlap want's range and belong
 * to another owner, in order of start, until it returns non-zero. Subtrees
 * that end before the range or start after it are skipped, so the cost is
 * O(log n) plus the overlapping locks visited.
 */
static int ls_visit(const struct lockset_lock *n, struct ls_query *q)
{
	const struct lockset_lock *w = q->want;
	int rc;

	if (!n || n->max_end < w->start)
		return 0;
	q->visits++;
	rc = ls_visit(n->left, q);
	if (rc || n->start > w->end)
		return rc;
	if (n->end >= w->start &&
	    !(n->session == w->session && n->owner == w->owner)) {
		rc = q->fn(n, q->arg);
		if (rc)
			return rc;
	}
	return ls_visit(n->right, q);
}

/* ------------------------------------------------------ files, owners */

/* The file (ino, kind), or NULL. */
static struct ls_file *ls_file_find(const struct lockset *s, uint64_t ino,
				    uint8_t kind)
{
	uint64_t h = ls_hfile(ino, kind);

	for (struct ls_hnode *e = ls_chain(&s->files, h); e; e = e->next) {
		struct ls_file *f = (struct ls_file *)e;

		if (e->h == h && f->ino == ino && f->kind == kind)
			return f;
	}
	return NULL;
}

/* The owner of want's key, or NULL. */
static struct ls_owner *ls_owner_find(const struct lockset *s,
				      const struct lockset_lock *k)
{
	uint64_t h = ls_howner(k->ino, k->kind, k->session, k->owner);

	for (struct ls_hnode *e = ls_chain(&s->owners, h); e; e = e->next) {
		struct ls_owner *o = (struct ls_owner *)e;

		if (e->h == h && o->ino == k->ino && o->kind == k->kind &&
		    o->session == k->session && o->owner == k->owner)
			return o;
	}
	return NULL;
}

/* The owner of k's key, made (with its file) if new. @return it or NULL */
static struct ls_owner *ls_owner_get(struct lockset *s,
				     const struct lockset_lock *k)
{
	struct ls_owner *o = ls_owner_find(s, k);
	struct ls_file *f;

	if (o)
		return o;
	if (ls_hash_reserve(&s->owners) || ls_hash_reserve(&s->files))
		return NULL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	f = ls_file_find(s, k->ino, k->kind);
	if (!f) {
		f = calloc(1, sizeof(*f));
		if (!f) {
			free(o);
			return NULL;
		}
		f->ino = k->ino;
		f->kind = k->kind;
		f->hn.h = ls_hfile(k->ino, k->kind);
		ls_hash_insert(&s->files, &f->hn);
	}
	f->nowners++;
	o->ino = k->ino;
	o->kind = k->kind;
	o->session = k->session;
	o->owner = k->owner;
	o->file = f;
	o->hn.h = ls_howner(k->ino, k->kind, k->session, k->owner);
	ls_hash_insert(&s->owners, &o->hn);
	return o;
}

/* Forget an owner without locks, and its file if that was the last. */
static void ls_owner_free(struct lockset *s, struct ls_owner *o)
{
	struct ls_file *f = o->file;

	ls_hash_remove(&s->owners, &o->hn);
	free(o);
	if (--f->nowners == 0) {
		ls_hash_remove(&s->files, &f->hn);
		free(f);
	}
}

/* The tree of l's type in file f. */
static struct lockset_lock **ls_tree(struct ls_file *f,
				     const struct lockset_lock *l)
{
	return &f->tree[l->type == PROTO_LK_WRLCK];
}

/* Add lock n (filled) to owner o: its list and its file's tree. */
static void ls_add(struct lockset *s, struct ls_owner *o, struct lockset_lock *n)
{
	struct lockset_lock **t = ls_tree(o->file, n);

	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	n->prio = (uint32_t)(s->rng >> 32);
	*t = ls_tree_insert(*t, n);
	o->file->nlocks++;
	n->onext = o->locks;
	o->locks = n;
	o->n++;
	s->count++;
}

/* Take lock l out of o's file's tree (the caller unlinks it from o's
 * list), counting it gone. */
static void ls_untree(struct lockset *s, struct ls_owner *o,
		      struct lockset_lock *l)
{
	struct lockset_lock **t = ls_tree(o->file, l);

	*t = ls_tree_remove(*t, l);
	o->file->nlocks--;
	o->n--;
	s->count--;
}

/* Remove and free every lock of o, and o. @return the number removed */
static size_t ls_owner_drop(struct lockset *s, struct ls_owner *o)
{
	size_t n = o->n;

	while (o->locks) {
		struct lockset_lock *l = o->locks;

		o->locks = l->onext;
		ls_untree(s, o, l);
		free(l);
	}
	ls_owner_free(s, o);
	return n;
}

/* ---------------------------------------------------------------- API */

/* Start an empty set; tables come with the first lock. */
void lockset_init(struct lockset *s, size_t max)
{
	memset(s, 0, sizeof(*s));
	s->max = max;
	s->rng = 0x9e3779b97f4a7c15ull;
}

/* Free every lock, owner and file, and the tables. */
void lockset_fini(struct lockset *s)
{
	for (size_t b = 0; b < s->owners.nb; b++) {
		while (s->owners.bucket[b])
			ls_owner_drop(s, (struct ls_owner *)s->owners.bucket[b]);
	}
	free(s->owners.bucket);
	free(s->files.bucket);
	lockset_init(s, s->max);
}

/* Search want's file's trees: the write locks, and for a write lock the
 * read locks too. */
int lockset_each_conflict(struct lockset *s, const struct lockset_lock *want,
			  int (*fn)(const struct lockset_lock *l, void *arg),
			  void *arg)
{
	struct ls_query q = { want, fn, arg, 0 };
	struct ls_file *f;
	int rc;

	if (want->type == PROTO_LK_UNLCK)
		return 0;
	f = ls_file_find(s, want->ino, want->kind);
	if (!f)
		return 0;
	rc = ls_visit(f->tree[1], &q);
	if (!rc && want->type == PROTO_LK_WRLCK)
		rc = ls_visit(f->tree[0], &q);
	s->visits += q.visits;
	return rc;
}

/* lockset_each_conflict callback: remember the first conflict. */
static int ls_first(const struct lockset_lock *l, void *arg)
{
	*(const struct lockset_lock **)arg = l;
	return 1;
}

/* The first conflicting lock. */
const struct lockset_lock *lockset_conflict(struct lockset *s,
					    const struct lockset_lock *want)
{
	const struct lockset_lock *hit = NULL;

	lockset_each_conflict(s, want, ls_first, &hit);
	return hit;
}

/* A new lock node copied from tmpl with range [start, end] and type. */
static void ls_fill(struct lockset_lock *n, const struct lockset_lock *tmpl,
		    uint64_t start, uint64_t end, uint8_t type)
{
	*n = *tmpl;
	n->start = start;
	n->end = end;
	n->type = type;
	n->gone = 0;
	n->left = n->right = n->onext = NULL;
}

/* Whether two inclusive ranges overlap. */
static bool ls_overlap(const struct lockset_lock *a,
		       const struct lockset_lock *b)
{
	return a->start <= b->end && b->start <= a->end;
}

/* Whether two inclusive ranges overlap or touch (end + 1 == start). */
static bool ls_touch(const struct lockset_lock *a, const struct lockset_lock *b)
{
	return (a->end == UINT64_MAX || a->end + 1 >= b->start) &&
	       (b->end == UINT64_MAX || b->end + 1 >= a->start);
}

/*
 * Take out of o the locks want changes: those it overlaps, and those of
 * its type it touches (merged into *nw, which grows over them). The pieces
 * of changed locks of another type that lie outside want's range are
 * filled into spare nodes and returned in *keep. The owner's locks are
 * disjoint and adjacent ones of one type are merged, so one pass finds
 * all. @return the number of spares used
 */
static int ls_cut(struct lockset *s, struct ls_owner *o,
		  const struct lockset_lock *want, struct lockset_lock *nw,
		  struct lockset_lock **spare, struct lockset_lock **keep)
{
	struct lockset_lock **pp = &o->locks, *l;
	int used = 0;

	while ((l = *pp) != NULL) {
		bool same = nw->type != PROTO_LK_UNLCK && l->type == nw->type;

		if (!(ls_overlap(l, nw) || (same && ls_touch(l, nw)))) {
			pp = &l->onext;
			continue;
		}
		*pp = l->onext;
		ls_untree(s, o, l);
		if (same) {
			if (l->start < nw->start)
				nw->start = l->start;
			if (l->end > nw->end)
				nw->end = l->end;
		} else {
			if (l->start < want->start) {
				ls_fill(spare[used], l, l->start, want->start - 1,
					l->type);
				spare[used]->onext = *keep;
				*keep = spare[used++];
			}
			if (l->end > want->end) {
				ls_fill(spare[used], l, want->end + 1, l->end,
					l->type);
				spare[used]->onext = *keep;
				*keep = spare[used++];
			}
		}
		free(l);
	}
	return used;
}

/*
 * Apply want to its owner's locks. Up to two new nodes are needed (the
 * pieces left and right of a punched hole, or one piece plus the new lock
 * when a lock of another type is split), so three are allocated first and
 * the change cannot fail half way. Cost: the owner's locks on the file,
 * O(log n) for each one changed.
 */
int lockset_apply(struct lockset *s, const struct lockset_lock *want)
{
	struct lockset_lock *spare[3] = { NULL, NULL, NULL };
	struct lockset_lock nw = *want, *keep = NULL;
	struct ls_owner *o;
	int nspare = 0, used, rc = 0;

	if (s->count + 2 > s->max)
		return -ENOLCK;
	o = ls_owner_find(s, want);
	if (!o && want->type == PROTO_LK_UNLCK)
		return 0;
	for (; nspare < 3; nspare++) {
		spare[nspare] = malloc(sizeof(*spare[nspare]));
		if (!spare[nspare]) {
			rc = -ENOMEM;
			goto out_free_spare;
		}
	}
	if (!o)
		o = ls_owner_get(s, want);
	if (!o) {
		rc = -ENOMEM;
		goto out_free_spare;
	}
	used = ls_cut(s, o, want, &nw, spare, &keep);
	while (keep) {
		struct lockset_lock *k = keep;

		keep = k->onext;
		ls_add(s, o, k);
	}
	if (nw.type != PROTO_LK_UNLCK) {
		ls_fill(spare[used], &nw, nw.start, nw.end, nw.type);
		ls_add(s, o, spare[used++]);
	}
	for (int i = 0; i < used; i++)
		spare[i] = NULL;
	if (o->n == 0)
		ls_owner_free(s, o);
out_free_spare:
	for (int i = 0; i < nspare; i++)
		free(spare[i]);
	return rc;
}

/* Whether an owner holds a lock of kind on ino. */
int lockset_owner_holds(const struct lockset *s, uint64_t ino,
			uint64_t session, uint64_t owner, uint8_t kind)
{
	struct lockset_lock key = { .ino = ino, .session = session,
				    .owner = owner, .kind = kind };

	return ls_owner_find(s, &key) != NULL;
}

/* Whether want's owner holds want already: one lock of its kind and type
 * covering want's range (the owner's adjacent locks of one type are
 * merged, so one lock covers any range it holds). */
int lockset_owner_covers(const struct lockset *s,
			 const struct lockset_lock *want)
{
	const struct ls_owner *o = ls_owner_find(s, want);

	for (const struct lockset_lock *l = o ? o->locks : NULL; l; l = l->onext)
		if (l->type == want->type && l->start <= want->start &&
		    l->end >= want->end)
			return 1;
	return 0;
}

/* Remove an owner's locks of one kind on one inode. */
size_t lockset_drop_owner(struct lockset *s, uint64_t ino, uint64_t session,
			  uint64_t owner, uint8_t kind)
{
	struct lockset_lock key = { .ino = ino, .session = session,
				    .owner = owner, .kind = kind };
	struct ls_owner *o = ls_owner_find(s, &key);

	return o ? ls_owner_drop(s, o) : 0;
}

/* Remove the nodes marked gone from tree t of file f and free them,
 * bottom up (each merge joins two subtrees already purged). Cost: the
 * tree's nodes, plus a merge of two short spines per node removed. */
static struct lockset_lock *ls_tree_purge(struct lockset *s, struct ls_file *f,
					  struct lockset_lock *t)
{
	struct lockset_lock *m;

	if (!t)
		return NULL;
	t->left = ls_tree_purge(s, f, t->left);
	t->right = ls_tree_purge(s, f, t->right);
	if (!t->gone) {
		ls_upd(t);
		return t;
	}
	m = ls_merge(t->left, t->right);
	free(t);
	f->nlocks--;
	s->count--;
	return m;
}

/*
 * Drop owner o's locks as part of a drop of many: mark them gone and move
 * them to their file's gone list, and put the file on *gone for
 * ls_file_purge. Owner o is freed; its file stays until purged.
 * @return the number of locks dropped
 */
static size_t ls_owner_doom(struct lockset *s, struct ls_owner *o,
			    struct ls_file **gone)
{
	struct ls_file *f = o->file;
	size_t n = o->n;

	while (o->locks) {
		struct lockset_lock *l = o->locks;

		o->locks = l->onext;
		l->gone = 1;
		l->onext = f->gone;
		f->gone = l;
	}
	if (!f->ngone) {
		f->gnext = *gone;
		*gone = f;
	}
	f->ngone += n;
	f->nowners--;
	ls_hash_remove(&s->owners, &o->hn);
	free(o);
	return n;
}

/* Take the locks marked gone out of file f's trees: one by one when they
 * are few (O(log n) each), else in one pass over the trees (O(n)); free
 * f if no owner is left. */
static void ls_file_purge(struct lockset *s, struct ls_file *f)
{
	if (f->ngone * 32 < f->nlocks) {
		while (f->gone) {
			struct lockset_lock *l = f->gone;
			struct lockset_lock **t = ls_tree(f, l);

			f->gone = l->onext;
			*t = ls_tree_remove(*t, l);
			f->nlocks--;
			s->count--;
			free(l);
		}
	} else {
		f->tree[0] = ls_tree_purge(s, f, f->tree[0]);
		f->tree[1] = ls_tree_purge(s, f, f->tree[1]);
	}
	f->gone = NULL;
	f->ngone = 0;
	if (f->nowners == 0) {
		ls_hash_remove(&s->files, &f->hn);
		free(f);
	}
}

/* Remove the owners match() picks, walking every chain once; files that
 * lose many locks are purged once at the end rather than lock by lock. */
size_t lockset_drop_sessions(struct lockset *s,
			     int (*match)(uint64_t session, size_t nlocks,
					  void *arg),
			     void *arg)
{
	struct ls_file *gone = NULL;
	size_t n = 0;

	for (size_t b = 0; b < s->owners.nb; b++) {
		struct ls_hnode *e = s->owners.bucket[b], *nx;

		for (; e; e = nx) {
			struct ls_owner *o = (struct ls_owner *)e;

			nx = e->next;
			if (match(o->session, o->n, arg))
				n += ls_owner_doom(s, o, &gone);
		}
	}
	while (gone) {
		struct ls_file *f = gone;

		gone = f->gnext;
		ls_file_purge(s, f);
	}
	return n;
}

/* lockset_drop_sessions match: the one session arg points to. */
static int ls_match_session(uint64_t session, size_t nlocks, void *arg)
{
	(void)nlocks;
	return session == *(const uint64_t *)arg;
}

/* Remove a session's locks everywhere. */
size_t lockset_drop_session(struct lockset *s, uint64_t session)
{
	return lockset_drop_sessions(s, ls_match_session, &session);
}

/* Visit every lock, owner by owner. */
int lockset_each(const struct lockset *s,
		 int (*fn)(const struct lockset_lock *l, void *arg), void *arg)
{
	for (size_t b = 0; b < s->owners.nb; b++) {
		for (struct ls_hnode *e = s->owners.bucket[b]; e; e = e->next) {
			const struct ls_owner *o = (const struct ls_owner *)e;

			for (const struct lockset_lock *l = o->locks; l;
			     l = l->onext) {
				int rc = fn(l, arg);

				if (rc)
					return rc;
			}
		}
	}
	return 0;
}
