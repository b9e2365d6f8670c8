/*
 * fe_fuse.c - libfuse low-level operations on top of the client core.
 * Every op replies exactly once; errors return early through
 * `return (void) fuse_reply_err(req, -rc);`. Metadata goes to the mgr
 * (cli_meta), data to the iods (cli_io); the inode table (cli_inode) keeps
 * lookup counts, layouts and the locally written size.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>

#include "fe_bdi.h"
#include "fe_cb.h"
#include "fe_fuse.h"
#include "fe_lock.h"
#include "fe_loop.h"
#include "cli_reap.h"
#include "cli_setid.h"
#include "cli_size.h"
#include "fe_splice.h"
#include "cli_space.h"
#include "fe_wback.h"
#include "cli_deleg.h"
#include "cli_inode.h"
#include "cli_io.h"
#include "cli_meta.h"
#include "log.h"

#define FE_MAX_IO (1u << 20)        /* max_write and max_readahead */
#define FE_LAYOUT_XATTR "user.rpfs.layout"
#define FE_STATS_XATTR "rpfs.stats"
#define FE_STATS_XATTR_USER "user.rpfs.stats"

/* An open regular file. Owned by the kernel's file handle (fi->fh), and
 * listed in the session's handles (fe_fuse.opens) until its release. */
struct fe_file {
	struct fe_open link;    /* first: a listed file is its link */
	uint64_t ino;
	struct proto_cred cred; /* opener: used for size pushes at close */
	int behind;             /* writes may go behind (no O_DIRECT/O_[D]SYNC) */
};

/*
 * An open directory (fi->fh of OPENDIR), listed like a file. The kernel
 * runs one READDIR at a time per open directory (it holds the file's
 * position lock), so eof_cookie needs no lock.
 */
struct fe_dir {
	struct fe_open link;  /* first: a listed directory is its link
			      * (fe_fuse.open_lock) */
	uint64_t eof_cookie; /* the cookie of the last entry of a listing the
			      * mgr said was complete; 0: none */
};

_Static_assert(sizeof(gid_t) == sizeof(uint32_t), "gid_t is 32 bits");

/* The session's front-end state. */
static struct fe_fuse *cf_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* Wait for ino's writes in flight (write-behind) of cf; with take_err,
 * return the deferred failure of one of them. Cost: a hash lookup when
 * none. */
static int cf_wback_drain(struct fe_fuse *cf, fuse_ino_t ino, int take_err)
{
	return cf->wb ? fe_wback_drain(cf->wb, ino, take_err) : 0;
}

/* wback_drain of the request's session. */
static int wback_drain(fuse_req_t req, fuse_ino_t ino, int take_err)
{
	return cf_wback_drain(cf_of(req), ino, take_err);
}

/* List a new handle in cf->opens (dir: a struct fe_dir), so that the
 * session's end finds it if the kernel never releases it. Cost: a lock. */
static void open_track(struct fe_fuse *cf, struct fe_open *o, int dir)
{
	o->dir = dir;
	o->prev = NULL;
	pthread_mutex_lock(&cf->open_lock);
	o->next = cf->opens;
	if (o->next)
		o->next->prev = o;
	cf->opens = o;
	pthread_mutex_unlock(&cf->open_lock);
}

/* Take a handle off cf->opens (its release). Cost: a lock. */
static void open_untrack(struct fe_fuse *cf, struct fe_open *o)
{
	pthread_mutex_lock(&cf->open_lock);
	if (o->prev)
		o->prev->next = o->next;
	else
		cf->opens = o->next;
	if (o->next)
		o->next->prev = o->prev;
	pthread_mutex_unlock(&cf->open_lock);
	o->prev = o->next = NULL;
}

/* The mounted file system of a request. */
static struct cli_fs *fs_of(fuse_req_t req)
{
	return cf_of(req)->fs;
}

/* The open file behind a file handle. */
static struct fe_file *file_of(struct fuse_file_info *fi)
{
	return (struct fe_file *)(uintptr_t)fi->fh;
}

/* The caller's credential, with up to PROTO_MAX_GROUPS supplementary
 * groups. Cost: fuse_req_getgroups reads /proc/PID/status. */
static void cred_of(fuse_req_t req, struct proto_cred *c)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t groups[PROTO_MAX_GROUPS];
	int n = fuse_req_getgroups(req, PROTO_MAX_GROUPS, groups);

	if (n > PROTO_MAX_GROUPS)
		n = PROTO_MAX_GROUPS;
	cli_cred_set(c, ctx->uid, ctx->gid, (const uint32_t *)groups,
		     n > 0 ? n : 0);
}

/* Convert rpfs attributes to a struct stat. */
static void attr_to_stat(const struct proto_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = (off_t)a->size;
	st->st_blocks = (blkcnt_t)a->blocks;
	st->st_blksize = FE_MAX_IO;
	st->st_atim.tv_sec = a->atime.sec;
	st->st_atim.tv_nsec = a->atime.nsec;
	st->st_mtim.tv_sec = a->mtime.sec;
	st->st_mtim.tv_nsec = a->mtime.nsec;
	st->st_ctim.tv_sec = a->ctime.sec;
	st->st_ctim.tv_nsec = a->ctime.nsec;
}

/* Fill an entry reply for attributes already merged into the table. */
static void fill_entry(fuse_req_t req, const struct proto_attr *a,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = a->ino;
	/* inode numbers are never reused; the generation only moves in
	 * writeback mode (cli_inode_update) */
	e->generation = cli_inode_gen(fs_of(req)->itab, a->ino);
	e->attr_timeout = cf_of(req)->attr_timeout;
	e->entry_timeout = cf_of(req)->entry_timeout;
	attr_to_stat(a, &e->attr);
}

/* The inode table's clock, read before a mgr call whose reply carries
 * attributes (cli_itab_clock). */
static uint64_t clock_of(fuse_req_t req)
{
	return cli_itab_clock(fs_of(req)->itab);
}

/* Reply with a new kernel reference to attr's inode (lookup, mkdir, ...);
 * since: the clock before the mgr call. */
static void reply_entry(fuse_req_t req, struct proto_attr *a, uint64_t since,
			double entry_timeout)
{
	struct cli_fs *fs = fs_of(req);
	struct fuse_entry_param e;
	int rc = cli_inode_update(fs->itab, a, 1, since);

	if (rc)
		return (void) fuse_reply_err(req, -rc);
	fill_entry(req, a, &e);
	e.entry_timeout = entry_timeout;
	if (fuse_reply_entry(req, &e))
		cli_inode_forget(fs->itab, a->ino, 1); /* kernel took no ref */
}

/* Reply with attributes (getattr, setattr); since: the clock before the
 * mgr call. */
static void reply_attr(fuse_req_t req, struct proto_attr *a, uint64_t since)
{
	struct stat st;

	cli_inode_update(fs_of(req)->itab, a, 0, since);
	attr_to_stat(a, &st);
	fuse_reply_attr(req, &st, cf_of(req)->attr_timeout);
}

/* Remove the stripe objects of a freed inode, then purge it at the mgr,
 * in the background (cli_reap.h). */
static void remove_freed(fuse_req_t req, const struct proto_cred *c,
			 uint64_t ino, const struct proto_layout *l)
{
	cli_reap_queue(cf_of(req)->reap, fs_of(req), c, ino, l);
}

/* Handle an inode freed by UNLINK/RENAME: remove now or at last release. */
static void handle_freed(fuse_req_t req, const struct proto_cred *c,
			 const struct proto_freed *f)
{
	if (!f->ino)
		return;
	if (cli_inode_unlinked(fs_of(req)->itab, f->ino, &f->layout))
		remove_freed(req, c, f->ino, &f->layout);
}

/*
 * Per-thread buffer for read data and directory listings, grown on demand
 * and kept for the thread's life (freed at thread exit). It is declared to
 * the transport (net_client_register_mem) so that the verbs backend keeps
 * its registration in the pin-down cache; undeclared before it is freed.
 */
struct rbuf_state {
	void *p;                /* the buffer; NULL until first use */
	size_t cap;             /* its size */
	int registered;         /* declared to net */
	struct net_client *net; /* the client it is declared to */
};

static pthread_key_t rbuf_key;
static pthread_once_t rbuf_once = PTHREAD_ONCE_INIT;
static __thread struct rbuf_state *rbuf_st;

/* Undeclare and free a thread's buffer (key destructor, thread exit). */
static void rbuf_state_free(void *arg)
{
	struct rbuf_state *st = arg;

	if (st->registered)
		(void)net_client_unregister_mem(st->net, st->p);
	free(st->p);
	free(st);
}

/* Create the key whose destructor frees a thread's buffer. */
static void rbuf_key_init(void)
{
	(void)pthread_key_create(&rbuf_key, rbuf_state_free);
}

/* A buffer of at least len bytes for the calling thread, or NULL. Cost:
 * nothing once grown; growing frees, allocates and declares anew. */
static void *rbuf_get(struct cli_fs *fs, size_t len)
{
	struct rbuf_state *st = rbuf_st;

	if (st && len <= st->cap)
		return st->p;
	if (len < FE_MAX_IO)
		len = FE_MAX_IO;
	pthread_once(&rbuf_once, rbuf_key_init);
	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st)
			return NULL;
		st->net = fs->net;
		rbuf_st = st;
		(void)pthread_setspecific(rbuf_key, st);
	}
	if (st->registered)
		(void)net_client_unregister_mem(st->net, st->p);
	st->registered = 0;
	free(st->p);
	st->cap = 0;
	st->p = malloc(len);
	if (!st->p)
		return NULL;
	st->cap = len;
	/* on failure reads still work, registered per call */
	st->registered = net_client_register_mem(st->net, st->p, len) == 0;
	return st->p;
}

/* ------------------------------------------------------------------ ops */

/* After INIT's reply: widen the mount's readahead window, which the
 * kernel caps at its 128 KiB default at INIT, to -o read_ahead_kb, so
 * buffered sequential reads arrive as READs of up to 1 MiB too. */
static void set_readahead(void *arg)
{
	struct fe_fuse *cf = arg;
	int rc = fe_bdi_set_readahead(cf->mountpoint, cf->read_ahead_kb);

	if (rc)
		log_notice("readahead of %s stays at the kernel's default: "
			   "cannot set read_ahead_kb=%u: %s", cf->mountpoint,
			   cf->read_ahead_kb, strerror(-rc));
}

/*
 * Negotiate: 1 MiB writes and readahead, readdirplus, atomic O_TRUNC and,
 * with -o writeback_cache (off by default), the writeback cache: the
 * kernel absorbs write(2) in its page cache and sends WRITEs of up to
 * 1 MiB at writeback, flush (close) and fsync. It then keeps size and
 * mtime of open files itself; see fuse-client/frontend/README.md
 * "Writeback cache". Set-id bits are dropped by the kernel's SETATTR
 * (setattr_nonowner) and the mgr: FUSE_CAP_HANDLE_KILLPRIV would hand
 * that to us, but libfuse 3.14 does not pass it to the kernel.
 */
static void fe_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fe_fuse *cf = userdata;

	conn->max_write = FE_MAX_IO;
	conn->max_readahead = FE_MAX_IO;
	if (cf->read_ahead_kb && cf->mountpoint)
		fe_loop_after_reply(set_readahead, cf);
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (cli_itab_writeback(cf->fs->itab) &&
	    (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) {
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	} else {
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
		cli_itab_set_writeback(cf->fs->itab, 0);
	}
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
			FUSE_CAP_SPLICE_MOVE);
	(void)fe_splice_init(cf->fs, conn); /* READ replies by splice */
	/* cluster-wide locks: the kernel passes fcntl and flock locks here */
	if (cf->lock && (conn->capable & FUSE_CAP_POSIX_LOCKS))
		conn->want |= FUSE_CAP_POSIX_LOCKS;
	if (cf->lock && (conn->capable & FUSE_CAP_FLOCK_LOCKS))
		conn->want |= FUSE_CAP_FLOCK_LOCKS;
}

/* LOOKUP; the kernel caches a hit or a miss for entry_timeout, or, when
 * the reply grants a READ lease on parent, for FE_LEASE_ENTRY_TIMEOUT
 * (fe_cb.h). */
static void fe_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fe_fuse *cf = cf_of(req);
	uint64_t gen = cf->lease ? cli_lease_gen(cf->lease) : 0;
	struct proto_grant g;
	struct proto_cred c;
	struct proto_attr a;
	uint64_t since = clock_of(req);
	int rc;

	cred_of(req, &c);
	rc = cli_meta_lookup_grant(fs_of(req), &c, parent, name, &a, &g);
	if (rc == -ENOENT) {
		struct fuse_entry_param e;

		memset(&e, 0, sizeof(e));
		e.entry_timeout = fe_cb_entry_long(cf, gen, &g, parent, name) ?
				  FE_LEASE_ENTRY_TIMEOUT : cf->entry_timeout;
		return (void) fuse_reply_entry(req, &e);
	}
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	reply_entry(req, &a, since,
		    fe_cb_entry_long(cf, gen, &g, parent, name) ?
		    FE_LEASE_ENTRY_TIMEOUT : cf->entry_timeout);
}

/* FORGET: drop kernel references. */
static void fe_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	cli_inode_forget(fs_of(req)->itab, ino, nlookup);
	fuse_reply_none(req);
}

/* BATCH_FORGET. */
static void fe_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct cli_fs *fs = fs_of(req);

	for (size_t i = 0; i < count; i++)
		cli_inode_forget(fs->itab, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/*
 * GETATTR; an unlinked file that is still open answers from the cache. A
 * directory whose attributes this mount has fresh (cli_inode_fresh_attr)
 * is answered from them, for the rest of their TTL: the kernel drops its
 * copy of a directory's attributes after every create in it and asks
 * again at the next path walk, for its permission check.
 */
static void fe_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct cli_fs *fs = fs_of(req);
	struct proto_cred c;
	struct proto_attr a;
	uint64_t since = clock_of(req);
	double ttl;
	int rc;

	if (fe_cb_dir_attr(cf_of(req), ino, &a))
		ttl = FE_LEASE_ENTRY_TIMEOUT; /* a directory under its lease */
	else if (cli_inode_fresh_attr(fs->itab, ino, &a, &ttl))
		ttl = -1;
	if (ttl >= 0) {
		struct stat st;

		attr_to_stat(&a, &st);
		return (void) fuse_reply_attr(req, &st, ttl);
	}
	cred_of(req, &c);
	rc = cli_meta_getattr(fs, &c, ino, &a);
	if (rc == -ENOENT && cli_inode_cached_attr(fs->itab, ino, &a) == 0) {
		struct stat st;

		a.nlink = 0;
		attr_to_stat(&a, &st);
		return (void) fuse_reply_attr(req, &st, 0);
	}
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	reply_attr(req, &a, since);
}

/*
 * The PROTO_SA_* bits of a SETATTR by a caller other than the owner or
 * root. default_permissions lets such a caller through only with what a
 * writer may do, so the kernel sent what it did on its own behalf: a mode
 * is the kernel dropping set-id bits before the caller's write or truncate
 * (file_remove_privs, do_truncate), and with the writeback cache times are
 * the kernel's clock for "now" (truncate). The mgr would refuse a chmod or
 * explicit times to a non-owner: ask for PROTO_SA_KILLPRIV (the mgr drops
 * the bits by its own rule, setid.h) and the _NOW times instead.
 * Cost: a lookup in the inode table.
 */
static uint32_t setattr_nonowner(fuse_req_t req, const struct proto_cred *c,
				 fuse_ino_t ino, uint32_t valid)
{
	struct proto_attr a;

	if (c->uid == 0 || cli_inode_cached_attr(fs_of(req)->itab, ino, &a) ||
	    a.uid == c->uid)
		return valid;
	if (valid & PROTO_SA_MODE)
		valid = (valid & ~PROTO_SA_MODE) | PROTO_SA_KILLPRIV;
	if (valid & PROTO_SA_ATIME)
		valid = (valid & ~PROTO_SA_ATIME) | PROTO_SA_ATIME_NOW;
	if (valid & PROTO_SA_MTIME)
		valid = (valid & ~PROTO_SA_MTIME) | PROTO_SA_MTIME_NOW;
	return valid;
}

/* SETATTR: mode, owner, times (incl. NOW) and size (truncate). */
static void fe_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct cli_fs *fs = fs_of(req);
	struct proto_attr in, out;
	struct proto_cred c;
	uint32_t valid = 0;
	uint64_t since;
	int rc;

	memset(&in, 0, sizeof(in));
	if (to_set & FUSE_SET_ATTR_MODE) {
		valid |= PROTO_SA_MODE;
		in.mode = attr->st_mode & 07777;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		valid |= PROTO_SA_UID;
		in.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		valid |= PROTO_SA_GID;
		in.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		valid |= PROTO_SA_ATIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		valid |= PROTO_SA_ATIME;
		in.atime.sec = attr->st_atim.tv_sec;
		in.atime.nsec = (uint32_t)attr->st_atim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		valid |= PROTO_SA_MTIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		valid |= PROTO_SA_MTIME;
		in.mtime.sec = attr->st_mtim.tv_sec;
		in.mtime.nsec = (uint32_t)attr->st_mtim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (attr->st_size < 0)
			return (void) fuse_reply_err(req, EINVAL);
		in.size = (uint64_t)attr->st_size;
	}
	cred_of(req, &c);
	valid = setattr_nonowner(req, &c, ino, valid);
	/* Writes in flight land first (a truncate must not be undone by one). */
	(void)wback_drain(req, ino, 0);
	/* Publish earlier writes first, so that their size and mtime land
	 * before this change and cannot overwrite it later (tar sets mtime
	 * on an open file, then closes it). */
	rc = cli_size_push(fs, &c, ino);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	since = clock_of(req);
	if (to_set & FUSE_SET_ATTR_SIZE)
		rc = cli_size_truncate(fs, &c, ino, valid, &in, NULL,
				       &out);
	else if (valid)
		rc = cli_meta_setattr(fs, &c, ino, valid, &in, &out);
	else
		rc = cli_meta_getattr(fs, &c, ino, &out);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	reply_attr(req, &out, since);
}

/* READLINK. */
static void fe_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PROTO_MAX_PATH + 1];
	struct proto_cred c;
	int rc;

	cred_of(req, &c);
	rc = cli_meta_readlink(fs_of(req), &c, ino, buf, sizeof(buf));
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	fuse_reply_readlink(req, buf);
}

/* MKNOD (fifos, sockets, devices, regular files). */
static void fe_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	struct proto_cred c;
	struct proto_attr a;
	uint64_t since = clock_of(req);
	int rc;

	cred_of(req, &c);
	rc = cli_meta_mknod(fs_of(req), &c, parent, name, mode, (uint32_t)rdev,
			    &a);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	cli_inode_dir_created(fs_of(req)->itab, parent, &a);
	reply_entry(req, &a, since, cf_of(req)->entry_timeout);
}

/* MKDIR. */
static void fe_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct proto_cred c;
	struct proto_attr a;
	uint64_t since = clock_of(req);
	int rc;

	cred_of(req, &c);
	rc = cli_meta_mkdir(fs_of(req), &c, parent, name,
			    S_IFDIR | (mode & 07777), &a);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	cli_inode_dir_created(fs_of(req)->itab, parent, &a);
	reply_entry(req, &a, since, cf_of(req)->entry_timeout);
}

/* UNLINK; frees the data now or at last release if it was the last link. */
static void fe_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct cli_fs *fs = fs_of(req);
	struct proto_freed f;
	struct proto_cred c;
	int rc;

	cred_of(req, &c);
	rc = cli_meta_unlink(fs, &c, parent, name, &f);
	cli_itab_attr_changed(fs->itab);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	handle_freed(req, &c, &f);
	fuse_reply_err(req, 0);
}

/* RMDIR. */
static void fe_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct proto_cred c;
	int rc;

	cred_of(req, &c);
	rc = cli_meta_rmdir(fs_of(req), &c, parent, name);
	cli_itab_attr_changed(fs_of(req)->itab);
	fuse_reply_err(req, -rc);
}

/* SYMLINK. */
static void fe_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	struct proto_cred c;
	struct proto_attr a;
	uint64_t since = clock_of(req);
	int rc;

	cred_of(req, &c);
	rc = cli_meta_symlink(fs_of(req), &c, parent, name, link, &a);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	cli_inode_dir_created(fs_of(req)->itab, parent, &a);
	reply_entry(req, &a, since, cf_of(req)->entry_timeout);
}

/* RENAME (RENAME_NOREPLACE, RENAME_EXCHANGE); frees a replaced target. */
static void fe_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct cli_fs *fs = fs_of(req);
	struct proto_freed f;
	struct proto_cred c;
	int rc;

	cred_of(req, &c);
	rc = cli_meta_rename(fs, &c, parent, name, newparent, newname, flags,
			     &f);
	cli_itab_attr_changed(fs->itab);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	handle_freed(req, &c, &f);
	fuse_reply_err(req, 0);
}

/* LINK. */
static void fe_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct proto_cred c;
	struct proto_attr a;
	uint64_t since = clock_of(req);
	int rc;

	cred_of(req, &c);
	rc = cli_meta_link(fs_of(req), &c, ino, newparent, newname, &a);
	cli_itab_attr_changed(fs_of(req)->itab);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	reply_entry(req, &a, since, cf_of(req)->entry_timeout);
}

/* Make the per-open state for an opened file of the request's session
 * and list it; attr from the mgr, asked at clock since.
 * @return 0, -ENOMEM */
static int file_open(fuse_req_t req, const struct proto_cred *c,
		     struct proto_attr *a, uint64_t since,
		     struct fuse_file_info *fi)
{
	struct fe_file *f = malloc(sizeof(*f));
	int rc;

	if (!f)
		return -ENOMEM;
	rc = cli_inode_open(fs_of(req)->itab, a, since);
	if (rc) {
		free(f);
		return rc;
	}
	f->ino = a->ino;
	f->cred = *c;
	f->behind = !(fi->flags & (O_DIRECT | O_SYNC | O_DSYNC));
	open_track(cf_of(req), &f->link, 0);
	fi->fh = (uintptr_t)f;
	fi->keep_cache = 0;
	fi->direct_io = 0;
	return 0;
}

/* Free an open file taken off the list: its inode's open count drops, and
 * the last close of an unlinked file queues the removal of its data. */
static void file_free(struct fe_fuse *cf, struct fe_file *f)
{
	struct proto_layout l;

	if (cli_inode_release(cf->fs->itab, f->ino, &l))
		cli_reap_queue(cf->reap, cf->fs, &f->cred, f->ino, &l);
	free(f);
}

/* Drop the per-open state (release, or the kernel refused the open
 * reply); the last close of an unlinked file frees its data. */
static void file_close(fuse_req_t req, struct fuse_file_info *fi)
{
	struct fe_file *f = file_of(fi);

	open_untrack(cf_of(req), &f->link);
	file_free(cf_of(req), f);
}

/* OPEN: permission check at the mgr, O_TRUNC, per-open state. */
static void fe_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cli_fs *fs = fs_of(req);
	struct proto_cred c;
	struct proto_attr a;
	uint64_t since = clock_of(req);
	int rc;

	cred_of(req, &c);
	rc = cli_meta_open(fs, &c, ino, (uint32_t)fi->flags, &a);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY &&
	    S_ISREG(a.mode)) {
		struct proto_attr in;

		memset(&in, 0, sizeof(in));
		(void)wback_drain(req, ino, 0);
		/* OPEN just checked the write permission (O_TRUNC) */
		rc = cli_size_truncate(fs, &c, ino, 0, &in, &a, &a);
		if (rc)
			return (void) fuse_reply_err(req, -rc);
	}
	rc = file_open(req, &c, &a, since, fi);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	if (fuse_reply_open(req, fi))
		file_close(req, fi);
}

/*
 * The mgr's CREATE of name in parent. It is asked with PROTO_CREATE_EXCL
 * first even without O_EXCL: the kernel sends CREATE only for a name it
 * found missing, so that almost always creates, and then this mount knows
 * the parent changed by exactly this (cli_inode_dir_created). Only if
 * another mount made the name in between (EEXIST) is CREATE sent again
 * without it, to open the existing file as open(2) would.
 * Cost: one round trip; two in that race.
 * @return 0, -errno of the mgr
 */
static int create_at_mgr(fuse_req_t req, const struct proto_cred *c,
			 fuse_ino_t parent, const char *name, mode_t mode,
			 int excl, struct proto_attr *a)
{
	struct cli_fs *fs = fs_of(req);
	uint32_t m = S_IFREG | (mode & 07777);
	int rc = cli_meta_create(fs, c, parent, name, m, PROTO_CREATE_EXCL, a);

	if (rc == 0) {
		cli_inode_dir_created(fs->itab, parent, a);
		return 0;
	}
	if (rc != -EEXIST || excl)
		return rc;
	return cli_meta_create(fs, c, parent, name, m, 0, a);
}

/* CREATE: O_EXCL maps to PROTO_CREATE_EXCL; O_TRUNC on an existing file. */
static void fe_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct cli_fs *fs = fs_of(req);
	struct fuse_entry_param e;
	struct proto_cred c;
	struct proto_attr a;
	uint64_t since = clock_of(req);
	int rc;

	cred_of(req, &c);
	rc = create_at_mgr(req, &c, parent, name, mode, fi->flags & O_EXCL, &a);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	if ((fi->flags & O_TRUNC) && a.size > 0) {
		struct proto_attr in;

		memset(&in, 0, sizeof(in));
		(void)wback_drain(req, a.ino, 0);
		/* CREATE of an existing file checked the write permission */
		rc = cli_size_truncate(fs, &c, a.ino, 0, &in, &a, &a);
		if (rc)
			return (void) fuse_reply_err(req, -rc);
	}
	rc = cli_inode_update(fs->itab, &a, 1, since);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	rc = file_open(req, &c, &a, since, fi);
	if (rc) {
		cli_inode_forget(fs->itab, a.ino, 1);
		return (void) fuse_reply_err(req, -rc);
	}
	fill_entry(req, &a, &e);
	if (fuse_reply_create(req, &e, fi)) {
		file_close(req, fi);
		cli_inode_forget(fs->itab, a.ino, 1);
	}
}

/* READ: clip to the size; splice from the iods on tcp (fe_splice.h), else
 * gather straight into the worker's registered reply buffer (fe_loop.h; a
 * per-thread buffer elsewhere) and reply from it: no copy in user space, no
 * registration per call. */
static void fe_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct cli_fs *fs = fs_of(req);
	struct proto_layout l;
	uint64_t fsize;
	void *buf;
	int rc;

	if (off < 0)
		return (void) fuse_reply_err(req, EINVAL);
	(void)wback_drain(req, ino, 0); /* read our own writes */
	rc = cli_inode_io(fs->itab, ino, &l, &fsize);
	if (rc)
		return (void) fuse_reply_err(req, EBADF);
	if ((uint64_t)off >= fsize || size == 0)
		return (void) fuse_reply_buf(req, NULL, 0);
	if (size > fsize - (uint64_t)off)
		size = (size_t)(fsize - (uint64_t)off);
	buf = fe_loop_reply_buf(size);
	if (!buf)
		buf = rbuf_get(fs, size);
	if (!buf)
		return (void) fuse_reply_err(req, ENOMEM);
	rc = fe_splice_read(req, fs, ino, &l, (uint64_t)off, size, buf);
	if (rc != -EAGAIN) /* spliced (fe_splice.h), or failed */
		return rc ? (void) fuse_reply_err(req, -rc) : (void) 0;
	rc = cli_io_read(fs, ino, &l, (uint64_t)off, size, buf);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	fuse_reply_buf(req, buf, size);
}

/* Before a write through a handle: drop the set-id bits the caller's
 * write drops (cli_setid.h). Cost: a cached-mode test unless the file has
 * set-id bits; the caller's groups are read only then. Usually the
 * kernel's SETATTR (setattr_nonowner) has dropped them already; this catches
 * a kernel attribute cache that did not show them. A writeback WRITE
 * carries no credential: there only the kernel's SETATTR counts. */
static int write_setid(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct proto_cred c;

	if (fi->writepage || !cli_setid_maybe(fs_of(req), ino))
		return 0;
	cred_of(req, &c);
	return cli_setid_write(fs_of(req), &c, ino);
}

/* WRITE: scatter to the iods straight from the request buffer; behind
 * (answered once sent, fe_wback.h) unless the handle is O_DIRECT/O_[D]SYNC
 * or the kernel caches writes itself. */
static void fe_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct cli_fs *fs = fs_of(req);
	struct fe_wback *wb = cf_of(req)->wb;
	struct proto_layout l;
	struct proto_time wtime;
	uint64_t fsize;
	int rc;

	if (off < 0)
		return (void) fuse_reply_err(req, EINVAL);
	rc = cli_inode_io(fs->itab, ino, &l, &fsize);
	if (rc)
		return (void) fuse_reply_err(req, EBADF);
	rc = write_setid(req, ino, fi);
	if (rc < 0)
		return (void) fuse_reply_err(req, -rc);
	if (wb && file_of(fi)->behind && !cli_itab_writeback(fs->itab)) {
		rc = fe_wback_write(wb, ino, &l, (uint64_t)off, size, buf);
	} else {
		/* after any write in flight of another handle */
		rc = wback_drain(req, ino, 1);
		if (!rc)
			rc = cli_io_write(fs, ino, &l, (uint64_t)off, size, buf);
	}
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	wtime = cli_now_time();
	cli_inode_wrote(fs->itab, ino, (uint64_t)off + size, &wtime);
	fuse_reply_write(req, size);
}

/* FLUSH (each close): finish the writes in flight (their failure is this
 * close's error), publish the written size. */
static void fe_flush(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi)
{
	struct cli_fs *fs = fs_of(req);
	int rc = wback_drain(req, ino, 1), rc2, rc3;

	rc2 = cli_size_push(fs, &file_of(fi)->cred, ino);
	rc3 = fe_lock_flush(cf_of(req), ino, fi);
	fuse_reply_err(req, rc ? -rc : rc2 ? -rc2 : -rc3);
}

/* What a release does before the handle goes, without the request: the
 * writes in flight finish (a failure is logged: the close that could
 * report it has returned), and the size written is published. */
static void file_settle(struct fe_fuse *cf, struct fe_file *f)
{
	int rc = cf_wback_drain(cf, f->ino, 1);

	if (rc)
		log_warn("inode %llu: a write failed after close: %s",
			 (unsigned long long)f->ino, strerror(-rc));
	rc = cli_size_push(cf->fs, &f->cred, f->ino);
	if (rc)
		log_warn("inode %llu: size update at close failed: %s",
			 (unsigned long long)f->ino, strerror(-rc));
}

/* RELEASE (last close of the handle): publish size, drop its locks,
 * deferred removal. */
static void fe_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	int rc;

	file_settle(cf_of(req), file_of(fi));
	rc = fe_lock_release(cf_of(req), ino, fi);
	if (rc)
		log_warn("inode %llu: releasing locks at close failed: %s",
			 (unsigned long long)ino, strerror(-rc));
	file_close(req, fi);
	fuse_reply_err(req, 0);
}

/* FSYNC: every iod of the file syncs, then the size is published. */
static void fe_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	struct cli_fs *fs = fs_of(req);
	struct proto_layout l;
	uint64_t fsize;
	int rc = cli_inode_io(fs->itab, ino, &l, &fsize);

	if (rc)
		return (void) fuse_reply_err(req, EBADF);
	rc = wback_drain(req, ino, 1);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	rc = cli_io_fsync(fs, ino, &l, datasync);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	rc = cli_size_push(fs, &file_of(fi)->cred, ino);
	if (rc == 0 && fs->deleg) /* its create, and what joined it, commit */
		rc = cli_deleg_sync(fs->deleg);
	fuse_reply_err(req, -rc);
}

/* FSYNCDIR: the ops this mount answered alone commit (cli_deleg.h); the
 * mgr's own changes are committed before it answers. */
static void fe_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	struct cli_fs *fs = fs_of(req);

	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, fs->deleg ? -cli_deleg_sync(fs->deleg) : 0);
}

/* OPENDIR: the kernel checked read permission; the handle only remembers
 * where a listing ended (struct fe_dir). */
static void fe_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fe_dir *d = calloc(1, sizeof(*d));

	if (!d)
		return (void) fuse_reply_err(req, ENOMEM);
	open_track(cf_of(req), &d->link, 1);
	fi->fh = (uintptr_t)d;
	if (fuse_reply_open(req, fi)) {
		open_untrack(cf_of(req), &d->link);
		free(d);
	}
}

/* The open directory behind a file handle (fe_opendir). */
static struct fe_dir *dir_of(struct fuse_file_info *fi)
{
	return (struct fe_dir *)(uintptr_t)fi->fh;
}

/* Whether name is "." or "..", which the kernel takes no reference for. */
static int is_dot(const char *name)
{
	return name[0] == '.' &&
	       (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/* What READDIRPLUS entries may be cached under: the reply's grant on dir,
 * and the lease record's generation before the request (fe_cb.h). */
struct rd_lease {
	uint64_t gen;
	const struct proto_grant *g;
	uint64_t dir;
};

/*
 * Add one mgr directory entry to a READDIR(PLUS) reply buffer of cap bytes;
 * with plus, take a kernel reference for it (not for "." and "..") at
 * clock since, and let the kernel keep the name long if l's grant allows
 * (fe_cb_entry_long). Cost: a table update with plus.
 * @return the bytes added, 0 if it does not fit or the table is out of
 *	memory (the entry is then sent again by the next call)
 */
static size_t add_dirent(fuse_req_t req, char *buf, size_t cap,
			 const struct proto_dirent *d, int plus, uint64_t since,
			 const struct rd_lease *l)
{
	char name[PROTO_MAX_NAME + 1];
	size_t need;

	memcpy(name, d->name.p, d->name.len);
	name[d->name.len] = '\0';
	if (plus) {
		struct fuse_entry_param e;
		struct proto_attr a = d->attr;

		need = fuse_add_direntry_plus(req, NULL, 0, name, NULL, 0);
		if (need > cap || (!is_dot(name) &&
		    cli_inode_update(fs_of(req)->itab, &a, 1, since)))
			return 0;
		fill_entry(req, &a, &e);
		if (!is_dot(name) && fe_cb_entry_long(cf_of(req), l->gen, l->g,
						      l->dir, name))
			e.entry_timeout = FE_LEASE_ENTRY_TIMEOUT;
		fuse_add_direntry_plus(req, buf, cap, name, &e, (off_t)d->cookie);
	} else {
		struct stat st;

		memset(&st, 0, sizeof(st));
		st.st_ino = d->attr.ino;
		st.st_mode = d->attr.mode;
		need = fuse_add_direntry(req, buf, cap, name, &st,
					 (off_t)d->cookie);
		if (need > cap)
			return 0;
	}
	return need;
}

/*
 * READDIR / READDIRPLUS: one mgr READDIR from the cookie the kernel passes
 * as offset; every entry carries its own cookie as the next offset, so a
 * listing can be read in any number of chunks. Entries that do not fit are
 * fetched again by the next call. When every entry of a reply the mgr
 * marked as the end was passed on, the handle remembers the last cookie,
 * and the kernel's next call from there (the one that finds the end) is
 * answered empty here: POSIX leaves it open whether a stream shows names
 * added after it was opened or rewound, and a rewind starts again from 0.
 * Cost: one round trip per chunk, none for the end.
 */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       int plus, struct fe_dir *dir)
{
	struct cli_fs *fs = fs_of(req);
	struct fe_fuse *cf = cf_of(req);
	struct proto_cred c;
	struct proto_mrep rep;
	struct proto_dirent d;
	struct rd_lease l = { .gen = cf->lease ? cli_lease_gen(cf->lease) : 0,
			      .g = &rep.grant, .dir = ino };
	struct rbuf r;
	size_t pos = 0, need, maxb = size * (plus ? 2 : 4);
	char *buf = rbuf_get(fs, size);
	uint64_t since = clock_of(req), last = 0;
	int rc;

	if (off > 0 && dir->eof_cookie == (uint64_t)off)
		return (void) fuse_reply_buf(req, NULL, 0);
	dir->eof_cookie = 0;
	if (!buf)
		return (void) fuse_reply_err(req, ENOMEM);
	if (maxb < 4096)
		maxb = 4096;
	if (maxb > PROTO_MAX_BODY)
		maxb = PROTO_MAX_BODY;
	cred_of(req, &c);
	rc = cli_meta_readdir(fs, &c, ino, (uint64_t)off, (uint32_t)maxb, &rep);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	rb_init(&r, rep.dirents.p, rep.dirents.len);
	while ((rc = proto_dirent_next(&r, &d)) == 1) {
		need = add_dirent(req, buf + pos, size - pos, &d, plus, since,
				  &l);
		if (!need)
			break; /* rc stays 1: not all passed on */
		pos += need;
		last = d.cookie;
	}
	if (rc < 0) {
		log_warn("mgr (%s:%u): malformed READDIR entry list",
			 fs->mgr_host, fs->mgr_port);
		if (pos == 0)
			return (void) fuse_reply_err(req, EIO);
	}
	if (rc == 0 && rep.eof && last > 0)
		dir->eof_cookie = last;
	fuse_reply_buf(req, buf, pos);
}

/* READDIR. */
static void fe_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, 0, dir_of(fi));
}

/* READDIRPLUS. */
static void fe_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, 1, dir_of(fi));
}

/* RELEASEDIR: free the handle. */
static void fe_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	open_untrack(cf_of(req), &dir_of(fi)->link);
	free(dir_of(fi));
	fuse_reply_err(req, 0);
}

/* STATFS: the mgr's aggregate over the iods. */
static void fe_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct proto_statfs s;
	struct proto_cred c;
	struct statvfs st;
	int rc;

	cred_of(req, &c);
	rc = cli_meta_statfs(fs_of(req), &c, &s);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	memset(&st, 0, sizeof(st));
	st.f_bsize = s.bsize;
	st.f_frsize = s.bsize;
	st.f_blocks = s.blocks;
	st.f_bfree = s.bfree;
	st.f_bavail = s.bavail;
	st.f_files = s.files;
	st.f_ffree = s.ffree;
	st.f_favail = s.ffree;
	st.f_namemax = s.namemax ? s.namemax : PROTO_MAX_NAME;
	fuse_reply_statfs(req, &st);
}

/* Whether (ino, name) is the read-only transport counters attribute. */
static int is_stats(fuse_ino_t ino, const char *name)
{
	return ino == FUSE_ROOT_ID && (!strcmp(name, FE_STATS_XATTR) ||
				       !strcmp(name, FE_STATS_XATTR_USER));
}

/* Format the transport counters as JSON (net_stats_json) and add the
 * background removal's (reap_inodes, reap_batches, reap_queued: the
 * removals still to do are reap_queued - reap_inodes) and the FUSE data
 * path's (fuse_copy_bytes, fuse_max_req_bytes: fe_loop_counts), with a
 * trailing newline so that `getfattr --only-values` prints a whole line.
 * @return length (without NUL), -ERANGE */
static int stats_json(struct fe_fuse *cf, char *buf, size_t cap)
{
	struct cli_fs *fs = cf->fs;
	struct cli_reap *reap = cf->reap;
	uint64_t inodes = 0, batches = 0, queued = 0, copy, max_req;
	struct net_stats s;
	int n, k;

	net_client_stats(fs->net, &s);
	n = net_stats_json(&s, net_client_transport(fs->net), buf, cap - 1);
	if (n < 0)
		return n;
	if (n < 2 || buf[n - 1] != '}')
		return -ERANGE;
	if (reap)
		cli_reap_counts(reap, &inodes, &batches, &queued);
	fe_loop_counts(cf->loop, &copy, &max_req);
	k = snprintf(buf + n - 1, cap - (size_t)n, ",\"reap_inodes\":%llu,\"reap_batches\":%llu"
		     ",\"reap_queued\":%llu,\"fuse_copy_bytes\":%llu,\"fuse_max_req_bytes\":%llu}\n",
		     (unsigned long long)inodes, (unsigned long long)batches,
		     (unsigned long long)queued, (unsigned long long)copy,
		     (unsigned long long)max_req);
	if (k < 0 || (size_t)k >= cap - (size_t)n)
		return -ERANGE;
	return n - 1 + k;
}

/* Whether name is in a namespace the mgr stores (user.*, trusted.*).
 * Anything else (security.*, system.*) the mgr refuses with EOPNOTSUPP. */
static int xattr_ns_stored(const char *name)
{
	return !strncmp(name, "user.", 5) || !strncmp(name, "trusted.", 8);
}

/* SETXATTR; setting user.rpfs.layout refreshes the cached layout. */
static void fe_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct cli_fs *fs = fs_of(req);
	struct proto_cred c;
	uint32_t pf = 0;
	int rc;

	if (is_stats(ino, name))
		return (void) fuse_reply_err(req, EPERM);
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
		return (void) fuse_reply_err(req, EINVAL);
	if (!xattr_ns_stored(name)) /* the mgr's answer, without asking it:
				     * cp -a sets system.posix_acl_access */
		return (void) fuse_reply_err(req, EOPNOTSUPP);
	if (flags & XATTR_CREATE)
		pf |= PROTO_XATTR_CREATE;
	if (flags & XATTR_REPLACE)
		pf |= PROTO_XATTR_REPLACE;
	cred_of(req, &c);
	rc = cli_meta_setxattr(fs, &c, ino, name, value, size, pf);
	cli_itab_attr_changed(fs->itab);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	if (!strcmp(name, FE_LAYOUT_XATTR)) {
		struct proto_attr a;

		if (cli_meta_getattr(fs, &c, ino, &a) == 0 && S_ISREG(a.mode))
			cli_inode_set_layout(fs->itab, ino, &a.layout);
	}
	fuse_reply_err(req, 0);
}

/* Reply to an xattr read: size query (size 0), ERANGE, or the bytes. */
static void reply_xattr_value(fuse_req_t req, const void *p, size_t len,
			      size_t size)
{
	if (size == 0)
		return (void) fuse_reply_xattr(req, len);
	if (len > size)
		return (void) fuse_reply_err(req, ERANGE);
	fuse_reply_buf(req, p, len);
}


/*
 * GETXATTR, with the read-only rpfs.stats on the root. Names outside the
 * stored namespaces are answered here with the mgr's EOPNOTSUPP: the
 * kernel asks for security.capability before every write(2) (FUSE does not
 * set SB_NOSEC), and a mgr round trip for it doubled the cost of a write.
 */
static void fe_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct proto_cred c;
	struct proto_str v;
	uint32_t xsize;
	int rc;

	if (!xattr_ns_stored(name) && !is_stats(ino, name))
		return (void) fuse_reply_err(req, EOPNOTSUPP);
	if (is_stats(ino, name)) {
		char js[2048];
		int n = stats_json(cf_of(req), js, sizeof(js));

		if (n < 0)
			return (void) fuse_reply_err(req, -n);
		return reply_xattr_value(req, js, (size_t)n, size);
	}
	if (size > PROTO_MAX_XATTR_VALUE)
		size = PROTO_MAX_XATTR_VALUE;
	cred_of(req, &c);
	rc = cli_meta_getxattr(fs_of(req), &c, ino, name, (uint32_t)size, &v,
			       &xsize);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	if (size == 0)
		return (void) fuse_reply_xattr(req, xsize);
	fuse_reply_buf(req, v.p, v.len);
}

/* LISTXATTR (the stats attribute is not listed). */
static void fe_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct proto_cred c;
	struct proto_str v;
	uint32_t xsize;
	int rc;

	if (size > PROTO_MAX_BODY / 2)
		size = PROTO_MAX_BODY / 2;
	cred_of(req, &c);
	rc = cli_meta_listxattr(fs_of(req), &c, ino, (uint32_t)size, &v,
				&xsize);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	if (size == 0)
		return (void) fuse_reply_xattr(req, xsize);
	fuse_reply_buf(req, v.p, v.len);
}

/* REMOVEXATTR. */
static void fe_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct proto_cred c;
	int rc;

	if (is_stats(ino, name))
		return (void) fuse_reply_err(req, EPERM);
	if (!xattr_ns_stored(name)) /* the mgr's answer, without asking it */
		return (void) fuse_reply_err(req, EOPNOTSUPP);
	cred_of(req, &c);
	rc = cli_meta_removexattr(fs_of(req), &c, ino, name);
	cli_itab_attr_changed(fs_of(req)->itab);
	fuse_reply_err(req, -rc);
}

/* ACCESS (only reached without default_permissions, kept for safety). */
static void fe_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct proto_cred c;

	cred_of(req, &c);
	fuse_reply_err(req, -cli_meta_access(fs_of(req), &c, ino,
					     (uint32_t)mask & 7));
}

/* FALLOCATE: modes 0, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE[|KEEP_SIZE]
 * on the iods after the writes in flight (cli_space_fallocate). */
static void fe_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
			 off_t offset, off_t length, struct fuse_file_info *fi)
{
	int rc;

	if (offset < 0 || length <= 0)
		return (void) fuse_reply_err(req, EINVAL);
	if (mode < 0)
		return (void) fuse_reply_err(req, EOPNOTSUPP);
	(void)wback_drain(req, ino, 0); /* a failed write shows at close */
	rc = cli_space_fallocate(fs_of(req), &file_of(fi)->cred, ino,
				 (uint32_t)mode, (uint64_t)offset,
				 (uint64_t)length);
	fuse_reply_err(req, -rc);
}

/* LSEEK: the kernel sends only SEEK_DATA and SEEK_HOLE; the iods answer
 * after the writes in flight (cli_space_seek). */
static void fe_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	uint64_t res;
	int rc;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return (void) fuse_reply_err(req, EINVAL);
	if (off < 0)
		return (void) fuse_reply_err(req, ENXIO);
	(void)wback_drain(req, ino, 0); /* a failed write shows at close */
	rc = cli_space_seek(fs_of(req), ino, (uint64_t)off,
			    whence == SEEK_HOLE, &res);
	if (rc)
		return (void) fuse_reply_err(req, -rc);
	fuse_reply_lseek(req, (off_t)res);
}

static const struct fuse_lowlevel_ops fe_ops = {
	.init = fe_init,
	.lookup = fe_lookup,
	.forget = fe_forget,
	.forget_multi = fe_forget_multi,
	.getattr = fe_getattr,
	.setattr = fe_setattr,
	.readlink = fe_readlink,
	.mknod = fe_mknod,
	.mkdir = fe_mkdir,
	.unlink = fe_unlink,
	.rmdir = fe_rmdir,
	.symlink = fe_symlink,
	.rename = fe_rename,
	.link = fe_link,
	.open = fe_open,
	.read = fe_read,
	.write = fe_write,
	.flush = fe_flush,
	.release = fe_release,
	.fsync = fe_fsync,
	.fsyncdir = fe_fsyncdir,
	.opendir = fe_opendir,
	.readdir = fe_readdir,
	.readdirplus = fe_readdirplus,
	.releasedir = fe_releasedir,
	.statfs = fe_statfs,
	.setxattr = fe_setxattr,
	.getxattr = fe_getxattr,
	.listxattr = fe_listxattr,
	.removexattr = fe_removexattr,
	.access = fe_access,
	.create = fe_create,
	.fallocate = fe_fallocate,
	.lseek = fe_lseek,
	.getlk = fe_lock_getlk,
	.setlk = fe_lock_setlk,
	.flock = fe_lock_flock,
};

/* See fe_fuse.h. */
int fe_fuse_init(struct fe_fuse *cf)
{
	cf->opens = NULL;
	return -pthread_mutex_init(&cf->open_lock, NULL);
}

/* See fe_fuse.h. No op runs any more, so the list is only taken under
 * the lock for form. A file is settled as RELEASE would (writes in
 * flight, size), then freed (open count, removal if unlinked). */
void fe_fuse_end(struct fe_fuse *cf)
{
	struct fe_open *o, *next;
	unsigned nfiles = 0, ndirs = 0;

	pthread_mutex_lock(&cf->open_lock);
	o = cf->opens;
	cf->opens = NULL;
	pthread_mutex_unlock(&cf->open_lock);
	for (; o; o = next) {
		next = o->next;
		if (o->dir) {
			free((struct fe_dir *)o);
			ndirs++;
			continue;
		}
		file_settle(cf, (struct fe_file *)o);
		file_free(cf, (struct fe_file *)o);
		nfiles++;
	}
	if (nfiles || ndirs)
		log_info("released %u files and %u directories the kernel "
			 "left open at unmount", nfiles, ndirs);
	pthread_mutex_destroy(&cf->open_lock);
}

/* The operations table: see fe_fuse.h. */
const struct fuse_lowlevel_ops *fe_fuse_ops(void)
{
	return &fe_ops;
}
