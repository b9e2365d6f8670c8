/*
 * fe_loop.h - rpfs-fuse's own FUSE worker loop, on registered buffers.
 *
 * Replaces fuse_session_loop_mt: N persistent worker threads, each reading
 * requests from its own cloned /dev/fuse fd into a request buffer and
 * answering READs from a 1 MiB reply buffer. All buffers are carved from one
 * mmap'd pool declared once to the transport (net_client_register_mem), so
 * that on verbs WRITE data and READ replies lie in memory the pin-down cache
 * keeps registered: no registration per operation and no user-space copy.
 *
 * The kernel keeps the requests being processed per cloned fd, so a reply
 * must be written to the fd its request was read from. The loop installs a
 * fuse_custom_io whose read/writev/splice use the calling thread's fd: a
 * worker's own clone, or, in a thread that answers a request handed to it
 * (fe_lock.c's waiters), the fd captured with fe_loop_req_fd() by the
 * worker at dispatch and set with fe_loop_set_reply_fd() in the thread.
 */
#ifndef RPFS_FE_LOOP_H
#define RPFS_FE_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include <fuse_lowlevel.h>

#include "net.h"

#define FE_LOOP_MAX_WORKERS 64
#define FE_LOOP_DEFAULT_WORKERS 8

struct fe_loop;

/**
 * Set up the loop on a mounted session: clone one /dev/fuse fd per worker,
 * map and declare the buffer pool, install the custom io. Threads are
 * started by fe_loop_run().
 * @param out      the loop
 * @param se       the session, after fuse_session_mount()
 * @param net      the transport client the pool is declared to
 * @param nworkers 1..FE_LOOP_MAX_WORKERS
 * @return 0, -EINVAL (nworkers), -ENOMEM, or -errno from open/ioctl/mmap
 *	(message logged)
 */
int fe_loop_new(struct fe_loop **out, struct fuse_session *se,
		struct net_client *net, unsigned nworkers);

/**
 * Run the workers until the file system is unmounted, a signal ended the
 * session (fuse_set_signal_handlers; SIGINT, SIGTERM and SIGHUP must be
 * blocked in every thread, they are unblocked only while this waits) or a
 * worker failed; then stop and join them all.
 * @return 0 (unmount or signal), -errno (a worker could not be started or
 *	reading /dev/fuse failed)
 */
int fe_loop_run(struct fe_loop *lp);

/**
 * Close the cloned fds, undeclare and unmap the pool. Call after every
 * thread that may reply (fe_lock_drain) is gone. NULL is a no-op.
 */
void fe_loop_free(struct fe_loop *lp);

/**
 * The calling worker's registered reply buffer, for a reply of len bytes.
 * @return the buffer, or NULL (not a worker thread, or len > 1 MiB)
 */
void *fe_loop_reply_buf(size_t len);

/**
 * The /dev/fuse fd the calling thread's current request came from: capture
 * it when handing a request to another thread.
 * @return the fd, or -1 (not a loop thread: replies go to the session fd)
 */
int fe_loop_req_fd(void);

/**
 * Make the calling (non-worker) thread's replies go to fd, as captured by
 * fe_loop_req_fd(); -1 restores the session fd.
 * @param fd the fd, or -1
 */
void fe_loop_set_reply_fd(int fd);

/**
 * Run fn(arg) once, in the calling thread, right after its next reply has
 * been written to /dev/fuse (the kernel has then acted on it: e.g. INIT's
 * limits are in force). Replaces a hook set before and not yet run.
 * @param fn  the hook
 * @param arg its argument
 */
void fe_loop_after_reply(void (*fn)(void *), void *arg);

/**
 * Data path counters: payload bytes the kernel copied through /dev/fuse
 * (WRITE data read + READ data replied) and the largest READ or WRITE
 * payload requested. NULL lp gives zeros.
 * @param lp       the loop, or NULL
 * @param copy     out: fuse_copy_bytes
 * @param max_req  out: fuse_max_req_bytes
 */
void fe_loop_counts(const struct fe_loop *lp, uint64_t *copy,
		    uint64_t *max_req);

/* FUSE opcodes counted one by one (enum fuse_opcode below CUSE_INIT);
 * larger ones are counted together as "OTHER". */
#define FE_LOOP_FUSE_OPS 64

/**
 * FUSE requests the kernel sent this process, by opcode, since it started
 * (every worker loop of the process counts into one table). Any thread;
 * cost: one relaxed atomic load.
 * @param op   an opcode, 0..FE_LOOP_FUSE_OPS (FE_LOOP_FUSE_OPS: "OTHER")
 * @param name out: the opcode's name without FUSE_, or NULL for a number
 *             the kernel leaves unused or op out of range (then 0 returned)
 * @return the count
 */
uint64_t fe_loop_fuse_count(unsigned op, const char **name);

#endif
