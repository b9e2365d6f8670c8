/*
 * rpfs.h - librpfs, the native client library of rpfs.
 *
 * An application talks to an rpfs cluster directly, without a FUSE mount:
 * the library runs the same client core as rpfs-fuse, so the files are the
 * same files (a file written here reads back through a mount and the other
 * way round; sizes are published on close and fsync, as a mount does).
 *
 * Beyond pread/pwrite it offers list I/O (PVFS semantics): one call names a
 * memory list and a file list that describe the same bytes in the same
 * order; either or both may be noncontiguous. The library cuts the file list
 * into stripe pieces and sends ONE request per iod carrying that iod's file
 * segments and memory segments, to all iods at once. The extended variants
 * also say which allocation each memory segment lies in, so the RDMA
 * transport can register whole allocations instead of each piece. Memory
 * from rpfs_mem_alloc (or declared with rpfs_mem_register) is registered
 * once and reused; any other memory works too.
 *
 * All functions return 0 (or a byte count) on success and a negative errno
 * on failure; they never call exit() and never print except through the
 * library's log (stderr, syslog priority prefixes). A file system handle
 * and a file handle may be used from several threads at once.
 *
 * Build: pkg-config --cflags --libs rpfs
 */
#ifndef RPFS_H
#define RPFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RPFS_API_VERSION 1
#define RPFS_DEFAULT_PORT 7400

typedef struct rpfs_fs rpfs_fs_t;
typedef struct rpfs_file rpfs_file_t;

/* Mount options. Zero / NULL fields take the default. */
struct rpfs_opts {
	int timeout_ms;        /* every server request fails with -EIO after
				* this (default 10000) */
	const char *key_file;  /* cluster key file (mode 0600); default
				* $RPFS_KEY, else none */
	const char *transport; /* "tcp", "verbs" or "auto"; default
				* $RPFS_TRANSPORT, else "tcp" */
	int log_level;         /* 0 = default (notice); 3 err .. 7 debug */
	uint32_t reserved[8];  /* zero */
};

/** Fill o with the defaults (all zero). */
void rpfs_opts_default(struct rpfs_opts *o);

/**
 * Connect to the cluster whose mgr listens at mgr_hostport and fetch its
 * parameters. The calling process's uid, gid and groups are the
 * credential of every later call.
 * @param[in] mgr_hostport "HOST" or "HOST:PORT" (default port 7400),
 *	or a list of them "h1:7400,h2:7400" (up to 8 mgrs sharing one
 *	PostgreSQL store): the library follows the active one
 * @param[in] o options, or NULL for the defaults
 * @param[out] fs the mounted file system
 * @return 0, -EINVAL bad argument or option, -ENOENT/-EACCES/-EPERM key file
 *	missing, unreadable or of a bad mode or size, -ENOMEM,
 *	-ECONNREFUSED/-EHOSTUNREACH/-ETIMEDOUT/-EIO mgr unreachable,
 *	-EACCES the cluster key was refused, -EPROTO malformed reply
 */
int rpfs_mount(const char *mgr_hostport, const struct rpfs_opts *o,
	       rpfs_fs_t **fs);

/**
 * Release everything: frees memory from rpfs_mem_alloc still held,
 * forgets registered regions, closes the connections. Every file must be
 * closed first.
 * @return 0, -EBUSY files still open (nothing is freed)
 */
int rpfs_unmount(rpfs_fs_t *fs);

/**
 * Open path (absolute or relative to the rpfs root, components separated
 * by '/'): LOOKUP from the root, component by component.
 * @param flags O_RDONLY, O_WRONLY or O_RDWR, plus O_CREAT, O_EXCL, O_TRUNC
 * @param mode permission bits for O_CREAT
 * @param[out] f the open file
 * @return 0, -ENOENT, -EEXIST (O_CREAT|O_EXCL), -EACCES, -ENOTDIR, -EISDIR,
 *	-ENAMETOOLONG, -EINVAL (bad flags or empty path), -ENOMEM, -EIO
 */
int rpfs_open(rpfs_fs_t *fs, const char *path, int flags, mode_t mode,
	      rpfs_file_t **f);

/**
 * Close: publish the size this handle grew the file to (like close(2) on
 * a mount), then free f (also when publishing failed).
 * @return 0, -EIO (size update failed; the data is on the iods)
 */
int rpfs_close(rpfs_file_t *f);

/**
 * Read up to len bytes at off; clipped to the file size.
 * @return bytes read (0 at or past the end), -EBADF (opened write-only),
 *	-EINVAL, -EIO, or an iod's -errno
 */
ssize_t rpfs_pread(rpfs_file_t *f, void *buf, size_t len, uint64_t off);

/**
 * Write len bytes at off.
 * @return len, -EBADF (opened read-only), -EINVAL, -ENOSPC, -EIO
 */
ssize_t rpfs_pwrite(rpfs_file_t *f, const void *buf, size_t len,
		    uint64_t off);

/**
 * Make the file durable on every iod, then publish its size.
 * @return 0, -EIO, or an iod's -errno
 */
int rpfs_fsync(rpfs_file_t *f);

/**
 * Attributes of the open file; st_size includes this client's writes.
 * @return 0, -EIO, -ENOENT
 */
int rpfs_fstat(rpfs_file_t *f, struct stat *st);

/**
 * Truncate (or extend) the open file to size. @return 0, -EBADF, -EIO, ...
 */
int rpfs_ftruncate(rpfs_file_t *f, uint64_t size);

/**
 * Allocate, punch or zero a range of the open file, as fallocate(2).
 * Modes (Linux FALLOC_FL_* values): 0 allocates and grows the size to at
 * least off + len; FALLOC_FL_KEEP_SIZE allocates without changing the
 * size; FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE deallocates (the range
 * reads as zeros); FALLOC_FL_ZERO_RANGE zeroes (and grows the size like
 * mode 0), with FALLOC_FL_KEEP_SIZE it keeps the size. Afterwards
 * st_blocks counts the blocks the iods hold.
 * @param f a file opened for writing
 * @param mode one of the five combinations above
 * @param off first byte of the range
 * @param len bytes in the range, > 0
 * @return 0; -EOPNOTSUPP any other mode, or an iod's file system cannot
 *	do it; -EBADF opened read-only; -EINVAL len 0 or a NULL f; -EFBIG
 *	off + len beyond 2^62; -ENOSPC; -EIO
 */
int rpfs_fallocate(rpfs_file_t *f, int mode, uint64_t off, uint64_t len);

/**
 * Find data or a hole, as lseek(2) with SEEK_DATA or SEEK_HOLE (the
 * library keeps no file position, so nothing moves).
 * @param f an open file
 * @param off where to look from
 * @param whence SEEK_DATA or SEEK_HOLE
 * @return the offset of the next data (SEEK_DATA) or hole (SEEK_HOLE; the
 *	end of the file is one) at or after off; -ENXIO off at or past the
 *	end, or no data after it; -EINVAL other whence or a NULL f; -EIO
 */
int64_t rpfs_seek(rpfs_file_t *f, uint64_t off, int whence);

/**
 * Remove the name path; the data goes when the last link does (at once,
 * or at the last close of this client if it still has it open).
 * @return 0, -ENOENT, -EACCES, -EISDIR, -ENOTDIR, -EIO
 */
int rpfs_unlink(rpfs_fs_t *fs, const char *path);

/** Create directory path. @return 0, -EEXIST, -ENOENT, -EACCES, -EIO */
int rpfs_mkdir(rpfs_fs_t *fs, const char *path, mode_t mode);

/* ------------------------------------------------------------ list I/O */

/**
 * List read: fill the memory segments, in order, with the bytes of the
 * file segments, in order. The two lists describe the same total; either
 * may be noncontiguous, unordered file segments are allowed, zero-length
 * segments are skipped. Ranges past the end of the file read as zeros
 * (no clipping). Any number of segments: large lists go in rounds of at
 * most PROTO_MAX_SEGS file pieces / NET_MAX_IOV memory pieces per iod.
 * Cost: per round, one request to each iod involved, all in parallel.
 * @param mem_count, mem the memory list
 * @param file_count, file_offsets, file_lens the file list
 * @return total bytes, -EBADF (write-only), -EINVAL (totals differ, a
 *	negative count, NULL list with a nonzero count, offset overflow),
 *	-ENOMEM, -EIO, or an iod's -errno
 */
ssize_t rpfs_read_list(rpfs_file_t *f, int mem_count, const struct iovec *mem,
		       int file_count, const uint64_t *file_offsets,
		       const uint64_t *file_lens);

/**
 * List write: the memory segments, in order, go to the file segments, in
 * order (see rpfs_read_list). Overlapping file segments: last one wins
 * is not guaranteed.
 * @return total bytes, -EBADF (read-only), -EINVAL, -ENOMEM, -ENOSPC, -EIO
 */
ssize_t rpfs_write_list(rpfs_file_t *f, int mem_count, const struct iovec *mem,
			int file_count, const uint64_t *file_offsets,
			const uint64_t *file_lens);

/**
 * rpfs_read_list with, for each memory segment, the allocation it lies in
 * (allocs[i] contains mem[i]; several segments may share one). The
 * transport may register whole allocations rather than each segment
 * (Optimistic Group Registration); the whole allocation must stay mapped
 * during the call.
 * @return as rpfs_read_list; -EINVAL also when a segment is not inside
 *	its allocation
 */
ssize_t rpfs_read_list_ext(rpfs_file_t *f, int mem_count,
			   const struct iovec *mem, const struct iovec *allocs,
			   int file_count, const uint64_t *file_offsets,
			   const uint64_t *file_lens);

/** rpfs_write_list with allocations (see rpfs_read_list_ext). */
ssize_t rpfs_write_list_ext(rpfs_file_t *f, int mem_count,
			    const struct iovec *mem, const struct iovec *allocs,
			    int file_count, const uint64_t *file_offsets,
			    const uint64_t *file_lens);

/* ----------------------------------------------------- registered memory */

/**
 * Allocate len bytes (page aligned, zeroed) already registered with the
 * transport: transfers from or into it need no registration. Release with
 * rpfs_mem_free.
 * @param[out] out the memory
 * @return 0, -EINVAL (len 0), -ENOMEM (also: RLIMIT_MEMLOCK too small)
 */
int rpfs_mem_alloc(rpfs_fs_t *fs, size_t len, void **out);

/** Free memory from rpfs_mem_alloc. @return 0, -ENOENT (not from it), -EBUSY */
int rpfs_mem_free(rpfs_fs_t *fs, void *p);

/**
 * Declare memory the application allocated as long-lived: the transport
 * registers it once (on first use) and keeps it registered until
 * rpfs_mem_deregister. It must stay mapped until then.
 * @return 0, -EINVAL (len 0 or overlaps a declared region), -ENOMEM
 */
int rpfs_mem_register(rpfs_fs_t *fs, void *addr, size_t len);

/** Undo rpfs_mem_register(addr). @return 0, -ENOENT, -EBUSY (in use) */
int rpfs_mem_deregister(rpfs_fs_t *fs, void *addr);

/**
 * Lock a byte range of an open file, cluster-wide: the mgr arbitrates, so
 * the lock excludes (or shares with) locks taken through mounts and other
 * librpfs processes (mgr/lock/README.md "Locks"). The owner is the handle
 * f, as for Linux open file description locks: two handles conflict even in
 * one process, and rpfs_close(f) releases f's locks. Setting a range splits
 * and merges f's own locks as fcntl(2) does.
 * @param type F_RDLCK, F_WRLCK or F_UNLCK (<fcntl.h>)
 * @param start first byte (< 2^63)
 * @param len bytes; 0 = to the end of the file, however far it grows
 * @param wait 0: fail on a conflict; 1: block until granted
 * @return 0, -EAGAIN (conflict, wait 0), -EDEADLK (waiting would close a
 *	cycle of owners waiting for each other), -EINVAL (bad type or range),
 *	-ENOLCK (the mgr's table is full), -ENOMEM, -EIO
 */
int rpfs_lock(rpfs_file_t *f, int type, uint64_t start, uint64_t len,
	      int wait);

/** Transport name in use ("tcp" or "verbs"). */
const char *rpfs_transport(rpfs_fs_t *fs);

/**
 * Transport counters as JSON (net_stats_json), e.g. for benchmarks that
 * report registrations and cache hits.
 * @return bytes written, -ERANGE (cap too small)
 */
int rpfs_stats_json(rpfs_fs_t *fs, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
