/*
 * test_cli_deleg.c - unit tests of the mount's delegated ops
 * (fuse-client/core/cli_deleg.c, included) with the BATCH request stubbed:
 * which ops are answered alone, what a batch carries and in which order,
 * how a refusal, a recall, a failed send and a range are handled.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_deleg.c"
#include "check.h"

/* What the stubbed mgr saw and will answer (the flusher thread calls
 * the stub; the test reads after a sync, which orders the two). */
static struct {
	pthread_mutex_t mu;
	unsigned nbatches, nops;
	uint16_t op[1024];          /* every op sent, in order */
	uint64_t ino[1024];         /* its newino (or ino) */
	char name[1024][16];
	int refuse_at;              /* refuse the op with this index (-1) */
	int fail;                   /* fail this many sends */
	int no_write;               /* answer MKDIRs without the WRITE flag */
	int enoent_removes;         /* answer UNLINK and RMDIR -ENOENT */
	uint64_t next_range;
} mgr = { PTHREAD_MUTEX_INITIALIZER, 0, 0, {0}, {0}, {{0}}, -1, 0, 0, 0, 4096 };

static int live_flag = 1;

/* Stub: the callback channel's state. */
static int live(void *arg)
{
	(void)arg;
	return live_flag;
}

/* Stub of the client core's clock. */
struct proto_time cli_now_time(void)
{
	return (struct proto_time){ 1000, 0 };
}

/* Stub of the BATCH request: record, then answer as set above. */
int cli_meta_batch(struct cli_fs *fs, const struct proto_batch *b,
		   struct proto_batchrep *r, int *retried)
{
	(void)fs;
	*retried = 0;
	pthread_mutex_lock(&mgr.mu);
	if (mgr.fail > 0) {
		mgr.fail--;
		pthread_mutex_unlock(&mgr.mu);
		return -EIO;
	}
	memset(r, 0, sizeof(*r));
	r->n = b->n;
	for (uint32_t i = 0; i < b->n && mgr.nops < 1024; i++, mgr.nops++) {
		const struct proto_bop *o = &b->host[i];

		mgr.op[mgr.nops] = o->op;
		mgr.ino[mgr.nops] = o->newino ? o->newino : o->m.ino;
		snprintf(mgr.name[mgr.nops], 16, "%.*s", (int)o->m.name.len,
			 o->m.name.len ? o->m.name.p : "");
		if ((int)mgr.nops == mgr.refuse_at)
			r->status[i] = -EACCES;
		if (mgr.enoent_removes && (o->op == PROTO_OP_UNLINK ||
					   o->op == PROTO_OP_RMDIR))
			r->status[i] = -ENOENT;
		if (o->op == PROTO_OP_MKDIR && !mgr.no_write)
			r->flags[i] = PROTO_BOP_WRITE;
	}
	if (b->want) {
		r->range = mgr.next_range;
		mgr.next_range += PROTO_INO_RANGE;
	}
	mgr.nbatches++;
	pthread_mutex_unlock(&mgr.mu);
	return 0;
}

/* A directory attr of ino owned by uid with mode. */
static struct proto_attr dir_attr(uint64_t ino, uint32_t uid, uint32_t mode)
{
	struct proto_attr a = { .ino = ino, .mode = S_IFDIR | mode, .uid = uid,
				.gid = uid, .nlink = 2 };
	return a;
}

/* Grant d a WRITE lease on dir (evseq ev). */
static void grant(struct cli_deleg *d, uint64_t dir, uint64_t ev)
{
	struct proto_attr a = dir_attr(dir, 0, 0755);
	struct proto_grant g = { dir, ev };

	cli_deleg_grant(d, &a, &g);
}

/* A create of name in parent by uid. */
static int create(struct cli_deleg *d, uint32_t uid, uint64_t parent,
		  const char *name, struct proto_attr *a)
{
	struct proto_cred c = { .uid = uid, .gid = uid };

	return cli_deleg_mknode(d, &c, parent, name, S_IFREG | 0644, NULL, a);
}

/* Ops the mgr saw so far. */
static unsigned seen(void)
{
	unsigned n;

	pthread_mutex_lock(&mgr.mu);
	n = mgr.nops;
	pthread_mutex_unlock(&mgr.mu);
	return n;
}

/* Answered alone: attributes, names, the range, what a batch carries. */
static void test_alone(struct cli_deleg *d)
{
	struct proto_cred root = { 0 };
	struct proto_attr a, b, s;
	struct proto_mreq m = { .valid = PROTO_SA_MODE | PROTO_SA_MTIME,
				.mode = 0600, .mtime = { 77, 0 } };

	CHECK(create(d, 0, 10, "f", &a) == -EAGAIN, "not held: today's path");
	grant(d, 10, 0);
	CHECK(create(d, 0, 10, "f", &a) == 0, "held: answered alone");
	CHECK(a.ino >= 4096 && a.ino < 4096 + PROTO_INO_RANGE,
	      "its number from the range the mgr handed");
	CHECK(a.mode == (S_IFREG | 0644) && a.nlink == 1 && a.uid == 0,
	      "a new file's attributes");
	CHECK(a.layout.unit == 65536 && a.layout.count == 2 &&
	      a.layout.first == a.ino % 2, "the default layout, first by number");
	CHECK(cli_deleg_pending(d, a.ino), "its create is pending");
	CHECK(create(d, 0, 10, "f", &b) == -EAGAIN, "the name is taken");
	CHECK(cli_deleg_lookup(d, 10, "f", &b) == 0 && b.ino == a.ino,
	      "a name made alone: answered from its record");
	CHECK(cli_deleg_lookup(d, 10, "g", &b) == -ENOENT, "an unmade one: none");
	CHECK(cli_deleg_lookup(d, 11, "g", &b) == -EAGAIN, "not held: ask");
	cli_deleg_named(d, 10, "h", 0);
	CHECK(cli_deleg_lookup(d, 10, "h", &b) == -EAGAIN,
	      "a name made by today's path: ask the mgr");
	CHECK(cli_deleg_setattr(d, &root, a.ino, &m, &s) == 0 &&
	      s.mode == (S_IFREG | 0600) && s.mtime.sec == 77,
	      "a chmod and utime join the create");
	CHECK(create(d, 0, 10, "g", &b) == 0 && b.ino == a.ino + 1,
	      "the next number");
	CHECK(cli_deleg_sync(d) == 0, "sync");
	CHECK(seen() == 3 && mgr.op[0] == PROTO_OP_CREATE &&
	      mgr.op[1] == PROTO_OP_SETATTR && mgr.ino[1] == a.ino &&
	      mgr.op[2] == PROTO_OP_CREATE && !strcmp(mgr.name[2], "g"),
	      "the batch holds the ops in order");
	CHECK(cli_deleg_pending(d, a.ino), "committed: its record stays");
	CHECK(cli_deleg_setattr(d, &root, a.ino, &m, &s) == 0,
	      "a committed create's setattr still joins the queue");
	CHECK(cli_deleg_getattr(d, a.ino, &s) == 0 && s.mode == (S_IFREG | 0600) &&
	      s.mtime.sec == 77, "its getattr is answered here");
	CHECK(cli_deleg_getattr(d, 999, &s) == -EAGAIN, "another's: ask the mgr");
}

/* Who may act alone, and when not. */
static void test_refusals(struct cli_deleg *d)
{
	struct proto_attr a;
	struct proto_cred user = { .uid = 1000, .gid = 1000 };
	struct proto_mreq chown = { .valid = PROTO_SA_UID, .uid = 5 };
	struct proto_mreq trunc = { .valid = PROTO_SA_SIZE };

	CHECK(create(d, 1000, 10, "u", &a) == -EAGAIN,
	      "not the directory's owner: today's path");
	live_flag = 0;
	CHECK(create(d, 0, 10, "v", &a) == -EAGAIN, "channel down: today's path");
	CHECK(cli_deleg_lookup(d, 10, "v", &a) == -EAGAIN, "channel down: ask");
	live_flag = 1;
	CHECK(create(d, 0, 10, "v", &a) == 0, "up again");
	CHECK(cli_deleg_setattr(d, &user, a.ino, &chown, &a) == -EAGAIN,
	      "a chown by another user: today's path");
	CHECK(cli_deleg_setattr(d, &user, a.ino, &trunc, &a) == -EAGAIN,
	      "a size change: today's path");
	CHECK(cli_deleg_sync(d) == 0, "sync");
}

/* A refused op is reported at the next sync, once. */
static void test_refused(struct cli_deleg *d)
{
	struct proto_attr a;

	mgr.refuse_at = (int)seen();
	CHECK(create(d, 0, 10, "r", &a) == 0, "queued");
	CHECK(cli_deleg_sync(d) == -EACCES, "the refusal, at sync");
	CHECK(cli_deleg_sync(d) == 0, "reported once");
	mgr.refuse_at = -1;
}

/* Today's path waits for the queue when it names what is queued. */
static void test_before(struct cli_deleg *d)
{
	struct proto_attr a;
	uint64_t other[1] = { 999 }, dir[1] = { 10 };
	unsigned n0;

	CHECK(create(d, 0, 10, "b1", &a) == 0, "queued");
	n0 = seen();
	CHECK(cli_deleg_before(d, other, 1, 1) == 0, "an unrelated inode: no wait");
	CHECK(cli_deleg_before(d, dir, 1, 0) == 0 && seen() == n0 + 1,
	      "the held directory: the queue went first");
	CHECK(create(d, 0, 10, "b2", &a) == 0, "queued");
	n0 = seen();
	CHECK(cli_deleg_before(d, &a.ino, 1, 0) == 0 && seen() == n0 + 1 &&
	      cli_deleg_pending(d, a.ino),
	      "a read of a queued inode: its create went first, its record stays");
	n0 = seen();
	CHECK(cli_deleg_before(d, &a.ino, 1, 0) == 0 && seen() == n0,
	      "committed, nothing queued on it: no wait, no batch");
	CHECK(cli_deleg_before(d, &a.ino, 1, 1) == 0 && !cli_deleg_pending(d, a.ino),
	      "a change of it: its record is dropped");
}

/* Sends that fail are tried again; a wait outlasts them. */
static void test_failing(struct cli_deleg *d)
{
	struct proto_attr a;
	unsigned n0 = seen();

	mgr.fail = 2;
	CHECK(create(d, 0, 10, "x1", &a) == 0, "queued");
	CHECK(cli_deleg_sync(d) == 0 && seen() == n0 + 1 && mgr.fail == 0,
	      "sync waits out two failed sends");
}

/* A delegated mkdir is held from the start; without the mgr's WRITE flag
 * it is given up. */
static void test_mkdir(struct cli_deleg *d)
{
	struct proto_cred root = { 0 };
	struct proto_attr sub, f;

	struct proto_attr top;

	CHECK(cli_deleg_mknode(d, &root, 10, "sub", S_IFDIR | 0755, NULL,
			       &sub) == 0 && sub.nlink == 2, "mkdir alone");
	CHECK(cli_deleg_mknode(d, &root, sub.ino, "deeper", S_IFDIR | 0755, NULL,
			       &f) == 0 && cli_deleg_getattr(d, sub.ino, &top) == 0 &&
	      top.nlink == 3, "a subdirectory made alone counts in its parent's links");
	CHECK(create(d, 0, sub.ino, "in", &f) == 0, "held at once: create in it");
	CHECK(cli_deleg_mknode(d, &root, sub.ino, "ln", S_IFLNK | 0777, "in",
			       &f) == 0 && f.size == 2, "a symlink alone");
	CHECK(cli_deleg_sync(d) == 0, "sync");
	CHECK(create(d, 0, sub.ino, "in2", &f) == 0, "still held after the reply");
	mgr.no_write = 1;
	CHECK(cli_deleg_mknode(d, &root, 10, "sub2", S_IFDIR | 0755, NULL,
			       &sub) == 0, "mkdir alone");
	CHECK(cli_deleg_sync(d) == 0, "sync");
	CHECK(create(d, 0, sub.ino, "in", &f) == -EAGAIN,
	      "no WRITE lease granted: given up");
	mgr.no_write = 0;
}

/* A recall sends the queue before it returns, and ends the lease; a grant
 * older than the recall is void. */
static void test_recall(struct cli_deleg *d)
{
	struct proto_attr a;
	unsigned n0;

	grant(d, 20, 5);
	CHECK(create(d, 0, 20, "q", &a) == 0, "queued");
	n0 = seen();
	CHECK(cli_deleg_recall(d, 20, 9) == 0 && seen() == n0 + 1,
	      "the recall sent the queue first");
	CHECK(!cli_deleg_pending(d, a.ino), "the records made there are dropped");
	CHECK(create(d, 0, 20, "q2", &a) == -EAGAIN, "recalled: today's path");
	grant(d, 20, 8);
	CHECK(create(d, 0, 20, "q2", &a) == -EAGAIN, "a grant older than it: void");
	grant(d, 20, 9);
	CHECK(create(d, 0, 20, "q2", &a) == 0, "a newer grant holds");
	CHECK(cli_deleg_end(d, 20) == 0 && !cli_deleg_pending(d, a.ino),
	      "end: the queue went first");
	CHECK(create(d, 0, 20, "q3", &a) == -EAGAIN, "ended: today's path");
	CHECK(cli_deleg_recall(d, 30, 12) == 0, "a recall of a directory never held");
	grant(d, 31, 11);
	CHECK(create(d, 0, 31, "z", &a) == -EAGAIN,
	      "a grant older than a recall of an unknown directory: void");
	grant(d, 31, 12);
	CHECK(create(d, 0, 31, "z", &a) == 0 && cli_deleg_sync(d) == 0,
	      "one made after it holds");
	grant(d, 21, 12);
	cli_deleg_reset(d);
	grant(d, 32, 1);
	CHECK(create(d, 0, 32, "z", &a) == 0 && cli_deleg_sync(d) == 0,
	      "after a reset (a new mgr numbers events from 1) a grant holds");
	CHECK(create(d, 0, 21, "z", &a) == -EAGAIN, "a reset drops every lease");
}

/* Removals of what was made alone: queued, the freed inode, the record
 * kept until answered; what is not removed alone; a resent removal's
 * ENOENT is its own. */
static void test_remove(struct cli_deleg *d)
{
	struct proto_cred root = { 0 };
	struct proto_attr f, sub, x;
	struct proto_freed fr;
	unsigned n0;

	CHECK(create(d, 0, 10, "rm1", &f) == 0, "made");
	CHECK(cli_deleg_remove(d, &root, 10, "rm1", 1, NULL) == -EAGAIN,
	      "a file is no directory: today's path");
	n0 = seen();
	CHECK(cli_deleg_remove(d, &root, 10, "rm1", 0, &fr) == 0 &&
	      fr.ino == f.ino && fr.layout.unit == f.layout.unit,
	      "unlinked alone: the data to free is its own");
	CHECK(cli_deleg_lookup(d, 10, "rm1", &x) == -ENOENT, "the name is gone");
	CHECK(cli_deleg_getattr(d, f.ino, &x) == 0 && x.nlink == 0,
	      "its record stays, with no link, until answered");
	CHECK(cli_deleg_sync(d) == 0 && seen() == n0 + 2 &&
	      mgr.op[n0 + 1] == PROTO_OP_UNLINK, "create, then unlink");
	CHECK(cli_deleg_getattr(d, f.ino, &x) == -EAGAIN, "answered: dropped");
	CHECK(cli_deleg_remove(d, &root, 10, "h", 0, &fr) == -EAGAIN,
	      "a name made by today's path: today's path");
	CHECK(cli_deleg_mknode(d, &root, 10, "rd", S_IFDIR | 0755, NULL,
			       &sub) == 0 && create(d, 0, sub.ino, "in", &f) == 0,
	      "a directory with a file");
	CHECK(cli_deleg_remove(d, &root, 10, "rd", 1, NULL) == -EAGAIN,
	      "not empty: today's path");
	CHECK(cli_deleg_remove(d, &root, sub.ino, "in", 0, &fr) == 0 &&
	      cli_deleg_remove(d, &root, 10, "rd", 1, NULL) == 0,
	      "emptied, then removed alone");
	CHECK(create(d, 0, sub.ino, "again", &f) == -EAGAIN,
	      "a removed directory is held no more");
	mgr.enoent_removes = 1;
	mgr.fail = 1;
	CHECK(cli_deleg_sync(d) == 0,
	      "ENOENT for removals sent again after a lost answer: their own");
	mgr.enoent_removes = 0;
}

int main(void)
{
	struct cli_fs fs;
	struct cli_deleg *d;
	uint64_t q, b, r, l;

	memset(&fs, 0, sizeof(fs));
	fs.session = 42;
	fs.timeout_ms = 5000;
	fs.niods = 2;
	fs.deflayout = (struct proto_layout){ 65536, 2, 0, 1 };
	CHECK(cli_deleg_new(&d, &fs, live, NULL) == 0, "new");
	pthread_mutex_lock(&d->mu);
	d->delay_ms = 600000; /* batches go at a sync only: no race */
	pthread_mutex_unlock(&d->mu);
	test_alone(d);
	test_refusals(d);
	test_refused(d);
	test_before(d);
	test_failing(d);
	test_mkdir(d);
	test_remove(d);
	test_recall(d);
	cli_deleg_counts(d, &q, &b, &r, &l);
	CHECK(q == 0 && r == 1 && l >= 10, "counts");
	cli_deleg_free(d);
	return check_summary("cli_deleg");
}
