/* mgr_rename.c - RENAME (plain, NOREPLACE, EXCHANGE) in one transaction. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "mgr_ns.h"
#include "mgr_perm.h"

/* The objects of one rename. sdir and ddir may be the same struct. */
struct rn {
	uint64_t sp, dp, sino, dino;
	const char *sn, *dn;
	size_t sl, dl;
	struct mgr_inode sdir_s, ddir_s, sin, din;
	struct mgr_inode *sdir, *ddir;
	int have_dst;
};

/* Refuse to move directory dir below itself: walk up from target to the
 * root. Cost: one inode read per level of target's depth. */
static int rn_subtree(struct mgr_db *db, struct mgr_txn *txn, uint64_t dir,
		      uint64_t target)
{
	struct mgr_inode in;
	int depth = 0, rc;

	while (target != MGR_ROOT_INO) {
		if (target == dir)
			return -EINVAL;
		rc = mgr_db_inode_get(db, txn, target, &in);
		if (rc)
			return rc;
		if (++depth > 100000 || in.parent == target)
			return -EIO; /* a loop: corrupt tree */
		target = in.parent;
	}
	return target == dir ? -EINVAL : 0;
}

/* Load both parents, both entries, and check every rule before any change. */
static int rn_check(struct mgr_db *db, struct mgr_txn *txn, const struct proto_cred *c,
		    struct rn *r, uint32_t flags)
{
	const uint32_t wx = MGR_MAY_WRITE | MGR_MAY_EXEC;
	int rc;

	rc = mgr_ns_dir(db, txn, c, r->sp, wx, &r->sdir_s);
	if (rc)
		return rc;
	r->sdir = &r->sdir_s;
	if (r->dp == r->sp) {
		r->ddir = r->sdir;
	} else {
		rc = mgr_ns_dir(db, txn, c, r->dp, wx, &r->ddir_s);
		if (rc)
			return rc;
		r->ddir = &r->ddir_s;
	}
	rc = mgr_db_dirent_get(db, txn, r->sp, r->sn, r->sl, &r->sino);
	if (!rc)
		rc = mgr_db_inode_get(db, txn, r->sino, &r->sin);
	if (rc)
		return rc;
	rc = mgr_db_dirent_get(db, txn, r->dp, r->dn, r->dl, &r->dino);
	if (rc && rc != -ENOENT)
		return rc;
	r->have_dst = rc == 0;
	if (r->have_dst) {
		rc = mgr_db_inode_get(db, txn, r->dino, &r->din);
		if (rc)
			return rc;
		if (r->dino == r->sino)
			return 1; /* same inode: nothing to do */
	}
	if ((flags & PROTO_RENAME_NOREPLACE) && r->have_dst)
		return -EEXIST;
	if ((flags & PROTO_RENAME_EXCHANGE) && !r->have_dst)
		return -ENOENT;
	rc = mgr_perm_sticky(c, r->sdir, &r->sin);
	if (!rc && r->have_dst)
		rc = mgr_perm_sticky(c, r->ddir, &r->din);
	if (rc)
		return rc;
	if (r->sp != r->dp && S_ISDIR(r->sin.mode)) {
		/* moving a directory rewrites its "..": needs write on it */
		rc = mgr_perm_check(c, &r->sin, MGR_MAY_WRITE);
		if (!rc)
			rc = rn_subtree(db, txn, r->sino, r->dp);
		if (rc)
			return rc;
	}
	if (flags & PROTO_RENAME_EXCHANGE) {
		if (r->sp != r->dp && S_ISDIR(r->din.mode)) {
			rc = mgr_perm_check(c, &r->din, MGR_MAY_WRITE);
			if (!rc)
				rc = rn_subtree(db, txn, r->dino, r->sp);
		}
		return rc;
	}
	if (!r->have_dst)
		return 0;
	if (S_ISDIR(r->sin.mode)) {
		if (!S_ISDIR(r->din.mode))
			return -ENOTDIR;
		rc = mgr_db_dir_empty(db, txn, r->dino);
		if (rc < 0)
			return rc;
		return rc ? 0 : -ENOTEMPTY;
	}
	return S_ISDIR(r->din.mode) ? -EISDIR : 0;
}

/* Plain rename: unlink src, drop any victim (freed by uid), link dst to
 * the source inode. */
static int rn_move(struct mgr_db *db, struct mgr_txn *txn, struct rn *r,
		   const struct proto_time *now, uint32_t uid,
		   struct proto_freed *f)
{
	int rc = mgr_db_dirent_del(db, txn, r->sp, r->sn, r->sl);

	if (rc)
		return rc;
	if (r->have_dst) {
		rc = mgr_db_dirent_del(db, txn, r->dp, r->dn, r->dl);
		if (rc)
			return rc;
		if (S_ISDIR(r->din.mode)) {
			r->ddir->nlink--;
			rc = mgr_db_inode_del(db, txn, r->dino);
		} else {
			rc = mgr_ns_drop_link(db, txn, r->dino, &r->din, now, uid, f);
		}
		if (rc)
			return rc;
	}
	rc = mgr_db_dirent_add(db, txn, r->dp, r->ddir, r->dn, r->dl, r->sino);
	if (rc)
		return rc;
	if (S_ISDIR(r->sin.mode) && r->sp != r->dp) {
		r->sdir->nlink--;
		r->ddir->nlink++;
		r->sin.parent = r->dp;
	}
	r->sin.ctime = *now;
	return mgr_db_inode_put(db, txn, r->sino, &r->sin);
}

/* Exchange: swap the inodes the two names point at (cookies stay). */
static int rn_exchange(struct mgr_db *db, struct mgr_txn *txn, struct rn *r,
		       const struct proto_time *now)
{
	int rc = mgr_db_dirent_set(db, txn, r->sp, r->sn, r->sl, r->dino);

	if (!rc)
		rc = mgr_db_dirent_set(db, txn, r->dp, r->dn, r->dl, r->sino);
	if (rc)
		return rc;
	if (r->sp != r->dp) {
		if (S_ISDIR(r->sin.mode)) {
			r->sdir->nlink--;
			r->ddir->nlink++;
			r->sin.parent = r->dp;
		}
		if (S_ISDIR(r->din.mode)) {
			r->ddir->nlink--;
			r->sdir->nlink++;
			r->din.parent = r->sp;
		}
	}
	r->sin.ctime = r->din.ctime = *now;
	rc = mgr_db_inode_put(db, txn, r->sino, &r->sin);
	if (!rc)
		rc = mgr_db_inode_put(db, txn, r->dino, &r->din);
	return rc;
}

/* RENAME in one write transaction; either all of it lands or none. */
int mgr_ns_rename(struct mgr_db *db, struct mgr_txn *txn,
		  const struct proto_cred *c, uint64_t parent, const char *name,
		  size_t len, uint64_t newparent, const char *newname,
		  size_t newlen, uint32_t flags, struct proto_freed *f)
{
	struct rn r = { .sp = parent, .dp = newparent, .sn = name,
			.dn = newname, .sl = len, .dl = newlen };
	struct proto_time now;
	int rc;

	memset(f, 0, sizeof(*f));
	if ((flags & ~(PROTO_RENAME_NOREPLACE | PROTO_RENAME_EXCHANGE)) ||
	    ((flags & PROTO_RENAME_NOREPLACE) && (flags & PROTO_RENAME_EXCHANGE)))
		return -EINVAL;
	if (len == 0 || len > PROTO_MAX_NAME || newlen == 0 ||
	    newlen > PROTO_MAX_NAME)
		return -EINVAL;
	rc = rn_check(db, txn, c, &r, flags);
	if (rc == 1)
		return 0;
	if (rc)
		goto out_forget_freed;
	mgr_db_now(&now);
	if (flags & PROTO_RENAME_EXCHANGE)
		rc = rn_exchange(db, txn, &r, &now);
	else
		rc = rn_move(db, txn, &r, &now, c->uid, f);
	if (rc)
		goto out_forget_freed;
	r.sdir->mtime = r.sdir->ctime = now;
	r.ddir->mtime = r.ddir->ctime = now;
	rc = mgr_db_inode_put(db, txn, r.sp, r.sdir);
	if (!rc && r.ddir != r.sdir)
		rc = mgr_db_inode_put(db, txn, r.dp, r.ddir);
	if (rc)
		goto out_forget_freed;
	return 0;

out_forget_freed:
	memset(f, 0, sizeof(*f));
	return rc;
}
