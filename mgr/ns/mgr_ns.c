/* mgr_ns.c - namespace operations, each in the caller's transaction. */
#include "mgr_ns.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mgr_perm.h"
#include "setid.h"

/* Fill a wire attr. A regular file reports the blocks its iods hold as
 * last published (SETBLOCKS); other inodes 512-byte units of the size. */
void mgr_ns_attr(uint64_t ino, const struct mgr_inode *in, struct proto_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->mode = in->mode;
	a->nlink = in->nlink;
	a->uid = in->uid;
	a->gid = in->gid;
	a->rdev = in->rdev;
	a->size = in->size;
	a->blocks = S_ISREG(in->mode) ? in->blocks : (in->size + 511) / 512;
	a->atime = in->atime;
	a->mtime = in->mtime;
	a->ctime = in->ctime;
	if (S_ISREG(in->mode))
		a->layout = in->layout;
}

/* Reject names the decoder should already have refused. */
static int ns_name_ok(const char *name, size_t len)
{
	if (len == 0 || len > PROTO_MAX_NAME || memchr(name, '/', len) ||
	    memchr(name, '\0', len))
		return -EINVAL;
	if ((len == 1 && name[0] == '.') ||
	    (len == 2 && name[0] == '.' && name[1] == '.'))
		return -EINVAL;
	return 0;
}

/* Load a directory and check mask permission on it. */
int mgr_ns_dir(struct mgr_db *db, struct mgr_txn *txn, const struct proto_cred *c,
	       uint64_t ino, uint32_t mask, struct mgr_inode *dir)
{
	int rc = mgr_db_inode_get(db, txn, ino, dir);

	if (rc)
		return rc;
	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	return mask ? mgr_perm_check(c, dir, mask) : 0;
}

/* Drop one link; a regular file at zero becomes an orphan (returned in f),
 * anything else is deleted on the spot. */
int mgr_ns_drop_link(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		     struct mgr_inode *in, const struct proto_time *now,
		     uint32_t uid, struct proto_freed *f)
{
	int rc;

	if (in->nlink > 0)
		in->nlink--;
	in->ctime = *now;
	if (in->nlink > 0)
		return mgr_db_inode_put(db, txn, ino, in);
	if (!S_ISREG(in->mode))
		return mgr_db_inode_del(db, txn, ino);
	rc = mgr_db_orphan_add(db, txn, ino, uid);
	if (!rc)
		rc = mgr_db_inode_put(db, txn, ino, in);
	if (!rc && f) {
		f->ino = ino;
		f->layout = in->layout;
	}
	return rc;
}

/* LOOKUP: name in parent (needs search permission on parent). */
int mgr_ns_lookup(struct mgr_db *db, struct mgr_txn *txn,
		  const struct proto_cred *c, uint64_t parent, const char *name,
		  size_t len, struct proto_attr *a)
{
	struct mgr_inode dir, in;
	uint64_t child;
	int rc = mgr_ns_dir(db, txn, c, parent, MGR_MAY_EXEC, &dir);

	if (!rc)
		rc = ns_name_ok(name, len);
	if (!rc)
		rc = mgr_db_dirent_get(db, txn, parent, name, len, &child);
	if (!rc)
		rc = mgr_db_inode_get(db, txn, child, &in);
	if (!rc)
		mgr_ns_attr(child, &in, a);
	return rc;
}

/* GETATTR (no check: stat needs only path search). */
int mgr_ns_getattr(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		   struct proto_attr *a)
{
	struct mgr_inode in;
	int rc = mgr_db_inode_get(db, txn, ino, &in);

	if (!rc)
		mgr_ns_attr(ino, &in, a);
	return rc;
}

/* Check each change of a SETATTR like chmod/chown/truncate/utimensat
 * would; kill: the set-id bits it drops (ns_setattr_kill). */
static int ns_setattr_check(const struct proto_cred *c,
			    const struct proto_mreq *m,
			    const struct mgr_inode *in, uint32_t kill)
{
	uint32_t v = m->valid;
	int owner = mgr_perm_owner(c, in), rc;

	if (v & PROTO_SA_UID) {
		if ((m->uid != in->uid && c->uid != 0) || !owner)
			return -EPERM;
	}
	if (v & PROTO_SA_GID) {
		if (m->gid != in->gid && (c->uid != 0 && (!owner ||
		    !mgr_perm_in_group(c, m->gid))))
			return -EPERM;
		if (!owner)
			return -EPERM;
	}
	if ((v & PROTO_SA_MODE) && !owner)
		return -EPERM;
	if (v & PROTO_SA_SIZE) {
		if (S_ISDIR(in->mode))
			return -EISDIR;
		if (!S_ISREG(in->mode))
			return -EINVAL;
		if (!owner && (rc = mgr_perm_check(c, in, MGR_MAY_WRITE)))
			return rc;
	}
	if ((v & PROTO_SA_KILLPRIV) && kill && !owner &&
	    (rc = mgr_perm_check(c, in, MGR_MAY_WRITE)))
		return rc;
	if ((v & (PROTO_SA_ATIME | PROTO_SA_MTIME)) && !owner)
		return -EPERM;
	if ((v & (PROTO_SA_ATIME_NOW | PROTO_SA_MTIME_NOW)) && !owner &&
	    (rc = mgr_perm_check(c, in, MGR_MAY_WRITE)))
		return rc;
	return 0;
}

/* The set-id bits a SETATTR drops, judged on the inode before it: a
 * truncate (PROTO_SA_SIZE) or a write (PROTO_SA_KILLPRIV) like
 * file_remove_privs, a chown like chown_common (setid.h). An explicit
 * new mode wins. */
static uint32_t ns_setattr_kill(const struct proto_cred *c,
				const struct proto_mreq *m,
				const struct mgr_inode *in)
{
	uint32_t v = m->valid, kill = 0;

	if (v & PROTO_SA_MODE)
		return 0;
	if (v & (PROTO_SA_SIZE | PROTO_SA_KILLPRIV))
		kill |= setid_kill_write(c, in->mode, in->gid);
	if (v & (PROTO_SA_UID | PROTO_SA_GID))
		kill |= setid_kill_chown(c, in->mode, in->gid);
	return kill;
}

/* Apply SETATTR to in after ns_setattr_check. A lone PROTO_SA_KILLPRIV
 * that drops nothing changes nothing (not even ctime). */
static int ns_setattr_apply(const struct proto_cred *c, const struct proto_mreq *m,
			    struct mgr_inode *in, const struct proto_time *now)
{
	uint32_t v = m->valid, kill = ns_setattr_kill(c, m, in);
	int rc = ns_setattr_check(c, m, in, kill);

	if (rc)
		return rc;
	if (v == PROTO_SA_KILLPRIV && !kill)
		return 0;
	in->mode &= ~kill;
	if (v & PROTO_SA_UID)
		in->uid = m->uid;
	if (v & PROTO_SA_GID)
		in->gid = m->gid;
	if (v & PROTO_SA_MODE) {
		in->mode = (in->mode & S_IFMT) | (m->mode & 07777);
		if (c->uid != 0 && !mgr_perm_in_group(c, in->gid))
			in->mode &= ~(uint32_t)S_ISGID;
	}
	if (v & PROTO_SA_SIZE) {
		/* a shrink frees blocks: never report more than the size can
		 * hold until the writer publishes the real count */
		if (m->size < in->size && in->blocks > (m->size + 511) / 512)
			in->blocks = (m->size + 511) / 512;
		in->size = m->size;
		if (!(v & (PROTO_SA_MTIME | PROTO_SA_MTIME_NOW)))
			in->mtime = *now;
	}
	if (v & PROTO_SA_ATIME_NOW)
		in->atime = *now;
	else if (v & PROTO_SA_ATIME)
		in->atime = m->atime;
	if (v & PROTO_SA_MTIME_NOW)
		in->mtime = *now;
	else if (v & PROTO_SA_MTIME)
		in->mtime = m->mtime;
	in->ctime = *now;
	return 0;
}

/* SETATTR. */
int mgr_ns_setattr(struct mgr_db *db, struct mgr_txn *txn,
		   const struct proto_cred *c, const struct proto_mreq *m,
		   struct proto_attr *a)
{
	struct mgr_inode in;
	struct proto_time now;
	int rc;

	mgr_db_now(&now);
	rc = mgr_db_inode_get(db, txn, m->ino, &in);
	if (!rc)
		rc = ns_setattr_apply(c, m, &in, &now);
	if (!rc)
		rc = mgr_db_inode_put(db, txn, m->ino, &in);
	if (!rc)
		mgr_ns_attr(m->ino, &in, a);
	return rc;
}

/* A delegated create (BATCH): the inode number the session took from its
 * range, and for a regular file the layout the mount gave it. */
struct ns_given {
	uint64_t session;
	uint64_t ino;
	const struct proto_layout *layout; /* regular files */
};

/* A new regular file's layout in dir: the directory's or the default,
 * count clamped to the width; first rotates over the width, or with g is
 * the mount's, which must agree on unit, mirror and count (-EINVAL). */
static int ns_file_layout(struct mgr_db *db, struct mgr_txn *txn,
			  const struct mgr_inode *dir, const struct ns_given *g,
			  struct proto_layout *l)
{
	uint16_t width;
	uint64_t rot;
	int rc;

	*l = (dir->flags & MGR_IF_DIRLAYOUT) ? dir->layout : db->deflayout;
	if (l->mirror == 2 && db->ngroups == 0)
		l->mirror = 1; /* cannot happen: checked at set */
	width = stripe_width(l, db->niods, db->ngroups);
	if (l->count == 0 || l->count > width)
		l->count = width;
	if (g) {
		if (!g->layout || g->layout->unit != l->unit ||
		    g->layout->mirror != l->mirror ||
		    g->layout->count != l->count || g->layout->first >= width)
			return -EINVAL;
		l->first = g->layout->first;
		return 0;
	}
	rc = mgr_db_rotate(db, txn, &rot);
	if (!rc)
		l->first = (uint16_t)(rot % (width ? width : 1));
	return rc;
}

/* Look name up in parent for a new node: 0 if free (dir loaded, write and
 * search permission checked, in that order before the lookup as ever), or
 * -EEXIST if taken. With g, search permission comes first and the write
 * check after the lookup, so that a repeated delegated create (the name
 * holds g's inode) finds it: 1, *a its attr. */
static int ns_mknode_free(struct mgr_db *db, struct mgr_txn *txn,
			  const struct proto_cred *c, uint64_t parent,
			  const char *name, size_t len, const struct ns_given *g,
			  struct mgr_inode *dir, struct proto_attr *a)
{
	uint32_t mask = MGR_MAY_EXEC | (g ? 0 : MGR_MAY_WRITE);
	struct mgr_inode in;
	uint64_t ino;
	int rc = ns_name_ok(name, len);

	if (!rc)
		rc = mgr_ns_dir(db, txn, c, parent, mask, dir);
	if (rc)
		return rc;
	rc = mgr_db_dirent_get(db, txn, parent, name, len, &ino);
	if (rc == 0 && g && ino == g->ino) {
		rc = mgr_db_inode_get(db, txn, ino, &in);
		if (rc)
			return rc;
		mgr_ns_attr(ino, &in, a);
		return 1;
	}
	if (rc != -ENOENT)
		return rc ? rc : -EEXIST;
	return g ? mgr_perm_check(c, dir, MGR_MAY_WRITE) : 0;
}

/* Create a new inode of any type under parent (the common part of CREATE,
 * MKDIR, MKNOD and SYMLINK), numbered from the store's counter, or with g
 * from the session's range (a repeat of it succeeds and changes nothing).
 * Runs inside txn. */
static int ns_mknode(struct mgr_db *db, struct mgr_txn *txn, const struct proto_cred *c,
		     uint64_t parent, const char *name, size_t len, uint32_t mode,
		     uint32_t rdev, const char *target, size_t tlen,
		     const struct ns_given *g, struct proto_attr *a)
{
	struct mgr_inode dir, in = { 0 };
	struct proto_time now;
	uint64_t ino;
	int rc = ns_mknode_free(db, txn, c, parent, name, len, g, &dir, a);

	if (rc)
		return rc == 1 ? 0 : rc;
	if (S_ISDIR(mode) && dir.nlink >= MGR_LINK_MAX)
		return -EMLINK;
	if (S_ISREG(mode)) {
		rc = ns_file_layout(db, txn, &dir, g, &in.layout);
		if (rc)
			return rc;
	}
	if (g) {
		ino = g->ino;
		rc = mgr_db_range_use(db, txn, g->session, ino);
	} else {
		rc = mgr_db_inode_alloc(db, txn, &ino);
	}
	if (rc)
		return rc;
	mgr_db_now(&now);
	in.mode = mode;
	in.uid = c->uid;
	in.gid = c->gid;
	if (dir.mode & S_ISGID) {
		in.gid = dir.gid;
		if (S_ISDIR(mode))
			in.mode |= S_ISGID;
	}
	if (!S_ISDIR(in.mode) && (in.mode & S_ISGID) && c->uid != 0 &&
	    !mgr_perm_in_group(c, in.gid))
		in.mode &= ~(uint32_t)S_ISGID;
	in.rdev = rdev;
	in.atime = in.mtime = in.ctime = now;
	in.nlink = S_ISDIR(mode) ? 2 : 1;
	if (S_ISDIR(mode)) {
		in.parent = parent;
		in.next_seq = MGR_SEQ_FIRST;
		/* A directory's layout reaches its whole subtree: new
		 * subdirectories take it over, as in Lustre and BeeGFS. */
		if (dir.flags & MGR_IF_DIRLAYOUT) {
			in.flags |= MGR_IF_DIRLAYOUT;
			in.layout = dir.layout;
		}
	}
	if (S_ISLNK(mode)) {
		in.target = target;
		in.target_len = (uint32_t)tlen;
		in.size = tlen;
	}
	rc = mgr_db_dirent_add(db, txn, parent, &dir, name, len, ino);
	if (rc)
		return rc;
	if (S_ISDIR(mode))
		dir.nlink++;
	dir.mtime = dir.ctime = now;
	rc = mgr_db_inode_put(db, txn, parent, &dir);
	if (!rc)
		rc = mgr_db_inode_put(db, txn, ino, &in);
	if (!rc)
		mgr_ns_attr(ino, &in, a);
	return rc;
}

/* CREATE: new regular file, or (without EXCL) the existing one. */
int mgr_ns_create(struct mgr_db *db, struct mgr_txn *txn,
		  const struct proto_cred *c, uint64_t parent, const char *name,
		  size_t len, uint32_t mode, uint32_t flags, struct proto_attr *a)
{
	struct mgr_inode dir, in;
	uint64_t ino;
	int rc;

	if ((mode & S_IFMT) != 0 && !S_ISREG(mode))
		return -EINVAL;
	mode = S_IFREG | (mode & 07777);
	rc = ns_name_ok(name, len);
	if (!rc)
		rc = mgr_ns_dir(db, txn, c, parent, MGR_MAY_EXEC, &dir);
	if (!rc)
		rc = mgr_db_dirent_get(db, txn, parent, name, len, &ino);
	if (rc == 0) {
		/* exists: O_EXCL fails, otherwise open the existing file */
		rc = mgr_db_inode_get(db, txn, ino, &in);
		if (!rc && (flags & PROTO_CREATE_EXCL))
			rc = -EEXIST;
		if (!rc && S_ISDIR(in.mode))
			rc = -EISDIR;
		if (!rc)
			rc = mgr_perm_check(c, &in, MGR_MAY_WRITE);
		if (!rc)
			mgr_ns_attr(ino, &in, a);
	} else if (rc == -ENOENT) {
		rc = ns_mknode(db, txn, c, parent, name, len, mode, 0, NULL, 0,
			       NULL, a);
	}
	return rc;
}

/* MKDIR. */
int mgr_ns_mkdir(struct mgr_db *db, struct mgr_txn *txn,
		 const struct proto_cred *c, uint64_t parent, const char *name,
		 size_t len, uint32_t mode, struct proto_attr *a)
{
	return ns_mknode(db, txn, c, parent, name, len, S_IFDIR | (mode & 07777),
			 0, NULL, 0, NULL, a);
}

/* MKNOD: fifos, sockets, regular files; devices for root only. */
int mgr_ns_mknod(struct mgr_db *db, struct mgr_txn *txn,
		 const struct proto_cred *c, uint64_t parent, const char *name,
		 size_t len, uint32_t mode, uint32_t rdev, struct proto_attr *a)
{
	switch (mode & S_IFMT) {
	case 0:
		mode |= S_IFREG;
		/* fallthrough */
	case S_IFREG:
	case S_IFIFO:
	case S_IFSOCK:
		rdev = 0;
		break;
	case S_IFCHR:
	case S_IFBLK:
		if (c->uid != 0)
			return -EPERM;
		break;
	case S_IFDIR:
		return -EPERM;
	default:
		return -EINVAL;
	}
	return ns_mknode(db, txn, c, parent, name, len,
			 (mode & S_IFMT) | (mode & 07777), rdev, NULL, 0, NULL, a);
}

/* SYMLINK: target stored inline in the inode record. */
int mgr_ns_symlink(struct mgr_db *db, struct mgr_txn *txn,
		   const struct proto_cred *c, uint64_t parent, const char *name,
		   size_t len, const char *target, size_t tlen,
		   struct proto_attr *a)
{
	if (tlen == 0)
		return -ENOENT;
	if (tlen > PROTO_MAX_PATH)
		return -ENAMETOOLONG;
	return ns_mknode(db, txn, c, parent, name, len, S_IFLNK | 0777, 0,
			 target, tlen, NULL, a);
}

/* A delegated CREATE, MKDIR or SYMLINK of a BATCH: as the op alone (CREATE
 * always exclusive), numbered o->newino from session's range. */
int mgr_ns_make_given(struct mgr_db *db, struct mgr_txn *txn,
		      const struct proto_cred *c, uint64_t session,
		      const struct proto_bop *o, struct proto_attr *a)
{
	const struct proto_mreq *m = &o->m;
	struct ns_given g = { session, o->newino, NULL };

	if (session == 0 || o->newino == 0)
		return -EINVAL;
	switch (o->op) {
	case PROTO_OP_CREATE:
		if ((m->mode & S_IFMT) != 0 && !S_ISREG(m->mode))
			return -EINVAL;
		g.layout = &o->layout;
		return ns_mknode(db, txn, c, m->parent, m->name.p, m->name.len,
				 S_IFREG | (m->mode & 07777), 0, NULL, 0, &g, a);
	case PROTO_OP_MKDIR:
		return ns_mknode(db, txn, c, m->parent, m->name.p, m->name.len,
				 S_IFDIR | (m->mode & 07777), 0, NULL, 0, &g, a);
	case PROTO_OP_SYMLINK:
		if (m->target.len == 0)
			return -ENOENT;
		if (m->target.len > PROTO_MAX_PATH)
			return -ENAMETOOLONG;
		return ns_mknode(db, txn, c, m->parent, m->name.p, m->name.len,
				 S_IFLNK | 0777, 0, m->target.p, m->target.len,
				 &g, a);
	default:
		return -EINVAL;
	}
}

/* LINK: ino gets the name newparent/name. */
int mgr_ns_link(struct mgr_db *db, struct mgr_txn *txn,
		const struct proto_cred *c, uint64_t ino, uint64_t newparent,
		const char *name, size_t len, struct proto_attr *a)
{
	struct mgr_inode in, dir;
	struct proto_time now;
	uint64_t other;
	int rc = ns_name_ok(name, len);

	if (!rc)
		rc = mgr_db_inode_get(db, txn, ino, &in);
	if (rc)
		return rc;
	if (S_ISDIR(in.mode))
		return -EPERM;
	if (in.nlink == 0)
		return -ENOENT;
	if (in.nlink >= MGR_LINK_MAX)
		return -EMLINK;
	rc = mgr_ns_dir(db, txn, c, newparent, MGR_MAY_WRITE | MGR_MAY_EXEC, &dir);
	if (rc)
		return rc;
	rc = mgr_db_dirent_get(db, txn, newparent, name, len, &other);
	if (rc != -ENOENT)
		return rc ? rc : -EEXIST;
	rc = mgr_db_dirent_add(db, txn, newparent, &dir, name, len, ino);
	if (rc)
		return rc;
	mgr_db_now(&now);
	dir.mtime = dir.ctime = now;
	in.nlink++;
	in.ctime = now;
	rc = mgr_db_inode_put(db, txn, newparent, &dir);
	if (!rc)
		rc = mgr_db_inode_put(db, txn, ino, &in);
	if (!rc)
		mgr_ns_attr(ino, &in, a);
	return rc;
}

/* UNLINK / RMDIR body: remove parent/name; dir selects rmdir semantics. */
static int ns_remove(struct mgr_db *db, struct mgr_txn *txn, const struct proto_cred *c,
		     uint64_t parent, const char *name, size_t len, int isdir,
		     struct proto_freed *f)
{
	struct mgr_inode dir, in;
	struct proto_time now;
	uint64_t ino;
	int rc = ns_name_ok(name, len);

	if (!rc)
		rc = mgr_ns_dir(db, txn, c, parent, MGR_MAY_WRITE | MGR_MAY_EXEC, &dir);
	if (!rc)
		rc = mgr_db_dirent_get(db, txn, parent, name, len, &ino);
	if (!rc)
		rc = mgr_db_inode_get(db, txn, ino, &in);
	if (rc)
		return rc;
	if (!isdir && S_ISDIR(in.mode))
		return -EISDIR;
	if (isdir && !S_ISDIR(in.mode))
		return -ENOTDIR;
	rc = mgr_perm_sticky(c, &dir, &in);
	if (rc)
		return rc;
	if (isdir) {
		rc = mgr_db_dir_empty(db, txn, ino);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return -ENOTEMPTY;
	}
	rc = mgr_db_dirent_del(db, txn, parent, name, len);
	if (rc)
		return rc;
	mgr_db_now(&now);
	dir.mtime = dir.ctime = now;
	if (isdir) {
		dir.nlink--;
		rc = mgr_db_inode_del(db, txn, ino);
	} else {
		rc = mgr_ns_drop_link(db, txn, ino, &in, &now, c->uid, f);
	}
	if (!rc)
		rc = mgr_db_inode_put(db, txn, parent, &dir);
	return rc;
}

/* UNLINK. */
int mgr_ns_unlink(struct mgr_db *db, struct mgr_txn *txn,
		  const struct proto_cred *c, uint64_t parent, const char *name,
		  size_t len, struct proto_freed *f)
{
	int rc;

	memset(f, 0, sizeof(*f));
	rc = ns_remove(db, txn, c, parent, name, len, 0, f);
	if (rc)
		memset(f, 0, sizeof(*f));
	return rc;
}

/* RMDIR. */
int mgr_ns_rmdir(struct mgr_db *db, struct mgr_txn *txn,
		 const struct proto_cred *c, uint64_t parent, const char *name,
		 size_t len)
{
	return ns_remove(db, txn, c, parent, name, len, 1, NULL);
}

/* READLINK: copy the target out (it points into the store's memory, valid
 * only until txn ends). */
int mgr_ns_readlink(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
		    char *buf, size_t cap, size_t *len)
{
	struct mgr_inode in;
	int rc = mgr_db_inode_get(db, txn, ino, &in);

	if (!rc && !S_ISLNK(in.mode))
		rc = -EINVAL;
	if (!rc && in.target_len > cap)
		rc = -ENAMETOOLONG;
	if (!rc) {
		memcpy(buf, in.target, in.target_len);
		*len = in.target_len;
	}
	return rc;
}

/* State of one readdir walk. */
struct ns_rd {
	struct mgr_db *db;
	struct mgr_txn *txn;
	mgr_ns_emit_fn fn;
	void *arg;
	int rc;
};

/* Per-entry callback: load the child for readdirplus attrs and emit. */
static int ns_rd_entry(void *arg, uint64_t seq, const char *name, size_t len,
		       uint64_t child)
{
	struct ns_rd *s = arg;
	struct mgr_inode in;
	struct proto_attr a;
	int rc = mgr_db_inode_get(s->db, s->txn, child, &in);

	if (rc) {
		s->rc = rc;
		return 1;
	}
	mgr_ns_attr(child, &in, &a);
	return s->fn(s->arg, seq, name, len, &a);
}

/* READDIR: ".", "..", then entries in cookie order. */
int mgr_ns_readdir(struct mgr_db *db, struct mgr_txn *txn,
		   const struct proto_cred *c, uint64_t ino, uint64_t cookie,
		   mgr_ns_emit_fn fn, void *arg, int *eof)
{
	struct mgr_inode dir, par;
	struct proto_attr a;
	struct ns_rd s = { db, txn, fn, arg, 0 };
	int rc = mgr_ns_dir(db, txn, c, ino, MGR_MAY_READ, &dir);

	*eof = 0;
	if (rc)
		return rc;
	if (cookie < 1) {
		mgr_ns_attr(ino, &dir, &a);
		if (fn(arg, 1, ".", 1, &a))
			return 0;
	}
	if (cookie < 2) {
		rc = mgr_db_inode_get(db, txn, dir.parent, &par);
		if (rc)
			return rc;
		mgr_ns_attr(dir.parent, &par, &a);
		if (fn(arg, 2, "..", 2, &a))
			return 0;
	}
	rc = mgr_db_readdir(db, txn, ino, cookie < 2 ? 2 : cookie, ns_rd_entry, &s);
	if (rc < 0)
		return rc;
	if (s.rc)
		return s.rc;
	*eof = rc;
	return 0;
}

/* OPEN: check the access mode and O_TRUNC like open(2). */
int mgr_ns_open(struct mgr_db *db, struct mgr_txn *txn,
		const struct proto_cred *c, uint64_t ino, uint32_t flags,
		struct proto_attr *a)
{
	struct mgr_inode in;
	uint32_t mask = 0;
	int rc;

	switch (flags & O_ACCMODE) {
	case O_RDONLY: mask = MGR_MAY_READ; break;
	case O_WRONLY: mask = MGR_MAY_WRITE; break;
	default: mask = MGR_MAY_READ | MGR_MAY_WRITE; break;
	}
	if (flags & O_TRUNC)
		mask |= MGR_MAY_WRITE;
	rc = mgr_db_inode_get(db, txn, ino, &in);
	if (!rc && S_ISDIR(in.mode) && (mask & MGR_MAY_WRITE))
		rc = -EISDIR;
	if (!rc)
		rc = mgr_perm_check(c, &in, mask);
	if (!rc)
		mgr_ns_attr(ino, &in, a);
	return rc;
}

/* ACCESS: mask R_OK/W_OK/X_OK (same bits as MGR_MAY_*), 0 = exists. */
int mgr_ns_access(struct mgr_db *db, struct mgr_txn *txn,
		  const struct proto_cred *c, uint64_t ino, uint32_t mask)
{
	struct mgr_inode in;
	int rc = mgr_db_inode_get(db, txn, ino, &in);

	if (!rc && (mask & 7))
		rc = mgr_perm_check(c, &in, mask & 7);
	return rc;
}

/* Load ino for a writer's size or block update in txn.
 * @return 0, -EISDIR (a directory), -EINVAL (not a regular file), -ENOENT,
 *	-EIO */
static int ns_get_regular(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
			  struct mgr_inode *in)
{
	int rc = mgr_db_inode_get(db, txn, ino, in);

	if (rc)
		return rc;
	if (S_ISDIR(in->mode))
		return -EISDIR;
	return S_ISREG(in->mode) ? 0 : -EINVAL;
}

/* Whether c may publish what it wrote to in (SETSIZE, SETBLOCKS): its
 * owner, root, or a caller with write permission, as for a truncate (the
 * owner passes even at mode 0444: a file created read-only is written
 * through the descriptor that created it). @return 0, -EACCES */
static int ns_may_publish(const struct proto_cred *c,
			  const struct mgr_inode *in)
{
	if (mgr_perm_owner(c, in))
		return 0;
	return mgr_perm_check(c, in, MGR_MAY_WRITE);
}

/* SETSIZE: grow-only size update from a writer, with its mtime. */
int mgr_ns_setsize(struct mgr_db *db, struct mgr_txn *txn,
		   const struct proto_cred *c, uint64_t ino, uint64_t size,
		   const struct proto_time *mtime, struct proto_attr *a)
{
	struct mgr_inode in;
	int rc = ns_get_regular(db, txn, ino, &in);

	if (!rc)
		rc = ns_may_publish(c, &in);
	if (!rc) {
		if (size > in.size)
			in.size = size;
		in.mtime = in.ctime = *mtime;
		rc = mgr_db_inode_put(db, txn, ino, &in);
	}
	if (!rc)
		mgr_ns_attr(ino, &in, a);
	return rc;
}

/* SETBLOCKS: store the published block count; PROTO_SB_GROW grows the size
 * (mtime and ctime change when it does, as with ext4's fallocate),
 * PROTO_SB_MTIME sets mtime and ctime, PROTO_SB_CTIME ctime, to the
 * writer's time t. */
int mgr_ns_setblocks(struct mgr_db *db, struct mgr_txn *txn,
		     const struct proto_cred *c, uint64_t ino, uint32_t flags,
		     uint64_t size, const struct proto_time *t, uint64_t blocks,
		     struct proto_attr *a)
{
	struct mgr_inode in;
	int rc = ns_get_regular(db, txn, ino, &in);

	if (!rc)
		rc = ns_may_publish(c, &in);
	if (!rc) {
		in.blocks = blocks;
		if ((flags & PROTO_SB_GROW) && size > in.size) {
			in.size = size;
			flags |= PROTO_SB_MTIME;
		}
		if (flags & PROTO_SB_MTIME)
			in.mtime = *t;
		if (flags & (PROTO_SB_MTIME | PROTO_SB_CTIME))
			in.ctime = *t;
		rc = mgr_db_inode_put(db, txn, ino, &in);
	}
	if (!rc)
		mgr_ns_attr(ino, &in, a);
	return rc;
}

/* May caller c (NULL: the servers) purge orphan in, freed by freer? Its
 * owner and the one whose unlink freed it may: after an unlink that the
 * directory allowed, that client's reaper purges a file it does not own. */
static int ns_purge_allowed(const struct proto_cred *c,
			    const struct mgr_inode *in, uint32_t freer)
{
	if (!c || c->uid == 0 || c->uid == in->uid || c->uid == freer)
		return 0;
	return -EPERM;
}

/* Delete ino in txn if it is an orphan the caller may purge. @return 0,
 * -ENOENT (no such orphan), -EBUSY (still linked), -EPERM, -EIO */
static int ns_purge_one(struct mgr_db *db, struct mgr_txn *txn,
			const struct proto_cred *c, uint64_t ino)
{
	struct mgr_inode in;
	uint32_t freer;
	int rc = mgr_db_inode_get(db, txn, ino, &in);

	if (!rc && in.nlink != 0)
		rc = -EBUSY;
	if (!rc) {
		rc = mgr_db_orphan_freer(db, txn, ino, &freer);
		if (rc == 0)
			rc = -ENOENT;
		else if (rc == 1)
			rc = ns_purge_allowed(c, &in, freer);
	}
	if (!rc)
		rc = mgr_db_inode_del(db, txn, ino);
	return rc;
}

/* PURGE: delete an unlinked orphan once its objects are gone. */
int mgr_ns_purge(struct mgr_db *db, struct mgr_txn *txn,
		 const struct proto_cred *c, uint64_t ino)
{
	return ns_purge_one(db, txn, c, ino);
}

/* PURGE_MANY: see mgr_ns.h. Cost: one lookup and delete per inode, all in
 * txn (one commit for the list). */
int mgr_ns_purge_many(struct mgr_db *db, struct mgr_txn *txn,
		      const struct proto_cred *c,
		      const struct proto_inos *inos, int *skipped)
{
	int rc;

	*skipped = 0;
	for (uint32_t i = 0; i < inos->n; i++) {
		rc = ns_purge_one(db, txn, c, proto_inos_at(inos, i));
		if (rc == -ENOENT || rc == -EBUSY || rc == -EPERM) {
			if (!*skipped)
				*skipped = rc;
			continue;
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* Inodes in use, for statfs. */
uint64_t mgr_ns_files(struct mgr_db *db, struct mgr_txn *txn)
{
	return mgr_db_inode_count(db, txn);
}
