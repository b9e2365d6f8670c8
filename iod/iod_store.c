/* iod_store.c - stripe objects on the local file system, fd cache (LRU). */
#include "iod_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "iod_crc.h"
#include "log.h"

#define NIL UINT32_MAX

/* One cached open object. */
struct fd_ent {
	uint64_t ino;       /* object id (loop thread only, as every field) */
	int fd;             /* -1 when the slot is free */
	uint32_t hnext;     /* hash chain */
	uint32_t prev, next;/* LRU list, head = most recent */
};

struct iod_store {
	char *dir;          /* data directory (loop thread only, as every field
			     * but objfd) */
	int objfd;          /* dir/objects (fixed at open: any thread reads it) */
	struct fd_ent *ent; /* max_fds slots */
	unsigned max_fds;
	unsigned nused;     /* slots holding an fd */
	uint32_t *bucket;   /* hash heads, nbucket (power of two) */
	uint32_t nbucket;
	uint32_t lru_head, lru_tail;
	uint32_t free_head; /* free slots, chained through next */
};

/* Fibonacci hash of ino into the bucket table. */
static uint32_t st_hash(const struct iod_store *st, uint64_t ino)
{
	return (uint32_t)((ino * 0x9e3779b97f4a7c15ull) >> 32) & (st->nbucket - 1);
}

/* Make dir/objects and allocate the cache tables. */
int iod_store_open(struct iod_store **out, const char *dir, unsigned max_fds)
{
	struct iod_store *st;
	int rc, dfd;

	if (!dir || !*dir || max_fds == 0 || max_fds > 65536)
		return -EINVAL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->objfd = -1;
	st->max_fds = max_fds;
	st->dir = strdup(dir);
	st->ent = calloc(max_fds, sizeof(*st->ent));
	st->nbucket = 1;
	while (st->nbucket < 2 * max_fds)
		st->nbucket <<= 1;
	st->bucket = malloc(sizeof(*st->bucket) * st->nbucket);
	if (!st->dir || !st->ent || !st->bucket) {
		rc = -ENOMEM;
		goto out_free_st;
	}
	for (uint32_t i = 0; i < st->nbucket; i++)
		st->bucket[i] = NIL;
	for (unsigned i = 0; i < max_fds; i++) {
		st->ent[i].fd = -1;
		st->ent[i].next = i + 1 < max_fds ? i + 1 : NIL;
	}
	st->free_head = 0;
	st->lru_head = st->lru_tail = NIL;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		rc = -errno;
		goto out_free_st;
	}
	if (mkdirat(dfd, "objects", 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		goto out_close_dfd;
	}
	st->objfd = openat(dfd, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->objfd < 0) {
		rc = -errno;
		goto out_close_dfd;
	}
	close(dfd);
	*out = st;
	return 0;

out_close_dfd:
	close(dfd);
out_free_st:
	free(st->bucket);
	free(st->ent);
	free(st->dir);
	free(st);
	return rc;
}

/* Close every cached fd, then the objects dir, then free. */
void iod_store_close(struct iod_store *st)
{
	if (!st)
		return;
	for (unsigned i = 0; i < st->max_fds; i++)
		if (st->ent[i].fd >= 0)
			close(st->ent[i].fd);
	if (st->objfd >= 0)
		close(st->objfd);
	free(st->bucket);
	free(st->ent);
	free(st->dir);
	free(st);
}

/* Number of open fds in the cache. */
unsigned iod_store_cached(const struct iod_store *st)
{
	return st->nused;
}

/* Unlink slot i from the LRU list. */
static void lru_unlink(struct iod_store *st, uint32_t i)
{
	struct fd_ent *e = &st->ent[i];

	if (e->prev != NIL)
		st->ent[e->prev].next = e->next;
	else
		st->lru_head = e->next;
	if (e->next != NIL)
		st->ent[e->next].prev = e->prev;
	else
		st->lru_tail = e->prev;
}

/* Put slot i at the head (most recently used). */
static void lru_push_head(struct iod_store *st, uint32_t i)
{
	struct fd_ent *e = &st->ent[i];

	e->prev = NIL;
	e->next = st->lru_head;
	if (st->lru_head != NIL)
		st->ent[st->lru_head].prev = i;
	else
		st->lru_tail = i;
	st->lru_head = i;
}

/* Find ino's slot, or NIL. Cost: O(chain). */
static uint32_t cache_find(struct iod_store *st, uint64_t ino)
{
	for (uint32_t i = st->bucket[st_hash(st, ino)]; i != NIL; i = st->ent[i].hnext)
		if (st->ent[i].ino == ino)
			return i;
	return NIL;
}

/* Drop slot i: close its fd, unhash it, return it to the free list. */
static void cache_drop(struct iod_store *st, uint32_t i)
{
	struct fd_ent *e = &st->ent[i];
	uint32_t *pp = &st->bucket[st_hash(st, e->ino)];

	while (*pp != i)
		pp = &st->ent[*pp].hnext;
	*pp = e->hnext;
	lru_unlink(st, i);
	close(e->fd);
	e->fd = -1;
	e->next = st->free_head;
	st->free_head = i;
	st->nused--;
}

/* Insert an open fd for ino, evicting the least recently used if full. */
static void cache_insert(struct iod_store *st, uint64_t ino, int fd)
{
	uint32_t i, h;

	if (st->free_head == NIL)
		cache_drop(st, st->lru_tail);
	i = st->free_head;
	st->free_head = st->ent[i].next;
	st->ent[i].ino = ino;
	st->ent[i].fd = fd;
	h = st_hash(st, ino);
	st->ent[i].hnext = st->bucket[h];
	st->bucket[h] = i;
	lru_push_head(st, i);
	st->nused++;
}

/* "XX/YY/<16 hex>" relative to objects/: XX low byte of ino, YY the next. */
static void obj_path(char *buf, size_t cap, uint64_t ino)
{
	snprintf(buf, cap, "%02x/%02x/%016llx", (unsigned)(ino & 0xff),
		 (unsigned)((ino >> 8) & 0xff), (unsigned long long)ino);
}

/* Create objects/XX and objects/XX/YY for ino if they are missing. */
static int make_dirs(struct iod_store *st, uint64_t ino)
{
	char d[8];

	snprintf(d, sizeof(d), "%02x", (unsigned)(ino & 0xff));
	if (mkdirat(st->objfd, d, 0700) < 0 && errno != EEXIST)
		return -errno;
	snprintf(d, sizeof(d), "%02x/%02x", (unsigned)(ino & 0xff),
		 (unsigned)((ino >> 8) & 0xff));
	if (mkdirat(st->objfd, d, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/*
 * Return an fd for object ino: from the cache (moved to the LRU head), or
 * opened now (creating it and its directories when create is set). Running
 * out of fds evicts cached ones and retries. Cost: a hash lookup on a hit,
 * an openat (plus maybe two mkdirat) on a miss.
 * @return fd >= 0, -ENOENT missing and !create, other -errno
 */
static int obj_fd(struct iod_store *st, uint64_t ino, int create)
{
	char path[64];
	uint32_t i = cache_find(st, ino);
	int fd, dirs_made = 0;

	if (i != NIL) {
		lru_unlink(st, i);
		lru_push_head(st, i);
		return st->ent[i].fd;
	}
	obj_path(path, sizeof(path), ino);
	for (;;) {
		fd = openat(st->objfd, path,
			    O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
		if (fd >= 0)
			break;
		if (errno == ENOENT && create && !dirs_made) {
			int rc = make_dirs(st, ino);
			if (rc < 0)
				return rc;
			dirs_made = 1;
			continue;
		}
		if ((errno == EMFILE || errno == ENFILE) && st->nused > 0) {
			cache_drop(st, st->lru_tail);
			continue;
		}
		return -errno;
	}
	cache_insert(st, ino, fd);
	return fd;
}

/* Disk call latency of the process (relaxed atomics; iod_store_latency). */
static struct metrics_hist store_lat[IOD_STORE_NCALLS];

/* See iod_store.h. */
const struct metrics_hist *iod_store_latency(enum iod_store_call c)
{
	return &store_lat[c];
}

/* The pwrite loop of iod_store_write. @return 0 or -errno */
static int store_pwrite_all(int fd, const char *p, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* pwrite loop over short writes; creates the object. Timed (store_lat). */
int iod_store_write(struct iod_store *st, uint64_t ino, uint64_t off,
		    const void *buf, size_t len)
{
	uint64_t t0;
	int fd = obj_fd(st, ino, 1), rc;

	if (fd < 0)
		return fd;
	if (off > (uint64_t)INT64_MAX - len)
		return -EFBIG;
	t0 = metrics_now_ns();
	rc = store_pwrite_all(fd, buf, len, off);
	metrics_hist_add(&store_lat[IOD_STORE_WRITE], metrics_now_ns() - t0);
	return rc;
}

/* The pread loop of iod_store_read: zero-fills from the first EOF.
 * @return 0 or -errno */
static int store_pread_all(int fd, char *p, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0) {
			memset(p, 0, len);
			break;
		}
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* pread loop; zero-fills from the first EOF (holes, missing object).
 * Timed (store_lat). */
int iod_store_read(struct iod_store *st, uint64_t ino, uint64_t off,
		   void *buf, size_t len)
{
	uint64_t t0;
	int fd = obj_fd(st, ino, 0), rc;

	if (fd == -ENOENT) {
		memset(buf, 0, len);
		return 0;
	}
	if (fd < 0)
		return fd;
	if (off > (uint64_t)INT64_MAX - len) {
		memset(buf, 0, len);
		return 0;
	}
	t0 = metrics_now_ns();
	rc = store_pread_all(fd, buf, len, off);
	metrics_hist_add(&store_lat[IOD_STORE_READ], metrics_now_ns() - t0);
	return rc;
}

/* A private duplicate of the cached descriptor: see iod_store.h.
 * Cost: a cache lookup (an openat on a miss) and an fcntl. */
int iod_store_open_fd(struct iod_store *st, uint64_t ino, int create,
		      int *fd)
{
	int ofd = obj_fd(st, ino, create), nfd;

	if (ofd < 0)
		return ofd;
	nfd = fcntl(ofd, F_DUPFD_CLOEXEC, 0);
	if (nfd < 0)
		return -errno;
	*fd = nfd;
	return 0;
}

/* A private descriptor and the size: see iod_store.h. Cost: fcntl + fstat. */
int iod_store_read_fd(struct iod_store *st, uint64_t ino, int *fd,
		      uint64_t *size)
{
	struct stat sb;
	int nfd, rc = iod_store_open_fd(st, ino, 0, &nfd);

	if (rc < 0)
		return rc;
	if (fstat(nfd, &sb) < 0) {
		rc = -errno;
		close(nfd);
		return rc;
	}
	*fd = nfd;
	*size = (uint64_t)sb.st_size;
	return 0;
}

/* ftruncate through the cache, creating the object if needed. */
int iod_store_truncate(struct iod_store *st, uint64_t ino, uint64_t size)
{
	int fd;

	if (size > (uint64_t)INT64_MAX)
		return -EINVAL;
	fd = obj_fd(st, ino, 1);
	if (fd < 0)
		return fd;
	if (ftruncate(fd, (off_t)size) < 0)
		return -errno;
	return 0;
}

/* Drop the cached fd first so no stale fd outlives the name, then unlink. */
int iod_store_remove(struct iod_store *st, uint64_t ino)
{
	char path[64];
	uint32_t i = cache_find(st, ino);

	if (i != NIL)
		cache_drop(st, i);
	obj_path(path, sizeof(path), ino);
	if (unlinkat(st->objfd, path, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* fsync/fdatasync one descriptor, timed (store_lat). */
int iod_store_fsync_fd(int fd, int datasync)
{
	uint64_t t0 = metrics_now_ns();
	int rc = (datasync ? fdatasync(fd) : fsync(fd)) < 0 ? -errno : 0;

	metrics_hist_add(&store_lat[IOD_STORE_FSYNC], metrics_now_ns() - t0);
	return rc;
}

/* fsync/fdatasync the object; a missing object has nothing to flush. */
int iod_store_fsync(struct iod_store *st, uint64_t ino, int datasync)
{
	int fd = obj_fd(st, ino, 0);

	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	return iod_store_fsync_fd(fd, datasync);
}

/* fallocate(2) on fd, retried on EINTR. @return 0, -errno */
static int store_fallocate(int fd, uint32_t mode, uint64_t off, uint64_t len)
{
	while (fallocate(fd, (int)mode, (off_t)off, (off_t)len) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

/* Whether a fallocate mode may create a missing object: not one that only
 * removes data (a punch) or zeroes it within the size (ZERO_RANGE with
 * KEEP_SIZE), which has nothing to do on a missing object. */
static int falloc_creates(uint32_t mode)
{
	return !(mode & PROTO_FALLOC_PUNCH_HOLE) &&
	       !((mode & PROTO_FALLOC_ZERO_RANGE) &&
		 (mode & PROTO_FALLOC_KEEP_SIZE));
}

/* The loop's half of a fallocate: see iod_store.h. */
int iod_store_fallocate_open(struct iod_store *st, uint64_t ino,
			     uint32_t mode, uint64_t off, uint64_t len, int *fd)
{
	int create = falloc_creates(mode);
	int rc;

	*fd = -1;
	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off)
		return -EFBIG;
	rc = iod_store_open_fd(st, ino, create, fd);
	if (rc == -ENOENT && !create)
		return 0;
	return rc;
}

/* fallocate on a descriptor. A file system without ZERO_RANGE (tmpfs) gets
 * a punch and an allocation of the range instead: the same zeros,
 * allocated, the same size. Cost: one or two syscalls, whose cost grows
 * with the extents touched. */
int iod_store_fallocate_fd(int fd, uint32_t mode, uint64_t off, uint64_t len)
{
	int rc;

	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off)
		return -EFBIG;
	rc = store_fallocate(fd, mode, off, len);
	if (rc != -EOPNOTSUPP || !(mode & PROTO_FALLOC_ZERO_RANGE))
		return rc;
	rc = store_fallocate(fd, PROTO_FALLOC_PUNCH_HOLE | PROTO_FALLOC_KEEP_SIZE,
			     off, len);
	if (rc)
		return rc;
	return store_fallocate(fd, mode & PROTO_FALLOC_KEEP_SIZE, off, len);
}

/* fallocate through the cache: both halves above, on the cached fd. A
 * punch or a keep-size zeroing of a missing object does not create one. */
int iod_store_fallocate(struct iod_store *st, uint64_t ino, uint32_t mode,
			uint64_t off, uint64_t len)
{
	int create = falloc_creates(mode);
	int fd;

	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off)
		return -EFBIG;
	fd = obj_fd(st, ino, create);
	if (fd == -ENOENT && !create)
		return 0;
	if (fd < 0)
		return fd;
	return iod_store_fallocate_fd(fd, mode, off, len);
}

/* lseek SEEK_DATA/SEEK_HOLE on the cached fd (lseek moves the shared file
 * position, which nothing else here uses: I/O is pread/pwrite). */
int iod_store_seek(struct iod_store *st, uint64_t ino, uint64_t off,
		   int hole, uint64_t *res)
{
	int fd;
	off_t r;

	if (off > (uint64_t)INT64_MAX)
		return -EINVAL;
	fd = obj_fd(st, ino, 0);
	if (fd == -ENOENT) {
		if (!hole)
			return -ENXIO;
		*res = off;
		return 0;
	}
	if (fd < 0)
		return fd;
	r = lseek(fd, (off_t)off, hole ? SEEK_HOLE : SEEK_DATA);
	if (r < 0)
		return -errno;
	*res = (uint64_t)r;
	return 0;
}

/* fstat's st_blocks of the object; a missing one holds nothing. */
int iod_store_blocks(struct iod_store *st, uint64_t ino, uint64_t *blocks)
{
	struct stat sb;
	int fd = obj_fd(st, ino, 0);

	*blocks = 0;
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	if (fstat(fd, &sb) < 0)
		return -errno;
	*blocks = (uint64_t)sb.st_blocks;
	return 0;
}

/* statvfs of the data directory, in fragment-size blocks. */
int iod_store_statfs(struct iod_store *st, struct proto_statfs *out)
{
	struct statvfs sv;

	if (fstatvfs(st->objfd, &sv) < 0)
		return -errno;
	out->bsize = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
	out->blocks = sv.f_blocks;
	out->bfree = sv.f_bfree;
	out->bavail = sv.f_bavail;
	out->files = sv.f_files;
	out->ffree = sv.f_ffree;
	out->namemax = (uint32_t)sv.f_namemax;
	return 0;
}

/* ------------------------------------------------------------------ scrub */

#define LIST_DIRS_PER_CALL 4096 /* bucket directories one IO_LIST opens */

/* Parse an object file name (16 lowercase hex digits). @return 0 or -EINVAL */
static int obj_name_ino(const char *name, uint64_t *ino)
{
	uint64_t v = 0;
	int i;

	for (i = 0; name[i]; i++) {
		char c = name[i];

		if (i >= 16)
			return -EINVAL;
		if (c >= '0' && c <= '9')
			v = v << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint64_t)(c - 'a' + 10);
		else
			return -EINVAL;
	}
	if (i != 16 || v == 0)
		return -EINVAL;
	*ino = v;
	return 0;
}

/* qsort order of inode numbers. */
static int ino_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Free a listing's scratch. */
void iod_scan_release(struct iod_scan *sc)
{
	free(sc->ino);
	*sc = (struct iod_scan){ NULL, 0, 0 };
}

/* Append ino to the scan scratch, growing it (kept across calls). */
static int scan_push(struct iod_scan *sc, uint64_t ino)
{
	if (sc->n == sc->cap) {
		size_t cap = sc->cap ? sc->cap * 2 : 1024;
		uint64_t *p = realloc(sc->ino, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		sc->ino = p;
		sc->cap = cap;
	}
	sc->ino[sc->n++] = ino;
	return 0;
}

/* Collect the inodes above after in bucket's directory into sc, sorted.
 * @return 0 or -errno */
static int list_collect(struct iod_scan *sc, DIR *d, uint32_t bucket,
			uint64_t after)
{
	struct dirent *de;
	uint64_t ino;
	int rc;

	sc->n = 0;
	errno = 0;
	while ((de = readdir(d)) != NULL) {
		if (obj_name_ino(de->d_name, &ino) || (ino & 0xffff) != bucket ||
		    ino <= after)
			continue;
		rc = scan_push(sc, ino);
		if (rc)
			return rc;
	}
	if (errno)
		return -errno;
	qsort(sc->ino, sc->n, sizeof(*sc->ino), ino_cmp);
	return 0;
}

/*
 * List the objects above after in one bucket directory into objs (room
 * entries). *last is the last inode taken, *more whether some are left.
 * Objects removed between readdir and stat are skipped. Cost: one readdir
 * of the directory, a sort, one fstatat per object taken.
 */
static int list_bucket(struct iod_store *st, struct iod_scan *sc,
		       uint32_t bucket, uint64_t after,
		       struct proto_obj *objs, uint32_t room, uint32_t *got,
		       uint64_t *last, int *more)
{
	char path[8];
	struct stat sb;
	size_t take;
	DIR *d;
	int fd, rc;

	*got = 0;
	*more = 0;
	snprintf(path, sizeof(path), "%02x/%02x", (unsigned)(bucket & 0xff),
		 (unsigned)((bucket >> 8) & 0xff));
	fd = openat(st->objfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	d = fdopendir(fd);
	if (!d) {
		rc = -errno;
		close(fd);
		return rc;
	}
	rc = list_collect(sc, d, bucket, after);
	take = sc->n < room ? sc->n : room;
	for (size_t i = 0; rc == 0 && i < take; i++) {
		char name[20];

		snprintf(name, sizeof(name), "%016llx",
			 (unsigned long long)sc->ino[i]);
		*last = sc->ino[i];
		if (fstatat(dirfd(d), name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				rc = -errno;
			continue;
		}
		if (!S_ISREG(sb.st_mode))
			continue;
		objs[(*got)++] = (struct proto_obj){ sc->ino[i],
			(uint64_t)sb.st_size, (uint64_t)sb.st_blocks,
			(int64_t)sb.st_mtim.tv_sec };
	}
	*more = rc == 0 && take < sc->n;
	closedir(d);
	return rc;
}

/* See iod_store.h: walks buckets from the cursor until max objects or
 * LIST_DIRS_PER_CALL directories. Reads only st->objfd of the store. */
int iod_store_list(struct iod_store *st, struct iod_scan *sc,
		   struct proto_cursor cur, uint32_t max, struct proto_obj *objs,
		   uint32_t *n, struct proto_cursor *next)
{
	uint32_t b = cur.bucket, got, dirs = 0;
	uint64_t after = cur.after, last = 0;
	int more, rc;

	*n = 0;
	if (b > PROTO_LIST_END || max == 0)
		return -EINVAL;
	for (; b < PROTO_LIST_END; b++, after = 0) {
		if (*n == max || dirs == LIST_DIRS_PER_CALL) {
			*next = (struct proto_cursor){ b, after };
			return 0;
		}
		rc = list_bucket(st, sc, b, after, objs + *n, max - *n, &got,
				 &last, &more);
		if (rc)
			return rc;
		dirs++;
		*n += got;
		if (more) {
			*next = (struct proto_cursor){ b, last };
			return 0;
		}
	}
	*next = (struct proto_cursor){ PROTO_LIST_END, 0 };
	return 0;
}

/* See iod_store.h: preads the range through buf, zeros past the end.
 * Cost: an fstat and one pread per cap bytes below the size. */
int iod_store_csum_fd(int fd, uint64_t off, uint64_t len, void *buf,
		      size_t cap, uint32_t *crc, uint64_t *size)
{
	struct stat sb;
	uint32_t c = 0;

	if (fstat(fd, &sb) < 0)
		return -errno;
	*size = (uint64_t)sb.st_size;
	while (len > 0) {
		size_t n = len < cap ? (size_t)len : cap;
		ssize_t r = 0;

		if (off < *size) {
			r = pread(fd, buf, n, (off_t)off);
			if (r < 0) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
		}
		if ((size_t)r < n) /* past the end (or a short read at it) */
			memset((uint8_t *)buf + r, 0, n - (size_t)r);
		c = iod_crc32c(c, buf, n);
		off += n;
		len -= n;
	}
	*crc = c;
	return 0;
}

/* iod_store_csum_fd on the cached descriptor. */
int iod_store_csum(struct iod_store *st, uint64_t ino, uint64_t off,
		   uint64_t len, void *buf, size_t cap, uint32_t *crc,
		   uint64_t *size)
{
	int fd = obj_fd(st, ino, 0);

	if (fd < 0)
		return fd;
	return iod_store_csum_fd(fd, off, len, buf, cap, crc, size);
}
