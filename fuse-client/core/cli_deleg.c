/* cli_deleg.c - WRITE leases and delegated ops; see cli_deleg.h. */
#include "cli_deleg.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli_core.h"
#include "cli_meta.h"
#include "log.h"
#include "setid.h"
#include "stripe.h"

#define DG_BUCKETS 16384u

/* A directory this mount made: held (acting alone in it) or a tombstone
 * of a recall, so that a grant older than the recall is ignored. */
struct dg_dir {
	uint64_t ino;
	uint32_t mode, uid, gid;
	struct proto_layout layout; /* what its files get (zero: deflayout) */
	uint64_t recall_seq;        /* the recall handled (0: none) */
	int held;                   /* acting alone in it */
	struct dg_name *names;      /* every name in it, while held */
	struct dg_ino *inos;        /* the inodes made in it (their records) */
	uint64_t last_seq;          /* the last op queued in it */
	struct dg_dir *next;        /* hash chain */
};

/* A name in a held directory. */
struct dg_name {
	uint64_t dir;
	uint64_t ino;               /* what it names (0: not known here) */
	struct dg_name *next;       /* hash chain */
	struct dg_name *dnext;      /* its directory's list */
	uint16_t len;
	char name[];
};

/* An inode this mount made in a held directory: nobody else can reach
 * it while the directory is held, so its attributes here are the truth
 * (queued, in flight or committed); its SETATTRs and SETBLOCKS join the
 * queue and its GETATTR is answered here. Dropped when the directory is
 * released, or when today's path names it (the mgr's answer rules then). */
struct dg_ino {
	uint64_t ino;
	uint64_t dir;
	struct proto_attr attr;     /* as answered, with what joined since */
	uint64_t last_seq;          /* the last op queued on it */
	struct dg_ino *next;        /* hash chain */
	struct dg_ino *dnext, **dprev; /* its directory's list */
};

/* A queued op: its BATCH entry and the strings it points at. */
struct dg_op {
	struct proto_bop b;
	uint64_t seq;               /* queue order, from 1 */
	uint64_t gone;              /* UNLINK, RMDIR: the inode it removes */
	int sent;                   /* sent before, answer lost */
	struct dg_op *next;
	char name[PROTO_MAX_NAME + 1];
	char target[];              /* SYMLINK */
};

struct cli_deleg {
	struct cli_fs *fs;              /* read-only */
	cli_deleg_live_fn live;         /* read-only */
	void *live_arg;
	pthread_mutex_t mu;
	pthread_cond_t cv;              /* mu: queue, done, ranges changed */
	pthread_t thread;
	int stop;                       /* mu */
	struct dg_dir *dirs[DG_BUCKETS];   /* mu */
	struct dg_name *names[DG_BUCKETS]; /* mu */
	struct dg_ino *inos[DG_BUCKETS];   /* mu */
	struct dg_op *head, **tail;     /* mu: unsent ops, in order */
	size_t nqueued;                 /* mu */
	uint64_t next_seq;              /* mu: the next op's seq */
	uint64_t done_seq;              /* mu: every op up to it committed
					 * (or was refused) */
	uint64_t want_seq;              /* mu: a waiter wants up to it sent */
	uint64_t oldest_ms;             /* mu: when the head was queued */
	uint64_t delay_ms;              /* mu: CLI_DELEG_DELAY_MS (tests
					 * set more) */
	uint64_t fail_gen;              /* mu: failed sends so far */
	uint64_t failing_ms;            /* mu: since when sends fail (0: the
					 * last one went through) */
	uint64_t range_next, range_end; /* mu: the numbers at hand */
	uint64_t spare;                 /* mu: a further range (0: none) */
	int want_range;                 /* mu: ask for a range */
	uint64_t range_refused_ms;      /* mu: the mgr gave none then */
	uint64_t recall_floor;          /* mu: the last recall handled of a
					 * directory with no record: a grant
					 * made before it may be for that one,
					 * and is void */
	int err;                        /* mu: first refusal not reported */
	uint64_t nbatches, nrefused, nlocal; /* mu */
};

/* CLOCK_MONOTONIC in ms. */
static uint64_t dg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Hash buckets of an inode and of a name. */
static size_t dg_ihash(uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 50) % DG_BUCKETS;
}

static size_t dg_nhash(uint64_t dir, const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ dir;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)name[i]) * 0x100000001b3ull;
	return (size_t)(h ^ (h >> 32)) % DG_BUCKETS;
}

/* The record of directory ino, or NULL (mu). */
static struct dg_dir *dg_dir_find(struct cli_deleg *d, uint64_t ino)
{
	struct dg_dir *x = d->dirs[dg_ihash(ino)];

	while (x && x->ino != ino)
		x = x->next;
	return x;
}

/* The record of directory ino, made if missing; NULL without memory. */
static struct dg_dir *dg_dir_get(struct cli_deleg *d, uint64_t ino)
{
	struct dg_dir *x = dg_dir_find(d, ino);
	size_t b = dg_ihash(ino);

	if (x || !(x = calloc(1, sizeof(*x))))
		return x;
	x->ino = ino;
	x->next = d->dirs[b];
	d->dirs[b] = x;
	return x;
}

/* The link to name's record in dir, or to the NULL ending its chain. */
static struct dg_name **dg_name_find(struct cli_deleg *d, uint64_t dir,
				     const char *name, size_t len)
{
	struct dg_name **pp = &d->names[dg_nhash(dir, name, len)];

	while (*pp && ((*pp)->dir != dir || (*pp)->len != len ||
		       memcmp((*pp)->name, name, len)))
		pp = &(*pp)->next;
	return pp;
}

/* Record name (naming ino, 0: unknown) in held directory x. @return 0,
 * -ENOMEM */
static int dg_name_add(struct cli_deleg *d, struct dg_dir *x,
		       const char *name, size_t len, uint64_t ino)
{
	struct dg_name **pp = dg_name_find(d, x->ino, name, len);
	struct dg_name *n;

	if (*pp) {
		(*pp)->ino = ino;
		return 0;
	}
	n = malloc(sizeof(*n) + len);
	if (!n)
		return -ENOMEM;
	n->dir = x->ino;
	n->ino = ino;
	n->len = (uint16_t)len;
	memcpy(n->name, name, len);
	n->next = NULL;
	*pp = n;
	n->dnext = x->names;
	x->names = n;
	return 0;
}

static void dg_ino_drop(struct cli_deleg *d, uint64_t ino);

/* Stop acting alone in x: forget its names and the records of the inodes
 * made in it (mu). Cost: its names and those inodes. */
static void dg_dir_release(struct cli_deleg *d, struct dg_dir *x)
{
	struct dg_name *n, **pp;

	x->held = 0;
	while (x->inos)
		dg_ino_drop(d, x->inos->ino);
	while ((n = x->names)) {
		x->names = n->dnext;
		pp = dg_name_find(d, n->dir, n->name, n->len);
		if (*pp == n)
			*pp = n->next;
		free(n);
	}
}

/* The record of a queued or in-flight create of ino, or NULL (mu). */
static struct dg_ino *dg_ino_find(struct cli_deleg *d, uint64_t ino)
{
	struct dg_ino *p = d->inos[dg_ihash(ino)];

	while (p && p->ino != ino)
		p = p->next;
	return p;
}

/* Forget ino's record, if any (mu). */
static void dg_ino_drop(struct cli_deleg *d, uint64_t ino)
{
	struct dg_ino **pp = &d->inos[dg_ihash(ino)], *p;

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	if (!(p = *pp))
		return;
	*pp = p->next;
	if (p->dnext)
		p->dnext->dprev = p->dprev;
	*p->dprev = p->dnext;
	free(p);
}

/* Stop acting alone in x (dg_dir_release), and its own record goes too:
 * others may change it from now on (mu). */
static void dg_dir_give_up(struct cli_deleg *d, struct dg_dir *x)
{
	dg_dir_release(d, x);
	dg_ino_drop(d, x->ino);
}

/* Append op to the queue and wake the flusher when a batch is full (mu). */
static void dg_enqueue(struct cli_deleg *d, struct dg_op *op)
{
	op->seq = d->next_seq++;
	op->next = NULL;
	if (!d->head)
		d->oldest_ms = dg_now_ms();
	*d->tail = op;
	d->tail = &op->next;
	d->nqueued++;
	pthread_cond_broadcast(&d->cv);
}

/* Take an inode number from the range at hand; when it is used up, ask
 * the flusher for another (mu). A range is asked for only once every
 * number of the last one was handed out, so every op numbered from it is
 * queued before the ask and lands before the mgr forgets that range (it
 * keeps a session's last two: an ask whose answer was lost and is sent
 * again costs one). @return 0, -EAGAIN none */
static int dg_take_ino(struct cli_deleg *d, uint64_t *ino)
{
	if (d->range_next >= d->range_end && d->spare) {
		d->range_next = d->spare;
		d->range_end = d->spare + PROTO_INO_RANGE;
		d->spare = 0;
	}
	if (d->range_next >= d->range_end && !d->spare && !d->want_range &&
	    dg_now_ms() >= d->range_refused_ms + CLI_DELEG_RETRY_MS) {
		d->want_range = 1;
		pthread_cond_broadcast(&d->cv);
	}
	if (d->range_next >= d->range_end)
		return -EAGAIN;
	*ino = d->range_next++;
	return 0;
}

/* dg_take_ino, waiting for the range asked for when none is at hand (the
 * first create after a grant): one round trip per PROTO_INO_RANGE
 * numbers. Gives up when a send fails or the mgr gives none (mu).
 * @return 0, -EAGAIN */
static int dg_take_ino_wait(struct cli_deleg *d, uint64_t *ino)
{
	uint64_t gen = d->fail_gen;

	while (dg_take_ino(d, ino)) {
		if (!d->want_range || d->fail_gen != gen || d->stop)
			return -EAGAIN;
		pthread_cond_wait(&d->cv, &d->mu);
	}
	return 0;
}

/* The attributes the mgr gives a new inode of c in directory x (as
 * ns_mknode does), with the time now. */
static void dg_new_attr(const struct cli_deleg *d, const struct dg_dir *x,
			const struct proto_cred *c, uint64_t ino,
			uint32_t mode, size_t tlen, struct proto_attr *a)
{
	struct proto_time now = cli_now_time();

	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->mode = mode;
	a->uid = c->uid;
	a->gid = c->gid;
	if (x->mode & S_ISGID) {
		a->gid = x->gid;
		if (S_ISDIR(mode))
			a->mode |= S_ISGID;
	}
	if (!S_ISDIR(a->mode) && (a->mode & S_ISGID) && c->uid != 0 &&
	    !setid_in_group(c, a->gid))
		a->mode &= ~(uint32_t)S_ISGID;
	a->nlink = S_ISDIR(mode) ? 2 : 1;
	a->size = S_ISLNK(mode) ? tlen : 0;
	a->atime = a->mtime = a->ctime = now;
	if (S_ISDIR(mode)) {
		a->layout = x->layout;
	} else if (S_ISREG(mode)) {
		uint16_t width;

		a->layout = x->layout.unit ? x->layout : d->fs->deflayout;
		width = stripe_width(&a->layout, d->fs->niods, d->fs->ngroups);
		if (a->layout.count == 0 || a->layout.count > width)
			a->layout.count = width;
		a->layout.first = (uint16_t)(ino % (width ? width : 1));
	}
}

/* A name was made in parent: its record (if this mount made it alone)
 * follows, as the mgr's will: mtime and ctime now, a link more for a
 * subdirectory (mu). */
static void dg_parent_changed(struct cli_deleg *d, uint64_t parent, int subdir)
{
	struct dg_ino *q = dg_ino_find(d, parent);

	if (!q)
		return;
	q->attr.mtime = q->attr.ctime = cli_now_time();
	if (subdir)
		q->attr.nlink++;
}

/* Whether c may create in x alone: root, or x's owner with write and
 * search permission (anything else: today's path judges it). */
static int dg_may_create(const struct dg_dir *x, const struct proto_cred *c)
{
	return c->uid == 0 || (c->uid == x->uid && (x->mode & 0300) == 0300);
}

/* Fill op as the BATCH entry that makes name (attributes a) in parent:
 * a SYMLINK with a target, else a MKDIR or CREATE by a's type. */
static void dg_op_make(struct dg_op *op, const struct proto_cred *c,
		       uint64_t parent, const char *name, size_t len,
		       const char *target, size_t tlen,
		       const struct proto_attr *a)
{
	memcpy(op->name, name, len);
	memcpy(op->target, target ? target : "", tlen);
	op->b.op = target ? PROTO_OP_SYMLINK :
		   S_ISDIR(a->mode) ? PROTO_OP_MKDIR : PROTO_OP_CREATE;
	op->b.m.cred = *c;
	op->b.m.parent = parent;
	op->b.m.name = (struct proto_str){ op->name, (uint32_t)len };
	op->b.m.mode = a->mode & 07777;
	if (op->b.op == PROTO_OP_CREATE) {
		op->b.m.mode = S_IFREG | (a->mode & 07777);
		op->b.m.flags = PROTO_CREATE_EXCL;
		op->b.layout = a->layout;
	}
	op->b.m.target = (struct proto_str){ op->target, (uint32_t)tlen };
	op->b.newino = a->ino;
}

/* Record inode a, made alone in held directory x, as p (mu). */
static void dg_ino_link(struct cli_deleg *d, struct dg_dir *x,
			struct dg_ino *p, const struct proto_attr *a)
{
	p->ino = a->ino;
	p->dir = x->ino;
	p->attr = *a;
	p->next = d->inos[dg_ihash(a->ino)];
	d->inos[dg_ihash(a->ino)] = p;
	p->dnext = x->inos;
	if (x->inos)
		x->inos->dprev = &p->dnext;
	p->dprev = &x->inos;
	x->inos = p;
}

/* See cli_deleg.h. */
int cli_deleg_mknode(struct cli_deleg *d, const struct proto_cred *c,
		     uint64_t parent, const char *name, uint32_t mode,
		     const char *target, struct proto_attr *a)
{
	size_t len = strlen(name), tlen = target ? strlen(target) : 0;
	struct dg_op *op;
	struct dg_ino *p;
	struct dg_dir *x, *nx = NULL;
	uint64_t ino;
	int rc = -EAGAIN;

	if (len == 0 || len > PROTO_MAX_NAME || tlen > PROTO_MAX_PATH)
		return -EAGAIN;
	op = calloc(1, sizeof(*op) + tlen + 1);
	p = calloc(1, sizeof(*p));
	if (!op || !p)
		goto out_free;
	pthread_mutex_lock(&d->mu);
	x = dg_dir_find(d, parent);
	if (!x || !x->held || !d->live(d->live_arg) ||
	    d->nqueued >= CLI_DELEG_MAX_QUEUED || !dg_may_create(x, c) ||
	    *dg_name_find(d, parent, name, len) || dg_take_ino_wait(d, &ino))
		goto out_unlock;
	if (S_ISDIR(mode) && !(nx = dg_dir_get(d, ino)))
		goto out_unlock;
	if (dg_name_add(d, x, name, len, ino))
		goto out_unlock;
	dg_new_attr(d, x, c, ino, mode, tlen, a);
	if (nx) { /* made here: held from the start, with no names */
		nx->held = 1;
		nx->mode = a->mode;
		nx->uid = a->uid;
		nx->gid = a->gid;
		nx->layout = x->layout;
	}
	dg_op_make(op, c, parent, name, len, target, tlen, a);
	dg_ino_link(d, x, p, a);
	dg_parent_changed(d, parent, S_ISDIR(mode));
	dg_enqueue(d, op);
	x->last_seq = p->last_seq = op->seq;
	if (nx)
		nx->last_seq = op->seq; /* what is done in it comes later */
	d->nlocal++;
	op = NULL;
	p = NULL;
	rc = 0;
out_unlock:
	pthread_mutex_unlock(&d->mu);
out_free:
	free(p);
	free(op);
	return rc;
}

/* Forget name in held directory x (mu). */
static void dg_name_del(struct cli_deleg *d, struct dg_dir *x,
			const char *name, size_t len)
{
	struct dg_name **pp = dg_name_find(d, x->ino, name, len), *n = *pp;
	struct dg_name **dp = &x->names;

	if (!n)
		return;
	*pp = n->next;
	while (*dp && *dp != n)
		dp = &(*dp)->dnext;
	if (*dp)
		*dp = n->dnext;
	free(n);
}

/* Whether the inode p, named in held directory x, may be removed alone
 * by c (dir: RMDIR): made here, one link, and for a directory one held
 * here with no name left in it (mu). */
static int dg_may_remove(struct cli_deleg *d, const struct dg_dir *x,
			 const struct dg_ino *p, const struct proto_cred *c,
			 int dir)
{
	const struct dg_dir *e;

	if (!dg_may_create(x, c) || (S_ISDIR(p->attr.mode) ? 1 : 0) != dir)
		return 0;
	if (!dir)
		return p->attr.nlink == 1;
	e = dg_dir_find(d, p->ino);
	return e && e->held && !e->names && p->attr.nlink == 2;
}

/* See cli_deleg.h. */
int cli_deleg_remove(struct cli_deleg *d, const struct proto_cred *c,
		     uint64_t parent, const char *name, int dir,
		     struct proto_freed *f)
{
	size_t len = strlen(name);
	struct dg_op *op = calloc(1, sizeof(*op) + 1);
	struct dg_name *n;
	struct dg_ino *p;
	struct dg_dir *x;
	int rc = -EAGAIN;

	if (!op || len == 0 || len > PROTO_MAX_NAME)
		goto out_free;
	pthread_mutex_lock(&d->mu);
	x = dg_dir_find(d, parent);
	if (!x || !x->held || !d->live(d->live_arg) ||
	    d->nqueued >= CLI_DELEG_MAX_QUEUED)
		goto out_unlock;
	n = *dg_name_find(d, parent, name, len);
	p = n && n->ino ? dg_ino_find(d, n->ino) : NULL;
	if (!p || !dg_may_remove(d, x, p, c, dir))
		goto out_unlock;
	memcpy(op->name, name, len);
	op->b.op = dir ? PROTO_OP_RMDIR : PROTO_OP_UNLINK;
	op->b.m.cred = *c;
	op->b.m.parent = parent;
	op->b.m.name = (struct proto_str){ op->name, (uint32_t)len };
	op->gone = p->ino;
	if (f) { /* as the mgr frees it: a regular file's data, later */
		memset(f, 0, sizeof(*f));
		if (S_ISREG(p->attr.mode)) {
			f->ino = p->ino;
			f->layout = p->attr.layout;
		}
	}
	if (dir) {
		struct dg_dir *e = dg_dir_find(d, p->ino);

		dg_dir_release(d, e);
	}
	p->attr.nlink = 0;
	p->attr.ctime = cli_now_time();
	if (p->dnext) /* off x's list: its release must not drop the record
		       * before the removal is answered */
		p->dnext->dprev = p->dprev;
	*p->dprev = p->dnext;
	p->dnext = NULL;
	p->dprev = &p->dnext;
	dg_name_del(d, x, name, len);
	dg_enqueue(d, op);
	x->last_seq = p->last_seq = op->seq;
	dg_parent_changed(d, parent, 0);
	if (dir && (p = dg_ino_find(d, parent)))
		p->attr.nlink--; /* dg_parent_changed counted none */
	d->nlocal++;
	op = NULL;
	rc = 0;
out_unlock:
	pthread_mutex_unlock(&d->mu);
out_free:
	free(op);
	return rc;
}

/* Whether a SETATTR of p by c can join the queue (see cli_deleg.h). */
static int dg_setattr_ok(const struct dg_ino *p, const struct proto_cred *c,
			 uint32_t valid)
{
	const uint32_t own = PROTO_SA_MODE | PROTO_SA_ATIME | PROTO_SA_MTIME |
			     PROTO_SA_ATIME_NOW | PROTO_SA_MTIME_NOW |
			     PROTO_SA_CTIME;

	if (valid & (PROTO_SA_SIZE | PROTO_SA_KILLPRIV))
		return 0;
	if (c->uid == 0) /* chown keeps set-id bits only if there are none */
		return !(valid & (PROTO_SA_UID | PROTO_SA_GID)) ||
		       !(p->attr.mode & (S_ISUID | S_ISGID));
	return c->uid == p->attr.uid && !(valid & ~own);
}

/* Apply a SETATTR's changes to attributes a, as the mgr will. */
static void dg_setattr_apply(struct proto_attr *a, const struct proto_cred *c,
			     const struct proto_mreq *m)
{
	struct proto_time now = cli_now_time();

	if (m->valid & PROTO_SA_MODE) {
		a->mode = (a->mode & S_IFMT) | (m->mode & 07777);
		if (c->uid != 0 && !setid_in_group(c, a->gid))
			a->mode &= ~(uint32_t)S_ISGID;
	}
	if (m->valid & PROTO_SA_UID)
		a->uid = m->uid;
	if (m->valid & PROTO_SA_GID)
		a->gid = m->gid;
	if (m->valid & PROTO_SA_ATIME_NOW)
		a->atime = now;
	else if (m->valid & PROTO_SA_ATIME)
		a->atime = m->atime;
	if (m->valid & PROTO_SA_MTIME_NOW)
		a->mtime = now;
	else if (m->valid & PROTO_SA_MTIME)
		a->mtime = m->mtime;
	a->ctime = now;
}

/* Queue op (SETATTR or SETBLOCKS) m on p's unsent create; a gets p's
 * attributes after fn. @return 0, -EAGAIN */
static int dg_join(struct cli_deleg *d, uint16_t opcode,
		   const struct proto_cred *c, const struct proto_mreq *m,
		   struct proto_attr *a)
{
	struct dg_op *op = calloc(1, sizeof(*op));
	struct dg_ino *p;
	int rc = -EAGAIN;

	if (!op)
		return -EAGAIN;
	pthread_mutex_lock(&d->mu);
	p = dg_ino_find(d, m->ino);
	if (!p || d->nqueued >= CLI_DELEG_MAX_QUEUED)
		goto out_unlock; /* queued, in flight or committed: all fine */
	if (opcode == PROTO_OP_SETATTR) {
		if (!dg_setattr_ok(p, c, m->valid))
			goto out_unlock;
		dg_setattr_apply(&p->attr, c, m);
	} else {
		if (m->size > p->attr.size)
			p->attr.size = m->size;
		p->attr.blocks = m->blocks;
		p->attr.mtime = p->attr.ctime = m->mtime;
	}
	op->b.op = opcode;
	op->b.m = *m;
	op->b.m.cred = *c;
	op->b.m.cred.session = 0;
	*a = p->attr;
	dg_enqueue(d, op);
	p->last_seq = op->seq;
	op = NULL;
	rc = 0;
out_unlock:
	pthread_mutex_unlock(&d->mu);
	free(op);
	return rc;
}

/* See cli_deleg.h. */
int cli_deleg_setattr(struct cli_deleg *d, const struct proto_cred *c,
		      uint64_t ino, const struct proto_mreq *m,
		      struct proto_attr *a)
{
	struct proto_mreq q = *m;

	q.ino = ino;
	return dg_join(d, PROTO_OP_SETATTR, c, &q, a);
}

/* The 512-byte blocks a file of size bytes, written from its start with
 * no hole, takes on its iods (each object's bytes rounded up to 4 KiB, as
 * the iods' file systems allocate). */
static uint64_t dg_blocks(const struct cli_deleg *d,
			  const struct proto_layout *l, uint64_t size)
{
	uint64_t blocks = 0, obj;
	uint16_t n = l->count ? l->count : 1;

	for (uint16_t k = 0; k < n; k++) {
		obj = stripe_local_size(l, k, size);
		blocks += ((obj + 4095) & ~4095ull) / 512;
	}
	(void)d;
	return l->mirror == 2 ? blocks * 2 : blocks;
}

/* See cli_deleg.h. */
int cli_deleg_setblocks(struct cli_deleg *d, const struct proto_cred *c,
			const struct proto_mreq *m, struct proto_attr *a)
{
	struct proto_mreq q = *m;
	struct dg_ino *p;

	pthread_mutex_lock(&d->mu);
	p = dg_ino_find(d, m->ino);
	q.blocks = p ? dg_blocks(d, &p->attr.layout,
				 m->size > p->attr.size ? m->size :
				 p->attr.size) : 0;
	pthread_mutex_unlock(&d->mu);
	if (!p)
		return -EAGAIN;
	return dg_join(d, PROTO_OP_SETBLOCKS, c, &q, a);
}

/* See cli_deleg.h. */
int cli_deleg_lookup(struct cli_deleg *d, uint64_t parent, const char *name,
		     struct proto_attr *a)
{
	struct dg_name *n;
	struct dg_ino *p;
	struct dg_dir *x;
	int rc = -EAGAIN;

	pthread_mutex_lock(&d->mu);
	x = dg_dir_find(d, parent);
	if (!x || !x->held || !d->live(d->live_arg))
		goto out_unlock;
	n = *dg_name_find(d, parent, name, strlen(name));
	if (!n) {
		rc = -ENOENT;
	} else if (n->ino && (p = dg_ino_find(d, n->ino))) {
		*a = p->attr;
		rc = 0;
	}
out_unlock:
	pthread_mutex_unlock(&d->mu);
	return rc;
}

/* See cli_deleg.h. */
int cli_deleg_getattr(struct cli_deleg *d, uint64_t ino, struct proto_attr *a)
{
	struct dg_ino *p;
	int rc = -EAGAIN;

	pthread_mutex_lock(&d->mu);
	p = dg_ino_find(d, ino);
	if (p && d->live(d->live_arg)) {
		*a = p->attr;
		rc = 0;
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

/* See cli_deleg.h. */
int cli_deleg_pending(struct cli_deleg *d, uint64_t ino)
{
	int r;

	pthread_mutex_lock(&d->mu);
	r = dg_ino_find(d, ino) != NULL;
	pthread_mutex_unlock(&d->mu);
	return r;
}

/* Wait on d's condition for at most ms milliseconds (mu held). */
static void dg_timed_wait(struct cli_deleg *d, unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&d->cv, &d->mu, &ts);
}

/* Wait until every op queued before now is committed (mu held), as long
 * as the sends have not been failing for the mount's timeout since the
 * wait began (a mgr restart is waited out, as a request would wait it
 * out). @return 0, -EIO */
static int dg_wait_done(struct cli_deleg *d)
{
	uint64_t upto = d->next_seq - 1, start = dg_now_ms(), since;

	if (d->done_seq >= upto)
		return 0;
	if (upto > d->want_seq)
		d->want_seq = upto;
	pthread_cond_broadcast(&d->cv);
	while (d->done_seq < upto && d->stop != 2) {
		since = d->failing_ms > start ? d->failing_ms : start;
		if (d->failing_ms &&
		    dg_now_ms() >= since + (uint64_t)d->fs->timeout_ms)
			break;
		dg_timed_wait(d, 100);
	}
	return d->done_seq >= upto ? 0 : -EIO;
}

/* The last op queued that names ino (as a held directory or an inode
 * made alone), or 0 (mu). */
static uint64_t dg_last_seq(struct cli_deleg *d, uint64_t ino)
{
	struct dg_dir *x = dg_dir_find(d, ino);
	struct dg_ino *p = dg_ino_find(d, ino);
	uint64_t seq = x && x->held ? x->last_seq : 0;

	return p && p->last_seq > seq ? p->last_seq : seq;
}

/* See cli_deleg.h. */
int cli_deleg_before(struct cli_deleg *d, const uint64_t *inos, unsigned n,
		     int change)
{
	uint64_t upto = 0, seq;
	int rc = 0;

	pthread_mutex_lock(&d->mu);
	for (unsigned i = 0; i < n; i++) {
		seq = inos[i] ? dg_last_seq(d, inos[i]) : 0;
		if (seq > upto)
			upto = seq;
	}
	if (upto > d->done_seq)
		rc = dg_wait_done(d);
	for (unsigned i = 0; i < n && change && !rc; i++)
		if (inos[i])
			dg_ino_drop(d, inos[i]); /* the mgr's answer rules now */
	pthread_mutex_unlock(&d->mu);
	return rc;
}

/* See cli_deleg.h. */
int cli_deleg_flush(struct cli_deleg *d)
{
	int rc;

	pthread_mutex_lock(&d->mu);
	rc = dg_wait_done(d);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

/* See cli_deleg.h. */
int cli_deleg_sync(struct cli_deleg *d)
{
	int rc;

	pthread_mutex_lock(&d->mu);
	rc = dg_wait_done(d);
	if (!rc) {
		rc = d->err;
		d->err = 0;
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

/* A record of held directory a itself (its MKDIR went to the mgr): its
 * GETATTR is answered here too, as the kernel asks after each change in
 * it; in no directory's list (mu). Without memory, none: asked then. */
static void dg_dir_record(struct cli_deleg *d, const struct proto_attr *a)
{
	struct dg_ino *p;

	if (dg_ino_find(d, a->ino) || !(p = calloc(1, sizeof(*p))))
		return;
	p->ino = a->ino;
	p->attr = *a;
	p->next = d->inos[dg_ihash(a->ino)];
	d->inos[dg_ihash(a->ino)] = p;
	p->dprev = &p->dnext;
}

/* See cli_deleg.h. */
void cli_deleg_grant(struct cli_deleg *d, const struct proto_attr *dir,
		     const struct proto_grant *g)
{
	struct dg_dir *x;

	if (!g->ino || g->ino != dir->ino || !S_ISDIR(dir->mode))
		return;
	pthread_mutex_lock(&d->mu);
	x = dg_dir_find(d, dir->ino);
	if (d->live(d->live_arg) &&
	    (x ? x->recall_seq : d->recall_floor) <= g->evseq &&
	    (x || (x = dg_dir_get(d, dir->ino)))) {
		dg_dir_record(d, dir);
		x->held = 1;
		x->mode = dir->mode;
		x->uid = dir->uid;
		x->gid = dir->gid;
		x->layout = dir->layout;
		if (d->range_next >= d->range_end && !d->spare &&
		    !d->want_range) {
			d->want_range = 1; /* numbers for the first creates */
			pthread_cond_broadcast(&d->cv);
		}
	}
	pthread_mutex_unlock(&d->mu);
}

/* See cli_deleg.h. */
int cli_deleg_recall(struct cli_deleg *d, uint64_t dir, uint64_t seq)
{
	struct dg_dir *x;
	int rc;

	pthread_mutex_lock(&d->mu);
	x = dg_dir_find(d, dir);
	if (x) {
		if (seq > x->recall_seq)
			x->recall_seq = seq;
		dg_dir_give_up(d, x);
	} else if (seq > d->recall_floor) {
		d->recall_floor = seq; /* no record kept per directory: a READ
					* lease's recall is common */
	}
	rc = dg_wait_done(d);
	pthread_mutex_unlock(&d->mu);
	if (rc)
		log_warn("recall of directory %llu: its queued ops could not "
			 "be sent before the acknowledgement",
			 (unsigned long long)dir);
	return rc;
}

/* See cli_deleg.h. */
void cli_deleg_reset(struct cli_deleg *d)
{
	struct dg_dir *x;

	pthread_mutex_lock(&d->mu);
	d->recall_floor = 0; /* a new mgr numbers its events from 1 again */
	for (size_t b = 0; b < DG_BUCKETS; b++)
		for (x = d->dirs[b]; x; x = x->next)
			if (x->held)
				dg_dir_give_up(d, x);
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

/* See cli_deleg.h. */
int cli_deleg_end(struct cli_deleg *d, uint64_t dir)
{
	struct dg_dir *x;
	int rc = 0;

	pthread_mutex_lock(&d->mu);
	rc = dg_wait_done(d); /* what it names reaches the mgr first: a
				* directory it renames over or removes may
				* be another held one, with creates queued */
	x = dg_dir_find(d, dir);
	if (x && x->held)
		dg_dir_give_up(d, x);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

/* See cli_deleg.h. */
void cli_deleg_attr(struct cli_deleg *d, const struct proto_attr *a)
{
	struct dg_dir *x;
	struct dg_ino *p;

	pthread_mutex_lock(&d->mu);
	x = dg_dir_find(d, a->ino);
	if (x && x->held) {
		x->mode = a->mode;
		x->uid = a->uid;
		x->gid = a->gid;
	}
	p = dg_ino_find(d, a->ino);
	if (p && p->last_seq <= d->done_seq)
		p->attr = *a; /* else an op queued since: dropped, ask then */
	else if (p)
		dg_ino_drop(d, a->ino);
	pthread_mutex_unlock(&d->mu);
}

/* See cli_deleg.h. */
void cli_deleg_named(struct cli_deleg *d, uint64_t dir, const char *name,
		     uint64_t ino)
{
	struct dg_dir *x;

	pthread_mutex_lock(&d->mu);
	x = dg_dir_find(d, dir);
	if (x && x->held && dg_name_add(d, x, name, strlen(name), ino))
		dg_dir_give_up(d, x); /* no memory: it no longer knows them all */
	pthread_mutex_unlock(&d->mu);
}

/* See cli_deleg.h. */
void cli_deleg_counts(struct cli_deleg *d, uint64_t *queued,
		      uint64_t *batches, uint64_t *refused, uint64_t *local)
{
	pthread_mutex_lock(&d->mu);
	*queued = d->next_seq - 1 - d->done_seq;
	*batches = d->nbatches;
	*refused = d->nrefused;
	*local = d->nlocal;
	pthread_mutex_unlock(&d->mu);
}

/* ------------------------------------------------------------- flusher */

/* Whether the flusher has a batch to send now (mu). */
static int dg_due(const struct cli_deleg *d, uint64_t now)
{
	if (d->want_range && !d->spare && d->range_next >= d->range_end)
		return 1; /* no number at hand: a create waits for one */
	if (!d->head)
		return 0;
	return d->stop || d->nqueued >= CLI_DELEG_BATCH_OPS ||
	       d->want_seq >= d->head->seq ||
	       now >= d->oldest_ms + d->delay_ms;
}

/* Take up to PROTO_MAX_BATCH ops off the head into ops (mu). @return how
 * many */
static uint32_t dg_take(struct cli_deleg *d, struct dg_op **ops)
{
	uint32_t n = 0;
	while (d->head && n < PROTO_MAX_BATCH) {
		ops[n] = d->head;
		d->head = d->head->next;
		n++;
	}
	if (!d->head)
		d->tail = &d->head;
	else
		d->oldest_ms = dg_now_ms();
	d->nqueued -= n;
	return n;
}

/* Put ops back at the head after a failed send (mu): their answer was
 * lost, so they may have run. */
static void dg_untake(struct cli_deleg *d, struct dg_op **ops, uint32_t n)
{
	for (uint32_t i = n; i-- > 0;) {
		ops[i]->sent = 1;
		ops[i]->next = d->head;
		if (!d->head)
			d->tail = &ops[i]->next;
		d->head = ops[i];
	}
	d->nqueued += n;
	d->oldest_ms = dg_now_ms();
}

/* An answered batch: note refusals, forget its creates, take the range
 * if it asked for one, move done_seq (mu). */
static void dg_answered(struct cli_deleg *d, struct dg_op **ops, uint32_t n,
			const struct proto_batchrep *r, int asked, int retried)
{
	struct dg_dir *x;

	for (uint32_t i = 0; i < n; i++) {
		struct dg_op *op = ops[i];
		int st = r->status[i];

		if (st == -ENOENT && op->gone && (op->sent || retried)) {
			log_notice("delegated %s of \"%s\": ENOENT after a resend: "
				   "taken as its own first attempt's change",
				   proto_op_name(op->b.op), op->name);
			st = 0;
		}
		if (op->gone)
			dg_ino_drop(d, op->gone);
		if (st) {
			d->nrefused++;
			if (!d->err)
				d->err = st;
			log_warn("delegated %s of \"%s\" in directory %llu "
				 "(inode %llu) refused by the mgr: %s",
				 proto_op_name(op->b.op), op->name,
				 (unsigned long long)op->b.m.parent,
				 (unsigned long long)(op->b.newino ?
						      op->b.newino : op->b.m.ino),
				 strerror(-st));
		}
		if (op->b.op == PROTO_OP_MKDIR && !(r->flags[i] & PROTO_BOP_WRITE) &&
		    (x = dg_dir_find(d, op->b.newino)) && x->held)
			dg_dir_give_up(d, x); /* no lease: nothing alone there */
		if (op->b.newino && st)
			dg_ino_drop(d, op->b.newino); /* it does not exist */
		d->done_seq = op->seq;
		free(op);
	}
	if (asked && !r->range)
		d->range_refused_ms = dg_now_ms();
	if (asked)
		d->want_range = 0;
	if (r->range) {
		if (d->range_next >= d->range_end) {
			d->range_next = r->range;
			d->range_end = r->range + PROTO_INO_RANGE;
		} else {
			d->spare = r->range;
		}
	}
	d->nbatches++;
}

/* Send one batch of ops (without mu). @return 0 (r filled), -errno */
static int dg_send(struct cli_deleg *d, struct dg_op **ops, uint32_t n,
		   int want, struct proto_batchrep *r, int *retried)
{
	struct proto_bop *bops = calloc(n ? n : 1, sizeof(*bops));
	struct proto_batch b = { 0 };
	int rc;

	if (!bops)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		bops[i] = ops[i]->b;
	b.cred.session = d->fs->session;
	b.want = want ? PROTO_INO_RANGE : 0;
	b.n = n;
	b.host = bops;
	rc = cli_meta_batch(d->fs, &b, r, retried);
	free(bops);
	return rc;
}

/* Send what is due, then sleep until more is (the flusher thread). */
static void *dg_main(void *arg)
{
	struct cli_deleg *d = arg;
	struct dg_op **ops = calloc(PROTO_MAX_BATCH, sizeof(*ops));
	struct proto_batchrep *r = malloc(sizeof(*r));
	uint32_t n;
	int want, rc, retried;

	pthread_mutex_lock(&d->mu);
	while (ops && r) {
		while (!dg_due(d, dg_now_ms()) && !(d->stop && !d->head)) {
			dg_timed_wait(d, CLI_DELEG_DELAY_MS / 2);
		}
		if (d->stop && !d->head)
			break;
		n = dg_take(d, ops);
		/* a range is asked for only in a batch that empties the
		 * queue: the mgr keeps a session's last two ranges, so every
		 * op numbered from an older one must land before */
		want = d->want_range && !d->head;
		pthread_mutex_unlock(&d->mu);
		rc = dg_send(d, ops, n, want, r, &retried);
		pthread_mutex_lock(&d->mu);
		if (rc == 0 && r->n == n) {
			dg_answered(d, ops, n, r, want, retried);
			d->failing_ms = 0;
		} else {
			dg_untake(d, ops, n);
			d->fail_gen++;
			if (!d->failing_ms)
				d->failing_ms = dg_now_ms();
			log_warn("delegated ops: a batch of %u could not be sent "
				 "(%s); trying again in %u ms", n,
				 strerror(rc ? -rc : EPROTO), CLI_DELEG_RETRY_MS);
			if (d->stop)
				break;
			dg_timed_wait(d, CLI_DELEG_RETRY_MS);
		}
		pthread_cond_broadcast(&d->cv);
	}
	d->stop = 2; /* the thread is done */
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	free(r);
	free(ops);
	return NULL;
}

/* See cli_deleg.h. */
int cli_deleg_new(struct cli_deleg **out, struct cli_fs *fs,
		  cli_deleg_live_fn live, void *live_arg)
{
	struct cli_deleg *d = calloc(1, sizeof(*d));
	int rc;

	if (!d)
		return -ENOMEM;
	d->fs = fs;
	d->live = live;
	d->live_arg = live_arg;
	d->tail = &d->head;
	d->next_seq = 1;
	d->delay_ms = CLI_DELEG_DELAY_MS;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	rc = -pthread_create(&d->thread, NULL, dg_main, d);
	if (rc) {
		pthread_cond_destroy(&d->cv);
		pthread_mutex_destroy(&d->mu);
		free(d);
		return rc;
	}
	*out = d;
	return 0;
}

/* Free every record (the thread has stopped). */
static void dg_free_all(struct cli_deleg *d)
{
	struct dg_op *op;

	struct dg_dir *x;

	for (size_t b = 0; b < DG_BUCKETS; b++) /* the inodes go with them */
		while ((x = d->dirs[b])) {
			d->dirs[b] = x->next;
			dg_dir_give_up(d, x);
			free(x);
		}
	while ((op = d->head)) {
		d->head = op->next;
		free(op);
	}
}

/* See cli_deleg.h. */
void cli_deleg_free(struct cli_deleg *d)
{
	size_t lost;

	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	for (int tries = 0; tries < 3 && d->head; tries++)
		if (dg_wait_done(d) == 0)
			break;
	lost = d->nqueued;
	d->stop = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	pthread_join(d->thread, NULL);
	if (lost)
		log_err("delegated ops: %zu ops could not be sent to the mgr "
			"and are lost", lost);
	dg_free_all(d);
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	free(d);
}
