/*
 * iod_ops.h - the iod request handler: decodes IO_* requests and runs them
 * against the object store, moving bulk data through pooled buffers with
 * double-buffered pipelining (pull/push of unit i+1 overlaps the disk I/O
 * of unit i). IO_FENCE and the fencing of mirrored reads (PROTO_IO_MIRROR:
 * -ESTALE unless the iod is leased and the inode not fenced) go through
 * iod_fence.h. IO_FSYNC, IO_FALLOCATE, IO_CSUM and IO_LIST run on a pool
 * of IOD_WORK_THREADS workers (iod_work.h) and reply from the loop.
 *
 * Loop thread only (the workers are internal).
 */
#ifndef RPFS_IOD_OPS_H
#define RPFS_IOD_OPS_H

#include "iod_buf.h"
#include "iod_store.h"
#include "net.h"

struct ev_loop;
struct iod_ops;

/**
 * Create the handler state and start its IOD_WORK_THREADS worker threads.
 * @param[in] loop the loop the server runs in (deferred resumes, worker
 *	completions)
 * @param[in] st the object store (borrowed)
 * @param[in] pool the buffer pool (borrowed)
 * @return 0, -ENOMEM, -errno from pthread_create
 */
int iod_ops_new(struct iod_ops **out, struct ev_loop *loop,
		struct iod_store *st, struct iod_buf_pool *pool);

/**
 * iod_ops_new with nthreads workers for the slow disk calls.
 * @param[in] nthreads 1..IOD_WORK_MAX_THREADS
 * @return 0, -EINVAL nthreads out of range, -ENOMEM, -errno from
 *	pthread_create
 */
int iod_ops_new_threads(struct iod_ops **out, struct ev_loop *loop,
			struct iod_store *st, struct iod_buf_pool *pool,
			unsigned nthreads);

/**
 * Free the handler. Call after net_server_free(): requests still in flight
 * are abandoned (their buffers go back to the pool, nothing is replied).
 * Waits for the disk calls the workers are in (a held fsync delays it).
 */
void iod_ops_free(struct iod_ops *ops);

/**
 * Test hook (off unless called; rpfs-iod calls it only when
 * $RPFS_IOD_TEST_FSYNC_DELAY_MS is set): hold every IO_FSYNC of object ino
 * (of every object when ino is 0) delay_ms before its fsync runs, as a
 * slow disk would. Call before serving.
 * @param[in] delay_ms 0 (off) .. IOD_OPS_MAX_TEST_DELAY_MS
 * @return 0, -EINVAL delay_ms out of range
 */
int iod_ops_test_fsync_delay(struct iod_ops *ops, unsigned delay_ms,
			     uint64_t ino);

#define IOD_OPS_MAX_TEST_DELAY_MS 60000

/** The net_req_fn to pass to net_server_new() with arg = the iod_ops. */
void iod_ops_handle(struct net_sreq *r, void *arg);

#endif
