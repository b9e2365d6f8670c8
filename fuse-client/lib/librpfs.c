/*
 * librpfs.c - the native client library: mounting, path walks, open and
 * close, pread/pwrite, fsync, fstat, truncate, fallocate, seek, unlink,
 * mkdir. It drives the
 * same client core as rpfs-fuse (cli_meta for the mgr, cli_io for the
 * iods, cli_inode for sizes), with the process's own credential. List I/O
 * and registered memory are in librpfs_list.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"
#include "cli_inode.h"
#include "cli_io.h"
#include "cli_meta.h"
#include "cli_reap.h"
#include "cli_setid.h"
#include "cli_size.h"
#include "cli_lock.h"
#include "cli_space.h"
#include "librpfs_int.h"
#include "log.h"
#include "net_auth.h"

#define RPFS_ROOT_INO 1

/* Fill o with the defaults. */
void rpfs_opts_default(struct rpfs_opts *o)
{
	memset(o, 0, sizeof(*o));
}

/*
 * Split a list of mgrs "HOST[:PORT],HOST[:PORT]..." ("[v6]:PORT" too;
 * addr.h; RPFS_DEFAULT_PORT if none) into mgrs; a bad one is logged.
 * @return 0, -EINVAL
 */
static int parse_hostport(const char *s, struct addr_hp *mgrs, int *n)
{
	char msg[PROTO_MAX_HOST * 2 + 200];

	if (!s)
		return -EINVAL;
	if (addr_parse_list("librpfs: mgr address", s, RPFS_DEFAULT_PORT, mgrs,
			   n, msg, sizeof(msg))) {
		log_err("%s", msg);
		return -EINVAL;
	}
	return 0;
}

/* Build the transport options from the library options and environment.
 * @return 0, -EINVAL (bad transport), or -errno from net_key_load */
static int build_net_opts(const struct rpfs_opts *o, struct net_opts *no)
{
	const char *key = o->key_file ? o->key_file : getenv("RPFS_KEY");
	const char *why = "?";
	int rc;

	net_opts_default(no);
	if (o->timeout_ms > 0)
		no->timeout_ms = o->timeout_ms;
	if (o->transport && net_transport_parse(o->transport, &no->transport))
		return -EINVAL;
	if (key && *key) {
		rc = net_auth_init();
		if (rc)
			return rc;
		rc = net_key_load(key, 1, no->key, &why);
		if (rc) {
			log_err("librpfs: key file %s: %s", key, why);
			return rc;
		}
		no->has_key = 1;
	}
	return 0;
}

/* The calling process's credential (uid, gid, supplementary groups). */
static void process_cred(struct proto_cred *c)
{
	gid_t g[PROTO_MAX_GROUPS];
	uint32_t gg[PROTO_MAX_GROUPS];
	int n = getgroups(PROTO_MAX_GROUPS, g);

	if (n < 0)
		n = 0; /* more than PROTO_MAX_GROUPS: send none extra */
	for (int i = 0; i < n; i++)
		gg[i] = g[i];
	cli_cred_set(c, (uint32_t)geteuid(), (uint32_t)getegid(), gg, n);
}

/* Mount: see rpfs.h. */
int rpfs_mount(const char *mgr_hostport, const struct rpfs_opts *o,
	       rpfs_fs_t **out)
{
	struct rpfs_opts def;
	struct net_opts no;
	struct addr_hp mgrs[ADDR_MAX_LIST];
	int nmgrs = 0;
	struct rpfs_fs *fs;
	int rc;

	if (!out)
		return -EINVAL;
	if (!o) {
		rpfs_opts_default(&def);
		o = &def;
	}
	if (o->log_level < 0 || o->log_level > 7)
		return -EINVAL;
	if (o->log_level)
		log_init(NULL, o->log_level);
	rc = parse_hostport(mgr_hostport, mgrs, &nmgrs);
	if (rc)
		return rc;
	rc = build_net_opts(o, &no);
	if (rc)
		return rc;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	rc = pthread_mutex_init(&fs->lock, NULL);
	if (rc) {
		rc = -rc;
		goto out_free_fs;
	}
	process_cred(&fs->cred);
	rc = cli_fs_mount_list(&fs->cli, mgrs, nmgrs, &no);
	if (rc)
		goto out_destroy_lock;
	rc = cli_lock_new(&fs->locks, fs->cli, &no);
	if (rc)
		goto out_free_cli;
	*out = fs;
	return 0;

out_free_cli:
	cli_fs_free(fs->cli);
out_destroy_lock:
	pthread_mutex_destroy(&fs->lock);
out_free_fs:
	free(fs);
	return rc;
}

/* Unmount: see rpfs.h. Frees remaining rpfs_mem_alloc memory. */
int rpfs_unmount(rpfs_fs_t *fs)
{
	struct rpfs_mem *m, *next;

	if (!fs)
		return 0;
	if (atomic_load(&fs->nopen))
		return -EBUSY;
	for (m = fs->mems; m; m = next) {
		next = m->next;
		(void)net_client_unregister_mem(fs->cli->net, m->addr);
		munmap(m->addr, m->len);
		free(m);
	}
	cli_lock_free(fs->locks);
	cli_fs_free(fs->cli);
	pthread_mutex_destroy(&fs->lock);
	free(fs);
	return 0;
}

/*
 * Walk path from the root with LOOKUP, leaving the last component
 * unresolved: *parent is its directory, name (cap PROTO_MAX_NAME + 1) its
 * name. "." and empty components are skipped; ".." is refused.
 * Cost: one mgr round trip per directory component.
 * @return 0, -EINVAL (no last component, ".."), -ENAMETOOLONG, -ENOENT,
 *	-ENOTDIR, -EACCES, -EIO
 */
static int walk_parent(struct rpfs_fs *fs, const char *path,
		       uint64_t *parent, char *name)
{
	uint64_t dir = RPFS_ROOT_INO;
	const char *p = path;
	int have = 0;

	if (!path)
		return -EINVAL;
	while (*p) {
		const char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);

		if (n == 0 || (n == 1 && p[0] == '.')) {
			p = *e ? e + 1 : e;
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return -EINVAL;
		if (n > PROTO_MAX_NAME)
			return -ENAMETOOLONG;
		if (have) { /* the previous name was a directory on the way */
			struct proto_attr a;
			int rc = cli_meta_lookup(fs->cli, &fs->cred, dir, name,
						 &a);

			if (rc)
				return rc;
			if (!S_ISDIR(a.mode))
				return -ENOTDIR;
			dir = a.ino;
		}
		memcpy(name, p, n);
		name[n] = '\0';
		have = 1;
		p = *e ? e + 1 : e;
	}
	if (!have)
		return -EINVAL;
	*parent = dir;
	return 0;
}

/* Publish this client's written size (cli_size_push). */
static int push_size(struct rpfs_fs *fs, uint64_t ino)
{
	return cli_size_push(fs->cli, &fs->cred, ino);
}

/* Truncate a regular file to size (cli_size_truncate). checked: the
 * attributes OPEN returned when it has just checked the write permission
 * (O_TRUNC), else NULL: no kernel checked before, so the mgr is asked
 * before any iod is touched. */
static int do_truncate(struct rpfs_fs *fs, uint64_t ino, uint64_t size,
		       const struct proto_attr *checked, struct proto_attr *out)
{
	struct proto_attr in;

	memset(&in, 0, sizeof(in));
	in.size = size;
	return cli_size_truncate(fs->cli, &fs->cred, ino, 0, &in, checked,
				 out);
}

/* Remove the objects of a freed inode and purge it, now (no background
 * worker in the library); failures only logged. */
static void remove_freed(struct rpfs_fs *fs, uint64_t ino,
			 const struct proto_layout *l)
{
	cli_reap_queue(NULL, fs->cli, &fs->cred, ino, l);
}

/*
 * Resolve (and with O_CREAT create) the file to open; OPEN checks the
 * permission for an existing file. Cost: path walk + one or two round trips.
 */
static int open_attr(struct rpfs_fs *fs, uint64_t parent, const char *name,
		     int flags, mode_t mode, struct proto_attr *a)
{
	int rc = cli_meta_lookup(fs->cli, &fs->cred, parent, name, a);

	if (rc == -ENOENT && (flags & O_CREAT)) {
		rc = cli_meta_create(fs->cli, &fs->cred, parent, name,
				     S_IFREG | (mode & 07777),
				     PROTO_CREATE_EXCL, a);
		if (rc != -EEXIST || (flags & O_EXCL))
			return rc;
		rc = cli_meta_lookup(fs->cli, &fs->cred, parent, name, a);
	}
	if (rc)
		return rc;
	if ((flags & O_CREAT) && (flags & O_EXCL))
		return -EEXIST;
	if (S_ISDIR(a->mode))
		return -EISDIR;
	if (!S_ISREG(a->mode))
		return -EINVAL;
	return cli_meta_open(fs->cli, &fs->cred, a->ino,
			     (uint32_t)(flags & ~(O_CREAT | O_EXCL)), a);
}

/* Open: see rpfs.h. */
int rpfs_open(rpfs_fs_t *fs, const char *path, int flags, mode_t mode,
	      rpfs_file_t **out)
{
	int acc = flags & O_ACCMODE;
	char name[PROTO_MAX_NAME + 1];
	struct proto_attr a;
	struct rpfs_file *f;
	uint64_t parent, since;
	int rc;

	if (!fs || !out)
		return -EINVAL;
	if (acc != O_RDONLY && acc != O_WRONLY && acc != O_RDWR)
		return -EINVAL;
	rc = walk_parent(fs, path, &parent, name);
	if (rc)
		return rc;
	since = cli_itab_clock(fs->cli->itab);
	rc = open_attr(fs, parent, name, flags, mode, &a);
	if (rc)
		return rc;
	if ((flags & O_TRUNC) && acc != O_RDONLY && a.size > 0) {
		rc = do_truncate(fs, a.ino, 0, &a, &a);
		if (rc)
			return rc;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	rc = cli_inode_open(fs->cli->itab, &a, since);
	if (rc) {
		free(f);
		return rc;
	}
	f->fs = fs;
	f->ino = a.ino;
	f->accmode = acc;
	atomic_fetch_add(&fs->nopen, 1);
	*out = f;
	return 0;
}

/* Close: publish the size, deferred removal, free. See rpfs.h. */
int rpfs_close(rpfs_file_t *f)
{
	struct proto_layout l;
	struct rpfs_fs *fs;
	int rc;

	if (!f)
		return -EINVAL;
	fs = f->fs;
	rc = push_size(fs, f->ino);
	if (rc)
		log_warn("inode %llu: size update at close failed: %s",
			 (unsigned long long)f->ino, strerror(-rc));
	if (cli_lock_flush(fs->locks, f->ino, (uint64_t)(uintptr_t)f))
		log_warn("inode %llu: releasing locks at close failed",
			 (unsigned long long)f->ino);
	if (cli_inode_release(fs->cli->itab, f->ino, &l))
		remove_freed(fs, f->ino, &l);
	atomic_fetch_sub(&fs->nopen, 1);
	free(f);
	return rc ? -EIO : 0;
}

/* Lock: see rpfs.h. The owner is the handle's address, unique while it
 * is open (its locks go at rpfs_close). */
int rpfs_lock(rpfs_file_t *f, int type, uint64_t start, uint64_t len,
	      int wait)
{
	struct cli_lk l = { .start = start, .pid = (uint32_t)getpid(),
			    .kind = PROTO_LK_POSIX };
	struct cli_lock_wait w;

	if (!f || start > INT64_MAX || (len && len - 1 > INT64_MAX - start) ||
	    (wait != 0 && wait != 1))
		return -EINVAL;
	switch (type) {
	case F_RDLCK: l.type = PROTO_LK_RDLCK; break;
	case F_WRLCK: l.type = PROTO_LK_WRLCK; break;
	case F_UNLCK: l.type = PROTO_LK_UNLCK; break;
	default: return -EINVAL;
	}
	l.end = len ? start + len - 1 : PROTO_LK_EOF;
	if (wait)
		cli_lock_wait_init(f->fs->locks, &w);
	return cli_lock_set(f->fs->locks, f->ino, (uint64_t)(uintptr_t)f, &l,
			    wait ? &w : NULL);
}

/* Record a write's end for the size push (see librpfs_int.h). */
void rpfs_int_wrote(struct rpfs_file *f, uint64_t end)
{
	struct proto_time t = cli_now_time();

	cli_inode_wrote(f->fs->cli->itab, f->ino, end, &t);
}

/* pread: clip to the size this client sees, read through the engine. */
ssize_t rpfs_pread(rpfs_file_t *f, void *buf, size_t len, uint64_t off)
{
	struct proto_layout l;
	uint64_t size;
	int rc;

	if (!f || (!buf && len) || len > (size_t)SSIZE_MAX)
		return -EINVAL;
	if (f->accmode == O_WRONLY)
		return -EBADF;
	rc = cli_inode_io(f->fs->cli->itab, f->ino, &l, &size);
	if (rc)
		return -EBADF;
	if (off >= size || len == 0)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	rc = cli_io_read(f->fs->cli, f->ino, &l, off, len, buf);
	return rc ? rc : (ssize_t)len;
}

/* pwrite: drop the set-id bits a write drops (cli_setid.h), scatter to
 * the iods, note the new end. */
ssize_t rpfs_pwrite(rpfs_file_t *f, const void *buf, size_t len,
		    uint64_t off)
{
	struct proto_layout l;
	uint64_t size;
	int rc;

	if (!f || (!buf && len) || len > (size_t)SSIZE_MAX ||
	    off + len < off)
		return -EINVAL;
	if (f->accmode == O_RDONLY)
		return -EBADF;
	if (len == 0)
		return 0;
	rc = cli_inode_io(f->fs->cli->itab, f->ino, &l, &size);
	if (rc)
		return -EBADF;
	rc = cli_setid_write(f->fs->cli, &f->fs->cred, f->ino);
	if (rc < 0)
		return rc;
	rc = cli_io_write(f->fs->cli, f->ino, &l, off, len, buf);
	if (rc)
		return rc;
	rpfs_int_wrote(f, off + len);
	return (ssize_t)len;
}

/* fsync: every iod of the file syncs, then the size is published. */
int rpfs_fsync(rpfs_file_t *f)
{
	struct proto_layout l;
	uint64_t size;
	int rc;

	if (!f)
		return -EINVAL;
	rc = cli_inode_io(f->fs->cli->itab, f->ino, &l, &size);
	if (rc)
		return -EBADF;
	rc = cli_io_fsync(f->fs->cli, f->ino, &l, 0);
	if (rc)
		return rc;
	return push_size(f->fs, f->ino);
}

/* fstat: GETATTR merged with this client's written size. */
int rpfs_fstat(rpfs_file_t *f, struct stat *st)
{
	struct proto_attr a;
	uint64_t since;
	int rc;

	if (!f || !st)
		return -EINVAL;
	since = cli_itab_clock(f->fs->cli->itab);
	rc = cli_meta_getattr(f->fs->cli, &f->fs->cred, f->ino, &a);
	if (rc == 0)
		cli_inode_update(f->fs->cli->itab, &a, 0, since);
	else if (rc == -ENOENT)
		rc = cli_inode_cached_attr(f->fs->cli->itab, f->ino, &a);
	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
	st->st_ino = a.ino;
	st->st_mode = a.mode;
	st->st_nlink = a.nlink;
	st->st_uid = a.uid;
	st->st_gid = a.gid;
	st->st_size = (off_t)a.size;
	st->st_blocks = (blkcnt_t)a.blocks;
	st->st_blksize = (blksize_t)a.layout.unit;
	st->st_atim.tv_sec = a.atime.sec;
	st->st_atim.tv_nsec = a.atime.nsec;
	st->st_mtim.tv_sec = a.mtime.sec;
	st->st_mtim.tv_nsec = a.mtime.nsec;
	st->st_ctim.tv_sec = a.ctime.sec;
	st->st_ctim.tv_nsec = a.ctime.nsec;
	return 0;
}

/* ftruncate: publish pending writes first, then the permission check at
 * the mgr, the iods, and SETATTR (cli_size_truncate). The open mode is not
 * taken for the check: the mgr's SETATTR judges the caller now, and the
 * iods must not be touched when it would refuse. */
int rpfs_ftruncate(rpfs_file_t *f, uint64_t size)
{
	struct proto_attr a;
	uint64_t since;
	int rc;

	if (!f || size > (uint64_t)INT64_MAX)
		return -EINVAL;
	if (f->accmode == O_RDONLY)
		return -EBADF;
	rc = push_size(f->fs, f->ino);
	if (rc)
		return rc;
	since = cli_itab_clock(f->fs->cli->itab);
	rc = do_truncate(f->fs, f->ino, size, NULL, &a);
	if (rc == 0)
		cli_inode_update(f->fs->cli->itab, &a, 0, since);
	return rc;
}

/* fallocate: the client core does it all (cli_space_fallocate). */
int rpfs_fallocate(rpfs_file_t *f, int mode, uint64_t off, uint64_t len)
{
	if (!f)
		return -EINVAL;
	if (f->accmode == O_RDONLY)
		return -EBADF;
	if (mode < 0)
		return -EOPNOTSUPP;
	return cli_space_fallocate(f->fs->cli, &f->fs->cred, f->ino,
				   (uint32_t)mode, off, len);
}

/* SEEK_DATA / SEEK_HOLE through the iods (cli_space_seek). */
int64_t rpfs_seek(rpfs_file_t *f, uint64_t off, int whence)
{
	uint64_t res;
	int rc;

	if (!f || (whence != SEEK_DATA && whence != SEEK_HOLE))
		return -EINVAL;
	rc = cli_space_seek(f->fs->cli, f->ino, off, whence == SEEK_HOLE,
			    &res);
	return rc ? rc : (int64_t)res;
}

/* unlink: the data goes now, or at this client's last close. */
int rpfs_unlink(rpfs_fs_t *fs, const char *path)
{
	char name[PROTO_MAX_NAME + 1];
	struct proto_freed fr;
	uint64_t parent;
	int rc;

	if (!fs)
		return -EINVAL;
	rc = walk_parent(fs, path, &parent, name);
	if (rc)
		return rc;
	memset(&fr, 0, sizeof(fr));
	rc = cli_meta_unlink(fs->cli, &fs->cred, parent, name, &fr);
	if (rc)
		return rc;
	if (fr.ino && cli_inode_unlinked(fs->cli->itab, fr.ino, &fr.layout))
		remove_freed(fs, fr.ino, &fr.layout);
	return 0;
}

/* mkdir: see rpfs.h. */
int rpfs_mkdir(rpfs_fs_t *fs, const char *path, mode_t mode)
{
	char name[PROTO_MAX_NAME + 1];
	struct proto_attr a;
	uint64_t parent;
	int rc;

	if (!fs)
		return -EINVAL;
	rc = walk_parent(fs, path, &parent, name);
	if (rc)
		return rc;
	return cli_meta_mkdir(fs->cli, &fs->cred, parent, name,
			      S_IFDIR | (mode & 07777), &a);
}

/* Transport name: see rpfs.h. */
const char *rpfs_transport(rpfs_fs_t *fs)
{
	return fs ? net_client_transport(fs->cli->net) : "none";
}

/* Transport counters as JSON: see rpfs.h. */
int rpfs_stats_json(rpfs_fs_t *fs, char *buf, size_t cap)
{
	struct net_stats st;

	if (!fs || !buf)
		return -EINVAL;
	net_client_stats(fs->cli->net, &st);
	return net_stats_json(&st, net_client_transport(fs->cli->net), buf,
			      cap);
}
