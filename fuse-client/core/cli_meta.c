/*
 * cli_meta.c - metadata calls to the mgr: encode, run, decode, map errors.
 * Every call uses the calling thread's scratch (cli_tls_*), so no buffer is
 * allocated per request.
 */
#include <errno.h>
#include <string.h>

#include "cli_meta.h"

#include <sys/stat.h>

#include "cli_deleg.h"
#include "log.h"

/* Check a path component the way the mgr decoder will, so that a bad name
 * gets a precise errno instead of an encoder -EINVAL. */
static int name_check(const char *name)
{
	size_t n = strlen(name);

	if (n == 0)
		return -EINVAL;
	if (n > PROTO_MAX_NAME)
		return -ENAMETOOLONG;
	if (strchr(name, '/'))
		return -EINVAL;
	return 0;
}

/* Make a proto_str of a NUL-terminated string. */
static struct proto_str pstr(const char *s)
{
	struct proto_str r = { s, s ? (uint32_t)strlen(s) : 0 };

	return r;
}

/* Log a transport failure of the mgr once per burst and turn it into -EIO. */
static int mgr_fail(struct cli_fs *fs, uint16_t op, int rc)
{
	if (atomic_exchange(&fs->mgr_failing, 1) == 0)
		log_warn("mgr (%s:%u): %s failed: %s", fs->mgr_host,
			 fs->mgr_port, proto_op_name(op), strerror(-rc));
	return -EIO;
}

static int meta_run(struct cli_fs *fs, uint16_t op, const struct proto_mreq *m,
		    struct proto_mrep *r);

/*
 * A non-idempotent op was sent again after an attempt whose answer was lost
 * (the mgr died, or a timeout), and failed with status: if that failure is
 * what its own first attempt's change looks like, count the op as done (as
 * an NFS client does without a reply cache): EEXIST on a create (the entry
 * is looked up for its attributes; a LINK's must be the same inode),
 * ENOENT on an unlink, rmdir, rename or purge (of one orphan, or of many:
 * the others were purged in the same commit). Cost: one LOOKUP for a
 * create.
 * @return 0 (r filled for a create) or status
 */
static int meta_replayed(struct cli_fs *fs, uint16_t op,
			 const struct proto_mreq *m, struct proto_mrep *r,
			 int status)
{
	struct proto_mreq lm;
	struct proto_mrep lr;
	int create = op == PROTO_OP_CREATE || op == PROTO_OP_MKDIR ||
		     op == PROTO_OP_MKNOD || op == PROTO_OP_SYMLINK;

	if (status == -ENOENT && (op == PROTO_OP_UNLINK || op == PROTO_OP_RMDIR ||
				  op == PROTO_OP_RENAME || op == PROTO_OP_PURGE ||
				  op == PROTO_OP_PURGE_MANY)) {
		log_notice("%s: ENOENT after a resend: taken as its own first "
			   "attempt's change", proto_op_name(op));
		if (r)
			memset(r, 0, sizeof(*r));
		return 0;
	}
	if (status != -EEXIST || (!create && op != PROTO_OP_LINK))
		return status;
	memset(&lm, 0, sizeof(lm));
	lm.cred = m->cred;
	lm.parent = create ? m->parent : m->newparent;
	lm.name = create ? m->name : m->newname;
	if (meta_run(fs, PROTO_OP_LOOKUP, &lm, &lr) || lr.attr.ino == 0 ||
	    (op == PROTO_OP_LINK && lr.attr.ino != m->ino))
		return status;
	log_notice("%s: EEXIST after a resend: taken as its own first "
		   "attempt's change", proto_op_name(op));
	if (r) {
		memset(r, 0, sizeof(*r));
		r->attr = lr.attr;
	}
	return 0;
}

/* Whether op changes the inodes it names at the mgr (beyond reading). */
static int meta_changes(uint16_t op)
{
	switch (op) {
	case PROTO_OP_LOOKUP:
	case PROTO_OP_GETATTR:
	case PROTO_OP_READLINK:
	case PROTO_OP_READDIR:
	case PROTO_OP_STATFS:
	case PROTO_OP_GETXATTR:
	case PROTO_OP_LISTXATTR:
	case PROTO_OP_OPEN:
	case PROTO_OP_ACCESS:
	case PROTO_OP_SETATTR: /* its reply updates the record (cli_deleg_attr) */
		return 0;
	default:
		return 1;
	}
}

/*
 * Run one metadata op: encode m, run it on the active mgr (cli_mgr_run),
 * and decode a successful reply into r (may be NULL for ops without a
 * reply body). Cost: one round trip (more while following a new mgr).
 */
static int meta_run(struct cli_fs *fs, uint16_t op, const struct proto_mreq *m,
		    struct proto_mrep *r)
{
	uint8_t *req = cli_tls_reqbuf(), *rep = cli_tls_repbuf();
	struct proto_mrep scratch;
	struct net_call call;
	struct wbuf w;
	const char *why = "?";
	int rc, retried;

	if (!req || !rep)
		return -ENOMEM;
	if (fs->deleg) { /* what this mount did alone reaches the mgr first */
		const uint64_t inos[3] = { m->ino, m->parent, m->newparent };

		if (cli_deleg_before(fs->deleg, inos, 3, meta_changes(op)))
			return -EIO;
		if ((op == PROTO_OP_PURGE || op == PROTO_OP_PURGE_MANY) &&
		    cli_deleg_flush(fs->deleg))
			return -EIO; /* after the UNLINKs queued */
	}
	wb_init(&w, req, PROTO_MAX_BODY);
	if (fs->session && m->cred.session != fs->session) {
		struct proto_mreq ms = *m; /* with the session: leases */

		ms.cred.session = fs->session;
		rc = proto_mreq_encode(&w, op, &ms);
	} else {
		rc = proto_mreq_encode(&w, op, m);
	}
	if (rc)
		return rc == -EMSGSIZE ? -E2BIG : rc;
	memset(&call, 0, sizeof(call));
	call.op = op;
	call.body = req;
	call.body_len = (uint32_t)w.len;
	call.rep_buf = rep;
	call.rep_cap = PROTO_MAX_BODY;
	rc = cli_mgr_run(fs, &call, &retried);
	if (rc)
		return mgr_fail(fs, op, rc);
	if (atomic_load_explicit(&fs->mgr_failing, memory_order_relaxed) &&
	    atomic_exchange(&fs->mgr_failing, 0))
		log_notice("mgr (%s:%u): reachable again", fs->mgr_host,
			   fs->mgr_port);
	if (call.status > 0 || call.status < -4095) {
		log_warn("mgr (%s:%u): %s: bad status %d", fs->mgr_host,
			 fs->mgr_port, proto_op_name(op), call.status);
		return -EIO;
	}
	if (call.status < 0)
		return retried ? meta_replayed(fs, op, m, r, call.status) :
				 call.status;
	if (!r)
		r = &scratch;
	memset(r, 0, sizeof(*r));
	rc = proto_mrep_decode(rep, call.rep_len, op, r, &why);
	if (rc) {
		log_warn("mgr (%s:%u): malformed %s reply (%s)", fs->mgr_host,
			 fs->mgr_port, proto_op_name(op), why);
		return -EIO;
	}
	return 0;
}

/* A request with only the credential filled in. */
static void mreq_init(struct proto_mreq *m, const struct proto_cred *c)
{
	memset(m, 0, sizeof(*m));
	m->cred = *c;
}

/* Run op and copy the reply's attributes out. */
static int meta_attr(struct cli_fs *fs, uint16_t op, const struct proto_mreq *m,
		     struct proto_attr *attr)
{
	struct proto_mrep r;
	int rc = meta_run(fs, op, m, &r);

	if (rc == 0 && attr)
		*attr = r.attr;
	return rc;
}

/* LOOKUP: see cli_meta.h. */
int cli_meta_lookup(struct cli_fs *fs, const struct proto_cred *c,
		    uint64_t parent, const char *name, struct proto_attr *attr)
{
	return cli_meta_lookup_grant(fs, c, parent, name, attr, NULL);
}

/* LOOKUP with the reply's lease grant: see cli_meta.h. */
int cli_meta_lookup_grant(struct cli_fs *fs, const struct proto_cred *c,
			  uint64_t parent, const char *name,
			  struct proto_attr *attr, struct proto_grant *g)
{
	struct proto_mreq m;
	struct proto_mrep r;
	int rc = name_check(name);

	if (g)
		memset(g, 0, sizeof(*g));
	if (rc)
		return rc;
	if (fs->deleg) { /* a directory this mount holds alone */
		struct proto_attr la;

		rc = cli_deleg_lookup(fs->deleg, parent, name, &la);
		if (rc == 0 && attr)
			*attr = la;
		if (rc != -EAGAIN)
			return rc;
	}
	mreq_init(&m, c);
	m.parent = parent;
	m.name = pstr(name);
	rc = meta_run(fs, PROTO_OP_LOOKUP, &m, &r);
	if (rc == 0 && g)
		*g = r.grant;
	if (rc == 0 && r.attr.ino == 0)
		return -ENOENT; /* a miss under a lease (proto_grant) */
	if (rc == 0 && attr) {
		*attr = r.attr;
		if (fs->deleg) /* made alone here: what joined it may be queued */
			cli_deleg_getattr(fs->deleg, r.attr.ino, attr);
	}
	return rc;
}

/* GETATTR: see cli_meta.h. */
int cli_meta_getattr(struct cli_fs *fs, const struct proto_cred *c,
		     uint64_t ino, struct proto_attr *attr)
{
	struct proto_mreq m;

	if (fs->deleg && attr && cli_deleg_getattr(fs->deleg, ino, attr) == 0)
		return 0; /* made alone here: nobody else can change it */
	mreq_init(&m, c);
	m.ino = ino;
	return meta_attr(fs, PROTO_OP_GETATTR, &m, attr);
}

/* SETATTR: see cli_meta.h. */
int cli_meta_setattr(struct cli_fs *fs, const struct proto_cred *c,
		     uint64_t ino, uint32_t valid, const struct proto_attr *in,
		     struct proto_attr *attr)
{
	struct proto_mreq m;
	struct proto_attr a;
	int rc;

	if (valid & ~PROTO_SA_ALL)
		return -EINVAL;
	mreq_init(&m, c);
	m.ino = ino;
	m.valid = valid;
	m.mode = in->mode;
	m.uid = in->uid;
	m.gid = in->gid;
	m.size = in->size;
	m.atime = in->atime;
	m.mtime = in->mtime;
	if (fs->deleg && attr && cli_deleg_setattr(fs->deleg, c, ino, &m, attr) == 0)
		return 0; /* joins its unsent create */
	rc = meta_attr(fs, PROTO_OP_SETATTR, &m, &a);
	if (rc)
		return rc;
	if (fs->deleg)
		cli_deleg_attr(fs->deleg, &a);
	if (attr)
		*attr = a;
	return 0;
}

/* A name this mount made by today's path in parent: a directory it holds
 * alone learns it; a new directory may come with a WRITE lease. */
static void meta_deleg_made(struct cli_fs *fs, uint16_t op, uint64_t parent,
			    const char *name, const struct proto_mrep *r)
{
	cli_deleg_named(fs->deleg, parent, name, r->attr.ino);
	if (op == PROTO_OP_MKDIR && r->grant.ino)
		cli_deleg_grant(fs->deleg, &r->attr, &r->grant);
}

/* CREATE, MKDIR or MKNOD (op) of name in parent with mode: the one shape
 * of the three; flags (CREATE's) and rdev (MKNOD's) are 0 for the ops
 * that do not carry them, as mreq_init leaves them. */
static int meta_new_entry(struct cli_fs *fs, const struct proto_cred *c,
			  uint16_t op, uint64_t parent, const char *name,
			  uint32_t mode, uint32_t flags, uint32_t rdev,
			  struct proto_attr *attr)
{
	struct proto_mreq m;
	struct proto_mrep r;
	int rc = name_check(name);

	if (rc)
		return rc;
	if (fs->deleg && op != PROTO_OP_MKNOD && attr &&
	    cli_deleg_mknode(fs->deleg, c, parent, name, mode, NULL, attr) == 0)
		return 0; /* answered alone, queued */
	mreq_init(&m, c);
	m.parent = parent;
	m.name = pstr(name);
	m.mode = mode;
	m.flags = flags;
	m.rdev = rdev;
	rc = meta_run(fs, op, &m, &r);
	if (rc)
		return rc;
	if (attr)
		*attr = r.attr;
	if (fs->deleg)
		meta_deleg_made(fs, op, parent, name, &r);
	return 0;
}

/* CREATE: see cli_meta.h. */
int cli_meta_create(struct cli_fs *fs, const struct proto_cred *c,
		    uint64_t parent, const char *name, uint32_t mode,
		    uint32_t flags, struct proto_attr *attr)
{
	return meta_new_entry(fs, c, PROTO_OP_CREATE, parent, name, mode,
			      flags, 0, attr);
}

/* MKDIR: see cli_meta.h. */
int cli_meta_mkdir(struct cli_fs *fs, const struct proto_cred *c,
		   uint64_t parent, const char *name, uint32_t mode,
		   struct proto_attr *attr)
{
	return meta_new_entry(fs, c, PROTO_OP_MKDIR, parent, name, mode, 0, 0,
			      attr);
}

/* MKNOD: see cli_meta.h. */
int cli_meta_mknod(struct cli_fs *fs, const struct proto_cred *c,
		   uint64_t parent, const char *name, uint32_t mode,
		   uint32_t rdev, struct proto_attr *attr)
{
	return meta_new_entry(fs, c, PROTO_OP_MKNOD, parent, name, mode, 0,
			      rdev, attr);
}

/* UNLINK: see cli_meta.h. */
int cli_meta_unlink(struct cli_fs *fs, const struct proto_cred *c,
		    uint64_t parent, const char *name, struct proto_freed *freed)
{
	struct proto_mreq m;
	struct proto_mrep r;
	int rc = name_check(name);

	if (rc)
		return rc;
	mreq_init(&m, c);
	m.parent = parent;
	m.name = pstr(name);
	if (fs->deleg &&
	    cli_deleg_remove(fs->deleg, c, parent, name, 0, freed) == 0)
		return 0; /* answered alone, queued */
	if (fs->deleg && cli_deleg_end(fs->deleg, parent))
		return -EIO;
	rc = meta_run(fs, PROTO_OP_UNLINK, &m, &r);
	if (rc == 0)
		*freed = r.freed;
	return rc;
}

/* RMDIR: see cli_meta.h. */
int cli_meta_rmdir(struct cli_fs *fs, const struct proto_cred *c,
		   uint64_t parent, const char *name)
{
	struct proto_mreq m;
	int rc = name_check(name);

	if (rc)
		return rc;
	mreq_init(&m, c);
	m.parent = parent;
	m.name = pstr(name);
	if (fs->deleg &&
	    cli_deleg_remove(fs->deleg, c, parent, name, 1, NULL) == 0)
		return 0; /* answered alone, queued */
	if (fs->deleg && cli_deleg_end(fs->deleg, parent))
		return -EIO;
	return meta_run(fs, PROTO_OP_RMDIR, &m, NULL);
}

/* RENAME: see cli_meta.h. */
int cli_meta_rename(struct cli_fs *fs, const struct proto_cred *c,
		    uint64_t parent, const char *name, uint64_t newparent,
		    const char *newname, uint32_t flags,
		    struct proto_freed *freed)
{
	struct proto_mreq m;
	struct proto_mrep r;
	int rc = name_check(name);

	if (rc == 0)
		rc = name_check(newname);
	if (rc)
		return rc;
	if (flags & ~(PROTO_RENAME_NOREPLACE | PROTO_RENAME_EXCHANGE))
		return -EINVAL;
	mreq_init(&m, c);
	m.parent = parent;
	m.name = pstr(name);
	m.newparent = newparent;
	m.newname = pstr(newname);
	m.flags = flags;
	if (fs->deleg && (cli_deleg_end(fs->deleg, parent) ||
			  cli_deleg_end(fs->deleg, newparent)))
		return -EIO;
	rc = meta_run(fs, PROTO_OP_RENAME, &m, &r);
	if (rc == 0)
		*freed = r.freed;
	return rc;
}

/* LINK: see cli_meta.h. */
int cli_meta_link(struct cli_fs *fs, const struct proto_cred *c, uint64_t ino,
		  uint64_t newparent, const char *newname,
		  struct proto_attr *attr)
{
	struct proto_mreq m;
	int rc = name_check(newname);

	if (rc)
		return rc;
	mreq_init(&m, c);
	m.ino = ino;
	m.newparent = newparent;
	m.newname = pstr(newname);
	if (fs->deleg && cli_deleg_end(fs->deleg, newparent))
		return -EIO;
	return meta_attr(fs, PROTO_OP_LINK, &m, attr);
}

/* SYMLINK: see cli_meta.h. */
int cli_meta_symlink(struct cli_fs *fs, const struct proto_cred *c,
		     uint64_t parent, const char *name, const char *target,
		     struct proto_attr *attr)
{
	struct proto_mreq m;
	size_t tl = strlen(target);
	int rc = name_check(name);

	if (rc)
		return rc;
	if (tl == 0)
		return -ENOENT;
	if (tl > PROTO_MAX_PATH)
		return -ENAMETOOLONG;
	if (fs->deleg && attr &&
	    cli_deleg_mknode(fs->deleg, c, parent, name, S_IFLNK | 0777, target,
			     attr) == 0)
		return 0; /* answered alone, queued */
	mreq_init(&m, c);
	m.parent = parent;
	m.name = pstr(name);
	m.target = pstr(target);
	rc = meta_attr(fs, PROTO_OP_SYMLINK, &m, attr);
	if (rc == 0 && fs->deleg)
		cli_deleg_named(fs->deleg, parent, name, attr ? attr->ino : 0);
	return rc;
}

/* READLINK: see cli_meta.h. */
int cli_meta_readlink(struct cli_fs *fs, const struct proto_cred *c,
		      uint64_t ino, char *buf, size_t cap)
{
	struct proto_mreq m;
	struct proto_mrep r;
	int rc;

	mreq_init(&m, c);
	m.ino = ino;
	rc = meta_run(fs, PROTO_OP_READLINK, &m, &r);
	if (rc)
		return rc;
	if (r.target.len >= cap)
		return -ENAMETOOLONG;
	memcpy(buf, r.target.p, r.target.len);
	buf[r.target.len] = '\0';
	return 0;
}

/* READDIR: see cli_meta.h. */
int cli_meta_readdir(struct cli_fs *fs, const struct proto_cred *c,
		     uint64_t ino, uint64_t cookie, uint32_t max,
		     struct proto_mrep *rep)
{
	struct proto_mreq m;

	mreq_init(&m, c);
	m.ino = ino;
	m.cookie = cookie;
	m.max = max;
	return meta_run(fs, PROTO_OP_READDIR, &m, rep);
}

/* STATFS: see cli_meta.h. */
int cli_meta_statfs(struct cli_fs *fs, const struct proto_cred *c,
		    struct proto_statfs *st)
{
	struct proto_mreq m;
	struct proto_mrep r;
	int rc;

	mreq_init(&m, c);
	rc = meta_run(fs, PROTO_OP_STATFS, &m, &r);
	if (rc == 0)
		*st = r.st;
	return rc;
}

/* Check an xattr name: non-empty, at most PROTO_MAX_XATTR_NAME bytes. */
static int xname_check(const char *name)
{
	size_t n = strlen(name);

	if (n == 0)
		return -EINVAL;
	if (n > PROTO_MAX_XATTR_NAME)
		return -ERANGE;
	return 0;
}

/* GETXATTR: see cli_meta.h. */
int cli_meta_getxattr(struct cli_fs *fs, const struct proto_cred *c,
		      uint64_t ino, const char *name, uint32_t max,
		      struct proto_str *val, uint32_t *xsize)
{
	struct proto_mreq m;
	struct proto_mrep r;
	int rc = xname_check(name);

	if (rc)
		return rc;
	mreq_init(&m, c);
	m.ino = ino;
	m.xname = pstr(name);
	m.max = max;
	rc = meta_run(fs, PROTO_OP_GETXATTR, &m, &r);
	if (rc)
		return rc;
	if (max && r.xvalue.len > max)
		return -ERANGE;
	*val = r.xvalue;
	*xsize = max ? r.xvalue.len : r.xsize;
	return 0;
}

/* SETXATTR: see cli_meta.h. */
int cli_meta_setxattr(struct cli_fs *fs, const struct proto_cred *c,
		      uint64_t ino, const char *name, const void *value,
		      size_t len, uint32_t flags)
{
	struct proto_mreq m;
	int rc = xname_check(name);

	if (rc)
		return rc;
	if (len > PROTO_MAX_XATTR_VALUE)
		return -E2BIG;
	if (flags & ~(PROTO_XATTR_CREATE | PROTO_XATTR_REPLACE))
		return -EINVAL;
	mreq_init(&m, c);
	m.ino = ino;
	m.xname = pstr(name);
	m.xvalue.p = value;
	m.xvalue.len = (uint32_t)len;
	m.flags = flags;
	if (fs->deleg && cli_deleg_end(fs->deleg, ino)) /* a layout changes */
		return -EIO;
	return meta_run(fs, PROTO_OP_SETXATTR, &m, NULL);
}

/* LISTXATTR: see cli_meta.h. */
int cli_meta_listxattr(struct cli_fs *fs, const struct proto_cred *c,
		       uint64_t ino, uint32_t max, struct proto_str *val,
		       uint32_t *xsize)
{
	struct proto_mreq m;
	struct proto_mrep r;
	struct proto_attr a;
	int rc;

	if (fs->deleg && cli_deleg_getattr(fs->deleg, ino, &a) == 0) {
		/* made alone here: no xattr yet (setting one goes to the mgr
		 * and drops the record) */
		*val = (struct proto_str){ "", 0 };
		*xsize = 0;
		return 0;
	}
	mreq_init(&m, c);
	m.ino = ino;
	m.max = max;
	rc = meta_run(fs, PROTO_OP_LISTXATTR, &m, &r);
	if (rc)
		return rc;
	if (max && r.xvalue.len > max)
		return -ERANGE;
	*val = r.xvalue;
	*xsize = max ? r.xvalue.len : r.xsize;
	return 0;
}

/* REMOVEXATTR: see cli_meta.h. */
int cli_meta_removexattr(struct cli_fs *fs, const struct proto_cred *c,
			 uint64_t ino, const char *name)
{
	struct proto_mreq m;
	int rc = xname_check(name);

	if (rc)
		return rc;
	mreq_init(&m, c);
	m.ino = ino;
	m.xname = pstr(name);
	if (fs->deleg && cli_deleg_end(fs->deleg, ino)) /* a layout changes */
		return -EIO;
	return meta_run(fs, PROTO_OP_REMOVEXATTR, &m, NULL);
}

/* OPEN: see cli_meta.h. */
int cli_meta_open(struct cli_fs *fs, const struct proto_cred *c, uint64_t ino,
		  uint32_t flags, struct proto_attr *attr)
{
	struct proto_mreq m;

	/* made alone here: the kernel checked the permission against the
	 * record's attributes (the mount runs with default_permissions), as
	 * the mgr would, and nobody else can have changed them */
	if (fs->deleg && attr && cli_deleg_getattr(fs->deleg, ino, attr) == 0)
		return 0;
	mreq_init(&m, c);
	m.ino = ino;
	m.flags = flags;
	return meta_attr(fs, PROTO_OP_OPEN, &m, attr);
}

/* ACCESS: see cli_meta.h. */
int cli_meta_access(struct cli_fs *fs, const struct proto_cred *c,
		    uint64_t ino, uint32_t mask)
{
	struct proto_mreq m;

	mreq_init(&m, c);
	m.ino = ino;
	m.mode = mask;
	return meta_run(fs, PROTO_OP_ACCESS, &m, NULL);
}

/* SETSIZE: see cli_meta.h. */
int cli_meta_setsize(struct cli_fs *fs, const struct proto_cred *c,
		     uint64_t ino, uint64_t size, const struct proto_time *mtime,
		     struct proto_attr *attr)
{
	struct proto_mreq m;

	mreq_init(&m, c);
	m.ino = ino;
	m.size = size;
	m.mtime = *mtime;
	return meta_attr(fs, PROTO_OP_SETSIZE, &m, attr);
}

/* SETBLOCKS: see cli_meta.h. */
int cli_meta_setblocks(struct cli_fs *fs, const struct proto_cred *c,
		       uint64_t ino, uint32_t flags, uint64_t size,
		       const struct proto_time *t, uint64_t blocks,
		       struct proto_attr *attr)
{
	struct proto_mreq m;

	mreq_init(&m, c);
	m.ino = ino;
	m.flags = flags;
	m.size = size;
	m.mtime = *t;
	m.blocks = blocks;
	return meta_attr(fs, PROTO_OP_SETBLOCKS, &m, attr);
}

/* PURGE: see cli_meta.h. */
int cli_meta_purge(struct cli_fs *fs, const struct proto_cred *c,
		   uint64_t ino)
{
	struct proto_mreq m;

	mreq_init(&m, c);
	m.ino = ino;
	return meta_run(fs, PROTO_OP_PURGE, &m, NULL);
}

/* PURGE_MANY: see cli_meta.h. */
int cli_meta_purge_many(struct cli_fs *fs, const struct proto_cred *c,
			const uint64_t *inos, uint32_t n)
{
	struct proto_mreq m;

	mreq_init(&m, c);
	m.inos = (struct proto_inos){ n, inos, NULL };
	return meta_run(fs, PROTO_OP_PURGE_MANY, &m, NULL);
}

/* BATCH: see cli_meta.h. */
int cli_meta_batch(struct cli_fs *fs, const struct proto_batch *b,
		   struct proto_batchrep *r, int *retried)
{
	uint8_t *req = cli_tls_reqbuf(), *rep = cli_tls_repbuf();
	const char *why = "?";
	struct net_call call;
	struct wbuf w;
	int rc;

	*retried = 0;
	if (!req || !rep)
		return -ENOMEM;
	wb_init(&w, req, PROTO_MAX_BODY);
	rc = proto_batch_encode(&w, b);
	if (rc)
		return rc == -EMSGSIZE ? -E2BIG : rc;
	memset(&call, 0, sizeof(call));
	call.op = PROTO_OP_BATCH;
	call.body = req;
	call.body_len = (uint32_t)w.len;
	call.rep_buf = rep;
	call.rep_cap = PROTO_MAX_BODY;
	rc = cli_mgr_run(fs, &call, retried); /* a resend is a repeat */
	if (rc)
		return mgr_fail(fs, PROTO_OP_BATCH, rc);
	if (call.status)
		return call.status > 0 || call.status < -4095 ? -EIO : call.status;
	rc = proto_batchrep_decode(rep, call.rep_len, r, &why);
	if (rc || r->n != b->n) {
		log_warn("mgr (%s:%u): malformed BATCH reply (%s)", fs->mgr_host,
			 fs->mgr_port, rc ? why : "n");
		return -EIO;
	}
	return 0;
}
