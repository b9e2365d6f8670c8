/* mgr_xattr.c - xattr operations and the virtual user.rpfs.layout. */
#include "mgr_xattr.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "mgr_ns.h"
#include "mgr_perm.h"

/* Does name start with the given prefix? */
static int xa_prefix(const char *name, size_t len, const char *pre)
{
	size_t pl = strlen(pre);

	return len > pl && memcmp(name, pre, pl) == 0;
}

/* Is name the virtual layout attribute? */
static int xa_is_layout(const char *name, size_t len)
{
	return len == sizeof(MGR_XATTR_LAYOUT) - 1 &&
	       memcmp(name, MGR_XATTR_LAYOUT, len) == 0;
}

/* Namespace and permission rules, as Linux xattr_permission() applies
 * them: reading a forbidden attribute looks like a missing one. */
static int xa_allowed(const struct proto_cred *c, const struct mgr_inode *in,
		      const char *name, size_t len, int write)
{
	if (xa_prefix(name, len, "user.")) {
		if (!S_ISREG(in->mode) && !S_ISDIR(in->mode))
			return write ? -EPERM : -ENODATA;
		return mgr_perm_check(c, in, write ? MGR_MAY_WRITE : MGR_MAY_READ);
	}
	if (xa_prefix(name, len, "trusted.")) {
		if (c->uid != 0)
			return write ? -EPERM : -ENODATA;
		return 0;
	}
	return -EOPNOTSUPP;
}

/* The layout a file has, or a directory gives new files. */
static void xa_layout_of(struct mgr_db *db, const struct mgr_inode *in,
			 struct proto_layout *l)
{
	if (S_ISREG(in->mode) || (in->flags & MGR_IF_DIRLAYOUT))
		*l = in->layout;
	else
		*l = db->deflayout;
	if (S_ISDIR(in->mode))
		l->first = 0;
}

/* GETXATTR. */
int mgr_xattr_get(struct mgr_db *db, struct mgr_txn *txn,
		  const struct proto_cred *c, uint64_t ino, const char *name,
		  size_t nlen, void *buf, size_t cap, size_t *size)
{
	struct mgr_inode in;
	struct proto_layout l;
	char text[96];
	const void *val;
	size_t vlen;
	int rc = mgr_db_inode_get(db, txn, ino, &in);

	if (!rc)
		rc = xa_allowed(c, &in, name, nlen, 0);
	if (rc)
		return rc;
	if (xa_is_layout(name, nlen)) {
		xa_layout_of(db, &in, &l);
		rc = proto_layout_format(text, sizeof(text), &l);
		if (rc < 0)
			return rc;
		val = text;
		vlen = strnlen(text, sizeof(text));
	} else {
		rc = mgr_db_xattr_get(db, txn, ino, name, nlen, &val, &vlen);
		if (rc)
			return rc;
	}
	*size = vlen;
	if (cap == 0)
		return 0;
	if (vlen > cap)
		return -ERANGE;
	memcpy(buf, val, vlen);
	return 0;
}

/* Set user.rpfs.layout: a directory's default, or an empty file's layout. */
static int xa_set_layout(struct mgr_db *db, struct mgr_txn *txn, uint64_t ino,
			 struct mgr_inode *in, const char *val, size_t vlen)
{
	struct proto_layout l = { 0 };
	struct proto_time now;
	int rc = proto_layout_parse(val, vlen, &l);

	uint16_t width = stripe_width(&l, db->niods, db->ngroups);

	if (rc)
		return -EINVAL;
	if (l.count == 0 || l.count > width)
		return -EINVAL; /* also mirror=2 without a group */
	if (S_ISDIR(in->mode)) {
		in->layout = (struct proto_layout){ l.unit, l.count, 0, l.mirror };
		in->flags |= MGR_IF_DIRLAYOUT;
	} else if (S_ISREG(in->mode)) {
		if (in->size != 0)
			return -EBUSY;
		/* first stays rotated unless the string names it */
		if (memmem(val, vlen, "first=", 6)) {
			if (l.first >= width)
				return -EINVAL;
			in->layout.first = l.first;
		} else {
			in->layout.first %= width; /* the old one may index iods */
		}
		in->layout.unit = l.unit;
		in->layout.count = l.count;
		in->layout.mirror = l.mirror;
	} else {
		return -EPERM;
	}
	mgr_db_now(&now);
	in->ctime = now;
	return mgr_db_inode_put(db, txn, ino, in);
}

/* SETXATTR. */
int mgr_xattr_set(struct mgr_db *db, struct mgr_txn *txn,
		  const struct proto_cred *c, uint64_t ino, const char *name,
		  size_t nlen, const void *val, size_t vlen, uint32_t flags)
{
	struct mgr_inode in;
	struct proto_time now;
	const void *old;
	size_t olen;
	int rc = mgr_db_inode_get(db, txn, ino, &in);

	if (!rc)
		rc = xa_allowed(c, &in, name, nlen, 1);
	if (rc)
		return rc;
	if (flags & ~(PROTO_XATTR_CREATE | PROTO_XATTR_REPLACE))
		return -EINVAL;
	if (vlen > PROTO_MAX_XATTR_VALUE)
		return -E2BIG;
	if (xa_is_layout(name, nlen))
		return xa_set_layout(db, txn, ino, &in, val, vlen);
	rc = mgr_db_xattr_get(db, txn, ino, name, nlen, &old, &olen);
	if (rc && rc != -ENODATA)
		return rc;
	if (rc == 0 && (flags & PROTO_XATTR_CREATE))
		return -EEXIST;
	if (rc == -ENODATA && (flags & PROTO_XATTR_REPLACE))
		return -ENODATA;
	rc = mgr_db_xattr_put(db, txn, ino, name, nlen, val, vlen);
	if (rc)
		return rc;
	mgr_db_now(&now);
	in.ctime = now;
	return mgr_db_inode_put(db, txn, ino, &in);
}

/* Accumulator for LISTXATTR. */
struct xa_list {
	const struct proto_cred *c;
	char *buf;
	size_t cap, size;
};

/* Append one name (skip trusted.* for non-root). */
static int xa_list_one(void *arg, const char *name, size_t len)
{
	struct xa_list *l = arg;

	if (l->c->uid != 0 && xa_prefix(name, len, "trusted."))
		return 0;
	if (l->cap && l->size + len + 1 > l->cap)
		return -ERANGE;
	if (l->cap) {
		memcpy(l->buf + l->size, name, len);
		l->buf[l->size + len] = '\0';
	}
	l->size += len + 1;
	return 0;
}

/* LISTXATTR (no permission needed, as in Linux). */
int mgr_xattr_list(struct mgr_db *db, struct mgr_txn *txn,
		   const struct proto_cred *c, uint64_t ino, void *buf,
		   size_t cap, size_t *size)
{
	struct xa_list l = { c, buf, cap, 0 };
	struct mgr_inode in;
	int rc = mgr_db_inode_get(db, txn, ino, &in);

	if (!rc)
		rc = mgr_db_xattr_list(db, txn, ino, xa_list_one, &l);
	if (!rc)
		*size = l.size;
	return rc;
}

/* REMOVEXATTR. */
int mgr_xattr_remove(struct mgr_db *db, struct mgr_txn *txn,
		     const struct proto_cred *c, uint64_t ino, const char *name,
		     size_t nlen)
{
	struct mgr_inode in;
	struct proto_time now;
	int rc = mgr_db_inode_get(db, txn, ino, &in);

	if (!rc)
		rc = xa_allowed(c, &in, name, nlen, 1);
	if (rc)
		return rc;
	if (xa_is_layout(name, nlen)) {
		if (!S_ISDIR(in.mode))
			return -EPERM;
		if (!(in.flags & MGR_IF_DIRLAYOUT))
			return -ENODATA;
		in.flags &= ~MGR_IF_DIRLAYOUT;
		in.layout = (struct proto_layout){ 0 };
	} else {
		rc = mgr_db_xattr_del(db, txn, ino, name, nlen);
		if (rc)
			return rc;
	}
	mgr_db_now(&now);
	in.ctime = now;
	return mgr_db_inode_put(db, txn, ino, &in);
}
