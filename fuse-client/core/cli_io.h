/*
 * cli_io.h - striped I/O against the iods. A byte range of a file is cut
 * into stripe pieces (common/proto/stripe.h); each iod gets ONE sub-request per
 * call carrying its file list (local segments, adjacent ones merged) and its
 * memory list (iovecs into the caller's buffer, interleaved with the other
 * iods' pieces: the gather/scatter case). All sub-requests are submitted
 * before any is waited for, so the iods work in parallel.
 *
 * Any transport failure or timeout of any iod fails the whole call with
 * -EIO (logged once per failure burst per iod). An iod's own -errno (for
 * example -ENOSPC) is passed through. Mirrored layouts (mirror=2, see
 * cli_mirror.h and fuse-client/core/README.md "Mirroring"): writes,
 * truncate, fsync, fallocate and remove go to both replicas of each piece;
 * a replica failing with -EIO while its buddy succeeds is recorded stale at
 * the mgr before the call succeeds. Reads, IO_SEEK and IO_BLOCKS go to one
 * replica and fail over to the other on -EIO. Thread-safe; each thread uses
 * its own preallocated piece and request arrays, so a call allocates
 * nothing.
 */
#ifndef RPFS_CLI_IO_H
#define RPFS_CLI_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "cli_core.h"

/* Direction of cli_io_list. */
#define CLI_IO_READ 0
#define CLI_IO_WRITE 1

/**
 * List I/O (PVFS semantics): move the bytes of the file list (foff[i],
 * flen[i]), in order, from or to the memory list mem, in order. Both lists
 * describe the same total; zero-length entries are skipped; file segments
 * may be in any order. Each iod gets one request per round with its file
 * segments (adjacent ones merged) and its memory segments; a round holds
 * at most PROTO_MAX_SEGS file and NET_MAX_IOV memory pieces per iod (and
 * 2048 of each in all), longer lists take several rounds. Reads are not
 * clipped: holes and ranges past the end read as zeros.
 * @param dir CLI_IO_READ or CLI_IO_WRITE
 * @param allocs NULL, or for each mem[i] the allocation containing it
 *	(passed to the transport as net_call.rd_alloc / wr_alloc)
 * @return 0, -EINVAL (bad layout, totals differ, offset overflow, a
 *	segment outside its allocation, NULL list with entries), -ENOMEM,
 *	-EIO, or an iod's -errno (e.g. -ENOSPC)
 */
int cli_io_list(struct cli_fs *fs, uint64_t ino, const struct proto_layout *l,
		int dir, const uint64_t *foff, const uint64_t *flen, size_t nf,
		const struct iovec *mem, size_t nm, const struct iovec *allocs);

/* A piece of a read delivered into pipes (cli_io_read_pipes): its bytes
 * are the next len bytes of pipe k, k the layout-relative iod index. */
struct cli_io_piece {
	uint16_t k;
	uint64_t len;
};

/**
 * Read [off, off + len) of file ino like cli_io_read, but have each iod's
 * share appended, in file order, to its own pipe (pipes[k], write ends,
 * k < l->count; each empty with room for twice its share, see net_call
 * rd_pipe) instead of placed into buf, which only gives the length and is
 * not written. On success pieces[0..*np) say, in file order, from which
 * pipe each stretch of the range comes (adjacent stretches of one pipe
 * merged). On failure the pipes may hold part of the data.
 * @return 0, -EOPNOTSUPP the transport cannot (verbs), -E2BIG more than
 *	maxp pieces or more than one round of the list engine, -EAGAIN a
 *	replica of a mirrored file failed (the pipes may hold part of its
 *	share: read through a buffer, which fails over), -EINVAL bad
 *	layout or range, -ENOMEM, -EIO, or an iod's -errno
 */
int cli_io_read_pipes(struct cli_fs *fs, uint64_t ino,
		      const struct proto_layout *l, uint64_t off, size_t len,
		      void *buf, const int *pipes, struct cli_io_piece *pieces,
		      size_t maxp, size_t *np);

/**
 * Read [off, off + len) of file ino into buf. The caller clips len to the
 * file size; holes read as zeros.
 * @return 0, -EINVAL bad layout or range, -ENOMEM, -EIO, or an iod's -errno
 */
int cli_io_read(struct cli_fs *fs, uint64_t ino, const struct proto_layout *l,
		uint64_t off, size_t len, void *buf);

/**
 * Write buf to [off, off + len) of file ino.
 * @return 0, -EINVAL, -ENOMEM, -EIO, -ENOSPC, or an iod's -errno
 */
int cli_io_write(struct cli_fs *fs, uint64_t ino, const struct proto_layout *l,
		 uint64_t off, size_t len, const void *buf);

/** A write started by cli_io_write_start(), not waited for yet. */
struct cli_io_pending;

/**
 * Start writing buf to [off, off + len) of file ino and return once every
 * sub-request is sent, without waiting for the iods (write-behind). buf
 * may be reused at once. Every started write must be finished with
 * cli_io_pending_wait().
 * @param[out] out the write in flight (NULL on error)
 * @return 0 started; -EAGAIN use cli_io_write(): the write needs several
 *	rounds, or the transport fetches the data after submit (verbs: it
 *	would need a copy, the CPU the verbs path exists to save); -EINVAL,
 *	-ENOMEM, -EIO or an iod's -errno if part of it failed at once (what
 *	was sent is waited for first)
 */
int cli_io_write_start(struct cli_fs *fs, uint64_t ino,
		       const struct proto_layout *l, uint64_t off, size_t len,
		       const void *buf, struct cli_io_pending **out);

/**
 * Wait for a started write to finish at every iod, then free it.
 * @return 0, -EIO, or an iod's -errno (e.g. -ENOSPC)
 */
int cli_io_pending_wait(struct cli_fs *fs, struct cli_io_pending *p);

/**
 * Truncate every iod object of the layout to its share of a file of size
 * bytes (stripe_local_size).
 * @return 0, -EINVAL, -ENOMEM, -EIO, or an iod's -errno
 */
int cli_io_truncate(struct cli_fs *fs, uint64_t ino,
		    const struct proto_layout *l, uint64_t size);

/**
 * Send a request without data to every iod of the layout at once, qs[k]
 * (its ino is overwritten with ino) to file iod k, and wait for all; an
 * iod whose rcs[k] is nonzero on entry is skipped (rcs[k] kept). Each
 * iod's result goes to rcs[k]: 0 or -errno as it answered (-ENOENT and
 * -ENXIO included), -EIO for a transport failure. For IO_SEEK and
 * IO_BLOCKS, vals[k] gets a successful reply's value (vals may be NULL for
 * other ops). Mirror=2: k is still the file iod; IO_SEEK and IO_BLOCKS
 * ask one replica of it (the other where that fails with -EIO), other ops
 * both, their results combined as for writes (a replica failing with -EIO
 * while its buddy succeeds is recorded stale; then rcs[k] is 0).
 * Cost: one parallel round trip (two when a replica fails).
 * @param[in] qs l->count requests
 * @param[in,out] rcs l->count results; nonzero on entry skips that iod
 * @param[out] vals NULL or l->count values
 * @return 0 (the results are in rcs), -EINVAL bad layout, -ENOMEM
 */
int cli_io_each(struct cli_fs *fs, uint16_t op, uint64_t ino,
		const struct proto_layout *l, const struct proto_ioreq *qs,
		int *rcs, uint64_t *vals);

/**
 * Remove the object of ino on every iod of the layout. A missing object is
 * not an error.
 * @return 0, -EINVAL, -ENOMEM, -EIO, or an iod's -errno
 */
int cli_io_remove(struct cli_fs *fs, uint64_t ino,
		  const struct proto_layout *l);

#define CLI_IO_REMOVE_MAX 32 /* inodes per cli_io_remove_many() */

/**
 * Remove the objects of n inodes (inos[i] with layouts[i]): one
 * IO_REMOVE_MANY per iod involved, all in parallel. ok[i] tells whether
 * every iod of inode i removed its object (0 also for a bad layout).
 * Cost: one parallel round trip, whatever n.
 * @return 0 all removed; -EINVAL n is 0 or above CLI_IO_REMOVE_MAX;
 *	-ENOMEM; -EOPNOTSUPP an older iod; else the first failure (-EIO, an
 *	iod's -errno, -EINVAL a bad layout)
 */
int cli_io_remove_many(struct cli_fs *fs, size_t n, const uint64_t *inos,
		       const struct proto_layout *layouts, uint8_t *ok);

/**
 * Make the object of ino durable on every iod of the layout.
 * @param datasync 1 for fdatasync semantics
 * @return 0, -EINVAL, -ENOMEM, -EIO, or an iod's -errno
 */
int cli_io_fsync(struct cli_fs *fs, uint64_t ino, const struct proto_layout *l,
		 int datasync);

#endif
