/* test_mgr_db.c - unit tests of the mgr namespace store (no network). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "mgr_db.h"
#include "mgr_kv.h"
#include "mgr_ns.h"
#include "mgr_xattr.h"
#include "test_ns_txn.h"

#include "check_cond.h"

#define S(x) x, strlen(x)

static struct proto_cred root_c = { 0, 0, 0, { 0 } };
static struct proto_cred user_c = { 1000, 1000, 1, { 100 } };
static struct proto_cred other_c = { 2000, 2000, 0, { 0 } };

static struct mgr_iod iods[3] = { { "127.0.0.1", 7401 }, { "127.0.0.1", 7402 },
				  { "127.0.0.1", 7403 } };

/* Open and configure a store with the test iod table. */
static struct mgr_db *open_db(const char *dir)
{
	struct mgr_db *db;
	char msg[256];

	if (mgr_db_open(&db, dir) != 0)
		return NULL;
	if (mgr_db_config(db, iods, 3, 0, 0, 0, msg, sizeof(msg)) != 0) {
		mgr_db_close(db);
		return NULL;
	}
	return db;
}

/* Collected readdir output. */
struct names {
	int n, max;
	char name[64][32];
	uint64_t cookie[64];
	uint64_t ino[64];
};

/* Emit callback: stop after max entries. */
static int collect(void *arg, uint64_t cookie, const char *name, size_t len,
		   const struct proto_attr *a)
{
	struct names *ns = arg;

	if (ns->n >= ns->max || ns->n >= 64)
		return 1;
	snprintf(ns->name[ns->n], sizeof(ns->name[0]), "%.*s", (int)len, name);
	ns->cookie[ns->n] = cookie;
	ns->ino[ns->n] = a->ino;
	ns->n++;
	return 0;
}

/* The commit histogram counts write commits (one sync each), not the
 * read transactions of lookups. */
static void test_commit_count(struct mgr_db *db)
{
	const struct metrics_hist *h = mgr_db_commit_latency();
	struct proto_attr a;
	uint64_t n0 = h->count;

	for (int i = 0; i < 5; i++)
		CHECK_RC(RD(mgr_ns_lookup, db, &root_c, 1, S("no-such-name"), &a), -ENOENT);
	CHECK(h->count == n0);
	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("cc"), 0755, &a), 0);
	CHECK(h->count == n0 + 1);
	CHECK_RC(RD(mgr_ns_lookup, db, &root_c, 1, S("cc"), &a), 0);
	CHECK_RC(WR(mgr_ns_rmdir, db, &root_c, 1, S("cc")), 0);
	CHECK(h->count == n0 + 2);
}

/* A namespace call runs in the caller's transaction and never ends it:
 * several calls share one txn and see each other's writes; aborting it
 * drops them all, committing keeps them all (as ops_txn_run relies on). */
static void test_ns_in_callers_txn(struct mgr_db *db)
{
	struct proto_attr d, f, a;
	struct mgr_txn *t;

	for (int commit = 0; commit < 2; commit++) {
		CHECK_RC(mgr_db_begin(db, 0, &t), 0);
		CHECK_RC(mgr_ns_mkdir(db, t, &root_c, 1, S("txn-dir"), 0755, &d), 0);
		CHECK_RC(mgr_ns_create(db, t, &root_c, d.ino, S("f"), 0644,
				       PROTO_CREATE_EXCL, &f), 0);
		CHECK_RC(mgr_ns_lookup(db, t, &root_c, d.ino, S("f"), &a), 0);
		CHECK(a.ino == f.ino);
		/* a failed call leaves the txn open for the caller to end */
		CHECK_RC(mgr_ns_create(db, t, &root_c, d.ino, S("f"), 0644,
				       PROTO_CREATE_EXCL, &a), -EEXIST);
		CHECK_RC(mgr_ns_getattr(db, t, d.ino, &a), 0);
		if (commit) {
			CHECK_RC(mgr_db_commit(t), 0);
		} else {
			mgr_db_abort(t);
		}
		CHECK_RC(RD(mgr_ns_lookup, db, &root_c, 1, S("txn-dir"), &a),
			 commit ? 0 : -ENOENT);
	}
	CHECK_RC(WR(mgr_ns_unlink, db, &root_c, d.ino, S("f"), &(struct proto_freed){ 0 }), 0);
	CHECK_RC(WR(mgr_ns_rmdir, db, &root_c, 1, S("txn-dir")), 0);
}

/* Create, lookup, mkdir link counts, times, permissions. */
static void test_basic(struct mgr_db *db)
{
	struct proto_attr a, d, r;
	struct proto_freed f;

	CHECK_RC(RD(mgr_ns_getattr, db, MGR_ROOT_INO, &r), 0);
	CHECK(S_ISDIR(r.mode) && (r.mode & 07777) == 0755 && r.nlink == 2);
	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("home"), 0777, &d), 0);
	CHECK(d.ino > 1 && d.nlink == 2);
	CHECK_RC(RD(mgr_ns_getattr, db, 1, &r), 0);
	CHECK(r.nlink == 3);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("f"), 0644, PROTO_CREATE_EXCL, &a), 0);
	CHECK(S_ISREG(a.mode) && a.uid == 1000 && a.gid == 1000 && a.nlink == 1);
	CHECK(a.layout.unit == 65536 && a.layout.count == 3 && a.layout.first < 3);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("f"), 0644, PROTO_CREATE_EXCL, &a), -EEXIST);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("f"), 0644, 0, &r), 0);
	CHECK(r.ino == a.ino);
	CHECK_RC(RD(mgr_ns_lookup, db, &other_c, d.ino, S("f"), &r), 0);
	CHECK(r.ino == a.ino);
	CHECK_RC(RD(mgr_ns_lookup, db, &other_c, d.ino, S("nope"), &r), -ENOENT);
	CHECK_RC(RD(mgr_ns_lookup, db, &other_c, a.ino, S("x"), &r), -ENOTDIR);
	/* second file rotates first */
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("g"), 0600, 0, &r), 0);
	CHECK(r.layout.first == (a.layout.first + 1) % 3);
	/* permissions */
	CHECK_RC(RD(mgr_ns_open, db, &other_c, r.ino, O_RDONLY, &r), -EACCES);
	CHECK_RC(RD(mgr_ns_open, db, &user_c, r.ino, O_RDWR, &r), 0);
	CHECK_RC(RD(mgr_ns_open, db, &other_c, a.ino, O_RDONLY, &r), 0);
	CHECK_RC(RD(mgr_ns_open, db, &other_c, a.ino, O_WRONLY, &r), -EACCES);
	CHECK_RC(RD(mgr_ns_access, db, &other_c, a.ino, 4), 0);
	CHECK_RC(RD(mgr_ns_access, db, &other_c, a.ino, 2), -EACCES);
	CHECK_RC(RD(mgr_ns_access, db, &root_c, a.ino, 1), -EACCES);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, 1, S("rootfile"), 0644, 0, &r), -EACCES);
	CHECK_RC(WR(mgr_ns_unlink, db, &other_c, d.ino, S("f"), &f), 0); /* dir is 0777 */
	CHECK(f.ino == a.ino && f.layout.count == 3);
	/* purge: neither owner nor freer may not; the freer may */
	struct proto_cred third_c = other_c;
	third_c.uid = other_c.uid + 1;
	CHECK(third_c.uid != user_c.uid);
	CHECK_RC(WR(mgr_ns_purge, db, &third_c, a.ino), -EPERM);
	CHECK_RC(WR(mgr_ns_purge, db, &other_c, a.ino), 0);
	CHECK_RC(RD(mgr_ns_getattr, db, a.ino, &r), -ENOENT);
	CHECK_RC(WR(mgr_ns_purge, db, NULL, a.ino), -ENOENT);
	/* sticky */
	struct mgr_inode dummy;
	(void)dummy;
	struct proto_mreq m = { .ino = d.ino, .valid = PROTO_SA_MODE, .mode = 01777 };
	CHECK_RC(WR(mgr_ns_setattr, db, &user_c, &m, &r), -EPERM);
	CHECK_RC(WR(mgr_ns_setattr, db, &root_c, &m, &r), 0);
	CHECK((r.mode & 07777) == 01777);
	CHECK_RC(WR(mgr_ns_unlink, db, &other_c, d.ino, S("g"), &f), -EPERM);
	CHECK_RC(WR(mgr_ns_rmdir, db, &root_c, 1, S("home")), -ENOTEMPTY);
	CHECK_RC(WR(mgr_ns_unlink, db, &root_c, 1, S("home"), &f), -EISDIR);
	/* mknod */
	CHECK_RC(WR(mgr_ns_mknod, db, &user_c, d.ino, S("fifo"), S_IFIFO | 0644, 0, &r), 0);
	CHECK(S_ISFIFO(r.mode));
	CHECK_RC(WR(mgr_ns_mknod, db, &user_c, d.ino, S("dev"), S_IFCHR | 0644, 0x101, &r), -EPERM);
	CHECK_RC(WR(mgr_ns_unlink, db, &user_c, d.ino, S("fifo"), &f), 0);
	CHECK(f.ino == 0);
	/* symlink */
	char buf[PROTO_MAX_PATH];
	size_t len = 0;
	CHECK_RC(WR(mgr_ns_symlink, db, &user_c, d.ino, S("ln"), S("../target"), &r), 0);
	CHECK(S_ISLNK(r.mode) && r.size == 9);
	CHECK_RC(RD(mgr_ns_readlink, db, r.ino, buf, sizeof(buf), &len), 0);
	CHECK(len == 9 && memcmp(buf, "../target", 9) == 0);
	CHECK_RC(RD(mgr_ns_readlink, db, d.ino, buf, sizeof(buf), &len), -EINVAL);
	/* setattr: size, chown, chgrp */
	CHECK_RC(RD(mgr_ns_lookup, db, &user_c, d.ino, S("g"), &a), 0);
	m = (struct proto_mreq){ .ino = a.ino, .valid = PROTO_SA_SIZE, .size = 12345 };
	CHECK_RC(WR(mgr_ns_setattr, db, &user_c, &m, &r), 0);
	CHECK(r.size == 12345 && r.blocks == 0); /* none published: a hole */
	struct proto_time t = { 1000, 5 };
	CHECK_RC(WR(mgr_ns_setsize, db, &root_c, a.ino, 100, &t, &r), 0);
	CHECK(r.size == 12345 && r.mtime.sec == 1000);
	CHECK_RC(WR(mgr_ns_setsize, db, &root_c, a.ino, 20000, &t, &r), 0);
	CHECK(r.size == 20000);
	/* publishing a size or blocks: the owner, root or a writer only */
	CHECK_RC(WR(mgr_ns_setsize, db, &other_c, a.ino, 30000, &t, &r), -EACCES);
	CHECK_RC(WR(mgr_ns_setblocks, db, &other_c, a.ino, PROTO_SB_GROW, 30000, &t,
				  8, &r), -EACCES);
	CHECK_RC(WR(mgr_ns_setsize, db, &user_c, a.ino, 20000, &t, &r), 0);
	CHECK(r.size == 20000);
	m = (struct proto_mreq){ .ino = a.ino, .valid = PROTO_SA_UID, .uid = 5 };
	CHECK_RC(WR(mgr_ns_setattr, db, &user_c, &m, &r), -EPERM);
	m = (struct proto_mreq){ .ino = a.ino, .valid = PROTO_SA_GID, .gid = 100 };
	CHECK_RC(WR(mgr_ns_setattr, db, &user_c, &m, &r), 0);
	CHECK(r.gid == 100);
	m.gid = 7;
	CHECK_RC(WR(mgr_ns_setattr, db, &user_c, &m, &r), -EPERM);
	m = (struct proto_mreq){ .ino = a.ino, .valid = PROTO_SA_MTIME, .mtime = { 5, 0 } };
	CHECK_RC(WR(mgr_ns_setattr, db, &other_c, &m, &r), -EPERM);
	m.valid = PROTO_SA_MTIME_NOW;
	CHECK_RC(WR(mgr_ns_setattr, db, &other_c, &m, &r), -EACCES);
}

/* SETATTR drops set-id bits: PROTO_SA_KILLPRIV (a write) and SIZE
 * (truncate) by the write rule, UID/GID by the chown rule; an explicit
 * mode wins; a lone KILLPRIV with nothing to drop changes nothing. */
static void test_setid(struct mgr_db *db)
{
	struct proto_attr d, a, r;
	struct proto_mreq m;

	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("sid"), 0777, &d), 0);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("f"), 0644, 0, &a), 0);
	m = (struct proto_mreq){ .ino = a.ino, .valid = PROTO_SA_MODE, .mode = 06777 };
	CHECK_RC(WR(mgr_ns_setattr, db, &user_c, &m, &r), 0);
	CHECK((r.mode & 07777) == 06777);
	a = r;
	/* root writes: nothing to drop, nothing changes */
	m = (struct proto_mreq){ .ino = a.ino, .valid = PROTO_SA_KILLPRIV };
	CHECK_RC(WR(mgr_ns_setattr, db, &root_c, &m, &r), 0);
	CHECK((r.mode & 07777) == 06777 && r.ctime.sec == a.ctime.sec &&
	      r.ctime.nsec == a.ctime.nsec);
	/* another uid writes: both go (group exec set) */
	CHECK_RC(WR(mgr_ns_setattr, db, &other_c, &m, &r), 0);
	CHECK((r.mode & 07777) == 0777);
	/* a mode from the owner wins over KILLPRIV */
	m = (struct proto_mreq){ .ino = a.ino, .valid = PROTO_SA_MODE | PROTO_SA_KILLPRIV,
				 .mode = 06767 };
	CHECK_RC(WR(mgr_ns_setattr, db, &user_c, &m, &r), 0);
	CHECK((r.mode & 07777) == 06767);
	/* the owner truncates: S_ISGID without S_IXGRP stays in its group */
	m = (struct proto_mreq){ .ino = a.ino, .valid = PROTO_SA_SIZE, .size = 1 };
	CHECK_RC(WR(mgr_ns_setattr, db, &user_c, &m, &r), 0);
	CHECK((r.mode & 07777) == 02767);
	/* without write permission another uid drops nothing */
	m = (struct proto_mreq){ .ino = a.ino, .valid = PROTO_SA_MODE, .mode = 06744 };
	CHECK_RC(WR(mgr_ns_setattr, db, &user_c, &m, &r), 0);
	m = (struct proto_mreq){ .ino = a.ino, .valid = PROTO_SA_KILLPRIV };
	CHECK_RC(WR(mgr_ns_setattr, db, &other_c, &m, &r), -EACCES);
	CHECK_RC(RD(mgr_ns_getattr, db, a.ino, &r), 0);
	CHECK((r.mode & 07777) == 06744);
	/* chown by root to the same owner: S_ISUID goes, S_ISGID without
	 * S_IXGRP stays */
	m = (struct proto_mreq){ .ino = a.ino, .valid = PROTO_SA_UID, .uid = 1000 };
	CHECK_RC(WR(mgr_ns_setattr, db, &root_c, &m, &r), 0);
	CHECK((r.mode & 07777) == 02744);
}

/* SETBLOCKS: blocks stored and reported, size grown only with
 * PROTO_SB_GROW, times as asked; a shrink caps the blocks. */
static void test_blocks(struct mgr_db *db)
{
	struct proto_attr a, d, r;
	struct proto_time t = { 1000, 0 }, t2 = { 2000, 0 }, t3 = { 3000, 0 };

	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("blk"), 0777, &d), 0);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("f"), S_IFREG | 0644, 0, &a), 0);
	CHECK(a.blocks == 0);
	CHECK_RC(WR(mgr_ns_setsize, db, &root_c, a.ino, 1 << 20, &t, &r), 0);
	CHECK(r.size == 1 << 20 && r.blocks == 0 && r.mtime.sec == 1000);
	/* no flags: only the blocks */
	CHECK_RC(WR(mgr_ns_setblocks, db, &root_c, a.ino, 0, 0, &t2, 24, &r), 0);
	CHECK(r.blocks == 24 && r.size == 1 << 20);
	CHECK(r.mtime.sec == 1000 && r.ctime.sec == 1000);
	/* ctime only; size ignored without GROW */
	CHECK_RC(WR(mgr_ns_setblocks, db, &root_c, a.ino, PROTO_SB_CTIME, 1 << 30, &t2, 30, &r), 0);
	CHECK(r.blocks == 30 && r.size == 1 << 20);
	CHECK(r.mtime.sec == 1000 && r.ctime.sec == 2000);
	/* grow: size, mtime and ctime change; a smaller size changes nothing */
	CHECK_RC(WR(mgr_ns_setblocks, db, &root_c, a.ino, PROTO_SB_GROW, 1 << 21, &t3, 4096, &r), 0);
	CHECK(r.size == 1 << 21 && r.blocks == 4096 && r.mtime.sec == 3000 &&
	      r.ctime.sec == 3000);
	CHECK_RC(WR(mgr_ns_setblocks, db, &root_c, a.ino, PROTO_SB_GROW, 5, &t, 4096, &r), 0);
	CHECK(r.size == 1 << 21 && r.mtime.sec == 3000);
	CHECK_RC(WR(mgr_ns_setblocks, db, &root_c, a.ino, PROTO_SB_GROW | PROTO_SB_MTIME, 5,
				  &t2, 4000, &r), 0);
	CHECK(r.size == 1 << 21 && r.mtime.sec == 2000 && r.blocks == 4000);
	CHECK_RC(RD(mgr_ns_getattr, db, a.ino, &r), 0);
	CHECK(r.blocks == 4000);
	/* a shrink caps the blocks at what the size can hold */
	struct proto_mreq m = { .ino = a.ino, .valid = PROTO_SA_SIZE, .size = 1000 };
	CHECK_RC(WR(mgr_ns_setattr, db, &user_c, &m, &r), 0);
	CHECK(r.size == 1000 && r.blocks == 2);
	/* not a regular file, or none */
	CHECK_RC(WR(mgr_ns_setblocks, db, &root_c, d.ino, 0, 0, &t, 1, &r), -EISDIR);
	CHECK_RC(WR(mgr_ns_setblocks, db, &root_c, 999999, 0, 0, &t, 1, &r), -ENOENT);
}

/* A version 1 inode record (before blocks) still loads, with blocks as
 * size / 512 rounded up, and is rewritten as version 2. */
static void test_irec_v1(struct mgr_db *db)
{
	struct v1 { /* the version 1 layout, as mgr_db.c wrote it */
		uint32_t version;
		uint32_t mode, nlink, uid, gid, rdev, flags;
		uint32_t target_len;
		uint64_t size, parent, next_seq;
		int64_t asec, msec, csec;
		uint32_t ansec, mnsec, cnsec;
		uint32_t unit;
		uint16_t count, first;
		uint32_t pad;
	} rec;
	struct proto_time t = { 1000, 0 };
	struct proto_attr a, d, r;
	struct mgr_inode in;
	uint8_t key[8];
	struct mgr_txn *txn;

	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("v1"), 0777, &d), 0);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("old"), S_IFREG | 0644, 0, &a), 0);
	memset(&rec, 0, sizeof(rec));
	rec = (struct v1){ .version = 1, .mode = S_IFREG | 0644, .nlink = 1,
			   .uid = 1000, .gid = 1000, .size = 100000,
			   .asec = 5, .msec = 6, .csec = 7, .unit = 65536,
			   .count = 3, .first = 0 };
	for (int i = 0; i < 8; i++)
		key[i] = (uint8_t)(a.ino >> (56 - 8 * i));
	const void *v;
	size_t vl;
	CHECK_RC(mgr_db_begin(db, 0, &txn), 0);
	CHECK_RC(mgr_kv_put(mgr_db_txn_kv(txn), MGR_KV_INODES, key, 8, &rec,
			    sizeof(rec), 0), 0);
	CHECK_RC(mgr_db_commit(txn), 0);
	CHECK_RC(RD(mgr_ns_getattr, db, a.ino, &r), 0);
	CHECK(r.size == 100000 && r.blocks == 196 && r.mtime.sec == 6 &&
	      r.layout.count == 3);
	CHECK_RC(WR(mgr_ns_setblocks, db, &root_c, a.ino, 0, 0, &t, 8, &r), 0);
	CHECK(r.blocks == 8);
	CHECK_RC(mgr_db_begin(db, 1, &txn), 0);
	CHECK(mgr_kv_get(mgr_db_txn_kv(txn), MGR_KV_INODES, key, 8, &v, &vl) == 0 &&
	      vl > sizeof(rec));
	CHECK_RC(mgr_db_inode_get(db, txn, a.ino, &in), 0);
	CHECK(in.blocks == 8 && in.size == 100000);
	mgr_db_abort(txn);
	/* a bad version or length is refused */
	rec.version = 3;
	CHECK_RC(mgr_db_begin(db, 0, &txn), 0);
	CHECK_RC(mgr_kv_put(mgr_db_txn_kv(txn), MGR_KV_INODES, key, 8, &rec,
			    sizeof(rec), 0), 0);
	CHECK_RC(mgr_db_inode_get(db, txn, a.ino, &in), -EIO);
	rec.version = 1;
	CHECK_RC(mgr_kv_put(mgr_db_txn_kv(txn), MGR_KV_INODES, key, 8, &rec,
			    sizeof(rec) - 4, 0), 0);
	CHECK_RC(mgr_db_inode_get(db, txn, a.ino, &in), -EIO);
	mgr_db_abort(txn);
}

/* Hard links and orphans. */
static void test_links(struct mgr_db *db)
{
	struct proto_attr d, a, r;
	struct proto_freed f;

	CHECK_RC(WR(mgr_ns_mkdir, db, &user_c, 1, S("ld"), 0755, &d), -EACCES);
	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("ld"), 0777, &d), 0);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("a"), 0644, 0, &a), 0);
	CHECK_RC(WR(mgr_ns_link, db, &user_c, a.ino, d.ino, S("b"), &r), 0);
	CHECK(r.nlink == 2);
	CHECK_RC(WR(mgr_ns_link, db, &user_c, a.ino, d.ino, S("b"), &r), -EEXIST);
	CHECK_RC(WR(mgr_ns_link, db, &user_c, d.ino, 1, S("dl"), &r), -EPERM);
	CHECK_RC(WR(mgr_ns_unlink, db, &user_c, d.ino, S("a"), &f), 0);
	CHECK(f.ino == 0);
	CHECK_RC(WR(mgr_ns_purge, db, NULL, a.ino), -EBUSY);
	CHECK_RC(WR(mgr_ns_unlink, db, &user_c, d.ino, S("b"), &f), 0);
	CHECK(f.ino == a.ino);
	CHECK_RC(RD(mgr_ns_getattr, db, a.ino, &r), 0);
	CHECK(r.nlink == 0);
	CHECK_RC(WR(mgr_ns_link, db, &user_c, a.ino, d.ino, S("c"), &r), -ENOENT);
}

/* Rename in all its forms. */
static void test_rename(struct mgr_db *db)
{
	struct proto_attr d, e, x, y, sub, r;
	struct proto_freed f;

	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("rn"), 0777, &d), 0);
	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("rn2"), 0777, &e), 0);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("x"), 0644, 0, &x), 0);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("y"), 0644, 0, &y), 0);
	CHECK_RC(WR(mgr_ns_mkdir, db, &user_c, d.ino, S("sub"), 0755, &sub), 0);
	/* noreplace */
	CHECK_RC(WR(mgr_ns_rename, db, &user_c, d.ino, S("x"), d.ino, S("y"), PROTO_RENAME_NOREPLACE, &f), -EEXIST);
	CHECK_RC(WR(mgr_ns_rename, db, &user_c, d.ino, S("x"), d.ino, S("y"), 3, &f), -EINVAL);
	/* exchange */
	CHECK_RC(WR(mgr_ns_rename, db, &user_c, d.ino, S("x"), d.ino, S("y"), PROTO_RENAME_EXCHANGE, &f), 0);
	CHECK_RC(RD(mgr_ns_lookup, db, &user_c, d.ino, S("x"), &r), 0);
	CHECK(r.ino == y.ino);
	CHECK_RC(WR(mgr_ns_rename, db, &user_c, d.ino, S("x"), d.ino, S("zz"), PROTO_RENAME_EXCHANGE, &f), -ENOENT);
	/* replace: y (inode x) replaced by x (inode y); x's inode orphaned */
	CHECK_RC(WR(mgr_ns_rename, db, &user_c, d.ino, S("x"), d.ino, S("y"), 0, &f), 0);
	CHECK(f.ino == x.ino);
	CHECK_RC(RD(mgr_ns_lookup, db, &user_c, d.ino, S("x"), &r), -ENOENT);
	CHECK_RC(RD(mgr_ns_lookup, db, &user_c, d.ino, S("y"), &r), 0);
	CHECK(r.ino == y.ino);
	/* type mismatches */
	CHECK_RC(WR(mgr_ns_rename, db, &user_c, d.ino, S("y"), d.ino, S("sub"), 0, &f), -EISDIR);
	CHECK_RC(WR(mgr_ns_rename, db, &user_c, d.ino, S("sub"), d.ino, S("y"), 0, &f), -ENOTDIR);
	/* into own subtree */
	CHECK_RC(WR(mgr_ns_rename, db, &root_c, 1, S("rn"), sub.ino, S("loop"), 0, &f), -EINVAL);
	CHECK_RC(WR(mgr_ns_rename, db, &root_c, 1, S("rn"), d.ino, S("loop"), 0, &f), -EINVAL);
	/* dir move across parents fixes nlink and ".." */
	CHECK_RC(WR(mgr_ns_rename, db, &user_c, d.ino, S("sub"), e.ino, S("sub2"), 0, &f), 0);
	CHECK_RC(RD(mgr_ns_getattr, db, d.ino, &r), 0);
	CHECK(r.nlink == 2);
	CHECK_RC(RD(mgr_ns_getattr, db, e.ino, &r), 0);
	CHECK(r.nlink == 3);
	struct names ns = { .max = 64 };
	int eof = 0;
	CHECK_RC(RD(mgr_ns_readdir, db, &user_c, sub.ino, 0, collect, &ns, &eof), 0);
	CHECK(ns.n == 2 && ns.ino[1] == e.ino && eof);
	/* replace an empty dir by a dir */
	CHECK_RC(WR(mgr_ns_mkdir, db, &user_c, e.ino, S("empty"), 0755, &r), 0);
	CHECK_RC(WR(mgr_ns_rename, db, &user_c, e.ino, S("sub2"), e.ino, S("empty"), 0, &f), 0);
	CHECK_RC(RD(mgr_ns_getattr, db, e.ino, &r), 0);
	CHECK(r.nlink == 3);
	/* same inode: no-op */
	CHECK_RC(WR(mgr_ns_link, db, &user_c, y.ino, d.ino, S("y2"), &r), 0);
	CHECK_RC(WR(mgr_ns_rename, db, &user_c, d.ino, S("y"), d.ino, S("y2"), 0, &f), 0);
	CHECK_RC(RD(mgr_ns_lookup, db, &user_c, d.ino, S("y"), &r), 0);
	/* sticky: other may not move user's file */
	struct proto_mreq m = { .ino = d.ino, .valid = PROTO_SA_MODE, .mode = 01777 };
	CHECK_RC(WR(mgr_ns_setattr, db, &root_c, &m, &r), 0);
	CHECK_RC(WR(mgr_ns_rename, db, &other_c, d.ino, S("y"), d.ino, S("o"), 0, &f), -EPERM);
}

/* Readdir resumes by cookie without skips or repeats across changes. */
static void test_readdir(struct mgr_db *db)
{
	struct proto_attr d, r;
	struct proto_freed f;
	struct names ns = { .max = 5 };
	char name[16];
	int eof = 0, seen[40] = { 0 };

	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("rd"), 0777, &d), 0);
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "e%02d", i);
		CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S(name), 0644, 0, &r), 0);
	}
	CHECK_RC(RD(mgr_ns_readdir, db, &user_c, d.ino, 0, collect, &ns, &eof), 0);
	CHECK(ns.n == 5 && !eof && strcmp(ns.name[0], ".") == 0 &&
	      strcmp(ns.name[1], "..") == 0 && ns.cookie[0] == 1 && ns.cookie[1] == 2);
	uint64_t cookie = ns.cookie[4];
	for (int i = 2; i < 5; i++)
		seen[atoi(ns.name[i] + 1)]++;
	/* remove one seen and one unseen entry, add a new one */
	CHECK_RC(WR(mgr_ns_unlink, db, &user_c, d.ino, S("e00"), &f), 0);
	CHECK_RC(WR(mgr_ns_unlink, db, &user_c, d.ino, S("e10"), &f), 0);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("e30"), 0644, 0, &r), 0);
	while (!eof) {
		ns = (struct names){ .max = 4 };
		CHECK_RC(RD(mgr_ns_readdir, db, &user_c, d.ino, cookie, collect, &ns, &eof), 0);
		if (ns.n == 0 && !eof) {
			CHECK(0);
			break;
		}
		for (int i = 0; i < ns.n; i++) {
			seen[atoi(ns.name[i] + 1)]++;
			cookie = ns.cookie[i];
		}
	}
	for (int i = 0; i < 20; i++)
		CHECK(seen[i] == (i == 10 ? 0 : 1));
	CHECK(seen[30] == 1);
	CHECK_RC(RD(mgr_ns_readdir, db, &other_c, 1, 0, collect, &ns, &eof), 0);
	struct proto_mreq m = { .ino = d.ino, .valid = PROTO_SA_MODE, .mode = 0700 };
	CHECK_RC(WR(mgr_ns_setattr, db, &root_c, &m, &r), 0);
	CHECK_RC(RD(mgr_ns_readdir, db, &user_c, d.ino, 0, collect, &ns, &eof), -EACCES);
}

/* Extended attributes and the layout attribute. */
static void test_xattr(struct mgr_db *db)
{
	struct proto_attr d, a, r;
	char buf[256];
	size_t sz = 0;

	CHECK_RC(WR(mgr_ns_mkdir, db, &user_c, 1, S("xd"), 0755, &d), -EACCES);
	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("xd"), 0777, &d), 0);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("f"), 0644, 0, &a), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, a.ino, S("user.k"), "v1", 2, 0), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, a.ino, S("user.k"), "v2", 2, PROTO_XATTR_CREATE), -EEXIST);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, a.ino, S("user.n"), "v2", 2, PROTO_XATTR_REPLACE), -ENODATA);
	CHECK_RC(WR(mgr_xattr_set, db, &other_c, a.ino, S("user.k"), "v3", 2, 0), -EACCES);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, a.ino, S("trusted.k"), "v3", 2, 0), -EPERM);
	CHECK_RC(WR(mgr_xattr_set, db, &root_c, a.ino, S("trusted.k"), "v3", 2, 0), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &root_c, a.ino, S("security.k"), "v3", 2, 0), -EOPNOTSUPP);
	CHECK_RC(RD(mgr_xattr_get, db, &other_c, a.ino, S("user.k"), buf, 0, &sz), 0);
	CHECK(sz == 2);
	CHECK_RC(RD(mgr_xattr_get, db, &other_c, a.ino, S("user.k"), buf, 1, &sz), -ERANGE);
	CHECK_RC(RD(mgr_xattr_get, db, &other_c, a.ino, S("user.k"), buf, sizeof(buf), &sz), 0);
	CHECK(sz == 2 && memcmp(buf, "v1", 2) == 0);
	CHECK_RC(RD(mgr_xattr_get, db, &other_c, a.ino, S("user.zz"), buf, sizeof(buf), &sz), -ENODATA);
	CHECK_RC(RD(mgr_xattr_get, db, &other_c, a.ino, S("trusted.k"), buf, sizeof(buf), &sz), -ENODATA);
	CHECK_RC(RD(mgr_xattr_list, db, &user_c, a.ino, buf, sizeof(buf), &sz), 0);
	CHECK(sz == 7 && memcmp(buf, "user.k", 7) == 0);
	CHECK_RC(RD(mgr_xattr_list, db, &root_c, a.ino, buf, sizeof(buf), &sz), 0);
	CHECK(sz == 17);
	CHECK_RC(RD(mgr_xattr_list, db, &root_c, a.ino, buf, 5, &sz), -ERANGE);
	CHECK_RC(WR(mgr_xattr_remove, db, &user_c, a.ino, S("user.k")), 0);
	CHECK_RC(WR(mgr_xattr_remove, db, &user_c, a.ino, S("user.k")), -ENODATA);
	/* layout */
	CHECK_RC(RD(mgr_xattr_get, db, &user_c, d.ino, S("user.rpfs.layout"), buf, sizeof(buf), &sz), 0);
	buf[sz] = 0;
	CHECK(strstr(buf, "unit=65536") && strstr(buf, "count=3"));
	CHECK_RC(WR(mgr_xattr_set, db, &root_c, d.ino, S("user.rpfs.layout"), S("unit=4096,count=2"), 0), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &root_c, d.ino, S("user.rpfs.layout"), S("unit=4096,count=4"), 0), -EINVAL);
	CHECK_RC(WR(mgr_xattr_set, db, &root_c, d.ino, S("user.rpfs.layout"), S("unit=4095,count=1"), 0), -EINVAL);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("g"), 0644, 0, &r), 0);
	CHECK(r.layout.unit == 4096 && r.layout.count == 2);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, r.ino, S("user.rpfs.layout"), S("unit=1048576,count=1,first=2"), 0), 0);
	CHECK_RC(RD(mgr_ns_getattr, db, r.ino, &r), 0);
	CHECK(r.layout.unit == 1048576 && r.layout.count == 1 && r.layout.first == 2);
	struct proto_time t = { 1, 0 };
	CHECK_RC(WR(mgr_ns_setsize, db, &root_c, r.ino, 10, &t, &r), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, r.ino, S("user.rpfs.layout"), S("unit=4096,count=1"), 0), -EBUSY);
}

/* Make a fresh temp dir for a store. */
static void mk_tmp(char *dir, size_t cap)
{
	snprintf(dir, cap, "/tmp/test_mgr_db.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
}

/* Remove the store files and dir. */
static void rm_tmp(const char *dir)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/data.mdb", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/lock.mdb", dir);
	unlink(p);
	rmdir(dir);
}

/* Mirror groups from failure domains: recorded at first start, a later
 * start with other domains refused; mirror defaults, stale records kept. */
static void test_groups(void)
{
	struct mgr_iod four[4] = { { "h", 1, "r1" }, { "h", 2, "r1" },
				   { "h", 3, "r2" }, { "h", 4, "r2" } };
	struct mgr_db *db;
	struct mgr_inode in;
	struct proto_attr r;
	uint64_t counts[4];
	char dir[64], msg[256] = "";
	struct mgr_txn *txn;

	mk_tmp(dir, sizeof(dir));
	CHECK_RC(mgr_db_open(&db, dir), 0);
	CHECK_RC(mgr_db_config(db, four, 4, 0, 0, 2, msg, sizeof(msg)), 0);
	CHECK(db->ngroups == 2 && db->groups[0].iod[0] == 0 &&
	      db->groups[0].iod[1] == 2 && db->groups[1].iod[0] == 1 &&
	      db->groups[1].iod[1] == 3);
	CHECK(db->deflayout.mirror == 2 && db->deflayout.count == 2);
	/* a new file gets a mirrored layout over the groups */
	CHECK_RC(WR(mgr_ns_create, db, &root_c, 1, S("m"), 0644, 0, &r), 0);
	CHECK(r.layout.mirror == 2 && r.layout.count == 2 && r.layout.first < 2);
	CHECK_RC(mgr_db_begin(db, 0, &txn), 0);
	CHECK_RC(mgr_db_inode_get(db, txn, r.ino, &in), 0);
	CHECK(in.layout.mirror == 2);
	CHECK_RC(mgr_db_stale_add(db, txn, 2, r.ino, NULL), 0);
	CHECK_RC(mgr_db_stale_add(db, txn, 2, r.ino, NULL), 0);
	CHECK_RC(mgr_db_commit(txn), 0);
	mgr_db_close(db);

	CHECK_RC(mgr_db_open(&db, dir), 0);
	CHECK_RC(mgr_db_stale_count(db, counts, 4), 0);
	CHECK(counts[0] == 0 && counts[2] == 1);
	/* other domains form other groups: refused */
	four[1].domain[1] = '2';
	four[2].domain[1] = '1';
	CHECK_RC(mgr_db_config(db, four, 4, 0, 0, 0, msg, sizeof(msg)), -EEXIST);
	CHECK(strstr(msg, "mirror groups") != NULL);
	four[1].domain[1] = '1';
	four[2].domain[1] = '2';
	/* back to mirror 1 without a count: all iods */
	CHECK_RC(mgr_db_config(db, four, 4, 0, 0, 1, msg, sizeof(msg)), 0);
	CHECK(db->deflayout.mirror == 1 && db->deflayout.count == 4);
	/* a purged inode takes its records along */
	CHECK_RC(mgr_db_begin(db, 0, &txn), 0);
	CHECK_RC(mgr_db_inode_del(db, txn, r.ino), 0);
	CHECK_RC(mgr_db_commit(txn), 0);
	CHECK_RC(mgr_db_stale_count(db, counts, 4), 0);
	CHECK(counts[2] == 0);
	CHECK_RC(mgr_db_config(db, four, 4, 0, 3, 2, msg, sizeof(msg)), -EINVAL);
	mgr_db_close(db);
	rm_tmp(dir);

	/* one domain holds 3 of 4 iods: cannot pair across domains */
	mk_tmp(dir, sizeof(dir));
	CHECK_RC(mgr_db_open(&db, dir), 0);
	four[1].domain[1] = '2';
	CHECK_RC(mgr_db_config(db, four, 4, 0, 0, 0, msg, sizeof(msg)), -EINVAL);
	CHECK(strstr(msg, "\"r2\" holds 3 of the 4 iods (domains: r1=1 r2=3)") != NULL);
	/* one iod: no group, so mirror 2 is refused */
	CHECK_RC(mgr_db_config(db, iods, 1, 0, 0, 2, msg, sizeof(msg)), -EINVAL);
	CHECK(strstr(msg, "mirror=2 needs at least 2 iods") != NULL);
	mgr_db_close(db);
	rm_tmp(dir);
}

/* Stale records: every mark a new generation (a repeated mark too),
 * delete only at the generation read, paged listings per iod and of all,
 * the version bumped by commits that changed records (PURGE too) and only
 * by those; a record written before generations reads as generation 0. */
static void test_stale_gen(void)
{
	struct mgr_iod four[4] = { { "h", 1 }, { "h", 2 }, { "h", 3 }, { "h", 4 } };
	static uint64_t inos[300], gens[300];
	static struct mgr_stale_rec recs[100];
	struct mgr_db *db;
	struct proto_attr r;
	uint64_t v, g1 = 0, g2 = 0, g, after;
	uint32_t n, total, pages;
	char dir[64], msg[256] = "";
	uint8_t kb[10] = { 0, 3, 0, 0, 0, 0, 0, 0, 0, 99 };
	struct mgr_txn *txn;

	mk_tmp(dir, sizeof(dir));
	CHECK_RC(mgr_db_open(&db, dir), 0);
	CHECK_RC(mgr_db_config(db, four, 4, 0, 0, 2, msg, sizeof(msg)), 0);
	CHECK_RC(WR(mgr_ns_create, db, &root_c, 1, S("m"), 0644, 0, &r), 0);
	v = mgr_db_stale_version(db);
	CHECK_RC(mgr_db_begin(db, 0, &txn), 0);
	CHECK_RC(mgr_db_stale_add(db, txn, 2, r.ino, &g1), 0);
	CHECK(mgr_db_stale_version(db) == v); /* not before the commit */
	CHECK_RC(mgr_db_commit(txn), 0);
	CHECK(mgr_db_stale_version(db) > v && g1 > 0);
	/* a repeated mark bumps the generation */
	CHECK_RC(mgr_db_begin(db, 0, &txn), 0);
	CHECK_RC(mgr_db_stale_add(db, txn, 2, r.ino, &g2), 0);
	CHECK_RC(mgr_db_stale_get(db, txn, 2, r.ino, &g), 0);
	CHECK(g2 > g1 && g == g2);
	CHECK_RC(mgr_db_commit(txn), 0);
	/* delete at a stale generation: refused; at the current one: done */
	v = mgr_db_stale_version(db);
	CHECK_RC(mgr_db_begin(db, 0, &txn), 0);
	CHECK_RC(mgr_db_stale_del_if(db, txn, 2, r.ino, g1), -EAGAIN);
	mgr_db_abort(txn);
	CHECK(mgr_db_stale_version(db) == v);
	CHECK_RC(mgr_db_begin(db, 0, &txn), 0);
	CHECK_RC(mgr_db_stale_del_if(db, txn, 2, r.ino, g2), 0);
	CHECK_RC(mgr_db_stale_get(db, txn, 2, r.ino, &g), -ENOENT);
	CHECK_RC(mgr_db_stale_del_if(db, txn, 2, r.ino, g2), -ENOENT);
	CHECK_RC(mgr_db_commit(txn), 0);
	CHECK(mgr_db_stale_version(db) == v + 1);
	/* a commit that touches no record leaves the version alone */
	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("d"), 0755, &r), 0);
	CHECK(mgr_db_stale_version(db) == v + 1);
	/* pages: 600 records of iod 1, 5 of iod 0, 1 of iod 3 (below) */
	CHECK_RC(mgr_db_begin(db, 0, &txn), 0);
	for (uint64_t i = 0; i < 600; i++)
		CHECK_RC(mgr_db_stale_add(db, txn, 1, 1000 + 7 * i, NULL), 0);
	for (uint64_t i = 0; i < 5; i++)
		CHECK_RC(mgr_db_stale_add(db, txn, 0, 50 + i, NULL), 0);
	CHECK_RC(mgr_kv_put(mgr_db_txn_kv(txn), MGR_KV_STALE, kb, 10, kb, 0, 0),
		 0); /* before generations */
	CHECK_RC(mgr_db_commit(txn), 0);
	CHECK_RC(mgr_db_begin(db, 1, &txn), 0);
	after = 0;
	total = pages = 0;
	do {
		CHECK_RC(mgr_db_stale_list(db, txn, 1, after, 256, inos, gens, &n), 0);
		for (uint32_t i = 0; i < n; i++) {
			CHECK(inos[i] == 1000 + 7 * (total + i));
			CHECK(i == 0 || gens[i] > gens[i - 1]);
		}
		if (n)
			after = inos[n - 1];
		total += n;
		pages++;
	} while (n == 256);
	CHECK(total == 600 && pages == 3);
	CHECK_RC(mgr_db_stale_list(db, txn, 1, 1000 + 7 * 599, 256, inos, NULL, &n), 0);
	CHECK(n == 0);
	CHECK_RC(mgr_db_stale_list(db, txn, 2, 0, 256, inos, NULL, &n), 0);
	CHECK(n == 0);
	{
		uint16_t ai = 0;
		uint64_t ao = 0;
		uint32_t per[4] = { 0 };

		total = 0;
		do {
			CHECK_RC(mgr_db_stale_list_all(db, txn, ai, ao, 100, recs, &n), 0);
			for (uint32_t i = 0; i < n; i++) {
				CHECK(recs[i].iod > ai ||
				      (recs[i].iod == ai && recs[i].ino > ao));
				ai = recs[i].iod;
				ao = recs[i].ino;
				per[recs[i].iod]++;
				if (recs[i].iod == 3)
					CHECK(recs[i].ino == 99 && recs[i].gen == 0);
			}
			total += n;
		} while (n == 100);
		CHECK(total == 606 && per[0] == 5 && per[1] == 600 && per[3] == 1);
	}
	CHECK_RC(mgr_db_stale_get(db, txn, 3, 99, &g), 0);
	CHECK(g == 0);
	mgr_db_abort(txn);
	CHECK_RC(mgr_db_begin(db, 0, &txn), 0);
	CHECK_RC(mgr_db_stale_del_if(db, txn, 3, 99, 0), 0);
	CHECK_RC(mgr_db_commit(txn), 0);
	/* PURGE of an inode with records: they go, and the version moves */
	CHECK_RC(WR(mgr_ns_create, db, &root_c, 1, S("p"), 0644, 0, &r), 0);
	CHECK_RC(mgr_db_begin(db, 0, &txn), 0);
	CHECK_RC(mgr_db_stale_add(db, txn, r.layout.first == 0 ? 0 : 1, r.ino,
				  NULL), 0);
	CHECK_RC(mgr_db_commit(txn), 0);
	v = mgr_db_stale_version(db);
	CHECK_RC(mgr_db_begin(db, 0, &txn), 0);
	CHECK_RC(mgr_db_inode_del(db, txn, r.ino), 0);
	CHECK_RC(mgr_db_commit(txn), 0);
	CHECK(mgr_db_stale_version(db) == v + 1);
	mgr_db_close(db);
	rm_tmp(dir);
}

/* Collect (name, child) pairs of mgr_db_readdir. */
static int collect_raw(void *arg, uint64_t seq, const char *name, size_t len,
		       uint64_t child)
{
	struct names *ns = arg;

	if (ns->n >= 64)
		return 1;
	snprintf(ns->name[ns->n], sizeof(ns->name[0]), "%.*s", (int)len, name);
	ns->cookie[ns->n] = seq;
	ns->ino[ns->n] = child;
	ns->n++;
	return 0;
}

/* dirseq records: a readdir page is one scan that reads the child from
 * the record; a record in the older format (the name alone) still reads
 * (its child from dirents); an exchange re-points the record too. */
static void test_dirseq_format(struct mgr_db *db)
{
	struct proto_attr d, a, b;
	struct mgr_txn *txn;
	struct names ns = { .max = 64 };
	uint8_t key[16];
	uint64_t seq = MGR_SEQ_FIRST;

	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("dsq"), 0777, &d), 0);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("old"), 0644, 0, &a), 0);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("new"), 0644, 0, &b), 0);
	/* rewrite the first entry's record as before: name only */
	for (int i = 0; i < 8; i++) {
		key[i] = (uint8_t)(d.ino >> (56 - 8 * i));
		key[8 + i] = (uint8_t)(seq >> (56 - 8 * i));
	}
	CHECK_RC(mgr_db_begin(db, 0, &txn), 0);
	CHECK_RC(mgr_kv_put(mgr_db_txn_kv(txn), MGR_KV_DIRSEQ, key, 16, "old",
			    3, 0), 0);
	CHECK_RC(mgr_db_commit(txn), 0);
	CHECK_RC(mgr_db_begin(db, 1, &txn), 0);
	CHECK_RC(mgr_db_readdir(db, txn, d.ino, 0, collect_raw, &ns), 1);
	mgr_db_abort(txn);
	CHECK(ns.n == 2 && strcmp(ns.name[0], "old") == 0 && ns.ino[0] == a.ino &&
	      strcmp(ns.name[1], "new") == 0 && ns.ino[1] == b.ino);
	/* an exchange: each record now names the other child */
	CHECK_RC(mgr_db_begin(db, 0, &txn), 0);
	CHECK_RC(mgr_db_dirent_set(db, txn, d.ino, S("old"), b.ino), 0);
	CHECK_RC(mgr_db_dirent_set(db, txn, d.ino, S("new"), a.ino), 0);
	CHECK_RC(mgr_db_commit(txn), 0);
	ns = (struct names){ .max = 64 };
	CHECK_RC(mgr_db_begin(db, 1, &txn), 0);
	CHECK_RC(mgr_db_readdir(db, txn, d.ino, 0, collect_raw, &ns), 1);
	mgr_db_abort(txn);
	CHECK(ns.n == 2 && ns.ino[0] == b.ino && ns.ino[1] == a.ino &&
	      ns.cookie[0] == seq && ns.cookie[1] == seq + 1);
}

/* Does root carry the xattr name (in a txn of its own)? */
static int has_xattr(struct mgr_db *db, const char *name)
{
	struct mgr_txn *txn;
	const void *v;
	size_t vl;
	int rc;

	if (mgr_db_begin(db, 1, &txn))
		return -1;
	rc = mgr_db_xattr_get(db, txn, MGR_ROOT_INO, name, strlen(name), &v, &vl);
	mgr_db_abort(txn);
	return rc == 0;
}

/* Child transactions (group commit's building block): an aborted child
 * drops only its own writes; a committed one is visible to its parent and
 * durable only once the parent commits (checked by reopening the store);
 * the stale version moves for a committed child's stale change only. */
static void test_child_txn(void)
{
	struct mgr_iod four[4] = { { "h", 1 }, { "h", 2 }, { "h", 3 }, { "h", 4 } };
	struct mgr_txn *top, *c;
	struct mgr_db *db;
	char dir[64], msg[256];
	uint64_t v;
	const void *val;
	size_t vl;

	mk_tmp(dir, sizeof(dir));
	CHECK_RC(mgr_db_open(&db, dir), 0);
	CHECK_RC(mgr_db_config(db, four, 4, 0, 0, 2, msg, sizeof(msg)), 0);
	/* a parent that never commits: nothing of its committed child stays */
	CHECK_RC(mgr_db_begin(db, 0, &top), 0);
	CHECK_RC(mgr_db_begin_child(top, &c), 0);
	CHECK_RC(mgr_db_xattr_put(db, c, MGR_ROOT_INO, S("user.lost"), "1", 1), 0);
	CHECK_RC(mgr_db_commit(c), 0);
	CHECK_RC(mgr_db_xattr_get(db, top, MGR_ROOT_INO, S("user.lost"), &val,
				  &vl), 0);
	mgr_db_abort(top);
	mgr_db_close(db);
	CHECK_RC(mgr_db_open(&db, dir), 0);
	CHECK(has_xattr(db, "user.lost") == 0);
	/* committed child, aborted child, committed parent */
	v = mgr_db_stale_version(db);
	CHECK_RC(mgr_db_begin(db, 0, &top), 0);
	CHECK_RC(mgr_db_begin_child(top, &c), 0);
	CHECK_RC(mgr_db_xattr_put(db, c, MGR_ROOT_INO, S("user.kept"), "1", 1), 0);
	CHECK_RC(mgr_db_commit(c), 0);
	CHECK_RC(mgr_db_begin_child(top, &c), 0);
	CHECK_RC(mgr_db_xattr_put(db, c, MGR_ROOT_INO, S("user.dropped"), "1", 1), 0);
	CHECK_RC(mgr_db_stale_add(db, c, 1, 77, NULL), 0);
	CHECK_RC(mgr_db_xattr_get(db, c, MGR_ROOT_INO, S("user.kept"), &val, &vl), 0);
	mgr_db_abort(c);
	CHECK_RC(mgr_db_xattr_get(db, top, MGR_ROOT_INO, S("user.dropped"), &val,
				  &vl), -ENODATA);
	CHECK_RC(mgr_db_stale_get(db, top, 1, 77, NULL), -ENOENT);
	CHECK_RC(mgr_db_commit(top), 0);
	CHECK(mgr_db_stale_version(db) == v); /* the stale add was dropped */
	/* a child's stale change bumps the version at the parent's commit */
	CHECK_RC(mgr_db_begin(db, 0, &top), 0);
	CHECK_RC(mgr_db_begin_child(top, &c), 0);
	CHECK_RC(mgr_db_stale_add(db, c, 1, 78, NULL), 0);
	CHECK_RC(mgr_db_commit(c), 0);
	CHECK(mgr_db_stale_version(db) == v);
	CHECK_RC(mgr_db_commit(top), 0);
	CHECK(mgr_db_stale_version(db) == v + 1);
	/* a child of a read txn is refused */
	CHECK_RC(mgr_db_begin(db, 1, &top), 0);
	CHECK_RC(mgr_db_begin_child(top, &c), -EINVAL);
	CHECK_RC(mgr_kv_put(mgr_db_txn_kv(top), MGR_KV_META, "x", 1, "y", 1, 0),
		 -EINVAL);
	mgr_db_abort(top);
	mgr_db_close(db);
	CHECK_RC(mgr_db_open(&db, dir), 0);
	CHECK(has_xattr(db, "user.kept") == 1);
	CHECK(has_xattr(db, "user.dropped") == 0);
	mgr_db_close(db);
	rm_tmp(dir);
}

/* Open and configure a store in dir with the given map and xattr caps. */
static struct mgr_db *open_limits(const char *dir, uint64_t size,
				  uint32_t count, uint32_t bytes)
{
	struct mgr_db_limits l = { size, count, bytes };
	struct mgr_kv_conf kc = { .kind = MGR_KV_LMDB, .dir = dir };
	struct mgr_db *db;
	char msg[256];

	if (mgr_db_open_store(&db, &kc, &l, 1, msg, sizeof(msg)) != 0)
		return NULL;
	if (mgr_db_config(db, iods, 3, 0, 0, 0, msg, sizeof(msg)) != 0) {
		mgr_db_close(db);
		return NULL;
	}
	return db;
}

/* The headroom rule's view of db: *used pages in use, *limit where growth
 * stops. */
static void usage_of(struct mgr_db *db, uint64_t *used, uint64_t *limit)
{
	struct mgr_txn *txn;

	*used = *limit = 0;
	CHECK_RC(mgr_db_begin(db, 1, &txn), 0);
	CHECK_RC(mgr_db_usage(db, txn, used, limit), 0);
	mgr_db_abort(txn);
}

/*
 * Fill dir with files of 40 xattrs of 1000 bytes each (under the caps)
 * until the namespace refuses; returns the number of files created and
 * the first error, which must be -ENOSPC (not -EIO: an MDB_MAP_FULL that
 * leaked). Values of 1000 bytes stay in the leaf pages, so the map fills
 * without needing runs of free pages.
 */
static int fill(struct mgr_db *db, uint64_t dir, int *nfiles)
{
	char name[32], val[1000];
	struct proto_attr a;
	int rc = 0;

	memset(val, 'v', sizeof(val));
	for (*nfiles = 0; *nfiles < 100000; (*nfiles)++) {
		snprintf(name, sizeof(name), "file%06d", *nfiles);
		rc = WR(mgr_ns_create, db, &user_c, dir, S(name), 0644, 0, &a);
		for (int i = 0; !rc && i < 40; i++) {
			snprintf(name, sizeof(name), "user.x%02d", i);
			rc = WR(mgr_xattr_set, db, &user_c, a.ino, S(name), val,
					   sizeof(val), 0);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* What a full namespace refuses and what it still allows. dir: the
 * filled directory (with an empty directory "empty" in it); f, g: its
 * first two files. */
static void check_full(struct mgr_db *db, uint64_t dir, struct proto_attr *f,
		       struct proto_attr *g)
{
	struct proto_attr a;
	struct proto_freed fr;
	struct names ns = { .max = 64 };
	char val[1001];
	uint64_t rng;
	int eof = 0;

	memset(val, 'w', sizeof(val));
	/* growth: ENOSPC, whatever the op, also after a small delete (the
	 * rule resumes only once an eighth of the reserve is free) */
	CHECK_RC(WR(mgr_ns_create, db, &user_c, dir, S("more"), 0644, 0, &a), -ENOSPC);
	/* a delegated create's number too (a range is no growth to speak of) */
	CHECK_RC(WR(mgr_db_range_take, db, 0x77, &rng), 0);
	CHECK_RC(WR(mgr_db_range_use, db, 0x77, rng), -ENOSPC);
	CHECK_RC(WR(mgr_xattr_remove, db, &user_c, f->ino, S("user.x39")), 0);
	CHECK_RC(WR(mgr_xattr_remove, db, &user_c, f->ino, S("user.x38")), 0);
	for (int i = 0; i < 5; i++)
		CHECK_RC(WR(mgr_ns_create, db, &user_c, dir, S("more"), 0644, 0, &a), -ENOSPC);
	CHECK_RC(WR(mgr_ns_mkdir, db, &user_c, dir, S("moredir"), 0755, &a), -ENOSPC);
	CHECK_RC(WR(mgr_ns_link, db, &user_c, f->ino, dir, S("morelink"), &a), -ENOSPC);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, f->ino, S("user.new"), "n", 1, 0), -ENOSPC);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, f->ino, S("user.x00"), val, 1001, 0), -ENOSPC);
	/* reads, same-size and shrinking replaces, renames: fine */
	CHECK_RC(RD(mgr_ns_getattr, db, f->ino, &a), 0);
	CHECK_RC(RD(mgr_ns_readdir, db, &user_c, dir, 0, collect, &ns, &eof), 0);
	CHECK(ns.n > 10);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, f->ino, S("user.x00"), val, 1000, 0), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, f->ino, S("user.x01"), val, 10, 0), 0);
	CHECK_RC(WR(mgr_ns_rename, db, &user_c, dir, S("file000002"), dir, S("file00000b"), 0, &fr), 0);
	/* deletes of every kind: fine */
	CHECK_RC(WR(mgr_xattr_remove, db, &user_c, f->ino, S("user.x02")), 0);
	CHECK_RC(WR(mgr_ns_rename, db, &user_c, dir, S("file000003"), dir, S("file000004"), 0, &fr), 0);
	CHECK(fr.ino != 0);
	CHECK_RC(WR(mgr_ns_purge, db, NULL, fr.ino), 0);
	CHECK_RC(WR(mgr_ns_rmdir, db, &user_c, dir, S("empty")), 0);
	CHECK_RC(WR(mgr_ns_unlink, db, &user_c, dir, S("file000001"), &fr), 0);
	CHECK(fr.ino == g->ino);
	CHECK_RC(WR(mgr_ns_purge, db, NULL, g->ino), 0);
	CHECK_RC(RD(mgr_ns_getattr, db, g->ino, &a), -ENOENT);
}

/* The headroom rule: a 4 MiB map fills until growing ops get ENOSPC short
 * of the map; then deletes, renames and shrinking replaces still commit,
 * all the files can be deleted one by one, and the space is used again. */
static void test_headroom(void)
{
	struct proto_attr d, e, f, g;
	struct proto_freed fr;
	uint64_t used, limit, used_full;
	char dir[64], name[32];
	struct mgr_db *db;
	int n = 0, n2 = 0;

	mk_tmp(dir, sizeof(dir));
	db = open_limits(dir, 4u << 20, MGR_XATTR_DEFAULT_COUNT,
			 MGR_XATTR_DEFAULT_BYTES);
	CHECK(db != NULL);
	if (!db)
		return;
	CHECK_EQ(db->map_pages, 1024);
	CHECK_EQ(db->reserve_pages, 256); /* 1 MiB: the floor */
	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("fill"), 0777, &d), 0);
	CHECK_RC(WR(mgr_ns_mkdir, db, &user_c, d.ino, S("empty"), 0755, &e), 0);
	CHECK_RC(fill(db, d.ino, &n), -ENOSPC);
	CHECK(n > 20);
	usage_of(db, &used_full, &limit);
	CHECK_EQ(limit, 1024 - 256);
	CHECK(used_full >= limit && used_full < limit + 32);
	CHECK_RC(RD(mgr_ns_lookup, db, &user_c, d.ino, S("file000000"), &f), 0);
	CHECK_RC(RD(mgr_ns_lookup, db, &user_c, d.ino, S("file000001"), &g), 0);
	check_full(db, d.ino, &f, &g);
	/* every file can be deleted, one op at a time (unlink, then the purge
	 * that the client sends once the objects are gone) */
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "file%06d", i);
		if (i == 1 || i == 3)
			continue; /* unlinked, renamed over */
		if (i == 2)
			snprintf(name, sizeof(name), "file00000b");
		CHECK_RC(WR(mgr_ns_unlink, db, &user_c, d.ino, S(name), &fr), 0);
		CHECK_RC(WR(mgr_ns_purge, db, NULL, fr.ino), 0);
	}
	usage_of(db, &used, &limit);
	CHECK(used < used_full / 4);
	/* the space is there again; a second fill gets about as far */
	CHECK_RC(fill(db, d.ino, &n2), -ENOSPC);
	CHECK(n2 >= n - 2 && n2 <= n + 2);
	mgr_db_close(db);
	rm_tmp(dir);
}

/* A store filled to the limit of an 8 MiB map, reopened with a db_size of
 * 4 MiB (less than it holds): it opens at its size plus the reserve, so
 * growth stops at the file's old end and every file can still be deleted. */
static void test_headroom_shrunk(void)
{
	struct proto_attr d, a;
	struct proto_freed fr;
	struct stat st;
	char path[80];
	char dir[64], name[32];
	struct mgr_db *db;
	int n = 0, m, rc = 0;

	mk_tmp(dir, sizeof(dir));
	db = open_limits(dir, 8u << 20, MGR_XATTR_DEFAULT_COUNT,
			 MGR_XATTR_DEFAULT_BYTES);
	CHECK(db != NULL);
	if (!db)
		return;
	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("fill"), 0777, &d), 0);
	CHECK_RC(fill(db, d.ino, &n), -ENOSPC);
	mgr_db_close(db);
	db = open_limits(dir, 4u << 20, MGR_XATTR_DEFAULT_COUNT,
			 MGR_XATTR_DEFAULT_BYTES);
	CHECK(db != NULL);
	if (!db)
		return;
	/* the file ends at LMDB's last page in use (pages written in place) */
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	CHECK_RC(stat(path, &st), 0);
	CHECK_EQ(db->reserve_pages, 256);
	CHECK(db->map_pages > 1024 &&
	      db->map_pages >= (uint64_t)st.st_size / 4096 + 256);
	/* growth up to the file's old end (its free pages), then ENOSPC */
	for (m = 0; m < 1000 && rc == 0; m++) {
		snprintf(name, sizeof(name), "more%d", m);
		rc = WR(mgr_ns_create, db, &user_c, d.ino, S(name), 0644, 0, &a);
	}
	CHECK_RC(rc, -ENOSPC);
	for (int i = 0; i < n + m - 1; i++) {
		if (i < n)
			snprintf(name, sizeof(name), "file%06d", i);
		else
			snprintf(name, sizeof(name), "more%d", i - n);
		CHECK_RC(WR(mgr_ns_unlink, db, &user_c, d.ino, S(name), &fr), 0);
		CHECK_RC(WR(mgr_ns_purge, db, NULL, fr.ino), 0);
	}
	mgr_db_close(db);
	rm_tmp(dir);
}

/* Per-inode xattr caps (8, 2048 bytes) on two new files of the store in
 * dir: count and bytes (names + values) refuse with ENOSPC; same-size and
 * smaller replaces work at the cap; a remove makes room; the files are
 * returned in a (at the count cap) and b (near the bytes cap). */
static void caps_basic(const char *dir, struct proto_attr *a,
		       struct proto_attr *b)
{
	struct proto_attr d;
	char name[32], val[4096];
	struct mgr_db *db = open_limits(dir, 16u << 20, 8, 2048);

	memset(val, 'c', sizeof(val));
	CHECK(db != NULL);
	if (!db)
		return;
	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("caps"), 0777, &d), 0);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("a"), 0644, 0, a), 0);
	CHECK_RC(WR(mgr_ns_create, db, &user_c, d.ino, S("b"), 0644, 0, b), 0);
	/* count: 8 allowed, the 9th refused (the layout xattr is not stored) */
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "user.c%d", i);
		CHECK_RC(WR(mgr_xattr_set, db, &user_c, a->ino, S(name), val, 10, 0), 0);
	}
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, a->ino, S("user.c8"), val, 1, 0), -ENOSPC);
	CHECK_RC(WR(mgr_xattr_set, db, &root_c, a->ino, S("trusted.t"), val, 1, 0), -ENOSPC);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, a->ino, S("user.c0"), val, 10, 0), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, a->ino, S("user.c0"), val, 3, 0), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, a->ino, S("user.rpfs.layout"),
			       S("unit=65536,count=1"), 0), 0);
	CHECK_RC(WR(mgr_xattr_remove, db, &user_c, a->ino, S("user.c5")), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, a->ino, S("user.c8"), val, 1, 0), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, a->ino, S("user.c9"), val, 1, 0), -ENOSPC);
	/* bytes: name + value; 2048 exactly is allowed, one more is not */
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, b->ino, S("user.big"), val, 1000, 0), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, b->ino, S("user.two"), val, 2048 - 1008 - 8 + 1, 0), -ENOSPC);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, b->ino, S("user.two"), val, 2048 - 1008 - 8, 0), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, b->ino, S("user.big"), val, 1001, 0), -ENOSPC);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, b->ino, S("user.big"), val, 1000, 0), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, b->ino, S("user.big"), val, 500, 0), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, b->ino, S("user.big"), val, 1000, 0), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, b->ino, S("user.x"), "", 0, 0), -ENOSPC);
	CHECK_RC(WR(mgr_xattr_remove, db, &user_c, b->ino, S("user.two")), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, b->ino, S("user.x"), val, 1000, 0), 0);
	mgr_db_close(db);
}

/* The caps of caps_basic lowered (4, 1024 bytes) under what a and b hold:
 * those xattrs stay and may shrink; growing or adding is refused until
 * removes bring the file under the cap. */
static void caps_lowered(const char *dir, const struct proto_attr *a,
			 const struct proto_attr *b)
{
	char name[32], val[4096];
	struct mgr_db *db = open_limits(dir, 16u << 20, 4, 1024);

	memset(val, 'c', sizeof(val));
	CHECK(db != NULL);
	if (!db)
		return;
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, a->ino, S("user.c1"), val, 10, 0), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, a->ino, S("user.c1"), val, 11, 0), -ENOSPC);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, a->ino, S("user.n"), val, 0, 0), -ENOSPC);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, b->ino, S("user.big"), val, 900, 0), 0);
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, b->ino, S("user.big"), val, 901, 0), -ENOSPC);
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "user.c%d", i);
		CHECK_RC(WR(mgr_xattr_remove, db, &user_c, a->ino, S(name)), 0);
	}
	CHECK_RC(WR(mgr_xattr_set, db, &user_c, a->ino, S("user.n"), val, 0, 0), 0);
	mgr_db_close(db);
}

/* The default caps: 1024 xattrs (and 1 MiB) per inode; the reserve of a
 * 4 GiB map is its 1/64, the 64 MiB ceiling. */
static void caps_default(void)
{
	struct proto_attr a;
	char dir[64], name[32];
	struct mgr_db *db;

	mk_tmp(dir, sizeof(dir));
	db = open_db(dir);
	CHECK(db != NULL);
	if (!db)
		return;
	CHECK_EQ(db->xattr_max_count, 1024);
	CHECK_EQ(db->xattr_max_bytes, 1 << 20);
	CHECK_EQ(db->reserve_pages, (64u << 20) / 4096); /* 4 GiB / 64 */
	CHECK_RC(WR(mgr_ns_create, db, &user_c, 1, S("d"), 0644, 0, &a), -EACCES);
	CHECK_RC(WR(mgr_ns_create, db, &root_c, 1, S("d"), 0644, 0, &a), 0);
	for (int i = 0; i < 1024; i++) {
		snprintf(name, sizeof(name), "user.%04d", i);
		CHECK_RC(WR(mgr_xattr_set, db, &root_c, a.ino, S(name), "", 0, 0), 0);
	}
	CHECK_RC(WR(mgr_xattr_set, db, &root_c, a.ino, S("user.1024"), "", 0, 0), -ENOSPC);
	mgr_db_close(db);
	rm_tmp(dir);
}

/* Per-inode xattr caps: caps_basic, then caps_lowered on the same store,
 * then caps_default. */
static void test_xattr_caps(void)
{
	struct proto_attr a = { 0 }, b = { 0 };
	char dir[64];

	mk_tmp(dir, sizeof(dir));
	caps_basic(dir, &a, &b);
	caps_lowered(dir, &a, &b);
	rm_tmp(dir);
	caps_default();
}

/* A delegated op of a BATCH, for mgr_ns_make_given. */
static struct proto_bop bop(uint16_t op, uint64_t parent, const char *name,
			    uint64_t newino)
{
	struct proto_bop o = { .op = op, .newino = newino };

	o.m.parent = parent;
	o.m.name = (struct proto_str){ name, (uint32_t)strlen(name) };
	o.m.mode = 0644;
	o.m.target = (struct proto_str){ "t", 1 };
	o.layout = (struct proto_layout){ 65536, 3, 2, 1 };
	return o;
}

#define GIVEN(db, c, s, o, a) WR(mgr_ns_make_given, db, c, s, o, a)

/* The store's inode count, in a read txn of its own. */
static uint64_t ninodes(struct mgr_db *db)
{
	struct mgr_txn *t;
	uint64_t n = 0;

	if (mgr_db_begin(db, 1, &t) == 0) {
		n = mgr_db_inode_count(db, t);
		mgr_db_abort(t);
	}
	return n;
}

/* Ranges: where they start, which numbers a session may use from them,
 * which two it keeps. */
static void ranges_use(struct mgr_db *db, uint64_t *r1)
{
	struct proto_attr a, d;
	struct proto_bop o;
	uint64_t r2, r3, r4, n0;

	CHECK_RC(WR(mgr_db_range_take, db, 0, &r2), -EINVAL);
	CHECK_RC(WR(mgr_db_range_take, db, 0x51, r1), 0);
	CHECK(*r1 == 1024);                   /* next_ino 2, rounded up */
	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("plain"), 0755, &d), 0);
	CHECK(d.ino == 2048);                 /* next_ino went past the range */
	n0 = ninodes(db);
	o = bop(PROTO_OP_CREATE, 1, "f1", *r1 + 5);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), 0);
	CHECK(a.ino == *r1 + 5 && S_ISREG(a.mode) && a.layout.first == 2 &&
	      a.layout.count == 3 && a.nlink == 1);
	CHECK_RC(RD(mgr_ns_lookup, db, &root_c, 1, S("f1"), &a), 0);
	CHECK(a.ino == *r1 + 5);
	/* a repeat: success, nothing changed, not counted again */
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), 0);
	CHECK(a.ino == *r1 + 5);
	CHECK_RC(GIVEN(db, &root_c, 0, &o, &a), -EINVAL); /* no session */
	/* the name taken by another inode (CREATE never opens it) */
	o = bop(PROTO_OP_CREATE, 1, "f1", *r1 + 6);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EEXIST);
	o = bop(PROTO_OP_CREATE, 1, "plain", *r1 + 6);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EEXIST);
	/* used, or skipped: below the range's next unused number */
	o = bop(PROTO_OP_CREATE, 1, "f2", *r1 + 5);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EINVAL);
	o = bop(PROTO_OP_MKDIR, 1, "f2", *r1 + 4);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EINVAL);
	/* outside the range; no range; session 0 */
	o = bop(PROTO_OP_SYMLINK, 1, "f2", *r1 + PROTO_INO_RANGE);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EINVAL);
	o = bop(PROTO_OP_SYMLINK, 1, "f2", *r1 + 7);
	CHECK_RC(GIVEN(db, &root_c, 0x52, &o, &a), -EINVAL);
	CHECK_RC(GIVEN(db, &root_c, 0, &o, &a), -EINVAL);
	CHECK(ninodes(db) == n0 + 1);
	/* another session's range is not ours, nor ours theirs */
	CHECK_RC(WR(mgr_db_range_take, db, 0x52, &r2), 0);
	CHECK(r2 == 3072);                    /* next_ino 2049, rounded up */
	o = bop(PROTO_OP_MKDIR, 1, "d1", r2 + 1);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EINVAL);
	o = bop(PROTO_OP_MKDIR, 1, "d1", *r1 + 7);
	CHECK_RC(GIVEN(db, &root_c, 0x52, &o, &a), -EINVAL);
	o = bop(PROTO_OP_MKDIR, 1, "d1", r2);
	CHECK_RC(GIVEN(db, &root_c, 0x52, &o, &a), 0);
	CHECK(a.ino == r2 && S_ISDIR(a.mode) && a.nlink == 2);
	o = bop(PROTO_OP_MKDIR, 1, "d2", 5);   /* no previous range: none */
	CHECK_RC(GIVEN(db, &root_c, 0x52, &o, &a), -EINVAL);
	/* a new range keeps the current one as previous, drops the older */
	CHECK_RC(WR(mgr_db_range_take, db, 0x51, &r3), 0);
	CHECK(r3 == 4096);
	o = bop(PROTO_OP_SYMLINK, 1, "s1", *r1 + 9);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), 0);
	CHECK(a.ino == *r1 + 9 && S_ISLNK(a.mode) && a.size == 1);
	o = bop(PROTO_OP_SYMLINK, 1, "s1b", *r1 + 9);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EINVAL);
	o = bop(PROTO_OP_SYMLINK, 1, "s2", r3 + 1000);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), 0);
	CHECK_RC(WR(mgr_db_range_take, db, 0x51, &r4), 0);
	CHECK(r4 == 5120);
	o = bop(PROTO_OP_SYMLINK, 1, "s3", *r1 + 10);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EINVAL);
	o = bop(PROTO_OP_SYMLINK, 1, "s3", r3 + 1000);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EINVAL);
	o = bop(PROTO_OP_SYMLINK, 1, "s3", r3 + 1023);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), 0);
	o = bop(PROTO_OP_SYMLINK, 1, "s4", r4 + 3);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), 0);
	*r1 = r4;
}

/* A given CREATE's layout must be the directory's for its files; the
 * other checks of the op alone hold too. A refused op uses no number. */
static void ranges_checks(struct mgr_db *db, uint64_t r)
{
	struct proto_attr a;
	struct proto_bop o;
	uint64_t ino = r + 10;

#define LAYOUT_BAD(...)                                                      \
	do {                                                                 \
		o = bop(PROTO_OP_CREATE, 1, "lay", ino);                     \
		__VA_ARGS__;                                                 \
		CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EINVAL);         \
	} while (0)
	LAYOUT_BAD(o.layout.unit = 131072);
	LAYOUT_BAD(o.layout.count = 2);
	LAYOUT_BAD(o.layout.mirror = 2);
	LAYOUT_BAD(o.layout.first = 3);
	LAYOUT_BAD(o.m.mode = S_IFDIR | 0755);
#undef LAYOUT_BAD
	o = bop(PROTO_OP_CREATE, 1, "bad", ino);
	o.op = PROTO_OP_SETATTR;
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EINVAL);
	o = bop(PROTO_OP_CREATE, 1, "lay", 0);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EINVAL);
	o = bop(PROTO_OP_CREATE, 1, "lay", ino);
	CHECK_RC(GIVEN(db, &user_c, 0x51, &o, &a), -EACCES);
	o = bop(PROTO_OP_CREATE, 1, "..", ino);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EINVAL);
	o = bop(PROTO_OP_CREATE, r + 3, "x", ino);  /* s4: a symlink */
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -ENOTDIR);
	o = bop(PROTO_OP_CREATE, 999999, "x", ino);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -ENOENT);
	o = bop(PROTO_OP_SYMLINK, 1, "lay", ino);
	o.m.target.len = 0;
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -ENOENT);
	/* a repeat does not need write permission (granted the first time) */
	o = bop(PROTO_OP_SYMLINK, 1, "s4", r + 3);
	CHECK_RC(GIVEN(db, &user_c, 0x51, &o, &a), 0);
	CHECK(a.ino == r + 3);
	/* none of the refused ops took ino */
	o = bop(PROTO_OP_CREATE, 1, "lay", ino);
	CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), 0);
	CHECK(a.ino == ino && a.layout.first == 2 && a.layout.unit == 65536);
}

/* Ranges survive a restart; so does next_ino past them. */
static void test_ranges(void)
{
	struct proto_attr a;
	struct proto_bop o;
	struct mgr_db *db;
	char dir[64];
	uint64_t r = 0;

	mk_tmp(dir, sizeof(dir));
	db = open_db(dir);
	CHECK(db != NULL);
	if (!db)
		return;
	ranges_use(db, &r);
	ranges_checks(db, r);
	mgr_db_close(db);
	db = open_db(dir);
	CHECK(db != NULL);
	if (db) {
		o = bop(PROTO_OP_MKDIR, 1, "after", r + 10);
		CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EINVAL);
		o = bop(PROTO_OP_MKDIR, 1, "after", r + 11);
		CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), 0);
		CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("plain2"), 0755, &a), 0);
		CHECK(a.ino == r + PROTO_INO_RANGE);
		/* a session forgotten: its numbers are no longer its */
		CHECK_RC(WR(mgr_db_range_drop, db, 0x51), 0);
		CHECK_RC(WR(mgr_db_range_drop, db, 0x51), 0);
		o = bop(PROTO_OP_MKDIR, 1, "dropped", r + 12);
		CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), -EINVAL);
		o = bop(PROTO_OP_MKDIR, 1, "after", r + 11); /* still a repeat */
		CHECK_RC(GIVEN(db, &root_c, 0x51, &o, &a), 0);
		o = bop(PROTO_OP_MKDIR, 1, "other", 3072 + 1); /* 0x52's stays */
		CHECK_RC(GIVEN(db, &root_c, 0x52, &o, &a), 0);
		mgr_db_close(db);
	}
	rm_tmp(dir);
}

/* Out-of-range limits are refused before anything is created. */
static void test_limits_range(void)
{
	struct mgr_db_limits l;
	struct mgr_db *db = NULL;

	struct mgr_kv_conf kc = { .kind = MGR_KV_LMDB, .dir = "/nonexistent/x" };
	char msg[256];

	mgr_db_limits_default(&l);
	l.db_size = MGR_DB_MIN_SIZE - 1;
	CHECK_RC(mgr_db_open_store(&db, &kc, &l, 1, msg, sizeof(msg)), -EINVAL);
	mgr_db_limits_default(&l);
	l.xattr_max_count = 0;
	CHECK_RC(mgr_db_open_store(&db, &kc, &l, 1, msg, sizeof(msg)), -EINVAL);
	mgr_db_limits_default(&l);
	l.xattr_max_bytes = MGR_XATTR_MAX_BYTES + 1;
	CHECK_RC(mgr_db_open_store(&db, &kc, &l, 1, msg, sizeof(msg)), -EINVAL);
	CHECK(db == NULL);
}

int main(void)
{
	char dir[64], msg[256];
	struct mgr_db *db;
	struct proto_attr r;
	uint64_t fsid, last;
	int held = -1;

	log_init("test_mgr_db", LOG_WARNING);
	test_groups();
	test_stale_gen();
	test_child_txn();
	test_limits_range();
	test_xattr_caps();
	test_headroom();
	test_headroom_shrunk();
	test_ranges();
	mk_tmp(dir, sizeof(dir));
	db = open_db(dir);
	if (!db) {
		fprintf(stderr, "cannot open db in %s\n", dir);
		return 1;
	}
	fsid = db->fsid;
	test_commit_count(db);
	test_ns_in_callers_txn(db);
	test_basic(db);
	test_links(db);
	test_rename(db);
	test_readdir(db);
	test_xattr(db);
	test_setid(db);
	test_blocks(db);
	test_irec_v1(db);
	test_dirseq_format(db);
	CHECK(mgr_db_lockmark_get(db, &held) == 0 && held == 0); /* new fs */
	CHECK_RC(mgr_db_lockmark_set(db, 1), 0);
	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("before"), 0755, &r), 0);
	last = r.ino;
	CHECK_RC(WR(mgr_ns_rmdir, db, &root_c, 1, S("before")), 0);
	mgr_db_close(db);

	/* restart: everything persists, the table must match */
	db = open_db(dir);
	CHECK(db != NULL);
	if (db) {
		CHECK(db->fsid == fsid);
		/* the lock mark persists, and clears */
		CHECK(mgr_db_lockmark_get(db, &held) == 0 && held == 1);
		CHECK_RC(mgr_db_lockmark_set(db, 0), 0);
		CHECK(mgr_db_lockmark_get(db, &held) == 0 && held == 0);
		CHECK_RC(RD(mgr_ns_lookup, db, &user_c, 1, S("rd"), &r), 0);
		CHECK_RC(RD(mgr_ns_lookup, db, &root_c, r.ino, S("e30"), &r), 0);
		CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("after"), 0755, &r), 0);
		CHECK(r.ino == last + 1);
		struct mgr_iod other[3];
		memcpy(other, iods, sizeof(other));
		other[1].port = 9999;
		CHECK_RC(mgr_db_config(db, other, 3, 0, 0, 0, msg, sizeof(msg)), -EEXIST);
		CHECK(strstr(msg, "iod 1") != NULL);
		CHECK_RC(mgr_db_config(db, iods, 2, 0, 0, 0, msg, sizeof(msg)), -EEXIST);
		mgr_db_close(db);
	}
	rm_tmp(dir);
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("test_mgr_db: ok\n");
	return 0;
}
