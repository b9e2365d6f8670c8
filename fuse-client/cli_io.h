/*
 * cli_io.h - striped I/O against the iods. A byte range of a file is cut
 * into stripe pieces (common/stripe.h); each iod gets ONE sub-request per
 * call carrying its file list (local segments, adjacent ones merged) and its
 * memory list (iovecs into the caller's buffer, interleaved with the other
 * iods' pieces: the gather/scatter case). All sub-requests are submitted
 * before any is waited for, so the iods work in parallel.
 *
 * Any transport failure or timeout of any iod fails the whole call with
 * -EIO (logged once per failure burst per iod). An iod's own -errno (for
 * example -ENOSPC) is passed through. Thread-safe; each thread uses its own
 * preallocated piece and request arrays, so a call allocates nothing.
 */
#ifndef RPFS_CLI_IO_H
#define RPFS_CLI_IO_H

#include <stddef.h>
#include <stdint.h>

#include "cli_core.h"

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

/**
 * Truncate every iod object of the layout to its share of a file of size
 * bytes (stripe_local_size).
 * @return 0, -EINVAL, -ENOMEM, -EIO, or an iod's -errno
 */
int cli_io_truncate(struct cli_fs *fs, uint64_t ino,
		    const struct proto_layout *l, uint64_t size);

/**
 * Remove the object of ino on every iod of the layout. A missing object is
 * not an error.
 * @return 0, -EINVAL, -ENOMEM, -EIO, or an iod's -errno
 */
int cli_io_remove(struct cli_fs *fs, uint64_t ino,
		  const struct proto_layout *l);

/**
 * Make the object of ino durable on every iod of the layout.
 * @param datasync 1 for fdatasync semantics
 * @return 0, -EINVAL, -ENOMEM, -EIO, or an iod's -errno
 */
int cli_io_fsync(struct cli_fs *fs, uint64_t ino, const struct proto_layout *l,
		 int datasync);

#endif
