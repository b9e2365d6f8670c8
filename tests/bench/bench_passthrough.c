/*
 * bench_passthrough.c - a minimal, fast passthrough FUSE file system.
 *
 * It mirrors a source directory (tmpfs in the benchmark) and is the ceiling
 * for any FUSE client on this machine: low-level API, multithreaded loop
 * with cloned /dev/fuse fds, splice in both directions, and no allocation
 * per request on the data path (reads either splice straight from the file
 * into the FUSE pipe, or pread into a per-thread buffer).
 *
 *   bench-passthrough SOURCE MOUNTPOINT [-f] [-d] [-o OPT[,OPT...]]
 *
 * Own options: nosplice (never splice; copy through per-thread buffers),
 * nosplice_read (splice read replies only; write requests are then read
 * into libfuse's per-thread buffer: measured slower here),
 * timeout=S (attr and entry timeout, default 1.0 like rpfs-fuse),
 * threads=N (max worker threads, default 16),
 * hop (carry every read and write across one loopback TCP round trip, each
 * worker thread's connection to a server thread of its own, bench_hop.c:
 * for small reads, the ceiling for a client with a server hop; requests
 * are then read into memory, as rpfs-fuse reads them).
 *
 * Inodes: each one holds an O_PATH fd, found again through a hash table on
 * (st_dev, st_ino) so hard links and repeated lookups share one inode.
 */
#define FUSE_USE_VERSION 312
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "bench_hop.h"

#define PT_MAX_IO (1u << 20)     /* max_write, max_readahead */
#define PT_HASH_BITS 16
#define PT_HASH_SIZE (1u << PT_HASH_BITS)

struct pt_inode {
	int fd;                  /* O_PATH fd; immutable after creation */
	dev_t dev;               /* immutable */
	ino_t ino;               /* immutable */
	uint64_t nlookup;        /* pt.lock */
	struct pt_inode *next;   /* hash chain; pt.lock */
};

struct pt_dir {
	DIR *dp;                 /* one opendir handle; its own thread only */
	off_t off;               /* position the next readdir continues from */
	struct dirent *entry;    /* entry read but not yet returned */
};

static struct {
	struct pt_inode root;            /* never freed */
	pthread_mutex_t lock;            /* protects the hash table, nlookup */
	struct pt_inode *hash[PT_HASH_SIZE]; /* lock */
	double timeout;                  /* immutable after start */
	int nosplice;                    /* option */
	int splice_read;                 /* option: splice requests in too (default on) */
	int splice_ok;                   /* init: reads may use fuse_reply_data */
	int threads;                     /* option */
	int hop;                         /* option: hop mode on; immutable after start */
	pthread_key_t buf_key;           /* per-thread read buffer */
} pt = { .lock = PTHREAD_MUTEX_INITIALIZER, .timeout = 1.0, .threads = 16 };

/* pt_node: the inode behind a FUSE inode number (pointer cast). */
static struct pt_inode *pt_node(fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return &pt.root;
	return (struct pt_inode *)(uintptr_t)ino;
}

/* pt_hash: bucket of (dev, ino). */
static unsigned pt_hash(dev_t dev, ino_t ino)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev;
	return (unsigned)(h >> (64 - PT_HASH_BITS));
}

/* pt_tbuf: this thread's read buffer of PT_MAX_IO bytes, allocated once per
 * thread (freed by the key destructor when libfuse retires the thread).
 * Returns NULL when out of memory. */
static char *pt_tbuf(void)
{
	char *b = pthread_getspecific(pt.buf_key);

	if (b)
		return b;
	if (posix_memalign((void **)&b, 4096, PT_MAX_IO))
		return NULL;
	pthread_setspecific(pt.buf_key, b);
	return b;
}

/* pt_procpath: "/proc/self/fd/N" for an O_PATH fd, so calls that take no
 * AT_EMPTY_PATH (open, chmod, utimes, truncate) can reach the inode. */
static void pt_procpath(char *buf, size_t len, int fd)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

/* pt_do_lookup: look NAME up below PARENT, fill E and take one lookup
 * reference on the (possibly new) inode. Returns 0 or -errno. */
static int pt_do_lookup(fuse_ino_t parent, const char *name,
			struct fuse_entry_param *e)
{
	struct pt_inode *p = pt_node(parent), *n;
	unsigned h;
	int fd;

	memset(e, 0, sizeof(*e));
	e->attr_timeout = pt.timeout;
	e->entry_timeout = pt.timeout;
	fd = openat(p->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	h = pt_hash(e->attr.st_dev, e->attr.st_ino);
	pthread_mutex_lock(&pt.lock);
	for (n = pt.hash[h]; n; n = n->next)
		if (n->ino == e->attr.st_ino && n->dev == e->attr.st_dev)
			break;
	if (n) {
		n->nlookup++;
		pthread_mutex_unlock(&pt.lock);
		close(fd);
	} else {
		n = calloc(1, sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&pt.lock);
			close(fd);
			return -ENOMEM;
		}
		n->fd = fd;
		n->dev = e->attr.st_dev;
		n->ino = e->attr.st_ino;
		n->nlookup = 1;
		n->next = pt.hash[h];
		pt.hash[h] = n;
		pthread_mutex_unlock(&pt.lock);
	}
	e->ino = (fuse_ino_t)(uintptr_t)n;
	return 0;
}

/* pt_unref: drop N lookup references; the last one frees the inode. */
static void pt_unref(struct pt_inode *n, uint64_t count)
{
	struct pt_inode **pp;

	if (n == &pt.root)
		return;
	pthread_mutex_lock(&pt.lock);
	n->nlookup -= count < n->nlookup ? count : n->nlookup;
	if (n->nlookup) {
		pthread_mutex_unlock(&pt.lock);
		return;
	}
	for (pp = &pt.hash[pt_hash(n->dev, n->ino)]; *pp; pp = &(*pp)->next)
		if (*pp == n) {
			*pp = n->next;
			break;
		}
	pthread_mutex_unlock(&pt.lock);
	close(n->fd);
	free(n);
}

/* pt_init: ask for splice in both directions when a pipe can grow past
 * max_write plus header (probed here; libfuse silently copies otherwise),
 * and for 1 MiB writes and readahead like rpfs-fuse. */
static void pt_init(void *userdata, struct fuse_conn_info *conn)
{
	int p[2];

	(void)userdata;
	conn->max_write = PT_MAX_IO;
	conn->max_readahead = PT_MAX_IO;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	pt.splice_ok = 0;
	if (!pt.nosplice && pipe2(p, O_CLOEXEC) == 0) {
		/* libfuse wants max_write + header + 3 pages, rounded to 2 MiB. */
		if (fcntl(p[0], F_SETPIPE_SZ, 2 * PT_MAX_IO) >= 0)
			pt.splice_ok = 1;
		close(p[0]);
		close(p[1]);
	}
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
			FUSE_CAP_SPLICE_MOVE);
	if (pt.splice_ok)
		conn->want |= conn->capable & (FUSE_CAP_SPLICE_WRITE |
					       FUSE_CAP_SPLICE_MOVE);
	if (pt.splice_ok && pt.splice_read)
		conn->want |= conn->capable & FUSE_CAP_SPLICE_READ;
	fprintf(stderr, "bench-passthrough: splice %s%s\n",
		pt.splice_ok ? "on for read replies" :
		"off (pipe cannot grow to 2 MiB, or nosplice)",
		pt.splice_ok && pt.splice_read ? " and for write requests" : "");
	if (pt.hop)
		fprintf(stderr, "bench-passthrough: hop: reads and writes cross "
			"loopback TCP, a server thread per worker connection\n");
}

/* pt_lookup: FUSE LOOKUP. */
static void pt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int err = pt_do_lookup(parent, name, &e);

	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_entry(req, &e);
}

/* pt_forget: FUSE FORGET. */
static void pt_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	pt_unref(pt_node(ino), nlookup);
	fuse_reply_none(req);
}

/* pt_forget_multi: FUSE BATCH_FORGET. */
static void pt_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	size_t i;

	for (i = 0; i < count; i++)
		pt_unref(pt_node(forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

/* pt_getattr: FUSE GETATTR (fstat of the open fd when there is one). */
static void pt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int r;

	if (fi && fi->fh)
		r = fstat((int)fi->fh, &st);
	else
		r = fstatat(pt_node(ino)->fd, "", &st,
			    AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
	if (r < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_attr(req, &st, pt.timeout);
}

/* pt_setattr: FUSE SETATTR: mode, owner, size, times. */
static void pt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int valid, struct fuse_file_info *fi)
{
	struct pt_inode *n = pt_node(ino);
	char path[64];
	int fd = fi ? (int)fi->fh : -1;

	pt_procpath(path, sizeof(path), n->fd);
	if ((valid & FUSE_SET_ATTR_MODE) &&
	    (fd >= 0 ? fchmod(fd, attr->st_mode) : chmod(path, attr->st_mode)) < 0)
		goto out_err;
	if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t u = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
		gid_t g = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;

		if (fchownat(n->fd, "", u, g, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			goto out_err;
	}
	if ((valid & FUSE_SET_ATTR_SIZE) &&
	    (fd >= 0 ? ftruncate(fd, attr->st_size) : truncate(path, attr->st_size)) < 0)
		goto out_err;
	if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
		struct timespec tv[2] = { { .tv_nsec = UTIME_OMIT },
					  { .tv_nsec = UTIME_OMIT } };

		if (valid & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_ATIME)
			tv[0] = attr->st_atim;
		if (valid & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_MTIME)
			tv[1] = attr->st_mtim;
		if ((fd >= 0 ? futimens(fd, tv) : utimensat(AT_FDCWD, path, tv, 0)) < 0)
			goto out_err;
	}
	pt_getattr(req, ino, fi);
	return;
out_err:
	fuse_reply_err(req, errno);
}

/* pt_mkdir: FUSE MKDIR. */
static void pt_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct fuse_entry_param e;
	int err;

	if (mkdirat(pt_node(parent)->fd, name, mode) < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	err = pt_do_lookup(parent, name, &e);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_entry(req, &e);
}

/* pt_unlink: FUSE UNLINK. */
static void pt_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, unlinkat(pt_node(parent)->fd, name, 0) < 0 ? errno : 0);
}

/* pt_rmdir: FUSE RMDIR. */
static void pt_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, unlinkat(pt_node(parent)->fd, name, AT_REMOVEDIR) < 0 ?
			    errno : 0);
}

/* pt_rename: FUSE RENAME (flags passed to renameat2). */
static void pt_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	int r = renameat2(pt_node(parent)->fd, name, pt_node(newparent)->fd,
			  newname, flags);

	fuse_reply_err(req, r < 0 ? errno : 0);
}

/* pt_create: FUSE CREATE: openat with O_CREAT, then look the name up. */
static void pt_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	int fd, err;

	fd = openat(pt_node(parent)->fd, name,
		    (fi->flags | O_CREAT | O_CLOEXEC) & ~O_NOFOLLOW, mode);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	err = pt_do_lookup(parent, name, &e);
	if (err) {
		close(fd);
		fuse_reply_err(req, -err);
		return;
	}
	fi->fh = (uint64_t)fd;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		close(fd);
		pt_unref(pt_node(e.ino), 1);
	}
}

/* pt_open: FUSE OPEN: reopen the O_PATH fd through /proc. */
static void pt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[64];
	int fd;

	pt_procpath(path, sizeof(path), pt_node(ino)->fd);
	fd = open(path, (fi->flags | O_CLOEXEC) & ~O_NOFOLLOW);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	fi->fh = (uint64_t)fd;
	if (fuse_reply_open(req, fi) == -ENOENT)
		close(fd);
}

/* pt_release: FUSE RELEASE. */
static void pt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	close((int)fi->fh);
	fuse_reply_err(req, 0);
}

/* pt_flush: FUSE FLUSH: nothing is buffered here. */
static void pt_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* pt_fsync: FUSE FSYNC. */
static void pt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	int r = datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh);

	(void)ino;
	fuse_reply_err(req, r < 0 ? errno : 0);
}

/* pt_hop_pipe: this thread's pipe for spliced hop replies, made on first
 * use and sized for a 1 MiB reply arriving in socket pieces (like
 * rpfs-fuse's per-iod pipes); NULL when the pipe cannot be that large.
 * Thread-private; it lives as long as the thread (libfuse keeps them). */
static __thread int pt_pp[2] = { -1, -1 };

static int *pt_hop_pipe(void)
{
	if (pt_pp[0] >= 0)
		return pt_pp;
	if (pipe2(pt_pp, O_CLOEXEC) < 0)
		return NULL;
	if (fcntl(pt_pp[0], F_SETPIPE_SZ, 8 * PT_MAX_IO) < 0) {
		close(pt_pp[0]);
		close(pt_pp[1]);
		pt_pp[0] = pt_pp[1] = -1;
		return NULL;
	}
	return pt_pp;
}

/* pt_hop_pipe_drop: close this thread's pipe, which may hold data after a
 * failure; the next use makes a new one. */
static void pt_hop_pipe_drop(void)
{
	close(pt_pp[0]);
	close(pt_pp[1]);
	pt_pp[0] = pt_pp[1] = -1;
}

/* pt_read_hop_splice: READ of SIZE at OFF through the hop, the data spliced
 * socket -> this thread's pipe -> /dev/fuse. Returns 0 when it replied,
 * -EAGAIN when it sent nothing and the caller should copy instead. */
static int pt_read_hop_splice(fuse_req_t req, int fd, size_t size, off_t off)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(0);
	int *pp = pt_hop_pipe();
	int64_t res, left;
	int s;

	if (!pp)
		return -EAGAIN;
	s = hop_read_sock(fd, size, off, &res);
	if (s < 0) {
		fuse_reply_err(req, -s);
		return 0;
	}
	if (res < 0) {
		fuse_reply_err(req, (int)-res);
		return 0;
	}
	for (left = res; left > 0;) {
		ssize_t r = splice(s, NULL, pp[1], NULL, (size_t)left, SPLICE_F_MOVE);

		if (r <= 0) {
			hop_read_sock_failed();
			pt_hop_pipe_drop();
			fuse_reply_err(req, EIO);
			return 0;
		}
		left -= r;
	}
	bv.buf[0].size = (size_t)res;
	bv.buf[0].flags = FUSE_BUF_IS_FD;
	bv.buf[0].fd = pp[0];
	if (fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE) != 0)
		pt_hop_pipe_drop();
	return 0;
}

/* pt_read_hop: FUSE READ in hop mode: splice large replies as rpfs-fuse
 * does, copy small ones through this thread's buffer. */
static void pt_read_hop(fuse_req_t req, int fd, size_t size, off_t off)
{
	char *b;
	ssize_t r;

	if (pt.splice_ok && size >= 8192 &&
	    pt_read_hop_splice(req, fd, size, off) == 0)
		return;
	b = pt_tbuf();
	if (!b)
		return (void)fuse_reply_err(req, ENOMEM);
	r = hop_pread(fd, b, size, off);
	if (r < 0)
		return (void)fuse_reply_err(req, (int)-r);
	fuse_reply_buf(req, b, (size_t)r);
}

/* pt_read: FUSE READ. With splice, hand libfuse the fd and offset: it
 * splices file -> pipe -> /dev/fuse (one kernel copy). Without splice, or
 * for reads under two pages (libfuse would malloc for those), pread into
 * this thread's buffer and reply from it. Never allocates per read. */
static void pt_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	char *b;
	ssize_t r;

	(void)ino;
	if (size > PT_MAX_IO)
		size = PT_MAX_IO;
	if (pt.hop)
		return pt_read_hop(req, (int)fi->fh, size, off);
	if (pt.splice_ok && size >= 8192) {
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);

		bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		bv.buf[0].fd = (int)fi->fh;
		bv.buf[0].pos = off;
		fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
		return;
	}
	b = pt_tbuf();
	if (!b) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	r = pread((int)fi->fh, b, size, off);
	if (r < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, b, (size_t)r);
}

/* pt_write_hop: FUSE WRITE in hop mode: the data crosses the hop from
 * the request buffer (memory, since hop mode reads requests into memory;
 * gathered into this thread's buffer if it is not one piece). */
static void pt_write_hop(fuse_req_t req, struct fuse_bufvec *in, off_t off, int fd)
{
	size_t size = fuse_buf_size(in);
	const void *data = in->buf[0].mem;
	ssize_t r;

	if (in->count != 1 || (in->buf[0].flags & FUSE_BUF_IS_FD) ||
	    in->off || in->buf[0].size != size) {
		struct fuse_bufvec tmp = FUSE_BUFVEC_INIT(size);
		char *b = pt_tbuf();

		if (!b || size > PT_MAX_IO)
			return (void)fuse_reply_err(req, b ? EINVAL : ENOMEM);
		tmp.buf[0].mem = b;
		r = fuse_buf_copy(&tmp, in, 0);
		if (r < 0)
			return (void)fuse_reply_err(req, (int)-r);
		data = b;
		size = (size_t)r;
	}
	r = hop_pwrite(fd, data, size, off);
	if (r < 0)
		return (void)fuse_reply_err(req, (int)-r);
	fuse_reply_write(req, (size_t)r);
}

/* pt_write_buf: FUSE WRITE: copy the request buffer (a pipe when libfuse
 * spliced the request in) to the file; fuse_buf_copy splices fd to fd. */
static void pt_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in,
			 off_t off, struct fuse_file_info *fi)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	ssize_t r;

	(void)ino;
	if (pt.hop)
		return pt_write_hop(req, in, off, (int)fi->fh);
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = (int)fi->fh;
	out.buf[0].pos = off;
	r = fuse_buf_copy(&out, in, 0);
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_write(req, (size_t)r);
}

/* pt_fallocate: FUSE FALLOCATE. */
static void pt_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
			 off_t len, struct fuse_file_info *fi)
{
	(void)ino;
	fuse_reply_err(req, fallocate((int)fi->fh, mode, off, len) < 0 ? errno : 0);
}

/* pt_opendir: FUSE OPENDIR. */
static void pt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pt_dir *d = calloc(1, sizeof(*d));
	int fd;

	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fd = openat(pt_node(ino)->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d->dp = fdopendir(fd))) {
		int err = errno;

		if (fd >= 0)
			close(fd);
		free(d);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		closedir(d->dp);
		free(d);
	}
}

/* pt_readdir: FUSE READDIR (names and types only; the kernel looks up). */
static void pt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct pt_dir *d = (struct pt_dir *)(uintptr_t)fi->fh;
	char *b = pt_tbuf(), *p;
	size_t rem;

	(void)ino;
	if (!b) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (size > PT_MAX_IO)
		size = PT_MAX_IO;
	if (off != d->off) {
		seekdir(d->dp, off);
		d->entry = NULL;
		d->off = off;
	}
	p = b;
	rem = size;
	for (;;) {
		struct stat st = { 0 };
		size_t len;

		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dp);
			if (!d->entry) {
				if (errno && rem == size) {
					fuse_reply_err(req, errno);
					return;
				}
				break;
			}
		}
		st.st_ino = d->entry->d_ino;
		st.st_mode = (mode_t)d->entry->d_type << 12;
		len = fuse_add_direntry(req, p, rem, d->entry->d_name, &st,
					d->entry->d_off);
		if (len > rem)
			break;
		p += len;
		rem -= len;
		d->off = d->entry->d_off;
		d->entry = NULL;
	}
	fuse_reply_buf(req, b, size - rem);
}

/* pt_releasedir: FUSE RELEASEDIR. */
static void pt_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct pt_dir *d = (struct pt_dir *)(uintptr_t)fi->fh;

	(void)ino;
	closedir(d->dp);
	free(d);
	fuse_reply_err(req, 0);
}

/* pt_statfs: FUSE STATFS. */
static void pt_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	if (fstatvfs(pt_node(ino)->fd, &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops pt_ops = {
	.init = pt_init,
	.lookup = pt_lookup,
	.forget = pt_forget,
	.forget_multi = pt_forget_multi,
	.getattr = pt_getattr,
	.setattr = pt_setattr,
	.mkdir = pt_mkdir,
	.unlink = pt_unlink,
	.rmdir = pt_rmdir,
	.rename = pt_rename,
	.create = pt_create,
	.open = pt_open,
	.release = pt_release,
	.flush = pt_flush,
	.fsync = pt_fsync,
	.read = pt_read,
	.write_buf = pt_write_buf,
	.fallocate = pt_fallocate,
	.opendir = pt_opendir,
	.readdir = pt_readdir,
	.releasedir = pt_releasedir,
	.statfs = pt_statfs,
};

struct pt_opts {
	char *timeout;
	int nosplice;
	int nosplice_read;
	int threads;
	int hop;
};

static const struct fuse_opt pt_optspec[] = {
	{ "timeout=%s", offsetof(struct pt_opts, timeout), 0 },
	{ "nosplice", offsetof(struct pt_opts, nosplice), 1 },
	{ "nosplice_read", offsetof(struct pt_opts, nosplice_read), 1 },
	{ "threads=%d", offsetof(struct pt_opts, threads), 0 },
	{ "hop", offsetof(struct pt_opts, hop), 1 },
	FUSE_OPT_END
};

int main(int argc, char **argv)
{
	struct fuse_cmdline_opts cl = { 0 };
	struct pt_opts o = { .threads = 16 };
	struct fuse_loop_config *cfg;
	struct fuse_session *se;
	struct fuse_args args;
	struct stat st;
	char *end;
	int ret = 1;

	if (argc < 3 || argv[1][0] == '-') {
		fprintf(stderr, "usage: %s SOURCE MOUNTPOINT [-f] [-d] "
			"[-o nosplice,nosplice_read,timeout=S,threads=N,hop,...]\n", argv[0]);
		return 2;
	}
	pt.root.fd = open(argv[1], O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pt.root.fd < 0 || fstat(pt.root.fd, &st) < 0) {
		fprintf(stderr, "bench-passthrough: SOURCE: cannot open \"%s\": %s\n",
			argv[1], strerror(errno));
		return 2;
	}
	pt.root.dev = st.st_dev;
	pt.root.ino = st.st_ino;
	pt.root.nlookup = 2;
	argv[1] = argv[0];
	args = (struct fuse_args)FUSE_ARGS_INIT(argc - 1, argv + 1);
	if (fuse_parse_cmdline(&args, &cl) != 0 ||
	    fuse_opt_parse(&args, &o, pt_optspec, NULL) == -1)
		return 2;
	if (!cl.mountpoint) {
		fprintf(stderr, "bench-passthrough: MOUNTPOINT missing\n");
		return 2;
	}
	if (o.timeout) {
		pt.timeout = strtod(o.timeout, &end);
		if (*end || pt.timeout < 0) {
			fprintf(stderr, "bench-passthrough: timeout: expected seconds, got \"%s\"\n",
				o.timeout);
			return 2;
		}
	}
	if (o.threads < 1 || o.threads > 256) {
		fprintf(stderr, "bench-passthrough: threads: expected 1..256, got %d\n",
			o.threads);
		return 2;
	}
	pt.threads = o.threads;
	pt.nosplice = o.nosplice;
	pt.splice_read = !o.nosplice_read && !o.hop;
	if (o.hop) {
		int rc = hop_start();

		if (rc < 0) {
			fprintf(stderr, "bench-passthrough: hop: cannot start the servers: %s\n",
				strerror(-rc));
			return 1;
		}
		pt.hop = o.hop;
	}
	if (pthread_key_create(&pt.buf_key, free) != 0)
		return 1;
	se = fuse_session_new(&args, &pt_ops, sizeof(pt_ops), NULL);
	if (!se)
		goto out_free_args;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_destroy_session;
	if (fuse_session_mount(se, cl.mountpoint) != 0)
		goto out_remove_handlers;
	if (fuse_daemonize(cl.foreground) != 0)
		goto out_unmount;
	if (cl.singlethread) {
		ret = fuse_session_loop(se);
	} else {
		cfg = fuse_loop_cfg_create();
		if (!cfg)
			goto out_unmount;
		fuse_loop_cfg_set_clone_fd(cfg, 1);
		fuse_loop_cfg_set_max_threads(cfg, (unsigned)pt.threads);
		fuse_loop_cfg_set_idle_threads(cfg, (unsigned)pt.threads);
		ret = fuse_session_loop_mt(se, cfg);
		fuse_loop_cfg_destroy(cfg);
	}
out_unmount:
	fuse_session_unmount(se);
out_remove_handlers:
	fuse_remove_signal_handlers(se);
out_destroy_session:
	fuse_session_destroy(se);
out_free_args:
	free(cl.mountpoint);
	fuse_opt_free_args(&args);
	return ret ? 1 : 0;
}
