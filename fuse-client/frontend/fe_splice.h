/*
 * fe_splice.h - READ replies by splice on TCP: the iods' data goes from
 * the sockets into pipes and from there to /dev/fuse, never through a
 * user-space buffer (see fuse-client/frontend/README.md "Zero-copy reads
 * on TCP").
 */
#ifndef RPFS_FE_SPLICE_H
#define RPFS_FE_SPLICE_H

#include <fuse_lowlevel.h>
#include <stddef.h>
#include <stdint.h>

#include "cli_core.h"

/**
 * At INIT: decide whether READs are answered by splice (the transport can
 * put read data into pipes, the kernel takes spliced replies, and a pipe
 * can grow to 2 MiB, which libfuse needs to splice a 1 MiB reply), and if
 * so ask for FUSE_CAP_SPLICE_WRITE (not SPLICE_MOVE, fe_splice.c). Call once,
 * after any code that clears the splice capabilities.
 * @param conn the connection being negotiated
 * @return 1 splice on, 0 off
 */
int fe_splice_init(struct cli_fs *fs, struct fuse_conn_info *conn);

/**
 * Answer a READ of [off, off + size) (already clipped to the file size)
 * by splice: each iod's share into a per-thread pipe, then fuse_reply_data
 * on a buffer vector naming the pipes in file order. buf (size bytes) is
 * not written; it is the memory the transport would have used.
 * @return 0 answered (the reply is sent, or failed in libfuse, which then
 *	owns the error), -EAGAIN not taken (splice off, small read, no pipes,
 *	too many pieces): the caller reads into buf as usual; another -errno
 *	the read failed and the caller replies with it
 */
int fe_splice_read(fuse_req_t req, struct cli_fs *fs, uint64_t ino,
		   const struct proto_layout *l, uint64_t off, size_t size,
		   void *buf);

#endif
