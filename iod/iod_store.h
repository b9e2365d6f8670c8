/*
 * iod_store.h - stripe objects as local files, with a cache of open fds.
 *
 * Object ino lives at DIR/objects/XX/YY/<ino as 16 hex digits>, where XX is
 * the low byte of ino and YY the next byte (both two hex digits), so
 * consecutive inodes spread over 256 directories. Subdirectories are made
 * lazily. Up to a fixed number of object fds stay open in an LRU cache;
 * every operation, remove and truncate included, goes through it.
 *
 * The store is the loop thread's: every call taking a struct iod_store
 * is loop thread only, except iod_store_list(), which only reads the
 * objects directory's descriptor (fixed at open) and so may run on a
 * worker thread meanwhile. The *_fd calls touch only the descriptor they
 * are given: a private one from iod_store_open_fd(), which a worker may
 * use while the loop goes on with the store.
 */
#ifndef RPFS_IOD_STORE_H
#define RPFS_IOD_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "metrics_op.h"
#include "proto.h"

#define IOD_STORE_DEFAULT_FDS 256

struct iod_store;

/**
 * Open the store under dir (which must exist); creates dir/objects.
 * @param[in] dir the data directory (copied)
 * @param[in] max_fds fds kept open, 1..65536
 * @return 0, -EINVAL, -ENOMEM, -errno from mkdir/open of dir/objects
 */
int iod_store_open(struct iod_store **out, const char *dir, unsigned max_fds);

/** Close every cached fd and free the store. */
void iod_store_close(struct iod_store *st);

/**
 * Write len bytes of buf at off in object ino, creating it if missing.
 * Loops over short writes.
 * @return 0, -ENOSPC, -EDQUOT, -EFBIG, -EIO, -EMFILE, other -errno
 */
int iod_store_write(struct iod_store *st, uint64_t ino, uint64_t off,
		    const void *buf, size_t len);

/**
 * Read len bytes at off from object ino into buf. Bytes past the end of the
 * object, or of a missing object, read as zeros.
 * @return 0, -EIO, other -errno
 */
int iod_store_read(struct iod_store *st, uint64_t ino, uint64_t off,
		   void *buf, size_t len);

/**
 * A descriptor of object ino for sending from (sendfile), of its own: a
 * duplicate the caller closes, so that the cache may close its copy
 * meanwhile. Also the object's current size.
 * @return 0, -ENOENT no such object, other -errno
 */
int iod_store_read_fd(struct iod_store *st, uint64_t ino, int *fd,
		      uint64_t *size);

/**
 * A private descriptor of object ino (a duplicate the caller closes, so
 * the cache may close its own copy meanwhile), for a disk call on a worker
 * thread. Creates the object (and its directories) when create is set.
 * @return 0, -ENOENT no such object and !create, other -errno
 */
int iod_store_open_fd(struct iod_store *st, uint64_t ino, int create,
		      int *fd);

/**
 * Set object ino's size, creating it if missing.
 * @return 0, -EINVAL size too large, -ENOSPC, other -errno
 */
int iod_store_truncate(struct iod_store *st, uint64_t ino, uint64_t size);

/**
 * Remove object ino (drops its cached fd). A missing object is success.
 * @return 0, -errno from unlink
 */
int iod_store_remove(struct iod_store *st, uint64_t ino);

/**
 * Flush object ino to stable storage (fdatasync if datasync). A missing
 * object is success.
 * @return 0, -EIO, other -errno
 */
int iod_store_fsync(struct iod_store *st, uint64_t ino, int datasync);

/* The disk calls whose latency iod_store times (metrics). */
enum iod_store_call { IOD_STORE_WRITE, IOD_STORE_READ, IOD_STORE_FSYNC, IOD_STORE_NCALLS };

/**
 * Latency of the disk calls of the whole process since the start:
 * iod_store_write (its pwrite loop), iod_store_read (its pread loop) and
 * iod_store_fsync_fd. Reads the transport moves from the file itself
 * (iod_store_read_fd, then splice or sendfile) are not in it. Any thread
 * reads it (metrics_hist_read).
 */
const struct metrics_hist *iod_store_latency(enum iod_store_call c);

/**
 * fsync (fdatasync if datasync) one descriptor; any thread.
 * @return 0, -EIO, other -errno
 */
int iod_store_fsync_fd(int fd, int datasync);

/**
 * fallocate(2) a range of object ino with mode (PROTO_FALLOC_*, which are
 * the Linux FALLOC_FL_* values). Modes that only remove or zero data
 * (PUNCH_HOLE, ZERO_RANGE with KEEP_SIZE) leave a missing object missing;
 * the others create it. Where the local file system has no ZERO_RANGE
 * (tmpfs), the range is punched and then allocated (KEEP_SIZE kept).
 * @return 0, -ENOSPC, -EOPNOTSUPP (the local file system cannot do it),
 *	-EFBIG, other -errno
 */
int iod_store_fallocate(struct iod_store *st, uint64_t ino, uint32_t mode,
			uint64_t off, uint64_t len);

/**
 * The loop's half of iod_store_fallocate: check the range and take a
 * private descriptor of the object (created when the mode creates one).
 * @param[out] fd the descriptor, or -1 when there is nothing to do (a
 *	missing object and a mode that only removes or zeroes data)
 * @return 0, -EFBIG, other -errno
 */
int iod_store_fallocate_open(struct iod_store *st, uint64_t ino,
			     uint32_t mode, uint64_t off, uint64_t len, int *fd);

/**
 * The disk half of iod_store_fallocate on a descriptor (any thread),
 * with the same tmpfs fallback for ZERO_RANGE.
 * @return 0, -ENOSPC, -EOPNOTSUPP, -EFBIG, other -errno
 */
int iod_store_fallocate_fd(int fd, uint32_t mode, uint64_t off, uint64_t len);

/**
 * lseek(2) SEEK_DATA or SEEK_HOLE (hole set) on object ino from off. A
 * missing object has no data: SEEK_DATA gives -ENXIO, SEEK_HOLE gives off.
 * @param[out] res the offset found
 * @return 0, -ENXIO (no data at or after off; off at or past the end for
 *	SEEK_HOLE), -EINVAL, other -errno
 */
int iod_store_seek(struct iod_store *st, uint64_t ino, uint64_t off,
		   int hole, uint64_t *res);

/**
 * The 512-byte blocks object ino occupies (st_blocks); 0 when missing.
 * @return 0, -errno from fstat
 */
int iod_store_blocks(struct iod_store *st, uint64_t ino, uint64_t *blocks);

/**
 * Capacity of the data directory's file system.
 * @return 0, -errno from statvfs
 */
int iod_store_statfs(struct iod_store *st, struct proto_statfs *out);

/* Scratch of one listing: the inode numbers of one bucket directory.
 * Owned by the caller (zero-initialised, grown by the store, released
 * with iod_scan_release), so listings on several threads never share it. */
struct iod_scan {
	uint64_t *ino;
	size_t n, cap;
};

/** Free a listing's scratch and zero it. */
void iod_scan_release(struct iod_scan *sc);

/**
 * List objects for the scrub (IO_LIST), in the cursor order of proto.h
 * (bucket = ino & 0xffff, the object's directory XX/YY; then ino), from
 * cur, with their size, blocks and mtime. Stops after max objects or after
 * opening 4096 bucket directories (so one call takes a bounded time; it
 * may return 0 objects and a cursor to go on from). May run on a worker
 * thread while the loop uses the store (see the top of this file).
 * @param[in,out] sc the caller's scratch
 * @param[out] objs room for max objects
 * @param[out] n objects written
 * @param[out] next where to go on; {PROTO_LIST_END, 0} at the end
 * @return 0, -EINVAL (bad cursor, max 0), -ENOMEM, other -errno
 */
int iod_store_list(struct iod_store *st, struct iod_scan *sc,
		   struct proto_cursor cur, uint32_t max, struct proto_obj *objs,
		   uint32_t *n, struct proto_cursor *next);

/**
 * CRC-32C of len bytes of object ino at off (IO_CSUM), read through buf
 * (cap bytes); bytes past the object's end count as zeros.
 * @param[out] crc the checksum
 * @param[out] size the object's size
 * @return 0, -ENOENT no such object, -EIO, other -errno
 */
int iod_store_csum(struct iod_store *st, uint64_t ino, uint64_t off,
		   uint64_t len, void *buf, size_t cap, uint32_t *crc,
		   uint64_t *size);

/**
 * iod_store_csum on a descriptor (any thread).
 * @return 0, -EIO, other -errno
 */
int iod_store_csum_fd(int fd, uint64_t off, uint64_t len, void *buf,
		      size_t cap, uint32_t *crc, uint64_t *size);

/** Number of fds currently cached (for tests). */
unsigned iod_store_cached(const struct iod_store *st);

#endif
