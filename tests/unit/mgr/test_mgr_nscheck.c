/*
 * test_mgr_nscheck.c - the namespace check (mgr_nscheck.h) on every
 * backend built: a namespace made by the mgr's own ops (mkdir, create,
 * hard links, a rename across directories, an unlink that leaves an
 * orphan, an rmdir, a symlink, an xattr) is clean; then each kind of
 * damage, written with mgr_kv_put/del in a write transaction that the
 * check runs in and that is aborted afterwards, is reported, and nothing
 * else is: a dangling entry, wrong link counts, a missing, differing or
 * stray dirseq record, an entry under a file, a seq out of range, an
 * orphan mark on a linked inode or of no inode, a leaked inode, a
 * directory cycle, a directory linked twice, xattrs and stale records of
 * no inode, wrong ninodes and next_ino. Last, a damage committed for real
 * is found by the check's own read transaction (the path rpfs scrub
 * --namespace takes).
 *
 * PostgreSQL runs on a cluster of the test's own, started with the
 * pg-temp.sh given as argv[1] (meson passes scripts/pg-temp.sh), or on
 * $RPFS_PG_URI (a role with CREATEDB: the test makes and drops the database
 * rpfs_nsck_PID there).
 */
#include <endian.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef RPFS_HAVE_PG
#include <libpq-fe.h>

#include "test_pg.h"
#endif

#include "log.h"
#include "mgr_db.h"
#include "mgr_kv.h"
#include "mgr_ns.h"
#include "mgr_nscheck.h"
#include "test_ns_txn.h"

#include "check_cond.h"

#define S(x) x, strlen(x)
#define BIT(k) (1u << (k))

static struct proto_cred root_c = { 0, 0, 0, { 0 } };
static struct mgr_iod iods[2] = { { "127.0.0.1", 7401 }, { "127.0.0.1", 7402 } };

/* The inodes of the test namespace. */
struct ns {
	uint64_t a, b, f, sub, y, z, l;
};

/* Build the namespace (see the top) with the mgr's ops. */
static void build(struct mgr_db *db, struct ns *n)
{
	struct proto_attr at;
	struct proto_freed fr;

	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("a"), 0755, &at), 0);
	n->a = at.ino;
	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, 1, S("b"), 0755, &at), 0);
	n->b = at.ino;
	CHECK_RC(WR(mgr_ns_create, db, &root_c, n->a, S("f"), 0644, 0, &at), 0);
	n->f = at.ino;
	CHECK_RC(WR(mgr_ns_link, db, &root_c, n->f, n->b, S("g"), &at), 0);
	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, n->a, S("sub"), 0755, &at), 0);
	n->sub = at.ino;
	CHECK_RC(WR(mgr_ns_create, db, &root_c, n->a, S("x"), 0644, 0, &at), 0);
	n->y = at.ino;
	CHECK_RC(WR(mgr_ns_rename, db, &root_c, n->a, S("x"), n->b, S("y"), 0, &fr), 0);
	CHECK_RC(WR(mgr_ns_create, db, &root_c, n->b, S("z"), 0644, 0, &at), 0);
	n->z = at.ino;
	CHECK_RC(WR(mgr_ns_unlink, db, &root_c, n->b, S("z"), &fr), 0);
	CHECK_EQ(fr.ino, n->z); /* an orphan now: nlink 0 and the mark */
	CHECK_RC(WR(mgr_ns_mkdir, db, &root_c, n->b, S("tmp"), 0755, &at), 0);
	CHECK_RC(WR(mgr_ns_rmdir, db, &root_c, n->b, S("tmp")), 0);
	CHECK_RC(WR(mgr_ns_symlink, db, &root_c, 1, S("l"), S("a/f"), &at), 0);
	n->l = at.ino;
}

/* Collect the kinds reported (a bit each) and print them. */
static void collect(void *arg, const struct mgr_nscheck_problem *p)
{
	unsigned *kinds = arg;
	char line[1024];

	*kinds |= BIT(p->kind);
	mgr_nscheck_format(p, line, sizeof(line));
	fprintf(stderr, "    %s\n", line);
}

/* A u64 of meta (for counters). */
static uint64_t meta_u64(struct mgr_txn *t, const char *key)
{
	const void *v;
	size_t vl;
	uint64_t x = 0;

	if (mgr_kv_get(mgr_db_txn_kv(t), MGR_KV_META, key, strlen(key), &v, &vl) == 0 &&
	    vl == 8)
		memcpy(&x, v, 8);
	return x;
}

/* Write a u64 of meta. */
static int meta_put(struct mgr_txn *t, const char *key, uint64_t v)
{
	return mgr_kv_put(mgr_db_txn_kv(t), MGR_KV_META, key, strlen(key), &v, 8, 0);
}

/* An 8-byte big-endian key + tail. */
static size_t key(uint8_t *k, uint64_t id, const void *tail, size_t len)
{
	uint64_t be = htobe64(id);

	memcpy(k, &be, 8);
	memcpy(k + 8, tail, len);
	return 8 + len;
}

/* The seq of entry parent/name (0 if none). */
static uint64_t entry_seq(struct mgr_txn *t, uint64_t parent, const char *name)
{
	uint8_t k[8 + 256];
	const void *v;
	size_t vl;
	uint64_t dv[2] = { 0, 0 };

	if (mgr_kv_get(mgr_db_txn_kv(t), MGR_KV_DIRENTS, k,
		       key(k, parent, name, strlen(name)), &v, &vl) == 0 && vl == 16)
		memcpy(dv, v, 16);
	return dv[1];
}

/* Write entry parent/name -> child with seq, and its dirseq record. */
static int put_entry(struct mgr_txn *t, uint64_t parent, const char *name,
		     uint64_t child, uint64_t seq)
{
	uint8_t k[8 + 256], sk[16], sv[9 + 256];
	uint64_t dv[2] = { child, seq }, sbe = htobe64(seq);
	size_t len = strlen(name);
	int rc = mgr_kv_put(mgr_db_txn_kv(t), MGR_KV_DIRENTS, k,
			    key(k, parent, name, len), dv, 16, 0);

	sv[0] = 0;
	memcpy(sv + 1, &child, 8);
	memcpy(sv + 9, name, len);
	return rc ? rc : mgr_kv_put(mgr_db_txn_kv(t), MGR_KV_DIRSEQ, sk,
				    key(sk, parent, &sbe, 8), sv, 9 + len, 0);
}

/* Delete entry parent/name and its dirseq record. */
static int del_entry(struct mgr_txn *t, uint64_t parent, const char *name)
{
	uint8_t k[8 + 256], sk[16];
	uint64_t sbe = htobe64(entry_seq(t, parent, name));
	int rc = mgr_kv_del(mgr_db_txn_kv(t), MGR_KV_DIRSEQ, sk,
			    key(sk, parent, &sbe, 8));

	return rc ? rc : mgr_kv_del(mgr_db_txn_kv(t), MGR_KV_DIRENTS, k,
				    key(k, parent, name, strlen(name)));
}

/* Change inode ino: nlink (if >= 0), parent (if != 0), next_seq (if != 0). */
static int set_inode(struct mgr_db *db, struct mgr_txn *t, uint64_t ino,
		     long nlink, uint64_t parent, uint64_t next_seq)
{
	struct mgr_inode in;
	int rc = mgr_db_inode_get(db, t, ino, &in);

	if (rc)
		return rc;
	if (nlink >= 0)
		in.nlink = (uint32_t)nlink;
	if (parent)
		in.parent = parent;
	if (next_seq)
		in.next_seq = next_seq;
	return mgr_db_inode_put(db, t, ino, &in);
}

/* ---- the damages: each writes one kind of damage into t (the comment
 * in each says which) and returns 0 when written ---- */

static int d_dangling(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	uint8_t k[8];

	/* y's inode goes (the counter follows): b/y dangles */
	return mgr_kv_del(mgr_db_txn_kv(t), MGR_KV_INODES, k, key(k, n->y, "", 0)) ?:
	       meta_put(t, "ninodes", meta_u64(t, "ninodes") - 1);
}

static int d_nlink(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	return set_inode(db, t, n->f, 3, 0, 0); /* 2 entries */
}

static int d_dir_nlink(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	return set_inode(db, t, n->a, 5, 0, 0); /* 2 + 1 subdirectory */
}

static int d_no_dirseq(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	uint8_t sk[16];
	uint64_t sbe = htobe64(entry_seq(t, n->a, "f"));

	return mgr_kv_del(mgr_db_txn_kv(t), MGR_KV_DIRSEQ, sk, key(sk, n->a, &sbe, 8));
}

static int d_dirseq_differs(struct mgr_db *db, struct mgr_txn *t,
			    const struct ns *n)
{
	uint8_t sk[16], sv[9 + 1] = { 0 };
	uint64_t sbe = htobe64(entry_seq(t, n->a, "f"));

	memcpy(sv + 1, &n->sub, 8); /* the record says a/f -> sub */
	sv[9] = 'f';
	return mgr_kv_put(mgr_db_txn_kv(t), MGR_KV_DIRSEQ, sk, key(sk, n->a, &sbe, 8),
			  sv, sizeof(sv), 0);
}

static int d_dirseq_stray(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	uint8_t sk[16];
	uint64_t sbe = htobe64(1000);

	return mgr_kv_put(mgr_db_txn_kv(t), MGR_KV_DIRSEQ, sk, key(sk, n->a, &sbe, 8),
			  "old", 3, 0); /* an older-format record */
}

static int d_seq_range(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	return set_inode(db, t, n->a, -1, 0, MGR_SEQ_FIRST); /* below its entries */
}

static int d_entry_parent(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	return put_entry(t, n->f, "inside", n->y, MGR_SEQ_FIRST); /* under a file */
}

static int d_orphan_linked(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	return mgr_db_orphan_add(db, t, n->f, 0);
}

static int d_orphan_missing(struct mgr_db *db, struct mgr_txn *t,
			    const struct ns *n)
{
	uint8_t k[8];
	uint32_t uid = 0;

	return mgr_kv_put(mgr_db_txn_kv(t), MGR_KV_ORPHANS, k, key(k, 99999, "", 0),
			  &uid, 4, 0);
}

static int d_leaked(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	struct mgr_inode in = { .mode = S_IFREG | 0644, .nlink = 0 };
	uint64_t ino;

	/* a counted inode without an entry and without an orphan mark */
	return mgr_db_inode_alloc(db, t, &ino) ?: mgr_db_inode_put(db, t, ino, &in);
}

static int d_orphan_unmarked(struct mgr_db *db, struct mgr_txn *t,
			     const struct ns *n)
{
	uint8_t k[8];

	/* the unlinked z loses its mark: leaked */
	return mgr_kv_del(mgr_db_txn_kv(t), MGR_KV_ORPHANS, k, key(k, n->z, "", 0));
}

static int d_cycle(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	struct mgr_inode s;
	int rc = mgr_db_inode_get(db, t, n->sub, &s);

	/* move a under its own subdirectory sub, every count kept right */
	if (!rc)
		rc = del_entry(t, 1, "a");
	if (!rc)
		rc = put_entry(t, n->sub, "a", n->a, s.next_seq);
	if (!rc)
		rc = set_inode(db, t, n->sub, 3, 0, s.next_seq + 1);
	if (!rc)
		rc = set_inode(db, t, 1, 3, 0, 0);
	return rc ?: set_inode(db, t, n->a, -1, n->sub, 0);
}

static int d_dir_twice(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	struct mgr_inode b;
	int rc = mgr_db_inode_get(db, t, n->b, &b);

	/* a second entry for sub, in b (b's counts kept right) */
	if (!rc)
		rc = put_entry(t, n->b, "sub2", n->sub, b.next_seq);
	return rc ?: set_inode(db, t, n->b, b.nlink + 1, 0, b.next_seq + 1);
}

static int d_dir_parent(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	return set_inode(db, t, n->sub, -1, n->b, 0); /* its entry is in a */
}

static int d_xattr_stray(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	uint8_t k[8 + 16];

	return mgr_kv_put(mgr_db_txn_kv(t), MGR_KV_XATTRS, k,
			  key(k, 99999, "user.x", 6), "v", 1, 0);
}

static int d_stale_stray(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	uint8_t k[10] = { 0, 1 };
	uint64_t be = htobe64(99999), gen = 1;

	memcpy(k + 2, &be, 8);
	return mgr_kv_put(mgr_db_txn_kv(t), MGR_KV_STALE, k, 10, &gen, 8, 0);
}

static int d_ninodes(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	return meta_put(t, "ninodes", meta_u64(t, "ninodes") + 5);
}

static int d_next_ino(struct mgr_db *db, struct mgr_txn *t, const struct ns *n)
{
	return meta_put(t, "next_ino", n->l); /* the last inode's own number */
}

/* A damage and the kinds it must show, exactly. */
struct damage {
	const char *name;
	int (*fn)(struct mgr_db *db, struct mgr_txn *t, const struct ns *n);
	unsigned kinds;
};

static const struct damage damages[] = {
	{ "dangling entry", d_dangling, BIT(MGR_NSCHECK_DANGLING) },
	{ "wrong nlink", d_nlink, BIT(MGR_NSCHECK_NLINK) },
	{ "wrong dir nlink", d_dir_nlink, BIT(MGR_NSCHECK_DIR_NLINK) },
	{ "missing dirseq", d_no_dirseq, BIT(MGR_NSCHECK_NO_DIRSEQ) },
	{ "dirseq differs", d_dirseq_differs, BIT(MGR_NSCHECK_DIRSEQ_DIFFERS) },
	{ "stray dirseq", d_dirseq_stray, BIT(MGR_NSCHECK_DIRSEQ_STRAY) },
	{ "seq out of range", d_seq_range, BIT(MGR_NSCHECK_SEQ_RANGE) },
	{ "entry under a file", d_entry_parent, BIT(MGR_NSCHECK_ENTRY_PARENT) },
	{ "orphan mark on a linked inode", d_orphan_linked,
	  BIT(MGR_NSCHECK_ORPHAN_LINKED) },
	{ "orphan mark of no inode", d_orphan_missing,
	  BIT(MGR_NSCHECK_ORPHAN_MISSING) },
	{ "leaked inode", d_leaked, BIT(MGR_NSCHECK_LEAKED) },
	{ "unlinked inode without its mark", d_orphan_unmarked,
	  BIT(MGR_NSCHECK_LEAKED) },
	{ "directory cycle", d_cycle, BIT(MGR_NSCHECK_CYCLE) },
	{ "directory linked twice", d_dir_twice, BIT(MGR_NSCHECK_DIR_LINKS) },
	{ "wrong dir parent", d_dir_parent, BIT(MGR_NSCHECK_DIR_PARENT) },
	{ "xattrs of no inode", d_xattr_stray, BIT(MGR_NSCHECK_XATTR_STRAY) },
	{ "stale record of no inode", d_stale_stray,
	  BIT(MGR_NSCHECK_STALE_STRAY) },
	{ "wrong ninodes", d_ninodes, BIT(MGR_NSCHECK_NINODES) },
	{ "next_ino too low", d_next_ino, BIT(MGR_NSCHECK_NEXT_INO) },
};

/* Every damage in a write txn of its own, checked there, then aborted. */
static void test_damages(struct mgr_db *db, const struct ns *n)
{
	for (size_t i = 0; i < sizeof(damages) / sizeof(damages[0]); i++) {
		const struct damage *d = &damages[i];
		struct mgr_nscheck_result res;
		struct mgr_txn *t;
		unsigned kinds = 0;

		fprintf(stderr, "  %s:\n", d->name);
		CHECK_RC(mgr_db_begin(db, 0, &t), 0);
		CHECK_RC(d->fn(db, t, n), 0);
		CHECK_RC(mgr_nscheck_txn(t, collect, &kinds, &res), 0);
		mgr_db_abort(t);
		if (kinds != d->kinds)
			fprintf(stderr, "  %s: kinds 0x%x, expected 0x%x\n", d->name,
				kinds, d->kinds);
		CHECK_EQ(kinds, d->kinds);
		CHECK(res.problems > 0);
	}
}

/* The whole test on an open, configured, empty store. */
static void run(struct mgr_db *db, const char *what)
{
	struct mgr_nscheck_result res;
	struct mgr_txn *t;
	unsigned kinds = 0;
	struct ns n;

	fprintf(stderr, "%s:\n", what);
	build(db, &n);
	CHECK_RC(mgr_db_begin(db, 0, &t), 0);
	CHECK_RC(mgr_db_xattr_put(db, t, n.f, S("user.k"), "v", 1), 0);
	CHECK_RC(mgr_db_commit(t), 0);
	CHECK_RC(mgr_nscheck_run(db, collect, &kinds, &res), 0);
	CHECK_EQ(kinds, 0);
	CHECK_EQ(res.problems, 0);
	CHECK_EQ(res.inodes, 8);  /* root a b f sub y z l */
	CHECK_EQ(res.entries, 7); /* a b l, a/f a/sub, b/g b/y */
	test_damages(db, &n);
	/* aborted damages left nothing */
	kinds = 0;
	CHECK_RC(mgr_nscheck_run(db, collect, &kinds, &res), 0);
	CHECK_EQ(kinds, 0);
	/* a damage committed for real, seen by the check's own snapshot: y's
	 * entry goes, y keeps its link count */
	CHECK_RC(mgr_db_begin(db, 0, &t), 0);
	CHECK_RC(mgr_db_dirent_del(db, t, n.b, S("y")), 0);
	CHECK_RC(mgr_db_commit(t), 0);
	kinds = 0;
	CHECK_RC(mgr_nscheck_run(db, collect, &kinds, &res), 0);
	CHECK_EQ(kinds, BIT(MGR_NSCHECK_NLINK) | BIT(MGR_NSCHECK_LEAKED));
	CHECK_EQ(res.problems, 2);
	CHECK_EQ(res.entries, 6);
}

/* nftw callback: remove one path. */
static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

/* The LMDB store, in a fresh directory; then the read-only open of it. */
static void test_lmdb(void)
{
	char dir[] = "/tmp/rpfs-nsck.XXXXXX", msg[256], none[64];
	struct mgr_kv_conf kc = { .kind = MGR_KV_LMDB, .dir = dir };
	struct mgr_nscheck_result res;
	struct mgr_db *db, *ro;
	unsigned kinds = 0;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		failures++;
		return;
	}
	CHECK_RC(mgr_db_open(&db, dir), 0);
	CHECK_RC(mgr_db_config(db, iods, 2, 0, 0, 0, msg, sizeof(msg)), 0);
	run(db, "lmdb");
	/* the read-only open sees the same namespace (after the writer's
	 * close: LMDB forbids opening one environment twice in a process;
	 * test_nscheck.py runs the check beside a running mgr) */
	mgr_db_close(db);
	CHECK_RC(mgr_db_open_rdonly(&ro, &kc, msg, sizeof(msg)), 0);
	CHECK_RC(mgr_nscheck_run(ro, collect, &kinds, &res), 0);
	CHECK_EQ(kinds, BIT(MGR_NSCHECK_NLINK) | BIT(MGR_NSCHECK_LEAKED));
	mgr_db_close(ro);
	/* a directory without a database: -ENOENT, and nothing is created */
	snprintf(none, sizeof(none), "%s/none", dir);
	kc.dir = none;
	CHECK_RC(mgr_db_open_rdonly(&ro, &kc, msg, sizeof(msg)), -ENOENT);
	CHECK(access(none, F_OK) != 0);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#ifdef RPFS_HAVE_PG
static char pg_uri[1024], pg_dir[64], pg_db[64];
static const char *pg_script;

/* Run sql on uri's database. @return 0, -1 (printed) */
static int pg_sql(const char *uri, const char *sql)
{
	PGconn *pc = PQconnectdb(uri);
	PGresult *r = PQstatus(pc) == CONNECTION_OK ? PQexec(pc, sql) : NULL;
	int rc = r && PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -1;

	if (rc)
		fprintf(stderr, "pg_sql: %s: %s", sql, PQerrorMessage(pc));
	PQclear(r);
	PQfinish(pc);
	return rc;
}

/* Stop our cluster and remove its directory (atexit), or drop our
 * database on $RPFS_PG_URI's server. */
static void pg_cleanup(void)
{
	char cmd[512];

	if (pg_db[0]) {
		snprintf(cmd, sizeof(cmd), "DROP DATABASE IF EXISTS %s WITH (FORCE)",
			 pg_db);
		(void)pg_sql(getenv("RPFS_PG_URI"), cmd);
	}
	if (!pg_dir[0])
		return;
	snprintf(cmd, sizeof(cmd), "'%s' stop '%s' >&2", pg_script, pg_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "pg-temp.sh stop %s failed\n", pg_dir);
	nftw(pg_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	pg_dir[0] = '\0';
}

/* uri with its database replaced by db, as a key=value conninfo into
 * pg_uri. @return 0, -1 */
static int pg_uri_db(const char *uri, const char *db)
{
	return pg_uri_with(uri, db, NULL, pg_uri, sizeof(pg_uri));
}

/* A database of our own: rpfs on a fresh pg-temp.sh cluster, or
 * rpfs_nsck_PID on $RPFS_PG_URI's server. Its conninfo in pg_uri.
 * @return 0, -1 */
static int pg_start(const char *script)
{
	const char *env = getenv("RPFS_PG_URI");
	char cmd[512];
	FILE *f;

	if (env && env[0]) {
		snprintf(pg_db, sizeof(pg_db), "rpfs_nsck_%d", (int)getpid());
		snprintf(cmd, sizeof(cmd), "CREATE DATABASE %s", pg_db);
		atexit(pg_cleanup);
		if (pg_sql(env, cmd))
			return -1;
		return pg_uri_db(env, pg_db);
	}
	if (!script) {
		fprintf(stderr, "usage: test_mgr_nscheck PATH/pg-temp.sh (or set "
			"RPFS_PG_URI)\n");
		return -1;
	}
	pg_script = script;
	snprintf(pg_dir, sizeof(pg_dir), "/tmp/rpfs-nscktest.XXXXXX");
	if (!mkdtemp(pg_dir)) {
		pg_dir[0] = '\0';
		return -1;
	}
	atexit(pg_cleanup);
	snprintf(cmd, sizeof(cmd), "'%s' start '%s'", script, pg_dir);
	f = popen(cmd, "r");
	if (!f || !fgets(pg_uri, sizeof(pg_uri), f)) {
		fprintf(stderr, "%s start %s: no URI\n", script, pg_dir);
		if (f)
			pclose(f);
		return -1;
	}
	pg_uri[strcspn(pg_uri, "\n")] = '\0';
	return pclose(f) == 0 ? 0 : -1;
}

/* The PostgreSQL store: mkfs's schema, then the mgr's and the check's
 * opens of it. */
static void test_pg(const char *script)
{
	struct mgr_kv_conf kc = { .kind = MGR_KV_POSTGRESQL, .uri = pg_uri };
	struct mgr_db_limits lim;
	struct mgr_nscheck_result res;
	struct mgr_db *db, *ro;
	unsigned kinds = 0;
	char msg[512];

	if (pg_start(script)) {
		fprintf(stderr, "no PostgreSQL to test on\n");
		failures++;
		return;
	}
	mgr_db_limits_default(&lim);
	CHECK_RC(mgr_db_open_store(&db, &kc, &lim, 1, msg, sizeof(msg)), 0);
	if (failures) {
		fprintf(stderr, "%s\n", msg);
		return;
	}
	CHECK_RC(mgr_db_config(db, iods, 2, 0, 0, 0, msg, sizeof(msg)), 0);
	run(db, "postgresql");
	CHECK_RC(mgr_db_open_rdonly(&ro, &kc, msg, sizeof(msg)), 0);
	CHECK_RC(mgr_nscheck_run(ro, collect, &kinds, &res), 0);
	CHECK_EQ(kinds, BIT(MGR_NSCHECK_NLINK) | BIT(MGR_NSCHECK_LEAKED));
	mgr_db_close(ro);
	mgr_db_close(db);
}
#endif

/* The format of a problem names what, which and expected vs found. */
static void test_format(void)
{
	struct mgr_nscheck_problem p = { .kind = MGR_NSCHECK_DANGLING, .ino = 7,
					 .parent = 3, .name = "a\"\n", .name_len = 3 };
	char line[256];

	mgr_nscheck_format(&p, line, sizeof(line));
	CHECK(strcmp(line, "dangling entry: 3/\"a\\x22\\x0a\" -> inode 7: no such "
		     "inode") == 0);
	p = (struct mgr_nscheck_problem){ .kind = MGR_NSCHECK_NLINK, .ino = 9,
					  .expected = 2, .found = 3 };
	mgr_nscheck_format(&p, line, sizeof(line));
	CHECK(strcmp(line, "nlink: inode 9: expected nlink 2 (its entries), found 3") == 0);
	for (int k = 0; k < MGR_NSCHECK_NKINDS; k++)
		CHECK(strcmp(mgr_nscheck_kind_name((enum mgr_nscheck_kind)k),
			     "unknown") != 0);
}

/* The format, then each store built. */
int main(int argc, char **argv)
{
	log_init("test_mgr_nscheck", LOG_WARNING);
	test_format();
	test_lmdb();
#ifdef RPFS_HAVE_PG
	test_pg(argc > 1 ? argv[1] : NULL);
#endif
	fprintf(stderr, "%d failures\n", failures);
	return failures != 0;
}
