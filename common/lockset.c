/* lockset.c - byte-range lock sets with POSIX split/merge semantics. */
#include "lockset.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* The bucket of ino. */
static size_t ls_bucket(uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 54) % LOCKSET_NBUCKETS;
}

/* Whether a and b belong to the same owner and kind on the same inode. */
static bool ls_same_owner(const struct lockset_lock *a,
			  const struct lockset_lock *b)
{
	return a->ino == b->ino && a->kind == b->kind &&
	       a->session == b->session && a->owner == b->owner;
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

/* Whether held l conflicts with want. */
static bool ls_conflicts(const struct lockset_lock *l,
			 const struct lockset_lock *want)
{
	return l->ino == want->ino && l->kind == want->kind &&
	       !(l->session == want->session && l->owner == want->owner) &&
	       ls_overlap(l, want) &&
	       (l->type == PROTO_LK_WRLCK || want->type == PROTO_LK_WRLCK);
}

/* Start an empty set. */
void lockset_init(struct lockset *s, size_t max)
{
	memset(s, 0, sizeof(*s));
	s->max = max;
}

/* Free every lock of every bucket. */
void lockset_fini(struct lockset *s)
{
	for (size_t b = 0; b < LOCKSET_NBUCKETS; b++) {
		struct lockset_lock *l = s->bucket[b], *nx;

		for (; l; l = nx) {
			nx = l->next;
			free(l);
		}
		s->bucket[b] = NULL;
	}
	s->count = 0;
}

/* Walk want's bucket for conflicts. */
int lockset_each_conflict(const struct lockset *s,
			  const struct lockset_lock *want,
			  int (*fn)(const struct lockset_lock *l, void *arg),
			  void *arg)
{
	if (want->type == PROTO_LK_UNLCK)
		return 0;
	for (const struct lockset_lock *l = s->bucket[ls_bucket(want->ino)]; l;
	     l = l->next) {
		if (ls_conflicts(l, want)) {
			int rc = fn(l, arg);

			if (rc)
				return rc;
		}
	}
	return 0;
}

/* lockset_each_conflict callback: remember the first conflict. */
static int ls_first(const struct lockset_lock *l, void *arg)
{
	*(const struct lockset_lock **)arg = l;
	return 1;
}

/* The first conflicting lock. */
const struct lockset_lock *lockset_conflict(const struct lockset *s,
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
	n->next = NULL;
}

/*
 * Apply want to its owner's locks. Up to two new nodes are needed (the
 * pieces left and right of a punched hole, or one piece plus the new lock
 * when a lock of another type is split), so two are allocated first and
 * the change cannot fail half way. Cost: the bucket's locks.
 */
int lockset_apply(struct lockset *s, const struct lockset_lock *want)
{
	struct lockset_lock **pp = &s->bucket[ls_bucket(want->ino)], *l;
	struct lockset_lock *spare[3] = { NULL, NULL, NULL };
	struct lockset_lock nw = *want;
	int nspare = 0, used = 0;
	size_t removed = 0, added = 0;

	if (s->count + 2 > s->max)
		return -ENOLCK;
	for (int i = 0; i < 3; i++) {
		spare[i] = malloc(sizeof(*spare[i]));
		if (!spare[i])
			goto out_free_spare;
		nspare++;
	}
	while ((l = *pp) != NULL) {
		if (!ls_same_owner(l, want) ||
		    !(ls_overlap(l, &nw) ||
		      (nw.type != PROTO_LK_UNLCK && l->type == nw.type &&
		       ls_touch(l, &nw)))) {
			pp = &l->next;
			continue;
		}
		*pp = l->next;
		removed++;
		if (nw.type != PROTO_LK_UNLCK && l->type == nw.type) {
			/* merge: the new lock grows over l */
			if (l->start < nw.start)
				nw.start = l->start;
			if (l->end > nw.end)
				nw.end = l->end;
		} else {
			/* keep what lies outside the new range */
			if (l->start < want->start) {
				ls_fill(spare[used], l, l->start,
					want->start - 1, l->type);
				spare[used]->next = *pp;
				*pp = spare[used];
				pp = &spare[used]->next;
				used++;
				added++;
			}
			if (l->end > want->end) {
				ls_fill(spare[used], l, want->end + 1, l->end,
					l->type);
				spare[used]->next = *pp;
				*pp = spare[used];
				pp = &spare[used]->next;
				used++;
				added++;
			}
		}
		free(l);
	}
	if (nw.type != PROTO_LK_UNLCK) {
		struct lockset_lock **head = &s->bucket[ls_bucket(want->ino)];

		ls_fill(spare[used], &nw, nw.start, nw.end, nw.type);
		spare[used]->next = *head;
		*head = spare[used];
		used++;
		added++;
	}
	s->count = s->count + added - removed;
out_free_spare:
	for (int i = used; i < nspare; i++)
		free(spare[i]);
	return nspare < 3 ? -ENOMEM : 0;
}

/* Unlink and free the locks of a bucket that match; count them. */
static size_t ls_drop_if(struct lockset *s, size_t b,
			 bool (*match)(const struct lockset_lock *l,
				       const struct lockset_lock *key),
			 const struct lockset_lock *key)
{
	struct lockset_lock **pp = &s->bucket[b], *l;
	size_t n = 0;

	while ((l = *pp) != NULL) {
		if (match(l, key)) {
			*pp = l->next;
			free(l);
			n++;
		} else {
			pp = &l->next;
		}
	}
	s->count -= n;
	return n;
}

/* Match: same owner and kind on the same inode. */
static bool ls_match_owner(const struct lockset_lock *l,
			   const struct lockset_lock *key)
{
	return ls_same_owner(l, key);
}

/* Match: same session. */
static bool ls_match_session(const struct lockset_lock *l,
			     const struct lockset_lock *key)
{
	return l->session == key->session;
}

/* Whether an owner holds a lock of kind on ino. */
int lockset_owner_holds(const struct lockset *s, uint64_t ino,
			uint64_t session, uint64_t owner, uint8_t kind)
{
	struct lockset_lock key = { .ino = ino, .session = session,
				    .owner = owner, .kind = kind };

	for (const struct lockset_lock *l = s->bucket[ls_bucket(ino)]; l;
	     l = l->next)
		if (ls_same_owner(l, &key))
			return 1;
	return 0;
}

/* Whether want's owner holds want already: one lock of its kind and type
 * covering want's range (the owner's adjacent locks of one type are
 * merged, so one lock covers any range it holds). */
int lockset_owner_covers(const struct lockset *s,
			 const struct lockset_lock *want)
{
	for (const struct lockset_lock *l = s->bucket[ls_bucket(want->ino)]; l;
	     l = l->next)
		if (ls_same_owner(l, want) && l->type == want->type &&
		    l->start <= want->start && l->end >= want->end)
			return 1;
	return 0;
}

/* Remove an owner's locks of one kind on one inode. */
size_t lockset_drop_owner(struct lockset *s, uint64_t ino, uint64_t session,
			  uint64_t owner, uint8_t kind)
{
	struct lockset_lock key = { .ino = ino, .session = session,
				    .owner = owner, .kind = kind };

	return ls_drop_if(s, ls_bucket(ino), ls_match_owner, &key);
}

/* Remove a session's locks everywhere. */
size_t lockset_drop_session(struct lockset *s, uint64_t session)
{
	struct lockset_lock key = { .session = session };
	size_t n = 0;

	for (size_t b = 0; b < LOCKSET_NBUCKETS; b++)
		n += ls_drop_if(s, b, ls_match_session, &key);
	return n;
}

/* Visit every lock. */
int lockset_each(const struct lockset *s,
		 int (*fn)(const struct lockset_lock *l, void *arg), void *arg)
{
	for (size_t b = 0; b < LOCKSET_NBUCKETS; b++) {
		for (const struct lockset_lock *l = s->bucket[b]; l;
		     l = l->next) {
			int rc = fn(l, arg);

			if (rc)
				return rc;
		}
	}
	return 0;
}
